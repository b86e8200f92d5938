"""CUDA from Python: the software stack, Numba's GPU or simulator, launch sizes, and a tracer of global memory.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when ``numba.cuda`` is first imported, so a lesson calls
:func:`use_cuda_or_simulator` before anything imports ``numba.cuda``. The tracer (:func:`trace_kernel`) never needs
a GPU: it runs a kernel's Python source on the CPU, one simulated thread at a time, and records every read and
write of the arrays passed to it. It runs the same way on a Colab GPU as on a laptop.
"""

from __future__ import annotations

import importlib
import importlib.util
import numbers
import os
import shutil
import subprocess
import sys
import threading
import types
import warnings
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from gpucourse._validate import non_negative_int, one_of, positive_int

BACKENDS = ("auto", "gpu", "simulator")
MAX_THREADS_PER_BLOCK = 1024
"""CUDA's limit on threads per block (every GPU since compute capability 2.0)."""
MAX_TRACED_THREADS = 1 << 16
"""Largest launch :func:`trace_kernel` accepts: it runs every thread in Python, so keep launches small."""
WARP_SIZE = 32

BACKEND: str | None = None
"""The backend chosen by :func:`use_cuda_or_simulator` ('gpu' or 'simulator'), None before it is called."""
BACKEND_REASON: str = ""
"""One sentence saying why that backend was chosen."""


# --------------------------------------------------------------------------- the software stack

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
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
            cuda = pynvml.nvmlSystemGetCudaDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        version = version.decode() if isinstance(version, bytes) else version
        return f"{version} (supports CUDA up to {cuda // 1000}.{cuda % 1000 // 10})", "NVML"
    except Exception:  # no pynvml, or no driver: NVML raises its own error classes
        pass
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
    """TensorFlow's ``tf.sysconfig.get_build_info()``, read without starting TensorFlow (None if not installed)."""
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
    """The CUDA stack from driver to frameworks with this machine's versions (None where a layer is absent)."""
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
    if numba_version is not None and BACKEND is not None:
        numba_version += f" ({'GPU' if BACKEND == 'gpu' else 'CUDA simulator'})"
    return [
        StackLayer("NVIDIA driver", driver, "kernel module + libcuda: talks to the GPU, loads and launches code",
                   driver_source),
        StackLayer("CUDA runtime", cuda_runtime, "memory, streams, kernel launches (libcudart) for the framework",
                   f"torch.version.cuda ({torch_source})"),
        StackLayer("cuBLAS", cublas, "tuned dense linear algebra: matmul, the core of linear and attention layers",
                   "pip package nvidia-cublas-* (PyTorch's CUDA wheels bring it)"),
        StackLayer("cuDNN", cudnn, "tuned convolutions, pooling, normalisation, activations, attention",
                   "torch.backends.cudnn.version()"),
        StackLayer("NCCL", nccl, "multi-GPU communication: all-reduce, broadcast (lesson 06)",
                   "torch.cuda.nccl.version() (needs a visible GPU)"),
        StackLayer("PyTorch", None if torch is None else torch.__version__, "framework: calls the libraries above",
                   "torch.__version__"),
        StackLayer("TensorFlow", tf_version, "framework; `tensorflow[and-cuda]` loads the same nvidia-* wheels as torch",
                   "tf.sysconfig.get_build_info(), read without starting TensorFlow"),
        StackLayer("Numba", numba_version, "compiles your Python kernels to GPU code (or simulates them)",
                   "numba.__version__ and use_cuda_or_simulator()"),
    ]


def nvidia_wheels() -> list[tuple[str, str]]:
    """(name, version) of every installed pip distribution named nvidia-*: the CUDA libraries the frameworks load."""
    from importlib import metadata

    found = {}
    for distribution in metadata.distributions():
        name = (distribution.metadata["Name"] or "").lower()
        if name.startswith("nvidia-"):
            found[name] = distribution.version
    return sorted(found.items())


# --------------------------------------------------------------------------- GPU or simulator

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
    """Ask a fresh Python process whether Numba's real CUDA target finds a GPU (this process cannot switch back)."""
    env = {key: value for key, value in os.environ.items() if key != "NUMBA_ENABLE_CUDASIM"}
    code = "import sys\nfrom numba import cuda\nsys.exit(0 if cuda.is_available() else 1)"
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
            raise RuntimeError("prefer='gpu': a GPU is visible but Numba cannot use it (CUDA toolkit libraries "
                               "missing?); use prefer='auto' for the simulator")
        return "simulator", ("a GPU is visible but Numba cannot use it (CUDA toolkit libraries missing?): Numba's "
                             "CUDA simulator runs the kernels on the CPU instead")
    return "gpu", "Numba compiles each kernel to GPU machine code and runs it on the GPU"


def use_cuda_or_simulator(prefer: str = "auto", verbose: bool = True) -> str:
    """Select Numba's CUDA backend before numba.cuda is imported: 'gpu' if one is usable, else 'simulator'."""
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


# --------------------------------------------------------------------------- launch sizes

def blocks_for(n: int, threads_per_block: int) -> int:
    """Blocks needed so that blocks x threads_per_block >= n: the ceiling of n / threads_per_block."""
    n = positive_int("n", n)
    threads_per_block = positive_int("threads_per_block", threads_per_block)
    if threads_per_block > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"threads_per_block must be <= {MAX_THREADS_PER_BLOCK} (CUDA's limit), got {threads_per_block}")
    return -(-n // threads_per_block)


def grid_2d(shape: tuple[int, int], block: tuple[int, int]) -> tuple[int, int]:
    """Grid (blocks in x, blocks in y) covering an array of ``shape`` (rows, columns): x runs along columns."""
    if not isinstance(shape, tuple) or len(shape) != 2:
        raise TypeError(f"shape must be a tuple (rows, columns), got {shape!r}")
    if not isinstance(block, tuple) or len(block) != 2:
        raise TypeError(f"block must be a tuple (threads in x, threads in y), got {block!r}")
    rows, columns = positive_int("shape[0]", shape[0]), positive_int("shape[1]", shape[1])
    block_x, block_y = positive_int("block[0]", block[0]), positive_int("block[1]", block[1])
    if block_x * block_y > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"block must hold <= {MAX_THREADS_PER_BLOCK} threads (CUDA's limit), got "
                         f"{block_x} x {block_y} = {block_x * block_y}")
    return -(-columns // block_x), -(-rows // block_y)


def _dim3(name: str, value: object) -> tuple[int, int, int]:
    """A launch dimension (int or tuple of 1-3 ints) as (x, y, z)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        value = (value,)
    if not isinstance(value, tuple) or not 1 <= len(value) <= 3:
        raise TypeError(f"{name} must be an int or a tuple of 1-3 ints, got {value!r}")
    sizes = [positive_int(f"{name}[{i}]", v) for i, v in enumerate(value)]
    return tuple(sizes + [1] * (3 - len(sizes)))  # type: ignore[return-value]


# --------------------------------------------------------------------------- the tracer's simulated CUDA

class Dim3(NamedTuple):
    """A CUDA index or size with fields x, y, z."""

    x: int
    y: int
    z: int


class ThreadId(NamedTuple):
    """One CUDA thread: its block's index and its index inside the block, each (x, y, z)."""

    block: Dim3
    thread: Dim3

    def __str__(self) -> str:
        return f"block {tuple(self.block)}, thread {tuple(self.thread)}"


class _Aborted(Exception):
    """Raised inside waiting simulated threads when another thread of the block failed."""


def _fill_value(dtype: np.dtype) -> object:
    """What fresh shared and local memory holds in the tracer: NaN for floats (real memory is uninitialised)."""
    return np.nan if np.issubdtype(dtype, np.inexact) else 0


def _as_dtype(dtype: object) -> np.dtype:
    """A numpy dtype from a numpy dtype, a Python type or a Numba type such as numba.float32."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return np.dtype(str(dtype))


class _SimThread(threading.Thread):
    """One simulated CUDA thread; it runs only when the scheduler hands it the turn."""

    def __init__(self, target, block: Dim3, thread: Dim3, gid: int, block_state: "_BlockState") -> None:
        super().__init__(daemon=True)
        self._target_fn = target
        self.blockIdx, self.threadIdx, self.gid, self.block_state = block, thread, gid, block_state
        self.turn, self.yielded = threading.Semaphore(0), threading.Semaphore(0)
        self.status, self.error, self.abort, self.barriers, self.allocations = "new", None, False, 0, 0

    def run(self) -> None:
        self.turn.acquire()
        try:
            self._target_fn()
        except _Aborted:
            pass
        except BaseException as error:  # handed to the scheduler, which re-raises it in the caller
            self.error = error
        finally:
            self.status = "finished"
            self.yielded.release()

    def resume(self) -> None:
        """Scheduler side: let this thread run until it reaches a barrier or ends."""
        if self.status == "new":
            self.start()
        self.status = "running"
        self.turn.release()
        self.yielded.acquire()

    def syncthreads(self) -> None:
        """Thread side: wait at the block's barrier (give the turn back to the scheduler)."""
        self.barriers += 1
        self.status = "waiting"
        self.yielded.release()
        self.turn.acquire()
        if self.abort:
            raise _Aborted()


@dataclass
class _BlockState:
    """Memory one block shares: its shared arrays, in the order the kernel declares them."""

    shared: list = field(default_factory=list)


class _Shared:
    """cuda.shared: one array per declaration and block, matched by declaration order (not by source line)."""

    def array(self, shape, dtype):
        """Allocate (first thread) or look up (other threads) this block's next shared array."""
        current = threading.current_thread()
        dtype = _as_dtype(dtype)
        arrays, index = current.block_state.shared, current.allocations
        current.allocations += 1
        if index == len(arrays):
            arrays.append(np.full(shape, _fill_value(dtype), dtype=dtype))
        return arrays[index]


class _Local:
    """cuda.local: a private array per thread."""

    def array(self, shape, dtype):
        """A fresh per-thread array (NaN-filled floats, like uninitialised memory made visible)."""
        dtype = _as_dtype(dtype)
        return np.full(shape, _fill_value(dtype), dtype=dtype)


class _Atomic:
    """cuda.atomic: read-modify-write of one element (the tracer runs one thread at a time, so it is atomic)."""

    @staticmethod
    def _update(array, index, value, combine):
        old = array[index]
        array[index] = combine(old, value)
        return old

    def add(self, array, index, value):
        """array[index] += value; return the old value."""
        return self._update(array, index, value, lambda a, b: a + b)

    def max(self, array, index, value):
        """array[index] = max(array[index], value); return the old value."""
        return self._update(array, index, value, max)

    def min(self, array, index, value):
        """array[index] = min(array[index], value); return the old value."""
        return self._update(array, index, value, min)


class _TracingCuda:
    """Stands in for ``numba.cuda`` inside a traced kernel."""

    warpsize = WARP_SIZE

    def __init__(self, griddim: Dim3, blockdim: Dim3) -> None:
        self.gridDim, self.blockDim = griddim, blockdim
        self.shared, self.local, self.atomic = _Shared(), _Local(), _Atomic()

    @property
    def threadIdx(self) -> Dim3:
        return threading.current_thread().threadIdx

    @property
    def blockIdx(self) -> Dim3:
        return threading.current_thread().blockIdx

    @property
    def laneid(self) -> int:
        t, b = threading.current_thread().threadIdx, self.blockDim
        return (t.x + b.x * (t.y + b.y * t.z)) % WARP_SIZE

    def grid(self, ndim: int):
        """Global index of this thread: blockIdx * blockDim + threadIdx, in 1, 2 or 3 dimensions."""
        b, t, d = self.blockIdx, self.threadIdx, self.blockDim
        index = (b.x * d.x + t.x, b.y * d.y + t.y, b.z * d.z + t.z)
        if ndim not in (1, 2, 3):
            raise ValueError(f"cuda.grid(ndim) needs ndim 1, 2 or 3, got {ndim}")
        return index[0] if ndim == 1 else index[:ndim]

    def gridsize(self, ndim: int):
        """Threads in the whole grid along each of the first ``ndim`` dimensions."""
        size = tuple(g * d for g, d in zip(self.gridDim, self.blockDim))
        if ndim not in (1, 2, 3):
            raise ValueError(f"cuda.gridsize(ndim) needs ndim 1, 2 or 3, got {ndim}")
        return size[0] if ndim == 1 else size[:ndim]

    def syncthreads(self) -> None:
        """Barrier: every thread of the block waits here until all have arrived."""
        threading.current_thread().syncthreads()

    def threadfence(self) -> None:
        """Memory fence: nothing to do when threads run one at a time."""

    threadfence_block = threadfence_system = threadfence

    def __getattr__(self, name: str):
        raise AttributeError(f"cuda.{name} is not supported by gpucourse's kernel tracer (it supports threadIdx, "
                             "blockIdx, blockDim, gridDim, grid, gridsize, syncthreads, shared, local, atomic)")


class _RecordingArray:
    """A global-memory array as a traced kernel sees it: every element read and write is recorded."""

    def __init__(self, name: str, array: np.ndarray, trace: "KernelTrace") -> None:
        self._name, self._array, self._trace = name, array, trace
        self.shape, self.size, self.ndim, self.dtype = array.shape, array.size, array.ndim, array.dtype

    def __len__(self) -> int:
        return len(self._array)

    def _flat(self, index: object, kind: str) -> int:
        """Flat position of an element index, or a clear error naming the thread for a bad one."""
        where = threading.current_thread()
        label = f"{self._name}[{index if not isinstance(index, tuple) else ', '.join(map(str, index))}]"
        parts = index if isinstance(index, tuple) else (index,)
        if len(parts) != self.ndim or not all(isinstance(p, numbers.Integral) and not isinstance(p, bool)
                                              for p in parts):
            raise TypeError(f"thread ({ThreadId(where.blockIdx, where.threadIdx)}) {kind} {label}: the tracer "
                            f"follows element accesses, so index all {self.ndim} dimension(s) with integers")
        fixed = []
        for part, size in zip(parts, self.shape):
            part = int(part)
            if not -size <= part < size:
                raise IndexError(f"thread ({ThreadId(where.blockIdx, where.threadIdx)}) {kind} {label}, outside "
                                 f"{self._name} of shape {self.shape}: a missing guard such as `if i < n:`?")
            fixed.append(part % size)
        return int(np.ravel_multi_index(fixed, self.shape))

    def __getitem__(self, index):
        flat = self._flat(index, "read")
        self._trace._record(self._name, "read", flat)
        return self._array.flat[flat]

    def __setitem__(self, index, value) -> None:
        flat = self._flat(index, "wrote")
        self._array.flat[flat] = value
        self._trace._record(self._name, "write", flat)

    def __repr__(self) -> str:
        return f"<traced global array {self._name}: shape {self.shape}, {self.dtype}>"


def _python_function(kernel: object) -> types.FunctionType:
    """The Python function behind a @cuda.jit kernel (real or simulated), or the function itself."""
    function = getattr(kernel, "py_func", kernel)
    if not isinstance(function, types.FunctionType):
        raise TypeError(f"kernel must be a @cuda.jit kernel or a Python function, got {type(kernel).__name__}")
    return function


def _is_numba_cuda(value: object) -> bool:
    """True for the numba.cuda module (simulator or real target; also when NVIDIA's numba-cuda package provides it)."""
    return isinstance(value, types.ModuleType) and (value is sys.modules.get("numba.cuda")
                                                    or value.__name__.endswith("numba.cuda"))


def _is_device_function(value: object) -> bool:
    """True for a @cuda.jit(device=True) function of either Numba backend."""
    options = getattr(value, "targetoptions", None)
    return bool(getattr(value, "_device", False) or (isinstance(options, dict) and options.get("device")))


def _names_used(code: types.CodeType) -> set[str]:
    """Global names a code object (and the functions and comprehensions nested in it) may look up."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names_used(constant)
    return names


def _rebind(function: types.FunctionType, fake: _TracingCuda, done: dict) -> types.FunctionType:
    """A copy of ``function`` whose ``cuda`` (global or closure variable) is the tracer's, device functions too."""
    if id(function) in done:
        return done[id(function)]

    def swap(value):
        if _is_numba_cuda(value):
            return fake
        if _is_device_function(value):
            return _rebind(_python_function(value), fake, done)
        return value

    cells = None
    if function.__closure__ is not None:
        cells = []
        for cell in function.__closure__:
            try:
                cells.append(types.CellType(swap(cell.cell_contents)))
            except ValueError:  # an empty cell (a variable not yet assigned)
                cells.append(cell)
        cells = tuple(cells)
    namespace = dict(function.__globals__)
    new = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__, cells)
    done[id(function)] = new
    used = _names_used(function.__code__)
    namespace.update({name: swap(value) for name, value in function.__globals__.items()
                      if name in used or _is_numba_cuda(value)})
    return new


# --------------------------------------------------------------------------- the trace

@dataclass
class KernelTrace:
    """Every global-memory read and write of one traced launch, by thread, with the barriers each thread passed."""

    griddim: Dim3
    blockdim: Dim3
    arrays: dict[str, np.ndarray]
    accesses: list[tuple[int, str, str, int]] = field(default_factory=list)
    """(thread number, array name, 'read' or 'write', flat element index), in execution order."""
    barriers: np.ndarray | None = None
    """syncthreads() calls per thread."""

    @property
    def threads_per_block(self) -> int:
        """Threads in one block."""
        return self.blockdim.x * self.blockdim.y * self.blockdim.z

    @property
    def blocks(self) -> int:
        """Blocks in the grid."""
        return self.griddim.x * self.griddim.y * self.griddim.z

    @property
    def threads(self) -> int:
        """Threads launched (blocks x threads per block), including any that had no element to work on."""
        return self.blocks * self.threads_per_block

    def thread_id(self, number: int) -> ThreadId:
        """Block and thread index of thread ``number`` (numbered block by block, x fastest, as CUDA does)."""
        block, thread = divmod(number, self.threads_per_block)
        g, d = self.griddim, self.blockdim
        return ThreadId(Dim3(block % g.x, block // g.x % g.y, block // (g.x * g.y)),
                        Dim3(thread % d.x, thread // d.x % d.y, thread // (d.x * d.y)))

    def _record(self, name: str, kind: str, flat: int) -> None:
        self.accesses.append((threading.current_thread().gid, name, kind, flat))

    def _check_array(self, array: str | None) -> None:
        if array is not None and array not in self.arrays:
            raise ValueError(f"array must be one of the kernel's array arguments {list(self.arrays)}, got {array!r}")

    def _count(self, kind: str, array: str | None) -> np.ndarray:
        self._check_array(array)
        counts = np.zeros(self.threads, dtype=np.int64)
        for number, name, what, _ in self.accesses:
            if what == kind and (array is None or name == array):
                counts[number] += 1
        return counts

    def reads_per_thread(self, array: str | None = None) -> np.ndarray:
        """Global-memory element reads of each thread (of one array, or of all), indexed by thread number."""
        return self._count("read", array)

    def writes_per_thread(self, array: str | None = None) -> np.ndarray:
        """Global-memory element writes of each thread (of one array, or of all), indexed by thread number."""
        return self._count("write", array)

    def writer_map(self, array: str, what: str = "thread") -> np.ndarray:
        """For each element of ``array``: who wrote it last (-1 if nobody), or how often ('count')."""
        self._check_array(array)
        fields = ("thread", "block", "count", "thread_x", "thread_y", "thread_z", "block_x", "block_y", "block_z",
                  "global_x", "global_y", "global_z")
        one_of("what", what, fields)
        shape = self.arrays[array].shape
        writer = np.full(int(np.prod(shape)), -1, dtype=np.int64)
        count = np.zeros(writer.size, dtype=np.int64)
        for number, name, kind, flat in self.accesses:
            if kind == "write" and name == array:
                writer[flat], count[flat] = number, count[flat] + 1
        if what == "count":
            return count.reshape(shape)
        if what == "thread":
            return writer.reshape(shape)
        result = np.full(writer.size, -1, dtype=np.int64)
        for flat, number in enumerate(writer):
            if number < 0:
                continue
            who = self.thread_id(int(number))
            if what == "block":
                result[flat] = number // self.threads_per_block
                continue
            axis = "xyz".index(what[-1])
            if what.startswith("thread_"):
                result[flat] = who.thread[axis]
            elif what.startswith("block_"):
                result[flat] = who.block[axis]
            else:  # global_x/y/z: blockIdx * blockDim + threadIdx
                result[flat] = who.block[axis] * self.blockdim[axis] + who.thread[axis]
        return result.reshape(shape)

    def sectors_per_request(self, array: str, kind: str = "read", sector_bytes: int = 32) -> float:
        """Mean distinct memory sectors one warp touches per access instruction to ``array``: the coalescing gauge."""
        self._check_array(array)
        one_of("kind", kind, ("read", "write"))
        sector_bytes = positive_int("sector_bytes", sector_bytes)
        itemsize = self.arrays[array].itemsize
        sequence: dict[int, int] = {}
        requests: dict[tuple[int, int], set[int]] = {}
        for number, name, what, flat in self.accesses:
            if name == array and what == kind:
                step = sequence.get(number, 0)
                sequence[number] = step + 1
                warp = number // self.threads_per_block * self.threads_per_block + \
                    number % self.threads_per_block // WARP_SIZE
                requests.setdefault((warp, step), set()).add(flat * itemsize // sector_bytes)
        if not requests:
            raise ValueError(f"no thread did a {kind} of {array!r}")
        return sum(len(sectors) for sectors in requests.values()) / len(requests)

    def check_budget(self, reads: int, writes: int, *, array: str | None = None, name: str = "memory budget",
                     hint: str = "", quiet: bool = False) -> None:
        """Raise CheckFailed naming the worst thread unless every thread stays within ``reads`` and ``writes``."""
        from gpucourse.checks import CheckFailed

        budget = {"reads": non_negative_int("reads", reads), "writes": non_negative_int("writes", writes)}
        where = "global" if array is None else f"{array!r}"
        for kind, counts in (("reads", self.reads_per_thread(array)), ("writes", self.writes_per_thread(array))):
            worst = int(np.argmax(counts))
            if counts[worst] > budget[kind]:
                over = int((counts > budget[kind]).sum())
                noun = kind if counts[worst] != 1 else kind[:-1]
                raise CheckFailed(f"{name}: thread ({self.thread_id(worst)}) made {counts[worst]} {where} {noun}, "
                                  f"budget {budget[kind]} per thread ({over} of {self.threads} threads over)"
                                  + (f"\n  Hint: {hint}" if hint else ""))
        if not quiet:
            reads_text = f"{budget['reads']} {where} read" + ("" if budget["reads"] == 1 else "s")
            writes_text = f"{budget['writes']} write" + ("" if budget["writes"] == 1 else "s")
            print(f"\N{CHECK MARK} {name}: every thread within {reads_text} and {writes_text}")

    def summary(self) -> str:
        """A few lines: the launch, reads and writes per thread, barriers, and how each array was written."""
        reads, writes = self.reads_per_thread(), self.writes_per_thread()
        lines = [f"{self.blocks} block(s) x {self.threads_per_block} threads = {self.threads} threads "
                 f"(grid {tuple(self.griddim)}, block {tuple(self.blockdim)})",
                 f"global reads per thread: min {reads.min()}, max {reads.max()}, total {reads.sum()}",
                 f"global writes per thread: min {writes.min()}, max {writes.max()}, total {writes.sum()}",
                 f"idle threads (no global access): {int(((reads + writes) == 0).sum())}"]
        if self.barriers is not None and self.barriers.any():
            lines.append(f"syncthreads() per thread: max {self.barriers.max()}")
        for name, array in self.arrays.items():
            count = self.writer_map(name, "count")
            if count.any():
                lines.append(f"{name}: {int((count > 0).sum())} of {count.size} elements written, "
                             f"{int((count > 1).sum())} more than once")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


def trace_kernel(kernel: object, griddim: int | tuple[int, ...], blockdim: int | tuple[int, ...],
                 *args: object, max_threads: int = MAX_TRACED_THREADS) -> KernelTrace:
    """Run ``kernel[griddim, blockdim](*args)`` in Python, one thread at a time, recording every global access."""
    function = _python_function(kernel)
    grid, block = Dim3(*_dim3("griddim", griddim)), Dim3(*_dim3("blockdim", blockdim))
    max_threads = positive_int("max_threads", max_threads)
    per_block = block.x * block.y * block.z
    if per_block > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"blockdim {tuple(block)} has {per_block} threads; CUDA allows at most "
                         f"{MAX_THREADS_PER_BLOCK} per block")
    total = per_block * grid.x * grid.y * grid.z
    if total > max_threads:
        raise ValueError(f"griddim x blockdim launches {total} threads, more than max_threads={max_threads}: the "
                         "tracer runs each one in Python, so trace a smaller problem")
    names = list(function.__code__.co_varnames[:function.__code__.co_argcount])
    if len(args) != len(names):
        raise TypeError(f"kernel {function.__name__}{tuple(names)} takes {len(names)} arguments, got {len(args)}")
    for name, value in zip(names, args):
        if not isinstance(value, np.ndarray) and hasattr(value, "copy_to_host"):
            raise TypeError(f"argument {name!r} is a device array: pass numpy arrays to trace_kernel")
    arrays = {name: value for name, value in zip(names, args) if isinstance(value, np.ndarray) and value.ndim > 0}
    trace = KernelTrace(griddim=grid, blockdim=block, arrays=arrays)
    fake = _TracingCuda(grid, block)
    traced = _rebind(function, fake, {})
    call_args = [_RecordingArray(name, value, trace) if name in arrays else value for name, value in zip(names, args)]
    barriers = np.zeros(total, dtype=np.int64)
    for block_number in range(grid.x * grid.y * grid.z):
        block_index = Dim3(block_number % grid.x, block_number // grid.x % grid.y, block_number // (grid.x * grid.y))
        state = _BlockState()
        threads = []
        for thread_number in range(per_block):
            thread_index = Dim3(thread_number % block.x, thread_number // block.x % block.y,
                                thread_number // (block.x * block.y))
            threads.append(_SimThread(lambda: traced(*call_args), block_index, thread_index,
                                      block_number * per_block + thread_number, state))
        _run_block(threads)
        for thread in threads:
            barriers[thread.gid] = thread.barriers
    trace.barriers = barriers
    return trace


def _run_block(threads: list[_SimThread]) -> None:
    """Run a block's threads one at a time in thread order; each runs until its next syncthreads() or its end."""
    active = threads
    while active:
        for thread in active:
            thread.resume()
            if thread.error is not None:
                for other in threads:  # release the threads parked at a barrier so they end
                    if other.status == "waiting":
                        other.abort = True
                        other.resume()
                error = thread.error
                if hasattr(error, "add_note") and "thread (block" not in str(error):
                    error.add_note(f"in traced thread ({ThreadId(thread.blockIdx, thread.threadIdx)})")
                raise error
        active = [thread for thread in active if thread.status == "waiting"]


# --------------------------------------------------------------------------- the picture

def plot_thread_map(trace: KernelTrace, array: str, ax=None, annotate: bool | None = None, wrap: int = 64):
    """Draw which thread wrote each element of ``array``: colour = block, label = threadIdx; return the Axes."""
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    if not isinstance(trace, KernelTrace):
        raise TypeError(f"trace must be a KernelTrace (from trace_kernel), got {type(trace).__name__}")
    trace._check_array(array)
    wrap = positive_int("wrap", wrap)
    if annotate is not None and not isinstance(annotate, bool):
        raise TypeError(f"annotate must be True, False or None, got {annotate!r}")
    shape = trace.arrays[array].shape
    if len(shape) > 2:
        raise ValueError(f"array must be 1-D or 2-D to draw, {array!r} has shape {shape}")
    blocks, count = trace.writer_map(array, "block"), trace.writer_map(array, "count")
    tx, ty = trace.writer_map(array, "thread_x"), trace.writer_map(array, "thread_y")
    if len(shape) == 1:  # a long vector is drawn as rows of `wrap` elements
        width = min(shape[0], wrap)
        rows = -(-shape[0] // width)
        pad = rows * width - shape[0]
        blocks, count, tx, ty = (np.concatenate([m, np.full(pad, -2)]).reshape(rows, width)
                                 for m in (blocks, count, tx, ty))
    if ax is None:
        rows, columns = blocks.shape
        _, ax = plt.subplots(figsize=(min(14, 1 + 0.45 * columns), min(10, 1 + 0.45 * rows)))
    palette = plt.get_cmap("tab20").colors
    colors = ["#ffffff", "#f2f2f2"] + [palette[(2 * i) % 20 if i < 10 else (2 * i + 1) % 20] for i in range(20)]
    image = np.where(blocks >= 0, 2 + blocks % 20, np.where(blocks == -1, 0, 1))
    ax.imshow(image, cmap=ListedColormap(colors), vmin=0, vmax=len(colors) - 1, interpolation="nearest")
    rows, columns = blocks.shape
    for r in range(rows):  # block boundaries: a thick line wherever the writing block changes
        for c in range(columns):
            if c + 1 < columns and blocks[r, c] != blocks[r, c + 1]:
                ax.plot([c + 0.5, c + 0.5], [r - 0.5, r + 0.5], color="black", lw=2)
            if r + 1 < rows and blocks[r, c] != blocks[r + 1, c]:
                ax.plot([c - 0.5, c + 0.5], [r + 0.5, r + 0.5], color="black", lw=2)
            if count[r, c] > 1:
                ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", lw=2))
    if annotate is None:
        annotate = rows * columns <= 400
    if annotate:
        two_d = trace.blockdim.y > 1
        for r in range(rows):
            for c in range(columns):
                if blocks[r, c] >= 0:
                    label = f"{tx[r, c]},{ty[r, c]}" if two_d else f"{tx[r, c]}"
                    ax.text(c, r, label, ha="center", va="center", fontsize=6 if two_d else 8)
                elif blocks[r, c] == -1:
                    ax.text(c, r, "-", ha="center", va="center", color="grey")
    ax.set_xticks(range(columns) if columns <= 40 else [])
    ax.set_yticks(range(rows) if len(shape) == 2 and rows <= 40 else [])
    ax.tick_params(labelsize=7)
    label = "threadIdx.x,threadIdx.y" if trace.blockdim.y > 1 else "threadIdx.x"
    ax.set_title(f"who wrote each element of {array}\ncolour = block, label = {label}; "
                 f"'-' = never written, red = written twice or more", fontsize=9)
    ax.set_xlabel("column index j" if len(shape) == 2 else
                  "element index" if rows == 1 else f"element index mod {columns} (one row per {columns} elements)")
    if len(shape) == 2:
        ax.set_ylabel("row index i")
    return ax


__all__ = ["BACKEND", "BACKEND_REASON", "Dim3", "KernelTrace", "MAX_THREADS_PER_BLOCK", "StackLayer", "ThreadId",
           "blocks_for", "grid_2d", "plot_thread_map", "software_stack", "tensorflow_build_info", "trace_kernel",
           "use_cuda_or_simulator"]


# --------------------------------------------------------------------------- occupancy

_CC_TABLE = ("NVIDIA, CUDA C++ Programming Guide, 'Compute Capabilities': table 'Technical Specifications per "
             "Compute Capability' (compute capability {cc})")


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits that decide how many warps can be resident at once (from the CUDA compute-capability table)."""

    gpu: str
    compute_capability: str
    max_warps: int
    max_blocks: int
    registers: int
    max_registers_per_thread: int
    shared_bytes: int
    max_shared_bytes_per_block: int
    reserved_shared_bytes_per_block: int
    source: str


SM_LIMITS: dict[str, SmLimits] = {
    "T4": SmLimits("T4", "7.5", max_warps=32, max_blocks=16, registers=65536, max_registers_per_thread=255,
                   shared_bytes=64 * 1024, max_shared_bytes_per_block=64 * 1024, reserved_shared_bytes_per_block=0,
                   source=_CC_TABLE.format(cc="7.5")),
    "A100": SmLimits("A100", "8.0", max_warps=64, max_blocks=32, registers=65536, max_registers_per_thread=255,
                     shared_bytes=164 * 1024, max_shared_bytes_per_block=163 * 1024,
                     reserved_shared_bytes_per_block=1024, source=_CC_TABLE.format(cc="8.0")),
    "H100": SmLimits("H100", "9.0", max_warps=64, max_blocks=32, registers=65536, max_registers_per_thread=255,
                     shared_bytes=228 * 1024, max_shared_bytes_per_block=227 * 1024,
                     reserved_shared_bytes_per_block=1024, source=_CC_TABLE.format(cc="9.0")),
}
"""SM limits of three GPUs. Shared memory is the most a kernel can opt in to; 1 KB per block is reserved from 8.0 on."""

REGISTER_ALLOCATION_UNIT = 256
"""Registers are given to a warp in units of 256 (NVIDIA's occupancy calculator, compute capability 7.x-9.0)."""


@dataclass(frozen=True)
class Occupancy:
    """How many blocks and warps of a kernel fit on one SM at once, and which resource runs out first."""

    gpu: str
    blocks_per_sm: int
    warps_per_sm: int
    max_warps: int
    limits: dict = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        """Resident warps / the SM's maximum: the occupancy."""
        return self.warps_per_sm / self.max_warps

    @property
    def limited_by(self) -> str:
        """The resource that allows the fewest blocks ('warps', 'blocks', 'registers' or 'shared memory')."""
        return min(self.limits, key=self.limits.get)

    def __str__(self) -> str:
        return (f"{self.gpu}: {self.blocks_per_sm} blocks = {self.warps_per_sm} of {self.max_warps} warps per SM "
                f"({self.fraction:.0%}), limited by {self.limited_by}")


def occupancy(threads_per_block: int, registers_per_thread: int = 32, shared_bytes_per_block: int = 0,
              gpu: str = "T4") -> Occupancy:
    """Resident blocks and warps per SM for a launch configuration (a simplified occupancy calculator).

    Each block needs ceil(threads / 32) warps; each warp needs its registers rounded up to 256; each block needs its
    shared memory plus the reserved 1 KB (8.0 and later). The SM holds as many blocks as the scarcest resource
    allows. NVIDIA's calculator also rounds shared memory to its allocation unit; this one does not.
    """
    one_of("gpu", gpu, SM_LIMITS)
    sm = SM_LIMITS[gpu]
    threads_per_block = positive_int("threads_per_block", threads_per_block)
    if threads_per_block > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"threads_per_block must be <= {MAX_THREADS_PER_BLOCK} (CUDA's limit), got {threads_per_block}")
    registers_per_thread = positive_int("registers_per_thread", registers_per_thread)
    if registers_per_thread > sm.max_registers_per_thread:
        raise ValueError(f"registers_per_thread must be <= {sm.max_registers_per_thread}, got {registers_per_thread}")
    shared_bytes_per_block = non_negative_int("shared_bytes_per_block", shared_bytes_per_block)
    if shared_bytes_per_block > sm.max_shared_bytes_per_block:
        raise ValueError(f"shared_bytes_per_block must be <= {sm.max_shared_bytes_per_block} on a {gpu}, "
                         f"got {shared_bytes_per_block}")
    warps_per_block = -(-threads_per_block // WARP_SIZE)
    registers_per_warp = -(-registers_per_thread * WARP_SIZE // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    limits = {"warps": sm.max_warps // warps_per_block,
              "blocks": sm.max_blocks,
              "registers": sm.registers // (registers_per_warp * warps_per_block),
              "shared memory": sm.shared_bytes // (shared_bytes_per_block + sm.reserved_shared_bytes_per_block)
              if shared_bytes_per_block + sm.reserved_shared_bytes_per_block else sm.max_blocks}
    blocks = min(limits.values())
    return Occupancy(gpu=gpu, blocks_per_sm=blocks, warps_per_sm=blocks * warps_per_block, max_warps=sm.max_warps,
                     limits=limits)


def occupancy_table(configs: list[tuple[int, int, int]], gpus: tuple[str, ...] = ("T4", "A100", "H100")) -> str:
    """A Markdown table of occupancy for (threads, registers per thread, shared bytes) configurations on ``gpus``."""
    if not isinstance(configs, list) or not configs:
        raise TypeError("configs must be a non-empty list of (threads, registers, shared bytes) tuples")
    header = "| threads / block | registers / thread | shared memory / block | " + \
        " | ".join(f"{gpu}: warps per SM (limit)" for gpu in gpus) + " |"
    lines = [header, "|" + " --- |" * (3 + len(gpus))]
    for threads, registers, shared in configs:
        cells = []
        for gpu in gpus:
            result = occupancy(threads, registers, shared, gpu)
            cells.append(f"{result.warps_per_sm} / {result.max_warps} ({result.limited_by})")
        lines.append(f"| {threads} | {registers} | {shared // 1024} KB | " + " | ".join(cells) + " |")
    return "\n".join(lines)
