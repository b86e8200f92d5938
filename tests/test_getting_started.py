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
    # GPU 1 already had its context and its 6 MiB cache, which NVML counts from the start; the allocation fit
    assert fake_nvml.extra_used == [0, cuda.context_bytes + 6 * 2**20]
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
    assert lines[0] == "Fri Nov 27 09:41:07 2026       " and "Driver Version: 550.54.15" in lines[2]
    assert "CUDA Version: 12.4" in lines[2] and len(lines[2]) == len(lines[1])
    assert t4["compute_cap"] == "7.5\n" and t4["torch.__version__"].endswith("+cu126") and t4["cuda-compat"] == ""
    h100 = tool_outputs("NVIDIA H100 80GB HBM3", "datacenter", "9.0", "535.261.03", "12.2", "2.9.0+cu130",
                        ["sm_90"], compat="13.0", date="2026-07-01")
    assert h100["cuda-compat"].startswith("ii  cuda-compat-13-0  580.65.06-1")
    assert nvidia_smi_header("x", "1.2.3", "12.0", "2026-07-01").startswith("Wed Jul  1 ")
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


# What plain `nvidia-smi` prints on an H100 (driver 580), its date line padded with spaces as the tool pads it.
H100_SMI = """Sat Nov 28 00:48:38 2026       
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0     |
+-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
|   0  NVIDIA H100 80GB HBM3          On  |   00000000:00:04.0 Off |                    0 |
| N/A   30C    P0             70W /  700W |       0MiB /  81559MiB |      0%      Default |
|                                         |                        |             Disabled |
+-----------------------------------------+------------------------+----------------------+

+-----------------------------------------------------------------------------------------+
| Processes:                                                                              |
|  GPU   GI   CI              PID   Type   Process name                        GPU Memory |
|        ID   ID                                                               Usage      |
|=========================================================================================|
|  No running processes found                                                             |
+-----------------------------------------------------------------------------------------+
"""


def _fake_h100(monkeypatch) -> list:
    """Make `nvidia-smi` and torch.cuda answer as on an H100 (no GPU needed); returns the commands run."""
    import subprocess

    from gpucourse import nvml

    commands = []

    def run(command, **kwargs):
        commands.append(list(command))
        out = H100_SMI if command == ["nvidia-smi"] else "name, driver_version\nNVIDIA H100 80GB HBM3, 580.159.04\n"
        return subprocess.CompletedProcess(command, 0, stdout=out, stderr="")

    monkeypatch.setattr(nvml.shutil, "which", lambda name: "/usr/bin/nvidia-smi" if name == "nvidia-smi" else None)
    monkeypatch.setattr(nvml.subprocess, "run", run)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=0: (9, 0))
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: "NVIDIA H100 80GB HBM3")
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["sm_80", "sm_90", "sm_100", "sm_120", "compute_120"])
    return commands


def test_this_machine_outputs_gives_plain_nvidia_smi_on_a_gpu(monkeypatch) -> None:
    import datetime
    import re

    from gpucourse.getting_started import this_machine_outputs

    commands = _fake_h100(monkeypatch)
    mine = this_machine_outputs()
    assert commands == [["nvidia-smi"]]                 # plain nvidia-smi, not a --query-gpu CSV
    smi = mine["nvidia-smi"]
    assert re.search(r"Driver Version:\s*([\d.]+)", smi).group(1) == "580.159.04"
    assert re.search(r"CUDA Version:\s*([\d.]+)", smi).group(1) == "13.0"
    first = smi.splitlines()[0]
    assert first.endswith(" ")                           # kept as printed: the padding is the learner's to strip
    assert datetime.datetime.strptime(first.strip(), "%a %b %d %H:%M:%S %Y").month == 11
    assert mine["compute_cap"] == "9.0\n" and mine["brand"] == "datacenter" and "sm_90" in mine[
        "torch.cuda.get_arch_list()"]


def _torch_cannot_use_the_gpu(monkeypatch, arch_flags: str | None) -> None:
    """After _fake_h100: torch.cuda.is_available() is False (old driver, or a +cpu wheel); nvidia-smi still answers."""
    from gpucourse import nvml

    def run(command, **kwargs):
        out = (H100_SMI if command == ["nvidia-smi"] else
               "name, driver_version, compute_cap, memory.total [MiB]\nNVIDIA H100 80GB HBM3, 580.159.04, 9.0, 81559 MiB\n")
        return subprocess.CompletedProcess(command, 0, stdout=out, stderr="")

    import subprocess

    monkeypatch.setattr(nvml.subprocess, "run", run)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=0: pytest.fail("torch cannot ask the GPU"))
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: [])  # what torch returns when CUDA is not available
    monkeypatch.setattr(torch._C, "_cuda_getArchFlags", lambda: arch_flags, raising=False)


@pytest.mark.parametrize(("version", "arch_flags", "expected_rule"), [
    ("2.9.0+cu130", "sm_75 sm_80 sm_90 sm_100 sm_120 compute_120", None),   # a CUDA build torch cannot use: still read
    ("2.9.0+cpu", None, "arch")])                                           # a +cpu wheel on a GPU machine
def test_this_machine_outputs_reads_the_gpu_from_nvidia_smi_when_torch_cannot_use_it(
        monkeypatch, version: str, arch_flags: str | None, expected_rule: str | None) -> None:
    """Review r10: the broken machines section 4 teaches about must get a verdict, not 'no GPU here'."""
    from gpucourse.getting_started import this_machine_outputs

    _fake_h100(monkeypatch)
    _torch_cannot_use_the_gpu(monkeypatch, arch_flags)
    monkeypatch.setattr(torch, "__version__", version)
    mine = this_machine_outputs()
    assert mine is not None and mine["compute_cap"] == "9.0\n" and mine["brand"] == "datacenter"
    assert mine["torch.cuda.get_arch_list()"] == (arch_flags.split() if arch_flags else [])
    assert "Driver Version" in mine["nvidia-smi"]
    assert _model_diagnose()(mine)["rule"] == expected_rule


def _model_diagnose():
    """Lesson 00's model answer of Exercise 2, run from the solution notebook after its imports cell."""
    from notebook_utils import cell_by_grade_id, load, solution_path, source

    notebook = load(solution_path("00_getting_started"))
    names: dict = {}
    exec(next(source(c) for c in notebook["cells"] if "# Lesson imports" in source(c)), names)
    exec(source(cell_by_grade_id(notebook, "ex2-solution")), names)
    return names["diagnose"]


@pytest.mark.parametrize(("version", "cuda", "expected"), [
    ("2.5.1", "12.4", "2.5.1+cu124"),                                  # conda-forge: no local suffix
    ("2.6.0a0+ecf3bae40a.nv25.01", "12.8", "2.6.0a0+cu128"),           # NVIDIA's NGC container
    ("2.8.0+cu126", "12.6", "2.8.0+cu126"),                            # pip's wheel: kept as it is
    ("2.9.0+cu130", "13.0", "2.9.0+cu130")])
def test_this_machine_outputs_derives_the_cuda_suffix_when_the_build_has_none(monkeypatch, version: str, cuda: str,
                                                                              expected: str) -> None:
    from gpucourse.getting_started import this_machine_outputs

    _fake_h100(monkeypatch)
    monkeypatch.setattr(torch, "__version__", version)
    monkeypatch.setattr(torch.version, "cuda", cuda)
    local = this_machine_outputs()["torch.__version__"].partition("+")[2]
    assert this_machine_outputs()["torch.__version__"] == expected
    assert (int(local[2:-1]), int(local[-1])) == tuple(int(part) for part in cuda.split("."))


def test_installed_cuda_compat_keeps_installed_packages_only(monkeypatch) -> None:
    import shutil
    import subprocess

    from gpucourse import getting_started

    listing = ("Desired=Unknown/Install/Remove/Purge/Hold\n"
               "||/ Name              Version       Architecture Description\n"
               "+++-=================-=============-============-=====================================\n"
               "ii  cuda-compat-12-8  570.124.06-1  amd64        CUDA Compatibility Platform\n"
               "rc  cuda-compat-12-4  550.54.15-1   amd64        CUDA Compatibility Platform\n")
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/dpkg" if name == "dpkg" else None)
    monkeypatch.setattr(subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(
        command, 0, stdout=listing, stderr=""))
    assert getting_started.installed_cuda_compat() == (
        "ii  cuda-compat-12-8  570.124.06-1  amd64        CUDA Compatibility Platform\n")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert getting_started.installed_cuda_compat() == ""


def test_nvidia_smi_summary_is_none_when_the_command_fails(monkeypatch) -> None:
    import subprocess

    from gpucourse import nvml

    monkeypatch.setattr(nvml.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(nvml.subprocess, "run", lambda command, **kwargs: subprocess.CompletedProcess(
        command, 9, stdout="NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"))
    assert nvml.nvidia_smi_summary() is None
    monkeypatch.setattr(nvml.shutil, "which", lambda name: None)
    assert nvml.nvidia_smi_summary() is None


def test_the_fake_nvidia_smi_pads_its_date_line_as_the_tool_does() -> None:
    from gpucourse.getting_started import clock_tools, nvidia_smi_header

    first = nvidia_smi_header("Tesla T4", "550.54.15", "12.4").splitlines()[0]
    assert first != first.rstrip() and first.rstrip() == H100_SMI.splitlines()[0].rstrip().replace(
        "Sat Nov 28 00:48:38", "Fri Nov 27 09:41:07")
    # a one-digit day is padded with a space, as the real tool prints 'Sat Mar  4 17:10:27 2023'
    assert nvidia_smi_header("Tesla T4", "550.54.15", "12.4", "2026-03-01").splitlines()[0].rstrip() == (
        "Sun Mar  1 09:41:07 2026")
    assert "Timestamp                                 : Wed Mar  4 09:41:07 2026" in clock_tools(
        "Tesla T4", "7.5", 40, 64, 1590, 1605, 1620, 1590, 1590, 585, date="2026-03-04")["nvidia-smi -q"]


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


R470_SMI = H100_SMI.replace("NVIDIA-SMI 580.159.04             Driver Version: 580.159.04     CUDA Version: 13.0",
                            "NVIDIA-SMI 470.82.01              Driver Version: 470.82.01      CUDA Version: 11.4").replace(
    "NVIDIA H100 80GB HBM3         ", "NVIDIA GeForce RTX 3060 Laptop")


def test_this_machine_outputs_reads_compute_capability_from_nvml_on_a_driver_before_r510(monkeypatch) -> None:
    """Review r11: R470's nvidia-smi refuses a query naming compute_cap; the laptop of section 4 still gets a verdict."""
    import subprocess
    import sys

    from gpucourse import nvml
    from gpucourse.getting_started import this_machine_outputs

    _fake_h100(monkeypatch)
    _torch_cannot_use_the_gpu(monkeypatch, "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90")
    queries = []

    def run(command, **kwargs):
        if command == ["nvidia-smi"]:
            return subprocess.CompletedProcess(command, 0, stdout=R470_SMI, stderr="")
        queries.append(command[1])
        if "compute_cap" in command[1]:
            return subprocess.CompletedProcess(command, 2, stdout='Field "compute_cap" is not a valid field to query.\n',
                                               stderr="")
        return subprocess.CompletedProcess(command, 0, stdout="name, driver_version\n"
                                           "NVIDIA GeForce RTX 3060 Laptop GPU, 470.82.01\n", stderr="")

    monkeypatch.setattr(nvml.subprocess, "run", run)
    laptop = nvml.FakeGpu("NVIDIA GeForce RTX 3060 Laptop GPU", (8, 6), 6 * 2**30, {"sm": 2100, "graphics": 2100},
                          80_000, unsupported=("nvmlDeviceGetPowerManagementLimit",))  # review r12: laptops refuse it
    monkeypatch.setitem(sys.modules, "pynvml", nvml.FakeNvml([laptop], driver="470.82.01"))  # the real read_devices
    monkeypatch.setattr(torch, "__version__", "2.1.2+cu121")
    assert nvml.nvidia_smi() == "name, driver_version\nNVIDIA GeForce RTX 3060 Laptop GPU, 470.82.01"
    assert queries[-1].count(",") == len(nvml.NVIDIA_SMI_QUERY) - 2 and "compute_cap" not in queries[-1]
    mine = this_machine_outputs()
    assert mine is not None and mine["compute_cap"] == "8.6\n" and mine["brand"] == "geforce"
    assert _model_diagnose()(mine)["rule"] == "driver"


def test_nvidia_smi_gives_up_when_the_query_fails_for_another_reason(monkeypatch) -> None:
    import subprocess

    from gpucourse import nvml

    monkeypatch.setattr(nvml.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    calls = []
    monkeypatch.setattr(nvml.subprocess, "run", lambda command, **kwargs: calls.append(command) or
                        subprocess.CompletedProcess(command, 6, stdout="No devices were found\n", stderr=""))
    assert nvml.nvidia_smi() is None and len(calls) == 1


@pytest.mark.parametrize(("uuid", "expected"), [("2392e3f6-2966-aaed-8d49-d8e16dc71e53",
                                                  "GPU-2392e3f6-2966-aaed-8d49-d8e16dc71e53"),
                                                 ("MIG-5c1d-77", "MIG-5c1d-77"), ("", "3")])
def test_nvidia_smi_is_asked_for_the_gpu_by_uuid(uuid: str, expected: str) -> None:
    """Review r13: nvidia-smi -i counts GPUs in PCI order, whatever CUDA_VISIBLE_DEVICES says."""
    from types import SimpleNamespace

    from gpucourse.getting_started import _smi_id

    assert _smi_id(SimpleNamespace(uuid=uuid), 3) == expected
