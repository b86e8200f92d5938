"""The sustained-load test: a matrix-multiply loop that runs long enough for a GPU to show what it keeps up, not
only what it reaches in a burst, watched through NVML (SM clock, power, the reasons the clock is held down).

    result = sustained.run()              # 45 s on a CUDA GPU; a brief float32 run (about 2 s) on a CPU
    sustained.report(result)              # burst vs sustained TFLOP/s and, where they differ, the reason
    sustained.plot(result)                # TFLOP/s, SM clock and power over time, one shared time axis

A free T4 is the classic case: 70 W is not enough to hold its boost clock under long GEMMs, so its clock and its
throughput fall within seconds and NVML reports the software power cap. From a shell:
``python -m gpucourse.sustained --seconds 30 --output sustained.json --plot sustained.png``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpucourse._validate import positive_int, positive_number
from gpucourse.monitor import REASON_WORDS, Sampler, Snapshot, reason_shares

DTYPES = ("float32", "float16", "bfloat16")
"""Precisions the loop multiplies in (float32 is true float32: TF32 stays off, PyTorch's default)."""

DEFAULTS = {"cuda": {"seconds": 45.0, "n": 4096, "dtype": "float16", "interval_s": 1.0},
            "cpu": {"seconds": 2.0, "n": 512, "dtype": "float32", "interval_s": 0.25}}
"""Length, matrix size, precision and sampling interval when not given, on a CUDA GPU and elsewhere."""

DROP_TOLERANCE = 0.10
"""Sustained below (1 - this) x burst counts as a fall that needs a reason."""

MIN_INTERVALS = 3
"""The loop runs at least this many intervals, so that a burst and a sustained figure both exist."""

MEMORY_SHARE = 0.5
"""The three matrices may use at most this share of the memory free on the device."""


@dataclass(frozen=True)
class Interval:
    """One timed stretch of the loop: when it began (s since the loop began), how long, how many GEMMs, TFLOP/s."""

    start_s: float
    seconds: float
    gemms: int
    tflops: float


@dataclass(frozen=True)
class SustainedResult:
    """What the loop achieved interval by interval and what NVML read at the end of each (``samples``)."""

    device: str
    name: str
    dtype: str
    n: int
    intervals: tuple[Interval, ...]
    samples: tuple[Snapshot, ...]
    burst_tflops: float
    sustained_tflops: float
    reason: str = ""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def drop(self) -> float:
        """How far the sustained figure is below the burst: 0.3 means 30 % lower."""
        return 1.0 - self.sustained_tflops / self.burst_tflops if self.burst_tflops > 0 else 0.0

    @property
    def differs(self) -> bool:
        """True where the sustained figure is more than DROP_TOLERANCE below the burst."""
        return self.drop > DROP_TOLERANCE

    def series(self, key: str) -> tuple[list[float], list[float | None]]:
        """(seconds at each interval's end, the value of metric ``key`` read then); values None where not read."""
        if not isinstance(key, str):
            raise TypeError(f"key must be a str such as 'gpu_sm_clock', got {type(key).__name__}")
        ends = [i.start_s + i.seconds for i in self.intervals]
        return ends, [s.value(key) if key in s else None for s in self.samples]

    def table(self) -> str:
        """Burst, sustained and the reason, then the clock and power at the start and the end of the run."""
        fall = f"{self.drop:.0%} below the burst" if self.drop > 0 else "no fall"
        lines = [f"Sustained load on {self.name} ({self.device}): {len(self.intervals)} intervals of {self.n}x{self.n} "
                 f"{self.dtype} GEMMs over {self.seconds:.1f} s (measured on this machine)",
                 f"  burst     {self.burst_tflops:8.3f} TFLOP/s  (best interval in the first fifth)",
                 f"  sustained {self.sustained_tflops:8.3f} TFLOP/s  (median of the second half): {fall}"]
        for key, label in (("gpu_sm_clock", "SM clock, MHz"), ("gpu_power", "power, W")):
            _, values = self.series(key)
            read = [v for v in values if v is not None]
            if read:
                lines.append(f"  {label:<14} first {read[0]:7.0f}, last {read[-1]:7.0f}, min {min(read):7.0f}")
        lines.append(f"  why: {self.reason}" if self.reason else
                     f"  sustained within {DROP_TOLERANCE:.0%} of the burst: nothing to explain")
        lines += [f"  note: {note}" for note in self.notes]
        return "\n".join(lines)

    @property
    def seconds(self) -> float:
        """Length of the timed loop (warm-up excluded)."""
        return sum(i.seconds for i in self.intervals)

    def as_dict(self) -> dict:
        """The result as plain JSON-ready data (the report of `make gpu-check` stores it)."""
        ends = self.series("gpu_sm_clock")[0]
        trace = {key: self.series(key)[1] for key in ("gpu_sm_clock", "gpu_sm_clock_max", "gpu_power",
                                                      "gpu_power_limit", "gpu_temp")}
        trace["reasons"] = [", ".join(words) for words in _reason_words_per_sample(self.samples)]
        return {"device": self.device, "name": self.name, "dtype": self.dtype, "n": self.n,
                "burst_tflops": self.burst_tflops, "sustained_tflops": self.sustained_tflops, "drop": self.drop,
                "reason": self.reason, "notes": list(self.notes), "seconds": ends,
                "tflops": [i.tflops for i in self.intervals], "trace": trace}


def _reason_words_per_sample(samples: Sequence[Snapshot]) -> list[list[str]]:
    """The plain-word reasons of each sample ([] where none was set or read)."""
    from gpucourse.monitor import reason_words

    return [reason_words(int(s.value("gpu_throttle"))) if "gpu_throttle" in s and s.value("gpu_throttle") is not None
            else [] for s in samples]


# --------------------------------------------------------------------------- arguments

def _device(device: object) -> object:
    """A torch.device (None: the one gpucourse picks); ValueError/TypeError naming ``device``."""
    from gpucourse.monitor import _as_device

    return _as_device(device)


def resolve_dtype(dtype: object, device: object) -> tuple[str, str]:
    """(the precision the loop will use, a note where it differs from the one asked): a CPU never multiplies in an
    emulated low precision, nor a GPU in bfloat16 where its Tensor Cores lack it (before compute capability 8.0)."""
    import torch

    if isinstance(dtype, torch.dtype):
        dtype = str(dtype).removeprefix("torch.")
    if not isinstance(dtype, str):
        raise TypeError(f"dtype must be a str, one of {list(DTYPES)}, got {type(dtype).__name__} ({dtype!r})")
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {list(DTYPES)}, got {dtype!r}")
    kind = getattr(device, "type", device)
    if kind != "cuda" and dtype != "float32":
        return "float32", (f"{dtype} asked for, float32 used: a CPU has no {dtype} matrix units, so a {dtype} "
                           "matmul there is emulated and would measure the emulation, not the hardware")
    if kind == "cuda" and dtype == "bfloat16" and torch.cuda.get_device_capability(device)[0] < 8:
        return "float16", ("bfloat16 asked for, float16 used: this GPU's Tensor Cores have no bfloat16 (compute "
                           "capability < 8.0), so bfloat16 would be emulated")
    return dtype, ""


def check_memory(n: int, dtype: str, device: object) -> int:
    """``n`` if three n x n matrices of ``dtype`` fit in MEMORY_SHARE of the device's free memory, else ValueError."""
    import torch

    n = positive_int("n", n)
    need = 3 * n * n * torch.empty((), dtype=getattr(torch, dtype)).element_size()
    if getattr(device, "type", device) == "cuda":
        free = torch.cuda.mem_get_info(device)[0]
    else:
        import psutil

        free = psutil.virtual_memory().available
    if need > MEMORY_SHARE * free:
        raise ValueError(f"n={n} is too large: three {n}x{n} {dtype} matrices need {need / 2**30:.1f} GiB, more than "
                         f"{MEMORY_SHARE:.0%} of the {free / 2**30:.1f} GiB free on {device}; choose a smaller n")
    return n


def gemm_step(n: int, dtype: str, device: object) -> tuple[Callable[[], None], Callable[[], None]]:
    """(one n x n GEMM into a preallocated output, a function that waits for the device): the loop's work."""
    import torch

    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randn(n, n, generator=generator).to(device=device, dtype=getattr(torch, dtype)) for _ in range(2))
    out = torch.empty_like(a)

    def step() -> None:
        torch.mm(a, b, out=out)

    def sync() -> None:
        if getattr(device, "type", device) == "cuda":
            torch.cuda.synchronize(device)

    return step, sync


# --------------------------------------------------------------------------- the loop and its reading

def measure(step: Callable[[], None], sync: Callable[[], None], flops_per_step: float, seconds: float,
            interval_s: float, timer: Callable[[], float] = time.perf_counter,
            on_interval: Callable[[float], object] | None = None) -> list[Interval]:
    """Run ``step`` in timed intervals of about ``interval_s`` for ``seconds`` (after one warm-up step; at least
    MIN_INTERVALS intervals), waiting for the device (``sync``) before each interval ends; ``on_interval(end time)``
    runs after each one."""
    seconds, interval_s = positive_number("seconds", seconds), positive_number("interval_s", interval_s)
    flops_per_step = positive_number("flops_per_step", flops_per_step)
    step()
    sync()  # warm-up: allocations and library heuristics stay out of the figures
    begin = timer()
    step()
    sync()
    reps = max(1, int(interval_s / max(timer() - begin, 1e-9)))
    begin = timer()
    intervals: list[Interval] = []
    while True:
        start = timer()
        for _ in range(reps):
            step()
        sync()
        end = timer()
        spent = max(end - start, 1e-12)
        intervals.append(Interval(start - begin, spent, reps, reps * flops_per_step / spent / 1e12))
        if on_interval is not None:
            on_interval(end)
        if end - begin >= seconds and len(intervals) >= MIN_INTERVALS:
            return intervals
        reps = max(1, round(reps * interval_s / spent))


def burst_and_sustained(tflops: Sequence[float]) -> tuple[float, float]:
    """(burst: the best interval in the first fifth, sustained: the median of the second half) of a run."""
    if not tflops:
        raise ValueError("tflops must hold at least one interval's figure")
    head = tflops[:max(1, math.ceil(len(tflops) / 5))]
    return max(head), statistics.median(tflops[len(tflops) // 2:])


def diagnose(samples: Sequence[Snapshot], burst: float, sustained: float) -> str:
    """Why the sustained figure fell below the burst, from the NVML samples of the run's second half ('' if it did
    not fall by more than DROP_TOLERANCE)."""
    if burst <= 0 or sustained >= (1 - DROP_TOLERANCE) * burst:
        return ""
    half = list(samples[len(samples) // 2:])
    if not any("gpu_sm_clock" in s for s in samples):
        if samples and samples[-1].device.startswith("cuda"):
            return ("NVML could not be read (see the note), so the clock and its reasons are unknown: install "
                    "nvidia-ml-py and run again")
        return ("no NVML reading here (not an NVIDIA GPU): the fall is this machine's own, e.g. other processes "
                "sharing its cores or the CPU lowering its frequency")
    clock = _clock_change(samples)
    shares = {word: share for word, share in reason_shares(half).items()}
    if not shares:
        return (f"no clock-event reason was set{clock}: the clock did not hold it back, so look elsewhere (another "
                "process on the GPU, memory traffic, the host not keeping the GPU busy)")
    word = next(iter(shares))
    meaning = next(meaning for w, meaning in REASON_WORDS.values() if w == word) if any(
        w == word for w, _ in REASON_WORDS.values()) else "a reason this course does not decode"
    power = _power(half) if word == "power cap" else ""
    return f"{word} in {shares[word]:.0%} of the samples of the second half: {meaning}{clock}{power}"


def _clock_change(samples: Sequence[Snapshot]) -> str:
    """', SM clock A -> B MHz' from the first to the median of the second half ('' without readings)."""
    read = [s.value("gpu_sm_clock") for s in samples if "gpu_sm_clock" in s]
    first = next((v for v in read if v is not None), None)
    late = [v for v in read[len(read) // 2:] if v is not None]
    return "" if first is None or not late else f" (SM clock {first:.0f} -> {statistics.median(late):.0f} MHz)"


def _power(samples: Sequence[Snapshot]) -> str:
    """' at P of L W' for the samples' median power draw and limit ('' without readings)."""
    draw = [s.value("gpu_power") for s in samples if "gpu_power" in s and s.value("gpu_power") is not None]
    limit = [s.value("gpu_power_limit") for s in samples if "gpu_power_limit" in s
             and s.value("gpu_power_limit") is not None]
    return "" if not draw or not limit else f", drawing {statistics.median(draw):.0f} of {max(limit):.0f} W"


def run(seconds: float | None = None, device: object = None, dtype: object = None, n: int | None = None, *,
        interval_s: float | None = None, sampler: object = None, step: Callable[[], None] | None = None,
        sync: Callable[[], None] | None = None, timer: Callable[[], float] = time.perf_counter) -> SustainedResult:
    """Run the sustained-load test: GEMMs for ``seconds`` (45 on a CUDA GPU, 2 elsewhere), TFLOP/s per interval and
    an NVML sample (SM clock, power, reasons) at the end of each; returns burst vs sustained and the reason.

    ``sampler`` (a :class:`gpucourse.monitor.Sampler` with ``background=False`` by default), ``step``/``sync`` (the
    work and the wait) and ``timer`` can be replaced, e.g. by a fake device in tests.
    """
    device = _device(device)
    kind = getattr(device, "type", device)
    defaults = DEFAULTS["cuda" if kind == "cuda" else "cpu"]
    seconds = positive_number("seconds", defaults["seconds"] if seconds is None else seconds)
    interval_s = positive_number("interval_s", defaults["interval_s"] if interval_s is None else interval_s)
    dtype, note = resolve_dtype(defaults["dtype"] if dtype is None else dtype, device)
    n = positive_int("n", defaults["n"] if n is None else n)
    if step is None and sync is not None:
        raise ValueError("sync: give it together with step (or neither)")
    if step is None:
        step, sync = gemm_step(check_memory(n, dtype, device), dtype, device)
    sync = sync or (lambda: None)
    if sampler is None:
        sampler = Sampler(device, interval_s=interval_s, live=False, background=False)
    if not all(callable(getattr(sampler, name, None)) for name in ("start", "stop", "take")):
        raise TypeError(f"sampler must have start, stop and take (a monitor.Sampler), got {type(sampler).__name__}")
    sampler.start()
    try:
        intervals = measure(step, sync, 2.0 * n**3, seconds, interval_s, timer, sampler.take)
    finally:
        sampler.stop()
    samples = tuple(sampler.samples[-len(intervals):])
    burst, sustained = burst_and_sustained([i.tflops for i in intervals])
    notes = tuple(text for text in (note, samples[-1].note if samples else "") if text)
    return SustainedResult(str(device), samples[-1].name if samples else str(device), dtype, n, tuple(intervals),
                           samples, burst, sustained, diagnose(samples, burst, sustained), notes)


# --------------------------------------------------------------------------- showing it

def report(result: SustainedResult) -> None:
    """Print the result; off a CUDA GPU, then the published figures that show what a GPU does (labelled)."""
    if not isinstance(result, SustainedResult):
        raise TypeError(f"result must be a SustainedResult (from sustained.run), got {type(result).__name__}")
    print(result.table())
    if not result.device.startswith("cuda"):
        from gpucourse import reference

        print("\nThis ran without an NVIDIA GPU, so there was no GPU clock or power cap to watch. What a GPU does "
              "under long matrix multiplies shows in published figures (not measured here):")
        reference.show("sustained")


def plot(result: SustainedResult):
    """TFLOP/s, SM clock and power draw over time on one shared time axis (with the maxima dashed); the figure."""
    if not isinstance(result, SustainedResult):
        raise TypeError(f"result must be a SustainedResult (from sustained.run), got {type(result).__name__}")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(3, 1, figsize=(7, 6), sharex=True)
    ends = [i.start_s + i.seconds for i in result.intervals]
    axes[0].plot(ends, [i.tflops for i in result.intervals], marker="o", label="achieved")
    axes[0].axhline(result.burst_tflops, linestyle="--", color="grey", label=f"burst {result.burst_tflops:.3g}")
    axes[0].axhline(result.sustained_tflops, linestyle=":", color="black",
                    label=f"sustained {result.sustained_tflops:.3g}")
    axes[0].set_ylabel(f"TFLOP/s ({result.dtype})", fontsize=8)
    axes[0].legend(fontsize=7)
    for ax, (key, top, unit) in zip(axes[1:], (("gpu_sm_clock", "gpu_sm_clock_max", "SM clock, MHz"),
                                                 ("gpu_power", "gpu_power_limit", "power, W"))):
        seconds, values = result.series(key)
        if any(v is not None for v in values):
            ax.plot(seconds, [math.nan if v is None else v for v in values], marker=".")
            limit = [v for v in result.series(top)[1] if v is not None]
            if limit:
                ax.axhline(max(limit), linestyle="--", color="grey", label="maximum" if "clock" in key else "limit")
                ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "not read here: NVML reads NVIDIA GPUs only", ha="center", va="center",
                    transform=ax.transAxes, fontsize=8)
            ax.set_yticks([])
        ax.set_ylabel(unit, fontsize=8)
    held = [", ".join(words) for words in _reason_words_per_sample(result.samples)]
    for interval, words in zip(result.intervals, held):
        if words and words != "idle":
            axes[1].axvspan(interval.start_s, interval.start_s + interval.seconds, color="tab:red", alpha=0.08,
                            linewidth=0)
    axes[2].set_xlabel("seconds")
    shaded = f"; shaded: clock held down ({result.reason.split(' in ')[0]})" if result.reason and any(held) else ""
    axes[0].set_title(f"{result.name}: measured on this machine{shaded}", fontsize=9)
    fig.tight_layout()
    return fig


def main(argv: list[str] | None = None) -> int:
    """Command line: run the test, print the table, write the JSON (and the plot) where asked."""
    parser = argparse.ArgumentParser(prog="python -m gpucourse.sustained", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, help="length of the loop (default 45 on a GPU, 2 on a CPU)")
    parser.add_argument("--dtype", choices=DTYPES, help="precision (default float16 on a GPU, float32 on a CPU)")
    parser.add_argument("--n", type=int, help="matrix size (default 4096 on a GPU, 512 on a CPU)")
    parser.add_argument("--device", help="'cuda', 'cuda:1', 'cpu' (default: the one gpucourse picks)")
    parser.add_argument("--output", help="write the result as JSON here")
    parser.add_argument("--plot", help="save the figure here (PNG)")
    options = parser.parse_args(argv)
    result = run(options.seconds, options.device, options.dtype, options.n)
    print(result.table())
    if options.output:
        Path(options.output).write_text(json.dumps(result.as_dict(), indent=1), encoding="utf-8")
    if options.plot:
        import matplotlib

        matplotlib.use("Agg")
        plot(result).savefig(options.plot, dpi=100)
    print(f"burst {result.burst_tflops:.3f} TFLOP/s, sustained {result.sustained_tflops:.3f} TFLOP/s "
          f"({result.drop:+.0%} below)" + (f"; why: {result.reason}" if result.reason else ""))
    return 0


__all__ = ["DEFAULTS", "DROP_TOLERANCE", "DTYPES", "MIN_INTERVALS", "Interval", "SustainedResult",
           "burst_and_sustained", "check_memory", "diagnose", "gemm_step", "measure", "plot", "report", "resolve_dtype", "run"]

if __name__ == "__main__":
    sys.exit(main())
