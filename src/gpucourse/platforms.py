"""Which parts of the course run on this machine, and one sentence saying why where one does not.

Two parts of the course exist for Linux only, and one not yet for every Python:

- ``"triton"``: Triton (lesson 06) publishes wheels for Linux only; the course installs it there (its ``triton``
  extra has a ``sys_platform == 'linux'`` marker) and Colab's PyTorch brings its own;
- ``"nccl"``: NCCL, the library through which GPUs exchange data (lessons 14 and 15), ships inside PyTorch's Linux
  CUDA builds only; without it the lessons' process groups use gloo on the CPU;
- ``"tensorflow"``: TensorFlow publishes no wheel for Python 3.14 yet; the course installs without it there, and
  :mod:`gpucourse.without_tensorflow` skips its statements with this module's sentence.

:func:`available` decides from what it can read without loading anything heavy: ``sys.platform``,
``platform.machine()``, ``importlib.util.find_spec`` and, for NCCL, ``torch.distributed.is_nccl_available()``. It
never imports triton (a process that loaded TensorFlow first would abort: see
:func:`gpucourse.load_triton_before_tensorflow`). A lesson asks once, early, and each later cell checks the answer::

    TRITON = platforms.available("triton")
    if TRITON.runs():      # where Triton cannot run: prints the one sentence and skips the cell
        ...

Graded code that needs the part calls :meth:`Availability.require`, which raises :class:`NotAvailableHere` with the
same sentence: an ``ImportError`` that IPython shows as that one line, not as a traceback.
"""

from __future__ import annotations

import importlib.util
import platform
import sys
from dataclasses import dataclass

PARTS = ("triton", "nccl", "tensorflow")
"""The parts :func:`available` knows."""

_SYSTEMS = {"linux": "Linux", "darwin": "macOS", "win32": "Windows", "cygwin": "Windows (Cygwin)"}
_APPLE_SILICON = ("arm64", "aarch64")


class NotAvailableHere(ImportError):
    """A part of the course that cannot run on this machine; the message says why and what to do, in one sentence."""

    def _render_traceback_(self) -> list[str]:
        """IPython's traceback for this error: its one sentence, no frames."""
        return [f"{type(self).__name__}: {self}"]


@dataclass(frozen=True)
class Availability:
    """Whether a part of the course runs here (``ok``) and, where it does not, one sentence why (``reason``)."""

    part: str
    ok: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.ok

    def runs(self) -> bool:
        """True if the part runs here; otherwise print the reason (to stdout, flushed) and return False."""
        if not self.ok:
            print(self.reason, flush=True)
        return self.ok

    def require(self) -> None:
        """Raise :class:`NotAvailableHere` with the reason unless the part runs here."""
        if not self.ok:
            raise NotAvailableHere(self.reason)

    def stand_in(self, name: str) -> object:
        """An object to bind in place of the missing module ``name``: using any of its attributes, or calling it,
        raises :class:`NotAvailableHere` with the reason (so a cell that needs the part fails in one sentence)."""
        if not isinstance(name, str) or not name:
            raise TypeError(f"name must be the module's name as a non-empty str, got {name!r}")
        return _StandIn(name, self)


class _StandIn:
    """What a lesson binds where a module cannot be imported here: any use raises NotAvailableHere."""

    def __init__(self, name: str, availability: Availability) -> None:
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_availability", availability)

    def __getattr__(self, attribute: str) -> object:
        if attribute.startswith("_"):  # IPython, pickle and completion probe private names: no such attribute
            raise AttributeError(attribute)
        raise NotAvailableHere(self._availability.reason)

    def __call__(self, *args: object, **kwargs: object) -> object:
        raise NotAvailableHere(self._availability.reason)

    def __setattr__(self, attribute: str, value: object) -> None:
        raise NotAvailableHere(self._availability.reason)

    def __repr__(self) -> str:
        return f"<{self._name}: not available here. {self._availability.reason}>"


def system_name() -> str:
    """This machine's system in words, e.g. 'Linux (x86_64)', 'macOS (Apple silicon)', 'Windows (AMD64)'."""
    system = _SYSTEMS.get(sys.platform, sys.platform)
    machine = platform.machine() or "unknown processor"
    if sys.platform == "darwin":
        return "macOS (Apple silicon)" if machine.lower() in _APPLE_SILICON else f"macOS ({machine})"
    return f"{system} ({machine})"


def _has_module(name: str) -> bool:
    """True if ``name`` is loaded or importable here (found without importing it)."""
    if sys.modules.get(name) is not None:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a broken or half-removed install
        return False


def _triton() -> Availability:
    """Triton: Linux only, installed, and not after TensorFlow in this process."""
    if sys.modules.get("triton") is not None:
        return Availability("triton", True)
    where = system_name()
    if sys.platform != "linux":
        windows = " (on Windows, WSL2 is one)" if sys.platform in ("win32", "cygwin") else ""
        return Availability("triton", False,
                            f"Triton ships for Linux only, so this {where} machine cannot run lesson 06's kernels: "
                            f"open the lesson on Colab (the badge at the top) or on a Linux machine{windows}.")
    if not _has_module("triton"):
        return Availability("triton", False,
                            f"Triton is not installed in this Python on {where}: in a terminal at the course folder "
                            "run `pip install -e '.[triton]'` and restart the kernel, or open the lesson on Colab "
                            "(the badge at the top).")
    if "tensorflow" in sys.modules:
        return Availability("triton", False,
                            "TensorFlow was loaded before Triton in this kernel, and loading Triton now would stop "
                            "the kernel: restart it (Kernel > Restart Kernel) and run the cells from the top, the "
                            "setup cell first.")
    return Availability("triton", True)


def _nccl() -> Availability:
    """NCCL: inside PyTorch's Linux CUDA builds only."""
    where = system_name()
    instead = "their process groups over gloo on the CPU, with the same collectives"
    if sys.platform != "linux":
        return Availability("nccl", False,
                            f"NCCL, the library GPUs exchange data through, ships in PyTorch's Linux builds only, so "
                            f"on this {where} machine lessons 14 and 15 run {instead}; for NCCL, open lesson 14 on "
                            "Kaggle with two T4 GPUs.")
    try:
        import torch.distributed as dist
    except ImportError:
        return Availability("nccl", False,
                            f"PyTorch is not installed in this Python on {where}, so lessons 14 and 15 cannot start "
                            "process groups: in a terminal at the course folder run `make lab` (or `pip install -e "
                            "'.[torch]'`) and restart the kernel.")
    if not (dist.is_available() and dist.is_nccl_available()):
        return Availability("nccl", False,
                            f"This PyTorch build has no NCCL (a CPU build, or no torch.distributed), so on this "
                            f"{where} machine lessons 14 and 15 run {instead}; for NCCL, use a CUDA build of "
                            "PyTorch on NVIDIA GPUs, or open lesson 14 on Kaggle with two T4 GPUs.")
    return Availability("nccl", True)


def _tensorflow() -> Availability:
    """TensorFlow: installed in this Python (it publishes no wheel for Python 3.14 yet)."""
    if _has_module("tensorflow"):
        return Availability("tensorflow", True)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    if sys.version_info >= (3, 14):
        return Availability("tensorflow", False,
                            f"TensorFlow publishes no wheel for Python {version} yet, so the course was installed "
                            "without it and this cell's TensorFlow lines were skipped: for them, run the course on "
                            "Python 3.11 to 3.13 (install python3.13, then make again) or open the lesson on Colab.")
    return Availability("tensorflow", False,
                        "TensorFlow is not installed in this Python, so this cell's TensorFlow lines were skipped: for "
                        "them, run pip install -e '.[tensorflow]' in the course folder and restart the kernel, or "
                        "open the lesson on Colab.")


_CHECKS = {"triton": _triton, "nccl": _nccl, "tensorflow": _tensorflow}


def nccl_refusal(world_size: int, gpus: int, nccl: bool) -> str:
    """Why ``backend='nccl'`` cannot serve ``world_size`` processes here, in one sentence ('' if it can).

    ``gpus`` is the number of CUDA GPUs visible and ``nccl`` whether this PyTorch build has NCCL (the launcher's own
    checks, passed in so that its tests can fake them); the sentence names the system where NCCL does not exist.
    """
    from gpucourse._validate import non_negative_int, positive_int

    world_size, gpus = positive_int("world_size", world_size), non_negative_int("gpus", gpus)
    if not isinstance(nccl, bool):
        raise TypeError(f"nccl must be a bool (does this PyTorch build have NCCL?), got {nccl!r}")
    if nccl and gpus >= world_size:
        return ""
    gloo = "use backend='gloo', which runs the same collectives on the CPU"
    if not nccl and sys.platform != "linux":
        return (f"backend='nccl' needs one CUDA GPU per process and NCCL, which ships in PyTorch's Linux builds only, "
                f"so not on this {system_name()} machine: {gloo}.")
    if not nccl:
        return (f"backend='nccl' needs one CUDA GPU per process and NCCL, and this PyTorch build has none (a CPU "
                f"build): {gloo}, or install a CUDA build of PyTorch on a machine with NVIDIA GPUs.")
    return (f"backend='nccl' needs one CUDA GPU per process: {world_size} processes, {gpus} CUDA GPU(s) visible "
            f"here; {gloo} (or one GPU shared by several processes).")


def available(part: str) -> Availability:
    """Whether ``part`` (one of :data:`PARTS`) runs on this machine, with one sentence why not where it does not."""
    if not isinstance(part, str) or part not in _CHECKS:
        raise ValueError(f"part must be one of {list(PARTS)}, got {part!r}")
    return _CHECKS[part]()


__all__ = ["Availability", "NotAvailableHere", "PARTS", "available", "nccl_refusal", "system_name"]
