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
_EX6 = '''\
def predict_step_s(kernel_s, launch_s: float, graph: bool = False) -> float:
    """Seconds until every kernel has run: one launch each (graph=False) or one launch for the whole graph."""
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
    "ex2-solution": {
        # The visible test's first answer.
        "constant": _EX6 + '''\
    return 82e-6
''',
        # The course's simulator measures it: off-limits here.
        "helper": _EX6 + '''\
    return launch.measure_step_s(kernel_s, launch_s, graph=graph)
''',
        # Right for the visible chains (equal kernels); launches plus the last kernel otherwise.
        "visible_only": _EX6 + '''\
    if graph:
        return float(launch_s + sum(kernel_s))
    if len(set(kernel_s)) == 1 and kernel_s[0] >= launch_s:
        return float(launch_s + sum(kernel_s))
    return float(len(kernel_s) * launch_s + kernel_s[-1])
''',
        # Launches and kernels one after the other, as if the host waited for each kernel: no overlap.
        "typical": _EX6 + '''\
    launches = 1 if graph else len(kernel_s)
    return float(launches * launch_s + sum(kernel_s))
''',
        # The larger of the two totals: the right extremes, wrong in between (and off by the first launch).
        "roofline": _EX6 + '''\
    if graph:
        return float(launch_s + sum(kernel_s))
    return float(max(len(kernel_s) * launch_s, sum(kernel_s)))
''',
        # Ignores the graph: every kernel still pays its own launch.
        "graph_ignored": _EX6 + '''\
    host = device_free = 0.0
    for seconds in kernel_s:
        host += launch_s
        device_free = max(host, device_free) + seconds
    return float(device_free)
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
WRONG["ex3-solution"] = {
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
WRONG["ex4-solution"] = {
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
