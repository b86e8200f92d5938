"""FLOPs, bytes, arithmetic intensity and the roofline model, with a plot for measured points."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gpucourse._validate import list_of, non_negative_int, one_of, positive_int, positive_number
from gpucourse.hardware import DTYPE_BYTES


def dtype_bytes(dtype: str) -> int:
    """Bytes per element of a dtype name ('float32', 'bfloat16', ...)."""
    return DTYPE_BYTES[one_of("dtype", dtype, DTYPE_BYTES)]


def matmul_flops(m: int, n: int, k: int) -> int:
    """FLOPs of (m x k) @ (k x n): one multiply and one add per term, 2*m*n*k."""
    return 2 * positive_int("m", m) * positive_int("n", n) * positive_int("k", k)


def matmul_bytes(m: int, n: int, k: int, dtype: str = "float32") -> int:
    """Minimum bytes moved by (m x k) @ (k x n): read A and B once, write C once."""
    m, n, k = positive_int("m", m), positive_int("n", n), positive_int("k", k)
    return (m * k + k * n + m * n) * dtype_bytes(dtype)


def elementwise_flops(numel: int, flops_per_element: int = 1) -> int:
    """FLOPs of an elementwise op over ``numel`` elements (e.g. 1 for an add, 2 for a*x+y)."""
    return positive_int("numel", numel) * positive_int("flops_per_element", flops_per_element)


def elementwise_bytes(numel: int, inputs: int = 2, outputs: int = 1, dtype: str = "float32") -> int:
    """Bytes moved by an elementwise op: every input read once and every output written once."""
    numel, inputs, outputs = positive_int("numel", numel), positive_int("inputs", inputs), positive_int("outputs", outputs)
    return numel * (inputs + outputs) * dtype_bytes(dtype)


def conv2d_output_size(size: int, kernel_size: int, stride: int = 1, padding: int = 0) -> int:
    """Output height (or width) of a convolution: floor((size + 2*padding - kernel_size) / stride) + 1."""
    size, kernel_size, stride = positive_int("size", size), positive_int("kernel_size", kernel_size), positive_int("stride", stride)
    padding = non_negative_int("padding", padding)
    out = (size + 2 * padding - kernel_size) // stride + 1
    if out <= 0:
        raise ValueError(f"kernel_size={kernel_size} is larger than the padded input ({size + 2 * padding})")
    return out


@dataclass(frozen=True)
class Conv2dShape:
    """A 2-D convolution layer applied to a batch: the shapes that decide its cost."""

    batch: int
    in_channels: int
    out_channels: int
    height: int
    width: int
    kernel_size: int
    stride: int = 1
    padding: int = 0

    def __post_init__(self) -> None:
        for name in ("batch", "in_channels", "out_channels", "height", "width", "kernel_size", "stride"):
            positive_int(name, getattr(self, name))
        conv2d_output_size(self.height, self.kernel_size, self.stride, self.padding)
        conv2d_output_size(self.width, self.kernel_size, self.stride, self.padding)

    @property
    def out_height(self) -> int:
        """Output height."""
        return conv2d_output_size(self.height, self.kernel_size, self.stride, self.padding)

    @property
    def out_width(self) -> int:
        """Output width."""
        return conv2d_output_size(self.width, self.kernel_size, self.stride, self.padding)


def conv2d_flops(shape: Conv2dShape) -> int:
    """FLOPs of a convolution (no bias): 2 * batch * out_ch * out_h * out_w * in_ch * k * k."""
    if not isinstance(shape, Conv2dShape):
        raise TypeError(f"shape must be a Conv2dShape, got {type(shape).__name__}")
    s = shape
    return 2 * s.batch * s.out_channels * s.out_height * s.out_width * s.in_channels * s.kernel_size**2


def conv2d_bytes(shape: Conv2dShape, dtype: str = "float32") -> int:
    """Minimum bytes moved by a convolution: input, weights and output, each once."""
    if not isinstance(shape, Conv2dShape):
        raise TypeError(f"shape must be a Conv2dShape, got {type(shape).__name__}")
    s = shape
    inputs = s.batch * s.in_channels * s.height * s.width
    weights = s.out_channels * s.in_channels * s.kernel_size**2
    outputs = s.batch * s.out_channels * s.out_height * s.out_width
    return (inputs + weights + outputs) * dtype_bytes(dtype)


def arithmetic_intensity(flops: float, nbytes: float) -> float:
    """FLOPs done per byte moved to or from memory."""
    return positive_number("flops", flops) / positive_number("nbytes", nbytes)


def ridge_point(peak_flops: float, bandwidth: float) -> float:
    """The intensity (FLOP/byte) at which a device stops being memory-bound: peak / bandwidth."""
    return positive_number("peak_flops", peak_flops) / positive_number("bandwidth", bandwidth)


def attainable_flops(intensity: float, peak_flops: float, bandwidth: float) -> float:
    """Roofline: the best FLOP/s reachable at ``intensity``, min(peak, bandwidth * intensity)."""
    intensity = positive_number("intensity", intensity)
    return min(positive_number("peak_flops", peak_flops), positive_number("bandwidth", bandwidth) * intensity)


def bound(intensity: float, peak_flops: float, bandwidth: float) -> str:
    """'memory' if ``intensity`` is left of the ridge point, else 'compute'."""
    return "memory" if positive_number("intensity", intensity) < ridge_point(peak_flops, bandwidth) else "compute"


def time_lower_bound(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> float:
    """Fewest seconds an op can take: it must both do its FLOPs and move its bytes, max of the two."""
    return max(positive_number("flops", flops) / positive_number("peak_flops", peak_flops),
               positive_number("nbytes", nbytes) / positive_number("bandwidth", bandwidth))


@dataclass(frozen=True)
class RooflinePoint:
    """One measured (or computed) kernel on a roofline plot."""

    label: str
    intensity: float
    flops: float

    def __post_init__(self) -> None:
        if not isinstance(self.label, str):
            raise TypeError(f"label must be a str, got {type(self.label).__name__}")
        positive_number("intensity", self.intensity)
        positive_number("flops", self.flops)


@dataclass(frozen=True)
class Roof:
    """One device's roof: its peak FLOP/s and memory bandwidth, and where those figures came from."""

    label: str
    peak_flops: float
    bandwidth: float

    def __post_init__(self) -> None:
        if not isinstance(self.label, str):
            raise TypeError(f"label must be a str, got {type(self.label).__name__}")
        positive_number("peak_flops", self.peak_flops)
        positive_number("bandwidth", self.bandwidth)


def plot_roofline(roofs: Iterable[Roof], points: Iterable[RooflinePoint] = (), ax=None,
                  intensity_range: tuple[float, float] = (1 / 16, 1024)):
    """Draw each roof and each point on log-log axes; return the matplotlib Axes."""
    import matplotlib.pyplot as plt
    import numpy as np

    roofs = list_of("roofs", roofs, Roof, non_empty=True)
    points = list_of("points", points, RooflinePoint)
    if not isinstance(intensity_range, (tuple, list)) or len(intensity_range) != 2:
        raise TypeError(f"intensity_range must be a (low, high) pair of numbers, got {intensity_range!r}")
    low, high = positive_number("intensity_range[0]", intensity_range[0]), positive_number("intensity_range[1]", intensity_range[1])
    if low >= high:
        raise ValueError(f"intensity_range must be (low, high) with low < high, got {intensity_range!r}")
    if ax is not None and not hasattr(ax, "plot"):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    x = np.logspace(np.log10(low), np.log10(high), 200)
    for roof in roofs:
        y = np.minimum(roof.peak_flops, roof.bandwidth * x)
        (line,) = ax.plot(x, y / 1e9, label=roof.label)
        ax.axvline(roof.peak_flops / roof.bandwidth, color=line.get_color(), linestyle=":", linewidth=0.8)
    for point in points:
        ax.scatter(point.intensity, point.flops / 1e9, zorder=3)
        ax.annotate(point.label, (point.intensity, point.flops / 1e9), textcoords="offset points",
                    xytext=(5, -12), fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per byte)")
    ax.set_ylabel("performance (GFLOP/s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    return ax


class SimulatedLayerDevice:
    """A simulated GPU on which to profile layers (lesson 02, Exercise 2's grader).

    A layer built by :meth:`build` returns from a call at once and queues the seconds ``seconds(name, n)`` gives
    for a batch of n, times 4% log-normal noise; its first call queues 4 ms more, and every fifth (index 3 mod 5)
    twice its time plus 1 ms. :meth:`sync` waits the queue out, advancing :meth:`clock`. Tensors live on PyTorch's
    ``meta`` device (shapes, no data), and a call on more than ``max_n`` samples raises ``torch.OutOfMemoryError``,
    except under a dispatch mode (a counter watching the layer's real operations).
    """

    def __init__(self, seed: int, max_n: int) -> None:
        import random

        seed = non_negative_int("seed", seed)
        self.rng, self.queued_s, self.now_s, self.calls = random.Random(seed), 0.0, 1000.0 * seed, {}
        self.max_n = positive_int("max_n", max_n)  # the most samples a call fits in this device's memory

    def sync(self) -> None:
        """Wait until every queued call has run: the clock advances by the queued seconds."""
        self.now_s, self.queued_s = self.now_s + self.queued_s, 0.0

    def clock(self) -> float:
        """The device's time in seconds (it advances only when sync() waits)."""
        return self.now_s

    def build(self, layers: list, features: tuple, dtype, seconds):
        """(model, make_input): `layers`, (name, module) pairs, as an nn.Sequential whose calls queue here."""
        import math
        from collections import OrderedDict

        import torch
        from torch import nn
        from torch.utils._python_dispatch import _get_current_dispatch_mode

        layers = list_of("layers", layers, tuple, non_empty=True)
        if not all(len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], nn.Module) for pair in layers):
            raise TypeError("layers must be (name, nn.Module) pairs")
        if not callable(seconds):
            raise TypeError(f"seconds must be a function (name, n) -> seconds, got {type(seconds).__name__}")
        features = tuple(positive_int("features", size) for size in features)
        device = self

        def make_input(n: int) -> torch.Tensor:
            return torch.empty((positive_int("n", n), *features), device="meta", dtype=dtype)

        class Layer(nn.Module):
            """A layer on the simulated device: its real operations run (on meta tensors) only when a dispatch mode
            watches or a shape is new; otherwise the call queues its time and returns an output of the right shape."""

            def __init__(self, name: str, inner: nn.Module) -> None:
                super().__init__()
                self.name, self.inner, self.shapes = name, inner.to(device="meta", dtype=dtype), {}

            def forward(self, x: torch.Tensor) -> torch.Tensor:
                if x.shape[0] > device.max_n and _get_current_dispatch_mode() is None:
                    raise torch.OutOfMemoryError(f"simulated device: a call on {x.shape[0]} samples does not fit "
                                                 f"(at most {device.max_n}); predict it from smaller batches")
                index = device.calls[self.name] = device.calls.get(self.name, -1) + 1
                base = seconds(self.name, x.shape[0]) * math.exp(device.rng.gauss(0.0, 0.04))
                device.queued_s += base + (0.004 if index == 0 else base + 0.001 if index % 5 == 3 else 0.0)
                if _get_current_dispatch_mode() is not None or x.shape not in self.shapes:
                    y = self.inner(x)
                    self.shapes[x.shape] = y.shape
                    return y
                return torch.empty(self.shapes[x.shape], device="meta", dtype=dtype)

        model = nn.Sequential(OrderedDict((name, Layer(name, layer)) for name, layer in layers))
        return model, make_input
