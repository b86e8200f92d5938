"""gpucourse.parallel.comm: the collective counter, on real gloo processes (one launch for the module)."""

from __future__ import annotations

import pytest

from gpucourse import parallel
from gpucourse.parallel import comm


def _counted_worker(rank: int, world_size: int) -> dict:
    """Collectives of every kind the lessons use, each counted: plain, async, functional (DTensor), DDP, FSDP2."""
    import torch
    from torch.distributed._functional_collectives import all_gather_tensor
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel

    result = {}
    with parallel.process_group(rank, world_size) as dist:
        with comm.CommCounter() as counter:
            dist.all_reduce(torch.ones(10), async_op=True).wait()               # 40 bytes
            dist.reduce_scatter_tensor(torch.empty(3), torch.ones(3 * world_size))  # payload: the full input
            dist.all_gather_into_tensor(torch.empty(5 * world_size), torch.ones(5))  # payload: the full output
            with counter.phase("functional"):
                all_gather_tensor(torch.ones(7), 0, list(range(world_size))).wait()
        result["plain"] = [(c.kind, c.bytes, c.phase) for c in counter.calls]
        result["ring"] = counter.ring_bytes_per_rank(world_size)
        result["counts"] = (counter.count(), counter.count("all_gather"), counter.bytes("reduce_scatter"))
        torch.manual_seed(0)
        model = torch.nn.Linear(16, 4)
        ddp = DistributedDataParallel(model)
        with comm.CommCounter() as counter:
            ddp(torch.ones(2, 16)).sum().backward()
        result["ddp"] = counter.summary()
        sharded = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 4))
        for layer in sharded:
            fully_shard(layer)
        fully_shard(sharded)
        with comm.CommCounter() as counter:
            with counter.phase("forward"):
                loss = sharded(torch.ones(2, 16)).sum()
            with counter.phase("backward"):
                loss.backward()
        result["fsdp_forward"] = counter.summary("forward")
        result["fsdp_backward"] = counter.summary("backward")
    return result


@pytest.fixture(scope="module")
def counted():
    """Rank 0's record of one launch of 2 gloo processes."""
    return parallel.launch(_counted_worker, 2, timeout_s=120)[0]


def test_each_collective_is_recorded_with_its_whole_buffer(counted):
    assert counted["plain"] == [("all_reduce", 40, ""), ("reduce_scatter", 24, ""), ("all_gather", 40, ""),
                                ("all_gather", 56, "functional")]
    assert counted["counts"] == (4, 2, 24)


def test_ring_bytes_per_rank_follow_the_ring_formulas(counted):
    n = 2
    assert counted["ring"] == pytest.approx(40 * 2 * (n - 1) / n + (24 + 40 + 56) * (n - 1) / n)


def test_ddp_all_reduces_every_gradient_in_the_backward_pass(counted):
    row = counted["ddp"]["all_reduce"]
    assert row["bytes"] == (16 * 4 + 4) * 4 and row["in_backward"] == row["calls"] >= 1


def test_fsdp2_gathers_in_forward_and_backward_and_reduce_scatters_gradients(counted):
    forward, backward = counted["fsdp_forward"], counted["fsdp_backward"]
    assert set(forward) == {"all_gather"} and forward["all_gather"]["calls"] >= 2
    assert backward["reduce_scatter"]["bytes"] == (16 * 16 + 16 + 16 * 4 + 4) * 4


def test_the_demonstration_worker_shows_all_reduce_equals_reduce_scatter_then_all_gather():
    report = parallel.launch(comm.comm_counter_worker, 2)[0]
    assert report["same_result"] is True
    assert set(report["summary"]) == {"all_reduce", "reduce_scatter", "all_gather"}


def test_bad_input_is_named():
    counter = comm.CommCounter()
    with pytest.raises(ValueError, match="kind"):
        counter.count("allreduce")
    with pytest.raises(ValueError, match="world_size"):
        counter.ring_bytes_per_rank(0)
    with pytest.raises(ValueError, match="name"):
        with counter.phase(""):
            pass
