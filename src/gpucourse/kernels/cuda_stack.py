"""The CUDA software stack of this machine, from the NVIDIA driver to the frameworks (lesson 04_cuda_model).

Only the driver comes from the system; the CUDA runtime, cuBLAS, cuDNN and NCCL ship as ``nvidia-*`` wheels with
the framework. Everything here is read without starting TensorFlow and without importing ``numba.cuda``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass

from gpucourse import nvml
from gpucourse.kernels import numba_backend


@dataclass(frozen=True)
class StackLayer:
    """One layer of the CUDA software stack: its name, its version here (None if absent), its job, where it was read."""

    name: str
    version: str | None
    role: str
    source: str


def _distribution_version(*names: str) -> str | None:
    """Version of the first installed distribution among ``names`` (None if none is)."""
    import importlib.metadata

    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _driver_version() -> tuple[str | None, str]:
    """The NVIDIA driver's version and where it was read (NVML, else nvidia-smi), or (None, why not)."""
    version, cuda = nvml.driver_versions()
    if version is not None and cuda is not None:
        return f"{version} (supports CUDA up to {cuda})", "NVML"
    nvidia_smi = shutil.which("nvidia-smi")
    if nvidia_smi is not None:
        try:
            result = subprocess.run([nvidia_smi, "--query-gpu=driver_version", "--format=csv,noheader"],
                                    capture_output=True, text=True, timeout=20)
            if result.returncode == 0 and result.stdout.strip():
                return result.stdout.strip().splitlines()[0], "nvidia-smi"
        except (OSError, subprocess.SubprocessError):
            pass
    return None, "no NVIDIA driver found (NVML and nvidia-smi)"


def tensorflow_build_info() -> dict | None:
    """TensorFlow's ``tf.sysconfig.get_build_info()``, read without starting TensorFlow (None if not installed).

    Taught in lesson 04_cuda_model.
    """
    if "tensorflow" in sys.modules:
        return dict(sys.modules["tensorflow"].sysconfig.get_build_info())
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "python", "platform", "build_info.py")
    if not os.path.exists(path):
        return None
    module_spec = importlib.util.spec_from_file_location("_gpucourse_tf_build_info", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)  # a generated file holding one dict: importing it starts nothing
    return dict(module.build_info)


def _cudnn_version_string(raw: int | None) -> str | None:
    """cuDNN's version number as text: 90100 -> '9.1.0' (cuDNN 9+), 8902 -> '8.9.2' (cuDNN 8 and older)."""
    if not raw:
        return None
    major, rest = (raw // 10000, raw % 10000) if raw >= 10000 else (raw // 1000, raw % 1000)
    return f"{major}.{rest // 100}.{rest % 100}"


def software_stack() -> list[StackLayer]:
    """The CUDA stack from driver to frameworks with this machine's versions (None where a layer is absent).

    Taught in lesson 04_cuda_model.
    """
    driver, driver_source = _driver_version()
    torch = sys.modules.get("torch") or (importlib.import_module("torch") if importlib.util.find_spec("torch")
                                         else None)
    cuda_runtime = cudnn = nccl = None
    if torch is not None:
        cuda_runtime = torch.version.cuda
        if torch.backends.cudnn.is_available():
            cudnn = _cudnn_version_string(torch.backends.cudnn.version())
        if torch.cuda.is_available() and hasattr(torch.cuda, "nccl"):
            try:
                found = torch.cuda.nccl.version()
                nccl = ".".join(map(str, found)) if isinstance(found, tuple) else str(found)
            except Exception:  # a build without NCCL (Windows, some wheels) raises here
                nccl = None
    torch_source = f"torch {torch.__version__}" if torch is not None else "PyTorch not installed"
    cublas = _distribution_version("nvidia-cublas-cu12", "nvidia-cublas-cu13", "nvidia-cublas", "nvidia-cublas-cu11")
    build = tensorflow_build_info()
    tf_version = _distribution_version("tensorflow", "tensorflow-cpu")
    if build is not None and tf_version is not None:
        if build.get("is_cuda_build") and build.get("cuda_version"):
            tf_version += f" (built for CUDA {build['cuda_version']}, cuDNN {build.get('cudnn_version', '?')})"
        else:
            tf_version += " (built without CUDA)"
    numba_version = _distribution_version("numba")
    if numba_version is not None and numba_backend.BACKEND is not None:
        numba_version += f" ({'GPU' if numba_backend.BACKEND == 'gpu' else 'CUDA simulator'})"
    return [
        StackLayer("NVIDIA driver", driver, "kernel module + libcuda: talks to the GPU, loads and launches code",
                   driver_source),
        StackLayer("CUDA runtime", cuda_runtime, "memory, streams, kernel launches (libcudart) for the framework",
                   f"torch.version.cuda ({torch_source})"),
        StackLayer("cuBLAS", cublas, "tuned dense linear algebra: matmul, the core of linear and attention layers",
                   "pip package nvidia-cublas-* (PyTorch's CUDA wheels bring it)"),
        StackLayer("cuDNN", cudnn, "tuned convolutions, pooling, normalisation, activations, attention",
                   "torch.backends.cudnn.version()"),
        StackLayer("NCCL", nccl, "multi-GPU communication: all-reduce, broadcast (lesson 14)",
                   "torch.cuda.nccl.version() (needs a visible GPU)"),
        StackLayer("PyTorch", None if torch is None else torch.__version__, "framework: calls the libraries above",
                   "torch.__version__"),
        StackLayer("TensorFlow", tf_version, "framework; `tensorflow[and-cuda]` loads the same nvidia-* wheels as torch",
                   "tf.sysconfig.get_build_info(), read without starting TensorFlow"),
        StackLayer("Numba", numba_version, "compiles your Python kernels to GPU code (or simulates them)",
                   "numba.__version__ and use_cuda_or_simulator()"),
    ]


def nvidia_wheels() -> list[tuple[str, str]]:
    """(name, version) of every installed pip distribution named nvidia-*: the CUDA libraries the frameworks load.

    nvidia-ml-py is left out: it holds Python bindings to NVML (the driver's monitoring library), not a CUDA library.

    Taught in lesson 04_cuda_model.
    """
    from importlib import metadata

    found = {}
    for distribution in metadata.distributions():
        name = (distribution.metadata["Name"] or "").lower()
        if name.startswith("nvidia-") and name != "nvidia-ml-py":
            found[name] = distribution.version
    return sorted(found.items())



__all__ = ["StackLayer", "nvidia_wheels", "software_stack", "tensorflow_build_info"]
