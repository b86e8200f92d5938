"""Timing done right: warm-up, synchronisation, repeats and the median."""

from __future__ import annotations

import functools
import re
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, non_negative_number, positive_int


@dataclass(frozen=True)
class BenchmarkResult:
    """Wall-clock times of repeated calls, in seconds, with their summary statistics."""

    times_s: tuple[float, ...]
    warmup: int

    def __post_init__(self) -> None:
        if isinstance(self.times_s, (str, bytes)) or not isinstance(self.times_s, Iterable):
            raise TypeError(f"times_s must be a tuple of seconds, got {type(self.times_s).__name__}")
        times = tuple(non_negative_number("times_s", t) for t in self.times_s)
        if not times:
            raise ValueError("times_s must hold at least one time")
        object.__setattr__(self, "times_s", times)
        non_negative_int("warmup", self.warmup)

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
    if type(device).__module__ == "torch" and type(device).__name__ == "device":
        device = str(device)
    if not isinstance(device, str):
        raise TypeError(f"device must be a str or torch.device ('cpu', 'cuda[:N]' or 'mps'), "
                        f"got {type(device).__name__} ({device!r})")
    match = re.fullmatch(r"(cpu|cuda|mps)(?::(\d+))?", device)
    if match is None:
        raise ValueError(f"device must be 'cpu', 'cuda[:N]' or 'mps', got {device!r}")
    kind, index = match.groups()
    if kind == "cpu":
        return _no_sync
    import torch

    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"device={device!r} but no CUDA GPU is visible (use 'cpu', or pick_device())")
        if index is None:
            return torch.cuda.synchronize
        if int(index) >= count:
            raise ValueError(f"device={device!r} but only {count} CUDA GPU(s) are visible")
        return functools.partial(torch.cuda.synchronize, device)
    mps = getattr(torch.backends, "mps", None)
    if mps is None or not mps.is_available():
        raise ValueError(f"device={device!r} but Apple's Metal (MPS) backend is not available here")
    return torch.mps.synchronize


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
