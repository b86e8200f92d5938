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
