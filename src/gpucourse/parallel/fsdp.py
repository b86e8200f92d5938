"""FSDP2 in lesson 15_sharding: the learner's exercise (wrap groups and resharding under a memory cap), its grader, a
demonstration.

:func:`fsdp_shard` is the model answer of the FSDP2 exercise: for a :func:`block_net` whose blocks differ in size and
a cap on each rank's parameter memory (float32 shards plus the bfloat16 groups gathered at that moment), it chooses
per block whether it joins the root's group, gets a group kept gathered until its backward, or a group resharded
after its forward, so that the run fits the cap with the fewest all-gathers (a thin wrapper, so that
``checks.off_limits`` can block it). :func:`fsdp_check` grades a learner's version on N ranks (one launch for all its
cases): the bytes FSDP2 holds gathered, read from its own parameter groups (:class:`_GatheredBytes`), the all-gathers
counted, the fewest that fit found by trying every plan on :func:`_plan_peak` (a model of FSDP2's schedule that the
tests compare with the measured bytes), and the weights against one process that repeats the same bfloat16
arithmetic. :func:`fsdp_worker` shards an MLP with ``fully_shard`` and counts its collectives by phase, for the
lesson's demonstration. PyTorch is imported only by the functions that need it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, positive_int, positive_number
from gpucourse.parallel.comm import CommCounter
from gpucourse.parallel.sharding import FLOAT_BYTES, sized_mlp, state_bytes
from gpucourse.parallel.workers import launch, process_group, rank_device


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


# Exercise 2: the learner chooses FSDP2's wrap groups and reshard_after_forward under a cap on parameter memory.

FSDP_ATOL = 1e-4
"""How far (absolute) a parameter may be from the bfloat16-emulating reference after the steps of one case: the
reference repeats the same bfloat16 arithmetic, so only the order of the float32 sums over the ranks differs."""

GATHERED_BYTES = 2
"""Bytes of one gathered parameter: FSDP gathers them in bfloat16 (``param_dtype``)."""

CHOICES = ("root", "keep", "reshard")
"""What a plan does with one block: leave it to the root's group (gathered from the start of forward to the end of
backward), give it its own group that stays gathered from its forward to its backward (``reshard_after_forward=
False``), or its own group resharded after its forward and gathered again for its backward."""


@dataclass(frozen=True)
class FsdpCase:
    """One graded case of the FSDP2 exercise: a :class:`BlockNet` (its blocks' hidden widths differ), its seed, the
    cap on each rank's parameter memory (float32 shards plus the bfloat16 groups gathered at that moment), the rows
    per rank and the Adam steps."""

    d_in: int = 6
    width: int = 8
    d_out: int = 3
    hidden: tuple[int, ...] = (16, 64, 8, 32)
    cap: int = 5000
    seed: int = 0
    rows: int = 4
    steps: int = 2
    lr: float = 1e-2

    def __post_init__(self) -> None:
        """Reject sizes, counts or a learning rate out of range."""
        for name in ("d_in", "width", "d_out", "cap", "rows", "steps"):
            positive_int(name, getattr(self, name))
        if not isinstance(self.hidden, tuple) or not self.hidden:
            raise ValueError(f"hidden must be a non-empty tuple of block widths (blocks), got {self.hidden!r}")
        for width in self.hidden:
            positive_int("hidden", width)
        non_negative_int("seed", self.seed)
        positive_number("lr", self.lr)

    @property
    def blocks(self) -> int:
        """Number of blocks."""
        return len(self.hidden)

    def label(self) -> str:
        """A short description for check messages."""
        return (f"BlockNet {self.d_in} -> {self.width} -> blocks of hidden widths {list(self.hidden)} -> {self.d_out}, "
                f"cap {self.cap:,} bytes per rank (seed {self.seed})")


def _block_classes():
    """BlockNet and its Block, made once (torch imported only when needed); module-level names so they pickle."""
    import torch

    global Block, BlockNet

    class Block(torch.nn.Module):
        """A residual MLP block: x + fc2(gelu(fc1(x))), fc1 widening to the block's hidden width."""

        def __init__(self, width: int, hidden: int) -> None:
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(width, hidden), torch.nn.Linear(hidden, width)

        def forward(self, x):
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))

    class BlockNet(torch.nn.Module):
        """embed -> blocks -> head: the root holds embed and head, each block its own two Linear layers."""

        def __init__(self, d_in: int, width: int, d_out: int, hidden: Sequence[int]) -> None:
            super().__init__()
            self.embed = torch.nn.Linear(d_in, width)
            self.blocks = torch.nn.ModuleList(Block(width, h) for h in hidden)
            self.head = torch.nn.Linear(width, d_out)

        def forward(self, x):
            x = self.embed(x)
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    Block.__module__ = BlockNet.__module__ = __name__
    Block.__qualname__, BlockNet.__qualname__ = "Block", "BlockNet"
    return Block, BlockNet


def block_net(case: FsdpCase | None = None):
    """The case's model, seeded: ``model.embed``, ``model.blocks`` (a ModuleList of residual blocks), ``model.head``."""
    import torch

    case = case or FsdpCase()
    if not isinstance(case, FsdpCase):
        raise TypeError(f"case must be an FsdpCase, got {type(case).__name__}")
    net = globals()["BlockNet"] if "BlockNet" in globals() else _block_classes()[1]
    torch.manual_seed(case.seed)
    return net(case.d_in, case.width, case.d_out, case.hidden)


def _plan_peak(root: int, blocks: Sequence[int], plan: Sequence[str]) -> int:
    """The most bytes FSDP2 holds gathered at once in one training step, for parameter counts ``root`` (embed and
    head) and ``blocks`` and a plan (one of :data:`CHOICES` per block), as FSDP2 schedules it: the root's group is
    gathered first and kept to the end of backward; each block group is gathered for its forward and, if resharded,
    freed after it and gathered again for its backward; in backward, when a group's backward starts, the group before
    it (forward order) is gathered too (FSDP2's backward prefetch); a group is freed when its backward is done."""
    if len(plan) != len(blocks) or any(choice not in CHOICES for choice in plan):
        raise ValueError(f"plan must name one of {CHOICES} per block, got {plan!r}")
    size = GATHERED_BYTES * (root + sum(n for n, choice in zip(blocks, plan) if choice == "root"))
    groups = [(GATHERED_BYTES * n, choice == "keep") for n, choice in zip(blocks, plan) if choice != "root"]
    live, peak = size, size
    gathered = [False] * len(groups)
    for i, (n, keep) in enumerate(groups):  # forward
        live += n
        peak = max(peak, live)
        gathered[i] = keep
        live -= 0 if keep else n
    for i in reversed(range(len(groups))):  # backward: gather the group (prefetched, or now), prefetch the one before
        for j in (i, i - 1):
            if j >= 0 and not gathered[j]:
                gathered[j] = True
                live += groups[j][0]
        peak = max(peak, live)
        live -= groups[i][0]
        gathered[i] = False
    return peak


def _plan_calls(plan: Sequence[str]) -> int:
    """All-gathers per training step: one for the root's group, one per kept group, two per resharded group."""
    return 1 + sum({"root": 0, "keep": 1, "reshard": 2}[choice] for choice in plan)


def _model_counts(model, world_size: int = 1) -> tuple[int, list[int], list]:
    """Parameter counts, each parameter's rows padded up to a multiple of ``world_size`` as FSDP2 gathers them: the
    root's own (embed, head), each block's; and every parameter's shape."""

    def padded(module) -> int:
        return sum(-(-p.shape[0] // world_size) * world_size * math.prod(p.shape[1:]) for p in module.parameters())

    blocks = [padded(block) for block in model.blocks]
    return padded(model) - sum(blocks), blocks, [tuple(p.shape) for p in model.parameters()]


def _padded_shard_bytes(shapes: Sequence[tuple], world_size: int) -> int:
    """Bytes a rank stores of float32 parameters of these shapes under FSDP2: rows padded up to a multiple of N."""
    total = 0
    for shape in shapes:
        rows, rest = shape[0], math.prod(shape[1:])
        total += FLOAT_BYTES * -(-rows // world_size) * rest
    return total


def _best_plan(case: FsdpCase, world_size: int) -> tuple[tuple[str, ...], int, int] | None:
    """The plan with the fewest all-gathers per step whose shards plus peak gathered bytes fit ``case.cap`` (ties: the
    lower peak); (plan, calls, peak memory), or None when nothing fits. Every one of 3 ** blocks plans is tried."""
    import itertools

    root, blocks, shapes = _model_counts(block_net(case), world_size)
    shards = _padded_shard_bytes(shapes, world_size)
    best = None
    for plan in itertools.product(CHOICES, repeat=len(blocks)):
        memory = shards + _plan_peak(root, blocks, plan)
        if memory <= case.cap:
            key = (_plan_calls(plan), memory)
            if best is None or key < best[0]:
                best = (key, plan)
    return None if best is None else (best[1], best[0][0], best[0][1])


def _fsdp_shard(model, mesh, cap_bytes: int):
    """Search every plan (root / keep / reshard per block) for the fewest all-gathers whose shards plus peak gathered
    bytes fit ``cap_bytes``; apply it with bfloat16 compute and float32 reductions, the blocks first, the root last."""
    import itertools

    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    n = mesh.size()
    root, blocks, shapes = _model_counts(model)
    shards = _padded_shard_bytes(shapes, n)
    fits = [plan for plan in itertools.product(CHOICES, repeat=len(blocks))
            if shards + _plan_peak(root, blocks, plan) <= cap_bytes]
    plan = min(fits or [("reshard",) * len(blocks)], key=lambda p: (_plan_calls(p), _plan_peak(root, blocks, p)))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block, choice in zip(model.blocks, plan):
        if choice != "root":
            fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=choice == "reshard")
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def fsdp_shard(model, mesh, cap_bytes: int):
    """The model answer of lesson 15's Exercise 2 (a thin wrapper, so that ``checks.off_limits`` can block it)."""
    return _fsdp_shard(model, mesh, cap_bytes)


def _case_batches(case: FsdpCase, world_size: int) -> list:
    """(x, y) of the whole batch for every step: rank r takes rows r * rows ... (r + 1) * rows."""
    import torch

    g = torch.Generator().manual_seed(3000 + case.seed)
    return [(torch.randn(case.rows * world_size, case.d_in, generator=g),
             torch.randn(case.rows * world_size, case.d_out, generator=g)) for _ in range(case.steps)]


def _bf16_reference(case: FsdpCase, batches: list, world_size: int, device: object = "cpu") -> dict:
    """What FSDP2 with bfloat16 parameters and float32 reduction computes, in one process: float32 master weights;
    each step, a bfloat16 copy computes every rank's gradient on its rows, the float32 casts are averaged, Adam. On
    the ranks' device, so that the bfloat16 kernels are the same ones; the weights come back on the CPU."""
    import copy

    import torch

    master = block_net(case).to(device)
    adam = torch.optim.Adam(master.parameters(), lr=case.lr)
    for x, y in batches:
        low = copy.deepcopy(master).to(torch.bfloat16)
        total = [torch.zeros_like(p) for p in master.parameters()]
        for r in range(world_size):
            low.zero_grad()
            rows = slice(r * case.rows, (r + 1) * case.rows)
            out = low(x[rows].to(device, torch.bfloat16)).float()
            torch.nn.functional.mse_loss(out, y[rows].to(device)).backward()
            for t, p in zip(total, low.parameters()):
                t += p.grad.float()
        for p, t in zip(master.parameters(), total):
            p.grad = t / world_size
        adam.step()
    return {name: p.detach().cpu() for name, p in master.named_parameters()}


class _GatheredBytes:
    """What FSDP2 holds gathered, read from its own parameter groups: a group counts from the moment its all-gather
    is issued (prefetches included) until it is resharded, at the bytes of its all-gather output (padded, in the
    gathered dtype). Patches FSDPParamGroup's unshard and reshard steps for the ``with`` block (worker processes)."""

    def __enter__(self) -> _GatheredBytes:
        from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

        self.live: dict[int, int] = {}
        self.peak = 0
        self.originals = {name: getattr(FSDPParamGroup, name)
                          for name in ("unshard", "_to_sharded", "_to_sharded_post_forward")}
        probe, unshard = self, self.originals["unshard"]

        def counted_unshard(group, async_op: bool = False):
            unshard(group, async_op)
            if group._all_gather_result is not None and id(group) not in probe.live:
                world = group._all_gather_process_group.size()
                probe.live[id(group)] = sum(
                    fp.padded_sharded_param_size.numel() * world * (fp.param_dtype or fp.orig_dtype).itemsize
                    for fp in group.fsdp_params)
                probe.peak = max(probe.peak, sum(probe.live.values()))

        def resharding(original):
            def counted(group):
                original(group)
                probe.live.pop(id(group), None)
            return counted

        FSDPParamGroup.unshard = counted_unshard
        FSDPParamGroup._to_sharded = resharding(self.originals["_to_sharded"])
        FSDPParamGroup._to_sharded_post_forward = resharding(self.originals["_to_sharded_post_forward"])
        return self

    def __exit__(self, *exc) -> None:
        from torch.distributed.fsdp._fully_shard._fsdp_param_group import FSDPParamGroup

        for name, original in self.originals.items():
            setattr(FSDPParamGroup, name, original)


def _fsdp_train(model, case: FsdpCase, batches: list, rank: int, device, report: dict) -> None:
    """Adam on the sharded model, this rank's rows of each batch: collectives by phase, gathered bytes, output dtype,
    full weights."""
    import torch

    adam = torch.optim.Adam(model.parameters(), lr=case.lr)
    rows = slice(rank * case.rows, (rank + 1) * case.rows)
    for x, y in batches:
        with CommCounter() as comm, _GatheredBytes() as gathered:
            with comm.phase("forward"):
                out = model(x[rows].to(device))
            report["dtype"] = str(out.dtype).replace("torch.", "")
            with comm.phase("backward"):
                torch.nn.functional.mse_loss(out.float(), y[rows].to(device)).backward()
        with comm.phase("step"):
            adam.step()
        adam.zero_grad()
        report["steps"].append({"gathered": gathered.peak, **{phase: comm.summary(phase)
                                                               for phase in ("forward", "backward")}})
    with torch.no_grad():
        report["weights"] = {name: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu()
                             for name, p in model.named_parameters()}


def plan_worker(rank: int, world_size: int, case: FsdpCase, plans: Sequence[tuple[str, ...]]) -> list[tuple[int, int]]:
    """Apply each plan (one of :data:`CHOICES` per block) to the case's model and train one step: (the peak bytes
    FSDP2 held gathered, the all-gathers of forward and backward) per plan, measured, for comparing with
    :func:`_plan_peak` and :func:`_plan_calls`."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    device = rank_device(rank)
    measured = []
    with process_group(rank, world_size):
        mesh = init_device_mesh(device.type, (world_size,))
        for plan in plans:
            model = block_net(case).to(device)
            policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
            for block, choice in zip(model.blocks, plan):
                if choice != "root":
                    fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=choice == "reshard")
            fully_shard(model, mesh=mesh, mp_policy=policy)
            report: dict = {"steps": []}
            _fsdp_train(model, case, _case_batches(case, world_size), rank, device, report)
            step = report["steps"][-1]
            measured.append((step["gathered"], sum(step[phase].get("all_gather", {"calls": 0})["calls"]
                                                   for phase in ("forward", "backward"))))
    return measured


def fsdp_grader_worker(rank: int, world_size: int, shard_fn: Callable, cases: Sequence[FsdpCase]) -> list[dict]:
    """Shard each case's model with ``shard_fn(model, mesh, case.cap)``, train it with Adam on this rank's rows;
    report the modules FSDP wraps, the bytes of this rank's shards, the peak gathered bytes and the collectives of
    each step, the output dtype and the largest difference from :func:`_bf16_reference`."""
    import torch
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule

    device = rank_device(rank)
    reports = []
    with process_group(rank, world_size):
        mesh = init_device_mesh(device.type, (world_size,))
        for case in cases:
            batches = _case_batches(case, world_size)
            expected = _bf16_reference(case, batches, world_size, device)
            model = block_net(case).to(device)
            full_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
            returned = shard_fn(model, mesh, case.cap)
            model = returned if isinstance(returned, torch.nn.Module) else model
            wrapped = [name or "(root)" for name, module in model.named_modules() if isinstance(module, FSDPModule)]
            sharded = all(hasattr(p, "to_local") for p in model.parameters())
            shards = _padded_shard_bytes([tuple(p.shape) for p in model.parameters()], world_size) if sharded else \
                full_bytes
            report = {"wrapped": wrapped, "shard_bytes": shards, "full_bytes": full_bytes, "sharded": sharded,
                      "dtype": "", "steps": [], "difference": math.inf, "error": ""}
            reports.append(report)
            try:  # every rank fails alike here (the same code on the same shapes): report it, so that what is
                # wrong with the wrapping is said first
                _fsdp_train(model, case, batches, rank, device, report)
            except Exception as error:  # noqa: BLE001 - the learner's model may raise anything; said in a check
                report["error"] = f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
                break
            weights = report.pop("weights")
            report["difference"] = max(float((weights[name] - value).abs().max()) if name in weights else math.inf
                                       for name, value in expected.items())
    return reports


def _fsdp_check_case(case: FsdpCase, rank: int, report: dict, world_size: int, quiet: bool) -> None:
    """The checks of one case on one rank: everything sharded, the precision, memory under the cap, the fewest
    all-gathers, the weights."""
    from gpucourse.checks import check

    where = f"{world_size} ranks, {case.label()}, rank {rank}"
    quiet = quiet or rank > 0  # ticks for rank 0 only
    check(f"{where}: the root is sharded (an FSDPModule) and every parameter is a DTensor",
          report["sharded"] and "(root)" in report["wrapped"], True,
          hint="call fully_shard(model, ...) on the root last, after the blocks you give groups of their own: it "
               "takes every parameter no inner call took (embed, head and the blocks you leave to it)", quiet=quiet)
    check(f"{where}: training the sharded model (forward, backward, Adam) raised nothing", report["error"] or "nothing",
          "nothing", hint="every fully_shard call needs the same mp_policy, the root's too", quiet=quiet)
    check(f"{where}: the model's output dtype (compute in bfloat16)", report["dtype"], "bfloat16",
          hint="fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, "
               "reduce_dtype=torch.float32)) on every call", quiet=quiet)
    best = _best_plan(case, world_size)
    for number, step in enumerate(report["steps"], 1):
        shown = not quiet and number == 1
        scatters = step["backward"].get("reduce_scatter", {"calls": 0, "bytes": 0})
        per = scatters["bytes"] / max(report["full_bytes"] // FLOAT_BYTES, 1)
        check(f"{where}, step {number}: bytes reduce-scattered in backward per parameter (yours: {per:.2f}; float32: 4 "
              "plus padding)", 4 <= per < 6, True, hint="reduce_dtype=torch.float32: the gradients are summed over "
              "the ranks in float32", quiet=not shown)
        memory = report["shard_bytes"] + step["gathered"]
        check(f"{where}, step {number}: parameter memory at its peak, float32 shards {report['shard_bytes']:,} + "
              f"gathered {step['gathered']:,} = {memory:,} bytes, within the cap of {case.cap:,}",
              memory <= case.cap, True,
              hint="fewer blocks left to the root's group (gathered all step long) or kept gathered "
                   "(reshard_after_forward=False); in backward FSDP also gathers the group before the current one "
                   f"(prefetch); the shards are 1/N of the float32 model, N = mesh.size() = {world_size}",
              quiet=not shown)
        gathers = (step["forward"].get("all_gather", {"calls": 0})["calls"]
                   + step["backward"].get("all_gather", {"calls": 0})["calls"])
        fewest = best[1] if best else 0
        check(f"{where}, step {number}: all-gathers in forward and backward (yours: {gathers}; the fewest that fit the "
              f"cap: {fewest})", gathers <= fewest, True,
              hint="every block given its own resharded group costs 2 all-gathers; a kept one "
                   "(reshard_after_forward=False) 1; one left to the root's group none of its own: use the room the "
                   "cap leaves, computed for this model and this world size", quiet=not shown)
    check(f"{where}: parameters after {case.steps} Adam steps equal the bfloat16-emulating reference within "
          f"{FSDP_ATOL:g} (largest difference yours: {report['difference']:.2g})",
          report["difference"] <= FSDP_ATOL, True,
          hint="return the model, sharded once (blocks, then the root) with the mixed-precision policy above",
          quiet=quiet)


def fsdp_check(shard_fn: Callable, cases: Sequence[FsdpCase], *, shown: int = 1, world_size: int = 2,
               timeout_s: float = 120.0) -> None:
    """Grade a learner's ``shard_fn(model, mesh, cap_bytes)``: one launch of ``world_size`` ranks runs every case (see
    :func:`fsdp_grader_worker` and :func:`_fsdp_check_case`); the first ``shown`` cases print ticks."""
    from gpucourse.checks import _fail
    from gpucourse.parallel.workers import WorkerError, WorkerTimeout

    if not callable(shard_fn):
        raise TypeError(f"shard_fn must be a function, got {type(shard_fn).__name__}")
    cases = list(cases)
    if not cases or not all(isinstance(case, FsdpCase) for case in cases):
        raise TypeError("cases must be a non-empty list of FsdpCase")
    shown, world_size = non_negative_int("shown", shown), positive_int("world_size", world_size)
    name = f"shard on {world_size} ranks"
    try:
        results = launch(fsdp_grader_worker, world_size, (shard_fn, cases), timeout_s=timeout_s)
    except WorkerError as error:
        if error.summary.startswith("OffLimits"):
            _fail(name, error.summary.split(": ", 1)[1], "write the fully_shard calls yourself")
        _fail(name, f"rank {error.rank} raised {error.summary[:300]}",
              "call fully_shard(module, mesh=mesh, mp_policy=..., reshard_after_forward=...) on the blocks you "
              "choose, then fully_shard(model, ...), and return the model; if no wrapping fits by your count, "
              "count the shards for this mesh: 1/mesh.size() of the float32 model")
    except WorkerTimeout as error:
        _fail(name, f"the ranks did not finish ({error})", "every rank must shard the same modules in the same order")
    for index, case in enumerate(cases):
        for rank, reports in enumerate(results):
            _fsdp_check_case(case, rank, reports[index], world_size, quiet=index >= shown)


def __getattr__(name: str):
    """``Block`` and ``BlockNet`` are made on first use (they need torch), so that unpickling finds them here."""
    if name in ("Block", "BlockNet"):
        return dict(zip(("Block", "BlockNet"), _block_classes()))[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
