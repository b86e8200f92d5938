"""Plausible wrong answers to lesson 01's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: the visible test's), 'helper' (the course's own helper instead of the learner's
code), 'visible_only' (right on the visible test's inputs only), 'typical' (the lesson's usual mistake), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''\
def warps_to_hide(sm, target: float = 0.9):
    """Fewest resident warps that keep the simulated SM at least `target` busy, or None if sm.max_warps cannot."""
'''
_EX2 = '''\
def find_caches(memory) -> dict:
    """Cache levels (capacity in bytes, latency in cycles), smallest first, and the DRAM latency, from memory.chase."""
'''

# a model of the SM, searched without the simulator, after measuring the latency in LATENCY
_MODEL = '''\
    period = latency + sm.work_per_load
    for warps in range(1, sm.max_warps + 1):
        share = [len(range(s, warps, sm.schedulers)) for s in range(sm.schedulers)]
        if sum(min(period, n * (1 + sm.work_per_load)) for n in share) / (sm.schedulers * period) >= target:
            return warps
    return None
'''
_LATENCY = '''\
    latency = round((sm.pointer_chase(20_000) - sm.pointer_chase(10_000)) / 10_000)
'''


def _sweep(repeats: int, aggregate: str, drop_single: bool, largest: int = 35, capacity: str = "sizes[run[-1]]",
           flat: float = 0.1) -> str:
    """A find_caches body: probe powers of two, aggregate repeats, cut into runs of equal latency."""
    return f'''\
    import numpy as np
    sizes = [2**k for k in range(10, {largest})]
    latency = [float(np.{aggregate}([memory.chase(size) for _ in range({repeats})])) for size in sizes]
    runs = [[0]]
    for i in range(1, len(sizes)):
        if abs(latency[i] / latency[i - 1] - 1) <= {flat}:
            runs[-1].append(i)
        else:
            runs.append([i])
    if {drop_single}:
        runs = [run for run in runs if len(run) > 1 or run[0] in (0, len(sizes) - 1)]
    levels = [({capacity}, float(np.median([latency[i] for i in run]))) for run in runs]
'''


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # the visible SM's answer
        "constant": _EX1 + '''    return 26
''',
        # the course's own helper (a search with the simulator)
        "helper": _EX1 + '''    from gpucourse import microbench
    return microbench.fewest_warps(sm, target)
''',
        # searches with the simulator: right answers, far over the budget of one run
        "search": _EX1 + '''    for warps in range(1, sm.max_warps + 1):
        if sm.run(warps).busy >= target:
            return warps
    return None
''',
        # the visible SM's latency typed in
        "visible_only": _EX1 + '''    latency = 380
''' + _MODEL,
        # latency = one chase / its loads: the start-up cost is counted as latency
        "typical": _EX1 + '''    latency = sm.pointer_chase(100) / 100
''' + _MODEL,
        # Little's law for the whole SM at once: ignores that warps are split between schedulers
        "no_round_robin": _EX1 + _LATENCY + '''    import math
    warps = math.ceil(target * sm.schedulers * (latency + sm.work_per_load) / (1 + sm.work_per_load))
    return warps if warps <= sm.max_warps else None
''',
        # one scheduler: ignores the issue rate
        "one_scheduler": _EX1 + _LATENCY + '''    import math
    warps = math.ceil(target * (latency + sm.work_per_load) / (1 + sm.work_per_load))
    return warps if warps <= sm.max_warps else None
''',
        # > instead of >=: one warp too many exactly on a threshold
        "strict": _EX1 + _LATENCY + _MODEL.replace(">= target", "> target"),
        # the whole-SM estimate, verified with its one run, plus one warp if it falls short
        "guess_and_bump": _EX1 + _LATENCY + '''    import math
    warps = math.ceil(target * sm.schedulers * (latency + sm.work_per_load) / (1 + sm.work_per_load))
    if warps > sm.max_warps:
        return None
    if sm.run(warps).busy >= target:
        return warps
    return warps + 1 if warps < sm.max_warps else None
''',
        # short chases: the jitter is not averaged away
        "short_chase": _EX1 + '''    latency = (sm.pointer_chase(20) - sm.pointer_chase(10)) / 10
''' + _MODEL,
        # chases of 100 and 200 loads differenced: the start-up cost cancels, but the jitter is divided by 100 only
        "short_differential": _EX1 + '''    latency = round((sm.pointer_chase(200) - sm.pointer_chase(100)) / 100)
''' + _MODEL,
        # the same with 1,000 and 2,000 loads: still off by a cycle where the jitter is large
        "differential_1000": _EX1 + '''    latency = round((sm.pointer_chase(2_000) - sm.pointer_chase(1_000)) / 1_000)
''' + _MODEL,
        # the latency truncated, not rounded: one cycle short where the jitter of the two chases comes out negative
        "truncated": _EX1 + '''    latency = int((sm.pointer_chase(20_000) - sm.pointer_chase(10_000)) / 10_000)
''' + _MODEL,
        # the latency not rounded to whole cycles: a fraction of a cycle too long is one warp too many on a threshold
        "unrounded": _EX1 + '''    latency = (sm.pointer_chase(20_000) - sm.pointer_chase(10_000)) / 10_000
''' + _MODEL,
        # the same, chases in the other order (the jitter's sign flips)
        "unrounded_reversed": _EX1 + '''    short = sm.pointer_chase(10_000)
    latency = (sm.pointer_chase(20_000) - short) / 10_000
''' + _MODEL,
        # truncated, chases in the other order
        "truncated_reversed": _EX1 + '''    short = sm.pointer_chase(10_000)
    latency = int((sm.pointer_chase(20_000) - short) / 10_000)
''' + _MODEL,
        # reads the latency off the simulator's private attribute instead of measuring it
        "private_latency": _EX1 + '''    latency = sm._latency
''' + _MODEL,
        # never tries max_warps itself: None where exactly max_warps reaches the target
        "max_exclusive": _EX1 + _LATENCY + _MODEL.replace("range(1, sm.max_warps + 1)", "range(1, sm.max_warps)"),
        # answers max_warps where the target cannot be reached
        "never_none": _EX1 + _LATENCY + _MODEL.replace("return None", "return sm.max_warps"),
        # patches the SM it is handed so that every warp count looks busy (the test judges on a twin)
        "tamper_instance": _EX1 + '''    class Busy:
        busy = 1.0

    sm.run = lambda warps: Busy()
    return 1
''',
    },
    "ex2-solution": {
        # the visible hierarchy's answer
        "constant": _EX2 + '''    return {"caches": [(64 * 2**10, 28.0), (4 * 2**20, 190.0)], "dram_latency": 420.0}
''',
        # the course's own helper
        "helper": _EX2 + '''    from gpucourse import microbench
    return microbench.cache_levels(memory, largest=2**34)
''',
        # assumes every hierarchy has exactly two caches, like the visible one
        "visible_only": _EX2 + _sweep(7, "median", True) + '''    return {"caches": levels[:2], "dram_latency": levels[-1][1]}
''',
        # lesson 01's v2 model answer: one probe per footprint, a jump of 30% starts a level
        "typical": _EX2 + '''    import numpy as np
    sizes = [2**k for k in range(10, 35)]
    latencies = [memory.chase(size) for size in sizes]
    plateaus = [[(sizes[0], latencies[0])]]
    for size, latency in zip(sizes[1:], latencies[1:]):
        if latency > 1.3 * plateaus[-1][0][1]:
            plateaus.append([])
        plateaus[-1].append((size, latency))
    levels = [(plateau[-1][0], float(np.median([lat for _, lat in plateau]))) for plateau in plateaus]
    return {"caches": levels[:-1], "dram_latency": levels[-1][1]}
''',
        # repeats, but takes the mean: outliers pull it up
        "mean": _EX2 + _sweep(7, "mean", True) + '''    return {"caches": levels[:-1], "dram_latency": levels[-1][1]}
''',
        # a mixed latency at a step is reported as one more level
        "mixed_as_level": _EX2 + _sweep(7, "median", False) + '''    return {"caches": levels[:-1], "dram_latency": levels[-1][1]}
''',
        # reports the first footprint past the step (twice the capacity)
        "first_past": _EX2 + _sweep(7, "median", True, capacity="2 * sizes[run[-1]]") + '''    return {"caches": levels[:-1], "dram_latency": levels[-1][1]}
''',
        # probes only up to 1 GiB: a huge last cache is taken for DRAM
        "to_1GiB": _EX2 + _sweep(7, "median", True, largest=31) + '''    return {"caches": levels[:-1], "dram_latency": levels[-1][1]}
''',
        # reads the hierarchy off the simulator's private attributes instead of measuring it
        "private_levels": _EX2 + '''    return {"caches": list(memory._levels), "dram_latency": memory._dram}
''',
        # the same, through the instance's dictionary: whatever it holds that looks like levels
        "instance_dict": _EX2 + '''    state = vars(memory)
    levels = next(v for v in state.values() if isinstance(v, tuple) and v and isinstance(v[0], tuple))
    dram = next(v for k, v in state.items() if "dram" in k)
    return {"caches": list(levels), "dram_latency": dram}
''',
        # "flat" within 25%: a soft edge that reads 18% slower is taken for the level (twice its capacity)
        "loose_flat": _EX2 + _sweep(7, "median", True, flat=0.25) + '''    return {"caches": levels[:-1], "dram_latency": levels[-1][1]}
''',
        # a median of 5 probes: with up to one outlier in ten, some footprints still read an outlier
        "median_of_5": _EX2 + _sweep(5, "median", True) + '''    return {"caches": levels[:-1], "dram_latency": levels[-1][1]}
''',
        # counts DRAM as one more cache level
        "dram_as_cache": _EX2 + _sweep(7, "median", True) + '''    return {"caches": levels, "dram_latency": levels[-1][1]}
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
