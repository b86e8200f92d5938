"""What this machine is: device choice, an environment report, peak FLOP/s and bandwidth, GPU datasheets."""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import importlib.util
import os
import platform
import re
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpucourse._validate import one_of, positive_int, positive_number
from gpucourse.timing import benchmark, sync_for

DTYPE_BYTES: dict[str, int] = {"float64": 8, "float32": 4, "tf32": 4, "bfloat16": 2, "float16": 2, "int8": 1}
"""Bytes per element of the number formats the course uses (TF32 is stored as float32)."""

DEVICE_CHOICES = ("auto", "cuda", "mps", "cpu")


# --------------------------------------------------------------------------- device choice

def _torch_or_none():
    """Return the torch module if it is installed, else None (the package works without it)."""
    if importlib.util.find_spec("torch") is None:
        return None
    import torch

    return torch


def available_devices() -> list[str]:
    """Names of the compute devices torch can use here, best first (e.g. ['cuda:0', 'cpu'])."""
    torch = _torch_or_none()
    devices = []
    if torch is not None:
        devices += [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            devices.append("mps")
    devices.append("cpu")
    return devices


DEVICE_ENV = "GPUCOURSE_DEVICE"
"""Environment variable that overrides the automatic choice: 'cpu', 'cuda', 'cuda:N' or 'mps' (Apple's GPU)."""


def pick_device(prefer: str = "auto"):
    """Return the ``torch.device`` to use: a CUDA GPU, else the CPU (``prefer`` forces one).

    Apple's MPS is used only when asked for, with ``pick_device("mps")`` or ``GPUCOURSE_DEVICE=mps``: the lessons'
    graded cells are tested on CUDA and on the CPU, not on MPS, so no learner takes that path by default.
    """
    torch = _torch_or_none()
    if torch is None:
        raise ImportError("pick_device needs PyTorch: pip install 'gpucourse[torch]' (Colab already has it)")
    if not isinstance(prefer, str):
        raise TypeError(f"prefer must be a str, one of {list(DEVICE_CHOICES)}, got {type(prefer).__name__}")
    if not re.fullmatch(r"auto|(cpu|mps|cuda)(:\d+)?", prefer):
        raise ValueError(f"prefer must be one of {list(DEVICE_CHOICES)} or 'cuda:N', got {prefer!r}")
    kind = prefer.split(":")[0]
    found = available_devices()
    if prefer == "auto":
        chosen = os.environ.get(DEVICE_ENV, "").strip()
        if chosen:
            if chosen == "auto" or not re.fullmatch(r"(cpu|mps|cuda)(:\d+)?", chosen):
                raise ValueError(f"{DEVICE_ENV} must be 'cpu', 'cuda', 'cuda:N' or 'mps' (or unset), got {chosen!r}")
            return pick_device(chosen)
        return torch.device(next((name for name in found if name.startswith("cuda")), "cpu"))
    if kind == "cuda":
        if not any(name.startswith("cuda") for name in found):
            raise ValueError(f"prefer={prefer!r} but no CUDA GPU is visible: in Colab choose "
                             "Runtime > Change runtime type > GPU, or use prefer='auto'")
        if prefer != "cuda" and prefer not in found:
            raise ValueError(f"prefer={prefer!r} but the visible CUDA devices are "
                             f"{[d for d in found if d.startswith('cuda')]}")
        return torch.device(prefer if prefer != "cuda" else "cuda:0")
    if kind == "mps" and "mps" not in found:
        raise ValueError("prefer='mps' but Apple's Metal (MPS) backend is not available here")
    return torch.device(prefer)


def cuda_capability(device: object = None) -> tuple[int, int] | None:
    """Compute capability (major, minor) of a CUDA GPU (default: the current one), or None without one."""
    torch = _torch_or_none()
    if torch is None or not torch.cuda.is_available():
        return None
    return tuple(torch.cuda.get_device_capability(device))


TENSOR_CORE_CAPABILITY = {"bfloat16": (8, 0), "float16": (7, 0)}
"""Compute capability from which a CUDA GPU's Tensor Cores take each 16-bit format (Ampere for bfloat16, Volta for
float16); a T4 (7.5) emulates bfloat16. The one table: :mod:`gpucourse.native_formats` decides from it too."""


def has_native_bf16() -> bool:
    """True on a CUDA GPU with bfloat16 Tensor Cores (compute capability >= 8.0, Ampere and newer).

    ``torch.cuda.is_bf16_supported()`` also says True on a T4 (7.5), where bfloat16 runs through emulation:
    gate on the capability instead.
    """
    capability = cuda_capability()
    return capability is not None and tuple(capability) >= TENSOR_CORE_CAPABILITY["bfloat16"]


def has_tf32() -> bool:
    """True on a CUDA GPU whose Tensor Cores run TF32 (compute capability >= 8.0); a T4 (7.5) has none."""
    capability = cuda_capability()
    return capability is not None and capability >= (8, 0)


@contextlib.contextmanager
def tf32_matmuls(torch, enabled: bool):
    """Let CUDA float32 matmuls use TF32 Tensor Cores or not inside the block; the previous setting comes back after."""
    matmul = torch.backends.cuda.matmul  # PyTorch >= 2.9: fp32_precision (reading allow_tf32 after it is set raises)
    name = "fp32_precision" if hasattr(matmul, "fp32_precision") else "allow_tf32"
    before = getattr(matmul, name)
    setattr(matmul, name, ("tf32" if enabled else "ieee") if name == "fp32_precision" else enabled)
    try:
        yield
    finally:
        setattr(matmul, name, before)


# --------------------------------------------------------------------------- CPU facts

SIMD_FLAGS = ("avx512_bf16", "avx512_fp16", "amx_bf16", "avx512f", "avx2", "fma", "avx", "sse4_2", "asimd", "neon", "sve")


@dataclass(frozen=True)
class CpuInfo:
    """Facts about the CPU as the operating system reports them."""

    model: str
    physical_cores: int
    logical_cores: int
    clock_hz: float
    clock_source: str
    simd_flags: tuple[str, ...]
    memory_bytes: int
    vendor: str = ""
    family: int | None = None
    model_number: int | None = None
    arm_part: str = ""

    @property
    def simd_bits(self) -> int:
        """Widest vector register the flags advertise (bits)."""
        if "avx512f" in self.simd_flags:
            return 512
        if "avx2" in self.simd_flags or "avx" in self.simd_flags:
            return 256
        return 128

    @property
    def has_fma(self) -> bool:
        """True if the CPU has fused multiply-add (x86 'fma' flag; every 64-bit Arm core has it)."""
        return "fma" in self.simd_flags or "asimd" in self.simd_flags or "neon" in self.simd_flags


def _read_proc_cpuinfo() -> dict[str, str]:
    """First processor block of /proc/cpuinfo as a dict (empty where the file does not exist)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            block = handle.read().split("\n\n")[0]
    except OSError:
        return {}
    fields = {}
    for line in block.splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return fields


def _clock_candidates(fields: dict[str, str]) -> list[tuple[float, str]]:
    """Every clock the system reports, in Hz, with where it came from."""
    candidates: list[tuple[float, str]] = []
    advertised = re.search(r"@\s*([\d.]+)\s*GHz", fields.get("model name", ""))
    if advertised:
        candidates.append((float(advertised.group(1)) * 1e9, "model name"))
    if fields.get("cpu MHz"):
        candidates.append((float(fields["cpu MHz"]) * 1e6, "/proc/cpuinfo 'cpu MHz'"))
    try:
        import psutil

        freq = psutil.cpu_freq()
        if freq is not None and freq.max:
            candidates.append((freq.max * 1e6, "psutil max frequency"))
    except (ImportError, NotImplementedError, OSError, RuntimeError):
        pass
    return candidates


@functools.lru_cache(maxsize=1)
def cpu_info() -> CpuInfo:
    """Read the CPU's model, cores, reported clock, SIMD flags and memory (cached)."""
    import psutil

    fields = _read_proc_cpuinfo()
    model = fields.get("model name") or platform.processor() or platform.machine()
    flags = set((fields.get("flags") or fields.get("Features") or "").split())
    if not fields:  # macOS / Windows: fall back to py-cpuinfo (slower, but portable)
        try:
            import cpuinfo

            info = cpuinfo.get_cpu_info()
            model = info.get("brand_raw", model)
            flags = set(info.get("flags", []))
            if info.get("hz_advertised"):
                fields["cpu MHz"] = str(info["hz_advertised"][0] / 1e6)
        except Exception:  # py-cpuinfo can fail on exotic platforms; the report still works
            pass
    if platform.machine() in ("arm64", "aarch64"):
        flags.add("asimd")
    clocks = _clock_candidates(fields) or [(0.0, "unknown")]
    clock_hz, clock_source = max(clocks)
    logical = psutil.cpu_count(logical=True) or 1
    physical = psutil.cpu_count(logical=False) or logical
    vendor = fields.get("vendor_id", "")
    if not vendor and model.startswith("Apple"):
        vendor = "Apple"
    return CpuInfo(
        model=model,
        physical_cores=physical,
        logical_cores=logical,
        clock_hz=clock_hz,
        clock_source=clock_source,
        simd_flags=tuple(f for f in SIMD_FLAGS if f in flags),
        memory_bytes=psutil.virtual_memory().total,
        vendor=vendor,
        family=_int_field(fields.get("cpu family")),
        model_number=_int_field(fields.get("model")),
        arm_part=fields.get("CPU part", "").lower(),
    )


def _int_field(text: str | None) -> int | None:
    """A /proc/cpuinfo number ('25', '0x19'), or None where absent or unreadable."""
    try:
        return int(text, 0) if text else None
    except ValueError:
        return None


# --------------------------------------------------------------------------- FMA datapaths per core family

@dataclass(frozen=True)
class FmaModel:
    """How much fused multiply-add work a core starts per cycle: ``units`` pipes, each ``bits`` wide."""

    core_family: str
    bits: int
    units: int
    basis: str

    def flops_per_cycle(self, dtype: str = "float32") -> int:
        """FLOPs one core can start per cycle: numbers per pipe x 2 (an FMA is two FLOPs) x pipes."""
        return self.bits // (8 * DTYPE_BYTES[one_of("dtype", dtype, ("float32", "float64"))]) * 2 * self.units


_INTEL = ("Intel 64 and IA-32 Architectures Optimization Reference Manual; Agner Fog, 'The microarchitecture of Intel, "
          "AMD and VIA CPUs'")
_ZEN4 = "AMD, 'Software Optimization Guide for the AMD Zen4 Microarchitecture' (pub. 57647)"
_ZEN5 = "AMD, 'Software Optimization Guide for the AMD Zen5 Microarchitecture' (pub. 58455, 2024)"
_ARM_PARTS = {"0xd0c": ("Arm Neoverse N1", 128, 2), "0xd49": ("Arm Neoverse N2", 128, 2),
              "0xd40": ("Arm Neoverse V1", 256, 2), "0xd4f": ("Arm Neoverse V2", 128, 4),
              "0xd0b": ("Arm Cortex-A76", 128, 2), "0xd08": ("Arm Cortex-A72", 128, 2)}


def fma_model(info: CpuInfo) -> FmaModel:
    """The FMA pipes of ``info``'s core family: register width is not datapath width (Zen 4 splits 512-bit work)."""
    if not isinstance(info, CpuInfo):
        raise TypeError(f"info must be a CpuInfo, got {type(info).__name__}")
    flags, bits = set(info.simd_flags), info.simd_bits
    if info.vendor == "AuthenticAMD" and info.has_fma:
        family, model = info.family or 0, info.model_number or 0
        if family == 0x17 and model < 0x30:
            return FmaModel("AMD Zen / Zen+", 128, 2, "two 128-bit FMA pipes; 256-bit AVX2 work is split in two (AMD, "
                                                      "'Software Optimization Guide for AMD Family 17h Processors')")
        if family in (0x17, 0x19):
            name = "AMD Zen 4" if "avx512f" in flags else "AMD Zen 2 / Zen 3"
            return FmaModel(name, 256, 2, "two 256-bit FMA pipes; a 512-bit AVX-512 instruction occupies both "
                                          f"halves, so AVX-512 does not double the FLOPs per cycle ({_ZEN4})")
        if family == 0x1A:
            if "Ryzen AI" in info.model:  # mobile Zen 5 (Strix Point) keeps 256-bit datapaths
                return FmaModel("AMD Zen 5 (mobile)", 256, 2, f"mobile Zen 5 keeps 256-bit FP datapaths ({_ZEN5})")
            return FmaModel("AMD Zen 5", 512, 2, f"full 512-bit FP datapaths on desktop and server parts ({_ZEN5})")
        return FmaModel(f"AMD family {family:#x}", min(bits, 256), 2,
                        "assumed two FMA pipes no wider than 256 bits (as on Zen 2 to Zen 4)")
    if info.vendor == "GenuineIntel" and info.has_fma:
        if "avx512f" in flags:
            if {"amx_bf16", "avx512_fp16"} & flags:
                return FmaModel("Intel Xeon (Sapphire Rapids or newer)", 512, 2,
                                "two 512-bit FMA units (ports 0+1 fused and port 5) on server cores with AMX "
                                f"({_INTEL})")
            if "Xeon" in info.model or info.model_number == 0x55:
                return FmaModel("Intel Xeon Scalable (Skylake-SP to Ice Lake-SP)", 512, 2,
                                "two 512-bit FMA units on Gold 6000 and Platinum parts; some Bronze, Silver and "
                                f"Gold 5000 parts have one ({_INTEL})")
            return FmaModel("Intel client core with AVX-512 (Ice Lake, Tiger Lake, Rocket Lake)", 512, 1,
                            f"one 512-bit FMA unit (ports 0+1 fused); no second unit on port 5 ({_INTEL})")
        return FmaModel("Intel core with AVX2 and FMA (Haswell or newer)", 256, 2,
                        f"two 256-bit FMA units (ports 0 and 1) ({_INTEL})")
    if info.arm_part in _ARM_PARTS:
        name, width, units = _ARM_PARTS[info.arm_part]
        return FmaModel(name, width, units, "the core's Arm Software Optimization Guide (vector FP pipes)")
    if info.vendor == "Apple":
        return FmaModel("Apple silicon performance core", 128, 4, "four 128-bit NEON FMA pipes per performance core "
                                                                  "(public microbenchmarks; Apple publishes no figure)")
    if info.has_fma:
        return FmaModel("unknown core with FMA", bits, 2, "assumed two FMA pipes as wide as the widest register")
    return FmaModel("core without FMA", bits, 1, "no fused multiply-add: a multiply pipe and an add pipe together "
                                                  "count like one FMA pipe")


# --------------------------------------------------------------------------- peak FLOP/s

@dataclass(frozen=True)
class PeakEstimate:
    """A CPU's theoretical peak: cores x clock x FLOPs per cycle, with the assumptions spelled out."""

    dtype: str
    cores: int
    clock_hz: float
    clock_source: str
    simd_bits: int
    fma_units: int
    assumptions: tuple[str, ...]
    fma_bits: int = 0  # width of one FMA pipe; 0 means as wide as a register (simd_bits)
    core_family: str = ""

    @property
    def lanes(self) -> int:
        """Numbers of this dtype in one vector register."""
        return self.simd_bits // (8 * DTYPE_BYTES[self.dtype])

    @property
    def fma_lanes(self) -> int:
        """Numbers of this dtype one FMA pipe works on per cycle (fewer than ``lanes`` where 512-bit work is split)."""
        return (self.fma_bits or self.simd_bits) // (8 * DTYPE_BYTES[self.dtype])

    @property
    def flops_per_cycle_per_core(self) -> int:
        """FMA lanes x 2 (a fused multiply-add counts as two FLOPs) x FMA units."""
        return self.fma_lanes * 2 * self.fma_units

    @property
    def flops(self) -> float:
        """Peak FLOP/s: cores x clock x FLOPs per cycle per core."""
        return self.cores * self.clock_hz * self.flops_per_cycle_per_core

    def __str__(self) -> str:
        width = f" of {self.fma_bits} bits" if self.fma_bits and self.fma_bits != self.simd_bits else ""
        family = f"; {self.core_family}" if self.core_family else ""
        return (f"{self.flops / 1e9:.0f} GFLOP/s {self.dtype} = {self.cores} cores x {self.clock_hz / 1e9:.2f} GHz "
                f"({self.clock_source}) x {self.flops_per_cycle_per_core} FLOP/cycle "
                f"[{self.fma_lanes} lanes x 2 (FMA) x {self.fma_units} FMA units{width}{family}]")


def estimate_cpu_peak(dtype: str = "float32") -> PeakEstimate:
    """Estimate this CPU's peak FLOP/s for ``dtype`` ('float32' or 'float64') from its reported specs."""
    one_of("dtype", dtype, ("float32", "float64"))
    info = cpu_info()
    model = fma_model(info)
    assumptions = (
        f"{model.units} FMA unit(s) of {model.bits} bits per core ({model.core_family}): the OS does not report "
        f"this, so it is read from the core family: {model.basis}",
        f"clock {info.clock_hz / 1e9:.2f} GHz from {info.clock_source}: a virtual machine often reports its "
        "nominal clock while the cores boost higher, so the true peak can be above this estimate",
        f"{info.physical_cores} physical cores: hyper-threads share their core's FMA units and add no peak",
    )
    return PeakEstimate(dtype=dtype, cores=info.physical_cores, clock_hz=info.clock_hz,
                        clock_source=info.clock_source, simd_bits=info.simd_bits, fma_units=model.units,
                        assumptions=assumptions, fma_bits=model.bits, core_family=model.core_family)


@dataclass(frozen=True)
class Reconciliation:
    """An estimated peak set against a measured rate: which to trust, and why."""

    estimate: PeakEstimate
    measured_flops: float

    @property
    def efficiency(self) -> float:
        """Measured rate as a fraction of the estimated peak (infinite where no clock was reported)."""
        if self.estimate.flops <= 0:
            return float("inf")
        return self.measured_flops / self.estimate.flops

    @property
    def implied_clock_hz(self) -> float:
        """The lowest clock at which the measured rate is possible under the estimate's other assumptions."""
        return self.measured_flops / (self.estimate.cores * self.estimate.flops_per_cycle_per_core)

    @property
    def peak_flops(self) -> float:
        """Best supported peak: the estimate, raised to the measurement if the measurement beats it."""
        return max(self.estimate.flops, self.measured_flops)

    @property
    def verdict(self) -> str:
        """One sentence a learner can act on."""
        if self.efficiency > 1.0:
            return (f"the measured rate beats the estimate, so the estimate is too low: at "
                    f"{self.estimate.flops_per_cycle_per_core} FLOP/cycle the cores must run at >= "
                    f"{self.implied_clock_hz / 1e9:.2f} GHz, above the reported {self.estimate.clock_hz / 1e9:.2f} GHz "
                    "(a nominal clock), or have more FMA units than assumed; peak raised to the measurement")
        if self.efficiency >= 0.6:
            return f"consistent: the measurement reaches {self.efficiency:.0%} of the estimated peak"
        return (f"the measurement reaches only {self.efficiency:.0%} of the estimate: the library may not use the "
                "widest SIMD (e.g. OPENBLAS_CORETYPE set), other work may share the cores, or the estimate "
                "assumes more or wider FMA units than the core has")


def reconcile_peak(estimate: PeakEstimate, measured_flops: float) -> Reconciliation:
    """Set an estimated peak against a measured rate (FLOP/s) and explain any contradiction."""
    if not isinstance(estimate, PeakEstimate):
        raise TypeError(f"estimate must be a PeakEstimate, got {type(estimate).__name__}")
    return Reconciliation(estimate=estimate, measured_flops=positive_number("measured_flops", measured_flops))


def _torch_dtype(torch, dtype: str):
    """Map a dtype name to the torch dtype."""
    return {"float64": torch.float64, "float32": torch.float32, "bfloat16": torch.bfloat16,
            "float16": torch.float16}[dtype]


def measure_matmul_rate(n: int = 1024, dtype: str = "float32", backend: str = "numpy",
                        device: str = "cpu", repeats: int = 5) -> float:
    """Measure FLOP/s of an n x n matrix multiply (median of ``repeats`` after warm-up; CUDA events on a GPU)."""
    n = positive_int("n", n)
    repeats = positive_int("repeats", repeats)
    backend = one_of("backend", backend, ("numpy", "torch"))
    if backend == "numpy":
        one_of("dtype", dtype, ("float64", "float32"))
        if str(device) != "cpu":
            raise ValueError(f"device must be 'cpu' for backend='numpy', got {device!r}")
        import numpy as np

        rng = np.random.default_rng(0)
        a = rng.standard_normal((n, n)).astype(dtype)
        b = rng.standard_normal((n, n)).astype(dtype)
        result = benchmark(lambda: a @ b, warmup=1, repeats=repeats)
    else:
        one_of("dtype", dtype, ("float64", "float32", "bfloat16", "float16"))
        torch = _torch_or_none()
        if torch is None:
            raise ImportError("backend='torch' needs PyTorch installed")
        sync = sync_for(device)
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=generator).to(device=device, dtype=_torch_dtype(torch, dtype))
        b = torch.randn(n, n, generator=generator).to(device=device, dtype=_torch_dtype(torch, dtype))
        result = benchmark(lambda: a @ b, warmup=2, repeats=repeats, sync=sync, device=device)
    return 2 * n**3 / result.median_s


def measure_memory_bandwidth(megabytes: int = 256, device: str = "cpu", repeats: int = 5) -> float:
    """Measure copy bandwidth in bytes/s (bytes read + bytes written) with a buffer of ``megabytes``."""
    megabytes = positive_int("megabytes", megabytes)
    repeats = positive_int("repeats", repeats)
    sync = sync_for(device)  # rejects unknown devices, and GPUs that are not there, by name
    count = megabytes * 2**20 // 4
    if str(device) == "cpu":
        import numpy as np

        src = np.ones(count, dtype=np.float32)
        dst = np.empty_like(src)
        result = benchmark(lambda: np.copyto(dst, src), warmup=1, repeats=repeats)
    else:
        torch = _torch_or_none()
        if torch is None:
            raise ImportError(f"device={device!r} needs PyTorch installed")
        src = torch.ones(count, dtype=torch.float32, device=device)
        dst = torch.empty_like(src)
        result = benchmark(lambda: dst.copy_(src), warmup=2, repeats=repeats, sync=sync)
    return 2 * count * 4 / result.median_s


# --------------------------------------------------------------------------- GPU datasheets

@dataclass(frozen=True)
class GpuSpec:
    """Datasheet figures of one GPU (dense, no structured sparsity); ``None`` where the chip lacks the unit."""

    name: str
    architecture: str
    year: int
    memory_gb: float
    bandwidth_gb_s: float
    fp32_tflops: float
    tf32_tensor_tflops: float | None
    fp16_tensor_tflops: float | None
    bf16_tensor_tflops: float | None
    source: str
    notes: str = ""
    fp64_tflops: float | None = None
    cuda_cores: int | None = None
    sms: int | None = None
    boost_clock_ghz: float | None = None
    fp64_tensor_tflops: float | None = None  # FP64 Tensor Cores (A100, H100, ...): what DGEMM uses
    form: str = ""  # how it is built: 'SXM' module, 'PCIe' card, 'NVL' (PCIe card for NVLink bridges), 'board', ...

    def peak_flops(self, dtype: str = "float32") -> float:
        """Datasheet peak FLOP/s for ``dtype``: 'float64' or 'float32' (CUDA cores), 'tf32', 'float16', 'bfloat16' (Tensor Cores)."""
        one_of("dtype", dtype, ("float64", "float32", "tf32", "float16", "bfloat16"))
        tflops = {"float64": self.fp64_tflops, "float32": self.fp32_tflops, "tf32": self.tf32_tensor_tflops,
                  "float16": self.fp16_tensor_tflops, "bfloat16": self.bf16_tensor_tflops}[dtype]
        if tflops is None:
            raise ValueError(f"dtype={dtype!r}: the {self.name} has no datasheet figure for it")
        return tflops * 1e12

    @property
    def bandwidth(self) -> float:
        """Datasheet memory bandwidth in bytes/s."""
        return self.bandwidth_gb_s * 1e9


SPEC_ASSUMPTIONS = (
    "datasheet peaks, not measurements: no code reaches them for long, and power-capped cards (a T4 at 70 W, "
    "PCIe parts) fall further below them under sustained load",
    "dense: Tensor Core / matrix figures without 2:4 structured sparsity (NVIDIA's and AMD's headline "
    "'with sparsity' figures are 2x these)",
    "float16 and bfloat16 Tensor figures with FP32 accumulation where the datasheet distinguishes (what PyTorch uses)",
    "one GPU (one chip, or one package), at its boost clock; the K80 row is a board of two GPUs, as sold",
    "float32 and float64 are the general-purpose (CUDA core / vector) rates; fp64_tensor is the FP64 Tensor Core "
    "(matrix) rate, None where the chip has none",
)
"""What every row of GPU_SPECS assumes: say these when you quote a figure."""

_DENSE = "Tensor figures dense (the datasheet's 'with sparsity' figures are 2x these)"


def _nvidia(document: str) -> str:
    """The source line of an NVIDIA datasheet row."""
    return f"NVIDIA {document}; {_DENSE}"


GPU_SPECS: dict[str, GpuSpec] = {spec.name: spec for spec in (
    GpuSpec("K80", "Kepler", 2014, 24, 480, 8.73, None, None, None,
            "NVIDIA Tesla K80 datasheet (board of two GK210 GPUs, totals, with GPU Boost)",
            "4992 CUDA cores and 24 GB are the sum over two GPUs; one process sees one GPU with 12 GB",
            fp64_tflops=2.91, cuda_cores=4992, sms=26, boost_clock_ghz=0.875, form="board"),
    GpuSpec("P100", "Pascal", 2016, 16, 732, 10.6, None, None, None, "NVIDIA Tesla P100 datasheet (SXM2, NVLink)",
            "no Tensor Cores; FP16 reaches 21.2 TFLOPS through paired half-precision arithmetic",
            fp64_tflops=5.3, cuda_cores=3584, sms=56, boost_clock_ghz=1.48, form="SXM2"),
    GpuSpec("P100-PCIe", "Pascal", 2016, 16, 732, 9.3, None, None, None, "NVIDIA Tesla P100 datasheet (PCIe, 16 GB)",
            "Kaggle's 'Tesla P100-PCIE-16GB'; lower clock than the SXM2 part; FP16 18.7 TFLOPS by paired halves",
            fp64_tflops=4.7, cuda_cores=3584, sms=56, boost_clock_ghz=1.303, form="PCIe"),
    GpuSpec("P100-PCIe-12GB", "Pascal", 2016, 12, 549, 9.3, None, None, None,
            "NVIDIA Tesla P100 datasheet (PCIe, 12 GB)", "three of the four HBM2 stacks: less memory and bandwidth",
            fp64_tflops=4.7, cuda_cores=3584, sms=56, boost_clock_ghz=1.303, form="PCIe"),
    GpuSpec("V100", "Volta", 2017, 32, 900, 15.7, None, 125, None, "NVIDIA V100 datasheet (SXM2, 32 GB)",
            "first Tensor Cores (FP16 in, FP16/FP32 accumulate); no BF16, TF32 or FP64 Tensor Cores",
            fp64_tflops=7.8, cuda_cores=5120, sms=80, boost_clock_ghz=1.53, form="SXM2"),
    GpuSpec("V100-16GB", "Volta", 2017, 16, 900, 15.7, None, 125, None, "NVIDIA V100 datasheet (SXM2, 16 GB)",
            "the 16 GB SXM2 part ('Tesla V100-SXM2-16GB'); same chip and clocks as the 32 GB one",
            fp64_tflops=7.8, cuda_cores=5120, sms=80, boost_clock_ghz=1.53, form="SXM2"),
    GpuSpec("V100-PCIe", "Volta", 2017, 32, 900, 14, None, 112, None, "NVIDIA V100 datasheet (PCIe, 32 GB)",
            "250 W card: lower boost clock than the 300 W SXM2 module",
            fp64_tflops=7, cuda_cores=5120, sms=80, boost_clock_ghz=1.38, form="PCIe"),
    GpuSpec("V100-PCIe-16GB", "Volta", 2017, 16, 900, 14, None, 112, None, "NVIDIA V100 datasheet (PCIe, 16 GB)",
            "250 W card: lower boost clock than the 300 W SXM2 module",
            fp64_tflops=7, cuda_cores=5120, sms=80, boost_clock_ghz=1.38, form="PCIe"),
    GpuSpec("T4", "Turing", 2018, 16, 320, 8.1, None, 65, None,
            "NVIDIA T4 datasheet; SMs, clock and FP64 (1/32 of FP32) from NVIDIA's Turing whitepaper",
            "Colab's free GPU; 70 W power cap: under sustained GEMMs it lowers its clock, and public measurements of "
            "long float16 GEMMs sit far below the 65 TFLOPS peak (reference.show('matmul')); INT8 130 TOPS; no BF16 "
            "or TF32", fp64_tflops=0.25, cuda_cores=2560, sms=40, boost_clock_ghz=1.59, form="PCIe"),
    GpuSpec("A100-40GB", "Ampere", 2020, 40, 1555, 19.5, 156, 312, 312, _nvidia("A100 datasheet (SXM4, 40 GB)"),
            "400 W module", fp64_tflops=9.7, cuda_cores=6912, sms=108, boost_clock_ghz=1.41, fp64_tensor_tflops=19.5,
            form="SXM4"),
    GpuSpec("A100-80GB", "Ampere", 2020, 80, 2039, 19.5, 156, 312, 312, _nvidia("A100 datasheet (SXM4, 80 GB)"),
            "400 W module", fp64_tflops=9.7, cuda_cores=6912, sms=108, boost_clock_ghz=1.41, fp64_tensor_tflops=19.5,
            form="SXM4"),
    GpuSpec("A100-40GB-PCIe", "Ampere", 2020, 40, 1555, 19.5, 156, 312, 312, _nvidia("A100 datasheet (PCIe, 40 GB)"),
            "250 W card: same peaks as the SXM4 module on paper, lower sustained clocks under long GEMMs",
            fp64_tflops=9.7, cuda_cores=6912, sms=108, boost_clock_ghz=1.41, fp64_tensor_tflops=19.5, form="PCIe"),
    GpuSpec("A100-80GB-PCIe", "Ampere", 2021, 80, 1935, 19.5, 156, 312, 312, _nvidia("A100 datasheet (PCIe, 80 GB)"),
            "300 W card: less bandwidth than the SXM4 80 GB module, lower sustained clocks under long GEMMs",
            fp64_tflops=9.7, cuda_cores=6912, sms=108, boost_clock_ghz=1.41, fp64_tensor_tflops=19.5, form="PCIe"),
    GpuSpec("L4", "Ada Lovelace", 2023, 24, 300, 30.3, 60, 121, 121,
            _nvidia("L4 datasheet") + "; SMs, clock and FP64 (1/64 of FP32) from NVIDIA's Ada whitepaper",
            "72 W card", fp64_tflops=0.47, cuda_cores=7424, sms=58, boost_clock_ghz=2.04, form="PCIe"),
    GpuSpec("RTX 4090", "Ada Lovelace", 2022, 24, 1008, 82.6, 82.6, 165.2, 165.2,
            "NVIDIA Ada Lovelace GPU architecture whitepaper, appendix (GeForce RTX 4090); Tensor figures dense, "
            "FP16/BF16 with FP32 accumulate",
            "consumer card: GeForce runs FP16 with FP16 accumulate at twice the FP32-accumulate rate quoted here; "
            "FP64 is 1/64 of FP32", fp64_tflops=1.29, cuda_cores=16384, sms=128, boost_clock_ghz=2.52, form="PCIe"),
    GpuSpec("H100", "Hopper", 2022, 80, 3350, 67, 494.7, 989.4, 989.4, _nvidia("H100 datasheet (SXM5)"),
            "700 W module ('NVIDIA H100 80GB HBM3')", fp64_tflops=34, cuda_cores=16896, sms=132, boost_clock_ghz=1.98,
            fp64_tensor_tflops=67, form="SXM5"),
    GpuSpec("H100-PCIe", "Hopper", 2022, 80, 2000, 51, 378, 756, 756, _nvidia("H100 datasheet (PCIe)"),
            "350 W card with fewer SMs (114), a lower clock and HBM2e: about 3/4 of the SXM5 FLOP/s and 60% of its "
            "bandwidth (2.0 against 3.35 TB/s)",
            fp64_tflops=26, cuda_cores=14592, sms=114, boost_clock_ghz=1.755, fp64_tensor_tflops=51, form="PCIe"),
    GpuSpec("H100-NVL", "Hopper", 2023, 94, 3900, 60, 417.5, 835.5, 835.5, _nvidia("H100 NVL datasheet (per GPU)"),
            "PCIe card (350-400 W) sold in NVLink-bridged pairs; figures per GPU, not per pair",
            fp64_tflops=30, cuda_cores=16896, sms=132, boost_clock_ghz=1.785, fp64_tensor_tflops=60, form="NVL"),
    GpuSpec("H200", "Hopper", 2024, 141, 4800, 67, 494.7, 989.4, 989.4, _nvidia("H200 datasheet (SXM)"),
            "the H100's chip with 141 GB of HBM3e", fp64_tflops=34, cuda_cores=16896, sms=132, boost_clock_ghz=1.98,
            fp64_tensor_tflops=67, form="SXM5"),
    GpuSpec("H200-NVL", "Hopper", 2024, 141, 4800, 60, 417.5, 835.5, 835.5, _nvidia("H200 datasheet (H200 NVL)"),
            "PCIe card (up to 600 W) for NVLink-bridged groups; lower clock than the SXM module",
            fp64_tflops=30, cuda_cores=16896, sms=132, boost_clock_ghz=1.785, fp64_tensor_tflops=60, form="NVL"),
    GpuSpec("B200", "Blackwell", 2024, 180, 8000, 75, 1125, 2250, 2250,
            "NVIDIA HGX B200 specifications, 8-GPU totals divided by 8 (FP64 296, FP32 600 TFLOPS; TF32 18, "
            "FP16/BF16 36 PFLOPS with sparsity); Tensor figures dense, i.e. half the sparse ones",
            "two dies in one package, 1000 W; NVIDIA's earlier Blackwell technical brief gave 40 FP64 / 80 FP32 "
            "TFLOPS at the same power; FP8 and FP4 (not in this table) double and quadruple the FP16 rate",
            fp64_tflops=37, fp64_tensor_tflops=37, form="SXM"),
    GpuSpec("MI300X", "CDNA 3", 2023, 192, 5300, 163.4, 653.7, 1307.4, 1307.4,
            "AMD Instinct MI300X data sheet; matrix figures dense (AMD's 'with sparsity' figures are 2x these)",
            "AMD, not NVIDIA: ROCm builds of PyTorch drive it through the torch.cuda API (torch.cuda.is_available() "
            "is True, the device is 'cuda'); 'cuda_cores' are stream processors, 'sms' compute units; the FP32 "
            "vector figure counts packed FP32 (two numbers per lane per cycle): unpacked code gets 81.7",
            fp64_tflops=81.7, cuda_cores=19456, sms=304, boost_clock_ghz=2.1, fp64_tensor_tflops=163.4, form="OAM"),
)}
"""Datasheet figures (not measurements) for the GPUs a learner meets, keyed by short name (see SPEC_ASSUMPTIONS)."""

_DEVICE_NAMES: tuple[tuple[str, str], ...] = (
    # (pattern of the name torch.cuda.get_device_name / NVML reports, key); the first match wins, so specific first
    (r"\bK80\b", "K80"),
    (r"\bP100[- ]PCIE[- ]12GB\b", "P100-PCIe-12GB"),
    (r"\bP100[- ]PCIE\b", "P100-PCIe"),
    (r"\bP100([- ]SXM2)?([- ]16GB)?$", "P100"),
    (r"\bV100[- ]PCIE[- ]16GB\b", "V100-PCIe-16GB"),
    (r"\bV100[- ]PCIE\b", "V100-PCIe"),
    (r"\bV100[- ]SXM2[- ]16GB\b", "V100-16GB"),
    (r"\bV100([- ]SXM2)?([- ]32GB)?$", "V100"),
    (r"\bT4$", "T4"),
    (r"\bA100[- ]80GB[- ]PCIE\b|\bA100[- ]PCIE[- ]80GB\b", "A100-80GB-PCIe"),
    (r"\bA100[- ]PCIE([- ]40GB)?$|\bA100[- ]40GB[- ]PCIE$", "A100-40GB-PCIe"),
    (r"\bA100([- ]SXM4?)?[- ]80GB$", "A100-80GB"),
    (r"\bA100([- ]SXM4?)?([- ]40GB)?$", "A100-40GB"),
    (r"\bL4$", "L4"),
    (r"\bRTX 4090$", "RTX 4090"),
    (r"\bH100[- ]NVL$", "H100-NVL"),
    (r"\bH100[- ]PCIE$", "H100-PCIe"),
    (r"\bH100( 80GB HBM3|[- ]SXM5?( 80GB)?)?$", "H100"),
    (r"\bH200[- ]NVL$", "H200-NVL"),
    (r"\bH200([- ]SXM)?( 141GB)?$", "H200"),
    (r"\bB200$", "B200"),
    (r"\bMI300X( VF)?$", "MI300X"),
)


def gpu_spec(name: str) -> GpuSpec:
    """Look up a GPU's datasheet figures by short name ('T4', 'H100-PCIe', ...) or by the name its driver reports.

    Device names are matched part by part ('NVIDIA H100 PCIe' is the PCIe card, 'NVIDIA H100 80GB HBM3' the SXM5
    module); a name the table does not know raises ValueError rather than borrow another part's figures.
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    if name in GPU_SPECS:
        return GPU_SPECS[name]
    by_lower = {key.lower(): key for key in GPU_SPECS}
    if name.strip().lower() in by_lower:
        return GPU_SPECS[by_lower[name.strip().lower()]]
    upper = " ".join(name.upper().split())
    for pattern, key in _DEVICE_NAMES:
        if re.search(pattern, upper):
            return GPU_SPECS[key]
    raise ValueError(f"name must be one of {list(GPU_SPECS)} (or a device name the driver reports for one, e.g. "
                     f"'Tesla T4' or 'NVIDIA H100 PCIe'), got {name!r}")


SPEC_COLUMNS: tuple[tuple[str, str], ...] = (
    ("GPU", "name"), ("form", "form"), ("year", "year"), ("memory (GB)", "memory_gb"),
    ("bandwidth (GB/s)", "bandwidth_gb_s"), ("FP64", "fp64_tflops"), ("FP64 Tensor", "fp64_tensor_tflops"),
    ("FP32", "fp32_tflops"), ("TF32 Tensor", "tf32_tensor_tflops"), ("FP16 Tensor", "fp16_tensor_tflops"),
    ("BF16 Tensor", "bf16_tensor_tflops"),
)
"""Columns of :func:`spec_rows`: heading and GpuSpec field (FLOP/s columns in dense TFLOP/s)."""


def spec_rows(specs: Iterable[GpuSpec] | None = None, source: bool = True) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of a datasheet table, sorted by year; '-' where the chip has no such unit."""
    from gpucourse._validate import list_of

    specs = list(GPU_SPECS.values()) if specs is None else list_of("specs", specs, GpuSpec, non_empty=True)
    if not isinstance(source, bool):
        raise TypeError(f"source must be a bool, got {type(source).__name__}")

    def cell(value: object) -> str:
        if value is None or value == "":
            return "-"
        return f"{value:g}" if isinstance(value, float) else str(value)

    header = [heading for heading, _ in SPEC_COLUMNS] + (["source"] if source else [])
    rows = [[cell(getattr(spec, field)) for _, field in SPEC_COLUMNS] + ([spec.source] if source else [])
            for spec in sorted(specs, key=lambda s: (s.year, s.name))]
    return header, rows


# --------------------------------------------------------------------------- environment report

def _version(package: str) -> str | None:
    """Installed version of ``package`` without importing it (None if absent)."""
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class GpuInfo:
    """One visible CUDA GPU as the driver reports it."""

    name: str
    memory_bytes: int
    multiprocessors: int
    compute_capability: tuple[int, int]


@dataclass(frozen=True)
class EnvironmentReport:
    """Everything a lesson needs to know about where it runs."""

    device: str
    cpu: CpuInfo
    gpus: tuple[GpuInfo, ...]
    python: str
    platform: str
    in_colab: bool
    versions: dict[str, str | None] = field(default_factory=dict)
    cuda_version: str | None = None
    cudnn_version: int | None = None
    in_kaggle: bool = False

    def one_line(self) -> str:
        """The line every lesson's setup cell prints."""
        if self.gpus:
            where = f"GPU: {self.gpus[0].name}, {self.gpus[0].memory_bytes / 2**30:.0f} GiB"
        else:
            where = "no GPU: lessons run on the CPU and show GPU effects from labelled reference data"
        frameworks = ", ".join(f"{name} {ver}" for name, ver in self.versions.items() if ver)
        return (f"device={self.device} | {where} | CPU: {self.cpu.physical_cores} cores, "
                f"{self.cpu.simd_bits}-bit SIMD | {frameworks}")

    def table(self) -> str:
        """A multi-line report for lesson 00 and the doctor command."""
        rows = [
            ("device chosen", self.device),
            ("running in", "Google Colab" if self.in_colab else "Kaggle" if self.in_kaggle else self.platform),
            ("python", self.python),
            ("CPU", self.cpu.model),
            ("CPU cores", f"{self.cpu.physical_cores} physical, {self.cpu.logical_cores} logical"),
            ("CPU clock (reported)", f"{self.cpu.clock_hz / 1e9:.2f} GHz ({self.cpu.clock_source})"),
            ("CPU SIMD", f"{self.cpu.simd_bits}-bit; flags: {' '.join(self.cpu.simd_flags) or 'none found'}"),
            ("RAM", f"{self.cpu.memory_bytes / 2**30:.1f} GiB"),
        ]
        for index, gpu in enumerate(self.gpus):
            rows.append((f"GPU {index}", f"{gpu.name}, {gpu.memory_bytes / 2**30:.1f} GiB, "
                                        f"{gpu.multiprocessors} SMs, compute capability "
                                        f"{gpu.compute_capability[0]}.{gpu.compute_capability[1]}"))
        if not self.gpus:
            rows.append(("GPU", "none visible"))
        coretype = os.environ.get("OPENBLAS_CORETYPE")
        if coretype:
            rows.append(("OPENBLAS_CORETYPE", f"{coretype}: numpy's BLAS is told to use {coretype} kernels, "
                                              "which may be narrower than this CPU's SIMD"))
        rows.append(("CUDA (torch build)", self.cuda_version or "-"))
        rows.append(("cuDNN", str(self.cudnn_version) if self.cudnn_version else "-"))
        rows += [(name, ver or "not installed") for name, ver in self.versions.items()]
        width = max(len(key) for key, _ in rows)
        return "\n".join(f"{key:<{width}}  {value}" for key, value in rows)


def environment_report() -> EnvironmentReport:
    """Collect the environment report (imports torch if installed; never imports TensorFlow)."""
    torch = _torch_or_none()
    gpus: list[GpuInfo] = []
    cuda_version = cudnn_version = None
    device = "cpu"
    if torch is not None:
        device = str(pick_device())
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            gpus.append(GpuInfo(props.name, props.total_memory, props.multi_processor_count,
                                (props.major, props.minor)))
        cuda_version = torch.version.cuda
        if torch.backends.cudnn.is_available():
            cudnn_version = torch.backends.cudnn.version()
    versions = {name: _version(name) for name in ("gpucourse", "numpy", "torch", "tensorflow", "keras", "numba")}
    if versions["tensorflow"] is None:
        versions["tensorflow"] = _version("tensorflow-cpu")
    return EnvironmentReport(
        device=device, cpu=cpu_info(), gpus=tuple(gpus),
        python=platform.python_version(), platform=f"{platform.system()} {platform.machine()}",
        in_colab="google.colab" in sys.modules or "COLAB_RELEASE_TAG" in os.environ,
        versions=versions, cuda_version=cuda_version, cudnn_version=cudnn_version,
        in_kaggle="KAGGLE_KERNEL_RUN_TYPE" in os.environ,  # the variable the setup cell reads too
    )
