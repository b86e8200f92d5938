"""Packaging: the helper package builds without any warning, so that Colab's setup cell (which builds it with the
newest setuptools) keeps working when setuptools turns today's deprecations into errors."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from importlib.metadata import version

from packaging.requirements import Requirement
from packaging.version import Version

from notebook_utils import ROOT

# Builds the wheel in-process with setuptools' own backend, every warning an error.
BUILD = "import sys; from setuptools import build_meta; print(build_meta.build_wheel(sys.argv[1]))"


def _build_system() -> dict:
    with open(ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["build-system"]


def test_setuptools_floor_supports_spdx_license() -> None:
    """An SPDX `license = "MIT"` needs setuptools 77; the build-system floor says so and the test tools have it."""
    floor = next(Requirement(r) for r in _build_system()["requires"] if Requirement(r).name == "setuptools")
    assert not floor.specifier.contains("76.9"), f"build-system {floor}: setuptools < 77 cannot read `license = \"MIT\"`"
    assert floor.specifier.contains(version("setuptools")), (
        f"this environment's setuptools {version('setuptools')} is below the build floor {floor}: run `make setup`")


def test_wheel_builds_with_warnings_as_errors(tmp_path) -> None:
    """Build the wheel from a copy of the package with -W error and setuptools' deprecations enforced."""
    source, out = tmp_path / "source", tmp_path / "dist"
    out.mkdir()
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, source / name)
    environment = {k: v for k, v in os.environ.items() if k not in {"PYTHONWARNINGS", "PYTHONPATH"}}
    # (not SETUPTOOLS_ENFORCE_DEPRECATION: it also fails on setuptools' own internal setup.py call)
    result = subprocess.run([sys.executable, "-W", "error", "-c", BUILD, str(out)], cwd=source, env=environment,
                            capture_output=True, text=True)
    assert result.returncode == 0, f"the wheel does not build cleanly:\n{result.stderr[-3000:]}"
    wheel = out / result.stdout.strip().splitlines()[-1]
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "gpucourse/__init__.py" in names and "gpucourse/checks.py" in names
    assert "License-Expression: MIT" in metadata
    assert Version(re.search(r"^Version: (\S+)$", metadata, re.M).group(1)) == Version(
        tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"])
