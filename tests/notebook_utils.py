"""Shared helpers of the notebook, grading and consistency tests: read lessons and their exercises."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import course  # noqa: E402  (tools/course.py: the one implementation of stamp/clean/release)
from gpucourse import syllabus  # noqa: E402

LESSONS = course.lessons()
LOW_PRECISION_LESSONS = syllabus.LOW_PRECISION_LESSONS

# Lessons built slim for now (COURSE.md section 11): later issues extend them to the full 3-5 exercises (none left).
SLIM_LESSONS: set[str] = set()
SOLUTION_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
HIDDEN_REGION = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def solution_path(lesson: str) -> Path:
    """The instructor notebook of a lesson."""
    return ROOT / "solutions" / lesson / f"{lesson}.ipynb"


def release_path(lesson: str) -> Path:
    """The student notebook of a lesson."""
    return ROOT / "notebooks" / lesson / f"{lesson}.ipynb"


def load(path: Path) -> dict:
    """A notebook as plain JSON."""
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    """A cell's source as one string."""
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def nbgrader(cell: dict) -> dict:
    """A cell's nbgrader metadata ({} if none)."""
    return cell.get("metadata", {}).get("nbgrader", {})


@dataclass(frozen=True)
class Exercise:
    """One autograded exercise: its solution cell, its test cell and its points."""

    name: str
    solution_id: str
    tests_id: str
    points: float


def exercises(lesson: str) -> list[Exercise]:
    """Autograded exercises of a lesson, in order, from the solution notebook's nbgrader metadata."""
    cells = load(solution_path(lesson))["cells"]
    found = []
    for cell in cells:
        meta = nbgrader(cell)
        if cell["cell_type"] == "code" and meta.get("grade") and not meta.get("solution"):
            name = meta["grade_id"].removesuffix("-tests")
            found.append(Exercise(name, f"{name}-solution", meta["grade_id"], float(meta["points"])))
    return found


def written_answers(lesson: str) -> dict[str, float]:
    """Manually graded cells of a lesson: grade_id -> points."""
    return {nbgrader(c)["grade_id"]: float(nbgrader(c)["points"]) for c in load(solution_path(lesson))["cells"]
            if nbgrader(c).get("grade") and nbgrader(c).get("solution")}


def cell_by_grade_id(notebook: dict, grade_id: str) -> dict:
    """The cell with this grade_id (KeyError naming it if absent)."""
    for cell in notebook["cells"]:
        if nbgrader(cell).get("grade_id") == grade_id:
            return cell
    raise KeyError(f"no cell with grade_id {grade_id!r}")


WRONG_KINDS = ("constant", "helper", "visible_only", "typical")  # every exercise has at least these four


def wrong_answer_sets(lesson: str) -> dict[str, dict[str, str]]:
    """tests/wrong_answers/<lesson>.py's WRONG: solution grade_id -> {kind: source of a plausible wrong answer}.

    Kinds: 'constant' (returns a fixed value), 'helper' (calls the course's own helper), 'visible_only' (right only
    on the visible test's input), 'typical' (the lesson's typical mistake), plus any others. A plain string is
    read as {'typical': source} (the older one-per-exercise form).
    """
    path = ROOT / "tests" / "wrong_answers" / f"{lesson}.py"
    spec = importlib.util.spec_from_file_location(f"wrong_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {grade_id: ({"typical": kinds} if isinstance(kinds, str) else dict(kinds))
            for grade_id, kinds in module.WRONG.items()}


def wrong_answers(lesson: str) -> dict[str, str]:
    """One wrong answer per exercise (its 'typical' mistake), used in the full nbgrader pipeline."""
    return {grade_id: kinds["typical"] for grade_id, kinds in wrong_answer_sets(lesson).items()}


QUIET_CALLS = {"check", "check_raises", "print"}


def ends_in_bare_expression(code: str) -> bool:
    """True if the last statement could show a value (nbgrader reads a number there as partial credit)."""
    tree = ast.parse(code)
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return False
    value = tree.body[-1].value
    return not (isinstance(value, ast.Call) and getattr(value.func, "id", None) in QUIET_CALLS)
