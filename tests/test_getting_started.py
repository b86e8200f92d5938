"""gpucourse.getting_started: the fake torch.cuda, the matmul device and the GPU records of lesson 00."""

from __future__ import annotations

import pytest
import torch

from notebook_utils import failure_of_test_cell

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
    assert fake_nvml.extra_used == [0, 0]                               # GPU 1 already had its context and room
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


def test_tool_outputs_print_what_the_tools_print() -> None:
    from gpucourse.getting_started import FIRST_CUDA, nvidia_smi_header, t4_outputs, tool_outputs

    t4 = t4_outputs()
    assert set(t4) == {"nvidia-smi", "compute_cap", "torch.__version__", "torch.cuda.get_arch_list()", "cuda-compat",
                       "brand"}
    lines = t4["nvidia-smi"].splitlines()
    assert lines[0] == "Fri Nov 27 09:41:07 2026" and "Driver Version: 550.54.15" in lines[2]
    assert "CUDA Version: 12.4" in lines[2] and len(lines[2]) == len(lines[1])
    assert t4["compute_cap"] == "7.5\n" and t4["torch.__version__"].endswith("+cu126") and t4["cuda-compat"] == ""
    h100 = tool_outputs("NVIDIA H100 80GB HBM3", "datacenter", "9.0", "535.261.03", "12.2", "2.9.0+cu130",
                        ["sm_90"], compat="13.0", date="2026-07-01")
    assert h100["cuda-compat"].startswith("ii  cuda-compat-13-0  580.65.06-1")
    assert nvidia_smi_header("x", "1.2.3", "12.0", "2026-07-01").startswith("Wed Jul 01")
    assert FIRST_CUDA[(12, 0)] == (12, 8) and FIRST_CUDA[(9, 0)] == (11, 8)
    with pytest.raises(ValueError, match="brand"):
        tool_outputs("x", "laptop", "8.6", "550.54.15", "12.4", "2.4.1+cu124", [])


def test_this_machine_outputs() -> None:
    from gpucourse.getting_started import this_machine_outputs

    mine = this_machine_outputs()
    if not torch.cuda.is_available():
        assert mine is None
    elif mine is not None:
        assert "Driver Version" in mine["nvidia-smi"] and mine["torch.cuda.get_arch_list()"]


def test_simulated_matmul_gpu_runs_at_its_rate_and_queues() -> None:
    from gpucourse.getting_started import SimulatedMatmulGpu, t4_clock_tools

    gpu = SimulatedMatmulGpu(t4_clock_tools(), "float16", 30e12)
    assert "Tesla T4" in gpu.tools["deviceQuery"]
    start = gpu.clock()
    gpu.matmul(4096, "float16")
    queued = gpu.clock()
    gpu.synchronize()
    assert queued - start < 1e-3 and gpu.clock() - start == pytest.approx(2 * 4096**3 / 30e12, rel=3e-3)
    broken = SimulatedMatmulGpu(t4_clock_tools(), "float16", 30e12, broken_sync=True)
    start = broken.clock()
    broken.matmul(4096, "float16")
    broken.synchronize()
    assert broken.clock() - start < 1e-4  # the planted fault: synchronize() does not wait
    noisy = SimulatedMatmulGpu(t4_clock_tools(), "float16", 30e12, p_slow=0.2, p_fast=0.2, seed=3)
    times = []
    for _ in range(200):
        start = noisy.clock()
        noisy.matmul(4096, "float16")
        noisy.synchronize()
        times.append(noisy.clock() - start)
    typical = 2 * 4096**3 / 30e12
    assert min(times) < 0.7 * typical and max(times) > 2.5 * typical  # outliers both ways
    with pytest.raises(ValueError, match="dtype"):
        gpu.matmul(64, "float32")
    with pytest.raises(ValueError, match="dtype"):
        SimulatedMatmulGpu(t4_clock_tools(), "int8", 1e12)
    with pytest.raises(TypeError, match="tools"):
        SimulatedMatmulGpu(None, "float16", 1e12)
    assert TorchMatmul("cpu", report=t4_report()).report["sms"] == 40


def test_clock_tools_print_what_the_tools_print() -> None:
    from gpucourse.getting_started import clock_tools, machine_clock_tools, t4_clock_tools

    t4 = t4_clock_tools()
    assert "GPU Max Clock rate:                            1590 MHz (1.59 GHz)" in t4["deviceQuery"]
    assert "(040) Multiprocessors, (064) CUDA Cores/MP" in t4["deviceQuery"]
    assert "SW Power Cap                      : Not Active" in t4["nvidia-smi -q"]
    capped = t4_clock_tools(power_capped=True)["nvidia-smi -q"]
    assert "SW Power Cap                      : Active" in capped and "SM                                : 990 MHz" in capped
    rtx = clock_tools("NVIDIA GeForce RTX 4090", "8.9", 128, 128, 2520, 3120, 3105, 2745, 2235, 2235)
    assert "Max Clocks\n        Graphics                          : 3105 MHz\n        SM              " \
           "                  : 3120 MHz" in rtx["nvidia-smi -q"]
    with pytest.raises(ValueError, match="sms"):
        clock_tools("x", "8.9", 0, 128, 1, 1, 1, 1, 1, 1)
    if not torch.cuda.is_available():
        assert machine_clock_tools() is None


def test_fake_cuda_renumbers_gpus_like_cuda_visible_devices() -> None:
    nvml = FakeNvml([FakeGpu("NVIDIA A10", (8, 6), 24 * 2**30)] * 3)
    cuda = FakeCuda(nvml, visible=[2, 0])
    assert cuda.device_count() == 2
    assert str(cuda.get_device_properties(0).uuid) == "00000000-0000-0000-0000-000000000002"
    cuda.empty(2**20, "cuda:0")
    assert nvml.extra_used[2] > 0 and nvml.extra_used[0] == 0 and nvml.extra_used[1] == 0
    with pytest.raises(ValueError, match="visible"):
        FakeCuda(nvml, visible=[3])


def test_fake_nvml_finds_a_gpu_by_uuid_and_gives_its_index() -> None:
    fake = FakeNvml([FakeGpu("NVIDIA A10", (8, 6), 2**30, uuid="GPU-aaaa"), FakeGpu("NVIDIA A10", (8, 6), 2**30),
                     FakeGpu("NVIDIA A10", (8, 6), 2**30, uuid="GPU-cccc", unsupported=("nvmlDeviceGetUUID",))])
    fake.nvmlInit()
    try:
        handle = fake.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000001")
        assert handle == fake.nvmlDeviceGetHandleByIndex(1) and fake.nvmlDeviceGetIndex(handle) == 1
        assert fake.nvmlDeviceGetIndex(fake.nvmlDeviceGetHandleByUUID(b"GPU-aaaa")) == 0   # bytes, as old pynvml
        assert fake.nvmlDeviceGetUUID(fake.nvmlDeviceGetHandleByUUID("GPU-aaaa")) == "GPU-aaaa"
        with pytest.raises(fake.NVMLError_NotFound):
            fake.nvmlDeviceGetHandleByUUID("aaaa")          # NVML's UUIDs carry the 'GPU-' prefix
        with pytest.raises(fake.NVMLError):
            fake.nvmlDeviceGetHandleByUUID("GPU-cccc")      # a GPU that cannot report its UUID cannot match one
        with pytest.raises(fake.NVMLError):
            fake.nvmlDeviceGetIndex(("handle", 7))
    finally:
        fake.nvmlShutdown()
    with pytest.raises(fake.NVMLError_Uninitialized):
        fake.nvmlDeviceGetHandleByUUID("GPU-aaaa")


def test_fake_cuda_uuid_finds_the_nvml_gpu_under_cuda_visible_devices() -> None:
    fake = FakeNvml([FakeGpu("NVIDIA A10", (8, 6), 2**30, uuid=f"GPU-{i}{i}{i}") for i in range(3)])
    cuda = FakeCuda(fake, visible=[2, 0])                   # CUDA_VISIBLE_DEVICES=2,0: cuda:0 is NVML's GPU 2
    fake.nvmlInit()
    try:
        handle = fake.nvmlDeviceGetHandleByUUID("GPU-" + str(cuda.get_device_properties(0).uuid))
        assert fake.nvmlDeviceGetIndex(handle) == 2
    finally:
        fake.nvmlShutdown()


def test_simulated_tf32_follows_allow_tf32_unless_overridden() -> None:
    from gpucourse.getting_started import SimulatedMatmulGpu, clock_tools

    tools = clock_tools("NVIDIA A10", "8.6", 72, 128, 1695, 1710, 1725, 1650, 1695, 885)

    def seconds(gpu: SimulatedMatmulGpu) -> float:
        start = gpu.clock()
        gpu.matmul(4096, "float32")
        gpu.synchronize()
        return gpu.clock() - start

    gpu = SimulatedMatmulGpu(tools, "tf32", 40e12, float32_flops_per_s=20e12)
    assert gpu.allow_tf32 is False                                     # PyTorch's default
    assert seconds(gpu) == pytest.approx(2 * 4096**3 / 20e12, rel=3e-3)
    gpu.allow_tf32 = True
    assert seconds(gpu) == pytest.approx(2 * 4096**3 / 40e12, rel=3e-3)
    overridden = SimulatedMatmulGpu(tools, "tf32", 40e12, float32_flops_per_s=20e12, tf32_overridden=True)
    overridden.allow_tf32 = True
    assert seconds(overridden) == pytest.approx(2 * 4096**3 / 20e12, rel=3e-3)  # NVIDIA_TF32_OVERRIDE=0
    with pytest.raises(ValueError, match="float32"):
        gpu.matmul(64, "tf32")
    with pytest.raises(ValueError, match="float32_flops_per_s"):
        SimulatedMatmulGpu(tools, "tf32", 40e12)
    launch_bound = SimulatedMatmulGpu(tools, "float32", 20e12, broken_sync=True, launch_s=1e-3)
    assert seconds(launch_bound) == pytest.approx(1e-3, rel=1e-2)      # the planted fault: only the launch is timed


def test_torch_matmul_float32_runs_with_tf32_off_and_restores_the_flag() -> None:
    device = TorchMatmul("cpu")
    before = torch.backends.cuda.matmul.allow_tf32
    seen = []
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        real_matmul = torch.Tensor.__matmul__

        def spy(a, b):
            seen.append(torch.backends.cuda.matmul.allow_tf32)
            return real_matmul(a, b)

        torch.Tensor.__matmul__ = spy
        try:
            device.matmul(8, "float32")
        finally:
            torch.Tensor.__matmul__ = real_matmul
        assert seen == [False] and torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


_EX1_BY_UUID = '''def gpu_evidence(make, cuda, nvml) -> dict:
    """A correct answer that finds the tensor's NVML GPU with nvmlDeviceGetHandleByUUID (review 4's probe)."""
    tensor_box = []
    allocated_before = [cuda.memory_allocated(i) for i in range(cuda.device_count())]
    used = None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        tensor = make()
    else:
        try:
            handles = None
            try:
                handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(nvml.nvmlDeviceGetCount())]
                before = [nvml.nvmlDeviceGetMemoryInfo(h).used for h in handles]
            except nvml.NVMLError:
                before = None
            tensor = make()
            if tensor.device.type == "cuda" and before is not None:
                try:
                    uuid = "GPU-" + str(cuda.get_device_properties(tensor.device.index).uuid)
                    handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
                    idx = handles.index(handle)
                    used = nvml.nvmlDeviceGetMemoryInfo(handle).used - before[idx]
                except nvml.NVMLError:
                    used = None
        finally:
            nvml.nvmlShutdown()
    if tensor.device.type != "cuda":
        return {"device": str(tensor.device), "allocated_bytes": 0, "device_used_bytes": None, "on_gpu": False}
    index = tensor.device.index
    allocated = cuda.memory_allocated(index) - allocated_before[index]
    return {"device": str(tensor.device), "allocated_bytes": allocated, "device_used_bytes": used, "on_gpu": allocated > 0}
'''


def test_a_correct_exercise_1_answer_by_uuid_passes_the_lessons_tests() -> None:
    """Review 4: pynvml's own UUID lookup must pass lesson 00's Exercise 1 tests (visible and hidden)."""
    from gpucourse import checks

    guards_before = list(checks._ACTIVE_GUARDS)
    assert failure_of_test_cell("00_getting_started", "ex1-solution", _EX1_BY_UUID) is None
    assert checks.active_off_limits() == [(g.helpers, g.exercise) for g in guards_before if g.active]
