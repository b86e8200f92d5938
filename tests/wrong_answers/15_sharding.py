"""Plausible wrong answers to lesson 15's exercise: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''\
def zero_step(params: list[torch.Tensor], state: dict, dist, lr: float = 1e-3,
              betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
    """One ZeRO-2 Adam step on this rank."""
'''

# Shared pieces of the ZeRO answers (each wrong answer below is still a whole solution cell).
_FLAT = '''\
    world, rank = dist.get_world_size(), dist.get_rank()
    flat_grad = torch.cat([p.grad.reshape(-1) for p in params])
    count = flat_grad.numel()
    part = -(-count // world)
    flat_grad = torch.nn.functional.pad(flat_grad, (0, part * world - count))
    flat = torch.nn.functional.pad(torch.cat([p.detach().reshape(-1) for p in params]), (0, part * world - count))
'''
_ADAM = '''\
    if not state:
        state.update(step=0, m=torch.zeros_like(grad), v=torch.zeros_like(grad))
    state["step"] += 1
    b1, b2 = betas
    state["m"].mul_(b1).add_(grad, alpha=1 - b1)
    state["v"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
    denominator = (state["v"].sqrt() / (1 - b2 ** state["step"]) ** 0.5).add_(eps)
    mine.addcdiv_(state["m"], denominator, value=-lr / (1 - b1 ** state["step"]))
'''
_COPY_BACK = '''\
    offset = 0
    with torch.no_grad():
        for p in params:
            p.copy_(flat[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
'''
_RS = '''\
    grad = torch.empty(part)
    dist.reduce_scatter_tensor(grad, flat_grad)
    grad /= world
'''
_MINE = '''\
    mine = flat[rank * part:(rank + 1) * part].clone()
'''
_GATHER = '''\
    dist.all_gather_into_tensor(flat, mine)
'''


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # Does nothing: the parameters never move.
        "constant": _EX1 + '''\
    return None
''',
        # The course's own step: off-limits (in the worker processes too).
        "helper": _EX1 + '''\
    parallel.zero_step(params, state, dist, lr, betas, eps)
''',
        # Adam's default settings whatever lr, betas and eps say: right on the visible case only.
        "visible_only": _EX1 + _FLAT + _RS + _MINE + '''\
    lr, betas, eps = 1e-3, (0.9, 0.999), 1e-8
''' + _ADAM + _GATHER + _COPY_BACK,
        # Sums the gradients without dividing by the world size: Adam hides it except where eps matters.
        "typical": _EX1 + _FLAT + '''\
    grad = torch.empty(part)
    dist.reduce_scatter_tensor(grad, flat_grad)
''' + _MINE + _ADAM + _GATHER + _COPY_BACK,
        # Right weights and traffic, but m and v for every parameter on every rank.
        "full_state": _EX1 + _FLAT + _RS + '''\
    full = torch.empty(part * world)
    dist.all_gather_into_tensor(full, grad)
    grad, mine = full, flat.clone()
''' + _ADAM + '''\
    flat = mine
''' + _COPY_BACK,
        # Right weights and traffic, and `state` stays empty: m and v for every parameter are kept in a global
        # (only this rank's part of them is used). The grader counts what the steps keep alive anywhere.
        "state_in_a_global": '''\
_ADAM_STATE = {}


''' + _EX1 + _FLAT + _RS + _MINE + '''\
    if _ADAM_STATE.get("model") != id(params[0]):        # a new model: fresh m and v, for all of its parameters
        _ADAM_STATE.update(model=id(params[0]), step=0, m=torch.zeros(part * world), v=torch.zeros(part * world))
    _ADAM_STATE["step"] += 1
    b1, b2, t = betas[0], betas[1], _ADAM_STATE["step"]
    m = _ADAM_STATE["m"][rank * part:(rank + 1) * part]
    v = _ADAM_STATE["v"][rank * part:(rank + 1) * part]
    m.mul_(b1).add_(grad, alpha=1 - b1)
    v.mul_(b2).addcmul_(grad, grad, value=1 - b2)
    mine.addcdiv_(m, (v.sqrt() / (1 - b2 ** t) ** 0.5).add_(eps), value=-lr / (1 - b1 ** t))
''' + _GATHER + _COPY_BACK,
        # Forgets the all-gather: each rank's parameters are stale outside its own part.
        "no_all_gather": _EX1 + _FLAT + _RS + _MINE + _ADAM + '''\
    flat[rank * part:(rank + 1) * part] = mine
''' + _COPY_BACK,
        # All-reduces the whole gradient and keeps its part: right weights and memory, twice the traffic.
        "all_reduce": _EX1 + _FLAT + '''\
    dist.all_reduce(flat_grad)
    grad = flat_grad[rank * part:(rank + 1) * part] / world
''' + _MINE + _ADAM + _GATHER + _COPY_BACK,
        # Plain DDP + Adam on every rank: all-reduce, full parameters, full state.
        "full_update": _EX1 + _FLAT + '''\
    dist.all_reduce(flat_grad)
    grad, mine = flat_grad / world, flat.clone()
''' + _ADAM + '''\
    flat = mine
''' + _COPY_BACK,
        # No padding: breaks when the world size does not divide the parameter count.
        "no_padding": _EX1 + '''\
    world, rank = dist.get_world_size(), dist.get_rank()
    flat_grad = torch.cat([p.grad.reshape(-1) for p in params])
    part = flat_grad.numel() // world
    flat = torch.cat([p.detach().reshape(-1) for p in params])
''' + _RS + _MINE + _ADAM + _GATHER + _COPY_BACK,
        # Bias correction forgotten (plain m / sqrt(v)): wrong from the first step.
        "no_bias_correction": _EX1 + _FLAT + _RS + _MINE + '''\
    if not state:
        state.update(m=torch.zeros_like(grad), v=torch.zeros_like(grad))
    b1, b2 = betas
    state["m"].mul_(b1).add_(grad, alpha=1 - b1)
    state["v"].mul_(b2).addcmul_(grad, grad, value=1 - b2)
    mine -= lr * state["m"] / (state["v"].sqrt() + eps)
''' + _GATHER + _COPY_BACK,
    },
}

# every exercise also gets the tampering kinds (tampering/)
WRONG = with_tampering(WRONG)
