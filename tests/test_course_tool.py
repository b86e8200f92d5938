"""tools/course.py: stamping, cleaning and the learner's workspace."""

from __future__ import annotations

import ast
import copy
import importlib.metadata
import json
import re
import sys
import tempfile
import types
from pathlib import Path

import pytest

from gpucourse import syllabus
from notebook_utils import LESSONS, course, load, release_path, solution_path, source

import colab_twin  # noqa: E402  (tools/colab_twin.py; notebook_utils puts tools/ on the path)


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


def test_multi_gpu_lessons_get_a_kaggle_badge_and_the_others_do_not() -> None:
    assert set(syllabus.MULTI_GPU_LESSONS) <= set(LESSONS)
    for lesson in LESSONS:
        badges = course.badge_markdown(lesson)
        kaggle = f"https://kaggle.com/kernels/welcome?src=https://github.com/{course.settings()['repository']}/blob/"
        assert (kaggle in badges and f"notebooks/{lesson}/{lesson}.ipynb)" in badges) == (
            lesson in syllabus.MULTI_GPU_LESSONS)


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


# --------------------------------------------------------------------------- Colab: metadata, setup cell, twin

def test_stamp_gives_notebooks_colab_gpu_runtime_metadata() -> None:
    """Colab opens a stamped notebook on a GPU runtime: the learner need not switch after the setup cell."""
    notebook = load(solution_path(LESSONS[0]))
    notebook["metadata"] = {"kernelspec": notebook["metadata"]["kernelspec"]}
    stamped = course.stamp_notebook(notebook, LESSONS[0])
    assert stamped["metadata"]["accelerator"] == "GPU"
    assert stamped["metadata"]["colab"] == {"gpuType": "T4", "provenance": []}


def test_clean_keeps_colab_gpu_runtime_metadata() -> None:
    """What Colab adds to its metadata goes; the GPU runtime stays."""
    notebook = course.stamp_notebook(load(solution_path(LESSONS[0])), LESSONS[0])
    notebook["metadata"]["colab"] = {"gpuType": "T4", "provenance": [{"file_id": "x"}], "name": "mine.ipynb"}
    cleaned = course.clean_notebook(notebook)
    assert cleaned["metadata"]["accelerator"] == "GPU"
    assert cleaned["metadata"]["colab"] == {"gpuType": "T4", "provenance": []}


TITLE_LINE = (course.TEMPLATES / "setup_cell.py").read_text(encoding="utf-8").partition("\n")[0]


def _setup_cell(notebook: dict) -> dict:
    """The one cell tagged 'setup'."""
    (cell,) = [c for c in notebook["cells"] if "setup" in c["metadata"].get("tags", [])]
    return cell


def test_setup_title_is_a_plain_colab_form_title() -> None:
    """'# @title Words': no option braces (Colab reads '{...}' as form options), a newcomer's sentence saying run it."""
    assert TITLE_LINE.startswith("# @title Setup: ") and "Run it first." in TITLE_LINE
    assert not set("{}`") & set(TITLE_LINE) and len(TITLE_LINE) <= 120
    assert ast.parse(TITLE_LINE).body == []  # a comment: Python, IPython and nbgrader run the cell as before


@pytest.mark.parametrize("path", course.committed_notebooks(), ids=lambda p: f"{p.parent.parent.name}/{p.stem}")
def test_every_setup_cell_is_a_titled_form(path: Path) -> None:
    """Colab shows the title line (cellView=form); JupyterLab hides the code (jupyter.source_hidden)."""
    cell = _setup_cell(load(path))
    assert source(cell).partition("\n")[0] == TITLE_LINE
    assert cell["metadata"]["cellView"] == "form" and cell["metadata"]["jupyter"] == {"source_hidden": True}
    assert course.setup_form_problems(load(path)) == []


def test_every_lesson_has_both_notebooks_checked_for_the_form() -> None:
    assert len(course.committed_notebooks()) == 2 * len(LESSONS) and LESSONS


def test_stamp_makes_the_setup_cell_a_form() -> None:
    notebook = load(solution_path(LESSONS[0]))
    setup = _setup_cell(notebook)
    setup["metadata"] = {key: setup["metadata"][key] for key in ("tags", "nbgrader")}
    setup["source"] = ["# an old setup cell\n"]
    stamped = _setup_cell(course.stamp_notebook(notebook, LESSONS[0]))
    assert stamped["metadata"]["cellView"] == "form" and stamped["metadata"]["jupyter"] == {"source_hidden": True}
    assert source(stamped).startswith(TITLE_LINE + "\n")


def test_clean_keeps_the_setup_form_and_strips_view_state_elsewhere() -> None:
    """JupyterLab's and Colab's view keys are machine state on every other cell; on the setup cell only the form stays."""
    notebook = _dirty(load(solution_path(LESSONS[0])))
    for cell in notebook["cells"]:
        cell["metadata"]["cellView"] = "form"
        cell["metadata"]["jupyter"] = {"source_hidden": True, "outputs_hidden": True}
    cleaned = course.clean_notebook(notebook)
    setup = _setup_cell(cleaned)
    assert setup["metadata"]["cellView"] == "form" and setup["metadata"]["jupyter"] == {"source_hidden": True}
    others = [cell["metadata"] for cell in cleaned["cells"] if cell is not setup]
    assert others and not any({"cellView", "jupyter", "collapsed", "ExecuteTime"} & set(m) for m in others)


@pytest.mark.parametrize("break_form, expected", [
    (lambda cell: cell["metadata"].pop("cellView"), "cellView='form'"),
    (lambda cell: cell["metadata"].pop("jupyter"), "jupyter.source_hidden=True"),
    (lambda cell: cell["metadata"].update(jupyter={"source_hidden": False}), "jupyter.source_hidden=True"),
    (lambda cell: cell.update(source=["# Setup\n", "import os\n"]), "first line must be '# @title '"),
    (lambda cell: cell.update(source=["# @title Setup { display-mode: \"code\" }\n"]), "without braces"),
])
def test_check_finds_a_setup_cell_that_is_not_a_form(break_form, expected: str, tmp_path, monkeypatch) -> None:
    """`course.py check` lists a committed notebook whose setup cell lost a form key or its title line."""
    notebook = load(release_path(LESSONS[0]))
    break_form(_setup_cell(notebook))
    (tmp_path / "notebooks" / "00_x").mkdir(parents=True)
    broken = tmp_path / "notebooks" / "00_x" / "00_x.ipynb"
    broken.write_text(json.dumps(notebook), encoding="utf-8")
    monkeypatch.setattr(course, "ROOT", tmp_path)
    monkeypatch.setattr(course, "committed_notebooks", lambda: [broken])
    found = course.form_differences()
    assert len(found) == 1 and found[0].startswith("notebooks/00_x/00_x.ipynb: ") and expected in found[0], found


def test_check_setup_title_refuses_bad_input() -> None:
    with pytest.raises(TypeError, match="line"):
        course.check_setup_title(None)  # type: ignore[arg-type]
    for line in ("# Setup", "# @title ", "# @title Setup {run: 'auto'}"):
        with pytest.raises(ValueError, match="line must be"):
            course.check_setup_title(line)


def test_setup_cell_adds_no_learner_words() -> None:
    """The word budget counts markdown only: the title line is code, so lessons' word counts do not change."""
    notebook = load(solution_path(LESSONS[0]))
    setup = _setup_cell(notebook)
    assert syllabus.cell_words(setup) == 0
    before = syllabus.learner_words(notebook)
    setup["source"] = [TITLE_LINE + " and more words here\n"]
    assert syllabus.learner_words(notebook) == before > 0


def test_setup_cell_installs_a_release_with_colabs_packages_pinned() -> None:
    """On Colab: gpucourse[colab] at tag v<version>, every preinstalled package pinned, advice with Colab's menus."""
    cell = course.setup_cell_source()
    settings = course.settings()
    assert f"git+https://github.com/{settings['repository']}@v{settings['version']}" in cell
    assert cell.index(f"{settings['repository']}@v{settings['version']}") < cell.index(
        f"{settings['repository']}@{settings['branch']}\"")  # the release first, the default branch only as fallback
    assert "{" + "version}" not in cell and "{" + "branch}" not in cell
    assert "gpucourse[colab] @ {source}" in cell and "GPUCOURSE_PIP_SOURCE" in cell
    assert "-c {constraints.name}" in cell and "importlib.metadata.distributions()" in cell
    assert "Runtime > Disconnect and delete runtime" in cell and "Kernel > Restart Kernel" in cell
    compile(cell.replace("get_ipython()", "ipython"), "setup", "exec")


class RecordingShell:
    """A stand-in for IPython's shell: records system() commands and sets _exit_code as IPython does."""

    def __init__(self, exit_codes: list[int] | None = None) -> None:
        self.commands: list[str] = []
        self.user_ns: dict = {}
        self._exit_codes = list(exit_codes or [])

    def system(self, command: str) -> None:
        self.commands.append(command)
        self.user_ns["_exit_code"] = self._exit_codes.pop(0) if self._exit_codes else 0


def _run_install_branch(tmp_path: Path, shell: RecordingShell, *, colab: bool = True, kaggle: bool = False,
                        source: str | None = "file:///checkout") -> dict:
    """Run the setup cell up to its import, on a pretend Colab or Kaggle; return its namespace."""
    cell = course.setup_cell_source().split("try:")[0]
    namespace = {"get_ipython": lambda: shell}
    modules = dict(sys.modules, **({"google.colab": types.ModuleType("google.colab")} if colab else {}))
    if not colab:
        modules.pop("google.colab", None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "modules", modules)
        if source is None:
            patch.delenv("GPUCOURSE_PIP_SOURCE", raising=False)
        else:
            patch.setenv("GPUCOURSE_PIP_SOURCE", source)
        if kaggle:
            patch.setenv("KAGGLE_KERNEL_RUN_TYPE", "Interactive")
        else:
            patch.delenv("KAGGLE_KERNEL_RUN_TYPE", raising=False)
        patch.setattr(tempfile, "tempdir", str(tmp_path))
        exec(compile(cell, "setup", "exec"), namespace)
    return namespace


def test_setup_cell_pins_every_installed_package(tmp_path) -> None:
    """Run the Colab branch of the setup cell with a recording shell: the pip command and its constraints."""
    shell = RecordingShell()
    namespace = _run_install_branch(tmp_path, shell)
    assert len(shell.commands) == 1 and "'gpucourse[colab] @ file:///checkout'" in shell.commands[0]
    pins = dict(line.split("===") for line in Path(namespace["constraints"].name).read_text().splitlines())
    assert pins["pytest"] == importlib.metadata.version("pytest") and pins["numpy"] == importlib.metadata.version("numpy")
    assert "gpucourse" not in pins


def test_setup_cell_falls_back_to_the_default_branch_when_the_release_tag_is_missing(tmp_path, capsys) -> None:
    settings = course.settings()
    shell = RecordingShell(exit_codes=[1, 0])  # the tag does not exist yet; the branch installs
    _run_install_branch(tmp_path, shell, source=None)
    assert len(shell.commands) == 2
    assert f"@v{settings['version']}'" in shell.commands[0] and f"@{settings['branch']}'" in shell.commands[1]
    notice = capsys.readouterr().out.strip().splitlines()
    assert notice == [f"Release v{settings['version']} of the course package is not published yet: "
                      "installing its latest version instead."]


def test_setup_cell_installs_the_release_alone_when_it_exists(tmp_path, capsys) -> None:
    shell = RecordingShell(exit_codes=[0])
    _run_install_branch(tmp_path, shell, source=None)
    assert len(shell.commands) == 1 and f"@v{course.settings()['version']}'" in shell.commands[0]
    assert capsys.readouterr().out == ""


def test_setup_cell_installs_on_kaggle_too_and_nowhere_else(tmp_path) -> None:
    kaggle = RecordingShell()
    _run_install_branch(tmp_path, kaggle, colab=False, kaggle=True)
    assert len(kaggle.commands) == 1
    local = RecordingShell()
    _run_install_branch(tmp_path, local, colab=False, kaggle=False)
    assert local.commands == []


def _cell(kind: str, outputs: list[dict], grade_id: str | None = None) -> dict:
    cell = {"cell_type": kind, "id": grade_id or "c", "metadata": {}, "source": "", "outputs": outputs}
    if grade_id:
        cell["metadata"]["nbgrader"] = {"grade_id": grade_id}
    return cell


STDERR = {"output_type": "stream", "name": "stderr", "text": "W1122 No CUDA runtime is found\n"}
NOT_IMPLEMENTED = {"output_type": "error", "ename": "NotImplementedError", "evalue": "", "traceback": []}
NAME_ERROR = {"output_type": "error", "ename": "NameError", "evalue": "name 'cuda' is not defined", "traceback": []}


def _executed(setup: list[dict], solution: list[dict], smoke: list[dict], tests: list[dict]) -> dict:
    """An executed notebook: setup cell, one exercise (solution, smoke check, tests), a cell after it."""
    return {"cells": [_cell("code", setup), _cell("markdown", [], "ex1-question"), _cell("code", solution, "ex1-solution"),
                      _cell("code", smoke), _cell("code", tests, "ex1-tests"), _cell("code", [])]}


def test_twin_accepts_a_student_notebook_failing_only_in_its_exercises() -> None:
    assert colab_twin.problems(_executed([], [], [NOT_IMPLEMENTED], [NOT_IMPLEMENTED]), student=True) == []


@pytest.mark.parametrize("cells, student, expected", [
    (([STDERR], [], [], []), False, "cell 0 (c) writes to stderr"),
    (([STDERR], [], [], []), True, "writes to stderr"),
    (([], [], [NOT_IMPLEMENTED], []), False, "raises NotImplementedError"),
    (([NAME_ERROR], [], [], []), True, "raises NameError"),
    (([], [], [NAME_ERROR], []), True, "raises NameError"),
    (([NOT_IMPLEMENTED], [], [], []), True, "raises NotImplementedError"),
])
def test_twin_flags_stderr_and_errors_outside_exercises(cells: tuple, student: bool, expected: str) -> None:
    found = colab_twin.problems(_executed(*cells), student=student)
    assert len(found) == 1 and expected in found[0], found


def test_twin_flags_pip_warnings_in_the_setup_cell() -> None:
    notebook = _executed([{"output_type": "stream", "name": "stdout", "text": "\x1b[31mERROR: pip's dependency "
                           "resolver does not currently take into account all the packages\x1b[0m\r\n"}], [], [], [])
    notebook["cells"][0]["metadata"]["tags"] = ["setup"]
    found = colab_twin.problems(notebook, student=False)
    assert len(found) == 1 and "(setup) shows pip's \"ERROR: pip's dependency resolver" in found[0], found


def test_twin_sees_a_changed_preinstalled_package() -> None:
    assert colab_twin.changed_versions({"numpy": "2.1.3", "torch": "2.11.0"}, {"numpy": "2.3.0", "torch": "2.11.0",
                                                                              "numba": "0.68.1"}) == {"numpy": ("2.1.3", "2.3.0")}


def test_colab_versions_file_names_python_and_the_big_four() -> None:
    versions = colab_twin.colab_versions()
    assert re.fullmatch(r"3\.\d+", versions["python"])
    assert {"torch", "tensorflow", "keras", "numpy"} <= set(versions["preinstalled"])
    assert not set(versions["runner"]) & set(versions["preinstalled"])


def test_the_install_set_check_asks_pip_for_a_dry_run_of_the_pinned_install():
    """tools/check_install_sets.py: pip resolves, installs nothing, for one Python version and Linux x86-64 wheels."""
    import importlib.util

    from notebook_utils import ROOT

    spec = importlib.util.spec_from_file_location("check_install_sets", ROOT / "tools" / "check_install_sets.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    command = tool.pip_command("3.13")
    assert command[1:4] == ["-m", "pip", "install"] and "--dry-run" in command and "--only-binary=:all:" in command
    assert command[command.index("--python-version") + 1] == "3.13"
    assert command[command.index("--constraint") + 1].endswith("constraints.txt")
    assert "tensorflow>=2.16" in command and "torch>=2.4" in command and "nbgrader>=0.9.5" in command
    on_314 = tool.pip_command("3.14")  # TensorFlow's marker leaves it out where it has no wheel
    assert "torch>=2.4" in on_314 and not [r for r in on_314 if r.startswith(("tensorflow", "keras"))]
    with pytest.raises(ValueError, match="^python_version must look like '3.13'"):
        tool.pip_command("latest")
