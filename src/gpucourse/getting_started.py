"""Stand-ins and readers for lesson 00_getting_started: a fake ``torch.cuda`` whose allocations NVML sees
(:class:`FakeCuda`), devices that time matmuls (:class:`TorchMatmul` for real ones, :class:`SimulatedMatmulGpu`
without a GPU), recorded GPU reports (:func:`report`, :func:`machine_report` for this machine, :func:`t4_report`),
and what the tools print about a machine's driver and wheel (:func:`tool_outputs`, :func:`t4_outputs`,
:func:`this_machine_outputs`).
"""

from __future__ import annotations

import contextlib
import datetime
import re
import shutil
import subprocess
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


class _Uuid:
    """A GPU's UUID as ``torch.cuda.get_device_properties(i).uuid`` gives it: ``str()`` prints it without 'GPU-'."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __str__(self) -> str:
        return self._text

    def __repr__(self) -> str:
        return self._text


class FakeCuda:
    """A fake ``torch.cuda`` for the GPUs of a :class:`FakeNvml`: what this process allocated, per GPU.

    Like PyTorch's caching allocator, ``memory_allocated`` counts the bytes of live tensors (rounded up to 512 B
    blocks) and ``memory_reserved`` the segments taken from the driver (which NVML's 'used' then includes), here
    simplified to 2 MiB steps (PyTorch takes 2 MiB segments for allocations up to 1 MiB, 20 MiB ones up to 10 MiB,
    and rounds larger ones up to 2 MiB);
    the first allocation on a GPU also creates a CUDA context there (``context_bytes`` of device memory that
    NVML sees and PyTorch does not count), unless that GPU starts with reserved memory (this process already has
    its context there). Each GPU starts with its own ``allocated`` and ``reserved`` bytes.
    """

    SEGMENT = 2 * 2**20

    def __init__(self, nvml: FakeNvml, allocated: Iterable[int] = (), reserved: Iterable[int] = (),
                 current: int = 0, context_bytes: int = 311 * 2**20, visible: Iterable[int] | None = None) -> None:
        if not isinstance(nvml, FakeNvml):
            raise TypeError(f"nvml must be a FakeNvml, got {type(nvml).__name__}")
        self._nvml = nvml
        # CUDA_VISIBLE_DEVICES: CUDA device i is NVML's GPU visible[i] (by default the same numbering)
        self.visible = list(range(len(nvml._gpus))) if visible is None else list(visible)
        if sorted(set(self.visible)) != sorted(self.visible) or not set(self.visible) <= set(range(len(nvml._gpus))):
            raise ValueError(f"visible must list distinct NVML indices below {len(nvml._gpus)}, got {self.visible}")
        count = len(self.visible)
        self.allocated = list(allocated) or [0] * count
        self.reserved = list(reserved) or list(self.allocated)
        if len(self.allocated) != count or len(self.reserved) != count:
            raise ValueError(f"allocated and reserved need one value per GPU ({count})")
        self.current = current
        self.context_bytes = context_bytes
        self._contexts: set[int] = {i for i, held in enumerate(self.reserved) if held > 0}  # a context already
        for i in self._contexts:  # NVML's 'used' already holds that context and this process's cache
            nvml.extra_used[self.visible[i]] += context_bytes + self.reserved[i]
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

    def get_device_properties(self, device: object = None) -> object:
        """The GPU's properties: its ``name`` and ``uuid`` (printed without NVML's 'GPU-' prefix, as torch does)."""
        import types

        nvml_index = self.visible[self._index(device)]
        gpu = self._nvml._gpus[nvml_index]
        nvml_uuid = gpu.uuid or f"GPU-00000000-0000-0000-0000-{nvml_index:012d}"  # what nvmlDeviceGetUUID says
        return types.SimpleNamespace(name=gpu.name, uuid=_Uuid(nvml_uuid.removeprefix("GPU-")))

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
        seen_by_nvml = self.visible[index]
        if index not in self._contexts:
            self._contexts.add(index)
            self._nvml.extra_used[seen_by_nvml] += self.context_bytes
        self.allocated[index] += -(-nbytes // 512) * 512
        if self.allocated[index] > self.reserved[index]:
            grow = -(-(self.allocated[index] - self.reserved[index]) // self.SEGMENT) * self.SEGMENT
            self.reserved[index] += grow
            self._nvml.extra_used[seen_by_nvml] += grow
        return FakeTensor(torch.device("cuda", index), nbytes)


# --------------------------------------------------------------------------- a device that runs matmuls

class TorchMatmul:
    """A real device for timing matmuls: ``matmul(n, dtype)`` queues ``a @ b`` of n x n matrices and returns,
    ``synchronize()`` waits for the device, ``clock()`` reads the host's clock (``time.perf_counter``). The same
    interface as :class:`gpucourse.simulate.SimulatedGPU`.
    """

    def __init__(self, device: object = "cpu", report: dict | None = None, tools: dict | None = None) -> None:
        import torch

        self.device = torch.device(device)
        self.report = report  # the GPU's recorded report (machine_report()), None on a CPU
        self.tools = tools  # what deviceQuery and nvidia-smi print about it (machine_clock_tools()), None on a CPU
        self._matrices: dict[tuple[int, str], tuple] = {}

    def matmul(self, n: int, dtype: str = "float32") -> None:
        """Queue one n x n matrix multiply (inputs made once per size and dtype; float32 with TF32 off)."""
        import torch

        n = positive_int("n", n)
        key = (n, one_of("dtype", dtype, ("float32", "float16", "bfloat16", "float64")))
        if key not in self._matrices:
            generator = torch.Generator().manual_seed(0)
            self._matrices[key] = tuple(torch.randn(n, n, generator=generator).to(self.device, getattr(torch, dtype))
                                        for _ in range(2))
        a, b = self._matrices[key]
        allowed = torch.backends.cuda.matmul.allow_tf32
        try:
            torch.backends.cuda.matmul.allow_tf32 = False  # float32 stays on the CUDA cores, never TF32
            a @ b
        finally:
            torch.backends.cuda.matmul.allow_tf32 = allowed

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
    """A simulated GPU whose ``dtype`` matmuls run at ``flops_per_s``, described by ``tools`` (what ``deviceQuery``
    and ``nvidia-smi -q -d CLOCK,PERFORMANCE`` print about it, see :func:`clock_tools`): ``matmul(n, dtype)`` queues
    one and returns at once, ``synchronize()`` waits for the queue, ``clock()`` reads a simulated host clock (s).

    Each call's time varies by ``jitter`` (relative), and is ``slow`` times longer with probability ``p_slow`` or
    ``fast`` times shorter with probability ``p_fast``; the first call takes ``init`` times longer (library
    start-up). ``broken_sync=True`` plants a fault: ``synchronize()`` returns without waiting, so a call seems to
    take only its launch time ``launch_s``.

    A ``"tf32"`` GPU times float32 matmuls (``matmul(n, "float32")``) at ``flops_per_s`` while ``allow_tf32`` is
    True (PyTorch's ``torch.backends.cuda.matmul.allow_tf32``, False by default) and at ``float32_flops_per_s``
    while it is False. ``tf32_overridden=True`` plants a fault: the environment sets ``NVIDIA_TF32_OVERRIDE=0``, so
    TF32 stays off whatever ``allow_tf32`` says.
    """

    def __init__(self, tools: dict, dtype: str, flops_per_s: float, *, jitter: float = 0.0, p_slow: float = 0.0,
                 slow: float = 3.0, p_fast: float = 0.0, fast: float = 1.6, init: float = 1.0,
                 broken_sync: bool = False, launch_s: float = 5e-6, seed: int = 0,
                 float32_flops_per_s: float | None = None, tf32_overridden: bool = False) -> None:
        import random

        if not (isinstance(tools, dict) and {"deviceQuery", "nvidia-smi -q"} <= set(tools)):
            raise TypeError("tools must be a dict with 'deviceQuery' and 'nvidia-smi -q' (see clock_tools())")
        if not flops_per_s > 0:
            raise ValueError(f"flops_per_s must be positive, got {flops_per_s!r}")
        self.tools = tools
        self.dtype = one_of("dtype", dtype, ("float32", "float16", "bfloat16", "tf32"))
        self._rate, self._jitter, self._launch = float(flops_per_s), jitter, launch_s
        self._odds = (p_slow, slow, p_fast, fast, init)
        self._broken = broken_sync
        if self.dtype == "tf32" and not (isinstance(float32_flops_per_s, (int, float)) and float32_flops_per_s > 0):
            raise ValueError(f"float32_flops_per_s: a tf32 GPU needs its float32 rate, got {float32_flops_per_s!r}")
        self._float32_rate = float(float32_flops_per_s or flops_per_s)
        self._overridden = tf32_overridden
        self.allow_tf32 = False  # PyTorch's default for matmuls
        self._random = random.Random(seed)
        self._now = self._busy_until = 1000.0
        self._calls = 0

    def matmul(self, n: int, dtype: str = "float32") -> None:
        """Queue one n x n matrix multiply in ``dtype`` (the one this device was set up for)."""
        n = positive_int("n", n)
        if dtype == "tf32":
            raise ValueError("dtype: a TF32 matmul is a float32 matmul with allow_tf32 = True: call "
                             "matmul(n, 'float32')")
        if dtype != self.dtype.replace("tf32", "float32"):
            raise ValueError(f"dtype: this simulated GPU times {self.dtype} matmuls, got {dtype!r}")
        rate = self._rate if self.dtype != "tf32" or (self.allow_tf32 is True and not self._overridden) \
            else self._float32_rate
        p_slow, slow, p_fast, fast, init = self._odds
        draw = self._random.random()
        factor = (1 + self._random.uniform(-self._jitter, self._jitter)) * (
            slow if draw < p_slow else (1 / fast if draw > 1 - p_fast else 1.0))
        if self._calls == 0:
            factor *= init
        self._calls += 1
        self._now += self._launch
        self._busy_until = max(self._busy_until, self._now) + 2 * n**3 / rate * factor

    def synchronize(self) -> None:
        """Wait until the queued matmuls have finished (returns at once when the fault ``broken_sync`` is planted)."""
        if not self._broken:
            self._now = max(self._now, self._busy_until)
        self._now += 1e-6

    def clock(self) -> float:
        """Seconds on the simulated host clock."""
        self._now += 1e-7
        return self._now


_DEVICE_QUERY = """Device {index}: "{name}"
  CUDA Driver Version / Runtime Version          {cuda} / {cuda}
  CUDA Capability Major/Minor version number:    {major}.{minor}
  Total amount of global memory:                 {mbytes} MBytes ({bytes} bytes)
  ({sms:03d}) Multiprocessors, ({cores:03d}) CUDA Cores/MP:    {total} CUDA Cores
  GPU Max Clock rate:                            {rated:.0f} MHz ({ghz:.2f} GHz)
  Memory Clock rate:                             {memory:.0f} Mhz
  Memory Bus Width:                              {bus}-bit
  L2 Cache Size:                                 {l2} bytes
"""

_SMI_Q = """
==============NVSMI LOG==============

Timestamp                                 : {stamp}
Driver Version                            : {driver}
CUDA Version                              : {cuda}

Attached GPUs                             : 1
GPU 00000000:00:04.0
    Performance State                     : P0
    Clocks Event Reasons
        Idle                              : Not Active
        Applications Clocks Setting       : Not Active
        SW Power Cap                      : {power_cap}
        HW Slowdown                       : Not Active
            HW Thermal Slowdown           : Not Active
            HW Power Brake Slowdown       : Not Active
        Sync Boost                        : Not Active
        SW Thermal Slowdown               : Not Active
        Display Clock Setting             : Not Active
    Clocks
        Graphics                          : {now_graphics:.0f} MHz
        SM                                : {now_sm:.0f} MHz
        Memory                            : {memory:.0f} MHz
        Video                             : {video:.0f} MHz
    Applications Clocks
        Graphics                          : {app:.0f} MHz
        Memory                            : {memory:.0f} MHz
    Default Applications Clocks
        Graphics                          : {default_app:.0f} MHz
        Memory                            : {memory:.0f} MHz
    Deferred Clocks
        Memory                            : N/A
    Max Clocks
        Graphics                          : {max_graphics:.0f} MHz
        SM                                : {max_sm:.0f} MHz
        Memory                            : {memory:.0f} MHz
        Video                             : {video_max:.0f} MHz
"""


def clock_tools(name: str, compute_capability: str, sms: int, cores_per_sm: int, rated: float, max_sm: float,
                max_graphics: float, current_sm: float, app: float, default_app: float, *, memory: float = 5001,
                power_capped: bool = False, memory_gib: float = 15, driver: str = "580.95.05", cuda: str = "13.0",
                date: str = "2026-11-27") -> dict:
    """What ``deviceQuery`` and ``nvidia-smi -q -d CLOCK,PERFORMANCE`` print about a GPU under load (clocks in MHz):
    its rated boost clock (deviceQuery's *GPU Max Clock rate*), NVML's maximum SM and graphics clocks, the current
    SM clock, the applications clocks, and whether the power cap holds the clock down."""
    major, _, minor = compute_capability.partition(".")
    sms, cores_per_sm = positive_int("sms", sms), positive_int("cores_per_sm", cores_per_sm)
    nbytes = int(memory_gib * 2**30)
    query = _DEVICE_QUERY.format(index=0, name=name, cuda=cuda, major=int(major), minor=int(minor),
                                 mbytes=nbytes // 2**20, bytes=nbytes, sms=sms, cores=cores_per_sm,
                                 total=sms * cores_per_sm, rated=rated, ghz=rated / 1000, memory=memory, bus=256,
                                 l2=4 * 2**20)
    stamp = datetime.datetime.strptime(date, "%Y-%m-%d").replace(hour=9, minute=41, second=7)
    smi = _SMI_Q.format(stamp=_smi_date(stamp), driver=driver, cuda=cuda,
                        power_cap="Active" if power_capped else "Not Active", now_graphics=current_sm,
                        now_sm=current_sm, memory=memory, video=current_sm * 0.9, app=app, default_app=default_app,
                        max_graphics=max_graphics, max_sm=max_sm, video_max=max_sm * 0.92)
    return {"deviceQuery": query, "nvidia-smi -q": smi}


def t4_clock_tools(power_capped: bool = False) -> dict:
    """A Colab T4 under a matmul load as deviceQuery and nvidia-smi print it (an example, not a reading): 40 SMs, a
    1590 MHz rated boost, 585 MHz default applications clock; power-capped, its SM clock falls to 990 MHz."""
    return clock_tools("Tesla T4", "7.5", 40, 64, 1590, 1590, 1590, 990 if power_capped else 1590, 1590, 585,
                       power_capped=power_capped, driver="550.54.15", cuda="12.4")


def _smi_id(props: object, index: int) -> str:
    """nvidia-smi's ``-i`` for CUDA device ``index``: its UUID, since nvidia-smi numbers GPUs in PCI order and
    ignores CUDA_VISIBLE_DEVICES; the index where torch gives no UUID."""
    uuid = str(getattr(props, "uuid", "") or "")
    if not uuid:
        return str(index)
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def machine_clock_tools(index: int = 0) -> dict | None:
    """This machine's GPU ``index``: deviceQuery's lines rebuilt from the CUDA driver's attributes, and what
    ``nvidia-smi -q -d CLOCK,PERFORMANCE`` prints; None without a GPU or nvidia-smi."""
    import shutil
    import subprocess

    try:
        import torch
    except ImportError:
        return None
    rated = _cuda_clock_mhz(index) if torch.cuda.is_available() else None
    if rated is None or shutil.which("nvidia-smi") is None:
        return None
    props = torch.cuda.get_device_properties(index)
    try:
        done = subprocess.run(["nvidia-smi", "-q", "-d", "CLOCK,PERFORMANCE", "-i", _smi_id(props, index)],
                              capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    cores = {8: 128, 9: 128, 10: 128, 12: 128}.get(props.major, 64)  # deviceQuery's table (_ConvertSMVer2Cores)
    if (props.major, props.minor) == (8, 0):
        cores = 64
    query = _DEVICE_QUERY.format(index=index, name=props.name, cuda=torch.version.cuda, major=props.major,
                                 minor=props.minor, mbytes=props.total_memory // 2**20, bytes=props.total_memory,
                                 sms=props.multi_processor_count, cores=cores,
                                 total=props.multi_processor_count * cores, rated=rated, ghz=rated / 1000, memory=0,
                                 bus=0, l2=getattr(props, "L2_cache_size", 0))
    query = query.replace(" 0 Mhz\n", " n/a\n").replace(" 0-bit\n", " n/a\n")  # not read here: no made-up zeros
    return {"deviceQuery": query, "nvidia-smi -q": done.stdout}


# --------------------------------------------------------------------------- recorded environment reports

#: End of life of some of NVIDIA's data-centre driver branches, as NVIDIA's support documents give them (not every
#: branch: 470, 525, 550 and 570, for example, are missing; R440 was a New Feature Branch, the others listed are
#: long-term support or production branches). Sources: NVIDIA's support matrices (R535, R580, R595, R620):
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
#: The H200 (SXM) has the H100 SXM's 132 SMs and its dense float16 figure, 989 TFLOP/s (H200 datasheet,
#: https://www.nvidia.com/en-us/data-center/h200/: 1,979 with sparsity), so the same 1830 MHz.
HOPPER_TENSOR_CLOCK_MHZ: dict[str, int] = {"NVIDIA H100 80GB HBM3": 1830, "NVIDIA H100 PCIe": 1620,
                                           "NVIDIA H200": 1830}


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
    from gpucourse.nvml import driver_versions

    props = torch.cuda.get_device_properties(index)
    name = props.name
    brand = brand_from_name(name)
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


def _smi_date(stamp: datetime.datetime) -> str:
    """A time as nvidia-smi prints it: a one-digit day padded with a space, as C's asctime does ('Sun Mar  1 ...')."""
    return f"{stamp:%a %b} {stamp.day:2d} {stamp:%H:%M:%S %Y}"


def nvidia_smi_header(name: str, driver: str, cuda: str, date: str = "2026-11-27") -> str:
    """The top of ``nvidia-smi``'s output as a machine prints it: the time, the driver and its CUDA version, a GPU."""
    stamp = datetime.datetime.strptime(date, "%Y-%m-%d").replace(hour=9, minute=41, second=7)
    return _SMI.format(date=_smi_date(stamp), driver=driver, cuda=cuda, name=name[:28])


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


def installed_cuda_compat() -> str:
    """The installed cuda-compat packages as ``dpkg -l`` lists them ('ii' lines only), or '' without dpkg or any."""
    if shutil.which("dpkg") is None:
        return ""
    try:
        done = subprocess.run(["dpkg", "-l", "cuda-compat-*"], capture_output=True, text=True, timeout=30,
                              check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    installed = [line for line in done.stdout.splitlines() if line.startswith("ii ") and "cuda-compat-" in line]
    return "".join(line + "\n" for line in installed)


def brand_from_name(name: str) -> str:
    """'geforce', 'workstation' or 'datacenter', guessed from a GPU's name (NVML's nvmlDeviceGetBrand knows better)."""
    lower = name.lower()
    if "geforce" in lower:
        return "geforce"
    workstation = ("rtx" in lower or "quadro" in lower or "titan" in lower) and "server" not in lower
    return "workstation" if workstation else "datacenter"


def _first_gpu_from_nvidia_smi() -> tuple[str, tuple[int, int]] | None:
    """GPU 0's name and compute capability from ``nvidia-smi --query-gpu`` (None where it cannot say); from NVML
    where the driver is too old (before R510) for nvidia-smi's ``compute_cap``."""
    from gpucourse.nvml import nvidia_smi, read_devices

    rows = (nvidia_smi() or "").splitlines()
    if len(rows) < 2:
        return None
    header = [field.strip() for field in rows[0].split(",")]
    values = dict(zip(header, (field.strip() for field in rows[1].split(","))))
    if not values.get("name"):
        return None
    match = re.fullmatch(r"(\d+)\.(\d+)", values.get("compute_cap", ""))
    if match is not None:
        return values["name"], (int(match.group(1)), int(match.group(2)))
    records = read_devices()
    return (values["name"], tuple(records[0].compute_capability)) if records else None


def _built_arch_list(torch) -> list[str]:
    """The architectures this torch build has code for; unlike ``torch.cuda.get_arch_list()``, also where torch
    cannot use the GPU (that returns [] then). A +cpu build has none."""
    if torch.cuda.is_available():
        return torch.cuda.get_arch_list()
    flags = getattr(torch._C, "_cuda_getArchFlags", lambda: None)()
    return flags.split() if flags else []


def this_machine_outputs() -> dict | None:
    """This machine's tool outputs (nvidia-smi, torch), or None where nvidia-smi finds no GPU; also where torch
    cannot use the GPU, the broken machines Exercise 2 diagnoses."""
    from gpucourse.nvml import nvidia_smi_summary

    try:
        import torch
    except ImportError:
        return None
    smi = nvidia_smi_summary()
    if not smi:
        return None
    if torch.cuda.is_available():
        name, (major, minor) = torch.cuda.get_device_name(0), torch.cuda.get_device_capability(0)
    else:  # torch cannot use the GPU (a driver too old for the wheel, a +cpu wheel): nvidia-smi still names it
        gpu = _first_gpu_from_nvidia_smi()
        if gpu is None:
            return None
        name, (major, minor) = gpu
    brand = brand_from_name(name)
    version = torch.__version__
    base, _, local = version.partition("+")
    if not re.fullmatch(r"cu\d+|cpu", local) and torch.version.cuda:
        # conda ("2.5.1") and NVIDIA's NGC builds ("2.6.0a0+ecf3bae40a.nv25.01") lack pip's +cuXYZ suffix:
        # derived here from torch.version.cuda, the CUDA the build was made with, so it reads as a pip wheel's
        version = f"{base}+cu{torch.version.cuda.replace('.', '')}"
    return {"nvidia-smi": smi, "compute_cap": f"{major}.{minor}\n", "torch.__version__": version,
            "torch.cuda.get_arch_list()": _built_arch_list(torch), "cuda-compat": installed_cuda_compat(),
            "brand": brand}
