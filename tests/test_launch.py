"""Tests of gpucourse.launch: the launch-overhead simulator keeps exact time on a virtual clock."""

from __future__ import annotations

import random

import pytest

from gpucourse import launch
from gpucourse.launch import LaunchSimulator, elementwise_kernels, measure_step_s


def reference_step_s(kernels: list[float], launch_s: float) -> float:
    """Host launches one after another; each kernel starts when launched and when the device is free."""
    host = device_free = 0.0
    for seconds in kernels:
        host += launch_s
        device_free = max(host, device_free) + seconds
    return device_free


def test_launch_bound_chain_costs_every_launch_plus_the_last_kernel():
    assert measure_step_s([2e-6] * 8, 10e-6) == pytest.approx(8 * 10e-6 + 2e-6, rel=1e-12)


def test_compute_bound_chain_costs_one_launch_plus_every_kernel():
    assert measure_step_s([50e-6] * 4, 10e-6) == pytest.approx(10e-6 + 200e-6, rel=1e-12)


def test_graph_replay_pays_one_launch():
    assert measure_step_s([2e-6] * 8, 10e-6, graph=True) == pytest.approx(10e-6 + 16e-6, rel=1e-12)


def test_random_chains_match_the_reference():
    rng = random.Random(0)
    for _ in range(200):
        kernels = [rng.choice([1e-7, 1e-6, 5e-6, 2e-5, 1e-4]) * rng.random() for _ in range(rng.randint(1, 30))]
        launch_s = rng.choice([1e-6, 5e-6, 2e-5])
        assert measure_step_s(kernels, launch_s) == pytest.approx(reference_step_s(kernels, launch_s), rel=1e-12)


def test_busy_fraction_is_the_share_of_time_a_kernel_ran():
    sim = LaunchSimulator(10e-6)
    for _ in range(4):
        sim.launch(5e-6)
    sim.synchronize()
    assert sim.now_s == pytest.approx(45e-6)
    assert sim.busy_fraction() == pytest.approx(20e-6 / 45e-6)
    assert len(sim.runs) == 4 and sim.launches == 4 and len(sim.launch_spans) == 4
    assert sim.runs[1].waited_s == pytest.approx(0.0)


def test_host_work_and_queueing():
    sim = LaunchSimulator(1e-6)
    sim.launch(100e-6)
    sim.launch(1e-6)
    assert sim.runs[1].waited_s == pytest.approx(99e-6)
    sim.host(5e-6)
    assert sim.now_s == pytest.approx(7e-6)


def test_elementwise_kernels_fused_reads_and_writes_once():
    unfused = elementwise_kernels(1000, 8, 1e9)
    fused = elementwise_kernels(1000, 8, 1e9, fused=True)
    assert unfused == [pytest.approx(8e-6)] * 8 and fused == [pytest.approx(8e-6)]


def test_elementwise_kernels_last_at_least_the_floor():
    assert elementwise_kernels(10, 3, 1e9, min_kernel_s=2e-6) == [2e-6] * 3      # 80 ns of traffic: the floor wins
    assert elementwise_kernels(1000, 1, 1e9, min_kernel_s=2e-6) == [pytest.approx(8e-6)]   # traffic wins


@pytest.mark.parametrize("call, error, name", [
    (lambda: LaunchSimulator(-1), ValueError, "launch_s"),
    (lambda: LaunchSimulator(1e-6).launch(-1), ValueError, "kernel_s"),
    (lambda: LaunchSimulator(1e-6).replay([]), TypeError, "kernel_s"),
    (lambda: measure_step_s("abc", 1e-6), TypeError, "kernel_s"),
    (lambda: measure_step_s([1e-6], 1e-6, graph=1), TypeError, "graph"),
    (lambda: elementwise_kernels(0, 2, 1e9), ValueError, "n_elements"),
    (lambda: elementwise_kernels(4, 2, 1e9, min_kernel_s=-1.0), ValueError, "min_kernel_s"),
    (lambda: launch.plot_timeline(3), TypeError, "sim"),
])
def test_bad_arguments_are_named(call, error, name):
    with pytest.raises(error, match=name):
        call()


def test_plot_timeline_draws_kernels_and_launches():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    sim = LaunchSimulator(5e-6)
    sim.launch(1e-6)
    sim.replay([1e-6, 2e-6])
    sim.synchronize()
    ax = launch.plot_timeline(sim)
    assert len(ax.collections) == 2


def test_time_per_call_divides_by_the_calls_and_syncs():
    counter = {"calls": 0, "syncs": 0}

    def fn():
        counter["calls"] += 1

    def sync():
        counter["syncs"] += 1

    seconds = launch.time_per_call(fn, calls=10, repeats=3, sync=sync)
    assert seconds >= 0 and counter["calls"] == 50 and counter["syncs"] >= 3
    with pytest.raises(TypeError, match="fn"):
        launch.time_per_call(3)
    with pytest.raises(ValueError, match="calls"):
        launch.time_per_call(fn, calls=0)
