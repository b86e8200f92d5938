"""Unit and property tests of gpucourse._validate: the argument checks every public function relies on."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucourse import _validate
from gpucourse._validate import non_negative_int, non_negative_number, one_of, positive_int, positive_number

PROPERTY = settings(deadline=None, max_examples=50, derandomize=True, database=None)

NOT_INTS = ["3", None, 3.0, True, False, [3], 2.5, float("nan")]
NOT_NUMBERS = ["1.5", None, True, False, [1.0], 1j, {"x": 1}]


# --------------------------------------------------------------------------- integers

@pytest.mark.parametrize("check", [positive_int, non_negative_int])
@pytest.mark.parametrize("value", NOT_INTS, ids=repr)
def test_int_checks_reject_non_ints_naming_the_argument(check, value):
    with pytest.raises(TypeError, match=r"^size must be an int"):
        check("size", value)


@pytest.mark.parametrize("value", [0, -1, -(10**30)])
def test_positive_int_rejects_zero_and_negatives(value):
    with pytest.raises(ValueError, match=r"^count must be > 0"):
        positive_int("count", value)


def test_non_negative_int_accepts_zero_and_rejects_negatives():
    assert non_negative_int("warmup", 0) == 0
    with pytest.raises(ValueError, match=r"^warmup must be >= 0, got -1"):
        non_negative_int("warmup", -1)


def test_int_checks_accept_numpy_integers_and_return_python_ints():
    value = positive_int("n", np.int64(7))
    assert value == 7 and type(value) is int
    assert type(non_negative_int("n", np.uint8(0))) is int


def test_int_checks_reject_numpy_bools():
    with pytest.raises(TypeError, match="flag"):
        positive_int("flag", np.True_)


@PROPERTY
@given(st.integers(min_value=1))
def test_positive_int_returns_every_positive_int_unchanged(value):
    assert positive_int("n", value) == value


@PROPERTY
@given(st.integers(max_value=0))
def test_positive_int_rejects_every_non_positive_int(value):
    with pytest.raises(ValueError, match="^n "):
        positive_int("n", value)


@PROPERTY
@given(st.floats(allow_nan=True, allow_infinity=True))
def test_int_checks_reject_every_float(value):
    with pytest.raises(TypeError, match="^n must be an int"):
        positive_int("n", value)
    with pytest.raises(TypeError, match="^n must be an int"):
        non_negative_int("n", value)


# --------------------------------------------------------------------------- real numbers

@pytest.mark.parametrize("check", [positive_number, non_negative_number])
@pytest.mark.parametrize("value", NOT_NUMBERS, ids=repr)
def test_number_checks_reject_non_numbers_naming_the_argument(check, value):
    with pytest.raises(TypeError, match=r"^bandwidth must be a number"):
        check("bandwidth", value)


@pytest.mark.parametrize("check", [positive_number, non_negative_number])
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), np.float64("nan"), 10**400, -1, -1e-300])
def test_number_checks_reject_nan_inf_huge_and_negative_values(check, value):
    with pytest.raises(ValueError, match=r"^peak must be a finite number"):
        check("peak", value)


def test_positive_number_rejects_zero_but_non_negative_number_accepts_it():
    with pytest.raises(ValueError, match=r"^peak must be a finite number > 0, got 0"):
        positive_number("peak", 0)
    assert non_negative_number("atol", 0) == 0.0
    assert non_negative_number("atol", -0.0) == 0.0


@pytest.mark.parametrize("value", [3, 2.5, np.float32(2.5), np.int32(4), Fraction(1, 3)], ids=repr)
def test_number_checks_accept_ints_floats_numpy_and_fractions_as_floats(value):
    result = positive_number("x", value)
    assert type(result) is float and result == pytest.approx(float(value))


@PROPERTY
@given(st.floats(min_value=5e-324, allow_nan=False, allow_infinity=False))
def test_positive_number_returns_every_finite_positive_float(value):
    assert positive_number("x", value) == value


@PROPERTY
@given(st.floats(max_value=0.0) | st.just(float("nan")) | st.just(float("inf")))
def test_positive_number_rejects_every_non_positive_or_non_finite_float(value):
    with pytest.raises(ValueError, match="^x must be a finite number > 0"):
        positive_number("x", value)


@PROPERTY
@given(st.floats())
def test_non_negative_number_accepts_exactly_the_finite_non_negative_floats(value):
    if math.isfinite(value) and value >= 0:
        assert non_negative_number("x", value) == value
    else:
        with pytest.raises(ValueError, match="^x must be a finite number >= 0"):
            non_negative_number("x", value)


# --------------------------------------------------------------------------- choices

def test_one_of_returns_a_valid_choice():
    assert one_of("dtype", "float16", ("float32", "float16")) == "float16"


def test_one_of_accepts_a_dict_of_choices_by_key():
    assert one_of("dtype", "float32", {"float32": 4}) == "float32"


@pytest.mark.parametrize("value", ["float31", "", "FLOAT32", " float32"])
def test_one_of_rejects_unknown_strings_and_lists_the_choices(value):
    with pytest.raises(ValueError, match=r"^dtype must be one of \['float32', 'float16'\]"):
        one_of("dtype", value, ("float32", "float16"))


@pytest.mark.parametrize("value", [None, 32, b"float32", ["float32"]], ids=repr)
def test_one_of_rejects_non_strings_with_a_type_error(value):
    with pytest.raises(TypeError, match=r"^backend must be a str"):
        one_of("backend", value, ("numpy", "torch"))


def test_one_of_accepts_a_one_shot_iterator_of_choices_and_names_them_in_the_error():
    with pytest.raises(ValueError, match=r"\['a', 'b'\]"):
        one_of("letter", "c", iter(["a", "b"]))


class _Thing:
    """A stand-in element type for list_of."""


@pytest.mark.parametrize("items, error, message", [
    (_Thing(), TypeError, "a list of _Thing objects"), ("abc", TypeError, "a list of _Thing"),
    (5, TypeError, "a list of _Thing"), ([_Thing(), 3], TypeError, "contain _Thing objects, got int"),
    ([], ValueError, "at least one _Thing"),
], ids=["single", "str", "int", "mixed", "empty"])
def test_list_of_rejects_bad_lists_naming_the_argument(items, error, message) -> None:
    with pytest.raises(error, match=rf"^things must .*{message}"):
        _validate.list_of("things", items, _Thing, non_empty=True)


def test_list_of_accepts_any_iterable_and_empty_when_allowed() -> None:
    things = (_Thing(), _Thing())
    assert _validate.list_of("things", iter(things), _Thing) == list(things)
    assert _validate.list_of("things", [], _Thing) == []
