"""Pytest set-up shared by tests/ and the nbval run over solutions/."""

import json
import os
import sys
import time
from pathlib import Path

import pytest

import gpucourse

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))
# nbval runs every solution notebook; tests/lesson_notebooks.py adds, in the same kernel, the wrong answers, the
# repeated test cells and the model answers' coverage (so no notebook is executed twice for the same purpose).
pytest_plugins = ["lesson_notebooks"]

# triton must load before TensorFlow in a process that may use both (torch.compile loads triton): see
# gpucourse.load_triton_before_tensorflow. Test modules import TensorFlow at collection, so do it first.
gpucourse.load_triton_before_tensorflow()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark nbval's notebook cells slow, and run the slow tests first.

    `make test` keeps each notebook (each module, each class) on one worker with --dist loadscope, and hands scopes
    out in collection order: the long scopes (a lesson with its wrong answers, a lesson's grading pipeline) go first,
    so the quick unit tests fill in at the end instead of one worker waiting on a long lesson collected last.
    """
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
    items.sort(key=_longest_first)


def _longest_first(item: pytest.Item) -> tuple[bool, bool, int]:
    """Sort key: solution notebooks first, the later (longer) lessons before the earlier, then slow tests, then the
    rest; the order within a notebook or a module is kept (the sort is stable)."""
    notebook = item.path.suffix == ".ipynb"
    lesson = int(item.path.stem[:2]) if notebook and item.path.stem[:2].isdigit() else 0
    return not notebook, item.get_closest_marker("slow") is None, -lesson


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """With GPUCOURSE_TEST_TIMELINE=FOLDER, log each test's wall and CPU seconds per worker (tools/test_timeline.py
    reads the log: where the test command's time goes, and how busy each worker kept its core)."""
    folder = os.environ.get("GPUCOURSE_TEST_TIMELINE")
    if not folder:
        yield
        return
    import psutil

    start, cpu_start, busy_start = time.time(), os.times(), _machine_busy_s(psutil)
    yield
    cpu_end = os.times()
    cpu = sum(cpu_end[:4]) - sum(cpu_start[:4])  # this process and its finished children (kernels, subprocesses)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    Path(folder).mkdir(parents=True, exist_ok=True)  # the folder named need not exist yet
    with open(Path(folder) / f"{worker}.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps({"test": item.nodeid, "start": start, "wall": time.time() - start, "cpu": cpu,
                              "busy_at_start": busy_start, "busy_at_end": _machine_busy_s(psutil),
                              "cores": psutil.cpu_count()}) + "\n")


def _machine_busy_s(psutil) -> float:
    """CPU seconds the whole machine has spent busy since boot, all cores together (for the timeline's busy share)."""
    times = psutil.cpu_times()
    return sum(times) - times.idle - getattr(times, "iowait", 0.0)
