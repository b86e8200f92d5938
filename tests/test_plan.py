"""Tests of gpucourse.parallel.plan: the cost model behind lesson 16's "choosing the mix" section and its example."""

from __future__ import annotations

import pytest

from gpucourse import parallel
from gpucourse.parallel import plan as cost
from gpucourse.parallel.plan import Batch, Cluster, Model, Plan


def _cluster(**changes) -> Cluster:
    """A 1-node, 4-GPU cluster with round numbers, changed by ``changes``."""
    base = dict(nodes=1, gpus_per_node=4, memory_gb=80, flops_per_gpu=100, intra_node_gb_s=100, inter_node_gb_s=10,
                efficiency=0.5)
    return Cluster(**{**base, **changes})


MODEL = Model(params=1e9, layers=4, hidden=1000, seq_len=1000, activation_bytes=10)


# ------------------------------------------------------------------------------------------------ validation

@pytest.mark.parametrize("build, error, name", [
    (lambda: Model(params=0, layers=4, hidden=8, seq_len=8), ValueError, "Model.params"),
    (lambda: Model(params=1e9, layers=2.5, hidden=8, seq_len=8), TypeError, "Model.layers"),
    (lambda: Model(params=1e9, layers=4, hidden=8, seq_len=8, bytes_per_param=-2), ValueError, "Model.bytes_per_param"),
    (lambda: _cluster(gpus_per_node=0), ValueError, "Cluster.gpus_per_node"),
    (lambda: _cluster(inter_node_gb_s=float("nan")), ValueError, "Cluster.inter_node_gb_s"),
    (lambda: _cluster(efficiency=1.5), ValueError, "Cluster.efficiency"),
    (lambda: Batch(global_batch=8, micro_batch=0), ValueError, "Batch.micro_batch"),
    (lambda: Plan(dp=0, tp=1, pp=1), ValueError, "Plan.dp"),
    (lambda: Plan(dp=1, tp=1, pp=1, zero=4), ValueError, "Plan.zero"),
    (lambda: Plan(dp=1, tp=1, pp=1, zero=True), ValueError, "Plan.zero"),
    (lambda: cost.memory_per_gpu_gb((4, 1, 1, 0), MODEL, _cluster(), Batch(8)), TypeError, "plan"),
    (lambda: cost.step_time_s(Plan(4, 1, 1), MODEL, "cluster", Batch(8)), TypeError, "cluster"),
    (lambda: cost.valid_plans(MODEL, _cluster(), 8), TypeError, "batch"),
    (lambda: cost.step_time_s(Plan(2, 1, 1), MODEL, _cluster(), Batch(8)), ValueError, "plan"),
    (lambda: cost.divisors(0), ValueError, "n"),
])
def test_bad_input_is_refused_by_name(build, error, name):
    with pytest.raises(error, match=name):
        build()


def test_numpy_integers_make_the_same_plan():
    import numpy as np

    plan = Plan(np.int64(4), np.int32(1), 1, np.int64(2))
    assert plan == Plan(4, 1, 1, 2) and type(plan.dp) is int and type(plan.zero) is int


def test_plan_problem_names_the_broken_constraint():
    model, cluster = Model(params=1e9, layers=6, hidden=1024, seq_len=8), _cluster()
    assert cost.plan_problem(Plan(4, 1, 1), model, cluster, Batch(8)) is None
    assert cost.plan_problem(Plan(1, 2, 2), model, cluster, Batch(8)) is None
    assert "4 GPUs" in cost.plan_problem(Plan(2, 1, 1), model, cluster, Batch(8))
    odd = Model(params=1e9, layers=6, hidden=1022, seq_len=8)
    assert "tp = 4 does not divide hidden" in cost.plan_problem(Plan(1, 4, 1), odd, cluster, Batch(8))
    assert "pp = 4 does not divide layers" in cost.plan_problem(Plan(1, 1, 4), model, cluster, Batch(8))
    assert "does not divide global_batch" in cost.plan_problem(Plan(4, 1, 1), model, cluster, Batch(6))


# ------------------------------------------------------------------------------------------------ memory

@pytest.mark.parametrize("zero, expected", [
    (0, {"weights": 2.0, "gradients": 2.0, "optimizer": 12.0}),
    (1, {"weights": 2.0, "gradients": 2.0, "optimizer": 3.0}),
    (2, {"weights": 2.0, "gradients": 0.5, "optimizer": 3.0}),
    (3, {"weights": 0.5, "gradients": 0.5, "optimizer": 3.0}),
])
def test_zero_stages_shard_optimizer_then_gradients_then_weights_over_dp(zero, expected):
    parts = cost.memory_breakdown_gb(Plan(4, 1, 1, zero), MODEL, _cluster(), Batch(8))
    assert {k: parts[k] for k in expected} == pytest.approx(expected)


def test_tp_and_pp_divide_the_model_states_and_1f1b_keeps_pp_microbatches():
    parts = cost.memory_breakdown_gb(Plan(1, 2, 2), MODEL, _cluster(), Batch(8, micro_batch=2))
    assert parts["weights"] == pytest.approx(0.5) and parts["optimizer"] == pytest.approx(3.0)
    # 2 * 1000 * 1000 * 10 bytes per layer / tp 2 = 1e7; 2 layers per stage; 2 micro-batches in flight
    assert parts["activations"] == pytest.approx(0.04)
    # one micro-batch per replica: only one in flight, even with 4 stages
    one = cost.memory_breakdown_gb(Plan(1, 1, 4), MODEL, _cluster(), Batch(1))
    assert one["activations"] == pytest.approx(1000 * 1000 * 10 * 1 / 1e9)
    assert cost.memory_per_gpu_gb(Plan(1, 2, 2), MODEL, _cluster(), Batch(8, 2)) == pytest.approx(sum(parts.values()))
    assert cost.fits(Plan(4, 1, 1, 0), MODEL, _cluster(memory_gb=16.5), Batch(8))
    assert not cost.fits(Plan(4, 1, 1, 0), MODEL, _cluster(memory_gb=16), Batch(8))


# ------------------------------------------------------------------------------------------------ time

def test_compute_is_six_flops_per_parameter_per_token_at_the_stated_efficiency():
    parts = cost.step_breakdown_s(Plan(4, 1, 1), MODEL, _cluster(), Batch(8))
    assert parts["compute"] == pytest.approx(6 * 1e9 * 8 * 1000 / (4 * 100e12 * 0.5))
    assert parts["tp"] == parts["pp"] == parts["bubble"] == 0
    # ring all-reduce of 2 GB of gradients over 4 GPUs on the intra-node link (100 GB/s)
    assert parts["dp"] == pytest.approx(2 * 3 / 4 * 2e9 / 100e9)
    assert cost.step_time_s(Plan(4, 1, 1), MODEL, _cluster(), Batch(8)) == pytest.approx(sum(parts.values()))


@pytest.mark.parametrize("pp, m", [(2, 1), (4, 4), (4, 16), (2, 8)])
def test_the_bubble_is_pp_minus_1_over_m_plus_pp_minus_1(pp, m):
    cluster = _cluster(gpus_per_node=pp)
    parts = cost.step_breakdown_s(Plan(1, 1, pp), MODEL, cluster, Batch(m))
    pipeline = parts["compute"] + parts["pp"] + parts["bubble"]
    assert parts["bubble"] / pipeline == pytest.approx((pp - 1) / (m + pp - 1))


def test_tp_across_nodes_is_much_slower_than_inside_a_node():
    cluster = _cluster(nodes=2, gpus_per_node=8, intra_node_gb_s=300, inter_node_gb_s=25)
    model = Model(params=1e10, layers=32, hidden=4096, seq_len=2048)
    inside = cost.step_breakdown_s(Plan(2, 8, 1), model, cluster, Batch(16))
    across = cost.step_breakdown_s(Plan(1, 16, 1), model, cluster, Batch(16))
    assert across["tp"] > 5 * inside["tp"]
    assert cost.step_time_s(Plan(1, 16, 1), model, cluster, Batch(16)) > cost.step_time_s(Plan(2, 8, 1), model, cluster,
                                                                                         Batch(16))


def test_dp_uses_the_slow_link_once_its_group_spans_nodes_and_zero3_moves_half_as_much_again():
    cluster = _cluster(nodes=2, gpus_per_node=4)
    batch = Batch(8)
    inside = cost.step_breakdown_s(Plan(4, 2, 1), MODEL, cluster, batch)["dp"]  # tp * dp = 8 > 4: across nodes
    assert inside == pytest.approx(2 * 3 / 4 * 1e9 / 10e9)
    assert cost.step_breakdown_s(Plan(2, 1, 4), MODEL, cluster, batch)["dp"] == pytest.approx(2 * 1 / 2 * 0.5e9 / 100e9)
    stages = [cost.step_breakdown_s(Plan(8, 1, 1, zero), MODEL, cluster, batch)["dp"] for zero in range(4)]
    assert stages[0] == stages[1] == stages[2] and stages[3] == pytest.approx(1.5 * stages[0])


# ------------------------------------------------------------------------------------------------ the solver

def test_valid_plans_meet_every_constraint_and_miss_none():
    model = Model(params=1e9, layers=6, hidden=1024, seq_len=8)
    cluster, batch = _cluster(nodes=3, gpus_per_node=4), Batch(12)
    plans = cost.valid_plans(model, cluster, batch)
    assert len(plans) == len(set(plans))
    expected = {Plan(dp, tp, pp, z) for dp in range(1, 13) for tp in range(1, 13) for pp in range(1, 13)
                for z in range(4) if dp * tp * pp == 12 and 1024 % tp == 0 and 6 % pp == 0 and 12 % dp == 0}
    assert set(plans) == expected
    assert cost.divisors(12) == [1, 2, 3, 4, 6, 12]


def test_best_plan_on_hand_checked_cases():
    model, batch = Model(params=1e9, layers=16, hidden=2048, seq_len=1000), Batch(32)  # about 12 * layers * hidden^2
    # fits everywhere: pure data parallelism (DP's all-reduce 0.03 s, TP's 0.13 s), ZeRO 0 (1 and 2 tie: lower wins)
    assert cost.step_breakdown_s(Plan(1, 4, 1), model, _cluster(), batch)["tp"] > 0.1
    assert cost.best_plan(model, _cluster(), batch) == Plan(4, 1, 1, 0)
    # 16 GB per GPU: ZeRO-0 needs 16 GB of states + 1.1 GB of activations; ZeRO-1 8.1 GB and ties on time
    assert cost.best_plan(model, _cluster(memory_gb=16), batch) == Plan(4, 1, 1, 1)
    # nothing fits in 0.1 GB
    assert cost.best_plan(MODEL, _cluster(memory_gb=0.1), Batch(8)) is None
    # a very slow link between nodes: no DP or TP group crosses it, the pipeline does (activations are small)
    slow = _cluster(nodes=2, gpus_per_node=2, inter_node_gb_s=0.01)
    best = cost.best_plan(Model(params=1e9, layers=4, hidden=1000, seq_len=100), slow, Batch(32))
    assert best.pp == 2 and best.tp * best.dp == 2


def test_the_notebook_example_has_a_plan_that_fits():
    label, model, cluster, batch = cost.example_case()
    best = cost.best_plan(model, cluster, batch)
    assert best is not None and cost.memory_per_gpu_gb(best, model, cluster, batch) <= cluster.memory_gb, label


def test_public_names_are_exported_from_gpucourse_parallel():
    for name in ("Model", "Cluster", "Batch", "Plan", "memory_per_gpu_gb", "step_time_s", "valid_plans", "best_plan"):
        assert getattr(parallel, name) is getattr(cost, name)
        assert name in parallel.__all__
