"""gpucourse.throttle: made-up training traces whose cause a careful reading recovers, and bad input refused."""

from __future__ import annotations

import itertools
import random
import statistics

import pytest

from gpucourse import monitor, throttle


def careful_reading(trace: throttle.TrainingTrace) -> str:
    """The cause, read as lesson 09 teaches: medians of windows, then reasons, then the loader's wait."""
    count = len(trace)
    last = slice(count - max(3, count // 3), count)
    if statistics.median(trace.throughput[last]) >= 0.9 * statistics.median(trace.throughput[:max(3, count // 10)]):
        return "none"
    reasons = monitor.reason_shares(trace.samples[last])
    if reasons.get("power cap", 0) >= 0.5:
        return "power_cap"
    if reasons.get("thermal", 0) >= 0.5:
        return "thermal"
    return "input_bound" if statistics.median(trace.data_wait[last]) >= 0.1 else "host_sync"


@pytest.mark.parametrize("cause, device", list(itertools.product(throttle.CAUSES, throttle.FAKE_DEVICES)))
def test_a_careful_reading_recovers_the_cause_over_many_seeds_lengths_and_falls(cause, device):
    for seed in range(12):
        draw = random.Random(seed)
        seconds = draw.choice([30, 60, 90])
        settings = {"device": device, "seed": seed, "seconds": seconds, "interval_s": draw.choice([0.5, 1.0]),
                    "onset_s": draw.uniform(0.15, 0.5) * seconds, "drop": draw.uniform(0.15, 0.6)}
        if cause == "power_cap":
            settings["hot"] = seed % 2 == 0
        if cause == "none":
            settings["capped"] = seed % 3 == 0
            settings["dip_at"] = draw.choice([0, seconds - 1, seconds / 2])
        trace = throttle.make_trace(cause, **settings)
        assert careful_reading(trace) == cause, settings


def test_each_cause_leaves_its_own_signature_in_the_last_third():
    def last_third(trace, key):
        values = trace.series(key)
        return statistics.median(values[-len(values) // 3:])

    capped = throttle.make_trace("power_cap", device="T4", seed=0)
    assert last_third(capped, "gpu_power") >= 0.98 * 70 and last_third(capped, "gpu_sm_clock") < 1590
    assert last_third(capped, "gpu_util") >= 95
    hot = throttle.make_trace("power_cap", device="A100", seed=1, hot=True)
    assert hot.slowdown_c - 8 <= last_third(hot, "gpu_temp") < hot.slowdown_c
    thermal = throttle.make_trace("thermal", device="L4", seed=2)
    assert last_third(thermal, "gpu_temp") >= thermal.slowdown_c - 1 and last_third(thermal, "gpu_power") < 0.9 * 72
    starved = throttle.make_trace("input_bound", device="T4", seed=3)
    assert last_third(starved, "data_wait") >= 0.2 and last_third(starved, "gpu_util") < 80
    assert "idle" in monitor.reason_shares(starved.samples[-len(starved) // 3:])
    synced = throttle.make_trace("host_sync", device="T4", seed=4)
    assert last_third(synced, "data_wait") < 0.05 and last_third(synced, "gpu_util") < 80
    assert last_third(synced, "process_cpu") >= 95 and last_third(synced, "gpu_sm_clock") == 1590
    assert not monitor.reason_shares(synced.samples)


def test_a_trace_is_repeatable_and_reads_like_monitor_samples():
    first, again = (throttle.make_trace("thermal", device="T4", seed=7) for _ in range(2))
    assert first == again and first != throttle.make_trace("thermal", device="T4", seed=8)
    assert len(first) == 60 and first.times()[:3] == [0.0, 1.0, 2.0]
    assert all(isinstance(sample, monitor.Snapshot) for sample in first.samples)
    assert first.samples[0]["gpu_power_limit"].formatted() == "70 W"
    assert "not a reading" in first.samples[0].note and first.device == "Tesla T4"
    assert set(monitor.summarise(first.samples)) >= {"gpu_util", "gpu_sm_clock", "gpu_throttle", "gpu_temp"}
    assert first.reasons()[0] == [] and "thermal" in first.reasons()[-1]
    table = first.table(every=10).splitlines()
    assert len(table) == 7 and table[0].split()[:3] == ["t", "(s)", "samples/s"] and table[-1].endswith("thermal")


def test_the_plot_draws_the_five_panels():
    import matplotlib

    matplotlib.use("Agg")
    figure = throttle.make_trace("input_bound", device="L4", seed=1).plot()
    labels = [axis.get_ylabel() for axis in figure.axes]
    assert labels[:5] == ["samples/s", "GPU util. %", "SM clock (MHz)", "power (W)", "temperature (C)"]
    assert "waiting for data" in labels
    import matplotlib.pyplot as plt

    plt.close(figure)


def test_every_cause_has_one_named_change_and_the_changes_are_explained():
    assert len(throttle.CAUSES) == 5 and "nothing" in throttle.CHANGES
    assert all(isinstance(text, str) and len(text) > 20 for text in throttle.CHANGES.values())


@pytest.mark.parametrize("call, error, message", [
    (lambda: throttle.make_trace("slow"), ValueError, r"^cause must be one of"),
    (lambda: throttle.make_trace("thermal", device="H100"), ValueError, r"^device must be one of \['T4', 'L4', 'A100'\]"),
    (lambda: throttle.make_trace("thermal", seconds=10), ValueError, r"^seconds must cover at least 20 intervals"),
    (lambda: throttle.make_trace("thermal", seconds=-1), ValueError, r"^seconds must be"),
    (lambda: throttle.make_trace("thermal", interval_s=0), ValueError, r"^interval_s must be"),
    (lambda: throttle.make_trace("thermal", onset_s=50), ValueError, r"^onset_s must lie between 10% and 55%"),
    (lambda: throttle.make_trace("thermal", drop=0.9), ValueError, r"^drop must be a share between 0.1 and 0.7"),
    (lambda: throttle.make_trace("thermal", drop="big"), ValueError, r"^drop must be a share"),
    (lambda: throttle.make_trace("thermal", capped=True), ValueError, r"^capped=True plays a card capped"),
    (lambda: throttle.make_trace("thermal").series("clock"), ValueError, r"^key must be one of \['throughput'"),
    (lambda: throttle.make_trace("thermal").table(every=0), ValueError, r"^every must be"),
])
def test_bad_input_is_refused_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()
