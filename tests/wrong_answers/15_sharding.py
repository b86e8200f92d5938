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
import itertools

from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard


def shard(model: torch.nn.Module, mesh, cap_bytes: int) -> torch.nn.Module:
    \"\"\"FSDP2 on this rank.\"\"\"
'''
_POLICY = '''\
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
'''
_ROOT = '''\
    fully_shard(model, mesh=mesh, mp_policy=policy)
'''
_RETURN = '''\
    return model
'''


def _searched(world: str = "mesh.size()", prefetch: bool = True) -> str:
    """The model answer: every plan tried on FSDP2's schedule, the fewest all-gathers that fit; the world size read
    by ``world``, the backward prefetch modelled or not."""
    return _EX2 + '''\
    def count(module):
        return sum(p.numel() for p in module.parameters())

    blocks = [count(block) for block in model.blocks]
    root, shards = count(model) - sum(blocks), 4 * count(model) / ''' + world + '''

    def peak(plan):
        live = 2 * (root + sum(n for n, choice in zip(blocks, plan) if choice == "root"))
        groups = [2 * n for n, choice in zip(blocks, plan) if choice != "root"]
        kept = [choice == "keep" for choice in plan if choice != "root"]
        top, gathered = live, list(kept)
        for n, keep in zip(groups, kept):
            top = max(top, live + n)
            live += n if keep else 0
        for i in reversed(range(len(groups))):
            for j in ''' + ("(i, i - 1)" if prefetch else "(i,)") + ''':
                if j >= 0 and not gathered[j]:
                    gathered[j], live = True, live + groups[j]
            top = max(top, live)
            gathered[i], live = False, live - groups[i]
        return top

    def calls(plan):
        return 1 + sum({"root": 0, "keep": 1, "reshard": 2}[choice] for choice in plan)

    plans = [plan for plan in itertools.product(("root", "keep", "reshard"), repeat=len(blocks))
             if shards + peak(plan) <= cap_bytes]
    best = min(plans, key=lambda plan: (calls(plan), peak(plan)))
''' + _POLICY + '''\
    for block, choice in zip(model.blocks, best):
        if choice != "root":
            fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=choice == "reshard")
''' + _ROOT + _RETURN


def _every_block(reshard: str, root: str = _ROOT) -> str:
    """Every block a group of its own with one reshard_after_forward, whatever the cap; the root or not."""
    return _EX2 + _POLICY + '''\
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=''' + reshard + ''')
''' + root + _RETURN


WRONG["ex2-solution"] = {
    # Returns the model as it came: nothing sharded.
    "constant": _EX2 + _RETURN,
    # The course's own function: off-limits (in the worker processes too).
    "helper": _EX2 + '''\
    return parallel.fsdp_shard(model, mesh, cap_bytes)
''',
    # The visible model's best plan, written out: the hidden models have other blocks.
    "visible_only": _EX2 + _POLICY + '''\
    for block, choice in zip(model.blocks, ("root", "reshard", "keep", "keep")):
        if choice != "root":
            fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=choice == "reshard")
''' + _ROOT + _RETURN,
    # The root left unsharded: embed and head stay whole, replicated on every rank.
    "typical": _every_block("True", root=""),
    # Every block its own resharded group whatever the cap: fits, with more all-gathers than needed.
    "every_block_resharded": _every_block("True"),
    # reshard_after_forward=False everywhere: every block stays gathered until its backward, over the cap.
    "never_resharded": _every_block("False"),
    # One group for all: the root's call only, the whole model gathered for the whole step.
    "root_only": _EX2 + _POLICY + _ROOT + _RETURN,
    # The shards computed for 2 ranks whatever the mesh: right on 2 ranks, a wasted budget on 3 and 4.
    "world_size_two": _searched(world="2"),
    # FSDP2's backward prefetch left out of the schedule: the peak underestimated, over the cap.
    "no_prefetch": _searched(prefetch=False),
    # A fixed rule (every block resharded but the last, kept): good on some models, not the fewest on others.
    "last_block_kept": _EX2 + _POLICY + '''\
    for i, block in enumerate(model.blocks):
        fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=i < len(model.blocks) - 1)
''' + _ROOT + _RETURN,
    # The search right, no mixed-precision policy: float32 gathers, twice the bytes, over the cap.
    "no_mixed_precision": _searched().replace(
        "    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)\n",
        "    policy = MixedPrecisionPolicy()\n"),
    # Gradients summed over the ranks in bfloat16.
    "reduce_in_bfloat16": _searched().replace("reduce_dtype=torch.float32", "reduce_dtype=torch.bfloat16"),
}

# every exercise also gets the tampering kinds (tampering/)
WRONG = with_tampering(WRONG)
