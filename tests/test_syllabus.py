"""The v2 syllabus: lesson names, learner-word budgets and cross-references between lessons."""

from __future__ import annotations

import re

import pytest

from gpucourse import grade, syllabus
from notebook_utils import LESSONS, load, release_path, solution_path


def _markdown(text: str, grade_meta: dict | None = None) -> dict:
    """A markdown cell holding ``text``."""
    return {"cell_type": "markdown", "source": text, "metadata": {"nbgrader": grade_meta} if grade_meta else {}}


def test_lessons_are_the_syllabus_less_the_planned_slots() -> None:
    assert syllabus.check_lesson_names(LESSONS) == []
    assert list(syllabus.SYLLABUS) == sorted(syllabus.SYLLABUS) and len(syllabus.SYLLABUS) == 18


def test_check_lesson_names_reports_each_kind_of_problem() -> None:
    names = [n for n in syllabus.SYLLABUS if n != "03_timing"] + ["99_extra"]
    problems = syllabus.check_lesson_names(names, planned=["06_triton"])
    assert "99_extra: not a lesson of the syllabus" in problems
    assert "06_triton: in PLANNED but it exists" in problems
    assert "03_timing: neither built nor in PLANNED" in problems


def test_every_old_lesson_maps_to_lessons_of_the_syllabus() -> None:
    assert len(syllabus.RENAMED) == 9
    for old, new in syllabus.RENAMED.items():
        assert new and all(name in syllabus.SYLLABUS for name in new), old
    covered = {name for new in syllabus.RENAMED.values() for name in new}
    # no v1 source: Triton and attention; the v3 split of model parallelism is named by the v2 map
    assert covered == set(syllabus.SYLLABUS) - {"06_triton", "11_attention", "16_model_parallelism"}


def test_every_renamed_second_edition_lesson_maps_to_lessons_of_the_syllabus() -> None:
    assert set(syllabus.RENAMED_V2) == {"12_data_parallelism", "13_sharding", "14_mixed_precision",
                                        "15_bigger_models", "16_capstone"}
    for old, new in syllabus.RENAMED_V2.items():
        assert new and all(name in syllabus.SYLLABUS for name in new) and old not in syllabus.SYLLABUS, old
    assert not set(syllabus.RENAMED) & set(syllabus.RENAMED_V2)  # one edition per old name


def test_renamed_message_names_the_new_lessons() -> None:
    message = syllabus.renamed_message("03_cuda")
    assert message is not None and "04_cuda_model" in message and "07_gpu_libraries" in message
    assert syllabus.renamed_message("01_architecture") is None  # still a lesson: no message
    assert syllabus.renamed_message("nonsense") is None
    message = syllabus.renamed_message("13_sharding")
    assert message is not None and "second edition" in message and "15_sharding" in message
    assert syllabus.renamed_message("12_mixed_precision") is None  # a v3 name, though a v2 name is '12_...'


@pytest.mark.parametrize("argument", ["05_busy", "work/05_busy/05_busy.ipynb", "work/06_parallel/"])
def test_grade_tells_a_learner_where_an_old_lesson_went(argument: str) -> None:
    with pytest.raises(ValueError, match="first edition"):
        grade.resolve_lesson(argument, LESSONS)


@pytest.mark.parametrize("argument", ["16_capstone", "work/14_mixed_precision/14_mixed_precision.ipynb"])
def test_grade_tells_a_learner_where_a_second_edition_lesson_went(argument: str) -> None:
    new = "17_capstone" if "capstone" in argument else "12_mixed_precision"
    with pytest.raises(ValueError, match=f"second edition.*{new}"):
        grade.resolve_lesson(argument, LESSONS)


def test_learner_words_counts_markdown_but_not_code_or_written_answers() -> None:
    notebook = {"cells": [_markdown("# Title, here"), {"cell_type": "code", "source": "x = 1 + 2", "metadata": {}},
                          _markdown("my own answer is long", {"solution": True, "grade": True})]}
    assert syllabus.learner_words(notebook) == 2
    with pytest.raises(TypeError, match="notebook"):
        syllabus.learner_words({"cell": []})


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_is_one_sitting(lesson: str) -> None:
    """At most MAX_LESSON_WORDS learner words in the student notebook and MAX_CELL_WORDS in any cell."""
    cells = load(release_path(lesson))["cells"]
    long_cells = [(i, syllabus.cell_words(c)) for i, c in enumerate(cells) if syllabus.cell_words(c) > syllabus.MAX_CELL_WORDS]
    assert long_cells == [], f"{lesson}: cells over {syllabus.MAX_CELL_WORDS} words (index, words)"
    words = syllabus.learner_words({"cells": cells})
    assert words <= syllabus.MAX_LESSON_WORDS, f"{lesson}: {words} learner words"


def test_cross_references_are_parsed() -> None:
    found = syllabus.cross_references("See lesson 03, *The naive timer*; lessons 04-06 and lesson 14's ring; Lesson 01.")
    assert [(r.lesson_number, r.heading) for r in found] == [
        ("03", "The naive timer"), ("04", None), ("05", None), ("06", None), ("14", None), ("01", None)]
    assert [r.lesson_number for r in syllabus.cross_references("lessons 02 and 09, or lesson 1")] == ["02", "09"]


def test_broken_references_finds_unknown_lessons_and_headings() -> None:
    notebooks = {"00_a": {"cells": [_markdown("# 00 · A\n## 1 · First part\nsee lesson 01, *Second*, lesson 02, "
                                              "lesson 03, *Anything*, lesson 01, *Wrong*")]},
                 "01_b": {"cells": [_markdown("# 01 · B\n### Second\nback to lesson 00, *First part*")]}}
    problems = syllabus.broken_references(notebooks, planned=["03_c"])
    assert len(problems) == 2, problems
    assert "names no lesson" in problems[0] and "'lesson 02'" in problems[0]
    assert "has no heading 'Wrong'" in problems[1]


def test_every_cross_reference_of_the_course_resolves() -> None:
    notebooks = {lesson: load(solution_path(lesson)) for lesson in LESSONS}
    assert syllabus.broken_references(notebooks) == []


def test_every_list_of_lessons_names_exactly_the_lessons_that_exist() -> None:
    """Release folders, wrong-answer files, the README table, the Colab twin and `make grade` all follow solutions/."""
    import re
    import sys

    from notebook_utils import ROOT, course

    assert sorted(p.name for p in (ROOT / "notebooks").iterdir() if p.is_dir()) == LESSONS
    assert sorted(p.stem for p in (ROOT / "tests" / "wrong_answers").glob("*.py")) == LESSONS
    assert grade.course_lessons(ROOT) == LESSONS
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    table = readme.split(course.LESSONS_START)[1].split(course.LESSONS_END)[0]
    badges = set(re.findall(r"notebooks/(\d\d_\w+)/\1\.ipynb", table))
    assert sorted(badges) == LESSONS
    planned_rows = set(re.findall(r"^\| (\d\d) \| [^|]+ \| planned", table, re.M))
    assert planned_rows == {name[:2] for name in syllabus.PLANNED}
    sys.path.insert(0, str(ROOT / "tools"))
    import colab_twin

    twin = colab_twin.selected_notebooks([])
    assert sorted({p.stem for p in twin}) == LESSONS and len(twin) == 2 * len(LESSONS)


@pytest.mark.parametrize("lesson", LESSONS)
def test_a_lessons_title_is_its_syllabus_title(lesson: str) -> None:
    from notebook_utils import course

    assert course.lesson_title(lesson) == syllabus.TITLES[lesson]


MAX_MODULE_LINES = 800


def test_no_helper_module_is_over_the_size_a_learner_reads() -> None:
    """Each module of the helper package is one job a learner can read: at most MAX_MODULE_LINES lines."""
    from notebook_utils import ROOT

    sizes = {str(p.relative_to(ROOT)): len(p.read_text(encoding="utf-8").splitlines())
             for p in (ROOT / "src" / "gpucourse").rglob("*.py")}
    assert {path: n for path, n in sizes.items() if n > MAX_MODULE_LINES} == {}


@pytest.mark.parametrize("lesson", LESSONS)
def test_lessons_use_the_one_table_helper(lesson: str) -> None:
    """Tables are drawn by gpucourse.plots.show_table; no lesson defines its own."""
    import re

    code = "\n".join("".join(c["source"]) for c in load(solution_path(lesson))["cells"] if c["cell_type"] == "code")
    assert not re.search(r"^\s*def (show_table|markdown_table)\b", code, re.M)


def test_the_low_precision_lessons_are_those_that_autocast_or_gate_a_16_bit_format_on_a_cpu():
    """CI grades these on a simulated CPU without native bfloat16: the list must follow the lessons' code (lesson 12's
    autocast choice, bfloat16 on a CPU, or the low-precision gate)."""
    from notebook_utils import ROOT

    found = sorted(path.parent.name for path in (ROOT / "solutions").glob("*/*.ipynb")
                   if re.search(r"precision\.autocast_dtype\(|native_formats", path.read_text(encoding="utf-8")))
    assert sorted(syllabus.LOW_PRECISION_LESSONS) == found
