"""Float64 work in a Numba kernel, and kernels a GPU refuses (lessons 04 and 05).

:func:`float64_accumulators` with example arguments compiles the kernel with Numba's real CUDA compiler (see
:mod:`gpucourse.kernels.cuda_compile`) and reports every line doing float64 arithmetic, or the compiler's refusal.
What follows describes the fallback, :func:`float64_accumulators_by_source`, used without arguments or where that
compilation cannot run.

Numba types a Python float literal as float64, so ``total = 0.0`` followed by ``total += x * x`` makes the sum,
and every addition into it, float64, even when ``x`` is float32: T4- and L4-class GPUs run float64 at 1/32 to 1/64
of the float32 rate. An int start (``total = 0``) that then adds array elements ends the same way (int64 plus
float32 is float64). Numba also gives a local one type over all its assignments, so a float64 can reach a sum
through a local: ``v = x[i] if inside else 0.0`` (or ``else 0``), ``v = 0.0`` then ``v = x[i]``, ``v = x[i] * 1.0``,
each followed by ``total += w * v``. The simulator computes the same numbers either way, so a test of results
cannot see it; this reads the kernel's source instead (Python's :mod:`ast`, with a small data flow over its
locals), and works on a CPU. It takes every array element for a float32, as in these lessons' kernels. An int
multiplier counts too: a local assigned only ints (``m = 1 if inside else 0``), an ``if``/``else`` of two ints, or a
product of comparisons (``(r >= 0) * (r < n)``: bool times bool is int64), multiplied with an array element, is
float32 times int64, so float64; a plain bool (``x[i] * inside``) stays float32. Not seen: anything outside the
kernel's own source, and ints that only a loop or a function's arguments give (``for k in range(n)``).
"""

from __future__ import annotations

import ast
import collections
import functools
import inspect
import linecache
import re
import sys
import textwrap
import types as pytypes
import warnings
from typing import Callable, Union

import numpy as np

from gpucourse.kernels.cuda_compile import _names_used

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


_INT_OPS = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_BIT_OPS = (ast.BitAnd, ast.BitOr, ast.BitXor)


def _join(kinds: list) -> Union[str, None]:
    """'bool' when every kind is 'bool', 'int' when each is 'int' or 'bool' (Numba unifies them to int64), else
    None."""
    if not kinds or any(kind not in ("int", "bool") for kind in kinds):
        return None
    return "bool" if all(kind == "bool" for kind in kinds) else "int"


#: Integer types that make a float32 operand float64 in Numba (checked with numba 0.6x: float32 * int32 is float64,
#: so is float32 * uint16): ``int(...)``, ``np.int32(...)``, ... ``int8``, ``int16`` and ``uint8`` keep float32.
_WIDE_INTS = frozenset({"int", "int32", "int64", "uint16", "uint32", "uint64", "intp", "uintp", "intc", "uintc",
                        "int_", "long", "longlong", "ulonglong"})


def _kind(node: ast.expr, kinds: dict) -> Union[str, None]:
    """'int' or 'bool' when Numba types the expression an int wide enough to make float32 float64, or bool, for sure
    (``1 if c else 0``, ``np.int32(1)``, ``(a < b) * (c < d)``, ``r < n``, a local in ``kinds``), else None (a float,
    an array element, or unknown)."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            return "bool"
        return "int" if isinstance(node.value, int) else None
    if isinstance(node, ast.Name):
        return kinds.get(node.id)
    if isinstance(node, ast.Compare):
        return "bool"
    if isinstance(node, ast.UnaryOp):
        inner = _kind(node.operand, kinds)
        if isinstance(node.op, ast.Not):
            return "bool"
        return "int" if inner in ("int", "bool") and not isinstance(node.op, ast.Invert) else None
    if isinstance(node, ast.BoolOp):
        return _join([_kind(value, kinds) for value in node.values])
    if isinstance(node, ast.IfExp):
        return _join([_kind(node.body, kinds), _kind(node.orelse, kinds)])
    if isinstance(node, ast.BinOp):
        both = _join([_kind(node.left, kinds), _kind(node.right, kinds)])
        if isinstance(node.op, _BIT_OPS):
            return both
        return "int" if both and isinstance(node.op, _INT_OPS) else None  # True * True == 1: int64
    name = _called_name(node)
    if name in _WIDE_INTS:
        return "int"
    return "bool" if name == "bool" else None


def _int_locals(tree: ast.AST) -> dict:
    """Locals whose every assignment is an int or bool (``m = 1 if inside else 0``, ``n = 0; n += 1``), mapped to
    'int' or 'bool'; a name also bound by a loop, a tuple from a call or a ``with`` is left out."""
    assignments = _assignments(tree)
    recognised: dict = {}
    for name, _ in assignments:
        recognised[name] = recognised.get(name, 0) + 1
    stored: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            stored[node.id] = stored.get(node.id, 0) + 1
    candidates = {name for name, count in recognised.items() if stored.get(name) == count}
    kinds: dict = {}
    for _ in range(8):
        found = {}
        for name in candidates:
            values = [value for other, value in assignments if other == name]
            own = [_kind(value, kinds) for value in values if not _mentions(value, name)]
            provisional = _join(own)
            if provisional is None:
                continue
            kind = _join([_kind(value, {**kinds, name: provisional}) for value in values])
            if kind is not None:
                found[name] = kind
        if found == kinds:
            break
        kinds = found
    return kinds


def _int_times_element(node: ast.expr, kinds: dict, element_names: frozenset[str]) -> bool:
    """Whether one side of the operation or ``if``/``else`` is an int (not a bool) and the other reads an array
    element: float32 with int64 is float64 in Numba."""
    pairs = ((node.left, node.right), (node.right, node.left)) if isinstance(node, ast.BinOp) \
        else ((node.body, node.orelse), (node.orelse, node.body))
    return any((_is_int_literal(one) or _kind(one, kinds) == "int") and _reads_array_element(other, element_names)
               for one, other in pairs)


_NARROW_CALLS = ("float32", "float16", "int32", "int16", "int8", "uint32", "uint16", "uint8", "int", "int64")


def _float64_in_update(node: ast.expr, float64_names: frozenset[str] = frozenset(),
                       element_names: frozenset[str] = frozenset(), kinds: Union[dict, None] = None) -> bool:
    """Whether an expression brings in a float64 outside its subscripts: a bare float literal (``0.5 * v``),
    ``float64(...)``, a local in ``float64_names``, a ``math`` call with a float64 or bare int argument
    (``math.pow(v, 2)``), or an operation or ``if``/``else`` expression with a bare int on one side and an array
    element on the other (``x[i] * 2``, ``x[i] if inside else 0``: int64 with float32 is float64), or an int local,
    ``if``/``else`` of ints or product of comparisons in ``kinds`` times an element (``x[i] * m``), all float64 in
    Numba."""
    kinds = {} if kinds is None else kinds
    node = _unsigned(node)
    if isinstance(node, ast.Constant):
        return isinstance(node.value, float)
    if isinstance(node, ast.Name):
        return node.id in float64_names
    if isinstance(node, ast.Subscript):  # an index is an int whatever it computes
        return _float64_in_update(node.value, float64_names, element_names, kinds)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _UPDATE_OPS) \
            and _int_times_element(node, kinds, element_names):
        return True  # x[i] * 2, x[i] * m: float32 with int64 is float64 (x[i] ** 2 stays float32)
    if isinstance(node, ast.IfExp) and _int_times_element(node, kinds, element_names):
        return True
    name = _called_name(node)
    if name in ("float", "float64", "double"):
        return True
    if _is_math_call(node) and any(_is_int_literal(arg)
                                   or _float64_in_update(arg, float64_names, element_names, kinds)
                                   for arg in node.args):
        return True
    if name in _NARROW_CALLS:  # np.float32(0.5), int(...): not float64
        return False
    if isinstance(node, ast.Call):  # math.sqrt(v) of a float32 stays float32; its arguments were checked above
        return any(_float64_in_update(arg, float64_names, element_names, kinds) for arg in node.args)
    return any(_float64_in_update(child, float64_names, element_names, kinds)
               for child in ast.iter_child_nodes(node) if isinstance(child, ast.expr))


def _is_math_call(node: ast.expr) -> bool:
    """Whether the node calls a function of :mod:`math` (``math.sqrt(v)``, ``pow(v, 2)``)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return isinstance(func.value, ast.Name) and func.value.id == "math"
    return isinstance(func, ast.Name) and func.id == "pow"


def _assignments(tree: ast.AST) -> list[tuple[str, ast.expr]]:
    """Every (local name, value) a plain, annotated or augmented assignment gives (``v += x`` gives ``x``)."""
    found: list[tuple[str, ast.expr]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            found += [(name.id, value) for target in node.targets for name, value in _pairs(target, node.value)
                      if isinstance(name, ast.Name)]
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and isinstance(node.target, ast.Name) \
                and node.value is not None:
            found.append((node.target.id, node.value))
    return found


def _float64_locals(tree: ast.AST, element_names: frozenset[str], kinds: Union[dict, None] = None) -> frozenset[str]:
    """Locals Numba types float64, since it unifies a variable's type over all its assignments: those assigned a
    float64 expression anywhere (``v = 0.0``, ``v = x[i] if inside else 0.0``, ``v = x[i] * 1.0``, ``w = v``), and
    those assigned both a bare int and an array element (``v = 0`` and ``v = x[i]``)."""
    assignments = _assignments(tree)
    ints = {name for name, value in assignments if _is_int_literal(value)}
    names = frozenset(name for name, value in assignments
                      if name in ints and _reads_array_element(value, element_names - {name}))
    while True:
        found = names | {name for name, value in assignments
                         if _is_float64_literal(value) or _float64_in_update(value, names, element_names, kinds)}
        if found == names:
            return names
        names = frozenset(found)


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


# ---- Numba's own typing: the kernel's Python function compiled with njit and a stub ``cuda`` (works on a CPU) ----
# The source rules above miss float64 brought in from outside the kernel's source (a device function returning
# 0.0, a global PAD = 0.0, ...). When the caller gives example arguments, the kernel is also typed by Numba itself:
# its function is rebuilt with ``cuda`` (global or closure variable) swapped for a stub that types as numba.cuda
# does (indices int32, grid() int64, shared/local arrays, syncthreads, atomics), each device function swapped for
# an njit copy, then compiled with ``numba.njit`` for the arguments' types; every local that the source updates and
# Numba types float64 is reported. Where this fails (a name the stub lacks, a construct njit refuses), the source
# check alone decides: nothing is printed, so a grading run never breaks on an unexpected kernel.

_Dim3 = collections.namedtuple("_Dim3", "x y z")


@functools.lru_cache(maxsize=1)  # built once per process; a cache, not a rebound global, so the referee's audit holds
def _stub_cuda() -> pytypes.ModuleType:
    """A module with the names of numba.cuda that lessons' kernels use, each typed as numba.cuda types it."""
    import numba
    from numba import types
    from numba.extending import overload

    def grid(ndim):
        """Stub."""

    def gridsize(ndim):
        """Stub."""

    def array(shape, dtype):
        """Stub."""

    def syncthreads():
        """Stub."""

    @overload(grid, prefer_literal=True)
    def _grid(ndim):
        if isinstance(ndim, types.IntegerLiteral):
            if ndim.literal_value == 1:
                return lambda ndim: np.int64(0)
            if ndim.literal_value == 2:
                return lambda ndim: (np.int64(0), np.int64(0))
            return lambda ndim: (np.int64(0), np.int64(0), np.int64(0))

    @overload(gridsize, prefer_literal=True)
    def _gridsize(ndim):
        if isinstance(ndim, types.IntegerLiteral):
            if ndim.literal_value == 1:
                return lambda ndim: np.int64(1)
            if ndim.literal_value == 2:
                return lambda ndim: (np.int64(1), np.int64(1))
            return lambda ndim: (np.int64(1), np.int64(1), np.int64(1))

    @overload(array)
    def _array(shape, dtype):
        return lambda shape, dtype: np.empty(shape, dtype)

    @overload(syncthreads)
    def _syncthreads():
        return lambda: None

    def atomic(combine):
        def stub(ary, idx, val):
            """Stub."""

        @overload(stub)
        def _stub(ary, idx, val):
            def impl(ary, idx, val):
                old = ary[idx]
                ary[idx] = combine(old, val)
                return old
            return impl
        return stub

    def warp_stub(name, typer):
        def stub(*args):
            """Stub."""
        stub.__name__ = name
        overload(stub)(typer)
        return stub

    module = pytypes.ModuleType("cuda")
    module.syncwarp = warp_stub("syncwarp", lambda mask=None: (lambda mask=None: None))
    for name in ("threadfence", "threadfence_block", "threadfence_system"):
        setattr(module, name, warp_stub(name, lambda: (lambda: None)))
    for name in ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync"):
        setattr(module, name, warp_stub(name, lambda mask, value, lane: (lambda mask, value, lane: value)))
    module.fma = warp_stub("fma", lambda a, b, c: (lambda a, b, c: a * b + c))
    module.activemask = warp_stub("activemask", lambda: (lambda: np.uint32(0xFFFFFFFF)))
    module.ballot_sync = warp_stub("ballot_sync", lambda mask, predicate: (lambda mask, predicate: np.uint32(1)))
    module.laneid, module.warpsize = np.int32(0), np.int32(32)
    zero = np.int32(0)
    for name in ("threadIdx", "blockIdx"):
        setattr(module, name, _Dim3(zero, zero, zero))
    one = np.int32(1)
    for name in ("blockDim", "gridDim"):
        setattr(module, name, _Dim3(one, one, one))
    module.grid, module.gridsize, module.syncthreads = grid, gridsize, syncthreads
    module.shared, module.local = pytypes.ModuleType("shared"), pytypes.ModuleType("local")
    module.shared.array = module.local.array = array
    module.atomic = pytypes.ModuleType("atomic")
    add = numba.njit(lambda a, b: a + b)
    module.atomic.add = atomic(add)
    module.atomic.sub = atomic(numba.njit(lambda a, b: a - b))
    module.atomic.max = atomic(numba.njit(lambda a, b: max(a, b)))
    module.atomic.min = atomic(numba.njit(lambda a, b: min(a, b)))
    return module


#: Python constructs that njit compiles on a CPU but Numba's CUDA target refuses (its kernels hold no lists, sets,
#: dicts, generators, exception handlers or context managers): named by the source check, since the njit typing above accepts them.
_REFUSED_BY_CUDA = {ast.ListComp: "a list comprehension", ast.SetComp: "a set comprehension",
                    ast.DictComp: "a dict comprehension", ast.GeneratorExp: "a generator expression",
                    ast.Try: "a try statement", ast.With: "a with statement", ast.Yield: "a yield",
                    ast.YieldFrom: "a yield"}


def _constructs_cuda_refuses(tree: ast.AST, where: str) -> list[str]:
    """One entry per construct in ``tree`` that Numba's CUDA target cannot compile, naming it and its line."""
    return [f"(a construct Numba cannot compile for a GPU: {_REFUSED_BY_CUDA[type(node)]} in {where}, line "
            f"{node.lineno})" for node in ast.walk(tree) if type(node) in _REFUSED_BY_CUDA]


def _device_functions(function: pytypes.FunctionType, depth: int = 0) -> list[pytypes.FunctionType]:
    """The Python functions of the device functions a kernel calls (globals and closure), followed a few levels."""
    values = [cell.cell_contents for cell in function.__closure__ or () if _cell_is_full(cell)]
    values += [function.__globals__[name] for name in _names_used(function.__code__) if name in function.__globals__]
    found = []
    for value in values:
        device = getattr(value, "py_func", value)
        if _is_device_function(value) and isinstance(device, pytypes.FunctionType) and device is not function:
            found.append(device)
            if depth < 3:
                found += _device_functions(device, depth + 1)
    return found


def _cell_is_full(cell: pytypes.CellType) -> bool:
    """Whether a closure cell holds a value (a cell read before assignment raises ValueError)."""
    try:
        cell.cell_contents
    except ValueError:
        return False
    return True


def _is_numba_cuda(value: object) -> bool:
    """True for the numba.cuda module (simulator or real target), or the course tracer's fake of it."""
    if isinstance(value, pytypes.ModuleType):
        return value is sys.modules.get("numba.cuda") or value.__name__.endswith("numba.cuda")
    return type(value).__name__ == "_TracingCuda"


def _is_device_function(value: object) -> bool:
    """True for a @cuda.jit(device=True) function of either Numba backend."""
    options = getattr(value, "targetoptions", None)
    return bool(getattr(value, "_device", False) or (isinstance(options, dict) and options.get("device")))


def _for_njit(function: pytypes.FunctionType, done: dict) -> pytypes.FunctionType:
    """A copy of ``function`` whose ``cuda`` is the stub and whose device functions are njit copies of theirs."""
    if id(function) in done:
        return done[id(function)][0]
    import numba

    def swap(value):
        if _is_numba_cuda(value):
            return _stub_cuda()
        if _is_device_function(value):
            device = getattr(value, "py_func", value)
            if not isinstance(device, pytypes.FunctionType):
                raise TypeError("a device function without a Python function")
            copy = _for_njit(device, done)
            return done[id(device)][1] if done[id(device)][1] is not None else copy
        return value

    cells = None
    if function.__closure__ is not None:
        cells = []
        for cell in function.__closure__:
            try:
                cells.append(pytypes.CellType(swap(cell.cell_contents)))
            except ValueError:  # an empty cell
                cells.append(cell)
        cells = tuple(cells)
    namespace = dict(function.__globals__)
    new = pytypes.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__, cells)
    done[id(function)] = (new, None, function)
    used = _names_used(function.__code__)
    namespace.update({name: swap(value) for name, value in function.__globals__.items()
                      if name in used or _is_numba_cuda(value)})
    done[id(function)] = (new, numba.njit(new), function)
    return new


def _updated_names(function: pytypes.FunctionType) -> Union[set, None]:
    """Locals the function's source updates (``+=``, ``name = name + ...``); None when its source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.BinOp):
            names |= {target.id for target in node.targets
                      if isinstance(target, ast.Name) and _mentions(node.value, target.id)}
    return names


_TYPED: dict = {}  # typing results by what decides them: a test cell types the same kernels again and again


def _value_key(value: object, depth: int = 0) -> object:
    """What of a closure or global value can change Numba's typing: a scalar's type and value, a device function's
    code (and its own closure), the identity of anything else."""
    if isinstance(value, (bool, int, float, complex, str, np.generic)) or value is None:
        return (type(value), value)
    if _is_device_function(value) and depth < 4:
        return ("device", _function_key(getattr(value, "py_func", value), depth + 1))
    return ("id", id(value))


def _function_key(function: pytypes.FunctionType, depth: int = 0) -> tuple:
    """The code, closure values and used globals of a function, as :func:`_value_key` sees them."""
    cells = []
    for cell in function.__closure__ or ():
        try:
            cells.append(_value_key(cell.cell_contents, depth))
        except ValueError:  # an empty cell
            cells.append(None)
    used = sorted(name for name in _names_used(function.__code__) if name in function.__globals__)
    return (function.__code__, tuple(cells), tuple((name, _value_key(function.__globals__[name], depth))
                                                   for name in used))


def numba_float64_sums(kernel: Callable, args: tuple) -> list[str]:
    """Names of the sums Numba itself types float64 when the kernel (and its device functions) is compiled for
    ``args`` with ``numba.njit`` and a stub ``cuda``. Raises whatever Numba raises when it cannot type the kernel
    (a name the stub lacks, a construct njit refuses); :func:`float64_accumulators` then keeps the source check."""
    import numba
    from numba import types

    function = getattr(kernel, "py_func", kernel)
    if not isinstance(function, pytypes.FunctionType):
        raise TypeError(f"kernel: expected a Numba kernel or a Python function, got {type(kernel).__name__}")
    key = (_function_key(function), tuple(numba.typeof(arg) for arg in args))
    if key in _TYPED:
        return list(_TYPED[key])
    done: dict = {}
    _for_njit(function, done)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        done[id(function)][1].compile(tuple(numba.typeof(arg) for arg in args))
    found, in_loops = set(), set()
    for _, dispatcher, original in done.values():
        updated = _updated_names(original)
        for signature in dispatcher.signatures:
            annotation = dispatcher.overloads[signature].type_annotation
            typemap = annotation.typemap
            in_loops |= _float64_arithmetic_in_loops(annotation.blocks, typemap)
            for name, kind in typemap.items():
                local = re.sub(r"\.\d+$", "", name)
                if not name.startswith(("$", "arg.")) and isinstance(kind, types.Array) \
                        and kind.dtype == types.float64:  # cuda.local.array(..., np.float64), a float64 shared array
                    found.add(f"{local} (a float64 array)")
                elif name.startswith(("$", "arg.")) or kind != types.float64:
                    continue
                elif updated is None or local in updated:
                    found.add(local)
    found = found or in_loops  # a float64 sum already names the line that matters; else the arithmetic does
    if len(_TYPED) > 512:
        _TYPED.clear()
    _TYPED[key] = tuple(sorted(found))
    return sorted(found)


def _float64_arithmetic_in_loops(blocks: dict, typemap: dict) -> set:
    """One entry per source line where Numba's IR does float64 arithmetic inside a loop (``p = w[k] * 1.0`` then
    ``total += np.float32(p)``): a cast back to float32 before the sum does not undo the float64 multiply, which
    runs once per iteration. Conversions (``np.float64(v)``) and int arithmetic are not counted; one float64
    operation per thread after the loops (``out[i] = total / 9``) is not either."""
    from numba.core import ir, types
    from numba.core.analysis import compute_cfg_from_blocks

    loops = compute_cfg_from_blocks(blocks).loops().values()
    in_loop = set().union(*(loop.body for loop in loops)) if loops else set()
    entries = set()
    for label in in_loop:
        for statement in blocks[label].body:
            if not (isinstance(statement, ir.Assign) and isinstance(statement.value, ir.Expr)) \
                    or typemap.get(statement.target.name) != types.float64:
                continue
            expression = statement.value
            if expression.op == "call":
                arguments = [typemap.get(arg.name) for arg in expression.args if isinstance(arg, ir.Var)]
                if types.float64 not in arguments:
                    continue  # a conversion such as np.float64(v): the arithmetic after it is what counts
            elif expression.op not in ("binop", "inplace_binop", "unary"):
                continue
            line = linecache.getline(statement.loc.filename, statement.loc.line).strip()
            entries.add(f"(float64 arithmetic in a loop, line {statement.loc.line}"
                        + (f": {line[:80]})" if line else ")"))
    return entries


def float64_accumulators(kernel: Union[Callable, str], args: Union[tuple, None] = None) -> list[str]:
    """What in a kernel would compute in float64, or keep it off a GPU: an empty list means nothing was found.

    With ``args`` (example arguments of a launch, e.g. ``(image, weights, out)``), the kernel is compiled by Numba's
    real CUDA compiler (:mod:`gpucourse.kernels.cuda_compile`, in a subprocess, on a CPU): the list names every
    source line whose LLVM IR does float64 arithmetic, anywhere in the kernel or its device functions
    (``"(float64 arithmetic, line 15: out[i] = total ** 0.5)"``; a float64 comparison, ``x > 0.0``, counts too), or
    holds one entry when the compiler refuses the kernel (``"(CUDA's compiler refuses your kernel, line 7: ...)"``:
    a local list, ``np.zeros``, a generator, and in numba 0.66 to 0.68 the built-in ``min``/``max``). A kernel that
    reads a value from its closure or globals that cannot be sent to the compiler (an object, a list, a large array)
    gets one entry that says so and asks for it as an argument: the check fails visibly rather than switch to a
    weaker one. Only where nothing the learner wrote is at fault (a numba without the CUDA target, a failed
    subprocess) do the checks below decide, after one printed line (once per process) that says so: :func:`float64_accumulators_by_source`, with Numba's own typing
    of the sums.
    """
    if args is not None and not isinstance(args, (tuple, list)):
        raise TypeError(f"args: expected a tuple of the kernel's arguments, got {type(args).__name__}")
    if args is None or isinstance(kernel, str):
        return float64_accumulators_by_source(kernel, args)
    return float64_accumulators_many([(kernel, tuple(args))])[0]


_UNAVAILABLE_NOTED: list = []
"""The reason, once noted, that Numba's CUDA compiler could not run in this process (cell 5: numba-cuda's API may
differ from numba's): one printed line, then silence."""


def float64_accumulators_many(pairs: list) -> list:
    """:func:`float64_accumulators` of each ``(kernel, args)``, all compiled in one subprocess: one list each."""
    from gpucourse.kernels.cuda_compile import compile_for_gpu

    for _, args in pairs:
        if not isinstance(args, (tuple, list)):
            raise TypeError(f"args: expected a tuple of the kernel's arguments, got {type(args).__name__}")
    reports = compile_for_gpu([(kernel, tuple(args)) for kernel, args in pairs])
    unavailable = [report.reason for report in reports if report.status == "not checked"
                   and report.reason.startswith(("numba's CUDA target", "the compiler's subprocess"))]
    if unavailable and not _UNAVAILABLE_NOTED:  # once per process: the learner sees which check decided
        _UNAVAILABLE_NOTED.append(unavailable[0])
        print(f"Note: Numba's CUDA compiler could not run here ({unavailable[0][:120]}), so a weaker check of your "
              "kernel's source decides instead.")
    return [report.findings() if report.status != "not checked" else float64_accumulators_by_source(kernel, args)
            for report, (kernel, args) in zip(reports, pairs)]


def compile_hint(findings: list) -> str:
    """The hint of a failed compile check: each finding (which names its line) once, then one sentence."""
    return "\n".join(dict.fromkeys(findings)) + (
        "\nIn a kernel: start sums at np.float32(0.0), mix no bare 0.0 or int mask into float32 math, use math.sqrt "
        "(not ** 0.5 or math.pow), and cuda.local.array or separate variables (not a list or np.zeros).")


def float64_accumulators_by_source(kernel: Union[Callable, str], args: Union[tuple, None] = None) -> list[str]:
    """The fallback check: names of the variables a kernel accumulates into in float64 (started at a bare float, or
    updated with one), read from its source and typed by Numba's CPU target with a stub ``cuda``.

    With ``args`` (example arguments of a launch, e.g. ``(image, weights, out)``), the kernel is also typed by
    Numba itself (:func:`numba_float64_sums`), which sees float64 that comes from outside its source too (a device
    function returning ``0.0``, a global ``PAD = 0.0``) and float64 local or shared arrays (``"acc (a float64
    array)"``); the names of both checks are returned. A construct Numba compiles for no target (a generator inside
    ``sum(...)``) adds one entry, ``"(a construct Numba cannot compile for a GPU: ...)"``. Where Numba cannot type the
    kernel for another reason (a name the stub lacks), the source check below decides alone, silently.

    ``kernel`` is a ``numba.cuda.jit`` kernel, a plain Python function, or source text. A variable counts when it is
    a float64 local and is updated with ``+=``, ``-=``, ``*=``, ``/=`` or ``name = name + ...`` anywhere. A local is
    float64 when any assignment to it is a float64 expression: a bare float (``0.0``), ``float(...)`` or
    ``np.float64(...)``, an ``if``/``else`` expression with such a branch, or with a bare int branch and an array
    element branch, a ``math`` call with a float64 or bare int argument (``math.pow(v, 2)``; ``math.sqrt(v)`` of a
    float32 stays float32), an operation with such an operand outside subscripts or of a bare int with an array
    element (``x[i] * 2``; ``x[i] ** 2`` stays float32) or of an int local, an ``if``/``else`` of two ints or a
    product of comparisons with an array element (``x[i] * m`` with ``m = 1 if inside else 0``; ``x[i] * inside``
    with a plain bool stays float32), or another float64 local; and when it is assigned both a
    bare int and an array element (``v = 0`` and ``v = x[i]``). An int start (``0``, ``int(...)``) whose updates
    read an array element counts too (``total = 0; total += x[i]``), and so does any variable whose update brings in
    a float64 outside subscripts (``total += 0.5 * v``, ``total += w * v`` with ``v`` a float64 local).
    ``np.float32(0.0)``, ``float32(0)``, ``numba.float32(0.0)`` and ``x[i] if inside else np.float32(0)`` pass; so
    do ``acc = x[i] * y[i]``, int counters (``n = 0; n += 1``), loop indices and floats inside an index. Returns the
    names sorted, each once; an empty list means none was found. Raises ValueError when the source cannot be read or
    parsed.
    """
    if args is not None and not isinstance(args, (tuple, list)):
        raise TypeError(f"args: expected a tuple of the kernel's arguments, got {type(args).__name__}")
    source = textwrap.dedent(_source_of(kernel))
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        raise ValueError(f"kernel: its source does not parse as Python ({error.msg}, line {error.lineno})") \
            from error
    started: set[str] = set()
    element_names = _element_names(tree)
    kinds = _int_locals(tree)
    float64_names = _float64_locals(tree, element_names, kinds)
    int_started: set[str] = set()
    updated: set[str] = set()
    updated_with_elements: set[str] = set()
    float64_updates: set[str] = set()
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
                        if _float64_in_update(value, float64_names, element_names, kinds):
                            float64_updates.add(name.id)
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
            if _float64_in_update(node.value, float64_names, element_names, kinds):
                float64_updates.add(node.target.id)
    found = ((started | float64_names) & updated) | (int_started & updated_with_elements) | float64_updates
    found.update(_constructs_cuda_refuses(tree, "the kernel"))
    if not isinstance(kernel, str):
        for device in _device_functions(getattr(kernel, "py_func", kernel)):
            try:
                device_tree = ast.parse(textwrap.dedent(inspect.getsource(device)))
            except (OSError, TypeError, SyntaxError):
                continue
            found.update(_constructs_cuda_refuses(device_tree, f"device function {device.__name__}"))
    if args is not None and not isinstance(kernel, str):
        from numba.core.errors import UnsupportedError

        try:
            found |= set(numba_float64_sums(kernel, tuple(args)))
        except UnsupportedError as error:  # a construct Numba compiles for no target (a generator, a comprehension)
            lines = [line.strip() for line in str(error).splitlines() if line.strip()]
            reason = next((line for line in lines if "unsupported" in line.lower()), lines[0] if lines else "")
            if not any(name.startswith("(a construct") for name in found):  # the source check named it already
                found.add(f"(a construct Numba cannot compile for a GPU: {reason[:120]})")
        except Exception:  # noqa: BLE001 - the stub lacks a name, or njit refuses what CUDA takes: source check alone
            pass
    return sorted(found)


__all__ = ["compile_hint", "float64_accumulators", "float64_accumulators_by_source", "float64_accumulators_many",
           "numba_float64_sums"]
