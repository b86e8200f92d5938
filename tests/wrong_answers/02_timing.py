"""Plausible wrong answers to lesson 02's exercises: each must lose exactly its own exercise's points."""

WRONG: dict[str, str] = {
    # Never synchronises: on a GPU (or the simulated one) it times the launch, not the kernel.
    "ex1-solution": '''\
def my_benchmark(fn: Callable[[], object], sync: Callable[[], None], warmup: int = 2, repeats: int = 10) -> float:
    """Median seconds of one call of fn(): warm up, synchronise, then time each call up to its sync()."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)
''',
    # Counts n^2 FLOPs (one per output element) instead of 2 m k n.
    "ex2-solution": '''\
def matmul_gflops(a_shape: tuple[int, int], b_shape: tuple[int, int], seconds: float) -> float:
    """GFLOP/s of (m x k) @ (k x n) done in `seconds`: 2 m k n FLOPs (a multiply-add is 2 FLOPs)."""
    (m, k), (k2, n) = a_shape, b_shape
    if k != k2:
        raise ValueError(f"inner dimensions differ: {a_shape} @ {b_shape}")
    return m * n / seconds / 1e9
''',
    # Gives measurements "some headroom for noise" above the peak: accepts impossible rates.
    "ex3-solution": '''\
def rate_verdict(flops_per_s: float, peak_flops: float, floor: float = 0.01) -> str:
    """'above peak', 'far below peak' (under floor x peak) or 'plausible'."""
    if peak_flops <= 0:
        raise ValueError(f"peak_flops must be > 0, got {peak_flops}")
    if flops_per_s > 1.5 * peak_flops:
        return "above peak"
    if flops_per_s < floor * peak_flops:
        return "far below peak"
    return "plausible"
''',
    # Takes the first size at which B wins, even if it loses again at a larger size.
    "ex4-solution": '''\
def crossover_size(sizes: list[int], times_a: list[float], times_b: list[float]) -> int | None:
    """Smallest size from which backend B is faster than backend A at every larger size; None if never."""
    if not len(sizes) == len(times_a) == len(times_b) or not sizes:
        raise ValueError("sizes, times_a and times_b must be non-empty lists of the same length")
    for size, a, b in zip(sizes, times_a, times_b):
        if b < a:
            return size
    return None
''',
    # Returns the speed-up t1 / tk and forgets to divide by the number of threads.
    "ex5-solution": '''\
def parallel_efficiency(times_by_threads: dict[int, float]) -> dict[int, float]:
    """Parallel efficiency t1 / (k * tk) for every thread count k."""
    if 1 not in times_by_threads:
        raise ValueError("times_by_threads needs the one-thread time (key 1)")
    t1 = times_by_threads[1]
    return {k: t1 / tk for k, tk in times_by_threads.items()}
''',
}
