"""Plausible wrong answers to lesson 12's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

_EX1 = '''\
def combine_gradients(local_grads: list[dict[str, np.ndarray]], shard_sizes: list[int]) -> dict[str, np.ndarray]:
    """Full-batch gradient from per-shard mean-loss gradients."""
'''
_EX2 = '''\
def ring_allreduce(rank: int, world_size: int, buffer: np.ndarray, send: Callable[[np.ndarray], None],
                   recv: Callable[[], np.ndarray]) -> np.ndarray:
    """One worker's ring all-reduce."""
'''
_EX3 = '''\
def ps_server(server: int, n_workers: int, weights: np.ndarray, lr: float, send: Callable[[str, np.ndarray], None],
              recv: Callable[[str], np.ndarray]) -> np.ndarray:
    """Parameter server `server`."""
'''
_EX4 = '''\
def weights_match(a: dict, b: dict, rtol: float = 1e-5, atol: float = 1e-6) -> bool:
    """True if two weight dicts have the same keys and shapes and all values agree."""
'''
WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The visible test's first expected value, whatever the input.
        "constant": _EX1 + '''\
    return {"w": np.array([2.0, 0.0]), "b": np.array([1.0])}
''',
        # The course's SGD step with lr = -1 on zero weights: the plain (unweighted) mean of the gradients.
        "helper": _EX1 + '''\
    return {name: parallel.sgd_step(np.zeros_like(np.asarray(local_grads[0][name], dtype=np.float64)),
                                    [g[name] for g in local_grads], lr=1.0) * -1.0 for name in local_grads[0]}
''',
        # Weighted only for the two visible shard layouts; a plain average otherwise.
        "visible_only": _EX1 + '''\
    if list(shard_sizes) in ([8, 8], [3, 1, 4]):
        total = sum(shard_sizes)
        return {name: sum(np.asarray(g[name], dtype=np.float64) * (s / total) for g, s in zip(local_grads, shard_sizes))
                for name in local_grads[0]}
    return {name: np.mean([g[name] for g in local_grads], axis=0) for name in local_grads[0]}
''',
        # Sums the workers' gradients instead of averaging them (N times too large with equal shards).
        "typical": _EX1 + '''\
    return {name: sum(np.asarray(grads[name], dtype=np.float64) for grads in local_grads) for name in local_grads[0]}
''',
        # The plain average: right for equal shards only.
        "plain_average": _EX1 + '''\
    return {name: np.mean([np.asarray(g[name], dtype=np.float64) for g in local_grads], axis=0) for name in local_grads[0]}
''',
    },
    "ex2-solution": {
        # The visible test's sum, whatever the buffers.
        "constant": _EX2 + '''\
    for _ in range(2 * (world_size - 1)):
        send(buffer[:2].copy())
        recv()
    return np.arange(8, dtype=buffer.dtype) * 10
''',
        # The course's own ring schedule (ring_trace) drives the sends: off-limits.
        "helper": _EX2 + '''\
    n = world_size
    chunks = [c.copy() for c in np.array_split(buffer, n)]
    for entry in parallel.ring_trace(n)[1:]:
        _, _, chunk = entry.transfers[rank]
        send(chunks[chunk])
        incoming = (chunk - 1) % n
        if entry.phase == "reduce-scatter":
            chunks[incoming] += recv()
        else:
            chunks[incoming] = recv()
    return np.concatenate(chunks)
''',
        # A real ring for the visible 4 workers of length 8; whole buffers passed round the ring otherwise.
        "visible_only": _EX2 + '''\
    n = world_size
    if n == 4 and len(buffer) == 8:
        chunks = [c.copy() for c in np.array_split(buffer, n)]
        for step in range(n - 1):
            send(chunks[(rank - step) % n])
            chunks[(rank - step - 1) % n] += recv()
        for step in range(n - 1):
            send(chunks[(rank + 1 - step) % n])
            chunks[(rank - step) % n] = recv()
        return np.concatenate(chunks)
    total, passing = buffer.copy(), buffer.copy()
    for _ in range(n - 1):
        send(passing)
        passing = recv()
        total += passing
    return total
''',
        # Chunks of length // N: right when N divides the length; the remainder is never reduced or sent.
        "typical": _EX2 + '''\
    n = world_size
    work = buffer.copy()
    step_len = len(work) // n
    chunk = [slice(c * step_len, (c + 1) * step_len) for c in range(n)]
    for step in range(n - 1):
        send(work[chunk[(rank - step) % n]].copy())
        work[chunk[(rank - step - 1) % n]] += recv()
    for step in range(n - 1):
        send(work[chunk[(rank + 1 - step) % n]].copy())
        work[chunk[(rank - step) % n]] = recv()
    return work
''',
        # Right sums, wrong traffic: every worker forwards whole buffers round the ring (N - 1 sends of the full size).
        "whole_buffers": _EX2 + '''\
    total, passing = buffer.copy(), buffer.copy()
    for _ in range(world_size - 1):
        send(passing)
        passing = recv()
        total += passing
    return total
''',
        # Works in float64: right sums, but every message is twice as large for float32 buffers.
        "float64": _EX2 + '''\
    n = world_size
    chunks = [c.astype(np.float64) for c in np.array_split(buffer, n)]
    for step in range(n - 1):
        send(chunks[(rank - step) % n])
        chunks[(rank - step - 1) % n] += recv()
    for step in range(n - 1):
        send(chunks[(rank + 1 - step) % n])
        chunks[(rank - step) % n] = recv()
    return np.concatenate(chunks).astype(buffer.dtype)
''',
    },
    "ex3-solution": {
        # Sends its weights back unchanged, without listening to the workers.
        "constant": _EX3 + '''\
    for k in range(n_workers):
        send(f"worker{k}", weights)
    return weights
''',
        # The course's own SGD step: off-limits.
        "helper": _EX3 + '''\
    new_weights = parallel.sgd_step(weights, [recv(f"worker{k}") for k in range(n_workers)], lr)
    for k in range(n_workers):
        send(f"worker{k}", new_weights)
    return new_weights
''',
        # Listens to the visible test's 4 workers only.
        "visible_only": _EX3 + '''\
    gradients = [recv(f"worker{k}") for k in range(4)]
    new_weights = weights - lr * np.mean(gradients, axis=0)
    for k in range(4):
        send(f"worker{k}", new_weights)
    return new_weights
''',
        # Sums the gradient slices instead of averaging them.
        "typical": _EX3 + '''\
    gradients = [recv(f"worker{k}") for k in range(n_workers)]
    new_weights = weights - lr * np.sum(gradients, axis=0)
    for k in range(n_workers):
        send(f"worker{k}", new_weights)
    return new_weights
''',
        # Sends the averaged gradient back instead of the updated weights.
        "sends_gradient": _EX3 + '''\
    average = np.mean([recv(f"worker{k}") for k in range(n_workers)], axis=0)
    for k in range(n_workers):
        send(f"worker{k}", average)
    return weights - lr * average
''',
    },
    "ex4-solution": {
        # Always a match.
        "constant": _EX4 + '''\
    return True
''',
        # The course's own max_difference: off-limits (and it ignores rtol and shapes).
        "helper": _EX4 + '''\
    return set(a) == set(b) and parallel.max_difference(a, b) <= atol
''',
        # A fixed absolute tolerance that happens to sort the visible pairs; ignores rtol, atol and shapes.
        "visible_only": _EX4 + '''\
    if set(a) != set(b):
        return False
    return all(float(np.max(np.abs(np.asarray(a[k], dtype=np.float64) - np.asarray(b[k], dtype=np.float64)))) < 1e-4
               for k in a)
''',
        # Exact equality: rejects the float32 rounding differences every correct distributed run has.
        "typical": _EX4 + '''\
    if set(a) != set(b):
        return False
    return all(np.array_equal(np.asarray(a[name]), np.asarray(b[name])) for name in a)
''',
        # np.allclose without a shape check: broadcasting lets a (2,) bias match a (1, 2) one.
        "no_shape_check": _EX4 + '''\
    if set(a) != set(b):
        return False
    return all(np.allclose(np.asarray(a[k], dtype=np.float64), np.asarray(b[k], dtype=np.float64), rtol=rtol, atol=atol)
               for k in a)
''',
    },
}
