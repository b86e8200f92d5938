"""Tests of gpucourse.grade (`python -m gpucourse grade`, `make grade`): self-learners grade their copies in work/."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from gpucourse import grade
from gpucourse.__main__ import main
from notebook_utils import (HIDDEN_REGION, ROOT, SOLUTION_REGION, cell_by_grade_id, exercises, load, release_path,
                            solution_path, source, wrong_answers, written_answers)

LESSONS = grade.course_lessons(ROOT)
LESSON = "00_getting_started"


def _error(ename: str, evalue: str) -> dict:
    """An error output as nbformat stores it, with a traceback that quotes test source."""
    return {"output_type": "error", "ename": ename, "evalue": evalue,
            "traceback": ["\x1b[0;31m---------\x1b[0m", "check(secret_hidden_test_source())", f"{ename}: {evalue}"]}


# --------------------------------------------------------------------------- lessons and the course

@pytest.mark.parametrize("argument", ["01", "1", "01_architecture", "work/01_architecture/01_architecture.ipynb",
                                      "work/01_architecture/", " 01 ", "work/01_architecture/my copy.ipynb"])
def test_a_lesson_is_named_by_number_name_or_path(argument: str) -> None:
    assert grade.resolve_lesson(argument, LESSONS) == "01_architecture"


@pytest.mark.parametrize("argument", ["42", "architecture", "", "01_architectures", "18"])
def test_a_bad_lesson_name_is_a_clear_error_naming_the_argument(argument: str) -> None:
    with pytest.raises(ValueError, match="LESSON"):
        grade.resolve_lesson(argument, LESSONS)


def test_the_course_is_found_from_a_subfolder_or_given_explicitly(tmp_path: Path) -> None:
    (tmp_path / "solutions").mkdir()
    (tmp_path / "nbgrader_config.py").write_text("", encoding="utf-8")
    nested = tmp_path / "work" / "01_architecture"
    nested.mkdir(parents=True)
    assert grade.find_course_root(None, [nested]) == tmp_path.resolve()
    assert grade.find_course_root(tmp_path, []) == tmp_path.resolve()


def test_without_a_clone_of_the_course_grading_says_it_needs_one(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="clone of the course repository"):
        grade.find_course_root(None, [tmp_path])
    with pytest.raises(ValueError, match="--course"):
        grade.find_course_root(tmp_path, [ROOT])


def test_lesson_points_split_automatic_and_written_points() -> None:
    automatic, written = grade.lesson_points(ROOT, "00_getting_started")
    assert automatic == sum(e.points for e in exercises("00_getting_started")) and written > 0


def test_the_learner_notebook_is_the_copy_in_work_unless_a_file_is_named(tmp_path: Path) -> None:
    work = tmp_path / "work"
    assert grade.learner_notebook("01", "01_architecture", work) == work / "01_architecture" / "01_architecture.ipynb"
    downloaded = tmp_path / "01_architecture.ipynb"
    downloaded.write_text("{}", encoding="utf-8")
    assert grade.learner_notebook(str(downloaded), "01_architecture", work) == downloaded


def test_a_folder_names_the_notebook_in_it(tmp_path: Path) -> None:
    assert grade.learner_notebook(str(tmp_path), "01_architecture", ROOT / "work") == tmp_path / "01_architecture.ipynb"


def test_a_copy_is_untouched_until_an_answer_cell_changes(tmp_path: Path) -> None:
    release, copy = release_path(LESSON), tmp_path / f"{LESSON}.ipynb"
    notebook = load(release)
    notebook["cells"][0]["source"] = "a learner's note outside the answer cells"
    copy.write_text(json.dumps(notebook), encoding="utf-8")
    assert grade.is_untouched(copy, release)
    cell_by_grade_id(notebook, "written-1")["source"] = "my answer"
    copy.write_text(json.dumps(notebook), encoding="utf-8")
    assert not grade.is_untouched(copy, release)
    copy.write_text("not a notebook", encoding="utf-8")
    assert not grade.is_untouched(copy, release) and not grade.is_untouched(release, tmp_path / "missing.ipynb")


# --------------------------------------------------------------------------- reading results

def test_exercise_labels_are_friendly() -> None:
    assert grade.exercise_label("ex2-tests") == "Exercise 2"
    assert grade.exercise_label("written-1") == "Written answer 1"
    assert grade.exercise_label("custom-cell") == "custom-cell"


def test_a_failed_check_shows_its_message_and_hint_but_not_the_traceback() -> None:
    message = grade.failure_message([_error("CheckFailed", "\x1b[1mf(2)\x1b[0m: yours 3, expected 4\n  Hint: add one")])
    assert message == "f(2): yours 3, expected 4\n  Hint: add one"
    assert "secret" not in message


def test_an_unanswered_exercise_says_so() -> None:
    assert grade.failure_message([_error("NotImplementedError", "")]) == "not answered yet"


def test_other_errors_show_their_name_and_message_only() -> None:
    name_error = grade.failure_message([_error("NameError", "name 'x' is not defined")])
    assert name_error == "NameError: name 'x' is not defined"
    assert grade.failure_message([_error("AssertionError", "")]) == "AssertionError"


def test_a_long_error_message_is_cut_short() -> None:
    message = grade.failure_message([_error("ValueError", "\n".join("x" * 500 for _ in range(20)))])
    lines = message.splitlines()
    assert len(lines) == grade.MAX_MESSAGE_LINES + 1 and lines[-1] == "..."
    assert all(len(line) <= grade.MAX_LINE_CHARS for line in lines)


def test_stderr_in_a_test_cell_is_named_as_the_failure() -> None:
    assert "stderr" in grade.failure_message([{"output_type": "stream", "name": "stderr", "text": "warn"}])


def test_cell_results_follow_the_notebook_and_explain_each_failure() -> None:
    def cell(grade_id: str, solution: bool, outputs: list[dict]) -> dict:
        return {"cell_type": "markdown" if solution else "code", "outputs": outputs,
                "metadata": {"nbgrader": {"grade": True, "solution": solution, "grade_id": grade_id}}}

    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": []},
                          cell("ex1-tests", False, []),
                          cell("ex2-tests", False, [_error("CheckFailed", "m\n  Hint: h")]),
                          cell("ex3-tests", False, [_error("NotImplementedError", "")]),
                          cell("written-1", True, []), cell("written-2", True, [])]}
    scores = {"ex1-tests": (2.0, 2.0), "ex2-tests": (0.0, 3.0), "ex3-tests": (0.0, 1.0),
              "written-1": (None, 2.0), "written-2": (0.0, 1.0)}
    assert grade.cell_results(notebook, notebook, scores) == [
        grade.CellResult("ex1-tests", 2.0, 2.0, False, ""),
        grade.CellResult("ex2-tests", 0.0, 3.0, False, "m\n  Hint: h"),
        grade.CellResult("ex3-tests", 0.0, 1.0, False, "not answered yet"),
        grade.CellResult("written-1", None, 2.0, True, ""),
        grade.CellResult("written-2", 0.0, 1.0, True, "not answered yet")]


def _answer_cell(grade_id: str, outputs: list[dict]) -> dict:
    """An answer (solution) code cell with ``outputs``."""
    return {"cell_type": "code", "outputs": outputs,
            "metadata": {"nbgrader": {"grade": False, "solution": True, "grade_id": grade_id}}}


def test_an_answer_cell_error_names_its_line() -> None:
    indentation = {"output_type": "error", "ename": "IndentationError", "evalue": "expected an indented block",
                   "traceback": ["\x1b[0;36m  Cell \x1b[0;32mIn[7], line 3\x1b[0m", "    return x",
                                 "IndentationError: expected an indented block"]}
    assert grade.answer_cell_error(_answer_cell("ex1-solution", [indentation])) == (
        "IndentationError at line 3: expected an indented block")
    assert grade.answer_cell_error(_answer_cell("ex1-solution", [_error("NameError", "name 'y' is not defined")])) == (
        "NameError: name 'y' is not defined")
    assert grade.answer_cell_error(_answer_cell("ex1-solution", [_error("NotImplementedError", "")])) is None
    assert grade.answer_cell_error(_answer_cell("ex1-solution", [])) is None


def test_a_failing_answer_cell_is_reported_before_the_tests_later_error() -> None:
    tests = {"cell_type": "code", "outputs": [_error("NameError", "name 'peak_flops' is not defined")],
             "metadata": {"nbgrader": {"grade": True, "solution": False, "grade_id": "ex2-tests"}}}
    broken = _answer_cell("ex2-solution", [_error("SyntaxError", "invalid syntax")])
    notebook = {"cells": [broken, tests]}
    [result] = grade.cell_results(notebook, notebook, {"ex2-tests": (0.0, 2.0)})
    assert result.message.startswith("your answer cell (Exercise 2) failed first: SyntaxError: invalid syntax")
    assert result.message.endswith("the test then said: NameError: name 'peak_flops' is not defined")
    clean = {"cells": [_answer_cell("ex2-solution", []), tests]}
    [result] = grade.cell_results(clean, clean, {"ex2-tests": (0.0, 2.0)})
    assert result.message == "NameError: name 'peak_flops' is not defined"


# --------------------------------------------------------------------------- the report

RESULTS = [grade.CellResult("ex1-tests", 1.0, 1.0, False),
           grade.CellResult("ex2-tests", 0.0, 2.5, False, "m\n  Hint: h"),
           grade.CellResult("written-1", None, 2.0, True)]


def test_format_table_aligns_columns_and_continues_extra_lines_under_their_column() -> None:
    assert grade.format_table([["a", "bb", "c"], ["ccc", "d\ne", "f"]]).splitlines() == [
        "a    bb  c", "ccc  d   f", "     e"]


def test_a_graded_cell_missing_from_the_learners_notebook_scores_zero_and_says_so() -> None:
    source = {"cells": [{"cell_type": "code", "metadata": {"nbgrader": {"grade": True, "grade_id": "ex1-tests"}}},
                        {"cell_type": "markdown", "metadata": {"nbgrader": {"grade": True, "grade_id": "written-1",
                                                                            "solution": True}}}]}
    assert grade.cell_results(source, {"cells": []}, {"ex1-tests": (None, 2.0), "written-1": (None, 1.0)}) == [
        grade.CellResult("ex1-tests", 0.0, 2.0, False, grade.MISSING_CELL),
        grade.CellResult("written-1", 0.0, 1.0, True, grade.MISSING_CELL)]


def test_the_lesson_table_shows_points_hints_and_written_answers_apart() -> None:
    lines = grade.lesson_table("00_x", RESULTS).splitlines()
    assert lines[0].split() == ["lesson", "exercise", "points", "result"]
    assert lines[1].split() == ["00_x", "Exercise", "1", "1", "/", "1", "passed"]
    assert lines[2].split() == ["Exercise", "2", "0", "/", "2.5", "m"] and lines[3].strip() == "Hint: h"
    assert lines[4].split()[:6] == ["Written", "answer", "1", "-", "/", "2"] and grade.WRITTEN_NOTE in lines[4]
    assert re.search(r"automatic score\s+1 / 3.5\s+\+ 2 points of written answers", lines[5])


def test_the_progress_table_covers_every_lesson_and_says_which_are_not_started() -> None:
    possible = {"00_x": 3.5, "01_y": 4.0, "02_z": 1.0}
    table = grade.progress_table(possible, {"00_x": RESULTS, "02_z": "could not be graded"})
    rows = [line.split() for line in table.splitlines()]
    assert rows[1] == ["00_x", "1", "of", "2", "1", "/", "3.5", "in", "progress"]
    assert rows[2] == ["01_y", "-", "0", "/", "4", "not", "started"]
    assert rows[3][-4:] == ["could", "not", "be", "graded"]
    assert rows[4] == ["all", "lessons", "1", "/", "8.5"]


def test_a_complete_lesson_says_so() -> None:
    assert grade.progress_table({"00_x": 1.0}, {"00_x": RESULTS[:1]}).splitlines()[1].endswith("complete")


# --------------------------------------------------------------------------- command line

def test_a_bad_lesson_on_the_command_line_exits_2_naming_it(capsys) -> None:
    assert main(["grade", "42", "--course", str(ROOT)]) == 2
    assert "LESSON '42'" in capsys.readouterr().err


def test_a_folder_that_is_not_the_course_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["grade", "--course", str(tmp_path)]) == 2
    assert "clone of the course repository" in capsys.readouterr().err


def test_a_lesson_without_a_copy_exits_2_and_says_how_to_make_one(tmp_path: Path, capsys) -> None:
    assert main(["grade", "01", "--course", str(ROOT), "--work", str(tmp_path)]) == 2
    assert "make lab" in capsys.readouterr().err


def test_a_missing_work_folder_exits_2(tmp_path: Path, capsys) -> None:
    assert main(["grade", "--course", str(ROOT), "--work", str(tmp_path / "nowhere")]) == 2
    assert "--work" in capsys.readouterr().err


def test_with_no_copies_every_lesson_is_not_started(tmp_path: Path, capsys) -> None:
    assert main(["grade", "--course", str(ROOT), "--work", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert all(re.search(rf"^{lesson}\s+-\s+0 / \S+\s+not started$", out, re.M) for lesson in LESSONS)


def test_untouched_copies_are_not_started_and_not_run(tmp_path: Path, capsys, monkeypatch) -> None:
    """`make lab` copies every lesson: the copies nobody has answered yet are listed, not executed."""
    (tmp_path / LESSON).mkdir()
    (tmp_path / LESSON / f"{LESSON}.ipynb").write_bytes(release_path(LESSON).read_bytes())
    monkeypatch.setattr(grade, "grade_notebook", lambda *args: pytest.fail("an untouched copy was run"))
    assert main(["grade", "--course", str(ROOT), "--work", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"Not started (no answer written yet, nothing to run): {LESSON}" in out
    total = f"{sum(e.points for e in exercises(LESSON)):g}"
    assert re.search(rf"^{LESSON}\s+-\s+0 / {total}\s+not started$", out, re.M), out


def test_a_notebook_nbgrader_cannot_grade_is_reported_and_exits_1(tmp_path: Path, capsys, monkeypatch) -> None:
    def fail(*args) -> None:
        raise grade.GradingError("nbgrader autograde failed:\nthe file is not a notebook")

    (tmp_path / LESSON).mkdir()
    (tmp_path / LESSON / f"{LESSON}.ipynb").write_text("{}", encoding="utf-8")
    monkeypatch.setattr(grade, "grade_notebook", fail)
    assert main(["grade", "00", "--course", str(ROOT), "--work", str(tmp_path)]) == 1
    assert "could not grade 00_getting_started: nbgrader autograde failed" in capsys.readouterr().out


def test_make_grade_runs_the_grade_command_with_the_lesson() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^grade: setup +## .+\n\t\$\(BIN\)/python -m gpucourse grade \$\(LESSON\)$", makefile, re.M)


# --------------------------------------------------------------------------- end to end


BROKEN_ANSWER = "def broken(:\n    pass\n"  # a SyntaxError in the answer cell itself


def _learner_copy(work: Path) -> Path:
    """A learner's copy of lesson 00: exercise 1 right, 2 wrong, the last one's cell broken (a SyntaxError), any
    between them unanswered, the written answer answered."""
    notebook, solved = load(release_path(LESSON)), load(solution_path(LESSON))
    found = exercises(LESSON)
    for grade_id in (found[0].solution_id, "written-1"):
        cell_by_grade_id(notebook, grade_id)["source"] = source(cell_by_grade_id(solved, grade_id))
    cell_by_grade_id(notebook, found[1].solution_id)["source"] = wrong_answers(LESSON)[found[1].solution_id]
    cell_by_grade_id(notebook, found[-1].solution_id)["source"] = BROKEN_ANSWER
    path = work / LESSON / f"{LESSON}.ipynb"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return path


def _secret_lines() -> set[str]:
    """Every substantial line of lesson 00's solution code and hidden tests (none may reach the report)."""
    text = "\n".join(source(cell) for cell in load(solution_path(LESSON))["cells"])
    regions = SOLUTION_REGION.findall(text) + HIDDEN_REGION.findall(text)
    return {line.strip() for region in regions for line in region.splitlines()
            if len(line.strip()) >= 12 and not line.strip().startswith("#")}


@pytest.mark.slow
def test_a_learner_sees_exact_points_and_hints_and_their_file_is_untouched(tmp_path: Path, capsys) -> None:
    work = tmp_path / "work"
    notebook = _learner_copy(work)
    before = notebook.read_bytes()
    files_before = sorted(work.rglob("*"))
    gradebook = ROOT / "gradebook.db"
    gradebook_before = gradebook.stat().st_mtime_ns if gradebook.exists() else None

    assert main(["grade", "--course", str(ROOT), "--work", str(work)]) == 0
    out = capsys.readouterr().out

    assert f"Grading {LESSON}: running" in out
    found = exercises(LESSON)
    assert len(found) >= 3, "this test needs lesson 00 to have three or more exercises"
    total = sum(e.points for e in found)
    written = sum(written_answers(LESSON).values())
    rows = [("Exercise 1", f"{found[0].points:g} / {found[0].points:g}", "passed"),
            ("Exercise 2", f"0 / {found[1].points:g}", r".+"),
            *((f"Exercise {i + 1}", f"0 / {e.points:g}", "not answered yet") for i, e in enumerate(found[2:-1], 2)),
            (f"Exercise {len(found)}", f"0 / {found[-1].points:g}",
             re.escape(f"your answer cell (Exercise {len(found)}) failed first: SyntaxError") + ".*"),
            ("Written answer 1", f"- / {written_answers(LESSON)['written-1']:g}", re.escape(grade.WRITTEN_NOTE)),
            ("automatic score", f"{found[0].points:g} / {total:g}", rf"\+ {written:g} points of written answers.*")]
    for label, points, result in rows:
        assert re.search(rf"^\s*(?:{LESSON}\s+)?{label}\s+{points}\s+{result}$", out, re.M), (label, out)
    assert re.search(r"Exercise 2 .*\n(?:.*\n){0,5}\s+Hint: \S", out), out
    assert re.search(rf"^{LESSON}\s+1 of {len(found)}\s+{found[0].points:g} / {total:g}\s+in progress$", out, re.M), out
    assert re.search(r"^01_architecture\s+-\s+0 / \S+\s+not started$", out, re.M), out
    leaked = [line for line in _secret_lines() if line in out]
    assert not leaked and "Traceback" not in out, leaked

    assert notebook.read_bytes() == before and sorted(work.rglob("*")) == files_before
    assert (gradebook.stat().st_mtime_ns if gradebook.exists() else None) == gradebook_before


def test_the_per_cell_limit_is_set_in_one_place_and_every_runner_uses_it():
    """nbgrader (autograde, Validate, make grade), the Colab twin, the GPU check and the mutation runs share it."""
    import ast
    import importlib.util
    import sys
    from pathlib import Path

    from gpucourse import syllabus

    root = Path(__file__).resolve().parents[1]
    config = (root / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "c.Execute.timeout = CELL_TIMEOUT_S" in config and "import CELL_TIMEOUT_S" in config
    twin = ast.parse((root / "tools" / "colab_twin.py").read_text(encoding="utf-8"))
    twin_limit = next(node.value.value for node in twin.body if isinstance(node, ast.Assign)
                      and getattr(node.targets[0], "id", "") == "CELL_TIMEOUT_S")
    assert twin_limit == syllabus.CELL_TIMEOUT_S
    spec = importlib.util.spec_from_file_location("gpu_check_for_test", root / "tools" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = gpu_check
    spec.loader.exec_module(gpu_check)
    import inspect

    assert inspect.signature(gpu_check.run_notebook).parameters["cell_timeout_s"].default == syllabus.CELL_TIMEOUT_S


def test_a_cell_that_ran_out_of_time_is_reported_in_words():
    from gpucourse import syllabus

    message = grade.failure_message([{"output_type": "error", "ename": "CellTimeoutError", "evalue": "",
                                      "traceback": []}])
    assert message.startswith(f"this cell ran longer than {syllabus.CELL_TIMEOUT_S} s on this machine")
    assert "Run it alone" in message and "Traceback" not in message


def _nbgrader_config_namespace() -> dict:
    """nbgrader_config.py executed as nbgrader loads it: its classes and its config object."""
    from traitlets.config import Config

    config = Config()
    namespace = {"get_config": lambda: config, "__file__": str(ROOT / "nbgrader_config.py")}
    exec(compile((ROOT / "nbgrader_config.py").read_text(encoding="utf-8"), "nbgrader_config.py", "exec"), namespace)
    return namespace


@pytest.mark.slow
def test_autograde_names_the_student_notebook_and_cell_whose_kernel_died():
    """A crash in native code under a cell is reported in seconds with where it happened, not as 'Kernel died'."""
    import time

    import nbformat
    from nbclient.exceptions import DeadKernelError

    course = _nbgrader_config_namespace()
    assert course["ExecuteNamingTheCell"] in course["c"].Autograde.autograde_preprocessors
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)",
                                  metadata={"nbgrader": {"grade_id": "ex1-solution"}})])
    execute = course["ExecuteNamingTheCell"](config=course["c"], kernel_name="python3")
    resources = {"nbgrader": {"student": "s1", "assignment": "02_roofline", "notebook": "02_roofline"}}
    started = time.monotonic()
    with pytest.raises(DeadKernelError, match=r"s1/02_roofline/02_roofline: the kernel died while running cell 1 "
                                              r"\(ex1-solution\), which starts 'import os, signal'"):
        execute.preprocess(notebook, resources)
    assert time.monotonic() - started < 30


def test_autograde_runs_nbgraders_own_preprocessors_with_execute_naming_the_cell():
    """nbgrader_config.py lists autograde's preprocessors by hand: they must stay nbgrader's, Execute swapped."""
    from nbgrader.converters import Autograde
    from nbgrader.preprocessors import Execute

    course = _nbgrader_config_namespace()
    defaults = Autograde.class_traits()["autograde_preprocessors"].make_dynamic_default()
    assert Execute in defaults
    assert course["c"].Autograde.autograde_preprocessors == [course["ExecuteNamingTheCell"] if p is Execute else p
                                                               for p in defaults]
