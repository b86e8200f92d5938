"""Stand-ins and readers for lesson 00_getting_started: a fake ``torch.cuda`` whose allocations NVML sees
(:class:`FakeCuda`), a device that times real matmuls with the simulated GPU's interface (:class:`TorchMatmul`), and
GPU records for the peak (:func:`gpu_record` for a real GPU, :func:`t4_record` from the T4's datasheet).
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

    def __init__(self, device: object = "cpu") -> None:
        import torch

        self.device = torch.device(device)
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


def gpu_record(index: int = 0) -> dict | None:
    """A real GPU's record for its peak (name, compute capability, SMs, clocks in MHz, GeForce or not), from torch
    and NVML; None without a CUDA GPU."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(index)
    record = {"name": props.name, "compute_capability": (props.major, props.minor),
              "sms": props.multi_processor_count, "base_clock_mhz": None, "max_sm_clock_mhz": None,
              "max_graphics_clock_mhz": None, "max_memory_clock_mhz": None}
    with contextlib.suppress(NvmlUnavailable), open_nvml() as session:
        module = session.module
        handle = module.nvmlDeviceGetHandleByIndex(gpu_index(session, torch.device("cuda", index)))
        for key, clock in (("max_sm_clock_mhz", "NVML_CLOCK_SM"), ("max_graphics_clock_mhz", "NVML_CLOCK_GRAPHICS"),
                           ("max_memory_clock_mhz", "NVML_CLOCK_MEM")):
            record[key], _ = session.query("nvmlDeviceGetMaxClockInfo", handle, getattr(module, clock))
        record["base_clock_mhz"], _ = session.query("nvmlDeviceGetDefaultApplicationsClock", handle,
                                                    module.NVML_CLOCK_SM)
    return record


def t4_record() -> dict:
    """The T4 as spec databases list it (40 SMs, 585 MHz base, 1590 MHz boost), e.g.
    https://sysrqmts.com/en/gpus/nvidia/tesla/t4: not a reading."""
    return {"name": "Tesla T4 (spec sheet, not a reading)", "compute_capability": (7, 5), "sms": 40,
            "base_clock_mhz": 585, "max_sm_clock_mhz": 1590, "max_graphics_clock_mhz": 1590,
            "max_memory_clock_mhz": 5001}
