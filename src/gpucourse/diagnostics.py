"""The environment check (doctor) and the GPU self-test a learner runs on Colab."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass

from gpucourse import hardware, nvml
from gpucourse.timing import benchmark, sync_for


def doctor(quick: bool = False) -> str:
    """Environment report, estimated vs measured CPU peak, memory bandwidth, and the GPU's if present."""
    if not isinstance(quick, bool):
        raise TypeError(f"quick must be True or False, got {type(quick).__name__} ({quick!r})")
    report = hardware.environment_report()
    n, megabytes = (512, 64) if quick else (2048, 256)
    estimate = hardware.estimate_cpu_peak("float32")
    rates = {"numpy": hardware.measure_matmul_rate(n, "float32", "numpy")}
    if report.versions.get("torch"):
        rates["torch"] = hardware.measure_matmul_rate(n, "float32", "torch")
    best_backend = max(rates, key=rates.get)
    reconciled = hardware.reconcile_peak(estimate, rates[best_backend])
    lines = [report.table()]
    for index, record in enumerate(nvml.read_devices()):
        name, driver, capability, memory, clock, power = record.table_row()
        lines.append(f"GPU {index} (NVML)  {name}, driver {driver}, compute capability {capability}, {memory} GiB, "
                     f"max SM clock {clock} MHz, power limit {power} W")
    lines += ["", "CPU peak (float32)", f"  estimated : {estimate}"]
    lines += [f"  measured  : {name} {n}x{n} matmul {rate / 1e9:.0f} GFLOP/s" for name, rate in rates.items()]
    lines += [f"  verdict   : {reconciled.verdict}",
              f"  bandwidth : {hardware.measure_memory_bandwidth(megabytes) / 1e9:.1f} GB/s (numpy copy, read + write)"]
    if report.gpus:
        device = report.device
        spec_name = report.gpus[0].name
        gpu_rate = hardware.measure_matmul_rate(4096 if not quick else 1024, "float32", "torch", device)
        gpu_bw = hardware.measure_memory_bandwidth(megabytes, device=device)
        lines += ["", f"GPU {spec_name}",
                  f"  measured  : float32 matmul {gpu_rate / 1e12:.1f} TFLOP/s, copy bandwidth {gpu_bw / 1e9:.0f} GB/s"]
        try:
            spec = hardware.gpu_spec(spec_name)
            lines.append(f"  datasheet : float32 {spec.fp32_tflops} TFLOP/s, {spec.bandwidth_gb_s:.0f} GB/s "
                         f"({spec.source})")
        except ValueError:
            lines.append("  datasheet : not in the course's table")
    return "\n".join(lines)


@dataclass(frozen=True)
class SelfTestResult:
    """Outcome of one self-test step."""

    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str

    def __str__(self) -> str:
        return f"[{self.status}] {self.name}: {self.detail}"


def _run(name: str, step: Callable[[], str]) -> SelfTestResult:
    """Run one step; an AssertionError is a FAIL, a _Skip a SKIP, anything else a FAIL with its message."""
    try:
        return SelfTestResult(name, "PASS", step())
    except _Skip as skip:
        return SelfTestResult(name, "SKIP", str(skip))
    except Exception as error:  # a self-test reports every failure instead of stopping at the first
        return SelfTestResult(name, "FAIL", f"{type(error).__name__}: {error}")


class _Skip(Exception):
    """Raised by a self-test step that cannot run here (no GPU)."""


def _cuda_or_skip():
    """Return torch if a CUDA GPU is visible, else skip the step."""
    torch = hardware._torch_or_none()
    if torch is None or not torch.cuda.is_available():
        raise _Skip("no CUDA GPU visible (on Colab: Runtime > Change runtime type > GPU)")
    return torch


def _gpu_matmul_correct() -> str:
    """A float32 matmul on the GPU agrees with a float64 CPU reference."""
    torch = _cuda_or_skip()
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(512, 512, generator=generator), torch.randn(512, 512, generator=generator)
    with hardware.tf32_matmuls(torch, False):
        gpu = (a.cuda() @ b.cuda()).cpu().double()
    ref = a.double() @ b.double()
    error = ((gpu - ref).abs().max() / ref.abs().max()).item()
    assert error < 1e-5, f"relative error {error:.2e} too large for float32"
    return f"max relative error {error:.1e} vs float64 CPU"


def _gpu_reduced_precision_correct() -> str:
    """float16 (and bfloat16 where the GPU runs it natively) matmuls agree with float64 to their precision."""
    torch = _cuda_or_skip()
    generator = torch.Generator().manual_seed(0)
    a, b = torch.rand(256, 256, generator=generator), torch.rand(256, 256, generator=generator)
    ref = a.double() @ b.double()
    dtypes = [torch.float16] + ([torch.bfloat16] if hardware.has_native_bf16() else [])
    errors = {}
    for dtype in dtypes:
        gpu = (a.to("cuda", dtype) @ b.to("cuda", dtype)).cpu().double()
        errors[str(dtype).removeprefix("torch.")] = ((gpu - ref).abs().max() / ref.abs().max()).item()
    bounds = {"float16": 1e-2, "bfloat16": 5e-2}  # a few units of each format's rounding step (2**-10, 2**-7)
    for name, error in errors.items():
        assert error < bounds[name], f"{name} matmul relative error {error:.1e} is above {bounds[name]:.0e}"
    note = "" if hardware.has_native_bf16() else " (no native bfloat16 on this GPU: not tested)"
    return ", ".join(f"{name} max relative error {error:.1e}" for name, error in errors.items()) + note


@contextlib.contextmanager
def _strict_convolutions(torch):
    """Run cuDNN convolutions in true float32 (no TF32), restoring the learner's setting afterwards."""
    before = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = before


def _gpu_convolution_correct() -> str:
    """A cuDNN convolution on the GPU agrees with a float64 CPU reference."""
    torch = _cuda_or_skip()
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(4, 8, 32, 32, generator=generator)
    weight = torch.randn(16, 8, 3, 3, generator=generator)
    with _strict_convolutions(torch):
        gpu = torch.nn.functional.conv2d(x.cuda(), weight.cuda(), padding=1).cpu().double()
    ref = torch.nn.functional.conv2d(x.double(), weight.double(), padding=1)
    error = ((gpu - ref).abs().max() / ref.abs().max()).item()
    assert error < 1e-5, f"relative error {error:.2e} too large for a float32 convolution"
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return f"max relative error {error:.1e} vs float64 CPU (cuDNN {cudnn or 'not available'})"


def _gpu_rate_plausible() -> str:
    """Measured float32 matmul rate is below the datasheet peak and not absurdly far under it."""
    torch = _cuda_or_skip()
    with hardware.tf32_matmuls(torch, False):
        rate = hardware.measure_matmul_rate(4096, "float32", "torch", "cuda")
    try:
        spec = hardware.gpu_spec(torch.cuda.get_device_name(0))
    except ValueError:
        return f"{rate / 1e12:.1f} TFLOP/s float32 (GPU not in the datasheet table: no plausibility bound)"
    peak = spec.peak_flops("float32")
    assert rate <= 1.1 * peak, f"{rate / 1e12:.1f} TFLOP/s is above the {spec.name} datasheet peak: timing is broken"
    assert rate >= 0.05 * peak, f"{rate / 1e12:.2f} TFLOP/s is under 5% of the datasheet peak"
    return f"{rate / 1e12:.1f} TFLOP/s float32 = {rate / peak:.0%} of the {spec.name} datasheet peak"


def _gpu_bandwidth_plausible() -> str:
    """Measured device copy bandwidth is below the datasheet figure and not absurdly far under it."""
    torch = _cuda_or_skip()
    bandwidth = hardware.measure_memory_bandwidth(512, device="cuda")
    try:
        spec = hardware.gpu_spec(torch.cuda.get_device_name(0))
    except ValueError:
        return f"{bandwidth / 1e9:.0f} GB/s (GPU not in the datasheet table)"
    assert bandwidth <= 1.1 * spec.bandwidth, "copy bandwidth above the datasheet figure: timing is broken"
    assert bandwidth >= 0.2 * spec.bandwidth, "copy bandwidth under 20% of the datasheet figure"
    return f"{bandwidth / 1e9:.0f} GB/s = {bandwidth / spec.bandwidth:.0%} of the {spec.name} datasheet figure"


def _gpu_launch_is_asynchronous() -> str:
    """Without synchronisation a GPU matmul 'takes' far less than with it: kernel launches are asynchronous."""
    torch = _cuda_or_skip()
    a = torch.randn(4096, 4096, device="cuda")
    synced = benchmark(lambda: a @ a, warmup=2, repeats=5, sync=sync_for("cuda")).median_s
    torch.cuda.synchronize()
    unsynced = benchmark(lambda: a @ a, warmup=0, repeats=1).median_s
    torch.cuda.synchronize()
    assert unsynced < synced, "an unsynchronised launch should return before the kernel finishes"
    return f"synchronised {synced * 1e3:.2f} ms vs unsynchronised {unsynced * 1e3:.3f} ms"


_SELFTEST_METRICS = ("gpu_util", "gpu_mem_used", "gpu_mem_total", "gpu_power", "gpu_temp")
"""The NVML readings the self-test asks of the first GPU (keys of ``nvml.NVML_QUERIES``)."""


def _nvml_readable() -> str:
    """NVML reports utilisation, memory, power and temperature of the first CUDA GPU."""
    torch = _cuda_or_skip()
    try:
        reader = nvml.GpuReader(torch.device("cuda", 0))
    except nvml.NvmlUnavailable as error:
        if isinstance(error.__cause__, ImportError):
            raise _Skip("nvidia-ml-py not installed: pip install nvidia-ml-py") from error
        raise
    try:
        values = {key: value for key, _, value, _, _ in reader.readings() if key in _SELFTEST_METRICS}
    finally:
        reader.close()
    missing = [key for key in _SELFTEST_METRICS if values.get(key) is None]
    if missing:
        raise RuntimeError(f"NVML gave no value for {missing}: {'; '.join(reader.problems)}")
    return (f"utilisation {values['gpu_util']:.0f}%, memory {values['gpu_mem_used']:.1f}/"
            f"{values['gpu_mem_total']:.1f} GiB, {values['gpu_power']:.0f} W, {values['gpu_temp']:.0f} C")


def _cpu_peak_reconciled() -> str:
    """The CPU's estimated peak is reconciled with a measured matmul rate."""
    estimate = hardware.estimate_cpu_peak()
    measured = hardware.measure_matmul_rate(512, "float32", "numpy")
    return hardware.reconcile_peak(estimate, measured).verdict


def selftest() -> list[SelfTestResult]:
    """Run every self-test step; GPU steps are skipped (not failed) without a GPU."""
    steps = [
        ("device chosen", lambda: str(hardware.pick_device()) if hardware._torch_or_none() else "torch not installed"),
        ("CPU peak", _cpu_peak_reconciled),
        ("GPU matmul correct", _gpu_matmul_correct),
        ("GPU reduced precision correct", _gpu_reduced_precision_correct),
        ("GPU convolution correct", _gpu_convolution_correct),
        ("GPU matmul rate plausible", _gpu_rate_plausible),
        ("GPU bandwidth plausible", _gpu_bandwidth_plausible),
        ("GPU launches asynchronous", _gpu_launch_is_asynchronous),
        ("NVML metrics", _nvml_readable),
    ]
    return [_run(name, step) for name, step in steps]
