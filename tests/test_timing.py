"""Tests of gpucourse.timing: warm-up, synchronisation, repeats, median, and the sync hook per device."""

from __future__ import annotations

import statistics
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucourse.timing import BenchmarkResult, benchmark, sync_for

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
