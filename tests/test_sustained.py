"""Tests of gpucourse.sustained: the loop's timing, burst vs sustained, the diagnosis from NVML samples (a fake T4
whose clock falls under its power cap, driven by a fake device and timer), the CPU run, and bad input."""

from __future__ import annotations

import json
import sys

import pytest

from gpucourse import nvml, reference, sustained
from gpucourse.monitor import Sampler
from gpucourse.nvml import FakeGpu, FakeNvml

torch = pytest.importorskip("torch")
N = 4096
FLOPS = 2.0 * N**3


class FakeDevice:
    """A device whose GEMMs take FLOPS / rate(now) seconds of a fake clock: the loop and its timer, deterministic."""

    def __init__(self, tflops_at) -> None:
        self.now = 0.0
        self.tflops_at = tflops_at
        self.syncs = 0

    def timer(self) -> float:
        return self.now

    def step(self) -> None:
        self.now += FLOPS / (self.tflops_at(self.now) * 1e12)

    def sync(self) -> None:
        self.syncs += 1


@pytest.fixture
def fake_gpu(monkeypatch):
    """A visible 'cuda' device whose NVML is the fake one given to the returned installer."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: (7, 5))

    def install(fake: FakeNvml) -> FakeNvml:
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return install


def falling(t: float) -> float:
    """25 TFLOP/s for 3 s, then 15: what a power-capped T4's fall looks like in shape (made up)."""
    return 25.0 if t < 3.0 else 15.0


def run_fake(rate, seconds: float = 12.0, **kwargs):
    device = FakeDevice(rate)
    sampler = Sampler("cuda", interval_s=1.0, live=False, background=False)
    result = sustained.run(seconds, "cuda", "float16", N, interval_s=1.0, sampler=sampler, step=device.step,
                           sync=device.sync, timer=device.timer, **kwargs)
    return result, device


def capped_t4(reasons: int = 0x4, samples: int = 14, **extra) -> FakeNvml:
    """The fake T4 trace, with another reason bit (or none) while the clock falls."""
    fake = nvml.t4_power_capped(samples)
    gpu = fake._gpus[0]
    readings = {**gpu.readings, "reasons": [0 if i < 3 else reasons for i in range(samples)], **extra}
    return FakeNvml([FakeGpu(gpu.name, gpu.compute_capability, gpu.memory_bytes, gpu.max_clocks_mhz,
                             gpu.power_limit_mw, readings=readings)], driver="(test)")


def test_a_power_capped_t4_is_diagnosed_as_its_power_cap(fake_gpu):
    fake = fake_gpu(nvml.t4_power_capped(14))
    result, device = run_fake(falling)
    assert result.name == "Tesla T4" and result.dtype == "float16" and result.n == N
    assert 11 <= len(result.intervals) <= 14 and len(result.samples) == len(result.intervals)
    assert all(0.95 < i.seconds < 1.7 for i in result.intervals), "about 1 s each (longer once, when the rate fell)"
    assert result.burst_tflops == pytest.approx(25.0, rel=1e-6)
    assert result.sustained_tflops == pytest.approx(15.0, rel=1e-6)
    assert result.differs and result.drop == pytest.approx(0.4)
    assert result.reason.startswith("power cap in 100% of the samples of the second half")
    assert "SM clock 1590 -> 900 MHz" in result.reason and "drawing 70 of 70 W" in result.reason
    ends, clocks = result.series("gpu_sm_clock")
    assert clocks[:3] == [1590.0] * 3 and clocks[-1] == 900.0 and ends == sorted(ends)
    assert device.syncs == len(result.intervals) + 2, "one wait per interval, plus warm-up and calibration"
    assert "power cap" in result.table() and fake.open == 0
    data = json.loads(json.dumps(result.as_dict()))
    assert data["trace"]["reasons"][:4] == ["", "", "", "power cap"] and data["reason"] == result.reason


def test_a_thermal_slowdown_is_named_thermal(fake_gpu):
    fake_gpu(capped_t4(reasons=0x20, power_mw=50_000))
    result, _ = run_fake(falling)
    assert result.reason.startswith("thermal in 100%") and "too hot" in result.reason and "W" not in result.reason


def test_a_fall_without_a_reason_points_elsewhere(fake_gpu):
    fake_gpu(capped_t4(reasons=0, sm_clock_mhz=1590))
    result, _ = run_fake(falling)
    assert result.differs and result.reason.startswith("no clock-event reason was set (SM clock 1590 -> 1590 MHz)")


def test_a_steady_gpu_needs_no_reason(fake_gpu):
    fake_gpu(nvml.t4_power_capped(14))
    result, _ = run_fake(lambda t: 20.0)
    assert not result.differs and result.reason == "" and result.burst_tflops == pytest.approx(20.0)
    assert "nothing to explain" in result.table()


def test_an_nvml_error_mid_run_leaves_gaps_and_a_note_not_a_crash(fake_gpu):
    lost = nvml.FakeNvml.NVMLError_GpuIsLost("GPU is lost")
    fake_gpu(capped_t4(sm_clock_mhz=[1590, 1590, 1590, 1400, lost, 900]))
    result, _ = run_fake(falling)
    clocks = result.series("gpu_sm_clock")[1]
    assert clocks[4] is None and clocks[5] == 900.0
    assert result.reason.startswith("power cap")
    assert any("nvmlDeviceGetClockInfo failed" in s.note for s in result.samples)


def test_a_gpu_whose_nvml_cannot_be_read_says_so(fake_gpu):
    fake_gpu(FakeNvml([], driver=None))
    result, _ = run_fake(falling)
    assert result.differs and result.reason.startswith("NVML could not be read (see the note)")
    assert any("NVML did not initialise" in note for note in result.notes)


def test_bfloat16_on_a_turing_gpu_is_measured_in_float16_with_a_note(fake_gpu):
    fake_gpu(nvml.t4_power_capped(14))
    device = FakeDevice(lambda t: 20.0)
    result = sustained.run(3.0, "cuda", "bfloat16", N, interval_s=1.0, step=device.step, sync=device.sync,
                           timer=device.timer)
    assert result.dtype == "float16" and "Tensor Cores have no bfloat16" in result.notes[0]


def test_the_cpu_run_is_brief_in_float32_and_shows_the_published_figures(capsys, no_gpu):
    result = sustained.run(seconds=0.3, dtype="float16", n=64, interval_s=0.05)
    assert result.device == "cpu" and result.dtype == "float32" and "emulated" in result.notes[0]
    assert len(result.intervals) >= sustained.MIN_INTERVALS and result.burst_tflops > 0 and result.sustained_tflops > 0
    assert result.series("gpu_sm_clock")[1] == [None] * len(result.intervals)
    if result.differs:
        assert result.reason.startswith("no NVML reading here")
    sustained.report(result)
    out = capsys.readouterr().out
    assert "measured on this machine" in out and "published figures" in out
    assert out.count("Published measurement on ") == len([e for e in reference.PUBLIC if e["topic"] == "sustained"])
    figure = sustained.plot(result)
    assert len(figure.axes) == 3 and "not read here" in figure.axes[1].texts[0].get_text()


def test_the_command_line_writes_json_and_a_plot(tmp_path, capsys, no_gpu):
    out, png = tmp_path / "s.json", tmp_path / "s.png"
    assert sustained.main(["--seconds", "0.2", "--n", "32", "--output", str(out), "--plot", str(png)]) == 0
    data = json.loads(out.read_text())
    assert data["device"] == "cpu" and data["tflops"] and png.stat().st_size > 1000
    assert capsys.readouterr().out.strip().splitlines()[-1].startswith("burst ")


def test_measure_times_each_interval_and_calls_back_after_it():
    device = FakeDevice(lambda t: 10.0)
    ends = []
    intervals = sustained.measure(device.step, device.sync, FLOPS, 5.0, 0.5, device.timer, ends.append)
    assert len(intervals) == len(ends) >= 9
    assert all(i.tflops == pytest.approx(10.0) for i in intervals)
    assert [i.start_s + i.seconds for i in intervals] == pytest.approx([e - ends[0] + intervals[0].seconds
                                                                        for e in ends])


def test_burst_is_the_best_early_interval_and_sustained_the_late_median():
    assert sustained.burst_and_sustained([10, 30, 20, 20, 20, 12, 11, 13, 12, 12]) == (30, 12)
    assert sustained.burst_and_sustained([5.0]) == (5.0, 5.0)
    device = FakeDevice(lambda t: 10.0)
    assert len(sustained.measure(device.step, device.sync, FLOPS, 1e-6, 0.5, device.timer)) == sustained.MIN_INTERVALS
    with pytest.raises(ValueError, match="tflops"):
        sustained.burst_and_sustained([])


@pytest.mark.parametrize("kwargs, error, match", [
    ({"seconds": 0}, ValueError, "seconds"), ({"seconds": -1}, ValueError, "seconds"),
    ({"seconds": "5"}, TypeError, "seconds"), ({"dtype": "int8"}, ValueError, "dtype"),
    ({"dtype": 16}, TypeError, "dtype"), ({"n": 0}, ValueError, "n"), ({"n": 2.5}, TypeError, "n"),
    ({"n": 10**7}, ValueError, r"n=10000000 is too large"), ({"interval_s": 0}, ValueError, "interval_s"),
    ({"device": "tpu"}, ValueError, "device"), ({"sampler": object()}, TypeError, "sampler"),
    ({"sync": lambda: None}, ValueError, "sync"),
], ids=lambda value: str(sorted(value)) if isinstance(value, dict) else None)
def test_bad_input_is_named(kwargs, error, match):
    with pytest.raises(error, match=match):
        sustained.run(**{"seconds": 0.1, "device": "cpu", "n": 16, **kwargs})


def test_report_and_plot_refuse_other_objects():
    for function in (sustained.report, sustained.plot):
        with pytest.raises(TypeError, match="result"):
            function({"burst": 1})


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_real_gpu_sustains_a_measured_figure_with_its_clock_read():
    pytest.importorskip("pynvml")
    result = sustained.run(seconds=4.0, device="cuda", n=2048, interval_s=0.5)
    assert result.burst_tflops > 0.5 and len(result.intervals) >= 6
    assert any(v is not None for v in result.series("gpu_sm_clock")[1])
