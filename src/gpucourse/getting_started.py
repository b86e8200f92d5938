"""Stand-ins and readers for lesson 00_getting_started: a fake ``torch.cuda`` whose allocations NVML sees
(:class:`FakeCuda`), devices that time matmuls (:class:`TorchMatmul` for real ones, :class:`SimulatedMatmulGpu`
without a GPU), recorded GPU reports (:func:`report`, :func:`machine_report` for this machine, :func:`t4_report`),
and what the tools print about a machine's driver and wheel (:func:`tool_outputs`, :func:`t4_outputs`,
:func:`this_machine_outputs`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

from gpucourse._validate import one_of, positive_int
from gpucourse.nvml import FakeNvml, NvmlUnavailable, gpu_index, open_nvml

# --------------------------------------------------------------------------- memory this process allocates

class FakeTensor:
    """A tensor a :class:`FakeCuda` made: its ``device`` (a torch.device), ``shape``, ``dtype`` and ``nbytes``."""

    def __init__(self, device: object, nbytes: int, dtype: str = "float32") -> None:
        self.device = device
        self.nbytes = nbytes
        self.dtype = dtype
        self.shape = (nbytes // 4,)

    def __repr__(self) -> str:
        return f"FakeTensor(device='{self.device}', nbytes={self.nbytes})"


class FakeCuda:
    """A fake ``torch.cuda`` for the GPUs of a :class:`FakeNvml`: what this process allocated, per GPU.

    Like PyTorch's caching allocator, ``memory_allocated`` counts the bytes of live tensors (rounded up to 512 B
    blocks) and ``memory_reserved`` the 2 MiB segments taken from the driver (which NVML's 'used' then includes);
    the first allocation on a GPU also creates a CUDA context there (``context_bytes`` of device memory that
    NVML sees and PyTorch does not count). Each GPU starts with its own ``allocated`` and ``reserved`` bytes.
    """

    SEGMENT = 2 * 2**20

    def __init__(self, nvml: FakeNvml, allocated: Iterable[int] = (), reserved: Iterable[int] = (),
                 current: int = 0, context_bytes: int = 311 * 2**20) -> None:
        if not isinstance(nvml, FakeNvml):
            raise TypeError(f"nvml must be a FakeNvml, got {type(nvml).__name__}")
        self._nvml = nvml
        count = len(nvml._gpus)
        self.allocated = list(allocated) or [0] * count
        self.reserved = list(reserved) or list(self.allocated)
        if len(self.allocated) != count or len(self.reserved) != count:
            raise ValueError(f"allocated and reserved need one value per GPU ({count})")
        self.current = current
        self.context_bytes = context_bytes
        self._contexts: set[int] = set()
        self.synchronized = 0

    def is_available(self) -> bool:
        """True when the fake has a GPU."""
        return bool(self.allocated)

    def device_count(self) -> int:
        """How many GPUs this process sees."""
        return len(self.allocated)

    def current_device(self) -> int:
        """The index of the current GPU (where ``device=None`` points)."""
        return self.current

    def _index(self, device: object) -> int:
        """A GPU index from None (the current GPU), an int, 'cuda', 'cuda:N' or a torch.device."""
        if device is None:
            return self.current
        if isinstance(device, bool):
            raise TypeError(f"device must be an int, a 'cuda:N' string or a torch.device, got {device!r}")
        if isinstance(device, int):
            index = device
        else:
            kind, _, number = str(device).partition(":")
            if kind != "cuda":
                raise ValueError(f"Expected a cuda device, but got: {device}")
            index = int(number) if number else self.current
        if not 0 <= index < len(self.allocated):
            raise RuntimeError(f"Invalid device id: {index} (this process sees {len(self.allocated)} GPUs)")
        return index

    def memory_allocated(self, device: object = None) -> int:
        """Bytes of live tensors this process holds on the GPU (``torch.cuda.memory_allocated``)."""
        return self.allocated[self._index(device)]

    def memory_reserved(self, device: object = None) -> int:
        """Bytes the caching allocator holds from the driver on the GPU (``torch.cuda.memory_reserved``)."""
        return self.reserved[self._index(device)]

    def synchronize(self, device: object = None) -> None:
        """Wait for the GPU's queued work (nothing is queued on the fake)."""
        self._index(device)
        self.synchronized += 1

    def empty(self, nbytes: int, device: object = None) -> FakeTensor:
        """Allocate a tensor of ``nbytes`` on a GPU ('cuda:N'), or 'cpu' (where no GPU memory changes)."""
        import torch

        nbytes = positive_int("nbytes", nbytes)
        if str(device) == "cpu":
            return FakeTensor(torch.device("cpu"), nbytes)
        index = self._index(device)
        if index not in self._contexts:
            self._contexts.add(index)
            self._nvml.extra_used[index] += self.context_bytes
        self.allocated[index] += -(-nbytes // 512) * 512
        if self.allocated[index] > self.reserved[index]:
            grow = -(-(self.allocated[index] - self.reserved[index]) // self.SEGMENT) * self.SEGMENT
            self.reserved[index] += grow
            self._nvml.extra_used[index] += grow
        return FakeTensor(torch.device("cuda", index), nbytes)


# --------------------------------------------------------------------------- a device that runs matmuls

class TorchMatmul:
    """A real device for timing matmuls: ``matmul(n, dtype)`` queues ``a @ b`` of n x n matrices and returns,
    ``synchronize()`` waits for the device, ``clock()`` reads the host's clock (``time.perf_counter``). The same
    interface as :class:`gpucourse.simulate.SimulatedGPU`.
    """

    def __init__(self, device: object = "cpu", report: dict | None = None) -> None:
        import torch

        self.device = torch.device(device)
        self.report = report  # the GPU's recorded report (machine_report()), None on a CPU
        self._matrices: dict[tuple[int, str], tuple] = {}

    def matmul(self, n: int, dtype: str = "float32") -> None:
        """Queue one n x n matrix multiply (the inputs are made once per size and dtype)."""
        import torch

        n = positive_int("n", n)
        key = (n, one_of("dtype", dtype, ("float32", "float16", "bfloat16", "float64")))
        if key not in self._matrices:
            generator = torch.Generator().manual_seed(0)
            self._matrices[key] = tuple(torch.randn(n, n, generator=generator).to(self.device, getattr(torch, dtype))
                                        for _ in range(2))
        a, b = self._matrices[key]
        a @ b

    def synchronize(self) -> None:
        """Wait until the device has finished its queued work."""
        import torch

        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def clock(self) -> float:
        """Seconds on the host's clock."""
        import time

        return time.perf_counter()


class SimulatedMatmulGpu:
    """A simulated GPU described by ``report`` whose ``dtype`` matmuls run at ``flops_per_s``: ``matmul(n, dtype)``
    queues one and returns at once, ``synchronize()`` waits, ``clock()`` reads a simulated clock (seconds). Timing
    noise (``jitter``), slow outliers (``outlier_prob``, ``outlier_s``) and a slow first call (``init_s``) are those
    of :class:`gpucourse.simulate.SimulatedGPU`, which runs the work.
    """

    def __init__(self, report: dict, dtype: str, flops_per_s: float, *, jitter: float = 0.0,
                 outlier_prob: float = 0.0, outlier_s: float = 0.0, init_s: float = 0.0, launch_s: float = 5e-6,
                 seed: int = 0) -> None:
        from gpucourse.simulate import SimulatedGPU

        if not isinstance(report, dict):
            raise TypeError(f"report must be a dict (see report()), got {type(report).__name__}")
        self.report = report
        self.dtype = one_of("dtype", dtype, ("float32", "float16", "bfloat16", "tf32"))
        self._gpu = SimulatedGPU(flops_per_s=flops_per_s, simulated_clock=True, jitter=jitter,
                                 outlier_prob=outlier_prob, outlier_s=outlier_s, init_s=init_s, launch_s=launch_s,
                                 seed=seed)

    def matmul(self, n: int, dtype: str = "float32") -> None:
        """Queue one n x n matrix multiply in ``dtype`` (the one this device was set up for)."""
        if dtype != self.dtype:
            raise ValueError(f"dtype: this simulated GPU times {self.dtype} matmuls, got {dtype!r}")
        self._gpu.matmul(n, "float32")

    def synchronize(self) -> None:
        """Wait until the queued matmuls have finished."""
        self._gpu.synchronize()

    def clock(self) -> float:
        """Seconds on the simulated host clock."""
        return self._gpu.clock()


# --------------------------------------------------------------------------- recorded environment reports

#: End of life of NVIDIA's data-centre driver branches (long-term support and production branches only), from
#: NVIDIA's support matrices (R535, R580, R595, R620):
#: https://docs.nvidia.com/datacenter/tesla/drivers/615/supported-drivers-and-cuda-toolkit-versions.html, .../620/...,
#: and https://docs.nvidia.com/datacenter/tesla/pdf/NVIDIA_CUDA_Drivers_Support.pdf (R418-R460).
DRIVER_BRANCH_END_OF_LIFE: dict[int, str] = {418: "2022-03", 440: "2020-11", 450: "2023-07", 460: "2022-01",
                                             535: "2026-06", 580: "2028-06", 595: "2027-03", 620: "2029-09"}

#: The first CUDA release whose driver knows each compute capability (CUDA Toolkit release notes; Blackwell's 10.0 and
#: 12.0 came with CUDA 12.8: https://docs.nvidia.com/cuda/blackwell-compatibility-guide/). A driver whose CUDA
#: version (nvidia-smi's "CUDA Version") is older does not run anything on that GPU.
FIRST_CUDA: dict[tuple[int, int], tuple[int, int]] = {(6, 0): (8, 0), (6, 1): (8, 0), (7, 0): (9, 0),
                                                      (7, 5): (10, 0), (8, 0): (11, 0), (8, 6): (11, 1),
                                                      (8, 9): (11, 8), (9, 0): (11, 8), (10, 0): (12, 8),
                                                      (12, 0): (12, 8)}

#: Hopper's Tensor Core figures use a lower clock than its rated boost (1980 MHz SXM5, 1755 MHz PCIe), by the name
#: PyTorch reports (H100 whitepaper, Table 3; https://forums.developer.nvidia.com/t/244727): float32 uses the boost.
HOPPER_TENSOR_CLOCK_MHZ: dict[str, int] = {"NVIDIA H100 80GB HBM3": 1830, "NVIDIA H100 PCIe": 1620}


def report(name: str, brand: str, compute_capability: tuple[int, int], sms: int, driver: str, torch_cuda: str,
           arch_list: Iterable[str], clocks: dict, compat: str | None = None, date: str = "2026-11-27",
           error: str | None = None) -> dict:
    """An environment report as an engineer records it: GPU, driver, wheel, cuda-compat package, clocks (MHz)."""
    brand = one_of("brand", brand, ("datacenter", "workstation", "geforce"))
    if not (isinstance(compute_capability, tuple) and len(compute_capability) == 2):
        raise TypeError(f"compute_capability must be a (major, minor) tuple, got {compute_capability!r}")
    missing = {"rated_boost", "nvml_max_sm", "nvml_max_graphics", "base"} - set(clocks)
    if missing:
        raise ValueError(f"clocks lacks {sorted(missing)}")
    return {"name": name, "brand": brand, "compute_capability": compute_capability, "sms": positive_int("sms", sms),
            "driver": driver, "torch_cuda": torch_cuda, "arch_list": list(arch_list), "compat": compat,
            "date": date, "clocks": dict(clocks), "error": error}


def t4_report() -> dict:
    """A Colab T4 as its datasheet and a cu126 wheel describe it (40 SMs, 1590 MHz boost, 585 MHz base): an
    example, not a reading. Sources: https://www.nvidia.com/en-us/data-center/tesla-t4/ (boost, 70 W) and
    https://sysrqmts.com/en/gpus/nvidia/tesla/t4 (SMs, base clock)."""
    return report("Tesla T4", "datacenter", (7, 5), 40, "550.54.15", "12.6",
                  ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
                  {"rated_boost": 1590, "nvml_max_sm": 1590, "nvml_max_graphics": 1590, "base": 585})


def _cuda_clock_mhz(index: int) -> float | None:
    """The rated boost clock of CUDA device ``index`` (cuDeviceGetAttribute CLOCK_RATE, kHz), or None."""
    import ctypes

    try:
        cuda = ctypes.CDLL("libcuda.so.1")
        device, value = ctypes.c_int(), ctypes.c_int()
        if cuda.cuInit(0) or cuda.cuDeviceGet(ctypes.byref(device), index):
            return None
        if cuda.cuDeviceGetAttribute(ctypes.byref(value), 13, device):  # CU_DEVICE_ATTRIBUTE_CLOCK_RATE
            return None
        return value.value / 1000
    except (OSError, AttributeError):
        return None


def machine_report(index: int = 0) -> dict | None:
    """This machine's report for GPU ``index`` (torch, NVML, the CUDA driver's clock rate); None without a GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    import datetime

    from gpucourse.nvml import driver_versions

    props = torch.cuda.get_device_properties(index)
    name = props.name
    lower = name.lower()  # a guess from the name; NVML's nvmlDeviceGetBrand knows better
    brand = "geforce" if "geforce" in lower else (
        "workstation" if ("rtx" in lower or "quadro" in lower or "titan" in lower) and "server" not in lower
        else "datacenter")
    clocks = {"rated_boost": _cuda_clock_mhz(index), "nvml_max_sm": None, "nvml_max_graphics": None, "base": None}
    with contextlib.suppress(NvmlUnavailable), open_nvml() as session:
        module = session.module
        handle = module.nvmlDeviceGetHandleByIndex(gpu_index(session, torch.device("cuda", index)))
        clocks["nvml_max_sm"], _ = session.query("nvmlDeviceGetMaxClockInfo", handle, module.NVML_CLOCK_SM)
        clocks["nvml_max_graphics"], _ = session.query("nvmlDeviceGetMaxClockInfo", handle,
                                                       module.NVML_CLOCK_GRAPHICS)
        clocks["base"], _ = session.query("nvmlDeviceGetDefaultApplicationsClock", handle, module.NVML_CLOCK_SM)
    driver, _ = driver_versions()
    return report(name, brand, (props.major, props.minor), props.multi_processor_count, driver or "unknown",
                  torch.version.cuda or "none", torch.cuda.get_arch_list(), clocks,
                  date=datetime.date.today().isoformat())


# --------------------------------------------------------------------------- what the tools print

_SMI = """{date}
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI {driver:<22}Driver Version: {driver:<15}CUDA Version: {cuda:<10}|
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|=========================================+========================+======================|
|   0  {name:<28}   On  |   00000000:00:04.0 Off |                    0 |
| N/A   34C    P8              9W /   70W |       1MiB /  15360MiB |      0%      Default |
+-----------------------------------------+------------------------+----------------------+
"""


def nvidia_smi_header(name: str, driver: str, cuda: str, date: str = "2026-11-27") -> str:
    """The top of ``nvidia-smi``'s output as a machine prints it: the time, the driver and its CUDA version, a GPU."""
    import datetime

    stamp = datetime.datetime.strptime(date, "%Y-%m-%d").replace(hour=9, minute=41, second=7)
    return _SMI.format(date=stamp.strftime("%a %b %d %H:%M:%S %Y"), driver=driver, cuda=cuda, name=name[:28])


def tool_outputs(name: str, brand: str, compute_capability: str, driver: str, driver_cuda: str, torch_version: str,
                 arch_list: Iterable[str], compat: str | None = None, date: str = "2026-11-27") -> dict:
    """What an engineer copies from a machine: nvidia-smi's header, ``nvidia-smi --query-gpu=compute_cap
    --format=csv,noheader``, ``torch.__version__``, ``torch.cuda.get_arch_list()``, the installed cuda-compat
    package as ``dpkg -l | grep cuda-compat`` prints it (or ''), and the GPU's market (from its product page)."""
    brand = one_of("brand", brand, ("datacenter", "workstation", "geforce"))
    package = "" if compat is None else (
        f"ii  cuda-compat-{compat.replace('.', '-')}  {driver_for_compat(compat)}-1  amd64  "
        "CUDA Compatibility Platform\n")
    return {"nvidia-smi": nvidia_smi_header(name, driver, driver_cuda, date),
            "compute_cap": f"{compute_capability}\n", "torch.__version__": torch_version,
            "torch.cuda.get_arch_list()": list(arch_list), "cuda-compat": package, "brand": brand}


def driver_for_compat(cuda: str) -> str:
    """The user-mode driver version a cuda-compat package of CUDA ``cuda`` ships (its package version)."""
    major, minor = (int(part) for part in cuda.split("."))
    return {(12, 2): "535.104.05", (12, 4): "550.54.15", (12, 6): "560.35.03", (12, 8): "570.124.06",
            (12, 9): "575.57.08", (13, 0): "580.65.06"}.get((major, minor), "580.95.05")


def t4_outputs() -> dict:
    """A Colab T4 with a cu126 wheel, as its tools print it (an example, not a reading)."""
    return tool_outputs("Tesla T4", "datacenter", "7.5", "550.54.15", "12.4", "2.8.0+cu126",
                        ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"])


def this_machine_outputs() -> dict | None:
    """This machine's tool outputs (nvidia-smi, torch), or None without a CUDA GPU and nvidia-smi."""
    from gpucourse.nvml import nvidia_smi

    try:
        import torch
    except ImportError:
        return None
    smi = nvidia_smi()
    if not smi or not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    lower = torch.cuda.get_device_name(0).lower()
    brand = "geforce" if "geforce" in lower else (
        "workstation" if ("rtx" in lower or "quadro" in lower) and "server" not in lower else "datacenter")
    return {"nvidia-smi": smi, "compute_cap": f"{major}.{minor}\n", "torch.__version__": torch.__version__,
            "torch.cuda.get_arch_list()": torch.cuda.get_arch_list(), "cuda-compat": "", "brand": brand}
