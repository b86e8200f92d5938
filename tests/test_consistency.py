"""Consistency of the course's files: generated files in sync, lesson structure, no leaks, dependency lists."""

from __future__ import annotations

import ast
import re
import subprocess
from pathlib import Path
import tomllib

import pytest
from IPython.core.inputtransformer2 import TransformerManager
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from notebook_utils import (LESSONS, PARTIAL_CREDIT, ROOT, SLIM_LESSONS, TWO_EXERCISE_LESSONS, HIDDEN_REGION, SOLUTION_REGION, course,
                            ends_in_bare_expression, exercises, load, nbgrader, release_path, solution_path, source,
                            wrong_answers, written_answers)

# The course's picture of Google Colab, one file shared with the Colab twin (`make test-colab`). Installing the course
# must never change Colab's packages, so every bound of the helper package must admit these versions.
with open(ROOT / "tools" / "colab_versions.toml", "rb") as _handle:
    COLAB = tomllib.load(_handle)
COLAB_VERSIONS = {"python": COLAB["python"], **COLAB["preinstalled"]}

# conda-forge names of PyPI packages that are spelled differently there
CONDA_NAMES = {"torch": "pytorch"}


def test_course_has_lessons() -> None:
    assert LESSONS[:2] == ["00_getting_started", "01_architecture"], LESSONS


def test_release_holds_each_lesson_and_nothing_else() -> None:
    """notebooks/ has a folder per lesson with the files of its solutions/ folder (nbgrader copies the assets); each
    lesson's notebook is compared with a fresh generation in its grading pipeline (tests/test_grading.py)."""
    def names(folder: Path) -> set[str]:
        files = [p for p in folder.rglob("*") if p.is_file()
                 and ".ipynb_checkpoints" not in p.parts and "__pycache__" not in p.parts]
        ignored = subprocess.run(["git", "check-ignore", "--stdin"], input="\n".join(map(str, files)), cwd=ROOT,
                                 capture_output=True, text=True).stdout.split()  # e.g. a script a lesson wrote
        return {str(p.relative_to(folder)) for p in files if str(p) not in ignored}

    assert sorted(p.name for p in (ROOT / "notebooks").iterdir()) == LESSONS
    for lesson in LESSONS:
        assert names(ROOT / "notebooks" / lesson) == names(ROOT / "solutions" / lesson), lesson


def test_notebooks_are_stamped_and_clean() -> None:
    """Badges, setup cells and the README table are stamped; no outputs or machine metadata anywhere."""
    assert course.stamp_differences() == []


def test_repository_address_written_once() -> None:
    """The repository address lives in pyproject.toml only; every other copy is stamped from it."""
    repository = course.settings()["repository"]
    hand_written = [p for p in ROOT.rglob("*") if p.is_file() and p.suffix in {".py", ".md", ".yml", ".toml", ".cfg"}
                    and ".venv" not in p.parts and p.name != "pyproject.toml"
                    and repository in p.read_text(encoding="utf-8", errors="ignore")
                    and not (p.name == "README.md" and p.parent == ROOT)]
    assert hand_written == []


@pytest.mark.parametrize("lesson", LESSONS)
def test_lesson_anatomy(lesson: str) -> None:
    """Title, badges and setup first; 3-5 autograded exercises (1-2 in a slim lesson, 2 where one is large) with a
    solution and a test cell each; a written answer."""
    cells = load(solution_path(lesson))["cells"]
    assert cells[0]["cell_type"] == "markdown" and source(cells[0]).startswith(f"# {lesson[:2]} · ")
    assert cells[1]["metadata"].get("tags") == ["badges"] and cells[2]["metadata"].get("tags") == ["setup"]
    found = exercises(lesson)
    low, high = (1, 2) if lesson in SLIM_LESSONS else (2, 5) if lesson in TWO_EXERCISE_LESSONS else (3, 5)
    assert low <= len(found) <= high, f"{lesson}: {len(found)} autograded exercises"
    assert [e.name for e in found] == [f"ex{i}" for i in range(1, len(found) + 1)]
    assert written_answers(lesson), f"{lesson}: no written answer"
    ids = [nbgrader(c)["grade_id"] for c in cells if nbgrader(c)]
    assert len(ids) == len(set(ids)), f"{lesson}: duplicate grade ids"
    cell_ids = [cell.get("id") for cell in cells]  # nbformat 4.5 requires them; a cell added by a script may lack one
    assert None not in cell_ids and len(cell_ids) == len(set(cell_ids)), f"{lesson}: a cell without an id, or a repeat"
    for exercise in found:
        assert exercise.solution_id in ids and f"{exercise.name}-question" in ids
        assert exercise.points > 0


@pytest.mark.parametrize("lesson", LESSONS)
def test_test_cells_follow_the_rules(lesson: str) -> None:
    """Test cells: docstring first, visible and hidden checks, no bare final expression, locked."""
    for cell in load(solution_path(lesson))["cells"]:
        meta = nbgrader(cell)
        if cell["cell_type"] != "code" or not meta.get("grade"):
            continue
        text = source(cell)
        assert re.match(r'^"""[^\n]+"""', text), f"{meta['grade_id']}: first line must be a docstring title"
        assert meta.get("locked") is True and meta.get("solution") is False, meta["grade_id"]
        assert text.count("### BEGIN HIDDEN TESTS") == 1 == text.count("### END HIDDEN TESTS"), meta["grade_id"]
        visible = HIDDEN_REGION.sub("", text)
        assert "check(" in visible or "assert " in visible, f"{meta['grade_id']}: no visible check"
        if meta["grade_id"] in PARTIAL_CREDIT.get(lesson, ()):  # nbgrader reads the points it ends in
            last = ast.parse(text).body[-1]
            assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Name) and last.value.id == "tests", \
                f"{meta['grade_id']}: a partial-credit cell ends in the bare name `tests` (the points @run_now bound)"
        else:
            assert not ends_in_bare_expression(text), f"{meta['grade_id']}: ends in a bare expression"


@pytest.mark.parametrize("lesson", LESSONS)
def test_solution_cells_define_functions(lesson: str) -> None:
    """Each solution region sits inside a function, so the student version raises NotImplementedError when called.

    A cell may hold several functions (lesson 16's tensor-parallel pair), each with its own region.
    """
    for cell in load(solution_path(lesson))["cells"]:
        meta = nbgrader(cell)
        if cell["cell_type"] == "code" and meta.get("solution"):
            text = source(cell)
            regions = text.count("### BEGIN SOLUTION")
            assert regions >= 1 and regions == text.count("### END SOLUTION"), meta["grade_id"]
            marker_lines = [line for line in text.splitlines() if "### BEGIN SOLUTION" in line]
            for before, marker_line in zip(text.split("### BEGIN SOLUTION")[:-1], marker_lines):
                assert "def " in before.rsplit("### END SOLUTION", 1)[-1] and marker_line.startswith(" "), (
                    f"{meta['grade_id']}: put the solution inside a function body")


def _leak_candidates(notebook: dict) -> set[str]:
    """Distinctive lines of solution and hidden-test regions (not found elsewhere in the notebook)."""
    secret, public = set(), set()
    for cell in notebook["cells"]:
        text = source(cell)
        regions = SOLUTION_REGION.findall(text) + HIDDEN_REGION.findall(text)
        if nbgrader(cell).get("solution") and cell["cell_type"] == "markdown":
            regions.append(text)
        for region in regions:
            secret |= {line.strip() for line in region.splitlines() if len(line.strip()) >= 20}
        rest = HIDDEN_REGION.sub("", SOLUTION_REGION.sub("", text))
        if not (nbgrader(cell).get("solution") and cell["cell_type"] == "markdown"):
            public |= {line.strip() for line in rest.splitlines()}
    return secret - public


@pytest.mark.parametrize("lesson", LESSONS)
def test_release_leaks_no_solution_or_hidden_test(lesson: str) -> None:
    text = release_path(lesson).read_text(encoding="utf-8")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS"):
        assert marker not in text
    release_lines = {line.strip() for cell in load(release_path(lesson))["cells"] for line in source(cell).splitlines()}
    leaked = _leak_candidates(load(solution_path(lesson))) & release_lines
    assert not leaked, f"{lesson}: solution or hidden-test lines in the release: {sorted(leaked)[:3]}"


@pytest.mark.parametrize("lesson", LESSONS)
def test_every_exercise_has_a_wrong_answer(lesson: str) -> None:
    """tests/wrong_answers/<lesson>.py covers every exercise, with a different answer than the solution."""
    wrong = wrong_answers(lesson)
    solution = load(solution_path(lesson))
    assert set(wrong) == {e.solution_id for e in exercises(lesson)}
    for grade_id, text in wrong.items():
        original = next(source(c) for c in solution["cells"] if nbgrader(c).get("grade_id") == grade_id)
        assert "### BEGIN SOLUTION" not in text and text.strip() != SOLUTION_REGION.sub("", original).strip()
        compile(TransformerManager().transform_cell(text), grade_id, "exec")  # as IPython runs it (%%writefile too)


# --------------------------------------------------------------------------- dependency lists

def _pyproject() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)


def _requirements(*extras: str) -> list[Requirement]:
    project = _pyproject()["project"]
    found = [Requirement(r) for r in project["dependencies"]]
    for extra in extras:
        found += [Requirement(r) for r in project["optional-dependencies"][extra]]
    return found


def _conda_specs(path) -> dict[str, str]:
    """name -> version spec ('' if none) of a conda environment file, pip section included."""
    specs = {}
    for entry in yaml.safe_load(path.read_text(encoding="utf-8"))["dependencies"]:
        items = entry["pip"] if isinstance(entry, dict) else [entry]
        for item in items:
            match = re.match(r"^([A-Za-z0-9_.\-]+)\s*(.*)$", item)
            specs[match.group(1).lower()] = match.group(2).replace(" ", "")
    return specs


@pytest.mark.parametrize("env_file", ["environment.yml", "binder/environment.yml"])
def test_conda_environments_match_pyproject(env_file: str) -> None:
    """Every dependency of the package and its course extras is in the environment file, with the same lower bound."""
    specs = _conda_specs(ROOT / env_file)
    extras = ("torch", "tensorflow", "gpu", "course") + (("test",) if env_file == "environment.yml" else ())
    for requirement in _requirements(*extras):
        names = [requirement.name.lower(), CONDA_NAMES.get(requirement.name, ""), f"{CONDA_NAMES.get(requirement.name, '')}-cpu"]
        present = [name for name in names if name in specs]
        assert present, f"{env_file} lacks {requirement.name}"
        assert specs[present[0]] == str(requirement.specifier), (
            f"{env_file}: {present[0]} {specs[present[0]]!r} vs pyproject {requirement}")
    assert specs.get("python", "").startswith(">=3.11") or specs.get("python", "").startswith("=3.11")


def test_triton_is_installed_on_linux_only_and_never_on_colab() -> None:
    """Lesson 06's triton: its own extra with a Linux marker (wheels are Linux-only), the same requirement in the
    conda file's pip section and Binder's postBuild, in the test environment, and never in the Colab extra (Colab's
    CUDA torch brings its own triton)."""
    (triton,) = _requirements("triton")[len(_requirements()):]
    assert triton.name == "triton" and str(triton.marker) == 'sys_platform == "linux"'
    pip_section = [entry for entry in yaml.safe_load((ROOT / "environment.yml").read_text(encoding="utf-8"))
                   ["dependencies"] if isinstance(entry, dict)][0]["pip"]
    assert Requirement(next(item for item in pip_section if item.startswith("triton"))) == triton
    assert f'"triton{triton.specifier}"' in (ROOT / "binder" / "postBuild").read_text(encoding="utf-8")
    assert "triton" in re.search(r"^EXTRAS := (.*)$", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M).group(1)
    assert "triton" not in {r.name for r in _requirements("colab")}


def test_binder_installs_the_package() -> None:
    post_build = (ROOT / "binder" / "postBuild").read_text(encoding="utf-8")
    assert post_build.startswith("#!/bin/bash") and "set -e" in post_build and "pip install" in post_build


def test_lower_bounds_admit_colab_versions() -> None:
    """Installing the course on Colab never up- or downgrades Colab's own torch, tensorflow, keras or numpy."""
    project = _pyproject()["project"]
    assert Version(COLAB_VERSIONS["python"]) in SpecifierSet(project["requires-python"])
    checked = set()
    for requirement in _requirements("torch", "tensorflow", "gpu", "colab"):
        if requirement.name in COLAB_VERSIONS:
            assert requirement.specifier.contains(COLAB_VERSIONS[requirement.name], prereleases=True), requirement
            checked.add(requirement.name)
    assert checked >= {"torch", "tensorflow", "keras", "numpy", "matplotlib", "psutil", "tqdm", "scikit-learn"}


def test_colab_extra_installs_only_what_colab_lacks() -> None:
    """The setup cell installs `gpucourse[colab]` on Colab: nothing Colab preinstalls, everything the lessons need
    beyond it (the course's numba and NVML bindings)."""
    colab_extra = {r.name for r in _requirements("colab")} - {r.name for r in _requirements()}
    assert colab_extra == {"numba", "nvidia-ml-py"}
    assert not colab_extra & set(COLAB["preinstalled"])
    assert not {r.name for r in _requirements()} - set(COLAB["preinstalled"]), "a core dependency Colab lacks"


def test_course_tools_are_not_core_dependencies() -> None:
    core = {Requirement(r).name for r in _pyproject()["project"]["dependencies"]}
    assert not core & {"nbgrader", "jupyterlab", "torch", "tensorflow", "keras", "notebook"}


def test_ci_runs_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "make test       #" in readme and re.search(r"^make test$", ci, re.M)


def test_ci_runs_the_colab_twin_after_the_tests() -> None:
    """CI runs `make test`, then `make test-colab` (the lessons as a Colab learner runs them)."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "make test-colab" in ci and ci.index("make test-colab") > ci.index("make test")
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^test-colab:.*\n\t.*tools/colab_twin\.py", makefile, re.M)


@pytest.mark.parametrize("found, expected", [({"python3": True, "python3.13": True}, "python3"),
                                             ({"python3": False, "python3.12": True}, "python3.12"),
                                             ({"python3": False, "python3.13": True, "python3.11": True}, "python3.13"),
                                             ({"python3": False}, "python3"), ({}, "python3")])
def test_make_prefers_a_python_that_every_pinned_package_supports(tmp_path, found, expected):
    """python3 when it is 3.11 to 3.13; where it is 3.14 (no TensorFlow wheel), python3.13, 3.12 or 3.11 first.
    Each fake interpreter answers make's version check: exit 0 for a supported version, 1 for another."""
    import os
    import shutil
    import subprocess

    for name, supported in found.items():
        fake = tmp_path / name
        fake.write_text(f"#!/bin/sh\nexit {0 if supported else 1}\n")
        fake.chmod(0o755)
    tools = tmp_path / "tools"  # make alone, so that no real interpreter next to it is found
    tools.mkdir()
    for tool in ("make", "echo"):
        (tools / tool).symlink_to(shutil.which(tool))
    result = subprocess.run(["make", "-s", "-C", str(ROOT), "print-python"], capture_output=True, text=True,
                            env={**os.environ, "PATH": f"{tmp_path}:{tools}"}, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == expected
