"""Helper package of the course "GPUs for Deep Learning": hardware facts, timing, roofline and exercise checks."""

from __future__ import annotations

import os

__version__ = "0.1.0"


def quiet_frameworks() -> None:
    """Silence TensorFlow's start-up log lines (must run before TensorFlow is imported)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")


def setup() -> "hardware.EnvironmentReport":
    """Prepare a lesson: silence framework start-up noise and print the one-line environment report."""
    quiet_frameworks()
    from gpucourse import hardware

    report = hardware.environment_report()
    print(report.one_line())
    return report


__all__ = ["__version__", "quiet_frameworks", "setup"]
