"""nbgrader's whole pipeline on a throw-away copy of the course, as an instructor runs it (README).

Per lesson, three students submit: the untouched release, one with the odd-numbered exercises wrong that went
through a Colab round-trip (cell ids dropped, Colab metadata added), and one with the even-numbered exercises
answered by tampering (a constant, with the course's check rebound in every module) *and* every test cell gutted.
Autograde, feedback and export must give exact scores; the untouched release must also fail only in its exercise
cells, and only with NotImplementedError.

The two half-wrong submissions hold the model answers of the other half, so between them nbgrader grades every model
answer (full marks, exactly). The complete solution notebook is not submitted a third time: nbval executes it, and
its test cells pass at least three times in a row (five where it is quick) there (tests/lesson_notebooks.py). A complete model submission is still
graded on the exchange route (tests/test_exchange.py) and on a simulated AVX2 CPU (below).
"""

from __future__ import annotations

import copy
import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from notebook_utils import (LESSONS, LOW_PRECISION_LESSONS, ROOT, cell_by_grade_id, course, exercises, load, nbgrader,
                            profile_variables, release_path, solution_path, source, wrong_answer_sets,
                            written_answers)

pytestmark = pytest.mark.slow

STUDENTS = ("untouched", "wrong_odd_via_colab", "tampered_even")


def _set_source(cell: dict, text: str) -> None:
    cell["source"] = text.splitlines(keepends=True)


def _with_solutions(lesson: str) -> dict:
    """The release notebook with every solution and written-answer cell filled in from solutions/."""
    submission = load(release_path(lesson))
    solved = load(solution_path(lesson))
    for cell in solved["cells"]:
        if nbgrader(cell).get("solution"):
            _set_source(cell_by_grade_id(submission, nbgrader(cell)["grade_id"]), source(cell))
    return submission


def _with_wrong(submission: dict, lesson: str, parity: int, kind: str = "typical") -> dict:
    """Replace the solutions of exercises ex1, ex3, ... (parity 1) or ex2, ex4, ... (parity 0) by wrong answers of
    ``kind`` (tests/wrong_answers/: "typical", or a tampering kind such as "tamper_check")."""
    wrong = wrong_answer_sets(lesson)
    for index, exercise in enumerate(exercises(lesson), start=1):
        if index % 2 == parity:
            _set_source(cell_by_grade_id(submission, exercise.solution_id), wrong[exercise.solution_id][kind])
    return submission


def _gut_test_cells(submission: dict) -> dict:
    """What a student who deletes the asserts does: every autograded test cell reduced to `pass`."""
    for cell in submission["cells"]:
        if nbgrader(cell).get("grade") and cell["cell_type"] == "code":
            _set_source(cell, "pass\n")
    return submission


def _colab_round_trip(submission: dict) -> dict:
    """What saving from Colab does: cell ids dropped, nbformat 4.4, Colab metadata on cells and notebook."""
    notebook = copy.deepcopy(submission)
    notebook["nbformat_minor"] = 4
    notebook["metadata"] = {"colab": {"provenance": [], "gpuType": "T4", "toc_visible": True},
                            "accelerator": "GPU", "kernelspec": {"name": "python3", "display_name": "Python 3"},
                            "language_info": {"name": "python"}}
    for index, cell in enumerate(notebook["cells"]):
        cell.pop("id", None)
        cell["metadata"] = {**cell.get("metadata", {}), "id": f"Zx{index:06d}", "colab": {"base_uri": "https://localhost/"}}
        if cell["cell_type"] == "code":
            cell["metadata"]["outputId"] = f"out{index}"
    return notebook


def _submissions(lesson: str) -> dict[str, dict]:
    return {
        "correct": _with_solutions(lesson),
        "untouched": load(release_path(lesson)),
        "wrong_odd_via_colab": _colab_round_trip(_with_wrong(_with_solutions(lesson), lesson, parity=1)),
        "tampered_even": _gut_test_cells(_with_wrong(_with_solutions(lesson), lesson, parity=0, kind="tamper_check")),
    }


def _nbgrader(course_root: Path, *args: str, env: dict | None = None) -> None:
    """Run an nbgrader command in the course copy, failing the test with its output if it fails."""
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"], cwd=course_root,
                            env={**course.venv_environment(), **(env or {})}, capture_output=True, text=True,
                            timeout=1800)
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


def run_pipeline(lesson: str, root: Path, students: tuple[str, ...] = STUDENTS, env: dict | None = None) -> dict:
    """Run the README's instructor workflow for one lesson on a copy of the course; return what it produced."""
    shutil.copy(ROOT / "nbgrader_config.py", root)
    shutil.copytree(ROOT / "solutions" / lesson, root / "solutions" / lesson)
    course.cmd_gradebook(root, release_to=root / "fresh-release")  # README step 1, for the lesson in the copy
    for student, notebook in _submissions(lesson).items():
        if student not in students:
            continue
        target = root / "submitted" / student / lesson / f"{lesson}.ipynb"
        target.parent.mkdir(parents=True)
        target.write_text(json.dumps(notebook), encoding="utf-8")
    _nbgrader(root, "autograde", lesson, env=env)
    _nbgrader(root, "generate_feedback", lesson)
    _nbgrader(root, "export")

    from nbgrader.api import Gradebook

    scores = {}
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        for student in students:
            notebook = gradebook.find_submission_notebook(lesson, lesson, student)
            scores[student] = {grade.name: (grade.auto_score, grade.max_score) for grade in notebook.grades}
    with open(root / "grades.csv", newline="", encoding="utf-8") as handle:
        exported = {row["student_id"]: float(row["raw_score"]) for row in csv.DictReader(handle)
                    if row["assignment"] == lesson}
    return {"lesson": lesson, "root": root, "scores": scores, "exported": exported}


def _expected(lesson: str, wrong: set[str]) -> dict[str, tuple[float, float]]:
    """Autograded score per test cell when the exercises named in ``wrong`` are wrong."""
    return {e.tests_id: (0.0 if e.name in wrong else e.points, e.points) for e in exercises(lesson)}


def _autograded(scores: dict) -> dict:
    return {name: score for name, score in scores.items() if not name.startswith("written")}


def _names(lesson: str, parity: int) -> set[str]:
    return {e.name for i, e in enumerate(exercises(lesson), start=1) if i % 2 == parity}


class GradingPipeline:
    """The pipeline's checks for one lesson; a subclass per lesson lets pytest-xdist grade lessons in parallel."""

    lesson: str

    @pytest.fixture(scope="class")
    @classmethod
    def graded(cls, tmp_path_factory) -> dict:
        return run_pipeline(cls.lesson, tmp_path_factory.mktemp(f"course-{cls.lesson}"))

    def test_every_model_answer_gets_full_marks_from_nbgrader(self, graded) -> None:
        """Each exercise's model answer, in the half-wrong submission that holds it, scores exactly its points."""
        lesson, scores = graded["lesson"], graded["scores"]
        right_in = {1: "tampered_even", 0: "wrong_odd_via_colab"}  # odd exercises are right where even ones are wrong
        for index, exercise in enumerate(exercises(lesson), start=1):
            got = scores[right_in[index % 2]][exercise.tests_id]
            assert got == (exercise.points, exercise.points), f"{lesson}/{exercise.name}: model answer scored {got}"


    def test_untouched_release_scores_zero_everywhere(self, graded) -> None:
        lesson = graded["lesson"]
        assert _autograded(graded["scores"]["untouched"]) == _expected(lesson, {e.name for e in exercises(lesson)})


    def test_each_wrong_answer_loses_only_its_own_points(self, graded) -> None:
        """Also proves a Colab round-trip changes nothing: that submission gets exactly the expected scores."""
        lesson = graded["lesson"]
        assert _autograded(graded["scores"]["wrong_odd_via_colab"]) == _expected(lesson, _names(lesson, 1))


    def test_edited_test_cells_are_restored_at_autograde(self, graded) -> None:
        """Gutting the test cells does not help: the original tests run, and the wrong answers still score 0."""
        lesson = graded["lesson"]
        assert _autograded(graded["scores"]["tampered_even"]) == _expected(lesson, _names(lesson, 0))



    def test_written_answers_wait_for_the_instructor(self, graded) -> None:
        """An answered written cell awaits manual grading (no auto score); an unanswered one scores 0 at once."""
        for student in STUDENTS:
            for grade_id, points in written_answers(graded["lesson"]).items():
                expected = 0.0 if student == "untouched" else None
                assert graded["scores"][student][grade_id] == (expected, points)


    def test_committed_release_is_what_nbgrader_generates(self, graded) -> None:
        """notebooks/LESSON is exactly the student version nbgrader generated while registering the lesson (the
        generation `make release` runs; run it if this fails)."""
        lesson = graded["lesson"]
        assert course.folder_differences(graded["root"] / "fresh-release" / lesson, ROOT / "notebooks" / lesson) == []

    def test_feedback_and_export(self, graded) -> None:
        lesson, root = graded["lesson"], graded["root"]
        points = {parity: sum(e.points for i, e in enumerate(exercises(lesson), start=1) if i % 2 == parity)
                  for parity in (0, 1)}
        for student in STUDENTS:
            html = (root / "feedback" / student / lesson / f"{lesson}.html").read_text(encoding="utf-8")
            assert lesson in html
        assert graded["exported"] == {"untouched": 0, "wrong_odd_via_colab": points[0], "tampered_even": points[1]}


    def test_untouched_release_fails_only_in_exercises(self, graded) -> None:
        """Every non-exercise cell of the student version runs; exercise cells fail with NotImplementedError only."""
        lesson = graded["lesson"]
        notebook = load(graded["root"] / "autograded" / "untouched" / lesson / f"{lesson}.ipynb")
        in_exercise = False
        for cell in notebook["cells"]:
            meta = nbgrader(cell)
            if meta.get("solution") and cell["cell_type"] == "code":
                in_exercise = True
            errors = [o for o in cell.get("outputs", []) if o["output_type"] == "error"]
            stderr = [o for o in cell.get("outputs", []) if o["output_type"] == "stream" and o["name"] == "stderr"]
            assert not stderr, f"{lesson}: stderr in cell {meta.get('grade_id') or source(cell)[:60]!r}"
            if in_exercise:
                assert all(e["ename"] == "NotImplementedError" for e in errors), (
                    f"{lesson}: exercise cell failed with {[e['ename'] for e in errors]}: {source(cell)[:80]!r}")
            else:
                assert not errors, f"{lesson}: non-exercise cell failed: {source(cell)[:80]!r}"
            if meta.get("grade") and cell["cell_type"] == "code":
                assert errors, f"{lesson}: test cell {meta['grade_id']} passed on the untouched release"
                in_exercise = False

for _lesson in LESSONS:  # TestGrading_00_getting_started, ...: one class per lesson (xdist --dist loadscope)
    globals()[f"TestGrading_{_lesson}"] = type(f"TestGrading_{_lesson}", (GradingPipeline,), {"lesson": _lesson})




class GradingOnAnAvx2Cpu:
    """The model answers of a lesson that computes in low precision still get full marks on a CPU that only emulates
    bfloat16, under the course's per-cell time limit: a slow path must not cost a learner points."""

    lesson: str

    @pytest.fixture(scope="class")
    @classmethod
    def graded(cls, tmp_path_factory) -> dict:
        root = tmp_path_factory.mktemp(f"avx2-{cls.lesson}")  # an x86 CPU without native bfloat16 (most laptops)
        return run_pipeline(cls.lesson, root, students=("correct",), env=profile_variables("avx2", root))

    def test_solutions_get_full_marks_on_an_avx2_cpu(self, graded) -> None:
        assert _autograded(graded["scores"]["correct"]) == _expected(graded["lesson"], set())

    def test_the_simulated_cpu_reached_the_kernel(self, graded) -> None:
        """Where the lesson runs the low-precision gate, its output says this CPU emulates bfloat16."""
        import platform

        lesson = graded["lesson"]
        if "native_formats" not in solution_path(lesson).read_text(encoding="utf-8"):
            pytest.skip(f"{lesson} does not run the gate")
        if platform.machine() not in ("x86_64", "AMD64"):
            pytest.skip("the AVX2 profile simulates an x86 CPU")
        graded_text = (graded["root"] / "autograded" / "correct" / lesson / f"{lesson}.ipynb").read_text("utf-8")
        assert "this CPU emulates bfloat16" in graded_text


for _lesson in LOW_PRECISION_LESSONS:  # TestGradingAvx2_12_mixed_precision, ...
    globals()[f"TestGradingAvx2_{_lesson}"] = type(f"TestGradingAvx2_{_lesson}", (GradingOnAnAvx2Cpu,),
                                                   {"lesson": _lesson})
