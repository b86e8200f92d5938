"""Tests of gpucourse.referee: a test cell's checks cannot be forged by rebinding what the cell uses.

Each scenario runs in one IPython shell in a fresh Python process: the referee's first load (as gpucourse.setup()
does it) saves the genuine objects, then an answer cell tampers and returns a wrong value, then the test cell runs
(it must fail, naming what was replaced), then the model answer and the test cell again (the kernel has healed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from gpucourse import checks

TEST_CELL = '''"""Exercise 2: the answer doubles its input."""
from gpucourse.referee import check, check_raises, off_limits
import gpucourse.roofline

off_limits("gpucourse.roofline.matmul_flops", exercise="Exercise 2")
check("double(2)", double(2), 4)
check("double('a') is 'aa'", double("a"), "aa")
check_raises("double(None) raises TypeError", lambda: double(None), TypeError)
check("a bound from the package", gpucourse.roofline.time_lower_bound(2.0, 1.0, 1.0, 1.0), 2.0)
'''
MODEL = "def double(x):\n    return x * 2\n"
WRONG = "\ndef double(x):\n    return 0\n"

TAMPERS = {  # what the answer cell does -> words the failing test cell must say
    "check": ("import gpucourse.checks as c; c.check = c.check_raises = lambda *a, **k: None", "gpucourse.checks.check"),
    "every_module": ("import sys\nfor m in list(sys.modules.values()):\n    if hasattr(m, 'check'):\n"
                     "        try:\n            m.check = lambda *a, **k: None\n        except Exception:\n"
                     "            pass", "check was replaced"),
    "compare": ("import gpucourse.checks as c\nc._compare_numbers = c._fail = lambda *a, **k: None\n"
                "c.CheckFailed = Warning", "gpucourse.checks."),
    "numpy": ("import numpy as np; np.isclose = lambda *a, **k: np.array([True])", "numpy.isclose"),
    "builtins": ("import builtins; builtins.isinstance = lambda *a: True", "builtins.isinstance"),
    "builtins_added": ("import builtins; builtins.check = lambda *a, **k: None", "builtins.check was added"),
    "validate": ("import gpucourse._validate as v; v.non_negative_number = lambda name, value: 1e300",
                 "gpucourse._validate.non_negative_number"),
    "code": ("import gpucourse.roofline as r\n"
             "r.time_lower_bound.__code__ = (lambda flops, nbytes, peak_flops, bandwidth: 0.0).__code__",
             "the code of gpucourse.roofline.time_lower_bound"),
    "class": ("import gpucourse.microbench as m; m.SimulatedSM.run = lambda self, warps: None",
              "gpucourse.microbench.SimulatedSM.run"),
    "custom_exc": ("get_ipython().set_custom_exc((BaseException,), lambda *a, **k: None)", "set_custom_exc"),
    "input_transformer": ("get_ipython().input_transformers_post.append(lambda lines: [])", "input_transformers_post"),
    "cleanup_transformer": ("get_ipython().input_transformers_cleanup.append(lambda lines: [])",
                            "input_transformers_cleanup"),
    "no_callbacks": ("ip = get_ipython()\nfor event in ('pre_run_cell', 'post_run_cell', 'pre_execute', 'post_execute'):\n"
                     "    ip.events.callbacks[event].clear()\nip.input_transformers_post.append(lambda lines: [])",
                     "input_transformers_post were changed (and 4 more)"),
    "ast_transformer": ("import ast\nclass Empty(ast.NodeTransformer):\n    def visit_Module(self, node):\n"
                        "        node.body = []\n        return node\nget_ipython().ast_transformers.append(Empty())",
                        "ast_transformers"),
    "callback": ("get_ipython().events.register('post_run_cell', lambda result: "
                 "get_ipython().input_transformers_post.append(lambda lines: []))", "post_run_cell callbacks"),
    "showtraceback": ("get_ipython().showtraceback = lambda *a, **k: None", "showtraceback"),
    "fake_referee": ("import sys, types\nfake = types.ModuleType('gpucourse.referee')\n"
                     "fake.check = fake.check_raises = fake.off_limits = lambda *a, **k: None\n"
                     "sys.modules['gpucourse.referee'] = fake", "gpucourse.referee was replaced in sys.modules"),
    "builtins_of_the_notebook": ("import builtins, types\nfake = types.ModuleType('builtins')\n"
                                 "vars(fake).update(vars(builtins))\nfake.isinstance = lambda *a: True\n"
                                 "__builtins__ = fake", "__builtins__"),
    "during_the_test": ("def double(x):\n    import numpy\n    numpy.isclose = lambda *a, **k: numpy.array([True])\n"
                        "    return 0", "numpy.isclose"),
    "grader_during_the_test": ("def double(x):\n    import gpucourse.roofline as r\n"
                               "    r.time_lower_bound = lambda *a: 2.0\n    return x * 2", "time_lower_bound"),
}

SCENARIO = '''
import contextlib, io, json, sys
from IPython.core.interactiveshell import InteractiveShell

shell = InteractiveShell.instance()

def run(code):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        result = shell.run_cell(code)
    text = out.getvalue() + err.getvalue()
    failed = (not result.success or "GradingCodeReplaced" in text or "CheckFailed" in text
              or bool(err.getvalue().strip()))
    return {"failed": failed, "text": text}

report = {"setup": run("import gpucourse.microbench, gpucourse.roofline, gpucourse.referee")}
report["model"] = [run(MODEL), run(TEST_CELL)]
for name, (tamper, _) in TAMPERS.items():
    answer = tamper if name.endswith("during_the_test") else tamper + WRONG
    report[name] = [run(answer), run(TEST_CELL), run(MODEL), run(TEST_CELL)]
print("REPORT" + json.dumps(report))
'''


@pytest.fixture(scope="module")
def report() -> dict:
    """Every scenario's cell outcomes, from one fresh process."""
    code = "\n".join([f"TEST_CELL = {TEST_CELL!r}", f"MODEL = {MODEL!r}", f"WRONG = {WRONG!r}",
                      f"TAMPERS = {TAMPERS!r}", textwrap.dedent(SCENARIO)])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.rpartition("REPORT")[2])


def test_the_model_answer_passes_silently(report: dict) -> None:
    assert not report["setup"]["failed"], report["setup"]["text"]
    answer, cell = report["model"]
    assert not cell["failed"], cell["text"]
    assert cell["text"].count("\N{CHECK MARK}") == 4


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_a_tampering_answer_fails_its_test_cell_in_one_sentence(report: dict, tamper: str) -> None:
    _, cell, _, _ = report[tamper]
    assert cell["failed"], cell["text"]
    assert "GradingCodeReplaced: Exercise 2 cannot be graded: " in cell["text"], cell["text"]
    assert TAMPERS[tamper][1] in cell["text"], cell["text"]
    assert "It has been put back: take that code out of your answer" in cell["text"]


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_the_kernel_heals_after_a_tampering_answer(report: dict, tamper: str) -> None:
    _, _, model, cell = report[tamper]
    assert not model["failed"], model["text"]
    assert not cell["failed"], cell["text"]
    assert cell["text"].count("\N{CHECK MARK}") == 4


def test_the_referee_checks_like_the_course_checks_outside_ipython() -> None:
    from gpucourse import referee

    referee.check("ok", 2.0, 2.0, quiet=True)
    with pytest.raises(AssertionError, match=r"^x: yours 3, expected 4"):
        referee.check("x", 3, 4)
    with pytest.raises(referee.CheckFailed):
        referee.check_raises("y", lambda: 1, ValueError)
    assert referee.CheckFailed is not checks.CheckFailed, "a private copy, not the live class"
    assert referee.check.__doc__ == checks.check.__doc__


def test_a_rebound_live_check_does_not_change_the_referees(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpucourse import referee

    monkeypatch.setattr(checks, "_fail", lambda *a, **k: None)
    monkeypatch.setattr(checks, "check", lambda *a, **k: None)
    private = referee._private_checks(referee._Snapshot())
    with pytest.raises(private.CheckFailed, match="x: yours 0, expected 1"):
        private.check("x", 0, 1)


def test_guards_of_the_private_copy_reach_worker_processes() -> None:
    """gpucourse.parallel.launch re-applies checks.active_off_limits() in its workers: the private guards count."""
    from gpucourse import referee

    state = sys.modules["_gpucourse_referee"].state
    private = referee._private_checks(state)
    with private.off_limits("gpucourse.roofline.matmul_flops", exercise="Exercise 9", namespace={}):
        assert checks.active_off_limits() == [(("gpucourse.roofline.matmul_flops",), "Exercise 9")]
        with pytest.raises(private.OffLimits, match="Exercise 9 asks you to write this yourself"):
            __import__("gpucourse.roofline").roofline.matmul_flops(1, 2, 3)
    assert checks.active_off_limits() == []


def test_the_sentence_names_the_exercise_and_what_was_replaced() -> None:
    from gpucourse import referee

    assert referee._sentence("Exercise 3", ["numpy.isclose was replaced", "builtins.abs was replaced"]) == (
        "Exercise 3 cannot be graded: numpy.isclose was replaced (and 1 more) in this kernel, by an earlier cell (an "
        "answer?). It has been put back: take that code out of your answer, then run your answer cell and this cell "
        "again.")
    assert referee._exercise_of('"""Exercise 12: a ring."""\nfrom gpucourse.referee import check') == "Exercise 12"
    assert referee._exercise_of("x = 1") == "This exercise"


def test_an_answer_equal_to_everything_is_not_the_expected_text() -> None:
    """An answer cannot pass a text check by returning an object whose == always says yes."""
    from gpucourse import referee

    class EqualToAll(str):
        def __eq__(self, other: object) -> bool:
            return True

        def __ne__(self, other: object) -> bool:
            return False

        __hash__ = str.__hash__

    with pytest.raises(referee.CheckFailed, match="yours 'anything', expected 'softmax'"):
        referee.check("order", EqualToAll("anything"), "softmax")
    referee.check("a str subclass with the right text passes", EqualToAll("softmax"), "softmax", quiet=True)


def test_every_lesson_has_every_tampering_kind() -> None:
    """tests/wrong_answers/tampering/ adds each kind to every exercise whose constant answer allows it."""
    from notebook_utils import LESSONS, exercises, wrong_answer_sets
    from wrong_answers.tampering import TAMPER_KINDS

    for lesson in LESSONS:
        sets = wrong_answer_sets(lesson)
        assert set(TAMPER_KINDS) <= set().union(*sets.values()), lesson
        assert all({"tamper_check", "tamper_hooks"} <= set(sets[e.solution_id]) for e in exercises(lesson)), lesson


def test_tampering_goes_into_the_answer_function_after_its_docstring() -> None:
    from wrong_answers.tampering import tampering, with_tampering

    constant = ('import math\n\n\ndef f(a, b):\n    """Doc."""\n    @decorate\n    def g():\n        pass\n\n'
                '    return 1\n')
    kinds = tampering(constant, reference="reference_orders(a, b, bounded=True)")
    lines = kinds["tamper_reference"].splitlines()
    assert lines[4:8] == ['    """Doc."""', "    _reference = globals().get('reference_orders')",
                          "    if callable(_reference):", "        return _reference(a, b, bounded=True)"]
    assert lines[8] == "    @decorate"
    assert kinds["tamper_check"].endswith(constant) and kinds["tamper_hooks"].endswith(constant)
    assert "tamper_during_test" not in tampering("class A:\n    def f(self):\n        return 1\n")
    with pytest.raises(ValueError, match="no wrong answers"):
        with_tampering({"ex1-solution": {"constant": constant}}, references={"ex2-solution": "r(a)"})
    with pytest.raises(ValueError, match="defines the answer"):
        tampering("x = 1\n")


def test_run_now_binds_the_cell_name_to_what_the_tests_return():
    """A partial-credit test cell ends in the bare name `tests`: @run_now binds it to the points the tests return
    (nbgrader reads that number as the score); every other test cell's tests return None."""
    from gpucourse.referee import run_now

    assert run_now(lambda: 2) == 2
    assert run_now(lambda: None) is None
    with pytest.raises(TypeError, match="decorates"):
        run_now(3)
