"""nbval's run of every solution notebook, with the mutation and coverage checks in the same kernel.

nbval executes each notebook in `solutions/` top to bottom, one pytest item per code cell (the mission's way of
running every lesson). This plugin gives that run three more kinds of item, run in the same kernel, so that no
notebook is executed twice for the same purpose:

- after each exercise's test cell: every wrong answer of that exercise (`tests/wrong_answers/`) is run in place of
  the model answer, then the test cell, which must fail (an error, or output on stderr: nbgrader scores either 0),
  by a check rather than a crash; then the model answer is put back;
- the test cell again: with nbval's own run it must pass at least three times in a row (five where its runs are
  quick), silent on stderr;
- at the notebook's end: the branch coverage of every model answer (except a ``%%writefile`` script) (coverage.py in the kernel and in the worker
  processes it starts; each model-answer cell is compiled under a file name of its own), which must be 100%.

Every cell must also leave stderr empty. A kernel that dies is reported in seconds, naming the notebook and the
cell; every cell runs under the course's one per-cell limit (syllabus.CELL_TIMEOUT_S).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from queue import Empty

import pytest
from nbval.kernel import CURRENT_ENV_KERNEL_NAME, RunningKernel, start_new_kernel
from nbval.plugin import IPyNbCell, IPyNbFile

from gpucourse import syllabus
from notebook_utils import (PARTIAL_CREDIT, PARTIAL_CREDIT_PROBE, ROOT, TAMPERING_PREFIX, nbgrader, source,
                            wrong_answer_sets)

SOLUTION_RUNS = 5  # consecutive passing runs of each test cell with the model answer in place, at most
REPEATS_AT_LEAST = 2  # runs after nbval's, however slow the test cell (a torchrun job, a kernel in the tracer)
REPEAT_BUDGET_S = 10.0  # further runs, up to SOLUTION_RUNS in all, while the repeats so far took less than this
TAMPERING_WITHOUT_REPLACING = ("tamper_reference", "tamper_names", "tamper_instance")
"""Tampering kinds that replace none of the course's code (they read or pre-fill notebook names, or patch an object
the answer was handed): they fail by the checks; every other tamper_ kind must fail with GradingCodeReplaced."""
CAUGHT_BY_THE_CHECKS = {("15_sharding", "ex1", "tamper_during_test"):
                        "the answer runs in gloo worker processes; what it rebinds there, the checks catch",
                        ("15_sharding", "ex2", "tamper_during_test"):
                        "the answer runs in gloo worker processes; what it rebinds there, the checks catch"}
"""(lesson, exercise, kind): why that tampering fails by a check, not by the referee's sentence."""
CRASHES = ("NameError", "SyntaxError", "IndentationError")  # a wrong answer must be caught by a check, not these
POLL_S = 1.0  # how often a waiting cell checks that its kernel is still alive


class KernelDied(RuntimeError):
    """The notebook's kernel process ended while a cell ran (a crash in native code, or killed for memory)."""


@dataclass
class Outcome:
    """What running one piece of code did: its error name (or None) and what it wrote to stderr."""

    error: str | None
    stderr: str

    @property
    def failed(self) -> bool:
        """True where nbgrader would give the cell 0 points."""
        return self.error is not None or bool(self.stderr.strip())

    def describe(self) -> str:
        """The outcome in one line, for a failure message."""
        return f"error={self.error!r}, stderr={self.stderr.strip()[:300]!r}"


class LessonKernel(RunningKernel):
    """nbval's kernel, started with an environment of our choosing, that notices at once when its process dies."""

    def __init__(self, cwd: str, env: dict[str, str], startup_timeout: float) -> None:  # noqa: D107
        self.km, self.kc = start_new_kernel(startup_timeout=startup_timeout, kernel_name=CURRENT_ENV_KERNEL_NAME,
                                            stderr=open(os.devnull, "w"), cwd=cwd, env=env)
        self._ensure_iopub_up()

    def death(self) -> str:
        """How the kernel process ended, in words (its exit code or signal)."""
        process = getattr(getattr(self.km, "provisioner", None), "process", None)
        code = process.poll() if process is not None else None
        if code is None:
            return "the kernel process is gone"
        if code < 0:
            try:
                return f"the kernel was killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"the kernel was killed by signal {-code}"
        return f"the kernel exited with code {code}"

    def reply(self, msg_id: str, timeout: float | None = None) -> dict:
        """The kernel's reply to a request, waited for in short slices: KernelDied within a second of its death."""
        deadline = None if timeout is None else time.monotonic() + float(timeout)
        while True:
            left = POLL_S if deadline is None else min(POLL_S, deadline - time.monotonic())
            if left <= 0:
                raise Empty
            try:
                msg = self.get_message(stream="shell", timeout=left)
            except Empty:
                if not self.km.is_alive():
                    raise KernelDied(self.death()) from None
                continue
            if msg["parent_header"].get("msg_id") == msg_id:
                return msg

    def await_reply(self, msg_id: str, timeout: float | None = None) -> None:
        """nbval's wait for a cell's reply, noticing a dead kernel at once."""
        self.reply(msg_id, timeout)


def run_code(kernel: LessonKernel, code: str, timeout: float = syllabus.CELL_TIMEOUT_S) -> Outcome:
    """Execute ``code`` in the kernel as nbgrader would a cell; return its error name and its stderr."""
    msg_id = kernel.execute_cell_input(code, allow_stdin=False)
    error, stderr = None, []
    try:
        reply = kernel.reply(msg_id, timeout=timeout)["content"]
        if reply["status"] == "error":  # nbgrader counts an error reply even where no error output was shown
            error = reply.get("ename") or "error"
    except Empty:
        kernel.interrupt()
        error = "CellTimeout"
    while True:
        try:
            msg = kernel.get_message("iopub", timeout=30)
        except Empty:
            if not kernel.is_alive():
                raise KernelDied(kernel.death()) from None
            raise RuntimeError("the kernel sent no output for 30 s after a cell (interrupted, still alive)") from None
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "status" and content["execution_state"] == "idle":
            return Outcome(error, "".join(stderr))
        if kind == "error" and error != "CellTimeout":
            error = content["ename"]
        elif kind == "stream" and content["name"] == "stderr":
            stderr.append(content["text"])


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

    def __init__(self, folder: Path) -> None:  # noqa: D107
        self.folder = folder
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

    def register(self, grade_id: str, code: str) -> str:
        """Code that makes the kernel compile ``code`` under a file of its own named for ``grade_id``; nothing for a
        ``%%writefile`` answer (a script that torchrun runs in fresh processes: its GPU branch cannot run on a CPU, so
        it is not measured; its hidden tests run it on two nodes)."""
        if code.startswith("%%writefile "):
            return "pass"
        path = self.folder / "cells" / f"{grade_id}.py"
        path.write_text(code, encoding="utf-8")
        self.cells[grade_id] = path
        return f"get_ipython()._gpucourse_cell_names[{code!r}] = {str(path)!r}"

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


class LessonNotebook(IPyNbFile):
    """A solution notebook: nbval's cells, each exercise's mutation items after its test cell, coverage at the end."""

    def setup(self) -> None:
        """Start the kernel with coverage asked for, and the hook that names model-answer cells."""
        self.scratch = Path(tempfile.mkdtemp(prefix=f"lesson-{self.path.stem}-"))
        self.coverage = AnswerCoverage(self.scratch / "answer-coverage")
        env = self.coverage.environment({**os.environ})
        self.kernel = LessonKernel(str(self.path.parent), env, self.config.option.nbval_kernel_startup_timeout)
        self.setup_sanitize_files()
        self.model_answers: dict[str, str] = {}
        outcome = run_code(self.kernel, self.coverage.naming_hook())
        assert not outcome.failed, f"the coverage naming hook failed: {outcome.describe()}"

    def teardown(self) -> None:
        """Stop the kernel and remove the scratch folder."""
        super().teardown()
        shutil.rmtree(getattr(self, "scratch", ""), ignore_errors=True)

    def collect(self):
        """nbval's items, with the mutation items after each exercise's test cell and the coverage item last."""
        lesson = self.path.stem
        wrong_sets = wrong_answer_sets(lesson)
        for cell in super().collect():
            item = LessonCell.from_parent(self, name=cell.name, cell_num=cell.cell_num, cell=cell.cell,
                                          options=cell.options)
            yield item
            meta = nbgrader(item.cell)
            if item.cell.cell_type == "code" and meta.get("grade") and not meta.get("solution"):
                exercise = meta["grade_id"].removesuffix("-tests")
                probe = (PARTIAL_CREDIT_PROBE.format(points=meta["points"])
                         if meta["grade_id"] in PARTIAL_CREDIT.get(lesson, ()) else None)
                yield WrongAnswers.from_parent(self, name=f"{exercise}: every wrong answer fails its tests",
                                               exercise=exercise, test_cell=source(item.cell),
                                               wrong=wrong_sets.get(f"{exercise}-solution", {}), probe=probe)
                yield Repeats.from_parent(self, name=f"{exercise}: the model answer passes again and again",
                                          exercise=exercise, test_cell=source(item.cell), probe=probe)
        yield AnswerCoverageItem.from_parent(self, name="every branch of every model answer runs under its tests")


class LessonCell(IPyNbCell):
    """nbval's cell, which also fails on stderr, names a dead kernel at once, and registers model answers."""

    def runtest(self) -> None:
        """Run the cell as nbval does; fail if it wrote to stderr or the kernel died under it."""
        kernel = self.parent.kernel
        if not kernel.is_alive():
            pytest.fail(f"{self.parent.path.name}, cell {self.cell_num}: not run, the kernel died earlier (the first "
                        "failure of this notebook says where)", pytrace=False)
        meta = nbgrader(self.cell)
        if meta.get("solution") and self.cell.cell_type == "code":
            code = source(self.cell)
            self.parent.model_answers[meta["grade_id"]] = code
            registered = run_code(kernel, self.parent.coverage.register(meta["grade_id"], code))
            assert not registered.failed, f"could not name {meta['grade_id']} for coverage: {registered.describe()}"
        died = None
        try:
            super().runtest()
        except KernelDied as error:
            died = error
        if died is not None:
            pytest.fail(f"{self.parent.path.name}, cell {self.cell_num}: {died} while this cell ran (a crash in "
                        f"native code, or out of memory); the cells after it cannot run.", pytrace=False)
        stderr = "".join(o.get("text", "") for o in self.test_outputs if o.get("name") == "stderr")
        if stderr.strip():
            pytest.fail(f"{self.parent.path.name}, cell {self.cell_num} wrote to stderr (nbgrader scores a test cell "
                        f"that does 0): {stderr.strip()[:500]}", pytrace=False)
        if meta.get("grade_id") in PARTIAL_CREDIT.get(self.parent.path.stem, ()):  # the model answer: every point
            earned = run_code(kernel, PARTIAL_CREDIT_PROBE.format(points=meta["points"]))
            if earned.failed:
                pytest.fail(f"{self.parent.path.name}, cell {self.cell_num}: the model answer did not earn every "
                            f"point: {earned.describe()}", pytrace=False)


class KernelItem(pytest.Item):
    """An item that runs code in its notebook's kernel."""

    def _run(self, code: str) -> Outcome:
        """Run code in the notebook's kernel, failing the item in words if the kernel is dead or dies."""
        kernel = self.parent.kernel
        if kernel is None or not kernel.is_alive():
            pytest.fail(f"{self.parent.path.name}: {self.name!r} not run, the kernel died earlier (the first failure "
                        "of this notebook says where)", pytrace=False)
        try:
            return run_code(kernel, code)
        except KernelDied as error:
            died = error
        pytest.fail(f"{self.parent.path.name}, {self.name}: {died} (a crash in native code, or out of memory)",
                    pytrace=False)

    def reportinfo(self):
        return self.path, None, f"{self.path.name}::{self.name}"


class WrongAnswers(KernelItem):
    """Every wrong answer of one exercise, each followed by the exercise's test cell; then the model answer back."""

    def __init__(self, *, exercise: str, test_cell: str, wrong: dict[str, str], probe: str | None = None,
                 **kwargs) -> None:  # noqa: D107
        super().__init__(**kwargs)
        self.exercise, self.test_cell, self.wrong, self.probe = exercise, test_cell, wrong, probe

    def runtest(self) -> None:
        """Each wrong answer must make the test cell fail, by a check rather than a crash."""
        outcomes = {}
        for kind, wrong_source in self.wrong.items():
            self._run(wrong_source)
            outcomes[kind] = self._run(self.test_cell)
            if self.probe and not outcomes[kind].failed:  # partial credit: short of the points is a failure too
                outcomes[kind] = self._run(self.probe)
        solution_id = f"{self.exercise}-solution"
        model = self.parent.model_answers.get(solution_id)
        if model is None:
            pytest.fail(f"{self.exercise}: no model answer ran before its test cell (no cell {solution_id!r})",
                        pytrace=False)
        self._run(self.parent.coverage.register(solution_id, model))
        self._run(model)
        assert self.wrong, f"{self.exercise}: tests/wrong_answers/ has no wrong answer for {solution_id}"
        survivors = sorted(kind for kind, outcome in outcomes.items() if not outcome.failed)
        assert not survivors, f"{self.parent.path.stem}/{self.exercise}: wrong answers that pass its tests: {survivors}"
        crashes = sorted(f"{kind}: {outcome.describe()}" for kind, outcome in outcomes.items()
                         if outcome.error in CRASHES)
        assert not crashes, (f"{self.parent.path.stem}/{self.exercise}: wrong answers that crash instead of being "
                             f"checked: {crashes}")
        unnoticed = sorted(f"{kind}: {outcome.describe()}" for kind, outcome in outcomes.items()
                           if kind.startswith(TAMPERING_PREFIX) and kind not in TAMPERING_WITHOUT_REPLACING
                           and (self.parent.path.stem, self.exercise, kind) not in CAUGHT_BY_THE_CHECKS
                           and outcome.error != "GradingCodeReplaced")
        assert not unnoticed, (f"{self.parent.path.stem}/{self.exercise}: tampering the referee did not name (they "
                               f"failed for another reason): {unnoticed}")


class Repeats(KernelItem):
    """The test cell with the model answer in place, run again: nbval's run and these must all pass (no flaky test)."""

    def __init__(self, *, exercise: str, test_cell: str, probe: str | None = None, **kwargs) -> None:  # noqa: D107
        super().__init__(**kwargs)
        self.exercise, self.test_cell, self.probe = exercise, test_cell, probe

    def runtest(self) -> None:
        """More runs after nbval's, each without an error or stderr: REPEATS_AT_LEAST, then more while they are quick
        (SOLUTION_RUNS in all at most)."""
        failed, start, runs = [], time.monotonic(), 0
        while runs < SOLUTION_RUNS - 1 and (runs < REPEATS_AT_LEAST or time.monotonic() - start < REPEAT_BUDGET_S):
            outcome = self._run(self.test_cell)
            if self.probe and not outcome.failed:  # partial credit: the model answer earns every point, every run
                outcome = self._run(self.probe)
            runs += 1
            if outcome.failed:
                failed.append(outcome.describe())
        assert not failed, (f"{self.parent.path.stem}/{self.exercise}: the model answer failed its own tests in "
                            f"{len(failed)} of {runs} runs after the first: {failed}")


class AnswerCoverageItem(KernelItem):
    """A line or branch of a model answer that no test runs is a case no hidden test checks (COURSE.md §5)."""

    def runtest(self) -> None:
        """Save the kernel's measurements, then fail listing every model answer with code its tests never ran."""
        self._run(self.parent.coverage.save_in_kernel())
        uncovered = self.parent.coverage.uncovered()
        assert not uncovered, (f"{self.parent.path.stem}: model answers with code their tests never run:\n" +
                               "\n".join(f"  {k}: {v}" for k, v in uncovered.items()))


def is_solution_notebook(path: Path) -> bool:
    """True for a lesson's instructor notebook, solutions/NN_name/NN_name.ipynb."""
    try:
        relative = path.resolve().relative_to(ROOT / "solutions")
    except ValueError:
        return False
    return path.suffix == ".ipynb" and len(relative.parts) == 2 and relative.parts[0] == path.stem


@pytest.hookimpl(hookwrapper=True)
def pytest_collect_file(file_path: Path, parent):
    """Collect a solution notebook as a LessonNotebook instead of nbval's plain IPyNbFile."""
    outcome = yield
    if not is_solution_notebook(file_path):
        return
    collected = [node for node in outcome.get_result() if not isinstance(node, IPyNbFile)]
    if len(collected) < len(outcome.get_result()):
        collected.append(LessonNotebook.from_parent(parent, path=file_path))
        outcome.force_result(collected)


def pytest_configure(config: pytest.Config) -> None:
    """nbval's cells use the course's per-cell limit (nbval's default is 2,000 s)."""
    if str(getattr(config.option, "nbval_cell_timeout", "")) == "2000":
        config.option.nbval_cell_timeout = syllabus.CELL_TIMEOUT_S

