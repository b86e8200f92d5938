"""gpucourse.parallel.sharding: the ZeRO step, its grader (real gloo processes) and the FSDP2 demonstration."""

from __future__ import annotations

import pytest
import torch

from gpucourse import parallel
from gpucourse.checks import CheckFailed, off_limits
from gpucourse.parallel import ZeroCase, sharding


def _summing_step(params: list, state: dict, dist, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8) -> None:
    """The ZeRO step with the typical mistake: the reduce-scattered gradient is summed, not averaged."""
    world = dist.get_world_size()
    for p in params:
        p.grad.mul_(world)
    parallel.sharding._zero_step(params, state, dist, lr, betas, eps)


def _all_reduce_step(params: list, state: dict, dist, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8) -> None:
    """Plain data-parallel Adam: all-reduce, full state on every rank."""
    for p in params:
        dist.all_reduce(p.grad)
        p.grad /= dist.get_world_size()
    if not state:
        state["adam"] = torch.optim.Adam(params, lr=lr, betas=betas, eps=eps)
        state["tensors"] = state["adam"].state
    state["adam"].step()


def test_zero_case_counts_parameters_and_rejects_bad_settings():
    assert ZeroCase(sizes=(12, 20, 4)).parameters == 344 == sum(p.numel() for p in parallel.sized_mlp((12, 20, 4)).parameters())
    assert ZeroCase(sizes=(2, 1)).parameters == 3
    with pytest.raises(TypeError, match="sizes"):
        ZeroCase(sizes=[3, 4])
    with pytest.raises(ValueError, match="rows"):
        ZeroCase(rows=0)
    with pytest.raises(ValueError, match="betas"):
        ZeroCase(betas=(0.9, 1.0))
    with pytest.raises(ValueError, match="lr"):
        ZeroCase(lr=-1.0)


def test_make_mlp_is_seeded_and_validates_its_sizes():
    first, second = parallel.sized_mlp((4, 8, 2), seed=3), parallel.sized_mlp((4, 8, 2), seed=3)
    assert all(torch.equal(p, q) for p, q in zip(first.parameters(), second.parameters()))
    assert [type(layer).__name__ for layer in first] == ["Linear", "Tanh", "Linear"]
    with pytest.raises(ValueError, match="sizes"):
        parallel.sized_mlp((4,))
    with pytest.raises(ValueError, match="sizes"):
        parallel.sized_mlp((4, 0))


def test_state_bytes_walks_containers_once_per_tensor():
    m = torch.zeros(10)
    assert parallel.state_bytes({"m": m, "v": torch.zeros(10, dtype=torch.float64), "step": 3}) == 40 + 80 + 8
    assert parallel.state_bytes([m, m, (m,)]) == 40  # the same tensor counted once
    assert parallel.state_bytes({"views": [m[:5], m[5:]]}) == 40
    assert parallel.state_bytes({}) == 0
    model = parallel.sized_mlp((8, 4))
    model(torch.ones(2, 8)).sum().backward()
    adam = torch.optim.Adam(model.parameters())
    adam.step()
    assert parallel.state_bytes(adam.state) >= 2 * 4 * 36


def test_the_grader_passes_the_model_answer_even_when_it_is_off_limits():
    cases = [ZeroCase(sizes=(5, 3, 2), seed=1, steps=2), ZeroCase(sizes=(6, 7, 3), seed=2, steps=3, lr=2e-2, eps=1e-2)]

    def own_step(params, state, dist, lr=1e-3, betas=(0.9, 0.999), eps=1e-8):
        """The package's answer, reached through the private function."""
        sharding._zero_step(params, state, dist, lr, betas, eps)

    with off_limits("gpucourse.parallel.zero_step", exercise="a test", namespace={}):
        parallel.zero_check(own_step, cases, shown=0)


_KEPT_ASIDE: dict = {}


def _state_kept_aside_step(params: list, state: dict, dist, lr: float = 1e-3, betas=(0.9, 0.999),
                           eps: float = 1e-8) -> None:
    """The model answer, plus full-size m and v kept in a module global: `state` alone looks sharded."""
    if _KEPT_ASIDE.get("model") != id(params[0]):
        count = sum(p.numel() for p in params)
        _KEPT_ASIDE.update(model=id(params[0]), m=torch.zeros(count), v=torch.zeros(count))
    parallel.sharding._zero_step(params, state, dist, lr, betas, eps)


@pytest.mark.parametrize("step, message", [(_summing_step, "parameters equal"), (_all_reduce_step, "keep alive"),
                                           (_state_kept_aside_step, "keep alive between steps, in `state` or anywhere")])
def test_the_grader_names_what_is_wrong(step, message):
    cases = [ZeroCase(sizes=(16, 33, 9), seed=5, steps=3, lr=3e-2, eps=1e-2)]
    with pytest.raises(CheckFailed, match=message):
        parallel.zero_check(step, cases, shown=0)


def test_the_grader_rejects_bad_input():
    with pytest.raises(TypeError, match="step_fn"):
        parallel.zero_check("zero_step", [ZeroCase()])
    with pytest.raises(TypeError, match="cases"):
        parallel.zero_check(parallel.zero_step, [])
    with pytest.raises(TypeError, match="case"):
        parallel.run_zero_step(parallel.zero_step, (12, 20, 4))


def test_fsdp_shards_parameters_and_gathers_them_in_forward_and_backward():
    resharded, kept = parallel.run_fsdp((8, 16, 4))
    assert resharded["reshard_after_forward"] and not kept["reshard_after_forward"]
    assert resharded["bytes_before"] == 4 * (8 * 16 + 16 + 16 * 4 + 4)
    assert resharded["bytes_after"] * 2 == resharded["bytes_before"]
    assert resharded["phases"]["forward"]["all_gather"]["calls"] == 2
    assert resharded["phases"]["backward"]["all_gather"]["calls"] >= 1
    assert resharded["phases"]["backward"]["reduce_scatter"]["calls"] == 2
    assert "all_gather" not in kept["phases"]["backward"]
    assert resharded["phases"]["optimizer"] == {}


def _unwritten_step(params: list, state: dict, dist, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8) -> None:
    """The student version of the exercise: not written yet."""
    raise NotImplementedError()


def test_an_unwritten_step_raises_not_implemented_error_in_the_notebook():
    with pytest.raises(NotImplementedError, match="_unwritten_step"):
        parallel.run_zero_step(_unwritten_step)
