"""Measure each lesson against its one-sitting budget: learner words, largest cell, exercises, seconds on one core.

    .venv/bin/python tests/time_lessons.py [LESSON ...]

Each solution notebook is executed top to bottom by `jupyter nbconvert --execute` pinned to one CPU core with
`taskset -c 0` (Colab's free CPU runtime has one physical core); the kernel inherits the pinning. Each run gets an
empty inductor cache (TORCHINDUCTOR_CACHE_DIR), as a learner's first run has: torch.compile's one-time costs count.
Prints a markdown table (the README's) and exits 1 if a lesson is over a budget.

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
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from notebook_utils import LESSONS, ROOT, exercises, load, release_path  # noqa: E402

from gpucourse import syllabus  # noqa: E402

MAX_SECONDS = 60.0

PROFILES = {"native": {},
            "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
            "avx512": {"ATEN_CPU_CAPABILITY": "avx512", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"}}
"""CPU profiles: this machine as it is, and two simulated ones (the environment variables that cap PyTorch's and
oneDNN's instruction sets)."""


def _cell_seconds(cell: dict) -> float:
    """Seconds a cell ran, from the timing nbclient records in its metadata (0 where there is none)."""
    from datetime import datetime

    timing = cell.get("metadata", {}).get("execution", {})
    start, end = timing.get("iopub.execute_input"), timing.get("shell.execute_reply")
    if not start or not end:
        return 0.0
    return (datetime.fromisoformat(end.replace("Z", "+00:00")) -
            datetime.fromisoformat(start.replace("Z", "+00:00"))).total_seconds()


def run_on_one_core(lesson: str, profile: str = "native") -> tuple[float, int, float]:
    """(wall seconds, index of the slowest cell, its seconds) of the lesson's solution notebook executed on CPU core
    0 under ``profile``, in a scratch copy of its folder."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / lesson
        shutil.copytree(ROOT / "solutions" / lesson, folder)
        pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
        env = {**os.environ, **PROFILES[profile], "TORCHINDUCTOR_CACHE_DIR": str(Path(scratch) / "inductor-cache")}
        start = time.perf_counter()
        subprocess.run([*pin, sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                        "--ExecutePreprocessor.timeout=600", "--output", "executed.ipynb",
                        str(folder / f"{lesson}.ipynb")], cwd=folder, check=True, capture_output=True, env=env)
        seconds = time.perf_counter() - start
        cells = load(folder / "executed.ipynb")["cells"]
        slowest = max(range(len(cells)), key=lambda index: _cell_seconds(cells[index]))
        return seconds, slowest, _cell_seconds(cells[slowest])


def seconds_on_one_core(lesson: str) -> float:
    """Wall seconds to execute the lesson's solution notebook on CPU core 0, in a scratch copy of its folder."""
    return run_on_one_core(lesson)[0]


def profiles_table(lessons: list[str], profiles: list[str]) -> bool:
    """Print seconds and the slowest cell of each lesson under each profile; True if any is over MAX_SECONDS."""
    print("| lesson | " + " | ".join(f"{name}: s (slowest cell, s)" for name in profiles) + " |\n"
          "| --- |" + " --- |" * len(profiles))
    over, totals = False, dict.fromkeys(profiles, 0.0)
    for lesson in lessons:
        cells = []
        for name in profiles:
            seconds, slowest, cell_seconds = run_on_one_core(lesson, name)
            totals[name] += seconds
            over |= seconds > MAX_SECONDS
            cells.append(f"{seconds:.1f} (cell {slowest}, {cell_seconds:.1f})")
        print(f"| {lesson} | " + " | ".join(cells) + " |", flush=True)
    print("\n" + "; ".join(f"{name}: {len(lessons)} lessons in {totals[name]:.0f} s on one core" for name in profiles))
    return over


def main(argv: list[str] | None = None) -> int:
    """Print the one-sitting table for the lessons named (default all); 1 if any is over a budget."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", metavar="LESSON", help=f"default: every lesson ({', '.join(LESSONS)})")
    parser.add_argument("--profiles", default="", help=f"comma-separated CPU profiles to compare: {', '.join(PROFILES)}")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.lessons) - set(LESSONS))
    if unknown:
        parser.error(f"LESSON: unknown {unknown}; the lessons are {', '.join(LESSONS)}")
    if args.profiles:
        profiles = [name.strip() for name in args.profiles.split(",")]
        if set(profiles) - set(PROFILES):
            parser.error(f"--profiles: unknown {sorted(set(profiles) - set(PROFILES))}; use {', '.join(PROFILES)}")
        return 1 if profiles_table(args.lessons or LESSONS, profiles) else 0
    print("| lesson | learner words | largest cell | exercises (points) | seconds on one core |\n"
          "| --- | --- | --- | --- | --- |")
    over = False
    total = 0.0
    for lesson in args.lessons or LESSONS:
        student = load(release_path(lesson))
        words = syllabus.learner_words(student)
        largest = max(syllabus.cell_words(cell) for cell in student["cells"])
        found = exercises(lesson)
        seconds = seconds_on_one_core(lesson)
        total += seconds
        over |= words > syllabus.MAX_LESSON_WORDS or largest > syllabus.MAX_CELL_WORDS or seconds > MAX_SECONDS
        print(f"| {lesson} | {words:,} | {largest} | {len(found)} ({sum(e.points for e in found):g}) "
              f"| {seconds:.1f} |", flush=True)
    print(f"\n{len(args.lessons or LESSONS)} lessons in {total:.0f} s on one core")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
