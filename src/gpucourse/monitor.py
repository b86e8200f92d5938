"""Device metrics: what `nvidia-smi` shows, read through NVML on a GPU, the CPU's equivalents through psutil,
and a background sampler that gives a live readout while a training loop runs.

Every reading carries its source, so a learner can tell a GPU measurement from a CPU one::

    snap = snapshot()                      # one reading of every metric this machine has
    print(snap.table())
    with Sampler(interval_s=0.5) as sampler:
        train()                            # a live one-line readout updates while this runs
    print(sampler.summary_table())

NVML (``pynvml``, from the ``nvidia-ml-py`` package) and torch are imported only when a GPU is asked for, so
``import gpucourse.monitor`` stays light.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpucourse._validate import positive_int, positive_number
from gpucourse.plots import markdown_table, show_table  # noqa: F401  (re-exported: lessons import them from here)

GIB = 2**30

NVML_METRICS = ("gpu_util", "gpu_mem_util", "gpu_mem_used", "gpu_mem_total", "gpu_power", "gpu_power_limit",
                "gpu_temp", "gpu_sm_clock", "gpu_sm_clock_max", "gpu_mem_clock", "gpu_mem_clock_max", "gpu_throttle")
"""Keys of the metrics a GPU adds (read through NVML, the library behind `nvidia-smi`)."""

CPU_METRICS = ("cpu_util", "process_cpu", "ram_used", "ram_total", "process_rss")
"""Keys of the host metrics every machine has (read through psutil)."""

WHAT_A_GPU_ADDS = ("no GPU here: on a GPU the same report adds, through NVML (what `nvidia-smi -l 1` prints): "
                   "GPU utilisation (% of time a kernel was running), memory-controller utilisation, "
                   "GPU memory used / total, power draw / limit (W), temperature (C), SM and memory clocks / their "
                   "maxima (MHz) and the reasons the clock is held down (power cap, thermal, idle, ...)")

THROTTLE_REASONS = {
    0x1: "GPU idle",
    0x2: "applications clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
    0x100: "display clock setting",
}
"""NVML's clock event (throttle) reason bits (``nvmlClocksEventReason*``) and what each means."""


REASON_WORDS = {
    0x1: ("idle", "nothing to run, so the clock rests"),
    0x2: ("application clocks", "a clock set with nvidia-smi --applications-clocks caps it"),
    0x4: ("power cap", "the board draws its power limit, so the driver lowers the clock"),
    0x8: ("hardware slowdown", "the board's protection (power supply, too hot) slows it down hard"),
    0x10: ("sync boost", "held to the clock of the other GPUs in its sync-boost group"),
    0x20: ("thermal", "too hot: the driver lowers the clock"),
    0x40: ("thermal", "too hot: the hardware lowers the clock"),
    0x80: ("hardware slowdown", "the power brake, an external signal, slows it down hard"),
    0x100: ("display clock", "held to a clock the display needs"),
}
"""Each reason bit in plain words: (a short name a learner reads, what it means)."""


def _mask(mask: object) -> int:
    """``mask`` if it is a non-negative int, else TypeError naming it."""
    if isinstance(mask, bool) or not isinstance(mask, int) or mask < 0:
        raise TypeError(f"mask must be a non-negative int (NVML's clock event reasons), got {mask!r}")
    return mask


def throttle_reasons(mask: int) -> list[str]:
    """The names of the reasons set in an NVML clock-event mask, lowest bit first ([] for 0: not held down).
    Taught in lesson ``09_feeding_and_watching``."""
    names = [name for bit, name in THROTTLE_REASONS.items() if _mask(mask) & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    return names + ([f"other reasons ({unknown:#x})"] if unknown else [])


def reason_words(mask: int) -> list[str]:
    """The reasons set in a clock-event mask in plain words ('power cap', 'thermal', 'idle', ...), each once."""
    words = [word for bit, (word, _) in REASON_WORDS.items() if _mask(mask) & bit]
    unknown = mask & ~sum(REASON_WORDS)
    return list(dict.fromkeys(words)) + ([f"other ({unknown:#x})"] if unknown else [])


def explain_reasons(mask: int) -> str:
    """One sentence per reason set in a clock-event mask, or what a clear mask means."""
    lines = [f"{word}: {meaning}" for bit, (word, meaning) in REASON_WORDS.items() if _mask(mask) & bit]
    unknown = mask & ~sum(REASON_WORDS)
    lines += [f"other reasons ({unknown:#x}): bits this course does not decode"] if unknown else []
    return "; ".join(lines) or "nothing holds the clock down: it runs at the clock the GPU chose"


@dataclass(frozen=True)
class Metric:
    """One reading: a key for code, a label for people, the value (None where the device cannot report it),
    its unit and where it came from."""

    key: str
    label: str
    value: float | None
    unit: str
    source: str

    def formatted(self) -> str:
        """The value with its unit, e.g. '87 %' or '3.21 GiB' ('n/a' where the device did not report it)."""
        if self.value is None:
            return "n/a"
        if self.unit == "reasons":
            return ", ".join(reason_words(int(self.value))) or "none"
        digits = 2 if self.unit == "GiB" else 0
        return f"{self.value:.{digits}f} {self.unit}"


@dataclass(frozen=True)
class Snapshot:
    """Every metric of one device at one moment (``time_s`` is ``time.monotonic()``)."""

    device: str
    name: str
    time_s: float
    metrics: tuple[Metric, ...]
    note: str = ""

    def __getitem__(self, key: str) -> Metric:
        for metric in self.metrics:
            if metric.key == key:
                return metric
        raise KeyError(f"no metric {key!r} in this snapshot; it has {[m.key for m in self.metrics]}")

    def __contains__(self, key: object) -> bool:
        return any(metric.key == key for metric in self.metrics)

    def value(self, key: str) -> float | None:
        """The value of one metric (None where the device did not report it)."""
        return self[key].value

    def line(self) -> str:
        """A compact one-line readout (what the live display shows)."""
        parts = []
        if "gpu_util" in self:
            parts.append(f"GPU {self['gpu_util'].formatted()}")
            used, total = self.value("gpu_mem_used"), self.value("gpu_mem_total")
            if used is not None and total is not None:
                parts.append(f"mem {used:.1f}/{total:.1f} GiB")
            for key in ("gpu_power", "gpu_temp"):
                parts.append(self[key].formatted().replace(" ", ""))
            clock, clock_max = self.value("gpu_sm_clock"), self.value("gpu_sm_clock_max")
            if clock is not None:
                held = self["gpu_throttle"].formatted() if "gpu_throttle" in self else "n/a"
                parts.append(f"SM {clock:.0f}/{'?' if clock_max is None else f'{clock_max:.0f}'} MHz"
                             + ("" if held in ("none", "n/a") else f" ({held})"))
        parts.append(f"CPU {self['cpu_util'].formatted()} (this process {self['process_cpu'].formatted()})")
        parts.append(f"RAM {self.value('ram_used'):.1f}/{self.value('ram_total'):.1f} GiB")
        return " | ".join(parts)

    def table(self) -> str:
        """Every metric with its value and source, one per line."""
        width = max(len(m.label) for m in self.metrics)
        lines = [f"{self.name} ({self.device})"]
        lines += [f"  {m.label:<{width}}  {m.formatted():>12}   [{m.source}]" for m in self.metrics]
        if self.note:
            lines.append(f"  ({self.note})")
        return "\n".join(lines)


# --------------------------------------------------------------------------- the CPU (psutil)

class _CpuLoad:
    """System-wide CPU utilisation between two calls, from psutil's cumulative CPU times.

    Keeps its own previous reading, so two samplers (or a sampler and a snapshot) never disturb each other
    the way the shared state of ``psutil.cpu_percent(interval=None)`` would.
    """

    def __init__(self) -> None:
        self._last = self._busy_total()

    @staticmethod
    def _busy_total() -> tuple[float, float]:
        import psutil

        times = psutil.cpu_times()
        total = sum(times) - getattr(times, "guest", 0.0) - getattr(times, "guest_nice", 0.0)  # counted in user
        idle = times.idle + getattr(times, "iowait", 0.0)
        return total - idle, total

    def percent(self) -> float | None:
        """Busy share of all cores since the previous call (None if no time has passed)."""
        busy, total = self._busy_total()
        last_busy, last_total = self._last
        self._last = (busy, total)
        if total - last_total <= 0:
            return None
        return max(0.0, min(100.0, 100.0 * (busy - last_busy) / (total - last_total)))


class _ProcessLoad:
    """CPU time used by this process (and its finished children, e.g. DataLoader workers of past epochs) between
    two calls, in % of one core, as `top` shows it: 200 % means two cores busy."""

    def __init__(self) -> None:
        import psutil

        self._process = psutil.Process()
        self._last = self._cpu_wall()

    def _cpu_wall(self) -> tuple[float, float]:
        times = self._process.cpu_times()
        used = times.user + times.system + getattr(times, "children_user", 0.0) + getattr(times, "children_system", 0.0)
        return used, time.monotonic()

    def percent(self) -> float | None:
        """Share of one core this process used since the previous call (None if no time has passed)."""
        used, wall = self._cpu_wall()
        last_used, last_wall = self._last
        self._last = (used, wall)
        if wall - last_wall <= 0:
            return None
        return max(0.0, 100.0 * (used - last_used) / (wall - last_wall))


def _cpu_metrics(load: _CpuLoad, process: _ProcessLoad) -> list[Metric]:
    """Host metrics: CPU utilisation (machine and this process), RAM used / total, this process's memory."""
    import psutil

    memory = psutil.virtual_memory()
    return [
        Metric("cpu_util", f"CPU utilisation (all {psutil.cpu_count() or 1} cores)", load.percent(), "%",
               "psutil.cpu_times"),
        Metric("process_cpu", "this process's CPU (100 % = one core)", process.percent(), "%",
               "psutil.Process.cpu_times"),
        Metric("ram_used", "RAM used", (memory.total - memory.available) / GIB, "GiB", "psutil.virtual_memory"),
        Metric("ram_total", "RAM total", memory.total / GIB, "GiB", "psutil.virtual_memory"),
        Metric("process_rss", "this process, resident", psutil.Process().memory_info().rss / GIB, "GiB",
               "psutil.Process.memory_info"),
    ]


# --------------------------------------------------------------------------- the GPU (NVML)

def _as_device(device: object):
    """``device`` as a torch.device; None picks one with gpucourse.hardware.pick_device()."""
    from gpucourse import hardware

    torch = hardware._torch_or_none()
    if device is None:
        return hardware.pick_device() if torch is not None else "cpu"
    if isinstance(device, str):
        if torch is None:
            if device != "cpu":
                raise ValueError(f"device={device!r} needs PyTorch installed (or use 'cpu')")
            return "cpu"
        try:
            device = torch.device(device)
        except RuntimeError:
            raise ValueError(f"device must be 'cpu', 'cuda[:N]' or 'mps', got {device!r}") from None
    elif torch is None or not isinstance(device, torch.device):
        raise TypeError(f"device must be a torch.device, a str such as 'cpu' or 'cuda:0', or None, "
                        f"got {type(device).__name__} ({device!r})")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(device)!r} but no CUDA GPU is visible (use pick_device() or 'cpu')")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device={str(device)!r} but only {torch.cuda.device_count()} CUDA GPU(s) are visible")
    return device


def _device_type(device: object) -> str:
    return device if isinstance(device, str) else device.type


def nvml_available() -> bool:
    """True if NVML can be loaded and sees at least one GPU (False on a machine without an NVIDIA driver)."""
    from gpucourse import nvml

    try:
        with nvml.open_nvml() as session:
            count, _ = session.query("nvmlDeviceGetCount")
    except nvml.NvmlUnavailable:
        return False
    return bool(count)


class _Reader:
    """Reads snapshots of one device: NVML for a CUDA GPU (plus the host), psutil for the host."""

    def __init__(self, device: object = None) -> None:
        self.device = _as_device(device)
        self._cpu = _CpuLoad()
        self._process = _ProcessLoad()
        self._nvml = None
        self._nvml_problem = ""
        if _device_type(self.device) == "cuda":
            from gpucourse.nvml import GpuReader

            try:
                self._nvml = GpuReader(self.device)
            except Exception as error:  # no nvidia-ml-py, or a driver NVML cannot talk to: host metrics only
                self._nvml_problem = (f"GPU metrics unavailable ({type(error).__name__}: {error}); "
                                      "pip install nvidia-ml-py to read them through NVML")

    def _gpu_metrics(self) -> tuple[list[Metric], str]:
        """The NVML metrics and a note on the queries that gave nothing (never raises: a lesson carries on)."""
        if self._nvml is None:
            return [], ""
        from gpucourse.nvml import NVML_QUERIES

        try:
            metrics = [Metric(*reading) for reading in self._nvml.readings()]
        except Exception as error:  # NVML broke as a whole mid-run: the GPU columns read n/a, the note says why
            return ([Metric(key, label, None, unit, f"NVML {source}") for key, label, unit, source, *_ in NVML_QUERIES],
                    f"NVML failed mid-run ({type(error).__name__}: {error}); GPU values n/a")
        problems = self._nvml.problems
        return metrics, ("NVML gave no value for: " + "; ".join(problems)) if problems else ""

    def read(self, time_s: float | None = None) -> Snapshot:
        """One snapshot, stamped ``time_s`` (default: ``time.monotonic()`` now)."""
        metrics, note = self._gpu_metrics()
        metrics += _cpu_metrics(self._cpu, self._process)
        if self._nvml is not None:
            name = self._nvml.name
        elif _device_type(self.device) == "cpu":
            name, note = "CPU", WHAT_A_GPU_ADDS
        else:
            name = f"{self.device} (host metrics only)"
            note = self._nvml_problem or "NVML reads NVIDIA GPUs only; this device reports host metrics here"
        return Snapshot(str(self.device), name, time.monotonic() if time_s is None else time_s, tuple(metrics), note)

    def close(self) -> None:
        """Close the NVML session, if one is open."""
        if self._nvml is not None:
            self._nvml.close()
            self._nvml = None


def snapshot(device: object = None, cpu_interval_s: float = 0.1) -> Snapshot:
    """Read every metric of ``device`` once (None: the device pick_device() chooses).

    CPU utilisation is averaged over ``cpu_interval_s`` seconds (this call waits that long); on a CUDA GPU the
    NVML figures are the driver's own averages over its last sample period (1/6 s to 1 s depending on the GPU).
    """
    cpu_interval_s = positive_number("cpu_interval_s", cpu_interval_s)
    reader = _Reader(device)
    try:
        time.sleep(cpu_interval_s)
        return reader.read()
    finally:
        reader.close()


# --------------------------------------------------------------------------- summaries

@dataclass(frozen=True)
class MetricSummary:
    """Mean, minimum and maximum of one metric over a run of samples (samples where it was n/a are left out)."""

    key: str
    label: str
    unit: str
    source: str
    count: int
    mean: float
    minimum: float
    maximum: float

    def __str__(self) -> str:
        digits = 2 if self.unit == "GiB" else 0
        return (f"{self.label}: mean {self.mean:.{digits}f} {self.unit}, min {self.minimum:.{digits}f}, "
                f"max {self.maximum:.{digits}f} ({self.count} samples) [{self.source}]")


def summarise(samples: Iterable[Snapshot]) -> dict[str, MetricSummary]:
    """Summarise a run of snapshots metric by metric (keys as in the snapshots)."""
    if isinstance(samples, Snapshot) or not isinstance(samples, Iterable):
        raise TypeError(f"samples must be a list of Snapshot objects, got {type(samples).__name__}")
    samples = list(samples)
    for sample in samples:
        if not isinstance(sample, Snapshot):
            raise TypeError(f"samples must contain Snapshot objects, got {type(sample).__name__}")
    values: dict[str, list[float]] = {}
    first: dict[str, Metric] = {}
    for sample in samples:
        for metric in sample.metrics:
            first.setdefault(metric.key, metric)
            if metric.value is not None:
                values.setdefault(metric.key, []).append(metric.value)
    return {key: MetricSummary(key, first[key].label, first[key].unit, first[key].source, len(vals),
                               statistics.fmean(vals), min(vals), max(vals))
            for key, vals in values.items()}


def reason_shares(samples: Iterable[Snapshot]) -> dict[str, float]:
    """Share of the samples (with a reasons reading) in which each plain-word clock-event reason was set, largest
    first: what mostly held the clock down over a run ({} without NVML readings)."""
    masks = [s.value("gpu_throttle") for s in samples if "gpu_throttle" in s and s.value("gpu_throttle") is not None]
    counts: dict[str, int] = {}
    for mask in masks:
        for word in reason_words(int(mask)):
            counts[word] = counts.get(word, 0) + 1
    return {word: count / len(masks) for word, count in sorted(counts.items(), key=lambda item: -item[1])}


# --------------------------------------------------------------------------- the live sampler

class Sampler:
    """Sample a device's metrics every ``interval_s`` seconds in a background thread while code runs.

    Use it as a context manager around a training loop. With ``live=True`` a one-line readout (a tqdm status
    line on ``file``, standard output by default) updates after every sample. The thread stops when the block
    ends, also when the block raises; ``samples`` then holds every snapshot taken, in order. With
    ``background=False`` no thread runs: the code inside the block calls :meth:`take` when it wants a sample.
    """

    def __init__(self, device: object = None, interval_s: float = 0.5, live: bool = True, file=None,
                 background: bool = True) -> None:
        self.interval_s = positive_number("interval_s", interval_s)
        for name, flag in (("live", live), ("background", background)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False, got {type(flag).__name__} ({flag!r})")
        self.background = background
        if file is not None and not callable(getattr(file, "write", None)):
            raise TypeError(f"file must be a writable text stream (such as sys.stdout) or None, got "
                            f"{type(file).__name__}")
        self.device = _as_device(device)
        self.live = live
        self.file = file
        self.samples: list[Snapshot] = []
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._reader: _Reader | None = None
        self._bar = None
        self._error: BaseException | None = None

    @property
    def running(self) -> bool:
        """True while the sampling thread is alive (or, with background=False, between start and stop)."""
        if not self.background:
            return self._reader is not None
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "Sampler":
        """Start sampling: a sample every ``interval_s`` and one when stopped; RuntimeError if already running."""
        if self.running:
            raise RuntimeError("this Sampler is already running")
        self._reader = _Reader(self.device)
        self._stop.clear()
        self._error = None
        if not self.background:
            return self
        if self.live:
            from tqdm import tqdm

            self._bar = tqdm(total=0, bar_format="{desc}", file=self.file or sys.stdout, leave=True,
                             dynamic_ncols=False)
        self._thread = threading.Thread(target=self._run, name="gpucourse-monitor", daemon=True)
        self._thread.start()
        return self

    def _take(self, time_s: float | None = None) -> Snapshot:
        snap = self._reader.read() if time_s is None else self._reader.read(time_s)
        with self._lock:
            self.samples.append(snap)
        if self._bar is not None:
            self._bar.set_description_str(f"[monitor {len(self.samples):>3}] {snap.line()}", refresh=True)
        return snap

    def take(self, time_s: float | None = None) -> Snapshot:
        """Take one sample now, from this thread, stamped ``time_s`` (default ``time.monotonic()``); returns it."""
        if self._reader is None:
            raise RuntimeError("this Sampler is not started: use it in a with block or call start() first")
        if time_s is not None:
            time_s = float(time_s)
        return self._take(time_s)

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):  # the first sample after one interval: rates need one
                self._take()
        except BaseException as error:  # reported by stop(): a thread's exception would otherwise vanish
            self._error = error

    def stop(self) -> "Sampler":
        """Stop sampling: take a last sample, wait for the thread to end and close the readout."""
        thread = self._thread
        if thread is None:
            if self._reader is not None:  # background=False: no thread, no last sample; close the reader
                self._reader.close()
                self._reader = None
            return self
        self._stop.set()
        thread.join(timeout=max(5.0, 3 * self.interval_s))
        self._thread = None
        try:
            last = self.samples[-1].time_s if self.samples else None
            if self._error is None and not thread.is_alive() and (
                    last is None or time.monotonic() - last >= self.interval_s / 2):
                self._take()  # the state at the end of the block (unless a sample was just taken)
        finally:
            if self._bar is not None:
                self._bar.close()
                self._bar = None
            if self._reader is not None:
                self._reader.close()
                self._reader = None
        if thread.is_alive():
            raise RuntimeError("the monitor thread did not stop within its timeout")
        if self._error is not None:
            raise RuntimeError(f"the monitor thread failed: {type(self._error).__name__}: {self._error}")
        return self

    def __enter__(self) -> "Sampler":
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def series(self, key: str) -> tuple[list[float], list[float | None]]:
        """(seconds since the first sample, values) of one metric, for plotting."""
        if not isinstance(key, str):
            raise TypeError(f"key must be a str such as 'cpu_util', got {type(key).__name__}")
        with self._lock:
            samples = list(self.samples)
        if not samples:
            return [], []
        if key not in samples[0]:
            raise ValueError(f"key must be one of {[m.key for m in samples[0].metrics]}, got {key!r}")
        start = samples[0].time_s
        return [s.time_s - start for s in samples], [s.value(key) for s in samples]

    def summary(self) -> dict[str, MetricSummary]:
        """Mean, min and max of every metric over the samples taken."""
        with self._lock:
            return summarise(list(self.samples))

    def summary_table(self) -> str:
        """The summary, one metric per line; the clock-event reasons as the share of samples each was set in."""
        summary = self.summary()
        if not summary:
            return "no samples"
        lines = [str(item) for item in summary.values() if item.unit != "reasons"]
        with self._lock:
            shares = reason_shares(self.samples)
        if "gpu_throttle" in summary:
            held = ", ".join(f"{word} in {share:.0%} of samples" for word, share in shares.items())
            lines.append(f"clock held down by: {held or 'nothing'} [{summary['gpu_throttle'].source}]")
        return "\n".join(lines)


def plot_runs(runs: dict, key: str | None = None):
    """One line per labelled :class:`Sampler` run of metric ``key`` (default: NVML's GPU utilisation where it was
    read, else this process's CPU), with each run's mean in the legend; returns the figure."""
    if not isinstance(runs, dict) or not runs or not all(isinstance(run, Sampler) for run in runs.values()):
        raise TypeError("runs must be a non-empty dict {label: Sampler}")
    if any(not run.samples for run in runs.values()):
        raise ValueError("runs: every Sampler must have taken at least one sample")
    first = next(iter(runs.values())).samples[0]
    if key is None:
        key = "gpu_util" if "gpu_util" in first else "process_cpu"
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3))
    for label, run in runs.items():
        seconds, values = run.series(key)
        summary = run.summary()
        ax.plot(seconds, values, marker="o",
                label=f"{label}: mean {summary[key].mean:.0f} {first[key].unit}" if key in summary else label)
    ax.set_xlabel("seconds")
    ax.set_ylabel(f"{first[key].label}, {first[key].unit}", fontsize=8)
    ax.set_title(f"Measured on this machine [{first[key].source}]", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- tables

# --------------------------------------------------------------------------- the PyTorch profiler, read narrowly

PROFILER_CYCLE_WARNING = "Warning: Profiler clears events at the end of each cycle"
"""The start of a UserWarning some torch versions (2.11, for one) emit when a profiler starts; harmless here."""


@contextlib.contextmanager
def quiet_profiler_warning() -> Iterator[None]:
    """Inside this block, drop torch.profiler's one known "Profiler clears events ..." warning; every other
    warning and every other line on stderr still gets through."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=PROFILER_CYCLE_WARNING, category=UserWarning)
        yield


_PROFILE_COLUMNS = (("calls", "calls", "{:,d}"), ("self_cpu_us", "self CPU ms", "{:,.2f}"),
                    ("cpu_total_us", "CPU total ms", "{:,.2f}"), ("device_total_us", "device total ms", "{:,.2f}"))


def _short_name(name: str, width: int) -> str:
    """``name`` cut to ``width`` characters, with an ellipsis where it was cut."""
    return name if len(name) <= width else name[:width - 1] + "\N{HORIZONTAL ELLIPSIS}"


def profile_table(rows: object, *, row_limit: int = 12, name_width: int = 40, sort_by: str = "cpu_total_us") -> str:
    """A narrow text table (about 80 columns) of profiler rows: name, calls, self CPU, CPU total and, where any row
    has device time, device total, in milliseconds; the ``row_limit`` largest by ``sort_by``.

    ``rows`` is a finished ``torch.profiler.profile`` or the list of dicts that ``pipeline.profile_rows`` returns.
    """
    if callable(getattr(rows, "key_averages", None)):
        from gpucourse.pipeline import profile_rows

        rows = profile_rows(rows)
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise TypeError("rows must be a finished torch.profiler.profile or a list of dicts from pipeline.profile_rows")
    keys = {key for key, _, _ in _PROFILE_COLUMNS}
    if sort_by not in keys:
        raise ValueError(f"sort_by must be one of {sorted(keys)}, got {sort_by!r}")
    row_limit, name_width = positive_int("row_limit", row_limit), positive_int("name_width", name_width)
    missing = [row for row in rows if not {"name", *keys} <= set(row)]
    if missing:
        raise ValueError(f"every row needs the keys name, {', '.join(sorted(keys))}; this one does not: {missing[0]}")
    columns = [c for c in _PROFILE_COLUMNS if c[0] != "device_total_us" or any(r["device_total_us"] for r in rows)]
    chosen = sorted(rows, key=lambda row: row[sort_by], reverse=True)[:row_limit]
    cells = [[_short_name(str(row["name"]), name_width)]
             + [fmt.format(row[key] if key == "calls" else row[key] / 1e3) for key, _, fmt in columns]
             for row in chosen]
    header = ["name"] + [title for _, title, _ in columns]
    widths = [max(len(str(line[i])) for line in [header] + cells) for i in range(len(header))]
    lines = ["  ".join(str(value).ljust(widths[0]) if i == 0 else str(value).rjust(widths[i])
                       for i, value in enumerate(line)) for line in [header] + cells]
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


# --------------------------------------------------------------------------- reading a trace file

DEVICE_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
"""Chrome-trace categories of work done on the GPU itself (in a torch.profiler trace)."""


def merged_intervals(intervals: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Sorted, non-overlapping (start, end) intervals covering the same time as ``intervals``."""
    merged: list[list[float]] = []
    for start, end in sorted((float(a), float(b)) for a, b in intervals):
        if end < start:
            raise ValueError(f"an interval ends before it starts: ({start}, {end})")
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(a, b) for a, b in merged]


def busy_fraction(intervals: Iterable[tuple[float, float]], start: float, end: float) -> float:
    """Share of the window [start, end] during which at least one interval is running: how NVML defines a GPU's
    "utilisation" (the share of the sample period in which at least one kernel ran)."""
    start, end = float(start), float(end)
    if not end > start:
        raise ValueError(f"the window must have end > start, got start={start}, end={end}")
    busy = sum(max(0.0, min(b, end) - max(a, start)) for a, b in merged_intervals(intervals))
    return busy / (end - start)


@dataclass(frozen=True)
class TraceSummary:
    """What a torch.profiler Chrome trace holds, read the way an engineer reads the timeline.

    ``top``: (name, category, calls, total ms) of the events with the most total time; ``device_busy``: share of the
    device's window during which a kernel or copy ran (None without GPU events); ``gaps``: the longest idle
    stretches between device events, (start ms from the trace's first event, length ms).
    """

    path: str
    events: int
    top: list[tuple[str, str, int, float]]
    device_events: int
    device_window_ms: float
    device_busy: float | None
    gaps: list[tuple[float, float]]

    def __str__(self) -> str:
        lines = [f"{self.path}: {self.events:,} events", "largest total time (name, category, calls, ms):"]
        width = max([len(name) for name, *_ in self.top] + [10])
        lines += [f"  {name:<{width}}  {category:<15} {calls:>6,d} {ms:>10,.2f}" for name, category, calls, ms in self.top]
        if self.device_busy is None:
            lines.append("no GPU kernels in this trace (a CPU-only run): on a GPU the kernels and copies appear on "
                         "their own rows, and the gaps between them are the GPU's idle time")
        else:
            lines.append(f"GPU: {self.device_events:,} kernels and copies over {self.device_window_ms:,.2f} ms, busy "
                         f"{self.device_busy:.0%} of that window (what nvidia-smi's utilisation would report)")
            lines += [f"  idle gap of {length:,.3f} ms at {at:,.2f} ms" for at, length in self.gaps]
        return "\n".join(lines)


def summarize_trace(path: object, top: int = 8, gaps: int = 3) -> TraceSummary:
    """Read a Chrome trace written by ``prof.export_chrome_trace(path)``: the events with the most total time and,
    where the trace has GPU events, how busy the GPU was and its longest idle gaps."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or a pathlib.Path, got {type(path).__name__}")
    top, gaps = positive_int("top", top), positive_int("gaps", gaps)
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"path: no trace file at {path}; write one with prof.export_chrome_trace(path)") from None
    events = data.get("traceEvents", []) if isinstance(data, dict) else data
    spans = [e for e in events if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e and "ts" in e
             and e.get("cat") != "Trace"]  # "Trace": the profiler's own span around everything
    totals: dict[tuple[str, str], list[float]] = {}
    for event in spans:
        entry = totals.setdefault((str(event.get("name", "?")), str(event.get("cat", "?"))), [0, 0.0])
        entry[0] += 1
        entry[1] += float(event["dur"])
    ranked = sorted(totals.items(), key=lambda item: item[1][1], reverse=True)[:top]
    top_rows = [(name, category, int(calls), us / 1e3) for (name, category), (calls, us) in ranked]
    device = [(float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in spans
              if str(e.get("cat", "")).lower() in DEVICE_CATEGORIES]
    if not device:
        return TraceSummary(str(path), len(spans), top_rows, 0, 0.0, None, [])
    first = min(float(e["ts"]) for e in spans)
    merged = merged_intervals(device)
    window = (merged[0][0], merged[-1][1])
    idle = sorted(((a_end, b_start - a_end) for (_, a_end), (b_start, _) in zip(merged, merged[1:])),
                  key=lambda gap: gap[1], reverse=True)[:gaps]
    busy = busy_fraction(merged, *window) if window[1] > window[0] else 1.0
    return TraceSummary(str(path), len(spans), top_rows, len(device), (window[1] - window[0]) / 1e3, busy,
                        [((at - first) / 1e3, length / 1e3) for at, length in idle])


__all__ = ["CPU_METRICS", "DEVICE_CATEGORIES", "NVML_METRICS", "PROFILER_CYCLE_WARNING", "WHAT_A_GPU_ADDS", "Metric",
           "MetricSummary", "Sampler", "Snapshot", "TraceSummary", "busy_fraction", "markdown_table", "merged_intervals",
           "nvml_available", "plot_runs", "profile_table", "quiet_profiler_warning", "show_table", "snapshot", "summarise",
           "summarize_trace", "REASON_WORDS", "THROTTLE_REASONS", "explain_reasons", "reason_shares", "reason_words",
           "throttle_reasons"]
