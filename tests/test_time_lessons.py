"""Tests of tests/time_lessons.py: its silence measure (the largest gap between a cell's start, its outputs and its
end), and its runs under simulated CPU profiles."""

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


COMPILING_LESSON = "10_compilers"  # with one shared cache, its AVX2 kernels killed the next ordinary run (SIGSEGV)


def test_each_cpu_profile_compiles_into_a_cache_folder_of_its_own(tmp_path) -> None:
    """Under one cache root, every profile's Inductor cache is a different folder (and bad input says so)."""
    from notebook_utils import CPU_PROFILES, profile_variables

    folders = {profile_variables(profile, tmp_path)["TORCHINDUCTOR_CACHE_DIR"] for profile in CPU_PROFILES}
    assert len(folders) == len(CPU_PROFILES) and all(folder.startswith(str(tmp_path)) for folder in folders)
    assert profile_variables("avx2", tmp_path)["ATEN_CPU_CAPABILITY"] == "avx2"
    with pytest.raises(ValueError, match="profile must be one of"):
        profile_variables("avx3", tmp_path)


@pytest.mark.slow
def test_a_compiling_lesson_runs_under_avx2_then_ordinarily_on_one_cache_root(tmp_path) -> None:
    """A learner's ordinary run after a run under the AVX2 profile, both given the same cache root, must not load the
    kernels compiled for AVX2 (on an AVX-512 machine those killed the kernel: SIGSEGV)."""
    time_lessons.run_lesson(COMPILING_LESSON, "avx2", cache_root=tmp_path, pin=False)  # timing is not the point
    time_lessons.run_lesson(COMPILING_LESSON, "native", cache_root=tmp_path, pin=False)
    compiled = {folder.name: sum(1 for _ in folder.rglob("*.so")) for folder in tmp_path.iterdir()}
    assert set(compiled) == {"inductor-avx2", "inductor-native"}, compiled
    assert all(count > 0 for count in compiled.values()), f"a run compiled nothing: {compiled}"

