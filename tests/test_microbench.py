"""Tests of gpucourse.microbench: the simulated SM and memory hierarchy of lesson 01_architecture."""

from __future__ import annotations

import math

import pytest

from gpucourse.microbench import SimulatedMemory, SimulatedSM, cache_levels, fewest_warps, runs_made


def test_pointer_chase_reveals_the_latency() -> None:
    assert SimulatedSM(420, 8).pointer_chase(10) == 4200


def test_pointer_chase_adds_a_start_up_cost_and_bounded_jitter() -> None:
    sm = SimulatedSM(420, 8, chase_overhead=1000, jitter=30, seed=3)
    chases = [sm.pointer_chase(10) for _ in range(50)]
    assert all(5200 - 30 <= c <= 5200 + 30 for c in chases) and len(set(chases)) > 1


def test_one_warp_waits_most_of_the_time_and_many_warps_hide_the_latency() -> None:
    sm = SimulatedSM(400, 20, max_warps=64)
    one, many = sm.run(1), sm.run(64)
    assert one.busy == 21 / 420 and many.busy == 1.0
    assert [sm.run(w).busy for w in (1, 4, 16)] == sorted(sm.run(w).busy for w in (1, 4, 16))


def test_warps_are_split_round_robin_between_schedulers() -> None:
    sm = SimulatedSM(60, 7, max_warps=40, schedulers=4)      # 67 cycles per turn, 8 instructions: 9 warps fill one
    assert sm.run(34).busy < 1.0 and sm.run(35).busy < 1.0 and sm.run(36).busy == 1.0
    assert sm.run(9).busy == (3 * 8 + 3 * 2 * 8) / (4 * 67)             # 3, 2, 2 and 2 warps per scheduler


def test_runs_are_counted_on_every_sm() -> None:
    before = runs_made()
    SimulatedSM(100, 4).run(1)
    SimulatedSM(200, 4).run(2)
    assert runs_made() - before == 2


def test_fewest_warps_is_the_fewest() -> None:
    sm = SimulatedSM(380, 16, max_warps=48)
    warps = fewest_warps(sm, 0.9)
    assert sm.run(warps).busy >= 0.9 > sm.run(warps - 1).busy
    assert warps == math.ceil(0.9 * (380 + 16) / 17)


def test_fewest_warps_is_none_when_the_resident_limit_cannot_hide_the_latency() -> None:
    assert fewest_warps(SimulatedSM(450, 12, max_warps=16), 0.9) is None


def test_the_hidden_numbers_are_not_attributes() -> None:
    """An answer must measure the latency and the levels: no attribute of the instance holds them."""
    sm = SimulatedSM(420, 8, chase_overhead=1000)
    memory = SimulatedMemory([(48 * 2**10, 30)], 500, noise=0.0)
    for name in ("_latency", "latency", "latency_cycles"):
        assert not hasattr(sm, name)
    for name in ("_levels", "_dram", "levels", "caches", "dram_latency"):
        assert not hasattr(memory, name)
    assert 420 not in vars(sm).values() and 500.0 not in vars(memory).values()
    assert sm.pointer_chase(20) - sm.pointer_chase(10) == 4200 and memory.chase(2**20) == 500


def test_soft_edges_mix_two_levels_just_past_a_capacity() -> None:
    memory = SimulatedMemory([(48 * 2**10, 30), (6 * 2**20, 200)], 500, noise=0.0, soft_edges=True)
    assert memory.chase(48 * 2**10) == 30 and memory.chase(96 * 2**10) == 200
    assert 30 < memory.chase(64 * 2**10) < 200


def test_outliers_are_slow_probes_at_the_rate_asked() -> None:
    memory = SimulatedMemory([(2**15, 30)], 500, noise=0.0, outliers=0.1, seed=4)
    probes = [memory.chase(1024) for _ in range(2000)]
    slow = [p for p in probes if p > 30]
    assert 100 < len(slow) < 300 and all(60 <= p <= 240 for p in slow)
    with pytest.raises(ValueError, match="outliers"):
        SimulatedMemory([(2**15, 30)], 500, outliers=0.6)


@pytest.mark.parametrize("bad", [dict(latency_cycles=0, work_per_load=4), dict(latency_cycles=10, work_per_load=-1),
                                 dict(latency_cycles=10, work_per_load=4, max_warps=0)])
def test_bad_sm_arguments_name_the_argument(bad: dict) -> None:
    with pytest.raises(ValueError, match=next(k for k, v in bad.items() if v <= 0)):
        SimulatedSM(**bad)


def test_too_many_warps_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="max_warps"):
        SimulatedSM(100, 4, max_warps=8).run(9)


def test_chase_latency_is_the_smallest_level_that_holds_the_footprint() -> None:
    memory = SimulatedMemory([(2**15, 30), (2**22, 200)], 500, noise=0.0)
    assert [memory.chase(n) for n in (1024, 2**15, 2**15 + 1, 2**22, 2**30)] == [30, 30, 200, 200, 500]


def test_cache_levels_recovers_capacities_within_a_factor_of_two() -> None:
    levels = [(48 * 2**10, 5), (2 * 2**20, 16), (96 * 2**20, 60)]
    found = cache_levels(SimulatedMemory(levels, 320, noise=0.03, seed=2))
    assert len(found["caches"]) == 3
    for (capacity, latency), (got_capacity, got_latency) in zip(levels, found["caches"]):
        assert capacity / 2 < got_capacity <= capacity and got_latency == pytest.approx(latency, rel=0.05)
    assert found["dram_latency"] == pytest.approx(320, rel=0.05)


def test_bad_hierarchies_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="caches must grow"):
        SimulatedMemory([(2**20, 30), (2**15, 200)], 500)
    with pytest.raises(ValueError, match="dram_latency"):
        SimulatedMemory([(2**15, 30)], 10)
    with pytest.raises(TypeError, match=r"caches\[0\]"):
        SimulatedMemory([2**15], 10)


@pytest.mark.parametrize("latency, work, schedulers, warps", [(195, 5, 1, 25), (196, 5, 1, 25), (60, 7, 4, 9),
                                                               (500, 20, 2, 47), (613, 45, 4, 64), (1, 1, 3, 2)])
def test_the_cycle_by_cycle_run_agrees_with_littles_law(latency: int, work: int, schedulers: int, warps: int) -> None:
    """Each scheduler issues min(1, warps x (1 + work) / (latency + work)) per cycle in the steady state."""
    sm = SimulatedSM(latency, work, max_warps=64, schedulers=schedulers)
    share = [len(range(j, warps, schedulers)) for j in range(schedulers)]
    period = latency + work
    assert sm.run(warps).busy == sum(min(period, n * (1 + work)) for n in share) / (schedulers * period)
