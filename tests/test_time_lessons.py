"""Tests of tests/time_lessons.py's silence measure: the largest gap between a cell's start, its outputs and its end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import time_lessons  # noqa: E402


def test_longest_silence_is_the_largest_gap_between_start_outputs_and_end():
    assert time_lessons.longest_silence(0.0, [], 12.0) == 12.0
    assert time_lessons.longest_silence(0.0, [5.0, 10.0], 12.0) == 5.0
    assert time_lessons.longest_silence(0.0, [11.0, 1.0], 12.0) == 10.0       # any order
    assert time_lessons.longest_silence(10.0, [9.0, 30.0], 12.0) == 2.0      # outputs clipped to the cell's run
    with pytest.raises(ValueError, match="end must not come before start"):
        time_lessons.longest_silence(5.0, [], 4.0)


def test_cell_silences_read_the_cells_timing_metadata():
    def cell(start: str, end: str) -> dict:
        return {"metadata": {"execution": {"iopub.execute_input": start, "shell.execute_reply": end}}}

    cells = [cell("2026-11-26T00:00:00.000Z", "2026-11-26T00:00:20.000Z"), {"metadata": {}},
             cell("2026-11-26T00:00:20.000Z", "2026-11-26T00:00:21.500Z")]
    start = time_lessons._parse_time("2026-11-26T00:00:00Z")
    silences = time_lessons.cell_silences(cells, {0: [start + 4.0, start + 12.0]})
    assert silences == pytest.approx([8.0, 0.0, 1.5])
    assert time_lessons._cell_seconds(cells[0]) == pytest.approx(20.0)
