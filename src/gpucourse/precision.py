"""Number formats and mixed precision: format facts, number-line plots, gradient range, autocast dtypes, memory.

PyTorch and matplotlib are imported lazily, inside the functions that need them, so that importing this module
is cheap and works without them.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_number, one_of, positive_int, positive_number

FORMATS = ("float64", "float32", "tf32", "bfloat16", "float16", "float8_e5m2", "float8_e4m3fn")
"""Number formats this module knows, widest first (TF32 is a Tensor Core input format, stored as float32)."""

LOW_PRECISION = ("bfloat16", "float16", "float8_e5m2")
"""Formats gradients can be cast to, to see what survives (IEEE-style: overflow gives inf; FP8 training keeps
gradients in E5M2; TF32 is no storage dtype and E4M3 has no infinity)."""

_NUMPY_NAMES = {"float64": "float64", "float32": "float32", "float16": "float16"}
_STORAGE_BYTES = {"float64": 8, "float32": 4, "tf32": 4, "bfloat16": 2, "float16": 2, "float8_e5m2": 1,
                  "float8_e4m3fn": 1}
_TF32_SOURCE = ("NVIDIA Ampere architecture whitepaper (2020): 1 sign, 8 exponent (float32's range) and 10 mantissa "
                "bits; stored as float32; its subnormal limit follows from that layout")


# --------------------------------------------------------------------------- format facts

@dataclass(frozen=True)
class FormatFacts:
    """Bit layout, range and precision of one floating-point format."""

    name: str
    exponent_bits: int
    mantissa_bits: int
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float
    storage_bytes: int
    source: str

    @property
    def bits(self) -> int:
        """Bits per value: 1 sign bit + exponent bits + mantissa bits."""
        return 1 + self.exponent_bits + self.mantissa_bits

    @property
    def decimal_digits(self) -> float:
        """Significant decimal digits: (mantissa bits + 1 implicit bit) x log10(2)."""
        return (self.mantissa_bits + 1) * math.log10(2)

    @property
    def decades(self) -> float:
        """Orders of magnitude between the smallest subnormal and the largest finite value."""
        return math.log10(self.max) - math.log10(self.smallest_subnormal)

    def __str__(self) -> str:
        return (f"{self.name}: 1+{self.exponent_bits}+{self.mantissa_bits} bits, max {self.max:.4g}, smallest normal "
                f"{self.smallest_normal:.4g}, smallest subnormal {self.smallest_subnormal:.4g}, eps {self.eps:.4g}")


def _facts_from_finfo(name: str, bits: int, eps: float, max_value: float, smallest_normal: float,
                      source: str) -> FormatFacts:
    """FormatFacts from a finfo's bits, eps, max and smallest normal (a power of two times eps is exact)."""
    mantissa = round(-math.log2(eps))
    return FormatFacts(name=name, exponent_bits=bits - 1 - mantissa, mantissa_bits=mantissa, max=float(max_value),
                       smallest_normal=float(smallest_normal), smallest_subnormal=float(smallest_normal) * float(eps),
                       eps=float(eps), storage_bytes=_STORAGE_BYTES[name], source=source)


def format_facts(name: str) -> FormatFacts:
    """Bits, range and precision of a format ('float32', 'tf32', 'bfloat16', 'float16', ...), from torch.finfo or numpy."""
    one_of("name", name, FORMATS)
    if name == "tf32":
        f32 = format_facts("float32")
        eps = 2.0**-10
        return FormatFacts(name="tf32", exponent_bits=8, mantissa_bits=10, max=f32.max,
                           smallest_normal=f32.smallest_normal, smallest_subnormal=f32.smallest_normal * eps,
                           eps=eps, storage_bytes=4, source=_TF32_SOURCE)
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        info = torch.finfo(getattr(torch, name))
        return _facts_from_finfo(name, info.bits, info.eps, info.max, info.smallest_normal,
                                 f"torch.finfo(torch.{name})")
    if name not in _NUMPY_NAMES:
        raise ImportError(f"name={name!r} needs PyTorch (numpy has no {name}): pip install 'gpucourse[torch]'")
    import numpy as np

    info = np.finfo(np.dtype(_NUMPY_NAMES[name]))
    return _facts_from_finfo(name, info.bits, float(info.eps), float(info.max), float(info.smallest_normal),
                             f"numpy.finfo(numpy.{name})")


def format_table(names: Iterable[str] = ("float32", "tf32", "bfloat16", "float16")) -> list[FormatFacts]:
    """FormatFacts of several formats, in the order given."""
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise TypeError(f"names must be a list of format names such as ['float32', 'float16'], got {names!r}")
    return [format_facts(name) for name in names]


def representable_values(name: str, lo: float, hi: float, max_values: int = 100_000):
    """Every non-negative value of format ``name`` in [lo, hi], sorted, as a float64 numpy array."""
    import numpy as np

    facts = format_facts(name)
    lo, hi = non_negative_number("lo", lo), positive_number("hi", hi)
    if hi <= lo:
        raise ValueError(f"hi must be greater than lo, got lo={lo:g}, hi={hi:g}")
    max_values = positive_int("max_values", max_values)
    m = facts.mantissa_bits
    emin, emax = math.frexp(facts.smallest_normal)[1] - 1, math.frexp(facts.max)[1] - 1  # exact, unlike log2
    # (binade start, spacing) pairs: the subnormals share emin's spacing and start at 0
    binades = [(0.0, facts.smallest_subnormal)]
    binades += [(math.ldexp(1.0, e), math.ldexp(1.0, e - m)) for e in range(emin, emax + 1)]
    pieces, count = [], 0
    for start, step in binades:
        end = min(2 * start if start else facts.smallest_normal, facts.max + step)  # values start + k*step < end
        if end <= lo or start > hi:
            continue
        first = max(start, math.ceil(lo / step) * step)
        last = min(end - step, math.floor(hi / step) * step, facts.max)
        if last < first:
            continue
        n = round((last - first) / step) + 1
        count += n
        if count > max_values:
            raise ValueError(f"[{lo:g}, {hi:g}] holds more than max_values={max_values} {name} values: "
                             "narrow the interval or raise max_values")
        pieces.append(first + step * np.arange(n, dtype=np.float64))
    return np.concatenate(pieces) if pieces else np.empty(0, dtype=np.float64)


def _names(argument: str, names: object) -> list[str]:
    """Validate a non-empty list of format names."""
    if isinstance(names, str) or not isinstance(names, Iterable):
        raise TypeError(f"{argument} must be a list of format names such as ['float32', 'float16'], got {names!r}")
    names = list(names)
    if not names:
        raise ValueError(f"{argument} must name at least one format")
    for name in names:
        one_of(argument, name, FORMATS)
    return names


def _check_ax(ax: object) -> None:
    """Raise TypeError unless ``ax`` looks like a matplotlib Axes."""
    if not (hasattr(ax, "plot") and hasattr(ax, "barh") and hasattr(ax, "vlines")):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")


def plot_format_ranges(names: Iterable[str] = ("float32", "tf32", "bfloat16", "float16"),
                       marks: dict[str, float] | None = None, ax=None):
    """Draw each format's positive range on a log2 axis (subnormals pale, normals solid); ``marks`` labels values."""
    import matplotlib.pyplot as plt

    names = _names("names", names)
    marks = {} if marks is None else marks
    if not isinstance(marks, dict):
        raise TypeError(f"marks must be a dict of label -> positive value, got {type(marks).__name__}")
    for label, value in marks.items():
        if not isinstance(label, str):
            raise TypeError(f"marks keys must be str labels, got {type(label).__name__}")
        positive_number(f"marks[{label!r}]", value)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.6 * len(names) + 1.6))
    else:
        _check_ax(ax)
    for row, name in enumerate(names):
        f = format_facts(name)
        sub, normal, top = math.log2(f.smallest_subnormal), math.log2(f.smallest_normal), math.log2(f.max)
        ax.barh(row, normal - sub, left=sub, color=f"C{row}", alpha=0.35, height=0.5)
        ax.barh(row, top - normal, left=normal, color=f"C{row}", height=0.5)
        ax.annotate(f"max {f.max:.3g}", (top, row), xytext=(4, -3), textcoords="offset points", fontsize=8)
        ax.annotate(f"{f.smallest_subnormal:.2g}", (sub, row), xytext=(-4, -3), textcoords="offset points",
                    fontsize=8, ha="right")
    for index, (label, value) in enumerate(marks.items()):
        ax.axvline(math.log2(value), color="black", linestyle=":", linewidth=1)
        ax.annotate(label, (math.log2(value), -0.65 - 0.3 * (index % 3)), xytext=(3, 0), textcoords="offset points",
                    fontsize=8, ha="left", va="center")
    ax.set_yticks(range(len(names)), [f"{n} (1+{format_facts(n).exponent_bits}+{format_facts(n).mantissa_bits})"
                                      for n in names])
    ax.set_ylim(len(names) - 0.5, -1.45 if marks else -0.6)  # inverted: the first format on top, labels above it
    ax.set_xlabel("log2 of the magnitude (pale: subnormals, which lose precision; solid: normal numbers)")
    ax.grid(True, axis="x", alpha=0.3)
    lows = [math.log2(format_facts(n).smallest_subnormal) for n in names]
    highs = [math.log2(format_facts(n).max) for n in names]
    ax.set_xlim(min(lows) - 30, max(highs) + 40)
    return ax


def plot_number_line(names: Iterable[str] = ("float16", "bfloat16"), lo: float = 1.0, hi: float = 1.0625,
                     ax=None, max_ticks: int = 2_000):
    """Draw a tick at every representable value of each format in [lo, hi]; a band where ticks would merge."""
    import matplotlib.pyplot as plt

    names = _names("names", names)
    max_ticks = positive_int("max_ticks", max_ticks)
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.6 * len(names) + 1.2))
    else:
        _check_ax(ax)
    for row, name in enumerate(names):
        try:
            values = representable_values(name, lo, hi, max_values=max_ticks)
            ax.vlines(values, row - 0.3, row + 0.3, color=f"C{row}", linewidth=1)
            label = f"{len(values)} values"
        except ValueError as error:  # too many to draw: say how many there are instead
            if "max_values" not in str(error):
                raise
            ax.barh(row, hi - lo, left=lo, height=0.6, color=f"C{row}", alpha=0.5)
            spacing = format_facts(name).eps * 2.0 ** math.floor(math.log2(max(lo, format_facts(name).smallest_normal)))
            label = f"too dense to draw: about {(hi - lo) / spacing:,.0f} values"
        ax.annotate(label, (hi, row), xytext=(6, -3), textcoords="offset points", fontsize=8)
    ax.set_yticks(range(len(names)), names)
    ax.invert_yaxis()
    ax.set_xlim(lo - 0.01 * (hi - lo), hi + 0.01 * (hi - lo))  # ticks at the ends stay visible
    ax.set_xlabel("value")
    return ax


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


def autocast_dtype(device: object):
    """The low-precision dtype autocast should use on ``device``: bfloat16 on a CPU, float16 on a GPU."""
    import torch

    return torch.bfloat16 if _device_type(device) == "cpu" else torch.float16


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


# --------------------------------------------------------------------------- memory

@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes a training run holds: weights, gradients, optimizer state, saved activations (0 where not measured)."""

    parameters: int
    weights: int
    gradients: int
    optimizer_state: int
    activations: int = 0

    @property
    def total(self) -> int:
        """Sum of the four parts, in bytes."""
        return self.weights + self.gradients + self.optimizer_state + self.activations

    def per_parameter(self) -> dict[str, float]:
        """Each part in bytes per model parameter."""
        if not self.parameters:
            raise ValueError("the model has no parameters")
        return {key: getattr(self, key) / self.parameters
                for key in ("weights", "gradients", "optimizer_state", "activations", "total")}


def _nbytes(tensor) -> int:
    """Bytes of a tensor's elements."""
    return tensor.numel() * tensor.element_size()


def tensor_memory(model: object, optimizer: object = None, activations: int = 0) -> MemoryBreakdown:
    """Measure the bytes of a model's weights, its gradients and the optimizer's state tensors as they are now."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer or None, got {type(optimizer).__name__}")
    if isinstance(activations, bool) or not isinstance(activations, numbers.Integral) or activations < 0:
        raise ValueError(f"activations must be an int >= 0 (bytes), got {activations!r}")
    params = list(model.parameters())
    state = 0
    if optimizer is not None:
        for per_param in optimizer.state.values():
            state += sum(_nbytes(v) for v in per_param.values() if isinstance(v, torch.Tensor) and v.dim() > 0)
    return MemoryBreakdown(parameters=sum(p.numel() for p in params), weights=sum(_nbytes(p) for p in params),
                           gradients=sum(_nbytes(p.grad) for p in params if p.grad is not None),
                           optimizer_state=state, activations=int(activations))


def saved_tensor_bytes(fn: Callable[[], object], exclude: Iterable[object] = ()) -> dict[str, int]:
    """Bytes autograd saves for the backward pass while ``fn()`` runs, by dtype; tensors sharing ``exclude``'s storage are left out."""
    import torch

    if not callable(fn):
        raise TypeError(f"fn must be callable (e.g. lambda: loss_fn(model(x), y)), got {type(fn).__name__}")
    if isinstance(exclude, (str, bytes)) or not isinstance(exclude, Iterable):
        raise TypeError(f"exclude must be an iterable of tensors (e.g. model.parameters()), got {exclude!r}")
    skip = set()
    for tensor in exclude:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"exclude must hold tensors, got {type(tensor).__name__}")
        skip.add(tensor.untyped_storage().data_ptr())
    seen: dict[int, tuple[str, int]] = {}

    def pack(tensor):
        """Note the storage of each saved tensor once (views of one storage are one allocation)."""
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in skip and storage.data_ptr() != 0:
            seen[storage.data_ptr()] = (_dtype_name(tensor.dtype), storage.nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = fn()
    del result  # frees the graph, and with it the saved tensors
    by_dtype: dict[str, int] = {}
    for dtype, nbytes in seen.values():
        by_dtype[dtype] = by_dtype.get(dtype, 0) + nbytes
    return by_dtype


def peak_memory_bytes(fn: Callable[[], object], device: object) -> int:
    """Peak bytes the CUDA caching allocator holds for tensors while ``fn()`` runs (CUDA devices only)."""
    import torch

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if _device_type(device) != "cuda":
        raise ValueError(f"device must be a CUDA device (peak memory is read from CUDA's allocator), got {device!r}; "
                         "on a CPU use tensor_memory() and saved_tensor_bytes()")
    if not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA GPU is visible")
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device) - start)


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


def accumulate_gradients(model: object, x: object, y: object, micro_batch_size: int,
                         loss_fn: Callable | None = None) -> float:
    """Add to the model's .grad the gradient of the mean loss over (x, y), computed micro-batch by micro-batch.

    Each micro-batch's mean loss is weighted by its share of the batch, so the gradients add up to those of one
    backward pass over the whole batch, while only one micro-batch's activations are alive at a time. Returns the
    batch's mean loss. The caller zeroes the gradients before and takes the optimizer step after.
    """
    import torch
    import torch.nn.functional as F

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or len(x) != len(y) or len(x) == 0:
        raise ValueError("x and y must be tensors with the same, non-zero number of examples")
    size = positive_int("micro_batch_size", micro_batch_size)
    loss_fn = F.cross_entropy if loss_fn is None else loss_fn
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    total = 0.0
    for start in range(0, len(x), size):
        share = len(x[start:start + size]) / len(x)
        loss = loss_fn(model(x[start:start + size]), y[start:start + size]) * share
        loss.backward()
        total += loss.item()
    return total


_OOM_FIELDS = {
    "tried_to_allocate": r"Tried to allocate ([\d.]+ [KMGT]?i?B)",
    "total_capacity": r"total capacity of ([\d.]+ [KMGT]?i?B)",
    "free": r"of which ([\d.]+ [KMGT]?i?B) is free",
    "allocated_by_pytorch": r"([\d.]+ [KMGT]?i?B) is allocated by PyTorch",
    "reserved_unallocated": r"([\d.]+ [KMGT]?i?B) is reserved by PyTorch but unallocated",
}
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def parse_oom_message(message: str) -> dict[str, int]:
    """The byte counts in a PyTorch CUDA out-of-memory message (those it contains), keyed by what each one means."""
    import re

    if not isinstance(message, str):
        raise TypeError(f"message must be a str (str(error) of a torch.OutOfMemoryError), got {type(message).__name__}")
    found = {}
    for key, pattern in _OOM_FIELDS.items():
        match = re.search(pattern, message)
        if match:
            number, unit = match.group(1).split()
            found[key] = round(float(number) * _UNITS[unit])
    if not found:
        raise ValueError("message holds none of the numbers of a CUDA out-of-memory error ('Tried to allocate ...')")
    return found


__all__ = ["FORMATS", "LOW_PRECISION", "FormatFacts", "format_facts", "format_table", "representable_values",
           "plot_format_ranges", "plot_number_line", "CastReport", "gradient_cast_report", "plot_gradient_histogram",
           "autocast_dtype", "OpRecord", "autocast_op_dtypes", "MemoryBreakdown", "tensor_memory",
           "saved_tensor_bytes", "peak_memory_bytes", "accumulate_gradients", "parse_oom_message", "plot_loss_scales"]
