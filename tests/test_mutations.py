"""Mutation testing of every exercise: each wrong answer in tests/wrong_answers/ must fail its test cell.

One kernel per lesson runs the instructor notebook top to bottom. At each exercise's test cell it also runs every
wrong answer of that exercise (redefining the learner's function), then the test cell, which must fail (an error,
or output on stderr: nbgrader scores either as 0); then it puts the model answer back and runs the test cell five
times in a row, which must pass each time with nothing on stderr (no flaky tests). The full nbgrader pipeline
(test_grading.py) proves the same for one wrong answer per exercise in a fresh kernel; this file tries them all
at the cost of one notebook run per lesson.

The same run measures the branch coverage of every model answer under its tests (coverage.py in the kernel and in
the worker processes it launches; each model-answer cell is compiled under a file name of its own): every line and
every branch of a model answer must run, exception paths included, or a hidden test is missing.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

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
    uncovered: dict[str, str] = field(default_factory=dict)  # model answer -> its lines and branches never run


def _solution_lines(code: str) -> set[int]:
    """Line numbers (from 1) between '### BEGIN SOLUTION' and '### END SOLUTION': what the learner writes."""
    inside, lines = False, set()
    for number, line in enumerate(code.splitlines(), start=1):
        marker = line.strip()
        if marker == "### BEGIN SOLUTION":
            inside = True
        elif marker == "### END SOLUTION":
            inside = False
        elif inside:
            lines.add(number)
    return lines


class AnswerCoverage:
    """Branch coverage of the model answers (the code between the solution markers), measured by coverage.py in the
    kernel and its worker processes.

    The kernel starts with COVERAGE_PROCESS_START (coverage's .pth file then measures it, and every Python process
    it starts, from the first line); a model-answer cell runs under the name IPYKERNEL_CELL_NAME gives it, a file
    that holds its source, so that coverage can report on it. Nothing else is measured.
    """

    def __init__(self, workdir: Path) -> None:
        self.folder = workdir / ".answer-coverage"
        (self.folder / "cells").mkdir(parents=True, exist_ok=True)
        self.rcfile = self.folder / "coveragerc"
        self.rcfile.write_text(f"""[run]
branch = True
parallel = True
data_file = {self.folder / "data"}
include = {self.folder / "cells"}/*
patch = _exit, fork
disable_warnings = no-data-collected, module-not-measured
""")
        self.cells: dict[str, Path] = {}

    def environment(self, env: dict[str, str]) -> dict[str, str]:
        """The kernel's environment, with coverage asked to start in it and in the processes it starts."""
        return {**env, "COVERAGE_PROCESS_START": str(self.rcfile)}

    @staticmethod
    def naming_hook() -> str:
        """Code that makes the kernel compile a registered cell source under its file name (IPYKERNEL_CELL_NAME is
        read as a cell is compiled, after IPython's pre_run_cell event; every other cell keeps its usual name)."""
        return ("def _gpucourse_cell_names():\n"
                "    import os\n"
                "    names = get_ipython()._gpucourse_cell_names = {}\n"
                "    def name_cell(info):\n"
                "        if info.raw_cell in names:\n"
                "            os.environ['IPYKERNEL_CELL_NAME'] = names[info.raw_cell]\n"
                "        else:\n"
                "            os.environ.pop('IPYKERNEL_CELL_NAME', None)\n"
                "    get_ipython().events.register('pre_run_cell', name_cell)\n"
                "_gpucourse_cell_names()\n"
                "del _gpucourse_cell_names")

    def run_named(self, client: NotebookClient, grade_id: str, code: str) -> Outcome:
        """Run a model answer in the kernel under a file name of its own that holds its source."""
        path = self.folder / "cells" / f"{grade_id}.py"
        path.write_text(code, encoding="utf-8")
        self.cells[grade_id] = path
        _run(client, f"get_ipython()._gpucourse_cell_names[{code!r}] = {str(path)!r}")
        return _run(client, code)

    @staticmethod
    def save_in_kernel() -> str:
        """Code that writes the kernel's measurements to disk (coverage would also do it at exit)."""
        return ("import coverage as _gpucourse_coverage\n"
                "_c = getattr(_gpucourse_coverage.process_startup, 'coverage', None)\n"
                "_c is not None and (_c.stop(), _c.save())\n"
                "del _c, _gpucourse_coverage")

    def uncovered(self) -> dict[str, str]:
        """Model answer -> 'lines ...; branches ...' it never ran (only those with something missing)."""
        import coverage

        cov = coverage.Coverage(config_file=str(self.rcfile))
        cov.combine(data_paths=[str(self.folder)], keep=True)
        report = self.folder / "report.json"
        cov.json_report(outfile=str(report), ignore_errors=True)
        files = {str((Path.cwd() / name).resolve()): data  # names under the working directory come relative
                 for name, data in json.loads(report.read_text())["files"].items()}
        missing = {}
        for grade_id, path in self.cells.items():
            data = files.get(str(path.resolve()))
            if data is None:
                missing[grade_id] = "never ran under measurement"
                continue
            written = _solution_lines(path.read_text(encoding="utf-8"))  # the learner's part, not the given code
            lines = [line for line in data["missing_lines"] if line in written]
            branches = [arc for arc in data.get("missing_branches", []) if arc[0] in written]
            if lines or branches:
                missing[grade_id] = (f"lines never run: {lines}; branches never taken (line -> next line, "
                                     f"negative = leaves the function): {branches}")
        return missing


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
    measured = AnswerCoverage(Path(workdir))
    solutions: dict[str, str] = {}
    with client.setup_kernel(env=measured.environment(course.venv_environment())):
        _run(client, measured.naming_hook())
        for index, cell in enumerate(list(notebook.cells)):
            if cell.cell_type != "code":
                continue
            meta = nbgrader(cell)
            grade_id = meta.get("grade_id", "")
            if meta.get("solution"):
                solutions[grade_id] = source(cell)
                outcome = measured.run_named(client, grade_id, source(cell))
            elif meta.get("grade"):
                exercise = grade_id.removesuffix("-tests")
                solution_id = f"{exercise}-solution"
                outcomes = [_run(client, source(cell))]
                for kind, wrong_source in wrong_sets.get(solution_id, {}).items():
                    _run(client, wrong_source)
                    run.wrong[(exercise, kind)] = _run(client, source(cell))
                measured.run_named(client, solution_id, solutions[solution_id])
                outcomes += [_run(client, source(cell)) for _ in range(SOLUTION_RUNS - 1)]
                run.solution[exercise] = outcomes
                continue
            else:
                outcome = _run(client, source(cell))
            if outcome.failed:
                run.notebook_errors.append(f"cell {index} ({grade_id or source(cell)[:50]!r}): {outcome.describe()}")
        _run(client, measured.save_in_kernel())
    run.uncovered = measured.uncovered()
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

    def test_every_branch_of_every_model_answer_runs_under_its_tests(self, lesson_run) -> None:
        """A line or branch of a model answer that no test runs is a case no hidden test checks (COURSE.md §5)."""
        assert not lesson_run.uncovered, (f"{self.lesson}: model answers with code their tests never run:\n" +
                                          "\n".join(f"  {k}: {v}" for k, v in lesson_run.uncovered.items()))

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
