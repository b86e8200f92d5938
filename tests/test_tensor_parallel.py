"""gpucourse.parallel.tensor_parallel: the split MLP, its grader against the wrong answers, the DTensor demo.

The grader launches 2 gloo processes per call (~2-3 s here); answers whose split is wrong fail in the calling
process before any launch. ``SOLUTION`` is the notebook's model answer and ``WRONG_EX2`` the wrong answers of
tests/wrong_answers/16_model_parallelism.py, both read from their files.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
import torch

from gpucourse import parallel
from gpucourse.checks import CheckFailed, OffLimits, off_limits
from gpucourse.parallel import tensor_parallel as tp
from notebook_utils import cell_by_grade_id, load, release_path, solution_path, source, wrong_answer_sets

_NOTEBOOK, _RELEASE = load(solution_path("16_model_parallelism")), load(release_path("16_model_parallelism"))
SOLUTION = source(cell_by_grade_id(_NOTEBOOK, "ex2-solution"))
"""The notebook's model answer (solutions/16_model_parallelism), read from it: one source of truth."""
STUB = source(cell_by_grade_id(_RELEASE, "ex2-solution"))
"""The same cell as learners receive it (notebooks/16_model_parallelism)."""
_ROWS = "rows = slice(rank * part, (rank + 1) * part)"
_FORWARD_REGION = re.compile(r"(def tp_forward.*?)### BEGIN SOLUTION\n.*?### END SOLUTION\n?", re.S)

WRONG_EX2: dict[str, str] = wrong_answer_sets("16_model_parallelism", tampering=False)["ex2-solution"]
"""The notebook's wrong answers to the exercise (tests/wrong_answers/16_model_parallelism.py), each a full solution cell."""

# What each wrong answer's failure message must say (the problem, or its hint).
_EXPECTED_MESSAGE = {
    "constant": "fc1_local.weight holds", "helper": "off-limits", "visible_only": "fc1_local.weight has shape",
    "typical": "bias was summed", "all_gather_hidden": "all-gather", "columns_first": "fc1_local.weight has shape",
    "full_weights": "fc1_local.weight has shape", "views": "view of a bigger tensor", "average": "averaged",
    "no_all_reduce": "no all-reduce", "no_value_error": "ValueError",
    "forward_only": "the backward ran no all-reduce", "g_backward_sums": "g's backward must not all-reduce",
    "f_forward_sums": "the forward ran 2 all-reduce(s)", "f_backward_averages": "x.grad on rank 0 of 2 differs",
    "detached": "x.grad is None after loss.backward()", "two_ranks": "fc1_local.weight has shape",
    "g_raw_all_reduce": "a collective that autograd does not know", "no_device": "'meta' device",
}

_VISIBLE = list(tp.VISIBLE_CASES)
_HIDDEN = [(6, 20, 3, 1, "float64"), (12, 8, 10, 5, "float32"), (5, 32, 7, 4, "float64")]


def _cell(source: str) -> dict:
    """Run a solution cell's source in a fresh namespace, as the notebook would; its globals."""
    namespace: dict = {"__name__": "learner_cell"}
    exec(compile(source, "<solution cell>", "exec"), namespace)
    return namespace


def _grade(namespace: dict, cases: list, world_size: int = 2) -> list:
    """The test cell's grading, with the package's model answer off-limits."""
    with off_limits("gpucourse.parallel.tensor_parallel.shard_mlp", "gpucourse.parallel.tensor_parallel.tp_forward",
                    exercise="Exercise 2", namespace=namespace):
        return tp.check_tensor_parallel_mlp(namespace["shard_mlp"], namespace["tp_forward"], cases, seed=11,
                                            world_size=world_size, quiet=True)


def test_the_solution_cell_passes_visible_and_hidden_cases():
    results = _grade(_cell(SOLUTION), _VISIBLE + _HIDDEN)
    assert [len(reports) for reports in results] == [4, 4]
    assert all(not report["problem"] for reports in results for report in reports)
    for world_size, cases in ((3, _THREE_RANKS), (4, [(6, 16, 3, 3, "float32")])):
        results = _grade(_cell(SOLUTION), cases, world_size=world_size)
        assert len(results) == world_size and all(not r["problem"] for reports in results for r in reports)


def test_a_split_hard_coded_for_two_ranks_fails_on_three():
    assert _grade(_cell(WRONG_EX2["two_ranks"]), _VISIBLE)  # right where the visible test looks
    _assert_fails_saying_why("two_ranks", lambda: _grade(_cell(WRONG_EX2["two_ranks"]), _THREE_RANKS, world_size=3))


def test_untouched_f_and_g_raise_not_implemented_error_from_the_workers():
    stubbed = _cell(SOLUTION)
    for name in ("CopyToRanks", "ReduceFromRanks"):
        body = {"forward": staticmethod(lambda ctx, tensor, dist: (_ for _ in ()).throw(NotImplementedError())),
                "backward": staticmethod(lambda ctx, grad: (_ for _ in ()).throw(NotImplementedError()))}
        stubbed[name] = type(name, (torch.autograd.Function,), body)
    with pytest.raises(NotImplementedError):
        _grade(stubbed, _VISIBLE)


def test_wrong_answers_cover_every_kind():
    assert {"constant", "helper", "visible_only", "typical"} <= set(WRONG_EX2)
    assert len(WRONG_EX2) >= 5 and set(WRONG_EX2) == set(_EXPECTED_MESSAGE)


# Wrong answers whose split is right on the visible case: graded in the workers, all in one launch.
_IN_WORKERS = ("visible_only", "typical", "all_gather_hidden", "average", "no_all_reduce", "forward_only",
               "g_backward_sums", "f_forward_sums", "f_backward_averages", "detached", "g_raw_all_reduce")
# Right on 2 ranks, wrong on more: graded at 3 ranks.
_AT_THREE_RANKS = ("two_ranks",)
_THREE_RANKS = [(7, 24, 5, 2, "float64")]


def _many_answers_worker(rank: int, world_size: int, answers: dict, cases: list) -> dict:
    """Grade several answers in one process group (they all fail at the same case on every rank)."""
    with parallel.process_group(rank, world_size) as dist:
        return {kind: tp._grade_in_group(dist, rank, world_size, shard_fn, forward_fn, cases, 11)
                for kind, (shard_fn, forward_fn) in answers.items()}


def _assert_fails_saying_why(kind: str, grade: Callable[[], object]) -> None:
    """The wrong answer ``kind`` fails its grading with CheckFailed, a message naming its mistake, and a hint."""
    with pytest.raises(CheckFailed) as failure:
        grade()
    message = str(failure.value)
    assert _EXPECTED_MESSAGE[kind] in message, (kind, message)
    assert "Hint:" in message or kind == "helper", (kind, message)
    assert isinstance(failure.value, OffLimits) == (kind == "helper"), (kind, message)


@pytest.mark.parametrize("kind", sorted(set(WRONG_EX2) - set(_IN_WORKERS) - set(_AT_THREE_RANKS)))
def test_each_wrong_split_fails_before_any_launch(kind):
    _assert_fails_saying_why(kind, lambda: _grade(_cell(WRONG_EX2[kind]), _VISIBLE))


def test_each_wrong_forward_fails_in_the_workers_saying_why():
    answers = {kind: (_cell(WRONG_EX2[kind])["shard_mlp"], _cell(WRONG_EX2[kind])["tp_forward"])
               for kind in _IN_WORKERS}
    # Not a wrong answer of the notebook: a split wrong on rank 1 only, for hidden=20; the ranks must stop together.
    assert _ROWS in SOLUTION
    one_rank = _cell(SOLUTION.replace(_ROWS, "shift = -int(rank == 1 and hidden == 20)\n"
                                             "    rows = slice(rank * part + shift, (rank + 1) * part + shift)"))
    answers["one_rank"] = (one_rank["shard_mlp"], one_rank["tp_forward"])
    results = parallel.launch(_many_answers_worker, 2, (answers, _VISIBLE + _HIDDEN), timeout_s=120)
    for kind in _IN_WORKERS:
        _assert_fails_saying_why(kind, lambda: tp._raise_reports([ranks[kind] for ranks in results], "tp"))
    with pytest.raises(CheckFailed, match="rank 1's fc1_local.weight holds rows 9..18 of fc1.weight, expected "
                                          "rows 10..19"):
        tp._raise_reports([ranks["one_rank"] for ranks in results], "tp")
    assert [len(ranks["one_rank"]) for ranks in results] == [2, 2]  # both ranks stopped at the second case


def test_the_untouched_stub_fails_with_not_implemented_error_only():
    with pytest.raises(NotImplementedError):
        _grade(_cell(STUB), _VISIBLE)


def test_a_stub_forward_raises_not_implemented_error_from_the_workers():
    half_source, replaced = _FORWARD_REGION.subn(r"\1raise NotImplementedError()\n", SOLUTION)
    assert replaced == 1
    half = _cell(half_source)
    with pytest.raises(NotImplementedError, match="rank"):
        _grade(half, _VISIBLE)


def test_the_model_answer_splits_rows_then_columns_and_copies():
    fc1, fc2 = tp.make_mlp(4, 6, 3, seed=2, dtype="float64")
    fc1_local, fc2_local = parallel.shard_mlp(fc1, fc2, 1, 3)
    assert torch.equal(fc1_local.weight, fc1.weight[2:4]) and torch.equal(fc1_local.bias, fc1.bias[2:4])
    assert torch.equal(fc2_local.weight, fc2.weight[:, 2:4]) and torch.equal(fc2_local.bias, fc2.bias)
    assert fc2_local.weight.is_contiguous() and not tp._storage_holds_more(fc2_local.weight)
    assert tp._check_layers(fc1, fc2, fc1_local, fc2_local, 1, 3) is None


def test_bad_input_is_refused_naming_the_argument():
    fc1, fc2 = tp.make_mlp(4, 6, 3)
    with pytest.raises(ValueError, match="world_size"):
        parallel.shard_mlp(fc1, fc2, 0, 4)
    with pytest.raises(ValueError, match="rank"):
        parallel.shard_mlp(fc1, fc2, 3, 3)
    with pytest.raises(TypeError, match="fc1"):
        parallel.shard_mlp("fc1", fc2, 0, 2)
    with pytest.raises(ValueError, match="world_size"):
        tp.check_tensor_parallel_mlp(parallel.shard_mlp, parallel.tp_forward, [(4, 6, 3, 2, "float32")],
                                     world_size=4)
    with pytest.raises(ValueError, match="dtype"):
        tp.make_mlp(4, 6, 3, dtype="float16")
    with pytest.raises(TypeError, match="cases"):
        tp.check_tensor_parallel_mlp(parallel.shard_mlp, parallel.tp_forward, [(4, 6, 3)])
    with pytest.raises(TypeError, match="shard_fn"):
        tp.check_tensor_parallel_mlp(None, parallel.tp_forward)
    with pytest.raises(ValueError, match="world_size"):
        parallel.run_tp_demo(3, hidden=16)


def test_output_check_names_each_typical_mistake():
    fc1, fc2 = tp.make_mlp(5, 8, 3, seed=4, dtype="float64")
    x = torch.randn(2, 5, dtype=torch.float64)
    expected, bias = tp._reference_forward(x, fc1, fc2), fc2.bias.detach()
    assert tp._check_output(expected.clone(), expected, bias, 2, "float64") is None
    assert "summed" in tp._check_output(expected + bias, expected, bias, 2, "float64")[0]
    assert "averaged" in tp._check_output((expected - bias) / 2 + bias, expected, bias, 2, "float64")[0]
    assert "without fc2's bias" in tp._check_output(expected - bias, expected, bias, 2, "float64")[0]
    assert "shape" in tp._check_output(expected[:1], expected, bias, 2, "float64")[0]
    assert "returned list" in tp._check_output([1.0], expected, bias, 2, "float64")[0]


def test_a_hang_or_a_crash_in_a_rank_becomes_a_check_failure():
    with pytest.raises(CheckFailed, match="did not finish"):
        tp._fail_from_worker(parallel.WorkerTimeout("2 ranks still running after 5 s"), "tp")
    crash = parallel.WorkerError(1, 2, "RuntimeError: shapes do not match", "details")
    with pytest.raises(CheckFailed, match="rank 1 raised RuntimeError"):
        tp._fail_from_worker(crash, "tp")


def test_the_demo_matches_parallelize_module_and_counts_one_all_reduce_each_way():
    records = parallel.run_tp_demo(2, d=16, hidden=32, d_out=8, batch=4)
    assert [record["rank"] for record in records] == [0, 1]
    for record in records:
        for version in ("by_hand", "parallelize_module"):
            part = record[version]
            assert part["shapes"] == {"fc1.weight": (16, 16), "fc2.weight": (8, 16)}
            assert part["max_error"] < 1e-5
            assert part["forward"] == {"all_reduce": {"calls": 1, "bytes": 4 * 8 * 4, "in_backward": 0}}
            assert part["backward"]["all_reduce"]["calls"] == 1  # the gradient of x: 4 x 16
            assert part["backward"]["all_reduce"]["bytes"] == 4 * 16 * 4
    rows = parallel.tp_demo_rows(records)
    assert len(rows) == 4 and rows[1][1] == "parallelize module" and "backward: 1 all_reduce" in rows[1][5]


def test_layers_of_another_dtype_are_named():
    fc1, fc2 = tp.make_mlp(4, 6, 3, dtype="float64")
    fc1_local, fc2_local = parallel.shard_mlp(fc1, fc2, 0, 2)
    problem = tp._check_layers(fc1, fc2, fc1_local.float(), fc2_local, 0, 2)
    assert "float32, expected float64" in problem[0] and "dtype=" in problem[1]


def test_a_split_that_reads_a_value_is_told_why_the_grader_cannot_run_it():
    def reads_a_value(fc1, fc2, rank, world_size):
        assert torch.isfinite(fc1.weight).all()  # right on a GPU; the grader's meta-device run has no values
        raise AssertionError("not reached")

    fc1, fc2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)
    with pytest.raises(CheckFailed, match="reads a value") as failure:
        tp._check_split_follows_device(reads_a_value, fc1, fc2, 2, "shard_mlp")
    assert "leave value checks" in str(failure.value)
