"""Float64 accumulators in a Numba kernel's source: a sum started at a bare ``0.0`` (lessons 04 and 05).

Numba types a Python float literal as float64, so ``total = 0.0`` followed by ``total += x * x`` makes the sum,
and every addition into it, float64, even when ``x`` is float32: T4- and L4-class GPUs run float64 at 1/32 to 1/64
of the float32 rate. An int start (``total = 0``) that then adds array elements ends the same way (int64 plus
float32 is float64). The simulator computes the same numbers either way, so a test of results cannot see it; this
reads the kernel's source instead (Python's :mod:`ast`), and works on a CPU.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Callable, Union

_UPDATE_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div)


def _unsigned(node: ast.expr) -> ast.expr:
    """The operand of a leading ``-`` or ``+``."""
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return node


def _called_name(node: ast.expr) -> str:
    """``f`` for ``f(...)``, ``float64`` for ``np.float64(...)``; '' when the node is not such a call."""
    if not isinstance(node, ast.Call):
        return ""
    if isinstance(node.func, ast.Name):
        return node.func.id
    return node.func.attr if isinstance(node.func, ast.Attribute) else ""


def _is_float64_literal(node: ast.expr) -> bool:
    """A bare Python float (``0.0``, ``-1.5``), ``float(...)`` or ``float64(...)``: all float64 in Numba."""
    node = _unsigned(node)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, float)
    return _called_name(node) in ("float", "float64", "double")


def _is_int_literal(node: ast.expr) -> bool:
    """A bare Python int (``0``, ``-1``) or ``int(...)``: int64 in Numba."""
    node = _unsigned(node)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, int) and not isinstance(node.value, bool)
    return _called_name(node) == "int"


def _reads_array_element(node: ast.expr, element_names: frozenset[str] = frozenset()) -> bool:
    """Whether the expression reads an array element (``x[i]``, or a local copied from one); shapes are ints."""
    return any((isinstance(sub, ast.Subscript) and not (isinstance(sub.value, ast.Attribute)
                                                        and sub.value.attr in ("shape", "strides")))
               or (isinstance(sub, ast.Name) and sub.id in element_names)
               for sub in ast.walk(node))


def _element_names(tree: ast.AST) -> frozenset[str]:
    """Locals assigned from array elements (``v = x[i]``, ``w = v * 2``), followed through a few assignments."""
    names: frozenset[str] = frozenset()
    for _ in range(4):
        found = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
                 for target in node.targets if isinstance(target, ast.Name)
                 and _reads_array_element(node.value, names) and not _mentions(node.value, target.id)}
        if found <= names:
            break
        names = names | found
    return names


def _pairs(target: ast.expr, value: ast.expr) -> list[tuple[ast.expr, ast.expr]]:
    """The (name, value) pairs of one assignment, unpacking ``a, b = 0.0, 0.0``."""
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        return [pair for t, v in zip(target.elts, value.elts) for pair in _pairs(t, v)]
    return [(target, value)]


def _mentions(node: ast.expr, name: str) -> bool:
    """Whether the expression reads the variable ``name``."""
    return any(isinstance(sub, ast.Name) and sub.id == name for sub in ast.walk(node))


def _source_of(kernel: Union[Callable, str]) -> str:
    """The kernel's source text: a string as given, else the source of its Python function."""
    if isinstance(kernel, str):
        return kernel
    function = getattr(kernel, "py_func", kernel)  # numba.cuda.jit dispatchers (GPU and simulator) keep py_func
    if not inspect.isfunction(function):
        raise ValueError(f"kernel: expected a Numba kernel, a Python function or its source text, got "
                         f"{type(kernel).__name__}")
    try:
        return inspect.getsource(function)
    except (OSError, TypeError) as error:
        raise ValueError(f"kernel: cannot read the source of {function.__name__!r} ({error}); pass the source "
                         "text instead") from error


def float64_accumulators(kernel: Union[Callable, str]) -> list[str]:
    """Names of the variables a kernel starts at a bare float (``0.0``, ``float(...)``) and then accumulates into.

    ``kernel`` is a ``numba.cuda.jit`` kernel, a plain Python function, or source text. A variable counts when it
    is assigned a bare float literal anywhere and is updated with ``+=``, ``-=``, ``*=``, ``/=`` or
    ``name = name + ...`` anywhere; ``np.float64(0)`` counts as a bare float. So does an int start (``0``,
    ``int(...)``) whose updates read an array element (``total = 0; total += x[i]``, or ``v = x[i]; total += v``). ``np.float32(0.0)``,
    ``float32(0)`` and ``numba.float32(0.0)`` pass; so do ``acc = x[i] * y[i]`` and int counters (``n = 0;
    n += 1``). Returns the names sorted, each once; an empty list means none was found. Not seen: a float32 sum
    mixed with a float literal later (``total += 0.5 * v``), or an int start that adds a float computed without
    an array element. Raises ValueError when the source cannot be read or parsed.
    """
    source = textwrap.dedent(_source_of(kernel))
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"kernel: its source does not parse as Python ({error.msg}, line {error.lineno})") \
            from error
    started: set[str] = set()
    element_names = _element_names(tree)
    int_started: set[str] = set()
    updated: set[str] = set()
    updated_with_elements: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                for name, value in _pairs(target, node.value):
                    if not isinstance(name, ast.Name):
                        continue
                    if _is_float64_literal(value):
                        started.add(name.id)
                    elif _is_int_literal(value):
                        int_started.add(name.id)
                    elif isinstance(value, ast.BinOp) and isinstance(value.op, _UPDATE_OPS) \
                            and _mentions(value, name.id):
                        updated.add(name.id)
                        if _reads_array_element(value, element_names):
                            updated_with_elements.add(name.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
            if _is_float64_literal(node.value):
                started.add(node.target.id)
            elif _is_int_literal(node.value):
                int_started.add(node.target.id)
        elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) \
                and isinstance(node.op, _UPDATE_OPS):
            updated.add(node.target.id)
            if _reads_array_element(node.value, element_names):
                updated_with_elements.add(node.target.id)
    return sorted((started & updated) | (int_started & updated_with_elements))


__all__ = ["float64_accumulators"]
