"""Shared helpers of the notebook, grading and consistency tests: read lessons and their exercises."""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import course  # noqa: E402  (tools/course.py: the one implementation of stamp/clean/release)
from gpucourse import syllabus  # noqa: E402

LESSONS = course.lessons()
LOW_PRECISION_LESSONS = syllabus.LOW_PRECISION_LESSONS

CPU_PROFILES = {"native": {},
                "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
                "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}}
"""CPU profiles: this machine as it is, an x86 CPU without native bfloat16 (most laptops) and one with AVX-512 but no
bfloat16 (many cloud Xeons), simulated by capping PyTorch's and oneDNN's instruction sets."""


def profile_variables(profile: str, cache_root: Path) -> dict[str, str]:
    """The environment variables of a run under ``profile``, with an Inductor cache folder of its own under
    ``cache_root``: kernels compiled for one instruction set must never be loaded under another (a cached AVX2
    kernel run on an AVX-512 machine killed the kernel: pytorch/pytorch#176279)."""
    if profile not in CPU_PROFILES:
        raise ValueError(f"profile must be one of {sorted(CPU_PROFILES)}, got {profile!r}")
    return {**CPU_PROFILES[profile], "TORCHINDUCTOR_CACHE_DIR": str(Path(cache_root) / f"inductor-{profile}")}

# Lessons built slim for now (COURSE.md section 11): later issues extend them to the full 3-5 exercises (none left).
SLIM_LESSONS: set[str] = set()
# v3 lessons with 2 exercises where one is large (COURSE.md section 2): 01 left occupancy to lesson 05; 02's fusion
# exercise is the large one; 16's tensor-parallel forward and backward is (its plan search went: a black-box
# argmin, issue 31); 15's ZeRO-2 optimizer is (its FSDP2 exercise is the second, issue 31).
TWO_EXERCISE_LESSONS: set[str] = {"01_architecture", "02_roofline", "12_mixed_precision", "15_sharding",
                                  "16_model_parallelism"}
# Test cells graded with nbgrader's partial credit (issue 31): the cell ends in the bare name ``tests``, bound by
# ``@run_now`` to the points the tests return, which nbgrader reads as the cell's score. Every other test cell must
# not end in a bare expression. A wrong answer fails such a cell by an error or by earning less than its points.
PARTIAL_CREDIT: dict[str, set[str]] = {"17_capstone": {"ex3-tests"}}
PARTIAL_CREDIT_PROBE = ("if tests != {points}:\n"
                        "    raise AssertionError(f'partial credit: {{tests}} of {points} points')\n")
"""Run after a partial-credit test cell: fails (as nbgrader's score would fall short) unless it earned every point."""
SOLUTION_REGION = re.compile(r"### BEGIN SOLUTION\n(.*?)### END SOLUTION", re.S)
HIDDEN_REGION = re.compile(r"### BEGIN HIDDEN TESTS\n(.*?)### END HIDDEN TESTS", re.S)


def solution_path(lesson: str) -> Path:
    """The instructor notebook of a lesson."""
    return ROOT / "solutions" / lesson / f"{lesson}.ipynb"


def release_path(lesson: str) -> Path:
    """The student notebook of a lesson."""
    return ROOT / "notebooks" / lesson / f"{lesson}.ipynb"


def load(path: Path) -> dict:
    """A notebook as plain JSON."""
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    """A cell's source as one string."""
    text = cell.get("source", "")
    return "".join(text) if isinstance(text, list) else text


def nbgrader(cell: dict) -> dict:
    """A cell's nbgrader metadata ({} if none)."""
    return cell.get("metadata", {}).get("nbgrader", {})


@dataclass(frozen=True)
class Exercise:
    """One autograded exercise: its solution cell, its test cell and its points."""

    name: str
    solution_id: str
    tests_id: str
    points: float


def exercises(lesson: str) -> list[Exercise]:
    """Autograded exercises of a lesson, in order, from the solution notebook's nbgrader metadata."""
    cells = load(solution_path(lesson))["cells"]
    found = []
    for cell in cells:
        meta = nbgrader(cell)
        if cell["cell_type"] == "code" and meta.get("grade") and not meta.get("solution"):
            name = meta["grade_id"].removesuffix("-tests")
            found.append(Exercise(name, f"{name}-solution", meta["grade_id"], float(meta["points"])))
    return found


def written_answers(lesson: str) -> dict[str, float]:
    """Manually graded cells of a lesson: grade_id -> points."""
    return {nbgrader(c)["grade_id"]: float(nbgrader(c)["points"]) for c in load(solution_path(lesson))["cells"]
            if nbgrader(c).get("grade") and nbgrader(c).get("solution")}


def cell_by_grade_id(notebook: dict, grade_id: str) -> dict:
    """The cell with this grade_id (KeyError naming it if absent)."""
    for cell in notebook["cells"]:
        if nbgrader(cell).get("grade_id") == grade_id:
            return cell
    raise KeyError(f"no cell with grade_id {grade_id!r}")


WRONG_KINDS = ("constant", "helper", "visible_only", "typical")  # every exercise has at least these four


TAMPERING_PREFIX = "tamper_"
"""Kinds of wrong answer that tamper with the course's grading code: they run only in a notebook's kernel (nbval's
run), where the referee heals what they replace; run in the test process, they would break the tests after them."""


def wrong_answer_sets(lesson: str, tampering: bool = True) -> dict[str, dict[str, str]]:
    """tests/wrong_answers/<lesson>.py's WRONG: solution grade_id -> {kind: source of a plausible wrong answer}.

    Kinds: 'constant' (returns a fixed value), 'helper' (calls the course's own helper), 'visible_only' (right only
    on the visible test's input), 'typical' (the lesson's typical mistake), plus any others. A plain string is
    read as {'typical': source} (the older one-per-exercise form).
    """
    path = ROOT / "tests" / "wrong_answers" / f"{lesson}.py"
    spec = importlib.util.spec_from_file_location(f"wrong_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {grade_id: {kind: text for kind, text in ({"typical": kinds} if isinstance(kinds, str) else kinds).items()
                       if tampering or not kind.startswith(TAMPERING_PREFIX)}
            for grade_id, kinds in module.WRONG.items()}


def right_answers(lesson: str) -> list[tuple[str, str, str]]:
    """(grade_id, name, source) of each correct alternative in tests/wrong_answers/<lesson>.py's RIGHT (none if absent):
    answers other than the model answer that the lesson's tests must accept."""
    path = ROOT / "tests" / "wrong_answers" / f"{lesson}.py"
    spec = importlib.util.spec_from_file_location(f"right_{lesson}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [(grade_id, name, text) for grade_id, kinds in getattr(module, "RIGHT", {}).items()
            for name, text in kinds.items()]


def wrong_answers(lesson: str) -> dict[str, str]:
    """One wrong answer per exercise (its 'typical' mistake), used in the full nbgrader pipeline."""
    return {grade_id: kinds["typical"] for grade_id, kinds in wrong_answer_sets(lesson).items()}


QUIET_CALLS = {"check", "check_raises", "print"}


def failure_of_test_cell(lesson: str, grade_id: str, answer: str) -> str | None:
    """Run ``lesson``'s test cell for the solution ``grade_id`` on ``answer`` (a solution cell's source), in this
    process after the lesson's imports cell; None if it passes, else the failed check's message."""
    import contextlib
    import io

    from gpucourse import checks

    cells = load(solution_path(lesson))["cells"]
    names: dict = {}
    exec(next(source(c) for c in cells if "# Lesson imports" in source(c)), names)
    import linecache

    filename = f"<answer {grade_id}>"  # registered as IPython registers a cell, so inspect.getsource reads it
    linecache.cache[filename] = (len(answer), None, answer.splitlines(keepends=True), filename)
    exec(compile(answer, filename, "exec"), names)
    guards_before = list(checks._ACTIVE_GUARDS)
    tests_id = grade_id.replace("-solution", "-tests")
    test_cell = cell_by_grade_id({"cells": cells}, tests_id)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            exec(source(test_cell), names)
            if tests_id in PARTIAL_CREDIT.get(lesson, ()):
                exec(PARTIAL_CREDIT_PROBE.format(points=nbgrader(test_cell)["points"]), names)
    except AssertionError as failure:  # the referee's CheckFailed (its own copy of checks.py) is one
        return str(failure)
    finally:  # outside IPython no cell end restores the test cell's off-limits helpers: restore them here
        for guard in [g for g in checks._ACTIVE_GUARDS if g not in guards_before]:
            guard.restore()
    return None


def ends_in_bare_expression(code: str) -> bool:
    """True if the last statement could show a value (nbgrader reads a number there as partial credit)."""
    tree = ast.parse(code)
    if not tree.body or not isinstance(tree.body[-1], ast.Expr):
        return False
    value = tree.body[-1].value
    return not (isinstance(value, ast.Call) and getattr(value.func, "id", None) in QUIET_CALLS)


def execute_naming_dead_kernel(client, name: str) -> None:
    """``client.execute()`` (an nbclient NotebookClient); a kernel that dies is reported in seconds naming the notebook
    and the cell it was running, not as nbclient's bare "Kernel died"."""
    from nbclient.exceptions import DeadKernelError

    running: list[int] = []
    client.on_cell_start = lambda cell, cell_index: running.append(cell_index)
    try:
        client.execute()
    except DeadKernelError:
        cell = f"cell {running[-1]}" if running else "its start"
        raise RuntimeError(f"{name}: the kernel died while running {cell} (a crash in native code, or out of memory); "
                           "the cells after it did not run") from None

