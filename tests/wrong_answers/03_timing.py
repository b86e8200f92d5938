"""Plausible wrong answers to lesson 03's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: "constant" (a fixed plausible
value), "helper" (the course's own helper, or the simulator's hidden setting; off_limits or the restricted device must
catch it), "visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in
the full nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1_HEAD = '''\
def my_benchmark(fn: Callable[[], object], sync: Callable[[], None], warmup: int = 2, repeats: int = 10,
                 clock: Callable[[], float] = time.perf_counter) -> float:
    """Median seconds of one call of fn(): warm up, synchronise, then time each call up to its sync() with clock()."""
'''
_EX2_HEAD = '''\
def diagnose(benchmark: Callable[[SimulatedGPU], float]) -> set[str]:
    """The timing mistakes a benchmark's figure reflects, found by changing one device setting at a time."""
'''
_EX2_EXPERIMENT = '''\
    base = {"init_s": 0.5, "flops_per_s": 1e12, "fp64_flops_per_s": 1e11, "transfer_bytes_per_s": 1e10}

    def figure(**change: float) -> float:
        with SimulatedGPU(simulated_clock=True, **{**base, **change}) as gpu:
            return benchmark(gpu)

    reference = figure()

    def moves(**change: float) -> bool:
        return abs(figure(**change) - reference) > 0.01 * abs(reference)

'''
_EX3_HEAD = '''\
def cache_size(gpu) -> int:
    """Largest working set (bytes) that gpu.stream reads at cache speed: a sweep of powers of two, by measurement."""
'''
_EX3_SWEEP = '''\
    sizes = [2**k for k in range(18, 30)]
    rates = []
    for nbytes in sizes:
        passes = max(1, 2**34 // nbytes)
        seconds = timing.benchmark(lambda: gpu.stream(nbytes, passes), warmup=1, repeats=5, sync=gpu.synchronize,
                                   clock=gpu.clock).median_s
        rates.append(nbytes * passes / seconds)
'''
_EX5_HEAD = '''\
def burst_and_sustained(gpu, n: int, duration_s: float) -> tuple[float, float]:
    """(burst, sustained) FLOP/s of gpu.matmul(n): the first calls after a warm-up, and the end of duration_s."""
'''
_EX5_SERIES = '''\
    gpu.matmul(n)
    gpu.synchronize()
    series = []
    start = gpu.clock()
    while gpu.clock() - start < duration_s:
        before = gpu.clock()
        gpu.matmul(n)
        gpu.synchronize()
        series.append((gpu.clock() - start, gpu.clock() - before))
    flops = 2 * n**3
'''
_EX4_HEAD = '''\
def crossover_size(sizes: list[int], times_a: list[float], times_b: list[float]) -> int | None:
    """Smallest size from which backend B is faster than backend A at every larger size; None if never."""
    if not len(sizes) == len(times_a) == len(times_b) or not sizes:
        raise ValueError("sizes, times_a and times_b must be non-empty lists of the same length")
'''
_EX1_CALLS = '''\
    for _ in range(warmup + repeats):
        fn()
    sync()
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # Never synchronises: on a GPU (or the simulated one) it times the launch, not the kernel.
        "typical": _EX1_HEAD + '''\
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)
''',
        # Calls fn() the right number of times and returns the visible test's answer (30 ms kernel + launch).
        "constant": _EX1_HEAD + _EX1_CALLS + '''\
    return 0.0302
''',
        # The course's own benchmark does all the work.
        "helper": _EX1_HEAD + '''\
    return timing.benchmark(fn, warmup=warmup, repeats=repeats, sync=sync).median_s
''',
        # Right for the visible call (warmup=1, repeats=5); the mean of unsynchronised calls otherwise.
        "visible_only": _EX1_HEAD + '''\
    if warmup == 1 and repeats == 5:
        for _ in range(warmup):
            fn()
        sync()
        times = []
        for _ in range(repeats):
            start = clock()
            fn()
            sync()
            times.append(clock() - start)
        return statistics.median(times)
    return float(sum(_time_once(fn, clock) for _ in range(warmup + repeats)) / (warmup + repeats))


def _time_once(fn, clock):
    start = clock()
    fn()
    return clock() - start
''',
        # The mean: every hiccup drags it up.
        "mean": _EX1_HEAD + '''\
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        sync()
        times.append(clock() - start)
    return statistics.fmean(times)
''',
        # No sync() after the warm-up: queued warm-up kernels land in the first timed call.
        "no_warmup_sync": _EX1_HEAD + '''\
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        sync()
        times.append(clock() - start)
    return statistics.median(times)
''',
        # The upper middle element instead of the median (wrong for an even number of repeats).
        "upper_middle": _EX1_HEAD + '''\
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        sync()
        times.append(clock() - start)
    return sorted(times)[len(times) // 2]
''',
        # Ignores the clock it is given and reads time.perf_counter (measures Python, not the simulated GPU).
        "own_clock": _EX1_HEAD + '''\
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
''',
    },
    "ex2-solution": {
        # Changes only the float32 speed to test for a missing sync: a float64 benchmark looks unsynchronised, and
        # float64 is never tested.
        "typical": _EX2_HEAD + _EX2_EXPERIMENT + '''\
    found = set()
    if not moves(flops_per_s=1e11):
        found.add("no_sync")
    if moves(init_s=5.0):
        found.add("cold_start")
    if moves(transfer_bytes_per_s=1e9):
        found.add("copy_inside")
    return found
''',
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
    if "article" in name:
        return {"cold_start", "copy_inside", "float64"}
    return set()
''',
        # Changes two settings at once: the start-up and the copy bandwidth, and blames both for either.
        "two_at_once": _EX2_HEAD + _EX2_EXPERIMENT + '''\
    found = set()
    if not moves(flops_per_s=1e11, fp64_flops_per_s=1e10):
        found.add("no_sync")
    if moves(init_s=5.0, transfer_bytes_per_s=1e9):
        found |= {"cold_start", "copy_inside"}
    if moves(fp64_flops_per_s=1e10):
        found.add("float64")
    return found
''',
    },
    "ex3-solution": {
        # One read of the working set per timed call: the launch cost hides the cache (the rate only climbs).
        "typical": _EX3_HEAD + '''\
    sizes = [2**k for k in range(18, 30)]
    rates = []
    for nbytes in sizes:
        seconds = timing.benchmark(lambda: gpu.stream(nbytes), warmup=1, repeats=5, sync=gpu.synchronize,
                                   clock=gpu.clock).median_s
        rates.append(nbytes / seconds)
    threshold = (max(rates) + min(rates)) / 2
    return max(size for size, rate in zip(sizes, rates) if rate > threshold)
''',
        # The visible T4-like answer.
        "constant": _EX3_HEAD + '''\
    return 4 * 2**20
''',
        # Reads the simulator's own setting instead of measuring.
        "helper": _EX3_HEAD + '''\
    return int(gpu.l2_bytes)
''',
        # Stops at the first size whose single-sample rate drops: a hiccup looks like the end of the cache.
        "visible_only": _EX3_HEAD + '''\
    sizes = [2**k for k in range(18, 30)]
    previous, best = None, sizes[0]
    for nbytes in sizes:
        passes = max(1, 2**34 // nbytes)
        gpu.stream(nbytes, passes)
        gpu.synchronize()
        start = gpu.clock()
        gpu.stream(nbytes, passes)
        gpu.synchronize()
        rate = nbytes * passes / (gpu.clock() - start)
        if previous is not None and rate < 0.75 * previous:
            return best
        previous, best = rate, nbytes
    return best
''',
        # The first size that no longer fits, not the last one that does.
        "first_outside": _EX3_HEAD + _EX3_SWEEP + '''\
    threshold = (max(rates) + min(rates)) / 2
    return min(size for size, rate in zip(sizes, rates) if rate <= threshold)
''',
    },
    "ex4-solution": {
        # Takes the first size at which B wins, even if it loses again at a larger size.
        "typical": _EX4_HEAD + '''\
    for size, a, b in zip(sizes, times_a, times_b):
        if b < a:
            return size
    return None
''',
        "constant": _EX4_HEAD + '''\
    return 128
''',
        # No course helper computes a crossover; this one leans on numpy's argmax, which finds the first win.
        "helper": _EX4_HEAD + '''\
    import numpy as np
    wins = np.asarray(times_b) < np.asarray(times_a)
    return int(np.asarray(sizes)[int(np.argmax(wins))]) if wins[-1] else None
''',
        # Right on the two visible sweeps only.
        "visible_only": _EX4_HEAD + '''\
    if list(sizes) == [64, 128, 256, 512]:
        return 256
    for size, a, b in zip(sizes, times_a, times_b):
        if b < a:
            return size
    return None
''',
        # A tie counts as a win.
        "ties_win": _EX4_HEAD + '''\
    crossover = None
    for size, a, b in zip(reversed(sizes), reversed(times_a), reversed(times_b)):
        if b > a:
            break
        crossover = size
    return crossover
''',
    },
    "ex5-solution": {
        # A short benchmark: ten calls, so the "sustained" rate is the burst rate again.
        "typical": _EX5_HEAD + '''\
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
        "constant": _EX5_HEAD + '''\
    kernel = 2 * 2048**3 / 1e12
    return 2 * 2048**3 / (2e-4 + kernel), 2 * 2048**3 / (2e-4 + kernel / 0.6)
''',
        # The course's rate_over_time does the measuring (off_limits blocks it).
        "helper": _EX5_HEAD + '''\
    series = timing.rate_over_time(lambda: gpu.matmul(n), duration_s=duration_s, sync=gpu.synchronize,
                                   clock=gpu.clock)
    flops = 2 * n**3
    return (flops / statistics.median(s for _, s in series[:5]),
            flops / statistics.median(s for t, s in series if t >= 0.75 * duration_s))
''',
        # Right for the visible call; elsewhere the sustained rate is the mean of the whole run.
        "visible_only": _EX5_HEAD + _EX5_SERIES + '''\
    burst = flops / statistics.median(s for _, s in series[:5])
    if n == 2048 and duration_s == 4.0:
        return burst, flops / statistics.median(s for t, s in series if t >= 0.75 * duration_s)
    return burst, flops / statistics.fmean(s for _, s in series)
''',
        # Means instead of medians: every hiccup drags the rates down.
        "mean": _EX5_HEAD + _EX5_SERIES + '''\
    burst = flops / statistics.fmean(s for _, s in series[:10])
    return burst, flops / statistics.fmean(s for t, s in series if t >= 0.75 * duration_s)
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
