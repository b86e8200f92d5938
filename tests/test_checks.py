"""Tests of gpucourse.checks: a right answer ticks on stdout, a wrong one says what differs and hints at a fix."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucourse.checks import CheckFailed, check, check_raises

PROPERTY = settings(deadline=None, max_examples=50, derandomize=True, database=None)
HINT = "FLOPs of a matmul are 2*m*n*k"


def failure(yours, expected, **kwargs) -> str:
    """The message check() raises for a wrong answer."""
    with pytest.raises(CheckFailed) as info:
        check("ex1", yours, expected, hint=HINT, **kwargs)
    return str(info.value)


# --------------------------------------------------------------------------- right answers

@pytest.mark.parametrize("yours, expected", [
    (48, 48), (48.0, 48), (np.int64(48), 48), (np.float32(0.5), 0.5), (True, True), (False, False),
    ("memory", "memory"), ([1.0, 2.0], [1, 2]), (np.eye(2), [[1, 0], [0, 1]]), ((1, 2, 3), np.array([1, 2, 3])),
    ({"a": 1, "b": [1, 2]}, {"a": 1.0, "b": [1, 2]}), (np.True_, True), (np.float64(1e-7), 0.0),
], ids=repr)
def test_right_answers_print_a_tick_to_stdout_and_nothing_to_stderr(capsys, yours, expected):
    check("ex1", yours, expected, atol=1e-6)
    out, err = capsys.readouterr()
    assert out == "\N{CHECK MARK} ex1\n"
    assert err == ""


def test_quiet_right_answer_prints_nothing(capsys):
    check("ex1", 1, 1, quiet=True)
    assert capsys.readouterr() == ("", "")


def test_wrong_answer_writes_nothing_to_stderr(capsys):
    with pytest.raises(CheckFailed):
        check("ex1", 47, 48)
    assert capsys.readouterr() == ("", "")


def test_check_failed_is_an_assertion_error():
    """nbgrader and pytest both count an AssertionError as a failed test."""
    assert issubclass(CheckFailed, AssertionError)


# --------------------------------------------------------------------------- wrong answers

def test_wrong_number_says_yours_expected_the_ratio_and_the_hint():
    message = failure(24, 48)
    assert message.startswith("ex1: yours 24, expected 48 (0.5x the expected value)")
    assert message.endswith(f"Hint: {HINT}")


def test_wrong_number_without_a_hint_has_no_hint_line():
    with pytest.raises(CheckFailed) as info:
        check("ex1", 1, 2)
    assert "Hint" not in str(info.value)


def test_a_wrong_expected_zero_gives_no_ratio():
    assert "x the expected value" not in failure(1.0, 0.0)


@pytest.mark.parametrize("yours", ["48", b"48", [48], {"value": 48}], ids=repr)
def test_a_non_number_where_a_number_is_expected_names_its_type(yours):
    message = failure(yours, 48)
    assert f"yours is {type(yours).__name__}" in message and "expected a number close to 48" in message


def test_a_bool_is_not_accepted_as_a_number():
    assert "yours is bool True, expected a number close to 1" in failure(True, 1)


def test_an_int_is_not_accepted_as_a_bool():
    assert "yours is int 1, expected a bool (True)" in failure(1, True)


def test_the_wrong_bool_says_so():
    assert "yours False, expected True" in failure(False, True)


def test_a_numpy_bool_is_compared_as_a_bool():
    assert "yours False, expected True" in failure(np.False_, True)


@pytest.mark.parametrize("expected", [48, 0.5, True, "compute", [1, 2], {"a": 1}], ids=repr)
def test_none_asks_whether_the_function_forgot_to_return(expected):
    message = failure(None, expected)
    assert "yours is None: did the function forget to `return` its result?" in message
    assert f"Hint: {HINT}" in message


def test_nan_is_reported_as_nan():
    assert "yours is NaN, expected 48" in failure(float("nan"), 48)


def test_infinity_is_wrong():
    assert "yours inf, expected 48" in failure(math.inf, 48)


def test_wrong_string():
    assert "yours 'memory', expected 'compute'" in failure("memory", "compute")


def test_wrong_shape_says_both_shapes():
    assert "yours has shape (3,), expected (2, 2)" in failure([1, 2, 3], [[1, 2], [3, 4]])


def test_array_differences_are_counted_and_the_first_located():
    message = failure([[1, 2], [3, 5]], [[1, 2], [3, 4]])
    assert "1 of 4 values differ; first at index (1, 1): yours 5, expected 4" in message


def test_nan_inside_an_array_is_a_difference():
    assert "first at index (1,): yours nan" in failure([1.0, float("nan")], [1.0, 2.0])


class Opaque:
    """An answer numpy cannot turn into numbers (with a stable repr, so test ids agree across xdist workers)."""

    def __repr__(self) -> str:
        return "Opaque()"


@pytest.mark.parametrize("yours", ["abc", [[1, 2], [3]], {"a": 1}, Opaque()], ids=repr)
def test_something_that_is_not_numbers_where_an_array_is_expected(yours):
    message = failure(yours, [1, 2])
    assert f"yours is {type(yours).__name__}" in message and "expected numbers of shape (2,)" in message


def test_a_non_array_answer_raises_without_a_chained_numpy_traceback():
    with pytest.raises(CheckFailed) as info:
        check("ex1", "abc", [1, 2])
    assert info.value.__context__ is None


def test_dict_key_mismatch_lists_both_key_sets():
    assert "yours has keys ['a', 'c'], expected ['a', 'b']" in failure({"a": 1, "c": 2}, {"a": 1, "b": 2})


def test_dict_expected_but_something_else_given():
    assert "yours is list, expected a dict with keys ['a', 'b']" in failure([1, 2], {"a": 1, "b": 2})


def test_dict_with_mixed_key_types_expected_but_a_list_given():
    assert "expected a dict with keys ['1', 'a']" in failure([1, 2], {1: 1, "a": 2})


def test_dict_value_mismatch_names_the_key():
    message = failure({"params": 100, "grads": 100}, {"params": 100, "grads": 200})
    assert message.startswith("ex1['grads']: yours 100, expected 200")
    assert f"Hint: {HINT}" in message


# --------------------------------------------------------------------------- tolerances

def test_rtol_decides_how_close_is_close_enough(capsys):
    check("ex1", 101.0, 100.0, rtol=0.02)
    with pytest.raises(CheckFailed):
        check("ex1", 103.0, 100.0, rtol=0.02)


def test_atol_allows_an_absolute_error_around_zero():
    check("ex1", 1e-9, 0.0, atol=1e-8, quiet=True)
    with pytest.raises(CheckFailed):
        check("ex1", 1e-7, 0.0, atol=1e-8, quiet=True)


def test_default_tolerance_is_tight():
    with pytest.raises(CheckFailed):
        check("ex1", 1.00001, 1.0, quiet=True)


@PROPERTY
@given(expected=st.floats(-1e12, 1e12).filter(lambda x: abs(x) > 1e-6), rel=st.floats(0, 0.99))
def test_relative_errors_within_rtol_pass_and_beyond_fail(expected, rel):
    rtol = 0.01
    yours = expected * (1 + rel * rtol)
    check("ex1", yours, expected, rtol=rtol, quiet=True)
    with pytest.raises(CheckFailed, match="yours"):
        check("ex1", expected * (1 + 2 * rtol), expected, rtol=rtol, quiet=True)


@PROPERTY
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=20))
def test_an_array_always_matches_itself_and_fails_when_one_value_moves(values):
    check("ex1", np.array(values), values, quiet=True)
    moved = list(values)
    moved[-1] += 1 + abs(moved[-1])
    with pytest.raises(CheckFailed, match=rf"first at index \({len(values) - 1},\)"):
        check("ex1", moved, values, quiet=True)


# --------------------------------------------------------------------------- bad arguments to check itself

@pytest.mark.parametrize("name", ["", None, 1], ids=repr)
def test_check_rejects_a_bad_name(name):
    with pytest.raises(TypeError, match=r"^name must be a non-empty str"):
        check(name, 1, 1)


@pytest.mark.parametrize("argname, value, error", [
    ("rtol", -1e-3, ValueError), ("rtol", float("nan"), ValueError), ("rtol", "0.1", TypeError),
    ("rtol", None, TypeError), ("atol", -1.0, ValueError), ("atol", float("inf"), ValueError),
    ("atol", True, TypeError),
], ids=str)
def test_check_rejects_bad_tolerances_naming_them(argname, value, error):
    with pytest.raises(error, match=rf"^{argname}\b"):
        check("ex1", 1, 1, **{argname: value})


# --------------------------------------------------------------------------- check_raises

def _raise(error):
    def call():
        raise error
    return call


def test_check_raises_ticks_when_the_expected_error_is_raised(capsys):
    check_raises("ex2", _raise(ValueError("bad size")), ValueError)
    assert capsys.readouterr() == ("\N{CHECK MARK} ex2\n", "")


def test_check_raises_accepts_a_subclass_of_the_expected_error(capsys):
    check_raises("ex2", _raise(ZeroDivisionError()), ArithmeticError, quiet=True)
    assert capsys.readouterr() == ("", "")


def test_check_raises_fails_when_the_call_returns():
    with pytest.raises(CheckFailed, match=r"^ex2: returned 3 instead of raising ValueError\n  Hint: check n"):
        check_raises("ex2", lambda: 3, ValueError, hint="check n")


def test_check_raises_fails_when_the_call_raises_the_wrong_error():
    with pytest.raises(CheckFailed, match=r"^ex2: raised TypeError\(not an int\), expected ValueError"):
        check_raises("ex2", _raise(TypeError("not an int")), ValueError)


@pytest.mark.parametrize("call", [None, 3, "lambda: 1"], ids=repr)
def test_check_raises_rejects_a_non_callable(call):
    with pytest.raises(TypeError, match=r"^call must be callable"):
        check_raises("ex2", call, ValueError)


@pytest.mark.parametrize("error", ["ValueError", None, ValueError("x"), int], ids=repr)
def test_check_raises_rejects_something_that_is_not_an_exception_class(error):
    with pytest.raises(TypeError, match=r"^error must be an exception class"):
        check_raises("ex2", lambda: 3, error)


@pytest.mark.parametrize("name", ["", None], ids=repr)
def test_check_raises_rejects_a_bad_name(name):
    with pytest.raises(TypeError, match=r"^name must be a non-empty str"):
        check_raises(name, _raise(ValueError()), ValueError)


def test_off_limits_blocks_module_attribute_and_imported_names_then_restores() -> None:
    import gpucourse.timing as timing
    from gpucourse.checks import OffLimits, off_limits

    original = timing.benchmark
    namespace = {"benchmark": original, "other": print}
    with off_limits("gpucourse.timing.benchmark", exercise="Exercise 1", namespace=namespace):
        with pytest.raises(OffLimits, match="Exercise 1 asks you to write this yourself; gpucourse.timing.benchmark"):
            timing.benchmark(lambda: None)
        with pytest.raises(OffLimits):
            namespace["benchmark"](lambda: None)
        assert namespace["other"] is print
    assert timing.benchmark is original and namespace["benchmark"] is original


def test_off_limits_blocks_a_helper_reached_through_a_re_export() -> None:
    """A helper split into a new module stays blocked under every gpucourse module that binds it."""
    import sys
    import types

    import gpucourse.plots as plots
    from gpucourse.checks import OffLimits, off_limits

    original = plots.markdown_table
    reexport = types.ModuleType("gpucourse._test_reexport")
    reexport.markdown_table = original
    reexport.renamed_table = original
    sys.modules[reexport.__name__] = reexport
    try:
        with off_limits("gpucourse.plots.markdown_table", exercise="Exercise 3", namespace={}):
            for blocked in (reexport.markdown_table, reexport.renamed_table, plots.markdown_table):
                with pytest.raises(OffLimits, match="Exercise 3"):
                    blocked([["a"]], ["h"])
        assert reexport.markdown_table is original and reexport.renamed_table is original
        assert plots.markdown_table is original
    finally:
        del sys.modules[reexport.__name__]


def test_off_limits_restores_after_an_ipython_cell_even_when_it_fails() -> None:
    from IPython.testing.globalipapp import start_ipython

    import gpucourse.timing as timing

    shell = start_ipython()
    original = timing.benchmark
    shell.run_cell("from gpucourse.checks import off_limits\n"
                   "off_limits('gpucourse.timing.benchmark', exercise='Exercise 1')\n"
                   "import gpucourse.timing\ngpucourse.timing.benchmark(lambda: None)\n")
    assert timing.benchmark is original


@pytest.mark.parametrize("helpers, exercise, error", [
    (("gpucourse.timing.no_such_helper",), "Exercise 1", ValueError),
    (("numpy.sum",), "Exercise 1", ValueError),
    ((), "Exercise 1", ValueError),
    (("gpucourse.timing.benchmark",), "", TypeError),
])
def test_off_limits_rejects_bad_arguments(helpers, exercise, error) -> None:
    from gpucourse.checks import off_limits

    with pytest.raises(error, match="helpers|exercise"):
        off_limits(*helpers, exercise=exercise, namespace={})


def test_failed_check_renders_a_short_traceback_without_package_frames():
    def answer_cell():
        check("f(2)", 3, 4, hint="add two, not one")

    with pytest.raises(CheckFailed) as caught:
        answer_cell()
    lines = caught.value._render_traceback_()
    assert lines[0] == "CheckFailed: f(2): yours 3, expected 4 (0.75x the expected value)"
    assert lines[1] == "  Hint: add two, not one"
    assert any("answer_cell()" in line and 'check("f(2)"' in line for line in lines[2:])
    assert not any("in _fail()" in line or "in check()" in line for line in lines)
