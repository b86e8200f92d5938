"""Plausible wrong answers to lesson 14's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

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
def accumulation_step(ddp, optimizer, micro_batches: list, loss_fn: Callable) -> None:
    """One step of one rank."""
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
        # Steps on whatever gradients are there: none, so the weights never move (and nothing is all-reduced).
        "constant": _EX4 + '''\
    optimizer.step()
''',
        # The course's own accumulation step: off-limits.
        "helper": _EX4 + '''\
    parallel.accumulation_step(ddp, optimizer, micro_batches, loss_fn)
''',
        # Right for the visible test's 2 micro-batches only: divides the loss by 2 whatever k is.
        "visible_only": _EX4 + '''\
    optimizer.zero_grad()
    for index, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if index == len(micro_batches) - 1 else ddp.no_sync():
            (loss_fn(ddp(x), y) / 2).backward()
    optimizer.step()
''',
        # No no_sync: the right weights, but one all-reduce per micro-batch (k times the bytes in every step).
        "typical": _EX4 + '''\
    optimizer.zero_grad()
    for x, y in micro_batches:
        (loss_fn(ddp(x), y) / len(micro_batches)).backward()
    optimizer.step()
''',
        # One all-reduce, but the sum of the micro-batches' mean losses: k times too large a step.
        "no_scale": _EX4 + '''\
    optimizer.zero_grad()
    for index, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if index == len(micro_batches) - 1 else ddp.no_sync():
            loss_fn(ddp(x), y).backward()
    optimizer.step()
''',
        # Everything inside no_sync: no all-reduce at all, every replica follows its own shard.
        "never_sync": _EX4 + '''\
    optimizer.zero_grad()
    with ddp.no_sync():
        for x, y in micro_batches:
            (loss_fn(ddp(x), y) / len(micro_batches)).backward()
    optimizer.step()
''',
        # Forward outside no_sync, backward inside: DDP decided at the forward pass, so every backward all-reduces.
        "backward_only_in_no_sync": _EX4 + '''\
    optimizer.zero_grad()
    for index, (x, y) in enumerate(micro_batches):
        loss = loss_fn(ddp(x), y) / len(micro_batches)
        with contextlib.nullcontext() if index == len(micro_batches) - 1 else ddp.no_sync():
            loss.backward()
    optimizer.step()
''',
        # Steps the optimizer after every micro-batch: k - 1 steps on unsynchronised gradients, replicas drift apart.
        "step_per_micro_batch": _EX4 + '''\
    optimizer.zero_grad()
    for index, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if index == len(micro_batches) - 1 else ddp.no_sync():
            (loss_fn(ddp(x), y) / len(micro_batches)).backward()
        optimizer.step()
''',
        # Forgets zero_grad: the second step adds the first step's gradients again.
        "no_zero_grad": _EX4 + '''\
    for index, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if index == len(micro_batches) - 1 else ddp.no_sync():
            (loss_fn(ddp(x), y) / len(micro_batches)).backward()
    optimizer.step()
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
