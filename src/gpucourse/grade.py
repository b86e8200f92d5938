"""Grading for self-learners: ``python -m gpucourse grade [LESSON]`` scores your copies in work/ with the full tests.

Each lesson is graded by nbgrader in a throw-away course (its own gradebook, student "me") built from the course
checkout's solutions/, so hidden tests count too; your notebook is only read. The report shows points and, for each
failed check, its message and hint: never the solution code or the hidden tests' source.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpucourse import syllabus

STUDENT = "me"
MAX_MESSAGE_LINES = 6
MAX_LINE_CHARS = 240
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
MISSING_CELL = "this cell is missing from your notebook: copy it back from notebooks/ (the lesson as given)"
WRITTEN_NOTE = "answered: graded by your instructor (on your own: compare with the rubric)"


class GradingError(RuntimeError):
    """nbgrader could not grade a notebook (e.g. the file is not a notebook); the message says why."""


@dataclass(frozen=True)
class CellResult:
    """One graded cell of a lesson: its points and, when it failed, why."""

    grade_id: str
    earned: float | None  # None: a written answer waiting for the instructor
    possible: float
    written: bool
    message: str = ""  # empty when the test passed


# --------------------------------------------------------------------------- finding the course and the lessons

def is_course_root(folder: Path) -> bool:
    """True if ``folder`` is a clone of the course: it holds nbgrader_config.py and solutions/."""
    return (folder / "nbgrader_config.py").is_file() and (folder / "solutions").is_dir()


def find_course_root(explicit: Path | None, starts: Iterable[Path]) -> Path:
    """The course checkout: ``explicit`` if given, else the first folder at or above a start that is one."""
    if explicit is not None:
        if not is_course_root(explicit):
            raise ValueError(f"--course {explicit}: not a clone of the course (no nbgrader_config.py and solutions/ "
                             "there); grading needs a clone of the course repository")
        return explicit.resolve()
    for start in starts:
        for folder in (start.resolve(), *start.resolve().parents):
            if is_course_root(folder):
                return folder
    raise ValueError("grading needs a clone of the course repository (the folder with nbgrader_config.py and "
                     "solutions/, which hold the full tests): run this inside your clone or pass --course DIR")


def course_lessons(course_root: Path) -> list[str]:
    """Lesson names in order: every solutions/NN_name/NN_name.ipynb."""
    return sorted(p.parent.name for p in (course_root / "solutions").glob("*/*.ipynb") if p.stem == p.parent.name)


def resolve_lesson(argument: str, lessons: Sequence[str]) -> str:
    """The lesson named by ``argument``: '01', '1', '01_architecture', or a path to the lesson's notebook or folder."""
    if not isinstance(argument, str) or not argument.strip():
        raise ValueError(f"LESSON must be a lesson number or name, got {argument!r}")
    path = Path(argument.strip().rstrip("/\\"))
    name = path.name.removesuffix(".ipynb")
    for candidate in (name, path.parent.name):  # the parent: a renamed copy inside a lesson's folder
        if candidate in lessons:
            return candidate
    for candidate in (name, path.parent.name):  # a copy of the nine-lesson course: say where its lesson went
        if (message := syllabus.renamed_message(candidate)) is not None:
            raise ValueError(f"LESSON {argument!r}: {message}")
    if name.isdigit():
        matches = [lesson for lesson in lessons if lesson.split("_", 1)[0] == name.zfill(2)]
        if len(matches) == 1:
            return matches[0]
    raise ValueError(f"LESSON {argument!r} is not a lesson of this course; give a number or a name: "
                     + ", ".join(lessons))


def _nbgrader_meta(cell: dict) -> dict:
    """A cell's nbgrader metadata ({} if none)."""
    return cell.get("metadata", {}).get("nbgrader", {})


def lesson_points(course_root: Path, lesson: str) -> tuple[float, float]:
    """(automatically graded, written) points of a lesson, from its solution notebook's nbgrader metadata."""
    cells = json.loads((course_root / "solutions" / lesson / f"{lesson}.ipynb").read_text("utf-8"))["cells"]
    graded = [_nbgrader_meta(c) for c in cells if _nbgrader_meta(c).get("grade")]
    return (sum(float(m.get("points", 0)) for m in graded if not m.get("solution")),
            sum(float(m.get("points", 0)) for m in graded if m.get("solution")))


def learner_notebook(argument: str | None, lesson: str, work: Path) -> Path:
    """The learner's notebook: the file or folder ``argument`` names if it exists, else work/<lesson>/<lesson>.ipynb."""
    if argument is not None and Path(argument).is_file():
        return Path(argument)
    folder = Path(argument) if argument is not None and Path(argument).is_dir() else work / lesson
    return folder / f"{lesson}.ipynb"


def _answers(notebook: dict) -> dict[str, str]:
    """grade_id -> source of every answer cell (nbgrader solution cells) of a notebook."""
    cells = [c for c in notebook.get("cells", []) if _nbgrader_meta(c).get("solution")]
    return {_nbgrader_meta(c).get("grade_id", ""): "".join(c.get("source", "")) for c in cells}


def is_untouched(notebook: Path, release: Path) -> bool:
    """True if every answer cell of ``notebook`` is as in the student version ``release`` (the lesson not started)."""
    try:
        mine, given = (json.loads(path.read_text("utf-8")) for path in (notebook, release))
    except (OSError, ValueError):
        return False
    return bool(_answers(given)) and _answers(mine) == _answers(given)


# --------------------------------------------------------------------------- reading results

def exercise_label(grade_id: str) -> str:
    """A friendly name for a graded cell: 'ex2-tests' -> 'Exercise 2', 'written-1' -> 'Written answer 1'."""
    if match := re.fullmatch(r"ex(\d+)-tests", grade_id):
        return f"Exercise {match.group(1)}"
    if match := re.fullmatch(r"written-(\d+)", grade_id):
        return f"Written answer {match.group(1)}"
    return grade_id


def _short(text: str) -> str:
    """``text`` without terminal colours, at most MAX_MESSAGE_LINES lines of at most MAX_LINE_CHARS characters."""
    lines = [line.rstrip() for line in ANSI_ESCAPE.sub("", text).strip("\n").splitlines() if line.strip()]
    lines = [line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS - 3] + "..." for line in lines]
    return "\n".join(lines[:MAX_MESSAGE_LINES] + (["..."] if len(lines) > MAX_MESSAGE_LINES else []))


def failure_message(outputs: Sequence[dict]) -> str:
    """Why a test cell failed, from its outputs: the error's message and hint, never the traceback's source lines."""
    errors = [o for o in outputs if o.get("output_type") == "error"]
    if errors:
        name, value = errors[-1].get("ename", "Error"), ANSI_ESCAPE.sub("", errors[-1].get("evalue", "")).strip()
        if name == "NotImplementedError":
            return "not answered yet"
        if name == "CellTimeoutError":
            return _short(syllabus.cell_timeout_message())
        if name == "CheckFailed" and value:
            return _short(value)
        return _short(f"{name}: {value}" if value else name)
    if any(o.get("output_type") == "stream" and o.get("name") == "stderr" for o in outputs):
        return "the test cell wrote to stderr (a warning or an error message counts as a failure)"
    return "failed"


CELL_LINE = re.compile(r"Cell In\s*\[[^\]]*\],\s*line (\d+)")


def answer_cell_error(cell: dict) -> str | None:
    """The error an answer cell itself raised ('IndentationError at line 3: ...'), or None if it ran cleanly.

    NotImplementedError is not an error here: it is an exercise not answered yet.
    """
    errors = [o for o in cell.get("outputs", []) if o.get("output_type") == "error"]
    if not errors or errors[-1].get("ename") == "NotImplementedError":
        return None
    error = errors[-1]
    name, value = error.get("ename", "Error"), ANSI_ESCAPE.sub("", error.get("evalue", "")).strip()
    lines = CELL_LINE.findall(ANSI_ESCAPE.sub("", "\n".join(error.get("traceback", []))))
    where = f" at line {lines[-1]}" if lines else ""
    return f"{name}{where}: {value}" if value else f"{name}{where}"


def _graded_cells(notebook: dict) -> dict[str, dict]:
    """grade_id -> cell, for every graded cell of a notebook, in notebook order."""
    return {_nbgrader_meta(c)["grade_id"]: c for c in notebook.get("cells", []) if _nbgrader_meta(c).get("grade")}


def _answer_cell(notebook: dict, tests_id: str) -> dict | None:
    """The answer cell of the exercise whose test cell is ``tests_id`` ('ex2-tests' -> the 'ex2-solution' cell)."""
    if not tests_id.endswith("-tests"):
        return None
    wanted = tests_id.removesuffix("-tests") + "-solution"
    return next((c for c in notebook.get("cells", []) if _nbgrader_meta(c).get("grade_id") == wanted), None)


def cell_results(source: dict, autograded: dict, scores: dict[str, tuple[float | None, float]]) -> list[CellResult]:
    """The graded cells of the lesson ``source``, in its order, with gradebook scores and the autograded outputs."""
    yours = _graded_cells(autograded)
    results = []
    for grade_id, cell in _graded_cells(source).items():
        if grade_id not in scores:
            continue
        earned, possible = scores[grade_id]
        written = bool(_nbgrader_meta(cell).get("solution"))
        if grade_id not in yours:
            results.append(CellResult(grade_id, 0.0, possible, written, MISSING_CELL))
        elif written:
            results.append(CellResult(grade_id, earned, possible, True, "not answered yet" if earned == 0 else ""))
        else:
            earned = earned or 0.0
            message = "" if earned == possible else failure_message(yours[grade_id].get("outputs", []))
            answer = _answer_cell(autograded, grade_id)
            if message and answer is not None and (error := answer_cell_error(answer)) is not None:
                message = (f"your answer cell ({exercise_label(grade_id)}) failed first: {_short(error)}\n"
                           f"fix it and run it again; the test then said: {message}")
            results.append(CellResult(grade_id, earned, possible, False, message))
    return results


# --------------------------------------------------------------------------- running nbgrader

def _nbgrader(scratch: Path, *args: str) -> None:
    """Run one nbgrader command on the throw-away course in ``scratch``; GradingError with its output if it fails."""
    overrides = [f"--CourseDirectory.root={scratch}", f"--CourseDirectory.db_url=sqlite:///{scratch / 'gradebook.db'}",
                 "--CourseDirectory.source_directory=source",
                 f"--CourseDirectory.release_directory={scratch / 'release'}",
                 "--CourseDirectory.submitted_directory=submitted", "--CourseDirectory.autograded_directory=autograded"]
    environment = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args, *overrides, "--log-level=ERROR"], cwd=scratch,
                            env=environment, capture_output=True, text=True)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-8:])
        raise GradingError(f"nbgrader {args[0]} failed:\n{tail}")


def _gradebook_scores(scratch: Path, lesson: str) -> dict[str, tuple[float | None, float]]:
    """grade_id -> (automatic score or None, possible points) from the throw-away gradebook."""
    from nbgrader.api import Gradebook, MissingEntry

    with Gradebook(f"sqlite:///{scratch / 'gradebook.db'}") as gradebook:
        try:
            notebook = gradebook.find_submission_notebook(lesson, lesson, STUDENT)
        except MissingEntry:
            raise GradingError("nbgrader autograde stored no grades for this notebook") from None
        return {g.name: (None if g.auto_score is None else float(g.auto_score), float(g.max_score))
                for g in notebook.grades}


def grade_notebook(course_root: Path, lesson: str, notebook: Path) -> list[CellResult]:
    """Grade a copy of ``notebook`` with the full tests of ``lesson`` in a throw-away course; the file is only read."""
    try:
        import nbgrader  # noqa: F401
    except ImportError:
        raise GradingError("grading needs nbgrader: install the course's tools (make setup)") from None
    with tempfile.TemporaryDirectory(prefix="gpucourse-grade-") as folder:
        scratch = Path(folder)
        shutil.copy(course_root / "nbgrader_config.py", scratch / "nbgrader_config.py")
        shutil.copytree(course_root / "solutions" / lesson, scratch / "source" / lesson,
                        ignore=shutil.ignore_patterns(".ipynb_checkpoints", "__pycache__"))
        submitted = scratch / "submitted" / STUDENT / lesson / f"{lesson}.ipynb"
        submitted.parent.mkdir(parents=True)
        shutil.copyfile(notebook, submitted)
        _nbgrader(scratch, "generate_assignment", lesson, "--force")
        _nbgrader(scratch, "autograde", lesson, f"--student={STUDENT}", "--force")
        autograded = scratch / "autograded" / STUDENT / lesson / f"{lesson}.ipynb"
        if not autograded.is_file():
            raise GradingError("nbgrader autograde produced no graded notebook")
        source = json.loads((scratch / "source" / lesson / f"{lesson}.ipynb").read_text("utf-8"))
        return cell_results(source, json.loads(autograded.read_text("utf-8")), _gradebook_scores(scratch, lesson))


# --------------------------------------------------------------------------- the report

def _points(value: float | None) -> str:
    """Points as a short number ('2', '1.5'), or '-' when not scored yet."""
    return "-" if value is None else f"{value:g}"


def automatic_score(results: Sequence[CellResult]) -> tuple[float, float]:
    """(earned, possible) over the automatically graded cells only."""
    auto = [r for r in results if not r.written]
    return sum(r.earned or 0.0 for r in auto), sum(r.possible for r in auto)


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows of cells as aligned columns; a cell's extra lines continue under its own column."""
    widths = [max(len(line) for row in rows for line in (row[i].splitlines() or [""])) for i in range(len(rows[0]))]
    out = []
    for row in rows:
        cells = [cell.splitlines() or [""] for cell in row]
        for depth in range(max(len(lines) for lines in cells)):
            parts = [(lines[depth] if depth < len(lines) else "").ljust(width) for lines, width in zip(cells, widths)]
            out.append("  ".join(parts).rstrip())
    return "\n".join(out)


def lesson_table(lesson: str, results: Sequence[CellResult]) -> str:
    """One lesson's report: a row per graded cell (points, and why it failed), then the automatic score."""
    rows = [["lesson", "exercise", "points", "result"]]
    for index, result in enumerate(results):
        if result.written:
            outcome = result.message or WRITTEN_NOTE
        else:
            outcome = "passed" if not result.message else result.message
        points = f"{_points(result.earned)} / {_points(result.possible)}"
        rows.append([lesson if index == 0 else "", exercise_label(result.grade_id), points, outcome])
    earned, possible = automatic_score(results)
    written = sum(r.possible for r in results if r.written)
    note = f"+ {_points(written)} points of written answers, graded by your instructor" if written else ""
    rows.append(["", "automatic score", f"{_points(earned)} / {_points(possible)}", note])
    return format_table(rows)


def progress_table(possible: dict[str, float], graded: dict[str, list[CellResult] | str]) -> str:
    """Progress over all lessons (``possible``: lesson -> automatic points): 'not started' where there is no copy."""
    rows = [["lesson", "exercises passed", "points", "status"]]
    total = 0.0
    for lesson, points in possible.items():
        outcome = graded.get(lesson)
        if not isinstance(outcome, list):
            rows.append([lesson, "-", f"0 / {_points(points)}", outcome or "not started"])
            continue
        auto = [r for r in outcome if not r.written]
        earned, _ = automatic_score(outcome)
        total += earned
        passed = sum(1 for r in auto if not r.message)
        status = "complete" if passed == len(auto) else "in progress"
        rows.append([lesson, f"{passed} of {len(auto)}", f"{_points(earned)} / {_points(points)}", status])
    rows.append(["all lessons", "", f"{_points(total)} / {_points(sum(possible.values()))}", ""])
    return format_table(rows)


# --------------------------------------------------------------------------- command line

def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The grade command's options."""
    parser.add_argument("lesson", nargs="?", metavar="LESSON",
                        help="a lesson ('01', '01_architecture' or the path of your notebook); default: all lessons")
    parser.add_argument("--work", type=Path, metavar="DIR",
                        help="your copies of the lessons (default: work/ in the course)")
    parser.add_argument("--course", type=Path, metavar="DIR",
                        help="the course checkout with solutions/ (default: found above the current folder)")


def _grade_one(course_root: Path, lesson: str, notebook: Path) -> list[CellResult] | str:
    """Grade one lesson, saying what runs; the results, or why it could not be graded."""
    print(f"Grading {lesson}: running {notebook} with the full tests, hidden ones included "
          "(your file is not changed; this takes about as long as running the lesson) ...", flush=True)
    started = time.perf_counter()
    try:
        results = grade_notebook(course_root, lesson, notebook)
    except GradingError as error:
        print(f"could not grade {lesson}: {error}\n", flush=True)
        return "could not be graded"
    print(f"graded in {time.perf_counter() - started:.0f} s\n\n{lesson_table(lesson, results)}\n", flush=True)
    return results


def _chosen_notebooks(args: argparse.Namespace, course_root: Path, lessons: list[str]) -> dict[str, Path]:
    """lesson -> the learner's notebook to grade: the one LESSON names, else every copy in work/ (ValueError if bad)."""
    work = args.work if args.work is not None else course_root / "work"
    if args.work is not None and not work.is_dir():
        raise ValueError(f"--work {work}: no such folder")
    if args.lesson is None:
        return {lesson: work / lesson / f"{lesson}.ipynb" for lesson in lessons}
    lesson = resolve_lesson(args.lesson, lessons)
    notebook = learner_notebook(args.lesson, lesson, work)
    if not notebook.is_file():
        raise ValueError(f"LESSON {args.lesson!r}: no copy at {notebook} (`make lab` makes your copies)")
    return {lesson: notebook}


def run(args: argparse.Namespace) -> int:
    """Grade one lesson or every started lesson in work/; 0 whatever the answers, 2 on a usage error."""
    try:
        course_root = find_course_root(args.course, [Path.cwd(), Path(__file__).resolve().parent])
        lessons = course_lessons(course_root)
        notebooks = _chosen_notebooks(args, course_root, lessons)
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.lesson is None:
        release = course_root / "notebooks"
        untouched = [lesson for lesson, path in notebooks.items()
                     if path.is_file() and is_untouched(path, release / lesson / f"{lesson}.ipynb")]
        if untouched:
            print(f"Not started (no answer written yet, nothing to run): {', '.join(untouched)}\n", flush=True)
        notebooks = {lesson: path for lesson, path in notebooks.items() if path.is_file() and lesson not in untouched}
    graded = {lesson: _grade_one(course_root, lesson, path) for lesson, path in notebooks.items()}
    if args.lesson is None:
        possible = {lesson: lesson_points(course_root, lesson)[0] for lesson in lessons}
        print(f"Progress over all lessons (automatic points; written answers are graded by your instructor)\n\n"
              f"{progress_table(possible, graded)}")
    return 1 if any(isinstance(outcome, str) for outcome in graded.values()) else 0
