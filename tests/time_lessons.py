"""Measure each lesson against its one-sitting budget: learner words, largest cell, exercises, seconds on one core.

    .venv/bin/python tests/time_lessons.py [LESSON ...]

Each solution notebook is executed top to bottom by `jupyter nbconvert --execute` pinned to one CPU core with
`taskset -c 0` (Colab's free CPU runtime has one physical core); the kernel inherits the pinning. Each run gets an
empty inductor cache (TORCHINDUCTOR_CACHE_DIR), as a learner's first run has: torch.compile's one-time costs count.
Prints a markdown table (the README's) and exits 1 if a lesson is over a budget.
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


def seconds_on_one_core(lesson: str) -> float:
    """Wall seconds to execute the lesson's solution notebook on CPU core 0, in a scratch copy of its folder."""
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / lesson
        shutil.copytree(ROOT / "solutions" / lesson, folder)
        pin = ["taskset", "-c", "0"] if shutil.which("taskset") else []
        cold_cache = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(Path(scratch) / "inductor-cache")}
        start = time.perf_counter()
        subprocess.run([*pin, sys.executable, "-m", "jupyter", "nbconvert", "--to", "notebook", "--execute",
                        "--ExecutePreprocessor.timeout=600", "--output", "executed.ipynb",
                        str(folder / f"{lesson}.ipynb")], cwd=folder, check=True, capture_output=True, env=cold_cache)
        return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Print the one-sitting table for the lessons named (default all); 1 if any is over a budget."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", metavar="LESSON", help=f"default: every lesson ({', '.join(LESSONS)})")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.lessons) - set(LESSONS))
    if unknown:
        parser.error(f"LESSON: unknown {unknown}; the lessons are {', '.join(LESSONS)}")
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
