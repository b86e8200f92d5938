"""Number formats: bits, range and precision of float64 down to FP8, every representable value, and their plots.

Taught in lesson 12_mixed_precision. PyTorch and matplotlib are imported lazily, inside the functions that need them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
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


# --------------------------------------------------------------------------- FP8 with per-tensor scaling

FP8_FORMATS = ("float8_e4m3fn", "float8_e5m2")
"""The two FP8 formats of NVIDIA's Hopper and Ada Tensor Cores: E4M3 (precision, no infinity) and E5M2 (range)."""


def _fp8_dtype(dtype: object):
    """torch's float8 dtype from a torch dtype or its name."""
    import torch

    name = str(dtype).removeprefix("torch.")
    one_of("dtype", name, FP8_FORMATS)
    return getattr(torch, name)


def scaled_fp8(x: object, dtype: object = "float8_e4m3fn") -> tuple:
    """Per-tensor scaled cast to FP8 (lesson 12_mixed_precision): ``(q, scale)`` with ``q = (x * scale).to(dtype)`` and
    ``scale = fp8 max / amax(|x|)`` (1 for an all-zero tensor), so the largest magnitude lands on the format's largest
    value; ``q.float() / scale`` recovers ``x`` (``unscale_fp8``)."""
    import torch

    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError(f"x must be a floating-point torch tensor, got {type(x).__name__}")
    target = _fp8_dtype(dtype)
    amax = x.detach().abs().max().to(torch.float32) if x.numel() else torch.tensor(0.0)
    if not torch.isfinite(amax):
        raise ValueError("x holds inf or NaN: a per-tensor scale cannot be computed")
    fp8_max = torch.finfo(target).max
    scale = torch.where(amax > 0, fp8_max / amax, torch.ones_like(amax)).to(torch.float32)
    return (x.to(torch.float32) * scale).to(target), scale


def unscale_fp8(q: object, scale: object):
    """The float32 values ``q.float() / scale`` of a tensor cast by ``scaled_fp8``."""
    import torch

    if not isinstance(q, torch.Tensor):
        raise TypeError(f"q must be a torch tensor, got {type(q).__name__}")
    return q.to(torch.float32) / torch.as_tensor(scale, dtype=torch.float32)


__all__ = ["FORMATS", "LOW_PRECISION", "FormatFacts", "format_facts", "format_table", "representable_values",
           "plot_format_ranges", "plot_number_line", "FP8_FORMATS", "scaled_fp8", "unscale_fp8"]
