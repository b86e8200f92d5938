"""Tensor parallelism (Megatron-style) for an MLP y = fc2(gelu(fc1(x))) on real worker processes, forward and backward.

Column-parallel ``fc1``: rank r keeps rows ``r*h/N .. (r+1)*h/N`` of ``fc1.weight`` (hidden x d) and of ``fc1.bias``
and computes its slice of the hidden activations with no communication (gelu is elementwise). Row-parallel ``fc2``:
rank r keeps the same columns of ``fc2.weight`` (d_out x hidden); each rank's partial output ``h_r @ W2_r.T`` is
summed over the ranks by ONE all-reduce of batch x d_out elements, and ``fc2.bias`` (kept whole on every rank) is
added once, after the sum. Each rank holds 1/N of the weights. Autograd needs Megatron's two conjugate operators:
``f`` (identity forward, all-reduce of the gradient of x backward: every rank's fc1 slice contributes a part of it)
before fc1, and ``g`` (all-reduce forward, identity backward: every rank already holds the whole gradient of y)
after fc2. Taught in 16_model_parallelism (*Tensor parallelism*):

- :func:`shard_mlp` and :func:`tp_forward` (with f and g as ``torch.autograd.Function``): the exercise's model answer;
- :func:`check_tensor_parallel_mlp`: the exercise's grader (one launch per world size, every case, forward and
  backward: the output, the gradient of x and of every local weight, the collectives of each pass counted);
- :func:`tp_demo_worker` / :func:`run_tp_demo`: the same MLP through PyTorch's ``parallelize_module``
  (``ColwiseParallel`` + ``RowwiseParallel``) beside the hand-written version.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Sequence

from gpucourse._validate import non_negative_int, one_of, positive_int, positive_number

DTYPES = ("float32", "float64")
"""The dtypes a grading case may use."""

TOLERANCE = {"float32": (1e-5, 1e-5), "float64": (1e-10, 1e-12)}
"""(rtol, atol) of the output check per dtype: the ranks sum the same products in another order."""

GRAD_TOLERANCE = {"float32": (1e-4, 1e-5), "float64": (1e-9, 1e-11)}
"""(rtol, atol) of the gradient checks per dtype (sums of products over the batch, in another order)."""

VISIBLE_CASES: tuple[tuple[int, int, int, int, str], ...] = ((8, 16, 4, 3, "float64"),)
"""The visible test's case: (d, hidden, d_out, batch, dtype)."""


def _check_case(d: int, hidden: int, d_out: int, world_size: int) -> tuple[int, int, int, int]:
    """Validated (d, hidden, d_out, world_size); ValueError naming world_size if it does not divide hidden."""
    d, hidden, d_out = positive_int("d", d), positive_int("hidden", hidden), positive_int("d_out", d_out)
    world_size = positive_int("world_size", world_size)
    if hidden % world_size:
        raise ValueError(f"world_size must divide hidden ({hidden}) so every rank gets hidden/world_size units, "
                         f"got world_size={world_size}")
    return d, hidden, d_out, world_size


def make_mlp(d: int, hidden: int, d_out: int, *, seed: int = 0, dtype: str = "float32") -> tuple:
    """(fc1, fc2): the two seeded nn.Linear layers of the MLP (the same on every rank for the same seed)."""
    import torch

    d, hidden, d_out = positive_int("d", d), positive_int("hidden", hidden), positive_int("d_out", d_out)
    seed, dtype = non_negative_int("seed", seed), one_of("dtype", dtype, DTYPES)
    generator = torch.Generator().manual_seed(seed)
    layers = []
    for fan_in, fan_out in ((d, hidden), (hidden, d_out)):
        layer = torch.nn.Linear(fan_in, fan_out, dtype=getattr(torch, dtype))
        with torch.no_grad():
            layer.weight.copy_(torch.randn(fan_out, fan_in, generator=generator) / fan_in ** 0.5)
            layer.bias.copy_(torch.randn(fan_out, generator=generator))
        layers.append(layer)
    return tuple(layers)


def _reference_forward(x: object, fc1: object, fc2: object) -> object:
    """The unsharded MLP's output fc2(gelu(fc1(x)))."""
    import torch

    with torch.no_grad():
        return fc2(torch.nn.functional.gelu(fc1(x)))


def _shard_mlp(fc1: object, fc2: object, rank: int, world_size: int) -> tuple:
    """Rank ``rank``'s layers: rows of fc1 (weight and bias), columns of fc2's weight, fc2's whole bias; copies."""
    import torch

    if not isinstance(fc1, torch.nn.Linear) or not isinstance(fc2, torch.nn.Linear):
        raise TypeError(f"fc1 and fc2 must be torch.nn.Linear layers, got {type(fc1).__name__} and "
                        f"{type(fc2).__name__}")
    d, hidden, d_out, world_size = _check_case(fc1.in_features, fc1.out_features, fc2.out_features, world_size)
    if fc2.in_features != hidden:
        raise ValueError(f"fc2 must take fc1's {hidden} outputs, got fc2.in_features={fc2.in_features}")
    rank = non_negative_int("rank", rank)
    if rank >= world_size:
        raise ValueError(f"rank must be < world_size ({world_size}), got {rank}")
    part = hidden // world_size
    rows = slice(rank * part, (rank + 1) * part)
    dtype = fc1.weight.dtype
    fc1_local = torch.nn.Linear(d, part, bias=fc1.bias is not None, dtype=dtype, device=fc1.weight.device)
    fc2_local = torch.nn.Linear(part, d_out, bias=fc2.bias is not None, dtype=dtype, device=fc2.weight.device)
    with torch.no_grad():
        fc1_local.weight.copy_(fc1.weight[rows])          # column-parallel: this rank's output features (rows)
        fc2_local.weight.copy_(fc2.weight[:, rows])       # row-parallel: the same hidden units (columns)
        if fc1.bias is not None:
            fc1_local.bias.copy_(fc1.bias[rows])
        if fc2.bias is not None:
            fc2_local.bias.copy_(fc2.bias)                # whole, added once after the all-reduce
    return fc1_local, fc2_local


@functools.cache
def _conjugate_operators() -> tuple[type, type]:
    """Megatron's f and g as autograd functions (built once, on first use: importing torch stays lazy)."""
    import torch

    class CopyToRanks(torch.autograd.Function):
        """f: the identity forward; backward, the gradient of x summed over the ranks."""

        @staticmethod
        def forward(ctx, x, dist):
            ctx.dist = dist
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            grad = grad.clone()                # autograd may hand the same tensor to another consumer
            ctx.dist.all_reduce(grad)
            return grad, None

    class ReduceFromRanks(torch.autograd.Function):
        """g: the partial outputs summed over the ranks forward; backward, the identity."""

        @staticmethod
        def forward(ctx, partial, dist):
            total = partial.clone()
            dist.all_reduce(total)
            return total

        @staticmethod
        def backward(ctx, grad):
            return grad, None

    return CopyToRanks, ReduceFromRanks


def _tp_forward(x: object, fc1_local: object, fc2_local: object, dist: object) -> object:
    """f, gelu(fc1_local(x)) with no communication, its partial fc2 product summed by g (one all-reduce), bias once."""
    import torch

    copy_to_ranks, reduce_from_ranks = _conjugate_operators()
    hidden = torch.nn.functional.gelu(fc1_local(copy_to_ranks.apply(x, dist)))
    partial = torch.nn.functional.linear(hidden, fc2_local.weight)   # no bias yet: it would be summed N times
    total = reduce_from_ranks.apply(partial, dist)                   # SUM over ranks: batch x d_out elements
    return total if fc2_local.bias is None else total + fc2_local.bias


def shard_mlp(fc1: object, fc2: object, rank: int, world_size: int) -> tuple:
    """The exercise's model answer: rank ``rank``'s (fc1_local, fc2_local) of a column- then row-parallel MLP."""
    return _shard_mlp(fc1, fc2, rank, world_size)


def tp_forward(x: object, fc1_local: object, fc2_local: object, dist: object) -> object:
    """The exercise's model answer: this rank's tensor-parallel forward (f and g inside, so backward works too)."""
    return _tp_forward(x, fc1_local, fc2_local, dist)


# The grader: checks run inside each rank; a report per case says what is wrong and how to fix it.

def _storage_holds_more(tensor: object) -> bool:
    """True if ``tensor`` is a view on a bigger storage (e.g. a slice of the full weight)."""
    return tensor.untyped_storage().nbytes() > tensor.numel() * tensor.element_size()


def _which_rows(local: object, full: object) -> str:
    """Name the rows of ``full`` that ``local`` equals, for a failure message ('' if no block matches)."""
    import torch

    count = local.shape[0]
    for start in range(0, full.shape[0] - count + 1):
        if torch.equal(local, full[start:start + count]):
            return f"rows {start}..{start + count - 1}"
    return ""


def _check_layers(fc1: object, fc2: object, fc1_local: object, fc2_local: object, rank: int,
                  world_size: int) -> tuple[str, str] | None:
    """(problem, hint) if this rank's layers are not its slices of fc1 and fc2, else None."""
    import torch

    hidden, d, d_out = fc1.out_features, fc1.in_features, fc2.out_features
    part = hidden // world_size
    lo, hi = rank * part, (rank + 1) * part
    for name, layer in (("fc1_local", fc1_local), ("fc2_local", fc2_local)):
        if not isinstance(getattr(layer, "weight", None), torch.Tensor):
            return (f"{name} is {type(layer).__name__}, expected a torch.nn.Linear",
                    "return two nn.Linear layers: (fc1_local, fc2_local)")
    w1, w2 = fc1_local.weight.detach(), fc2_local.weight.detach()
    if tuple(w1.shape) != (part, d):
        return (f"on rank {rank} of {world_size}, fc1_local.weight has shape {tuple(w1.shape)}, expected "
                f"({part}, {d}): hidden/N = {part} rows of fc1.weight ({hidden} x {d}), all {d} input columns",
                "column-parallel fc1 splits its OUTPUT features, i.e. the rows of weight: "
                "fc1.weight[rank*h//N:(rank+1)*h//N]")
    if tuple(w2.shape) != (d_out, part):
        return (f"on rank {rank} of {world_size}, fc2_local.weight has shape {tuple(w2.shape)}, expected "
                f"({d_out}, {part}): hidden/N = {part} columns of fc2.weight ({d_out} x {hidden})",
                "row-parallel fc2 splits its INPUT features, i.e. the columns of weight: "
                "fc2.weight[:, rank*h//N:(rank+1)*h//N]")
    for name, tensor in (("fc1_local.weight", w1), ("fc2_local.weight", w2)):
        if tensor.dtype != fc1.weight.dtype:
            return (f"{name} is {str(tensor.dtype).removeprefix('torch.')}, expected "
                    f"{str(fc1.weight.dtype).removeprefix('torch.')} (the full layers' dtype)",
                    "create the local layers with dtype=fc1.weight.dtype (and device=fc1.weight.device)")
    if not torch.equal(w1, fc1.weight.detach()[lo:hi]):
        found = _which_rows(w1, fc1.weight.detach())
        return (f"rank {rank}'s fc1_local.weight holds {found or 'other values than any rows'} of fc1.weight, "
                f"expected rows {lo}..{hi - 1}", "rank r keeps rows r*h//N to (r+1)*h//N - 1 (use the rank)")
    if fc1.bias is not None and (fc1_local.bias is None or not torch.equal(fc1_local.bias.detach(),
                                                                            fc1.bias.detach()[lo:hi])):
        return (f"rank {rank}'s fc1_local.bias is not fc1.bias[{lo}:{hi}]",
                "fc1's bias belongs to its output features: slice it like the rows of fc1.weight")
    if not torch.equal(w2, fc2.weight.detach()[:, lo:hi]):
        found = _which_rows(w2.T, fc2.weight.detach().T).replace("rows", "columns")
        return (f"rank {rank}'s fc2_local.weight holds {found or 'other values than any columns'} of fc2.weight, "
                f"expected columns {lo}..{hi - 1}",
                "fc2 must take the same hidden units as this rank's fc1 rows: fc2.weight[:, lo:hi]")
    if fc2.bias is not None and (fc2_local.bias is None or not torch.equal(fc2_local.bias.detach(),
                                                                            fc2.bias.detach())):
        return (f"rank {rank}'s fc2_local.bias is not the whole fc2.bias ({d_out} values)",
                "keep fc2's whole bias on every rank and add it once, after the all-reduce")
    for name, tensor in (("fc1_local.weight", w1), ("fc2_local.weight", w2)):
        if _storage_holds_more(tensor):
            return (f"rank {rank}'s {name} is a view of a bigger tensor ({tensor.untyped_storage().nbytes():,} "
                    f"bytes for {tensor.numel() * tensor.element_size():,} bytes of weights): the rank still "
                    "holds the full matrix", "copy the slice (.clone(), or copy_ into a new nn.Linear)")
    return None


def _check_output(y: object, expected: object, bias: object, world_size: int, dtype: str) -> tuple[str, str] | None:
    """(problem, hint) if y is not the unsharded MLP's output, naming the typical mistakes, else None."""
    import torch

    rtol, atol = TOLERANCE[dtype]
    if not isinstance(y, torch.Tensor):
        return (f"tp_forward returned {type(y).__name__}, expected a tensor of shape {tuple(expected.shape)}",
                "return y, the full output (batch x d_out), on every rank")
    y = y.detach().to(expected.dtype)
    if tuple(y.shape) != tuple(expected.shape):
        return (f"y has shape {tuple(y.shape)}, expected {tuple(expected.shape)} (batch x d_out)",
                "after the all-reduce every rank holds the full output: no slicing or gathering needed")
    if torch.allclose(y, expected, rtol=rtol, atol=atol):
        return None
    if bias is not None:
        partial_sum = expected - bias
        if torch.allclose(y, expected + (world_size - 1) * bias, rtol=rtol, atol=atol):
            return (f"y is the right output plus {world_size - 1} x fc2.bias: the bias was summed over the "
                    f"{world_size} ranks", "add fc2's bias once, after the all-reduce (F.linear without bias)")
        if torch.allclose(y, partial_sum / world_size + bias, rtol=rtol, atol=atol):
            return ("y is 1/N of the right sum (plus the bias): the all-reduce averaged the partial outputs",
                    "sum the partial outputs: dist.all_reduce(partial) (op SUM, the default), not AVG")
        if torch.allclose(y, partial_sum, rtol=rtol, atol=atol):
            return ("y is the right output without fc2's bias", "add fc2_local.bias once, after the all-reduce")
    error = float((y - expected).abs().max())
    return (f"y differs from the unsharded MLP's output by up to {error:.3g} (tolerance rtol={rtol}, atol={atol})",
            "each rank: h = gelu(fc1_local(x)); partial = h @ fc2_local.weight.T; all-reduce (SUM); + fc2 bias")


def _check_comm(counter: object, batch: int, d_out: int, itemsize: int) -> tuple[str, str] | None:
    """(problem, hint) unless the forward ran exactly one all-reduce of batch x d_out elements and nothing else."""
    expected_bytes = batch * d_out * itemsize
    others = {kind: row["calls"] for kind, row in counter.summary().items() if kind != "all_reduce"}
    if others.get("all_gather"):
        return (f"the forward ran {others['all_gather']} all-gather(s): gathering the hidden activations (or the "
                "weights) moves batch x hidden values and needs the whole fc2 on every rank",
                "row-parallel fc2 multiplies each rank's own hidden slice; only the outputs are summed")
    if others:
        return (f"the forward ran collectives other than one all-reduce: {others}",
                "tensor parallelism of an MLP needs exactly one all-reduce of the output in the forward pass")
    calls = counter.count("all_reduce")
    if calls == 0:
        return ("the forward ran no all-reduce: each rank's output covers only its hidden/N units",
                "sum the partial outputs over the ranks: dist.all_reduce(partial)")
    if calls > 1 or counter.bytes("all_reduce") != expected_bytes:
        return (f"the forward ran {calls} all-reduce(s) of {counter.bytes('all_reduce'):,} bytes in all, expected "
                f"one of batch x d_out = {expected_bytes // itemsize} elements ({expected_bytes:,} bytes)",
                "all-reduce the partial output once (g); nothing else: not x (f is the identity forward), not the "
                "hidden activations, not the weights")
    return None


def _reference_gradients(x: object, fc1: object, fc2: object, upstream: object) -> dict[str, object]:
    """The unsharded MLP's gradients of loss = sum(y * upstream): of x and of each weight and bias."""
    import torch

    x = x.detach().clone().requires_grad_(True)
    params = [fc1.weight, fc1.bias, fc2.weight, fc2.bias]
    loss = (fc2(torch.nn.functional.gelu(fc1(x))) * upstream).sum()
    grads = torch.autograd.grad(loss, [x, *params])
    return dict(zip(("x", "fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"), grads))


def _check_backward_comm(counter: object, batch: int, d: int, itemsize: int) -> tuple[str, str] | None:
    """(problem, hint) unless the backward ran exactly one all-reduce, of the gradient of x (batch x d elements)."""
    calls, expected_bytes = counter.count("all_reduce"), batch * d * itemsize
    others = {kind: row["calls"] for kind, row in counter.summary().items() if kind != "all_reduce"}
    if others:
        return (f"the backward ran collectives other than all-reduces: {others}",
                "the backward of this MLP needs one collective: f's all-reduce of the gradient of x")
    if calls == 0:
        return ("the backward ran no all-reduce: each rank's x.grad holds only the part that flows through its own "
                "h/N hidden units", "f (before fc1) is the identity forward and all-reduces the gradient backward: "
                "write it as a torch.autograd.Function and apply it to x")
    if calls > 1:
        return (f"the backward ran {calls} all-reduces ({counter.bytes('all_reduce'):,} bytes), expected one of "
                f"batch x d = {expected_bytes // itemsize} elements: g's backward must not all-reduce (every rank "
                "already holds the whole gradient of y)", "g (after fc2) all-reduces forward and is the identity "
                "backward; only f all-reduces backward")
    if counter.bytes("all_reduce") != expected_bytes:
        return (f"the backward all-reduced {counter.bytes('all_reduce'):,} bytes, expected the gradient of x: batch "
                f"x d = {expected_bytes // itemsize} elements ({expected_bytes:,} bytes)",
                "apply f to the input x itself, before fc1, so its backward sums x's gradient")
    return None


_FALLBACK_WARNING = "an autograd kernel was not registered"
"""PyTorch's warning when backward runs through an operation with no autograd formula, e.g. a raw dist.all_reduce."""


def _raw_collective(caught: Sequence[object]) -> tuple[str, str] | None:
    """(problem, hint) if PyTorch warned that backward went through a collective with no autograd formula."""
    message = next((str(w.message) for w in caught if _FALLBACK_WARNING in str(w.message)), None)
    if message is None:
        return None
    return (f"the backward went through a collective that autograd does not know ({message.split(':')[0]}): PyTorch "
            "warned that it has no autograd formula and backpropagated through it as if it were the identity. Here "
            "that happens to be g's backward, but it is not a rule you can count on (PyTorch will turn the warning "
            "into an error)", "call dist.all_reduce only inside the forward or backward of your autograd.Functions: "
            "g = ReduceFromRanks.apply(partial, dist), f = CopyToRanks.apply(x, dist)")


def _missing_gradient(grads: dict[str, object], rank: int) -> tuple[str, str] | None:
    """(problem, hint) naming the first of x and the local parameters that backward left without a gradient."""
    missing = next((name for name, grad in grads.items() if grad is None), None)
    if missing is None:
        return None
    return (f"{missing}.grad is None after loss.backward() on rank {rank}: no gradient reached it",
            "the output must stay connected to autograd's graph: no .detach(), no torch.no_grad() in tp_forward, "
            "and each autograd.Function's backward returns a gradient for its tensor input")


def _check_gradients(grads: dict[str, object], expected: dict[str, object], lo: int, hi: int, rank: int,
                     world_size: int, dtype: str) -> tuple[str, str] | None:
    """(problem, hint) if a gradient on this rank differs from the unsharded MLP's (its slice of it), else None;
    every gradient in ``grads`` is a tensor (see :func:`_missing_gradient`)."""
    import torch

    rtol, atol = GRAD_TOLERANCE[dtype]
    slices = {"x": expected["x"], "fc1_local.weight": expected["fc1.weight"][lo:hi],
              "fc1_local.bias": expected["fc1.bias"][lo:hi], "fc2_local.weight": expected["fc2.weight"][:, lo:hi],
              "fc2_local.bias": expected["fc2.bias"]}
    for name, want in slices.items():
        got = grads[name].detach().to(want.dtype)
        if tuple(got.shape) != tuple(want.shape):
            return (f"{name}.grad has shape {tuple(got.shape)} on rank {rank}, expected {tuple(want.shape)}",
                    "each autograd.Function's backward returns a gradient of its input's shape")
        if torch.allclose(got, want, rtol=rtol, atol=atol):
            continue
        if torch.allclose(got, want * world_size, rtol=rtol, atol=atol):
            return (f"{name}.grad on rank {rank} is {world_size} x the right gradient: a gradient was summed over "
                    f"the {world_size} ranks although every rank already held all of it",
                    "g's backward is the identity; f's forward is the identity (only g's forward and f's backward "
                    "all-reduce)")
        error = float((got - want).abs().max())
        whole = name in ("x", "fc2_local.bias")   # the others are this rank's slice of the full gradient
        return (f"{name}.grad on rank {rank} of {world_size} differs from the unsharded MLP's gradient"
                f"{'' if whole else ' (its slice)'} by up to {error:.3g} (rtol={rtol}, atol={atol})",
                "f: identity forward, all-reduce (SUM) backward; g: all-reduce (SUM) forward, identity backward")
    return None


def _grade_in_group(dist: object, rank: int, world_size: int, shard_fn: Callable, forward_fn: Callable,
                    cases: Sequence[tuple], seed: int) -> list[dict]:
    """In a rank that joined the group, for each case: the seeded MLP, the split, the forward and the backward with
    their collectives counted; a report per case (every rank stops at the first case any rank fails)."""
    import torch

    from gpucourse.parallel.comm import CommCounter
    from gpucourse.parallel.workers import rank_device

    device = rank_device(rank)
    reports = []
    for index, (d, hidden, d_out, batch, dtype) in enumerate(cases):
        fc1, fc2 = (layer.to(device) for layer in make_mlp(d, hidden, d_out, seed=seed + index, dtype=dtype))
        generator = torch.Generator().manual_seed(seed + 1000 + index)
        x = torch.randn(batch, d, generator=generator, dtype=getattr(torch, dtype)).to(device)
        upstream = torch.randn(batch, d_out, generator=generator, dtype=getattr(torch, dtype)).to(device)
        expected = _reference_forward(x, fc1, fc2)
        expected_grads = _reference_gradients(x, fc1, fc2, upstream)
        layers = shard_fn(fc1, fc2, rank, world_size)
        problem = (None if isinstance(layers, (tuple, list)) and len(layers) == 2 else
                   (f"shard_mlp returned {type(layers).__name__}, expected a pair (fc1_local, fc2_local)",
                    "return fc1_local, fc2_local"))
        problem = problem or _check_layers(fc1, fc2, *layers, rank, world_size)
        if _any_rank(dist, problem is not None, device):  # all ranks stop together, before the forward's collectives
            reports.append(_report(d, hidden, d_out, batch, dtype, rank, problem))
            break
        fc1_local, fc2_local = layers
        x_local = x.clone().requires_grad_(True)
        with CommCounter() as counter, warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            y = forward_fn(x_local, fc1_local, fc2_local, dist)
        output = _check_output(y, expected, fc2.bias.detach(), world_size, dtype)
        comm = _check_comm(counter, batch, d_out, x.element_size())
        problem = comm if counter.count("all_reduce") != 1 and comm else (output or comm)  # a count names the step
        if not problem and not y.requires_grad:
            problem = ("y does not require grad: autograd cannot run the backward pass through tp_forward",
                       "keep the graph: no torch.no_grad() or .detach(); return g's output (+ the bias)")
        if not _any_rank(dist, problem is not None, device):
            with CommCounter() as counter, warnings.catch_warnings(record=True) as caught_backward:
                warnings.simplefilter("always")
                (y * upstream).sum().backward()
            grads = {"x": x_local.grad, "fc1_local.weight": fc1_local.weight.grad,
                     "fc1_local.bias": fc1_local.bias.grad, "fc2_local.weight": fc2_local.weight.grad,
                     "fc2_local.bias": fc2_local.bias.grad}
            part = hidden // world_size
            problem = (_missing_gradient(grads, rank) or _check_backward_comm(counter, batch, d, x.element_size())
                       or _raw_collective([*caught, *caught_backward])
                       or _check_gradients(grads, expected_grads, rank * part, (rank + 1) * part, rank, world_size,
                                           dtype))
        reports.append(_report(d, hidden, d_out, batch, dtype, rank, problem))
        if _any_rank(dist, problem is not None, device):
            break
    return reports


def _any_rank(dist: object, flag: bool, device: object) -> bool:
    """True on every rank if ``flag`` is True on any (one small all-reduce, outside the learner's count)."""
    import torch

    votes = torch.tensor([float(flag)], device=device)
    dist.all_reduce(votes)
    return bool(votes.item())


def _report(d: int, hidden: int, d_out: int, batch: int, dtype: str, rank: int,
            problem: tuple[str, str] | None) -> dict:
    """A rank's report on one case: the case, the rank, the problem and its hint ('' if none)."""
    return {"case": (d, hidden, d_out, batch, dtype), "rank": rank,
            "problem": problem[0] if problem else "", "hint": problem[1] if problem else ""}


def _grade_worker(rank: int, world_size: int, shard_fn: Callable, forward_fn: Callable,
                  cases: Sequence[tuple], seed: int) -> list[dict]:
    """A rank of the grader's launch: join the group, grade every case (see :func:`_grade_in_group`)."""
    from gpucourse.parallel.workers import process_group

    with process_group(rank, world_size) as dist:
        return _grade_in_group(dist, rank, world_size, shard_fn, forward_fn, cases, seed)


def _raise_reports(results: Sequence[Sequence[dict]], name: str) -> None:
    """Raise CheckFailed with the first problem any rank reported (yours vs expected, and a hint)."""
    from gpucourse.checks import _fail

    for reports in results:
        for report in reports:
            if report["problem"]:
                _fail(f"{name}, case (d, hidden, d_out, batch, dtype)={report['case']}", report["problem"],
                      report["hint"])


def _check_cases(cases: object, world_size: int) -> list[tuple[int, int, int, int, str]]:
    """Validated grading cases (d, hidden, d_out, batch, dtype); ValueError naming world_size if it misfits one."""
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Sequence) or not cases:
        raise TypeError(f"cases must be a non-empty list of (d, hidden, d_out, batch, dtype), got {cases!r}")
    checked = []
    for case in cases:
        if not isinstance(case, (tuple, list)) or len(case) != 5:
            raise TypeError(f"cases must hold (d, hidden, d_out, batch, dtype) tuples, got {case!r}")
        d, hidden, d_out, world_size = _check_case(*case[:3], world_size)
        checked.append((d, hidden, d_out, positive_int("batch", case[3]), one_of("dtype", case[4], DTYPES)))
    return checked


def _fail_from_worker(error: BaseException, name: str) -> None:
    """Turn a failed or hung launch into NotImplementedError (an untouched stub) or CheckFailed."""
    from gpucourse.checks import _fail
    from gpucourse.parallel.workers import WorkerError

    if isinstance(error, WorkerError):  # an untouched stub never gets here: the launcher raises NotImplementedError
        if error.summary.startswith("OffLimits"):
            _fail(name, error.summary.split(": ", 1)[1], "write the split yourself")
        _fail(name, f"rank {error.rank} raised {error.summary}",
              "run your functions on the smoke cell's layers first; every rank must run the same collectives")
    _fail(name, f"the ranks did not finish ({error}): one rank waited in a collective the other never ran",
          "every rank runs the same code: one dist.all_reduce each, on tensors of the same shape")


def _check_split_follows_device(shard_fn: Callable, fc1: object, fc2: object, world_size: int, name: str) -> None:
    """Fail unless shard_fn puts the local layers on the full layers' device: tried with both on PyTorch's 'meta'
    device, which stands for a GPU here (an answer that leaves out ``device=`` would crash under NCCL)."""
    import copy

    from gpucourse.checks import _fail

    meta = [copy.deepcopy(layer).to("meta") for layer in (fc1, fc2)]
    try:
        layers = shard_fn(*meta, 0, world_size)
    except (RuntimeError, NotImplementedError) as error:  # e.g. "Cannot copy out of meta tensor" into a CPU layer
        if "cannot be called on meta tensors" in str(error):  # a value read (.item(), .tolist()), fine on a GPU
            _fail(name, "the grader runs shard_mlp once on PyTorch's 'meta' device (tensors without values) to see "
                        f"where it puts the local layers, and yours reads a value: {str(error).splitlines()[0][:120]}",
                  "leave value checks (asserts on .item(), .tolist(), isfinite(...).all()) out of shard_mlp: it only "
                  "needs to slice and copy with torch operations")
        _fail(name, f"given fc1 and fc2 on another device (the grader passed them on PyTorch's 'meta' device, standing "
                    f"for a GPU), shard_mlp raised {type(error).__name__}: {str(error).splitlines()[0][:200]}",
              "create the local layers with device=fc1.weight.device and copy the slices there with torch "
              "operations, never through NumPy (.numpy() needs the values on the CPU)")
    for local_name, layer in zip(("fc1_local", "fc2_local"), layers if isinstance(layers, (tuple, list)) else ()):
        devices = sorted({str(p.device) for p in getattr(layer, "parameters", lambda: [])()})
        if devices and devices != ["meta"]:
            _fail(name, f"given fc1 and fc2 on another device (the grader passed them on PyTorch's 'meta' device, "
                        f"standing for a GPU), shard_mlp made {local_name} on {', '.join(devices)}: under NCCL the "
                        "input would be on the GPU and the weights not",
                  "create the local layers with device=fc1.weight.device (and dtype=fc1.weight.dtype)")


def check_tensor_parallel_mlp(shard_fn: Callable, forward_fn: Callable, cases: Sequence[tuple] = VISIBLE_CASES, *,
                              seed: int = 0, world_size: int = 2, timeout_s: float = 60.0,
                              name: str = "tensor-parallel MLP", quiet: bool = False) -> list[dict]:
    """Grade a learner's ``shard_fn`` and ``forward_fn`` on ``world_size`` processes (one launch, every case).

    In each rank and case: the seeded MLP (the same on every rank), ``shard_fn(fc1, fc2, rank, world_size)`` must
    return the rank's rows of fc1 and columns of fc2 (copies; fc2's whole bias), ``forward_fn(x, fc1_local,
    fc2_local, dist)`` must return the unsharded MLP's output (float32: rtol=atol=1e-5; float64: rtol 1e-10) with
    exactly one all-reduce of batch x d_out elements and no other collective; then ``(y * upstream).sum()
    .backward()`` must run exactly one all-reduce (the gradient of x, batch x d elements) and leave on every rank
    the unsharded MLP's gradient of x, of fc2's bias, and this rank's slices of the weight gradients
    (:data:`GRAD_TOLERANCE`). Raises CheckFailed saying what is wrong (yours vs expected) and how to fix it;
    returns every rank's reports.
    """
    from gpucourse.checks import _fail, check_raises
    from gpucourse.parallel.workers import WorkerError, WorkerTimeout, launch

    if not callable(shard_fn) or not callable(forward_fn):
        raise TypeError(f"shard_fn and forward_fn must be functions, got {type(shard_fn).__name__} and "
                        f"{type(forward_fn).__name__}")
    world_size = positive_int("world_size", world_size)
    checked = _check_cases(cases, world_size)
    seed, timeout_s = non_negative_int("seed", seed), positive_number("timeout_s", timeout_s)
    d, hidden, d_out, _, dtype = checked[0]
    fc1, fc2 = make_mlp(d, hidden, d_out, seed=seed, dtype=dtype)
    for rank in range(world_size):  # the split first, in this process: quick, and an untouched stub raises here
        layers = shard_fn(fc1, fc2, rank, world_size)
        if not isinstance(layers, (tuple, list)) or len(layers) != 2:
            _fail(name, f"shard_mlp returned {type(layers).__name__}, expected a pair (fc1_local, fc2_local)",
                  "return fc1_local, fc2_local")
        problem = _check_layers(fc1, fc2, *layers, rank, world_size)
        if problem:
            _fail(f"{name}, case (d, hidden, d_out)={(d, hidden, d_out)}", *problem)
    _check_split_follows_device(shard_fn, fc1, fc2, world_size, name)
    misfit = next(n for n in range(world_size + 1, 4 * hidden) if hidden % n)
    check_raises(f"{name}: shard_mlp with world_size={misfit} (does not divide hidden={hidden})",
                 lambda: shard_fn(fc1, fc2, 0, misfit), ValueError,
                 hint="raise ValueError naming world_size when hidden % world_size != 0", quiet=True)
    try:
        results = launch(_grade_worker, world_size, (shard_fn, forward_fn, checked, seed), timeout_s=timeout_s)
    except (WorkerError, WorkerTimeout) as error:
        _fail_from_worker(error, name)
    _raise_reports(results, name)
    if not quiet:
        print(f"\N{CHECK MARK} {name}: {len(checked)} case(s) on {world_size} ranks, forward and backward, one "
              "all-reduce each way")
    return results


# The demonstration: PyTorch's own tensor parallelism (DTensor) beside the hand-written split.

def _local_shape(tensor: object) -> tuple[int, ...]:
    """The shape this rank stores of a parameter (a DTensor's local shard, or the tensor itself)."""
    to_local = getattr(tensor, "to_local", None)
    return tuple((to_local() if callable(to_local) else tensor).shape)


def tp_demo_worker(rank: int, world_size: int, d: int = 64, hidden: int = 256, d_out: int = 64,
                   batch: int = 8) -> dict[str, object]:
    """A rank's record of the MLP split by hand and by parallelize_module: shapes, error, collectives by phase."""
    import copy

    import torch
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from gpucourse.parallel.comm import CommCounter
    from gpucourse.parallel.workers import process_group, rank_device

    d, hidden, d_out, world_size = _check_case(d, hidden, d_out, world_size)
    device = rank_device(rank)
    fc1, fc2 = (layer.to(device) for layer in make_mlp(d, hidden, d_out, seed=0))
    x = torch.randn(batch, d, generator=torch.Generator().manual_seed(1)).to(device)
    expected = _reference_forward(x, fc1, fc2)
    record: dict[str, object] = {"rank": rank, "full_shapes": {"fc1.weight": tuple(fc1.weight.shape),
                                                                "fc2.weight": tuple(fc2.weight.shape)}}
    with process_group(rank, world_size) as dist:
        fc1_local, fc2_local = _shard_mlp(fc1, fc2, rank, world_size)
        x_hand = x.clone().requires_grad_(True)   # the backward needs the gradient of x: f's all-reduce
        with CommCounter() as counter:
            with counter.phase("forward"):
                y = _tp_forward(x_hand, fc1_local, fc2_local, dist)
            with counter.phase("backward"):
                y.sum().backward()
        record["by_hand"] = {"shapes": {"fc1.weight": tuple(fc1_local.weight.shape),
                                        "fc2.weight": tuple(fc2_local.weight.shape)},
                             "max_error": float((y.detach() - expected).abs().max()),
                             "forward": counter.summary("forward"), "backward": counter.summary("backward")}
        model = torch.nn.Module()          # a container with the two layers by name, for the plan below
        model.fc1, model.fc2 = copy.deepcopy(fc1), copy.deepcopy(fc2)
        mesh = DeviceMesh(device.type, list(range(world_size)))
        parallelize_module(model, mesh, {"fc1": ColwiseParallel(), "fc2": RowwiseParallel()})
        x_grad = x.clone().requires_grad_(True)   # so that the backward needs the gradient of x: one more sum
        with CommCounter() as counter:
            with counter.phase("forward"):
                y = model.fc2(torch.nn.functional.gelu(model.fc1(x_grad)))
            with counter.phase("backward"):
                y.sum().backward()
        record["parallelize_module"] = {
            "shapes": {"fc1.weight": _local_shape(model.fc1.weight), "fc2.weight": _local_shape(model.fc2.weight)},
            "max_error": float((y.detach() - expected).abs().max()),
            "forward": counter.summary("forward"), "backward": counter.summary("backward")}
    return record


def run_tp_demo(world_size: int = 2, *, d: int = 64, hidden: int = 256, d_out: int = 64, batch: int = 8,
                timeout_s: float = 60.0) -> list[dict[str, object]]:
    """Launch :func:`tp_demo_worker` on ``world_size`` processes; every rank's record."""
    from gpucourse.parallel.workers import launch

    d, hidden, d_out, world_size = _check_case(d, hidden, d_out, world_size)
    batch = positive_int("batch", batch)
    return launch(tp_demo_worker, world_size, (d, hidden, d_out, batch), timeout_s=timeout_s)


def tp_demo_rows(records: Sequence[dict]) -> list[list[object]]:
    """Rows for plots.show_table: per rank and version, local weight shapes, max error, collectives per phase."""
    rows = []
    for record in records:
        for version in ("by_hand", "parallelize_module"):
            part = record[version]
            comm = "; ".join(f"{phase}: " + (", ".join(f"{row['calls']} {kind} ({row['bytes']:,} B)"
                                                        for kind, row in part[phase].items()) or "none")
                             for phase in ("forward", "backward") if phase in part)
            rows.append([record["rank"], version.replace("_", " "), part["shapes"]["fc1.weight"],
                         part["shapes"]["fc2.weight"], f"{part['max_error']:.1e}", comm])
    return rows
