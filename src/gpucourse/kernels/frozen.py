"""What Numba freezes into a kernel: the globals and closure values it reads, captured at its first compile.

Numba compiles a ``@cuda.jit`` kernel once per argument types, at its first launch with them, and writes the values of
the globals and closure variables the kernel reads (and the device functions it calls read) into the compiled code
as constants: a later change to them has no effect on that kernel (numba-cuda's docs, "Global Variables and
Captured Values"; Numba's "Deviations from Python semantics"). Numba's CUDA simulator and the course's tracer run the
kernel's Python source, which reads them live: a kernel defined once at module level and reconfigured through a
global would be right on a CPU and wrong on a GPU.

:func:`check_frozen` closes that gap in the tracer (lessons 04 and 05): the first trace of a kernel object with
given argument types stores the values it reads; a later trace with the same argument types, after one of them
changed, raises :class:`FrozenValueChanged`, naming the value, what a GPU would still use and the fix.
"""

from __future__ import annotations

import dis
import numbers
import types
import weakref

import numpy as np

from gpucourse.checks import CheckFailed

_SEEN: "weakref.WeakKeyDictionary[object, dict]" = weakref.WeakKeyDictionary()
"""kernel object -> {argument types: {(function name, variable, from closure): the value frozen at the first trace}}"""


class FrozenValueChanged(CheckFailed):
    """A kernel was traced again after a global or closure value it reads changed: on a GPU it keeps the old one."""


def _global_names(code: types.CodeType) -> list[str]:
    """The global names a code object (and the code nested in it) loads, in order, without repeats."""
    names: list[str] = []
    for instruction in dis.get_instructions(code):
        if instruction.opname in ("LOAD_GLOBAL", "LOAD_NAME") and instruction.argval not in names:
            names.append(instruction.argval)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names += [name for name in _global_names(constant) if name not in names]
    return names


def _is_device_function(value: object) -> bool:
    options = getattr(value, "targetoptions", None)
    return bool(getattr(value, "_device", False) or (isinstance(options, dict) and options.get("device")))


def captured_values(function: types.FunctionType, depth: int = 0) -> dict:
    """What Numba would freeze into ``function``: {(function name, variable, from closure): value}, modules left out,
    the values read by the device functions it calls included."""
    found: dict = {}
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            found[(function.__name__, name, True)] = cell.cell_contents
        except ValueError:  # an empty cell: a variable not assigned yet
            continue
    for name in _global_names(function.__code__):
        if name in function.__globals__:
            found[(function.__name__, name, False)] = function.__globals__[name]
    for key, value in list(found.items()):
        if isinstance(value, types.ModuleType):
            del found[key]
        elif _is_device_function(value) and depth < 8:
            inner = getattr(value, "py_func", value)
            if isinstance(inner, types.FunctionType):
                for inner_key, inner_value in captured_values(inner, depth + 1).items():
                    found.setdefault(inner_key, inner_value)
    return found


def _snapshot(value: object) -> object:
    """A copy that later changes in place do not reach (arrays, and tuples holding them)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if isinstance(value, tuple):
        return tuple(_snapshot(item) for item in value)
    return value


def _same(old: object, new: object) -> bool:
    """Would Numba's frozen ``old`` still equal ``new``: same type, and equal value (numbers, strings, tuples,
    arrays) or the same object (anything else)."""
    if old is new:
        return True
    if type(old) is not type(new):
        return False
    if isinstance(old, np.ndarray):
        return old.dtype == new.dtype and old.shape == new.shape and bool(
            np.array_equal(old, new, equal_nan=old.dtype.kind in "fc"))
    if isinstance(old, tuple):
        return len(old) == len(new) and all(_same(a, b) for a, b in zip(old, new))
    if isinstance(old, (numbers.Number, str, bytes, np.generic)):
        try:
            return bool(old == new) or bool(old != old and new != new)  # NaN stays NaN
        except (TypeError, ValueError):
            return False
    return False


def _argument_types(args: tuple) -> tuple:
    """What Numba's dispatcher compiles a new version for: each argument's type (arrays: dtype, dimensions, layout,
    writability)."""
    kinds = []
    for arg in args:
        if isinstance(arg, np.ndarray):
            layout = "C" if arg.flags.c_contiguous else "F" if arg.flags.f_contiguous else "A"
            kinds.append(("array", arg.dtype.str, arg.ndim, layout, bool(arg.flags.writeable)))
        else:
            kinds.append(type(arg).__name__)
    return tuple(kinds)


def _shown(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"an array of shape {value.shape}"
    if isinstance(value, np.generic):
        return f"{value.item()!r} ({value.dtype})"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_frozen(kernel: object, function: types.FunctionType, args: tuple) -> None:
    """At the first trace of ``kernel`` with these argument types, store the values it reads from outside itself;
    at a later one, raise FrozenValueChanged if one of them changed (a GPU would still use the stored one).

    A plain Python function (not a Numba kernel) is not compiled, so it is not checked.
    """
    if kernel is function or not hasattr(kernel, "py_func"):
        return
    try:
        seen = _SEEN.setdefault(kernel, {})
    except TypeError:  # an object that cannot be weakly referenced: nothing to compare with later
        return
    now = captured_values(function)
    key = _argument_types(args)
    if key not in seen:
        seen[key] = {name: _snapshot(value) for name, value in now.items()}
        return
    for (owner, name, closure), frozen in seen[key].items():
        value = now.get((owner, name, closure), frozen)
        if _same(frozen, value):
            continue
        reader = (function.__name__ if owner == function.__name__
                  else f"{function.__name__} (in device function {owner})")
        reads = (f"reads `{name}` from its closure (a variable of the function that defines it)" if closure
                 else f"reads the global `{name}`")
        raise FrozenValueChanged(
            f"{reader} {reads}, and Numba freezes such a value when it compiles the kernel, at its "
            f"first launch: `{name}` was {_shown(frozen)} then and is {_shown(value)} now, so on a GPU this launch "
            f"would still use {_shown(frozen)} (Numba's simulator reads it afresh, a GPU does not).\n  Hint: pass "
            f"`{name}` to the kernel as an argument, derive it from the arrays' shapes, or define the kernel inside "
            "your function, so that each call makes (and compiles) a new kernel with its own value")


__all__ = ["FrozenValueChanged", "captured_values", "check_frozen"]
