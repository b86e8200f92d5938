"""Plausible wrong answers to lesson 15's exercise: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_CLASS = '''\
class Zero2Adam:
    """ZeRO-2 Adam on this rank."""

    def __init__(self, params: list[torch.Tensor], dist, lr: float = 1e-3,
                 betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8) -> None:
        self.params, self.dist, self.lr, self.betas, self.eps = list(params), dist, lr, betas, eps
        self.world, self.rank = dist.get_world_size(), dist.get_rank()
        self.t, self.grads, self.m, self.v = 0, {}, {}, {}
        self.index = {id(p): i for i, p in enumerate(self.params)}
'''
_REGISTER = '''\
        for p in self.params:
            p.register_post_accumulate_grad_hook(self.hook)
'''
# The hook of the model answer, in pieces: the padded flat gradient, its reduce-scatter, the shard kept, p.grad freed.
_PART = '''\
        part = -(-p.numel() // self.world)
'''
_HOOK_HEAD = '''
    def hook(self, p: torch.Tensor) -> None:
'''
_FLAT = '''\
        flat = torch.nn.functional.pad(p.grad.reshape(-1), (0, part * self.world - p.numel()))
'''
_RS = '''\
        shard = torch.empty(part)
        self.dist.reduce_scatter_tensor(shard, flat)
        self.grads[self.index[id(p)]] = shard / self.world
'''
_FREE = '''\
        p.grad = None
'''
_HOOK = _HOOK_HEAD + _PART + _FLAT + _RS + _FREE


def _step(part: str = _PART, adam_settings: str = "") -> str:
    """The model answer's step(), with the shard size computed by ``part`` and Adam's settings read by
    ``adam_settings`` (defaults: the answer's own)."""
    return '''
    def step(self) -> None:
        self.t += 1
''' + (adam_settings or '''\
        lr, (b1, b2), eps = self.lr, self.betas, self.eps
''') + '''\
        for i, p in enumerate(self.params):
''' + part.replace("        ", "            ") + '''\
            grad = self.grads.pop(i)
            full = torch.nn.functional.pad(p.detach().reshape(-1), (0, part * self.world - p.numel()))
            mine = full[self.rank * part:(self.rank + 1) * part].clone()
            if i not in self.m:
                self.m[i], self.v[i] = torch.zeros_like(mine), torch.zeros_like(mine)
            self.m[i].mul_(b1).add_(grad, alpha=1 - b1)
            self.v[i].mul_(b2).addcmul_(grad, grad, value=1 - b2)
            denominator = (self.v[i].sqrt() / (1 - b2 ** self.t) ** 0.5).add_(eps)
            mine.addcdiv_(self.m[i], denominator, value=-lr / (1 - b1 ** self.t))
            self.dist.all_gather_into_tensor(full, mine)
            with torch.no_grad():
                p.copy_(full[:p.numel()].view_as(p))
'''


_PART_TWO = '''\
        part = -(-p.numel() // 2)
'''
_PART_OFF_BY_ONE = '''\
        part = (p.numel() + self.world - p.numel() % self.world) // self.world
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # Does nothing: no hook, and step() leaves the parameters where they are.
        "constant": _CLASS + '''
    def step(self) -> None:
        return None
''',
        # The course's own optimizer: off-limits (in the worker processes too).
        "helper": '''\
class Zero2Adam:
    """ZeRO-2 Adam on this rank."""

    def __init__(self, params, dist, lr=1e-3, betas=(0.9, 0.999), eps=1e-8) -> None:
        self.inner = parallel.Zero2Adam(params, dist, lr=lr, betas=betas, eps=eps)

    def step(self) -> None:
        self.inner.step()
''',
        # Adam's default settings whatever lr, betas and eps say: right on the visible case only.
        "visible_only": _CLASS + _REGISTER + _HOOK + _step(adam_settings='''\
        lr, (b1, b2), eps = 1e-3, (0.9, 0.999), 1e-8
'''),
        # Today's ZeRO-1 memory with ZeRO-2's communication: the full gradients are kept through backward and
        # reduce-scattered in step().
        "typical": _CLASS + '''
    def step(self) -> None:
        for i, p in enumerate(self.params):
''' + (_PART + _FLAT + _RS + _FREE).replace("        ", "            ")
        + _step()[len("\n    def step(self) -> None:\n"):],
        # An all-reduce of the whole gradient in the hook, then this rank's part kept: right weights, twice the
        # traffic of a reduce-scatter.
        "all_reduce_in_hook": _CLASS + _REGISTER + _HOOK_HEAD + _PART + _FLAT + '''\
        self.dist.all_reduce(flat)
        self.grads[self.index[id(p)]] = flat[self.rank * part:(self.rank + 1) * part] / self.world
''' + _FREE + _step(),
        # p.grad is never freed: every full gradient stays alive through backward, as in DDP.
        "grad_not_freed": _CLASS + _REGISTER + _HOOK_HEAD + _PART + _FLAT + _RS + _step(),
        # p.grad freed, but the full gradient stashed in the object until step(): the same memory as not freeing it.
        "grad_stashed": _CLASS + _REGISTER + _HOOK_HEAD + _PART + _FLAT + _RS + '''\
        self.stash = getattr(self, "stash", {})
        self.stash[self.index[id(p)]] = p.grad
''' + _FREE + _step().replace("        self.t += 1\n", "        self.t += 1\n        self.stash = {}\n"),
        # The world size hard-coded to 2: right on the visible 2 ranks, a size mismatch on 3 and 4.
        "world_size_two": _CLASS + _REGISTER + _HOOK_HEAD + _PART_TWO + _FLAT + _RS + _FREE + _step(_PART_TWO),
        # The reduce-scattered sum not divided by N: Adam hides it except where eps matters.
        "not_divided": _CLASS + _REGISTER + _HOOK_HEAD + _PART + _FLAT + '''\
        shard = torch.empty(part)
        self.dist.reduce_scatter_tensor(shard, flat)
        self.grads[self.index[id(p)]] = shard
''' + _FREE + _step(),
        # Padding N - count % N: a whole extra row of N zeros when N divides the count. Right weights, larger
        # collectives and shards.
        "padding_off_by_one": _CLASS + _REGISTER + _HOOK_HEAD + _PART_OFF_BY_ONE + _FLAT + _RS + _FREE
        + _step(_PART_OFF_BY_ONE),
        # Right weights and traffic, but m and v for the whole parameter on every rank (ZeRO-2's gradients without
        # ZeRO-1's optimizer state).
        "full_state": _CLASS + _REGISTER + _HOOK + '''
    def step(self) -> None:
        self.t += 1
        b1, b2 = self.betas
        for i, p in enumerate(self.params):
            part = -(-p.numel() // self.world)
            grad = torch.empty(part * self.world)
            self.dist.all_gather_into_tensor(grad, self.grads.pop(i))
            full = torch.nn.functional.pad(p.detach().reshape(-1), (0, part * self.world - p.numel()))
            if i not in self.m:
                self.m[i], self.v[i] = torch.zeros_like(full), torch.zeros_like(full)
            self.m[i].mul_(b1).add_(grad, alpha=1 - b1)
            self.v[i].mul_(b2).addcmul_(grad, grad, value=1 - b2)
            denominator = (self.v[i].sqrt() / (1 - b2 ** self.t) ** 0.5).add_(self.eps)
            full.addcdiv_(self.m[i], denominator, value=-self.lr / (1 - b1 ** self.t))
            with torch.no_grad():
                p.copy_(full[:p.numel()].view_as(p))
''',
        # Shards paired with parameters by the order the hooks fire in (a list, read backwards in step()): right
        # for a chain of layers given in model order, wrong once the list comes in another order (review v3r1 M1).
        "r1_hook_order": _CLASS + _REGISTER + _HOOK_HEAD + _PART + _FLAT + '''\
        shard = torch.empty(part)
        self.dist.reduce_scatter_tensor(shard, flat)
        self.order = getattr(self, "order", [])
        self.order.append(shard / self.world)
''' + _FREE + _step().replace("        for i, p in enumerate(self.params):\n", "        self.grads = dict(zip("
            "reversed(range(len(self.params))), self.order))\n        self.order = []\n"
            "        for i, p in enumerate(self.params):\n"),
        # Every full gradient kept in a list only the hook's closure sees, cleared in step(): ZeRO-1's memory
        # through backward, invisible from the object (review v3r1 m1).
        "r1_closure_stash2": _CLASS + '''\
        keep = []

        def hook(p, keep=keep):
            keep.append(p.grad)
            self.hook(p)
        for p in self.params:
            p.register_post_accumulate_grad_hook(hook)
        self.clear = keep.clear
''' + _HOOK + _step().replace("        self.t += 1\n", "        self.t += 1\n        self.clear()\n"),
        # The padded full gradients kept in a module-level dict until step() (review v3r1 m1).
        "r1_global_stash": "_KEPT = {}\n\n\n" + _CLASS + _REGISTER + _HOOK_HEAD + _PART + _FLAT + '''\
        _KEPT[id(p)] = flat
''' + _RS + _FREE + _step().replace("        self.t += 1\n", "        self.t += 1\n        _KEPT.clear()\n"),
        # Bias correction forgotten (plain m / sqrt(v)): wrong from the first step.
        "no_bias_correction": _CLASS + _REGISTER + _HOOK + _step().replace(
            "(self.v[i].sqrt() / (1 - b2 ** self.t) ** 0.5).add_(eps)", "self.v[i].sqrt().add_(eps)").replace(
            "value=-lr / (1 - b1 ** self.t)", "value=-lr"),
    },
}

_EX2 = '''\
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model: torch.nn.Module, mesh) -> torch.nn.Module:
    """FSDP2 on this rank."""
'''
_POLICY = '''\
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
'''
_BLOCKS = '''\
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
'''
_ROOT = '''\
    fully_shard(model, mesh=mesh, mp_policy=policy)
'''
_RETURN = '''\
    return model
'''

WRONG["ex2-solution"] = {
    # Returns the model as it came: nothing sharded.
    "constant": _EX2 + _RETURN,
    # The course's own function: off-limits (in the worker processes too).
    "helper": _EX2 + '''\
    return parallel.fsdp_shard(model, mesh)
''',
    # Wraps the first two blocks, as many as the visible model has: the hidden models have more.
    "visible_only": _EX2 + _POLICY + '''\
    for block in list(model.blocks)[:2]:
        fully_shard(block, mesh=mesh, mp_policy=policy)
''' + _ROOT + _RETURN,
    # The root left unsharded: embed and head stay whole, replicated on every rank.
    "typical": _EX2 + _POLICY + _BLOCKS + _RETURN,
    # No mixed-precision policy: float32 gathers and compute, twice the bytes.
    "no_mixed_precision": _EX2 + '''\
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
''' + _RETURN,
    # Gradients summed over the ranks in bfloat16.
    "reduce_in_bfloat16": _EX2 + '''\
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
''' + _BLOCKS + _ROOT + _RETURN,
    # One group per Linear layer instead of per block: twice the collectives.
    "every_linear": _EX2 + _POLICY + '''\
    for block in model.blocks:
        for layer in (block.fc1, block.fc2):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
''' + _ROOT + _RETURN,
    # Only the root: one group, the whole model gathered at once.
    "root_only": _EX2 + _POLICY + _ROOT + _RETURN,
}

# every exercise also gets the tampering kinds (tampering/)
WRONG = with_tampering(WRONG)
