"""Plausible wrong answers to lesson 02's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: "constant" (a fixed plausible
value), "helper" (the course's own helper; off_limits must catch it), "visible_only" (right on the visible test's
input only), "typical" (the lesson's typical mistake, used in the full nbgrader pipeline), and more.
"""

_EX1_HEAD = '''\
def my_benchmark(fn: Callable[[], object], sync: Callable[[], None], warmup: int = 2, repeats: int = 10,
                 clock: Callable[[], float] = time.perf_counter) -> float:
    """Median seconds of one call of fn(): warm up, synchronise, then time each call up to its sync() with clock()."""
'''
_EX2_HEAD = '''\
def matmul_gflops(a_shape: tuple[int, int], b_shape: tuple[int, int], seconds: float) -> float:
    """GFLOP/s of (m x k) @ (k x n) done in `seconds`: 2 m k n FLOPs (a multiply-add is 2 FLOPs)."""
'''
_EX3_HEAD = '''\
def rate_verdict(flops_per_s: float, peak_flops: float, floor: float = 0.01) -> str:
    """'above peak', 'far below peak' (under floor x peak) or 'plausible'."""
'''
_EX4_HEAD = '''\
def crossover_size(sizes: list[int], times_a: list[float], times_b: list[float]) -> int | None:
    """Smallest size from which backend B is faster than backend A at every larger size; None if never."""
    if not len(sizes) == len(times_a) == len(times_b) or not sizes:
        raise ValueError("sizes, times_a and times_b must be non-empty lists of the same length")
'''
_EX5_HEAD = '''\
def parallel_efficiency(times_by_threads: dict[int, float]) -> dict[int, float]:
    """Parallel efficiency t1 / (k * tk) for every thread count k."""
    if 1 not in times_by_threads:
        raise ValueError("times_by_threads needs the one-thread time (key 1)")
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
        # Counts m n FLOPs (one per output element) instead of 2 m k n.
        "typical": _EX2_HEAD + '''\
    (m, k), (k2, n) = a_shape, b_shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: {a_shape} @ {b_shape}")
    return m * n / seconds / 1e9
''',
        # The example in the question.
        "constant": _EX2_HEAD + '''\
    if a_shape[1] != b_shape[0]:
        raise ValueError("inner dimensions differ")
    return 214.7483648
''',
        "helper": _EX2_HEAD + '''\
    (m, k), (k2, n) = a_shape, b_shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: {a_shape} @ {b_shape}")
    return timing.flops_per_second(gpucourse.roofline.matmul_flops(m, n, k), seconds) / 1e9
''',
        # Right for the two visible cases; forgets the factor 2 elsewhere.
        "visible_only": _EX2_HEAD + '''\
    (m, k), (k2, n) = a_shape, b_shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: {a_shape} @ {b_shape}")
    if (m, k, n) in ((1024, 1024, 1024), (4096, 1024, 512)):
        return 2 * m * k * n / seconds / 1e9
    return m * k * n / seconds / 1e9
''',
        # Square assumption: n^3 from the first dimension only.
        "square": _EX2_HEAD + '''\
    (m, k), (k2, n) = a_shape, b_shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: {a_shape} @ {b_shape}")
    return 2 * m**3 / seconds / 1e9
''',
    },
    "ex3-solution": {
        # Gives measurements "some headroom for noise" above the peak: accepts impossible rates.
        "typical": _EX3_HEAD + '''\
    if peak_flops <= 0:
        raise ValueError(f"peak_flops must be > 0, got {peak_flops}")
    if flops_per_s > 1.5 * peak_flops:
        return "above peak"
    if flops_per_s < floor * peak_flops:
        return "far below peak"
    return "plausible"
''',
        "constant": _EX3_HEAD + '''\
    if peak_flops <= 0:
        raise ValueError(f"peak_flops must be > 0, got {peak_flops}")
    return "plausible"
''',
        "helper": _EX3_HEAD + '''\
    return timing.plausibility(flops_per_s, peak_flops, floor=floor).verdict
''',
        # The three visible cases only, by the rate's size.
        "visible_only": _EX3_HEAD + '''\
    if peak_flops <= 0:
        raise ValueError(f"peak_flops must be > 0, got {peak_flops}")
    if flops_per_s > 10e12:
        return "above peak"
    if flops_per_s < 1e12:
        return "far below peak"
    return "plausible"
''',
        # Ignores the floor argument (always 1%).
        "fixed_floor": _EX3_HEAD + '''\
    if peak_flops <= 0:
        raise ValueError(f"peak_flops must be > 0, got {peak_flops}")
    if flops_per_s > peak_flops:
        return "above peak"
    if flops_per_s < 0.01 * peak_flops:
        return "far below peak"
    return "plausible"
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
        # Returns the speed-up t1 / tk and forgets to divide by the number of threads.
        "typical": _EX5_HEAD + '''\
    t1 = times_by_threads[1]
    return {k: t1 / tk for k, tk in times_by_threads.items()}
''',
        # The example in the question, whatever the input.
        "constant": _EX5_HEAD + '''\
    return {1: 1.0, 2: 0.8}
''',
        "helper": _EX5_HEAD + '''\
    t1 = times_by_threads[1]
    return {k: timing.flops_per_second(t1, k * tk) for k, tk in times_by_threads.items()}
''',
        # Right for the visible dict; inverted ratio otherwise.
        "visible_only": _EX5_HEAD + '''\
    if times_by_threads == {1: 0.8, 2: 0.5}:
        return {1: 1.0, 2: 0.8}
    t1 = times_by_threads[1]
    return {k: k * tk / t1 for k, tk in times_by_threads.items()}
''',
    },
}
