"""gpucourse.library_switches: TF32 emulation, the switches read and restored, reproducibility, the choice for a goal."""

from __future__ import annotations

import itertools
import os
import random

import numpy as np
import pytest
import torch

from gpucourse import library_switches as ls


def _frexp_tf32(values: np.ndarray) -> np.ndarray:
    mantissa, exponent = np.frexp(np.asarray(values, dtype=np.float64))
    return np.ldexp(np.rint(mantissa * 2.0**11) / 2.0**11, exponent).astype(np.float32)


def test_round_to_tf32_matches_an_independent_rounding() -> None:
    values = (np.random.default_rng(0).standard_normal(50_000) * 1e3).astype(np.float32)
    assert np.array_equal(ls.round_to_tf32(values), _frexp_tf32(values))


@pytest.mark.parametrize("value, expected", [(1 + 2**-11, 1.0), (1 + 3 * 2**-11, 1 + 2**-9), (1 + 3 * 2**-12, 1 + 2**-10),
                                             (-(1 + 3 * 2**-12), -(1 + 2**-10)), (0.0, 0.0)])
def test_round_to_tf32_ties_to_even(value: float, expected: float) -> None:
    assert float(ls.round_to_tf32(np.float32(value))) == expected


def test_round_to_tf32_special_values() -> None:
    out = ls.round_to_tf32(np.array([np.inf, -np.inf, np.nan, np.finfo(np.float32).max], dtype=np.float32))
    assert out[0] == np.inf and out[1] == -np.inf and np.isnan(out[2]) and out[3] == np.inf
    assert out.dtype == np.float32


def test_round_to_tf32_rejects_non_numbers() -> None:
    with pytest.raises(TypeError, match="values"):
        ls.round_to_tf32(np.array(["a"]))


def test_tf32_matmul_error_is_about_a_thousandth() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((128, 64)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    tf32 = ls.relative_error(ls.tf32_matmul(a, b), exact)
    assert 1e-5 < tf32 < 3e-3 and ls.relative_error(a @ b, exact) < 1e-5
    assert ls.tf32_matmul(a, b).dtype == np.float32


def test_relative_error_validates() -> None:
    with pytest.raises(ValueError, match="same shape"):
        ls.relative_error(np.ones(2), np.ones(3))
    with pytest.raises(ValueError, match="nonzero"):
        ls.relative_error(np.ones(2), np.zeros(2))


def test_make_reproducible_sets_every_switch_and_seed_and_preserved_state_restores() -> None:
    before = ls.library_state()
    with ls.preserved_state():
        ls.make_reproducible(11)
        state = ls.library_state()
        draws = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    assert state["deterministic_algorithms"] and state["cudnn.deterministic"] and not state["cudnn.benchmark"]
    assert state["CUBLAS_WORKSPACE_CONFIG"] == ls.CUBLAS_WORKSPACE_CONFIG
    assert draws == (random.Random(11).random(), float(np.random.RandomState(11).rand()),
                     float(torch.rand(1, generator=torch.Generator().manual_seed(11))))
    assert ls.library_state() == before
    assert os.environ.get("CUBLAS_WORKSPACE_CONFIG") == before["CUBLAS_WORKSPACE_CONFIG"]


@pytest.mark.parametrize("seed", [-1, 1.5, True, "0"])
def test_make_reproducible_rejects_bad_seeds(seed: object) -> None:
    with pytest.raises(ValueError, match="seed"):
        ls.make_reproducible(seed)


def test_choose_switches_over_every_goal() -> None:
    for fixed, repeat, exact in itertools.product((False, True), repeat=3):
        answer = ls.choose_switches({"fixed_shapes": fixed, "repeatable": repeat, "match_float32": exact})
        assert list(answer) == list(ls.SWITCH_KEYS)
        must_repeat = repeat or exact
        assert answer["cudnn.benchmark"] == (fixed and not must_repeat)
        assert answer["deterministic_algorithms"] == answer["tf_op_determinism"] == must_repeat
        assert answer["tf32"] == (not exact)
        assert answer["CUBLAS_WORKSPACE_CONFIG"] == (ls.CUBLAS_WORKSPACE_CONFIG if must_repeat else None)


def test_choose_switches_validates_the_goal() -> None:
    with pytest.raises(ValueError, match="keys"):
        ls.choose_switches({"fixed_shapes": True})
    with pytest.raises(TypeError, match="repeatable"):
        ls.choose_switches({"fixed_shapes": True, "repeatable": 1, "match_float32": False})
    with pytest.raises(TypeError, match="goal"):
        ls.choose_switches(["fixed_shapes"])


def test_apply_switches_sets_torch_and_is_undone_by_preserved_state() -> None:
    before = ls.library_state()
    strict = ls.choose_switches({"fixed_shapes": True, "repeatable": True, "match_float32": True})
    with ls.preserved_state():
        ls.apply_switches(strict)
        state = ls.library_state()
        assert state["float32_matmul_precision"] == "highest" and not state["cudnn.allow_tf32"]
        assert state["deterministic_algorithms"] and state["CUBLAS_WORKSPACE_CONFIG"] == ls.CUBLAS_WORKSPACE_CONFIG
    assert ls.library_state() == before
    with pytest.raises(ValueError, match="settings"):
        ls.apply_switches({"tf32": True})


def test_cpu_libraries_reports_strings() -> None:
    found = ls.cpu_libraries()
    assert set(found) == {"oneDNN usable", "oneDNN version", "BLAS"}
    assert all(isinstance(value, str) for value in found.values())


def test_atomic_order_sum_adds_in_float32_and_the_order_changes_the_bits() -> None:
    values = torch.randn(6, 40, generator=torch.Generator().manual_seed(0))
    in_order = ls.atomic_order_sum(values, torch.Generator().manual_seed(1), reorder=False)
    expected = values[..., 0].clone()
    for i in range(1, 40):
        expected = expected + values[..., i]
    assert torch.equal(in_order, expected) and in_order.dtype == torch.float32 and in_order.shape == (6,)
    shuffled = ls.atomic_order_sum(values, torch.Generator().manual_seed(1), reorder=True)
    assert not torch.equal(shuffled, in_order) and torch.allclose(shuffled, in_order)
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        ls.atomic_order_sum(values.numpy(), torch.Generator(), True)
    with pytest.raises(TypeError, match="generator"):
        ls.atomic_order_sum(values, 1, True)
    with pytest.raises(ValueError, match="last dimension"):
        ls.atomic_order_sum(torch.zeros(3, 0), torch.Generator(), True)


@pytest.mark.parametrize("chance", [0.0, 0.5, 1.0])
def test_atomic_sum_changes_its_bits_at_least_once_per_period(chance: float) -> None:
    module = ls.atomic_sum(seed=3, chance=chance, period=4)
    x = torch.randn(3, 5, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        outputs = [module(x) for _ in range(12)]
    assert type(module).__name__ == "AtomicSum" and "flagged=True" in repr(module)
    for start in range(0, 9):
        window = outputs[start:start + 4]
        assert any(not torch.equal(window[0], out) for out in window[1:])
    assert any(not torch.equal(outputs[0], out) for out in outputs)
    assert all(torch.allclose(outputs[0], out, atol=1e-5) for out in outputs)
    assert outputs[0].shape == (3, 5)


def test_atomic_sum_raises_under_deterministic_algorithms_only_when_flagged() -> None:
    x = torch.randn(2, 8)
    before = torch.are_deterministic_algorithms_enabled()
    try:
        torch.use_deterministic_algorithms(True)
        with pytest.raises(RuntimeError, match="deterministic implementation"):
            ls.atomic_sum(flagged=True)(x)
        assert ls.atomic_sum(flagged=False)(x).shape == (2,)
        torch.use_deterministic_algorithms(True, warn_only=True)  # PyTorch's flagged ops warn and run: so does it
        with pytest.warns(UserWarning, match="deterministic implementation"):
            assert ls.atomic_sum(flagged=True)(x).shape == (2,)
    finally:
        torch.use_deterministic_algorithms(before)
    with pytest.raises(TypeError, match="seed"):
        ls.atomic_sum(seed=1.5)
    with pytest.raises(ValueError, match="chance"):
        ls.atomic_sum(chance=2.0)
    with pytest.raises(ValueError, match="period"):
        ls.atomic_sum(period=0)


def _lesson_07_cell(starts: str) -> dict:
    """Lesson 07's handed-over record_calls and its model answer of Exercise 3, run in a fresh namespace."""
    from notebook_utils import cell_by_grade_id, load, solution_path, source

    cells = load(solution_path("07_gpu_libraries"))["cells"]
    names: dict = {"torch": torch, "nn": torch.nn}
    exec(next(source(c) for c in cells if source(c).startswith(starts)).split("\n\n\n# Example")[0], names)
    exec(source(cell_by_grade_id({"cells": cells}, "ex3-solution")), names)
    return names


def test_lesson_07_record_calls_copies_tensors_inside_tuples_and_keeps_other_values() -> None:
    """Review 07 v3r10 m2: nn.LSTM, nn.LSTMCell and nn.TransformerEncoderLayer return tuples or take keywords."""
    from torch import nn

    names = _lesson_07_cell("def record_calls")
    record_calls = names["record_calls"]
    torch.manual_seed(0)
    with torch.no_grad():
        lstm = nn.LSTM(4, 6)
        x = torch.randn(3, 2, 4)
        ((name, inputs, output),) = record_calls(nn.Sequential(lstm), x)   # a Sequential of one: output passes through
        y, (h, c) = lstm(x)
        assert name == "0" and len(inputs) == 1 and torch.equal(inputs[0], x)
        assert isinstance(output, tuple) and torch.equal(output[0], y) and torch.equal(output[1][1], c)
        assert output[0] is not y and output[1][0].data_ptr() != h.data_ptr()   # copies, not the module's tensors

        class Cell(nn.Module):   # a module that takes a non-tensor argument and a tuple of tensors
            def __init__(self) -> None:
                super().__init__()
                self.cell = nn.LSTMCell(4, 5)

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                state = None
                for step in x:
                    state = self.cell(step, state)
                return state[0]

        calls = record_calls(Cell(), x)
        assert [name for name, _, _ in calls] == ["cell"] * 3
        assert calls[0][1][1] is None and isinstance(calls[1][1][1], tuple) and len(calls[1][1][1]) == 2
        assert all(isinstance(out, tuple) and len(out) == 2 for _, _, out in calls)

        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)   # training mode: no fast path, every submodule runs
        calls = record_calls(layer, torch.randn(3, 2, 8))
        attention = next(call for call in calls if call[0] == "self_attn")
        assert len(attention[1]) >= 3 and isinstance(attention[2], tuple)   # query, key, value and keywords; a tuple
        assert [name for name, _, _ in calls][-1] == "norm2"

        class InPlace(nn.Module):
            def forward(self, x: torch.Tensor) -> torch.Tensor:
                return x.mul_(2)

        x = torch.ones(2)
        ((_, inputs, output),) = record_calls(nn.Sequential(InPlace()), x)
        assert torch.equal(inputs[0], torch.ones(2)) and torch.equal(output, torch.full((2,), 2.0))   # copied before


def test_lesson_07_model_answer_reads_tuple_outputs() -> None:
    """The model answer of Exercise 3 compares tuples bit for bit: an LSTM before the culprit, and none."""
    from torch import nn

    names = _lesson_07_cell("def record_calls")
    find = names["find_nondeterministic"]

    class Model(nn.Module):
        def __init__(self, culprit: bool) -> None:
            super().__init__()
            self.lstm = nn.LSTM(4, 8, batch_first=True)
            self.pool = ls.atomic_sum(seed=3) if culprit else nn.Identity()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y, _ = self.lstm(x)
            return self.pool(y)

    class Cells(nn.Module):   # an RNN cell run once per time step: None as its first state, tuples after
        def __init__(self, culprit: bool) -> None:
            super().__init__()
            self.cell = nn.LSTMCell(4, 8)
            self.pool = ls.atomic_sum(seed=4) if culprit else nn.Identity()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            state = None
            for step in x.unbind(1):
                state = self.cell(step, state)
            return self.pool(state[0].unflatten(1, (2, 4)))

    torch.manual_seed(0)
    x = torch.randn(2, 5, 4)
    for model in (Model, Cells):
        assert find(model(culprit=True), x) == "pool", model
        assert find(model(culprit=False), x) is None, model
