"""Plausible wrong answers to lesson 06's exercises: each must lose exactly its own exercise's points."""

WRONG: dict[str, str] = {
    # Sums the workers' gradients instead of averaging them (N times too large with equal shards).
    "ex1-solution": '''\
def combine_gradients(local_grads: list[dict[str, np.ndarray]], shard_sizes: list[int]) -> dict[str, np.ndarray]:
    """Full-batch gradient from per-shard mean-loss gradients."""
    return {name: sum(np.asarray(grads[name], dtype=np.float64) for grads in local_grads) for name in local_grads[0]}
''',
    # Chunks of length // N: right when N divides the length, but the remainder is never reduced or counted.
    "ex2-solution": '''\
def ring_allreduce(buffers: list[np.ndarray]) -> tuple[list[np.ndarray], list[int]]:
    """Ring all-reduce over simulated workers: reduce-scatter then all-gather; return the sums and bytes sent."""
    n = len(buffers)
    work = [np.array(buffer, copy=True) for buffer in buffers]
    step_len = len(work[0]) // n
    chunk = [slice(c * step_len, (c + 1) * step_len) for c in range(n)]
    sent = [0] * n
    for step in range(n - 1):
        messages = [(i, (i + 1) % n, (i - step) % n) for i in range(n)]
        payloads = [work[i][chunk[c]].copy() for i, _, c in messages]
        for (sender, receiver, c), data in zip(messages, payloads):
            work[receiver][chunk[c]] += data
            sent[sender] += data.nbytes
    for step in range(n - 1):
        messages = [(i, (i + 1) % n, (i + 1 - step) % n) for i in range(n)]
        payloads = [work[i][chunk[c]].copy() for i, _, c in messages]
        for (sender, receiver, c), data in zip(messages, payloads):
            work[receiver][chunk[c]] = data
            sent[sender] += data.nbytes
    return work, sent
''',
    # Forgets the pull: counts only the gradients pushed to the server (and out of each worker).
    "ex3-solution": '''\
def sync_traffic(n_workers: int, model_bytes: float, n_servers: int = 1) -> dict[str, float]:
    """Bytes in + out of one node per synchronisation: a parameter server, a PS worker, a ring worker."""
    return {"ps_server": n_workers * float(model_bytes) / n_servers,
            "ps_worker": float(model_bytes),
            "ring_worker": 2 * 2 * (n_workers - 1) / n_workers * float(model_bytes)}
''',
    # Exact equality: rejects the float32 rounding differences every correct distributed run has.
    "ex4-solution": '''\
def weights_match(a: dict, b: dict, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """True if two weight dicts have the same keys and shapes and all values agree."""
    if set(a) != set(b):
        return False
    return all(np.array_equal(np.asarray(a[name]), np.asarray(b[name])) for name in a)
''',
    # Divides the idle slots by the busy ones instead of by the whole step.
    "ex5-solution": '''\
def bubble_fraction(stages: int, microbatches: int) -> float:
    """Idle share of a GPipe step."""
    if stages < 1 or microbatches < 1:
        raise ValueError(f"stages and microbatches must be >= 1, got {stages} and {microbatches}")
    return (stages - 1) / microbatches
''',
    # Summarises each micro-batch count by its mean: one slow step decides.
    "ex6-solution": '''\
def best_microbatches(step_times: dict[int, list[float]], tolerance: float = 0.05) -> int:
    """Smallest micro-batch count whose mean step time is within tolerance of the fastest mean."""
    means = {m: float(np.mean(times)) for m, times in step_times.items()}
    fastest = min(means.values())
    return min(m for m, mean in means.items() if mean <= fastest * (1 + tolerance))
''',
}
