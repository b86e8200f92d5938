"""Launch geometry: CUDA's limits, blocks for n elements, 2-D grids, and the (x, y, z) triples of a launch.

Used by lesson 04_cuda_model and by the tracer.
"""

from __future__ import annotations

import numbers
from typing import NamedTuple

from gpucourse._validate import positive_int

MAX_THREADS_PER_BLOCK = 1024
"""CUDA's limit on threads per block (every GPU since compute capability 2.0)."""
WARP_SIZE = 32


def blocks_for(n: int, threads_per_block: int) -> int:
    """Blocks needed so that blocks x threads_per_block >= n: the ceiling of n / threads_per_block.

    Taught in lesson 04_cuda_model.
    """
    n = positive_int("n", n)
    threads_per_block = positive_int("threads_per_block", threads_per_block)
    if threads_per_block > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"threads_per_block must be <= {MAX_THREADS_PER_BLOCK} (CUDA's limit), got {threads_per_block}")
    return -(-n // threads_per_block)


def grid_2d(shape: tuple[int, int], block: tuple[int, int]) -> tuple[int, int]:
    """Grid (blocks in x, blocks in y) covering an array of ``shape`` (rows, columns): x runs along columns.

    Taught in lesson 04_cuda_model.
    """
    if not isinstance(shape, tuple) or len(shape) != 2:
        raise TypeError(f"shape must be a tuple (rows, columns), got {shape!r}")
    if not isinstance(block, tuple) or len(block) != 2:
        raise TypeError(f"block must be a tuple (threads in x, threads in y), got {block!r}")
    rows, columns = positive_int("shape[0]", shape[0]), positive_int("shape[1]", shape[1])
    block_x, block_y = positive_int("block[0]", block[0]), positive_int("block[1]", block[1])
    if block_x * block_y > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"block must hold <= {MAX_THREADS_PER_BLOCK} threads (CUDA's limit), got "
                         f"{block_x} x {block_y} = {block_x * block_y}")
    return -(-columns // block_x), -(-rows // block_y)


def _dim3(name: str, value: object) -> tuple[int, int, int]:
    """A launch dimension (int or tuple of 1-3 ints) as (x, y, z)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, tuple) or not 1 <= len(value) <= 3:
        raise TypeError(f"{name} must be an int or a tuple of 1-3 ints, got {value!r}")
    sizes = [positive_int(f"{name}[{i}]", v) for i, v in enumerate(value)]
    return tuple(sizes + [1] * (3 - len(sizes)))  # type: ignore[return-value]


class Dim3(NamedTuple):
    """A CUDA index or size with fields x, y, z."""

    x: int
    y: int
    z: int


class ThreadId(NamedTuple):
    """One CUDA thread: its block's index and its index inside the block, each (x, y, z)."""

    block: Dim3
    thread: Dim3

    def __str__(self) -> str:
        return f"block {tuple(self.block)}, thread {tuple(self.thread)}"


__all__ = ["Dim3", "MAX_THREADS_PER_BLOCK", "ThreadId", "WARP_SIZE", "blocks_for", "grid_2d"]
