"""Plausible wrong answers to lesson 10's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''\
def diagnose(prof, stages) -> dict:
    """The bottleneck stage of a profile, the operation that dominates it, and what kind of bottleneck it is."""
'''
_EX1_WALK = '''\
    totals = dict.fromkeys(stages, 0.0)
    in_ops = dict.fromkeys(stages, 0.0)
    ops = {stage: {} for stage in stages}
    for event in prof.events():
        if event.name not in totals:
            continue
        totals[event.name] += event.cpu_time_total
'''
_EX1_KIND = '''\
    missing = [stage for stage in stages if not totals[stage]]
    if missing:
        raise ValueError(f"no event for {missing}")
    stage = max(stages, key=totals.get)
    if ops[stage]:
        op, (self_us, calls) = max(ops[stage].items(), key=lambda item: item[1][0])
        if calls >= 100 and self_us / calls < 50:
            return {"stage": stage, "op": op, "kind": "launch-bound"}
        if in_ops[stage] >= 0.5 * totals[stage]:
            return {"stage": stage, "op": op, "kind": "op-bound"}
    return {"stage": stage, "op": None, "kind": "waiting"}
'''
WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The visible test's answer, whatever the profile.
        "constant": _EX1 + '''\
    return {"stage": "forward", "op": "aten::addmm", "kind": "op-bound"}
''',
        # The course's own reading of a profile: off-limits here.
        "helper": _EX1 + '''\
    return profiler.bottleneck(prof, stages)
''',
        # Right for the visible stage names only; otherwise the largest stage, called waiting.
        "visible_only": _EX1 + '''\
    if list(stages) == ["data", "forward", "backward", "optimizer"]:
        return {"stage": "forward", "op": "aten::addmm", "kind": "op-bound"}
    totals = {stage: sum(e.cpu_time_total for e in prof.events() if e.name == stage) for stage in stages}
    return {"stage": max(stages, key=totals.get), "op": None, "kind": "waiting"}
''',
        # Reads only the stage's direct children: an operation nested one level down (aten::addmm inside
        # aten::linear) is never seen.
        "typical": _EX1 + _EX1_WALK + '''\
        for child in event.cpu_children:
            if child.name.startswith("aten::"):
                in_ops[event.name] += child.self_cpu_time_total
                entry = ops[event.name].setdefault(child.name, [0.0, 0])
                entry[0] += child.self_cpu_time_total
                entry[1] += 1
''' + _EX1_KIND,
        # Ranks the operations by their CPU total instead of their self time: names the wrapper (aten::linear).
        "total_not_self": _EX1 + _EX1_WALK + '''\
        below = list(event.cpu_children)
        while below:
            child = below.pop()
            below.extend(child.cpu_children)
            if child.name.startswith("aten::"):
                in_ops[event.name] += child.self_cpu_time_total
                entry = ops[event.name].setdefault(child.name, [0.0, 0])
                entry[0] += child.cpu_time_total
                entry[1] += 1
''' + _EX1_KIND,
        # v2's model answer: CPU self time for every operation, also on a GPU profile (where it is only the launch).
        "cpu_self_time": '''\
def diagnose(prof, stages) -> dict:
    """The bottleneck stage of a profile, the operation that dominates it, and what kind of bottleneck it is."""
    totals = dict.fromkeys(stages, 0.0)
    in_ops = dict.fromkeys(stages, 0.0)
    ops = {stage: {} for stage in stages}
    seen = set()
    for event in prof.events():
        if event.name not in totals:
            continue
        seen.add(event.name)
        totals[event.name] += event.cpu_time_total
        below = list(event.cpu_children)
        while below:
            child = below.pop()
            below.extend(child.cpu_children)
            if child.name.startswith("aten::"):
                in_ops[event.name] += child.self_cpu_time_total
                entry = ops[event.name].setdefault(child.name, [0.0, 0])
                entry[0] += child.self_cpu_time_total
                entry[1] += 1
    missing = [stage for stage in stages if stage not in seen]
    if missing:
        raise ValueError(f"no event for {missing}")
    stage = max(stages, key=totals.get)
    if ops[stage]:
        op, (op_us, calls) = max(ops[stage].items(), key=lambda item: item[1][0])
        if calls >= 100 and op_us / calls < 50:
            return {"stage": stage, "op": op, "kind": "launch-bound"}
        if in_ops[stage] >= 0.5 * totals[stage]:
            return {"stage": stage, "op": op, "kind": "op-bound"}
    return {"stage": stage, "op": None, "kind": "waiting"}
''',
        # Device time for the operations, but the stage chosen by its CPU total alone (a GPU stage's CPU total is launches).
        "stage_by_cpu": '''\
def diagnose(prof, stages) -> dict:
    """The bottleneck stage of a profile, the operation that dominates it, and what kind of bottleneck it is."""
    totals = dict.fromkeys(stages, 0.0)
    in_ops = dict.fromkeys(stages, 0.0)
    ops = {stage: {} for stage in stages}
    seen = set()
    for event in prof.events():
        if event.name not in totals:
            continue
        seen.add(event.name)
        totals[event.name] += event.cpu_time_total
        below = list(event.cpu_children)
        while below:
            child = below.pop()
            below.extend(child.cpu_children)
            if child.name.startswith("aten::"):
                in_ops[event.name] += (child.self_device_time_total if getattr(child, 'device_time_total', 0) else child.self_cpu_time_total)
                entry = ops[event.name].setdefault(child.name, [0.0, 0])
                entry[0] += (child.self_device_time_total if getattr(child, 'device_time_total', 0) else child.self_cpu_time_total)
                entry[1] += 1
    missing = [stage for stage in stages if stage not in seen]
    if missing:
        raise ValueError(f"no event for {missing}")
    stage = max(stages, key=totals.get)
    if ops[stage]:
        op, (op_us, calls) = max(ops[stage].items(), key=lambda item: item[1][0])
        if calls >= 100 and op_us / calls < 50:
            return {"stage": stage, "op": op, "kind": "launch-bound"}
        if in_ops[stage] >= 0.5 * totals[stage]:
            return {"stage": stage, "op": op, "kind": "op-bound"}
    return {"stage": stage, "op": None, "kind": "waiting"}
''',
        # Device time whenever the event has the field: a CPU profile's zeros make every operation free.
        "device_always": '''\
def diagnose(prof, stages) -> dict:
    """The bottleneck stage of a profile, the operation that dominates it, and what kind of bottleneck it is."""
    totals = dict.fromkeys(stages, 0.0)
    in_ops = dict.fromkeys(stages, 0.0)
    ops = {stage: {} for stage in stages}
    seen = set()
    for event in prof.events():
        if event.name not in totals:
            continue
        seen.add(event.name)
        totals[event.name] += max(event.cpu_time_total, event.device_time_total)
        below = list(event.cpu_children)
        while below:
            child = below.pop()
            below.extend(child.cpu_children)
            if child.name.startswith("aten::"):
                in_ops[event.name] += child.self_device_time_total
                entry = ops[event.name].setdefault(child.name, [0.0, 0])
                entry[0] += child.self_device_time_total
                entry[1] += 1
    missing = [stage for stage in stages if stage not in seen]
    if missing:
        raise ValueError(f"no event for {missing}")
    stage = max(stages, key=totals.get)
    if ops[stage]:
        op, (op_us, calls) = max(ops[stage].items(), key=lambda item: item[1][0])
        if calls >= 100 and op_us / calls < 50:
            return {"stage": stage, "op": op, "kind": "launch-bound"}
        if in_ops[stage] >= 0.5 * totals[stage]:
            return {"stage": stage, "op": op, "kind": "op-bound"}
    return {"stage": stage, "op": None, "kind": "waiting"}
''',
        "empty_stage": '''\
def diagnose(prof, stages) -> dict:
    """The bottleneck stage of a profile, the operation that dominates it, and what kind of bottleneck it is."""
    totals = dict.fromkeys(stages, 0.0)          # CPU total of each stage, over all its calls
    in_ops = dict.fromkeys(stages, 0.0)          # self time of the aten:: operations inside it
    ops = {stage: {} for stage in stages}        # stage -> operation -> [self time, calls]
    for event in prof.events():
        if event.name not in totals:
            continue
        totals[event.name] += event.cpu_time_total
        below = list(event.cpu_children)
        while below:                             # the whole subtree, not only the direct children
            child = below.pop()
            below.extend(child.cpu_children)
            if child.name.startswith("aten::"):
                in_ops[event.name] += child.self_cpu_time_total
                entry = ops[event.name].setdefault(child.name, [0.0, 0])
                entry[0] += child.self_cpu_time_total
                entry[1] += 1
    missing = [stage for stage in stages if not totals[stage]]
    if missing:
        raise ValueError(f"no profiler event for the stage(s) {missing}")
    stage = max(stages, key=totals.get)
    op, (self_us, calls) = max(ops[stage].items(), key=lambda item: item[1][0])  # fails when the stage ran no op
    if calls >= 100 and self_us / calls < 50:
        return {"stage": stage, "op": op, "kind": "launch-bound"}
    if in_ops[stage] >= 0.5 * totals[stage]:
        return {"stage": stage, "op": op, "kind": "op-bound"}
    return {"stage": stage, "op": None, "kind": "waiting"}
''',
    },
}

_EX2_SOLUTION = 'def steady_forward(model, x: torch.Tensor, step: torch.Tensor) -> torch.Tensor:\n    """model(x, step) for a compilers.NoisyMLP in tensor operations only: one graph, no graph break."""\n    h = model.fc1(x)\n    if "item" in model.faults:     # `faults` is fixed per model: Dynamo reads it once and guards on it\n        h = h * torch.clamp(model.clip / h.abs().amax(), max=1.0)          # 1 when the peak is within clip\n    if "branch" in model.faults:\n        h = torch.where(h.mean() > model.shift, h - model.shift, h)\n    if "mask" in model.faults:\n        h = h - torch.where(h.abs() > model.floor, h, 0.0).sum() / h.numel()   # the same sum, a fixed shape\n    out = model.fc2(F.gelu(h))\n    if "step" in model.faults:\n        out = out * torch.clamp((step + 1) / model.warmup, max=1.0)\n    return out + x\n\n\ndef run_steps(model, batches, backend) -> list:\n    """steady_forward\'s output for each batch at steps 0, 1, 2, ...: one compilation, no recompile."""\n    compiled = torch.compile(steady_forward, backend=backend)\n    outputs = []\n    for step, x in enumerate(batches):\n        # dynamic=True would still specialise a size of 1 (a last batch of 1 recompiles); an unbacked size never is\n        for dim in range(x.dim() - 1):       # batch (and sequence) sizes; the features stay fixed\n            torch._dynamo.decorators.mark_unbacked(x, dim)\n        outputs.append(compiled(model, x, torch.tensor(step)))   # the step as a tensor\n    return outputs\n    ### END SOLUTION'


_EX1_SOLUTION_V3R3 = '    from torch.autograd import DeviceType\n\n    events = list(prof.events())\n    on_gpu = any(getattr(event, "device_time_total", 0) > 0 for event in events)   # the clock: device or CPU\n\n    def op_time(event):\n        return event.self_device_time_total if on_gpu else event.self_cpu_time_total\n\n    cpu = dict.fromkeys(stages, 0.0)             # CPU total of each stage, over all its calls\n    device = dict.fromkeys(stages, 0.0)          # device total of each stage (0 on a CPU profile)\n    in_ops = dict.fromkeys(stages, 0.0)          # time of the aten:: operations inside it\n    launches = dict.fromkeys(stages, 0.0)        # self CPU time of those operations (on a GPU: their launches)\n    ops = {stage: {} for stage in stages}        # stage -> operation -> [time, calls]\n    seen = set()\n    for event in events:\n        if event.name not in cpu or event.device_type != DeviceType.CPU:\n            continue                             # not a stage, or a GPU profile\'s device-side copy of its range\n        seen.add(event.name)\n        # On a GPU autograd runs backward on its own thread: the range has no children there, and its operations\n        # are top-level events of another thread that ran inside the range\'s time. They belong to the stage.\n        adopted = [other for other in events if other.thread != event.thread and other.cpu_parent is None\n                   and other.device_type == DeviceType.CPU and event.time_range.start <= other.time_range.start\n                   and other.time_range.end <= event.time_range.end]\n        cpu[event.name] += event.cpu_time_total\n        device[event.name] += sum(e.device_time_total for e in [event] + adopted) if on_gpu else 0.0\n        below = list(event.cpu_children) + adopted\n        while below:                             # the whole subtree, not only the direct children\n            child = below.pop()\n            below.extend(child.cpu_children)\n            if child.name.startswith("aten::"):\n                in_ops[event.name] += op_time(child)\n                launches[event.name] += child.self_cpu_time_total\n                entry = ops[event.name].setdefault(child.name, [0.0, 0])\n                entry[0] += op_time(child)\n                entry[1] += 1\n    missing = [stage for stage in stages if stage not in seen]\n    if missing:\n        raise ValueError(f"no profiler event for the stage(s) {missing}")\n    took = {stage: max(cpu[stage], device[stage]) for stage in stages}\n    stage = max(stages, key=took.get)\n    if ops[stage]:\n        op, (op_us, calls) = max(ops[stage].items(), key=lambda item: item[1][0])\n        made_of_calls = launches[stage] >= cpu[stage] / 5 and (not on_gpu or cpu[stage] > device[stage])\n        if calls >= 100 and op_us / calls < 50 and made_of_calls:\n            return {"stage": stage, "op": op, "kind": "launch-bound"}\n        if in_ops[stage] >= 0.5 * took[stage]:\n            return {"stage": stage, "op": op, "kind": "op-bound"}\n    return {"stage": stage, "op": None, "kind": "waiting"}\n'
_EX1_SOLUTION = '    from torch.autograd import DeviceType\n\n    events = list(prof.events())\n\n    def inside(run):               # given: (autograd\'s events adopted, aten:: operations) of one run of a stage\n        # On a GPU autograd runs backward on its own thread: the range has no children there, and its operations\n        # are top-level events of another thread that ran inside the range\'s time. They belong to the stage.\n        adopted = [other for other in events if other.thread != run.thread and other.cpu_parent is None\n                   and other.device_type == DeviceType.CPU and run.time_range.start <= other.time_range.start\n                   and other.time_range.end <= run.time_range.end]\n        below, operations = list(run.cpu_children) + adopted, []\n        while below:               # the whole subtree, not only the direct children\n            child = below.pop()\n            below.extend(child.cpu_children)\n            if child.name.startswith("aten::"):\n                operations.append(child)\n        return adopted, operations\n\n    on_gpu = any(getattr(event, "device_time_total", 0) > 0 for event in events)   # the clock: device or CPU\n\n    def op_time(event):\n        return event.self_device_time_total if on_gpu else event.self_cpu_time_total\n\n    cpu = dict.fromkeys(stages, 0.0)             # CPU total of each stage, over all its runs\n    device = dict.fromkeys(stages, 0.0)          # device total of each stage (0 on a CPU profile)\n    in_ops = dict.fromkeys(stages, 0.0)          # time of the aten:: operations inside it\n    launches = dict.fromkeys(stages, 0.0)        # self CPU time of those operations (on a GPU: their launches)\n    calls = dict.fromkeys(stages, 0)             # how many aten:: calls it made\n    runs = dict.fromkeys(stages, 0)              # how many times it ran\n    ops = {stage: {} for stage in stages}        # stage -> operation -> its time there\n    for event in events:\n        if event.name not in cpu or event.device_type != DeviceType.CPU:\n            continue                             # not a stage, or a GPU profile\'s device-side copy of its range\n        runs[event.name] += 1\n        adopted, operations = inside(event)\n        cpu[event.name] += event.cpu_time_total\n        device[event.name] += sum(e.device_time_total for e in [event] + adopted) if on_gpu else 0.0\n        for op in operations:\n            in_ops[event.name] += op_time(op)\n            launches[event.name] += op.self_cpu_time_total\n            calls[event.name] += 1\n            ops[event.name][op.name] = ops[event.name].get(op.name, 0.0) + op_time(op)\n    missing = [stage for stage in stages if not runs[stage]]\n    if missing:\n        raise ValueError(f"no profiler event for the stage(s) {missing}")\n    took = {stage: max(cpu[stage], device[stage]) for stage in stages}\n    stage = max(stages, key=took.get)\n    if ops[stage]:\n        op = max(ops[stage], key=ops[stage].get)\n        # per run of the stage, so that the verdict does not depend on how many steps were profiled\n        many_tiny = calls[stage] / runs[stage] >= 100 and in_ops[stage] / calls[stage] < 50\n        made_of_calls = launches[stage] >= cpu[stage] / 5 and (not on_gpu or cpu[stage] > device[stage])\n        if many_tiny and made_of_calls:\n            return {"stage": stage, "op": op, "kind": "launch-bound"}\n        if in_ops[stage] >= 0.5 * took[stage]:\n            return {"stage": stage, "op": op, "kind": "op-bound"}\n    return {"stage": stage, "op": None, "kind": "waiting"}\n'


def _ex1(old: str, new: str) -> str:
    """Exercise 1's model answer with one mistake: ``old`` replaced by ``new`` (which must occur)."""
    assert old in _EX1_SOLUTION, old
    return _EX1 + _EX1_SOLUTION.replace(old, new)


# v3r2's rule: launch-bound on the top operation's calls alone, even when 300 tiny calls are 0.1 % of a stage that
# sleeps (the lesson's own starved loop) or when the GPU is saturated by 45 µs kernels.
WRONG["ex1-solution"]["launch_first"] = _ex1(
    "if many_tiny and made_of_calls:", "if many_tiny:")
# Every event named like a stage added, also the device-side copy of the range that CUDA profiling records: the
# kernels are counted twice.
WRONG["ex1-solution"]["device_ranges_twice"] = _ex1(
    "if event.name not in cpu or event.device_type != DeviceType.CPU:", "if event.name not in cpu:")
# Launch-bound on a GPU whenever the calls are tiny, without asking whether the CPU outlasts the device.
WRONG["ex1-solution"]["gpu_clock_ignored"] = _ex1(
    "(not on_gpu or cpu[stage] > device[stage])", "True")


# v3r2's reviewer (major 5): wrong walks that passed. Children and grandchildren only: backward's aten::mm sits at
# depth 3 (evaluate_function -> MmBackward0 -> aten::mm).
WRONG["ex1-solution"]["r2_depth2"] = _ex1(
    """        while below:               # the whole subtree, not only the direct children
            child = below.pop()
            below.extend(child.cpu_children)
""", """        below = below + [grandchild for child in below for grandchild in child.cpu_children]
        while below:
            child = below.pop()
""")
# Every descendant's self time counted as time in operations, also a record_function range that sleeps.
WRONG["ex1-solution"]["r2_all_descendants"] = _ex1(
    """            if child.name.startswith("aten::"):
                operations.append(child)
""", """            operations.append(child)
""")
# A stage's time as CPU total + device total, although the two clocks overlap.
WRONG["ex1-solution"]["r2_stage_sum"] = _ex1(
    "took = {stage: max(cpu[stage], device[stage]) for stage in stages}",
    "took = {stage: cpu[stage] + device[stage] for stage in stages}")
# The last call of a stage kept instead of the sum over its calls.
WRONG["ex1-solution"]["r2_last_call_only"] = _ex1(
    """        cpu[event.name] += event.cpu_time_total
        device[event.name] += sum(""", """        cpu[event.name] = event.cpu_time_total
        device[event.name] = sum(""")
# Backward's operations on autograd's thread (a GPU profile) not adopted: the range looks empty (v3r2 major 3).
WRONG["ex1-solution"]["r2_backward_thread_ignored"] = _ex1(
    "below, operations = list(run.cpu_children) + adopted, []",
    "adopted = []\n        below, operations = list(run.cpu_children), []")


# v3r3's reviewer (majors 2 and 4). Launch-bound without the "under 50 µs per call" condition: 150 matrix products of
# 1.3 ms in one run of a stage are called launch-bound.
WRONG["ex1-solution"]["r3_cpu_per_call"] = _ex1(
    "many_tiny = calls[stage] / runs[stage] >= 100 and in_ops[stage] / calls[stage] < 50",
    "many_tiny = calls[stage] / runs[stage] >= 100")
# Every event of autograd's thread adopted, not only the top-level ones: each backward operation counted three times.
WRONG["ex1-solution"]["r3_adopt_nested"] = _ex1(
    "other.thread != run.thread and other.cpu_parent is None", "other.thread != run.thread")
# Launch-bound from 50 calls per run.
WRONG["ex1-solution"]["r3_calls50"] = _ex1("calls[stage] / runs[stage] >= 100", "calls[stage] / runs[stage] >= 50")
# Op-bound from a third of the stage.
WRONG["ex1-solution"]["r3_third"] = _ex1("if in_ops[stage] >= 0.5 * took[stage]:", "if in_ops[stage] >= took[stage] / 3:")
# Calls counted over the whole profile: the verdict changes with the number of steps profiled (major 4).
WRONG["ex1-solution"]["r3_calls_over_profile"] = _ex1("calls[stage] / runs[stage] >= 100", "calls[stage] >= 100")
# v3r3's model answer: the top operation's calls over the whole profile (a block at batch 1 is op-bound for 2 steps,
# launch-bound for 20).
WRONG["ex1-solution"]["r3_v3r3_model"] = _EX1 + _EX1_SOLUTION_V3R3
# Launch-bound when the tiny calls make a tenth of the stage instead of a fifth.
WRONG["ex1-solution"]["launch_share_tenth"] = _ex1("launches[stage] >= cpu[stage] / 5", "launches[stage] >= cpu[stage] / 10")
# "Tiny" up to 100 µs per call.
# v3r4's reviewer (major 3): a stage's runs counted over every event with its name, the device-side copies of a GPU
# profile's ranges too: "calls per run" halves, and a launch-bound forward of 150 tiny kernels reads as waiting.
WRONG["ex1-solution"]["r4_runs_incl_device"] = _ex1(
    """        if event.name not in cpu or event.device_type != DeviceType.CPU:
            continue                             # not a stage, or a GPU profile's device-side copy of its range
        runs[event.name] += 1
""", """        if event.name in cpu:
            runs[event.name] += 1                # Counter(e.name for e in events): device-side ranges too
        if event.name not in cpu or event.device_type != DeviceType.CPU:
            continue
""")
# v3r4's reviewer: launches must make a quarter of the stage, not a fifth.
WRONG["ex1-solution"]["r4_quarter"] = _ex1("launches[stage] >= cpu[stage] / 5", "launches[stage] >= cpu[stage] / 4")
# v3r6's reviewer (minor 3): each threshold graded on its other side too. More than 100 calls per run, not at least
# 100 (caught by a stage of exactly 100 tiny calls per run).
WRONG["ex1-solution"]["r6_gt100"] = _ex1("calls[stage] / runs[stage] >= 100", "calls[stage] / runs[stage] > 100")
# Launches making a sixth of the stage, not a fifth (caught by 200 tiny calls that make 18 % of it).
WRONG["ex1-solution"]["r6_sixth"] = _ex1("launches[stage] >= cpu[stage] / 5", "launches[stage] >= cpu[stage] / 6")
# The top operation's time divided by all the stage's calls, not the average of all its calls (caught by 150 calls of
# about 60 µs spread over six operations).
WRONG["ex1-solution"]["r6_avg_top_op_only"] = _ex1("in_ops[stage] / calls[stage] < 50",
                                                   "ops[stage][op] / calls[stage] < 50")
# v3r7's reviewer (minor 2): calls per step (the runs of the first stage), not per run of the stage; the same unless
# a stage runs several times per step (caught by a forward run 6 times per step with 20 tiny calls each).
WRONG["ex1-solution"]["r7_per_step"] = _ex1("calls[stage] / runs[stage] >= 100", "calls[stage] / runs[stages[0]] >= 100")

WRONG["ex1-solution"]["tiny_under_100us"] = _ex1("in_ops[stage] / calls[stage] < 50", "in_ops[stage] / calls[stage] < 100")


def _ex2(old: str, new: str) -> str:
    """Exercise 2's model answer with one mistake: ``old`` replaced by ``new`` (which must occur)."""
    assert old in _EX2_SOLUTION, old
    return _EX2_SOLUTION.replace(old, new)


_EX2_RUN = '''

def run_steps(model, batches, backend) -> list:
    """steady_forward's output for each batch at steps 0, 1, 2, ...: one compilation, no recompile."""
    compiled = torch.compile(steady_forward, backend=backend, dynamic=True)
    return [compiled(model, x, torch.tensor(step)) for step, x in enumerate(batches)]
'''
WRONG["ex2-solution"] = {
    # The input, unchanged: tensors of the right shape.
    "constant": '''\
def steady_forward(model, x, step):
    return x.clone()


def run_steps(model, batches, backend) -> list:
    return [x.clone() for x in batches]
''',
    # The course's own answer: off-limits here.
    "helper": '''\
def steady_forward(model, x, step):
    return compilers.steady_forward(model, x, step)


def run_steps(model, batches, backend) -> list:
    return compilers.run_steady(model, batches, backend)
''',
    # Compiled with the default shapes: right while every batch has the same size, a recompile for a smaller one.
    "visible_only": _ex2("""        for dim in range(x.dim() - 1):       # batch (and sequence) sizes; the features stay fixed
            torch._dynamo.decorators.mark_unbacked(x, dim)
""", ""),
    # The .item() left in: min() on a Python float instead of an if, but still a graph break.
    "typical": _ex2("h = h * torch.clamp(model.clip / h.abs().amax(), max=1.0)",
                    "h = h * min(1.0, model.clip / h.abs().max().item())"),
    # The data-dependent selection kept: a dynamic shape breaks the graph.
    "mask_kept": _ex2("h = h - torch.where(h.abs() > model.floor, h, 0.0).sum() / h.numel()",
                      "h = h - h[h.abs() > model.floor].sum() / h.numel()"),
    # The branch kept as a Python if on a tensor comparison: still a break.
    "tensor_if": _ex2("h = torch.where(h.mean() > model.shift, h - model.shift, h)",
                      "h = h - model.shift if h.mean() > model.shift else h"),
    # The step read back as a Python number: a break (and a guard on its value).
    "step_number": _ex2("out = out * torch.clamp((step + 1) / model.warmup, max=1.0)",
                        "out = out * min(1.0, (int(step) + 1) / model.warmup)"),
    # Hides the model behind torch._dynamo.disable: the disabled call is itself a break.
    "disabled": '''\
def steady_forward(model, x, step):
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):
        return torch._dynamo.disable(model)(x, int(step))
''' + _EX2_RUN,
    # Every habit applied, whatever model.faults says.
    "ignores_faults": _ex2('''if "mask" in model.faults:''', "if True:"),
    # Runs steady_forward eagerly: right outputs, nothing compiled.
    "eager": _ex2("compiled = torch.compile(steady_forward, backend=backend)", "compiled = steady_forward"),
    # v3r2's model answer: dynamic=True, which still specialises a size of 1: a last batch of 1 recompiles.
    "r2_dynamic_true": _ex2("""        for dim in range(x.dim() - 1):       # batch (and sequence) sizes; the features stay fixed
            torch._dynamo.decorators.mark_unbacked(x, dim)
""", "").replace("backend=backend)", "backend=backend, dynamic=True)"),
    # v3r2's reviewer (major 7): the branch habit applied whatever model.faults says.
    "r2_branch_always": _ex2('''if "branch" in model.faults:''', "if True:"),
}

_EX3_HEAD = 'def compare(a: dict, b: dict) -> dict:\n    """Bytes and kernels of two writings, read from inductor\'s generated code: which moves fewer bytes, and why."""\n'
_EX3_BODY = '    import math\n    import re\n\n    def elements(sizes):           # given: "37, 53" -> 1961; "" (a 0-d tensor) -> 1\n        return math.prod(int(size) for size in sizes.split(",") if size.strip())\n\n    def signatures(code):          # given: kernel -> [(bytes per element, "in_ptr", "out_ptr", "in_out_ptr" or None)]\n        params = {}                # one pair per parameter of the kernel\'s C++ signature; (0, None) for a scalar\n        for name, body in re.findall(r"^(\\w+) = async_compile\\.cpp_pybinding\\(.*?r\'\'\'(.*?)\'\'\'", code, re.M | re.S):\n            signature = re.search(r\'extern "C"\\s+void\\s+kernel\\((.*?)\\)\', body, re.S).group(1)\n            found = [re.fullmatch(r"\\s*(?:const\\s+)?([\\w:]+)\\s*\\*\\s*([a-z_]+?)\\d+\\s*", p) for p in signature.split(",")]\n            params[name] = [(compilers.ITEMSIZE[m[1]], m[2]) if m else (0, None) for m in found]\n        return params\n\n    def buffers(call):             # given: buffer -> elements, for each name call() gives a size: an input or a\n        size = {}                  # library\'s output (assert_size_stride), a new buffer, a view, a reused buffer\n        for line in call.splitlines():\n            if m := re.match(r"\\s*assert_size_stride\\((\\w+), \\(([^)]*)\\)", line):\n                size[m[1]] = elements(m[2])\n            elif m := re.match(r"\\s*(\\w+) = (?:empty_strided\\w*\\(|reinterpret_tensor\\(\\w+, )\\(([^)]*)\\)", line):\n                size[m[1]] = elements(m[2])                   # a view (reinterpret_tensor) at its own size\n            elif m := re.match(r"\\s*(\\w+) = (\\w+); del \\2", line):\n                size[m[1]] = size[m[2]]                       # buf3 = buf1; del buf1: buf1 reused as buf3\n        return size\n\n    def launches(code):            # bytes named by each launch of a generated kernel in one module; a library call?\n        moves = {"in_ptr": 1, "out_ptr": 1, "in_out_ptr": 2, None: 0}    # an in_out_ptr buffer is read and written\n        params = {name: [(itemsize, moves[kind]) for itemsize, kind in found]\n                  for name, found in signatures(code).items()}\n        call = code[code.index("def call("):]\n        size, fresh, moved = buffers(call), set(), []   # buffer -> elements; buffers nothing has filled yet; bytes\n        for line in call.splitlines():\n            line = line.strip()\n            if re.match(r"assert_size_stride\\(|\\w+ = reinterpret_tensor\\(", line):\n                continue                                                          # a size check or a view: no data\n            if m := re.match(r"(\\w+) = empty_strided\\w*\\(", line):                # new: nothing written in it yet\n                fresh.add(m[1])\n            elif m := re.match(r"(\\w+) = (\\w+); del \\2", line):                   # a buffer reused under a new name\n                if m[2] in fresh:\n                    fresh.add(m[1])\n            elif (m := re.match(r"(\\w+)\\((.*)\\)$", line)) and m[1] in params:     # a launch\n                arguments = re.findall(r"reinterpret_tensor\\(\\w+, \\(([^)]*)\\)(?:, \\([^)]*\\))*, \\w+\\)|(\\w+)", m[2])\n                moved.append(sum(itemsize * (min(times, 1) if buffer in fresh else times)   # fresh: nothing to read\n                                 * (elements(view) if view else size.get(buffer, 0))\n                                 for (itemsize, times), (view, buffer) in zip(params[m[1]], arguments)))\n                fresh -= set(re.findall(r"\\w+", m[2]))\n            else:\n                fresh -= set(re.findall(r"\\w+", line))    # a library call filled the buffers it names\n        return moved, bool(re.search(r"\\b(?:extern_kernels|torch\\.ops\\.aten)\\.", call))\n\n    def reading(writing):          # (graphs, kernels, bytes, a library call?) over every module of the writing\n        found = [launches(code) for code in writing["codes"]]\n        moved = [total for totals, _ in found for total in totals]\n        return len(found), len(moved), sum(moved), any(library for _, library in found)\n\n    (graphs_a, kernels_a, bytes_a, library_a), (graphs_b, kernels_b, bytes_b, library_b) = reading(a), reading(b)\n    fewer = "same" if bytes_a == bytes_b else "a" if bytes_a < bytes_b else "b"\n    if graphs_a != graphs_b:\n        why = "graph break"        # Dynamo cut one writing into more graphs\n    elif (kernels_a, bytes_a) == (kernels_b, bytes_b):\n        why = "fused"              # the same kernels: the longer source cost nothing\n    elif library_a or library_b:\n        why = "extern call"        # the same graphs, the work placed differently around a library call\n    else:\n        why = "kernels differ"     # the same graphs, no library call: inductor generated other kernels\n    return {"bytes": [bytes_a, bytes_b], "kernels": [kernels_a, kernels_b], "fewer_bytes": fewer, "why": why}\n'


def _ex3(old: str, new: str) -> str:
    """The model answer with one mistake: ``old`` replaced by ``new`` (which must occur)."""
    assert old in _EX3_BODY, old
    return _EX3_HEAD + _EX3_BODY.replace(old, new)


def _ex3_all(changes: list[tuple[str, str]]) -> str:
    """The model answer with one mistake made by several edits, each ``old`` replaced by ``new`` (which must occur)."""
    body = _EX3_BODY
    for old, new in changes:
        assert old in body, old
        body = body.replace(old, new)
    return _EX3_HEAD + body


_FEWER = '''    fewer = "same" if bytes_a == bytes_b else "a" if bytes_a < bytes_b else "b"'''
WRONG["ex3-solution"] = {
    # The visible pair's answer, whatever the pair.
    "constant": _EX3_HEAD + '''\
    return {"bytes": [11520, 5760], "kernels": [2, 1], "fewer_bytes": "b", "why": "extern call"}
''',
    # The course's own comparison: off-limits here.
    "helper": _EX3_HEAD + '''\
    return compilers.compare_writings(a, b)
''',
    # The first module only: right when neither writing has a graph break (the visible pair).
    "visible_only": _ex3('''[launches(code) for code in writing["codes"]]''',
                         '''[launches(code) for code in writing["codes"][:1]]'''),
    # The cheaper writing is the one with fewer kernels.
    "typical": _ex3(_FEWER, '''    fewer = "same" if kernels_a == kernels_b else "a" if kernels_a < kernels_b else "b"'''),
    # The cheaper writing is the one with fewer operations in its Python source.
    "r3_op_count": _ex3(_FEWER, '''    def operations(writing):
        return len(re.findall(r"[-+*/@]|\\b\\w+\\(|\\bif\\b", writing["source"].split(":", 1)[1]))

    fewer = "same" if operations(a) == operations(b) else "a" if operations(a) < operations(b) else "b"'''),
    # Kernels counted instead of graphs: a writing with more kernels is taken for one with a graph break.
    "r3_wrong_category": _ex3("if graphs_a != graphs_b:", "if kernels_a != kernels_b:"),
    # "extern call" whenever a library call or fallback appears, even where the difference is a graph break.
    "r3_extern_anywhere": _ex3("if graphs_a != graphs_b:", '''if not any(re.search(r"\\b(?:extern_kernels|torch\\.ops\\.aten)\\.", code)
                   for writing in (a, b) for code in writing["codes"]) and graphs_a != graphs_b:'''),
    # Inductor fuses, so the answer is always "fused".
    "r3_always_fused": _ex3('''"fewer_bytes": fewer, "why": why}''', '''"fewer_bytes": fewer, "why": "fused"}'''),
    # Only the bytes read counted: a writing that reads less but writes far more is taken as the cheaper one.
    "r3_read_only": _ex3('''moves = {"in_ptr": 1, "out_ptr": 1, "in_out_ptr": 2, None: 0}''',
                         '''moves = {"in_ptr": 1, "out_ptr": 0, "in_out_ptr": 1, None: 0}'''),
    # v3r3's reviewer (major 1): fewer kernels first, bytes only on a tie: the graph-broken if moves fewer bytes than
    # the one-kernel torch.where, which reads both sides.
    "r3_kernels_then_bytes": _ex3(_FEWER, '''    fewer = ("a" if kernels_a < kernels_b else "b") if kernels_a != kernels_b else (
        "same" if bytes_a == bytes_b else "a" if bytes_a < bytes_b else "b")'''),
    # v3r3's reviewer: "graph break" whenever the source holds .item() or an if (an if on a shape breaks nothing).
    "r3_why_from_source": _ex3("if graphs_a != graphs_b:", '''if any(".item()" in writing.get("source", "") or "if " in writing.get("source", "")
           for writing in (a, b)):'''),
    # v3r3's reviewer: equal bytes taken for the same code, "fused", whatever the kernels and graphs.
    "r3_same_by_bytes": _ex3("if graphs_a != graphs_b:", '''if bytes_a == bytes_b:
        why = "fused"
    elif graphs_a != graphs_b:'''),
    # v3r3's model answer: the reading done by the course's own kernel_traffic, off-limits now.
    "r3_reader_helper": _EX3_HEAD + '''\
    launches = {side: [launch for code in w["codes"] for launch in compilers.kernel_traffic(code)]
                for side, w in (("a", a), ("b", b))}
    moved = [sum(launch["read"] + launch["written"] for launch in launches[side]) for side in "ab"]
    kernels = [len(launches[side]) for side in "ab"]
    fewer = "same" if moved[0] == moved[1] else "a" if moved[0] < moved[1] else "b"
    why = ("graph break" if len(a["codes"]) != len(b["codes"]) else "fused" if (kernels[0], moved[0]) == (kernels[1], moved[1])
           else "extern call")
    return {"bytes": moved, "kernels": kernels, "fewer_bytes": fewer, "why": why}
''',
    # An in_out_ptr buffer counted once (it is read and written).
    "in_out_once": _ex3('''"in_out_ptr": 2, None: 0}''', '''"in_out_ptr": 1, None: 0}'''),
    # Four bytes per element whatever the C type: right in float32 only (the visible pair).
    "float_everywhere": _ex3("[(itemsize, moves[kind])", "[(4, moves[kind])"),
    # A buffer reused under a new name (buf3 = buf1; del buf1) not followed: a fresh one loses its freshness (layer
    # norm's statistics: an in_out_ptr then counts twice). Its size now comes from the given buffers().
    "reuse_ignored": _ex3("""                if m[2] in fresh:
                    fresh.add(m[1])""", "                pass"),
    # v3r4's reviewer (major 2): each buffer counted once per module, so an intermediate that one launch writes and
    # the next reads counts once: it undercounts exactly the traffic that fusion saves.
    "r4_dedup_buffers": _ex3_all([
        ("size, fresh, moved = buffers(call), set(), []", "size, fresh, moved, counted = buffers(call), set(), [], set()"),
        ("(min(times, 1) if buffer in fresh else times)",
         "(0 if buffer in counted else min(times, 1) if buffer in fresh else times)"),
        ("                fresh -= set(re.findall(r\"\\w+\", m[2]))\n",
         "                fresh -= set(re.findall(r\"\\w+\", m[2]))\n"
         "                counted.update(buffer for _, buffer in arguments)\n")]),
    # v3r4's model answer (major 1): a fresh in_out_ptr buffer read and written, though nothing is in it yet.
    "r4_fresh_in_out_twice": _ex3("(min(times, 1) if buffer in fresh else times)", "times"),
    # v3r4's model answer (major 1): "extern call" for any difference within one graph, with or without a library call.
    "r4_extern_default": _ex3('''    elif library_a or library_b:
        why = "extern call"        # the same graphs, the work placed differently around a library call
    else:
        why = "kernels differ"     # the same graphs, no library call: inductor generated other kernels''', '''    else:
        why = "extern call"'''),
    # v3r5's reviewer (major): "extern call" checked before "fused": two writings that compile to the same code around
    # one library call (a GELU by hand or F.gelu after a matrix multiply) are given a difference that does not exist.
    "r5_extern_before_fused": _ex3('''    elif (kernels_a, bytes_a) == (kernels_b, bytes_b):
        why = "fused"              # the same kernels: the longer source cost nothing
    elif library_a or library_b:
        why = "extern call"        # the same graphs, the work placed differently around a library call''', '''    elif library_a or library_b:
        why = "extern call"
    elif (kernels_a, bytes_a) == (kernels_b, bytes_b):
        why = "fused"'''),
    # v3r5's reviewer (major): "graph break" only when the kernel counts differ too: a sort, a log line and a multiply
    # (two modules, one kernel) against the sort and the multiply in one module (one kernel) is called "fused".
    "r5_break_needs_kernels": _ex3("if graphs_a != graphs_b:", "if graphs_a != graphs_b and kernels_a != kernels_b:"),
    # v3r5's reviewer (major): kernels counted from their definitions, not their launches: inductor defines
    # cpp_fused_sin_1 once and launches it twice, after each of two matrix multiplies.
    "r5_kernels_from_definitions": _ex3(
        "return len(found), len(moved), sum(moved)",
        "return len(found), sum(len(signatures(code)) for code in writing['codes']), sum(moved)"),
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
