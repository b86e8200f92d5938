"""The Colab twin: run every lesson as a Colab learner would, in an environment with Colab's versions.

    python tools/colab_twin.py                 build the twin (once), then execute every notebook
    python tools/colab_twin.py 04_cuda_model         only the lessons named (both versions of each)
    python tools/colab_twin.py --jobs 1        one notebook at a time (default 2)

The twin (`make test-colab`):
1. builds `.venv-colab/` from tools/colab_versions.toml (Colab's Python and preinstalled packages, plus nbclient to
   run notebooks), once; it is rebuilt when that file changes;
2. for each notebook, makes a fresh environment layered on the twin (a venv that sees the twin's packages), an
   empty working folder and a kernel in which `google.colab` is imported (a stub), as on Colab;
3. executes the notebook there; its setup cell installs the course as on Colab, from a copy of this checkout
   (GPUCOURSE_PIP_SOURCE) instead of the git URL;
4. checks: no package Colab preinstalls changed version; a solution notebook has no error and no stderr in any
   cell; a student notebook has no stderr, and errors only NotImplementedError inside an exercise (from its
   solution cell to its test cell).
It prints one line per notebook and exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSIONS_FILE = Path(__file__).resolve().parent / "colab_versions.toml"
TWIN = ROOT / ".venv-colab"
STAMP = TWIN / ".installed"
FREEZE = TWIN / "colab-freeze.json"
CELL_TIMEOUT_S = 300
# Colab has a CUDA toolkit at /usr/local/cuda, also on its CPU runtime; PyTorch's extension tools look for it there.
COLAB_ENVIRONMENT = {"CUDA_HOME": "/usr/local/cuda", "COLAB_RELEASE_TAG": "colab-twin"}

# Lists the distributions an interpreter loads: the first of each name on sys.path, as importlib finds them.
LIST_DISTRIBUTIONS = """
import importlib.metadata, json
found = {}
for dist in importlib.metadata.distributions():
    found.setdefault((dist.metadata["Name"] or "").lower().replace("_", "-"), dist.version)
found.pop("", None)
print(json.dumps(found, sort_keys=True))
"""


# --------------------------------------------------------------------------- the versions file

def colab_versions(path: Path = VERSIONS_FILE) -> dict:
    """The course's picture of Colab: {'python': '3.13', 'preinstalled': {...}, 'runner': {...}}."""
    with open(path, "rb") as handle:
        versions = tomllib.load(handle)
    for key in ("python", "preinstalled", "runner"):
        if key not in versions:
            raise ValueError(f"{path.name} lacks {key!r}")
    return versions


def requirement_lines(packages: dict[str, str]) -> list[str]:
    """'name==version' for each package."""
    return [f"{name}=={version}" for name, version in packages.items()]


# --------------------------------------------------------------------------- building the twin

def colab_python(version: str) -> str:
    """An interpreter of Colab's Python version: $COLAB_PYTHON, python<version> on PATH, or pyenv's."""
    candidates = [os.environ.get("COLAB_PYTHON", ""), shutil.which(f"python{version}") or ""]
    candidates += sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/python")), reverse=True)
    check = "import sys; print('%d.%d' % sys.version_info[:2])"
    for candidate in filter(None, candidates):
        result = subprocess.run([candidate, "-c", check], capture_output=True, text=True)
        if result.returncode == 0 and result.stdout.strip() == version:
            return candidate
    raise SystemExit(f"colab twin: no Python {version} found (Colab's version); set COLAB_PYTHON to one")


def twin_python() -> Path:
    """The twin's interpreter."""
    return TWIN / "bin" / "python"


def installed_versions(python: Path | str) -> dict[str, str]:
    """name -> version of every distribution ``python`` loads."""
    result = subprocess.run([str(python), "-c", LIST_DISTRIBUTIONS], capture_output=True, text=True, check=True,
                            env=_clean_environment())
    return json.loads(result.stdout)


def _clean_environment(**extra: str) -> dict[str, str]:
    """This process's environment without anything that points Python at another environment."""
    dropped = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "JUPYTER_PATH", "IPYTHONDIR", "PIP_USER"}
    return {**{k: v for k, v in os.environ.items() if k not in dropped}, **extra}


def _pip(python: Path, *args: str) -> None:
    """Run pip of ``python``; stop with its output on failure."""
    result = subprocess.run([str(python), "-m", "pip", *args], capture_output=True, text=True, env=_clean_environment())
    if result.returncode != 0:
        raise SystemExit(f"colab twin: pip {' '.join(args[:3])} ... failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")


def build_twin(versions: dict) -> float:
    """Build .venv-colab from the versions file unless it is already built from the same file; return seconds taken."""
    digest = hashlib.sha256(VERSIONS_FILE.read_bytes()).hexdigest()
    if STAMP.exists() and STAMP.read_text(encoding="utf-8").strip() == digest and FREEZE.exists():
        return 0.0
    start = time.perf_counter()
    print(f"colab twin: building {TWIN.name}/ from {VERSIONS_FILE.name} (first time: downloads PyTorch and TensorFlow)",
          flush=True)
    shutil.rmtree(TWIN, ignore_errors=True)
    subprocess.run([colab_python(versions["python"]), "-m", "venv", str(TWIN)], check=True, env=_clean_environment())
    python = twin_python()
    _pip(python, "install", "--quiet", *requirement_lines(versions["preinstalled"]))
    colab = installed_versions(python)
    _pip(python, "install", "--quiet", *requirement_lines(versions["runner"]))
    changed = changed_versions(colab, installed_versions(python))
    if changed:
        raise SystemExit(f"colab twin: installing the runner changed Colab's packages: {changed}; "
                         f"pick runner versions in {VERSIONS_FILE.name} that fit")
    wrong = {name: (want, colab.get(name)) for name, want in versions["preinstalled"].items() if colab.get(name) != want}
    if wrong:
        raise SystemExit(f"colab twin: installed versions differ from {VERSIONS_FILE.name} (wanted, got): {wrong}")
    FREEZE.write_text(json.dumps(colab, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    STAMP.write_text(digest + "\n", encoding="utf-8")
    return time.perf_counter() - start


def changed_versions(before: dict[str, str], after: dict[str, str]) -> dict[str, tuple[str, str | None]]:
    """Packages of ``before`` whose version differs in ``after`` (None: gone)."""
    return {name: (version, after.get(name)) for name, version in before.items() if after.get(name) != version}


# --------------------------------------------------------------------------- one notebook, opened alone

def source_copy(target: Path) -> Path:
    """Copy the checkout's files (tracked and untracked, not ignored) to ``target``: what a clone of it holds."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    return target


def site_packages(prefix: Path) -> Path:
    """The site-packages folder of a venv."""
    return next((prefix / "lib").glob("python3.*/site-packages"))


def make_runtime(folder: Path, name: str) -> dict[str, str]:
    """A fresh Colab-like runtime under ``folder``: a venv layered on the twin, an empty working folder, a kernel
    that imports `google.colab` at start; return the environment that runs the notebook there."""
    env = folder / "env"
    subprocess.run([str(twin_python()), "-m", "venv", "--without-pip", str(env)], check=True, env=_clean_environment())
    (site_packages(env) / "colab-twin-base.pth").write_text(f"{site_packages(TWIN)}\n", encoding="utf-8")
    stub = folder / "stub" / "google" / "colab"  # no google/__init__.py: `google` stays a namespace (protobuf)
    stub.mkdir(parents=True)
    (stub / "__init__.py").write_text('"""Stand-in for Colab\'s module in the course\'s Colab twin."""\n', encoding="utf-8")
    startup = folder / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-colab.py").write_text("import google.colab  # Colab's kernel has it imported\n", encoding="utf-8")
    kernel = folder / "jupyter" / "kernels" / name
    kernel.mkdir(parents=True)
    spec = {"argv": [str(env / "bin" / "python"), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (Colab twin)", "language": "python"}
    (kernel / "kernel.json").write_text(json.dumps(spec), encoding="utf-8")
    (folder / "work").mkdir()
    environment = _clean_environment(PYTHONPATH=str(folder / "stub"), IPYTHONDIR=str(folder / "ipython"),
                                     JUPYTER_PATH=str(folder / "jupyter"), **COLAB_ENVIRONMENT)
    # Colab's pip has no site configuration: this machine's (local indexes, wheel folders) stays out
    environment["PIP_CONFIG_FILE"] = os.devnull
    environment.pop("PIP_FIND_LINKS", None)
    return environment


def exercise_spans(notebook: dict) -> list[tuple[int, int]]:
    """(first, last) cell index of each exercise: from its solution cell to its test cell."""
    spans, start = [], None
    for index, cell in enumerate(notebook["cells"]):
        grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "")
        if grade_id.endswith("-solution") and cell["cell_type"] == "code":
            start = index
        elif grade_id.endswith("-tests") and start is not None:
            spans.append((start, index))
            start = None
    return spans


def problems(notebook: dict, student: bool) -> list[str]:
    """What is wrong with an executed notebook: stderr anywhere; pip's warnings or errors in the setup cell; errors
    in a solution notebook; errors in a student notebook other than NotImplementedError inside an exercise."""
    spans = exercise_spans(notebook)
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code":
            continue
        label = f"cell {index} ({cell.get('id', '?')})"
        setup = "setup" in cell.get("metadata", {}).get("tags", [])
        for output in cell.get("outputs", []):
            text = "".join(output.get("text", ""))
            if output.get("output_type") == "stream" and output.get("name") == "stderr":
                found.append(f"{label} writes to stderr: {text.strip()[:300]!r}")
            elif output.get("output_type") == "stream" and setup:
                plain = re.sub(r"\x1b\[[0-9;]*m", "", text)  # pip colours its messages
                found += [f"{label} (setup) shows pip's {line.strip()[:300]!r}" for line in plain.splitlines()
                          if line.strip().startswith(("WARNING:", "ERROR:"))]
            elif output.get("output_type") == "error":
                in_exercise = any(first <= index <= last for first, last in spans)
                if not (student and in_exercise and output.get("ename") == "NotImplementedError"):
                    found.append(f"{label} raises {output.get('ename')}: {str(output.get('evalue'))[:300]}")
    return found


def execute(path: Path, output: Path, workdir: Path, kernel: str) -> None:
    """Execute one notebook with nbclient (run inside the twin) and save it with its outputs."""
    import nbclient
    import nbformat

    notebook = nbformat.read(path, as_version=4)
    running: list[int] = []
    client = nbclient.NotebookClient(notebook, kernel_name=kernel, timeout=CELL_TIMEOUT_S, allow_errors=True,
                                     resources={"metadata": {"path": str(workdir)}},
                                     on_cell_start=lambda cell, cell_index: running.append(cell_index))
    try:
        client.execute()
    except nbclient.exceptions.DeadKernelError:
        where = f"while running cell {running[-1]}" if running else "before any cell ran"
        raise SystemExit(f"{path.name}: the kernel died {where} (a crash in native code, or out of memory); the cells "
                         "after it did not run") from None
    nbformat.write(notebook, output)


def run_notebook(path: Path, scratch: Path, colab: dict[str, str]) -> dict:
    """Open one notebook alone in a fresh Colab-like runtime, run it, and judge it."""
    name = f"{path.parent.parent.name}-{path.stem}"
    folder = scratch / name
    folder.mkdir()
    start = time.perf_counter()
    environment = make_runtime(folder, "colab-twin")
    # pip builds a local folder in place: each runtime gets its own copy of the checkout
    environment["GPUCOURSE_PIP_SOURCE"] = source_copy(folder / "checkout").as_uri()
    shutil.copy2(path, folder / path.name)  # alone: the kernel's folder is empty, as /content on Colab
    executed = folder / "executed.ipynb"
    run = subprocess.run([str(twin_python()), str(Path(__file__).resolve()), "--execute", str(folder / path.name),
                          str(executed), "--workdir", str(folder / "work")],
                         capture_output=True, text=True, env=environment, cwd=folder / "work")
    found = []
    if run.returncode != 0 or not executed.exists():
        found.append(f"could not execute: {(run.stderr or run.stdout).strip()[-1500:]}")
    else:
        found += problems(json.loads(executed.read_text(encoding="utf-8")), student=path.parent.parent.name == "notebooks")
    after = installed_versions(folder / "env" / "bin" / "python")
    found += [f"{pkg} changed from {was} to {now} (Colab's own version must stay)"
              for pkg, (was, now) in changed_versions(colab, after).items()]
    for needed in ("gpucourse", "numba", "nvidia-ml-py"):
        if needed not in after:
            found.append(f"the setup cell did not install {needed}")
    return {"notebook": str(path.relative_to(ROOT)), "seconds": time.perf_counter() - start, "problems": found}


def selected_notebooks(names: list[str]) -> list[Path]:
    """Solution and student notebooks of the lessons named (all when none)."""
    found = sorted(p for folder in ("solutions", "notebooks") for p in (ROOT / folder).glob("*/*.ipynb")
                   if p.stem == p.parent.name)
    unknown = [n for n in names if not any(p.stem == n for p in found)]
    if unknown:
        raise SystemExit(f"colab twin: no lesson named {unknown}")
    return [p for p in found if not names or p.stem in names]


def main(argv: list[str] | None = None) -> int:
    """Build the twin, run the notebooks, print a summary; 1 if anything failed."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("lessons", nargs="*", help="lesson names such as 04_cuda_model (default: all)")
    parser.add_argument("--jobs", type=int, default=2, help="notebooks run at the same time (default 2)")
    parser.add_argument("--keep", type=Path, help="keep each runtime (executed notebooks included) under this folder")
    parser.add_argument("--execute", nargs=2, type=Path, metavar=("NOTEBOOK", "OUTPUT"), help=argparse.SUPPRESS)
    parser.add_argument("--workdir", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute:
        execute(*args.execute, args.workdir, "colab-twin")
        return 0
    if args.jobs < 1:
        raise SystemExit("--jobs must be at least 1")
    notebooks = selected_notebooks(args.lessons)
    build_seconds = build_twin(colab_versions())
    colab = json.loads(FREEZE.read_text(encoding="utf-8"))
    scratch = Path(tempfile.mkdtemp(prefix="colab-twin-")) if args.keep is None else args.keep.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = [pool.submit(run_notebook, path, scratch, colab) for path in notebooks]
            results = []
            for future in concurrent.futures.as_completed(futures):
                result = future.result()
                results.append(result)
                print(f"  {'ok  ' if not result['problems'] else 'FAIL'} {result['notebook']} "
                      f"({result['seconds']:.0f} s)", flush=True)
        run_seconds = time.perf_counter() - start
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    failed = [r for r in sorted(results, key=lambda r: r["notebook"]) if r["problems"]]
    print(f"\ncolab twin: {len(results) - len(failed)} of {len(results)} notebooks pass "
          f"(Python {colab_versions()['python']}, torch {colab.get('torch')}, tensorflow {colab.get('tensorflow')}, "
          f"keras {colab.get('keras')}, numpy {colab.get('numpy')}); "
          f"twin build {build_seconds:.0f} s, notebooks {run_seconds:.0f} s with {args.jobs} at a time")
    for result in failed:
        print(f"\nFAIL {result['notebook']}:")
        for problem in result["problems"]:
            print(f"  - {problem}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
