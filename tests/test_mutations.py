"""Mutation testing of every exercise: the wrong answers of tests/wrong_answers/ and what the run checks.

The run itself happens inside nbval's execution of each solution notebook (tests/lesson_notebooks.py): after each
exercise's test cell, every wrong answer of that exercise replaces the model answer and the test cell must fail;
then the model answer is put back and the test cell must pass at least three times in a row (five where it is quick); at the notebook's end, every line
and branch of every model answer must have run. Run one lesson's: `pytest solutions/02_roofline -n 0`. This file
checks the wrong answers themselves, and the harness's failure reports, without executing a lesson.
"""

from __future__ import annotations

import time

import pytest

from lesson_notebooks import KernelDied, LessonKernel, run_code
from notebook_utils import LESSONS, ROOT, WRONG_KINDS, exercises, wrong_answer_sets

from gpucourse import syllabus


def test_every_exercise_has_the_four_kinds_of_wrong_answer() -> None:
    """A constant, a call to the course's helper, one right only on the visible input, and the typical mistake."""
    missing = [f"{lesson}/{e.solution_id}: {sorted(set(WRONG_KINDS) - set(wrong_answer_sets(lesson).get(e.solution_id, {})))}"
               for lesson in LESSONS for e in exercises(lesson)
               if not set(WRONG_KINDS) <= set(wrong_answer_sets(lesson).get(e.solution_id, {}))]
    assert not missing, "exercises without the four kinds of wrong answer:\n" + "\n".join(missing)


def test_every_wrong_answer_names_an_exercise_of_its_lesson() -> None:
    """A wrong answer filed under a grade_id the lesson does not have would never be tried."""
    unknown = [f"{lesson}: {solution_id}" for lesson in LESSONS for solution_id in wrong_answer_sets(lesson)
               if solution_id not in {e.solution_id for e in exercises(lesson)}]
    assert not unknown, f"wrong answers for exercises that do not exist: {unknown}"


def test_nbval_cells_run_under_the_course_cell_limit(request) -> None:
    """nbval's own default is 2,000 s a cell: a hung or dead kernel must not hold CI that long."""
    assert int(request.config.option.nbval_cell_timeout) == syllabus.CELL_TIMEOUT_S


@pytest.mark.slow
def test_a_kernel_that_dies_is_reported_in_seconds_with_its_signal() -> None:
    """A crash in native code (here a SIGSEGV the kernel sends itself) fails the cell at once, naming the signal."""
    import os

    kernel = LessonKernel(str(ROOT), dict(os.environ), startup_timeout=60)
    try:
        assert run_code(kernel, "print('alive')").error is None
        started = time.monotonic()
        with pytest.raises(KernelDied, match="SIGSEGV"):
            run_code(kernel, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)")
        assert time.monotonic() - started < 30  # seconds, not nbval's 2,000 s (a loaded CI machine is slow)
    finally:
        if kernel.is_alive():
            kernel.stop()


@pytest.mark.slow
def test_run_code_reports_errors_and_stderr_as_nbgrader_scores_them() -> None:
    """An exception or any text on stderr fails a cell (nbgrader gives such a test cell 0 points)."""
    import os

    kernel = LessonKernel(str(ROOT), dict(os.environ), startup_timeout=60)
    try:
        assert run_code(kernel, "x = 1").failed is False
        raised = run_code(kernel, "raise ValueError('no')")
        assert raised.error == "ValueError" and raised.failed
        noisy = run_code(kernel, "import sys\nprint('careful', file=sys.stderr)")
        assert noisy.error is None and noisy.failed and "careful" in noisy.stderr
        slow = run_code(kernel, "import time\ntime.sleep(30)", timeout=1)
        assert slow.error == "CellTimeout"
        assert run_code(kernel, "print(x)").error is None  # interrupted, the kernel goes on
    finally:
        kernel.stop()


@pytest.mark.slow
def test_an_error_swallowed_by_a_custom_exception_handler_still_fails() -> None:
    """nbgrader scores a cell whose reply is an error as failed even if no error output was shown: so does run_code."""
    import os

    kernel = LessonKernel(str(ROOT), dict(os.environ), startup_timeout=60)
    try:
        run_code(kernel, "get_ipython().set_custom_exc((Exception,), lambda *args, **kwargs: None)")
        swallowed = run_code(kernel, "raise AssertionError('wrong')")
        assert swallowed.failed and swallowed.error == "AssertionError"
    finally:
        kernel.stop()
