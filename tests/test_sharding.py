"""gpucourse.parallel.sharding: the ZeRO-2 optimizer and the FSDP2 exercise, their graders (real gloo processes), the
FSDP2 demonstration."""

from __future__ import annotations

import pytest
import torch

from gpucourse import parallel
from gpucourse.checks import CheckFailed, off_limits
from gpucourse.parallel import ZeroCase, fsdp, sharding


class _Summing(sharding._Zero2Adam):
    """The typical mistake: the reduce-scattered gradient is summed, not averaged."""

    def _reduce_scatter(self, p) -> None:
        p.grad.mul_(self.world)
        super()._reduce_scatter(p)


class _Kept(sharding._Zero2Adam):
    """p.grad never freed: the model answer's hook, then the gradient put back."""

    def _reduce_scatter(self, p) -> None:
        grad = p.grad
        super()._reduce_scatter(p)
        p.grad = grad


class _Stashed(sharding._Zero2Adam):
    """p.grad freed, but every full gradient kept in the object until step()."""

    def _reduce_scatter(self, p) -> None:
        self.stash = getattr(self, "stash", [])
        self.stash.append(p.grad)
        super()._reduce_scatter(p)

    def step(self) -> None:
        self.stash = []
        super().step()


class _AllReduce(sharding._Zero2Adam):
    """An all-reduce in the hook, the shard sliced out: right weights, the wrong collective."""

    def _reduce_scatter(self, p) -> None:
        part = self._part(p)
        flat = torch.nn.functional.pad(p.grad.reshape(-1), (0, part * self.world - p.numel()))
        self.dist.all_reduce(flat)
        self.grads[self.index[id(p)]] = flat[self.rank * part:(self.rank + 1) * part] / self.world
        p.grad = None


class _InStep(sharding._Zero2Adam):
    """ZeRO-1's memory: no hook; the full gradients reduce-scattered in step()."""

    def __init__(self, params, dist, **settings) -> None:
        super().__init__(params, dist, **settings)
        for handle in self.handles:
            handle.remove()

    def step(self) -> None:
        for p in self.params:
            self._reduce_scatter(p)
        super().step()


_STASH_ASIDE: list = []


class _StashedAside(sharding._Zero2Adam):
    """Every full gradient kept in a module-level list until step(): the object alone looks like ZeRO-2."""

    def _reduce_scatter(self, p) -> None:
        _STASH_ASIDE.append(p.grad)
        super()._reduce_scatter(p)

    def step(self) -> None:
        _STASH_ASIDE.clear()
        super().step()


class _HookOrder(sharding._Zero2Adam):
    """Shards paired with parameters by the order the hooks fire in (the k-th fired taken for the k-th parameter from
    the end): right when params come in a chain's model order, wrong in any other order."""

    def _reduce_scatter(self, p) -> None:
        super()._reduce_scatter(p)
        self.fired = getattr(self, "fired", [])
        self.fired.append(self.grads.pop(self.index[id(p)]))

    def step(self) -> None:
        self.grads = {len(self.params) - 1 - k: shard for k, shard in enumerate(self.fired)}
        self.fired = []
        super().step()


_KEPT_ASIDE: dict = {}


class _StateKeptAside(sharding._Zero2Adam):
    """The model answer, plus full-size m and v kept in a module global: the object alone looks sharded."""

    def step(self) -> None:
        if _KEPT_ASIDE.get("model") != id(self.params[0]):
            count = sum(p.numel() for p in self.params)
            _KEPT_ASIDE.update(model=id(self.params[0]), m=torch.zeros(count), v=torch.zeros(count))
        super().step()


def test_zero_case_counts_parameters_and_rejects_bad_settings():
    assert ZeroCase(sizes=(12, 20, 4)).parameters == 344 == sum(p.numel() for p in parallel.sized_mlp((12, 20, 4)).parameters())
    assert ZeroCase(sizes=(2, 1)).parameters == 3
    assert "shuffled (seed 4)" in ZeroCase(shuffle=4).label()
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


def test_the_gradient_probe_counts_live_gradients_and_what_the_optimizer_took_on():
    model = parallel.sized_mlp((6, 8, 2))  # 48 + 8 + 16 + 2 parameters
    params = list(model.parameters())
    probe = sharding._GradientProbe(params)
    holder = type("Holder", (), {})()
    holder.kept, holder.params = [torch.zeros(5)], params
    probe.watch(holder)
    probe.start()  # the 5 numbers held already are not gradient memory
    model(torch.ones(3, 6)).square().sum().backward()
    assert probe.peak == 4 * 74  # nobody frees p.grad: all of them at the last hook
    probe.remove()
    assert not any(p._post_accumulate_grad_hooks for p in params)


@pytest.mark.parametrize("world_size", [2, 3])
def test_the_grader_passes_the_model_answer_even_when_it_is_off_limits(world_size):
    cases = [ZeroCase(sizes=(5, 3, 2), seed=1, steps=2), ZeroCase(sizes=(6, 7, 3), seed=2, steps=3, lr=2e-2, eps=1e-2)]

    class Own(sharding._Zero2Adam):
        """The package's answer, reached through the private class."""

    with off_limits("gpucourse.parallel.Zero2Adam", exercise="a test", namespace={}):
        parallel.zero_check(Own, cases, shown=0, world_size=world_size)


@pytest.mark.parametrize("optimizer, message", [
    (_Summing, "parameters equal"), (_Kept, "still set after backward"), (_Stashed, "peak gradient bytes"),
    (_AllReduce, "collectives during backward"), (_InStep, "collectives during backward"),
    (_StateKeptAside, "keeps alive between steps, anywhere"), (_StashedAside, "still alive when it returns"),
    (_HookOrder, "pair each shard with its own parameter")])
def test_the_grader_names_what_is_wrong(optimizer, message):
    cases = [ZeroCase(sizes=(16, 33, 9), seed=5, steps=3, lr=3e-2, eps=1e-2, shuffle=1)]
    with pytest.raises(CheckFailed, match=message):
        parallel.zero_check(optimizer, cases, shown=0)


def test_pairing_by_hook_order_passes_a_chain_in_model_order_only():
    # the reason the graded cases shuffle: in model order the hook order of a chain of layers happens to fit
    parallel.zero_check(_HookOrder, [ZeroCase(sizes=(16, 33, 9), seed=5, steps=3, lr=3e-2, eps=1e-2)], shown=0)
    parallel.zero_check(sharding._Zero2Adam, [ZeroCase(sizes=(16, 33, 9), seed=5, steps=3, lr=3e-2, eps=1e-2,
                                                       shuffle=1)], shown=0)


def test_a_failing_rank_is_a_failed_check():
    class Crashing(sharding._Zero2Adam):
        def step(self) -> None:
            raise ValueError("no step")

    with pytest.raises(CheckFailed, match=r"rank \d raised ValueError: no step"):
        parallel.zero_check(Crashing, [ZeroCase()], shown=0)


def test_the_grader_rejects_bad_input():
    with pytest.raises(TypeError, match="optimizer_class"):
        parallel.zero_check("Zero2Adam", [ZeroCase()])
    with pytest.raises(TypeError, match="cases"):
        parallel.zero_check(parallel.Zero2Adam, [])
    with pytest.raises(TypeError, match="case"):
        parallel.run_zero2(parallel.Zero2Adam, (12, 20, 4))


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


class _Unwritten:
    """The student version of the exercise: not written yet."""

    def __init__(self, params, dist, lr=1e-3, betas=(0.9, 0.999), eps=1e-8) -> None:
        raise NotImplementedError()


def test_an_unwritten_class_raises_not_implemented_error_in_the_notebook():
    with pytest.raises(NotImplementedError):
        parallel.run_zero2(_Unwritten)


def _blocks_only(model, mesh, cap_bytes):
    """The typical FSDP2 mistake: every block sharded, the root left alone."""
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    return model


def _float32(model, mesh, cap_bytes):
    """Every block resharded, then the root, without a mixed-precision policy."""
    from torch.distributed.fsdp import fully_shard

    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _plan(*choices):
    """A shard function that applies a fixed plan (one of fsdp.CHOICES per block), in bfloat16."""

    def shard(model, mesh, cap_bytes):
        from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        for block, choice in zip(model.blocks, choices):
            if choice != "root":
                fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=choice == "reshard")
        fully_shard(model, mesh=mesh, mp_policy=policy)
        return model

    return shard


def test_block_net_is_seeded_with_blocks_of_their_own_sizes_and_a_root():
    first, second = parallel.block_net(parallel.FsdpCase(seed=3)), parallel.block_net(parallel.FsdpCase(seed=3))
    assert all(torch.equal(p, q) for p, q in zip(first.parameters(), second.parameters()))
    assert len(first.blocks) == 4 and first(torch.ones(5, 6)).shape == (5, 3)
    assert [block.fc1.out_features for block in first.blocks] == [16, 64, 8, 32]
    with pytest.raises(ValueError, match="hidden"):
        parallel.FsdpCase(hidden=())


def test_the_schedule_model_matches_the_bytes_fsdp_holds_gathered():
    """_plan_peak and _plan_calls against FSDP2 itself, odd widths (padding) on 3 ranks: the measured peak of gathered
    bytes and the all-gathers of a step, for plans with every kind of choice in every position."""
    import itertools

    case = parallel.FsdpCase(d_in=5, width=7, d_out=3, hidden=(10, 40, 5), steps=1)
    plans = list(itertools.product(fsdp.CHOICES, repeat=3))[::3]  # 9 of the 27, every choice in every position
    measured = parallel.launch(fsdp.plan_worker, 3, (case, plans), timeout_s=120)
    root, blocks, _ = fsdp._model_counts(parallel.block_net(case), 3)
    modelled = [(fsdp._plan_peak(root, blocks, plan), fsdp._plan_calls(plan)) for plan in plans]
    assert all(rank == modelled for rank in measured), (plans, modelled, measured)


@pytest.mark.parametrize("world_size, case", [
    (2, parallel.FsdpCase(d_in=6, width=12, d_out=12, hidden=(24, 96, 12, 48), cap=17_000)),
    (3, parallel.FsdpCase(d_in=4, width=12, d_out=12, hidden=(24, 84, 36), cap=12_000))])
def test_the_fsdp_grader_passes_the_model_answer_even_when_it_is_off_limits(world_size, case):
    cases = [case]
    with off_limits("gpucourse.parallel.fsdp_shard", exercise="a test", namespace={}):
        parallel.fsdp_check(fsdp._fsdp_shard, cases, shown=0, world_size=world_size)


@pytest.mark.parametrize("shard_fn, message", [
    (_blocks_only, "the root is sharded"), (_float32, "output dtype"),
    (_plan("reshard", "reshard", "reshard", "reshard"), "the fewest that fit the cap: 5"),
    (_plan("keep", "keep", "keep", "keep"), "within the cap"), (_plan("root", "root", "root", "root"), "within the cap")])
def test_the_fsdp_grader_names_what_is_wrong(shard_fn, message):
    case = parallel.FsdpCase(d_in=6, width=12, d_out=12, hidden=(24, 96, 12, 48), cap=17_000)
    with pytest.raises(CheckFailed, match=message):
        parallel.fsdp_check(shard_fn, [case], shown=0)


def test_the_best_plan_is_the_fewest_all_gathers_that_fit():
    case = parallel.FsdpCase(d_in=6, width=12, d_out=12, hidden=(24, 96, 12, 48), cap=17_000)
    assert fsdp._best_plan(case, 2) == (("root", "reshard", "keep", "keep"), 5, 16_728)
    assert fsdp._best_plan(parallel.FsdpCase(cap=10), 2) is None
    assert fsdp._plan_calls(("root", "keep", "reshard")) == 4
    with pytest.raises(ValueError, match="plan"):
        fsdp._plan_peak(10, [5, 5], ("root",))


def test_the_fsdp_grader_rejects_bad_input():
    with pytest.raises(TypeError, match="shard_fn"):
        parallel.fsdp_check("shard", [parallel.FsdpCase()])
    with pytest.raises(TypeError, match="cases"):
        parallel.fsdp_check(parallel.fsdp_shard, [ZeroCase()])
