"""Tampering wrong answers: answers that try to forge their test cell's verdict instead of computing it (issue 28).

Each kind is an exercise's ``constant`` wrong answer (the visible example's answer, which the hidden checks catch)
plus the few lines a learner who reads the visible test cell could add so that the hidden checks pass too. Each must
make its test cell fail (gpucourse.referee names what was replaced) and leave the kernel healed for the next cells.

- ``tamper_check``: rebinds ``check`` and ``check_raises`` in gpucourse.checks and in every loaded course module;
- ``tamper_compare``: patches the comparison: checks' ``_compare_numbers``, ``_compare_arrays``, ``_fail`` and
  ``CheckFailed``, the argument check ``non_negative_number`` (tolerances), numpy's ``isclose``, ``allclose`` and
  ``array_equal``, torch's ``allclose``;
- ``tamper_reference``: when called, the answer calls (or returns) a reference or an expected value that a test cell
  or an earlier cell left in the notebook's globals;
- ``tamper_names``: pre-fills the names a test cell reads (``check``, ``run_now``, ``expected``...) in builtins, and
  in the notebook where the lesson has not set them (a lesson's own globals stay, so its later cells still run);
- ``tamper_hooks``: makes IPython swallow the test cell's error (``set_custom_exc``);
- ``tamper_transformer``: makes IPython empty the test cell (an input transformer);
- ``tamper_during_test``: when called (while the test cell runs), the answer rebinds the checker and numpy's
  comparisons.

The in-function kinds go into the first top-level function of the ``constant`` answer that has no decorator (the one
the test cell calls); an exercise whose ``constant`` answer has none gets the other kinds only, and so does one whose
answer is a ``%%writefile`` script (run by other processes): its kinds write the script with IPython's
``run_cell_magic`` after the tampering lines.
"""

from __future__ import annotations

import ast

TAMPER_KINDS = ("tamper_check", "tamper_compare", "tamper_reference", "tamper_names", "tamper_hooks",
                "tamper_transformer", "tamper_during_test")

_CHECK = '''\
import sys as _sys
for _module in list(_sys.modules.values()):
    if getattr(_module, "__name__", "").startswith("gpucourse"):
        for _name in ("check", "check_raises"):
            if hasattr(_module, _name):
                setattr(_module, _name, lambda *args, **kwargs: None)
'''

_COMPARE = '''\
import sys as _sys
import numpy as _np
import gpucourse._validate as _validate
import gpucourse.checks as _checks
_checks._compare_numbers = _checks._compare_arrays = _checks._fail = lambda *args, **kwargs: None
_checks.CheckFailed = Warning
_validate.non_negative_number = lambda name, value: 1e300
_np.isclose = lambda a, b, *args, **kwargs: _np.ones(_np.broadcast(_np.asarray(a), _np.asarray(b)).shape, dtype=bool)
_np.allclose = _np.array_equal = lambda *args, **kwargs: True
if "torch" in _sys.modules:
    _sys.modules["torch"].allclose = lambda *args, **kwargs: True
'''

_NAMES = '''\
import builtins as _builtins
_forged = lambda *args, **kwargs: None
for _name in ("check", "check_raises", "off_limits", "run_now", "tests", "expected", "wanted"):
    globals().setdefault(_name, _forged)
    setattr(_builtins, _name, _forged)
'''

_HOOKS = '''\
get_ipython().set_custom_exc((BaseException,), lambda *args, **kwargs: None)
'''

_TRANSFORMER = '''\
get_ipython().input_transformers_post.append(lambda lines: ["pass\\n"])
'''

_REFERENCE = '''\
for _name, _value in list(globals().items()):
    if _name.lstrip("_").startswith(("expected", "reference", "wanted", "target")):
        if not callable(_value):
            return _value
        try:
            return _value({arguments})
        except TypeError:
            pass
'''

_DURING = '''\
import numpy as _np
import gpucourse.checks as _checks
_np.isclose = lambda a, b, *args, **kwargs: _np.ones(_np.broadcast(_np.asarray(a), _np.asarray(b)).shape, dtype=bool)
_checks.check = _checks.check_raises = lambda *args, **kwargs: None
'''


def _answer_function(tree: ast.Module) -> ast.FunctionDef | None:
    """The first top-level function without a decorator: the one the test cell calls."""
    return next((node for node in tree.body if isinstance(node, ast.FunctionDef) and not node.decorator_list), None)


def _into_function(source: str, code: str) -> str | None:
    """``source`` with ``code`` run first in its answer function's body (after its docstring); None if it has none."""
    function = _answer_function(ast.parse(source))
    if function is None:
        return None
    arguments = ", ".join(arg.arg for arg in function.args.posonlyargs + function.args.args)
    body = function.body
    first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
        else body[0]
    start = min([first.lineno] + [decorator.lineno for decorator in getattr(first, "decorator_list", [])])
    indent = " " * first.col_offset
    lines = source.splitlines(keepends=True)
    injected = "".join(indent + line if line.strip() else line
                       for line in code.format(arguments=arguments).splitlines(keepends=True))
    return "".join(lines[:start - 1]) + injected + "".join(lines[start - 1:])


def _written_file(source: str) -> tuple[str, str] | None:
    """(file name, contents) of a ``%%writefile NAME`` cell; None for a Python cell."""
    first, _, body = source.partition("\n")
    if not first.startswith("%%writefile "):
        return None
    return first.split(maxsplit=1)[1], body


def tampering(constant: str, reference: str | None = None) -> dict[str, str]:
    """The tampering kinds built on a ``constant`` wrong answer; ``reference`` replaces the generic search of the
    notebook's globals with one call (e.g. "reference_orders(p, m, bounded=True)")."""
    if not isinstance(constant, str) or "def " not in constant:
        raise ValueError("constant must be the source of a wrong solution cell that defines the answer")
    script = _written_file(constant)
    if script is not None:  # a %%writefile cell: the file is the answer, run in other processes (torchrun)
        constant = f"get_ipython().run_cell_magic('writefile', {script[0]!r}, {script[1]!r})\n"
    kinds = {"tamper_check": _CHECK + constant, "tamper_compare": _COMPARE + constant, "tamper_names": _NAMES + constant,
             "tamper_hooks": _HOOKS + constant, "tamper_transformer": _TRANSFORMER + constant}
    search = _REFERENCE if reference is None else (
        f"_reference = globals().get({reference.partition('(')[0]!r})\n"
        f"if callable(_reference):\n    return _reference({reference.partition('(')[2]}\n")
    for kind, code in (("tamper_reference", search), ("tamper_during_test", _DURING)):
        built = None if script is not None else _into_function(constant, code)
        if built is not None:
            kinds[kind] = built
    for kind, source in kinds.items():
        compile(source, f"<{kind}>", "exec")
    return kinds


def with_tampering(wrong: dict[str, dict[str, str]], references: dict[str, str] | None = None
                   ) -> dict[str, dict[str, str]]:
    """A lesson's WRONG with the tampering kinds added to every exercise (built on its ``constant`` answer)."""
    references = references or {}
    unknown = set(references) - set(wrong)
    if unknown:
        raise ValueError(f"references name exercises with no wrong answers: {sorted(unknown)}")
    return {solution_id: {**kinds, **tampering(kinds["constant"], references.get(solution_id))}
            for solution_id, kinds in wrong.items()}
