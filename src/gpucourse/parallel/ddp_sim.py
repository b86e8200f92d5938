"""DDP's gradient synchronisation simulated in one process: replicas in threads, all-reduces on a logged network.

Each rank's replica is wrapped in :class:`SimulatedDDP`, which behaves as ``DistributedDataParallel`` does where it
matters for gradient accumulation: it decides at the *forward* pass whether the coming backward pass synchronises
(``no_sync()`` switches that off), all-reduces the gradients in buckets of at most ``bucket_cap_mb`` once the backward
pass has produced all of them, and averages them over the ranks. The all-reduce sends every bucket to every other rank
on the simulated network of :mod:`gpucourse.parallel.collectives`, so every message is counted. Ranks add the buckets
in rank order: every replica gets bit-for-bit the same average. Taught in 14_data_parallelism.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from gpucourse._validate import positive_int, positive_number
from gpucourse.parallel.collectives import NetworkRun, run_network

DEFAULT_BUCKET_CAP_MB = 25.0
"""PyTorch DDP's default ``bucket_cap_mb``: gradients are all-reduced in buckets of at most 25 MB."""


class SimulatedDDP:
    """One rank's replica wrapped as DDP wraps it: call it, ``no_sync()``, ``.module`` (14_data_parallelism)."""

    def __init__(self, module, rank: int, world_size: int, send: Callable, recv: Callable,
                 bucket_cap_mb: float = DEFAULT_BUCKET_CAP_MB) -> None:
        """Wrap ``module`` for rank ``rank`` of ``world_size``; ``send(rank, array)``/``recv(rank)`` reach the others."""
        self.module, self.rank, self.world_size = module, rank, world_size
        self._send, self._recv = send, recv
        self.require_backward_grad_sync = True
        self.syncs = 0  # all-reduces this rank has taken part in
        self._params = [p for p in module.parameters() if p.requires_grad]
        self._buckets = _buckets(self._params, bucket_cap_mb * 1e6)
        self._pending: set[int] = set()
        for param in self._params:
            param.register_post_accumulate_grad_hook(self._on_gradient)

    def __call__(self, *args, **kwargs):
        """The module's forward pass; outside ``no_sync()`` it arms an all-reduce at the end of the backward pass."""
        import torch

        out = self.module(*args, **kwargs)
        if torch.is_grad_enabled() and self.require_backward_grad_sync:
            self._pending = {id(p) for p in self._params}
        return out

    def parameters(self):
        """The wrapped module's parameters (what an optimizer takes)."""
        return self.module.parameters()

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Forward passes run in this block arm no all-reduce: their gradients only accumulate in ``.grad``."""
        before = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = before

    def _on_gradient(self, param) -> None:
        """After a parameter's gradient is accumulated: all-reduce once the armed backward pass has produced all."""
        if id(param) in self._pending:
            self._pending.discard(id(param))
            if not self._pending:
                self._all_reduce()

    def _all_reduce(self) -> None:
        """Average every bucket of gradients over the ranks: sent to every other rank, summed in rank order."""
        import numpy as np
        import torch

        self.syncs += 1
        with torch.no_grad():
            for bucket in self._buckets:
                mine = torch.cat([p.grad.reshape(-1) for p in bucket]).numpy().copy()
                for peer in range(self.world_size):
                    if peer != self.rank:
                        self._send(peer, mine)
                parts = [mine if peer == self.rank else self._recv(peer) for peer in range(self.world_size)]
                average = torch.from_numpy(np.sum(parts, axis=0) / self.world_size)
                offset = 0
                for p in bucket:
                    p.grad.copy_(average[offset:offset + p.numel()].reshape(p.shape))
                    offset += p.numel()

    def __repr__(self) -> str:
        return f"SimulatedDDP(rank={self.rank}, world_size={self.world_size}, {type(self.module).__name__})"


def _buckets(params: list, cap_bytes: float) -> list[list]:
    """Parameters in reverse order (the order backward produces them), cut into buckets of at most ``cap_bytes``."""
    buckets: list[list] = []
    size = 0.0
    for param in reversed(params):
        nbytes = param.numel() * param.element_size()
        if not buckets or size + nbytes > cap_bytes:
            buckets.append([])
            size = 0.0
        buckets[-1].append(param)
        size += nbytes
    return buckets


@dataclass(frozen=True)
class DataParallelRun:
    """Every rank's final weights (name -> numpy array), its all-reduce count, and every message on the network."""

    weights: tuple[dict, ...]
    syncs: tuple[int, ...]
    network: NetworkRun

    @property
    def replicas_identical(self) -> bool:
        """True if every rank ends with bit-for-bit the same weights as rank 0."""
        import numpy as np

        return all(np.array_equal(w[k], self.weights[0][k]) for w in self.weights for k in self.weights[0])


def _check_batches(batches: object) -> tuple[int, int]:
    """Return (steps, world size) of ``batches[step][rank]`` = list of (x, y) micro-batches, else raise."""
    import torch

    if isinstance(batches, (str, bytes)) or not isinstance(batches, Sequence) or not batches:
        raise TypeError(f"batches must be a non-empty list over steps of lists over ranks, "
                        f"got {type(batches).__name__}")
    world = len(batches[0]) if isinstance(batches[0], Sequence) else 0
    for step in batches:
        if not isinstance(step, Sequence) or len(step) != world or world < 1:
            raise ValueError(f"batches must hold the same number of ranks (>= 1) in every step, got {world}")
        for micro_batches in step:
            if not isinstance(micro_batches, Sequence) or not micro_batches or not all(
                    isinstance(mb, Sequence) and len(mb) == 2 and all(isinstance(t, torch.Tensor) for t in mb)
                    for mb in micro_batches):
                raise TypeError("batches[step][rank] must be a non-empty list of (x, y) pairs of torch tensors")
    return len(batches), world


def run_data_parallel(step: Callable, model, batches: Sequence, *, lr: float = 0.1, loss_fn: Callable | None = None,
                      bucket_cap_mb: float = DEFAULT_BUCKET_CAP_MB, timeout_s: float = 20.0) -> DataParallelRun:
    """Train copies of ``model`` with simulated DDP: ``step(ddp, optimizer, batches[s][rank], loss_fn)`` on every rank.

    Taught in 14_data_parallelism (gradient accumulation with ``no_sync``).

    ``batches[s][rank]`` is rank ``rank``'s list of (x, y) micro-batches for step ``s``; every rank runs in its own
    thread with its own replica (a deep copy of ``model``), a ``SimulatedDDP`` around it and plain SGD (``lr``).
    ``loss_fn(output, target)`` defaults to the mean squared error.
    """
    import torch
    from torch import nn

    if not callable(step):
        raise TypeError(f"step must be a function(ddp, optimizer, micro_batches, loss_fn), got {type(step).__name__}")
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    steps, world = _check_batches(batches)
    lr, bucket_cap_mb = positive_number("lr", lr), positive_number("bucket_cap_mb", bucket_cap_mb)
    if loss_fn is None:
        loss_fn = torch.nn.functional.mse_loss
    elif not callable(loss_fn):
        raise TypeError(f"loss_fn must be a function(output, target) or None, got {type(loss_fn).__name__}")
    wrapped: dict[int, SimulatedDDP] = {}

    def program(rank: int) -> Callable:
        """Rank ``rank``: its replica, its optimizer, the user's step once per step of ``batches``."""
        def run(send: Callable, recv: Callable) -> dict:
            replica = copy.deepcopy(model)
            ddp = wrapped[rank] = SimulatedDDP(replica, rank, world, send, recv, bucket_cap_mb)
            optimizer = torch.optim.SGD(replica.parameters(), lr=lr)
            for index in range(steps):
                step(ddp, optimizer, list(batches[index][rank]), loss_fn)
            return {name: t.detach().numpy().copy() for name, t in replica.state_dict().items()}
        return run

    network = run_network({rank: program(rank) for rank in range(world)}, timeout_s=timeout_s)
    return DataParallelRun(tuple(network.results[r] for r in range(world)),
                           tuple(wrapped[r].syncs for r in range(world)), network)


def accumulation_step(ddp, optimizer, micro_batches: Sequence, loss_fn: Callable, *, no_sync: bool = True) -> None:
    """One step of gradient accumulation under DDP: k micro-batches, one all-reduce (14_data_parallelism)."""
    k = positive_int("micro_batches (its length)", len(micro_batches))
    optimizer.zero_grad()
    for index, (x, y) in enumerate(micro_batches):
        last = index == k - 1
        with contextlib.nullcontext() if last or not no_sync else ddp.no_sync():
            loss = loss_fn(ddp(x), y) / k  # the mean over all k micro-batches, not the sum
            loss.backward()
    optimizer.step()
