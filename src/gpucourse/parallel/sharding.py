"""Sharded training state for real: a ZeRO optimizer step over a process group, its grader, and FSDP2 observed.

Taught in 15_sharding. :func:`zero_step` is the model answer of the lesson's ZeRO exercise (a thin wrapper, so that
``checks.off_limits`` can block it while the grader, which never calls it, keeps working); :func:`zero_check`
runs a learner's step on two worker processes (one launch for all its cases) and compares it with data-parallel
training by ``torch.optim.Adam``; :func:`fsdp_worker` shards the same kind of model with ``fully_shard`` and counts
its collectives by phase. PyTorch is imported only by the functions that need it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, positive_int, positive_number
from gpucourse.memory import PeakMemory
from gpucourse.parallel.comm import CommCounter
from gpucourse.parallel.workers import launch, process_group, rank_device

ZERO_ATOL = 1e-5
"""How far (absolute) a parameter may be from data-parallel Adam's after the steps of one case."""

FLOAT_BYTES = 4
"""Bytes of one float32 number: parameters, gradients and Adam's moments here are float32."""


@dataclass(frozen=True)
class ZeroCase:
    """One graded case: an MLP (layer sizes), its seed, the rows per rank, the steps and Adam's settings."""

    sizes: tuple[int, ...] = (12, 20, 4)
    seed: int = 0
    rows: int = 8
    steps: int = 3
    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.999)
    eps: float = 1e-8

    def __post_init__(self) -> None:
        """Reject sizes, rows, steps or Adam settings out of range."""
        if not isinstance(self.sizes, tuple) or len(self.sizes) < 2:
            raise TypeError(f"sizes must be a tuple of at least 2 layer widths, got {self.sizes!r}")
        for width in self.sizes:
            positive_int("sizes", width)
        non_negative_int("seed", self.seed)
        positive_int("rows", self.rows)
        positive_int("steps", self.steps)
        positive_number("lr", self.lr)
        positive_number("eps", self.eps)
        if len(self.betas) != 2 or not all(0 <= beta < 1 for beta in self.betas):
            raise ValueError(f"betas must be two numbers in [0, 1), got {self.betas!r}")

    @property
    def parameters(self) -> int:
        """Number of parameters of the MLP (weights and biases)."""
        return sum(a * b + b for a, b in zip(self.sizes, self.sizes[1:]))

    def label(self) -> str:
        """A short description for check messages."""
        sizes = " -> ".join(map(str, self.sizes))
        return f"MLP {sizes} ({self.parameters} parameters, {self.steps} steps, lr {self.lr:g}, eps {self.eps:g})"


def sized_mlp(sizes: Sequence[int], seed: int = 0):
    """A small MLP, Linear layers with Tanh between them, its weights drawn from ``seed``."""
    import torch

    sizes = [positive_int("sizes", width) for width in sizes]
    if len(sizes) < 2:
        raise ValueError(f"sizes must name at least 2 layer widths, got {sizes}")
    torch.manual_seed(non_negative_int("seed", seed))
    layers: list = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers += [torch.nn.Linear(a, b)] + ([torch.nn.Tanh()] if i < len(sizes) - 2 else [])
    return torch.nn.Sequential(*layers)


def state_bytes(state: object) -> int:
    """Bytes held by an optimizer state: every tensor or array once, 8 bytes per plain number, containers walked."""
    seen: set = set()

    def walk(value: object) -> int:
        """Bytes of one value, not counting a tensor already seen."""
        if hasattr(value, "untyped_storage") and hasattr(value, "element_size"):  # a torch tensor (or a DTensor)
            local = value.to_local() if hasattr(value, "to_local") else value
            key = (local.untyped_storage().data_ptr(), local.storage_offset(), local.numel())
            if key in seen:
                return 0
            seen.add(key)
            return local.numel() * local.element_size()
        if hasattr(value, "nbytes") and hasattr(value, "dtype"):  # a numpy array or scalar
            return int(value.nbytes)
        if isinstance(value, (bool, int, float, complex)):
            return 8
        if isinstance(value, dict):
            return sum(walk(item) for item in value.values())
        if isinstance(value, (list, tuple, set, frozenset)):
            return sum(walk(item) for item in value)
        return 0

    return walk(state)


def _zero_step(params: list, state: dict, dist: object, lr: float, betas: tuple[float, float],
               eps: float) -> None:
    """ZeRO-2's step: reduce-scatter the mean gradient, Adam on this rank's shard, all-gather the parameters."""
    import torch

    world, rank = dist.get_world_size(), dist.get_rank()
    flat_grad = torch.cat([p.grad.reshape(-1) for p in params])
    count = flat_grad.numel()
    shard = -(-count // world)  # ceil: the last shard is padded with zeros
    flat_grad = torch.nn.functional.pad(flat_grad, (0, shard * world - count))
    grad = torch.empty(shard, dtype=flat_grad.dtype, device=flat_grad.device)
    dist.reduce_scatter_tensor(grad, flat_grad)  # summed over the ranks
    grad /= world  # the data-parallel mean
    flat = torch.nn.functional.pad(torch.cat([p.detach().reshape(-1) for p in params]), (0, shard * world - count))
    mine = flat[rank * shard:(rank + 1) * shard].clone()
    if not state:
        state.update(step=0, m=torch.zeros_like(mine), v=torch.zeros_like(mine))
    state["step"] += 1
    beta1, beta2 = betas
    state["m"].mul_(beta1).add_(grad, alpha=1 - beta1)
    state["v"].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
    denominator = (state["v"].sqrt() / math.sqrt(1 - beta2 ** state["step"])).add_(eps)
    mine.addcdiv_(state["m"], denominator, value=-lr / (1 - beta1 ** state["step"]))
    dist.all_gather_into_tensor(flat, mine)
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


def zero_step(params: list, state: dict, dist: object, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
              eps: float = 1e-8) -> None:
    """One ZeRO-2 Adam step in a worker: the params' .grad are this rank's; ``state`` keeps its shard of m and v."""
    _zero_step(params, state, dist, lr, betas, eps)


def zero_grader_worker(rank: int, world_size: int, step_fn: Callable, cases: Sequence[ZeroCase]) -> list[dict]:
    """Run ``step_fn`` for each case beside one-process Adam on the whole batch; report differences, bytes, traffic."""
    import copy

    import torch

    device = rank_device(rank)
    reports = []
    with process_group(rank, world_size) as dist:
        for case in cases:
            model = sized_mlp(case.sizes, case.seed).to(device)
            reference = copy.deepcopy(model)
            adam = torch.optim.Adam(reference.parameters(), lr=case.lr, betas=case.betas, eps=case.eps)
            data = torch.Generator().manual_seed(1000 + case.seed)
            params, state, steps = list(model.parameters()), {}, []
            kept = PeakMemory()  # every storage the steps create, alive until it is freed: state kept anywhere
            for _ in range(case.steps):
                x = torch.randn(case.rows * world_size, case.sizes[0], generator=data).to(device)
                y = torch.randn(case.rows * world_size, case.sizes[-1], generator=data).to(device)
                adam.zero_grad()
                torch.nn.functional.mse_loss(reference(x), y).backward()
                adam.step()
                for p in params:
                    p.grad = None
                mine = slice(rank * case.rows, (rank + 1) * case.rows)
                torch.nn.functional.mse_loss(model(x[mine]), y[mine]).backward()
                with CommCounter() as comm, kept:
                    step_fn(params, state, dist, lr=case.lr, betas=case.betas, eps=case.eps)
                steps.append({kind: comm.bytes(kind) for kind in {call.kind for call in comm.calls}})
            with torch.no_grad():
                difference = max(float((p - q).abs().max()) for p, q in zip(model.parameters(),
                                                                            reference.parameters()))
            kept_bytes = max(kept.live_bytes(), state_bytes(state))  # kept in `state`, a global or a closure alike
            reports.append({"difference": difference, "state_bytes": kept_bytes, "traffic": steps,
                            "tensors": len(params)})
    return reports


def _traffic_problem(traffic: list[dict], count: int, slack: int) -> str:
    """'' if every step ran one reduce-scatter of the gradients and one all-gather of the parameters, else why not."""
    for step, sent in enumerate(traffic, 1):
        kinds = sorted(sent)
        if kinds != ["all_gather", "reduce_scatter"]:
            return f"step {step} ran {kinds or 'no collective'}"
        for kind in kinds:
            if not FLOAT_BYTES * count <= sent[kind] <= FLOAT_BYTES * count + slack:
                return f"step {step}'s {kind} moved a payload of {sent[kind]:,} bytes"
    return ""


def _check_case(case: ZeroCase, rank: int, report: dict, world_size: int, quiet: bool) -> None:
    """The checks of one case on one rank: parameters, optimizer-state bytes, collectives of every step."""
    from gpucourse.checks import check

    where = f"{case.label()}, rank {rank}"
    count = case.parameters
    slack = FLOAT_BYTES * world_size * report["tensors"]  # padding, even if each tensor is padded on its own
    sharded = 2 * FLOAT_BYTES * -(-count // world_size)
    check(f"{where}: parameters equal data-parallel Adam's within {ZERO_ATOL:g} (largest difference yours: "
          f"{report['difference']:.2g})", report["difference"] <= ZERO_ATOL, True,
          hint="average the gradients over the ranks (reduce-scatter sums them), update your shard with Adam's "
               "bias-corrected step using lr, betas and eps, and all-gather every rank's shard into the parameters",
          quiet=quiet)
    check(f"{where}: bytes your steps keep alive between steps, in `state` or anywhere else (yours: "
          f"{report['state_bytes']:,}; unsharded Adam: {2 * FLOAT_BYTES * count:,}; 1/{world_size} of it: about "
          f"{sharded:,})", report["state_bytes"] <= sharded + 2 * slack + 64, True,
          hint="keep m and v only for this rank's shard of the flat parameters, not for all of them, and keep no "
               "other full-size tensor (a copy of the gradients or parameters) between steps", quiet=quiet)
    problem = _traffic_problem(report["traffic"], count, slack)
    check(f"{where}: every step one reduce-scatter of the gradients and one all-gather of the parameters, "
          f"{FLOAT_BYTES * count:,} bytes each plus padding{': ' + problem if problem else ''}", problem, "",
          hint="reduce_scatter_tensor for the flat, padded gradients; all_gather_into_tensor for the parameters; no "
               "all_reduce (it gives every rank the whole gradient, twice the traffic of a reduce-scatter)",
          quiet=quiet)


def _launch_answer(step_fn: Callable, world_size: int, cases: list, timeout_s: float) -> list:
    """Launch the grader's worker; a learner's unwritten function raises NotImplementedError here (the launcher's
    doing), as in one process."""
    return launch(zero_grader_worker, world_size, (step_fn, cases), timeout_s=timeout_s)


def zero_check(step_fn: Callable, cases: Sequence[ZeroCase], *, shown: int = 1, world_size: int = 2,
               timeout_s: float = 90.0) -> None:
    """Grade a ZeRO step: one launch of ``world_size`` ranks runs every case; the first ``shown`` cases print ticks.

    Each rank's parameters after the case's steps must equal one-process ``torch.optim.Adam`` on the whole batch
    (the data-parallel mean gradient) within :data:`ZERO_ATOL`; its optimizer state, counted in bytes, must be
    about 1/N of Adam's; every step must run one reduce-scatter and one all-gather of the flat parameters' size.
    """
    if not callable(step_fn):
        raise TypeError(f"step_fn must be a function, got {type(step_fn).__name__}")
    cases = list(cases)
    if not cases or not all(isinstance(case, ZeroCase) for case in cases):
        raise TypeError("cases must be a non-empty list of ZeroCase")
    shown = non_negative_int("shown", shown)
    world_size = positive_int("world_size", world_size)
    results = _launch_answer(step_fn, world_size, cases, timeout_s)
    for index, case in enumerate(cases):
        for rank, reports in enumerate(results):
            _check_case(case, rank, reports[index], world_size, quiet=index >= shown)


def run_zero_step(step_fn: Callable, case: ZeroCase | None = None, *, world_size: int = 2,
                  timeout_s: float = 90.0) -> list[dict]:
    """Run a ZeRO step on ``world_size`` ranks for one case: each rank's difference, state bytes and traffic."""
    if not callable(step_fn):
        raise TypeError(f"step_fn must be a function, got {type(step_fn).__name__}")
    case = case or ZeroCase()
    if not isinstance(case, ZeroCase):
        raise TypeError(f"case must be a ZeroCase, got {type(case).__name__}")
    world_size = positive_int("world_size", world_size)
    return [reports[0] for reports in _launch_answer(step_fn, world_size, [case], timeout_s)]


def _local_bytes(tensors: object) -> int:
    """Bytes this rank stores for some tensors: a sharded (DTensor) parameter counts its local shard only."""
    total = 0
    for tensor in tensors:
        local = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        total += local.numel() * local.element_size()
    return total


def fsdp_worker(rank: int, world_size: int, sizes: Sequence[int] = (64, 256, 256, 10), rows: int = 16,
                seed: int = 0) -> list[dict]:
    """Shard an MLP with FSDP2's ``fully_shard`` twice (resharding after forward or not); bytes and traffic by phase."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    device = rank_device(rank)
    rows_out = []
    with process_group(rank, world_size):
        mesh = init_device_mesh(device.type, (world_size,))
        for reshard in (True, False):
            model = sized_mlp(sizes, seed).to(device)
            before = _local_bytes(model.parameters())
            for layer in model:
                if isinstance(layer, torch.nn.Linear):
                    fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
            fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
            adam = torch.optim.Adam(model.parameters())
            x = torch.randn(rows, sizes[0], generator=torch.Generator().manual_seed(seed + rank)).to(device)
            with CommCounter() as comm:
                with comm.phase("forward"):
                    loss = model(x).square().mean()
                with comm.phase("backward"):
                    loss.backward()
                with comm.phase("optimizer"):
                    adam.step()
            rows_out.append({"reshard_after_forward": reshard, "bytes_before": before,
                             "bytes_after": _local_bytes(model.parameters()),
                             "adam_bytes": state_bytes(list(adam.state.values())),
                             "phases": {phase: comm.summary(phase) for phase in ("forward", "backward", "optimizer")}})
    return rows_out


def run_fsdp(sizes: Sequence[int] = (64, 256, 256, 10), *, world_size: int = 2, timeout_s: float = 90.0) -> list[dict]:
    """Run :func:`fsdp_worker` on ``world_size`` ranks (one launch); rank 0's two reports."""
    sizes = tuple(positive_int("sizes", width) for width in sizes)
    world_size = positive_int("world_size", world_size)
    return launch(fsdp_worker, world_size, (sizes,), timeout_s=timeout_s)[0]
