"""Worker functions for tests/test_parallel.py: a small importable module, as a learner's own worker module would be.

It imports nothing heavy, so that a worker process starts in a fraction of a second. It also holds reference
programs for the simulated networks (a ring all-reduce, a parameter server), which the package itself does not ship:
writing them is the learner's exercise.
"""

from __future__ import annotations

import os
import time


def exit_abruptly(rank: int, world_size: int) -> int:
    """Rank 1 dies without a Python traceback (as a crash in C++ code would); the others wait."""
    if rank == 1:
        os._exit(7)
    time.sleep(60)
    return rank


def add_ranks(rank: int, world_size: int, offset: int) -> int:
    """Return rank + offset: checks that arguments travel and results come back in rank order."""
    return rank + offset


def ring_allreduce_reference(rank: int, world_size: int, buffer, send, recv):
    """One rank of a ring all-reduce: N - 1 reduce-scatter steps, then N - 1 all-gather steps (np.array_split chunks)."""
    import numpy as np

    chunks = [chunk.copy() for chunk in np.array_split(buffer, world_size)]
    for step in range(world_size - 1):
        send(chunks[(rank - step) % world_size])
        chunks[(rank - step - 1) % world_size] += recv()
    for step in range(world_size - 1):
        send(chunks[(rank + 1 - step) % world_size])
        chunks[(rank - step) % world_size] = recv()
    return np.concatenate(chunks)


def averaging_server(server: int, n_workers: int, weights, lr: float, send, recv):
    """A parameter server: average the workers' gradient slices, step its slice of the weights, send it to all."""
    import numpy as np

    gradients = [recv(f"worker{k}") for k in range(n_workers)]
    new = weights - lr * np.mean(gradients, axis=0)
    for k in range(n_workers):
        send(f"worker{k}", new)
    return new
