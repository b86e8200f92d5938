"""Plausible wrong answers to lesson 01's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: the visible test's), 'helper' (the course's own helper instead of the learner's
code), 'visible_only' (right on the visible test's inputs only), 'typical' (the lesson's usual mistake), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''\
def warps_to_hide(sm, target: float = 0.9):
    """Fewest warps that keep the simulated SM at least `target` busy, or None if sm.max_warps cannot."""
'''
_EX2 = '''\
def find_caches(memory) -> dict:
    """Cache levels (capacity in bytes, latency in cycles), smallest first, and the DRAM latency, from memory.chase."""
'''
_EX3 = '''\
def choose_gpu(phases, steps: int, precision: str, memory_gb: float, offers):
    """(name, cost in USD) of the offer that runs the job for the least money, or None if no offer can run it."""
'''

_SWEEP = '''\
    sizes = [2**k for k in range(10, 31)]
    latencies = [memory.chase(size) for size in sizes]
    plateaus = [[(sizes[0], latencies[0])]]
    for size, latency in zip(sizes[1:], latencies[1:]):
        if latency > 1.3 * plateaus[-1][0][1]:
            plateaus.append([])
        plateaus[-1].append((size, latency))
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # the visible SM's answer
        "constant": _EX1 + '''    busy = sm.run(min(27, sm.max_warps)).busy
    return 27 if busy >= target else None
''',
        # the course's own helper
        "helper": _EX1 + '''    from gpucourse import microbench
    return microbench.fewest_warps(sm, target)
''',
        # Little's law with the visible SM's latency, plus a correction fitted to the visible SM
        "visible_only": _EX1 + '''    import math
    warps = math.ceil(target * (380 + sm.work_per_load) / (1 + sm.work_per_load)) + 6
    return warps if warps <= sm.max_warps else None
''',
        # Little's law on the measured latency, never checked against the simulator
        "typical": _EX1 + '''    import math
    latency = sm.pointer_chase(100) / 100
    warps = math.ceil(target * (latency + sm.work_per_load) / (1 + sm.work_per_load))
    return warps if warps <= sm.max_warps else None
''',
        # searches correctly, but answers max_warps where the target cannot be reached
        "never_none": _EX1 + '''    for warps in range(1, sm.max_warps + 1):
        if sm.run(warps).busy >= target:
            return warps
    return sm.max_warps
''',
        # searches in steps of two warps (a warp pair per scheduler): not always the fewest
        "steps_of_two": _EX1 + '''    for warps in range(2, sm.max_warps + 1, 2):
        if sm.run(warps).busy >= target:
            return warps
    return None
''',
    },
    "ex2-solution": {
        # the visible hierarchy's answer
        "constant": _EX2 + '''    return {"caches": [(64 * 2**10, 28.0), (4 * 2**20, 190.0)], "dram_latency": 420.0}
''',
        # the course's own helper
        "helper": _EX2 + '''    from gpucourse import microbench
    return microbench.cache_levels(memory)
''',
        # assumes every hierarchy has exactly two caches (L1 and L2), like the visible one
        "visible_only": _EX2 + _SWEEP + '''    levels = [(p[-1][0], sorted(lat for _, lat in p)[len(p) // 2]) for p in plateaus]
    return {"caches": levels[:2], "dram_latency": levels[-1][1]}
''',
        # reports the first footprint past the jump (twice the capacity) as the capacity
        "typical": _EX2 + _SWEEP + '''    levels = [(2 * p[-1][0], sorted(lat for _, lat in p)[len(p) // 2]) for p in plateaus]
    return {"caches": levels[:-1], "dram_latency": levels[-1][1]}
''',
        # counts DRAM as one more cache level
        "dram_as_cache": _EX2 + _SWEEP + '''    levels = [(p[-1][0], sorted(lat for _, lat in p)[len(p) // 2]) for p in plateaus]
    return {"caches": levels, "dram_latency": levels[-1][1]}
''',
    },
    "ex3-solution": {
        # the visible job's choice, whatever the offers
        "constant": _EX3 + '''    for spec, usd_per_hour in offers:
        if spec.name == "H100":
            return "H100", 0.0
    return None
''',
        # the course's roofline helpers do the timing
        "helper": _EX3 + '''    from gpucourse import roofline
    best = None
    for spec, usd_per_hour in offers:
        if spec.memory_gb < memory_gb:
            continue
        try:
            peak = spec.peak_flops(precision)
        except ValueError:
            continue
        step_s = sum(roofline.time_lower_bound(f, b, peak, spec.bandwidth) for f, b in phases)
        cost = step_s * steps * usd_per_hour / 3600
        if best is None or cost < best[1]:
            best = (spec.name, cost)
    return best
''',
        # assumes every offer has the precision, as in the visible test after the T4 is dropped for memory
        "visible_only": _EX3 + '''    best = None
    for spec, usd_per_hour in offers:
        if spec.memory_gb < memory_gb or spec.name == "T4":
            continue
        peak = spec.peak_flops(precision) if spec.name in ("L4", "A100-80GB", "H100") else spec.peak_flops("float16")
        step_s = sum(max(f / peak, b / spec.bandwidth) for f, b in phases)
        cost = step_s * steps * usd_per_hour / 3600
        if best is None or cost < best[1]:
            best = (spec.name, cost)
    return best
''',
        # bounds the totals of the step instead of each phase: FLOPs and bytes of different phases overlap
        "typical": _EX3 + '''    best = None
    for spec, usd_per_hour in offers:
        if spec.memory_gb < memory_gb:
            continue
        try:
            peak = spec.peak_flops(precision)
        except ValueError:
            continue
        step_s = max(sum(f for f, _ in phases) / peak, sum(b for _, b in phases) / spec.bandwidth)
        cost = step_s * steps * usd_per_hour / 3600
        if best is None or cost < best[1]:
            best = (spec.name, cost)
    return best
''',
        # picks the cheapest hourly price among the offers that can run the job
        "cheapest_per_hour": _EX3 + '''    usable = []
    for spec, usd_per_hour in offers:
        if spec.memory_gb < memory_gb:
            continue
        try:
            peak = spec.peak_flops(precision)
        except ValueError:
            continue
        step_s = sum(max(f / peak, b / spec.bandwidth) for f, b in phases)
        usable.append((usd_per_hour, spec.name, step_s * steps * usd_per_hour / 3600))
    if not usable:
        return None
    _, name, cost = min(usable)
    return name, cost
''',
        # forgets memory: a card too small for the job is chosen
        "ignores_memory": _EX3 + '''    best = None
    for spec, usd_per_hour in offers:
        try:
            peak = spec.peak_flops(precision)
        except ValueError:
            continue
        step_s = sum(max(f / peak, b / spec.bandwidth) for f, b in phases)
        cost = step_s * steps * usd_per_hour / 3600
        if best is None or cost < best[1]:
            best = (spec.name, cost)
    return best
''',
    },
}

# patches the SM it is handed so that every warp count looks busy (the test judges on a twin it never sees)
WRONG["ex1-solution"]["tamper_instance"] = '''\
def warps_to_hide(sm, target: float) -> int | None:
    """Fewest resident warps whose run keeps the SM busy at least `target` of the time (None if max_warps cannot)."""
    class Busy:
        busy = 1.0

    sm.run = lambda warps, loads_per_warp=32: Busy()
    return 1
'''

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
