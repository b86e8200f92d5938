"""Check that the course's pinned install resolves to wheels on every Python the README allows (run when bumping pins).

    python tools/check_install_sets.py                 every Python in PYTHONS, Linux x86-64 wheels
    python tools/check_install_sets.py 3.13 3.14       only those

For each version it runs pip's resolver without installing anything (`pip install --dry-run --only-binary=:all:
--python-version X --platform ...`) on the requirements of `.[EXTRAS]` with constraints.txt, as `make setup` installs
them, and prints one line per version: resolves, or pip's reason. It needs the package index (network).

pip evaluates environment markers against the interpreter that runs it, not against --python-version, so the
course's own requirements are filtered here with their markers evaluated for X (TensorFlow is left out on Python
3.14, where it publishes no wheel); the markers of their dependencies are still read by pip for this interpreter.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ("3.11", "3.12", "3.13", "3.14")
EXTRAS = "torch,tensorflow,gpu,triton,course,test"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux_2_5_x86_64", "manylinux1_x86_64", "linux_x86_64")
"""Wheel tags a current x86-64 Linux accepts (pip does not widen an explicit --platform to older manylinux tags)."""


def requirements_for(python_version: str) -> list[str]:
    """The course's requirements (core and EXTRAS) that apply on ``python_version``, their markers evaluated there."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = [(text, "") for text in project["dependencies"]]
    wanted += [(text, extra) for extra in EXTRAS.split(",") for text in project["optional-dependencies"][extra]]
    environment = {"python_version": python_version, "python_full_version": f"{python_version}.0",
                   "sys_platform": "linux", "platform_system": "Linux", "platform_machine": "x86_64"}
    chosen = []
    for text, extra in wanted:
        requirement = Requirement(text)
        if requirement.marker is None or requirement.marker.evaluate({**environment, "extra": extra}):
            requirement.marker = None
            chosen.append(str(requirement))
    return chosen


def pip_command(python_version: str) -> list[str]:
    """The dry-run resolve of the course's install for ``python_version`` (e.g. '3.13'), Linux x86-64 wheels only."""
    if not isinstance(python_version, str) or not python_version.replace(".", "").isdigit():
        raise ValueError(f"python_version must look like '3.13', got {python_version!r}")
    platforms = [argument for tag in PLATFORMS for argument in ("--platform", tag)]
    return [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
            "--only-binary=:all:", "--implementation", "cp", "--python-version", python_version, *platforms,
            "--constraint", str(ROOT / "constraints.txt"), *requirements_for(python_version)]


def check(python_version: str) -> tuple[bool, str]:
    """(resolves, pip's last error line or 'resolves') for one Python version."""
    result = subprocess.run(pip_command(python_version), capture_output=True, text=True, cwd=ROOT)
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    return result.returncode == 0, "resolves" if result.returncode == 0 else (errors[-1] if errors else "failed")


def main(argv: list[str] | None = None) -> int:
    """Print one line per Python version; exit 1 if any fails to resolve."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", default=list(PYTHONS), help=f"default: {' '.join(PYTHONS)}")
    args = parser.parse_args(argv)
    unexpected = False
    for version in args.versions:
        ok, message = check(version)
        print(f"Python {version}: {message}", flush=True)
        unexpected |= not ok
    return 1 if unexpected else 0


if __name__ == "__main__":
    raise SystemExit(main())
