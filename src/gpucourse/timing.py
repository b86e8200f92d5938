"""Timing done right: warm-up, synchronisation, repeats and the median; FLOP/s and a plausibility guard.

``benchmark`` times with CUDA events on a CUDA device and with the host's high-resolution clock
(``time.perf_counter``) everywhere else; ``plausibility`` flags a rate above the device's peak (a missing
synchronisation) or far below it (something other than the work was timed).
"""

from __future__ import annotations

import functools
import re
import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, non_negative_number, one_of, positive_int, positive_number

CLOCKS = ("host", "cuda events")
"""How a BenchmarkResult was timed: the host's perf_counter, or CUDA events recorded on the GPU's stream."""


@dataclass(frozen=True)
class BenchmarkResult:
    """Times of repeated calls in seconds (host clock or CUDA events), with their summary statistics."""

    times_s: tuple[float, ...]
    warmup: int
    clock: str = "host"

    def __post_init__(self) -> None:
        if isinstance(self.times_s, (str, bytes)) or not isinstance(self.times_s, Iterable):
            raise TypeError(f"times_s must be a tuple of seconds, got {type(self.times_s).__name__}")
        times = tuple(non_negative_number("times_s", t) for t in self.times_s)
        if not times:
            raise ValueError("times_s must hold at least one time")
        object.__setattr__(self, "times_s", times)
        non_negative_int("warmup", self.warmup)
        one_of("clock", self.clock, CLOCKS)

    @property
    def median_s(self) -> float:
        """Median time of one call: robust to the odd slow repeat."""
        return statistics.median(self.times_s)

    @property
    def mean_s(self) -> float:
        """Mean time of one call: pulled up by every slow outlier (compare it with the median)."""
        return statistics.fmean(self.times_s)

    @property
    def min_s(self) -> float:
        """Fastest call."""
        return min(self.times_s)

    @property
    def max_s(self) -> float:
        """Slowest call."""
        return max(self.times_s)

    @property
    def stdev_s(self) -> float:
        """Sample standard deviation of the calls (0 for a single repeat)."""
        return statistics.stdev(self.times_s) if len(self.times_s) > 1 else 0.0

    @property
    def iqr_s(self) -> float:
        """Interquartile range: the spread of the middle half of the repeats."""
        if len(self.times_s) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.times_s, n=4, method="inclusive")
        return q3 - q1

    @property
    def relative_spread(self) -> float:
        """IQR / median: 0.02 means the middle half of the repeats spans 2% of the median."""
        return self.iqr_s / self.median_s if self.median_s > 0 else 0.0

    def __str__(self) -> str:
        return (f"median {self.median_s * 1e3:.3f} ms  (min {self.min_s * 1e3:.3f} ms, mean {self.mean_s * 1e3:.3f} ms, "
                f"IQR {self.iqr_s * 1e3:.3f} ms, {len(self.times_s)} repeats after {self.warmup} warm-up, "
                f"{self.clock} clock)")


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


def _is_cuda(device: object) -> bool:
    """True if ``device`` (a str or torch.device) names a CUDA device."""
    return str(device).split(":")[0] == "cuda"


def _host_times(fn: Callable[[], object], repeats: int, sync: Callable[[], None],
                clock: Callable[[], float] = time.perf_counter) -> list[float]:
    """Time each call with the host's clock, from before the call until sync() returns."""
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        sync()
        times.append(clock() - start)
    return times


def _cuda_event_times(fn: Callable[[], object], repeats: int, sync: Callable[[], None], device: object) -> list[float]:
    """Time ``repeats`` back-to-back calls with CUDA events: one event between consecutive calls, one wait at the end.

    The calls are queued one after the other with no wait in between, as a training loop runs them, so each interval
    is one call's time on the GPU's clock with the cache as the previous call left it. Caveats:
    (a) a steady-state, warm-cache time (no L2 flush, unlike lesson 03's exercise or ``do_bench``); (b) when ``fn`` is
    launch-bound, an interval is the host's issue period, GPU idle time included, not kernel time; (c) the first
    interval includes one launch latency (the GPU is idle after the warm-up's sync): the median absorbs it, one or
    two repeats do not; (d) the events time the current stream only: ``sync()``, run once after the last event,
    waits for other streams but does not time them; (e) ``torch.cuda.Event`` creates its CUDA event on its first
    ``record()``, so that microsecond-level host cost stays inside the loop.
    """
    import torch

    with torch.cuda.device(torch.device(str(device))):
        marks = [torch.cuda.Event(enable_timing=True) for _ in range(repeats + 1)]
        marks[0].record()
        for mark in marks[1:]:
            fn()
            mark.record()
        marks[-1].synchronize()  # wait until the GPU has reached the last event
        sync()
    return [a.elapsed_time(b) / 1e3 for a, b in zip(marks, marks[1:])]  # elapsed_time is in milliseconds


def benchmark(fn: Callable[[], object], *, warmup: int = 2, repeats: int = 10,
              sync: Callable[[], None] | None = None, device: object = None,
              clock: Callable[[], float] | None = None) -> BenchmarkResult:
    """Time ``fn()``: ``warmup`` untimed calls, a sync, then ``repeats`` timed calls.

    With ``device`` (a str or torch.device, e.g. ``hardware.pick_device()``) the sync defaults to that device's,
    and on a CUDA device the calls run back to back, timed with CUDA events between them, and ``sync()`` runs
    once at the end; otherwise each call is closed by ``sync()`` and timed with ``clock`` (default
    ``time.perf_counter``; a simulated GPU's ``clock`` gives exact, noise-free times). Lesson: 03_timing.
    """
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    warmup = non_negative_int("warmup", warmup)
    repeats = positive_int("repeats", repeats)
    if sync is not None and not callable(sync):
        raise TypeError(f"sync must be callable or None, got {type(sync).__name__}")
    if clock is not None and not callable(clock):
        raise TypeError(f"clock must be callable or None, got {type(clock).__name__}")
    device_sync = _no_sync if device is None else sync_for(device)  # validates the device
    if sync is None:
        sync = device_sync
    for _ in range(warmup):
        fn()
    sync()  # queued warm-up work must not land in the first timed call
    if device is not None and _is_cuda(device) and clock is None:
        return BenchmarkResult(times_s=tuple(_cuda_event_times(fn, repeats, sync, device)), warmup=warmup,
                               clock="cuda events")
    return BenchmarkResult(times_s=tuple(_host_times(fn, repeats, sync, clock or time.perf_counter)), warmup=warmup)


def flops_per_second(flops: float, seconds: float) -> float:
    """Rate of a timed operation: ``flops`` floating-point operations done in ``seconds``."""
    return positive_number("flops", flops) / positive_number("seconds", seconds)


# --------------------------------------------------------------------------- plausibility guard

VERDICTS = ("plausible", "above peak", "far below peak")


@dataclass(frozen=True)
class RateCheck:
    """A measured rate set against the device's peak: is the timing believable?"""

    flops_per_s: float
    peak_flops: float
    floor: float = 0.01
    margin: float = 0.0

    @property
    def fraction_of_peak(self) -> float:
        """Measured rate / peak (1.0 means the device ran at its peak)."""
        return self.flops_per_s / self.peak_flops

    @property
    def verdict(self) -> str:
        """'above peak' (impossible), 'far below peak' (under ``floor`` of it) or 'plausible'."""
        if self.fraction_of_peak > 1.0 + self.margin:
            return "above peak"
        if self.fraction_of_peak < self.floor:
            return "far below peak"
        return "plausible"

    @property
    def ok(self) -> bool:
        """True if the verdict is 'plausible'."""
        return self.verdict == "plausible"

    @property
    def advice(self) -> str:
        """What the verdict most likely means."""
        if self.verdict == "above peak":
            return ("faster than the hardware can compute: the timer stopped before the work finished "
                    "(a missing synchronisation), or the FLOP count or the peak is wrong")
        if self.verdict == "far below peak":
            return ("under {:.0%} of peak: the timed region holds more than the work (start-up, transfers, tensor "
                    "creation), the dtype is slower than the one the peak is for (float64 on a GPU), or the "
                    "problem is too small to fill the device".format(self.floor))
        return "between the floor and the peak: believable (which does not prove it right)"

    def __str__(self) -> str:
        return (f"{self.verdict}: {self.flops_per_s / 1e9:,.3g} GFLOP/s = {self.fraction_of_peak:.2%} of "
                f"{self.peak_flops / 1e9:,.4g} GFLOP/s peak; {self.advice}")


def plausibility(flops_per_s: float, peak_flops: float, *, floor: float = 0.01, margin: float = 0.0) -> RateCheck:
    """Check a measured rate against ``peak_flops``: above it (``margin`` tolerated) or below ``floor`` x peak is suspect."""
    flops_per_s = non_negative_number("flops_per_s", flops_per_s)
    peak_flops = positive_number("peak_flops", peak_flops)
    floor = non_negative_number("floor", floor)
    if floor >= 1:
        raise ValueError(f"floor must be a fraction of the peak below 1 (e.g. 0.01), got {floor}")
    return RateCheck(flops_per_s=flops_per_s, peak_flops=peak_flops, floor=floor,
                     margin=non_negative_number("margin", margin))


# --------------------------------------------------------------------------- a quiet import of torch's Timer

NO_CUDA_RUNTIME_MESSAGE = "No CUDA runtime is found"
"""Start of the line a CUDA build of torch writes when torch.utils.cpp_extension is imported without a GPU."""


class _DropMessage:
    """A logging filter dropping records whose message starts with ``prefix`` (and nothing else)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def filter(self, record) -> bool:
        return not record.getMessage().startswith(self.prefix)


def import_torch_timer():
    """Return ``torch.utils.benchmark.Timer``, imported without torch's known "No CUDA runtime is found" line.

    A CUDA build of torch on a machine without a GPU (Colab's CPU runtime) logs that line to stderr when
    ``torch.utils.cpp_extension`` is first imported (older versions print it). Only that line is dropped: any other
    output of the import is passed on to stderr unchanged.
    """
    import contextlib
    import io
    import logging
    import sys

    logger = logging.getLogger("torch.utils.cpp_extension")
    drop = _DropMessage(NO_CUDA_RUNTIME_MESSAGE)
    logger.addFilter(drop)
    captured = io.StringIO()
    try:
        with contextlib.redirect_stderr(captured):
            from torch.utils.benchmark import Timer
    finally:
        logger.removeFilter(drop)
        passed_on = [line for line in captured.getvalue().splitlines(keepends=True)
                     if not line.startswith(NO_CUDA_RUNTIME_MESSAGE)]
        sys.stderr.write("".join(passed_on))
    return Timer


# --------------------------------------------------------------------------- plots of timings

MATMUL_PANELS = ("time", "log-log", "rate")
"""Panels of :func:`plot_matmul_sweep`: time on linear axes, time on log-log axes, GFLOP/s = 2 n^3 / time."""


def plot_repeats(results: list[tuple[BenchmarkResult, str]]):
    """One panel per (result, title): every repeat's time, with the median (solid) and the mean (dashed); the figure."""
    import matplotlib.pyplot as plt

    if not isinstance(results, list) or not results:
        raise TypeError("results must be a non-empty list of (BenchmarkResult, title) pairs")
    for item in results:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], BenchmarkResult)
                and isinstance(item[1], str)):
            raise TypeError(f"results must hold (BenchmarkResult, title) pairs, got {item!r}")
    fig, axes = plt.subplots(1, len(results), figsize=(5.5 * len(results), 3.5), squeeze=False)
    for ax, (result, title) in zip(axes[0], results):
        ax.plot(range(1, len(result.times_s) + 1), [t * 1e3 for t in result.times_s], "o", markersize=4)
        ax.axhline(result.median_s * 1e3, color="green", label=f"median {result.median_s * 1e3:.3g} ms")
        ax.axhline(result.mean_s * 1e3, color="red", linestyle="--", label=f"mean {result.mean_s * 1e3:.3g} ms")
        ax.set_xlabel("repeat")
        ax.set_ylabel("time (ms)")
        ax.set_title(title, fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def plot_matmul_sweep(sizes: list[int], times_by_label: dict[str, list[float]], *,
                      peaks: dict[str, float] | None = None, panels: tuple[str, ...] = MATMUL_PANELS,
                      title: str = ""):
    """Times of n x n matmuls (one line per label, None where a size was not measured) on the chosen panels; ``peaks``
    (label -> FLOP/s) on the rate panel."""
    import matplotlib.pyplot as plt

    if not isinstance(sizes, list) or not sizes:
        raise TypeError("sizes must be a non-empty list of matrix sizes")
    sizes = [positive_int("sizes", n) for n in sizes]
    if not isinstance(times_by_label, dict) or not times_by_label:
        raise TypeError("times_by_label must be a non-empty dict: label -> list of seconds, one per size")
    for label, times in times_by_label.items():
        if not isinstance(times, list) or len(times) != len(sizes):
            raise ValueError(f"times_by_label[{label!r}] must be a list of {len(sizes)} times, one per size")
        for t in times:
            if t is not None:  # None: not measured at this size
                positive_number("times_by_label", t)
    peaks = {} if peaks is None else peaks
    if not isinstance(peaks, dict):
        raise TypeError(f"peaks must be a dict label -> FLOP/s, got {type(peaks).__name__}")
    for value in peaks.values():
        positive_number("peaks", value)
    if not isinstance(panels, tuple) or not panels:
        raise TypeError(f"panels must be a non-empty tuple of {MATMUL_PANELS}")
    for panel in panels:
        one_of("panels", panel, MATMUL_PANELS)
    fig, axes = plt.subplots(1, len(panels), figsize=(5 * len(panels), 4), squeeze=False)
    for ax, panel in zip(axes[0], panels):
        for label, times in times_by_label.items():
            points = [(n, t) for n, t in zip(sizes, times) if t is not None]
            values = [2 * n**3 / t / 1e9 if panel == "rate" else t * 1e3 for n, t in points]
            ax.plot([n for n, _ in points], values, "o-", label=label)
        if panel != "time":
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
        if panel == "rate":
            for (label, peak), style in zip(peaks.items(), ("--", ":", "-.", (0, (5, 5)))):
                ax.axhline(peak / 1e9, color="grey", linestyle=style, label=label)
            ax.legend(fontsize=8)
        ax.set_title({"time": "time, linear axes", "log-log": "time, log-log axes",
                      "rate": "rate: GFLOP/s = 2n³ / time"}[panel], fontsize=10)
        ax.set_xlabel("n (matrices n x n)")
        ax.set_ylabel("GFLOP/s" if panel == "rate" else "time per matmul (ms)")
        ax.grid(True, which="both", alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig
