"""Plausible wrong answers to lesson 16's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''\
def pipeline_schedule(stages: int, microbatches: int) -> list[list[tuple[str, int]]]:
    """Each stage's order of passes."""
'''

_EX2_HEAD = '''\
import torch
from torch import nn
import torch.nn.functional as F


def shard_mlp(fc1: nn.Linear, fc2: nn.Linear, rank: int, world_size: int) -> tuple[nn.Linear, nn.Linear]:
    """Rank `rank`'s (fc1_local, fc2_local): rows of fc1, the same columns of fc2, fc2's whole bias (copies)."""
'''
_EX2_OPS = '''


class CopyToRanks(torch.autograd.Function):
    """Megatron's f, before fc1: the identity forward; backward, the gradient of x summed over the ranks."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, dist) -> torch.Tensor:
        ctx.dist = dist
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        grad = grad.clone()
        ctx.dist.all_reduce(grad)
        return grad, None


class ReduceFromRanks(torch.autograd.Function):
    """Megatron's g, after fc2: the partial outputs summed over the ranks forward; backward, the identity."""

    @staticmethod
    def forward(ctx, partial: torch.Tensor, dist) -> torch.Tensor:
        total = partial.clone()
        dist.all_reduce(total)
        return total

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return grad, None
'''
_EX2_FORWARD = _EX2_OPS + '''

def tp_forward(x: torch.Tensor, fc1_local: nn.Linear, fc2_local: nn.Linear, dist) -> torch.Tensor:
    """This rank's forward, differentiable: f, gelu(fc1_local), the partial fc2 product, g, fc2's bias once."""
'''
_EX2_SHARD = '''\
    hidden = fc1.out_features
    if hidden % world_size:
        raise ValueError(f"world_size must divide hidden={hidden}, got world_size={world_size}")
    part = hidden // world_size
    rows = slice(rank * part, (rank + 1) * part)          # this rank's hidden units
    fc1_local = nn.Linear(fc1.in_features, part, dtype=fc1.weight.dtype, device=fc1.weight.device)
    fc2_local = nn.Linear(part, fc2.out_features, dtype=fc2.weight.dtype, device=fc2.weight.device)
    with torch.no_grad():                                 # copy_: new, smaller tensors (not views of the full ones)
        fc1_local.weight.copy_(fc1.weight[rows])          # column-parallel: rows = output features
        fc1_local.bias.copy_(fc1.bias[rows])
        fc2_local.weight.copy_(fc2.weight[:, rows])       # row-parallel: columns = input features
        fc2_local.bias.copy_(fc2.bias)                    # whole; added once, after the sum
    return fc1_local, fc2_local
'''
_EX2_TP = '''\
    hidden = F.gelu(fc1_local(CopyToRanks.apply(x, dist)))
    partial = F.linear(hidden, fc2_local.weight)
    return ReduceFromRanks.apply(partial, dist) + fc2_local.bias
'''
# v2's forward-only answer: the all-reduce called directly, as in lesson 14 (autograd cannot see it).
_EX2_FORWARD_ONLY = '''\
    hidden = F.gelu(fc1_local(x))
    partial = F.linear(hidden, fc2_local.weight)
    dist.all_reduce(partial)
    return partial + fc2_local.bias
'''
_WRONG_EX2: dict[str, str] = {
    # Fixed layers of the visible shapes and a zero output.
    "constant": _EX2_HEAD + '''\
    return nn.Linear(8, 8).double(), nn.Linear(8, 4).double()
''' + _EX2_FORWARD + '''\
    return torch.zeros(x.shape[0], 4, dtype=x.dtype)
''',
    # The course's own split: off-limits.
    "helper": _EX2_HEAD + '''\
    from gpucourse import parallel
    return parallel.shard_mlp(fc1, fc2, rank, world_size)
''' + _EX2_FORWARD + '''\
    from gpucourse import parallel
    return parallel.tp_forward(x, fc1_local, fc2_local, dist)
''',
    # Slices of the visible MLP's size (hidden 16 on 2 ranks: 8 units each), whatever the layers.
    "visible_only": _EX2_HEAD + _EX2_SHARD.replace("part = hidden // world_size", "part = 8") + _EX2_FORWARD + _EX2_TP,
    # Row-parallel fc2 with its bias on every rank: the bias is summed N times.
    "typical": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD + '''\
    partial = fc2_local(F.gelu(fc1_local(x)))
    dist.all_reduce(partial)
    return partial
''',
    # Gathers the hidden activations (and fc2's columns) and runs the whole fc2: right output, wrong traffic.
    "all_gather_hidden": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD + '''\
    hidden = F.gelu(fc1_local(x))
    world = dist.get_world_size()
    pieces = [torch.empty_like(hidden) for _ in range(world)]
    dist.all_gather(pieces, hidden.contiguous())
    columns = [torch.empty_like(fc2_local.weight) for _ in range(world)]
    dist.all_gather(columns, fc2_local.weight.detach().contiguous())
    return torch.cat(pieces, dim=1) @ torch.cat(columns, dim=1).T + fc2_local.bias
''',
    # Splits fc1 by its columns (input features) and fc2 by its rows: the transposed split.
    "columns_first": _EX2_HEAD + '''\
    d = fc1.in_features
    cols = slice(rank * d // world_size, (rank + 1) * d // world_size)
    fc1_local = nn.Linear(d // world_size, fc1.out_features, dtype=fc1.weight.dtype)
    fc2_local = nn.Linear(fc2.in_features, fc2.out_features, dtype=fc2.weight.dtype)
    with torch.no_grad():
        fc1_local.weight.copy_(fc1.weight[:, cols])
        fc1_local.bias.copy_(fc1.bias)
        fc2_local.weight.copy_(fc2.weight)
        fc2_local.bias.copy_(fc2.bias)
    return fc1_local, fc2_local
''' + _EX2_FORWARD + _EX2_TP,
    # Keeps the full layers on every rank and slices them at run time: no memory saved.
    "full_weights": _EX2_HEAD + '''\
    return fc1, fc2
''' + _EX2_FORWARD + '''\
    rank, world = dist.get_rank(), dist.get_world_size()
    part = fc1_local.out_features // world
    rows = slice(rank * part, (rank + 1) * part)
    hidden = F.gelu(F.linear(x, fc1_local.weight[rows], fc1_local.bias[rows]))
    partial = F.linear(hidden, fc2_local.weight[:, rows])
    dist.all_reduce(partial)
    return partial + fc2_local.bias
''',
    # Slices as views: the rank keeps the whole matrices alive.
    "views": _EX2_HEAD + '''\
    part = fc1.out_features // world_size
    if fc1.out_features % world_size:
        raise ValueError(f"world_size must divide hidden, got {world_size}")
    rows = slice(rank * part, (rank + 1) * part)
    fc1_local = nn.Linear(fc1.in_features, part, dtype=fc1.weight.dtype)
    fc2_local = nn.Linear(part, fc2.out_features, dtype=fc2.weight.dtype)
    fc1_local.weight = nn.Parameter(fc1.weight[rows])
    fc1_local.bias = nn.Parameter(fc1.bias[rows])
    fc2_local.weight = nn.Parameter(fc2.weight[:, rows])
    fc2_local.bias = nn.Parameter(fc2.bias)
    return fc1_local, fc2_local
''' + _EX2_FORWARD + _EX2_TP,
    # Averages the partial outputs (ReduceOp.AVG) instead of summing them.
    "average": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD.replace("dist.all_reduce(total)",
                                                             "dist.all_reduce(total, op=dist.ReduceOp.AVG)") + _EX2_TP,
    # Forgets the all-reduce: each rank returns its partial output.
    "no_all_reduce": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD.replace("        dist.all_reduce(total)\n", "") + _EX2_TP,
    # v2's forward-only answer: right y, but x.grad holds one rank's share (no f, so no all-reduce backward).
    "forward_only": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD + _EX2_FORWARD_ONLY,
    # g as f's mirror taken too far: g's backward also all-reduces, so every gradient is N times too large.
    "g_backward_sums": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD.replace(
        "    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:\n        return grad, None",
        "    def backward(ctx, grad: torch.Tensor) -> tuple[torch.Tensor, None]:\n        grad = grad.clone()\n"
        "        import torch.distributed as dist\n        dist.all_reduce(grad)\n        return grad, None") + _EX2_TP,
    # f that also sums in the forward pass: every rank feeds N x to fc1.
    "f_forward_sums": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD.replace(
        "        ctx.dist = dist\n        return x.view_as(x)",
        "        ctx.dist = dist\n        x = x.clone()\n        dist.all_reduce(x)\n        return x") + _EX2_TP,
    # f's backward averages (divides the sum by the world size), as DDP does with gradients.
    "f_backward_averages": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD.replace(
        "        ctx.dist.all_reduce(grad)\n        return grad, None",
        "        ctx.dist.all_reduce(grad)\n        return grad / ctx.dist.get_world_size(), None") + _EX2_TP,
    # g applied to a detached partial: y is right, but no gradient reaches fc1 or fc2's weight.
    "detached": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD + _EX2_TP.replace(
        "ReduceFromRanks.apply(partial, dist)", "ReduceFromRanks.apply(partial.detach(), dist)"),
    # Review v3r1 M1: f as an autograd.Function, g as a raw in-place all-reduce. Autograd backpropagates through it as
    # the identity (with a warning), which is g's backward by luck: the warning now fails it.
    "g_raw_all_reduce": _EX2_HEAD + _EX2_SHARD + _EX2_FORWARD + """\
    hidden = F.gelu(fc1_local(CopyToRanks.apply(x, dist)))
    partial = F.linear(hidden, fc2_local.weight)
    dist.all_reduce(partial)
    return partial + fc2_local.bias
""",
    # Review v3r1 M2: local layers made without device=: right on a CPU, on the wrong device next to a GPU's input.
    "no_device": _EX2_HEAD + _EX2_SHARD.replace(", device=fc1.weight.device)", ")").replace(
        ", device=fc2.weight.device)", ")") + _EX2_FORWARD + _EX2_TP,
    # Two ranks hard-coded in the split: right on the visible 2 ranks, wrong on 3 and 4.
    "two_ranks": _EX2_HEAD + _EX2_SHARD.replace("part = hidden // world_size", "part = hidden // 2") + _EX2_FORWARD
    + _EX2_TP,
    # Accepts any world size: hidden units left over are silently dropped.
    "no_value_error": _EX2_HEAD + _EX2_SHARD.replace("if hidden % world_size:", "if hidden % world_size and False:")
    + _EX2_FORWARD + _EX2_TP,
}


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The visible test's schedule (2 stages, 4 micro-batches), whatever the pipeline.
        "constant": _EX1 + '''\
    return [[("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)],
            [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)]]
''',
        # The course's own schedules: off-limits.
        "helper": _EX1 + '''\
    return parallel.pipeline_orders("1f1b", stages, microbatches)
''',
        # The bounded schedule for the visible pipeline only; GPipe for any other.
        "visible_only": _EX1 + '''\
    if (stages, microbatches) == (2, 4):
        return [[("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)],
                [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)]]
    return [[("F", i) for i in range(microbatches)] + [("B", i) for i in reversed(range(microbatches))]
            for _ in range(stages)]
''',
        # GPipe: all forwards, then all backwards: every stage holds all m micro-batches.
        "typical": _EX1 + '''\
    return [[("F", i) for i in range(microbatches)] + [("B", i) for i in reversed(range(microbatches))]
            for _ in range(stages)]
''',
        # One micro-batch at a time, forward and backward, on every stage: little memory, no pipelining at all.
        "sequential": _EX1 + '''\
    return [[pass_ for i in range(microbatches) for pass_ in (("F", i), ("B", i))] for _ in range(stages)]
''',
        # One warm-up forward too many: stage s holds p - s + 1 micro-batches.
        "warmup_off_by_one": _EX1 + '''\
    orders = []
    for s in range(stages):
        w = min(stages - s, microbatches)
        steady = [pass_ for i in range(microbatches - w) for pass_ in (("F", w + i), ("B", i))]
        orders.append([("F", i) for i in range(w)] + steady + [("B", i) for i in range(microbatches - w, microbatches)])
    return orders
''',
        # Warm-up counted from the wrong end (s instead of p - s - 1): the first stage waits for a backward that the
        # last stage can only produce after a forward the first stage has not sent: a deadlock.
        "warmup_reversed": _EX1 + '''\
    orders = []
    for s in range(stages):
        w = min(s, microbatches)
        steady = [pass_ for i in range(microbatches - w) for pass_ in (("F", w + i), ("B", i))]
        orders.append([("F", i) for i in range(w)] + steady + [("B", i) for i in range(microbatches - w, microbatches)])
    return orders
''',
    },
    "ex2-solution": _WRONG_EX2,
}

# every exercise also gets the tampering kinds (tampering/); Exercise 1's calls the visible reference it had
WRONG = with_tampering(WRONG, references={"ex1-solution": "reference_orders(p, m, bounded=True)"})
