"""Tests of gpucourse.monitor: snapshots (psutil on the CPU, NVML on a GPU), the background sampler (starts, stops,
leaks no thread, reports its errors), summaries, and bad input."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time

import pytest

from gpucourse import monitor
from gpucourse.monitor import CPU_METRICS, NVML_METRICS, Metric, Sampler, Snapshot, snapshot, summarise

torch = pytest.importorskip("torch")
HAS_CUDA = torch.cuda.is_available()


def monitor_threads() -> list[threading.Thread]:
    """Sampler threads still alive."""
    return [t for t in threading.enumerate() if t.name == "gpucourse-monitor"]


def busy(seconds: float) -> None:
    """Keep this thread busy for a while (something to monitor)."""
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(1000))


# --------------------------------------------------------------------------- snapshots

def test_cpu_snapshot_has_host_metrics_with_sources_and_says_what_a_gpu_adds(no_gpu):
    snap = snapshot(cpu_interval_s=0.05)
    assert snap.device == "cpu" and snap.name == "CPU"
    assert [m.key for m in snap.metrics] == list(CPU_METRICS)
    assert all(m.source.startswith("psutil") for m in snap.metrics)
    assert not any(key in snap for key in NVML_METRICS)
    assert 0.0 <= (snap.value("cpu_util") or 0.0) <= 100.0
    assert (snap.value("process_cpu") or 0.0) >= 0.0
    assert 0 < snap.value("ram_used") <= snap.value("ram_total")
    assert 0 < snap.value("process_rss") <= snap.value("ram_total")
    assert "NVML" in snap.note and "power" in snap.note and "temperature" in snap.note
    table = snap.table()
    assert "psutil.cpu_times" in table and "NVML" in table
    assert snap.line().startswith("CPU ") and "RAM" in snap.line()


@pytest.mark.parametrize("device", ["cpu", torch.device("cpu")], ids=repr)
def test_snapshot_accepts_str_and_torch_device(device):
    assert snapshot(device, cpu_interval_s=0.01).device == "cpu"


@pytest.mark.parametrize("device, error", [(3, TypeError), (1.5, TypeError), (["cpu"], TypeError),
                                           ("tpu", ValueError), ("", ValueError)], ids=repr)
def test_snapshot_rejects_bad_devices(device, error):
    with pytest.raises(error, match="device"):
        snapshot(device, cpu_interval_s=0.01)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", torch.device("cuda:1")], ids=repr)
def test_snapshot_of_an_absent_gpu_names_the_problem(no_gpu, device):
    with pytest.raises(ValueError, match="no CUDA GPU is visible"):
        snapshot(device)


@pytest.mark.parametrize("interval, error", [(0, ValueError), (-1, ValueError), (float("nan"), ValueError),
                                             ("0.1", TypeError), (None, TypeError)], ids=repr)
def test_snapshot_rejects_bad_intervals(interval, error):
    with pytest.raises(error, match="cpu_interval_s"):
        snapshot("cpu", cpu_interval_s=interval)


def test_snapshot_lookup_and_formatting():
    metrics = (Metric("cpu_util", "CPU", 12.3, "%", "psutil.cpu_times"),
               Metric("process_cpu", "this process", None, "%", "psutil.Process.cpu_times"),
               Metric("ram_used", "RAM used", 1.234, "GiB", "psutil"), Metric("ram_total", "RAM total", 8.0, "GiB", "psutil"))
    snap = Snapshot("cpu", "CPU", 0.0, metrics)
    assert snap["cpu_util"].formatted() == "12 %" and snap["ram_used"].formatted() == "1.23 GiB"
    assert snap["process_cpu"].formatted() == "n/a" and snap.value("process_cpu") is None
    assert snap.line() == "CPU 12 % (this process n/a) | RAM 1.2/8.0 GiB"
    with pytest.raises(KeyError, match="gpu_util"):
        snap["gpu_util"]


def test_a_gpu_without_nvml_still_reports_the_host(monkeypatch):
    """No nvidia-ml-py (or a driver NVML cannot read): the report says so and shows the host's metrics."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setitem(sys.modules, "pynvml", None)  # `import pynvml` raises ImportError
    snap = snapshot("cuda", cpu_interval_s=0.01)
    assert [m.key for m in snap.metrics] == list(CPU_METRICS)
    assert "nvidia-ml-py" in snap.note and "pynvml" in snap.note and "host metrics only" in snap.name


def test_nvml_available_is_a_bool_and_false_without_a_driver():
    available = monitor.nvml_available()
    assert isinstance(available, bool)
    if not HAS_CUDA:
        assert available is False


def test_cpu_load_is_a_percentage():
    load = monitor._CpuLoad()
    busy(0.05)
    value = load.percent()
    assert value is None or 0.0 <= value <= 100.0


def test_importing_monitor_stays_light():
    """`import gpucourse.monitor` loads neither torch nor NVML: they are imported when a device is asked for."""
    code = "import sys, gpucourse.monitor; print(sorted({'torch', 'pynvml', 'tensorflow'} & set(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


# --------------------------------------------------------------------------- the sampler

def test_sampler_samples_while_code_runs_and_stops_cleanly():
    out = io.StringIO()
    before = len(monitor_threads())
    with Sampler("cpu", interval_s=0.05, live=True, file=out) as sampler:
        assert sampler.running and len(monitor_threads()) == before + 1
        busy(0.4)
    assert not sampler.running and len(monitor_threads()) == before
    assert len(sampler.samples) >= 3
    times = [s.time_s for s in sampler.samples]
    assert times == sorted(times)
    assert "[monitor" in out.getvalue() and "CPU" in out.getvalue()
    seconds, values = sampler.series("process_cpu")
    assert seconds[0] == 0.0 and len(values) == len(sampler.samples)
    assert max(v for v in values if v is not None) > 5.0  # the busy loop above kept this process busy


def test_sampler_without_live_readout_writes_nothing(capsys):
    with Sampler("cpu", interval_s=0.05, live=False) as sampler:
        time.sleep(0.15)
    assert sampler.samples and capsys.readouterr().out == ""


def test_sampler_stops_when_the_block_raises():
    before = len(monitor_threads())
    with pytest.raises(ZeroDivisionError):
        with Sampler("cpu", interval_s=0.05, live=False) as sampler:
            time.sleep(0.06)
            1 / 0
    assert not sampler.running and len(monitor_threads()) == before
    assert sampler.samples


def test_a_short_block_still_gets_one_sample():
    with Sampler("cpu", interval_s=5.0, live=False) as sampler:
        pass
    assert len(sampler.samples) == 1


def test_sampler_start_stop_methods_and_double_start():
    sampler = Sampler("cpu", interval_s=0.05, live=False)
    assert sampler.stop() is sampler  # stopping a sampler that never started is harmless
    sampler.start()
    try:
        with pytest.raises(RuntimeError, match="already running"):
            sampler.start()
    finally:
        sampler.stop()
    assert not sampler.running


def test_sampler_reports_a_failure_in_its_thread(monkeypatch):
    sampler = Sampler("cpu", interval_s=0.02, live=False)
    sampler.start()

    def broken(time_s=None):
        raise OSError("sensor unplugged")

    monkeypatch.setattr(sampler._reader, "read", broken)
    time.sleep(0.1)
    with pytest.raises(RuntimeError, match="sensor unplugged"):
        sampler.stop()
    assert not sampler.running and not monitor_threads()


def test_sampler_summary_is_consistent():
    with Sampler("cpu", interval_s=0.05, live=False) as sampler:
        busy(0.25)
    summary = sampler.summary()
    assert set(summary) == set(CPU_METRICS)
    for item in summary.values():
        assert item.minimum <= item.mean <= item.maximum
        assert 1 <= item.count <= len(sampler.samples)
        assert item.source.startswith("psutil")
    assert "RAM total" in sampler.summary_table()


@pytest.mark.parametrize("kwargs, error, match", [
    ({"interval_s": 0}, ValueError, "interval_s"), ({"interval_s": "1"}, TypeError, "interval_s"),
    ({"live": "yes"}, TypeError, "live"), ({"file": 123}, TypeError, "file"), ({"device": "tpu"}, ValueError, "device"),
], ids=str)
def test_sampler_rejects_bad_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        Sampler(**{"device": "cpu", **kwargs})


def test_series_rejects_unknown_keys():
    with Sampler("cpu", interval_s=1.0, live=False) as sampler:
        pass
    with pytest.raises(ValueError, match="gpu_util"):
        sampler.series("gpu_util")
    with pytest.raises(TypeError, match="key"):
        sampler.series(3)
    assert Sampler("cpu", live=False).series("cpu_util") == ([], [])


# --------------------------------------------------------------------------- summaries

def test_summarise_leaves_out_missing_values():
    def snap(t, value):
        return Snapshot("cpu", "CPU", t, (Metric("cpu_util", "CPU", value, "%", "psutil.cpu_times"),))

    summary = summarise([snap(0.0, None), snap(1.0, 10.0), snap(2.0, 30.0)])
    item = summary["cpu_util"]
    assert (item.count, item.mean, item.minimum, item.maximum) == (2, 20.0, 10.0, 30.0)
    assert "mean 20 %" in str(item)
    assert summarise([]) == {}
    assert summarise([snap(0.0, None)]) == {}


@pytest.mark.parametrize("samples", [None, 3, "abc", [1, 2]], ids=repr)
def test_summarise_rejects_non_snapshots(samples):
    with pytest.raises(TypeError, match="Snapshot"):
        summarise(samples)


# --------------------------------------------------------------------------- on a GPU

gpu = pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")


@pytest.mark.gpu
@gpu
def test_gpu_snapshot_reads_nvml():
    pytest.importorskip("pynvml")
    snap = snapshot("cuda")
    assert list(NVML_METRICS) == [m.key for m in snap.metrics][:len(NVML_METRICS)]
    assert all(snap[key].source.startswith("NVML") for key in NVML_METRICS)
    assert 0 < snap.value("gpu_mem_used") <= snap.value("gpu_mem_total")
    cuda_total = torch.cuda.get_device_properties(0).total_memory  # NVML counts the driver's reserve too: 0.6% on an H100
    assert abs(snap.value("gpu_mem_total") * 2**30 - cuda_total) < 0.02 * cuda_total
    assert 0 <= snap.value("gpu_util") <= 100
    assert snap.value("gpu_temp") is None or 0 < snap.value("gpu_temp") < 110
    assert "GPU" in snap.line() and snap.note == ""


@pytest.mark.gpu
@gpu
def test_gpu_sampler_sees_a_busy_gpu():
    pytest.importorskip("pynvml")
    a = torch.randn(4096, 4096, device="cuda")
    with Sampler("cuda", interval_s=0.2, live=False) as sampler:
        end = time.perf_counter() + 2.0
        while time.perf_counter() < end:
            a @ a
            torch.cuda.synchronize()
    assert sampler.summary()["gpu_util"].maximum > 50


# --------------------------------------------------------------------------- tables, profiles and traces

def test_markdown_table_and_bad_rows():
    assert monitor.markdown_table(["a", "b"], [[1, 2]]).splitlines() == ["| a | b |", "| --- | --- |", "| 1 | 2 |"]
    with pytest.raises(ValueError, match=r"rows\[0\]"):
        monitor.markdown_table(["a", "b"], [[1]])
    with pytest.raises(TypeError, match="header"):
        monitor.markdown_table("ab", [])


def test_profile_table_is_narrow_and_drops_the_device_column_on_a_cpu():
    rows = [{"name": "x" * 100, "calls": 3, "self_cpu_us": 1000.0, "cpu_total_us": 5000.0, "device_total_us": 0.0},
            {"name": "data", "calls": 1, "self_cpu_us": 10.0, "cpu_total_us": 9000.0, "device_total_us": 0.0}]
    text = monitor.profile_table(rows, name_width=30)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80 and "device" not in lines[0]
    assert lines[2].startswith("data")
    rows[0]["device_total_us"] = 7.0
    assert "device total ms" in monitor.profile_table(rows)
    with pytest.raises(ValueError, match="sort_by"):
        monitor.profile_table(rows, sort_by="nope")


def test_quiet_profiler_warning_drops_only_that_warning():
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with monitor.quiet_profiler_warning():
            warnings.warn(monitor.PROFILER_CYCLE_WARNING + ". Only events ...", UserWarning)
            warnings.warn("something else", UserWarning)
    assert [str(w.message) for w in caught] == ["something else"]


def test_busy_fraction_merges_overlapping_intervals():
    assert monitor.busy_fraction([(0, 1), (0.5, 2), (3, 4)], 0, 4) == pytest.approx(0.75)
    assert monitor.merged_intervals([(3, 4), (0, 1), (1, 2)]) == [(0.0, 2.0), (3.0, 4.0)]
    with pytest.raises(ValueError, match="end > start"):
        monitor.busy_fraction([], 1, 1)


def test_summarize_trace_reads_kernels_and_gaps(tmp_path):
    import json

    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 0, "dur": 50},
              {"ph": "X", "cat": "kernel", "name": "gemm", "ts": 10, "dur": 20},
              {"ph": "X", "cat": "kernel", "name": "relu", "ts": 70, "dur": 10},
              {"ph": "X", "cat": "Trace", "name": "PyTorch Profiler (0)", "ts": 0, "dur": 100}]
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": events}))
    summary = monitor.summarize_trace(path)
    assert summary.top[0][0] == "aten::mm" and summary.events == 3
    assert summary.device_busy == pytest.approx(30 / 70) and summary.gaps == [(0.03, 0.04)]
    assert "busy 43%" in str(summary)
    cpu_only = tmp_path / "cpu.json"
    cpu_only.write_text(json.dumps({"traceEvents": events[:1]}))
    assert monitor.summarize_trace(cpu_only).device_busy is None
    with pytest.raises(ValueError, match="no trace file"):
        monitor.summarize_trace(tmp_path / "absent.json")


# --------------------------------------------------------------------------- clocks and throttle reasons

def test_throttle_reasons_decode_nvml_bits():
    assert monitor.throttle_reasons(0) == []
    assert monitor.throttle_reasons(0x1) == ["GPU idle"]
    assert monitor.throttle_reasons(0x4 | 0x20) == ["software power cap", "software thermal slowdown"]
    assert monitor.throttle_reasons(0x40 | 0x80) == ["hardware thermal slowdown", "hardware power brake"]
    assert monitor.throttle_reasons(0x1000) == ["other reasons (0x1000)"]
    for bad in (-1, 1.5, True, "4"):
        with pytest.raises(TypeError, match="mask"):
            monitor.throttle_reasons(bad)
    assert Metric("gpu_throttle", "held down by", 4.0, "reasons", "NVML").formatted() == "power cap"
    assert Metric("gpu_throttle", "held down by", 0.0, "reasons", "NVML").formatted() == "none"


def test_reasons_in_plain_words():
    assert monitor.reason_words(0x4) == ["power cap"]
    assert monitor.reason_words(0x20 | 0x40) == ["thermal"], "software and hardware thermal: one word, once"
    assert monitor.reason_words(0x1 | 0x2 | 0x8) == ["idle", "application clocks", "hardware slowdown"]
    assert monitor.reason_words(0x80) == ["hardware slowdown"] and monitor.reason_words(0x2000) == ["other (0x2000)"]
    assert "power limit" in monitor.explain_reasons(0x4) and "too hot" in monitor.explain_reasons(0x20)
    assert monitor.explain_reasons(0).startswith("nothing holds the clock down")
    with pytest.raises(TypeError, match="mask"):
        monitor.reason_words(-4)


# --------------------------------------------------------------------------- NVML through the fake pynvml

@pytest.fixture
def fake_cuda(monkeypatch):
    """A visible 'cuda' device; returns a function that installs a FakeNvml as the pynvml module."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)

    def install(fake):
        monkeypatch.setitem(sys.modules, "pynvml", fake)
        return fake

    return install


def a_t4(**kwargs):
    from gpucourse.nvml import FakeGpu

    return FakeGpu("Tesla T4", (7, 5), 16 * 2**30, {"sm": 1590, "graphics": 1590, "mem": 5001}, 70_000, **kwargs)


@pytest.mark.parametrize("api", ["both", "events", "throttle"])
def test_every_nvml_metric_from_the_fake_pynvml_with_either_reasons_name(fake_cuda, api):
    from gpucourse.nvml import FakeNvml

    readings = {"gpu_util": 97, "mem_util": 40, "mem_used_bytes": 2**30, "power_mw": 69_000, "temperature_c": 71,
                "sm_clock_mhz": 1245, "mem_clock_mhz": 5001, "reasons": 0x4}
    fake = fake_cuda(FakeNvml([a_t4(readings=readings, name_as_bytes=True)], reasons_api=api))
    snap = snapshot("cuda", cpu_interval_s=0.01)
    assert [m.key for m in snap.metrics] == list(NVML_METRICS) + list(CPU_METRICS)
    assert all(snap[key].source.startswith("NVML nvmlDevice") for key in NVML_METRICS)
    values = {key: snap.value(key) for key in NVML_METRICS}
    assert values == {"gpu_util": 97, "gpu_mem_util": 40, "gpu_mem_used": 1.0, "gpu_mem_total": 16.0, "gpu_power": 69,
                      "gpu_power_limit": 70, "gpu_temp": 71, "gpu_sm_clock": 1245, "gpu_sm_clock_max": 1590,
                      "gpu_mem_clock": 5001, "gpu_mem_clock_max": 5001, "gpu_throttle": 4}
    assert [snap[key].unit for key in ("gpu_power", "gpu_temp", "gpu_sm_clock", "gpu_mem_clock")] == [
        "W", "C", "MHz", "MHz"]
    assert snap.name == "Tesla T4" and snap.note == "" and fake.open == 0
    assert snap["gpu_throttle"].formatted() == "power cap" and "power cap" in snap.table()
    assert "SM 1245/1590 MHz (power cap)" in snap.line()


def test_a_query_the_gpu_does_not_support_reads_none_and_says_so(fake_cuda):
    from gpucourse.nvml import FakeNvml

    fake_cuda(FakeNvml([a_t4(unsupported=("nvmlDeviceGetPowerUsage", "nvmlDeviceGetCurrentClocksEventReasons"))]))
    snap = snapshot("cuda", cpu_interval_s=0.01)
    assert snap.value("gpu_power") is None and snap["gpu_power"].formatted() == "n/a"
    assert snap.value("gpu_throttle") is None and snap.value("gpu_power_limit") == 70
    assert "nvmlDeviceGetPowerUsage: not supported by this GPU" in snap.note
    assert "nvmlDeviceGetCurrentClocksEventReasons: not supported by this GPU" in snap.note


def test_an_nvml_that_fails_to_initialise_gives_host_metrics_and_a_note(fake_cuda):
    from gpucourse.nvml import FakeNvml

    fake_cuda(FakeNvml([a_t4()], driver=None))
    snap = snapshot("cuda", cpu_interval_s=0.01)
    assert [m.key for m in snap.metrics] == list(CPU_METRICS) and "host metrics only" in snap.name
    assert "NVML did not initialise (nvmlInit" in snap.note and "NVIDIA driver" in snap.note
    assert monitor.nvml_available() is False


def test_an_nvml_error_mid_run_gives_a_gap_and_a_note_never_a_crash(fake_cuda, monkeypatch):
    from gpucourse import nvml
    from gpucourse.nvml import FakeNvml

    lost = FakeNvml.NVMLError_GpuIsLost("GPU is lost")
    fake = fake_cuda(FakeNvml([a_t4(readings={"sm_clock_mhz": [1590, lost, 900], "reasons": [0, 0x4, 0x4]})]))
    with Sampler("cuda", live=False, background=False) as sampler:
        first, second, third = (sampler.take(t) for t in (10.0, 11.0, 12.0))
        assert sampler.running
    assert not sampler.running and fake.open == 0
    assert (first.value("gpu_sm_clock"), second.value("gpu_sm_clock"), third.value("gpu_sm_clock")) == (1590, None, 900)
    assert second.note.startswith("NVML gave no value for: nvmlDeviceGetClockInfo failed (FakeNvmlGpuIsLost: GPU is")
    assert sampler.series("gpu_sm_clock") == ([0.0, 1.0, 2.0], [1590.0, None, 900.0])
    assert "clock held down by: power cap in 67% of samples" in sampler.summary_table()

    def broken(self):
        raise nvml.FakeNvmlError("the driver went away")

    monkeypatch.setattr(nvml.GpuReader, "readings", broken)
    snap = snapshot("cuda", cpu_interval_s=0.01)
    assert all(snap.value(key) is None for key in NVML_METRICS)
    assert snap.note.startswith("NVML failed mid-run (FakeNvmlError: the driver went away)")


def test_nvml_available_follows_the_fake(fake_cuda):
    from gpucourse.nvml import FakeNvml

    fake_cuda(FakeNvml([a_t4()]))
    assert monitor.nvml_available() is True
    fake_cuda(FakeNvml([]))
    assert monitor.nvml_available() is False


def test_a_sampler_without_a_thread_samples_on_demand():
    sampler = Sampler("cpu", live=False, background=False)
    with pytest.raises(RuntimeError, match="not started"):
        sampler.take()
    with sampler:
        assert not monitor_threads() and sampler.running
        assert sampler.take(3.5).time_s == 3.5
    assert len(sampler.samples) == 1 and not sampler.running, "no extra sample when it stops"
    with pytest.raises(TypeError, match="background"):
        Sampler("cpu", background="no")
