"""Tests of gpucourse.simulate: the simulated asynchronous GPU that lesson 03's timing exercises is graded on.

Durations are sleeps of tens of milliseconds; bounds leave room for a loaded 2-core machine (a sleep never ends
early, but may end several milliseconds late).
"""

from __future__ import annotations

import gc
import threading
import time

import pytest

from gpucourse.simulate import MAX_SECONDS, SimulatedGPU
from gpucourse.timing import benchmark


def _stream_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "SimulatedGPU-stream"]


def _elapsed(call) -> float:
    start = time.perf_counter()
    call()
    return time.perf_counter() - start


@pytest.fixture
def gpu():
    """A simulated GPU with 30 ms kernels and no start-up cost, closed after the test."""
    with SimulatedGPU(kernel_s=0.03, init_s=0.0, launch_s=0.0002) as device:
        yield device


# --------------------------------------------------------------------------- asynchronous execution

def test_launch_returns_before_the_kernel_finishes_and_synchronize_waits_for_it(gpu):
    gpu.synchronize()  # pay nothing: init_s is 0
    assert _elapsed(gpu.launch) < 0.015
    assert gpu.pending == 1
    waited = _elapsed(gpu.synchronize)
    assert 0.015 < waited < 0.1
    assert gpu.pending == 0 and gpu.completed == 1


def test_kernels_run_one_after_the_other_in_launch_order(gpu):
    start = time.perf_counter()
    for _ in range(4):
        gpu.launch()
    launched = time.perf_counter() - start
    gpu.synchronize()
    total = time.perf_counter() - start
    assert launched < 0.03, "four launches must return long before the first kernel ends"
    assert total >= 4 * 0.03, "one stream: the kernels do not overlap"
    assert gpu.calls == gpu.completed == 4


def test_a_launch_with_its_own_duration_runs_that_long(gpu):
    gpu.launch(0.06)
    assert 0.05 < _elapsed(gpu.synchronize) < 0.15


def test_synchronize_with_nothing_queued_returns_at_once(gpu):
    gpu.synchronize()
    assert _elapsed(gpu.synchronize) < 0.01


def test_first_call_pays_the_initialisation_in_the_caller():
    with SimulatedGPU(kernel_s=0.01, init_s=0.12, launch_s=0.0) as device:
        assert not device.initialized
        first = _elapsed(device.launch)
        second = _elapsed(device.launch)
        assert device.initialized
    assert first >= 0.12 and second < 0.05


def test_synchronize_alone_does_not_initialise_the_first_launch_or_copy_does():
    with SimulatedGPU(init_s=0.08) as device:
        assert _elapsed(device.synchronize) < 0.03 and not device.initialized
        assert _elapsed(lambda: device.to_device(0)) >= 0.08
        assert device.initialized and _elapsed(device.launch) < 0.03


def test_every_kth_kernel_hiccups():
    with SimulatedGPU(kernel_s=0.01, init_s=0.0, hiccup_every=3, hiccup_s=0.08) as device:
        times = []
        for _ in range(6):
            times.append(_elapsed(lambda: (device.launch(), device.synchronize())))
    slow = [i for i, t in enumerate(times, start=1) if t > 0.06]
    assert slow == [3, 6]


def test_matmul_runs_for_2_n_cubed_over_the_peak():
    with SimulatedGPU(init_s=0.0, flops_per_s=2 * 256**3 / 0.04) as device:  # a 256 x 256 matmul takes 40 ms
        assert device.peak_flops == 2 * 256**3 / 0.04
        assert _elapsed(lambda: device.matmul(256)) < 0.02
        assert 0.03 < _elapsed(device.synchronize) < 0.12


def test_to_device_blocks_for_the_transfer_after_queued_kernels(gpu):
    gpu.launch()
    seconds = _elapsed(lambda: gpu.to_device(400_000_000))  # 400 MB at 12 GB/s: 33 ms, after a 30 ms kernel
    assert seconds >= 0.03 + 0.033 - 0.002
    assert gpu.pending == 0


def test_calls_counts_launches_and_matmuls(gpu):
    gpu.launch()
    gpu.matmul(8)
    gpu.launch(0.0)
    gpu.synchronize()
    assert gpu.calls == 3 and gpu.completed == 3


def test_repr_names_the_settings_and_state(gpu):
    gpu.launch()
    text = repr(gpu)
    assert text.startswith("SimulatedGPU(kernel_s=0.03") and "1 kernels launched" in text
    gpu.close()
    assert repr(gpu).endswith("closed)")


# --------------------------------------------------------------------------- timing on it

def test_benchmark_with_synchronisation_measures_the_kernel(gpu):
    result = benchmark(gpu.launch, warmup=1, repeats=5, sync=gpu.synchronize)
    assert 0.03 <= result.median_s < 0.045


def test_benchmark_without_synchronisation_measures_only_the_launch(gpu):
    result = benchmark(gpu.launch, warmup=1, repeats=5)
    gpu.synchronize()
    assert result.median_s < 0.01


def test_timing_without_warmup_includes_the_initialisation():
    with SimulatedGPU(kernel_s=0.01, init_s=0.1) as device:
        cold = benchmark(device.launch, warmup=0, repeats=1, sync=device.synchronize).median_s
        warm = benchmark(device.launch, warmup=0, repeats=1, sync=device.synchronize).median_s
    assert cold >= 0.11 and warm < 0.05


def test_hiccups_pull_the_mean_above_the_median():
    with SimulatedGPU(kernel_s=0.01, init_s=0.0, hiccup_every=4, hiccup_s=0.1) as device:
        result = benchmark(device.launch, warmup=0, repeats=8, sync=device.synchronize)
    assert result.median_s < 0.03 and result.mean_s > 0.03


# --------------------------------------------------------------------------- clean-up

def test_close_ends_the_thread_and_refuses_more_work():
    before = len(_stream_threads())
    device = SimulatedGPU(kernel_s=0.01, init_s=0.0)
    assert len(_stream_threads()) == before + 1
    device.launch(5.0)  # a long kernel: close() must not wait for it
    assert _elapsed(device.close) < 1.0
    assert device.closed and len(_stream_threads()) == before
    device.close()  # twice is fine
    for call in (device.launch, device.synchronize, lambda: device.matmul(4), lambda: device.to_device(1)):
        with pytest.raises(RuntimeError, match="closed"):
            call()


def test_context_manager_closes_even_after_an_error():
    before = len(_stream_threads())
    with pytest.raises(ZeroDivisionError):
        with SimulatedGPU(init_s=0.0) as device:
            device.launch()
            1 / 0
    assert device.closed and len(_stream_threads()) == before


def test_a_forgotten_device_stops_its_thread_when_collected():
    before = len(_stream_threads())
    device = SimulatedGPU(init_s=0.0)
    device.launch()
    del device
    gc.collect()
    assert len(_stream_threads()) == before


def test_the_stream_thread_is_a_daemon(gpu):
    assert all(t.daemon for t in _stream_threads())


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("kwargs, error, argname", [
    ({"kernel_s": 0}, ValueError, "kernel_s"),
    ({"kernel_s": -0.1}, ValueError, "kernel_s"),
    ({"kernel_s": "0.1"}, TypeError, "kernel_s"),
    ({"kernel_s": MAX_SECONDS + 1}, ValueError, "kernel_s"),
    ({"init_s": -1}, ValueError, "init_s"),
    ({"init_s": None}, TypeError, "init_s"),
    ({"launch_s": float("nan")}, ValueError, "launch_s"),
    ({"flops_per_s": 0}, ValueError, "flops_per_s"),
    ({"transfer_bytes_per_s": -5.0}, ValueError, "transfer_bytes_per_s"),
    ({"hiccup_every": -1}, ValueError, "hiccup_every"),
    ({"hiccup_every": 2.0}, TypeError, "hiccup_every"),
    ({"hiccup_every": True}, TypeError, "hiccup_every"),
    ({"hiccup_s": float("inf")}, ValueError, "hiccup_s"),
], ids=str)
def test_constructor_rejects_bad_arguments_naming_them(kwargs, error, argname):
    before = len(_stream_threads())
    with pytest.raises(error, match=rf"^{argname}\b"):
        SimulatedGPU(**kwargs)
    assert len(_stream_threads()) == before, "a rejected device must not start a thread"


def test_kernel_s_is_keyword_or_first_positional_and_the_rest_keyword_only():
    with pytest.raises(TypeError):
        SimulatedGPU(0.01, 0.1)  # type: ignore[misc]


@pytest.mark.parametrize("call, error, argname", [
    (lambda d: d.launch(-1.0), ValueError, "seconds"),
    (lambda d: d.launch("1"), TypeError, "seconds"),
    (lambda d: d.launch(MAX_SECONDS * 2), ValueError, "seconds"),
    (lambda d: d.matmul(0), ValueError, "n"),
    (lambda d: d.matmul(3.0), TypeError, "n"),
    (lambda d: d.matmul(10**6), ValueError, "n"),
    (lambda d: d.to_device(-1), ValueError, "nbytes"),
    (lambda d: d.to_device(1.5), TypeError, "nbytes"),
    (lambda d: d.to_device(10**15), ValueError, "nbytes"),
], ids=["launch-negative", "launch-str", "launch-too-long", "matmul-zero", "matmul-float", "matmul-too-big",
        "to_device-negative", "to_device-float", "to_device-too-big"])
def test_methods_reject_bad_arguments_naming_them(gpu, call, error, argname):
    with pytest.raises(error, match=rf"^{argname}\b"):
        call(gpu)
    assert gpu.calls == 0


# ---------------------------------------------------------------- simulated clock

def test_simulated_clock_advances_without_sleeping_and_starts_no_thread():
    before = len(_stream_threads())
    start = time.perf_counter()
    with SimulatedGPU(kernel_s=5.0, init_s=2.0, launch_s=0.001, simulated_clock=True) as gpu:
        assert len(_stream_threads()) == before
        t0 = gpu.clock()
        gpu.launch()
        assert gpu.clock() - t0 == pytest.approx(2.001)  # start-up and launch are paid by the caller
        assert gpu.pending == 1
        gpu.synchronize()
        assert gpu.clock() - t0 == pytest.approx(7.001)
        assert gpu.pending == 0 and gpu.completed == 1
    assert time.perf_counter() - start < 1.0


def test_simulated_clock_runs_kernels_in_order_with_hiccups():
    with SimulatedGPU(kernel_s=0.01, init_s=0.0, launch_s=0.0, hiccup_every=2, hiccup_s=0.1,
                      simulated_clock=True) as gpu:
        for _ in range(3):
            gpu.launch()
        assert gpu.clock() == 0.0
        gpu.synchronize()
        assert gpu.clock() == pytest.approx(0.13)
        gpu.to_device(12 * 10**9)  # one second at the default 12 GB/s
        assert gpu.clock() == pytest.approx(1.13)


def test_kernel_times_give_each_launch_its_duration_and_run_out():
    with SimulatedGPU(init_s=0.0, launch_s=0.0, simulated_clock=True, kernel_times=[0.02, 0.05]) as gpu:
        gpu.launch()
        gpu.synchronize()
        assert gpu.clock() == pytest.approx(0.02)
        gpu.launch(1.0)  # an explicit duration does not use up the list
        gpu.launch()
        gpu.synchronize()
        assert gpu.clock() == pytest.approx(1.07)
        with pytest.raises(RuntimeError, match="kernel_times"):
            gpu.launch()


def test_clock_is_perf_counter_without_simulated_clock(gpu):
    before = time.perf_counter()
    assert before <= gpu.clock() <= time.perf_counter()


@pytest.mark.parametrize("kwargs, error, argname", [
    ({"simulated_clock": 1}, TypeError, "simulated_clock"),
    ({"kernel_times": "0.1"}, TypeError, "kernel_times"),
    ({"kernel_times": [0.1, -1.0]}, ValueError, "kernel_times"),
    ({"kernel_times": 0.1}, TypeError, "kernel_times"),
], ids=str)
def test_simulated_clock_arguments_are_checked(kwargs, error, argname):
    with pytest.raises(error, match=rf"^{argname}\b"):
        SimulatedGPU(**kwargs)


# --------------------------------------------------------------------------- float64, burst vs sustained, L2

def test_float64_matmuls_run_at_their_own_rate():
    with SimulatedGPU(init_s=0.0, launch_s=0.0, simulated_clock=True, flops_per_s=1e12) as gpu:
        assert gpu.fp64_flops_per_s == pytest.approx(1e12 / 32)  # a T4's ratio by default
        gpu.matmul(1000, "float64")
        gpu.synchronize()
        assert gpu.clock() == pytest.approx(2e9 / (1e12 / 32))
    with SimulatedGPU(init_s=0.0, launch_s=0.0, simulated_clock=True, fp64_flops_per_s=1e11) as gpu:
        gpu.matmul(1000, "float64")
        gpu.synchronize()
        assert gpu.clock() == pytest.approx(2e9 / 1e11)
        with pytest.raises(ValueError, match="^dtype"):
            gpu.matmul(10, "float16")


def test_the_clock_drops_after_boost_s_of_kernel_time():
    with SimulatedGPU(kernel_s=0.1, init_s=0.0, launch_s=0.0, simulated_clock=True, boost_s=0.25,
                      sustained_fraction=0.5) as gpu:
        durations = []
        for _ in range(5):
            start = gpu.clock()
            gpu.launch()
            gpu.synchronize()
            durations.append(gpu.clock() - start)
    assert durations == pytest.approx([0.1, 0.1, 0.1, 0.2, 0.2])  # from 0.3 s of kernel time on: half the clock


def test_stream_reads_a_working_set_that_fits_l2_faster():
    with SimulatedGPU(init_s=0.0, launch_s=0.0, simulated_clock=True, l2_bytes=2**20, l2_bytes_per_s=4e12,
                      memory_bytes_per_s=1e12) as gpu:
        gpu.stream(2**20, passes=10)
        gpu.synchronize()
        assert gpu.clock() == pytest.approx(10 * 2**20 / 4e12)
        gpu.stream(2**20 + 1)
        gpu.synchronize()
        assert gpu.clock() == pytest.approx(10 * 2**20 / 4e12 + (2**20 + 1) / 1e12)


def test_a_simulated_clock_accepts_long_durations_a_real_one_refuses():
    with SimulatedGPU(init_s=0.0, simulated_clock=True, flops_per_s=1e9) as gpu:
        gpu.matmul(10_000)  # 2000 simulated seconds: nothing sleeps
        gpu.synchronize()
        assert gpu.clock() > 1000
    with SimulatedGPU(init_s=0.0, flops_per_s=1e9) as gpu:
        with pytest.raises(ValueError, match="n=10000"):
            gpu.matmul(10_000)


@pytest.mark.parametrize("kwargs, argname", [
    ({"fp64_flops_per_s": 0}, "fp64_flops_per_s"), ({"boost_s": -1}, "boost_s"),
    ({"sustained_fraction": 1.5}, "sustained_fraction"), ({"sustained_fraction": 0}, "sustained_fraction"),
    ({"l2_bytes": -1}, "l2_bytes"), ({"l2_bytes_per_s": 0}, "l2_bytes_per_s"),
    ({"memory_bytes_per_s": -2.0}, "memory_bytes_per_s"),
], ids=str)
def test_hardware_model_arguments_are_checked(kwargs, argname):
    with pytest.raises(ValueError, match=rf"^{argname}\b"):
        SimulatedGPU(**kwargs)


# --------------------------------------------------------------------------- events, the L2 and noisy devices (lesson 03)

def test_events_measure_the_kernel_on_the_device_timeline_and_refuse_before_it_is_reached():
    with SimulatedGPU(simulated_clock=True, init_s=0.5, launch_s=1e-6, kernel_s=0.01) as gpu:
        gpu.launch()
        start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
        start.record()
        gpu.launch()
        end.record()
        assert not end.query()
        with pytest.raises(RuntimeError, match="completed"):
            start.elapsed_time(end)
        end.synchronize()
        assert end.query()
        assert start.elapsed_time(end) == pytest.approx(10.0, rel=1e-6)  # milliseconds, the kernel alone


def test_events_need_enable_timing_and_a_record():
    with SimulatedGPU(simulated_clock=True, init_s=0.0) as gpu:
        plain, timed = gpu.Event(), gpu.Event(enable_timing=True)
        plain.record()
        timed.record()
        gpu.synchronize()
        with pytest.raises(ValueError, match="enable_timing"):
            plain.elapsed_time(timed)
        with pytest.raises(ValueError, match="recorded"):
            timed.elapsed_time(gpu.Event(enable_timing=True))
        with pytest.raises(TypeError, match="enable_timing"):
            gpu.Event(enable_timing=1)
        with pytest.raises(TypeError, match="end_event"):
            timed.elapsed_time(object())
        assert gpu.Event().query() and "recorded=False" in repr(gpu.Event())
        flagged = gpu.Event(enable_timing=True, blocking=True, interprocess=False)  # torch.cuda.Event's arguments
        flagged.record()
        flagged.wait()
        flagged.synchronize()
        assert flagged.query() and timed.elapsed_time(flagged) >= 0.0
        with pytest.raises(TypeError, match="blocking"):
            gpu.Event(blocking="yes")


def test_events_on_the_real_time_device_time_its_kernels(gpu):
    gpu.synchronize()
    start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
    start.record()
    gpu.launch()
    gpu.launch()
    end.record()
    end.synchronize()
    assert 55 < start.elapsed_time(end) < 150  # two 30 ms kernels, in ms


def test_inputs_left_in_the_l2_run_faster_until_a_write_as_large_as_the_l2_evicts_them():
    with SimulatedGPU(simulated_clock=True, init_s=0.0, launch_s=0.0, kernel_s=0.01, l2_bytes=2**22,
                      l2_hit_factor=0.5, memory_bytes_per_s=1e11) as gpu:
        scratch, small = gpu.empty(2**23), gpu.empty(2**10)

        def timed(*before) -> float:
            for call in before:
                call()
            gpu.synchronize()
            start = gpu.clock()
            gpu.launch(reads=2**20)
            gpu.synchronize()
            return gpu.clock() - start

        assert timed() == pytest.approx(0.01)                      # cold
        assert timed() == pytest.approx(0.005)                     # its inputs are still in the L2
        assert timed(small.zero_) == pytest.approx(0.005)          # a small write leaves them there
        assert timed(scratch.zero_) == pytest.approx(0.01)         # a write larger than the L2 evicts them
        assert "8388608 bytes" in repr(scratch)
        with pytest.raises(ValueError, match="nbytes"):
            gpu.empty(0)
    with pytest.raises(ValueError, match="l2_hit_factor"):
        SimulatedGPU(l2_hit_factor=1.5)


def test_jitter_and_outliers_are_reproducible_from_the_seed():
    def times(seed: int) -> list[float]:
        with SimulatedGPU(simulated_clock=True, init_s=0.0, launch_s=0.0, kernel_s=0.01, jitter=0.05,
                          outlier_prob=0.2, outlier_s=0.1, seed=seed) as gpu:
            result = []
            for _ in range(200):
                start = gpu.clock()
                gpu.launch()
                gpu.synchronize()
                result.append(gpu.clock() - start)
            return result

    first = times(1)
    assert first == times(1) and first != times(2)
    plain = [t for t in first if t < 0.05]
    assert all(0.0095 - 1e-12 <= t <= 0.0105 + 1e-12 for t in plain)
    assert 20 < len(first) - len(plain) < 60  # about 20% outliers
    for bad in ({"jitter": 1.0}, {"outlier_prob": 1.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            SimulatedGPU(**bad)


def test_the_clock_falls_gradually_over_the_ramp():
    with SimulatedGPU(simulated_clock=True, init_s=0.0, boost_s=1.0, throttle_ramp_s=1.0,
                      sustained_fraction=0.5) as gpu:
        assert gpu.clock_fraction() == 1.0
        gpu.busy_s = 1.5
        assert gpu.clock_fraction() == pytest.approx(0.75)
        gpu.busy_s = 3.0
        assert gpu.clock_fraction() == 0.5


def test_record_costs_the_host_a_launch():
    """Review r5: an event recorded on an idle device is stamped after the host's launch time, as cudaEventRecord."""
    with SimulatedGPU(simulated_clock=True, init_s=0.0, launch_s=1e-5) as gpu:
        start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
        start.record()
        end.record()
        end.synchronize()
        assert start.elapsed_time(end) == pytest.approx(0.01)  # ms: one launch between the two stamps
        assert gpu.clock() == pytest.approx(2e-5)


def test_flush_jitter_varies_the_flush_within_its_bounds():
    """flush_jitter: each zero_() takes its time +-flush_jitter, at random but seeded; 0 keeps it exact."""
    def flush_times(jitter: float, seed: int = 0) -> list:
        with SimulatedGPU(simulated_clock=True, init_s=0.0, launch_s=0.0, memory_bytes_per_s=1e9,
                          flush_jitter=jitter, seed=seed) as gpu:
            buffer, times = gpu.empty(10**6), []
            for _ in range(20):
                before = gpu.clock()
                buffer.zero_()
                gpu.synchronize()
                times.append(gpu.clock() - before)
        return times

    assert flush_times(0.0) == pytest.approx([1e-3] * 20)
    noisy = flush_times(0.05)
    assert all(0.95e-3 <= t <= 1.05e-3 for t in noisy) and len(set(noisy)) > 10
    assert noisy == flush_times(0.05)  # reproducible from the seed
    with pytest.raises(ValueError, match="flush_jitter"):
        SimulatedGPU(simulated_clock=True, flush_jitter=1.0)
