"""Measure each lesson against its one-sitting budget: learner words, largest cell, exercises, seconds on one core.

    .venv/bin/python tests/time_lessons.py [LESSON ...]

Each solution notebook is executed top to bottom by `jupyter nbconvert --execute` pinned to one CPU core with
`taskset -c 0` (Colab's free CPU runtime has one physical core); the kernel inherits the pinning. Each run gets an
empty inductor cache (TORCHINDUCTOR_CACHE_DIR), as a learner's first run has: torch.compile's one-time costs count.
Prints a markdown table (the README's) and exits 1 if a lesson is over a budget.

Each table also gives the lesson's longest **silence**: the largest gap, in any cell, between the cell's start, each
output it sends (text, a figure, a progress line) and its end, from the kernel's own message times. A cell silent for
more than MAX_SILENT_S seconds is listed under the table (and counts as over budget): a learner waiting that long
should see what runs and how far it got.

    .venv/bin/python tests/time_lessons.py --profiles native,avx2,avx512    (make time-lessons)

runs every lesson under each CPU profile and prints seconds and the slowest cell per profile: `avx2` simulates an x86
CPU without native bfloat16 (most Intel laptops since the 12th generation, AMD before Zen 4), `avx512` one with
AVX-512 but no bfloat16 (many cloud Xeons); PyTorch and oneDNN are capped through their environment variables.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from notebook_utils import (CPU_PROFILES, LESSONS, ROOT, execute_naming_dead_kernel, exercises, load,  # noqa: E402
                            profile_variables, release_path)

from gpucourse import syllabus  # noqa: E402

MAX_SECONDS = 60.0
MAX_SILENT_S = 10.0
"""A cell may run longer, but not this long without printing something (what it measures, how far it got)."""

OUTPUT_MESSAGES = ("stream", "display_data", "execute_result", "update_display_data", "clear_output", "error")
"""The kernel messages a learner sees as a cell's output (the times between them are its silences)."""

def _parse_time(stamp: object) -> float:
    """Seconds since the epoch of a Jupyter message date (a datetime or an ISO string)."""
    from datetime import datetime

    if isinstance(stamp, datetime):
        return stamp.timestamp()
    return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()


def _cell_seconds(cell: dict) -> float:
    """Seconds a cell ran, from the timing nbclient records in its metadata (0 where there is none)."""
    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return 0.0
    return _parse_time(end) - _parse_time(start)


def longest_silence(start: float, outputs: list[float], end: float) -> float:
    """The largest gap between ``start``, each output time (any order) and ``end``, in seconds."""
    if end < start:
        raise ValueError(f"end must not come before start, got start={start}, end={end}")
    marks = [start, *sorted(min(max(t, start), end) for t in outputs), end]
    return max(later - earlier for earlier, later in zip(marks, marks[1:]))


def cell_silences(cells: list[dict], output_times: dict[int, list[float]]) -> list[float]:
    """The longest silence of each cell (0 for a cell that did not run), from its metadata and its output times."""
    silences = []
    for index, cell in enumerate(cells):
        timing = cell.get("metadata", {}).get("execution", {})
        start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
        if not start or not end:
            silences.append(0.0)
            continue
        silences.append(longest_silence(_parse_time(start), output_times.get(index, []), _parse_time(end)))
    return silences


def execute_recording_outputs(notebook: Path, executed: Path, silences: Path) -> None:
    """Execute ``notebook`` in its folder with nbclient, save it to ``executed``, and the output times per cell (the
    kernel's message dates, seconds since the epoch) as JSON to ``silences``."""
    import json

    import nbformat
    from nbclient import NotebookClient

    class RecordingClient(NotebookClient):
        """nbclient's client, noting when each output message of a cell was sent."""

        output_times: dict[int, list[float]] = {}

        def process_message(self, msg: dict, cell: object, cell_index: int) -> object:
            if msg.get("msg_type") in OUTPUT_MESSAGES:
                self.output_times.setdefault(cell_index, []).append(_parse_time(msg["header"]["date"]))
            return super().process_message(msg, cell, cell_index)

    book = nbformat.read(notebook, as_version=4)
    client = RecordingClient(book, timeout=syllabus.CELL_TIMEOUT_S, kernel_name="python3",
                             resources={"metadata": {"path": str(notebook.parent)}})
    client.output_times = {}
    execute_naming_dead_kernel(client, notebook.name)
    nbformat.write(book, executed)
    silences.write_text(json.dumps({str(index): times for index, times in client.output_times.items()}),
                        encoding="utf-8")


@dataclass
class LessonRun:
    """One execution of a lesson's solution: wall seconds, the slowest cell and the longest silence of any cell."""

    seconds: float
    slowest: int
    slowest_s: float
    quietest: int
    silent_s: float
    silent_cells: list[tuple[int, str, float]]  # (index, cell id, seconds) of each cell silent > MAX_SILENT_S


def run_lesson(lesson: str, profile: str = "native", cache_root: Path | None = None, pin: bool = True) -> LessonRun:
    """Execute the lesson's solution notebook on CPU core 0 (unless ``pin`` is False) under ``profile``, in a scratch
    copy of its folder, and read its cells' times and silences. Inductor's cache goes under ``cache_root`` (default:
    an empty scratch folder, as a learner's first run has), in a folder of the profile's own."""
    import json

    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / lesson
        shutil.copytree(ROOT / "solutions" / lesson, folder)
        taskset = ["taskset", "-c", "0"] if pin and shutil.which("taskset") else []
        env = {**os.environ, **profile_variables(profile, cache_root or Path(scratch))}
        executed, times = folder / "executed.ipynb", folder / "output-times.json"
        start = time.perf_counter()
        done = subprocess.run([*taskset, sys.executable, __file__, "--execute", str(folder / f"{lesson}.ipynb"),
                               str(executed), str(times)], cwd=folder, capture_output=True, text=True, env=env)
        if done.returncode != 0:
            raise RuntimeError(f"{lesson} under the {profile} profile failed: {done.stderr.strip()[-2000:]}")
        seconds = time.perf_counter() - start
        cells = load(executed)["cells"]
        output_times = {int(index): stamps for index, stamps in json.loads(times.read_text("utf-8")).items()}
    durations = [_cell_seconds(cell) for cell in cells]
    silences = cell_silences(cells, output_times)
    slowest = max(range(len(cells)), key=durations.__getitem__)
    quietest = max(range(len(cells)), key=silences.__getitem__)
    silent = [(index, cells[index].get("id", ""), silences[index]) for index in range(len(cells))
              if silences[index] > MAX_SILENT_S]
    return LessonRun(seconds, slowest, durations[slowest], quietest, silences[quietest], silent)


def run_on_one_core(lesson: str, profile: str = "native") -> tuple[float, int, float]:
    """(wall seconds, index of the slowest cell, its seconds) of the lesson's solution notebook executed on CPU core
    0 under ``profile``, in a scratch copy of its folder."""
    run = run_lesson(lesson, profile)
    return run.seconds, run.slowest, run.slowest_s


def seconds_on_one_core(lesson: str) -> float:
    """Wall seconds to execute the lesson's solution notebook on CPU core 0, in a scratch copy of its folder."""
    return run_lesson(lesson).seconds


def _silent_report(found: list[tuple[str, str, int, str, float]]) -> None:
    """Print the cells silent longer than MAX_SILENT_S (lesson, profile, index, id, seconds), or that none were."""
    if not found:
        print(f"\nNo cell was silent for more than {MAX_SILENT_S:g} s.")
        return
    print(f"\nCells silent for more than {MAX_SILENT_S:g} s (show what runs and how far it got):")
    for lesson, profile, index, cell_id, seconds in found:
        print(f"- {lesson} ({profile}): cell {index} ({cell_id}), {seconds:.1f} s without output")


def profiles_table(lessons: list[str], profiles: list[str]) -> bool:
    """Print seconds and the slowest cell of each lesson under each profile; True if any is over MAX_SECONDS."""
    print("| lesson | " + " | ".join(f"{name}: s (slowest cell, s; longest silence, s)" for name in profiles)
          + " |\n| --- |" + " --- |" * len(profiles))
    over, totals, silent = False, dict.fromkeys(profiles, 0.0), []
    for lesson in lessons:
        cells = []
        for name in profiles:
            run = run_lesson(lesson, name)
            totals[name] += run.seconds
            over |= run.seconds > MAX_SECONDS or bool(run.silent_cells)
            silent += [(lesson, name, *cell) for cell in run.silent_cells]
            cells.append(f"{run.seconds:.1f} (cell {run.slowest}, {run.slowest_s:.1f}; "
                         f"cell {run.quietest}, {run.silent_s:.1f})")
        print(f"| {lesson} | " + " | ".join(cells) + " |", flush=True)
    print("\n" + "; ".join(f"{name}: {len(lessons)} lessons in {totals[name]:.0f} s on one core" for name in profiles))
    _silent_report(silent)
    return over


def main(argv: list[str] | None = None) -> int:
    """Print the one-sitting table for the lessons named (default all); 1 if any is over a budget."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", metavar="LESSON", help=f"default: every lesson ({', '.join(LESSONS)})")
    parser.add_argument("--profiles", default="", help=f"comma-separated CPU profiles to compare: {', '.join(CPU_PROFILES)}")
    parser.add_argument("--execute", nargs=3, metavar=("NOTEBOOK", "EXECUTED", "TIMES"),
                        help="(used by this script) execute one notebook, recording when each output was sent")
    args = parser.parse_args(argv)
    if args.execute:
        execute_recording_outputs(*(Path(path) for path in args.execute))
        return 0
    unknown = sorted(set(args.lessons) - set(LESSONS))
    if unknown:
        parser.error(f"LESSON: unknown {unknown}; the lessons are {', '.join(LESSONS)}")
    if args.profiles:
        profiles = [name.strip() for name in args.profiles.split(",")]
        if set(profiles) - set(CPU_PROFILES):
            parser.error(f"--profiles: unknown {sorted(set(profiles) - set(CPU_PROFILES))}; use {', '.join(CPU_PROFILES)}")
        return 1 if profiles_table(args.lessons or LESSONS, profiles) else 0
    print("| lesson | learner words | largest cell | exercises (points) | seconds on one core | longest silence, s "
          "(cell) |\n| --- | --- | --- | --- | --- | --- |")
    over, silent = False, []
    total = 0.0
    for lesson in args.lessons or LESSONS:
        student = load(release_path(lesson))
        words = syllabus.learner_words(student)
        largest = max(syllabus.cell_words(cell) for cell in student["cells"])
        found = exercises(lesson)
        run = run_lesson(lesson)
        total += run.seconds
        silent += [(lesson, "native", *cell) for cell in run.silent_cells]
        over |= (words > syllabus.MAX_LESSON_WORDS or largest > syllabus.MAX_CELL_WORDS or run.seconds > MAX_SECONDS
                 or bool(run.silent_cells))
        print(f"| {lesson} | {words:,} | {largest} | {len(found)} ({sum(e.points for e in found):g}) "
              f"| {run.seconds:.1f} | {run.silent_s:.1f} ({run.quietest}) |", flush=True)
    print(f"\n{len(args.lessons or LESSONS)} lessons in {total:.0f} s on one core")
    _silent_report(silent)
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
