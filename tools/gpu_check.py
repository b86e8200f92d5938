"""The one GPU check: self-test, the sustained-load test (30 s of GEMMs watched through NVML), `pytest -m gpu`, every
solution notebook top to bottom, and the recorder; one report.

    python tools/gpu_check.py --report gpu-check.md             (what `make gpu-check` runs)
    python tools/gpu_check.py wheels --dest .whl                (here, with network: wheels to carry along)

It runs what the machine can run and lists what it could not: without Jupyter the notebooks run in IPython's
InteractiveShell, or, without IPython, as plain Python with a stand-in ``get_ipython``; without TensorFlow the
cells that need it are reported as not run, with the reason. Nothing here needs a network.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import importlib.util
import io
import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("selftest", "sustained", "pytest", "notebooks", "record")
RUNNERS = ("auto", "nbclient", "ipython", "exec")
BUDGET_S = 570.0
"""The whole check must end within 10 minutes on a current data-centre GPU: steps not started by then are listed."""

SUSTAINED_S = 30.0
"""Length of the sustained-load loop on a CUDA GPU (without one the loop runs its brief CPU default)."""

JUPYTER_STACK = ("nbclient", "nbformat", "ipykernel")
"""What the notebook runner needs on top of the GPU machine's image."""

CARRIED = (*JUPYTER_STACK, "nbval", "greenlet")
"""What `wheels` fetches, with its dependencies: the notebook runner's stack, nbval, which the tests' conftest
loads (tests/lesson_notebooks.py) before `pytest -m gpu` can collect anything, and greenlet (the kernel tracer)."""

ON_THE_GPU_IMAGE = {
    "attrs", "certifi", "charset-normalizer", "idna", "jinja2", "markupsafe", "packaging", "pip",
    "psutil", "pygments", "python-dateutil", "pyyaml", "requests", "setuptools", "six", "typing-extensions",
    "urllib3", "wheel", "numpy", "matplotlib", "tqdm", "py-cpuinfo", "scikit-learn", "pytest", "torch",
}
"""Packages the GPU machine's image already holds (/work/.library/device/KINDS.md): not carried as wheels."""


# --------------------------------------------------------------------------- results

@dataclass
class CellResult:
    """What one code cell did: PASS, FAIL, NOT RUN (with why) and anything it wrote to stderr."""

    index: int
    cell_id: str
    status: str
    seconds: float = 0.0
    stderr: str = ""
    error: str = ""
    reason: str = ""


@dataclass
class StepResult:
    """One step of the check: its status (PASS, FAIL, NOT RUN, PARTLY RUN), time, summary and output."""

    name: str
    status: str
    seconds: float
    summary: str
    output: str = ""
    details: list[dict] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


_MISSING = re.compile(r"No module named '([\w.]+)'")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def missing_module(error: str) -> str | None:
    """The top-level name of the module an error text says is not installed, or None."""
    found = _MISSING.search(error)
    return found.group(1).split(".")[0] if found else None


def _first_line(node: ast.stmt) -> int:
    """First line of a top-level statement, decorators included."""
    return min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])


def _segment(source: str, lines: list[str], node: ast.stmt, previous_end: int) -> str:
    """Source of one top-level statement: whole lines with its decorators, or the exact span if it shares a line."""
    first = _first_line(node)
    if first > previous_end and node.col_offset == 0:
        return "\n".join(lines[first - 1: node.end_lineno])
    return ast.get_source_segment(source, node) or ""


def statements_after(source: str, line: int | None) -> list[str]:
    """Source of each top-level statement after the one holding ``line`` (all of them for None; none if unparsable)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    ends = [0] + [node.end_lineno or node.lineno for node in tree.body]
    pieces = [(node, _segment(source, lines, node, ends[i])) for i, node in enumerate(tree.body)]
    if line is None:
        return [piece for _, piece in pieces]
    holding = [node for node in tree.body if _first_line(node) <= line <= (node.end_lineno or node.lineno)]
    if not holding:
        return []
    return [piece for node, piece in pieces if _first_line(node) > holding[0].end_lineno]


@dataclass
class Outcome:
    """What running one piece of source did: its error ('Type: message', '' if none), stderr, and failing line."""

    error: str = ""
    stderr: str = ""
    line: int | None = None


def _error_text(error: BaseException) -> str:
    """'Type: message' of an exception, as Jupyter reports it."""
    return f"{type(error).__name__}: {error}"


def _cell_line(tb, filename: str | None = None) -> int | None:
    """Line of the cell's own frame in a traceback: the first frame outside IPython and this file."""
    for frame in traceback.extract_tb(tb):
        if filename is not None and frame.filename != filename:
            continue
        if filename is None and ("IPython" in frame.filename or frame.filename == __file__):
            continue
        return frame.lineno
    return None


@contextlib.contextmanager
def captured_stderr():
    """Capture what a cell writes to stderr, from Python (sys.stderr) and from C libraries (file descriptor 2)."""
    sys.stderr.flush()
    saved = os.dup(2)
    python_level = io.StringIO()
    box = {"text": ""}
    with tempfile.TemporaryFile(mode="w+b") as fd_level:
        os.dup2(fd_level.fileno(), 2)
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(python_level):
                yield box
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            fd_level.seek(0)
            box["text"] = python_level.getvalue() + fd_level.read().decode("utf-8", "replace")


class ExecRunner:
    """Plain Python: each cell exec'd in one namespace, with a stand-in ``get_ipython``."""

    name = "exec"

    def __init__(self) -> None:
        self.namespace = {"__name__": "__main__", "get_ipython": StandInShell}

    def transform(self, source: str) -> str:
        """Magics made plain Python, line for line."""
        return _plain_source(source)

    def run(self, source: str) -> Outcome:
        """Exec one piece of source, capturing stderr and the error."""
        failure = None
        with captured_stderr() as err:
            try:
                exec(compile(self.transform(source), "<cell>", "exec"), self.namespace)
            except Exception as error:  # a failing cell is reported; the notebook carries on
                failure = error
        if failure is None:
            return Outcome("", err["text"])
        return Outcome(_error_text(failure), err["text"], _cell_line(failure.__traceback__, "<cell>"))


class IPythonRunner:
    """IPython's InteractiveShell in this process: magics work, no Jupyter kernel needed."""

    name = "ipython"

    def __init__(self) -> None:
        from IPython.core.inputtransformer2 import TransformerManager
        from IPython.core.interactiveshell import InteractiveShell

        self.shell = InteractiveShell.instance()
        # a bare InteractiveShell has no GUI loop for %matplotlib; figures go to the Agg backend (MPLBACKEND) anyway
        self.shell.register_magic_function(lambda line: None, "line", "matplotlib")
        self.transform = TransformerManager().transform_cell

    def run(self, source: str) -> Outcome:
        """Run one piece of source as a cell, capturing stderr and the error."""
        with captured_stderr() as err:
            outcome = self.shell.run_cell(source, store_history=True)
        failure = outcome.error_before_exec or outcome.error_in_exec
        if failure is None:
            return Outcome("", err["text"])
        return Outcome(_error_text(failure), err["text"], _cell_line(failure.__traceback__))


class KernelRunner:
    """A Jupyter kernel driven by nbclient, one cell (or statement) at a time."""

    name = "nbclient"

    def __init__(self, client) -> None:
        from IPython.core.inputtransformer2 import TransformerManager

        self.client = client
        self.transform = TransformerManager().transform_cell

    def run(self, source: str) -> Outcome:
        """Execute one piece of source in the kernel; read stderr and the error from its outputs."""
        import nbformat

        cell = nbformat.v4.new_code_cell(source)
        self.client.nb.cells.append(cell)  # kept: a later display update (display_id) may rewrite its outputs
        self.client.execute_cell(cell, len(self.client.nb.cells) - 1)
        stderr = "".join(o.get("text", "") for o in cell.outputs
                         if o.get("output_type") == "stream" and o.get("name") == "stderr")
        errors = [o for o in cell.outputs if o.get("output_type") == "error"]
        if not errors:
            return Outcome("", stderr)
        text = _ANSI.sub("", "\n".join(errors[0].get("traceback", [])))
        line = re.search(r"Cell In\[\d+\], line (\d+)", text) or re.search(r"<module>\n.*?(\d+)", text)
        return Outcome(f"{errors[0]['ename']}: {errors[0]['evalue']}", stderr, int(line.group(1)) if line else None)


# --------------------------------------------------------------------------- notebook runners

def code_cells(path: Path) -> list[dict]:
    """The code cells of a notebook, read as plain JSON (no nbformat needed)."""
    notebook = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(notebook, dict) or "cells" not in notebook:
        raise ValueError(f"path {str(path)!r} is not a Jupyter notebook (no 'cells')")
    cells = []
    for cell in notebook["cells"]:
        if cell.get("cell_type") == "code":
            source = cell.get("source", "")
            cells.append({"id": cell.get("id", ""), "source": "".join(source) if isinstance(source, list) else source})
    return cells


def pick_runner(requested: str = "auto") -> str:
    """The best runner available: nbclient with ipykernel, else IPython's InteractiveShell, else plain exec."""
    if requested not in RUNNERS:
        raise ValueError(f"runner must be one of {list(RUNNERS)}, got {requested!r}")
    if requested != "auto":
        return requested
    if all(importlib.util.find_spec(name) for name in JUPYTER_STACK):
        return "nbclient"
    if importlib.util.find_spec("IPython"):
        return "ipython"
    return "exec"


class StandInShell:
    """What plain exec offers for ``get_ipython()``: %matplotlib is a no-op; every other magic is refused."""

    def run_line_magic(self, name: str, line: str = "") -> None:
        """Accept %matplotlib (figures go to the Agg backend anyway); refuse anything else by name."""
        if name != "matplotlib":
            raise RuntimeError(f"magic %{name} needs IPython, which is not installed here")

    def system(self, command: str) -> None:
        """Shell escapes (!cmd) need IPython."""
        raise RuntimeError(f"shell escape !{command} needs IPython, which is not installed here")


def _plain_source(source: str) -> str:
    """Cell source for plain exec: '%matplotlib ...' lines become comments; other magics become calls that fail."""
    lines = []
    for line in source.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("%matplotlib"):
            line = line.replace("%matplotlib", "# %matplotlib", 1)
        elif stripped.startswith(("%", "!")):
            indent = line[: len(line) - len(stripped)]
            line = f"{indent}get_ipython().run_line_magic({stripped.lstrip('%!').split()[0]!r}, '')"
        lines.append(line)
    return "\n".join(lines)


def names_bound_and_read(source: str) -> tuple[set[str], set[str]]:
    """Names a piece of source binds at its top level, and names it reads while it runs (not inside the bodies of
    the functions and classes it defines, which read them only when called). Nothing for unparsable source."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    bound: set[str] = set()
    read: set[str] = set()

    def walk(node: ast.AST, top: bool) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if top:
                bound.add(node.name)
            evaluated_now = list(node.decorator_list)  # decorators and default values run when it is defined
            if not isinstance(node, ast.ClassDef):
                evaluated_now += node.args.defaults + [d for d in node.args.kw_defaults if d is not None]
            for child in evaluated_now:
                walk(child, False)
            return
        if isinstance(node, ast.Lambda):
            return
        if isinstance(node, ast.Name):
            (bound if isinstance(node.ctx, ast.Store) else read).add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        for child in ast.iter_child_nodes(node):
            walk(child, top and not isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)))

    for statement in tree.body:
        walk(statement, True)
    return bound, read


def run_cells(cells: list[dict], runner) -> list[CellResult]:
    """Run the cells in order. A cell stopped by a missing package (or by a name such a cell failed to define)
    goes on statement by statement after the failing one, skipping what needs the package: the rest still runs.
    The names a skipped statement would have set stay unavailable: a later statement that reads one is skipped too,
    even where an earlier cell left a value under the same name (it would run on the wrong object)."""
    missing: list[str] = []
    unavailable: set[str] = set()
    results = []
    for index, cell in enumerate(cells):
        start = time.perf_counter()
        source = runner.transform(cell["source"])
        reads_unavailable = sorted(names_bound_and_read(source)[1] & unavailable)
        if reads_unavailable:  # statement by statement from the first: a stale value may sit under such a name
            outcome = Outcome(f"NameError: the cell reads {', '.join(reads_unavailable)}, which a statement that could "
                              "not run would have set")
            later = statements_after(source, None)
        else:
            outcome = runner.run(cell["source"])
            later = None
        stderr, status, error, reason = outcome.stderr, ("FAIL" if outcome.error else "PASS"), outcome.error, ""
        module = missing_module(outcome.error)
        if module or (missing and outcome.error.startswith("NameError")):
            missing += [module] if module else []
            first_reason = (f"needs {module}, which is not installed here" if module else
                            f"depends on an earlier cell that could not run (needs {', '.join(sorted(set(missing)))})")
            ran = skipped = 0
            error = ""
            if later is None:
                later = statements_after(source, outcome.line) if outcome.line else []
                unavailable |= names_bound_and_read(_statement_at(source, outcome.line))[0]
            else:
                skipped -= 1  # the first statement that reads an unavailable name is the cell's reason, not "more"
            for statement in later:
                bound, read = names_bound_and_read(statement)
                if read & unavailable:
                    unavailable |= bound
                    skipped += 1
                    continue
                piece = runner.run(statement)
                stderr += piece.stderr
                piece_module = missing_module(piece.error)
                if piece_module or (piece.error.startswith("NameError") and missing):
                    missing += [piece_module] if piece_module else []
                    unavailable |= bound
                    skipped += 1
                elif piece.error:
                    error = piece.error
                    break
                else:
                    ran += 1
            status = "FAIL" if error else ("PARTLY RUN" if ran else "NOT RUN")
            error = error or outcome.error
            reason = first_reason + (f"; the {ran} statement(s) after it that do not need it ran" if ran else "")
            reason += f" ({skipped} more skipped)" if skipped > 0 else ""
        results.append(CellResult(index, cell["id"], status, time.perf_counter() - start, stderr, error, reason))
    return results


def _statement_at(source: str, line: int | None) -> str:
    """The source of the top-level statement holding ``line`` ('' if none or unparsable)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ""
    for node in tree.body:
        if line is not None and _first_line(node) <= line <= (node.end_lineno or node.lineno):
            return ast.get_source_segment(source, node) or ""
    return ""


def run_notebook(path: Path, runner: str = "auto", cell_timeout_s: int = 300) -> list[CellResult]:
    """Execute one notebook top to bottom with the best (or the named) runner, in the notebook's folder."""
    runner = pick_runner(runner)
    cells = code_cells(path)
    if runner == "nbclient":
        import nbformat
        from nbclient import NotebookClient

        client = NotebookClient(nbformat.v4.new_notebook(), timeout=cell_timeout_s, kernel_name="python3",
                                allow_errors=True,
                                resources={"metadata": {"path": str(path.parent)}})
        with client.setup_kernel():
            return run_cells(cells, KernelRunner(client))
    before = os.getcwd()
    os.chdir(path.parent)
    try:
        return run_cells(cells, IPythonRunner() if runner == "ipython" else ExecRunner())
    finally:
        os.chdir(before)


def _notebook_in_subprocess(path: Path, runner: str, timeout_s: float, env: dict) -> tuple[list[CellResult], str]:
    """Run one notebook in a fresh Python process (its state and any crash stay there); return cells and a note."""
    command = [sys.executable, str(Path(__file__).resolve()), "run-notebook", str(path), "--runner", runner]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return [], f"stopped after {timeout_s:.0f} s"
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        return [], f"the runner failed (exit {done.returncode}): {done.stderr.strip()[-600:]}"
    return [CellResult(**cell) for cell in json.loads(lines[-1])], ""  # the cells' own stderr is in each cell


# --------------------------------------------------------------------------- the steps

def _env() -> dict:
    """Environment of every child: the checkout's package first, no download attempts, the Agg plot backend."""
    env = os.environ.copy()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT / "src"), env.get("PYTHONPATH")) if p)
    env.setdefault("GPUCOURSE_OFFLINE", "1")
    env.setdefault("MPLBACKEND", "Agg")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _command_step(name: str, command: list[str], timeout_s: float, summarise) -> StepResult:
    """Run one command as a step; its exit status and output decide PASS or FAIL."""
    start = time.perf_counter()
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=_env(), cwd=ROOT)
    except subprocess.TimeoutExpired as expired:
        output = (expired.stdout or b"").decode() if isinstance(expired.stdout, bytes) else (expired.stdout or "")
        return StepResult(name, "FAIL", time.perf_counter() - start, f"stopped after {timeout_s:.0f} s", output)
    output = done.stdout + (f"\n[stderr]\n{done.stderr}" if done.stderr.strip() else "")
    status = "PASS" if done.returncode == 0 else "FAIL"
    return StepResult(name, status, time.perf_counter() - start, summarise(done), output)


def step_selftest(options: argparse.Namespace, timeout_s: float) -> StepResult:
    """`python -m gpucourse selftest`."""
    def summarise(done) -> str:
        counts = {word: done.stdout.count(f"[{word}]") for word in ("PASS", "FAIL", "SKIP")}
        return ", ".join(f"{n} {word}" for word, n in counts.items()) + f" (exit {done.returncode})"

    return _command_step("selftest", [sys.executable, "-m", "gpucourse", "selftest"], timeout_s, summarise)


def _cuda_visible() -> bool:
    """True if torch is installed and sees a CUDA GPU."""
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def step_sustained(options: argparse.Namespace, timeout_s: float) -> StepResult:
    """`python -m gpucourse.sustained`: burst vs sustained TFLOP/s, SM clock, power and the reason; JSON and a plot
    beside the report."""
    if importlib.util.find_spec("torch") is None:
        return StepResult("sustained", "NOT RUN", 0.0, "needs torch, which is not installed here")
    report = Path(options.report)
    output, figure = report.with_name("gpucourse-sustained.json"), report.with_name("gpucourse-sustained.png")
    seconds = options.sustained_s if options.sustained_s is not None else (SUSTAINED_S if _cuda_visible() else None)
    command = [sys.executable, "-m", "gpucourse.sustained", "--output", str(output), "--plot", str(figure)]
    command += ["--seconds", str(seconds)] if seconds is not None else []
    with contextlib.suppress(OSError):
        output.unlink()

    def summarise(done) -> str:
        try:
            data = json.loads(output.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return f"no result written (exit {done.returncode})"
        return sustained_summary(data)

    result = _command_step("sustained", command, min(timeout_s, (seconds or 10.0) + 180.0), summarise)
    result.output += f"\nresult: {output.name}, plot: {figure.name} (beside this report)"
    return result


def sustained_summary(data: dict) -> str:
    """One line from the sustained-load JSON: device, burst, sustained, the fall and its reason."""
    line = (f"{data['name']} ({data['device']}), {data['n']}x{data['n']} {data['dtype']}: burst "
            f"{data['burst_tflops']:.3g} TFLOP/s, sustained {data['sustained_tflops']:.3g} TFLOP/s "
            f"({max(data['drop'], 0.0):.0%} lower)")
    return line + (f"; why: {data['reason']}" if data["reason"] else "")


def gpu_test_files() -> list[str]:
    """Test files holding @pytest.mark.gpu tests (collecting only these spares modules that need Jupyter)."""
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py")
                  if "pytest.mark.gpu" in p.read_text(encoding="utf-8"))


def step_pytest(options: argparse.Namespace, timeout_s: float) -> StepResult:
    """`pytest -m gpu` over the files with GPU tests (pyproject's nbval options dropped: nbval may be absent)."""
    if importlib.util.find_spec("pytest") is None:
        return StepResult("pytest", "NOT RUN", 0.0, "pytest is not installed here")
    if importlib.util.find_spec("nbval") is None:
        return StepResult("pytest", "NOT RUN", 0.0, "nbval is not installed here (the tests' conftest loads it): "
                                                    "carry it as wheels, `python tools/gpu_check.py wheels`")

    def summarise(done) -> str:
        tail = [line for line in done.stdout.splitlines() if re.search(r"\d+ (passed|failed|skipped|error)", line)]
        return (tail[-1].strip("= ") if tail else "no summary line") + f" (exit {done.returncode})"

    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-o", "addopts=", "-p", "no:cacheprovider", "-q",
               "-rs", "--continue-on-collection-errors", *gpu_test_files()]
    return _command_step("pytest", command, timeout_s, summarise)


def solution_notebooks() -> list[Path]:
    """Every solution notebook, in lesson order."""
    return sorted((ROOT / "solutions").glob("*/*.ipynb"))


def step_notebooks(options: argparse.Namespace, timeout_s: float) -> StepResult:
    """Every solution notebook top to bottom, each in its own process; stderr and errors reported per cell."""
    runner = pick_runner(options.runner)
    start = time.perf_counter()
    details, failed, not_run, noisy = [], 0, 0, 0
    for path in options.notebooks or solution_notebooks():
        left = timeout_s - (time.perf_counter() - start)
        name = Path(path).stem
        if left < 10:
            details.append({"notebook": name, "status": "NOT RUN", "note": "the time budget was spent", "cells": []})
            not_run += 1
            continue
        began = time.perf_counter()
        cells, note = _notebook_in_subprocess(Path(path), runner, left, _env())
        statuses = {cell.status for cell in cells}
        if not cells:
            status = "FAIL"
        elif "FAIL" in statuses or any(cell.stderr.strip() for cell in cells):
            status = "FAIL"
        elif statuses & {"NOT RUN", "PARTLY RUN"}:
            status = "PARTLY RUN"
        else:
            status = "PASS"
        failed += status == "FAIL"
        not_run += status == "PARTLY RUN"
        noisy += any(cell.stderr.strip() for cell in cells)
        details.append({"notebook": name, "status": status, "seconds": time.perf_counter() - began, "note": note,
                        "cells": [asdict(cell) for cell in cells]})
    status = "FAIL" if failed else ("PARTLY RUN" if not_run else "PASS")
    summary = (f"{len(details)} notebooks with the {runner} runner: {len(details) - failed - not_run} passed, "
               f"{failed} failed ({noisy} wrote to stderr), {not_run} partly run")
    return StepResult("notebooks", status, time.perf_counter() - start, summary, details=details)


def step_record(options: argparse.Namespace, timeout_s: float) -> StepResult:
    """`python -m gpucourse record` into the report's folder (copy it to src/gpucourse/reference/ to ship it)."""
    output = Path(options.record_output or Path(options.report).with_name("gpucourse-record.json"))
    command = [sys.executable, "-m", "gpucourse", "record", "--output", str(output), "--force"]
    if options.quick:
        command.append("--quick")

    def summarise(done) -> str:
        last = done.stdout.strip().splitlines()[-1:] or [done.stderr.strip()[-200:]]
        return f"{last[0]} (exit {done.returncode})"

    result = _command_step("record", command, timeout_s, summarise)
    with contextlib.suppress(OSError, ValueError):
        written = json.loads(output.read_text(encoding="utf-8"))
        result.skipped = {**written.get("skipped", {}), **written.get("errors", {})}
    return result


STEP_FUNCTIONS = {"selftest": step_selftest, "sustained": step_sustained, "pytest": step_pytest,
                  "notebooks": step_notebooks, "record": step_record}


# --------------------------------------------------------------------------- environment and report

def environment() -> dict:
    """Python, the GPU torch sees, and which of the packages the check uses are installed."""
    packages = {name: importlib.util.find_spec(name) is not None
                for name in ("torch", "numba", "tensorflow", "keras", "pytest", "nbclient", "ipykernel", "IPython",
                             "nbformat", "pynvml", "sklearn")}
    gpu = "none visible"
    if packages["torch"]:
        import torch

        if torch.cuda.is_available():
            gpu = f"{torch.cuda.get_device_name(0)} (torch {torch.__version__}, CUDA {torch.version.cuda})"
    return {"python": platform.python_version(), "platform": f"{platform.system()} {platform.machine()}",
            "gpu": gpu, "packages": packages,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")}


def could_not_run(env: dict, steps: list[StepResult]) -> list[str]:
    """Everything the check could not run here, each with its reason."""
    items = []
    if env["gpu"] == "none visible":
        items.append("GPU paths: no CUDA GPU is visible, so GPU tests and self-test steps were skipped")
    for step in steps:
        if step.status == "NOT RUN":
            items.append(f"step {step.name}: {step.summary}")
        if step.name == "pytest":
            items += [f"test {found}" for found in re.findall(r"^SKIPPED \[\d+\] (.+)$", step.output, re.MULTILINE)]
        for topic, reason in step.skipped.items():
            items.append(f"record, topic {topic}: {reason}")
        for notebook in step.details:
            if notebook["status"] == "NOT RUN":
                items.append(f"notebook {notebook['notebook']}: {notebook['note']}")
            reasons: dict[str, list[int]] = {}
            for cell in notebook["cells"]:
                if cell["status"] in ("NOT RUN", "PARTLY RUN"):
                    reasons.setdefault(cell["reason"], []).append(cell["index"])
            for reason, indices in reasons.items():
                items.append(f"notebook {notebook['notebook']}, code cells {indices}: {reason}")
    return items


def _clip(text: str, limit: int = 4000) -> str:
    """The end of a long text, marked as clipped."""
    return text if len(text) <= limit else "[... clipped ...]\n" + text[-limit:]


def render(env: dict, steps: list[StepResult], total_s: float) -> str:
    """The report as markdown: environment, one row per step, what could not run, then the details."""
    lines = ["# GPU check report", "",
             f"- date: {env['date']}", f"- GPU: {env['gpu']}", f"- Python {env['python']} on {env['platform']}",
             "- installed: " + ", ".join(n for n, ok in env["packages"].items() if ok),
             "- missing: " + (", ".join(n for n, ok in env["packages"].items() if not ok) or "none"),
             f"- total time: {total_s:.0f} s", "",
             "| step | status | seconds | summary |", "| --- | --- | --- | --- |"]
    lines += [f"| {s.name} | {s.status} | {s.seconds:.0f} | {s.summary} |" for s in steps]
    lines += ["", "## Could not run", ""]
    lines += [f"- {item}" for item in could_not_run(env, steps)] or ["- nothing: every step ran"]
    for step in steps:
        lines += ["", f"## {step.name}", ""]
        if step.output:
            lines += ["```", _clip(step.output.rstrip()), "```"]
        for notebook in step.details:
            lines.append(f"### {notebook['notebook']}: {notebook['status']}"
                         + (f" ({notebook['seconds']:.0f} s)" if "seconds" in notebook else ""))
            if notebook.get("note"):
                lines.append(f"note: {_clip(notebook['note'], 600)}")
            for cell in notebook["cells"]:
                if cell["status"] != "PASS" or cell["stderr"].strip():
                    what = cell["reason"] or cell["error"] or "passed, but wrote to stderr"
                    lines.append(f"- cell {cell['index']} ({cell['cell_id']}): {cell['status']}: {_clip(what, 600)}")
                    if cell["stderr"].strip():
                        lines += ["  ```", "  stderr: " + _clip(cell["stderr"].strip(), 800), "  ```"]
            lines.append("")
    return "\n".join(lines) + "\n"


def check(options: argparse.Namespace) -> tuple[str, list[StepResult]]:
    """Run the chosen steps within the time budget; return the report and the step results."""
    started = time.perf_counter()
    env = environment()
    steps = []
    for name in options.steps:
        left = options.budget_s - (time.perf_counter() - started)
        if left < 5:
            steps.append(StepResult(name, "NOT RUN", 0.0, "the time budget was spent before this step"))
            continue
        print(f"[gpu-check] {name} ...", flush=True)
        steps.append(STEP_FUNCTIONS[name](options, left))
        print(f"[gpu-check] {name}: {steps[-1].status} - {steps[-1].summary}", flush=True)
    return render(env, steps, time.perf_counter() - started), steps


# --------------------------------------------------------------------------- carrying wheels

def _requirements(name: str) -> list[str]:
    """Names a package requires (extras and requirements whose markers fail for Python 3.12 on Linux left out)."""
    import importlib.metadata

    from packaging.requirements import Requirement

    environment_312 = {"python_version": "3.12", "python_full_version": "3.12.3", "sys_platform": "linux",
                       "platform_system": "Linux", "implementation_name": "cpython",
                       "platform_python_implementation": "CPython", "platform_machine": "x86_64",
                       "os_name": "posix", "extra": ""}
    names = []
    for text in importlib.metadata.requires(name) or []:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate(environment_312):
            names.append(requirement.name)
    return names


def _normalise(name: str) -> str:
    """PEP 503 form of a distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_list(roots: tuple[str, ...] = CARRIED) -> list[str]:
    """NAME==VERSION of ``roots`` and everything they need, at the versions installed here, less the GPU image's."""
    import importlib.metadata

    seen: dict[str, str] = {}
    todo = list(roots)
    while todo:
        name = _normalise(todo.pop())
        if name in seen or name in ON_THE_GPU_IMAGE:
            continue
        seen[name] = importlib.metadata.version(name)
        todo += _requirements(name)
    return sorted(f"{name}=={version}" for name, version in seen.items())


def download_command(requirements: list[str], dest: str) -> list[str]:
    """The pip download command that fetches manylinux wheels for CPython 3.12 on x86-64, without dependencies."""
    platforms = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
                 "manylinux1_x86_64"]
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--python-version", "3.12",
               "--implementation", "cp"]
    for name in platforms:
        command += ["--platform", name]
    return command + ["-d", dest, *requirements]


def wheels(dest: str, dry_run: bool) -> int:
    """Fetch the Jupyter execution stack as wheels into ``dest`` (run here, where pip can reach the registry)."""
    command = download_command(wheel_list(), dest)
    print(" ".join(command))
    if dry_run:
        return 0
    return subprocess.run(command).returncode


# --------------------------------------------------------------------------- command line

def parse(argv: list[str] | None) -> argparse.Namespace:
    """Parse the command line: the check (default), `run-notebook` (internal) or `wheels`."""
    parser = argparse.ArgumentParser(prog="python tools/gpu_check.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--report", default="gpu-check-report.md", help="where to write the markdown report")
    parser.add_argument("--steps", nargs="+", choices=STEPS, default=list(STEPS), help="which steps to run")
    parser.add_argument("--runner", choices=RUNNERS, default="auto", help="how notebooks run (default: the best here)")
    parser.add_argument("--notebooks", nargs="+", help="these notebooks instead of every solution notebook")
    parser.add_argument("--record-output", help="where the record goes (default: beside the report)")
    parser.add_argument("--quick", action="store_true", help="record with --quick (a test of the check itself)")
    parser.add_argument("--budget-s", type=float, default=BUDGET_S, help="time for the whole check")
    parser.add_argument("--sustained-s", type=float,
                        help=f"length of the sustained-load loop (default {SUSTAINED_S:.0f} s on a CUDA GPU, "
                        "its brief CPU run elsewhere)")
    sub = parser.add_subparsers(dest="command")
    one = sub.add_parser("run-notebook", help="(internal) run one notebook, print its cell results as JSON")
    one.add_argument("path")
    one.add_argument("--runner", choices=RUNNERS, default="auto")
    carry = sub.add_parser("wheels", help="download the Jupyter stack as wheels for a GPU machine without network")
    carry.add_argument("--dest", default=".whl")
    carry.add_argument("--dry-run", action="store_true", help="print the pip command, download nothing")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the check and write the report (exit 1 if a step failed), or one of the helper commands."""
    options = parse(argv)
    if options.command == "run-notebook":
        try:
            cells = run_notebook(Path(options.path).resolve(), options.runner)
        except Exception:  # the parent reports the runner's own failure with this traceback
            traceback.print_exc()
            return 1
        print(json.dumps([asdict(cell) for cell in cells]))
        return 0
    if options.command == "wheels":
        return wheels(options.dest, options.dry_run)
    report, steps = check(options)
    Path(options.report).write_text(report, encoding="utf-8")
    print(f"[gpu-check] report written to {options.report}")
    return 1 if any(step.status == "FAIL" for step in steps) else 0


if __name__ == "__main__":
    sys.exit(main())
