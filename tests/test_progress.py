"""Tests of gpucourse.progress: lines only for slow work, what runs and how far, stdout only, the thread stopped."""

from __future__ import annotations

import io
import subprocess
import sys
import threading
import time

import pytest

from gpucourse import progress


class FakeClock:
    """A clock the test moves: each tick reads the time it was set to."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _progress_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name.startswith("gpucourse.progress")]


def test_quick_work_prints_nothing(capsys):
    with progress.running("compiling the step", every_s=5.0):
        pass
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""
    assert not _progress_threads()


def test_slow_work_says_what_runs_how_long_and_when_done():
    clock, out = FakeClock(), io.StringIO()
    with progress.running("compiling the step", every_s=5.0, clock=clock, file=out) as run:
        clock.now += 5.0
        run.tick()  # what the background thread does every interval (called here, so the times are exact)
        clock.now += 5.0
        run.tick()
        clock.now += 2.3
    assert out.getvalue().splitlines() == ["compiling the step ... 5 s", "still compiling the step: 10 s",
                                           "compiling the step: done in 12.3 s"]


def test_the_background_thread_prints_to_stdout_while_the_work_runs(capsys):
    with progress.running("timing the loader", every_s=0.05):
        time.sleep(0.3)
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert captured.err == ""
    assert lines[0].startswith("timing the loader ... ") and lines[1].startswith("still timing the loader: ")
    assert lines[-1].startswith("timing the loader: done in ")
    assert not _progress_threads()


def test_steps_are_counted_in_the_lines_and_announced_once_the_work_is_slow():
    clock, out = FakeClock(), io.StringIO()
    with progress.running("timing the step variants", steps=3, unit="variant", every_s=5.0, clock=clock,
                          file=out) as run:
        run.step("eager")            # not slow yet: nothing printed
        clock.now += 6.0
        run.tick()
        run.step("torch.compile")    # slow: announced at once
        clock.now += 5.0
        run.tick()
        run.step()
    assert out.getvalue().splitlines() == [
        "timing the step variants ... 6 s, variant 1 of 3 (eager)",
        "variant 2 of 3: torch.compile",
        "still timing the step variants: 11 s, variant 2 of 3 (torch.compile)",
        "variant 3 of 3",
        "timing the step variants: done in 11.0 s"]


def test_too_many_steps_or_steps_without_a_count_are_refused():
    with progress.running("x", every_s=60) as run:
        with pytest.raises(ValueError, match="steps=N"):
            run.step("a")
    with progress.running("x", steps=1, every_s=60) as run:
        run.step("a")
        with pytest.raises(ValueError, match="all 1 steps have started"):
            run.step("b")
        with pytest.raises(TypeError, match="label must be a str"):
            run.step(3)


def test_the_thread_stops_when_the_work_raises(capsys):
    with pytest.raises(RuntimeError, match="boom"):
        with progress.running("compiling", every_s=0.02):
            time.sleep(0.1)
            raise RuntimeError("boom")
    assert not _progress_threads()
    out = capsys.readouterr().out
    assert "compiling ... " in out and "done in" not in out  # no "done" after a failure
    time.sleep(0.1)
    assert capsys.readouterr().out == ""  # and nothing more afterwards


@pytest.mark.parametrize(("kwargs", "error", "pattern"), [
    ({"what": ""}, ValueError, "^what must say what runs"),
    ({"what": 3}, TypeError, "^what must be a str"),
    ({"every_s": 0}, ValueError, "every_s"),
    ({"every_s": -1.0}, ValueError, "every_s"),
    ({"every_s": "5"}, TypeError, "every_s"),
    ({"every_s": float("inf")}, ValueError, "every_s"),
    ({"steps": 0}, ValueError, "steps"),
    ({"steps": 2.5}, TypeError, "steps"),
    ({"unit": ""}, ValueError, "^unit must say"),
    ({"clock": 3}, TypeError, "^clock must be a function"),
    ({"file": "out.txt"}, TypeError, "^file must be a text stream"),
])
def test_bad_arguments_are_refused_naming_the_argument(kwargs, error, pattern):
    arguments = {"what": "compiling", **kwargs}
    with pytest.raises(error, match=pattern):
        with progress.running(arguments.pop("what"), **arguments):
            pass
    assert not _progress_threads()


def test_lines_reach_a_jupyter_cell_while_it_runs():
    """In a real kernel (nbclient), the thread's lines arrive as stream output of the running cell, before it ends."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    source = ("import time\nfrom gpucourse import progress\n"
              "with progress.running('waiting', every_s=0.5):\n    time.sleep(1.8)\nprint('after')")
    book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    client = nbclient.NotebookClient(book, timeout=60, kernel_name="python3")
    client.execute()
    outputs = book.cells[0].outputs
    text = "".join(output.get("text", "") for output in outputs)
    assert all(output.output_type == "stream" and output.name == "stdout" for output in outputs)
    lines = text.splitlines()
    assert lines[0].startswith("waiting ... ") and lines[1].startswith("still waiting: ")
    assert lines[-2].startswith("waiting: done in ") and lines[-1] == "after"


def test_plain_python_prints_to_the_terminal():
    code = ("import time\nfrom gpucourse import progress\n"
            "with progress.running('waiting', every_s=0.05):\n    time.sleep(0.2)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stderr == "" and done.stdout.startswith("waiting ... ") and "waiting: done in" in done.stdout
