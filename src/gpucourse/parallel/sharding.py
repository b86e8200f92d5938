"""Sharded training state for real: a ZeRO-2 optimizer over a process group and its grader.

Taught in 15_sharding. :class:`Zero2Adam` is the model answer of the lesson's ZeRO-2 exercise (a thin subclass, so
that ``checks.off_limits`` can block it while the grader, which never uses it, keeps working); :func:`zero_check`
runs a learner's class on N worker processes (one launch for all its cases) and compares it with data-parallel
training by ``torch.optim.Adam``, its gradient memory during backward and its collectives by phase.
FSDP2 (ZeRO-3 in PyTorch) is in :mod:`gpucourse.parallel.fsdp`. PyTorch is imported only by the functions that need
it.
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
    shuffle: int = 0
    """0: the optimizer gets ``model.parameters()`` in their order; else the seed of a shuffle of that list (as with
    parameter groups or a filtered list: the order of the hooks then says nothing about the list's order)."""

    def __post_init__(self) -> None:
        """Reject sizes, rows, steps or Adam settings out of range."""
        if not isinstance(self.sizes, tuple) or len(self.sizes) < 2:
            raise TypeError(f"sizes must be a tuple of at least 2 layer widths, got {self.sizes!r}")
        for width in self.sizes:
            positive_int("sizes", width)
        non_negative_int("seed", self.seed)
        non_negative_int("shuffle", self.shuffle)
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
        order = f", parameters given shuffled (seed {self.shuffle})" if self.shuffle else ""
        return (f"MLP {sizes} ({self.parameters} parameters, {self.steps} steps, lr {self.lr:g}, eps {self.eps:g}"
                f"{order})")


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


class _Zero2Adam:
    """ZeRO-2 Adam: a hook reduce-scatters each gradient as backward makes it, keeps this rank's shard of the mean and
    frees ``p.grad``; :meth:`step` runs Adam on the shards (m and v for the shards only) and all-gathers each
    parameter."""

    def __init__(self, params, dist: object, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8) -> None:
        self.params, self.dist, self.lr, self.betas, self.eps = list(params), dist, lr, betas, eps
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.grads: dict[int, object] = {}  # parameter index -> this rank's shard of its mean gradient
        self.m: dict[int, object] = {}
        self.v: dict[int, object] = {}
        self.t = 0
        self.index = {id(p): i for i, p in enumerate(self.params)}
        self.handles = [p.register_post_accumulate_grad_hook(self._reduce_scatter) for p in self.params]

    def _part(self, p) -> int:
        """Elements of one rank's shard of ``p``: ceil(numel / world size)."""
        return -(-p.numel() // self.world)

    def _reduce_scatter(self, p) -> None:
        """Backward just accumulated ``p.grad``: reduce-scatter it, keep my shard of the mean, free the gradient."""
        import torch

        part = self._part(p)
        flat = torch.nn.functional.pad(p.grad.reshape(-1), (0, part * self.world - p.numel()))
        shard = torch.empty(part, dtype=flat.dtype, device=flat.device)
        self.dist.reduce_scatter_tensor(shard, flat)  # the sum over the ranks of my part
        self.grads[self.index[id(p)]] = shard.div_(self.world)  # the data-parallel mean
        p.grad = None

    def step(self) -> None:
        """Adam on each parameter's shard (as torch.optim.Adam), then all-gather the shards into the parameter."""
        import torch

        self.t += 1
        beta1, beta2 = self.betas
        for i, p in enumerate(self.params):
            if i not in self.grads:
                continue
            grad, part = self.grads.pop(i), self._part(p)
            full = torch.nn.functional.pad(p.detach().reshape(-1), (0, part * self.world - p.numel()))
            mine = full[self.rank * part:(self.rank + 1) * part].clone()
            if i not in self.m:
                self.m[i], self.v[i] = torch.zeros_like(mine), torch.zeros_like(mine)
            self.m[i].mul_(beta1).add_(grad, alpha=1 - beta1)
            self.v[i].mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denominator = (self.v[i].sqrt() / math.sqrt(1 - beta2 ** self.t)).add_(self.eps)
            mine.addcdiv_(self.m[i], denominator, value=-self.lr / (1 - beta1 ** self.t))
            self.dist.all_gather_into_tensor(full, mine)
            with torch.no_grad():
                p.copy_(full[:p.numel()].view_as(p))


class Zero2Adam(_Zero2Adam):
    """The model answer of lesson 15's Exercise 1 (a thin subclass, so that ``checks.off_limits`` can block it while
    the grader, which never uses it, keeps working): ``Zero2Adam(params, dist, lr, betas, eps)``, then ``step()``
    after each backward pass."""


def _storages(value: object, skip: set[int], out: dict[int, int], seen: set[int], depth: int = 0) -> dict[int, int]:
    """{storage address: bytes} of the tensors reachable from ``value`` (containers and plain objects' attributes,
    a few levels deep), leaving out the storages in ``skip``."""
    import types

    import torch

    if id(value) in seen or depth > 6:
        return out
    seen.add(id(value))
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage()
        if storage.data_ptr() and storage.data_ptr() not in skip:
            out[storage.data_ptr()] = storage.nbytes()
    elif isinstance(value, dict):
        for item in list(value.values()):
            _storages(item, skip, out, seen, depth + 1)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in list(value):
            _storages(item, skip, out, seen, depth + 1)
    elif not isinstance(value, (type, types.ModuleType, types.FunctionType, types.MethodType, torch.nn.Module)) \
            and hasattr(value, "__dict__"):
        _storages(vars(value), skip, out, seen, depth + 1)
    return out


class _GradientProbe:
    """The grader's view of gradient memory during backward, read in its own post-accumulate-grad hooks.

    At each hook it adds the bytes of every live ``p.grad`` to those of the tensors the learner's optimizer object
    holds that it did not hold when backward began (gradient shards, or a stashed full gradient), parameters left
    out. Why this and not :class:`~gpucourse.memory.PeakMemory`: a peak over every storage backward creates also
    counts autograd's own buffers (activation gradients, a layer's weight and bias gradients made together) and the
    padded copy gloo may hold a moment after a collective, which vary with the machine's load; the sum read at the
    hooks counts exactly the gradients a rank keeps, the same on every run. It sees only what the optimizer object
    reaches; a stash kept elsewhere (a closure, a module-level dict) is caught by the worker's second count: the
    storages made during backward still alive once it has returned. A hook registered before the learner's
    (it runs first) sees the parameter's fresh gradient; one registered after sees what the learner's hook left.
    """

    def __init__(self, params: list) -> None:
        self.params = params
        self.skip = {p.untyped_storage().data_ptr() for p in params}
        self.owner: object = None
        self.baseline: set[int] = set()
        self.peak = 0
        self.handles = [p.register_post_accumulate_grad_hook(self._read) for p in params]

    def watch(self, owner: object) -> None:
        """Read ``owner``'s tensors too (the learner's optimizer); hooks that run after its own."""
        self.owner = owner
        self.handles += [p.register_post_accumulate_grad_hook(self._read) for p in self.params]

    def start(self) -> None:
        """A backward pass begins: what the optimizer holds now (m, v, buffers made once) is not gradient memory."""
        self.baseline = set(_storages(self.owner, self.skip, {}, set()))
        self.peak = 0

    def _read(self, _param: object) -> None:
        """Gradient bytes now: live p.grad plus what the optimizer took on since backward began."""
        live: dict[int, int] = {}
        for p in self.params:
            if p.grad is not None:
                _storages(p.grad, self.skip, live, set())
        held = _storages(self.owner, self.skip | self.baseline, {}, set())
        self.peak = max(self.peak, sum({**held, **live}.values()))

    def remove(self) -> None:
        """Take the grader's hooks off again."""
        for handle in self.handles:
            handle.remove()


def zero_grader_worker(rank: int, world_size: int, optimizer_class: Callable, cases: Sequence[ZeroCase]) -> list[dict]:
    """Train each case with ``optimizer_class`` on this rank's rows; report what the grader compares (see
    :func:`zero_check`): the largest difference from one-process Adam on the whole batch, the gradients left after
    each backward, the peak gradient bytes during each backward, the collectives of each phase, the bytes kept."""
    import copy

    import torch

    device = rank_device(rank)
    reports = []
    with process_group(rank, world_size) as dist:
        for case in cases:
            model = sized_mlp(case.sizes, case.seed).to(device)
            reference = copy.deepcopy(model)
            data = torch.Generator().manual_seed(1000 + case.seed)
            batches = [(torch.randn(case.rows * world_size, case.sizes[0], generator=data).to(device),
                        torch.randn(case.rows * world_size, case.sizes[-1], generator=data).to(device))
                       for _ in range(case.steps)]
            adam = torch.optim.Adam(reference.parameters(), lr=case.lr, betas=case.betas, eps=case.eps)
            for x, y in batches:
                adam.zero_grad()
                torch.nn.functional.mse_loss(reference(x), y).backward()
                adam.step()
            params = list(model.parameters())
            if case.shuffle:  # the optimizer's list in another order than the one autograd's hooks fire in
                import random

                random.Random(case.shuffle).shuffle(params)
            probe = _GradientProbe(params)
            kept = PeakMemory()  # every storage the optimizer creates, alive until it is freed: kept anywhere
            with kept:
                optimizer = optimizer_class(params, dist, lr=case.lr, betas=case.betas, eps=case.eps)
            probe.watch(optimizer)
            steps = []
            mine = slice(rank * case.rows, (rank + 1) * case.rows)
            for x, y in batches:
                loss = torch.nn.functional.mse_loss(model(x[mine]), y[mine])
                probe.start()
                made = PeakMemory()  # the storages backward creates: once it has finished, only the shards are owed
                with CommCounter() as comm, kept:
                    with comm.phase("backward"), made:
                        loss.backward()
                    alive = made.live_bytes(settle_s=2.0, agree_s=0.05)
                    left = [name for name, p in model.named_parameters() if p.grad is not None]
                    with comm.phase("step"):
                        optimizer.step()
                calls = {phase: sorted((call.kind, call.bytes) for call in comm.calls if call.phase == phase)
                         for phase in ("backward", "step")}
                steps.append({"left": left, "peak": probe.peak, "alive": alive, "calls": calls})
            probe.remove()
            with torch.no_grad():
                difference = max(float((p - q).abs().max()) for p, q in zip(model.parameters(),
                                                                            reference.parameters()))
            reports.append({"difference": difference, "kept_bytes": kept.live_bytes(), "steps": steps,
                            "sizes": [p.numel() for p in params]})
    return reports


def _expected_payloads(sizes: list[int], world_size: int) -> list[int]:
    """Payload bytes of one collective per parameter: its elements padded up to a multiple of the world size."""
    return sorted(FLOAT_BYTES * world_size * -(-n // world_size) for n in sizes)


def _calls_text(calls: list) -> str:
    """Collectives as text for a check message: 'reduce_scatter 1,024 B, ...', or 'none'."""
    return ", ".join(f"{kind} {size:,} B" for kind, size in calls) or "none"


def _check_case(case: ZeroCase, rank: int, report: dict, world_size: int, quiet: bool) -> None:
    """The checks of one case on one rank: each step's collectives by phase, gradients freed and peak gradient bytes
    during backward (a gradient left behind is summed into the next step's, so these come first); then the
    parameters, and the bytes kept between steps."""
    from gpucourse.checks import check

    where = f"{world_size} ranks, {case.label()}, rank {rank}"
    sizes = report["sizes"]
    shards = FLOAT_BYTES * sum(-(-n // world_size) for n in sizes)
    expected = _expected_payloads(sizes, world_size)
    for number, step in enumerate(report["steps"], 1):
        shown = not quiet and rank == 0 and number == 1  # one tick per kind of check
        for phase, kind, other in (("backward", "reduce_scatter", "step()"), ("step", "all_gather", "backward")):
            calls = step["calls"][phase]
            label = "backward()" if phase == "backward" else "step()"
            check(f"{where}, step {number}: collectives during {label} (kind and payload bytes, sorted; one {kind} "
                  f"per parameter, each padded to a multiple of {world_size})", _calls_text(calls),
                  _calls_text([(kind, size) for size in expected]),
                  hint=("in the hook, reduce_scatter_tensor the parameter's flat gradient, padded with zeros only up "
                        "to the next multiple of the world size (none when it divides the count); no all_reduce "
                        "(it gives every rank the whole gradient)" if phase == "backward" else
                        "in step(), all_gather_into_tensor each parameter's updated shard, and nothing else: the "
                        "gradients were reduce-scattered during backward, by the hooks")
                  + f"; nothing of this kind in {other}", quiet=not shown)
        check(f"{where}, step {number}: parameters whose .grad is still set after backward()",
              ", ".join(step["left"]) or "none", "none",
              hint="set p.grad = None in the hook once its shard is reduce-scattered: the full gradient is not "
                   "needed any more", quiet=not shown)
        bound = FLOAT_BYTES * max(sizes) + shards
        check(f"{where}, step {number}: peak gradient bytes during backward(), live p.grad plus what your optimizer "
              f"took on (yours: {step['peak']:,}; at most one largest gradient + 1/{world_size} of all, padded: "
              f"{bound:,}; all gradients: {FLOAT_BYTES * sum(sizes):,})", step["peak"] <= bound, True,
              hint="keep only the reduce-scattered shard of each gradient: no full gradient stashed in your object, "
                   "and p.grad = None in the hook", quiet=not shown)
        allowed = shards + 16 * len(sizes) + 64
        check(f"{where}, step {number}: bytes made during backward() still alive when it returns, anywhere (a closure, "
              f"a module-level dict, ...; yours: {step['alive']:,}; the gradient shards: {shards:,}; all gradients: "
              f"{FLOAT_BYTES * sum(sizes):,})", step["alive"] <= allowed, True,
              hint="keep only the reduce-scattered shard of each gradient: a full gradient (p.grad or its padded "
                   "copy) kept until step(), wherever, is ZeRO-1's memory", quiet=not shown)
    check(f"{where}: parameters equal data-parallel Adam's within {ZERO_ATOL:g} (largest difference yours: "
          f"{report['difference']:.2g})", report["difference"] <= ZERO_ATOL, True,
          hint="divide the reduce-scattered sum by dist.get_world_size() (the data-parallel mean), update your shard "
               "with Adam's bias-corrected step using lr, betas and eps, and all-gather every rank's shard into the "
               "parameter; find a shard's parameter from the tensor the hook gets (id(p)), not from the order the "
               "hooks fire in, which need not be the order of params", quiet=quiet)
    allowed = 3 * shards + 16 * len(sizes) + 64
    check(f"{where}: bytes your optimizer keeps alive between steps, anywhere (yours: {report['kept_bytes']:,}; at "
          f"most m, v and a gradient shard per parameter: {allowed:,}; unsharded Adam's m and v: "
          f"{2 * FLOAT_BYTES * sum(sizes):,})", report["kept_bytes"] <= allowed, True,
          hint="keep m and v only for this rank's shard of each parameter, and no full-size tensor (a gradient, a "
               "parameter copy) between steps", quiet=quiet)


def _launch_answer(optimizer_class: Callable, world_size: int, cases: list, timeout_s: float) -> list:
    """Launch the grader's worker; a learner's unwritten class raises NotImplementedError here (the launcher's
    doing), as in one process; a failing or hung rank becomes a failed check."""
    from gpucourse.checks import _fail
    from gpucourse.parallel.workers import WorkerError, WorkerTimeout

    name = f"Zero2Adam on {world_size} ranks"
    try:
        return launch(zero_grader_worker, world_size, (optimizer_class, cases), timeout_s=timeout_s)
    except WorkerError as error:
        if error.summary.startswith("OffLimits"):
            _fail(name, error.summary.split(": ", 1)[1], "write the optimizer yourself")
        _fail(name, f"rank {error.rank} raised {error.summary[:300]}",
              "size every shard from dist.get_world_size() and dist.get_rank(), never a fixed number (the output of "
              "reduce_scatter_tensor holds 1/N of its input), and pair each shard with its own parameter through "
              "the tensor the hook gets (id(p)): the hooks need not fire in the order of params")
    except WorkerTimeout as error:
        _fail(name, f"the ranks did not finish ({error}): one rank waited in a collective the others never ran",
              "every rank runs the same collectives in the same order: one reduce-scatter per parameter in its hook, "
              "one all-gather per parameter in step()")


def zero_check(optimizer_class: Callable, cases: Sequence[ZeroCase], *, shown: int = 1, world_size: int = 2,
               timeout_s: float = 90.0) -> None:
    """Grade a ZeRO-2 optimizer class: one launch of ``world_size`` ranks runs every case; the first ``shown`` cases
    print ticks.

    ``optimizer_class(params, dist, lr=, betas=, eps=)`` is made on each rank, then each step runs backward on the
    rank's rows and ``step()``. On each rank: the parameters after the case's steps equal one-process
    ``torch.optim.Adam`` on the whole batch (the data-parallel mean gradient) within :data:`ZERO_ATOL`; backward runs
    one reduce-scatter per parameter (padded to a multiple of N) and nothing else, ``step()`` one all-gather per
    parameter; no ``p.grad`` is left after backward; the peak gradient bytes during backward (see
    :class:`_GradientProbe`) are at most one largest gradient plus 1/N of all; the storages backward made that are
    still alive when it returns, wherever they are kept (a closure, a module-level dict), are the shards only; the
    bytes kept between steps are at most m, v and a gradient shard per parameter. A case with ``shuffle`` hands the
    optimizer its parameters in a shuffled order, so that pairing shards with parameters by hook order fails.
    """
    if not callable(optimizer_class):
        raise TypeError(f"optimizer_class must be a class, got {type(optimizer_class).__name__}")
    cases = list(cases)
    if not cases or not all(isinstance(case, ZeroCase) for case in cases):
        raise TypeError("cases must be a non-empty list of ZeroCase")
    shown = non_negative_int("shown", shown)
    world_size = positive_int("world_size", world_size)
    results = _launch_answer(optimizer_class, world_size, cases, timeout_s)
    for index, case in enumerate(cases):
        for rank, reports in enumerate(results):
            _check_case(case, rank, reports[index], world_size, quiet=index >= shown)


def run_zero2(optimizer_class: Callable, case: ZeroCase | None = None, *, world_size: int = 2,
              timeout_s: float = 90.0) -> list[dict]:
    """Run a ZeRO-2 optimizer class on ``world_size`` ranks for one case: each rank's report (see
    :func:`zero_grader_worker`)."""
    if not callable(optimizer_class):
        raise TypeError(f"optimizer_class must be a class, got {type(optimizer_class).__name__}")
    case = case or ZeroCase()
    if not isinstance(case, ZeroCase):
        raise TypeError(f"case must be a ZeroCase, got {type(case).__name__}")
    world_size = positive_int("world_size", world_size)
    return [reports[0] for reports in _launch_answer(optimizer_class, world_size, [case], timeout_s)]
