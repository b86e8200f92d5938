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

import statistics
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass

from gpucourse._validate import positive_number

GIB = 2**30

NVML_METRICS = ("gpu_util", "gpu_mem_util", "gpu_mem_used", "gpu_mem_total", "gpu_power", "gpu_power_limit",
                "gpu_temp")
"""Keys of the metrics a GPU adds (read through NVML, the library behind `nvidia-smi`)."""

CPU_METRICS = ("cpu_util", "process_cpu", "ram_used", "ram_total", "process_rss")
"""Keys of the host metrics every machine has (read through psutil)."""

WHAT_A_GPU_ADDS = ("no GPU here: on a GPU the same report adds, through NVML (what `nvidia-smi -l 1` prints): "
                   "GPU utilisation (% of time a kernel was running), memory-controller utilisation, "
                   "GPU memory used / total, power draw / limit (W) and temperature (C)")


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


def _nvml_index(device) -> int:
    """NVML's index of a CUDA torch device (they differ when CUDA_VISIBLE_DEVICES reorders GPUs)."""
    import pynvml
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    try:  # match by UUID: robust to CUDA_VISIBLE_DEVICES
        uuid = str(torch.cuda.get_device_properties(index).uuid)
        for nvml_index in range(pynvml.nvmlDeviceGetCount()):
            nvml_uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(nvml_index))
            nvml_uuid = nvml_uuid.decode() if isinstance(nvml_uuid, bytes) else nvml_uuid
            if nvml_uuid.removeprefix("GPU-") == uuid.removeprefix("GPU-"):
                return nvml_index
    except (AttributeError, RuntimeError, pynvml.NVMLError):
        pass
    return index


class _Nvml:
    """An open NVML session on one GPU: reads the metrics `nvidia-smi` shows."""

    def __init__(self, device) -> None:
        try:
            import pynvml
        except ImportError as error:
            raise ImportError("GPU metrics need nvidia-ml-py: pip install nvidia-ml-py (Colab: already there "
                              "on GPU runtimes, or pip install 'gpucourse[gpu]')") from error
        self._nvml = pynvml
        pynvml.nvmlInit()
        try:
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(_nvml_index(device))
            name = pynvml.nvmlDeviceGetName(self._handle)
        except Exception:
            pynvml.nvmlShutdown()
            raise
        self.name = name.decode() if isinstance(name, bytes) else name

    def _read(self, call, *args):
        """One NVML query; None where this GPU does not support it (e.g. power on some boards)."""
        try:
            return call(self._handle, *args)
        except self._nvml.NVMLError:
            return None

    def metrics(self) -> list[Metric]:
        nvml = self._nvml
        rates = self._read(nvml.nvmlDeviceGetUtilizationRates)
        memory = self._read(nvml.nvmlDeviceGetMemoryInfo)
        power_mw = self._read(nvml.nvmlDeviceGetPowerUsage)
        limit_mw = self._read(nvml.nvmlDeviceGetEnforcedPowerLimit)
        temperature = self._read(nvml.nvmlDeviceGetTemperature, nvml.NVML_TEMPERATURE_GPU)
        return [
            Metric("gpu_util", "GPU utilisation (time a kernel ran)", None if rates is None else float(rates.gpu),
                   "%", "NVML nvmlDeviceGetUtilizationRates.gpu"),
            Metric("gpu_mem_util", "memory-controller utilisation", None if rates is None else float(rates.memory),
                   "%", "NVML nvmlDeviceGetUtilizationRates.memory"),
            Metric("gpu_mem_used", "GPU memory used", None if memory is None else memory.used / GIB, "GiB",
                   "NVML nvmlDeviceGetMemoryInfo"),
            Metric("gpu_mem_total", "GPU memory total", None if memory is None else memory.total / GIB, "GiB",
                   "NVML nvmlDeviceGetMemoryInfo"),
            Metric("gpu_power", "power draw", None if power_mw is None else power_mw / 1000, "W",
                   "NVML nvmlDeviceGetPowerUsage"),
            Metric("gpu_power_limit", "power limit", None if limit_mw is None else limit_mw / 1000, "W",
                   "NVML nvmlDeviceGetEnforcedPowerLimit"),
            Metric("gpu_temp", "temperature", None if temperature is None else float(temperature), "C",
                   "NVML nvmlDeviceGetTemperature"),
        ]

    def close(self) -> None:
        self._nvml.nvmlShutdown()


def nvml_available() -> bool:
    """True if NVML can be loaded and sees at least one GPU (False on a machine without an NVIDIA driver)."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # ImportError, or NVMLError_LibraryNotFound / DriverNotLoaded without a driver
        return False
    try:
        return pynvml.nvmlDeviceGetCount() > 0
    finally:
        pynvml.nvmlShutdown()


class _Reader:
    """Reads snapshots of one device: NVML for a CUDA GPU (plus the host), psutil for the host."""

    def __init__(self, device: object = None) -> None:
        self.device = _as_device(device)
        self._cpu = _CpuLoad()
        self._process = _ProcessLoad()
        self._nvml = None
        self._nvml_problem = ""
        if _device_type(self.device) == "cuda":
            try:
                self._nvml = _Nvml(self.device)
            except Exception as error:  # no nvidia-ml-py, or a driver NVML cannot talk to: host metrics only
                self._nvml_problem = (f"GPU metrics unavailable ({type(error).__name__}: {error}); "
                                      "pip install nvidia-ml-py to read them through NVML")

    def read(self) -> Snapshot:
        metrics = self._nvml.metrics() if self._nvml is not None else []
        metrics += _cpu_metrics(self._cpu, self._process)
        if self._nvml is not None:
            name, note = self._nvml.name, ""
        elif _device_type(self.device) == "cpu":
            name, note = "CPU", WHAT_A_GPU_ADDS
        else:
            name = f"{self.device} (host metrics only)"
            note = self._nvml_problem or "NVML reads NVIDIA GPUs only; this device reports host metrics here"
        return Snapshot(str(self.device), name, time.monotonic(), tuple(metrics), note)

    def close(self) -> None:
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


# --------------------------------------------------------------------------- the live sampler

class Sampler:
    """Sample a device's metrics every ``interval_s`` seconds in a background thread while code runs.

    Use it as a context manager around a training loop. With ``live=True`` a one-line readout (a tqdm status
    line on ``file``, standard output by default) updates after every sample. The thread stops when the block
    ends, also when the block raises; ``samples`` then holds every snapshot taken, in order.
    """

    def __init__(self, device: object = None, interval_s: float = 0.5, live: bool = True, file=None) -> None:
        self.interval_s = positive_number("interval_s", interval_s)
        if not isinstance(live, bool):
            raise TypeError(f"live must be True or False, got {type(live).__name__} ({live!r})")
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
        """True while the sampling thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> "Sampler":
        """Start sampling: a sample every ``interval_s`` and one when stopped; RuntimeError if already running."""
        if self.running:
            raise RuntimeError("this Sampler is already running")
        self._reader = _Reader(self.device)
        self._stop.clear()
        self._error = None
        if self.live:
            from tqdm import tqdm

            self._bar = tqdm(total=0, bar_format="{desc}", file=self.file or sys.stdout, leave=True,
                             dynamic_ncols=False)
        self._thread = threading.Thread(target=self._run, name="gpucourse-monitor", daemon=True)
        self._thread.start()
        return self

    def _take(self) -> None:
        snap = self._reader.read()
        with self._lock:
            self.samples.append(snap)
        if self._bar is not None:
            self._bar.set_description_str(f"[monitor {len(self.samples):>3}] {snap.line()}", refresh=True)

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
        """The summary, one metric per line."""
        summary = self.summary()
        if not summary:
            return "no samples"
        return "\n".join(str(item) for item in summary.values())


__all__ = ["CPU_METRICS", "NVML_METRICS", "WHAT_A_GPU_ADDS", "Metric", "MetricSummary", "Sampler", "Snapshot",
           "nvml_available", "snapshot", "summarise"]
