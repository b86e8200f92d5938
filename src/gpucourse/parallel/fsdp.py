"""FSDP2 in lesson 15_sharding: the learner's exercise (a wrap policy and mixed precision), its grader, a demonstration.

:func:`fsdp_shard` is the model answer of the FSDP2 exercise (``fully_shard`` per block of a :func:`block_net`, then
the root, bfloat16 compute and float32 reductions; a thin wrapper, so that ``checks.off_limits`` can block it);
:func:`fsdp_check` grades a learner's version on N ranks (one launch for all its cases) against one process that
repeats the same bfloat16 arithmetic. :func:`fsdp_worker` shards an MLP with ``fully_shard`` and counts its
collectives by phase, for the lesson's demonstration. PyTorch is imported only by the functions that need it.
"""

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


# Exercise 2: FSDP2 written by the learner (fully_shard per block, then the root, in bfloat16 mixed precision).

FSDP_ATOL = 1e-4
"""How far (absolute) a parameter may be from the bfloat16-emulating reference after the steps of one case: the
reference repeats the same bfloat16 arithmetic, so only the order of the float32 sums over the ranks differs."""


@dataclass(frozen=True)
class FsdpCase:
    """One graded case of the FSDP2 exercise: a :class:`BlockNet`'s sizes and seed, the rows per rank, Adam steps."""

    d_in: int = 6
    width: int = 10
    d_out: int = 3
    blocks: int = 2
    seed: int = 0
    rows: int = 4
    steps: int = 3
    lr: float = 1e-2

    def __post_init__(self) -> None:
        """Reject sizes, counts or a learning rate out of range."""
        for name in ("d_in", "width", "d_out", "blocks", "rows", "steps"):
            positive_int(name, getattr(self, name))
        non_negative_int("seed", self.seed)
        positive_number("lr", self.lr)

    def label(self) -> str:
        """A short description for check messages."""
        return (f"BlockNet {self.d_in} -> {self.blocks} x {self.width} -> {self.d_out} (seed {self.seed}, "
                f"{self.steps} Adam steps, lr {self.lr:g})")


def _block_classes():
    """BlockNet and its Block, made once (torch imported only when needed); module-level names so they pickle."""
    import torch

    global Block, BlockNet

    class Block(torch.nn.Module):
        """A residual MLP block: x + fc2(gelu(fc1(x))), fc1 widening by 2."""

        def __init__(self, width: int) -> None:
            super().__init__()
            self.fc1, self.fc2 = torch.nn.Linear(width, 2 * width), torch.nn.Linear(2 * width, width)

        def forward(self, x):
            return x + self.fc2(torch.nn.functional.gelu(self.fc1(x)))

    class BlockNet(torch.nn.Module):
        """embed -> blocks -> head: the root holds embed and head, each block its own two Linear layers."""

        def __init__(self, d_in: int, width: int, d_out: int, blocks: int) -> None:
            super().__init__()
            self.embed = torch.nn.Linear(d_in, width)
            self.blocks = torch.nn.ModuleList(Block(width) for _ in range(blocks))
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
    return net(case.d_in, case.width, case.d_out, case.blocks)


def _fsdp_shard(model, mesh):
    """FSDP2 with bfloat16 compute and float32 gradient reduction: each block wrapped, then the root."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    return model


def fsdp_shard(model, mesh):
    """The model answer of lesson 15's Exercise 2 (a thin wrapper, so that ``checks.off_limits`` can block it)."""
    return _fsdp_shard(model, mesh)


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


def _fsdp_train(model, case: FsdpCase, batches: list, rank: int, device, report: dict) -> None:
    """Adam on the sharded model, this rank's rows of each batch: collectives by phase, output dtype, full weights."""
    import torch

    adam = torch.optim.Adam(model.parameters(), lr=case.lr)
    rows = slice(rank * case.rows, (rank + 1) * case.rows)
    for x, y in batches:
        with CommCounter() as comm:
            with comm.phase("forward"):
                out = model(x[rows].to(device))
            report["dtype"] = str(out.dtype).replace("torch.", "")
            with comm.phase("backward"):
                torch.nn.functional.mse_loss(out.float(), y[rows].to(device)).backward()
            with comm.phase("step"):
                adam.step()
        adam.zero_grad()
        report["steps"].append({phase: comm.summary(phase) for phase in ("forward", "backward", "step")})
    with torch.no_grad():
        report["weights"] = {name: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().cpu()
                             for name, p in model.named_parameters()}


def fsdp_grader_worker(rank: int, world_size: int, shard_fn: Callable, cases: Sequence[FsdpCase]) -> list[dict]:
    """Shard each case's model with ``shard_fn(model, mesh)``, train it with Adam on this rank's rows; report the
    modules FSDP wraps, local bytes, collectives by phase, the output dtype and the largest difference from
    :func:`_bf16_reference`."""
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
            returned = shard_fn(model, mesh)
            model = returned if isinstance(returned, torch.nn.Module) else model
            wrapped = [name or "(root)" for name, module in model.named_modules() if isinstance(module, FSDPModule)]
            local = [p.to_local() if hasattr(p, "to_local") else p for p in model.parameters()]
            report = {"wrapped": wrapped, "local_bytes": sum(t.numel() * t.element_size() for t in local),
                      "full_bytes": full_bytes, "sharded": all(hasattr(p, "to_local") for p in model.parameters()),
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
    """The checks of one case on one rank: what is wrapped, the shards, the precision, the collectives, the weights."""
    from gpucourse.checks import check

    where = f"{world_size} ranks, {case.label()}, rank {rank}"
    quiet = quiet or rank > 0  # ticks for rank 0 only
    expected = ["(root)"] + [f"blocks.{i}" for i in range(case.blocks)]
    check(f"{where}: modules fully_shard wrapped (FSDPModule), the root and every block only",
          ", ".join(report["wrapped"]) or "none", ", ".join(expected),
          hint="the wrap policy: fully_shard(block, mesh=mesh, mp_policy=...) for each block in model.blocks (not "
               "each Linear), then fully_shard(model, ...) on the root, last: the root's call takes embed and head",
          quiet=quiet)
    count = report["full_bytes"] // FLOAT_BYTES
    padded = FLOAT_BYTES * count + FLOAT_BYTES * world_size * (2 * case.width + case.width + case.d_out) * (
        2 + 2 * case.blocks)  # at most N - 1 padding rows of the widest row per parameter
    check(f"{where}: every parameter a DTensor and this rank's shards 1/{world_size} of the model (yours: "
          f"{report['local_bytes']:,} bytes; all: {report['full_bytes']:,})",
          report["sharded"] and report["local_bytes"] * world_size <= padded, True,
          hint="every parameter must belong to a fully_shard call: the blocks', and the root's for embed and head",
          quiet=quiet)
    check(f"{where}: training the sharded model (forward, backward, Adam) raised nothing", report["error"] or "nothing",
          "nothing", hint="every module that computes must be sharded with the same mp_policy: the root's call "
          "covers embed and head, which would otherwise compute in float32 on bfloat16 activations", quiet=quiet)
    check(f"{where}: the model's output dtype (compute in bfloat16)", report["dtype"], "bfloat16",
          hint="fully_shard(..., mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16, "
               "reduce_dtype=torch.float32)) on every call, the root's too", quiet=quiet)
    for number, step in enumerate(report["steps"], 1):
        shown = not quiet and rank == 0 and number == 1
        gathers = step["forward"].get("all_gather", {"calls": 0, "bytes": 0})
        check(f"{where}, step {number}: all-gathers in forward, one per wrapped group (yours: {gathers['calls']})",
              gathers["calls"], 1 + case.blocks,
              hint="one fully_shard per block and one on the root: each gathers its own parameters once in forward",
              quiet=not shown)
        per = gathers["bytes"] / max(count, 1)
        check(f"{where}, step {number}: bytes gathered in forward per parameter (yours: {per:.2f}; bfloat16: 2 plus "
              "padding)", 2 <= per < 3, True, hint="param_dtype=torch.bfloat16: FSDP gathers the parameters already "
              "cast, half the bytes of float32", quiet=not shown)
        scatters = step["backward"].get("reduce_scatter", {"calls": 0, "bytes": 0})
        per = scatters["bytes"] / max(count, 1)
        check(f"{where}, step {number}: bytes reduce-scattered in backward per parameter (yours: {per:.2f}; float32: 4 "
              "plus padding)", 4 <= per < 6, True, hint="reduce_dtype=torch.float32: the gradients are summed over "
              "the ranks in float32, not in bfloat16", quiet=not shown)
    check(f"{where}: parameters after {case.steps} Adam steps equal the bfloat16-emulating reference within "
          f"{FSDP_ATOL:g} (largest difference yours: {report['difference']:.2g})",
          report["difference"] <= FSDP_ATOL, True,
          hint="return the model; shard it once with fully_shard (blocks, then the root) and the policy above",
          quiet=quiet)


def fsdp_check(shard_fn: Callable, cases: Sequence[FsdpCase], *, shown: int = 1, world_size: int = 2,
               timeout_s: float = 120.0) -> None:
    """Grade a learner's ``shard_fn(model, mesh)``: one launch of ``world_size`` ranks runs every case (see
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
              "call fully_shard(module, mesh=mesh, mp_policy=...) on each block, then on the model, and return it")
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
