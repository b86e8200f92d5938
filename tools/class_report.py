"""A class report after `nbgrader autograde`: per exercise, the class mean, the share with full marks, and the failing
checks ranked by how many submissions they failed, each with its message (what to re-teach).

    python tools/course.py report LESSON [--course-root DIR] [--out DIR] [--force]

Scores come from the course's gradebook.db (nbgrader.api.Gradebook, opened read-only); failure messages from the test
cells' outputs in autograded/<student>/<LESSON>/*.ipynb. Students appear only as their nbgrader ids.

Failures are grouped by what a test cell raised:
  - CheckFailed: by the check's name (its message up to the first ': '), e.g. "CheckFailed: a CPU runtime";
  - NotImplementedError: "not answered" (the exercise was left as released);
  - any other exception: by its name and the first line of its message, e.g. "NameError: name 'f' is not defined";
  - no exception: "wrote to stderr" (nbgrader scores that 0), else "no error shown" (partial or manual score).
Each group shows how many submissions it failed and one representative full message (the first student's, by id).
Groups are ranked by that count; at equal counts the checks come before "not answered", then by name.
A written answer, graded by hand, shows its points once graded and otherwise "awaiting manual grading"; one left as
released is "not answered" (nbgrader gives it 0).

The table is also written as <LESSON>-class-report.csv (one row per exercise and failure group) and a bar chart,
<LESSON>-class-report.png, into --out (default: reports/ in the course root); an existing report is replaced only
with --force.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # this checkout's gpucourse, whatever the environment has installed

from gpucourse.grade import course_lessons, resolve_lesson  # noqa: E402

NOT_ANSWERED = "not answered"
WROTE_TO_STDERR = "wrote to stderr"
NO_ERROR_SHOWN = "no error shown"
NO_NOTEBOOK = "no autograded notebook"
NO_CELL = "cell missing from the autograded notebook"
REPORT_STEM = "{lesson}-class-report"
CSV_COLUMNS = ("lesson", "notebook", "cell", "kind", "max_points", "submissions", "graded", "mean_points",
               "full_marks", "full_marks_share", "awaiting_manual_grading", "rank", "failure", "failed_submissions",
               "message", "students")
PRINTED_MESSAGE_LINES = 4
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


class ReportError(ValueError):
    """Input the report cannot be made from; the message names what is missing and what to run first."""


@dataclass(frozen=True)
class Failure:
    """Why one submission lost points on one cell: its group and its full message."""

    group: str
    message: str


@dataclass(frozen=True)
class FailureGroup:
    """Submissions that failed one cell the same way, with one representative message."""

    group: str
    count: int
    message: str
    students: tuple[str, ...]


@dataclass(frozen=True)
class CellGrade:
    """One student's grade on one graded cell, as the gradebook holds it."""

    student: str
    score: float | None  # None: awaiting manual grading
    unanswered: bool = False  # a written answer left as released (nbgrader scored it 0)


@dataclass(frozen=True)
class CellReport:
    """The class's results on one graded cell."""

    notebook: str
    grade_id: str
    written: bool
    max_score: float
    submissions: int
    graded: int
    mean: float | None  # over the graded submissions; None when none is graded yet
    full_marks: int
    failures: tuple[FailureGroup, ...]

    @property
    def awaiting(self) -> int:
        """Submissions whose score waits for manual grading."""
        return self.submissions - self.graded

    @property
    def full_share(self) -> float | None:
        """Share of the graded submissions with full marks (None when none is graded yet)."""
        return self.full_marks / self.graded if self.graded else None


@dataclass(frozen=True)
class ClassReport:
    """A lesson's class report: one CellReport per graded cell, in notebook order."""

    lesson: str
    students: tuple[str, ...]
    cells: tuple[CellReport, ...]


# --------------------------------------------------------------------------- failures and their ranking

def _plain(text: str) -> str:
    """``text`` without terminal colours or surrounding blank lines."""
    return ANSI_ESCAPE.sub("", text).strip()


def failure_of(outputs: Sequence[Mapping]) -> Failure:
    """The failure group and message of a test cell that lost points, from its outputs."""
    if not isinstance(outputs, Sequence) or isinstance(outputs, str):
        raise TypeError(f"outputs must be a list of notebook outputs, got {type(outputs).__name__}")
    errors = [output for output in outputs if output.get("output_type") == "error"]
    if errors:
        name, value = errors[-1].get("ename") or "Error", _plain(errors[-1].get("evalue") or "")
        message = f"{name}: {value}" if value else name
        if name == "NotImplementedError":
            return Failure(NOT_ANSWERED, message)
        first_line = value.partition("\n")[0]
        if name == "CheckFailed" and ": " in first_line:
            return Failure(f"{name}: {first_line.partition(': ')[0]}", message)
        return Failure(f"{name}: {first_line}" if first_line else name, message)
    stderr = "".join(_text(output) for output in outputs
                     if output.get("output_type") == "stream" and output.get("name") == "stderr")
    if stderr.strip():
        return Failure(WROTE_TO_STDERR, _plain(stderr))
    return Failure(NO_ERROR_SHOWN, "the test cell raised nothing and wrote nothing to stderr (partial credit or a "
                                   "manual score below full marks)")


def _text(output: Mapping) -> str:
    """A stream output's text as one string."""
    text = output.get("text", "")
    return "".join(text) if isinstance(text, list) else text


def _rank_key(group: FailureGroup) -> tuple[int, bool, str]:
    """Most submissions first; at equal counts checks before 'not answered', then by name."""
    return -group.count, group.group == NOT_ANSWERED, group.group


def rank_failures(failures: Mapping[str, Failure]) -> tuple[FailureGroup, ...]:
    """Group student id -> Failure by group, ranked; each group's message is its first student's (by id)."""
    if not isinstance(failures, Mapping):
        raise TypeError(f"failures must map student ids to Failure, got {type(failures).__name__}")
    students_by_group: dict[str, list[str]] = {}
    for student in sorted(failures):
        students_by_group.setdefault(failures[student].group, []).append(student)
    groups = [FailureGroup(group, len(students), failures[students[0]].message, tuple(students))
              for group, students in students_by_group.items()]
    return tuple(sorted(groups, key=_rank_key))


# --------------------------------------------------------------------------- notebooks

def graded_cells(notebook: Mapping) -> dict[str, Mapping]:
    """grade_id -> cell, for every nbgrader grade or task cell of a notebook, in notebook order."""
    found = {}
    for cell in notebook.get("cells", []):
        meta = cell.get("metadata", {}).get("nbgrader", {})
        if (meta.get("grade") or meta.get("task")) and meta.get("grade_id"):
            found[meta["grade_id"]] = cell
    return found


def cell_order(notebooks: Iterable[Mapping]) -> list[str]:
    """The graded cells' grade_ids in notebook order, merged over several copies of one notebook (first seen first)."""
    order: dict[str, None] = {}
    for notebook in notebooks:
        order.update(dict.fromkeys(graded_cells(notebook)))
    return list(order)


def read_autograded(course_root: Path, lesson: str, notebook: str, students: Iterable[str]) -> dict[str, Mapping]:
    """student -> their autograded copy of ``notebook`` (students without one are left out)."""
    import nbformat

    copies = {}
    for student in students:
        path = course_root / "autograded" / student / lesson / f"{notebook}.ipynb"
        if path.is_file():
            copies[student] = nbformat.read(path, as_version=4)
    return copies


def autograded_failures(grade_id: str, grades: Sequence[CellGrade], max_score: float,
                        copies: Mapping[str, Mapping]) -> dict[str, Failure]:
    """student -> Failure, for each graded submission below full marks on the autograded test cell ``grade_id``."""
    failures = {}
    for grade in grades:
        if grade.score is None or grade.score >= max_score:
            continue
        if grade.student not in copies:
            failures[grade.student] = Failure(NO_NOTEBOOK, f"autograded/{grade.student}/ holds no copy of this "
                                                           "notebook (was it deleted after autograde?)")
        elif (cell := graded_cells(copies[grade.student]).get(grade_id)) is None:
            failures[grade.student] = Failure(NO_CELL, f"{grade_id} is not in the autograded notebook")
        else:
            failures[grade.student] = failure_of(cell.get("outputs", []))
    return failures


def written_failures(grades: Sequence[CellGrade]) -> dict[str, Failure]:
    """student -> 'not answered', for each written answer left as released."""
    return {grade.student: Failure(NOT_ANSWERED, "the answer was left as released (nbgrader scored it 0)")
            for grade in grades if grade.unanswered}


def summarise_cell(notebook: str, grade_id: str, written: bool, max_score: float, grades: Sequence[CellGrade],
                   failures: Mapping[str, Failure]) -> CellReport:
    """The class's mean, full marks and ranked failures on one cell."""
    if max_score <= 0:
        raise ValueError(f"max_score of {grade_id} must be positive, got {max_score}")
    scores = [grade.score for grade in grades if grade.score is not None]
    return CellReport(notebook=notebook, grade_id=grade_id, written=written, max_score=max_score,
                      submissions=len(grades), graded=len(scores),
                      mean=sum(scores) / len(scores) if scores else None,
                      full_marks=sum(score >= max_score for score in scores), failures=rank_failures(failures))


# --------------------------------------------------------------------------- gradebook

@dataclass(frozen=True)
class GradebookCell:
    """A graded cell as the gradebook knows it, with every autograded submission's grade."""

    grade_id: str
    written: bool
    max_score: float
    grades: tuple[CellGrade, ...]


def read_only_url(path: Path) -> str:
    """An SQLAlchemy URL that opens the SQLite file ``path`` read-only (the report never writes the gradebook)."""
    return f"sqlite:///file:{urllib.parse.quote(str(path.resolve()))}?mode=ro&uri=true"


def gradebook_lessons(gradebook_path: Path) -> list[str]:
    """The assignments (lessons) the gradebook knows."""
    from nbgrader.api import Gradebook
    from sqlalchemy.exc import DatabaseError

    try:
        with Gradebook(read_only_url(gradebook_path), course_id="") as gradebook:
            return sorted(assignment.name for assignment in gradebook.assignments)
    except DatabaseError:
        raise ReportError(f"{gradebook_path} is not an nbgrader gradebook: run `python tools/course.py gradebook` "
                          "in a fresh course folder, or give the right one with --course-root") from None


def _cell_grade(grade: object, answer_cells: set[str]) -> CellGrade:
    """A gradebook Grade as a CellGrade: no score while it awaits manual grading."""
    return CellGrade(student=grade.notebook.student.id,
                     score=None if grade.needs_manual_grade else float(grade.score),
                     unanswered=grade.name in answer_cells and grade.manual_score is None and grade.auto_score == 0)


def read_gradebook(gradebook_path: Path, lesson: str) -> dict[str, list[GradebookCell]]:
    """notebook name -> its graded cells with every submission's grade, for one lesson of the gradebook."""
    from nbgrader.api import Gradebook, TaskCell

    with Gradebook(read_only_url(gradebook_path), course_id="") as gradebook:
        notebooks = {}
        for notebook in gradebook.find_assignment(lesson).notebooks:
            answer_cells = {cell.name for cell in notebook.solution_cells}
            grades: dict[str, list[CellGrade]] = {}
            for submission in notebook.submissions:
                for grade in submission.grades:
                    grades.setdefault(grade.name, []).append(_cell_grade(grade, answer_cells))
            notebooks[notebook.name] = [
                GradebookCell(cell.name, isinstance(cell, TaskCell) or cell.name in answer_cells, float(cell.max_score),
                              tuple(sorted(grades.get(cell.name, []), key=lambda grade: grade.student)))
                for cell in [*notebook.grade_cells, *notebook.task_cells]]
        return notebooks


def _in_order(cells: list[GradebookCell], order: Sequence[str]) -> list[GradebookCell]:
    """``cells`` in ``order`` of grade_ids; cells the notebooks lack come last, by name."""
    position = {grade_id: index for index, grade_id in enumerate(order)}
    return sorted(cells, key=lambda cell: (position.get(cell.grade_id, len(position)), cell.grade_id))


# --------------------------------------------------------------------------- the report

def find_gradebook(course_root: Path) -> Path:
    """The course's gradebook.db (ReportError saying what to run when it is missing)."""
    if not course_root.is_dir():
        raise ReportError(f"--course-root {course_root}: no such folder (give the course folder that holds "
                          "nbgrader_config.py and gradebook.db)")
    path = course_root / "gradebook.db"
    if not path.is_file():
        raise ReportError(f"no gradebook.db in {course_root}: run `python tools/course.py gradebook` there first, "
                          "then collect and `nbgrader autograde LESSON`")
    return path


def find_lesson(course_root: Path, gradebook_path: Path, argument: str) -> str:
    """The lesson named by ``argument`` ('00', '00_getting_started'), checked to be in the gradebook."""
    registered = gradebook_lessons(gradebook_path)
    if not registered:
        raise ReportError(f"{gradebook_path} holds no lesson: run `python tools/course.py gradebook` first, then "
                          "collect and `nbgrader autograde LESSON`")
    try:
        lesson = resolve_lesson(argument, sorted(set(registered) | set(course_lessons(course_root))))
    except ValueError as error:
        raise ReportError(str(error)) from None
    if lesson not in registered:
        raise ReportError(f"{lesson} is not in {gradebook_path}: run `python tools/course.py gradebook` first, "
                          f"then collect and `nbgrader autograde {lesson}`")
    return lesson


def build_report(course_root: Path, lesson: str, gradebook_path: Path) -> ClassReport:
    """The class report of ``lesson`` from the gradebook and the autograded notebooks."""
    cells, students = [], set()
    for notebook, gradebook_cells in read_gradebook(gradebook_path, lesson).items():
        notebook_students = {grade.student for cell in gradebook_cells for grade in cell.grades}
        students |= notebook_students
        copies = read_autograded(course_root, lesson, notebook, sorted(notebook_students))
        for cell in _in_order(gradebook_cells, cell_order(copies[student] for student in sorted(copies))):
            failures = (written_failures(cell.grades) if cell.written
                        else autograded_failures(cell.grade_id, cell.grades, cell.max_score, copies))
            cells.append(summarise_cell(notebook, cell.grade_id, cell.written, cell.max_score, cell.grades, failures))
    if not students:
        raise ReportError(f"no submission of {lesson} is autograded in {gradebook_path}: run `nbgrader collect "
                          f"{lesson}` (or zip_collect), then `nbgrader autograde {lesson}` first")
    return ClassReport(lesson, tuple(sorted(students)), tuple(cells))


def _points(value: float) -> str:
    """Points as the course writes them: 2, 1.5, 1.33."""
    return f"{value:.2f}".rstrip("0").rstrip(".")


def _percent(share: float) -> str:
    """A share as a whole percentage."""
    return f"{share:.0%}"


def cell_summary(cell: CellReport) -> str:
    """One line: the cell, its mean and its full marks (or what still waits for manual grading)."""
    label = f"{cell.grade_id} (written)" if cell.written else cell.grade_id
    if cell.mean is None:
        return f"{label}: awaiting manual grading ({cell.submissions} of {cell.submissions}), max {_points(cell.max_score)}"
    line = (f"{label}: mean {_points(cell.mean)} / {_points(cell.max_score)} ({_percent(cell.mean / cell.max_score)}), "
            f"full marks {cell.full_marks} of {cell.graded} ({_percent(cell.full_share)})")
    return line + (f"; {cell.awaiting} awaiting manual grading" if cell.awaiting else "")


def format_report(report: ClassReport) -> str:
    """The report as printed: one block per cell, its failure groups ranked under it."""
    lines = [f"Class report for {report.lesson}: {len(report.students)} autograded submissions", ""]
    several_notebooks = len({cell.notebook for cell in report.cells}) > 1
    for cell in report.cells:
        lines.append((f"{cell.notebook}/" if several_notebooks else "") + cell_summary(cell))
        for group in cell.failures:
            lines.append(f"    {group.count} x {group.group}")
            if group.group != NOT_ANSWERED:
                message = group.message.splitlines()
                lines += [f"        {line}" for line in message[:PRINTED_MESSAGE_LINES]]
                lines += ["        ..."] if len(message) > PRINTED_MESSAGE_LINES else []
    return "\n".join(lines)


def _number(value: float | None, digits: int = 4) -> str:
    """A CSV number, rounded; empty for None."""
    return "" if value is None else f"{round(value, digits):g}"


def csv_rows(report: ClassReport) -> list[dict[str, str]]:
    """The report as CSV rows: one per cell and failure group (one per cell without failures)."""
    rows = []
    for cell in report.cells:
        common = {"lesson": report.lesson, "notebook": cell.notebook, "cell": cell.grade_id,
                  "kind": "written" if cell.written else "autograded", "max_points": _number(cell.max_score),
                  "submissions": str(cell.submissions), "graded": str(cell.graded), "mean_points": _number(cell.mean),
                  "full_marks": str(cell.full_marks), "full_marks_share": _number(cell.full_share),
                  "awaiting_manual_grading": str(cell.awaiting)}
        empty = {"rank": "", "failure": "", "failed_submissions": "", "message": "", "students": ""}
        rows += [{**common, **empty}] if not cell.failures else [
            {**common, "rank": str(rank), "failure": group.group, "failed_submissions": str(group.count),
             "message": group.message, "students": " ".join(group.students)}
            for rank, group in enumerate(cell.failures, start=1)]
    return rows


def write_csv(path: Path, report: ClassReport) -> None:
    """Write the report's CSV rows to ``path``."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        writer.writerows(csv_rows(report))


def write_chart(path: Path, report: ClassReport) -> None:
    """A bar chart PNG: per graded cell, the share with full marks and the mean as a share of the points."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cells = [cell for cell in report.cells if cell.mean is not None]
    figure = Figure(figsize=(max(5.0, 1.1 * len(cells) + 2), 3.6), layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    positions = range(len(cells))
    axes.bar([x - 0.2 for x in positions], [100 * cell.full_share for cell in cells], 0.4,
             label="submissions with full marks, %")
    axes.bar([x + 0.2 for x in positions], [100 * cell.mean / cell.max_score for cell in cells], 0.4,
             label="class mean, % of the points")
    axes.set_xticks(list(positions), [cell.grade_id for cell in cells])
    axes.set_ylim(0, 100)
    axes.set_ylabel("%")
    axes.set_title(f"{report.lesson}: {len(report.students)} autograded submissions")
    figure.legend(loc="outside lower center", ncols=2, fontsize="small")
    figure.savefig(path, dpi=120)


def report_paths(out: Path, lesson: str) -> tuple[Path, Path]:
    """The CSV and PNG files of a lesson's report in ``out``."""
    stem = REPORT_STEM.format(lesson=lesson)
    return out / f"{stem}.csv", out / f"{stem}.png"


def refuse_overwrite(paths: Iterable[Path]) -> None:
    """ReportError naming the first of ``paths`` that exists."""
    for path in paths:
        if path.exists():
            raise ReportError(f"{path} already exists: pass --force to replace it, or --out another folder")


# --------------------------------------------------------------------------- command line

def parse_arguments(argv: Sequence[str]) -> argparse.Namespace:
    """The report command's arguments."""
    parser = argparse.ArgumentParser(prog="python tools/course.py report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lesson", metavar="LESSON", help="the lesson: its number (00) or name (00_getting_started)")
    parser.add_argument("--course-root", type=Path, default=ROOT, metavar="DIR",
                        help="the course folder with gradebook.db and autograded/ (default: this checkout)")
    parser.add_argument("--out", type=Path, metavar="DIR", help="where the CSV and PNG go (default: reports/ in the course root)")
    parser.add_argument("--force", action="store_true", help="replace this lesson's report files if they exist")
    return parser.parse_args(argv)


def run(arguments: argparse.Namespace) -> str:
    """Make the report: write its files and return the printed text (ReportError on bad input)."""
    course_root = arguments.course_root
    gradebook_path = find_gradebook(course_root)
    lesson = find_lesson(course_root, gradebook_path, arguments.lesson)
    out = arguments.out if arguments.out is not None else course_root / "reports"
    report = build_report(course_root, lesson, gradebook_path)
    csv_path, png_path = report_paths(out, lesson)
    if not arguments.force:
        refuse_overwrite((csv_path, png_path))
    if out.exists() and not out.is_dir():
        raise ReportError(f"--out {out} is a file, not a folder")
    out.mkdir(parents=True, exist_ok=True)
    write_csv(csv_path, report)
    write_chart(png_path, report)
    return f"{format_report(report)}\n\nwrote {csv_path} and {png_path}"


def main(argv: Sequence[str] | None = None) -> int:
    """Print the class report and write its files; a one-line error and exit status 2 on bad input."""
    arguments = parse_arguments(sys.argv[1:] if argv is None else argv)
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        print("report: error: the report needs nbgrader: install the course's tools (make setup)", file=sys.stderr)
        return 2
    try:
        text = run(arguments)
    except ReportError as error:
        print(f"report: error: {error}", file=sys.stderr)
        return 2
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
