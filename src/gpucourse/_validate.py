"""Argument checks shared by the helper package: every public function rejects bad input by name."""

from __future__ import annotations

import numbers
from collections.abc import Iterable


def _integer(name: str, value: object, minimum: int) -> int:
    """Return ``value`` if it is an int >= ``minimum``, else raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r})")
    if value < minimum:
        raise ValueError(f"{name} must be {'> 0' if minimum == 1 else '>= 0'}, got {value}")
    return int(value)


def positive_int(name: str, value: object) -> int:
    """Return ``value`` if it is an int > 0, else raise naming ``name``."""
    return _integer(name, value, minimum=1)


def non_negative_int(name: str, value: object) -> int:
    """Return ``value`` if it is an int >= 0, else raise naming ``name``."""
    return _integer(name, value, minimum=0)


def _finite(name: str, value: object, allow_zero: bool) -> float:
    """Return ``value`` as a finite float > 0 (or >= 0 with ``allow_zero``), else raise naming ``name``."""
    expected = f"a finite number {'>=' if allow_zero else '>'} 0"
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} ({value!r})")
    try:
        as_float = float(value)
    except OverflowError:  # an int too large for a float
        raise ValueError(f"{name} must be {expected}, got {value}") from None
    in_range = as_float >= 0 if allow_zero else as_float > 0
    if not in_range or as_float == float("inf"):  # NaN fails both comparisons
        raise ValueError(f"{name} must be {expected}, got {value}")
    return as_float


def positive_number(name: str, value: object) -> float:
    """Return ``value`` as float if it is a finite real number > 0, else raise naming ``name``."""
    return _finite(name, value, allow_zero=False)


def non_negative_number(name: str, value: object) -> float:
    """Return ``value`` as float if it is a finite real number >= 0, else raise naming ``name``."""
    return _finite(name, value, allow_zero=True)


def one_of(name: str, value: object, choices: Iterable[str]) -> str:
    """Return ``value`` if it is one of ``choices`` (strings), else raise naming ``name``."""
    options = list(choices)
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, one of {options}, got {type(value).__name__} ({value!r})")
    if value not in options:
        raise ValueError(f"{name} must be one of {options}, got {value!r}")
    return value


def list_of(name: str, items: object, kind: type, *, non_empty: bool = False) -> list:
    """Return ``items`` as a list of ``kind`` objects, else raise naming ``name`` (a single ``kind`` is refused)."""
    if isinstance(items, (kind, str, bytes)) or not isinstance(items, Iterable):
        raise TypeError(f"{name} must be a list of {kind.__name__} objects, got {type(items).__name__}")
    found = list(items)
    if non_empty and not found:
        raise ValueError(f"{name} must contain at least one {kind.__name__}")
    for item in found:
        if not isinstance(item, kind):
            raise TypeError(f"{name} must contain {kind.__name__} objects, got {type(item).__name__}")
    return found
