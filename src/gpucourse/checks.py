"""Exercise checks: say what is wrong ("yours ..., expected ...") and hint at a fix; never write to stderr."""

from __future__ import annotations

import functools

import numbers
import sysconfig
import traceback
from collections.abc import Callable
from pathlib import Path

from gpucourse._validate import non_negative_number


# Frames in these folders (this package, installed packages such as IPython, the standard library) are not the
# learner's: a failed check's traceback leaves them out.
_LIBRARY_DIRS = tuple({str(Path(__file__).resolve().parent)} | {str(Path(sysconfig.get_paths()[key]).resolve())
                                                                for key in ("purelib", "platlib", "stdlib")})


def _learner_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """The frames of ``error``'s traceback outside the package, installed libraries and the standard library."""
    return [frame for frame in traceback.extract_tb(error.__traceback__)
            if not str(Path(frame.filename).resolve()).startswith(_LIBRARY_DIRS)]


class CheckFailed(AssertionError):
    """An exercise answer that does not match; the message says how and hints at a fix."""

    def _render_traceback_(self) -> list[str]:
        """IPython's traceback for this error: the message and the notebook lines that led to it, no package frames."""
        lines = f"{type(self).__name__}: {self}".splitlines()
        for frame in _learner_frames(self)[-3:]:
            if frame.line:
                where = "this cell" if frame.name in ("<module>", "tests") else f"{frame.name}()"
                lines.append(f"    in {where}, line {frame.lineno}: {frame.line}")
        return lines


def _describe(value: object) -> str:
    """Short, readable rendering of a value for a failure message."""
    if isinstance(value, float):
        return f"{value:.6g}"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _fail(name: str, message: str, hint: str) -> None:
    """Raise CheckFailed with the exercise name, the problem and the hint."""
    raise CheckFailed(f"{name}: {message}" + (f"\n  Hint: {hint}" if hint else ""))


def _is_number(value: object) -> bool:
    """True for real numbers, False for bools (which Python counts as ints)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _compare_numbers(name: str, yours: float, expected: float, rtol: float, atol: float, hint: str) -> None:
    """Fail unless |yours - expected| <= atol + rtol * |expected|."""
    if yours != yours:  # NaN
        _fail(name, f"yours is NaN, expected {_describe(expected)}", hint)
    if abs(yours - expected) > atol + rtol * abs(expected):
        off = f" ({yours / expected:.3g}x the expected value)" if expected else ""
        _fail(name, f"yours {_describe(yours)}, expected {_describe(expected)}{off}", hint)


def _compare_arrays(name: str, yours: object, expected: object, rtol: float, atol: float, hint: str) -> None:
    """Fail unless the arrays have the same shape and all elements are close."""
    import numpy as np

    expected_array = np.asarray(expected, dtype=float)
    try:
        yours_array = np.asarray(yours, dtype=float)
    except (TypeError, ValueError, RuntimeError):  # RuntimeError: e.g. a tensor that needs grad or lives on a GPU
        yours_array = None
    if yours_array is None:  # raised outside the except block, so no numpy traceback is chained to it
        _fail(name, f"yours is {type(yours).__name__} {_describe(yours)}, expected numbers of shape "
                    f"{expected_array.shape}", hint)
    if yours_array.shape != expected_array.shape:
        _fail(name, f"yours has shape {yours_array.shape}, expected {expected_array.shape}", hint)
    close = np.isclose(yours_array, expected_array, rtol=rtol, atol=atol)
    if not close.all():
        where = tuple(int(i) for i in np.argwhere(~close)[0])
        _fail(name, f"{int((~close).sum())} of {close.size} values differ; first at index {where}: "
                    f"yours {_describe(float(yours_array[where]))}, expected {_describe(float(expected_array[where]))}",
              hint)


def check(name: str, yours: object, expected: object, *, hint: str = "", rtol: float = 1e-6,
          atol: float = 0.0, quiet: bool = False) -> None:
    """Compare an answer with the expected one; raise CheckFailed saying what differs, else print a tick."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    rtol, atol = non_negative_number("rtol", rtol), non_negative_number("atol", atol)
    if yours is None and expected is not None:
        _fail(name, "yours is None: did the function forget to `return` its result?", hint)
    import numpy as np

    if isinstance(yours, np.bool_):  # e.g. the result of a > b on numpy numbers is a numpy bool, not a bool
        yours = bool(yours)
    if isinstance(expected, bool):
        if not isinstance(yours, bool):
            _fail(name, f"yours is {type(yours).__name__} {_describe(yours)}, expected a bool ({expected})", hint)
        if yours != expected:
            _fail(name, f"yours {yours}, expected {expected}", hint)
    elif _is_number(expected):
        if not _is_number(yours):
            _fail(name, f"yours is {type(yours).__name__} {_describe(yours)}, expected a number "
                        f"close to {_describe(expected)}", hint)
        _compare_numbers(name, float(yours), float(expected), rtol, atol, hint)
    elif isinstance(expected, str):
        if not (isinstance(yours, str) and str.__eq__(yours, expected)):  # str's own ==, not an answer's __eq__
            _fail(name, f"yours {_describe(yours)}, expected {_describe(expected)}", hint)
    elif isinstance(expected, dict):
        if not isinstance(yours, dict):
            _fail(name, f"yours is {type(yours).__name__}, expected a dict with keys "
                        f"{sorted(map(str, expected))}", hint)
        if set(yours) != set(expected):
            _fail(name, f"yours has keys {sorted(map(str, yours))}, expected {sorted(map(str, expected))}", hint)
        for key, value in expected.items():
            check(f"{name}[{key!r}]", yours[key], value, hint=hint, rtol=rtol, atol=atol, quiet=True)
    else:
        _compare_arrays(name, yours, expected, rtol, atol, hint)
    if not quiet:
        print(f"\N{CHECK MARK} {name}")


def check_raises(name: str, call: Callable[[], object], error: type[BaseException], *, hint: str = "",
                 quiet: bool = False) -> None:
    """Check that ``call()`` raises ``error``; raise CheckFailed if it returns or raises something else."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str, got {name!r}")
    if not callable(call):
        raise TypeError(f"call must be callable, got {type(call).__name__}")
    if not (isinstance(error, type) and issubclass(error, BaseException)):
        raise TypeError(f"error must be an exception class such as ValueError, got {error!r}")
    try:
        result = call()
    except error:
        if not quiet:
            print(f"\N{CHECK MARK} {name}")
        return
    except Exception as other:  # the wrong kind of error is a wrong answer, reported as such
        _fail(name, f"raised {type(other).__name__}({other}), expected {error.__name__}", hint)
    _fail(name, f"returned {_describe(result)} instead of raising {error.__name__}", hint)


class OffLimits(CheckFailed):
    """A course helper called while a test cell grades the exercise that asks the learner to write it."""


def _resolve(dotted: str) -> tuple[object, str, object]:
    """Split 'gpucourse.module.name' into (module object, attribute name, current value); ValueError if absent."""
    import importlib

    if not isinstance(dotted, str) or not dotted.startswith("gpucourse.") or dotted.count(".") < 2:
        raise ValueError(f"helpers must be dotted names such as 'gpucourse.timing.benchmark', got {dotted!r}")
    module_name, _, attribute = dotted.rpartition(".")
    module = importlib.import_module(module_name)
    if not hasattr(module, attribute):
        raise ValueError(f"helpers: {module_name} has no attribute {attribute!r}")
    return module, attribute, getattr(module, attribute)


def _other_bindings(original: object, home: object) -> list[tuple[object, str]]:
    """(module, name) for every loaded ``gpucourse`` module other than ``home`` whose global ``name`` is ``original``."""
    import sys

    found = []
    for module_name, module in list(sys.modules.items()):
        if module is home or module is None or not (module_name == "gpucourse" or module_name.startswith("gpucourse.")):
            continue
        for name, value in list(vars(module).items()):
            if value is original:
                found.append((module, name))
    return found


def _blocker(dotted: str, exercise: str) -> Callable[..., object]:
    """A stand-in that raises OffLimits naming the exercise and the helper."""

    def blocked(*args: object, **kwargs: object) -> object:
        raise OffLimits(f"{exercise} asks you to write this yourself; {dotted} is off-limits in it.\n"
                        f"  Hint: use numpy, torch or plain Python in your answer, not the course's own helper.")

    blocked.__name__ = blocked.__qualname__ = dotted.rpartition(".")[2]
    return blocked


_ACTIVE_GUARDS: list["OffLimitsGuard"] = []
"""Guards in force now, oldest first: :func:`gpucourse.parallel.launch` re-applies them in its worker processes."""


class OffLimitsGuard:
    """Active while a test cell runs: the named helpers raise OffLimits; ``restore()`` puts them back."""

    def __init__(self, swaps: list[tuple[object, str, object, object]], namespaces: list[dict],
                 helpers: tuple[str, ...] = (), exercise: str = "") -> None:
        self._swaps = swaps  # (owner, attribute, original, blocker); owner is a module or a namespace dict
        self._namespaces = namespaces
        self.helpers, self.exercise = helpers, exercise
        self.active = True
        _ACTIVE_GUARDS.append(self)

    def restore(self, *_: object) -> None:
        """Put every helper back (safe to call twice)."""
        if not self.active:
            return
        if self in _ACTIVE_GUARDS:
            _ACTIVE_GUARDS.remove(self)
        for owner, attribute, original, blocker in reversed(self._swaps):
            if isinstance(owner, dict):
                if owner.get(attribute) is blocker:
                    owner[attribute] = original
            elif getattr(owner, attribute, None) is blocker:
                setattr(owner, attribute, original)
        self.active = False

    def __enter__(self) -> "OffLimitsGuard":
        return self

    def __exit__(self, *_: object) -> None:
        self.restore()


def off_limits(*helpers: str, exercise: str, namespace: dict | None = None) -> OffLimitsGuard:
    """Make course helpers raise OffLimits until the end of the current notebook cell (or of a ``with`` block).

    ``helpers`` are dotted names ('gpucourse.timing.benchmark'). Besides the module attribute, every name in
    ``namespace`` (default: the caller's globals, i.e. the notebook's) bound to the same object is swapped too, so
    ``from gpucourse.timing import benchmark`` in an answer is caught as well. In IPython the helpers come back
    after the cell, whether it passed or failed. Worker processes started by :func:`gpucourse.parallel.launch`
    while the guard is active block the same helpers.
    """
    import inspect

    if namespace is None:
        frame = inspect.currentframe()
        namespace = frame.f_back.f_globals if frame is not None and frame.f_back is not None else {}
    elif not isinstance(namespace, dict):
        raise TypeError(f"namespace must be a dict (a module's globals), got {type(namespace).__name__}")
    guard = _block(helpers, exercise, [namespace])
    _restore_after_cell(guard)
    return guard


def _block(helpers: tuple[str, ...], exercise: object, namespaces: list[dict]) -> OffLimitsGuard:
    """Swap each helper for a blocker in its module, in every gpucourse module that re-exports it, in ``namespaces``."""
    if not isinstance(exercise, str) or not exercise:
        raise TypeError(f"exercise must be a non-empty str such as 'Exercise 1', got {exercise!r}")
    if not helpers:
        raise ValueError("helpers: name at least one helper, e.g. 'gpucourse.timing.benchmark'")
    swaps: list[tuple[object, str, object, object]] = []
    for dotted in helpers:
        module, attribute, original = _resolve(dotted)
        blocker = _blocker(dotted, exercise)
        setattr(module, attribute, blocker)
        swaps.append((module, attribute, original, blocker))
        for other, name in _other_bindings(original, module):  # re-exports: the same helper under another module
            setattr(other, name, blocker)
            swaps.append((other, name, original, blocker))
        for namespace in namespaces:
            for name, value in list(namespace.items()):
                if value is original:
                    namespace[name] = blocker
                    swaps.append((namespace, name, original, blocker))
    return OffLimitsGuard(swaps, namespaces, tuple(helpers), exercise)


def active_off_limits() -> list[tuple[tuple[str, ...], str]]:
    """(helpers, exercise) of every off-limits guard in force now: what a worker process must block too."""
    return [(guard.helpers, guard.exercise) for guard in _ACTIVE_GUARDS if guard.active]


def _function_namespaces(objects: tuple[object, ...], limit: int = 500) -> list[dict]:
    """The globals of every function reachable from ``objects`` (and from those globals' functions), each once."""
    import types

    seen_functions: set[int] = set()
    namespaces: dict[int, dict] = {}
    pending = list(objects)
    while pending and len(seen_functions) < limit:
        item = pending.pop()
        if isinstance(item, (list, tuple, set, frozenset)):
            pending.extend(item)
        elif isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, functools.partial):
            pending.extend((item.func, *item.args, *item.keywords.values()))
        elif isinstance(item, types.FunctionType) and id(item) not in seen_functions:
            seen_functions.add(id(item))
            module = item.__globals__.get("__name__", "")
            if isinstance(module, str) and (module == "gpucourse" or module.startswith("gpucourse.")):
                continue  # the course's own modules are handled through sys.modules
            if id(item.__globals__) not in namespaces:
                namespaces[id(item.__globals__)] = item.__globals__
                pending.extend(value for value in item.__globals__.values() if isinstance(value, types.FunctionType))
    return list(namespaces.values())


def block_in_worker(blocked: list[tuple[tuple[str, ...], str]], objects: tuple[object, ...]) -> None:
    """In a worker: block the caller's off-limits helpers, in the modules and in the shipped functions' globals."""
    namespaces = _function_namespaces(objects)
    for helpers, exercise in blocked:
        _block(helpers, exercise, namespaces)


def _restore_after_cell(guard: OffLimitsGuard) -> None:
    """In IPython, restore the helpers once the running cell ends (pass or fail)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return

    def restore_once(*_: object) -> None:
        guard.restore()
        shell.events.unregister("post_run_cell", restore_once)

    shell.events.register("post_run_cell", restore_once)
