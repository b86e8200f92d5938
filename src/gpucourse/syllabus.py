"""The course's lessons by name: the v2 syllabus, the slots not built yet, the nine-lesson names they replace, and
the two measures every lesson is held to (learner words, cross-references between lessons).

One source for the lesson list's shape: ``tools/course.py`` (README, release), ``grade`` (a learner's old copies)
and the tests read it; the lessons that exist are the folders under ``solutions/``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# The 18 folder names of the v3 syllabus, in the learning order (COURSE.md section 2).
SYLLABUS: tuple[str, ...] = (
    "00_getting_started", "01_architecture", "02_roofline", "03_timing", "04_cuda_model", "05_cuda_shared_memory",
    "06_triton", "07_gpu_libraries", "08_placement", "09_feeding_and_watching", "10_compilers", "11_attention",
    "12_mixed_precision", "13_bigger_models", "14_data_parallelism", "15_sharding", "16_model_parallelism",
    "17_capstone",
)

# The title of each slot, as its notebook's '# NN · Title' heading writes it (a test holds the two together); the
# README lists the planned slots under these titles.
TITLES: Mapping[str, str] = {
    "00_getting_started": "Getting started",
    "01_architecture": "CPU vs GPU architecture",
    "02_roofline": "The roofline: where a layer's time goes",
    "03_timing": "Timing a matrix multiply",
    "04_cuda_model": "CUDA: the programming model",
    "05_cuda_shared_memory": "CUDA: shared memory and cooperation",
    "06_triton": "Kernels in Triton",
    "07_gpu_libraries": "The libraries under the frameworks",
    "08_placement": "Device placement in PyTorch and TensorFlow/Keras",
    "09_feeding_and_watching": "Feeding the GPU and watching it",
    "10_compilers": "Launch overhead and compilers",
    "11_attention": "Attention on a GPU",
    "12_mixed_precision": "Mixed precision",
    "13_bigger_models": "Fitting bigger models",
    "14_data_parallelism": "Data parallelism",
    "15_sharding": "Sharding: ZeRO and FSDP",
    "16_model_parallelism": "Tensor and pipeline parallelism",
    "17_capstone": "Capstone: train fast",
}

# Slots of the syllabus that have no notebook yet; emptied as they land. A reference to one is allowed.
PLANNED: tuple[str, ...] = ()

# Lessons whose distributed cells use several GPUs when there are: they get a Kaggle badge too (Kaggle's free
# "GPU T4 x2" notebooks have two GPUs, Colab's one).
MULTI_GPU_LESSONS: tuple[str, ...] = ("14_data_parallelism", "15_sharding", "16_model_parallelism")

# Lessons whose model answers autocast, train or time in a 16-bit format on a CPU: CI grades them on a simulated CPU
# without native bfloat16 too (tests/test_grading.py), so a slow path there cannot cost a learner points. (The
# capstone's model answer trains in float32 on a CPU and autocasts only on a GPU.)
LOW_PRECISION_LESSONS: tuple[str, ...] = ("12_mixed_precision",)

# Each lesson of the nine-lesson course (v1) -> the lessons its material is in now.
RENAMED: Mapping[str, tuple[str, ...]] = {
    "00_getting_started": ("00_getting_started", "01_architecture"),
    "01_architecture": ("01_architecture", "02_roofline"),
    "02_timing": ("03_timing",),
    "03_cuda": ("04_cuda_model", "05_cuda_shared_memory", "07_gpu_libraries"),
    "04_placement": ("08_placement",),
    "05_busy": ("09_feeding_and_watching", "10_compilers"),
    "06_parallel": ("14_data_parallelism", "15_sharding"),
    "07_mixed_precision": ("12_mixed_precision", "13_bigger_models"),
    "08_capstone": ("17_capstone",),
}

# Each lesson of the 17-lesson course (v2) whose name changed in v3 -> the lessons its material is in now.
RENAMED_V2: Mapping[str, tuple[str, ...]] = {
    "12_data_parallelism": ("14_data_parallelism",),
    "13_sharding": ("15_sharding", "16_model_parallelism"),
    "14_mixed_precision": ("12_mixed_precision",),
    "15_bigger_models": ("13_bigger_models",),
    "16_capstone": ("17_capstone",),
}

# The earlier editions, each with the old names whose material moved: the README's map and `make grade` read them.
EDITIONS: tuple[tuple[str, Mapping[str, tuple[str, ...]]], ...] = (
    ("first edition (nine lessons)", RENAMED),
    ("second edition (17 lessons)", RENAMED_V2),
)

MAX_LESSON_WORDS = 3_500
MAX_CELL_WORDS = 300

CELL_TIMEOUT_S = 300
"""The one per-cell time limit: nbgrader's autograde and the learner's Validate (nbgrader_config.py), `make grade`,
the GPU check and the test suite's notebook runs all read it. Every model answer runs in well under a minute."""


def cell_timeout_message(seconds: float = CELL_TIMEOUT_S) -> str:
    """What a learner reads when a cell ran out of time: what happened, on which machine, and what to try."""
    return (f"this cell ran longer than {seconds:g} s on this machine (the course's limit per cell), so it was "
            "stopped. Run it alone to see how long it takes; a loop over far more data or repeats than the exercise "
            "asks for, or a timing in a format this CPU only emulates, are the usual causes; close other programs "
            "and try again")
WORD = re.compile(r"\w+")


def renamed_message(old: str) -> str | None:
    """What to tell a learner holding a copy of an earlier edition's lesson ``old`` (None if not an old name)."""
    if old in SYLLABUS:
        return None
    for edition, renamed in EDITIONS:
        if old in renamed:
            break
    else:
        return None
    new = renamed[old]
    return (f"{old} is a lesson of the course's {edition.split(' (')[0]}; its material is now in "
            + ", ".join(new) + ". Start from the new lesson's notebook (make lab copies it into work/): "
            "the exercises changed, so an old copy cannot be graded against them.")


# --------------------------------------------------------------------------- learner words

def _source(cell: Mapping) -> str:
    """A cell's source as one string."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else str(source)


def _is_written_answer(cell: Mapping) -> bool:
    """True for a written-answer cell (graded markdown that the learner writes)."""
    meta = cell.get("metadata", {}).get("nbgrader", {})
    return bool(meta.get("solution")) and cell.get("cell_type") == "markdown"


def cell_words(cell: Mapping) -> int:
    """Learner-visible words of one cell: ``\\w+`` tokens of a markdown cell that is not a written answer."""
    if cell.get("cell_type") != "markdown" or _is_written_answer(cell):
        return 0
    return len(WORD.findall(_source(cell)))


def learner_words(notebook: Mapping) -> int:
    """Learner-visible words of a notebook: the sum of ``cell_words`` over its cells."""
    cells = notebook.get("cells")
    if not isinstance(cells, list):
        raise TypeError(f"notebook must be a notebook dict with a 'cells' list, got {type(notebook).__name__}")
    return sum(cell_words(cell) for cell in cells)


# --------------------------------------------------------------------------- cross-references

@dataclass(frozen=True)
class CrossReference:
    """'lesson NN' (optionally ', *Heading*') written in a lesson's markdown."""

    lesson_number: str
    heading: str | None
    text: str


_NUMBERS = r"\d{2}(?:\s*(?:-|–|,|and|or)\s*\d{2})*"
_REFERENCE = re.compile(rf"\b[Ll]essons?\s+({_NUMBERS})(?:'s)?(?:,\s*\*([^*\n]+)\*)?")
_RANGE = re.compile(r"(\d{2})\s*[-–]\s*(\d{2})")


def cross_references(markdown: str) -> list[CrossReference]:
    """Every reference to a lesson in ``markdown``: 'lesson 03', 'lessons 04-07', 'lesson 03, *Heading*'."""
    found = []
    for match in _REFERENCE.finditer(markdown):
        numbers_text, heading = match.group(1), match.group(2)
        numbers: list[int] = []
        for part in re.split(r"\s*(?:,|and|or)\s*", numbers_text):
            if span := _RANGE.fullmatch(part.strip()):
                numbers.extend(range(int(span.group(1)), int(span.group(2)) + 1))
            elif part.strip():
                numbers.append(int(part.strip()))
        for number in numbers:
            found.append(CrossReference(f"{number:02d}", heading.strip() if heading else None, match.group(0)))
    return found


def heading_text(line: str) -> str | None:
    """The text of a markdown heading line without '#'s and a leading section number ('## 3 · Foo' -> 'Foo')."""
    match = re.match(r"#{1,6}\s+(.*)$", line.strip())
    if not match:
        return None
    return re.sub(r"^\d+(?:\.\d+)*\s*[·.:]\s*", "", match.group(1)).strip()


def headings(notebook: Mapping) -> list[str]:
    """The heading texts of a notebook's markdown cells, in order."""
    texts = []
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") == "markdown":
            texts.extend(t for line in _source(cell).splitlines() if (t := heading_text(line)) is not None)
    return texts


def broken_references(notebooks: Mapping[str, Mapping], planned: Iterable[str] = PLANNED) -> list[str]:
    """Problems with the cross-references of ``notebooks`` (lesson name -> notebook): unknown lessons, missing headings.

    A reference to a ``planned`` lesson is allowed (its headings cannot be checked yet).
    """
    by_number = {name[:2]: name for name in notebooks}
    planned_numbers = {name[:2] for name in planned}
    problems = []
    for name, notebook in notebooks.items():
        for cell in notebook.get("cells", []):
            if cell.get("cell_type") != "markdown" or _is_written_answer(cell):
                continue
            for reference in cross_references(_source(cell)):
                target = by_number.get(reference.lesson_number)
                if target is None:
                    if reference.lesson_number not in planned_numbers:
                        problems.append(f"{name}: {reference.text!r} names no lesson of the course")
                elif reference.heading is not None and reference.heading not in headings(notebooks[target]):
                    problems.append(f"{name}: {reference.text!r}: {target} has no heading {reference.heading!r}")
    return problems


def check_lesson_names(names: Sequence[str], planned: Iterable[str] = PLANNED) -> list[str]:
    """Problems with a list of lesson folders: names outside the syllabus, slots neither built nor planned."""
    planned = tuple(planned)
    problems = [f"{name}: not a lesson of the syllabus" for name in names if name not in SYLLABUS]
    problems += [f"{name}: in PLANNED but it exists" for name in names if name in planned]
    problems += [f"{slot}: neither built nor in PLANNED" for slot in SYLLABUS if slot not in names and slot not in planned]
    return problems
