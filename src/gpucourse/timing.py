"""Timing done right: warm-up, synchronisation, repeats and the median."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, positive_int


@dataclass(frozen=True)
class BenchmarkResult:
    """Wall-clock times of repeated calls, in seconds, with their summary statistics."""

    times_s: tuple[float, ...]
    warmup: int

    @property
    def median_s(self) -> float:
        """Median time of one call: robust to the odd slow repeat."""
        return statistics.median(self.times_s)

    @property
    def min_s(self) -> float:
        """Fastest call."""
        return min(self.times_s)

    @property
    def iqr_s(self) -> float:
        """Interquartile range: the spread of the middle half of the repeats."""
        if len(self.times_s) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times_s, n=4, method="inclusive")
        return q3 - q1

    def __str__(self) -> str:
        return (f"median {self.median_s * 1e3:.3f} ms  (min {self.min_s * 1e3:.3f} ms, "
                f"IQR {self.iqr_s * 1e3:.3f} ms, {len(self.times_s)} repeats after {self.warmup} warm-up)")


def _no_sync() -> None:
    """Synchronisation hook for devices that run synchronously (the CPU)."""


def sync_for(device: object) -> Callable[[], None]:
    """Return the function that waits for all queued work on ``device`` (a torch.device or its name)."""
    kind = str(device).split(":")[0]
    if kind == "cuda":
        import torch

        return torch.cuda.synchronize
    if kind == "mps":
        import torch

        return torch.mps.synchronize
    if kind == "cpu":
        return _no_sync
    raise ValueError(f"device must be 'cpu', 'cuda[:N]' or 'mps', got {device!r}")


def benchmark(fn: Callable[[], object], *, warmup: int = 2, repeats: int = 10,
              sync: Callable[[], None] | None = None) -> BenchmarkResult:
    """Time ``fn()``: ``warmup`` untimed calls, then ``repeats`` timed calls, each closed by ``sync()``."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    warmup = non_negative_int("warmup", warmup)
    repeats = positive_int("repeats", repeats)
    if sync is None:
        sync = _no_sync
    elif not callable(sync):
        raise TypeError(f"sync must be callable or None, got {type(sync).__name__}")
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return BenchmarkResult(times_s=tuple(times), warmup=warmup)
