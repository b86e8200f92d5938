"""Where the test command's time goes: read the per-worker logs that GPUCOURSE_TEST_TIMELINE=FOLDER makes pytest
write (conftest.py) and print each worker's span and busy share, the longest scopes, and the run's tail.

    GPUCOURSE_TEST_TIMELINE=/tmp/tl make test && python tools/test_timeline.py /tmp/tl
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path


def load(folder: Path) -> dict[str, list[dict]]:
    """The logged tests per worker, in start order."""
    if not folder.is_dir():
        raise SystemExit(f"folder: {folder} is not a folder (set GPUCOURSE_TEST_TIMELINE to it and run the tests)")
    logs = {path.stem: [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
            for path in sorted(folder.glob("*.jsonl"))}
    if not logs:
        raise SystemExit(f"folder: {folder} holds no *.jsonl logs")
    return {worker: sorted(tests, key=lambda t: t["start"]) for worker, tests in logs.items()}


def scope(test_id: str) -> str:
    """The unit pytest-xdist's --dist loadscope keeps on one worker: a module, a class or a notebook."""
    return test_id.rsplit("::", 1)[0]


def report(logs: dict[str, list[dict]], top: int) -> str:
    """A plain-text summary of the run."""
    begin = min(t["start"] for tests in logs.values() for t in tests)
    end = max(t["start"] + t["wall"] for tests in logs.values() for t in tests)
    lines = [f"run: {end - begin:,.0f} s from the first test to the last"]
    every = [t for tests in logs.values() for t in tests if "busy_at_start" in t]
    if every:  # logs written since the machine's busy time was recorded
        first = min(every, key=lambda t: t["start"])
        last = max(every, key=lambda t: t["start"] + t["wall"])
        share = (last["busy_at_end"] - first["busy_at_start"]) / ((end - begin) * first["cores"])
        lines.append(f"machine: its {first['cores']} cores {share:.0%} busy over the run (every process, "
                     "the tests' kernels and subprocesses included)")
    scopes: dict[str, dict] = defaultdict(lambda: {"wall": 0.0, "cpu": 0.0, "end": 0.0, "worker": ""})
    for worker, tests in logs.items():
        wall = sum(t["wall"] for t in tests)
        cpu = sum(t["cpu"] for t in tests)
        last = max(t["start"] + t["wall"] for t in tests)
        lines.append(f"{worker}: {len(tests):,} tests, {wall:,.0f} s in tests, {cpu:,.0f} s of CPU, "
                     f"idle {end - begin - wall:,.0f} s, done {end - last:,.0f} s before the end")
        for t in tests:
            entry = scopes[scope(t["test"])]
            entry["wall"] += t["wall"]
            entry["cpu"] += t["cpu"]
            entry["end"] = max(entry["end"], t["start"] + t["wall"] - begin)
            entry["worker"] = worker
    lines.append(f"\nthe {top} longest scopes (wall s, CPU s, worker, ended at s):")
    for name, entry in sorted(scopes.items(), key=lambda item: -item[1]["wall"])[:top]:
        lines.append(f"{entry['wall']:8.1f} {entry['cpu']:8.1f}  {entry['worker']:>5} {entry['end']:7.0f}  {name}")
    lines.append("\nthe last scopes to finish:")
    for name, entry in sorted(scopes.items(), key=lambda item: -item[1]["end"])[:8]:
        lines.append(f"{entry['wall']:8.1f} {entry['cpu']:8.1f}  {entry['worker']:>5} {entry['end']:7.0f}  {name}")
    return "\n".join(lines)


def main() -> None:
    """Command line: the folder of logs, and how many scopes to list."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    print(report(load(args.folder), args.top))


if __name__ == "__main__":
    main()
