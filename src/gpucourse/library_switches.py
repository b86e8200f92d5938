"""The switches of the libraries under the frameworks: TF32 (emulated on any CPU), determinism, cuDNN's algorithm choice.

Taught in lesson 07_gpu_libraries. PyTorch, numpy and TensorFlow are imported inside the functions that need them,
so ``import gpucourse`` stays light; TensorFlow is only touched when it is already imported.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import sys
from collections.abc import Iterator, Mapping

CUBLAS_WORKSPACE_CONFIG = ":4096:8"
"""The cuBLAS workspace setting PyTorch's reproducibility notes ask for (``:16:8`` also works, with less memory)."""

GOAL_KEYS = ("fixed_shapes", "repeatable", "match_float32")
"""What a goal for :func:`choose_switches` says: input shapes never change; runs repeat bit for bit; results equal a
strict float32 run bit for bit."""

SWITCH_KEYS = ("cudnn.benchmark", "cudnn.deterministic", "deterministic_algorithms", "CUBLAS_WORKSPACE_CONFIG",
               "tf32", "tf_op_determinism")
"""The switches :func:`choose_switches` decides, in this order."""

TF32_MANTISSA_BITS = 10
"""TF32 keeps float32's 8 exponent bits and 10 of its 23 mantissa bits."""


# --------------------------------------------------------------------------- TF32, emulated

def round_to_tf32(values: object):
    """float32 values rounded to TF32's 10 mantissa bits (to nearest, ties to even), still stored as float32.

    Inf stays inf, NaN stays NaN; a value above TF32's largest finite number rounds to inf, as in IEEE rounding.
    Taught in lesson 07_gpu_libraries.
    """
    import numpy as np

    array = np.asarray(values)
    if array.dtype.kind not in "fiu":
        raise TypeError(f"values must be real numbers (a float array), got dtype {array.dtype}")
    array = array.astype(np.float32)
    bits = array.view(np.uint32).astype(np.uint64)  # 64-bit so that the rounding increment never overflows
    dropped = 23 - TF32_MANTISSA_BITS
    keep_lsb = (bits >> np.uint64(dropped)) & np.uint64(1)
    rounded = (bits + np.uint64((1 << (dropped - 1)) - 1) + keep_lsb) & np.uint64(~((1 << dropped) - 1) & 0xFFFFFFFF)
    result = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(array), array, result).astype(np.float32)


def tf32_matmul(a: object, b: object):
    """``a @ b`` as a TF32 Tensor Core computes it, emulated: inputs rounded to TF32, products summed in float32.

    Taught in lesson 07_gpu_libraries.
    """
    import numpy as np

    a, b = np.asarray(a), np.asarray(b)
    if a.ndim < 1 or b.ndim < 1:
        raise ValueError(f"a and b must be arrays of at least one dimension, got shapes {a.shape} and {b.shape}")
    return np.matmul(round_to_tf32(a), round_to_tf32(b)).astype(np.float32)


def relative_error(result: object, reference: object) -> float:
    """max |result - reference| / max |reference|: one number for how far a product is from its reference.

    Taught in lesson 07_gpu_libraries.
    """
    import numpy as np

    result, reference = np.asarray(result, dtype=np.float64), np.asarray(reference, dtype=np.float64)
    if result.shape != reference.shape:
        raise ValueError(f"result and reference must have the same shape, got {result.shape} and {reference.shape}")
    scale = float(np.abs(reference).max()) if reference.size else 0.0
    if scale == 0.0:
        raise ValueError("reference must have a nonzero entry (the error is relative to its largest magnitude)")
    return float(np.abs(result - reference).max() / scale)


# --------------------------------------------------------------------------- the switches, read and restored

def _tensorflow():
    """TensorFlow if this process already imported it, else None (reading a switch never starts TensorFlow)."""
    return sys.modules.get("tensorflow")


def _op_determinism():
    """TensorFlow's (is_enabled, enable, disable) for op determinism; only enable is public API (TF 2.8+)."""
    from tensorflow.python.framework import config  # is_op_determinism_enabled and disable_op_determinism live here

    return config.is_op_determinism_enabled, config.enable_op_determinism, config.disable_op_determinism


def library_state() -> dict[str, object]:
    """The switches that decide which kernels run and whether runs repeat, as they are now in this process.

    Taught in lesson 07_gpu_libraries.
    """
    import torch

    state: dict[str, object] = {
        "cudnn.benchmark": bool(torch.backends.cudnn.benchmark),
        "cudnn.deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn.allow_tf32": bool(torch.backends.cudnn.allow_tf32),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
        "CUBLAS_WORKSPACE_CONFIG": os.environ.get("CUBLAS_WORKSPACE_CONFIG"),
    }
    tf = _tensorflow()
    if tf is not None:
        state["tf_op_determinism"] = bool(_op_determinism()[0]())
        state["tf_tf32"] = bool(tf.config.experimental.tensor_float_32_execution_enabled())
    return state


@contextlib.contextmanager
def preserved_state() -> Iterator[dict[str, object]]:
    """Run a block that may change the switches (and the random generators); put everything back afterwards.

    Taught in lesson 07_gpu_libraries.
    """
    import numpy as np
    import torch

    saved = library_state()
    python_rng, numpy_rng, torch_rng = random.getstate(), np.random.get_state(), torch.get_rng_state()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    try:
        yield saved
    finally:
        torch.backends.cudnn.benchmark = saved["cudnn.benchmark"]
        torch.backends.cudnn.deterministic = saved["cudnn.deterministic"]
        torch.backends.cudnn.allow_tf32 = saved["cudnn.allow_tf32"]
        torch.set_float32_matmul_precision(saved["float32_matmul_precision"])
        torch.use_deterministic_algorithms(saved["deterministic_algorithms"], warn_only=warn_only)
        if saved["CUBLAS_WORKSPACE_CONFIG"] is None:
            os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
        else:
            os.environ["CUBLAS_WORKSPACE_CONFIG"] = saved["CUBLAS_WORKSPACE_CONFIG"]
        tf = _tensorflow()
        if tf is not None and "tf_op_determinism" in saved:
            _op_determinism()[1 if saved["tf_op_determinism"] else 2]()
            tf.config.experimental.enable_tensor_float_32_execution(saved["tf_tf32"])
        random.setstate(python_rng)
        np.random.set_state(numpy_rng)
        torch.set_rng_state(torch_rng)


def make_reproducible(seed: int) -> None:
    """Put this process in a reproducible state: every generator seeded, deterministic kernels only, in both frameworks.

    Python's ``random``, numpy's global generator and PyTorch's (CPU and every GPU) get ``seed``; PyTorch uses
    deterministic algorithms only (``CUBLAS_WORKSPACE_CONFIG`` set for cuBLAS), cuDNN neither times algorithms nor
    picks non-deterministic ones; TensorFlow, when imported, gets ``keras.utils.set_random_seed`` and op determinism.
    Taught in lesson 07_gpu_libraries.
    """
    import numpy as np
    import torch

    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = CUBLAS_WORKSPACE_CONFIG  # read when cuBLAS creates its handle
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)  # seeds the CPU and every CUDA generator
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False
    torch.backends.cudnn.deterministic = True
    tf = _tensorflow()
    if tf is not None:
        import keras

        keras.utils.set_random_seed(seed)  # Python, numpy and TensorFlow's generators
        tf.config.experimental.enable_op_determinism()


# --------------------------------------------------------------------------- choosing the switches for a goal

def _goal(goal: object) -> dict[str, bool]:
    """A validated goal: exactly GOAL_KEYS, each a bool."""
    if not isinstance(goal, Mapping):
        raise TypeError(f"goal must be a dict with the keys {list(GOAL_KEYS)}, got {type(goal).__name__}")
    if sorted(goal) != sorted(GOAL_KEYS):
        raise ValueError(f"goal must have exactly the keys {list(GOAL_KEYS)}, got {sorted(goal)}")
    for key, value in goal.items():
        if not isinstance(value, bool):
            raise TypeError(f"goal[{key!r}] must be True or False, got {value!r}")
    return dict(goal)


def choose_switches(goal: Mapping[str, bool]) -> dict[str, object]:
    """The switches for a goal (``GOAL_KEYS``): speed where it costs nothing the goal needs.

    Bit-equality with strict float32 needs TF32 off *and* repeatable runs; repeatable runs need deterministic
    kernels (and the cuBLAS workspace setting) and rule out cuDNN's timing-based choice; that choice pays only when
    input shapes stay fixed. Taught in lesson 07_gpu_libraries.
    """
    goal = _goal(goal)
    repeatable = goal["repeatable"] or goal["match_float32"]
    return {"cudnn.benchmark": goal["fixed_shapes"] and not repeatable,
            "cudnn.deterministic": repeatable,
            "deterministic_algorithms": repeatable,
            "CUBLAS_WORKSPACE_CONFIG": CUBLAS_WORKSPACE_CONFIG if repeatable else None,
            "tf32": not goal["match_float32"],
            "tf_op_determinism": repeatable}


def apply_switches(settings: Mapping[str, object]) -> None:
    """Set the switches of a :func:`choose_switches` answer in PyTorch (and TensorFlow, when imported).

    Taught in lesson 07_gpu_libraries.
    """
    import torch

    if not isinstance(settings, Mapping) or sorted(settings) != sorted(SWITCH_KEYS):
        raise ValueError(f"settings must be a dict with exactly the keys {list(SWITCH_KEYS)}")
    torch.backends.cudnn.benchmark = bool(settings["cudnn.benchmark"])
    torch.backends.cudnn.deterministic = bool(settings["cudnn.deterministic"])
    torch.use_deterministic_algorithms(bool(settings["deterministic_algorithms"]))
    if settings["CUBLAS_WORKSPACE_CONFIG"] is None:
        os.environ.pop("CUBLAS_WORKSPACE_CONFIG", None)
    else:
        os.environ["CUBLAS_WORKSPACE_CONFIG"] = str(settings["CUBLAS_WORKSPACE_CONFIG"])
    torch.backends.cudnn.allow_tf32 = bool(settings["tf32"])
    torch.set_float32_matmul_precision("high" if settings["tf32"] else "highest")
    tf = _tensorflow()
    if tf is not None:
        tf.config.experimental.enable_tensor_float_32_execution(bool(settings["tf32"]))
        _op_determinism()[1 if settings["tf_op_determinism"] else 2]()


# --------------------------------------------------------------------------- the CPU's library: oneDNN

def cpu_libraries() -> dict[str, str]:
    """What PyTorch's build says about its CPU libraries: oneDNN's version, the BLAS, and whether oneDNN is usable.

    Taught in lesson 07_gpu_libraries.
    """
    import torch

    config = torch.__config__.show()
    found = {"oneDNN usable": str(bool(torch.backends.mkldnn.is_available()))}
    onednn = re.search(r"(?:oneDNN|MKL-?DNN)[^\n]*?v?(\d+\.\d+(?:\.\d+)?)", config)
    found["oneDNN version"] = onednn.group(1) if onednn else "not reported"
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    found["BLAS"] = blas.group(1) if blas else "not reported"
    return found


__all__ = ["CUBLAS_WORKSPACE_CONFIG", "GOAL_KEYS", "SWITCH_KEYS", "TF32_MANTISSA_BITS", "apply_switches",
           "choose_switches", "cpu_libraries", "library_state", "make_reproducible", "preserved_state",
           "relative_error", "round_to_tf32", "tf32_matmul"]


# --------------------------------------------------------------------------- a simulated nondeterministic kernel


def atomic_order_sum(x: object, generator: object, reorder: bool) -> object:
    """Sum ``x`` over its last dimension one float32 addition at a time, in a shuffled order when ``reorder``.

    This is what a GPU kernel that adds with atomics does: every thread adds its value when it finishes, so the order
    of the additions, and the last bits of a float32 sum, change from run to run.
    """
    import torch

    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x must be a torch.Tensor, not {type(x).__name__}")
    if not isinstance(generator, torch.Generator):
        raise TypeError(f"generator must be a torch.Generator, not {type(generator).__name__}")
    if x.dim() < 1 or x.shape[-1] == 0:
        raise ValueError(f"x must have a non-empty last dimension, got shape {tuple(x.shape)}")
    values = x.to(torch.float32)
    if reorder:
        values = values[..., torch.randperm(values.shape[-1], generator=generator)]
    total = values[..., 0].clone()
    for i in range(1, values.shape[-1]):  # one float32 rounding per addition, in this order (cumsum adds in float64)
        total = total + values[..., i]
    return total


class AtomicSum:
    """Stand-in for a GPU kernel that sums ``x`` over its last dimension with atomics (simulated on the CPU).

    A ``torch.nn.Module`` built by :func:`atomic_sum`, like a pooling done with ``index_add_`` or ``scatter_add_``. Its own generator decides, call by call, whether the
    additions run in another order (they do on at least one call in any ``period`` consecutive calls); seeding PyTorch
    changes nothing, as on a GPU. With ``flagged=True`` it raises like PyTorch's own nondeterministic CUDA ops when
    ``torch.use_deterministic_algorithms(True)`` is on (and warns, as they do, with ``warn_only=True``); a custom kernel
    (``flagged=False``) does neither.
    """


def atomic_sum(seed: int = 0, flagged: bool = True, chance: float = 0.5, period: int = 4) -> object:
    """A ``torch.nn.Module`` computing ``x.sum(-1)`` whose float32 bits vary between calls (see AtomicSum)."""
    import torch

    if not isinstance(seed, int) or isinstance(seed, bool):
        raise TypeError(f"seed must be an int, not {type(seed).__name__}")
    if not 0.0 <= chance <= 1.0:
        raise ValueError(f"chance must be between 0 and 1, got {chance!r}")
    if not isinstance(period, int) or period < 1:
        raise ValueError(f"period must be a positive int, got {period!r}")

    class _AtomicSum(torch.nn.Module):
        __doc__ = AtomicSum.__doc__

        def __init__(self) -> None:
            super().__init__()
            self.generator = torch.Generator().manual_seed(seed)
            self.flagged, self.chance, self.period, self.calm = flagged, chance, period, 0

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if self.flagged and torch.are_deterministic_algorithms_enabled():
                message = ("atomic_sum does not have a deterministic implementation, but you set "
                           "'torch.use_deterministic_algorithms(True)'.")
                if not torch.is_deterministic_algorithms_warn_only_enabled():
                    raise RuntimeError(message)
                import warnings  # warn_only=True: PyTorch's own flagged ops warn and run

                warnings.warn(message, UserWarning, stacklevel=2)
            draw = float(torch.rand((), generator=self.generator))
            reorder = draw < self.chance or self.calm >= self.period - 1
            self.calm = 0 if reorder else self.calm + 1
            return atomic_order_sum(x, self.generator, reorder).to(x.dtype)

        def extra_repr(self) -> str:
            return f"flagged={self.flagged}"

    _AtomicSum.__name__ = _AtomicSum.__qualname__ = "AtomicSum"
    return _AtomicSum()
