"""Tests of gpucourse.timing: warm-up, synchronisation, repeats, median, the sync hook per device, CUDA events,
agreement with torch.utils.benchmark, FLOP/s and the plausibility guard."""

from __future__ import annotations

import statistics
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notebook_utils import failure_of_test_cell, right_answers

from gpucourse.timing import BenchmarkResult, benchmark, flops_per_second, plausibility, sync_for

PROPERTY = settings(deadline=None, max_examples=50, derandomize=True, database=None)


class Recorder:
    """A fake workload and sync hook that log their calls in order."""

    def __init__(self, sleep_s: float = 0.0, warmup_sleep_s: float = 0.0, warmup: int = 0,
                 sync_sleep_s: float = 0.0):
        self.events: list[str] = []
        self.sleep_s, self.warmup_sleep_s, self.sync_sleep_s = sleep_s, warmup_sleep_s, sync_sleep_s
        self.warmup = warmup  # how many of the first calls are the slow warm-up ones

    @property
    def calls(self) -> int:
        return self.events.count("fn")

    def fn(self) -> None:
        slow = self.calls < self.warmup
        self.events.append("fn")
        time.sleep(self.warmup_sleep_s if slow else self.sleep_s)

    def sync(self) -> None:
        self.events.append("sync")
        time.sleep(self.sync_sleep_s)


# --------------------------------------------------------------------------- benchmark

@pytest.mark.parametrize("warmup, repeats", [(0, 1), (2, 10), (5, 3)])
def test_benchmark_calls_fn_warmup_plus_repeats_times_and_keeps_one_time_per_repeat(warmup, repeats):
    rec = Recorder()
    result = benchmark(rec.fn, warmup=warmup, repeats=repeats, sync=rec.sync)
    assert rec.calls == warmup + repeats
    assert len(result.times_s) == repeats
    assert result.warmup == warmup


def test_benchmark_syncs_after_the_warmup_and_after_every_timed_call():
    rec = Recorder()
    benchmark(rec.fn, warmup=3, repeats=4, sync=rec.sync)
    assert rec.events == ["fn"] * 3 + ["sync"] + ["fn", "sync"] * 4


def test_benchmark_does_not_time_the_warmup_calls():
    """Warm-up calls take 100 ms each, timed calls nothing: no timed call may include a warm-up."""
    rec = Recorder(warmup_sleep_s=0.1, warmup=2)
    result = benchmark(rec.fn, warmup=2, repeats=5)
    assert max(result.times_s) < 0.09


def test_benchmark_includes_the_sync_in_each_timed_call():
    """A sync that waits 5 ms stands for a GPU finishing its queue: every timed call must wait for it."""
    rec = Recorder(sync_sleep_s=0.005)
    result = benchmark(rec.fn, warmup=1, repeats=4, sync=rec.sync)
    assert min(result.times_s) >= 0.0049


def test_benchmark_median_of_a_2ms_workload_is_about_2ms():
    result = benchmark(Recorder(sleep_s=0.002).fn, warmup=1, repeats=7)
    assert 0.0019 <= result.median_s < 0.025
    assert result.min_s <= result.median_s <= max(result.times_s)


def test_benchmark_default_sync_is_a_no_op_and_defaults_are_two_warmup_ten_repeats():
    rec = Recorder()
    result = benchmark(rec.fn)
    assert rec.calls == 12 and len(result.times_s) == 10 and result.warmup == 2


def test_benchmark_propagates_an_error_raised_by_the_workload():
    def broken():
        raise ZeroDivisionError("inside the workload")

    with pytest.raises(ZeroDivisionError, match="inside the workload"):
        benchmark(broken)


@pytest.mark.parametrize("fn", [None, "lambda: 1", 42], ids=repr)
def test_benchmark_rejects_a_non_callable_fn(fn):
    with pytest.raises(TypeError, match=r"^fn must be callable"):
        benchmark(fn)


@pytest.mark.parametrize("kwargs, error, argname", [
    ({"warmup": -1}, ValueError, "warmup"),
    ({"warmup": 1.0}, TypeError, "warmup"),
    ({"warmup": True}, TypeError, "warmup"),
    ({"warmup": None}, TypeError, "warmup"),
    ({"warmup": "2"}, TypeError, "warmup"),
    ({"repeats": 0}, ValueError, "repeats"),
    ({"repeats": -3}, ValueError, "repeats"),
    ({"repeats": 2.5}, TypeError, "repeats"),
    ({"repeats": False}, TypeError, "repeats"),
    ({"repeats": float("nan")}, TypeError, "repeats"),
    ({"sync": "cuda"}, TypeError, "sync"),
    ({"sync": 0}, TypeError, "sync"),
], ids=str)
def test_benchmark_rejects_bad_arguments_naming_them(kwargs, error, argname):
    rec = Recorder()
    with pytest.raises(error, match=rf"^{argname}\b"):
        benchmark(rec.fn, **kwargs)
    assert rec.calls == 0, "arguments must be checked before the workload runs"


def test_benchmark_arguments_after_fn_are_keyword_only():
    with pytest.raises(TypeError):
        benchmark(lambda: None, 2, 10)  # type: ignore[misc]


@PROPERTY
@given(warmup=st.integers(0, 4), repeats=st.integers(1, 8))
def test_benchmark_median_lies_between_min_and_max_and_iqr_within_range(warmup, repeats):
    result = benchmark(lambda: sum(range(200)), warmup=warmup, repeats=repeats)
    assert result.min_s <= result.median_s <= max(result.times_s)
    assert 0.0 <= result.iqr_s <= max(result.times_s) - result.min_s + 1e-15
    assert all(t >= 0 for t in result.times_s)


# --------------------------------------------------------------------------- BenchmarkResult

def test_benchmark_result_statistics_on_known_times():
    result = BenchmarkResult(times_s=(1.0, 2.0, 3.0, 4.0, 100.0), warmup=2)
    assert result.median_s == 3.0  # the odd slow repeat does not move the median
    assert result.min_s == 1.0
    assert result.iqr_s == pytest.approx(2.0)  # inclusive quartiles 2 and 4


def test_benchmark_result_iqr_of_one_repeat_is_zero():
    assert BenchmarkResult(times_s=(0.5,), warmup=0).iqr_s == 0.0


def test_benchmark_result_str_reports_milliseconds_repeats_and_warmup():
    text = str(BenchmarkResult(times_s=(0.001, 0.002, 0.003), warmup=4))
    assert "median 2.000 ms" in text and "min 1.000 ms" in text
    assert "3 repeats after 4 warm-up" in text


def test_benchmark_result_stores_a_list_of_times_as_a_tuple():
    result = BenchmarkResult(times_s=[0.1, 0.2], warmup=0)
    assert result.times_s == (0.1, 0.2) and isinstance(result.times_s, tuple)


@pytest.mark.parametrize("times, error", [
    ((), ValueError), ((0.1, -0.1), ValueError), ((0.1, float("nan")), ValueError),
    ((0.1, "0.2"), TypeError), (0.1, TypeError), ("0.1", TypeError), (None, TypeError),
], ids=repr)
def test_benchmark_result_rejects_bad_times_naming_times_s(times, error):
    with pytest.raises(error, match="times_s"):
        BenchmarkResult(times_s=times, warmup=0)


@pytest.mark.parametrize("warmup, error", [(-1, ValueError), (1.5, TypeError), (None, TypeError)])
def test_benchmark_result_rejects_a_bad_warmup(warmup, error):
    with pytest.raises(error, match="warmup"):
        BenchmarkResult(times_s=(0.1,), warmup=warmup)


@PROPERTY
@given(st.lists(st.floats(min_value=0, max_value=10, allow_nan=False), min_size=1, max_size=30))
def test_benchmark_result_statistics_agree_with_the_statistics_module(times):
    result = BenchmarkResult(times_s=tuple(times), warmup=0)
    assert result.median_s == statistics.median(times)
    assert result.min_s <= result.median_s <= max(times)
    assert 0.0 <= result.iqr_s <= max(times) - min(times) + 1e-12


# --------------------------------------------------------------------------- sync_for

@pytest.mark.parametrize("device", ["cpu", "cpu:0"])
def test_sync_for_cpu_returns_a_callable_that_does_nothing(device):
    sync = sync_for(device)
    assert callable(sync) and sync() is None


def test_sync_for_accepts_a_torch_device(no_gpu):
    torch = no_gpu
    sync = sync_for(torch.device("cpu"))
    assert callable(sync) and sync() is None


@pytest.mark.parametrize("device", ["gpu", "GPU", "CUDA", "", "tpu", "cuda:x", "cuda:", "cpu:-1", "xla:0", " cpu"])
def test_sync_for_rejects_unknown_device_names(device):
    with pytest.raises(ValueError, match=r"^device must be 'cpu', 'cuda\[:N\]' or 'mps'"):
        sync_for(device)


@pytest.mark.parametrize("device", [None, 0, 1.0, True, ["cpu"]], ids=repr)
def test_sync_for_rejects_non_string_devices_with_a_type_error(device):
    with pytest.raises(TypeError, match=r"^device must be a str or torch.device"):
        sync_for(device)


@pytest.mark.parametrize("device", ["cuda", "cuda:0", "cuda:7", "mps"])
def test_sync_for_rejects_an_accelerator_that_is_not_there(no_gpu, device):
    with pytest.raises(ValueError, match=rf"^device='{device}' but .*not available|^device='{device}' but no CUDA"):
        sync_for(device)


def test_sync_for_cuda_with_gpus_syncs_the_named_device(monkeypatch, no_gpu):
    """With two (simulated) GPUs 'cuda' syncs the current one, 'cuda:1' that one, 'cuda:2' does not exist."""
    torch = no_gpu
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    sync_for("cuda")()
    sync_for("cuda:1")()
    sync_for(torch.device("cuda:0"))()
    assert calls == [None, "cuda:1", "cuda:0"]
    with pytest.raises(ValueError, match=r"^device='cuda:2' but only 2 CUDA GPU"):
        sync_for("cuda:2")


# --------------------------------------------------------------------------- summary statistics and clocks

def test_benchmark_result_mean_max_stdev_and_relative_spread():
    result = BenchmarkResult(times_s=(1.0, 2.0, 3.0, 4.0, 100.0), warmup=0)
    assert result.mean_s == pytest.approx(22.0)  # one slow repeat drags the mean far from the median (3.0)
    assert result.max_s == 100.0
    assert result.stdev_s == pytest.approx(statistics.stdev([1.0, 2.0, 3.0, 4.0, 100.0]))
    assert result.relative_spread == pytest.approx(2.0 / 3.0)


def test_benchmark_result_of_one_repeat_has_no_spread():
    result = BenchmarkResult(times_s=(0.5,), warmup=0)
    assert result.stdev_s == 0.0 and result.relative_spread == 0.0 and result.mean_s == 0.5


def test_benchmark_result_relative_spread_of_zero_times_is_zero():
    assert BenchmarkResult(times_s=(0.0, 0.0), warmup=0).relative_spread == 0.0


def test_benchmark_result_clock_defaults_to_host_and_is_reported():
    result = BenchmarkResult(times_s=(0.001,), warmup=1)
    assert result.clock == "host" and "host clock" in str(result) and "mean 1.000 ms" in str(result)
    assert "cuda events clock" in str(BenchmarkResult(times_s=(0.001,), warmup=1, clock="cuda events"))


@pytest.mark.parametrize("clock, error", [("wall", ValueError), ("", ValueError), (None, TypeError)])
def test_benchmark_result_rejects_an_unknown_clock(clock, error):
    with pytest.raises(error, match="^clock"):
        BenchmarkResult(times_s=(0.1,), warmup=0, clock=clock)


# --------------------------------------------------------------------------- benchmark(device=...)

@pytest.mark.parametrize("device", ["cpu", "cpu:0"])
def test_benchmark_on_the_cpu_uses_the_host_clock(device):
    rec = Recorder(sleep_s=0.002)
    result = benchmark(rec.fn, warmup=1, repeats=3, device=device)
    assert result.clock == "host" and rec.calls == 4
    assert 0.0019 <= result.median_s < 0.05


def test_benchmark_accepts_a_torch_device(no_gpu):
    result = benchmark(lambda: None, warmup=0, repeats=2, device=no_gpu.device("cpu"))
    assert result.clock == "host" and len(result.times_s) == 2


@pytest.mark.parametrize("device, error", [("gpu", ValueError), ("cuda", ValueError), (0, TypeError),
                                           (["cpu"], TypeError)], ids=repr)
def test_benchmark_rejects_a_bad_or_absent_device_before_running(no_gpu, device, error):
    rec = Recorder()
    with pytest.raises(error, match=r"^device"):
        benchmark(rec.fn, device=device)
    assert rec.calls == 0


def test_benchmark_with_an_explicit_sync_keeps_it_on_the_cpu():
    rec = Recorder()
    benchmark(rec.fn, warmup=1, repeats=2, sync=rec.sync, device="cpu")
    assert rec.events == ["fn", "sync", "fn", "sync", "fn", "sync"]


class FakeCudaEvent:
    """Stands in for torch.cuda.Event: records the host clock, reports milliseconds like the real one."""

    log: list[str] = []

    def __init__(self, enable_timing: bool = False):
        assert enable_timing, "timing events need enable_timing=True"
        self.at = None

    def record(self, stream=None) -> None:
        self.at = time.perf_counter()
        FakeCudaEvent.log.append("record")

    def synchronize(self) -> None:
        FakeCudaEvent.log.append("event sync")

    def elapsed_time(self, end: "FakeCudaEvent") -> float:
        return (end.at - self.at) * 1e3


@pytest.fixture
def fake_cuda(monkeypatch, no_gpu):
    """torch with one pretend CUDA GPU: events, device context and synchronize replaced by recorders."""
    import contextlib

    torch = no_gpu
    FakeCudaEvent.log = []
    devices = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: FakeCudaEvent.log.append("device sync"))
    monkeypatch.setattr(torch.cuda, "Event", FakeCudaEvent)
    monkeypatch.setattr(torch.cuda, "device", lambda device: devices.append(device) or contextlib.nullcontext())
    return devices


@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_benchmark_on_a_cuda_device_times_back_to_back_calls_between_events(fake_cuda, device):
    rec = Recorder(sleep_s=0.003)
    result = benchmark(rec.fn, warmup=2, repeats=3, device=device)
    assert result.clock == "cuda events" and rec.calls == 5 and len(result.times_s) == 3
    assert all(0.0029 <= t < 0.05 for t in result.times_s), "elapsed_time is in ms: the result must be in s"
    assert FakeCudaEvent.log == ["device sync"] + ["record"] * 4 + ["event sync", "device sync"]
    assert [str(d) for d in fake_cuda] == [device]


def test_benchmark_on_a_cuda_device_uses_a_given_sync_instead_of_the_device_sync(fake_cuda):
    rec = Recorder()
    benchmark(rec.fn, warmup=1, repeats=2, sync=rec.sync, device="cuda")
    assert rec.events == ["fn", "sync", "fn", "fn", "sync"]
    assert "device sync" not in FakeCudaEvent.log


def _has_cuda() -> bool:
    """True if torch is installed and sees a CUDA GPU."""
    try:
        import torch
    except ImportError:
        return False
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU")
def test_benchmark_with_cuda_events_agrees_with_the_host_clock_on_a_real_gpu():
    import torch

    a = torch.randn(2048, 2048, device="cuda")
    events = benchmark(lambda: a @ a, warmup=3, repeats=10, device="cuda")
    host = benchmark(lambda: a @ a, warmup=3, repeats=10, sync=sync_for("cuda"))
    assert events.clock == "cuda events" and host.clock == "host"
    assert events.median_s <= host.median_s * 1.1  # the host clock adds launch and sync overhead, never less
    assert events.median_s >= host.median_s * 0.5


# --------------------------------------------------------------------------- agreement with torch.utils.benchmark

def test_benchmark_agrees_with_torch_utils_benchmark_on_the_cpu_within_10_percent():
    """Same matmul (~0.3 ms), same thread count (1), 11 interleaved rounds; the medians agree within 10%.

    Both measure single calls (Timer.timeit(number=1)), so a call disturbed by other processes on a busy
    machine spoils one sample of each, not a whole block of calls; a short workload is disturbed less often.
    """
    torch = pytest.importorskip("torch")
    from torch.utils.benchmark import Timer

    threads = 1
    generator = torch.Generator().manual_seed(0)
    a, b = torch.randn(256, 256, generator=generator), torch.randn(256, 256, generator=generator)
    timer = Timer(stmt="a @ b", globals={"a": a, "b": b}, num_threads=threads)
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        ours, theirs = [], []
        for _ in range(11):
            ours.append(benchmark(lambda: a @ b, warmup=2, repeats=15).median_s)
            theirs.append(statistics.median(timer.timeit(number=1).median for _ in range(15)))
    finally:
        torch.set_num_threads(before)
    assert torch.get_num_threads() == before
    ratio = statistics.median(ours) / statistics.median(theirs)
    assert 0.9 <= ratio <= 1.1, f"ours {statistics.median(ours) * 1e3:.3f} ms vs torch {statistics.median(theirs) * 1e3:.3f} ms"


# --------------------------------------------------------------------------- FLOP/s and the plausibility guard

def test_flops_per_second_divides():
    assert flops_per_second(2 * 1024**3, 0.01) == pytest.approx(2 * 1024**3 / 0.01)


@pytest.mark.parametrize("flops, seconds, error, argname", [
    (0, 1.0, ValueError, "flops"), (1e9, 0, ValueError, "seconds"), (1e9, -1.0, ValueError, "seconds"),
    ("1e9", 1.0, TypeError, "flops"), (1e9, None, TypeError, "seconds"), (1e9, float("nan"), ValueError, "seconds"),
])
def test_flops_per_second_rejects_bad_input_naming_it(flops, seconds, error, argname):
    with pytest.raises(error, match=rf"^{argname}\b"):
        flops_per_second(flops, seconds)


@pytest.mark.parametrize("rate, verdict", [
    (8.1e12, "plausible"),           # exactly at peak
    (8.1e12 * 1.0001, "above peak"),
    (40e12, "above peak"),           # an unsynchronised GPU timing
    (8.1e10, "plausible"),           # exactly 1% of peak
    (8.0e10, "far below peak"),
    (0.0, "far below peak"),
    (2e12, "plausible"),
])
def test_plausibility_verdicts_against_a_t4_float32_peak(rate, verdict):
    check = plausibility(rate, 8.1e12)
    assert check.verdict == verdict and check.ok == (verdict == "plausible")
    assert check.fraction_of_peak == pytest.approx(rate / 8.1e12)
    assert str(check).startswith(verdict + ":")


def test_plausibility_advice_names_the_likely_mistake():
    assert "synchronisation" in plausibility(1e15, 1e12).advice
    assert "float64" in plausibility(1e8, 1e12).advice
    assert "believable" in plausibility(5e11, 1e12).advice


def test_plausibility_margin_and_floor():
    assert plausibility(1.05e12, 1e12, margin=0.1).verdict == "plausible"
    assert plausibility(1.15e12, 1e12, margin=0.1).verdict == "above peak"
    assert plausibility(5e10, 1e12, floor=0.1).verdict == "far below peak"
    assert plausibility(5e10, 1e12, floor=0.0).verdict == "plausible"


@pytest.mark.parametrize("args, kwargs, error, argname", [
    ((-1.0, 1e12), {}, ValueError, "flops_per_s"),
    (("fast", 1e12), {}, TypeError, "flops_per_s"),
    ((1e9, 0), {}, ValueError, "peak_flops"),
    ((1e9, None), {}, TypeError, "peak_flops"),
    ((1e9, 1e12), {"floor": 1.0}, ValueError, "floor"),
    ((1e9, 1e12), {"floor": -0.1}, ValueError, "floor"),
    ((1e9, 1e12), {"margin": -0.1}, ValueError, "margin"),
], ids=str)
def test_plausibility_rejects_bad_input_naming_it(args, kwargs, error, argname):
    with pytest.raises(error, match=rf"^{argname}\b"):
        plausibility(*args, **kwargs)


@PROPERTY
@given(rate=st.floats(0, 1e16), peak=st.floats(1e6, 1e15))
def test_plausibility_verdict_follows_the_fraction_of_peak(rate, peak):
    check = plausibility(rate, peak)
    fraction = rate / peak
    expected = "above peak" if fraction > 1 else "far below peak" if fraction < 0.01 else "plausible"
    assert check.verdict == expected


# ---------------------------------------------------------------- quiet import of torch's Timer

def test_import_torch_timer_returns_torchs_timer():
    from torch.utils.benchmark import Timer

    from gpucourse.timing import import_torch_timer
    assert import_torch_timer() is Timer


def test_import_torch_timer_drops_only_the_known_line(monkeypatch, capsys, caplog):
    import logging
    import sys
    import types

    from gpucourse import timing

    fake = types.ModuleType("torch.utils.benchmark")

    class FakeTimer:
        pass

    fake.Timer = FakeTimer
    logger = logging.getLogger("torch.utils.cpp_extension")

    def noisy_import(name, *args, **kwargs):
        if name == "torch.utils.benchmark":
            logger.warning("No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'")
            print("No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'", file=sys.stderr)
            print("something else went wrong", file=sys.stderr)
            logger.warning("another warning")
            return fake
        return real_import(name, *args, **kwargs)

    real_import = __builtins__["__import__"] if isinstance(__builtins__, dict) else __builtins__.__import__
    monkeypatch.setattr("builtins.__import__", noisy_import)
    assert timing.import_torch_timer() is FakeTimer
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert "No CUDA runtime" not in err and "something else went wrong" in err
    logged = [record.getMessage() for record in caplog.records]
    assert "another warning" in logged and not any("No CUDA runtime" in message for message in logged)
    assert logger.filters == []


# ---------------------------------------------------------------- plots

def test_plot_repeats_draws_points_median_and_mean():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpucourse.timing import BenchmarkResult, plot_repeats
    result = BenchmarkResult((0.01, 0.01, 0.2), warmup=0)
    fig = plot_repeats([(result, "a"), (result, "b")])
    assert len(fig.axes) == 2
    lines = fig.axes[0].get_lines()
    assert list(lines[0].get_ydata()) == pytest.approx([10, 10, 200])
    assert lines[1].get_ydata()[0] == pytest.approx(10) and lines[2].get_ydata()[0] == pytest.approx(220 / 3)
    plt.close(fig)


def test_plot_matmul_sweep_rates_and_peaks():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from gpucourse.timing import plot_matmul_sweep
    fig = plot_matmul_sweep([2, 4], {"cpu": [2e-9, 8e-9]}, peaks={"peak": 100e9}, panels=("log-log", "rate"))
    assert len(fig.axes) == 2
    rate_lines = fig.axes[1].get_lines()
    assert list(rate_lines[0].get_ydata()) == pytest.approx([8.0, 16.0])  # 2 n^3 / t / 1e9
    assert rate_lines[1].get_ydata()[0] == pytest.approx(100.0)
    assert fig.axes[0].get_xscale() == "log"
    plt.close(fig)


def test_plot_matmul_sweep_skips_sizes_not_measured():
    """None marks a size a line was not measured at (lesson 03: the CPUs stop at 1024, the GPU goes on): no point."""
    import matplotlib

    matplotlib.use("Agg")
    from gpucourse.timing import plot_matmul_sweep
    fig = plot_matmul_sweep([2, 4, 8], {"cpu": [2e-9, 8e-9, None], "gpu": [4e-9, 4e-9, 8e-9]}, panels=("rate",))
    lines = fig.axes[0].get_lines()
    assert list(lines[0].get_xdata()) == [2, 4] and list(lines[1].get_xdata()) == [2, 4, 8]
    assert list(lines[0].get_ydata()) == pytest.approx([2 * 2**3 / 2e-9 / 1e9, 2 * 4**3 / 8e-9 / 1e9])
    import matplotlib.pyplot as plt
    plt.close(fig)


@pytest.mark.parametrize("args, kwargs, error", [
    (([], {"a": []}), {}, TypeError),
    (([2, 4], {"a": [1.0]}), {}, ValueError),
    (([2, 4], {"a": [1.0, -1.0]}), {}, ValueError),
    (([2, 4], {"a": [1.0, 1.0]}), {"panels": ("pie",)}, ValueError),
    (([2, 4], {"a": [1.0, 1.0]}), {"peaks": [1.0]}, TypeError),
], ids=str)
def test_plot_matmul_sweep_rejects_bad_arguments(args, kwargs, error):
    from gpucourse.timing import plot_matmul_sweep
    with pytest.raises(error):
        plot_matmul_sweep(*args, **kwargs)


def test_plot_repeats_rejects_bad_arguments():
    from gpucourse.timing import plot_repeats
    with pytest.raises(TypeError, match="results"):
        plot_repeats([(1.0, "x")])


# --------------------------------------------------------------------------- a given clock

def test_benchmark_reads_the_clock_it_is_given():
    from gpucourse.simulate import SimulatedGPU

    with SimulatedGPU(init_s=1.0, launch_s=0.0, simulated_clock=True, kernel_times=[0.5, 0.1, 0.2, 0.3]) as gpu:
        result = benchmark(gpu.launch, warmup=1, repeats=3, sync=gpu.synchronize, clock=gpu.clock)
    assert result.times_s == pytest.approx((0.1, 0.2, 0.3))
    with pytest.raises(TypeError, match="^clock"):
        benchmark(lambda: None, clock=3)


@pytest.mark.parametrize("grade_id, name, source", right_answers("03_timing"),
                         ids=[f"{g}-{n}" for g, n, _ in right_answers("03_timing")])
def test_lesson_03_correct_alternatives_pass(grade_id: str, name: str, source: str) -> None:
    """Review 4: correct answers other than the model answer pass lesson 03's tests, visible and hidden."""
    assert failure_of_test_cell("03_timing", grade_id, source) is None, f"{name} failed {grade_id}"
