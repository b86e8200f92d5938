"""Lessons on an install without TensorFlow: each TensorFlow statement is skipped and its cell says why, once.

TensorFlow publishes no wheel for Python 3.14 yet, so there the course installs without it (an environment marker
in pyproject.toml). :func:`gpucourse.setup` then adds :class:`SkipTensorFlow` to IPython's AST transformers: before a
cell runs, every top-level statement that uses TensorFlow is left out, and so is every later statement that uses a
name such a statement defined; the cell prints one sentence saying why. A graded test cell (one that calls
``off_limits``) that needs TensorFlow raises that sentence instead (``NotAvailableHere``, shown as one line), so an
exercise never earns points it did not check.

A statement "uses TensorFlow" if it imports ``tensorflow`` or ``keras``, or names something one of whose
underscore-separated words is ``tf``, ``tensorflow`` or ``keras`` (``tf.matmul``, ``TF_DEVICES``,
``placement.configure_tensorflow``): the lessons' naming convention, checked by the tests on every lesson.
"""

from __future__ import annotations

import ast
import os
import sys

from gpucourse import platforms

FORCE_ENV = "GPUCOURSE_WITHOUT_TENSORFLOW"
"""Set to 1 to skip TensorFlow statements where TensorFlow is missing on any Python (the course's tests do)."""

TENSORFLOW_WORDS = frozenset({"tf", "tensorflow", "keras"})
TENSORFLOW_MODULES = frozenset({"tensorflow", "keras", "tf_keras"})


def reason() -> str:
    """The one sentence a skipped cell prints (:func:`gpucourse.platforms.available`'s, for "tensorflow")."""
    return platforms.available("tensorflow").reason


def active() -> bool:
    """True where TensorFlow cannot be imported and cells should skip it: Python 3.14 or later, or FORCE_ENV=1."""
    if os.environ.get(FORCE_ENV, "") not in ("", "0", "1"):
        raise ValueError(f"{FORCE_ENV} must be 0 or 1, got {os.environ[FORCE_ENV]!r}")
    wanted = sys.version_info >= (3, 14) or os.environ.get(FORCE_ENV) == "1"
    return wanted and not platforms.available("tensorflow").ok


def _is_tensorflow_word(identifier: str) -> bool:
    """True for identifiers such as tf, keras, TF_SETUP, configure_tf_devices (not tf32 or round_to_tf32)."""
    return any(word in TENSORFLOW_WORDS for word in identifier.lower().split("_"))


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.ListComp, ast.SetComp, ast.DictComp,
           ast.GeneratorExp)


def _bound_names(statement: ast.stmt) -> set[str]:
    """Names a top-level statement defines in the module: assignment and loop targets, functions, classes, imports
    (not the local names of a function or a comprehension)."""
    names: set[str] = set()

    def walk(node: ast.AST) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            return
        if isinstance(node, _SCOPES):
            return
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        for child in ast.iter_child_nodes(node):
            walk(child)

    walk(statement)
    return names


class _Uses(ast.NodeVisitor):
    """Finds a use of TensorFlow, or a read of a skipped module-level name that no local name shadows."""

    def __init__(self, skipped: set[str] | frozenset[str]) -> None:
        self.skipped, self.local, self.found = skipped, [set()], False

    def visit_Name(self, node: ast.Name) -> None:
        shadowed = any(node.id in names for names in self.local)
        if _is_tensorflow_word(node.id) or (isinstance(node.ctx, ast.Load) and node.id in self.skipped
                                            and not shadowed):
            self.found = True

    def visit_Attribute(self, node: ast.Attribute) -> None:
        self.found |= _is_tensorflow_word(node.attr)
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found |= any(alias.name.split(".")[0] in TENSORFLOW_MODULES for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.found |= (node.module or "").split(".")[0] in TENSORFLOW_MODULES

    def _scope(self, node: ast.AST) -> None:
        """Visit a function, lambda or comprehension with its own names (parameters, local targets) shadowing."""
        names = {arg.arg for arg in ast.walk(node) if isinstance(arg, ast.arg)}
        names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.local.append(names)
        self.generic_visit(node)
        self.local.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _scope
    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _scope


def uses_tensorflow(statement: ast.stmt, skipped: set[str] | frozenset[str] = frozenset()) -> bool:
    """True if the statement imports or names TensorFlow, or reads a module-level name in ``skipped``."""
    finder = _Uses(skipped)
    finder.visit(statement)
    return finder.found


def _is_graded_test(module: ast.Module) -> bool:
    """A graded test cell of the course: it takes its checker from gpucourse.referee, or calls off_limits(...)."""
    return any((isinstance(node, ast.ImportFrom) and node.module == "gpucourse.referee")
               or (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "off_limits")
               for node in ast.walk(module))


class SkipTensorFlow(ast.NodeTransformer):
    """IPython AST transformer: leave out the TensorFlow statements of a cell (and what depends on them), say why."""

    def __init__(self) -> None:
        super().__init__()
        self.skipped: set[str] = set()  # names that skipped statements would have defined, across cells

    def visit_Module(self, module: ast.Module) -> ast.Module:
        """The cell without its TensorFlow statements, opened by one print of :func:`reason` (or one raise)."""
        kept, left_out = [], False
        for statement in module.body:
            if uses_tensorflow(statement, self.skipped - _bound_names(statement)):  # names it sets are its own
                self.skipped |= _bound_names(statement)
                left_out = True
            else:
                self.skipped -= _bound_names(statement)
                kept.append(statement)
        if not left_out:
            return module
        if _is_graded_test(module):
            notice = f"raise __import__('gpucourse.platforms').platforms.NotAvailableHere({reason()!r})"
            module.body = ast.parse(notice).body
        else:
            module.body = ast.parse(f"print({reason()!r}, flush=True)").body + kept
        return ast.fix_missing_locations(module)


def install(shell: object = None) -> bool:
    """Add :class:`SkipTensorFlow` to the IPython shell's AST transformers where :func:`active`; True if it is there."""
    if not active():
        return False
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:
            return False
        shell = get_ipython()
    if shell is None:
        return False
    transformers = getattr(shell, "ast_transformers", None)
    if not isinstance(transformers, list):
        raise TypeError(f"shell must be an IPython shell (with a list of ast_transformers), got {type(shell).__name__}")
    if not any(isinstance(transformer, SkipTensorFlow) for transformer in transformers):
        transformers.append(SkipTensorFlow())
    return True


__all__ = ["FORCE_ENV", "SkipTensorFlow", "active", "install", "reason", "uses_tensorflow"]
