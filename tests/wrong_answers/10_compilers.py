"""Plausible wrong answers to lesson 10's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

_EX1 = '''\
def find_bottleneck(rows: list[dict], stages) -> str:
    """Name of the stage whose time (larger of CPU total and device total) is the largest."""
'''
_EX6 = '''\
def predict_step_s(kernel_s, launch_s: float, graph: bool = False) -> float:
    """Seconds until every kernel has run: one launch each (graph=False) or one launch for the whole graph."""
'''
WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The usual answer for a starved loop, whatever the profile.
        "constant": _EX1 + '''\
    return "data"
''',
        # The course's stage_times does the reading: off-limits here.
        "helper": _EX1 + '''\
    times = pipeline.stage_times(rows, stages)
    return max(times, key=times.get)
''',
        # CPU totals only: right for the visible CPU profiles, blind to device time.
        "visible_only": _EX1 + '''\
    by_name = {row["name"]: row for row in rows}
    missing = [stage for stage in stages if stage not in by_name]
    if missing:
        raise ValueError(f"no row for {missing}")
    return max(stages, key=lambda stage: by_name[stage]["cpu_total_us"])
''',
        # Reads the table by "Self CPU": names the row with the largest self time (the DataLoader's row or aten::mm),
        # not the stage with the largest total.
        "typical": _EX1 + '''\
    return max(rows, key=lambda row: row["self_cpu_us"])["name"]
''',
        # Adds the two clocks, as if launching and running a kernel happened one after the other.
        "sum_of_clocks": _EX1 + '''\
    by_name = {row["name"]: row for row in rows}
    missing = [stage for stage in stages if stage not in by_name]
    if missing:
        raise ValueError(f"no row for {missing}")
    return max(stages, key=lambda stage: by_name[stage]["cpu_total_us"] + by_name[stage]["device_total_us"])
''',
        # Device time wherever there is any, CPU time otherwise.
        "device_first": _EX1 + '''\
    by_name = {row["name"]: row for row in rows}
    missing = [stage for stage in stages if stage not in by_name]
    if missing:
        raise ValueError(f"no row for {missing}")
    return max(stages, key=lambda stage: by_name[stage]["device_total_us"] or by_name[stage]["cpu_total_us"])
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
