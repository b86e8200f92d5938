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


# --------------------------------------------------------------------------- long runs (make_run)

def epoch_reading(trace: throttle.TrainingTrace) -> list[str]:
    """The causes, read as lesson 09 teaches: each epoch against the first, new causes only, lasting two epochs."""
    per = round(trace.epoch_s / trace.interval_s)
    speed, wait = trace.throughput, trace.data_wait
    first = statistics.median(speed[:per])
    reasons_first = monitor.reason_shares(trace.samples[:per])
    memory = [s.value("gpu_mem_used") / s.value("gpu_mem_total") for s in trace.samples]
    full_from_start = statistics.median(memory[:per]) >= 0.9
    seen: dict[str, list[int]] = {}
    for k in range(1, len(trace) // per):
        window = slice(k * per, (k + 1) * per)
        if min(wait[k * per:k * per + 2]) > statistics.median(wait[window]) + 0.3:
            seen.setdefault("worker_restart", []).append(k)
        if statistics.median(speed[window]) >= 0.9 * first:
            continue
        reasons = monitor.reason_shares(trace.samples[window])
        found = {"thermal": reasons.get("thermal", 0) >= 0.5 > reasons_first.get("thermal", 0),
                 "power_cap": reasons.get("power cap", 0) >= 0.5 > reasons_first.get("power cap", 0),
                 "page_cache": statistics.median(wait[window]) >= 0.1,
                 "memory_thrash": statistics.median(memory[window]) >= 0.95 and not full_from_start}
        for cause in [cause for cause, shows in found.items() if shows]:
            seen.setdefault(cause, []).append(k)
    began = {cause: epochs[0] for cause, epochs in seen.items() if len(epochs) >= 2}
    return sorted(began, key=began.get)


def random_run(seed: int) -> tuple[list[str], dict]:
    """A run with zero, one or two causes three epochs apart or more, on a random device, interval and epoch."""
    draw = random.Random(seed)
    interval = draw.choice([2.0, 5.0, 10.0])
    epoch = interval * draw.choice([8, 12, 15])
    epochs = draw.randint(8, 14)
    count = draw.choice([0, 1, 1, 2, 2])
    causes = draw.sample(throttle.RUN_CAUSES, count)
    onsets = sorted(draw.sample(range(1, epochs - 3), count))
    if count == 2 and onsets[1] - onsets[0] < 3:
        onsets[1] = min(epochs - 4, onsets[0] + 3)
        if onsets[1] - onsets[0] < 3:
            causes, onsets = causes[:1], onsets[:1]
    plan = [(cause, onset * epoch + draw.uniform(0, 0.9 * epoch), draw.uniform(0.2, 0.5))
            for cause, onset in zip(causes, onsets)]
    settings = {"device": draw.choice(list(throttle.FAKE_DEVICES)), "seconds": epoch * epochs, "interval_s": interval,
                "epoch_s": epoch, "seed": seed, "capped": "power_cap" not in causes and draw.random() < 0.2,
                "reserved": "memory_thrash" not in causes and draw.random() < 0.2}
    return plan, settings


def test_an_epoch_by_epoch_reading_recovers_every_cause_in_order():
    for seed in range(80):
        plan, settings = random_run(seed)
        assert epoch_reading(throttle.make_run(plan, **settings)) == [cause for cause, *_ in plan], (plan, settings)


def test_a_mean_or_a_last_reading_is_fooled():
    """Late onsets hide in the mean; the last interval is slow in half the runs; the first cause hides the second."""
    mean_fooled = last_fooled = 0
    for seed in range(30):
        plan, settings = random_run(seed)
        trace = throttle.make_run(plan, **settings)
        per = round(trace.epoch_s / trace.interval_s)
        fell_on_average = statistics.mean(trace.throughput) < 0.9 * statistics.mean(trace.throughput[:per])
        mean_fooled += fell_on_average != bool(plan)
        last_fooled += (trace.throughput[-1] < 0.9 * trace.throughput[0]) != bool(plan)
    assert mean_fooled >= 2 and last_fooled >= 2, (mean_fooled, last_fooled)


def test_each_cause_of_a_run_leaves_its_signature_only_after_its_onset():
    def median_of(trace, key, epochs):
        per = round(trace.epoch_s / trace.interval_s)
        return statistics.median(trace.series(key)[epochs[0] * per:epochs[1] * per])

    hot = throttle.make_run([("thermal", 300)], device="T4", seed=0)
    assert median_of(hot, "gpu_temp", (0, 1)) < 80 and median_of(hot, "gpu_temp", (7, 10)) >= 85
    assert median_of(hot, "gpu_util", (7, 10)) >= 95 and median_of(hot, "gpu_sm_clock", (7, 10)) < 1400
    assert hot.epoch_starts()[:3] == [0.0, 60.0, 120.0] and len(hot) == 120
    graphics, sm = hot.series("gpu_graphics_clock"), hot.series("gpu_sm_clock")
    assert sum(g != s for g, s in zip(graphics, sm)) > len(hot) // 2   # every field its own value
    full = throttle.make_run([("memory_thrash", 200)], device="A100", seed=1)
    assert median_of(full, "gpu_mem_used", (0, 1)) < 0.7 * 40 and median_of(full, "gpu_mem_used", (5, 10)) > 0.97 * 40
    cache = throttle.make_run([("page_cache", 200)], device="L4", seed=2)
    assert median_of(cache, "data_wait", (0, 3)) < 0.05 and median_of(cache, "data_wait", (5, 10)) > 0.2
    assert median_of(cache, "host_page_cache", (5, 10)) >= 0.98 * cache.samples[0].value("host_page_cache_max")
    restart = throttle.make_run([("worker_restart", 60)], device="T4", seed=3, outliers=False)
    assert [restart.data_wait[k * 12] > 0.8 for k in range(10)] == [False] + [True] * 9
    steady = throttle.make_run([], device="T4", seed=4, capped=True, reserved=True)
    assert monitor.reason_shares(steady.samples[:12]).get("power cap") == 1.0
    assert median_of(steady, "gpu_mem_used", (0, 1)) > 0.95 * 15


def test_a_cause_can_clear_show_no_fall_and_checkpoints_wait_one_interval():
    def median_of(trace, key, epochs):
        per = round(trace.epoch_s / trace.interval_s)
        return statistics.median(trace.series(key)[epochs[0] * per:epochs[1] * per])

    cleared = throttle.make_run([("thermal", 60, 0.4, 240)], device="L4", seed=5)
    first = median_of(cleared, "throughput", (0, 1))
    assert median_of(cleared, "throughput", (2, 4)) < 0.85 * first
    assert median_of(cleared, "throughput", (6, 10)) > 0.95 * first
    assert monitor.reason_shares(cleared.samples[-24:]).get("thermal", 0) < 0.1
    quiet = throttle.make_run([("memory_thrash", 120, 0.03)], device="A100", seed=6)
    assert median_of(quiet, "gpu_mem_used", (5, 10)) > 0.97 * 40
    assert median_of(quiet, "throughput", (5, 10)) > 0.93 * median_of(quiet, "throughput", (0, 1))
    saved = throttle.make_run([], device="T4", seed=7, outliers=False, checkpoint_every=2)
    assert [saved.data_wait[k * 12] > 0.4 for k in range(6)] == [False, True, False, True, False, True]
    assert max(saved.data_wait[k * 12 + 1] for k in range(10)) < 0.1


def test_a_card_hot_from_the_start_or_a_flickering_reason_slows_nothing_and_is_no_cause():
    """hot: the reason thermal in every interval, the temperature at the slowdown point, from the first interval on;
    flicker: a reason in its share of each epoch's intervals from its onset on, spread evenly; neither slows the run."""
    per = 12
    for seed in range(6):
        hot = throttle.make_run([], device=("T4", "L4", "A100")[seed % 3], seed=seed, hot=True, outliers=False)
        assert all("thermal" in words for words in hot.reasons())
        assert min(hot.series("gpu_temp")) >= hot.slowdown_c - 1
        assert max(hot.series("gpu_sm_clock")) < 0.9 * hot.samples[0].value("gpu_sm_clock_max")
        first = statistics.median(hot.throughput[:per])
        assert all(statistics.median(hot.throughput[k * per:(k + 1) * per]) > 0.95 * first for k in range(10))
        assert epoch_reading(hot) == []
        for reason, word in (("thermal", "thermal"), ("power_cap", "power cap")):
            share = (0.1, 0.14, 0.18, 0.22, 0.26, 0.3)[seed]
            flickering = throttle.make_run([], device="L4", seed=seed, flicker=(reason, 130, share), outliers=False)
            shares = [monitor.reason_shares(flickering.samples[k * per:(k + 1) * per]).get(word, 0) for k in range(10)]
            assert shares[:2] == [0, 0] and shares[2] > 0, shares  # from 130 s on: part of epoch 2
            assert all(abs(got - share) <= 1 / per + 1e-9 for got in shares[3:]), (shares, share)
            assert epoch_reading(flickering) == []
    later = throttle.make_run([("page_cache", 250)], device="T4", seed=40, hot=True)
    assert epoch_reading(later) == ["page_cache"]
    assert statistics.median(later.series("gpu_temp")[-per:]) >= later.slowdown_c - 1  # the heat reading misleads
    capped = throttle.make_run([("power_cap", 200)], device="A100", seed=41, hot=True)
    assert epoch_reading(capped) == ["power_cap"]
    assert statistics.median(capped.series("gpu_power")[-per:]) >= 0.98 * 400  # at the cap, though hot
    for plan, flicker in (([("page_cache", 200)], ("power_cap", 130, 0.2)),
                          ([("memory_thrash", 250)], ("thermal", 120, 0.25))):
        assert epoch_reading(throttle.make_run(plan, device="L4", seed=42, flicker=flicker)) == [plan[0][0]]


def test_other_runs_draw_as_before_hot_and_flicker_draw_only_for_themselves():
    plain = throttle.make_run([("page_cache", 200)], device="L4", seed=3)
    assert plain == throttle.make_run([("page_cache", 200)], device="L4", seed=3, hot=False, flicker=None)
    assert plain.throughput[:3] == (3174.2, 3128.7, 3025.7)  # the draws of this seed before hot and flicker existed


def test_a_run_plots_its_memory_and_page_cache_too():
    import matplotlib

    matplotlib.use("Agg")
    figure = throttle.make_run([("page_cache", 200)], device="L4", seed=1).plot()
    labels = [axis.get_ylabel() for axis in figure.axes]
    assert labels[5:7] == ["GPU memory (GiB)", "page cache (GiB)"]
    import matplotlib.pyplot as plt

    plt.close(figure)


@pytest.mark.parametrize("call, message", [
    (lambda: throttle.make_run([("slow", 100)]), r"^cause must be one of"),
    (lambda: throttle.make_run(["thermal"]), r"^causes must hold \(cause, onset_s\)"),
    (lambda: throttle.make_run([("thermal", 100), ("thermal", 300)]), r"^each cause at most once"),
    (lambda: throttle.make_run([("thermal", 30)]), r"^onset of 'thermal' must lie between one epoch"),
    (lambda: throttle.make_run([("thermal", 500)]), r"^onset of 'thermal' must lie between one epoch"),
    (lambda: throttle.make_run([("thermal", 100, 0.9)]), r"^drop of .thermal. must be a share between 0.02 and 0.6"),
    (lambda: throttle.make_run([("thermal", 100, 0.3, 100)]), r"^end_s of .thermal. must lie after its onset"),
    (lambda: throttle.make_run(checkpoint_every=0), r"^checkpoint_every"),
    (lambda: throttle.make_run(drop=0.05), r"^drop must be a share between 0.15 and 0.6"),
    (lambda: throttle.make_run(epoch_s=20), r"^epoch_s must be a whole number of at least 8 intervals"),
    (lambda: throttle.make_run(seconds=200), r"^seconds must cover at least 4 epochs"),
    (lambda: throttle.make_run(device="H100"), r"^device must be one of"),
    (lambda: throttle.make_run(hot=1), r"^hot must be True or False"),
    (lambda: throttle.make_run([("thermal", 100)], hot=True), r"^hot=True plays a card at its slowdown point"),
    (lambda: throttle.make_run(flicker=("thermal", 100)), r"^flicker must be a \(reason, onset_s, share\) triple"),
    (lambda: throttle.make_run(flicker=("memory", 100, 0.2)), r"^flicker reason must be one of"),
    (lambda: throttle.make_run([("power_cap", 100)], flicker=("power_cap", 100, 0.2)), r"^a flicker of 'power_cap'"),
    (lambda: throttle.make_run(capped=True, flicker=("power_cap", 100, 0.2)), r"^a flicker of 'power_cap'"),
    (lambda: throttle.make_run(hot=True, flicker=("thermal", 100, 0.2)), r"^a flicker of 'thermal'"),
    (lambda: throttle.make_run(flicker=("thermal", 30, 0.2)), r"^flicker onset must lie between one epoch"),
    (lambda: throttle.make_run(flicker=("thermal", 100, 0.5)), r"^flicker share must lie between 0.05 and 0.3"),
])
def test_bad_runs_are_refused_naming_the_argument(call, message):
    with pytest.raises(ValueError, match=message):
        call()
