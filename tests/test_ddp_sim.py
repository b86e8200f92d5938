"""gpucourse.parallel.ddp_sim: DDP's gradient synchronisation in threads (buckets, no_sync, averaging, messages)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from gpucourse import parallel
from gpucourse.parallel import ddp_sim


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(5, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))


def _batches(steps: int, ranks: int, k: int, rows: int = 4, seed: int = 1) -> list:
    g = torch.Generator().manual_seed(seed)
    return [[[(torch.randn(rows, 5, generator=g), torch.randn(rows, 1, generator=g)) for _ in range(k)]
             for _ in range(ranks)] for _ in range(steps)]


def _whole_batch(model: torch.nn.Module, batches: list, lr: float) -> dict:
    replica = copy.deepcopy(model)
    optimizer = torch.optim.SGD(replica.parameters(), lr=lr)
    for step in batches:
        optimizer.zero_grad()
        x, y = torch.cat([x for rank in step for x, _ in rank]), torch.cat([y for rank in step for _, y in rank])
        torch.nn.functional.mse_loss(replica(x), y).backward()
        optimizer.step()
    return {name: t.detach().numpy() for name, t in replica.state_dict().items()}


def _n_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


@pytest.mark.parametrize("ranks, k, steps", [(2, 1, 1), (2, 3, 2), (3, 2, 1)])
def test_accumulation_with_no_sync_matches_one_process_with_one_all_reduce_per_step(ranks, k, steps):
    model, batches = _model(), _batches(steps, ranks, k)
    run = parallel.run_data_parallel(parallel.accumulation_step, model, batches, lr=0.1)
    expected = _whole_batch(model, batches, 0.1)
    for weights in run.weights:
        for name, value in expected.items():
            np.testing.assert_allclose(weights[name], value, rtol=1e-5, atol=1e-6)
    assert run.syncs == (steps,) * ranks and run.replicas_identical
    assert [run.network.bytes_sent(r) for r in range(ranks)] == [steps * (ranks - 1) * _n_bytes(model)] * ranks
    assert run.network.undelivered == ()


def test_without_no_sync_every_micro_batch_all_reduces():
    model, batches = _model(), _batches(2, 2, 3)
    run = parallel.run_data_parallel(lambda *a: parallel.accumulation_step(*a, no_sync=False), model, batches)
    assert run.syncs == (6, 6)


def test_no_sync_is_decided_at_the_forward_pass_as_in_pytorch():
    """A forward outside no_sync and a backward inside it still all-reduces (DDP arms the reducer in forward)."""
    def backward_only_inside(ddp, optimizer, micro_batches, loss_fn):
        optimizer.zero_grad()
        for x, y in micro_batches:
            loss = loss_fn(ddp(x), y)
            with ddp.no_sync():
                loss.backward()
        optimizer.step()

    run = parallel.run_data_parallel(backward_only_inside, _model(), _batches(1, 2, 3))
    assert run.syncs == (3, 3)


def test_without_any_all_reduce_the_replicas_drift_apart():
    def never_sync(ddp, optimizer, micro_batches, loss_fn):
        optimizer.zero_grad()
        with ddp.no_sync():
            for x, y in micro_batches:
                loss_fn(ddp(x), y).backward()
        optimizer.step()

    run = parallel.run_data_parallel(never_sync, _model(), _batches(1, 2, 2))
    assert run.syncs == (0, 0) and not run.replicas_identical and run.network.messages == ()


def test_buckets_follow_the_backward_order_and_the_cap():
    model = _model()
    params = list(model.parameters())  # hidden.weight 160 B, hidden.bias 32 B, out.weight 32 B, out.bias 4 B
    buckets = ddp_sim._buckets(params, 100)
    assert [[tuple(p.shape) for p in bucket] for bucket in buckets] == [[(1,), (1, 8), (8,)], [(8, 5)]]
    assert len(ddp_sim._buckets(params, 25e6)) == 1
    run = parallel.run_data_parallel(parallel.accumulation_step, model, _batches(1, 2, 2), bucket_cap_mb=1e-4)
    assert sorted(m.nbytes for m in run.network.sent_by(0)) == [68, 160]


def test_default_bucket_is_pytorchs_25_mb():
    assert parallel.DEFAULT_BUCKET_CAP_MB == 25.0
    import inspect

    default = inspect.signature(torch.nn.parallel.DistributedDataParallel).parameters["bucket_cap_mb"].default
    assert default in (None, 25, 25.0)  # newer torch writes None and uses 25 MB inside


def test_an_error_in_a_rank_reaches_the_caller():
    def broken(ddp, optimizer, micro_batches, loss_fn):
        raise ValueError("rank failed on purpose")

    with pytest.raises(ValueError, match="on purpose"):
        parallel.run_data_parallel(broken, _model(), _batches(1, 2, 1))


@pytest.mark.parametrize("kwargs, error, name", [
    ({"step": None}, TypeError, "step"), ({"model": "net"}, TypeError, "model"), ({"batches": []}, TypeError, "batches"),
    ({"batches": [[[(1, 2)]]]}, TypeError, "batches"), ({"lr": 0}, ValueError, "lr"),
    ({"bucket_cap_mb": -1}, ValueError, "bucket_cap_mb"), ({"loss_fn": 3}, TypeError, "loss_fn")])
def test_run_data_parallel_validates(kwargs, error, name):
    arguments = {"step": parallel.accumulation_step, "model": _model(), "batches": _batches(1, 2, 1), **kwargs}
    step, model, batches = arguments.pop("step"), arguments.pop("model"), arguments.pop("batches")
    with pytest.raises(error, match=name):
        parallel.run_data_parallel(step, model, batches, **arguments)
