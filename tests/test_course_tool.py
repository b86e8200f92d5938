"""tools/course.py: stamping, cleaning and the learner's workspace."""

from __future__ import annotations

import copy

import pytest

from notebook_utils import LESSONS, course, load, solution_path, source


def _dirty(notebook: dict) -> dict:
    """A notebook as Jupyter or Colab leaves it: outputs, counts, machine metadata."""
    dirty = copy.deepcopy(notebook)
    dirty["metadata"]["colab"] = {"provenance": []}
    dirty["metadata"]["widgets"] = {"state": {}}
    for cell in dirty["cells"]:
        cell["metadata"]["collapsed"] = True
        cell["metadata"]["ExecuteTime"] = {"end_time": "2026-11-21T10:00:00"}
        if cell["cell_type"] == "code":
            cell["execution_count"] = 7
            cell["outputs"] = [{"output_type": "stream", "name": "stdout", "text": ["0x7f00 12.3 s\n"]}]
    return dirty


@pytest.mark.parametrize("lesson", LESSONS)
def test_clean_restores_the_committed_notebook(lesson: str) -> None:
    committed = load(solution_path(lesson))
    assert course.clean_notebook(_dirty(committed)) == committed


def test_clean_keeps_nbgrader_metadata_and_tags() -> None:
    notebook = load(solution_path(LESSONS[0]))
    cleaned = course.clean_notebook(_dirty(notebook))
    assert [c["metadata"] for c in cleaned["cells"]] == [c["metadata"] for c in notebook["cells"]]


def test_stamp_fills_badges_and_setup_from_the_setting() -> None:
    notebook = load(solution_path(LESSONS[0]))
    for cell in notebook["cells"][1:3]:
        cell["source"] = []
    stamped = course.stamp_notebook(notebook, LESSONS[0])
    repository = course.settings()["repository"]
    assert repository in source(stamped["cells"][1]) and f"notebooks/{LESSONS[0]}/{LESSONS[0]}.ipynb" in source(stamped["cells"][1])
    assert repository in source(stamped["cells"][2]) and "gpucourse.setup()" in source(stamped["cells"][2])
    assert stamped["cells"][2]["metadata"]["nbgrader"]["locked"] is True


def test_stamp_refuses_a_notebook_without_its_tagged_cells() -> None:
    notebook = load(solution_path(LESSONS[0]))
    notebook["cells"][2]["metadata"]["tags"] = []
    with pytest.raises(ValueError, match="setup"):
        course.stamp_notebook(notebook, LESSONS[0])


def test_stamp_readme_needs_its_markers() -> None:
    with pytest.raises(ValueError, match="lessons:start|badges:start"):
        course.stamp_readme("# a README without markers\n")


def test_workspace_never_overwrites_a_learners_copy(tmp_path, monkeypatch) -> None:
    release, work = tmp_path / "notebooks", tmp_path / "work"
    (release / "00_x").mkdir(parents=True)
    (release / "00_x" / "00_x.ipynb").write_text("release v2", encoding="utf-8")
    (release / "00_x" / "data.csv").write_text("1,2", encoding="utf-8")
    (work / "00_x").mkdir(parents=True)
    (work / "00_x" / "00_x.ipynb").write_text("my answers", encoding="utf-8")
    monkeypatch.setattr(course, "RELEASE", release)
    monkeypatch.setattr(course, "WORKSPACE", work)
    monkeypatch.setattr(course, "ROOT", tmp_path)
    assert course.cmd_workspace() == ["work/00_x/data.csv"]
    assert (work / "00_x" / "00_x.ipynb").read_text(encoding="utf-8") == "my answers"
