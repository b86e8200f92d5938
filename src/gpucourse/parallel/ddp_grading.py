"""Run a learner's gradient-accumulation step inside real DistributedDataParallel workers, observed by the grader.

Taught and graded in 14_data_parallelism (Exercise 4). :func:`run_accumulation` ships the learner's
``step(ddp, optimizer, micro_batches, loss_fn)`` by value to ``world_size`` gloo (or NCCL) processes with
:func:`~gpucourse.parallel.workers.launch`, runs every case in that one launch, and returns what the grader needs:
every rank's final weights, the weights of one process trained by plain SGD on the whole batches (computed in rank 0
by a private reference), and the all-reduces of every optimizer step as :class:`~gpucourse.parallel.comm.CommCounter`
counted them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, positive_int, positive_number
from gpucourse.parallel.comm import CommCounter
from gpucourse.parallel.workers import DEFAULT_TIMEOUT_S, launch, process_group, rank_device


@dataclass(frozen=True)
class AccumulationCase:
    """One graded case: model sizes, micro-batches per rank (k) of ``rows`` rows, steps, learning rate, bucket cap."""

    seed: int = 0
    features: int = 4
    hidden: int = 8
    outputs: int = 2
    rows: int = 4
    k: int = 2
    steps: int = 1
    lr: float = 0.1
    bucket_cap_mb: float = 25.0

    def __post_init__(self) -> None:
        """Reject sizes, counts or rates that are not positive numbers."""
        non_negative_int("seed", self.seed)
        for name in ("features", "hidden", "outputs", "rows", "k", "steps"):
            positive_int(name, getattr(self, name))
        positive_number("lr", self.lr)
        positive_number("bucket_cap_mb", self.bucket_cap_mb)


@dataclass(frozen=True)
class AccumulationRun:
    """One case's outcome: every rank's weights, the whole-batch reference, each rank's all-reduces per step."""

    case: AccumulationCase
    world_size: int
    weights: tuple[dict, ...]
    expected: dict
    allreduce_calls: tuple[tuple[int, ...], ...]
    allreduce_bytes: tuple[tuple[int, ...], ...]
    gradient_bytes: int

    @property
    def replicas_identical(self) -> bool:
        """True if every rank ends with bit-for-bit the weights of rank 0."""
        import numpy as np

        first = self.weights[0]
        return all(set(w) == set(first) and all(np.array_equal(w[k], first[k]) for k in first) for w in self.weights)


def _case_model(case: AccumulationCase):
    """The case's model: Linear, tanh, Linear, seeded by the case."""
    import torch

    torch.manual_seed(case.seed)
    return torch.nn.Sequential(torch.nn.Linear(case.features, case.hidden), torch.nn.Tanh(),
                               torch.nn.Linear(case.hidden, case.outputs))


def _case_data(case: AccumulationCase, world_size: int) -> list:
    """data[step][rank] = k (x, y) micro-batches, the same on every rank (each rank takes its own)."""
    import torch

    g = torch.Generator().manual_seed(10_000 + case.seed)
    return [[[(torch.randn(case.rows, case.features, generator=g), torch.randn(case.rows, case.outputs, generator=g))
              for _ in range(case.k)] for _ in range(world_size)] for _ in range(case.steps)]


def _whole_batch_reference(case: AccumulationCase, data: list) -> dict:
    """One process, plain SGD on the mean squared error over every rank's micro-batches of each step."""
    import torch

    model = _case_model(case)
    optimizer = torch.optim.SGD(model.parameters(), lr=case.lr)
    for step in data:
        x = torch.cat([x for rank in step for x, _ in rank])
        y = torch.cat([y for rank in step for _, y in rank])
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
    return {name: t.detach().cpu().numpy().copy() for name, t in model.state_dict().items()}


def _run_cases(rank: int, world_size: int, dist, step: Callable, cases: Sequence[AccumulationCase]) -> list:
    """In a joined group: for each case, wrap the model in DDP, run ``step`` per optimizer step, count collectives."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    device = rank_device(rank)
    out = []
    for case in cases:
        data = _case_data(case, world_size)
        model = _case_model(case).to(device)
        ddp = DistributedDataParallel(model, bucket_cap_mb=case.bucket_cap_mb)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=case.lr)
        calls, sizes = [], []
        for batches in data:
            micro = [(x.to(device), y.to(device)) for x, y in batches[rank]]
            with CommCounter() as comm:
                step(ddp, optimizer, micro, torch.nn.functional.mse_loss)
            calls.append(comm.count("all_reduce"))
            sizes.append(comm.bytes("all_reduce"))
        dist.barrier()  # every rank finishes the case before the next DDP is built
        weights = {name: t.detach().cpu().numpy().copy() for name, t in model.state_dict().items()}
        out.append({"weights": weights, "calls": calls, "bytes": sizes,
                    "gradient_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
                    "expected": _whole_batch_reference(case, data) if rank == 0 else None})
    return out


def accumulation_worker(rank: int, world_size: int, step: Callable, cases: tuple[AccumulationCase, ...]) -> list:
    """One rank: join the group, then run every case with the learner's ``step`` (see :func:`run_accumulation`)."""
    with process_group(rank, world_size) as dist:
        return _run_cases(rank, world_size, dist, step, cases)


def _collect(cases: Sequence[AccumulationCase], ranks: list, world_size: int) -> list[AccumulationRun]:
    """Turn the workers' per-rank results into one AccumulationRun per case."""
    return [AccumulationRun(case, world_size, tuple(rank[i]["weights"] for rank in ranks), ranks[0][i]["expected"],
                            tuple(tuple(rank[i]["calls"]) for rank in ranks),
                            tuple(tuple(rank[i]["bytes"]) for rank in ranks), ranks[0][i]["gradient_bytes"])
            for i, case in enumerate(cases)]


def run_accumulation(step: Callable, cases: Sequence[AccumulationCase], *, world_size: int = 2,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> list[AccumulationRun]:
    """Run ``step`` on every case in one launch of ``world_size`` DDP processes; one :class:`AccumulationRun` each."""
    if not callable(step):
        raise TypeError(f"step must be a function step(ddp, optimizer, micro_batches, loss_fn), got {step!r}")
    if isinstance(cases, AccumulationCase):
        cases = [cases]
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Sequence) or not cases:
        raise TypeError(f"cases must be a non-empty list of AccumulationCase, got {cases!r}")
    for case in cases:
        if not isinstance(case, AccumulationCase):
            raise TypeError(f"cases must hold AccumulationCase objects, got {type(case).__name__}")
    world_size = positive_int("world_size", world_size)
    # an untouched exercise comes back from the launcher as NotImplementedError, as in one process
    ranks = launch(accumulation_worker, world_size, (step, tuple(cases)), timeout_s=timeout_s)
    return _collect(cases, ranks, world_size)
