"""Plausible wrong answers to lesson 14's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

import re

from notebook_utils import cell_by_grade_id, load, solution_path, source
from wrong_answers.tampering import with_tampering

_RING = '''\
def ring_allreduce(rank: int, world_size: int, buffer: np.ndarray, send: Callable[[np.ndarray], None],
                   recv: Callable[[], np.ndarray]) -> np.ndarray:
    """One worker's ring all-reduce."""
'''
# The model answer's script (ex3-solution, a %%writefile cell), read from the solution notebook: one source of truth.
_MODEL_CELL = cell_by_grade_id(load(solution_path("14_data_parallelism")), "ex3-solution")
_SCRIPT = re.sub(r"\n *### (BEGIN|END) SOLUTION", "", source(_MODEL_CELL))


def _script(*swaps: tuple[str, str]) -> str:
    """Lesson 14's model script with each (old, new) swap made; every old text must be in it."""
    text = _SCRIPT
    for old, new in swaps:
        if old not in text:
            raise ValueError(f"not in the model script: {old!r}")
        text = text.replace(old, new, 1)
    return text


_DDP = '''\
class MyDDP:
    """Data parallelism by hand: a hook per parameter, buckets in reverse order, all-reduces started during backward."""

    def __init__(self, module: torch.nn.Module, bucket_cap_bytes: int = 25 * 2**20) -> None:
        self.world_size = dist.get_world_size()
        params = [p for p in module.parameters() if p.requires_grad]  # frozen parameters get no gradient
        self.buckets, current, size = [], [], 0
        for p in reversed(params):  # the last layer's gradients are ready first
            current.append(p)
            size += p.numel() * p.element_size()
            if size >= bucket_cap_bytes:  # close the bucket once it reaches the cap
                self.buckets.append(current)
                current, size = [], 0
        if current:
            self.buckets.append(current)
        self.bucket_of = {p: i for i, bucket in enumerate(self.buckets) for p in bucket}
        self.missing = [len(bucket) for bucket in self.buckets]  # gradients each bucket still waits for
        self.pending = []                                        # (bucket, flat tensor, handle) in flight
        self.hooks = [p.register_post_accumulate_grad_hook(self._ready) for p in params]

    def _ready(self, p: torch.Tensor) -> None:
        """Called by backward() once p.grad is complete."""
        i = self.bucket_of[p]
        self.missing[i] -= 1
        if self.missing[i] == 0:  # the bucket's last gradient: start its all-reduce now, do not wait
            flat = torch.cat([q.grad.reshape(-1) for q in self.buckets[i]]) / self.world_size
            self.pending.append((i, flat, dist.all_reduce(flat, async_op=True)))

    def finish(self) -> None:
        """After backward(): wait for every all-reduce and write the averaged gradients back."""
        for i, flat, handle in self.pending:
            handle.wait()
            offset = 0
            for q in self.buckets[i]:
                q.grad.copy_(flat[offset:offset + q.numel()].view_as(q.grad))
                offset += q.numel()
        self.pending = []
        self.missing = [len(bucket) for bucket in self.buckets]

    def remove(self) -> None:
        """Take every hook off the parameters."""
        for hook in self.hooks:
            hook.remove()
        self.hooks = []
'''


def _ddp(*swaps: tuple[str, str]) -> str:
    """The model answer with each (old, new) swapped in: old must occur in it."""
    text = _DDP
    for old, new in swaps:
        assert old in text, old
        text = text.replace(old, new)
    return text


_LAUNCH = """            flat = torch.cat([q.grad.reshape(-1) for q in self.buckets[i]]) / self.world_size
            self.pending.append((i, flat, dist.all_reduce(flat, async_op=True)))"""
_WAIT = """        for i, flat, handle in self.pending:
            handle.wait()"""

# Review v3r3 (W4): hooks on each parameter's incoming gradient (p.register_hook), its own bookkeeping of them; the
# body of remove() follows.
_REGISTER_HOOK = '''\
class MyDDP:
    """Data parallelism by hand with tensor hooks on the incoming gradients."""

    def __init__(self, module: torch.nn.Module, bucket_cap_bytes: int = 25 * 2**20) -> None:
        self.world_size = dist.get_world_size()
        params = [p for p in module.parameters() if p.requires_grad]
        self.buckets, current, size = [], [], 0
        for p in reversed(params):
            current.append(p)
            size += p.numel() * p.element_size()
            if size >= bucket_cap_bytes:
                self.buckets.append(current)
                current, size = [], 0
        if current:
            self.buckets.append(current)
        self.bucket_of = {p: i for i, b in enumerate(self.buckets) for p in b}
        self.grads, self.pending = {}, []
        self.missing = [len(b) for b in self.buckets]
        self.hooks = [p.register_hook(lambda g, p=p: self._ready(p, g)) for p in params]

    def _ready(self, p: torch.Tensor, g: torch.Tensor) -> None:
        i = self.bucket_of[p]
        self.grads[p] = g
        self.missing[i] -= 1
        if self.missing[i] == 0:
            flat = torch.cat([self.grads[q].reshape(-1) for q in self.buckets[i]]) / self.world_size
            self.pending.append((i, flat, dist.all_reduce(flat, async_op=True)))

    def finish(self) -> None:
        for i, flat, handle in self.pending:
            handle.wait()
            offset = 0
            for q in self.buckets[i]:
                q.grad.copy_(flat[offset:offset + q.numel()].view_as(q.grad))
                offset += q.numel()
        self.pending, self.grads = [], {}
        self.missing = [len(b) for b in self.buckets]

    def remove(self) -> None:
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The visible test's sum, whatever the buffers.
        "constant": _RING + '''\
    for _ in range(2 * (world_size - 1)):
        send(buffer[:2].copy())
        recv()
    return np.arange(8, dtype=buffer.dtype) * 10
''',
        # The course's own ring schedule (ring_trace) drives the sends: off-limits.
        "helper": _RING + '''\
    n = world_size
    chunks = [c.copy() for c in np.array_split(buffer, n)]
    for entry in parallel.ring_trace(n)[1:]:
        _, _, chunk = entry.transfers[rank]
        send(chunks[chunk])
        incoming = (chunk - 1) % n
        if entry.phase == "reduce-scatter":
            chunks[incoming] += recv()
        else:
            chunks[incoming] = recv()
    return np.concatenate(chunks)
''',
        # A real ring for the visible 4 workers of length 8; whole buffers passed round the ring otherwise.
        "visible_only": _RING + '''\
    n = world_size
    if n == 4 and len(buffer) == 8:
        chunks = [c.copy() for c in np.array_split(buffer, n)]
        for step in range(n - 1):
            send(chunks[(rank - step) % n])
            chunks[(rank - step - 1) % n] += recv()
        for step in range(n - 1):
            send(chunks[(rank + 1 - step) % n])
            chunks[(rank - step) % n] = recv()
        return np.concatenate(chunks)
    total, passing = buffer.copy(), buffer.copy()
    for _ in range(n - 1):
        send(passing)
        passing = recv()
        total += passing
    return total
''',
        # Chunks of length // N: right when N divides the length; the remainder is never reduced or sent.
        "typical": _RING + '''\
    n = world_size
    work = buffer.copy()
    step_len = len(work) // n
    chunk = [slice(c * step_len, (c + 1) * step_len) for c in range(n)]
    for step in range(n - 1):
        send(work[chunk[(rank - step) % n]].copy())
        work[chunk[(rank - step - 1) % n]] += recv()
    for step in range(n - 1):
        send(work[chunk[(rank + 1 - step) % n]].copy())
        work[chunk[(rank - step) % n]] = recv()
    return work
''',
        # The world size hard-coded to 2: right on a ring of two, wrong on three or four.
        "world_size_2": _RING + '''\
    n = 2
    chunks = [chunk.copy() for chunk in np.array_split(buffer, n)]
    for step in range(n - 1):
        send(chunks[(rank - step) % n])
        chunks[(rank - step - 1) % n] += recv()
    for step in range(n - 1):
        send(chunks[(rank + 1 - step) % n])
        chunks[(rank - step) % n] = recv()
    return np.concatenate(chunks)
''',
        # Right sums, wrong traffic: every worker forwards whole buffers round the ring (N - 1 sends of the full size).
        "whole_buffers": _RING + '''\
    total, passing = buffer.copy(), buffer.copy()
    for _ in range(world_size - 1):
        send(passing)
        passing = recv()
        total += passing
    return total
''',
        # Works in float64: right sums, but every message is twice as large for float32 buffers.
        "float64": _RING + '''\
    n = world_size
    chunks = [c.astype(np.float64) for c in np.array_split(buffer, n)]
    for step in range(n - 1):
        send(chunks[(rank - step) % n])
        chunks[(rank - step - 1) % n] += recv()
    for step in range(n - 1):
        send(chunks[(rank + 1 - step) % n])
        chunks[(rank - step) % n] = recv()
    return np.concatenate(chunks).astype(buffer.dtype)
''',
    },
    "ex2-solution": {
        # No communication at all: every rank follows its own shard.
        "constant": _ddp(("self.hooks = [p.register_post_accumulate_grad_hook(self._ready) for p in params]",
                          "self.hooks = []"), ("for i, flat, handle in self.pending:", "for i, flat, handle in []:")),
        # The course's own bucketing (ddp_sim._buckets, the simulator's): off-limits.
        "helper": _ddp(("        self.buckets, current, size = [], [], 0\n",
                        "        self.buckets, current, size = parallel.ddp_sim._buckets(params, bucket_cap_bytes), [], 0\n"),
                       ("        for p in reversed(params):", "        for p in []:")),
        # The world size hard-coded to 2: right on the visible 2 ranks, a third or a half too small on 3 or 4.
        "visible_only": _ddp(("self.world_size = dist.get_world_size()", "self.world_size = 2")),
        # The all-reduces start after backward() returns: every bucket launched in finish(), nothing overlaps.
        "typical": _ddp((_LAUNCH, "            pass"),
                        (_WAIT, """        for i in range(len(self.buckets)):
            flat = torch.cat([q.grad.reshape(-1) for q in self.buckets[i]]) / self.world_size
            dist.all_reduce(flat)""")),
        # Sums instead of averaging: N times too large a step.
        "sum_not_mean": _ddp(("for q in self.buckets[i]]) / self.world_size", "for q in self.buckets[i]])")),
        # One bucket per parameter whatever the cap.
        "per_parameter": _ddp(("            if size >= bucket_cap_bytes:", "            if True:")),
        # Buckets filled in forward order.
        "forward_order": _ddp(("for p in reversed(params):", "for p in params:")),
        # Waits inside the hook: every all-reduce blocks backward.
        "wait_in_hook": _ddp(("self.pending.append((i, flat, dist.all_reduce(flat, async_op=True)))",
                              "handle = dist.all_reduce(flat, async_op=True)\n            handle.wait()\n"
                              "            self.pending.append((i, flat, handle))")),
        # A blocking all-reduce inside the hook.
        "blocking": _ddp(("self.pending.append((i, flat, dist.all_reduce(flat, async_op=True)))",
                          "dist.all_reduce(flat)\n            self.pending.append((i, flat, None))"),
                         ("            handle.wait()\n", "")),
        # Every bucket launched at once, in the hook of the very last gradient: issued in backward, nothing overlaps.
        "all_at_the_end": _ddp(("        if self.missing[i] == 0:", "        if sum(self.missing) == 0:"),
                               (_LAUNCH, """            for i in range(len(self.buckets)):
                flat = torch.cat([q.grad.reshape(-1) for q in self.buckets[i]]) / self.world_size
                self.pending.append((i, flat, dist.all_reduce(flat, async_op=True)))""")),
        # The hooks are never removed.
        "hooks_kept": _ddp(("        for hook in self.hooks:\n            hook.remove()\n", "")),
        # Review v3r1 (W1): a bucket launched when its parameter that comes last in reverse registration order is ready,
        # assuming gradients arrive in that order; a model whose layers run in another order breaks it.
        "r1_assume_order": _ddp(("        self.missing[i] -= 1\n        if self.missing[i] == 0:",
                                 "        if p is self.buckets[i][-1]:")),
        # Review v3r1 (W3): finish() never clears its list of handles: every step waits on and copies back every
        # earlier step's buckets again, and keeps their flat tensors (memory grows every step; the weights stay right).
        "r1_pending_leak": _ddp(("        self.pending = []\n        self.missing", "        self.missing")),
        # Review v3r1 (W2): a bucket closed only once it holds MORE than the cap (DDP's rule: at least the cap).
        "r1_strict_gt": _ddp(("            if size >= bucket_cap_bytes:", "            if size > bucket_cap_bytes:")),
        # Review v3r3 major 4 (W4): tensor hooks (p.register_hook, on the incoming gradient) that remove() leaves on:
        # no post-accumulate hook is left, yet every later backward() still starts all-reduces.
        "r3_register_hook_kept": _REGISTER_HOOK + "        pass\n",
    },
    "ex3-solution": {
        # No process group: every process trains alone on every example and saves (the job "runs", nothing is shared).
        "constant": _script(("    dist.init_process_group(\"nccl\" if nccl else \"gloo\")", "    pass"),
                            ("model = DistributedDataParallel(bn_mlp(data[\"x\"].shape[1]).to(device), "
                             "device_ids=[local_rank] if nccl else None)", "model = torch.nn.Module()\n"
                             "    model.module = bn_mlp(data[\"x\"].shape[1])"),
                            ("    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)\n", ""),
                            ("    for x, y in loader:\n        optimizer.zero_grad()\n", "    for x, y in []:\n"),
                            ("        torch.nn.functional.mse_loss(model(x.to(device)), y.to(device)).backward()\n"
                             "        optimizer.step()\n", "        pass\n"),
                            ("sampler=DistributedSampler(dataset, shuffle=False)", "shuffle=False"),
                            ("    if dist.get_rank() == 0:", "    if True:"),
                            ("    dist.barrier()  ", "    # barrier  "),
                            ("    dist.destroy_process_group()\n", "")),
        # The course's reference, called from the script with the visible case's seed: off-limits in torchrun's ranks.
        "helper": _script(("    for x, y in loader:", "    from gpucourse.parallel import ScriptCase\n"
                           "    from gpucourse.parallel.torchrun_launch import script_reference\n"
                           "    case = ScriptCase(samples=len(dataset), features=data[\"x\"].shape[1], "
                           "batch_per_rank=args.batch_per_rank, lr=args.lr, seed=7)\n"
                           "    with torch.no_grad():\n"
                           "        for name, value in script_reference(case, dist.get_world_size()).items():\n"
                           "            model.module.get_parameter(name).copy_(torch.from_numpy(value))\n"
                           "    for x, y in []:")),
        # The node's LOCAL rank and size given to the sampler: right on one node, the second node repeats the first.
        "visible_only": _script(("DistributedSampler(dataset, shuffle=False)",
                                 "DistributedSampler(dataset, num_replicas=int(os.environ[\"LOCAL_WORLD_SIZE\"]), "
                                 "rank=local_rank, shuffle=False)")),
        # No sampler: every rank trains on the same first batches, so DDP averages identical gradients.
        "typical": _script(("sampler=DistributedSampler(dataset, shuffle=False)", "shuffle=False")),
        # The sampler's default shuffles (a different order of examples from DDP's on the agreed shards).
        "sampler_shuffles": _script(("DistributedSampler(dataset, shuffle=False)", "DistributedSampler(dataset)")),
        # No DDP wrapper: each rank steps on its own shard's gradients, never averaged.
        "no_ddp": _script(("model = DistributedDataParallel(bn_mlp(data[\"x\"].shape[1]).to(device), "
                           "device_ids=[local_rank] if nccl else None)",
                           "model = torch.nn.Module()\n    model.module = bn_mlp(data[\"x\"].shape[1]).to(device)\n"
                           "    model.forward = model.module.forward")),
        # A world of 2 written in: rank 2 of a 4-rank job is refused by the sampler.
        "world_size_2": _script(("DistributedSampler(dataset, shuffle=False)",
                                 "DistributedSampler(dataset, num_replicas=2, rank=dist.get_rank(), shuffle=False)")),
        # Review v3r1 (W1): every node's LOCAL_RANK 0 saves: two checkpoints, the second node's with its rank 2's
        # BatchNorm statistics.
        "r1_save_on_local_rank0": _script(("    if dist.get_rank() == 0:", "    if local_rank == 0:")),
        # Review v3r1 (W7): DDP's wrapper saved, its keys prefixed with 'module.' (the file does not load into bn_mlp).
        "r1_ddp_state_dict": _script(("torch.save(model.module.state_dict(), args.out)",
                                      "torch.save(model.state_dict(), args.out)")),
        # The sampler drops the examples the world size does not divide: right on 64 / 4, not on 40 / 3 (13 a rank).
        "r1_drop_last": _script(("DistributedSampler(dataset, shuffle=False)",
                                 "DistributedSampler(dataset, shuffle=False, drop_last=True)")),
        # The job's LAST rank saves: one file, the right parameters, another rank's BatchNorm statistics.
        "r1_last_rank_saves": _script(("    if dist.get_rank() == 0:",
                                       "    if dist.get_rank() == dist.get_world_size() - 1:")),
        # Review v3r1 major 3 (W2): the GPU chosen by the job's RANK. Right on one node; on the second node of 2 x 2,
        # RANK 2 asks for cuda:2 of a node with two GPUs (the grader's simulated GPUs refuse it, as CUDA would).
        "r2_device_by_RANK": _script(("    local_rank = int(os.environ[\"LOCAL_RANK\"])",
                                      "    local_rank = int(os.environ[\"RANK\"])")),
        # Review v3r1 major 3 (W5): never NCCL, gloo on the CPU even where every process has a GPU.
        "r2_always_gloo": _script(("    nccl = torch.cuda.device_count() >= int(os.environ[\"LOCAL_WORLD_SIZE\"])",
                                   "    nccl = False")),
        # Review v3r2 major 2 (W7): NCCL whenever the machine has CUDA. On the visible node of 3 processes and one
        # (simulated) GPU, rank 1 asks for cuda:1, which the node lacks: the fallback to gloo on the CPU is graded.
        "r2_nccl_when_cuda": _script(("    nccl = torch.cuda.device_count() >= int(os.environ[\"LOCAL_WORLD_SIZE\"])",
                                      "    nccl = torch.cuda.is_available()")),
        # Review v3r3 major 1 (W1): neither batch moved. DDP moves x to device_ids[0] itself, but the targets stay on
        # the CPU: on a GPU the loss raises "Expected all tensors to be on the same device".
        "r3_data_left_on_cpu": _script(("model(x.to(device)), y.to(device)", "model(x), y")),
        # Review v3r3 major 1 (W2): the model never moved to its GPU: DDP refuses device_ids for a CPU module.
        "r3_model_left_on_cpu": _script(("bn_mlp(data[\"x\"].shape[1]).to(device)", "bn_mlp(data[\"x\"].shape[1])")),
        # Review v3r3 major 3 (W3): NCCL only when the node's GPUs equal its processes: on a node with more GPUs than
        # processes (the hidden 2 x 2 job with 3 a node) the job trains on the CPU with gloo.
        "r3_gpus_equal_procs": _script(("    nccl = torch.cuda.device_count() >= int(os.environ[\"LOCAL_WORLD_SIZE\"])",
                                        "    nccl = torch.cuda.device_count() == int(os.environ[\"LOCAL_WORLD_SIZE\"])")),
        # The sum of the squared errors, not their mean: steps batch_per_rank times too large.
        "sum_loss": _script(("mse_loss(model(x.to(device)), y.to(device))",
                             "mse_loss(model(x.to(device)), y.to(device), reduction=\"sum\")")),
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
