"""Shared-array shapes that are not compile-time constants in a Numba kernel's source (lesson 05).

Numba's CUDA target compiles ``cuda.shared.array(shape, dtype)`` only when ``shape`` is "a simple constant
expression" (Numba docs, CUDA, *Memory management → Shared memory*): an int literal, a tuple of them, arithmetic on
them, or a name that the kernel reads from its enclosing function (a closure variable) or its module's globals and
that holds an int. A shape computed from a kernel argument (``counts.size``), from ``cuda.blockDim`` or from a call
fails to compile on a GPU, yet the CUDA simulator and the course's tracer run it. This reads the kernel's source
(Python's :mod:`ast`) and its closure, so it works on a CPU.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Callable, Mapping, Optional, Union

import numpy as np

_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift)


def _function_of(kernel: Callable) -> Callable:
    """The Python function of a Numba dispatcher (``py_func``), or the function itself."""
    function = getattr(kernel, "py_func", kernel)
    if not inspect.isfunction(function):
        raise TypeError(f"kernel: expected a Numba kernel, a Python function or its source text, got "
                        f"{type(kernel).__name__}")
    return function


def _bound_constants(function: Callable) -> dict[str, object]:
    """The values a function can read without arguments: its module's globals, then its closure over them."""
    values: dict[str, object] = dict(function.__globals__)
    for name, cell in zip(function.__code__.co_freevars, function.__closure__ or ()):
        try:
            values[name] = cell.cell_contents
        except ValueError:  # an empty cell: the enclosing function has not bound it yet
            continue
    return values


def _is_int(value: object) -> bool:
    """A Python or numpy int, not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _local_names(function_node: ast.FunctionDef) -> set[str]:
    """The kernel's parameters and every name it assigns: these are not compile-time constants."""
    arguments = function_node.args
    names = {a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs}
    names |= {a.arg for a in (arguments.vararg, arguments.kwarg) if a is not None}
    for node in ast.walk(function_node):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            names.add(node.id)
    return names


def _is_constant(node: ast.expr, constants: Mapping[str, object], local: set[str]) -> bool:
    """Whether a shape expression is an int literal, a tuple or arithmetic of them, or a bound int (tuple) name."""
    if isinstance(node, ast.Constant):
        return _is_int(node.value)
    if isinstance(node, (ast.Tuple, ast.List)):
        return len(node.elts) > 0 and all(_is_constant(element, constants, local) for element in node.elts)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
        return _is_constant(node.left, constants, local) and _is_constant(node.right, constants, local)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        return _is_constant(node.operand, constants, local)
    if isinstance(node, ast.Name):  # Numba types a bound tuple of ints as literal ints too
        value = constants.get(node.id)
        return node.id not in local and node.id in constants and (
            _is_int(value) or (isinstance(value, tuple) and len(value) > 0 and all(map(_is_int, value))))
    return False  # attributes (x.size, cuda.blockDim.x), subscripts (x.shape[0]), calls, anything else


def _is_shared_array_call(node: ast.AST) -> bool:
    """``cuda.shared.array(...)`` or ``shared.array(...)``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "array"
            and ((isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "shared")
                 or (isinstance(node.func.value, ast.Name) and node.func.value.id == "shared")))


def non_constant_shared_shapes(kernel: Union[Callable, str],
                               constants: Optional[Mapping[str, int]] = None) -> list[str]:
    """Source text of each ``cuda.shared.array`` shape in a kernel that is not a compile-time constant.

    ``kernel`` is a ``numba.cuda.jit`` kernel, a plain Python function, or source text (then only the names in
    ``constants`` count as bound ints). Accepted: int literals, tuples of them, ``+ - * // % **`` on them, and names
    bound to ints in the kernel's closure (a factory's ``tile`` argument) or module globals. Rejected: kernel
    parameters and locals, ``cuda.*``, attributes (``x.size``), subscripts (``x.shape[0]``) and calls. Returns the
    offending shapes in source order; an empty list means every shape compiles. Raises TypeError for a kernel of
    another type and ValueError when its source cannot be read or parsed.
    """
    if isinstance(kernel, str):
        source, bound = kernel, dict(constants or {})
    else:
        function = _function_of(kernel)
        try:
            source = inspect.getsource(function)
        except (OSError, TypeError) as error:
            raise ValueError(f"kernel: cannot read the source of {function.__name__!r} ({error}); pass the source "
                             "text instead") from error
        bound = {**_bound_constants(function), **dict(constants or {})}
    source = textwrap.dedent(source)
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"kernel: its source does not parse as Python ({error.msg}, line {error.lineno})") \
            from error
    kernel_node = next((node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)), None)
    local = _local_names(kernel_node) if kernel_node is not None else set()
    found: list[str] = []
    calls = sorted((node for node in ast.walk(tree) if _is_shared_array_call(node)),
                   key=lambda node: (node.lineno, node.col_offset))
    for node in calls:
        shape = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "shape"), None)
        if shape is None:
            found.append("(no shape)")
        elif not _is_constant(shape, bound, local):
            found.append(ast.get_source_segment(source, shape) or ast.unparse(shape))
    return found


__all__ = ["non_constant_shared_shapes"]
