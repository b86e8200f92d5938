"""Course maintenance: stamp badges and setup cells, clean notebooks, generate the student release.

    python tools/course.py stamp      copy the repository address into every notebook and the README
    python tools/course.py clean      strip outputs, execution counts and machine metadata
    python tools/course.py release    regenerate notebooks/ from solutions/ with nbgrader
    python tools/course.py check      fail if any of the above would change a committed file
    python tools/course.py workspace  copy the student notebooks into work/ (never overwrites)
    python tools/course.py gradebook  register every lesson in the instructor's gradebook (notebooks/ untouched)
    python tools/course.py report LESSON  after autograde: per exercise the mean, full marks, the most failed checks
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # this checkout's gpucourse, whatever the environment has installed

from gpucourse import syllabus  # noqa: E402  (the lesson names of the v2 syllabus)
SOLUTIONS = ROOT / "solutions"
RELEASE = ROOT / "notebooks"
WORKSPACE = ROOT / "work"
TEMPLATES = Path(__file__).resolve().parent / "templates"

KEPT_CELL_METADATA = ("nbgrader", "tags", "deletable", "editable")
# The setup cell shows as its title line only: a form on Colab (from its '# @title' line), hidden code in JupyterLab.
SETUP_TITLE_PREFIX = "# @title "
SETUP_FORM_METADATA = {"cellView": "form", "jupyter": {"source_hidden": True}}
# Colab opens a notebook carrying this on a GPU runtime (a T4), so a learner need not switch before the setup cell.
COLAB_METADATA = {"accelerator": "GPU", "colab": {"gpuType": "T4", "provenance": []}}
LESSONS_START, LESSONS_END = "<!-- lessons:start -->", "<!-- lessons:end -->"
BADGES_START, BADGES_END = "<!-- badges:start -->", "<!-- badges:end -->"
RENAMED_START, RENAMED_END = "<!-- renamed:start -->", "<!-- renamed:end -->"


# --------------------------------------------------------------------------- settings and lessons

def settings() -> dict[str, str]:
    """The course's settings: [tool.gpucourse] in pyproject.toml, and the package version (the release tag is v<it>)."""
    with open(ROOT / "pyproject.toml", "rb") as handle:
        pyproject = tomllib.load(handle)
    block = pyproject["tool"]["gpucourse"]
    return {"repository": block["repository"], "branch": block["branch"], "version": pyproject["project"]["version"]}


def lessons(course_root: Path = ROOT) -> list[str]:
    """Lesson folder names in order ('00_getting_started', ...): every solutions/NN_name/NN_name.ipynb."""
    return sorted(p.parent.name for p in (course_root / "solutions").glob("*/*.ipynb")
                  if p.stem == p.parent.name and ".ipynb_checkpoints" not in p.parts)


def read_notebook(path: Path) -> dict:
    """Load a notebook as plain JSON (keeps key order, no validation surprises)."""
    return json.loads(path.read_text(encoding="utf-8"))


def write_notebook(path: Path, notebook: dict) -> bool:
    """Write a notebook in nbformat's on-disk style; return True if the file changed."""
    text = json.dumps(notebook, indent=1, ensure_ascii=False, sort_keys=True) + "\n"
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


def _source(cell: dict) -> str:
    """A cell's source as one string."""
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _set_source(cell: dict, text: str) -> None:
    """Store ``text`` as a cell's source in the line-list style nbformat writes."""
    cell["source"] = text.splitlines(keepends=True)


# --------------------------------------------------------------------------- stamp

def badge_markdown(lesson: str) -> str:
    """Colab and Binder badges for one lesson's student notebook."""
    s = settings()
    path = f"notebooks/{lesson}/{lesson}.ipynb"
    colab = f"https://colab.research.google.com/github/{s['repository']}/blob/{s['branch']}/{path}"
    binder = f"https://mybinder.org/v2/gh/{s['repository']}/{s['branch']}?urlpath=lab/tree/{path}"
    badges = (f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab}) "
              f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder})")
    if lesson in syllabus.MULTI_GPU_LESSONS:  # two free GPUs: Kaggle opens the notebook straight from GitHub
        kaggle = f"https://kaggle.com/kernels/welcome?src=https://github.com/{s['repository']}/blob/{s['branch']}/{path}"
        badges += f" [![Open In Kaggle](https://kaggle.com/static/images/open-in-kaggle.svg)]({kaggle})"
    return badges


def setup_cell_source() -> str:
    """The setup cell every lesson starts with, filled in from the settings (on Colab it installs release v<version>)."""
    text = (TEMPLATES / "setup_cell.py").read_text(encoding="utf-8")
    check_setup_title(text.partition("\n")[0])
    for key, value in settings().items():
        text = text.replace("{" + key + "}", value)
    return text.rstrip("\n")


def check_setup_title(line: str) -> None:
    """Refuse a first line that Colab would not show as a plain form title ('# @title Words', no option braces)."""
    if not isinstance(line, str):
        raise TypeError(f"line must be a str, not {type(line).__name__}")
    title = line.removeprefix(SETUP_TITLE_PREFIX)
    if title == line or not title.strip() or "{" in title or "}" in title or "\n" in line:
        raise ValueError(f"line must be {SETUP_TITLE_PREFIX!r} and a one-line title without braces, not {line!r}")


def _tagged(notebook: dict, tag: str) -> list[dict]:
    """Cells carrying ``tag`` in their metadata."""
    return [cell for cell in notebook["cells"] if tag in cell.get("metadata", {}).get("tags", [])]


def _lock(cell: dict, grade_id: str) -> None:
    """Make a cell read-only for nbgrader (restored from the source at autograde)."""
    cell.setdefault("metadata", {})["nbgrader"] = {
        "grade": False, "grade_id": grade_id, "locked": True, "schema_version": 3, "solution": False, "task": False}


def stamp_notebook(notebook: dict, lesson: str) -> dict:
    """Replace the notebook's 'badges' and 'setup' cells with the stamped versions; add Colab's GPU runtime metadata."""
    for tag, expected in (("badges", 1), ("setup", 1)):
        found = len(_tagged(notebook, tag))
        if found != expected:
            raise ValueError(f"{lesson}: expected {expected} cell tagged {tag!r}, found {found}")
    badges, setup = _tagged(notebook, "badges")[0], _tagged(notebook, "setup")[0]
    _set_source(badges, badge_markdown(lesson))
    _lock(badges, "badges")
    _set_source(setup, setup_cell_source())
    _lock(setup, "setup")
    setup["metadata"].update(copy.deepcopy(SETUP_FORM_METADATA))
    notebook.setdefault("metadata", {}).update(copy.deepcopy(COLAB_METADATA))
    return notebook


def lesson_title(lesson: str) -> str:
    """The first '# ' heading of a lesson's solution notebook."""
    for cell in read_notebook(SOLUTIONS / lesson / f"{lesson}.ipynb")["cells"]:
        for line in _source(cell).splitlines():
            if cell["cell_type"] == "markdown" and line.startswith("# "):
                return line[2:].split("·", 1)[-1].strip()
    raise ValueError(f"{lesson}: no '# Title' heading found")


def readme_lesson_table() -> str:
    """The README's table of lessons, one Colab badge each; syllabus slots not built yet are listed as planned."""
    built = lessons()
    rows = ["| # | lesson | open |", "| --- | --- | --- |"]
    for slot in sorted(set(built) | set(syllabus.PLANNED)):
        if slot in built:
            rows.append(f"| {slot[:2]} | {lesson_title(slot)} | {badge_markdown(slot)} |")
        else:
            rows.append(f"| {slot[:2]} | {syllabus.TITLES[slot]} | planned: not written yet |")
    return "\n".join(rows)


def readme_renamed_table() -> str:
    """The README's map from the lessons of the earlier editions to the lessons that hold their material now."""
    rows = ["| edition | old lesson | now in |", "| --- | --- | --- |"]
    for edition, renamed in syllabus.EDITIONS:
        for old, new in renamed.items():
            rows.append(f"| {edition} | `{old}` | " + ", ".join(f"`{name}`" for name in new) + " |")
    return "\n".join(rows)


def course_badges() -> str:
    """The README's top badges: the whole course on Binder, the first lesson on Colab."""
    s = settings()
    binder = f"https://mybinder.org/v2/gh/{s['repository']}/{s['branch']}?urlpath=lab/tree/notebooks"
    first = lessons()[0]
    colab = f"https://colab.research.google.com/github/{s['repository']}/blob/{s['branch']}/notebooks/{first}/{first}.ipynb"
    return (f"[![Binder](https://mybinder.org/badge_logo.svg)]({binder}) "
            f"[![Open In Colab](https://colab.research.google.com/assets/colab-badge.svg)]({colab})")


def _replace_between(text: str, start: str, end: str, content: str) -> str:
    """Replace what lies between two marker comments of the README."""
    if start not in text or end not in text:
        raise ValueError(f"README.md must contain {start} and {end}")
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{content}\n{end}{tail}"


def stamp_readme(text: str) -> str:
    """Replace the README's badges and lesson table between their markers."""
    text = _replace_between(text, BADGES_START, BADGES_END, course_badges())
    text = _replace_between(text, RENAMED_START, RENAMED_END, readme_renamed_table())
    return _replace_between(text, LESSONS_START, LESSONS_END, readme_lesson_table())


# --------------------------------------------------------------------------- clean

def kept_cell_metadata(metadata: dict) -> dict:
    """The course's own part of a cell's metadata; the setup cell also keeps its form keys (cellView, source_hidden)."""
    if not isinstance(metadata, dict):
        raise TypeError(f"metadata must be a dict, not {type(metadata).__name__}")
    kept = {key: metadata[key] for key in KEPT_CELL_METADATA if key in metadata}
    if "setup" in metadata.get("tags", []):
        if "cellView" in metadata:
            kept["cellView"] = metadata["cellView"]
        if "source_hidden" in metadata.get("jupyter", {}):
            kept["jupyter"] = {"source_hidden": metadata["jupyter"]["source_hidden"]}
    return kept


def setup_form_problems(notebook: dict) -> list[str]:
    """What keeps a notebook's setup cell from showing as a titled form (empty when it does)."""
    setups = _tagged(notebook, "setup")
    if len(setups) != 1:
        return [f"{len(setups)} cells tagged 'setup', expected 1"]
    metadata, first_line = setups[0].get("metadata", {}), _source(setups[0]).partition("\n")[0]
    problems = []
    if metadata.get("cellView") != SETUP_FORM_METADATA["cellView"]:
        problems.append("setup cell metadata lacks cellView='form' (Colab's form)")
    if metadata.get("jupyter", {}).get("source_hidden") is not True:
        problems.append("setup cell metadata lacks jupyter.source_hidden=True (JupyterLab's hidden code)")
    try:
        check_setup_title(first_line)
    except ValueError as error:
        problems.append(f"setup cell's first {error}")
    return problems


def form_differences() -> list[str]:
    """Committed notebooks whose setup cell is not a titled form, with what is missing (empty when all are)."""
    return [f"{path.relative_to(ROOT)}: {problem}" for path in committed_notebooks()
            for problem in setup_form_problems(read_notebook(path))]


def clean_notebook(notebook: dict) -> dict:
    """Strip outputs, execution counts and all metadata that is not the course's own (Colab's GPU runtime stays)."""
    for cell in notebook["cells"]:
        if cell["cell_type"] == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        if not cell.get("attachments"):
            cell.pop("attachments", None)
        cell["metadata"] = kept_cell_metadata(cell.get("metadata", {}))
    kept = {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
            "language_info": {"name": "python"}, **copy.deepcopy(COLAB_METADATA)}
    if "gpucourse" in notebook.get("metadata", {}):
        kept["gpucourse"] = notebook["metadata"]["gpucourse"]
    notebook["metadata"] = kept
    notebook["nbformat"], notebook["nbformat_minor"] = 4, 5
    return notebook


def committed_notebooks() -> list[Path]:
    """Every notebook under solutions/ and notebooks/."""
    return sorted(p for folder in (SOLUTIONS, RELEASE) for p in folder.glob("*/*.ipynb")
                  if ".ipynb_checkpoints" not in p.parts)


# --------------------------------------------------------------------------- release

def venv_environment() -> dict[str, str]:
    """The environment with this interpreter's bin/ first on PATH (nbgrader runs `alembic` from PATH)."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}


def run_generate_assignment(lesson: str, course_root: Path, target: Path, db_url: str | None) -> None:
    """Run nbgrader generate_assignment for one lesson into ``target``; ``db_url=None`` uses the course's gradebook."""
    command = [sys.executable, "-m", "nbgrader", "generate_assignment", lesson, "--log-level=WARN",
               f"--CourseDirectory.root={course_root}", f"--CourseDirectory.release_directory={target}"]
    if db_url is not None:
        command.append(f"--CourseDirectory.db_url={db_url}")
    subprocess.run(command, cwd=course_root, check=True, env=venv_environment())


def generate_release(target: Path) -> None:
    """Run nbgrader generate_assignment for every lesson into ``target`` (a fresh folder), then clean."""
    with tempfile.TemporaryDirectory() as scratch:
        for lesson in lessons():
            run_generate_assignment(lesson, ROOT, target, f"sqlite:///{scratch}/gradebook.db")
    for lesson in lessons():
        finish_release(target, lesson)


def finish_release(target: Path, lesson: str) -> None:
    """Clean and mark a lesson's student notebook as nbgrader generated it into ``target``."""
    path = target / lesson / f"{lesson}.ipynb"
    notebook = clean_notebook(read_notebook(path))
    notebook["metadata"]["gpucourse"] = {
        "generated": f"student version of solutions/{lesson}/{lesson}.ipynb by `make release`; edit that file, "
                     "not this one"}
    write_notebook(path, notebook)


def folder_differences(fresh: Path, committed: Path) -> list[str]:
    """Files (relative names) present in only one of two folders, or different in bytes (checkpoints ignored)."""
    def files(folder: Path) -> set[Path]:
        return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()
                and ".ipynb_checkpoints" not in p.parts} if folder.exists() else set()

    new, old = files(fresh), files(committed)
    return sorted(str(name) for name in new | old
                  if name not in new or name not in old or (fresh / name).read_bytes() != (committed / name).read_bytes())


# --------------------------------------------------------------------------- commands

def cmd_stamp() -> list[str]:
    """Stamp every solution notebook and the README; return the files changed."""
    changed = []
    for lesson in lessons():
        path = SOLUTIONS / lesson / f"{lesson}.ipynb"
        if write_notebook(path, clean_notebook(stamp_notebook(read_notebook(path), lesson))):
            changed.append(str(path.relative_to(ROOT)))
    readme = ROOT / "README.md"
    text = readme.read_text(encoding="utf-8")
    new = stamp_readme(text)
    if new != text:
        readme.write_text(new, encoding="utf-8")
        changed.append("README.md")
    return changed


def cmd_clean() -> list[str]:
    """Clean every committed notebook; return the files changed."""
    return [str(p.relative_to(ROOT)) for p in committed_notebooks() if write_notebook(p, clean_notebook(read_notebook(p)))]


def cmd_release() -> list[str]:
    """Regenerate notebooks/ from solutions/; lesson assets come along (nbgrader copies them)."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch) / "release"
        generate_release(fresh)
        if RELEASE.exists():
            shutil.rmtree(RELEASE)
        shutil.copytree(fresh, RELEASE)
    return [str(p.relative_to(ROOT)) for p in sorted(RELEASE.rglob("*.ipynb"))]


def release_differences() -> list[str]:
    """Files in which notebooks/ differs from a fresh generation (empty when in sync)."""
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch) / "release"
        generate_release(fresh)
        return folder_differences(fresh, RELEASE)


def stamp_differences() -> list[str]:
    """Files that `stamp` or `clean` would change (empty when in sync)."""
    stale = []
    for lesson in lessons():
        path = SOLUTIONS / lesson / f"{lesson}.ipynb"
        text = path.read_text(encoding="utf-8")
        stamped = clean_notebook(stamp_notebook(json.loads(text), lesson))
        if json.dumps(stamped, indent=1, ensure_ascii=False, sort_keys=True) + "\n" != text:
            stale.append(str(path.relative_to(ROOT)))
    for path in committed_notebooks():
        text = path.read_text(encoding="utf-8")
        if json.dumps(clean_notebook(json.loads(text)), indent=1, ensure_ascii=False, sort_keys=True) + "\n" != text:
            stale.append(str(path.relative_to(ROOT)))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    if stamp_readme(readme) != readme:
        stale.append("README.md")
    return sorted(set(stale))


def cmd_workspace() -> list[str]:
    """Copy each student notebook (and its assets) into work/ unless a copy is already there."""
    copied = []
    for lesson_dir in sorted(RELEASE.iterdir()) if RELEASE.exists() else []:
        for source in sorted(p for p in lesson_dir.rglob("*") if p.is_file()):
            target = WORKSPACE / source.relative_to(RELEASE)
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target)
                copied.append(str(target.relative_to(ROOT)))
    return copied


def cmd_gradebook(course_root: Path = ROOT, release_to: Path | None = None) -> list[str]:
    """Store every lesson's cells and points in the gradebook of ``course_root`` (needed before autograde); the
    student versions nbgrader generates on the way are kept, cleaned as `make release` does, in ``release_to``."""
    with tempfile.TemporaryDirectory() as scratch:
        target = Path(scratch) / "release" if release_to is None else Path(release_to)
        for lesson in lessons(course_root):
            run_generate_assignment(lesson, course_root, target, None)
            if release_to is not None:
                finish_release(target, lesson)
    return [f"registered {lesson}" for lesson in lessons(course_root)]


def main(argv: list[str] | None = None) -> int:
    """Run one maintenance command and report what it touched."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    if arguments[:1] == ["report"]:  # its own arguments: tools/class_report.py
        import class_report
        return class_report.main(arguments[1:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("command", choices=["stamp", "clean", "release", "check", "workspace", "gradebook", "report"])
    command = parser.parse_args(argv).command
    if command == "check":
        problems = [f"not stamped/clean: {name} (run `make release`)" for name in stamp_differences()]
        problems += [f"setup cell not a form: {name} (run `make release`)" for name in form_differences()]
        problems += [f"notebooks/ out of date: {name} (run `make release`)" for name in release_differences()]
        print("\n".join(problems) or "course files in sync")
        return 1 if problems else 0
    if command == "release":
        changed = cmd_stamp() + cmd_release()
    else:
        changed = {"stamp": cmd_stamp, "clean": cmd_clean, "workspace": cmd_workspace,
                   "gradebook": cmd_gradebook}[command]()
    print("\n".join(changed) if changed else "nothing to change")
    return 0


if __name__ == "__main__":
    sys.exit(main())
