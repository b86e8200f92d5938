"""Numba's CUDA backend: the real GPU when one is usable, else Numba's CUDA simulator (lesson 04_cuda_model).

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is first imported, so a lesson calls
:func:`use_cuda_or_simulator` before anything imports ``numba.cuda``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import warnings

from gpucourse._validate import one_of

BACKENDS = ("auto", "gpu", "simulator")
BACKEND: str | None = None
"""The backend chosen by :func:`use_cuda_or_simulator` ('gpu' or 'simulator'), None before it is called."""
BACKEND_REASON: str = ""
"""One sentence saying why that backend was chosen."""


def _driver_sees_gpu() -> bool:
    """True if PyTorch (when already imported) or nvidia-smi reports an NVIDIA GPU; never imports numba.cuda."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return True
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is None:
        return False
    try:
        result = subprocess.run([nvidia_smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0 and "GPU" in result.stdout


def _numba_can_use_gpu() -> bool:
    """Ask a fresh Python process whether Numba's real CUDA target finds a GPU and compiles and runs a tiny kernel.

    A GPU alone is not enough: Numba compiles through NVVM and libdevice (a CUDA toolkit's, or the wheels of
    ``pip install numba-cuda[cu12]``), which ``cuda.is_available()`` does not check. A fresh process, because this
    one cannot switch backends once numba.cuda is imported.
    """
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    code = ("import sys\nfrom numba import cuda\nif not cuda.is_available():\n    sys.exit(1)\n"
            "@cuda.jit\ndef probe(x):\n    x[0] = 1.0\n"
            "x = cuda.device_array(1, dtype='float32')\nprobe[1, 1](x)\ncuda.synchronize()\n"
            "sys.exit(0 if x.copy_to_host()[0] == 1.0 else 1)")
    try:
        result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return False
    return result.returncode == 0


def _quiet_numba() -> None:
    """Silence Numba's warnings: tiny teaching launches always trigger 'low occupancy' and 'implicit copy' ones."""
    os.environ["NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS"] = "0"
    os.environ["NUMBA_CUDA_WARN_ON_IMPLICIT_COPY"] = "0"
    from numba.core import config
    from numba.core.errors import NumbaWarning

    config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
    config.CUDA_WARN_ON_IMPLICIT_COPY = 0
    warnings.filterwarnings("ignore", category=NumbaWarning)


def _choose(prefer: str) -> tuple[str, str]:
    """Decide the backend (and why) for ``prefer``, before numba.cuda is imported."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1" and prefer != "gpu":
        return "simulator", "NUMBA_ENABLE_CUDASIM=1 was already set: Numba's CUDA simulator runs the kernels on the CPU"
    if prefer == "simulator":
        return "simulator", "the simulator was asked for: Numba's CUDA simulator runs the kernels on the CPU"
    if not _driver_sees_gpu():
        if prefer == "gpu":
            raise RuntimeError("prefer='gpu' but no NVIDIA GPU is visible (on Colab: Runtime > Change runtime type "
                               "> GPU), or use prefer='auto'")
        return "simulator", ("no CUDA GPU here: Numba's CUDA simulator runs each kernel in Python on the CPU, one "
                             "Python thread per CUDA thread (same code and results, far slower: sizes stay tiny)")
    if not _numba_can_use_gpu():
        if prefer == "gpu":
            raise RuntimeError("prefer='gpu': a GPU is visible but Numba cannot compile for it (NVVM, from a CUDA "
                               "toolkit or numba-cuda[cu12], missing?); use prefer='auto' for the simulator")
        return "simulator", ("a GPU is visible but Numba cannot compile for it (NVVM, from a CUDA toolkit or "
                             "numba-cuda[cu12], missing?): Numba's CUDA simulator runs the kernels on the CPU instead")
    return "gpu", ("Numba compiles each kernel to PTX, which the driver turns into GPU machine code, and runs it on "
                   "the GPU")


def use_cuda_or_simulator(prefer: str = "auto", verbose: bool = True) -> str:
    """Select Numba's CUDA backend before numba.cuda is imported: 'gpu' if one is usable, else 'simulator'.

    Taught in lesson 04_cuda_model.
    """
    global BACKEND, BACKEND_REASON
    one_of("prefer", prefer, BACKENDS)
    if not isinstance(verbose, bool):
        raise TypeError(f"verbose must be True or False, got {type(verbose).__name__} ({verbose!r})")
    if importlib.util.find_spec("numba") is None:
        raise ImportError("Numba is not installed: pip install numba (on Colab, re-run the notebook's setup cell: "
                          "it installs numba)")
    if "numba.cuda" in sys.modules:  # too late to choose: report what is in use, or explain how to switch
        from numba.core import config

        if config.ENABLE_CUDASIM:
            backend, reason = "simulator", "numba.cuda was already imported with Numba's CUDA simulator"
        elif sys.modules["numba.cuda"].is_available():
            backend, reason = "gpu", "numba.cuda was already imported for the GPU"
        else:
            raise RuntimeError("numba.cuda was imported before use_cuda_or_simulator() and finds no GPU: restart "
                               "the kernel and call use_cuda_or_simulator() before importing numba.cuda")
        if prefer not in ("auto", backend):
            raise RuntimeError(f"prefer={prefer!r} but {reason}: restart the kernel and call "
                               f"use_cuda_or_simulator({prefer!r}) before importing numba.cuda")
    else:
        backend, reason = _choose(prefer)
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1" if backend == "simulator" else "0"
        from numba.core import config  # numba may be imported already: its config has read the old value

        config.ENABLE_CUDASIM = 1 if backend == "simulator" else 0
    _quiet_numba()
    from numba import cuda

    if backend == "gpu":
        name = cuda.get_current_device().name
        reason += f" ({name.decode() if isinstance(name, bytes) else name})"
    BACKEND, BACKEND_REASON = backend, reason
    if verbose:
        print(f"Numba CUDA backend: {backend} ({reason})")
    return backend



__all__ = ["BACKEND", "BACKEND_REASON", "BACKENDS", "use_cuda_or_simulator"]
