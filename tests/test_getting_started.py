"""gpucourse.getting_started: the fake torch.cuda, the matmul device and the GPU records of lesson 00."""

from __future__ import annotations

import pytest
import torch

from gpucourse.getting_started import (DRIVER_BRANCH_END_OF_LIFE, FakeCuda, TorchMatmul, machine_report, report,
                                      t4_report)
from gpucourse.nvml import FakeGpu, FakeNvml


def _two_gpus() -> FakeNvml:
    gpu = FakeGpu("NVIDIA A10", (8, 6), 24 * 2**30, {"sm": 1695, "graphics": 1710, "mem": 6251}, 150_000,
                  readings={"mem_used_bytes": 5 * 2**30})
    return FakeNvml([gpu, gpu])


def test_fake_cuda_counts_allocated_reserved_and_what_nvml_sees() -> None:
    fake_nvml = _two_gpus()
    cuda = FakeCuda(fake_nvml, allocated=[0, 2**20], reserved=[0, 6 * 2**20], current=0)
    tensor = cuda.empty(4 * 2**20 + 1, "cuda:1")
    assert str(tensor.device) == "cuda:1" and tensor.nbytes == 4 * 2**20 + 1
    assert cuda.memory_allocated(1) == 2**20 + 4 * 2**20 + 512      # rounded up to 512-byte blocks
    assert cuda.memory_reserved(torch.device("cuda", 1)) == 6 * 2**20  # the cache had room
    assert cuda.memory_allocated() == 0                                 # the current device is GPU 0
    assert fake_nvml.extra_used == [0, cuda.context_bytes]              # only the CUDA context is new to NVML
    cuda.empty(8 * 2**20, "cuda")                                       # 'cuda' is the current device
    assert cuda.memory_reserved(0) == 8 * 2**20 and fake_nvml.extra_used[0] == cuda.context_bytes + 8 * 2**20
    fake_nvml.nvmlInit()
    used = fake_nvml.nvmlDeviceGetMemoryInfo(fake_nvml.nvmlDeviceGetHandleByIndex(0)).used
    fake_nvml.nvmlShutdown()
    assert used == 5 * 2**30 + cuda.context_bytes + 8 * 2**20


def test_fake_cuda_cpu_tensors_and_bad_devices() -> None:
    cuda = FakeCuda(_two_gpus())
    assert cuda.empty(100, "cpu").device.type == "cpu" and cuda.allocated == [0, 0]
    assert cuda.is_available() and cuda.device_count() == 2 and cuda.current_device() == 0
    cuda.synchronize(1)
    assert cuda.synchronized == 1
    with pytest.raises(RuntimeError, match="Invalid device id"):
        cuda.memory_allocated(2)
    with pytest.raises(ValueError, match="cuda device"):
        cuda.memory_allocated("mps:0")
    with pytest.raises(TypeError):
        cuda.memory_allocated(True)
    with pytest.raises(ValueError, match="nbytes"):
        cuda.empty(0, "cuda:0")
    with pytest.raises(ValueError, match="one value per GPU"):
        FakeCuda(_two_gpus(), allocated=[0])
    with pytest.raises(TypeError, match="FakeNvml"):
        FakeCuda(object())


def test_torch_matmul_on_the_cpu_runs_and_times() -> None:
    device = TorchMatmul("cpu")
    start = device.clock()
    device.matmul(64)
    device.matmul(64)
    device.synchronize()
    assert device.clock() >= start and len(device._matrices) == 1
    with pytest.raises(ValueError, match="dtype"):
        device.matmul(64, "int8")


def test_reports() -> None:
    t4 = t4_report()
    assert t4["sms"] == 40 and t4["clocks"]["rated_boost"] == 1590 and t4["compute_capability"] == (7, 5)
    assert "sm_75" in t4["arch_list"] and t4["brand"] == "datacenter" and t4["compat"] is None
    assert DRIVER_BRANCH_END_OF_LIFE[535] == "2026-06"
    with pytest.raises(ValueError, match="brand"):
        report("x", "laptop", (8, 6), 10, "550.54.15", "12.4", [], t4["clocks"])
    with pytest.raises(TypeError, match="compute_capability"):
        report("x", "geforce", [8, 6], 10, "550.54.15", "12.4", [], t4["clocks"])
    with pytest.raises(ValueError, match="clocks"):
        report("x", "geforce", (8, 6), 10, "550.54.15", "12.4", [], {"base": 1})
    if not torch.cuda.is_available():
        assert machine_report() is None
    else:
        mine = machine_report()
        assert mine is not None and mine["sms"] > 0 and mine["arch_list"]
