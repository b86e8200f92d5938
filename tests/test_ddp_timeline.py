"""gpucourse.parallel.ddp_timeline and ddp_grading: real collectives, the DDP bucket timeline, the accumulation grader.

Each launch of 2 gloo processes costs a few seconds here, so the module launches few times: the collectives and the
timeline in one (module fixture), every step function of the grader in one.
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest

from gpucourse import parallel
from gpucourse.parallel import ddp_grading, ddp_timeline


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


# ------------------------------------------------------------------ the accumulation grader

def right_step(ddp, optimizer, micro_batches, loss_fn):
    """The model answer: no_sync for all but the last micro-batch, the loss divided by k, one step."""
    k = len(micro_batches)
    optimizer.zero_grad()
    for index, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if index == k - 1 else ddp.no_sync():
            (loss_fn(ddp(x), y) / k).backward()
    optimizer.step()


def every_micro_batch_syncs(ddp, optimizer, micro_batches, loss_fn):
    """No no_sync: right weights, k all-reduces per step."""
    optimizer.zero_grad()
    for x, y in micro_batches:
        (loss_fn(ddp(x), y) / len(micro_batches)).backward()
    optimizer.step()


def never_syncs(ddp, optimizer, micro_batches, loss_fn):
    """Everything inside no_sync: no all-reduce, replicas drift apart."""
    optimizer.zero_grad()
    with ddp.no_sync():
        for x, y in micro_batches:
            (loss_fn(ddp(x), y) / len(micro_batches)).backward()
    optimizer.step()


def loss_not_divided(ddp, optimizer, micro_batches, loss_fn):
    """One all-reduce, but k times too large a step."""
    k = len(micro_batches)
    optimizer.zero_grad()
    for index, (x, y) in enumerate(micro_batches):
        with contextlib.nullcontext() if index == k - 1 else ddp.no_sync():
            loss_fn(ddp(x), y).backward()
    optimizer.step()


def not_implemented(ddp, optimizer, micro_batches, loss_fn):
    """The untouched exercise."""
    raise NotImplementedError


STEPS = (right_step, every_micro_batch_syncs, never_syncs, loss_not_divided)
CASES = (ddp_grading.AccumulationCase(seed=1, k=3, steps=2),
         ddp_grading.AccumulationCase(seed=2, features=5, hidden=16, outputs=3, rows=2, k=2, steps=2,
                                      bucket_cap_mb=2e-4))


def _many_steps_worker(rank: int, world_size: int, steps: tuple, cases: tuple) -> list:
    """One group, every step function in turn (the grader's own worker launches once per step function)."""
    with parallel.process_group(rank, world_size) as dist:
        return [ddp_grading._run_cases(rank, world_size, dist, step, cases) for step in steps]


@pytest.fixture(scope="module")
def graded():
    """{step name: [AccumulationRun per case]}, all from one launch."""
    ranks = parallel.launch(_many_steps_worker, 2, (STEPS, CASES), timeout_s=120)
    return {step.__name__: ddp_grading._collect(CASES, [rank[i] for rank in ranks], 2) for i, step in enumerate(STEPS)}


def _weights_ok(run) -> bool:
    """Every rank's weights equal the whole-batch reference to the lesson's tolerance."""
    return all(np.allclose(w[k], run.expected[k], rtol=1e-5, atol=1e-6) for w in run.weights for k in run.expected)


def _one_round_per_step(run) -> bool:
    """Every rank all-reduced exactly the gradient's bytes in every step."""
    return all(sizes == (run.gradient_bytes,) * run.case.steps for sizes in run.allreduce_bytes)


def test_model_answer_passes(graded):
    for run in graded["right_step"]:
        assert _weights_ok(run) and _one_round_per_step(run) and run.replicas_identical
    small_buckets = graded["right_step"][1]
    assert small_buckets.allreduce_calls[0][-1] > 1  # several buckets: several calls, still one round of bytes


def test_wrong_answers_fail(graded):
    for run in graded["every_micro_batch_syncs"]:
        assert _weights_ok(run) and not _one_round_per_step(run)
        assert run.allreduce_bytes[0] == (run.case.k * run.gradient_bytes,) * run.case.steps
    for run in graded["never_syncs"]:
        assert not _weights_ok(run) and not run.replicas_identical and run.allreduce_bytes[0] == (0,) * run.case.steps
    for run in graded["loss_not_divided"]:
        assert not _weights_ok(run) and _one_round_per_step(run)


def test_not_implemented_reaches_the_notebook_as_such():
    with pytest.raises(NotImplementedError):
        parallel.run_accumulation(not_implemented, [ddp_grading.AccumulationCase()], timeout_s=60)


@pytest.mark.parametrize("kwargs, error, name", [
    ({"k": 0}, ValueError, "k"),
    ({"rows": -1}, ValueError, "rows"),
    ({"lr": 0}, ValueError, "lr"),
    ({"bucket_cap_mb": 0}, ValueError, "bucket_cap_mb"),
    ({"seed": -1}, ValueError, "seed"),
])
def test_case_bad_input(kwargs, error, name):
    with pytest.raises(error, match=name):
        ddp_grading.AccumulationCase(**kwargs)


def test_run_accumulation_bad_input():
    with pytest.raises(TypeError, match="step"):
        parallel.run_accumulation("not a function", [ddp_grading.AccumulationCase()])
    with pytest.raises(TypeError, match="cases"):
        parallel.run_accumulation(right_step, [])
    with pytest.raises(TypeError, match="cases"):
        parallel.run_accumulation(right_step, [{"k": 2}])
    with pytest.raises(ValueError, match="world_size"):
        parallel.run_accumulation(right_step, [ddp_grading.AccumulationCase()], world_size=0)


def test_module_sizes():
    import inspect

    for module in (ddp_timeline, ddp_grading):
        assert len(inspect.getsource(module).splitlines()) <= 800
