"""Open JupyterLab the course's way: the one place that says how `make lab` and `make instructor-lab` start it.

    python tools/lab.py learner [JUPYTER-LAB-OPTIONS...]     JupyterLab on work/, without nbgrader's instructor
                                                            tools and without the news prompt (`make lab`)
    python tools/lab.py instructor [JUPYTER-LAB-OPTIONS...]  JupyterLab on the course folder with every nbgrader
                                                            tool: Formgrader, Create Assignment (`make instructor-lab`)

Options after the role go to `jupyter lab` unchanged (`--port 8890 --no-browser`); `--allow-root` is added when run
as root (containers, Codespaces). The learner's setup is a configuration folder added to Jupyter's search path
(tools/lab/learner/, see its README.md): the learner's own ~/.jupyter is read as usual and never written to.
tests/test_browser.py starts both labs through `command`, `environment` and `working_directory`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = ROOT / "work"
LEARNER_CONFIG = ROOT / "tools" / "lab" / "learner"
ROLES = ("learner", "instructor")
FOLDER_OPTIONS = ("--notebook-dir", "--ServerApp.root_dir", "--ServerApp.notebook_dir")


def _running_as_root() -> bool:
    """True for the root user (JupyterLab refuses to start as root without --allow-root)."""
    return hasattr(os, "geteuid") and os.geteuid() == 0


def command(role: str, lab_args: list[str] | tuple[str, ...] = (), notebook_dir: Path | None = None) -> list[str]:
    """The `jupyter lab` command line for ``role``, opened on ``notebook_dir`` (default: work/ or the course)."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    if isinstance(lab_args, str):
        raise TypeError("lab_args must be a list of separate options, not one string")
    folder = notebook_dir if notebook_dir is not None else (WORKSPACE if role == "learner" else ROOT)
    chosen = any(arg.startswith(FOLDER_OPTIONS) for arg in lab_args)  # the caller's folder wins
    argv = [sys.executable, "-m", "jupyter", "lab", *([] if chosen else [f"--ServerApp.root_dir={folder}"]), *lab_args]
    if _running_as_root() and "--allow-root" not in lab_args:
        argv.append("--allow-root")
    return argv


def working_directory(role: str, notebook_dir: Path | None = None) -> Path:
    """Where JupyterLab runs: nbgrader's Validate and Formgrader read nbgrader_config.py from there."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    # The learner's Validate uses the course's settings (300 s cell timeout, stderr filter) whatever notebook_dir is;
    # the instructor's Formgrader grades the course that it opens.
    return ROOT if role == "learner" or notebook_dir is None else notebook_dir


def environment(role: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for ``role``: the learner's adds tools/lab/learner/ to Jupyter's configuration path."""
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}, not {role!r}")
    env = dict(os.environ if base is None else base)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # nbgrader runs tools from PATH
    if role == "learner":
        existing = env.get("JUPYTER_CONFIG_PATH")
        env["JUPYTER_CONFIG_PATH"] = os.pathsep.join([str(LEARNER_CONFIG), *([existing] if existing else [])])
    return env


def main(argv: list[str] | None = None) -> int:
    """Start JupyterLab for the role named first on the command line (returns only on a usage error)."""
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] not in ROLES:
        print(__doc__, file=sys.stderr)
        return 2
    role, lab_args = args[0], args[1:]
    argv = command(role, lab_args)
    os.chdir(working_directory(role))
    os.execve(argv[0], argv, environment(role))  # JupyterLab takes over this process (and Ctrl+C) from here


if __name__ == "__main__":
    sys.exit(main())
