"""The course's one reader of a GPU's own record through NVML (name, driver, compute capability, memory, clocks,
power limit), the peak derived from it, and a fake NVML for machines without a GPU and for tests
(lesson 00_getting_started).

NVML is the NVIDIA Management Library that ``nvidia-smi`` is built on; Python reaches it through ``pynvml`` (the
``nvidia-ml-py`` package). Nothing here imports it until a real GPU is read.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field

from gpucourse._validate import one_of, positive_int, positive_number


# --------------------------------------------------------------------------- per-SM rates by compute capability

@dataclass(frozen=True)
class SmRates:
    """What one SM of a compute capability does per clock: float32 FMA lanes, and dense float16 Tensor Core FMAs."""

    architecture: str
    example: str
    fp32_lanes: int
    fp16_tensor_fmas: int


SM_RATES: dict[tuple[int, int], SmRates] = {
    (7, 0): SmRates("Volta", "V100", 64, 512),
    (7, 5): SmRates("Turing", "T4", 64, 512),
    (8, 0): SmRates("Ampere (data centre)", "A100", 64, 1024),
    (8, 6): SmRates("Ampere (A10, A40, RTX 30)", "A10", 128, 512),
    (8, 9): SmRates("Ada Lovelace", "L4, L40S", 128, 512),
    (9, 0): SmRates("Hopper", "H100", 128, 2048),
}
"""Per SM and clock, by compute capability: float32 lanes (CUDA C++ Programming Guide, arithmetic instruction
throughput) and dense float16 Tensor Core multiply-adds with float32 accumulation (NVIDIA's architecture whitepapers;
GeForce cards run float32 accumulation at half this rate)."""


def derived_peak(capability: tuple[int, int], sms: int, clock_mhz: float, dtype: str = "float16") -> float:
    """Peak FLOP/s = SMs x FMAs per clock per SM x clock x 2 (lesson 00_getting_started).

    ``dtype`` 'float32' counts the CUDA cores' lanes, 'float16' the Tensor Cores (dense, float32 accumulate).
    """
    if not (isinstance(capability, tuple) and len(capability) == 2):
        raise TypeError(f"capability must be a (major, minor) tuple, got {capability!r}")
    if capability not in SM_RATES:
        raise ValueError(f"capability {capability} is not in SM_RATES (known: {sorted(SM_RATES)})")
    rates = SM_RATES[capability]
    fmas = {"float32": rates.fp32_lanes, "float16": rates.fp16_tensor_fmas}[one_of("dtype", dtype,
                                                                                     ("float32", "float16"))]
    return positive_int("sms", sms) * fmas * positive_number("clock_mhz", clock_mhz) * 1e6 * 2


# --------------------------------------------------------------------------- the device record

@dataclass(frozen=True)
class DeviceRecord:
    """One GPU as NVML describes it (memory in GiB, clock in MHz, power limit in W); ``sms`` from torch if known."""

    name: str
    driver: str
    compute_capability: tuple[int, int]
    memory_gib: float
    max_sm_clock_mhz: float | None  # None where the GPU does not report it
    power_limit_w: float | None  # None where the GPU does not report it (some laptop GPUs)
    sms: int | None = None
    source: str = "NVML"

    def as_dict(self) -> dict:
        """The record as a plain dict."""
        return asdict(self)

    def table_row(self) -> list[str]:
        """Name, driver, compute capability, memory (GiB), max SM clock (MHz), power limit (W); 'n/a' if unknown."""
        return [self.name, self.driver, "%d.%d" % self.compute_capability, f"{self.memory_gib:.1f}",
                _whole(self.max_sm_clock_mhz), _whole(self.power_limit_w)]

    def peak_flops(self, dtype: str = "float16") -> float:
        """The peak derived from this record (needs ``sms`` and the clock): see :func:`derived_peak`."""
        if self.sms is None:
            raise ValueError("sms is unknown for this record: NVML does not report it (torch does)")
        if self.max_sm_clock_mhz is None:
            raise ValueError("max_sm_clock_mhz is unknown for this record: this GPU does not report it to NVML")
        return derived_peak(self.compute_capability, self.sms, self.max_sm_clock_mhz, dtype)


def _whole(value: float | None) -> str:
    """A reading rounded to a whole number, or 'n/a' where the GPU did not report it."""
    return "n/a" if value is None else f"{value:.0f}"


def _text(value: object) -> str:
    """NVML strings are bytes in older pynvml releases."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _sm_counts() -> dict[str, int]:
    """SMs per visible CUDA device from torch (NVML does not report them), keyed by UUID without its 'GPU-' prefix
    (CUDA's order and CUDA_VISIBLE_DEVICES differ from NVML's); empty without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    counts = {}
    for index in range(torch.cuda.device_count()):
        properties = torch.cuda.get_device_properties(index)
        counts[str(getattr(properties, "uuid", index)).removeprefix("GPU-")] = properties.multi_processor_count
    return counts


# --------------------------------------------------------------------------- one way to open NVML

NVML_ERROR_NOT_SUPPORTED = 3
"""NVML's return code for a query the device does not support (``NVML_ERROR_NOT_SUPPORTED``)."""

INSTALL_HINT = "pip install nvidia-ml-py (on Colab, re-run the notebook's setup cell: it installs nvidia-ml-py)"


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used here: no ``pynvml`` module, no NVIDIA driver, or ``nvmlInit`` failed (the message says)."""


def is_not_supported(error: BaseException) -> bool:
    """True if an NVML error says the device does not support the query (not a failure of the GPU or driver)."""
    return "NotSupported" in type(error).__name__ or getattr(error, "value", None) == NVML_ERROR_NOT_SUPPORTED


def error_note(query: str, error: BaseException) -> str:
    """A learner-readable line naming the NVML ``query`` that failed and why."""
    if is_not_supported(error):
        return f"{query}: not supported by this GPU"
    return f"{query} failed ({type(error).__name__}: {error})"


def _is_module(value: object) -> bool:
    """True for a real imported module (the real pynvml), False for a fake object standing in for it."""
    return isinstance(value, type(os))


class NvmlSession:
    """One open NVML session: ``nvmlInit`` on open, ``nvmlShutdown`` on close; queries with errors mapped to notes.

    ``module`` is pynvml (imported on open when None) or a stand-in such as :class:`FakeNvml`. Use it as a context
    manager; ``open`` raises :class:`NvmlUnavailable` with a message naming what failed.
    """

    def __init__(self, module: object = None) -> None:
        self.module = module
        self.is_open = False

    def open(self) -> "NvmlSession":
        """Import pynvml (if no module was given) and initialise NVML; NvmlUnavailable names what failed."""
        if self.module is None:
            try:
                import pynvml
            except ImportError as error:
                raise NvmlUnavailable(f"GPU metrics need nvidia-ml-py (no module pynvml): {INSTALL_HINT}") from error
            self.module = pynvml
        try:
            self.module.nvmlInit()
        except Exception as error:  # NVMLError_LibraryNotFound / DriverNotLoaded without a driver, and the like
            raise NvmlUnavailable(f"NVML did not initialise (nvmlInit: {type(error).__name__}: {error}); "
                                  "is an NVIDIA driver loaded?") from error
        self.is_open = True
        return self

    def close(self) -> None:
        """Shut NVML down once (an error while shutting down is ignored: there is nothing left to read)."""
        if self.is_open:
            self.is_open = False
            with contextlib.suppress(Exception):
                self.module.nvmlShutdown()

    def __enter__(self) -> "NvmlSession":
        return self if self.is_open else self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def error_class(self) -> type:
        """The module's base error class (``pynvml.NVMLError``)."""
        return getattr(self.module, "NVMLError", Exception)

    def query(self, name: str, *args: object) -> tuple[object, str]:
        """(answer, "") of one NVML query, or (None, a note naming the query) where it is missing or fails."""
        call = getattr(self.module, name, None)
        if call is None:
            return None, f"{name}: not in this nvidia-ml-py release"
        try:
            return call(*args), ""
        except self.error_class as error:
            return None, error_note(name, error)

    def reasons_query(self) -> str:
        """The name of the clock-event reasons query in this pynvml (the older 'Throttle' name before 12.535)."""
        for name in ("nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"):
            if getattr(self.module, name, None) is not None:
                return name
        return "nvmlDeviceGetCurrentClocksEventReasons"


@contextlib.contextmanager
def open_nvml(module: object = None) -> Iterator[NvmlSession]:
    """``with open_nvml() as session:`` an initialised NVML, shut down at the end (NvmlUnavailable if it cannot)."""
    session = NvmlSession(module).open()
    try:
        yield session
    finally:
        session.close()


def gpu_index(session: NvmlSession, device: object) -> int:
    """NVML's index of a CUDA torch device, matched by UUID (CUDA_VISIBLE_DEVICES can reorder GPUs); else its index."""
    index = getattr(device, "index", None)
    try:
        import torch

        index = index if index is not None else torch.cuda.current_device()
        uuid = str(torch.cuda.get_device_properties(index).uuid)
        nvml = session.module
        for nvml_index in range(nvml.nvmlDeviceGetCount()):
            nvml_uuid = _text(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(nvml_index)))
            if nvml_uuid.removeprefix("GPU-") == uuid.removeprefix("GPU-"):
                return nvml_index
    except Exception:  # no torch, no CUDA build, an NVML error: fall back to the CUDA index
        pass
    return index or 0


# --------------------------------------------------------------------------- what nvidia-smi shows, over time

NVML_QUERIES = (  # key, label, unit, source; the query, its arguments (names of pynvml constants), how to read it
    ("gpu_util", "GPU utilisation (time a kernel ran)", "%", "nvmlDeviceGetUtilizationRates.gpu",
     "nvmlDeviceGetUtilizationRates", (), lambda r: float(r.gpu)),
    ("gpu_mem_util", "memory-controller utilisation", "%", "nvmlDeviceGetUtilizationRates.memory",
     "nvmlDeviceGetUtilizationRates", (), lambda r: float(r.memory)),
    ("gpu_mem_used", "GPU memory used", "GiB", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo", (),
     lambda r: r.used / 2**30),
    ("gpu_mem_total", "GPU memory total", "GiB", "nvmlDeviceGetMemoryInfo", "nvmlDeviceGetMemoryInfo", (),
     lambda r: r.total / 2**30),
    ("gpu_power", "power draw", "W", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetPowerUsage", (), lambda r: r / 1000),
    ("gpu_power_limit", "power limit", "W", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetEnforcedPowerLimit", (),
     lambda r: r / 1000),
    ("gpu_temp", "temperature", "C", "nvmlDeviceGetTemperature", "nvmlDeviceGetTemperature",
     ("NVML_TEMPERATURE_GPU",), float),
    ("gpu_sm_clock", "SM clock", "MHz", "nvmlDeviceGetClockInfo(SM)", "nvmlDeviceGetClockInfo", ("NVML_CLOCK_SM",),
     float),
    ("gpu_sm_clock_max", "SM clock, maximum", "MHz", "nvmlDeviceGetMaxClockInfo(SM)", "nvmlDeviceGetMaxClockInfo",
     ("NVML_CLOCK_SM",), float),
    ("gpu_mem_clock", "memory clock", "MHz", "nvmlDeviceGetClockInfo(MEM)", "nvmlDeviceGetClockInfo",
     ("NVML_CLOCK_MEM",), float),
    ("gpu_mem_clock_max", "memory clock, maximum", "MHz", "nvmlDeviceGetMaxClockInfo(MEM)",
     "nvmlDeviceGetMaxClockInfo", ("NVML_CLOCK_MEM",), float),
    ("gpu_throttle", "clock held down by", "reasons", "nvmlDeviceGetCurrentClocksEventReasons", None, (), int),
)
"""How each NVML metric is read; ``None`` as the query: the clock-event reasons, under whichever name pynvml has."""


class GpuReader:
    """An open NVML session on one GPU (a CUDA torch device): reads what `nvidia-smi` shows, as
    (key, label, value, unit, source) tuples that ``gpucourse.monitor`` turns into metrics.

    A query the GPU does not support, or one that fails mid-run, reads None and is named in :attr:`problems`.
    """

    def __init__(self, device) -> None:
        self._session = NvmlSession().open()
        module = self._session.module
        try:
            self._handle = module.nvmlDeviceGetHandleByIndex(gpu_index(self._session, device))
            self.name = _text(module.nvmlDeviceGetName(self._handle))
        except Exception as error:
            self._session.close()
            note = error_note("nvmlDeviceGetHandleByIndex / nvmlDeviceGetName", error)
            raise NvmlUnavailable(f"NVML opened but could not read the GPU: {note}") from error
        self._reasons = self._session.reasons_query()
        self.problems: list[str] = []

    def readings(self) -> list[tuple[str, str, float | None, str, str]]:
        """One reading of every NVML metric (None where the GPU did not answer; :attr:`problems` says why)."""
        answers: dict[tuple, tuple[object, str]] = {}
        metrics, problems = [], []
        for key, label, unit, source, query, constants, convert in NVML_QUERIES:
            query = query or self._reasons
            args = tuple(getattr(self._session.module, name, None) for name in constants)
            if (query, args) not in answers:
                answers[(query, args)] = self._session.query(query, self._handle, *args)
            raw, problem = answers[(query, args)]
            value = None if raw is None else convert(raw)
            if problem and problem not in problems:
                problems.append(problem)
            metrics.append((key, label, value, unit, f"NVML {source}"))
        self.problems = problems
        return metrics

    def close(self) -> None:
        """Shut NVML down."""
        self._session.close()


def read_devices(nvml: object = None) -> list[DeviceRecord]:
    """Every GPU's record through NVML (``pynvml`` by default); [] where there is no NVML or no NVIDIA driver."""
    try:
        session = NvmlSession(nvml).open()
    except NvmlUnavailable:
        return []
    with session:
        nvml = session.module
        sms = _sm_counts() if _is_module(nvml) else {}
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        records = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            clock, _ = session.query("nvmlDeviceGetMaxClockInfo", handle, nvml.NVML_CLOCK_SM)
            records.append(DeviceRecord(
                name=_text(nvml.nvmlDeviceGetName(handle)), driver=driver,
                compute_capability=tuple(nvml.nvmlDeviceGetCudaComputeCapability(handle)),
                memory_gib=nvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30,
                max_sm_clock_mhz=None if clock is None else float(clock),
                power_limit_w=_power_limit_w(session, handle),
                sms=_sms_of(session, handle, sms)))
        return records


def _sms_of(session: NvmlSession, handle: object, sms: dict[str, int]) -> int | None:
    """The SM count torch reports for the GPU of this NVML handle, matched by UUID; None where torch does not see it."""
    if not sms:
        return None
    uuid, _ = session.query("nvmlDeviceGetUUID", handle)
    return None if uuid is None else sms.get(_text(uuid).removeprefix("GPU-"))


def _power_limit_w(session: NvmlSession, handle: object) -> float | None:
    """The GPU's power limit in W; the enforced limit where the management limit is not supported (some laptop GPUs
    refuse it), None where neither is."""
    for query in ("nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetEnforcedPowerLimit"):
        milliwatts, _ = session.query(query, handle)
        if milliwatts is not None:
            return milliwatts / 1000
    return None


def driver_versions(nvml: object = None) -> tuple[str | None, str | None]:
    """(the NVIDIA driver's version, the newest CUDA it supports as 'major.minor') through NVML (``pynvml`` by
    default); None for each that NVML cannot be opened for or does not answer."""
    try:
        session = NvmlSession(nvml).open()
    except NvmlUnavailable:
        return None, None
    with session:
        driver, _ = session.query("nvmlSystemGetDriverVersion")
        cuda, _ = session.query("nvmlSystemGetCudaDriverVersion")
    return (None if driver is None else _text(driver)), _cuda_text(cuda)


def _cuda_text(version: object) -> str | None:
    """NVML's CUDA version number as 'major.minor' (12040 -> '12.4'); None for anything but an int."""
    if isinstance(version, bool) or not isinstance(version, int):
        return None
    return f"{version // 1000}.{version % 1000 // 10}"


NVIDIA_SMI_QUERY = ("name", "driver_version", "compute_cap", "memory.total", "clocks.max.sm", "power.limit")
"""The fields :func:`nvidia_smi` asks for; drivers before R510 do not know ``compute_cap``."""


def nvidia_smi() -> str | None:
    """The query ``nvidia-smi`` answers about every GPU (CSV), or None where the command is missing or fails.

    A driver older than R510 refuses the whole query for its unknown ``compute_cap`` field ("is not a valid field
    to query"): the query is then asked again without it, so the CSV lacks that column."""
    if shutil.which("nvidia-smi") is None:
        return None
    answer = _nvidia_smi_query(NVIDIA_SMI_QUERY)
    if answer is None or "not a valid field" not in answer[1]:
        return answer[0] if answer else None
    older = _nvidia_smi_query(tuple(field for field in NVIDIA_SMI_QUERY if field != "compute_cap"))
    return older[0] if older and older[0] is not None else None


def _nvidia_smi_query(fields: tuple[str, ...]) -> tuple[str | None, str] | None:
    """``nvidia-smi --query-gpu`` for these fields: (its CSV, or None if it failed; what it printed), None if it
    could not run."""
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv"],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return (done.stdout.strip() if done.returncode == 0 else None), done.stdout + done.stderr


def nvidia_smi_summary() -> str | None:
    """What plain ``nvidia-smi`` prints (its date line, driver and CUDA version, a row per GPU), or None where the
    command is missing or fails; kept as printed, the date line's trailing spaces included."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        done = subprocess.run(["nvidia-smi"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 and "Driver Version" in done.stdout else None


# --------------------------------------------------------------------------- a fake NVML

class FakeNvmlError(Exception):
    """What the fake raises where pynvml raises NVMLError (no driver, bad handle)."""


class FakeNvmlNotSupported(FakeNvmlError):
    """pynvml's NVMLError_NotSupported: this GPU does not answer the query."""

    value = NVML_ERROR_NOT_SUPPORTED


class FakeNvmlNotFound(FakeNvmlError):
    """pynvml's NVMLError_NotFound: no GPU has that UUID."""

    value = 6  # NVML_ERROR_NOT_FOUND


class FakeNvmlDriverNotLoaded(FakeNvmlError):
    """pynvml's NVMLError_DriverNotLoaded: nvmlInit on a machine without an NVIDIA driver."""


class FakeNvmlGpuIsLost(FakeNvmlError):
    """pynvml's NVMLError_GpuIsLost: the GPU fell off the bus mid-run."""


class FakeNvmlUninitialized(FakeNvmlError):
    """pynvml's NVMLError_Uninitialized: a query before nvmlInit (or after nvmlShutdown)."""


FAKE_READINGS = ("gpu_util", "mem_util", "mem_used_bytes", "power_mw", "temperature_c", "sm_clock_mhz",
                 "mem_clock_mhz", "graphics_clock_mhz", "reasons")
"""Keys of :attr:`FakeGpu.readings`: what the fake answers over time (units in the names; ``reasons`` a bit mask)."""


@dataclass(frozen=True)
class FakeGpu:
    """A GPU the fake NVML reports; clocks in MHz (``sm``, ``graphics``, ``mem``), power limit in milliwatts.

    ``readings`` scripts what the GPU reports over time: key (one of FAKE_READINGS) -> a value, or a list of values
    given one per call of the query that reads it (the last one repeats); an exception in a list is raised at that
    call (an error mid-run). ``unsupported`` names NVML queries this GPU answers with NVMLError_NotSupported.
    """

    name: str
    compute_capability: tuple[int, int]
    memory_bytes: int
    max_clocks_mhz: dict[str, int] = field(default_factory=dict)
    power_limit_mw: int = 0
    name_as_bytes: bool = False
    readings: dict[str, object] = field(default_factory=dict)
    unsupported: tuple[str, ...] = ()
    uuid: str = ""
    processes: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.readings) - set(FAKE_READINGS))
        if unknown:
            raise ValueError(f"readings: unknown keys {unknown}; use {list(FAKE_READINGS)}")


@dataclass(frozen=True)
class _Memory:
    """pynvml's memory info: bytes."""

    total: int
    free: int
    used: int


@dataclass(frozen=True)
class _Utilization:
    """pynvml's utilisation rates: % of the last sample period."""

    gpu: int
    memory: int


@dataclass(frozen=True)
class _Process:
    """pynvml's process info: a process id and the GPU memory it holds (bytes)."""

    pid: int
    usedGpuMemory: int  # noqa: N815 (pynvml's name)


class FakeNvml:
    """A fake ``pynvml`` module for made-up GPUs: the same function names, constants, units and errors, for every
    query the course makes; install it with ``monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(...))``.

    ``driver=None`` plays a machine without an NVIDIA driver: ``nvmlInit`` raises ``NVMLError_DriverNotLoaded``.
    ``reasons_api``: 'both', 'events' (nvmlDeviceGetCurrentClocksEventReasons only, nvidia-ml-py >= 12.535) or
    'throttle' (only the older nvmlDeviceGetCurrentClocksThrottleReasons).
    """

    NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
    NVML_TEMPERATURE_GPU = 0
    NVML_ERROR_NOT_SUPPORTED = NVML_ERROR_NOT_SUPPORTED
    NVMLError = FakeNvmlError
    NVMLError_NotSupported = FakeNvmlNotSupported  # noqa: N815 (pynvml's names)
    NVMLError_DriverNotLoaded = FakeNvmlDriverNotLoaded  # noqa: N815
    NVMLError_NotFound = FakeNvmlNotFound  # noqa: N815
    NVMLError_GpuIsLost = FakeNvmlGpuIsLost  # noqa: N815
    NVMLError_Uninitialized = FakeNvmlUninitialized  # noqa: N815
    nvmlClocksEventReasonGpuIdle, nvmlClocksEventReasonApplicationsClocksSetting = 0x1, 0x2  # noqa: N815
    nvmlClocksEventReasonSwPowerCap, nvmlClocksEventReasonHwSlowdown = 0x4, 0x8  # noqa: N815
    nvmlClocksEventReasonSwThermalSlowdown, nvmlClocksEventReasonHwThermalSlowdown = 0x20, 0x40  # noqa: N815

    def __init__(self, gpus: Iterable[FakeGpu] = (), driver: str | None = "550.54.15", label: str = "",
                 reasons_api: str = "both", cuda_driver: int = 12040) -> None:
        self._gpus = list(gpus)
        for index, gpu in enumerate(self._gpus):
            if not isinstance(gpu, FakeGpu):
                raise TypeError(f"gpus[{index}] must be a FakeGpu, got {type(gpu).__name__}")
        self._driver = driver
        self._cuda_driver = positive_int("cuda_driver", cuda_driver)
        self.label = label
        self.open = 0  # nvmlInit calls not yet matched by nvmlShutdown
        self.extra_used = [0] * len(self._gpus)  # bytes a FakeCuda allocated on each GPU, added to 'used'
        self.calls: dict[tuple[int, str], int] = {}  # (GPU index, reading) -> how many times it was read
        api = one_of("reasons_api", reasons_api, ("both", "events", "throttle"))
        if api in ("both", "events"):
            self.nvmlDeviceGetCurrentClocksEventReasons = self._reasons
        if api in ("both", "throttle"):
            self.nvmlDeviceGetCurrentClocksThrottleReasons = self._reasons

    def __repr__(self) -> str:
        return f"FakeNvml({self.label or [g.name for g in self._gpus]!r})"

    def _check_open(self) -> None:
        if self.open <= 0:
            raise FakeNvmlUninitialized("NVML is not initialised: call nvmlInit() first")

    def _gpu(self, handle: object, query: str = "") -> FakeGpu:
        self._check_open()
        if not (isinstance(handle, tuple) and handle[0] == "handle" and 0 <= handle[1] < len(self._gpus)):
            raise FakeNvmlError(f"invalid handle {handle!r}")
        gpu = self._gpus[handle[1]]
        if query in gpu.unsupported:
            raise FakeNvmlNotSupported("Not Supported")
        return gpu

    def _reading(self, handle: tuple, key: str, default: object) -> object:
        """The next scripted value of one reading (the last repeats; an exception in the script is raised)."""
        script = self._gpus[handle[1]].readings.get(key, default)
        if not isinstance(script, (list, tuple)):
            script = [script]
        count = self.calls.get((handle[1], key), 0)
        self.calls[(handle[1], key)] = count + 1
        value = script[min(count, len(script) - 1)]
        if isinstance(value, BaseException) or (isinstance(value, type) and issubclass(value, BaseException)):
            raise value
        return value

    def nvmlInit(self) -> None:  # noqa: N802 (pynvml's names)
        if self._driver is None:
            raise FakeNvmlDriverNotLoaded("NVML Shared Library Not Found / Driver Not Loaded")
        self.open += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._check_open()
        self.open -= 1

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        self._check_open()
        return self._driver

    def nvmlSystemGetCudaDriverVersion(self) -> int:  # noqa: N802
        self._check_open()
        return self._cuda_driver

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._check_open()
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> tuple:  # noqa: N802
        self._check_open()
        if not (isinstance(index, int) and 0 <= index < len(self._gpus)):
            raise FakeNvmlError(f"invalid device index {index!r}")
        return ("handle", index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> tuple:  # noqa: N802
        """The handle of the GPU whose UUID (as nvmlDeviceGetUUID gives it, 'GPU-...') is ``uuid``."""
        self._check_open()
        if isinstance(uuid, bytes):
            uuid = uuid.decode()
        if not isinstance(uuid, str):
            raise FakeNvmlError(f"invalid argument: uuid must be str or bytes, got {type(uuid).__name__}")
        for index, gpu in enumerate(self._gpus):
            if "nvmlDeviceGetUUID" in gpu.unsupported:          # a GPU that cannot tell its UUID cannot match one
                continue
            if uuid == (gpu.uuid or f"GPU-00000000-0000-0000-0000-{index:012d}"):
                return ("handle", index)
        raise FakeNvmlNotFound(f"Not Found: no GPU has UUID {uuid!r}")

    def nvmlDeviceGetIndex(self, handle: object) -> int:  # noqa: N802
        """NVML's index of the GPU (all GPUs, whatever CUDA_VISIBLE_DEVICES says)."""
        self._gpu(handle, "nvmlDeviceGetIndex")
        return handle[1]

    def nvmlDeviceGetName(self, handle: object) -> str | bytes:  # noqa: N802
        gpu = self._gpu(handle)
        return gpu.name.encode() if gpu.name_as_bytes else gpu.name

    def nvmlDeviceGetUUID(self, handle: object) -> str:  # noqa: N802
        gpu = self._gpu(handle, "nvmlDeviceGetUUID")
        return gpu.uuid or f"GPU-00000000-0000-0000-0000-{handle[1]:012d}"

    def nvmlDeviceGetCudaComputeCapability(self, handle: object) -> tuple[int, int]:  # noqa: N802
        return tuple(self._gpu(handle).compute_capability)

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> object:  # noqa: N802
        total = self._gpu(handle, "nvmlDeviceGetMemoryInfo").memory_bytes
        used = int(self._reading(handle, "mem_used_bytes", 0)) + self.extra_used[handle[1]]
        return _Memory(total=total, free=total - used, used=used)

    def nvmlDeviceGetUtilizationRates(self, handle: object) -> object:  # noqa: N802
        self._gpu(handle, "nvmlDeviceGetUtilizationRates")
        return _Utilization(gpu=int(self._reading(handle, "gpu_util", 0)),
                            memory=int(self._reading(handle, "mem_util", 0)))

    def _clock_name(self, clock_type: int) -> str:
        names = {self.NVML_CLOCK_GRAPHICS: "graphics", self.NVML_CLOCK_SM: "sm", self.NVML_CLOCK_MEM: "mem"}
        if clock_type not in names:
            raise FakeNvmlError(f"invalid clock type {clock_type!r}")
        return names[clock_type]

    def nvmlDeviceGetMaxClockInfo(self, handle: object, clock_type: int) -> int:  # noqa: N802
        gpu = self._gpu(handle, "nvmlDeviceGetMaxClockInfo")
        return gpu.max_clocks_mhz[self._clock_name(clock_type)]

    def nvmlDeviceGetClockInfo(self, handle: object, clock_type: int) -> int:  # noqa: N802
        gpu = self._gpu(handle, "nvmlDeviceGetClockInfo")
        name = self._clock_name(clock_type)
        return int(self._reading(handle, f"{name}_clock_mhz", gpu.max_clocks_mhz.get(name, 0)))

    def nvmlDeviceGetPowerManagementLimit(self, handle: object) -> int:  # noqa: N802
        return self._gpu(handle, "nvmlDeviceGetPowerManagementLimit").power_limit_mw

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: object) -> int:  # noqa: N802
        return self._gpu(handle, "nvmlDeviceGetEnforcedPowerLimit").power_limit_mw

    def nvmlDeviceGetPowerUsage(self, handle: object) -> int:  # noqa: N802
        self._gpu(handle, "nvmlDeviceGetPowerUsage")
        return int(self._reading(handle, "power_mw", 0))

    def nvmlDeviceGetTemperature(self, handle: object, sensor: int) -> int:  # noqa: N802
        self._gpu(handle, "nvmlDeviceGetTemperature")
        if sensor != self.NVML_TEMPERATURE_GPU:
            raise FakeNvmlError(f"invalid sensor {sensor!r}")
        return int(self._reading(handle, "temperature_c", 40))

    def _reasons(self, handle: object) -> int:
        """The clock event reasons mask (both of pynvml's names, as ``reasons_api`` says)."""
        self._gpu(handle, "nvmlDeviceGetCurrentClocksEventReasons")
        return int(self._reading(handle, "reasons", 0))

    def nvmlDeviceGetComputeRunningProcesses(self, handle: object) -> list:  # noqa: N802
        gpu = self._gpu(handle, "nvmlDeviceGetComputeRunningProcesses")
        return [_Process(pid=pid, usedGpuMemory=0) for pid in gpu.processes]


def t4_example() -> FakeNvml:
    """A T4 as NVIDIA's datasheet and Turing whitepaper describe it (16 GB, 1590 MHz boost, 70 W): not a reading."""
    return FakeNvml([_t4()], driver="(example)", label="T4 from its datasheet, not a reading")


def _t4(readings: dict | None = None) -> FakeGpu:
    """The datasheet T4 as a FakeGpu, with scripted ``readings``."""
    from gpucourse.hardware import GPU_SPECS

    t4 = GPU_SPECS["T4"]
    clock = round(t4.boost_clock_ghz * 1000)
    return FakeGpu("Tesla T4", (7, 5), int(t4.memory_gb * 1e9), {"sm": clock, "graphics": clock, "mem": 5001},
                   power_limit_mw=70_000, readings=readings or {})


def t4_power_capped(samples: int = 12) -> FakeNvml:
    """A made-up T4 trace (not a reading) under a long GEMM loop: full clock for 3 samples, then the software
    power cap (bit 0x4) set while the SM clock falls from 1590 to 900 MHz at the 70 W limit."""
    samples = positive_int("samples", samples)
    falling = [1590, 1590, 1590, 1470, 1350, 1230, 1110, 990, 900]
    sm = (falling + [900] * samples)[:samples]
    readings = {"gpu_util": 100, "mem_util": 35, "mem_used_bytes": 3 * 2**30, "sm_clock_mhz": sm,
                "mem_clock_mhz": 5001, "power_mw": [58_000 if mhz == 1590 and i < 2 else 70_000
                                                    for i, mhz in enumerate(sm)],
                "reasons": [0 if i < 3 else 0x4 for i in range(samples)],
                "temperature_c": [min(70, 52 + 2 * i) for i in range(samples)]}
    return FakeNvml([_t4(readings)], driver="(example)", label="T4 under sustained load, made up: not a reading")


# --------------------------------------------------------------------------- is the runtime using its GPU?

def runtime_evidence(tensors: Iterable[object] = ()) -> dict:
    """What this machine says about its GPU and about where ``tensors`` live (lesson 00_getting_started)."""
    records = read_devices()
    evidence = {"gpus": [r.name for r in records], "driver_cuda": None, "torch_cuda": None,
                "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"), "cuda_available": False,
                "tensor_devices": [], "gpu_processes": [], "pid": os.getpid()}
    try:
        import torch
    except ImportError:
        return evidence
    evidence["torch_cuda"] = torch.version.cuda
    evidence["cuda_available"] = torch.cuda.is_available()
    evidence["tensor_devices"] = [str(t.device) for t in tensors]
    if records:
        with contextlib.suppress(NvmlUnavailable), open_nvml() as session:
            version, _ = session.query("nvmlSystemGetCudaDriverVersion")
            evidence["driver_cuda"] = _cuda_text(version)
            count, _ = session.query("nvmlDeviceGetCount")
            for index in range(count or 0):
                handle, _ = session.query("nvmlDeviceGetHandleByIndex", index)
                processes, _ = session.query("nvmlDeviceGetComputeRunningProcesses", handle)
                evidence["gpu_processes"] += [p.pid for p in processes or []]
    return evidence

