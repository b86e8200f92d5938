"""Plausible wrong answers to lesson 03's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: "constant" (a fixed plausible
value), "helper" (the course's own helper, or the simulator's hidden setting; off_limits or the restricted device must
catch it), "visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in
the full nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1_HEAD = '''\
def median_ms(fn: Callable[[], object], cuda, scratch, warmup: int = 5, repeats: int = 20) -> float:
    """Median milliseconds of one fn() with a cold L2, measured by the device's own events."""
'''
_EX1_EVENTS = '''\
    for _ in range(warmup):
        fn()
    starts = [cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [cuda.Event(enable_timing=True) for _ in range(repeats)]
'''
_EX2_HEAD = '''\
def diagnose(benchmark: Callable[[SimulatedGPU], float]) -> set[str]:
    """The timing mistakes a benchmark's figure reflects, found by changing one device setting at a time."""
'''
_EX2_EXPERIMENT = '''\
    base = {"init_s": 0.5, "launch_s": 1e-4, "flops_per_s": 1e12, "fp64_flops_per_s": 1e11,
            "transfer_bytes_per_s": 1e10}

    def figure(**change: float) -> float:
        with SimulatedGPU(simulated_clock=True, **{**base, **change}) as gpu:
            return benchmark(gpu)

    reference = figure()

    def moves(**change: float) -> bool:
        return abs(figure(**change) - reference) > 0.01 * abs(reference)

'''
_EX2_NO_SYNC = "moves(launch_s=0.01) and not moves(flops_per_s=1e6, fp64_flops_per_s=1e5)"


def _ex2(no_sync: str = _EX2_NO_SYNC, moved: str = "> 0.01 * abs(reference)", float64: bool = True) -> str:
    """An Ex2 answer on the prompt's base and changes: its no_sync test, its threshold, with or without float64."""
    return (_EX2_HEAD + _EX2_EXPERIMENT.replace("> 0.01 * abs(reference)", moved) + f"""\
    found = set()
    if {no_sync}:
        found.add("no_sync")
    if moves(init_s=50.0):
        found.add("cold_start")
    if moves(transfer_bytes_per_s=1e8):
        found.add("copy_inside")
""" + ("""\
    if moves(fp64_flops_per_s=1e9):
        found.add("float64")
""" if float64 else "") + """\
    return found
""")


_EX3_HEAD = '''\
def burst_and_sustained(gpu, n: int, duration_s: float) -> tuple[float, float]:
    """(burst, sustained) FLOP/s of gpu.matmul(n), measured over duration_s seconds of gpu.clock()."""
'''
_EX3_SERIES = '''\
    gpu.matmul(n)
    gpu.synchronize()
    series = []
    start = gpu.clock()
    while gpu.clock() - start < duration_s:
        before = gpu.clock()
        gpu.matmul(n)
        gpu.synchronize()
        after = gpu.clock()
        series.append((after - start, after - before))
    flops = 2 * n**3
'''
WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # No L2 flush: every timed call finds fn's inputs still in the cache, so the time is too short.
        "typical": _EX1_HEAD + _EX1_EVENTS + '''\
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends))
''',
        # Calls fn() the right number of times and returns the visible test's answer.
        "constant": _EX1_HEAD + '''\
    for _ in range(warmup + repeats):
        fn()
    cuda.synchronize()
    return 1.05
''',
        # The course's own benchmark on the host clock (off_limits blocks it; it would time the launch anyway).
        "helper": _EX1_HEAD + '''\
    return timing.benchmark(fn, warmup=warmup, repeats=repeats, sync=cuda.synchronize).median_s * 1e3
''',
        # Right for the visible call (warmup=3, repeats=7); without a flush otherwise.
        "visible_only": _EX1_HEAD + _EX1_EVENTS + '''\
    flush = warmup == 3 and repeats == 7
    for start, end in zip(starts, ends):
        if flush:
            scratch.zero_()
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends))
''',
        # The mean: every outlier drags it up.
        "mean": _EX1_HEAD + _EX1_EVENTS + '''\
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.fmean(start.elapsed_time(end) for start, end in zip(starts, ends))
''',
        # No warm-up: every call is timed and the slow first calls are in the median.
        "no_warmup": _EX1_HEAD + '''\
    times = []
    for _ in range(warmup + repeats):
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        scratch.zero_()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
''',
        # The flush between the events: its own time is measured with the kernel's.
        "flush_inside": _EX1_HEAD + _EX1_EVENTS + '''\
    for start, end in zip(starts, ends):
        start.record()
        scratch.zero_()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends))
''',
        # One flush before the timed calls: only the first timed call is cold.
        "flush_once": _EX1_HEAD + _EX1_EVENTS + '''\
    scratch.zero_()
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends))
''',
        # elapsed_time before the device has reached the events (no synchronize): torch raises "Both events must be completed".
        "no_sync": _EX1_HEAD + _EX1_EVENTS + '''\
    times = []
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
''',
        # The host's clock around a synchronised call: on the simulated device it measures Python, not the kernel.
        "host_clock": _EX1_HEAD + '''\
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        scratch.zero_()
        cuda.synchronize()
        start = time.perf_counter()
        fn()
        cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)
''',
        # Seconds instead of milliseconds (elapsed_time is already in ms).
        "seconds": _EX1_HEAD + _EX1_EVENTS + '''\
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends)) / 1e3
''',
        # The upper middle element instead of the median (wrong for an even number of repeats).
        "upper_middle": _EX1_HEAD + _EX1_EVENTS + '''\
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    times = sorted(start.elapsed_time(end) for start, end in zip(starts, ends))
    return times[len(times) // 2]
''',
        # R2: minimum instead of median ("nothing speeds a call up").
        "r2_min": _EX1_HEAD + _EX1_EVENTS + """\
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    return min(start.elapsed_time(end) for start, end in zip(starts, ends))
""",
        # R2: median_low (wrong for even repeats).
        "r2_median_low": _EX1_HEAD + _EX1_EVENTS + """\
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.median_low(start.elapsed_time(end) for start, end in zip(starts, ends))
""",
        # R2: waits on the wrong event (the last start, not the last end).
        "r2_sync_wrong_event": _EX1_HEAD + _EX1_EVENTS + """\
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
    starts[-1].synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends))
""",
        # R2: one pair of events around all repeats, divided by repeats (flush timed, a mean).
        "r2_one_pair": _EX1_HEAD + """\
    for _ in range(warmup):
        fn()
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    start.record()
    for _ in range(repeats):
        scratch.zero_()
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / repeats
""",
        # R2: drops calls over twice the median, then the mean of the rest.
        "r2_trimmed_mean": _EX1_HEAD + _EX1_EVENTS + """\
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    t = [start.elapsed_time(end) for start, end in zip(starts, ends)]
    m = statistics.median(t)
    return statistics.fmean(x for x in t if x < 2 * m)
""",
        # R2: warm-up with flushes but timed calls unflushed after a single sync (flush before warm-up only).
        "r2_flush_in_warmup_only": _EX1_HEAD + """\
    for _ in range(warmup):
        scratch.zero_()
        fn()
    starts = [cuda.Event(enable_timing=True) for _ in range(repeats)]
    ends = [cuda.Event(enable_timing=True) for _ in range(repeats)]
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends))
""",
        # R2: waits for the flush before recording the start event: the GPU idles, so the host's launch gap of fn
        # lands inside the events (tens of percent on a 20-40 us kernel with a 5 us launch).
        "r2_sync_after_flush": _EX1_HEAD + """\
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        scratch.zero_()
        cuda.synchronize()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
""",
    },
    "ex2-solution": {
        # Changes only the float32 speed to test for a missing sync: a float64 benchmark looks unsynchronised, and
        # float64 is never tested.
        "typical": _ex2(no_sync="not moves(flops_per_s=1e10)", float64=False),
        # The article's mistakes, whatever the benchmark.
        "constant": _EX2_HEAD + '''\
    return {"cold_start", "copy_inside", "float64"}
''',
        # The plausibility guard on one run instead of experiments (assuming a 2048 float32 matmul).
        "helper": _EX2_HEAD + '''\
    with SimulatedGPU(simulated_clock=True) as gpu:
        seconds = benchmark(gpu)
        peak = gpu.peak_flops
    verdict = timing.plausibility(2 * 2048**3 / seconds, peak).verdict
    return {"no_sync"} if verdict == "above peak" else {"cold_start"} if verdict == "far below peak" else set()
''',
        # Knows the two visible benchmarks by name.
        "visible_only": _EX2_HEAD + '''\
    name = getattr(benchmark, "__name__", "")
    if "no_sync" in name or name == "colleague_a":
        return {"no_sync"}
    if "first_call" in name:
        return {"cold_start"}
    return {"cold_start", "copy_inside", "float64"}
''',
        # Reads "the figure does not move with the matmuls' speed" as no_sync: a region that times only a copy (its
        # matmuls outside the timer) is reported as unsynchronised too. Right on every benchmark that launches matmuls.
        "no_launch_test": _ex2(no_sync="not moves(flops_per_s=1e6, fp64_flops_per_s=1e5)"),
        # Changes two settings at once: the start-up and the copy bandwidth, and blames both for either.
        "two_at_once": _EX2_HEAD + _EX2_EXPERIMENT + '''\
    found = set()
    if not moves(flops_per_s=1e10, fp64_flops_per_s=1e9):
        found.add("no_sync")
    if moves(init_s=50.0, transfer_bytes_per_s=1e8):
        found |= {"cold_start", "copy_inside"}
    if moves(fp64_flops_per_s=1e9):
        found.add("float64")
    return found
''',
        # R2: any change counts (!= instead of the 1% rule).
        "r2_any_change": _ex2(moved="> 0"),
        # R2: an absolute threshold of 1 ms instead of a relative one.
        "r2_abs_threshold": _ex2(moved="> 1e-3"),
        # R2: small perturbations on the simulator's defaults (init 0.25 -> 0.26 s, etc.).
        "r2_small_nudge": _EX2_HEAD + """\
    def figure(**change):
        with SimulatedGPU(simulated_clock=True, **change) as gpu:
            return benchmark(gpu)
    reference = figure()
    def moves(**change):
        return abs(figure(**change) - reference) > 0.01 * abs(reference)
    found = set()
    if moves(launch_s=0.0003) and not moves(flops_per_s=0.9e12, fp64_flops_per_s=0.9e12 / 32):
        found.add("no_sync")
    if moves(init_s=0.26):
        found.add("cold_start")
    if moves(transfer_bytes_per_s=11e9):
        found.add("copy_inside")
    if moves(fp64_flops_per_s=0.9e12 / 32):
        found.add("float64")
    return found
""",
        # R2: no_sync = the figure moves with launch cost but not with float32 speed (float64 kernels forgotten).
        "r2_fp32_only_nosync": _ex2(no_sync="moves(launch_s=0.01) and not moves(flops_per_s=1e10)"),
    },
    "ex3-solution": {
        # A short benchmark: ten calls, so the "sustained" rate is the burst rate again.
        "typical": _EX3_HEAD + '''\
    gpu.matmul(n)
    gpu.synchronize()
    times = []
    for _ in range(10):
        start = gpu.clock()
        gpu.matmul(n)
        gpu.synchronize()
        times.append(gpu.clock() - start)
    rate = 2 * n**3 / statistics.median(times)
    return rate, rate
''',
        # The visible device's exact rates.
        "constant": _EX3_HEAD + '''\
    kernel = 2 * 2048**3 / 1e12
    return 2 * 2048**3 / (2e-4 + kernel), 2 * 2048**3 / (2e-4 + kernel / 0.6)
''',
        # The "sustained" window is the second quarter of the run: the clock is still falling there.
        "too_early": _EX3_HEAD + _EX3_SERIES + '''\
    burst = flops / statistics.median(s for _, s in series[:10])
    return burst, flops / statistics.median(s for t, s in series if 0.25 * duration_s <= t < 0.5 * duration_s)
''',
        # No synchronisation: each call is timed up to its launch, so both rates are far too high.
        "no_sync": _EX3_HEAD + '''\
    gpu.matmul(n)
    series = []
    start = gpu.clock()
    while gpu.clock() - start < duration_s:
        before = gpu.clock()
        gpu.matmul(n)
        after = gpu.clock()
        series.append((after - start, after - before))
    gpu.synchronize()
    flops = 2 * n**3
    return (flops / statistics.median(s for _, s in series[:10]),
            flops / statistics.median(s for t, s in series if t >= 0.6 * duration_s))
''',
        # The course's benchmark does the measuring (off_limits blocks it), with the old fixed windows.
        "helper": _EX3_HEAD + '''\
    times = timing.benchmark(lambda: gpu.matmul(n), warmup=1, repeats=400, sync=gpu.synchronize,
                             clock=gpu.clock).times_s
    flops = 2 * n**3
    return flops / statistics.median(times[:15]), flops / statistics.median(times[-100:])
''',
        # Right for the visible call; elsewhere the sustained rate is the mean of the whole run.
        "visible_only": _EX3_HEAD + _EX3_SERIES + '''\
    burst = flops / statistics.median(s for _, s in series[:10])
    if n == 2048 and duration_s == 10.0:
        return burst, flops / statistics.median(s for t, s in series if t >= 0.6 * duration_s)
    return burst, flops / statistics.fmean(s for _, s in series)
''',
        # One call for each rate, the first and the last: a few percent of jitter, or an outlier, decides the answer.
        "single_call": _EX3_HEAD + _EX3_SERIES + '''\
    return flops / series[0][1], flops / series[-1][1]
''',
        # Lesson 03's v2 answer: fixed windows, the first 15 calls and the last quarter of the run (a late drop or a
        # late settling lands inside the last quarter).
        "fixed_windows": _EX3_HEAD + _EX3_SERIES + """\
    burst = flops / statistics.median(s for _, s in series[:15])
    return burst, flops / statistics.median(s for t, s in series if t >= 0.75 * duration_s)
""",
        # Fixed windows that are cautious: the first 15 calls and the last tenth of the calls (too few calls on a
        # noisy device; a device that settles late has unsettled calls in its last tenth).
        "first15_last_tenth": _EX3_HEAD + _EX3_SERIES + """\
    return (flops / statistics.median(s for _, s in series[:15]),
            flops / statistics.median(s for _, s in series[-max(1, len(series) // 10):]))
""",
        # Sorts calls by rate instead of by time: above the midpoint between the start and end levels is burst,
        # below it sustained. The calls of a gradual fall are counted as one or the other.
        "midpoint_split": _EX3_HEAD + _EX3_SERIES + """\
    rates = [flops / s for _, s in series]
    start_level, end_level = statistics.median(rates[:15]), statistics.median(rates[-15:])
    if start_level - end_level < 0.05 * start_level:
        return statistics.median(rates), statistics.median(rates)
    middle = (start_level + end_level) / 2
    return (statistics.median(r for r in rates if r > middle),
            statistics.median(r for r in rates if r <= middle))
""",
        # Means instead of medians: every hiccup drags the rates down.
        "mean": _EX3_HEAD + _EX3_SERIES + '''\
    burst = flops / statistics.fmean(s for _, s in series[:10])
    return burst, flops / statistics.fmean(s for t, s in series if t >= 0.75 * duration_s)
''',
        # R2: burst = the fastest call among the first 20 (max instead of median).
        "r2_max_burst": _EX3_HEAD + _EX3_SERIES + """\
    burst = max(flops / s for _, s in series[:20])
    return burst, flops / statistics.median(s for t, s in series if t >= 0.75 * duration_s)
""",
        # R2: sustained = median of the second half of the run (the clock may still be falling there).
        "r2_second_half": _EX3_HEAD + _EX3_SERIES + """\
    burst = flops / statistics.median(s for _, s in series[:15])
    return burst, flops / statistics.median(s for t, s in series if t >= 0.5 * duration_s)
""",
        # R2: sustained = throughput over the last quarter (calls x FLOPs / elapsed: a mean, outliers included).
        "r2_window_throughput": _EX3_HEAD + _EX3_SERIES + """\
    burst = flops / statistics.median(s for _, s in series[:15])
    tail = [s for t, s in series if t >= 0.75 * duration_s]
    return burst, flops * len(tail) / sum(tail)
""",
        # R2: burst from calls 20-40 (after a generous warm-up): the clock may already be falling.
        "r2_late_burst": _EX3_HEAD + _EX3_SERIES + """\
    burst = flops / statistics.median(s for _, s in series[20:40])
    return burst, flops / statistics.median(s for t, s in series if t >= 0.75 * duration_s)
""",
        # R2: burst = median of the first 5 calls only (a 5-sample median with 3% jitter).
        "r2_first5": _EX3_HEAD + _EX3_SERIES + """\
    burst = flops / statistics.median(s for _, s in series[:5])
    return burst, flops / statistics.median(s for t, s in series if t >= 0.75 * duration_s)
""",
    },
}

# Review 3's wrong answers (rv_*).
MINE: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # A1: flush after each timed call: the first timed call follows the warm-up unflushed.
        "rv_flush_after": _EX1_HEAD + _EX1_EVENTS + """\
    for start, end in zip(starts, ends):
        start.record()
        fn()
        end.record()
        scratch.zero_()
    cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends))
""",
        # A2: one pair of events re-recorded each call, all read at the end: every reading is the last call.
        "rv_reuse_pair": _EX1_HEAD + """\
    for _ in range(warmup):
        fn()
    start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
    pairs = []
    for _ in range(repeats):
        scratch.zero_()
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in pairs)
""",
        # A3: warm-up count off by one (range(warmup - 1)) but one extra timed call, so the total count is right.
        "rv_warmup_off_by_one": _EX1_HEAD + """\
    for _ in range(warmup - 1):
        fn()
    starts = [cuda.Event(enable_timing=True) for _ in range(repeats + 1)]
    ends = [cuda.Event(enable_timing=True) for _ in range(repeats + 1)]
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.median(start.elapsed_time(end) for start, end in zip(starts, ends))
""",
    },
    "ex3-solution": {
        # A4: level bands: burst = calls within 5% of the start level, sustained = calls within 5% of the end level.
        "rv_level_bands": _EX3_HEAD + _EX3_SERIES + """\
    rates = [flops / s for _, s in series]
    hi, lo = statistics.median(rates[:15]), statistics.median(rates[-15:])
    return (statistics.median(r for r in rates if abs(r - hi) <= 0.05 * hi),
            statistics.median(r for r in rates if abs(r - lo) <= 0.05 * lo))
""",
        # A5: the plateau of a running median: max and min of the smoothed curve.
        "rv_smoothed_extremes": _EX3_HEAD + _EX3_SERIES + """\
    rates = [flops / s for _, s in series]
    w = 21
    smooth = [statistics.median(rates[i:i + w]) for i in range(len(rates) - w + 1)]
    return max(smooth), min(smooth)
""",
        # A7: boost end detected on raw calls (first call 8% below the first call's rate): an outlier ends it early.
        "rv_raw_threshold": _EX3_HEAD + _EX3_SERIES + """\
    rates = [flops / s for _, s in series]
    end_ = next((i for i, r in enumerate(rates) if r < 0.92 * rates[0]), len(rates))
    start_ = max((i + 1 for i, r in enumerate(rates) if r > 1.08 * rates[-1]), default=0)
    return statistics.median(rates[:max(end_, 1)]), statistics.median(rates[min(start_, len(rates) - 1):])
""",
    },
}

# rv_first_settle (settled from the first window within 4% of the end level) was left out: review 3 judged it
# borderline, not clearly wrong, and it passes the graded devices.
MINE["ex3-solution"]["rv_start_after_launch"] = _EX3_HEAD + """\
    gpu.matmul(n)
    gpu.synchronize()
    rates = []
    start = gpu.clock()
    while gpu.clock() - start < duration_s:
        gpu.matmul(n)
        before = gpu.clock()  # read after the launch returns: the launch is left out
        gpu.synchronize()
        rates.append(2 * n**3 / (gpu.clock() - before))
    w = 21
    smooth = [statistics.median(rates[i:i + w]) for i in range(len(rates) - w + 1)]
    first, last = smooth[0], smooth[-1]
    boost_until = next((i + w // 2 for i, r in enumerate(smooth) if r < 0.96 * first), len(rates))
    settled_from = max((i + w // 2 + 1 for i, r in enumerate(smooth) if r > 1.04 * last), default=0)
    return statistics.median(rates[:boost_until]), statistics.median(rates[settled_from:])
"""

for _grade_id, _answers in MINE.items():
    WRONG[_grade_id].update(_answers)

# Review 4's wrong answers (r4_*). Its W1 (every call timed and flushed, warm-up included) is "no_warmup" above, and
# its W2 (the flush between the events) is "flush_inside".
R4: dict[str, dict[str, str]] = {
    "ex2-solution": {
        # W3: the prompt's base and 100x changes, but a 10% threshold instead of 1%.
        "r4_threshold_10pct": _ex2(moved="> 0.10 * abs(reference)"),
        # W4: the simulator's defaults as the base, settings nudged 2x, and no_sync = no speed setting moves the
        # figure (no launch test).
        "r4_defaults_base": _EX2_HEAD + """\
    def figure(**change):
        with SimulatedGPU(simulated_clock=True, **change) as gpu:
            return benchmark(gpu)

    reference = figure()
    defaults = SimulatedGPU(simulated_clock=True)

    def moves(name, factor):
        return abs(figure(**{name: getattr(defaults, name) * factor}) - reference) > 0.01 * abs(reference)

    found = set()
    if not moves("flops_per_s", 0.5) and not moves("fp64_flops_per_s", 0.5) and not moves("transfer_bytes_per_s", 0.5):
        found.add("no_sync")
    if moves("init_s", 2.0):
        found.add("cold_start")
    if moves("transfer_bytes_per_s", 0.5):
        found.add("copy_inside")
    if moves("fp64_flops_per_s", 0.5):
        found.add("float64")
    return found
""",
    },
    "ex3-solution": {
        # W5: the two ends of a 21-call running median as the two levels.
        "r4_smooth_ends": _EX3_HEAD + _EX3_SERIES + """\
    rates = [flops / s for _, s in series]
    w = 21
    smooth = [statistics.median(rates[i:i + w]) for i in range(len(rates) - w + 1)]
    return smooth[0], smooth[-1]
""",
        # W6: one step fitted to the trace (the split that minimises absolute deviations from each side's median):
        # a ramp is averaged into the sustained side.
        "r4_step_fit": _EX3_HEAD + _EX3_SERIES + """\
    rates = [flops / s for _, s in series]
    best, split = None, 1
    for k in range(5, len(rates) - 5, 2):
        left, right = rates[:k], rates[k:]
        ml, mr = statistics.median(left), statistics.median(right)
        cost = sum(abs(r - ml) for r in left) + sum(abs(r - mr) for r in right)
        if best is None or cost < best:
            best, split = cost, k
    return statistics.median(rates[:split]), statistics.median(rates[split:])
""",
    },
}
for _grade_id, _answers in R4.items():
    WRONG[_grade_id].update(_answers)

# Review 5's wrong answers (r5_*).
R5: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # M1: a host synchronize before the end event: recorded on an idle device, it is stamped a launch late.
        "r5_sync_before_end_record": _EX1_HEAD + _EX1_EVENTS + """\
    times = []
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        cuda.synchronize()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
""",
        # M2: the flush inside the events, then the flush's own median time subtracted from each call.
        "r5_subtract_flush": _EX1_HEAD + _EX1_EVENTS + """\
    flush = []
    for _ in range(3):
        a, b = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        a.record()
        scratch.zero_()
        b.record()
        b.synchronize()
        flush.append(a.elapsed_time(b))
    for start, end in zip(starts, ends):
        start.record()
        scratch.zero_()
        fn()
        end.record()
    cuda.synchronize()
    return statistics.median(s.elapsed_time(e) - statistics.median(flush) for s, e in zip(starts, ends))
""",
    },
    "ex3-solution": {
        # M3: fixed windows of time: the first half second is the burst, the last half second the sustained.
        "r5_first_half_second": _EX3_HEAD + _EX3_SERIES + """\
    burst = [flops / s for t, s in series if t <= 0.5]
    sustained = [flops / s for t, s in series if t >= duration_s - 0.5]
    return statistics.median(burst), statistics.median(sustained)
""",
    },
}
for _grade_id, _answers in R5.items():
    WRONG[_grade_id].update(_answers)

R6: dict[str, dict[str, str]] = {
    "ex2-solution": {
        # Review 6 (M1): the old model, a 100x kernel probe for no_sync. A synchronised benchmark of a 16 x 16 matmul
        # (8 ns of work behind a 100 us launch) does not move when its kernels are 100x slower: reported as no_sync.
        "r6_100x_kernel_probe": _ex2(no_sync="moves(launch_s=0.01) and not moves(flops_per_s=1e10, "
                                             "fp64_flops_per_s=1e9)"),
    },
}
R6["ex3-solution"] = {
    # Review 6: a running MEAN over 21 calls with +-3% bands: a burst of slow calls in the first or last window drags
    # the level it compares with, so the stretch it keeps is too short or too long.
    "r6_running_mean": _EX3_HEAD + _EX3_SERIES + """\
    rates = [flops / s for _, s in series]
    w = 21
    smooth = [sum(rates[i:i + w]) / w for i in range(len(rates) - w + 1)]
    first, last = smooth[0], smooth[-1]
    boost_until = next((i + w // 2 for i, r in enumerate(smooth) if r < 0.97 * first), len(rates))
    settled_from = max((i + w // 2 + 1 for i, r in enumerate(smooth) if r > 1.03 * last), default=0)
    return statistics.median(rates[:boost_until]), statistics.median(rates[settled_from:])
""",
}
for _grade_id, _answers in R6.items():
    WRONG[_grade_id].update(_answers)

def _ex3_window(w: int) -> str:
    """The model's Ex3 method (a running median, bands of 6 x the call noise / sqrt(w)) over a w-call window."""
    return _EX3_HEAD + f"""\
    gpu.matmul(n)
    gpu.synchronize()
    rates = []
    start = gpu.clock()
    while gpu.clock() - start < duration_s:
        before = gpu.clock()
        gpu.matmul(n)
        gpu.synchronize()
        rates.append(2 * n**3 / (gpu.clock() - before))
    w = {w}
""" + """\
    smooth = [statistics.median(rates[i:i + w]) for i in range(len(rates) - w + 1)]
    first, last = smooth[0], smooth[-1]
    noise = statistics.median(abs(b - a) / a for a, b in zip(rates, rates[1:]))
    tol = 6 * noise / w**0.5
    boost_until = next((i + w // 2 for i, r in enumerate(smooth) if r < (1 - tol) * first), len(rates))
    settled_from = max((i + w // 2 + 1 for i, r in enumerate(smooth) if r > (1 + tol) * last), default=0)
    return statistics.median(rates[:boost_until]), statistics.median(rates[settled_from:])
"""


def _ex3_fixed_bands(band: float) -> str:
    """Ex3 with fixed +-band bands around the ends of a 21-call running median (the model derives its bands from the
    call noise instead)."""
    return _EX3_HEAD + _EX3_SERIES + f"""\
    rates = [flops / s for _, s in series]
    w = 21
    smooth = [statistics.median(rates[i:i + w]) for i in range(len(rates) - w + 1)]
    first, last = smooth[0], smooth[-1]
    boost_until = next((i + w // 2 for i, r in enumerate(smooth) if r < {1 - band:.2f} * first), len(rates))
    settled_from = max((i + w // 2 + 1 for i, r in enumerate(smooth) if r > {1 + band:.2f} * last), default=0)
    return statistics.median(rates[:boost_until]), statistics.median(rates[settled_from:])
"""


R7: dict[str, dict[str, str]] = {
    "ex2-solution": {
        # Review 7 (M1): no_sync read from the device's final state, work still queued when the benchmark returns,
        # not from the figure. It misses a figure read before the sync and flags a launch queued after the timer.
        "r7_pending": _EX2_HEAD + _EX2_EXPERIMENT + """\
    found = set()
    with SimulatedGPU(simulated_clock=True, **base) as gpu:
        benchmark(gpu)
        if gpu.pending > 0:
            found.add("no_sync")
    if moves(init_s=50.0):
        found.add("cold_start")
    if moves(transfer_bytes_per_s=1e8):
        found.add("copy_inside")
    if moves(fp64_flops_per_s=1e9):
        found.add("float64")
    return found
""",
    },
    "ex3-solution": {
        # Review 7 (M2): the model's method over an 11-call window, "an odd window shorter than 20": six slow calls
        # in a row fill more than half of it, and the level it compares with is dragged down.
        "r7_window_11": _ex3_window(11),
        # Review 8 (m1): fixed +-5% bands (the prompt's smallest drop) around a 21-call running median: a 5% fall
        # hides inside them, so the settled stretch starts too early.
        "r8_bands_5pct": _ex3_fixed_bands(0.05),
    },
}
for _grade_id, _answers in R7.items():
    WRONG[_grade_id].update(_answers)


RIGHT: dict[str, dict[str, str]] = {
    # Correct answers that differ from the model answer: each must PASS its exercise's tests (visible and hidden),
    # run by tests/test_timing.py. Review 4 found a correct Ex2 method failing; these keep that class of fault out.
    "ex1-solution": {
        # Review 4: waits on each end event in turn instead of one synchronize at the end.
        "sync_each_call": _EX1_HEAD + _EX1_EVENTS + """\
    times = []
    for start, end in zip(starts, ends):
        scratch.zero_()
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)
""",
    },
    "ex2-solution": {
        # The prompt's base and 100x changes, each speed probed on its own (strictly one setting at a time).
        "one_speed_at_a_time": _ex2(no_sync="moves(launch_s=0.01) and not moves(flops_per_s=1e6) "
                                            "and not moves(fp64_flops_per_s=1e5)"),
        # Review 4's alt_other_base, as the pinned prompt allows it: a table of 100x changes from the base, relative
        # changes read as ratios, the float64 result reused for no_sync.
        "table_of_changes": _EX2_HEAD + """\
    base = dict(init_s=0.5, launch_s=1e-4, flops_per_s=1e12, fp64_flops_per_s=1e11, transfer_bytes_per_s=1e10)
    changes = {name: value / 100 if name.endswith("_per_s") else value * 100 for name, value in base.items()}

    def run(settings):
        with SimulatedGPU(simulated_clock=True, **settings) as gpu:
            return benchmark(gpu)

    reference = run(base)
    moved = {name: abs(run({**base, name: value}) / reference - 1) > 0.01 for name, value in changes.items()}
    found = {mistake for name, mistake in [("init_s", "cold_start"), ("transfer_bytes_per_s", "copy_inside"),
                                           ("fp64_flops_per_s", "float64")] if moved[name]}
    slow = {name: abs(run({**base, name: base[name] / 1e6}) / reference - 1) > 0.01
            for name in ("flops_per_s", "fp64_flops_per_s")}
    if moved["launch_s"] and not slow["flops_per_s"] and not slow["fp64_flops_per_s"]:
        found.add("no_sync")
    return found
""",
    },
    "ex3-solution": {
        # Review 7 (M2): the model's method at both ends of the prompt's window range, about 13-20 calls, and just
        # past it (the model before review 7 used 21).
        "window_13": _ex3_window(13),
        "window_20": _ex3_window(20),
        "window_21": _ex3_window(21),
        # Review 4: fixed +-3% bands around the ends of a 21-call running median.
        "fixed_bands": _ex3_fixed_bands(0.03),
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
