"""The course's one reader of a GPU's own record through NVML (name, driver, compute capability, memory, clocks,
power limit), the peak derived from it, and a fake NVML for machines without a GPU and for tests
(lesson 00_getting_started).

NVML is the NVIDIA Management Library that ``nvidia-smi`` is built on; Python reaches it through ``pynvml`` (the
``nvidia-ml-py`` package). Nothing here imports it until a real GPU is read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
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
    (9, 0): SmRates("Hopper", "H100, H200", 128, 2048),
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
    max_sm_clock_mhz: float
    power_limit_w: float
    sms: int | None = None
    source: str = "NVML"

    def as_dict(self) -> dict:
        """The record as a plain dict."""
        return asdict(self)

    def peak_flops(self, dtype: str = "float16") -> float:
        """The peak derived from this record (needs ``sms``): see :func:`derived_peak`."""
        if self.sms is None:
            raise ValueError("sms is unknown for this record: NVML does not report it (torch does)")
        return derived_peak(self.compute_capability, self.sms, self.max_sm_clock_mhz, dtype)


def _text(value: object) -> str:
    """NVML strings are bytes in older pynvml releases."""
    return value.decode() if isinstance(value, bytes) else str(value)


def _sm_counts() -> list[int | None]:
    """SMs per visible CUDA device from torch (NVML does not report them); empty without torch or a GPU."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_properties(i).multi_processor_count for i in range(torch.cuda.device_count())]


def read_devices(nvml: object = None) -> list[DeviceRecord]:
    """Every GPU's record through NVML (``pynvml`` by default); [] where there is no NVML or no NVIDIA driver."""
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError:
            return []
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return []
    try:
        sms = _sm_counts() if isinstance(nvml, type(os)) else []
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        records = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            records.append(DeviceRecord(
                name=_text(nvml.nvmlDeviceGetName(handle)), driver=driver,
                compute_capability=tuple(nvml.nvmlDeviceGetCudaComputeCapability(handle)),
                memory_gib=nvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30,
                max_sm_clock_mhz=float(nvml.nvmlDeviceGetMaxClockInfo(handle, nvml.NVML_CLOCK_SM)),
                power_limit_w=nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000,
                sms=sms[index] if index < len(sms) else None))
        return records
    finally:
        nvml.nvmlShutdown()


def nvidia_smi() -> str | None:
    """The query ``nvidia-smi`` answers about every GPU (CSV), or None where the command is missing or fails."""
    if shutil.which("nvidia-smi") is None:
        return None
    query = "name,driver_version,compute_cap,memory.total,clocks.max.sm,power.limit"
    try:
        done = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv"], capture_output=True, text=True,
                              timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


# --------------------------------------------------------------------------- a fake NVML

class FakeNvmlError(Exception):
    """What the fake raises where pynvml raises NVMLError (no driver, bad handle)."""


@dataclass(frozen=True)
class FakeGpu:
    """A GPU the fake NVML reports; clocks in MHz (``sm``, ``graphics``, ``mem``), power limit in milliwatts."""

    name: str
    compute_capability: tuple[int, int]
    memory_bytes: int
    max_clocks_mhz: dict[str, int] = field(default_factory=dict)
    power_limit_mw: int = 0
    name_as_bytes: bool = False


class FakeNvml:
    """Enough of pynvml's API to describe made-up GPUs: the same function names, constants, units and errors.

    ``driver=None`` plays a machine without an NVIDIA driver: ``nvmlInit`` raises ``NVMLError``.
    """

    NVML_CLOCK_GRAPHICS, NVML_CLOCK_SM, NVML_CLOCK_MEM = 0, 1, 2
    NVMLError = FakeNvmlError

    def __init__(self, gpus: Iterable[FakeGpu] = (), driver: str | None = "550.54.15", label: str = "") -> None:
        self._gpus = list(gpus)
        for index, gpu in enumerate(self._gpus):
            if not isinstance(gpu, FakeGpu):
                raise TypeError(f"gpus[{index}] must be a FakeGpu, got {type(gpu).__name__}")
        self._driver = driver
        self.label = label
        self.open = 0  # nvmlInit calls not yet matched by nvmlShutdown

    def __repr__(self) -> str:
        return f"FakeNvml({self.label or [g.name for g in self._gpus]!r})"

    def _check_open(self) -> None:
        if self.open <= 0:
            raise FakeNvmlError("NVML is not initialised: call nvmlInit() first")

    def _gpu(self, handle: object) -> FakeGpu:
        self._check_open()
        if not (isinstance(handle, tuple) and handle[0] == "handle" and 0 <= handle[1] < len(self._gpus)):
            raise FakeNvmlError(f"invalid handle {handle!r}")
        return self._gpus[handle[1]]

    def nvmlInit(self) -> None:  # noqa: N802 (pynvml's names)
        if self._driver is None:
            raise FakeNvmlError("NVML Shared Library Not Found / Driver Not Loaded")
        self.open += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self._check_open()
        self.open -= 1

    def nvmlSystemGetDriverVersion(self) -> str:  # noqa: N802
        self._check_open()
        return self._driver

    def nvmlDeviceGetCount(self) -> int:  # noqa: N802
        self._check_open()
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> tuple:  # noqa: N802
        self._check_open()
        if not (isinstance(index, int) and 0 <= index < len(self._gpus)):
            raise FakeNvmlError(f"invalid device index {index!r}")
        return ("handle", index)

    def nvmlDeviceGetName(self, handle: object) -> str | bytes:  # noqa: N802
        gpu = self._gpu(handle)
        return gpu.name.encode() if gpu.name_as_bytes else gpu.name

    def nvmlDeviceGetCudaComputeCapability(self, handle: object) -> tuple[int, int]:  # noqa: N802
        return tuple(self._gpu(handle).compute_capability)

    def nvmlDeviceGetMemoryInfo(self, handle: object) -> object:  # noqa: N802
        total = self._gpu(handle).memory_bytes
        return _Memory(total=total, free=total, used=0)

    def nvmlDeviceGetMaxClockInfo(self, handle: object, clock_type: int) -> int:  # noqa: N802
        gpu = self._gpu(handle)
        names = {self.NVML_CLOCK_GRAPHICS: "graphics", self.NVML_CLOCK_SM: "sm", self.NVML_CLOCK_MEM: "mem"}
        if clock_type not in names:
            raise FakeNvmlError(f"invalid clock type {clock_type!r}")
        return gpu.max_clocks_mhz[names[clock_type]]

    def nvmlDeviceGetPowerManagementLimit(self, handle: object) -> int:  # noqa: N802
        return self._gpu(handle).power_limit_mw

    nvmlDeviceGetEnforcedPowerLimit = nvmlDeviceGetPowerManagementLimit  # noqa: N815


@dataclass(frozen=True)
class _Memory:
    """pynvml's memory info: bytes."""

    total: int
    free: int
    used: int


def t4_example() -> FakeNvml:
    """A T4 as NVIDIA's datasheet and Turing whitepaper describe it (16 GB, 1590 MHz boost, 70 W): not a reading."""
    from gpucourse.hardware import GPU_SPECS

    t4 = GPU_SPECS["T4"]
    clock = round(t4.boost_clock_ghz * 1000)
    return FakeNvml([FakeGpu("Tesla T4", (7, 5), int(t4.memory_gb * 1e9), {"sm": clock, "graphics": clock, "mem": 5001},
                             power_limit_mw=70_000)], driver="(example)", label="T4 from its datasheet, not a reading")


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
        try:
            import pynvml

            pynvml.nvmlInit()
            try:
                version = pynvml.nvmlSystemGetCudaDriverVersion()
                evidence["driver_cuda"] = f"{version // 1000}.{version % 1000 // 10}"
                for index in range(pynvml.nvmlDeviceGetCount()):
                    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
                    evidence["gpu_processes"] += [p.pid for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)]
            finally:
                pynvml.nvmlShutdown()
        except Exception:  # NVML raises its own error classes; the evidence then simply lacks these entries
            pass
    return evidence
