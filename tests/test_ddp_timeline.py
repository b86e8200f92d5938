"""gpucourse.parallel.ddp_timeline: real collectives, the DDP bucket timeline.

Each launch of 2 gloo processes costs a few seconds here, so the module launches few times: the collectives and the
timeline in one (module fixture), every step function of the grader in one.
"""

from __future__ import annotations

import pytest

from gpucourse import parallel
from gpucourse.parallel import ddp_timeline


TINY = parallel.TrainConfig(features=8, hidden=16, batch=16, steps=3, lr=0.05, seed=0, warmup=1)


@pytest.fixture(scope="module")
def observed_run():
    """One launch: collectives, bandwidth of two sizes, timelines with one bucket and with several, one training."""
    return parallel.run_observed(2, numel=64, sizes=(4096, 65536), repeats=2, bucket_caps_mb=(25.0, 0.02),
                                 layers=4, width=64, batch=32, steps=2, trainings=[TINY], timeout_s=120)


@pytest.fixture(scope="module")
def observed(observed_run):
    """(collectives, timelines) of the launch."""
    return observed_run.collectives, observed_run.timelines


def test_training_in_the_same_launch_equals_one_process(observed_run):
    (ddp,) = observed_run.trainings
    assert ddp.backend == "gloo" and len(ddp.ranks) == 2 and ddp.replicas_identical
    assert 0 < ddp.wall_s <= observed_run.wall_s
    single = parallel.train_single(TINY, threads=1)
    assert parallel.max_difference(ddp.weights, single.weights) < 1e-5


def test_all_reduce_equals_reduce_scatter_then_all_gather(observed):
    collectives, _ = observed
    assert collectives.backend == "gloo" and collectives.same_result
    assert collectives.calls == (("all_reduce", 256), ("reduce_scatter", 256), ("all_gather", 256))
    # ring traffic per rank: 2(N-1)/N of the payload for the all-reduce, (N-1)/N for each half of the split
    assert collectives.ring_bytes_per_rank == {"all-reduce": 256.0, "reduce-scatter + all-gather": 256.0}


def test_bandwidth_rows(observed):
    collectives, _ = observed
    assert [row["bytes"] for row in collectives.bandwidth] == [4096, 65536]
    for row in collectives.bandwidth:
        assert row["median_ms"] > 0
        assert row["algbw_gb_s"] == pytest.approx(row["bytes"] / (row["median_ms"] / 1e3) / 1e9)
        assert row["busbw_gb_s"] == pytest.approx(row["algbw_gb_s"])  # 2(N-1)/N = 1 for N = 2


def test_timeline_buckets(observed):
    _, timelines = observed
    one, several = timelines
    assert one.bucket_cap_mb == 25.0 and len(one.buckets) == 1
    assert len(several.buckets) > 1
    for timeline in timelines:
        assert sum(b.bytes for b in timeline.buckets) == timeline.gradient_bytes == 4 * (64 * 64 + 64) * 4
        assert sorted(p for b in timeline.buckets for p in b.params) == sorted(timeline.ready_s)
        for bucket in timeline.buckets:
            assert 0 <= bucket.start_s <= bucket.end_s <= timeline.backward_s + 1e-3
            # a bucket's all-reduce starts only once every gradient in it is ready
            assert bucket.start_s >= max(timeline.ready_s[p] for p in bucket.params)
        assert 0 <= timeline.exposed_s <= timeline.backward_s
        assert timeline.last_ready_s == max(timeline.ready_s.values())
    # DDP fills buckets in reverse order: the last layer's gradients come first
    assert "6.weight" in several.buckets[0].params


def test_plot(observed):
    import matplotlib.pyplot as plt

    ax = parallel.plot_ddp_timeline(observed[1])
    assert len(ax.get_yticklabels()) == 2
    plt.close(ax.figure)
    with pytest.raises(TypeError, match="timelines"):
        parallel.plot_ddp_timeline([])


@pytest.mark.parametrize("kwargs, error, name", [
    ({"bucket_caps_mb": (0,)}, ValueError, "bucket_cap_mb"),
    ({"bucket_caps_mb": (-1.0,)}, ValueError, "bucket_cap_mb"),
    ({"bucket_caps_mb": "25"}, TypeError, "bucket_caps_mb"),
    ({"batch": 33}, ValueError, "batch"),
    ({"layers": 0}, ValueError, "layers"),
    ({"world_size": 0}, ValueError, "world_size"),
])
def test_timeline_bad_input(kwargs, error, name):
    with pytest.raises(error, match=name):
        parallel.run_ddp_timeline(**kwargs)


@pytest.mark.parametrize("kwargs, error, name", [
    ({"numel": 7}, ValueError, "numel"),
    ({"sizes": (6,)}, ValueError, "sizes"),
    ({"sizes": ()}, TypeError, "sizes"),
    ({"sizes": (0,)}, ValueError, "sizes"),
    ({"repeats": 0}, ValueError, "repeats"),
    ({"trainings": [parallel.TrainConfig(batch=63)]}, ValueError, "trainings"),
    ({"trainings": "TINY"}, TypeError, "trainings"),
])
def test_collectives_bad_input(kwargs, error, name):
    if "trainings" not in kwargs:
        with pytest.raises(error, match=name):
            parallel.run_collectives(**kwargs)
    with pytest.raises(error, match=name):
        parallel.run_observed(**kwargs)


def test_module_sizes():
    import inspect

    for module in (ddp_timeline,):
        assert len(inspect.getsource(module).splitlines()) <= 800
