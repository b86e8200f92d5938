"""tools/class_report.py: grouping and ranking of failures on hand-made notebook outputs, and the report command on a
hand-made gradebook (nbgrader's API, no notebook executed). The class of tests/test_exchange.py checks it end to end."""

from __future__ import annotations

import csv
import hashlib
import os
import sys
import warnings
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from notebook_utils import course

import class_report  # noqa: E402  (tools/class_report.py; notebook_utils puts tools/ on the path)
from class_report import Failure, FailureGroup, CellGrade, NOT_ANSWERED

LESSON = "00_getting_started"
HINT = "\n  Hint: walk the chain in order"


def _error(ename: str, evalue: str) -> dict:
    return new_output("error", ename=ename, evalue=evalue, traceback=[f"{ename}: {evalue}"])


def _stream(name: str, text: str) -> dict:
    return new_output("stream", name=name, text=text)


# --------------------------------------------------------------------------- failure_of

def test_a_failed_check_is_grouped_by_its_check_name() -> None:
    failure = class_report.failure_of([_stream("stdout", "✓ a healthy T4 runtime\n"),
                                       _error("CheckFailed", f"a CPU runtime: yours 'GPU in use', expected 'no GPU'{HINT}")])
    assert failure == Failure("CheckFailed: a CPU runtime",
                              f"CheckFailed: a CPU runtime: yours 'GPU in use', expected 'no GPU'{HINT}")


def test_not_implemented_is_not_answered() -> None:
    assert class_report.failure_of([_error("NotImplementedError", "")]) == Failure(NOT_ANSWERED, "NotImplementedError")


def test_other_errors_are_grouped_by_name_and_first_line_without_colours() -> None:
    failure = class_report.failure_of([_error("NameError", "\x1b[0;31mname 'diagnose' is not defined\x1b[0m\nmore")])
    assert failure.group == "NameError: name 'diagnose' is not defined"
    assert failure.message == "NameError: name 'diagnose' is not defined\nmore"
    assert class_report.failure_of([_error("KeyboardInterrupt", "")]).group == "KeyboardInterrupt"


def test_a_check_failed_without_a_check_name_keeps_its_first_line() -> None:
    assert class_report.failure_of([_error("CheckFailed", "shapes differ")]).group == "CheckFailed: shapes differ"


def test_output_on_stderr_and_no_error_at_all_have_their_own_groups() -> None:
    stderr = class_report.failure_of([_stream("stdout", "ok\n"), _stream("stderr", "UserWarning: slow\n")])
    assert stderr == Failure(class_report.WROTE_TO_STDERR, "UserWarning: slow")
    assert class_report.failure_of([_stream("stdout", "0.5\n")]).group == class_report.NO_ERROR_SHOWN


def test_failure_of_refuses_a_string() -> None:
    with pytest.raises(TypeError, match="outputs"):
        class_report.failure_of("CheckFailed")


# --------------------------------------------------------------------------- rank_failures

def test_failures_are_ranked_by_count_then_checks_before_not_answered_then_by_name() -> None:
    not_answered = Failure(NOT_ANSWERED, "NotImplementedError")
    failures = {"eve": Failure("CheckFailed: b", "CheckFailed: b: yours 2 (eve)"),
                "dan": Failure("CheckFailed: b", "CheckFailed: b: yours 1 (dan)"),
                "cyd": not_answered, "bob": not_answered,
                "ann": Failure("CheckFailed: a", "CheckFailed: a: yours 0"),
                "fay": Failure("NameError: x", "NameError: x")}
    assert class_report.rank_failures(failures) == (
        FailureGroup("CheckFailed: b", 2, "CheckFailed: b: yours 1 (dan)", ("dan", "eve")),
        FailureGroup(NOT_ANSWERED, 2, "NotImplementedError", ("bob", "cyd")),
        FailureGroup("CheckFailed: a", 1, "CheckFailed: a: yours 0", ("ann",)),
        FailureGroup("NameError: x", 1, "NameError: x", ("fay",)))


def test_no_failures_rank_to_nothing_and_a_list_is_refused() -> None:
    assert class_report.rank_failures({}) == ()
    with pytest.raises(TypeError, match="failures"):
        class_report.rank_failures([Failure("a", "b")])


# --------------------------------------------------------------------------- cells

def _test_cell(grade_id: str, *outputs: dict) -> dict:
    cell = new_code_cell("check()", metadata={"nbgrader": {"grade": True, "grade_id": grade_id, "points": 1}})
    cell.outputs = list(outputs)
    return cell


def _written_cell(grade_id: str = "written-1") -> dict:
    return new_markdown_cell("YOUR ANSWER HERE", metadata={"nbgrader": {"grade": True, "solution": True,
                                                                        "grade_id": grade_id, "points": 2}})


def test_cell_order_merges_copies_first_seen_first() -> None:
    first = new_notebook(cells=[_test_cell("ex1-tests"), new_code_cell("x = 1"), _test_cell("ex3-tests")])
    second = new_notebook(cells=[_test_cell("ex1-tests"), _test_cell("ex2-tests"), _test_cell("ex3-tests"),
                                 _written_cell()])
    assert class_report.cell_order([first, second]) == ["ex1-tests", "ex3-tests", "ex2-tests", "written-1"]


def test_summarise_cell_counts_means_full_marks_and_waiting_answers() -> None:
    grades = [CellGrade("ann", 2.0), CellGrade("bob", 0.5), CellGrade("cyd", None), CellGrade("dan", 2.0)]
    cell = class_report.summarise_cell(LESSON, "written-1", True, 2.0, grades, {})
    assert (cell.submissions, cell.graded, cell.awaiting, cell.full_marks) == (4, 3, 1, 2)
    assert cell.mean == pytest.approx(1.5) and cell.full_share == pytest.approx(2 / 3)
    waiting = class_report.summarise_cell(LESSON, "written-1", True, 2.0, [CellGrade("ann", None)], {})
    assert (waiting.mean, waiting.full_share) == (None, None)
    assert class_report.cell_summary(waiting) == "written-1 (written): awaiting manual grading (1 of 1), max 2"
    with pytest.raises(ValueError, match="max_score"):
        class_report.summarise_cell(LESSON, "ex1-tests", False, 0.0, grades, {})


def test_autograded_failures_read_only_submissions_below_full_marks() -> None:
    copies = {"ann": new_notebook(cells=[_test_cell("ex1-tests", _error("CheckFailed", "a: yours 1, expected 2"))]),
              "bob": new_notebook(cells=[_test_cell("ex1-tests", _error("NotImplementedError", ""))]),
              "cyd": new_notebook(cells=[])}
    grades = [CellGrade("ann", 1.0), CellGrade("bob", 0.0), CellGrade("cyd", 0.0), CellGrade("dan", 0.0),
              CellGrade("eve", 2.0), CellGrade("fay", None)]
    failures = class_report.autograded_failures("ex1-tests", grades, 2.0, copies)
    assert {student: failure.group for student, failure in failures.items()} == {
        "ann": "CheckFailed: a", "bob": NOT_ANSWERED, "cyd": class_report.NO_CELL, "dan": class_report.NO_NOTEBOOK}


# --------------------------------------------------------------------------- the command, on a hand-made gradebook

STUDENTS = {  # student -> (ex1 outputs, ex1 score, ex2 outputs, ex2 score, written auto score (None: answered))
    "ann": ([], 2.0, [_error("CheckFailed", f"a CPU runtime: yours 'x', expected 'no GPU'{HINT}")], 0.0, None),
    "bob": ([_error("NotImplementedError", "")], 0.0, [_error("NotImplementedError", "")], 0.0, 0.0),
    "cyd": ([], 2.0, [_error("CheckFailed", f"a CPU runtime: yours 'y', expected 'no GPU'{HINT}")], 0.0, None),
    "dan": ([_stream("stderr", "Traceback: boom\n")], 0.0, [], 3.0, None),
}


def _register_lesson(path: Path) -> None:
    """A gradebook at ``path`` that knows lesson 00: two exercises and a written answer, and no submission."""
    from nbgrader.api import Gradebook

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")  # alembic
        with Gradebook(f"sqlite:///{path}") as gradebook:
            gradebook.add_assignment(LESSON)
            gradebook.add_notebook(LESSON, LESSON)
            gradebook.add_grade_cell("ex1-tests", LESSON, LESSON, max_score=2, cell_type="code")
            gradebook.add_grade_cell("ex2-tests", LESSON, LESSON, max_score=3, cell_type="code")
            gradebook.add_solution_cell("written-1", LESSON, LESSON)
            gradebook.add_grade_cell("written-1", LESSON, LESSON, max_score=2, cell_type="markdown")


def _autograde_by_hand(root: Path) -> None:
    """Store STUDENTS' grades in root's gradebook and their autograded notebooks in root/autograded/."""
    from nbgrader.api import Gradebook

    with warnings.catch_warnings(), Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        warnings.simplefilter("ignore")  # SQLAlchemy's autoflush notes inside nbgrader's add_submission
        for student, (_, ex1, _, ex2, written) in STUDENTS.items():
            gradebook.add_student(student)
            gradebook.add_submission(LESSON, student)
            for grade_id, score in (("ex1-tests", ex1), ("ex2-tests", ex2), ("written-1", written)):
                grade = gradebook.find_grade(grade_id, LESSON, LESSON, student)
                grade.auto_score, grade.needs_manual_grade = score, score is None
            gradebook.db.commit()
    for student, (ex1_outputs, _, ex2_outputs, _, _) in STUDENTS.items():
        path = root / "autograded" / student / LESSON / f"{LESSON}.ipynb"
        path.parent.mkdir(parents=True)
        nbformat.write(new_notebook(cells=[_test_cell("ex1-tests", *ex1_outputs), _test_cell("ex2-tests", *ex2_outputs),
                                           _written_cell()]), path)


@pytest.fixture(scope="module")
def registered_gradebook(tmp_path_factory) -> bytes:
    """The bytes of a gradebook that knows lesson 00 but holds no submission."""
    path = tmp_path_factory.mktemp("registered") / "gradebook.db"
    _register_lesson(path)
    return path.read_bytes()


@pytest.fixture(scope="module")
def graded_class(tmp_path_factory, registered_gradebook) -> Path:
    root = tmp_path_factory.mktemp("class") / "course"
    root.mkdir()
    (root / "gradebook.db").write_bytes(registered_gradebook)
    _autograde_by_hand(root)
    return root


def _report(root: Path, *args: str, capsys) -> tuple[int, str, str]:
    """Run `python tools/course.py report ...` in-process: exit status, stdout, stderr."""
    status = course.main(["report", *args, "--course-root", str(root)])
    captured = capsys.readouterr()
    return status, captured.out, captured.err


EXPECTED_LINES = [
    "Class report for 00_getting_started: 4 autograded submissions",
    "",
    "ex1-tests: mean 1 / 2 (50%), full marks 2 of 4 (50%)",
    "    1 x wrote to stderr",
    "        Traceback: boom",
    "    1 x not answered",
    "ex2-tests: mean 0.75 / 3 (25%), full marks 1 of 4 (25%)",
    "    2 x CheckFailed: a CPU runtime",
    "        CheckFailed: a CPU runtime: yours 'x', expected 'no GPU'",
    "          Hint: walk the chain in order",
    "    1 x not answered",
    "written-1 (written): mean 0 / 2 (0%), full marks 0 of 1 (0%); 3 awaiting manual grading",
    "    1 x not answered",
]


def test_the_report_prints_and_writes_the_class_table(graded_class, tmp_path, capsys) -> None:
    gradebook_before = hashlib.sha256((graded_class / "gradebook.db").read_bytes()).hexdigest()
    status, out, err = _report(graded_class, "00", "--out", str(tmp_path / "out"), capsys=capsys)
    assert (status, err) == (0, "")
    csv_path = tmp_path / "out" / f"{LESSON}-class-report.csv"
    png_path = tmp_path / "out" / f"{LESSON}-class-report.png"
    assert out.splitlines() == [*EXPECTED_LINES, "", f"wrote {csv_path} and {png_path}"]
    with open(csv_path, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(r["cell"], r["kind"], r["mean_points"], r["full_marks_share"], r["awaiting_manual_grading"], r["rank"],
             r["failure"], r["failed_submissions"], r["students"]) for r in rows] == [
        ("ex1-tests", "autograded", "1", "0.5", "0", "1", "wrote to stderr", "1", "dan"),
        ("ex1-tests", "autograded", "1", "0.5", "0", "2", NOT_ANSWERED, "1", "bob"),
        ("ex2-tests", "autograded", "0.75", "0.25", "0", "1", "CheckFailed: a CPU runtime", "2", "ann cyd"),
        ("ex2-tests", "autograded", "0.75", "0.25", "0", "2", NOT_ANSWERED, "1", "bob"),
        ("written-1", "written", "0", "0", "3", "1", NOT_ANSWERED, "1", "bob")]
    assert rows[2]["message"] == f"CheckFailed: a CPU runtime: yours 'x', expected 'no GPU'{HINT}"
    assert png_path.read_bytes().startswith(b"\x89PNG")
    assert hashlib.sha256((graded_class / "gradebook.db").read_bytes()).hexdigest() == gradebook_before


def test_the_report_refuses_to_overwrite_unless_forced(graded_class, capsys) -> None:
    status, _, _ = _report(graded_class, LESSON, capsys=capsys)  # default --out: reports/ in the course root
    assert status == 0
    csv_path = graded_class / "reports" / f"{LESSON}-class-report.csv"
    csv_path.write_text("the instructor's notes\n", encoding="utf-8")
    status, out, err = _report(graded_class, LESSON, capsys=capsys)
    assert (status, out) == (2, "")
    assert err == f"report: error: {csv_path} already exists: pass --force to replace it, or --out another folder\n"
    assert csv_path.read_text(encoding="utf-8") == "the instructor's notes\n"
    status, _, _ = _report(graded_class, LESSON, "--force", capsys=capsys)
    assert status == 0 and csv_path.read_text(encoding="utf-8").startswith("lesson,notebook,cell,")


# --------------------------------------------------------------------------- bad input: one line, exit status 2

def _one_line_error(root: Path, lesson: str, capsys) -> str:
    status, out, err = _report(root, lesson, "--out", str(root / "out"), capsys=capsys)
    assert (status, out) == (2, "") and err.count("\n") == 1 and "Traceback" not in err, err
    assert not (root / "out").exists()
    return err


def test_no_gradebook(tmp_path, capsys) -> None:
    err = _one_line_error(tmp_path, LESSON, capsys)
    assert err == (f"report: error: no gradebook.db in {tmp_path}: run `python tools/course.py gradebook` there "
                   "first, then collect and `nbgrader autograde LESSON`\n")


def test_no_course_folder(tmp_path, capsys) -> None:
    status, _, err = _report(tmp_path / "missing", LESSON, capsys=capsys)
    assert status == 2 and err.startswith(f"report: error: --course-root {tmp_path / 'missing'}: no such folder")


def test_a_file_that_is_no_gradebook(tmp_path, capsys) -> None:
    (tmp_path / "gradebook.db").write_text("not a database", encoding="utf-8")
    assert "is not an nbgrader gradebook" in _one_line_error(tmp_path, LESSON, capsys)


def test_an_unknown_lesson(graded_class, capsys) -> None:
    err = _one_line_error(graded_class, "99", capsys)
    assert err == "report: error: LESSON '99' is not a lesson of this course; give a number or a name: " + \
                  f"{LESSON}\n"


def test_a_lesson_not_in_the_gradebook(graded_class, capsys) -> None:
    other = graded_class.parent / "other"
    (other / "solutions" / "01_architecture").mkdir(parents=True)
    (other / "solutions" / "01_architecture" / "01_architecture.ipynb").write_text("{}", encoding="utf-8")
    (other / "gradebook.db").write_bytes((graded_class / "gradebook.db").read_bytes())
    err = _one_line_error(other, "01", capsys)
    assert err == (f"report: error: 01_architecture is not in {other / 'gradebook.db'}: run `python tools/course.py "
                   "gradebook` first, then collect and `nbgrader autograde 01_architecture`\n")


def test_a_lesson_never_autograded(tmp_path, registered_gradebook, capsys) -> None:
    (tmp_path / "gradebook.db").write_bytes(registered_gradebook)
    err = _one_line_error(tmp_path, LESSON, capsys)
    assert err == (f"report: error: no submission of {LESSON} is autograded in {tmp_path / 'gradebook.db'}: run "
                   f"`nbgrader collect {LESSON}` (or zip_collect), then `nbgrader autograde {LESSON}` first\n")


def test_an_out_folder_that_is_a_file(graded_class, tmp_path, capsys) -> None:
    (tmp_path / "out").write_text("", encoding="utf-8")
    status, out, err = _report(graded_class, LESSON, "--out", str(tmp_path / "out"), capsys=capsys)
    assert (status, out, err) == (2, "", f"report: error: --out {tmp_path / 'out'} is a file, not a folder\n")
