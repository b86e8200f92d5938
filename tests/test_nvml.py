"""Tests of gpucourse.nvml: the NVML reader, the derived peak and the fake NVML of lesson 00_getting_started."""

from __future__ import annotations

import pytest

from gpucourse import nvml
from gpucourse.hardware import GPU_SPECS
from gpucourse.nvml import FakeGpu, FakeNvml, derived_peak, read_devices

A100 = FakeGpu("NVIDIA A100-SXM4-80GB", (8, 0), 80 * 2**30, {"sm": 1410, "graphics": 1410, "mem": 1593}, 400_000,
               name_as_bytes=True)


def test_read_devices_converts_units_and_shuts_nvml_down() -> None:
    fake = FakeNvml([A100, A100], driver="535.104.05")
    records = read_devices(fake)
    assert [r.name for r in records] == ["NVIDIA A100-SXM4-80GB"] * 2
    first = records[0]
    assert (first.driver, first.compute_capability, first.memory_gib, first.max_sm_clock_mhz, first.power_limit_w) == (
        "535.104.05", (8, 0), 80.0, 1410.0, 400.0)
    assert first.sms is None and fake.open == 0


@pytest.mark.parametrize(("unsupported", "power", "row_power"), [
    (("nvmlDeviceGetPowerManagementLimit",), 80.0, "80"),       # a laptop GPU: the enforced limit still answers
    (("nvmlDeviceGetPowerManagementLimit", "nvmlDeviceGetEnforcedPowerLimit", "nvmlDeviceGetMaxClockInfo"), None,
     "n/a")])
def test_read_devices_survives_queries_a_laptop_gpu_refuses(unsupported, power, row_power) -> None:
    """Review r12: NVML_ERROR_NOT_SUPPORTED from the power limit (RTX 4080 Mobile) must not stop the table."""
    laptop = FakeGpu("NVIDIA GeForce RTX 3060 Laptop GPU", (8, 6), 6 * 2**30, {"sm": 2100, "graphics": 2100,
                     "mem": 7001}, 80_000, unsupported=unsupported)
    fake = FakeNvml([laptop], driver="470.82.01")
    record = read_devices(fake)[0]
    assert record.power_limit_w == power and fake.open == 0
    assert record.table_row()[-1] == row_power and record.table_row()[2] == "8.6"
    if record.max_sm_clock_mhz is None:
        with pytest.raises(ValueError, match="max_sm_clock_mhz"):
            nvml.DeviceRecord(**{**record.as_dict(), "sms": 30}).peak_flops()


def test_without_a_driver_there_are_no_records() -> None:
    assert read_devices(FakeNvml([], driver=None)) == []


def test_this_machine_reads_without_error() -> None:
    assert isinstance(read_devices(), list)


@pytest.mark.parametrize("name", ["T4", "V100", "A100-80GB", "L4"])
def test_derived_peaks_match_the_datasheets(name: str) -> None:
    spec = GPU_SPECS[name]
    capability = {"T4": (7, 5), "V100": (7, 0), "A100-80GB": (8, 0), "L4": (8, 9)}[name]
    clock_mhz = spec.boost_clock_ghz * 1000
    assert derived_peak(capability, spec.sms, clock_mhz, "float16") == pytest.approx(spec.peak_flops("float16"),
                                                                                      rel=0.01)
    assert derived_peak(capability, spec.sms, clock_mhz, "float32") == pytest.approx(spec.peak_flops("float32"),
                                                                                      rel=0.01)


def test_hopper_rate_gives_the_datasheet_peak_at_1830_mhz() -> None:
    assert derived_peak((9, 0), 132, 1830, "float16") == pytest.approx(GPU_SPECS["H100"].peak_flops("float16"), rel=1e-3)


def test_bad_arguments_name_the_argument() -> None:
    with pytest.raises(ValueError, match="capability"):
        derived_peak((6, 1), 20, 1500)
    with pytest.raises(TypeError, match="capability"):
        derived_peak("8.0", 20, 1500)
    with pytest.raises(ValueError, match="dtype"):
        derived_peak((8, 0), 20, 1500, "bfloat17")
    with pytest.raises(ValueError, match="sms"):
        derived_peak((8, 0), 0, 1500)


def test_record_peak_needs_sms() -> None:
    record = read_devices(nvml.t4_example())[0]
    with pytest.raises(ValueError, match="sms"):
        record.peak_flops()


def test_t4_example_is_the_datasheet_t4() -> None:
    record = read_devices(nvml.t4_example())[0]
    assert record.compute_capability == (7, 5) and record.power_limit_w == 70 and record.max_sm_clock_mhz == 1590


def test_fake_refuses_calls_before_init_and_bad_handles() -> None:
    fake = FakeNvml([A100])
    with pytest.raises(fake.NVMLError):
        fake.nvmlDeviceGetCount()
    fake.nvmlInit()
    with pytest.raises(fake.NVMLError):
        fake.nvmlDeviceGetHandleByIndex(1)
    with pytest.raises(TypeError, match=r"gpus\[0\]"):
        FakeNvml(["T4"])


def test_runtime_evidence_on_this_machine_has_every_key() -> None:
    evidence = nvml.runtime_evidence()
    assert set(evidence) == {"gpus", "driver_cuda", "torch_cuda", "cuda_visible_devices", "cuda_available",
                             "tensor_devices", "gpu_processes", "pid"}


def test_nvidia_smi_is_none_or_csv() -> None:
    answer = nvml.nvidia_smi()
    assert answer is None or answer.startswith("name")


# --------------------------------------------------------------------------- one way to open NVML

def test_a_session_opens_and_shuts_nvml_down_once(monkeypatch):
    fake = FakeNvml([A100])
    with nvml.NvmlSession(fake) as session:
        assert fake.open == 1 and session.is_open
        assert session.query("nvmlDeviceGetCount") == (1, "")
    assert fake.open == 0 and not session.is_open
    session.close()  # closing twice is harmless
    with nvml.open_nvml(fake):
        pass
    assert fake.open == 0


def test_open_nvml_shuts_down_when_the_block_raises():
    fake = FakeNvml([A100])
    with pytest.raises(KeyError):
        with nvml.open_nvml(fake):
            raise KeyError("inside")
    assert fake.open == 0


def test_no_pynvml_and_no_driver_give_clear_messages(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    with pytest.raises(nvml.NvmlUnavailable, match="nvidia-ml-py .no module pynvml.: pip install nvidia-ml-py"):
        nvml.NvmlSession().open()
    assert read_devices() == [] and nvml.runtime_evidence()["gpus"] == []
    with pytest.raises(nvml.NvmlUnavailable, match=r"NVML did not initialise \(nvmlInit: FakeNvmlDriverNotLoaded"):
        nvml.NvmlSession(FakeNvml([A100], driver=None)).open()


def test_queries_map_errors_to_notes_naming_the_query():
    gpu = FakeGpu("G", (8, 0), 2**30, {"sm": 1, "graphics": 1, "mem": 1}, 1000,
                  unsupported=("nvmlDeviceGetPowerUsage",), readings={"temperature_c": [50, ValueError("x")]})
    with nvml.open_nvml(FakeNvml([gpu])) as session:
        handle = session.module.nvmlDeviceGetHandleByIndex(0)
        assert session.query("nvmlDeviceGetPowerUsage", handle) == (None, "nvmlDeviceGetPowerUsage: not supported "
                                                                          "by this GPU")
        assert session.query("nvmlDeviceGetNothing", handle) == (None, "nvmlDeviceGetNothing: not in this "
                                                                       "nvidia-ml-py release")
        value, note = session.query("nvmlDeviceGetHandleByIndex", 5)
        assert value is None and note.startswith("nvmlDeviceGetHandleByIndex failed (FakeNvmlError: invalid device")
        assert session.query("nvmlDeviceGetTemperature", handle, 0) == (50, "")
        with pytest.raises(ValueError):  # only NVML's own errors become notes; a bug still shows
            session.query("nvmlDeviceGetTemperature", handle, 0)


@pytest.mark.parametrize("api, name", [("both", "nvmlDeviceGetCurrentClocksEventReasons"),
                                       ("events", "nvmlDeviceGetCurrentClocksEventReasons"),
                                       ("throttle", "nvmlDeviceGetCurrentClocksThrottleReasons")])
def test_the_reasons_query_has_either_name(api, name):
    fake = FakeNvml([A100], reasons_api=api)
    with nvml.open_nvml(fake) as session:
        assert session.reasons_query() == name
        assert getattr(fake, name)(fake.nvmlDeviceGetHandleByIndex(0)) == 0
    assert hasattr(fake, "nvmlDeviceGetCurrentClocksThrottleReasons") == (api != "events")
    with pytest.raises(ValueError, match="reasons_api"):
        FakeNvml([A100], reasons_api="newest")


# --------------------------------------------------------------------------- the fake, scripted over time

def test_the_fake_plays_a_script_one_value_per_call_and_repeats_the_last():
    gpu = FakeGpu("G", (7, 5), 16 * 2**30, {"sm": 1590, "graphics": 1590, "mem": 5001}, 70_000,
                  readings={"sm_clock_mhz": [1590, 1200, 900], "gpu_util": 99, "mem_used_bytes": 2**30},
                  uuid="GPU-abc", processes=(11, 12))
    fake = FakeNvml([gpu])
    fake.nvmlInit()
    handle = fake.nvmlDeviceGetHandleByIndex(0)
    clocks = [fake.nvmlDeviceGetClockInfo(handle, fake.NVML_CLOCK_SM) for _ in range(5)]
    assert clocks == [1590, 1200, 900, 900, 900]
    assert fake.nvmlDeviceGetClockInfo(handle, fake.NVML_CLOCK_MEM) == 5001, "unscripted: the maximum"
    assert fake.nvmlDeviceGetUtilizationRates(handle).gpu == 99
    memory = fake.nvmlDeviceGetMemoryInfo(handle)
    assert (memory.used, memory.free) == (2**30, 15 * 2**30)
    assert fake.nvmlDeviceGetUUID(handle) == "GPU-abc" and fake.nvmlSystemGetCudaDriverVersion() == 12040
    assert [p.pid for p in fake.nvmlDeviceGetComputeRunningProcesses(handle)] == [11, 12]
    assert fake.nvmlDeviceGetTemperature(handle, fake.NVML_TEMPERATURE_GPU) == 40
    with pytest.raises(fake.NVMLError_NotSupported):
        _unsupported_temperature()
    with pytest.raises(ValueError, match="readings: unknown keys"):
        FakeGpu("G", (7, 5), 1, readings={"clock": 1})


def _unsupported_temperature() -> None:
    fake = FakeNvml([FakeGpu("G", (7, 5), 1, unsupported=("nvmlDeviceGetTemperature",))])
    fake.nvmlInit()
    fake.nvmlDeviceGetTemperature(fake.nvmlDeviceGetHandleByIndex(0), 0)


def test_the_power_capped_t4_falls_from_1590_to_900_mhz_with_the_power_cap_bit():
    fake = nvml.t4_power_capped(12)
    with nvml.open_nvml(fake) as session:
        handle = session.module.nvmlDeviceGetHandleByIndex(0)
        trace = [(fake.nvmlDeviceGetClockInfo(handle, fake.NVML_CLOCK_SM),
                  fake.nvmlDeviceGetCurrentClocksEventReasons(handle),
                  fake.nvmlDeviceGetPowerUsage(handle)) for _ in range(12)]
    assert trace[0] == (1590, 0, 58_000) and trace[-1] == (900, 0x4, 70_000)
    clocks = [clock for clock, _, _ in trace]
    assert clocks == sorted(clocks, reverse=True)
    with pytest.raises(ValueError, match="samples"):
        nvml.t4_power_capped(0)


def test_runtime_evidence_reads_the_fake_as_pynvml(monkeypatch):
    import sys

    gpu = FakeGpu("Tesla T4", (7, 5), 16 * 2**30, {"sm": 1590, "graphics": 1590, "mem": 5001}, 70_000,
                  processes=(4242,))
    fake = FakeNvml([gpu], cuda_driver=12020)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    evidence = nvml.runtime_evidence()
    assert evidence["gpus"] == ["Tesla T4"] and evidence["driver_cuda"] == "12.2"
    assert evidence["gpu_processes"] == [4242] and fake.open == 0


def test_driver_versions_read_through_one_session_and_shut_it_down():
    fake = FakeNvml([A100], driver="550.54.15", cuda_driver=12040)
    assert nvml.driver_versions(fake) == ("550.54.15", "12.4") and fake.open == 0
    assert nvml.driver_versions(FakeNvml([], driver=None)) == (None, None)


def test_driver_versions_without_pynvml_are_none(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pynvml", None)
    assert nvml.driver_versions() == (None, None)


def test_gpu_index_matches_by_uuid_and_falls_back_to_the_cuda_index(monkeypatch):
    torch = pytest.importorskip("torch")
    fake = FakeNvml([A100, FakeGpu("B", (8, 0), 1, uuid="GPU-1234")])
    with nvml.open_nvml(fake) as session:
        assert nvml.gpu_index(session, torch.device("cuda", 0)) == 0  # no CUDA here: the CUDA index
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: type("P", (), {"uuid": "1234"})())
        assert nvml.gpu_index(session, torch.device("cuda", 0)) == 1, "CUDA's GPU 0 is NVML's GPU 1"


def test_read_devices_matches_torch_sm_counts_by_uuid(monkeypatch) -> None:
    """Review r14: CUDA orders GPUs (and CUDA_VISIBLE_DEVICES hides some) unlike NVML: SM counts go by UUID."""
    h100 = FakeGpu("NVIDIA H100 80GB HBM3", (9, 0), 80 * 2**30, {"sm": 1980, "graphics": 1980, "mem": 2619}, 700_000,
                   uuid="GPU-aaaaaaaa-0000-0000-0000-000000000001")
    l4 = FakeGpu("NVIDIA L4", (8, 9), 24 * 2**30, {"sm": 2040, "graphics": 2040, "mem": 6251}, 72_000,
                 uuid="GPU-bbbbbbbb-0000-0000-0000-000000000002")
    hidden = FakeGpu("NVIDIA L4", (8, 9), 24 * 2**30, {"sm": 2040, "graphics": 2040, "mem": 6251}, 72_000,
                     uuid="GPU-cccccccc-0000-0000-0000-000000000003")
    # torch (CUDA's order, fastest first) sees the H100 first, the L4 second, and not the third GPU at all
    monkeypatch.setattr(nvml, "_sm_counts", lambda: {"aaaaaaaa-0000-0000-0000-000000000001": 132,
                                                     "bbbbbbbb-0000-0000-0000-000000000002": 58})
    monkeypatch.setattr(nvml, "_is_module", lambda value: True)
    records = read_devices(FakeNvml([l4, hidden, h100]))
    assert [(r.name, r.sms) for r in records] == [("NVIDIA L4", 58), ("NVIDIA L4", None),
                                                  ("NVIDIA H100 80GB HBM3", 132)]
