"""Check that the course's pinned install resolves to wheels on every Python the README allows (run when bumping pins).

    python tools/check_install_sets.py                 every Python in PYTHONS, Linux x86-64 wheels
    python tools/check_install_sets.py 3.13 3.14       only those

For each version it runs pip's resolver without installing anything (`pip install --dry-run --only-binary=:all:
--python-version X --platform ...`) on `.[EXTRAS]` with constraints.txt, as `make setup` installs it, and prints one
line per version: resolves, or pip's reason. It needs the package index (network). Python 3.14 is expected to fail
while TensorFlow publishes no wheel for it: the Makefile then picks python3.13, 3.12 or 3.11 (README).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHONS = ("3.11", "3.12", "3.13", "3.14")
EXTRAS = "torch,tensorflow,gpu,triton,course,test"
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64",
             "manylinux_2_5_x86_64", "manylinux1_x86_64", "linux_x86_64")
"""Wheel tags a current x86-64 Linux accepts (pip does not widen an explicit --platform to older manylinux tags)."""


def pip_command(python_version: str) -> list[str]:
    """The dry-run resolve of the course's install for ``python_version`` (e.g. '3.13'), Linux x86-64 wheels only."""
    if not isinstance(python_version, str) or not python_version.replace(".", "").isdigit():
        raise ValueError(f"python_version must look like '3.13', got {python_version!r}")
    platforms = [argument for tag in PLATFORMS for argument in ("--platform", tag)]
    return [sys.executable, "-m", "pip", "install", "--dry-run", "--quiet", "--ignore-installed",
            "--only-binary=:all:", "--implementation", "cp", "--python-version", python_version, *platforms,
            "--constraint", str(ROOT / "constraints.txt"), f"{ROOT}[{EXTRAS}]"]


def check(python_version: str) -> tuple[bool, str]:
    """(resolves, pip's last error line or 'resolves') for one Python version."""
    result = subprocess.run(pip_command(python_version), capture_output=True, text=True, cwd=ROOT)
    errors = [line for line in result.stderr.splitlines() if line.startswith("ERROR")]
    return result.returncode == 0, "resolves" if result.returncode == 0 else (errors[-1] if errors else "failed")


def main(argv: list[str] | None = None) -> int:
    """Print one line per Python version; exit 1 if a version other than the expected 3.14 failure fails."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("versions", nargs="*", default=list(PYTHONS), help=f"default: {' '.join(PYTHONS)}")
    args = parser.parse_args(argv)
    unexpected = False
    for version in args.versions:
        ok, message = check(version)
        print(f"Python {version}: {message}", flush=True)
        unexpected |= not ok and version != "3.14"
    return 1 if unexpected else 0


if __name__ == "__main__":
    raise SystemExit(main())
