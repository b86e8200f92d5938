"""The referee of a test cell: the course's checks loaded privately, after an audit for replaced grading code.

A test cell runs its tests in a function, ``@run_now def tests():``, that starts with ``from gpucourse.referee import
check, check_raises, off_limits``: what the tests compute stays local, out of an answer's reach (an answer's function
can read or rebind the notebook's globals while the tests call it). Each import of the referee in a new cell runs this
file afresh and hands over ``check``, ``check_raises`` and ``off_limits`` from a copy of ``checks.py`` of its own: the
source the setup cell saw, executed into a module object that ``sys.modules`` never holds, so an answer that rebinds
``gpucourse.checks.check``, ``_fail``, ``CheckFailed``... changes nothing the test cell uses. Before that it audits the
kernel against the snapshot taken when the setup cell ran (``gpucourse.setup()``, before any answer):

- every function, class and constant of the course's loaded modules (and each function's code and defaults);
- the builtins, and the numpy, math and torch functions that comparisons rely on;
- IPython's ways to swallow or rewrite a cell: ``set_custom_exc``, input and AST transformers, callbacks registered
  by the notebook, methods of the shell or kernel replaced by the notebook;
- the course's modules in ``sys.modules`` and ``checks.py`` on disk.

Anything replaced is put back (the kernel heals, and the next cells run clean) and the test cell fails with
:class:`GradingCodeReplaced`, one sentence naming what was replaced. Each ``check``/``check_raises`` call audits the
checker's own tools again (an answer's function runs between two checks), and the end of the cell audits everything
again (an error is shown if the answer's function replaced something while the cell ran).

The limit: code in the same process can always defeat an in-process referee if it is written against the referee's
own internals (its snapshot, its IPython callbacks, how IPython runs a cell). The referee makes grading impossible
to forge by rebinding what a test cell uses, not impossible to forge at all.
"""

from __future__ import annotations

import builtins
import functools
import importlib.abc
import importlib.machinery
import re
import sys
import types
from pathlib import Path

_STATE = "_gpucourse_referee"  # sys.modules key of the snapshot; not a module of the package, so audits skip it
_NAME = __name__
_PACKAGE = _NAME.rpartition(".")[0]
_FOLDER = Path(__file__).resolve().parent
_MISSING = object()
_IGNORED_GLOBALS = frozenset({"__doc__", "__spec__", "__loader__", "__cached__", "__file__", "__package__",
                              "__path__", "__name__", "__annotations__", "__warningregistry__"})
_IGNORED_CLASS_ADDITIONS = frozenset({"__slotnames__", "__annotations__", "__abstractmethods__", "_abc_impl",
                                      "__weakref__", "__dict__"})
_REBOUND_BY_THE_PACKAGE = frozenset({("gpucourse.kernels.numba_backend", "BACKEND"),
                                     ("gpucourse.kernels.numba_backend", "BACKEND_REASON")})
_CHECKER_NUMPY = ("asarray", "isclose", "argwhere", "bool_", "ndarray", "array", "allclose", "array_equal")
_COMPARISON_TORCH = ("allclose", "equal", "isclose", "is_tensor", "as_tensor", "tensor", "from_numpy")
_IPYTHON_EVENTS = ("pre_execute", "pre_run_cell", "post_execute", "post_run_cell")
_IPYTHON_TRANSFORMERS = ("input_transformers_cleanup", "input_transformers_post", "ast_transformers")
_EXERCISE = re.compile(r"\b(Exercise \d+)")


class GradingCodeReplaced(RuntimeError):
    """The course's grading code (or what it relies on) was replaced in this kernel: the cell cannot be graded."""

    def _render_traceback_(self) -> list[str]:
        """IPython shows only the sentence, no frames of the package."""
        return [f"{type(self).__name__}: {self}"]


def _repair(current: list, saved: list) -> bool:
    """Take what a notebook cell added out of an IPython list, put back what it removed; True if it changed."""
    foreign = [item for item in current if not any(item is kept for kept in saved) and _made_in_notebook(item)]
    for item in foreign:
        current.remove(item)
    missing = [(index, item) for index, item in enumerate(saved) if not any(item is now for now in current)]
    for index, item in missing:
        current.insert(min(index, len(current)), item)
    return bool(foreign or missing)


def _module_of(obj: object) -> str | None:
    """The module that defined ``obj`` (a function, class, bound method, partial or callable instance)."""
    while isinstance(obj, functools.partial):
        obj = obj.func
    obj = getattr(obj, "__func__", obj)
    if isinstance(obj, (types.FunctionType, type, types.BuiltinFunctionType)):
        return getattr(obj, "__module__", None)
    return type(obj).__module__


def _made_in_notebook(obj: object) -> bool:
    """True for what a notebook cell can make in a line: its own functions, classes and objects, builtins, partials."""
    return _module_of(obj) in (None, "__main__", "builtins")


def _course_module(name: str) -> bool:
    """True for the package and its submodules, the referee and private copies excluded."""
    return (name == _PACKAGE or name.startswith(_PACKAGE + ".")) and name != _NAME


def _functions_in(value: object) -> list[types.FunctionType]:
    """The Python functions a class attribute holds (a function, a static/class method, a property's accessors)."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return [f for f in (value.fget, value.fset, value.fdel) if isinstance(f, types.FunctionType)]
    return [value] if isinstance(value, types.FunctionType) else []


class _Snapshot:
    """The genuine objects, saved before any answer ran; ``audit()`` restores them and says what was replaced."""

    def __init__(self) -> None:
        self.builtins = builtins.__dict__
        self.saved_builtins = {name: value for name, value in self.builtins.items()
                               if isinstance(value, (types.BuiltinFunctionType, type))}
        self.builtin_names = set(self.builtins)
        self.modules: dict[str, types.ModuleType] = {}
        self.globals: dict[str, dict[str, object]] = {}
        self.classes: list[tuple[type, str, dict[str, object]]] = []
        self.functions: list[tuple[types.FunctionType, str, object, object, object]] = []
        self.watched: list[tuple[object, str, str, object]] = []  # (owner, name, shown as, genuine value)
        self.watched_modules: set[str] = set()
        self.checker_watch: list[tuple[object, str, str, object]] = []
        self.shell_parts: list[tuple[object, str, dict[str, object]]] = []
        self.callbacks: dict[str, list[object]] = {}
        self.transformers: dict[str, list[object]] = {}
        self.custom_exceptions: object = ()
        self.events: object = None
        self.transformer_manager: object = None
        self.sources: dict[str, str] = {}
        self.pending: list[str] = []
        self.grading: str | None = None
        self.loaded: list[types.ModuleType] = []
        self.finder: _SavedSourceFinder | None = None
        self.builtins_module = builtins
        self.take_new_modules()
        self.sources["checks"] = (_FOLDER / "checks.py").read_text(encoding="utf-8")
        self.sources["referee"] = Path(__file__).read_text(encoding="utf-8")
        self.take_checker_watch()

    # -- the snapshot -------------------------------------------------------------------------------------------

    def take_module(self, name: str, module: object) -> None:
        """Save a course module's globals, its classes' attributes and its functions' code (once per module)."""
        if name in self.modules or not isinstance(module, types.ModuleType) or not _course_module(name):
            return
        self.modules[name] = module
        namespace = vars(module)
        self.globals[name] = {key: value for key, value in namespace.items() if key not in _IGNORED_GLOBALS}
        for key, value in self.globals[name].items():
            self._save_functions(value, f"{name}.{key}")
            if isinstance(value, type) and value.__module__ == name:
                self.classes.append((value, f"{name}.{value.__qualname__}", dict(vars(value))))
                for attribute, member in vars(value).items():
                    for function in _functions_in(member):
                        self._save_functions(function, f"{name}.{value.__qualname__}.{attribute}")

    def take_new_modules(self) -> None:
        """Save every course module loaded since the last call, and the comparison libraries once loaded."""
        for name, module in list(sys.modules.items()):
            self.take_module(name, module)
        self._watch("math", sys.modules.get("math"))
        self._watch("numbers", sys.modules.get("numbers"), ("Real", "Integral", "Number"))
        self._watch("numpy", sys.modules.get("numpy"))
        self._watch("numpy.testing", sys.modules.get("numpy.testing"))
        self._watch("torch", sys.modules.get("torch"), _COMPARISON_TORCH)
        self._watch("torch.testing", sys.modules.get("torch.testing"), ("assert_close",))

    def _save_functions(self, value: object, shown: str) -> None:
        """Save a course function's code, defaults and keyword defaults."""
        if isinstance(value, types.FunctionType) and _course_module(getattr(value, "__module__", "") or ""):
            self.functions.append((value, shown, value.__code__, value.__defaults__, value.__kwdefaults__))

    def _watch(self, shown: str, module: object, names: object = None) -> None:
        """Watch a library's functions and types (all of them, or ``names``) once the library is loaded."""
        if module is None or shown in self.watched_modules:
            return
        self.watched_modules.add(shown)
        namespace = vars(module)
        keys = names if names is not None else [key for key, value in namespace.items()
                                                if callable(value) and not isinstance(value, types.ModuleType)]
        for key in keys:
            if key in namespace:
                self.watched.append((namespace, key, f"{shown}.{key}", namespace[key]))

    def take_checker_watch(self) -> None:
        """What ``check`` itself calls: the builtins, numpy's comparisons and the package's argument checks."""
        import numpy

        self.checker_watch = [(self.builtins, key, f"builtins.{key}", value)
                              for key, value in self.saved_builtins.items()]
        self.checker_watch += [(vars(numpy), key, f"numpy.{key}", vars(numpy)[key])
                               for key in _CHECKER_NUMPY if key in vars(numpy)]
        validate = sys.modules.get(f"{_PACKAGE}._validate")
        if validate is not None:
            self.checker_watch += [(vars(validate), key, f"{_PACKAGE}._validate.{key}", value)
                                   for key, value in self.globals.get(validate.__name__, {}).items()]

    def take_ipython(self, shell: object) -> None:
        """Save the shell's callbacks, transformers, exception handler and methods (and its kernel's)."""
        self.callbacks = {event: list(shell.events.callbacks.get(event, [])) for event in _IPYTHON_EVENTS}
        self.transformers = {name: list(getattr(shell, name, [])) for name in _IPYTHON_TRANSFORMERS}
        self.custom_exceptions = shell.custom_exceptions
        self.events, self.transformer_manager = shell.events, getattr(shell, "input_transformer_manager", None)
        parts = [shell] + ([shell.kernel] if getattr(shell, "kernel", None) is not None else [])
        self.shell_parts = [(part, type(part).__name__, dict(vars(part))) for part in parts]
        for part in parts:
            self.shell_parts += [(cls, cls.__name__, dict(vars(cls))) for cls in type(part).__mro__
                                 if cls is not object]

    # -- the audit ----------------------------------------------------------------------------------------------

    def audit(self, shell: object = None, active_swaps: frozenset = frozenset()) -> list[str]:
        """Put back everything replaced since the snapshot; return what was replaced (empty if nothing)."""
        found = self._restore(self.builtins, self.saved_builtins, "builtins")
        for key in [key for key, value in list(self.builtins.items())
                    if key not in self.builtin_names and callable(value) and _made_in_notebook(value)]:
            del self.builtins[key]
            found.append(f"builtins.{key} was added")
        found += self._restore_watched(self.watched)
        for name, module in self.modules.items():
            if sys.modules.get(name, module) is not module:
                sys.modules[name] = module
                found.append(f"{name} was replaced in sys.modules")
            namespace = vars(module)
            for key, value in self.globals[name].items():
                current = namespace.get(key, _MISSING)
                if current is value or (name, key) in _REBOUND_BY_THE_PACKAGE or (id(namespace), key, id(current)) \
                        in active_swaps:
                    continue
                namespace[key] = value
                found.append(f"{name}.{key} was replaced")
        for cls, shown, saved in self.classes:
            namespace = vars(cls)
            for key, value in saved.items():
                if namespace.get(key, _MISSING) is not value:
                    setattr(cls, key, value)
                    found.append(f"{shown}.{key} was replaced")
            for key in [key for key in namespace if key not in saved and key not in _IGNORED_CLASS_ADDITIONS]:
                delattr(cls, key)
                found.append(f"{shown}.{key} was added")
        for function, shown, code, defaults, kwdefaults in self.functions:
            if function.__code__ is not code or function.__defaults__ is not defaults \
                    or function.__kwdefaults__ is not kwdefaults:
                function.__code__, function.__defaults__, function.__kwdefaults__ = code, defaults, kwdefaults
                found.append(f"the code of {shown} was replaced")
        found += self._audit_files()
        return found + self.audit_ipython(shell)

    def audit_ipython(self, shell: object) -> list[str]:
        """The audit of IPython alone (what can swallow or rewrite a cell); nothing outside IPython."""
        return self._audit_ipython(shell) if shell is not None and self.events is not None else []

    def audit_checker(self) -> list[str]:
        """The quick audit before each check: what ``check`` itself calls."""
        return self._restore_watched(self.checker_watch)

    @staticmethod
    def _restore(namespace: dict, saved: dict, shown: str) -> list[str]:
        """Put ``saved``'s values back into ``namespace``; name each one that differed."""
        found = []
        for key, value in saved.items():
            if namespace.get(key, _MISSING) is not value:
                namespace[key] = value
                found.append(f"{shown}.{key} was replaced")
        return found

    @staticmethod
    def _restore_watched(watched: list[tuple[dict, str, str, object]]) -> list[str]:
        """Put each watched (namespace, key) back to its genuine value; name each one that differed."""
        found = []
        for namespace, key, shown, value in watched:
            if namespace.get(key, _MISSING) is not value:
                namespace[key] = value
                found.append(f"{shown} was replaced")
        return found

    def _audit_files(self) -> list[str]:
        """The course's checks.py on disk, and the finder that serves the saved referee."""
        found = []
        try:
            on_disk = (_FOLDER / "checks.py").read_text(encoding="utf-8")
        except OSError:
            on_disk = None
        if on_disk != self.sources["checks"]:
            found.append("the course's file checks.py was changed")
        if self.finder is not None and (not sys.meta_path or sys.meta_path[0] is not self.finder):
            if self.finder in sys.meta_path:
                sys.meta_path.remove(self.finder)
            sys.meta_path.insert(0, self.finder)
            found.append("the import system's finders were changed")
        return found

    def _audit_ipython(self, shell: object) -> list[str]:
        """Undo what a notebook cell did to IPython to swallow or rewrite a cell."""
        found = []
        namespace = getattr(shell, "user_ns", None)
        if isinstance(namespace, dict) and namespace.get("__builtins__", self.builtins_module) \
                is not self.builtins_module:
            namespace["__builtins__"] = self.builtins_module
            found.append("the notebook's __builtins__ was replaced")
        if shell.custom_exceptions != self.custom_exceptions:
            shell.set_custom_exc((), None)
            shell.custom_exceptions = self.custom_exceptions
            found.append("IPython's exception handler was replaced (set_custom_exc)")
        for name, saved in (("events", self.events), ("input_transformer_manager", self.transformer_manager)):
            if saved is not None and getattr(shell, name, saved) is not saved:
                setattr(shell, name, saved)
                found.append(f"IPython's {name} was replaced")
        for name in _IPYTHON_TRANSFORMERS:
            if not isinstance(getattr(shell, name, None), list):
                setattr(shell, name, [])
            if _repair(getattr(shell, name), self.transformers.get(name, [])):
                found.append(f"IPython's {name} were changed")
        for event in _IPYTHON_EVENTS:
            if _repair(shell.events.callbacks.setdefault(event, []), self.callbacks.get(event, [])):
                found.append(f"IPython's {event} callbacks were changed")
        for owner, shown, saved in self.shell_parts:
            namespace = vars(owner)
            for key in list(namespace):
                current = namespace[key]
                original = saved.get(key, _MISSING)
                if current is original or not callable(current) or not _made_in_notebook(current):
                    continue
                if isinstance(namespace, dict):
                    if original is _MISSING:
                        del namespace[key]
                    else:
                        namespace[key] = original
                elif original is _MISSING:
                    delattr(owner, key)
                else:
                    setattr(owner, key, original)
                found.append(f"IPython's {shown}.{key} was replaced")
        return found


class _SnapshotAfterLoading(importlib.abc.Loader):
    """A course module's own loader, which also saves the module in the snapshot as soon as it has run."""

    def __init__(self, loader: object, state: _Snapshot) -> None:
        self._loader, self._state = loader, state

    def create_module(self, spec: object) -> object:
        """What the module's own loader creates."""
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        """Run the module with its own loader, then save it."""
        self._loader.exec_module(module)
        self._state.take_module(module.__name__, module)

    def __getattr__(self, name: str) -> object:
        return getattr(self._loader, name)


class _SavedSourceFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves the referee from the source saved with the snapshot (a file written over it changes nothing), and has
    every course module loaded from now on saved in the snapshot as soon as it has run (before any answer uses it)."""

    def __init__(self, state: _Snapshot) -> None:
        self._state = state

    def find_spec(self, fullname: str, path: object = None, target: object = None) -> object:
        """The referee's spec; a course module's spec with its loader wrapped; None for anything else."""
        if fullname == _NAME:
            return importlib.machinery.ModuleSpec(fullname, self, origin=str(_FOLDER / "referee.py"))
        if not _course_module(fullname):
            return None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            if finder is self or find is None:
                continue
            spec = find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _SnapshotAfterLoading(spec.loader, self._state)
                return spec
        return None

    def create_module(self, spec: object) -> None:
        """The default module object."""
        return None

    def exec_module(self, module: types.ModuleType) -> None:
        """Run the saved source under the referee's own file name."""
        module.__file__ = str(_FOLDER / "referee.py")
        self._state.loaded.append(module)
        del self._state.loaded[:-2]
        exec(compile(self._state.sources["referee"], module.__file__, "exec"), vars(module))

    def get_source(self, fullname: str) -> str:
        """The saved source (for tracebacks and inspect)."""
        return self._state.sources["referee"]


def _shell() -> object:
    """The running IPython shell, or None outside IPython."""
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    return get() if callable(get) else None


def _active_swaps(checks_globals: dict) -> frozenset:
    """(namespace id, name, blocker id) of every helper an off_limits guard has swapped out right now."""
    swaps = set()
    for guard in checks_globals.get("_ACTIVE_GUARDS", []):
        for owner, attribute, _original, blocker in getattr(guard, "_swaps", []):
            namespace = owner if isinstance(owner, dict) else vars(owner)
            swaps.add((id(namespace), attribute, id(blocker)))
    return frozenset(swaps)


def _exercise_of(source: str) -> str:
    """'Exercise N' from a test cell's source (its docstring names it), else 'This exercise'."""
    found = _EXERCISE.search(source[:300])
    return found.group(1) if found else "This exercise"


def _sentence(exercise: str, found: list[str]) -> str:
    """The one sentence a tampered test cell fails with."""
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    return (f"{exercise} cannot be graded: {found[0]}{more} in this kernel, by an earlier cell (an answer?). It has "
            f"been put back: take that code out of your answer, then run your answer cell and this cell again.")


def _calling_cell_source() -> str:
    """The source of the notebook cell that imports the referee (from its frame's file, as IPython caches it)."""
    import linecache

    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get("__name__") == "__main__":
            return "".join(linecache.getlines(frame.f_code.co_filename))
        frame = frame.f_back
    return ""


def _swaps(state: _Snapshot) -> frozenset:
    """The helpers off_limits guards have swapped out right now (not a replacement of grading code)."""
    checks = state.modules.get(f"{_PACKAGE}.checks")
    return _active_swaps(vars(checks)) if checks is not None else frozenset()


def _show(exercise: str, found: list[str]) -> None:
    """Show GradingCodeReplaced as the running cell's error output (nbgrader scores the cell 0)."""
    shell = _shell()
    try:
        raise GradingCodeReplaced(_sentence(exercise, found))
    except GradingCodeReplaced:
        if shell is not None:
            shell.showtraceback()


def _drop_loaded_referee(state: _Snapshot) -> list[str]:
    """Take the referee out of sys.modules and the package (the next import runs it afresh); name a planted one."""
    planted = sys.modules.pop(_NAME, None)
    package = sys.modules.get(_PACKAGE)
    if package is not None and "referee" in vars(package):
        delattr(package, "referee")
    if planted is not None and not any(planted is module for module in state.loaded):
        return [f"{_NAME} was replaced in sys.modules"]
    return []


def _before_cell(state: _Snapshot, info: object = None) -> None:
    """IPython's pre_run_cell callback: drop the loaded referee, audit and heal.

    IPython has already passed the cell through its input transformers: if something was replaced since the last
    cell ended, a test cell shows the error now, whatever its code was rewritten into.
    """
    try:
        found = _drop_loaded_referee(state) + state.audit(_shell(), _swaps(state))
        state.take_new_modules()
    except Exception as error:  # noqa: BLE001 (an IPython callback must not raise: IPython would print the cell)
        found = [f"the referee's audit failed ({type(error).__name__})"]
    cell = getattr(info, "raw_cell", "") or ""
    if found and _NAME in cell:
        found, state.pending = state.pending + found, []
        _show(_exercise_of(cell), found)
    else:
        state.pending += found


def _after_cell(state: _Snapshot, result: object = None) -> None:
    """IPython's post_run_cell callback: audit and heal after every cell (before the next one is transformed); after
    a test cell, show an error if its answer's function replaced something while the cell ran."""
    exercise, state.grading = state.grading, None
    try:
        found = state.audit(_shell(), _swaps(state))
        if exercise is None:
            found += _drop_loaded_referee(state)
    except Exception as error:  # noqa: BLE001
        found = [f"the referee's audit failed ({type(error).__name__})"]
    if found and exercise is not None:
        _show(exercise, found)
    else:
        state.pending += found


def _check_cell(state: _Snapshot, lines: list[str]) -> list[str]:
    """IPython input transformer (the first of input_transformers_post): if IPython's callbacks or transformers were
    tampered with since the last audit, put them back (a notebook's later transformers no longer run on this cell)
    and make the cell start with an import of the referee, which fails naming what was replaced."""
    try:
        found = state.audit_ipython(_shell())
    except Exception as error:  # noqa: BLE001 (a transformer must return lines)
        found = [f"the referee's audit failed ({type(error).__name__})"]
    if not found:
        return lines
    state.pending += found
    return [f"import {_NAME}\n"] + list(lines)


def _install(state: _Snapshot) -> None:
    """Keep the snapshot; in IPython, serve the referee from it and audit before and after every cell."""
    sys.modules[_STATE] = types.ModuleType(_STATE, "The referee's snapshot of the genuine grading code.")
    sys.modules[_STATE].state = state
    state.loaded.append(sys.modules[_NAME])
    shell = _shell()
    if shell is not None:
        state.finder = _SavedSourceFinder(state)
        sys.meta_path.insert(0, state.finder)
        shell.events.register("pre_run_cell", functools.partial(_before_cell, state))
        shell.events.register("post_run_cell", functools.partial(_after_cell, state))
        shell.input_transformers_post.insert(0, functools.partial(_check_cell, state))
        state.take_ipython(shell)


def _private_checks(state: _Snapshot) -> types.ModuleType:
    """checks.py's saved source executed into a module of its own, sharing the live module's off-limits guards."""
    module = types.ModuleType(f"{_PACKAGE}.checks")
    module.__file__ = str(_FOLDER / "checks.py")
    module.__builtins__ = state.builtins
    exec(compile(state.sources["checks"], module.__file__, "exec"), vars(module))
    live = state.modules.get(f"{_PACKAGE}.checks")
    if live is not None:  # the guards in force are what gpucourse.parallel.launch re-applies in its workers
        module._ACTIVE_GUARDS = state.globals[live.__name__]["_ACTIVE_GUARDS"]
    return module


def _referee(state: _Snapshot, private: types.ModuleType, exercise: str) -> tuple[object, object]:
    """check and check_raises that first audit what the checker calls (an answer's function runs between checks)."""

    def audited() -> None:
        found = state.audit_checker()
        if found:
            raise GradingCodeReplaced(_sentence(exercise, found))

    @functools.wraps(private.check)
    def check(name: str, yours: object, expected: object, **options: object) -> None:
        audited()
        private.check(name, yours, expected, **options)

    @functools.wraps(private.check_raises)
    def check_raises(name: str, call: object, error: type[BaseException], **options: object) -> None:
        audited()
        private.check_raises(name, call, error, **options)

    return check, check_raises


def run_now(tests: object) -> object:
    """Run a test cell's tests at once (a decorator): the names they compute stay inside the function, where an
    answer's code cannot read or replace them. The cell's name ``tests`` is left bound to what they return: None,
    or, in a cell graded with partial credit, the points earned (the cell then ends in the bare name ``tests``,
    which nbgrader reads as that many points)."""
    if not callable(tests):
        raise TypeError(f"run_now decorates the test cell's function, got {type(tests).__name__}")
    return tests()


def _load() -> tuple[object, object, object, type, type]:
    """Snapshot on the first load (the setup cell); on later loads audit, heal, and fail naming what was replaced."""
    import gpucourse.checks  # noqa: F401  (the live module, whose guards the private copy shares)

    holder = sys.modules.get(_STATE)
    state = getattr(holder, "state", None)
    if state is None:
        state = _Snapshot()
        _install(state)
    exercise = _exercise_of(_calling_cell_source())
    found = state.pending + state.audit(_shell(), _swaps(state))
    state.pending = []
    state.take_new_modules()
    if found:
        raise GradingCodeReplaced(_sentence(exercise, found))
    state.grading = exercise
    private = _private_checks(state)
    return (*_referee(state, private, exercise), private.off_limits, private.CheckFailed, private.OffLimits)


check, check_raises, off_limits, CheckFailed, OffLimits = _load()

__all__ = ["check", "check_raises", "off_limits", "run_now", "CheckFailed", "OffLimits", "GradingCodeReplaced"]
