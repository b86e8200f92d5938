"""Time nbgrader autograde per submission, per lesson, as an instructor runs it (the README's class timing).

    .venv/bin/python tests/time_autograde.py [--copies 2] [LESSON ...]

Each lesson gets a throw-away course copy with ``--copies`` students who all submit the model answers; one
`nbgrader autograde` grades them all (as for a class), and the wall time divided by the number of submissions is
printed per lesson, with the total for a class of 30.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from notebook_utils import LESSONS, ROOT, course  # noqa: E402
from test_grading import _with_solutions  # noqa: E402  (the release with the model answers filled in)

CLASS_SIZE = 30


def seconds_per_submission(lesson: str, copies: int) -> float:
    """Autograde ``copies`` model-answer submissions of ``lesson`` in one run; return seconds per submission."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        shutil.copy(ROOT / "nbgrader_config.py", root)
        shutil.copytree(ROOT / "solutions" / lesson, root / "solutions" / lesson)
        course.cmd_gradebook(root)
        notebook = json.dumps(_with_solutions(lesson))
        for index in range(copies):
            target = root / "submitted" / f"student{index + 1}" / lesson / f"{lesson}.ipynb"
            target.parent.mkdir(parents=True)
            target.write_text(notebook, encoding="utf-8")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "nbgrader", "autograde", lesson, "--log-level=ERROR"], cwd=root,
                       env=course.venv_environment(), check=True, capture_output=True)
        return (time.perf_counter() - start) / copies


def main(argv: list[str] | None = None) -> int:
    """Print autograde seconds per submission and minutes for a class, per lesson."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", metavar="LESSON", help=f"default: every lesson ({', '.join(LESSONS)})")
    parser.add_argument("--copies", type=int, default=2, help="submissions graded per lesson (default 2)")
    args = parser.parse_args(argv)
    if args.copies < 1:
        parser.error(f"--copies must be at least 1, got {args.copies}")
    unknown = sorted(set(args.lessons) - set(LESSONS))
    if unknown:
        parser.error(f"LESSON: unknown {unknown}; the lessons are {', '.join(LESSONS)}")
    print(f"| lesson | autograde s / submission | class of {CLASS_SIZE}, minutes |\n| --- | --- | --- |")
    for lesson in args.lessons or LESSONS:
        seconds = seconds_per_submission(lesson, args.copies)
        print(f"| {lesson} | {seconds:.1f} | {seconds * CLASS_SIZE / 60:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
