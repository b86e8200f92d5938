"""The README's two instructor routes, end to end, on a throw-away course: a shared server with nbgrader's exchange,
and an LMS (Canvas) download graded with zip_collect.

Exchange: three students, each with their own home folder and student id, fetch lesson 00 and submit: one right,
one untouched, one all wrong who resubmits later with half the exercises fixed. The instructor collects, autogrades,
releases feedback and exports; the scores must be exact, the later submission the graded one, each student must
fetch only their own feedback, and no feedback may show a hidden test.
"""

from __future__ import annotations

import csv
import html
import json
import re
import shutil
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from notebook_utils import (HIDDEN_REGION, ROOT, cell_by_grade_id, course, exercises, load, nbgrader, solution_path,
                            source, wrong_answers)
from test_grading import _autograded, _expected

import class_report  # noqa: E402  (tools/class_report.py; notebook_utils puts tools/ on the path)

pytestmark = pytest.mark.slow

LESSON = "00_getting_started"  # the quickest lesson: the routes, not the lessons, are under test here
COURSE_ID = "gpus-for-deep-learning"  # nbgrader_config.py's course id: students name it on the command line
NOTEBOOK = f"{LESSON}.ipynb"
ALL = set(range(1, len(exercises(LESSON)) + 1))
ODD = {i for i in ALL if i % 2}
EVEN = ALL - ODD
TEST_ONLY_OPTIONS = ("--Exchange.root=", "--student=")  # stand-ins for the hub's global config and user accounts
COMMANDS_RUN: list[str] = []  # the nbgrader commands the routes ran, test-only options left out (README check)


def _nbgrader(cwd: Path, *args: str, home: Path | None = None) -> str:
    """Run one nbgrader command as the README shows it; fail with its output if it fails; return its log."""
    env = course.venv_environment()
    if home is not None:  # a student: their own home folder, hence their own nbgrader cache
        env["HOME"] = str(home)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=cwd, env=env, capture_output=True,
                            text=True, timeout=600)
    print(f"{time.perf_counter() - started:6.1f} s  nbgrader {' '.join(args)}")
    COMMANDS_RUN.append(" ".join(["nbgrader", *(a for a in args if not a.startswith(TEST_ONLY_OPTIONS))]))
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout + result.stderr


def _course_copy(root: Path) -> Path:
    """What grading needs: the configuration, the lesson's source and its release, and a gradebook that knows it."""
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root)
    shutil.copytree(ROOT / "solutions" / LESSON, root / "solutions" / LESSON)
    shutil.copytree(ROOT / "notebooks" / LESSON, root / "notebooks" / LESSON)
    course.cmd_gradebook(root)  # README: python tools/course.py gradebook
    return root


def _answer(notebook: dict, wrong: set[int]) -> dict:
    """A student's work: every answer cell filled from solutions/, then exercises numbered in ``wrong`` made wrong."""
    for cell in load(solution_path(LESSON))["cells"]:
        if nbgrader(cell).get("solution"):
            cell_by_grade_id(notebook, nbgrader(cell)["grade_id"])["source"] = source(cell)
    mistakes = wrong_answers(LESSON)
    for index, exercise in enumerate(exercises(LESSON), start=1):
        if index in wrong:
            cell_by_grade_id(notebook, exercise.solution_id)["source"] = mistakes[exercise.solution_id]
    return notebook


def _names(numbers: set[int]) -> set[str]:
    return {e.name for i, e in enumerate(exercises(LESSON), start=1) if i in numbers}


def _scores(root: Path, students: tuple[str, ...]) -> dict[str, dict]:
    """Autograded score per test cell, per student, from the course copy's gradebook."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return {student: _autograded({grade.name: (grade.auto_score, grade.max_score) for grade in
                                      gradebook.find_submission_notebook(LESSON, LESSON, student).grades})
                for student in students}


def _visible_text(page: str) -> str:
    """What a reader of an HTML page sees: tags dropped (code is split into highlighted spans), entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def _test_lines(hidden: bool) -> list[str]:
    """Every non-trivial line of the lesson's hidden tests (or of its visible tests, in test cells with hidden ones)."""
    lines = []
    for cell in load(solution_path(LESSON))["cells"]:
        text = source(cell)
        if HIDDEN_REGION.search(text):
            part = "".join(HIDDEN_REGION.findall(text)) if hidden else HIDDEN_REGION.sub("", text)
            lines += [line.strip() for line in part.splitlines() if len(line.strip()) > 12]
    return lines


# --------------------------------------------------------------------------- shared server (exchange)

STUDENTS = ("ada", "bob", "cyd")  # right; untouched; all wrong, then resubmits with the odd exercises fixed


@pytest.fixture(scope="module")
def exchange_route(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("exchange-route")
    root = _course_copy(base / "course")
    exchange = base / "exchange"  # on a JupyterHub: c.Exchange.root in the hub's global nbgrader_config.py
    instructor = (f"--Exchange.root={exchange}",)
    (root / "students.csv").write_text("id,first_name,last_name,email\n" + "".join(
        f"{s},{s.title()},Student,{s}@example.org\n" for s in STUDENTS), encoding="utf-8")
    _nbgrader(root, "db", "student", "import", "students.csv")
    _nbgrader(root, "release_assignment", LESSON, *instructor)

    homes = {s: base / "home" / s for s in STUDENTS}
    submitted_at: dict[str, list[str]] = {s: [] for s in STUDENTS}

    def student(name: str, *args: str) -> str:
        homes[name].mkdir(parents=True, exist_ok=True)
        return _nbgrader(homes[name], *args, f"--course={COURSE_ID}", f"--Exchange.root={exchange}",
                         home=homes[name])

    def submit(name: str, wrong: set[int] | None) -> None:
        path = homes[name] / LESSON / NOTEBOOK
        if wrong is not None:
            path.write_text(json.dumps(_answer(load(path), wrong)), encoding="utf-8")
        before = set((exchange / COURSE_ID / "inbound").iterdir())
        student(name, "submit", LESSON, f"--student={name}")
        (new,) = set((exchange / COURSE_ID / "inbound").iterdir()) - before
        submitted_at[name].append(new.name.split("+")[2])

    for name in STUDENTS:
        student(name, "fetch_assignment", LESSON)
    submit("ada", wrong=set())
    submit("bob", wrong=None)
    submit("cyd", wrong=ALL)
    submit("cyd", wrong=EVEN)  # the resubmission: odd exercises now right

    _nbgrader(root, "collect", LESSON, *instructor)
    autograde_log = _nbgrader(root, "autograde", LESSON)
    feedback_log = _nbgrader(root, "generate_feedback", LESSON)
    _nbgrader(root, "release_feedback", LESSON, *instructor)
    for name in STUDENTS:
        student(name, "fetch_feedback", LESSON, f"--student={name}")
    _nbgrader(root, "export")
    with open(root / "grades.csv", newline="", encoding="utf-8") as handle:
        exported = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(handle)}
    return {"root": root, "homes": homes, "submitted_at": submitted_at, "exported": exported,
            "scores": _scores(root, STUDENTS), "autograde_log": autograde_log,
            "feedback_log": feedback_log}


def test_exchange_scores_are_exact(exchange_route) -> None:
    scores = exchange_route["scores"]
    assert scores["ada"] == _expected(LESSON, set())
    assert scores["bob"] == _expected(LESSON, _names(ALL))
    assert scores["cyd"] == _expected(LESSON, _names(EVEN))
    total = sum(e.points for e in exercises(LESSON))
    even_points = sum(e.points for i, e in enumerate(exercises(LESSON), start=1) if i in EVEN)
    assert exchange_route["exported"] == {"ada": total, "bob": 0.0, "cyd": total - even_points}


def test_the_latest_submission_is_graded(exchange_route) -> None:
    first, latest = exchange_route["submitted_at"]["cyd"]
    assert latest > first
    root = exchange_route["root"]
    assert (root / "submitted" / "cyd" / LESSON / "timestamp.txt").read_text(encoding="utf-8") == latest
    graded = load(root / "autograded" / "cyd" / LESSON / NOTEBOOK)
    wrong = wrong_answers(LESSON)
    for index, exercise in enumerate(exercises(LESSON), start=1):  # the resubmission's answers, not the first's
        expected = wrong[exercise.solution_id] if index in EVEN else source(
            cell_by_grade_id(load(solution_path(LESSON)), exercise.solution_id))
        assert source(cell_by_grade_id(graded, exercise.solution_id)) == expected


def test_each_student_fetches_only_their_own_feedback(exchange_route) -> None:
    root, pages = exchange_route["root"], set()
    for name, home in exchange_route["homes"].items():
        fetched = sorted(p.relative_to(home / LESSON / "feedback") for p in (home / LESSON / "feedback").rglob("*")
                         if p.is_file())
        latest = exchange_route["submitted_at"][name][-1]
        assert fetched == [Path(latest) / f"{LESSON}.html"], f"{name} fetched {fetched}"
        page = (home / LESSON / "feedback" / latest / f"{LESSON}.html").read_bytes()
        assert page == (root / "feedback" / name / LESSON / f"{LESSON}.html").read_bytes()
        pages.add(page)
    assert len(pages) == len(STUDENTS)


def test_feedback_shows_no_hidden_test(exchange_route) -> None:
    root, hidden, visible = exchange_route["root"], _test_lines(hidden=True), _test_lines(hidden=False)
    assert hidden, f"{LESSON} has no hidden tests to hide"
    autograded = "".join(source(c) for c in load(root / "autograded" / "bob" / LESSON / NOTEBOOK)["cells"])
    assert all(line in autograded for line in hidden)  # autograde ran them: the instructor's copy has them
    for name in STUDENTS:
        text = _visible_text((root / "feedback" / name / LESSON / f"{LESSON}.html").read_text(encoding="utf-8"))
        missing = [line for line in visible if line not in text]
        assert not missing, f"feedback for {name} lacks visible test lines: {missing[:3]}"  # so the search works
        shown = [line for line in hidden if line in text]
        assert not shown, f"feedback for {name} shows hidden test lines: {shown[:3]}"


def test_untouched_test_cells_raise_no_warning(exchange_route) -> None:
    """Test cells whose hidden tests were stripped at release do not look tampered with (jupyter/nbgrader#1961)."""
    assert "has changed" not in exchange_route["autograde_log"]


def test_nbgrader_recognises_the_whole_configuration(exchange_route) -> None:
    for log in (exchange_route["autograde_log"], exchange_route["feedback_log"]):
        assert "not recognized" not in log, log


# --------------------------------------------------------------------------- the class report (tools/class_report.py)

EX2_CHECK = "Kaggle's P100 (6.0) on a cu128 wheel"  # the first check lesson 00's typical ex2 mistake fails


def test_class_report_counts_the_exchange_class(exchange_route) -> None:
    """ada right, bob untouched, cyd right on ex1 and ex3 only: exact means, full marks and ranked failures."""
    assert [(e.tests_id, e.points) for e in exercises(LESSON)] == [("ex1-tests", 3), ("ex2-tests", 3),
                                                                     ("ex3-tests", 2)]  # what the counts below assume
    root = exchange_route["root"]
    report = class_report.build_report(root, LESSON, root / "gradebook.db")
    assert report.students == STUDENTS
    summary = {cell.grade_id: (cell.submissions, cell.graded, round(cell.mean, 4), cell.full_marks,
                               [(group.group, group.count, group.students) for group in cell.failures])
               for cell in report.cells}
    not_answered = (class_report.NOT_ANSWERED, 1, ("bob",))
    assert summary == {"ex1-tests": (3, 3, 2.0, 2, [not_answered]),
                       "ex2-tests": (3, 3, 1.0, 1, [(f"CheckFailed: {EX2_CHECK}", 1, ("cyd",)), not_answered]),
                       "ex3-tests": (3, 3, round(4 / 3, 4), 2, [not_answered]),
                       "written-1": (3, 1, 0.0, 0, [not_answered])}  # ada's and cyd's answers await the instructor
    assert [cell.grade_id for cell in report.cells] == list(summary)  # notebook order
    ex2_failure = report.cells[1].failures[0]
    assert ex2_failure.message.startswith(f"CheckFailed: {EX2_CHECK}: runs: yours True, expected False\n"
                                          "  Hint: section 4: the driver must know the GPU")


def test_class_report_command_prints_and_writes_it(exchange_route, tmp_path, capsys) -> None:
    """`python tools/course.py report 00` as the README shows it: the table printed, its CSV and chart written."""
    root = exchange_route["root"]
    assert course.main(["report", "00", "--course-root", str(root), "--out", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:3] == [f"Class report for {LESSON}: 3 autograded submissions", "",
                         "ex1-tests: mean 2 / 3 (67%), full marks 2 of 3 (67%)"]
    assert "written-1 (written): mean 0 / 2 (0%), full marks 0 of 1 (0%); 2 awaiting manual grading" in lines
    with open(tmp_path / f"{LESSON}-class-report.csv", newline="", encoding="utf-8") as handle:
        rows = [(row["cell"], row["rank"], row["failure"], row["failed_submissions"], row["students"])
                for row in csv.DictReader(handle)]
    assert rows == [("ex1-tests", "1", "not answered", "1", "bob"), ("ex2-tests", "1", f"CheckFailed: {EX2_CHECK}",
                     "1", "cyd"), ("ex2-tests", "2", "not answered", "1", "bob"),
                    ("ex3-tests", "1", "not answered", "1", "bob"), ("written-1", "1", "not answered", "1", "bob")]
    assert (tmp_path / f"{LESSON}-class-report.png").read_bytes().startswith(b"\x89PNG")
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python tools/course.py report 00_getting_started" in readme[readme.index("## For instructors"):]


# --------------------------------------------------------------------------- LMS download (Canvas) + zip_collect

CANVAS_FILES = {  # Canvas "Download Submissions": <name>_[LATE_]<user id>_<submission id>_<file>[-N].ipynb
    f"liddellalice_4101_77001_{LESSON}.ipynb": set(),
    f"carrolllewis_LATE_4102_77002_{LESSON}-1.ipynb": ODD,  # also deletes the tests of exercise 2, which is right
}
TAMPERED = (f"carrolllewis_LATE_4102_77002_{LESSON}-1.ipynb", exercises(LESSON)[1].tests_id)


@pytest.fixture(scope="module")
def lms_route(tmp_path_factory) -> dict:
    root = _course_copy(tmp_path_factory.mktemp("lms-route") / "course")
    release = load(root / "notebooks" / LESSON / NOTEBOOK)
    archive = root / "downloaded" / LESSON / "archive"
    archive.mkdir(parents=True)
    with zipfile.ZipFile(archive / "submissions.zip", "w") as bundle:
        for name, wrong in CANVAS_FILES.items():
            notebook = _answer(json.loads(json.dumps(release)), wrong)
            if name == TAMPERED[0]:
                cell_by_grade_id(notebook, TAMPERED[1])["source"] = "pass\n"
            bundle.writestr(name, json.dumps(notebook))
    _nbgrader(root, "zip_collect", LESSON)
    log = _nbgrader(root, "autograde", LESSON)
    return {"root": root, "scores": _scores(root, ("liddellalice", "carrolllewis")), "autograde_log": log}


def test_zip_collect_files_each_canvas_submission_under_its_student(lms_route) -> None:
    submitted = sorted(str(p.relative_to(lms_route["root"] / "submitted"))
                       for p in (lms_route["root"] / "submitted").rglob("*.ipynb"))
    assert submitted == [f"carrolllewis/{LESSON}/{NOTEBOOK}", f"liddellalice/{LESSON}/{NOTEBOOK}"]


def test_zip_collect_scores_are_exact(lms_route) -> None:
    assert lms_route["scores"]["liddellalice"] == _expected(LESSON, set())
    assert lms_route["scores"]["carrolllewis"] == _expected(LESSON, _names(ODD))


def test_a_changed_test_cell_is_reported_and_restored(lms_route) -> None:
    """The student who deleted exercise 2's tests is named in the log, and still graded by the original tests."""
    changed = re.findall(r"Attribute '(\w+)' for cell (\S+) has changed", lms_route["autograde_log"])
    assert changed == [("checksum", TAMPERED[1])]
    graded = load(lms_route["root"] / "autograded" / "carrolllewis" / LESSON / NOTEBOOK)
    assert source(cell_by_grade_id(graded, TAMPERED[1])) == source(cell_by_grade_id(load(solution_path(LESSON)),
                                                                                    TAMPERED[1]))


def test_readme_shows_the_commands_both_routes_ran(exchange_route, lms_route) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## For instructors"):readme.index("## For maintainers")]
    shown = {line.split("#")[0].strip() for line in section.splitlines()}
    missing = sorted(set(COMMANDS_RUN) - shown)
    assert not missing, f"the README's instructor section lacks these tested commands: {missing}"
    assert "python tools/course.py gradebook" in shown  # what _course_copy does through course.cmd_gradebook


# --------------------------------------------------------------------------- Formgrader's Generate button

def test_formgrader_generate_writes_what_make_release_writes(tmp_path) -> None:
    """Generate runs generate_assignment --force into notebooks/ (nbgrader's API); the file must stay as committed."""
    root = tmp_path / "course"
    root.mkdir()
    shutil.copy(ROOT / "nbgrader_config.py", root)
    shutil.copytree(ROOT / "solutions" / LESSON, root / "solutions" / LESSON)
    (root / "notebooks").mkdir()  # empty: Generate writes the lesson afresh
    _nbgrader(root, "generate_assignment", LESSON, "--force")
    generated = (root / "notebooks" / LESSON / NOTEBOOK).read_bytes()
    assert generated == (ROOT / "notebooks" / LESSON / NOTEBOOK).read_bytes()
