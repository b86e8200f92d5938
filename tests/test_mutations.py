"""Mutation testing of every exercise: each wrong answer in tests/wrong_answers/ must fail its test cell.

One kernel per lesson runs the instructor notebook top to bottom. At each exercise's test cell it also runs every
wrong answer of that exercise (redefining the learner's function), then the test cell, which must fail (an error,
or output on stderr: nbgrader scores either as 0); then it puts the model answer back and runs the test cell five
times in a row, which must pass each time with nothing on stderr (no flaky tests). The full nbgrader pipeline
(test_grading.py) proves the same for one wrong answer per exercise in a fresh kernel; this file tries them all
at the cost of one notebook run per lesson.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field

import nbformat
import pytest
from nbclient import NotebookClient

from notebook_utils import LESSONS, WRONG_KINDS, course, nbgrader, solution_path, source, wrong_answer_sets

from gpucourse import syllabus

pytestmark = pytest.mark.slow

SOLUTION_RUNS = 5  # consecutive passing runs of each test cell with the model answer in place
CELL_TIMEOUT_S = syllabus.CELL_TIMEOUT_S  # the course's one per-cell limit


@dataclass
class Outcome:
    """What running one cell did: its error name (or None) and what it wrote to stderr."""

    error: str | None
    stderr: str

    @property
    def failed(self) -> bool:
        """True where nbgrader would give the cell 0 points."""
        return self.error is not None or bool(self.stderr.strip())

    def describe(self) -> str:
        return f"error={self.error!r}, stderr={self.stderr.strip()[:300]!r}"


@dataclass
class LessonRun:
    """Outcomes of one lesson's mutation run, keyed by (exercise, kind) and by exercise."""

    notebook_errors: list[str] = field(default_factory=list)
    wrong: dict[tuple[str, str], Outcome] = field(default_factory=dict)
    solution: dict[str, list[Outcome]] = field(default_factory=dict)


def _run(client: NotebookClient, code: str) -> Outcome:
    """Execute ``code`` in the client's kernel as a new cell at the notebook's end; return its outcome.

    The cell is appended (never removed) so that later display updates find the output they refer to.
    """
    cell = nbformat.v4.new_code_cell(code)
    client.nb.cells.append(cell)
    client.execute_cell(cell, len(client.nb.cells) - 1)
    errors = [o for o in cell.outputs if o.output_type == "error"]
    stderr = "".join(o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr")
    return Outcome(errors[0].ename if errors else None, stderr)


def run_lesson(lesson: str, workdir) -> LessonRun:
    """Run the lesson's instructor notebook once, trying every wrong answer at each exercise's test cell."""
    shutil.copytree(solution_path(lesson).parent, workdir, dirs_exist_ok=True)
    notebook = nbformat.read(solution_path(lesson), as_version=4)
    wrong_sets = wrong_answer_sets(lesson)
    client = NotebookClient(notebook, timeout=CELL_TIMEOUT_S, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(workdir)}})
    run = LessonRun()
    solutions: dict[str, str] = {}
    with client.setup_kernel(env=course.venv_environment()):
        for index, cell in enumerate(list(notebook.cells)):
            if cell.cell_type != "code":
                continue
            meta = nbgrader(cell)
            grade_id = meta.get("grade_id", "")
            if meta.get("solution"):
                solutions[grade_id] = source(cell)
            if meta.get("grade") and not meta.get("solution"):
                exercise = grade_id.removesuffix("-tests")
                solution_id = f"{exercise}-solution"
                outcomes = [_run(client, source(cell))]
                for kind, wrong_source in wrong_sets.get(solution_id, {}).items():
                    _run(client, wrong_source)
                    run.wrong[(exercise, kind)] = _run(client, source(cell))
                _run(client, solutions[solution_id])
                outcomes += [_run(client, source(cell)) for _ in range(SOLUTION_RUNS - 1)]
                run.solution[exercise] = outcomes
                continue
            outcome = _run(client, source(cell))
            if outcome.failed:
                run.notebook_errors.append(f"cell {index} ({grade_id or source(cell)[:50]!r}): {outcome.describe()}")
    return run


def _cases(lesson: str) -> list[tuple[str, str]]:
    """(exercise, kind) pairs of a lesson's wrong answers."""
    return [(solution_id.removesuffix("-solution"), kind)
            for solution_id, kinds in wrong_answer_sets(lesson).items() for kind in kinds]


class MutationRun:
    """The mutation checks of one lesson; a subclass per lesson lets pytest-xdist run lessons in parallel."""

    lesson: str

    @pytest.fixture(scope="class")
    @classmethod
    def lesson_run(cls, tmp_path_factory) -> LessonRun:
        return run_lesson(cls.lesson, tmp_path_factory.mktemp(f"mutations-{cls.lesson}"))

    def test_notebook_runs_clean(self, lesson_run) -> None:
        assert not lesson_run.notebook_errors, "\n".join(lesson_run.notebook_errors)

    def test_model_answers_pass_five_times_in_a_row(self, lesson_run) -> None:
        flaky = {exercise: [o.describe() for o in outcomes if o.failed]
                 for exercise, outcomes in lesson_run.solution.items() if any(o.failed for o in outcomes)}
        assert not flaky, f"{self.lesson}: model answers failed their own tests: {flaky}"
        assert all(len(o) == SOLUTION_RUNS for o in lesson_run.solution.values())

    def test_every_wrong_answer_fails_its_test_cell(self, lesson_run) -> None:
        expected = set(_cases(self.lesson))
        assert set(lesson_run.wrong) == expected, "some wrong answers were never tried (no such exercise?)"
        survivors = sorted(f"{exercise}/{kind}" for (exercise, kind), outcome in lesson_run.wrong.items()
                           if not outcome.failed)
        assert not survivors, f"{self.lesson}: wrong answers that pass their test cell: {survivors}"

    def test_wrong_answers_fail_by_a_check_not_by_a_crash(self, lesson_run) -> None:
        """A wrong answer should be caught by the tests' checks (CheckFailed, OffLimits, a named error)."""
        crashes = sorted(f"{exercise}/{kind}: {outcome.describe()}"
                         for (exercise, kind), outcome in lesson_run.wrong.items()
                         if outcome.error in ("NameError", "SyntaxError", "IndentationError"))
        assert not crashes, f"{self.lesson}: wrong answers that crash instead of being checked: {crashes}"


def test_every_exercise_has_the_four_kinds_of_wrong_answer() -> None:
    """A constant, a call to the course's helper, one right only on the visible input, and the typical mistake."""
    from notebook_utils import exercises

    missing = [f"{lesson}/{e.solution_id}: {sorted(set(WRONG_KINDS) - set(wrong_answer_sets(lesson).get(e.solution_id, {})))}"
               for lesson in LESSONS for e in exercises(lesson)
               if not set(WRONG_KINDS) <= set(wrong_answer_sets(lesson).get(e.solution_id, {}))]
    assert not missing, "exercises without the four kinds of wrong answer:\n" + "\n".join(missing)


for _lesson in LESSONS:  # TestMutations_00_getting_started, ...: one class per lesson (xdist --dist loadscope)
    globals()[f"TestMutations_{_lesson}"] = type(f"TestMutations_{_lesson}", (MutationRun,), {"lesson": _lesson})
