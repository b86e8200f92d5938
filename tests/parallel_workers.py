"""Worker functions for tests/test_parallel.py: a small importable module, as a learner's own worker module would be.

It imports nothing heavy, so that a worker process starts in a fraction of a second.
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
