"""Tests of gpucourse.loader_sim: the simulated input pipeline keeps exact, consistent time (no epoch beats the
probes' prediction), counts its epochs, refuses what does not fit, and its search matches trying everything."""

from __future__ import annotations

import itertools

import pytest

from gpucourse import loader_sim
from gpucourse.loader_sim import OutOfMemory, SimulatedLoader, cheapest_settings

PIPELINES = [
    {},
    {"decode_s": 20e-6},
    {"decode_s": 5e-6, "worker_start_s": 0.5},
    {"cores": 2, "items": 8192, "decode_s": 100e-6},
    {"items": 5000, "decode_s": 150e-6, "batch_sizes": (12, 24, 48, 96, 192, 384), "max_workers": 6, "cores": 3},
]


def fitting(sim: SimulatedLoader) -> list[int]:
    return [b for b in sim.batch_sizes if sim.memory_bytes(b) <= sim.memory_limit]


@pytest.mark.parametrize("settings", PIPELINES)
def test_no_epoch_beats_the_probes_and_no_workers_is_exactly_serial(settings):
    sim = SimulatedLoader(**settings)
    for b, w in itertools.product(fitting(sim), range(sim.max_workers + 1)):
        loop, loader, compute = sim.run(b, w).samples_per_s, sim.loader_alone(b, w), sim.compute_alone(b)
        assert loop <= min(loader, compute) * (1 + 1e-12)
        if w == 0:
            assert loop == pytest.approx(1 / (1 / loader + 1 / compute), rel=1e-12)


def test_more_workers_than_cores_do_not_load_faster():
    sim = SimulatedLoader(cores=4)
    assert sim.loader_alone(256, 4) > sim.loader_alone(256, 8)
    assert sim.loader_alone(256, 4) > 3 * sim.loader_alone(256, 1)


def test_epochs_are_counted_and_probes_are_free():
    sim = SimulatedLoader()
    sim.compute_alone(64), sim.loader_alone(64, 2), sim.memory_bytes(64)
    assert sim.epochs_run == 0
    result = sim.run(64, 2)
    assert sim.epochs_run == 1 and result.samples == sim.items and result.samples_per_s > 0
    assert sim.run(64, 2) == result  # exact and repeatable


def test_a_batch_that_does_not_fit_raises_out_of_memory_everywhere():
    sim = SimulatedLoader(memory_bytes=4e9)
    assert sim.memory_bytes(64) <= 4e9 < sim.memory_bytes(128)
    for call in (lambda: sim.run(128, 1), lambda: sim.compute_alone(128), lambda: sim.loader_alone(128, 0)):
        with pytest.raises(OutOfMemory, match="batch_size=128"):
            call()
    assert sim.epochs_run == 0


@pytest.mark.parametrize("settings, target", [(p, t) for p in PIPELINES for t in (3000, 9000, 12000, 30000)])
def test_cheapest_settings_match_trying_everything_with_few_epochs(settings, target):
    everything = SimulatedLoader(**settings)
    expected = next(({"batch_size": b, "num_workers": w} for b in fitting(everything)
                     for w in range(everything.max_workers + 1) if everything.run(b, w).samples_per_s >= target), None)
    sim = SimulatedLoader(**settings)
    if expected is None:
        with pytest.raises(ValueError, match="target_sps"):
            cheapest_settings(sim, target)
    else:
        assert cheapest_settings(sim, target) == expected
    assert sim.epochs_run <= 8


def test_bad_input_names_the_argument():
    sim = SimulatedLoader()
    with pytest.raises(ValueError, match="batch_size"):
        sim.run(100, 1)
    with pytest.raises(ValueError, match="num_workers"):
        sim.run(64, 9)
    with pytest.raises(ValueError, match="num_workers"):
        sim.loader_alone(64, True)
    with pytest.raises(ValueError, match="decode_s"):
        SimulatedLoader(decode_s=-1)
    with pytest.raises(ValueError, match="cores"):
        SimulatedLoader(cores=0)
    with pytest.raises(TypeError, match="batch_sizes"):
        SimulatedLoader(batch_sizes=[])
    with pytest.raises(TypeError, match="sim"):
        cheapest_settings("sim", 100)
    with pytest.raises(ValueError, match="target_sps"):
        cheapest_settings(sim, 0)
    assert "16384 items" in repr(sim) and loader_sim.BATCH_SIZES == sim.batch_sizes
