"""Mixed precision: what survives a cast to 16 bits, the one autocast dtype choice, what autocast runs in which dtype.

Taught in lesson 12_mixed_precision. PyTorch and matplotlib are imported lazily.
"""

from __future__ import annotations

import contextlib
import math
import numbers
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from gpucourse._validate import one_of, positive_number
from gpucourse.formats import LOW_PRECISION, _check_ax, format_facts

# --------------------------------------------------------------------------- gradients in low precision

@dataclass(frozen=True)
class CastReport:
    """What happens to float32 values (e.g. gradients) multiplied by ``scale`` and cast to ``dtype``."""

    dtype: str
    scale: float
    total: int
    zero: int
    underflow: int
    subnormal: int
    normal: int
    overflow: int

    @property
    def nonzero(self) -> int:
        """Values that were not zero to begin with (the fractions below are of these)."""
        return self.total - self.zero

    def fraction(self, kind: str) -> float:
        """Fraction of the non-zero values that 'underflow' to 0, land 'subnormal', stay 'normal' or 'overflow' to inf."""
        one_of("kind", kind, ("underflow", "subnormal", "normal", "overflow"))
        return getattr(self, kind) / self.nonzero if self.nonzero else 0.0

    def __str__(self) -> str:
        return (f"x {self.scale:g} -> {self.dtype}: of {self.nonzero:,} non-zero values "
                f"{self.fraction('underflow'):.2%} underflow to 0, {self.fraction('subnormal'):.2%} subnormal, "
                f"{self.fraction('normal'):.2%} normal, {self.fraction('overflow'):.2%} overflow to inf")


def _tensors(argument: str, values: object) -> list:
    """A flat list of tensors from a module (its parameters' .grad), a tensor, or an iterable of tensors/None."""
    import torch

    if isinstance(values, torch.nn.Module):
        found = [p.grad for p in values.parameters() if p.grad is not None]
        if not found:
            raise ValueError(f"{argument} is a model without gradients: run loss.backward() first")
        return found
    if isinstance(values, torch.Tensor):
        return [values]
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"{argument} must be a model, a tensor or a list of tensors, got {type(values).__name__}")
    found = []
    for item in values:
        if item is None:
            continue
        if not isinstance(item, torch.Tensor):
            raise TypeError(f"{argument} must hold tensors (or None), got {type(item).__name__}")
        found.append(item)
    if not found:
        raise ValueError(f"{argument} holds no tensors")
    return found


def gradient_cast_report(grads: object, dtype: str = "float16", scale: float = 1.0) -> CastReport:
    """Multiply float32 values (a model's gradients, a tensor or tensors) by ``scale``, cast to ``dtype``, count what survives."""
    import torch

    one_of("dtype", dtype, LOW_PRECISION)
    scale = positive_number("scale", scale)
    tensors = _tensors("grads", grads)
    facts = format_facts(dtype)
    counts = dict(total=0, zero=0, underflow=0, subnormal=0, normal=0, overflow=0)
    for tensor in tensors:
        original = tensor.detach().flatten().to(device="cpu", dtype=torch.float64)
        original = original[torch.isfinite(original)]
        cast = (original * scale).to(torch.float32).to(getattr(torch, dtype)).to(torch.float64)
        nonzero = original != 0
        magnitude = cast.abs()
        counts["total"] += original.numel()
        counts["zero"] += int((~nonzero).sum())
        counts["underflow"] += int((nonzero & (cast == 0)).sum())
        counts["overflow"] += int((nonzero & ~torch.isfinite(cast)).sum())
        counts["subnormal"] += int((nonzero & (magnitude > 0) & (magnitude < facts.smallest_normal)).sum())
        counts["normal"] += int((nonzero & torch.isfinite(cast) & (magnitude >= facts.smallest_normal)).sum())
    return CastReport(dtype=dtype, scale=scale, **counts)


def plot_gradient_histogram(grads: object, dtype: str = "float16", scales: Iterable[float] = (1.0,), ax=None):
    """Histogram of log2|g x scale| for each scale, with the limits of ``dtype`` (underflow, subnormal, overflow)."""
    import matplotlib.pyplot as plt
    import numpy as np
    import torch

    one_of("dtype", dtype, LOW_PRECISION)
    if isinstance(scales, (str, bytes)) or not isinstance(scales, Iterable):
        raise TypeError(f"scales must be a list of positive numbers, got {type(scales).__name__}")
    scales = [positive_number("scales", s) for s in scales]
    if not scales:
        raise ValueError("scales must hold at least one number")
    values = torch.cat([t.detach().flatten().to(device="cpu", dtype=torch.float64) for t in _tensors("grads", grads)])
    values = values[torch.isfinite(values) & (values != 0)].abs().log2().numpy()
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3.8))
    else:
        _check_ax(ax)
    facts = format_facts(dtype)
    low, normal, high = (math.log2(facts.smallest_subnormal), math.log2(facts.smallest_normal), math.log2(facts.max))
    shifted = [values + math.log2(s) for s in scales]
    left = min(low - 4, *(float(np.percentile(v, 0.05)) for v in shifted if v.size))  # drop the far-left stragglers
    right = max(high + 4, *(float(v.max()) for v in shifted if v.size))
    bins = np.arange(math.floor(left), math.ceil(right) + 1, 1.0)
    for index, (scale, data) in enumerate(zip(scales, shifted)):
        label = "gradients" if scale == 1 else f"gradients x {scale:g} (2^{math.log2(scale):g})"
        ax.hist(data, bins=bins, alpha=0.55, color=f"C{index}", label=label, histtype="stepfilled")  # one polygon
    ax.axvspan(left, low - 1, color="red", alpha=0.12, label=f"rounds to 0 in {dtype}")
    ax.axvspan(low - 1, normal, color="orange", alpha=0.12, label=f"{dtype} subnormal (fewer significant bits)")
    ax.axvspan(high, right, color="purple", alpha=0.12, label=f"overflows to inf in {dtype}")
    ax.set_xlim(left, right)
    ax.set_xlabel("log2 |value|")
    ax.set_ylabel("count")
    ax.legend(fontsize=8, loc="upper left")
    return ax


# --------------------------------------------------------------------------- autocast

def _device_type(device: object) -> str:
    """'cpu', 'cuda' or 'mps' from a torch.device or a device name."""
    if type(device).__module__ == "torch" and type(device).__name__ == "device":
        device = device.type
    if not isinstance(device, str):
        raise TypeError(f"device must be a torch.device or a str such as 'cpu' or 'cuda:0', got {type(device).__name__}")
    kind = device.split(":")[0]
    one_of("device", kind, ("cpu", "cuda", "mps"))
    return kind


NATIVE_BF16_CAPABILITY = (8, 0)
"""CUDA compute capability from which GPUs have bfloat16 Tensor Cores (Ampere, A100); a T4 (7.5) emulates bfloat16."""


def _cuda_index(device: object) -> int | None:
    """The CUDA device index named by ``device`` ('cuda:1' -> 1), None for the current device."""
    if type(device).__module__ == "torch" and type(device).__name__ == "device":
        return device.index
    text = str(device)
    return int(text.split(":", 1)[1]) if ":" in text else None


def autocast_dtype(device: object):
    """The dtype autocast uses on ``device`` (lesson 12_mixed_precision): bfloat16 on a CPU and on CUDA GPUs of compute
    capability 8.0 and later, float16 on older CUDA GPUs (T4, V100: with a GradScaler) and on Apple's MPS.

    Gated on ``torch.cuda.get_device_capability``, never on ``torch.cuda.is_bf16_supported()``, which also says True on
    a T4, where bfloat16 runs through emulation.
    """
    import torch

    kind = _device_type(device)
    if kind == "cpu":
        return torch.bfloat16
    if kind == "mps":
        return torch.float16
    if not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA GPU is visible: use hardware.pick_device()")
    capability = tuple(torch.cuda.get_device_capability(_cuda_index(device)))
    return torch.bfloat16 if capability >= NATIVE_BF16_CAPABILITY else torch.float16


def needs_grad_scaler(device: object) -> bool:
    """True where autocast runs in float16 on ``device`` (a CUDA GPU before compute capability 8.0, MPS), whose narrow
    range needs loss scaling (``torch.amp.GradScaler``); False for bfloat16 (lesson 12_mixed_precision)."""
    import torch

    return autocast_dtype(device) == torch.float16


@dataclass(frozen=True)
class OpRecord:
    """One PyTorch operation seen under autocast: its name, its floating-point input dtypes, its output dtype."""

    name: str
    input_dtypes: tuple[str, ...]
    output_dtype: str


def _dtype_name(dtype: object) -> str:
    """'float32' from torch.float32."""
    return str(dtype).removeprefix("torch.")


def _floating_dtypes(values: object) -> list[str]:
    """Dtype names of the floating-point tensors among ``values`` (lists and tuples searched one level deep)."""
    import torch

    found = []
    for value in values:
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, torch.Tensor) and item.is_floating_point():
                found.append(_dtype_name(item.dtype))
    return found


def autocast_op_dtypes(fn: Callable[[], object], device_type: str, dtype: object) -> list[OpRecord]:
    """Run ``fn()`` under ``torch.autocast(device_type, dtype)`` and record each top-level op's input and output dtypes."""
    import torch
    from torch.overrides import TorchFunctionMode

    if not callable(fn):
        raise TypeError(f"fn must be callable (e.g. lambda: loss_fn(model(x), y)), got {type(fn).__name__}")
    device_type = one_of("device_type", device_type, ("cpu", "cuda", "mps"))
    if not isinstance(dtype, torch.dtype):
        raise TypeError(f"dtype must be a torch dtype such as torch.bfloat16, got {type(dtype).__name__}")
    if dtype not in (torch.bfloat16, torch.float16):
        raise ValueError(f"dtype must be torch.bfloat16 or torch.float16, got {dtype}")
    if device_type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device_type='cuda' but no CUDA GPU is visible: use hardware.pick_device().type")
    if device_type == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise ValueError("device_type='mps' but Apple's Metal (MPS) backend is not available here")

    records: list[OpRecord] = []

    class _Recorder(TorchFunctionMode):
        """Record every torch function that returns a floating-point tensor (nested calls are not seen)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            if isinstance(out, torch.Tensor) and out.is_floating_point():
                name = getattr(func, "__name__", repr(func))
                records.append(OpRecord(name, tuple(_floating_dtypes([*args, *kwargs.values()])),
                                        _dtype_name(out.dtype)))
            return out

    with torch.autocast(device_type=device_type, dtype=dtype), _Recorder():
        fn()
    return records


@dataclass(frozen=True)
class AutocastCall:
    """One ``torch.autocast(...)`` opened by the code under test: the device type and dtype it asked for."""

    device_type: str
    dtype: str | None
    enabled: bool


@contextlib.contextmanager
def record_autocast(run_on: str, *functions: Callable[..., object]) -> Iterator[list[AutocastCall]]:
    """Record every ``torch.autocast`` opened inside the block, as asked for, and run it on ``run_on`` instead.

    A grader on one device can then check what an answer asks of another: an answer given ``device_type="cuda"``
    on a CPU grader is recorded as asking for CUDA and computes under CPU autocast, so one that writes "cpu" where
    it was given ``device_type`` is caught on any machine. ``torch.autocast`` and ``torch.amp.autocast`` are
    replaced for the block, and so is the name in each of ``functions``' globals that is bound to autocast (an
    answer may have written ``from torch import autocast``).
    """
    import torch

    one_of("run_on", run_on, ("cpu", "cuda", "mps", "xpu", "meta"))
    for index, function in enumerate(functions):
        if not callable(function) or not isinstance(getattr(function, "__globals__", None), dict):
            raise TypeError(f"functions[{index}] must be a Python function (its globals are searched for autocast), "
                            f"got {type(function).__name__}")
    real = torch.amp.autocast_mode.autocast
    calls: list[AutocastCall] = []

    class RecordedAutocast(real):  # type: ignore[misc, valid-type]
        """torch.autocast that notes what it was asked and runs on the grader's device."""

        def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
            calls.append(AutocastCall(str(device_type), None if dtype is None else _dtype_name(dtype), bool(enabled)))
            super().__init__(run_on, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    namespaces = [vars(torch), vars(torch.amp)] + [function.__globals__ for function in functions]
    bound = [(namespace, name) for namespace in namespaces for name, value in list(namespace.items()) if value is real]
    try:
        for namespace, name in bound:
            namespace[name] = RecordedAutocast
        yield calls
    finally:
        for namespace, name in bound:
            namespace[name] = real


def plot_loss_scales(reference: Sequence[float], yours: Sequence[float], skipped: Sequence[bool], title: str = "",
                     ax=None):
    """log2 of the loss scale at each step for GradScaler and for your scaler, skipped steps in red; return the Axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    reference, yours, skipped = list(reference), list(yours), [bool(s) for s in skipped]
    if not yours or len(skipped) != len(yours) or not all(isinstance(v, numbers.Real) and v > 0
                                                          for v in reference + yours):
        raise ValueError("reference and yours must be positive scales, and skipped one flag per step of yours")
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3))
    ax.plot(np.log2(reference), label="torch.amp.GradScaler", linewidth=3, alpha=0.5)
    ax.plot(np.log2(yours), label="your DynamicLossScaler", linestyle="--")
    steps = np.flatnonzero(skipped)
    ax.scatter(steps, np.log2(np.array(yours))[steps], color="red", zorder=3, label="skipped step (overflow)")
    ax.set_xlabel("training step")
    ax.set_ylabel("log2(loss scale)")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    return ax


__all__ = ["AutocastCall", "record_autocast", "CastReport", "gradient_cast_report", "plot_gradient_histogram", "autocast_dtype", "needs_grad_scaler",
           "NATIVE_BF16_CAPABILITY", "OpRecord",
           "autocast_op_dtypes", "plot_loss_scales"]
