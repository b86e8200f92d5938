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

_EX3 = '''\
def clipped_mlp(model, x: torch.Tensor) -> torch.Tensor:
    """model(x) for a compilers.ClippedMLP, in tensor operations only: one graph, no graph break."""
'''
_EX4 = '''\
def serve(fn, batches, backend) -> list:
    """fn's output for each batch, all from one compilation of fn that serves every shape."""
'''
WRONG["ex2-solution"] = {
    # The input, unchanged: a tensor of the right shape.
    "constant": _EX3 + '''\
    return x.clone()
''',
    # The course's own answer: off-limits here.
    "helper": _EX3 + '''\
    return compilers.traceable_forward(model, x)
''',
    # Always scales (the visible input's peak is above the threshold): wrong when the peak is below it.
    "visible_only": _EX3 + '''\
    h = model.fc1(x)
    return model.fc2(F.gelu(h * (model.clip / h.abs().amax()))) + x
''',
    # The .item() left in: min() on a Python float instead of an if, but still a graph break.
    "typical": _EX3 + '''\
    h = model.fc1(x)
    peak = h.abs().max().item()
    return model.fc2(F.gelu(h * min(1.0, model.clip / peak))) + x
''',
    # Hides the break behind torch._dynamo.disable: the disabled call is itself a break.
    "disabled": _EX3 + '''\
    return torch._dynamo.disable(model)(x)
''',
    # The data-dependent branch kept on a tensor comparison: still a break (generic_jump).
    "tensor_if": _EX3 + '''\
    h = model.fc1(x)
    peak = h.abs().amax()
    if peak > model.clip:
        h = h * (model.clip / peak)
    return model.fc2(F.gelu(h)) + x
''',
}
WRONG["ex3-solution"] = {
    # No output at all.
    "constant": _EX4 + '''\
    return []
''',
    # The course's own answer: off-limits here.
    "helper": _EX4 + '''\
    return compilers.serve_batches(fn, batches, backend)
''',
    # Marks the batch dimension only: right while only the batch size changes.
    "visible_only": _EX4 + '''\
    compiled = torch.compile(fn, backend=backend)
    outputs = []
    for batch in batches:
        torch._dynamo.mark_dynamic(batch, 0)
        outputs.append(compiled(batch))
    return outputs
''',
    # The default compile: the first change of a size recompiles (automatic dynamic shapes).
    "typical": _EX4 + '''\
    compiled = torch.compile(fn, backend=backend)
    return [compiled(batch) for batch in batches]
''',
    # One graph per shape.
    "static": _EX4 + '''\
    compiled = torch.compile(fn, backend=backend, dynamic=False)
    return [compiled(batch) for batch in batches]
''',
    # Runs fn eagerly: right outputs, nothing compiled.
    "eager": _EX4 + '''\
    return [fn(batch) for batch in batches]
''',
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
