"""Run a learner's own DDP (gradient hooks, buckets, asynchronous all-reduce) in real process groups, observed.

Taught and graded in 14_data_parallelism (Exercise 2). The learner writes a class ``MyDDP(module, bucket_cap_bytes)``
that registers a hook on every parameter that requires a gradient, groups those parameters into buckets, starts
``dist.all_reduce(bucket, async_op=True)`` as soon as a bucket's last gradient is ready, and, in ``finish()``, waits
for the all-reduces and writes the averaged gradients back; ``remove()`` takes its hooks off again.

:func:`run_own_ddp` ships that class by value to ``world_size`` gloo (or NCCL) processes with
:func:`~gpucourse.parallel.workers.launch` and runs every case in that one launch. In each rank and case it trains
the same model twice on the same shards: once wrapped in PyTorch's ``DistributedDataParallel`` (the reference), once
with the learner's class, while ``torch.distributed.all_reduce`` is wrapped to record, for every call, its bytes,
whether the backward pass was still running, whether it was asynchronous, how many gradients were ready then, and
whether its handle was waited on before ``backward()`` returned, and, per step, how many handles were waited on and
how many bytes of tensors the learner's object holds after ``finish()`` (a class that keeps every step's buckets
grows). It also records whether any gradient hook is left on the parameters after ``remove()`` and how many
all-reduces one more backward pass starts after it (a hook of any kind left behind), and an exception a
rank's class raised (the case stops there on every rank: the ranks run the same code on the same shapes).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from gpucourse._validate import non_negative_int, positive_int, positive_number
from gpucourse.parallel.workers import DEFAULT_TIMEOUT_S, launch, process_group, rank_device


@dataclass(frozen=True)
class OwnDDPCase:
    """One graded case: an MLP of ``widths`` (tanh between layers), rows per rank, steps, learning rate, bucket cap,
    the names of parameters frozen with ``requires_grad=False``, and the order its layers are registered in:
    'forward' (a ``Sequential``) or 'reverse' (the last layer registered first, as in a model that defines its head
    before its body: gradients then arrive in registration order, not the reverse)."""

    seed: int = 0
    widths: tuple[int, ...] = (6, 16, 12, 3)
    rows: int = 4
    steps: int = 2
    lr: float = 0.1
    bucket_cap_bytes: int = 25 * 2**20
    frozen: tuple[str, ...] = ()
    registered: str = "forward"

    def __post_init__(self) -> None:
        """Reject sizes, counts or rates that are not positive, and frozen names the model does not have."""
        non_negative_int("seed", self.seed)
        if len(self.widths) < 2:
            raise ValueError(f"widths must list at least two layer widths, got {self.widths!r}")
        for width in self.widths:
            positive_int("widths", width)
        for name in ("rows", "steps", "bucket_cap_bytes"):
            positive_int(name, getattr(self, name))
        positive_number("lr", self.lr)
        if self.registered not in ("forward", "reverse"):
            raise ValueError(f"registered must be 'forward' or 'reverse', got {self.registered!r}")
        layer = "{}" if self.registered == "forward" else "layers.{}"
        names = {layer.format(2 * i if self.registered == "forward" else i) + f".{kind}"
                 for i in range(len(self.widths) - 1) for kind in ("weight", "bias")}
        unknown = sorted(set(self.frozen) - names)
        if unknown:
            raise ValueError(f"frozen names parameters the model does not have: {unknown} (it has {sorted(names)})")


@dataclass(frozen=True)
class AllReduceCall:
    """One ``dist.all_reduce`` the learner's class made during a training step, as the grader saw it."""

    bytes: int
    in_backward: bool
    async_op: bool
    ready: int
    waited_in_backward: bool


@dataclass(frozen=True)
class OwnDDPRun:
    """One case's outcome on every rank: weights (yours and DDP's), all-reduce calls per step, hooks left behind."""

    case: OwnDDPCase
    world_size: int
    weights: tuple[dict, ...]
    expected: tuple[dict, ...]
    calls: tuple[tuple[tuple[AllReduceCall, ...], ...], ...]
    hooks_left: tuple[int, ...]
    trainable: int
    bucket_bytes: tuple[int, ...] = field(default=())
    errors: tuple[str, ...] = field(default=())  # per rank: '' or the exception the learner's class raised
    waits: tuple[tuple[int, ...], ...] = field(default=())  # [rank][step]: handles waited on during that step
    held: tuple[tuple[int, ...], ...] = field(default=())  # [rank][step]: tensor bytes the object holds after finish()
    after_remove: tuple[int, ...] = field(default=())  # per rank: all-reduces one more backward started after remove()


def _reverse_registered_mlp(linears: list):
    """An MLP whose Linear layers are registered last first (``layers.0`` is the output layer) and run first to last."""
    import torch

    class ReverseRegisteredMLP(torch.nn.Module):
        """Layers registered in the reverse of the order ``forward`` runs them (a head defined before its body)."""

        def __init__(self, linears: list) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(reversed(linears))

        def forward(self, x):
            ordered = list(reversed(self.layers))
            for i, layer in enumerate(ordered):
                x = layer(x)
                if i < len(ordered) - 1:
                    x = torch.tanh(x)
            return x

    return ReverseRegisteredMLP(linears)


def case_model(case: OwnDDPCase):
    """The case's model: Linear layers of ``case.widths`` with tanh between them, seeded; frozen parameters marked."""
    import torch

    torch.manual_seed(case.seed)
    if case.registered == "reverse":
        model = _reverse_registered_mlp([torch.nn.Linear(n_in, n_out)
                                         for n_in, n_out in zip(case.widths[:-1], case.widths[1:])])
        for name, parameter in model.named_parameters():
            parameter.requires_grad_(name not in case.frozen)
        return model
    layers = []
    for i, (n_in, n_out) in enumerate(zip(case.widths[:-1], case.widths[1:])):
        layers.append(torch.nn.Linear(n_in, n_out))
        if i < len(case.widths) - 2:
            layers.append(torch.nn.Tanh())
    model = torch.nn.Sequential(*layers)
    for name, parameter in model.named_parameters():
        parameter.requires_grad_(name not in case.frozen)
    return model


def expected_buckets(case: OwnDDPCase) -> tuple[int, ...]:
    """Bytes of each bucket DDP's rule gives: trainable parameters in reverse order, a bucket closed once it holds at
    least ``bucket_cap_bytes``."""
    buckets, size = [], 0
    for parameter in reversed([p for p in case_model(case).parameters() if p.requires_grad]):
        size += parameter.numel() * parameter.element_size()
        if size >= case.bucket_cap_bytes:
            buckets.append(size)
            size = 0
    if size:
        buckets.append(size)
    return tuple(buckets)


def _case_data(case: OwnDDPCase, world_size: int) -> list:
    """data[step][rank] = (x, y), the same on every rank (each rank takes its own)."""
    import torch

    g = torch.Generator().manual_seed(20_000 + case.seed)
    return [[(torch.randn(case.rows, case.widths[0], generator=g), torch.randn(case.rows, case.widths[-1], generator=g))
             for _ in range(world_size)] for _ in range(case.steps)]


class _Recorder:
    """Wraps ``torch.distributed.all_reduce`` while it is active: records every call and whether its handle was waited
    on while the backward pass ran."""

    def __init__(self) -> None:
        self.in_backward = False
        self.ready = 0
        self.waits = 0  # handles waited on (any step's) since the step began
        self.calls: list[dict] = []

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Swap the recording all_reduce in (torch.distributed's and distributed_c10d's), restore it afterwards."""
        import torch.distributed as dist
        from torch.distributed import distributed_c10d

        original = distributed_c10d.all_reduce
        recorder = self

        def all_reduce(tensor, *args, **kwargs):
            async_op = kwargs.get("async_op", args[2] if len(args) > 2 else False)
            entry = {"bytes": tensor.numel() * tensor.element_size(), "in_backward": recorder.in_backward,
                     "async_op": bool(async_op), "ready": recorder.ready, "waited_in_backward": False}
            recorder.calls.append(entry)
            work = original(tensor, *args, **kwargs)
            return _Handle(work, entry, recorder) if work is not None else None

        dist.all_reduce = distributed_c10d.all_reduce = all_reduce
        try:
            yield
        finally:
            dist.all_reduce = distributed_c10d.all_reduce = original


class _Handle:
    """An all-reduce's work handle that notes whether ``wait()`` ran while the backward pass ran."""

    def __init__(self, work: object, entry: dict, recorder: _Recorder) -> None:
        self._work, self._entry, self._recorder = work, entry, recorder

    def wait(self, *args, **kwargs):
        """Wait for the all-reduce (noting whether backward was still running)."""
        if self._recorder.in_backward:
            self._entry["waited_in_backward"] = True
        self._recorder.waits += 1
        return self._work.wait(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self._work, name)


def _train_reference(case: OwnDDPCase, data: list, rank: int, device) -> dict:
    """PyTorch's DistributedDataParallel on this rank's shards: the weights the learner's class must reach."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    model = case_model(case).to(device)
    ddp = DistributedDataParallel(model, bucket_cap_mb=case.bucket_cap_bytes / 2**20)
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=case.lr)
    for step in data:
        x, y = (t.to(device) for t in step[rank])
        optimizer.zero_grad()
        torch.nn.functional.mse_loss(ddp(x), y).backward()
        optimizer.step()
    return {name: t.detach().cpu().numpy().copy() for name, t in model.state_dict().items()}


def held_bytes(obj: object, depth: int = 4) -> int:
    """Bytes of the tensors (parameters left out: they are the model's) reachable from ``obj``'s attributes through
    lists, tuples, dicts and sets, each tensor counted once."""
    import torch

    seen: set[int] = set()

    def walk(value: object, level: int) -> int:
        if isinstance(value, torch.Tensor):
            if isinstance(value, torch.nn.Parameter) or id(value) in seen:
                return 0
            seen.add(id(value))
            return value.numel() * value.element_size()
        if level <= 0:
            return 0
        if isinstance(value, dict):
            return sum(walk(v, level - 1) for v in value.values())
        if isinstance(value, (list, tuple, set, frozenset)):
            return sum(walk(v, level - 1) for v in value)
        return 0

    return walk(list(getattr(obj, "__dict__", {}).values()), depth)


def _train_yours(case: OwnDDPCase, data: list, rank: int, device, ddp_class: Callable) -> dict:
    """The learner's class on this rank's shards, every all_reduce recorded step by step (with the handles waited on
    and the bytes the object holds after each ``finish()``); hooks counted at the end. An exception the class raises
    ends the case on this rank and is returned as text."""
    import torch

    model = case_model(case).to(device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    recorder = _Recorder()

    def count(_parameter) -> None:
        recorder.ready += 1

    counters = [p.register_post_accumulate_grad_hook(count) for p in trainable]  # before the learner's: run first
    optimizer = torch.optim.SGD(trainable, lr=case.lr)
    calls, waits, held, error, where, after_remove = [], [], [], "", "in MyDDP(...)", 0
    with recorder.active():
        try:
            mine = ddp_class(model, bucket_cap_bytes=case.bucket_cap_bytes)
            for s, step in enumerate(data):
                x, y = (t.to(device) for t in step[rank])
                recorder.calls, recorder.ready, recorder.waits = [], 0, 0
                optimizer.zero_grad()
                loss = torch.nn.functional.mse_loss(model(x), y)
                recorder.in_backward, where = True, f"in backward() (your hook), step {s}"
                try:
                    loss.backward()
                finally:
                    recorder.in_backward = False
                where = f"in finish(), step {s}"
                mine.finish()
                optimizer.step()
                calls.append(tuple(AllReduceCall(**entry) for entry in recorder.calls))
                waits.append(recorder.waits)
                held.append(held_bytes(mine))
            where = "in remove()"
            mine.remove()
            after_remove = _reduces_after_remove(model, data[0][rank], device, optimizer, recorder)
        except NotImplementedError:  # an unwritten class: the launch raises it, as before
            raise
        except Exception as exc:  # reported by the test as a failed check, not as a crash of the launch
            error = f"{type(exc).__name__}: {exc} ({where})"
    for handle in counters:
        handle.remove()
    left = sum(len(getattr(p, "_post_accumulate_grad_hooks", None) or {}) for p in model.parameters())
    return {"weights": {name: t.detach().cpu().numpy().copy() for name, t in model.state_dict().items()},
            "calls": tuple(calls), "hooks_left": left, "error": error, "waits": tuple(waits), "held": tuple(held),
            "after_remove": after_remove}


def _reduces_after_remove(model, step: tuple, device, optimizer, recorder: _Recorder) -> int:
    """All-reduces one more forward and backward start once the learner's ``remove()`` ran (0 when every hook is
    gone, whatever its kind: a tensor hook, a post-accumulate hook, a module hook). A hook left behind that raises
    counts as one; the weights are not stepped."""
    import torch

    x, y = (t.to(device) for t in step)
    recorder.calls, recorder.ready, recorder.waits = [], 0, 0
    optimizer.zero_grad()
    try:
        torch.nn.functional.mse_loss(model(x), y).backward()
    except Exception:  # a hook left behind whose bookkeeping is gone
        return max(1, len(recorder.calls))
    return len(recorder.calls)


def own_ddp_worker(rank: int, world_size: int, ddp_class: Callable, cases: tuple[OwnDDPCase, ...]) -> list:
    """One rank: join the group, then for every case train with DDP and with ``ddp_class`` (see :func:`run_own_ddp`)."""
    import torch

    torch.set_num_threads(1)
    out = []
    with process_group(rank, world_size) as dist:
        device = rank_device(rank)
        for case in cases:
            data = _case_data(case, world_size)
            expected = _train_reference(case, data, rank, device)
            dist.barrier()
            yours = _train_yours(case, data, rank, device, ddp_class)
            dist.barrier()  # every rank finishes the case before the next one starts
            out.append({**yours, "expected": expected})
    return out


def run_own_ddp(ddp_class: Callable, cases: Sequence[OwnDDPCase], *, world_size: int = 2,
                timeout_s: float = DEFAULT_TIMEOUT_S) -> list[OwnDDPRun]:
    """Run ``ddp_class`` on every case in one launch of ``world_size`` processes; one :class:`OwnDDPRun` per case."""
    if not callable(ddp_class):
        raise TypeError(f"ddp_class must be a class MyDDP(module, bucket_cap_bytes), got {ddp_class!r}")
    if isinstance(cases, OwnDDPCase):
        cases = [cases]
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Sequence) or not cases:
        raise TypeError(f"cases must be a non-empty list of OwnDDPCase, got {cases!r}")
    for case in cases:
        if not isinstance(case, OwnDDPCase):
            raise TypeError(f"cases must hold OwnDDPCase objects, got {type(case).__name__}")
    world_size = positive_int("world_size", world_size)
    ranks = launch(own_ddp_worker, world_size, (ddp_class, tuple(cases)), timeout_s=timeout_s)
    return [OwnDDPRun(case, world_size, tuple(r[i]["weights"] for r in ranks), tuple(r[i]["expected"] for r in ranks),
                      tuple(r[i]["calls"] for r in ranks), tuple(r[i]["hooks_left"] for r in ranks),
                      sum(p.requires_grad for p in case_model(case).parameters()), expected_buckets(case),
                      tuple(r[i]["error"] for r in ranks), tuple(r[i]["waits"] for r in ranks),
                      tuple(r[i]["held"] for r in ranks), tuple(r[i]["after_remove"] for r in ranks))
            for i, case in enumerate(cases)]
