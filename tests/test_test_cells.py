"""Lint of every lesson's test cells: nothing a test cell uses can be replaced, pre-filled or called by an answer.

An answer's function runs while the test cell calls it, with the notebook's globals as its own: it could read, call or
rebind any global the test cell sets. So each test cell is a docstring naming its exercise, ``from gpucourse.referee
import run_now`` and one ``@run_now def tests():`` whose first statement takes the checker from the referee; every
name the tests read is their own (local), a builtin, or the answer the exercise asks for (COURSE.md section 5, "Tests
cannot be gamed"). A visible test cell holds no reference implementation of the answer.
"""

from __future__ import annotations

import ast
import builtins
import re
import symtable

import pytest
from IPython.core.inputtransformer2 import TransformerManager

from notebook_utils import HIDDEN_REGION, LESSONS, PARTIAL_CREDIT, load, nbgrader, release_path, solution_path, source

CHECKER_NAMES = {"check", "check_raises", "off_limits"}
REFERENCE_NAME = re.compile(r"^_?(expected|reference|model|correct|right_answer)", re.I)
SHOWN_ON_PURPOSE = {  # (lesson, exercise, name): why the learner may read it
    ("08_placement", "ex3", "_reference"): "the plain training loop the lesson shows; the exercise is to run it with no "
                                           "host synchronisation, which the visible checks count",
}


def _test_cells(lesson: str) -> list[tuple[str, str]]:
    """(exercise, source) of each autograded test cell of a lesson, from the instructor notebook."""
    return [(nbgrader(c)["grade_id"].removesuffix("-tests"), source(c)) for c in load(solution_path(lesson))["cells"]
            if c["cell_type"] == "code" and nbgrader(c).get("grade") and not nbgrader(c).get("solution")]


def _answer_names(lesson: str) -> dict[str, set[str]]:
    """exercise -> the functions and classes its solution cell asks the learner to write (from the release); a
    %%writefile answer (lesson 14's training script) defines none in the notebook."""
    found = {}
    for cell in load(release_path(lesson))["cells"]:
        meta = nbgrader(cell)
        if cell["cell_type"] == "code" and meta.get("solution") and not meta.get("grade"):
            found[meta["grade_id"].removesuffix("-solution")] = {
                node.name for node in ast.parse(TransformerManager().transform_cell(source(cell))).body
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    return found


CELLS = [(lesson, exercise, code) for lesson in LESSONS for exercise, code in _test_cells(lesson)]
IDS = [f"{lesson}-{exercise}" for lesson, exercise, _ in CELLS]


def shape_problems(exercise: str, code: str, partial_credit: bool = False) -> list[str]:
    """What is wrong with a test cell's outline: docstring, referee import, one @run_now tests() and nothing else
    (but, in a cell graded with partial credit (notebook_utils.PARTIAL_CREDIT), the bare name `tests` last)."""
    body = ast.parse(code).body
    if partial_credit:
        last = body[-1] if body else None
        if not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Name) and last.value.id == "tests"):
            return ["a partial-credit cell must end in the bare name `tests` (the points @run_now bound)"]
        body = body[:-1]
    number = exercise.removeprefix("ex")
    problems = []
    if not (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and str(body[0].value.value).startswith(f"Exercise {number}:")):
        problems.append(f"the cell does not start with a docstring 'Exercise {number}: ...'")
    rest = body[1:]
    if not (rest and isinstance(rest[0], ast.ImportFrom) and rest[0].module == "gpucourse.referee"
            and [alias.name for alias in rest[0].names] == ["run_now"]):
        problems.append("the docstring is not followed by `from gpucourse.referee import run_now`")
    functions = [node for node in rest[1:] if isinstance(node, ast.FunctionDef)]
    if len(rest) != 2 or len(functions) != 1:
        problems.append("besides that import, the cell must hold one function and nothing else at notebook scope")
        return problems
    tests = functions[0]
    if tests.name != "tests" or [ast.unparse(d) for d in tests.decorator_list] != ["run_now"] or \
            tests.args.args or tests.args.vararg or tests.args.kwarg or tests.args.kwonlyargs:
        problems.append("the function must be `@run_now def tests() -> None:`")
    first = tests.body[0] if tests.body else None
    if not (isinstance(first, ast.ImportFrom) and first.module == "gpucourse.referee"
            and {alias.name for alias in first.names} <= CHECKER_NAMES and not any(a.asname for a in first.names)):
        problems.append("tests() must start with `from gpucourse.referee import check, check_raises, off_limits` "
                        "(any of them)")
    for node in ast.walk(tests):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [node.module] if isinstance(node, ast.ImportFrom) else [alias.name for alias in node.names]
            if any(module and module.startswith("gpucourse.checks") for module in modules) or (
                    isinstance(node, ast.ImportFrom) and node.module == "gpucourse"
                    and any(alias.name == "checks" for alias in node.names)):
                problems.append(f"line {node.lineno} imports gpucourse.checks (an answer can rebind it): use the referee")
    return problems


def _global_reads(table: symtable.SymbolTable) -> set[str]:
    """Names read from the notebook's globals by code in ``table`` and the scopes nested in it."""
    reads = {s.get_name() for s in table.get_symbols()
             if s.is_referenced() and (table.get_type() == "module" or s.is_global())}
    for child in table.get_children():
        reads |= _global_reads(child)
    return reads


def foreign_names(code: str, answers: set[str]) -> list[str]:
    """Names the cell reads that are neither its own, nor builtins, nor the exercise's answer."""
    allowed = {"run_now", "tests"} | answers
    return sorted(name for name in _global_reads(symtable.symtable(code, "test cell", "exec"))
                  if name not in allowed and not hasattr(builtins, name))


def visible_references(code: str) -> list[str]:
    """Functions or classes of a cell's visible part whose names say they compute an expected answer."""
    visible = HIDDEN_REGION.sub("", code)
    return sorted(node.name for node in ast.walk(ast.parse(visible))
                  if isinstance(node, (ast.FunctionDef, ast.ClassDef)) and REFERENCE_NAME.match(node.name))


@pytest.mark.parametrize(("lesson", "exercise", "code"), CELLS, ids=IDS)
def test_a_test_cell_is_one_function_run_at_once_with_the_referees_checker(lesson: str, exercise: str,
                                                                           code: str) -> None:
    problems = shape_problems(exercise, code, f"{exercise}-tests" in PARTIAL_CREDIT.get(lesson, ()))
    assert not problems, f"{lesson} {exercise}-tests:\n  " + "\n  ".join(problems)


@pytest.mark.parametrize(("lesson", "exercise", "code"), CELLS, ids=IDS)
def test_a_test_cell_reads_only_its_own_names_builtins_and_the_answer(lesson: str, exercise: str, code: str) -> None:
    """A name set by an earlier cell (or a global of the test cell) is one an answer can pre-fill or rebind."""
    foreign = foreign_names(code, _answer_names(lesson).get(exercise, set()))
    assert not foreign, (f"{lesson} {exercise}-tests reads {foreign}: define or import them inside tests() "
                         "(an answer cell can set any global)")


@pytest.mark.parametrize(("lesson", "exercise", "code"), CELLS, ids=IDS)
def test_no_visible_test_cell_holds_a_reference_implementation(lesson: str, exercise: str, code: str) -> None:
    references = [name for name in visible_references(code) if (lesson, exercise, name) not in SHOWN_ON_PURPOSE]
    assert not references, (f"{lesson} {exercise}-tests shows {references} in its visible part: move them between "
                            "the hidden-tests markers (a learner reads the visible part)")


def test_the_lint_finds_what_it_is_for() -> None:
    """Each rule fails a cell that breaks it: a global read, a checks import, a visible reference, a bad outline."""
    good = ('"""Exercise 2: x."""\nfrom gpucourse.referee import run_now\n\n\n@run_now\ndef tests() -> None:\n'
            '    from gpucourse.referee import check\n\n    import math\n    check("x", double(2), math.sqrt(16))\n')
    assert shape_problems("ex2", good) == [] and foreign_names(good, {"double"}) == []
    assert foreign_names(good.replace("math.sqrt(16)", "EXPECTED"), {"double"}) == ["EXPECTED"]
    assert foreign_names(good, set()) == ["double"]
    flat = '"""Exercise 2: x."""\nfrom gpucourse.checks import check\ncheck("x", double(2), 4)\n'
    assert len(shape_problems("ex2", flat)) >= 2
    assert any("gpucourse.checks" in p for p in shape_problems("ex2", good.replace(
        "import math", "from gpucourse.checks import check")))
    assert "the cell does not start with a docstring 'Exercise 3: ...'" in shape_problems("ex3", good)
    shown = good + "\n    def expected_double(x):\n        return 2 * x\n"
    assert visible_references(shown) == ["expected_double"]
    hidden = good + "\n    ### BEGIN HIDDEN TESTS\n    def expected_double(x):\n        return 2 * x\n    ### END HIDDEN TESTS\n"
    assert visible_references(hidden) == []
