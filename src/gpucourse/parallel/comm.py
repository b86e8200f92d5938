"""Count the collectives a rank runs: which ones, how many bytes, in the forward or the backward pass.

``with CommCounter() as comm:`` watches every torch operation in a worker of :func:`gpucourse.parallel.launch`
(through a ``TorchDispatchMode``, like the course's memory instruments), so it sees ``torch.distributed``'s
collectives however they are called (``dist.all_reduce``, ``reduce_scatter_tensor``, ``all_gather_into_tensor``,
their ``async_op`` forms) and the functional collectives that DTensor, tensor parallelism and FSDP2 use. Each call
is recorded with its payload in bytes (the nccl-tests convention: the whole buffer, e.g. the full tensor an
all-gather produces), and :meth:`CommCounter.ring_bytes_per_rank` turns payloads into what a ring algorithm sends
per rank. Taught in 14_data_parallelism, 15_sharding and 16_model_parallelism; the graders of their exercises use it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpucourse._validate import positive_int
from gpucourse.memory import OpObserver

KINDS = ("all_reduce", "reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "send", "recv",
         "gather", "scatter", "barrier")
"""The collective kinds a :class:`CommCounter` tells apart."""

_OP_KINDS = {
    "allreduce_": "all_reduce", "allreduce_coalesced_": "all_reduce", "all_reduce": "all_reduce",
    "all_reduce_coalesced": "all_reduce",
    "_reduce_scatter_base_": "reduce_scatter", "reduce_scatter_": "reduce_scatter",
    "reduce_scatter_tensor": "reduce_scatter", "reduce_scatter_tensor_coalesced": "reduce_scatter",
    "_allgather_base_": "all_gather", "allgather_": "all_gather", "allgather_into_tensor_coalesced_": "all_gather",
    "all_gather_into_tensor": "all_gather", "all_gather_into_tensor_coalesced": "all_gather",
    "broadcast_": "broadcast", "broadcast": "broadcast", "reduce_": "reduce",
    "alltoall_base_": "all_to_all", "alltoall_": "all_to_all", "all_to_all_single": "all_to_all",
    "send": "send", "recv_": "recv", "recv_any_source_": "recv", "gather_": "gather", "scatter_": "scatter",
    "barrier": "barrier",
}
_NAMESPACES = ("c10d", "_c10d_functional", "c10d_functional")

# Fraction of the payload one rank sends in a ring algorithm over N ranks.
_RING_SHARE: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2 * (n - 1) / n,
    "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n,
}


@dataclass(frozen=True)
class Collective:
    """One collective call seen on this rank: its kind, payload bytes, the op's name, whether backward ran it, and
    the phase the caller named (see :meth:`CommCounter.phase`; '' if none)."""

    kind: str
    bytes: int
    op: str
    in_backward: bool
    phase: str = ""


def _kind(func: object) -> str | None:
    """The collective kind of a dispatched operation, or None if it is not a collective."""
    namespace = getattr(func, "namespace", None)
    if namespace not in _NAMESPACES:
        return None
    packet = getattr(func, "_opname", None) or str(func).split(".")[1]
    return _OP_KINDS.get(packet)


def _tensors(value: object) -> list:
    """The tensors in an argument (a tensor or a list of tensors)."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [item for entry in value for item in _tensors(entry)]
    return []


def _payload_bytes(func: object, kind: str, args: tuple) -> int:
    """The call's whole buffer in bytes: the largest tensor argument (a functional all-gather: its input x group)."""
    sizes = [tensor.numel() * tensor.element_size() for arg in args for tensor in _tensors(arg)]
    if not sizes:
        return 0
    if kind == "all_gather" and getattr(func, "namespace", "") != "c10d":  # functional: (shard, group_size, name)
        group_size = next((arg for arg in args[1:] if isinstance(arg, int)), 1)
        return sum(sizes) * group_size
    return max(sizes)


class CommCounter(OpObserver):
    """Inside ``with CommCounter() as comm:``, record every collective this process runs (see the module's doc)."""

    def __init__(self) -> None:
        self.calls: list[Collective] = []
        self._phase = ""

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Label the collectives run inside ``with comm.phase('forward'):`` (e.g. 'forward', 'backward', 'step')."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name must be a non-empty str such as 'forward', got {name!r}")
        previous, self._phase = self._phase, name
        try:
            yield
        finally:
            self._phase = previous

    def _observe(self, func: Callable, args: tuple, kwargs: dict) -> object:
        """Run the operation; if it is a collective, record its kind and payload."""
        kind = _kind(func)
        if kind is not None:
            import torch

            in_backward = torch._C._current_autograd_node() is not None
            self.calls.append(Collective(kind, _payload_bytes(func, kind, args), str(func), in_backward, self._phase))
        return func(*args, **kwargs)

    def count(self, kind: str | None = None) -> int:
        """How many collectives of ``kind`` (all kinds if None) ran."""
        return len(self._of(kind))

    def bytes(self, kind: str | None = None) -> int:
        """Total payload bytes of the collectives of ``kind`` (all kinds if None)."""
        return sum(call.bytes for call in self._of(kind))

    def ring_bytes_per_rank(self, world_size: int) -> float:
        """Bytes one rank sends for these calls under ring algorithms (all-reduce 2(N-1)/N, the others (N-1)/N)."""
        world_size = positive_int("world_size", world_size)
        return sum(call.bytes * _RING_SHARE.get(call.kind, lambda n: 1.0)(world_size) for call in self.calls)

    def summary(self, phase: str | None = None) -> dict[str, dict[str, int]]:
        """{kind: {'calls': n, 'bytes': b, 'in_backward': m}} for every kind seen (in ``phase`` only if given)."""
        table: dict[str, dict[str, int]] = {}
        for call in self.calls:
            if phase is not None and call.phase != phase:
                continue
            row = table.setdefault(call.kind, {"calls": 0, "bytes": 0, "in_backward": 0})
            row["calls"] += 1
            row["bytes"] += call.bytes
            row["in_backward"] += call.in_backward
        return table

    def _of(self, kind: str | None) -> list[Collective]:
        """The recorded calls of ``kind`` (all if None); ValueError naming an unknown kind."""
        if kind is None:
            return list(self.calls)
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {list(KINDS)}, got {kind!r}")
        return [call for call in self.calls if call.kind == kind]


def comm_counter_worker(rank: int, world_size: int) -> dict[str, object]:
    """A demonstration worker: an all-reduce, then the same sum as a reduce-scatter and an all-gather, counted."""
    import torch

    from gpucourse.parallel.workers import process_group, rank_device

    device = rank_device(rank)
    with process_group(rank, world_size) as dist:
        data = torch.arange(4.0 * world_size, device=device) + rank
        with CommCounter() as comm:
            summed = data.clone()
            dist.all_reduce(summed)
            shard = torch.empty(4, device=device)
            dist.reduce_scatter_tensor(shard, data)
            gathered = torch.empty_like(data)
            dist.all_gather_into_tensor(gathered, shard)
        return {"same_result": bool(torch.equal(summed, gathered)), "summary": comm.summary(),
                "ring_bytes_per_rank": comm.ring_bytes_per_rank(world_size)}
