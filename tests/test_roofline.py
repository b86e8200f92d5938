"""Tests of gpucourse.roofline: FLOPs, bytes, intensity, the roofline bound and its plot."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpucourse.hardware import GPU_SPECS  # noqa: E402
from gpucourse.roofline import (  # noqa: E402
    Conv2dShape,
    Roof,
    RooflinePoint,
    arithmetic_intensity,
    attainable_flops,
    bound,
    conv2d_bytes,
    conv2d_flops,
    conv2d_output_size,
    dtype_bytes,
    elementwise_bytes,
    elementwise_flops,
    matmul_bytes,
    matmul_flops,
    plot_roofline,
    ridge_point,
    time_lower_bound,
)

PROPERTY = settings(deadline=None, max_examples=50, derandomize=True, database=None)

# Positive finite numbers over the range a roofline meets (FLOP/byte, FLOP/s, bytes/s).
intensities = st.floats(1e-4, 1e5)
peaks = st.floats(1e9, 1e16)
bandwidths = st.floats(1e9, 1e13)
sizes = st.integers(1, 4096)

# Wrong values for each kind of argument, with the error each must raise.
BAD_INTS = [("8", TypeError), (None, TypeError), (8.0, TypeError), (True, TypeError), (0, ValueError), (-2, ValueError)]
BAD_NUMBERS = [("1e9", TypeError), (None, TypeError), (True, TypeError), (0, ValueError), (-1.0, ValueError),
               (float("nan"), ValueError), (float("inf"), ValueError)]
BAD_DTYPES = [("float31", ValueError), ("fp32", ValueError), ("", ValueError), (None, TypeError), (4, TypeError)]


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --------------------------------------------------------------------------- known values

@pytest.mark.parametrize("dtype, nbytes", [("float64", 8), ("float32", 4), ("tf32", 4), ("bfloat16", 2),
                                           ("float16", 2), ("int8", 1)])
def test_dtype_bytes(dtype, nbytes):
    assert dtype_bytes(dtype) == nbytes


def test_matmul_flops_known_value():
    assert matmul_flops(2, 3, 4) == 48


def test_matmul_flops_of_the_seed_articles_10000_matmul_is_2e12():
    assert matmul_flops(10_000, 10_000, 10_000) == 2 * 10**12


def test_matmul_bytes_reads_a_and_b_and_writes_c_once():
    assert matmul_bytes(2, 3, 4) == (2 * 4 + 4 * 3 + 2 * 3) * 4
    assert matmul_bytes(2, 3, 4, "float16") == (2 * 4 + 4 * 3 + 2 * 3) * 2


def test_elementwise_flops_and_bytes_known_values():
    assert elementwise_flops(1000) == 1000
    assert elementwise_flops(1000, 2) == 2000
    assert elementwise_bytes(1000) == 1000 * 3 * 4  # two inputs read, one output written, float32
    assert elementwise_bytes(1000, inputs=1, outputs=1, dtype="bfloat16") == 1000 * 2 * 2


@pytest.mark.parametrize("size, kernel, stride, padding, expected", [
    (224, 7, 2, 3, 112), (32, 3, 1, 1, 32), (32, 3, 1, 0, 30), (28, 5, 1, 0, 24), (7, 7, 1, 0, 1),
    (5, 2, 2, 0, 2), (1, 3, 1, 1, 1),
])
def test_conv2d_output_size_known_values(size, kernel, stride, padding, expected):
    assert conv2d_output_size(size, kernel, stride, padding) == expected


@PROPERTY
@given(size=st.integers(1, 300), kernel=st.integers(1, 11), stride=st.integers(1, 5), padding=st.integers(0, 5))
def test_conv2d_output_size_counts_the_window_positions(size, kernel, stride, padding):
    padded = size + 2 * padding
    assume(kernel <= padded)
    assert conv2d_output_size(size, kernel, stride, padding) == len(range(0, padded - kernel + 1, stride))


@pytest.mark.parametrize("size, kernel, stride, padding", [(9, 3, 2, 1), (10, 4, 3, 2), (5, 5, 1, 0), (16, 1, 4, 0)])
def test_conv2d_output_size_matches_pytorch(size, kernel, stride, padding):
    torch = pytest.importorskip("torch")
    out = torch.nn.functional.conv2d(torch.zeros(1, 1, size, size), torch.zeros(1, 1, kernel, kernel),
                                     stride=stride, padding=padding)
    assert out.shape[-1] == conv2d_output_size(size, kernel, stride, padding)


def test_conv2d_flops_of_resnet50s_first_layer():
    """3->64 channels, 7x7 stride 2 on 224x224: 118 M multiply-adds, the figure usually quoted."""
    shape = Conv2dShape(batch=1, in_channels=3, out_channels=64, height=224, width=224, kernel_size=7, stride=2,
                        padding=3)
    assert (shape.out_height, shape.out_width) == (112, 112)
    assert conv2d_flops(shape) == 2 * 64 * 112 * 112 * 3 * 49 == 236_027_904


def test_conv2d_bytes_counts_input_weights_and_output_once():
    shape = Conv2dShape(batch=2, in_channels=3, out_channels=8, height=10, width=12, kernel_size=3)
    inputs, weights, outputs = 2 * 3 * 10 * 12, 8 * 3 * 3 * 3, 2 * 8 * 8 * 10
    assert conv2d_bytes(shape) == (inputs + weights + outputs) * 4
    assert conv2d_bytes(shape, "float16") == (inputs + weights + outputs) * 2


def test_conv2d_flops_match_an_equivalent_matmul():
    """A 1x1 convolution is a matmul of (batch*h*w x in) by (in x out)."""
    shape = Conv2dShape(batch=4, in_channels=16, out_channels=32, height=8, width=8, kernel_size=1)
    assert conv2d_flops(shape) == matmul_flops(4 * 8 * 8, 32, 16)


def test_conv2d_shape_with_rectangular_input():
    shape = Conv2dShape(batch=1, in_channels=1, out_channels=1, height=10, width=20, kernel_size=3, stride=2, padding=1)
    assert (shape.out_height, shape.out_width) == (5, 10)


def test_arithmetic_intensity_and_ridge_point_known_values():
    assert arithmetic_intensity(48, 104) == pytest.approx(48 / 104)
    t4 = GPU_SPECS["T4"]
    assert ridge_point(t4.peak_flops("float32"), t4.bandwidth) == pytest.approx(25.3125)
    a100 = GPU_SPECS["A100-80GB"]
    assert ridge_point(a100.peak_flops("float16"), a100.bandwidth) == pytest.approx(312e12 / 2039e9)


def test_elementwise_add_is_memory_bound_and_big_matmul_compute_bound_on_a_t4():
    t4 = GPU_SPECS["T4"]
    peak, bw = t4.peak_flops("float32"), t4.bandwidth
    add = arithmetic_intensity(elementwise_flops(10**6), elementwise_bytes(10**6))
    big = arithmetic_intensity(matmul_flops(4096, 4096, 4096), matmul_bytes(4096, 4096, 4096))
    assert add == pytest.approx(1 / 12)
    assert bound(add, peak, bw) == "memory" and bound(big, peak, bw) == "compute"
    assert attainable_flops(add, peak, bw) == pytest.approx(320e9 / 12)
    assert attainable_flops(big, peak, bw) == peak


def test_time_lower_bound_known_values():
    # 2e12 FLOPs on a T4 at 8.1 TFLOP/s take at least 0.247 s: the seed article's 10.6 s is 43x that.
    t4 = GPU_SPECS["T4"]
    nbytes = matmul_bytes(10_000, 10_000, 10_000)
    seconds = time_lower_bound(matmul_flops(10_000, 10_000, 10_000), nbytes, t4.peak_flops("float32"), t4.bandwidth)
    assert seconds == pytest.approx(2e12 / 8.1e12)
    assert time_lower_bound(1e6, 1e9, 1e12, 1e11) == pytest.approx(1e-2)  # memory-bound: bytes / bandwidth


def test_bound_at_exactly_the_ridge_point_is_compute():
    assert bound(10.0, 1000.0, 100.0) == "compute"
    assert bound(9.999, 1000.0, 100.0) == "memory"


# --------------------------------------------------------------------------- properties

@PROPERTY
@given(intensity=intensities, peak=peaks, bandwidth=bandwidths)
def test_attainable_never_exceeds_peak_nor_bandwidth_times_intensity(intensity, peak, bandwidth):
    attainable = attainable_flops(intensity, peak, bandwidth)
    assert 0 < attainable <= peak
    assert attainable <= bandwidth * intensity
    assert attainable == peak or attainable == bandwidth * intensity


@PROPERTY
@given(low=intensities, high=intensities, peak=peaks, bandwidth=bandwidths)
def test_attainable_is_monotone_in_intensity(low, high, peak, bandwidth):
    low, high = sorted((low, high))
    assert attainable_flops(low, peak, bandwidth) <= attainable_flops(high, peak, bandwidth)


@PROPERTY
@given(intensity=intensities, peak=peaks, bandwidth=bandwidths)
def test_bound_agrees_with_the_ridge_point_and_the_roofline(intensity, peak, bandwidth):
    ridge = ridge_point(peak, bandwidth)
    kind = bound(intensity, peak, bandwidth)
    assert kind == ("memory" if intensity < ridge else "compute")
    attainable = attainable_flops(intensity, peak, bandwidth)
    if kind == "memory":
        assert attainable == pytest.approx(bandwidth * intensity, rel=1e-12) and attainable <= peak
    else:
        assert attainable == pytest.approx(peak, rel=1e-12)


@PROPERTY
@given(flops=st.floats(1, 1e18), nbytes=st.floats(1, 1e15), peak=peaks, bandwidth=bandwidths)
def test_time_lower_bound_is_at_least_compute_time_and_memory_time(flops, nbytes, peak, bandwidth):
    seconds = time_lower_bound(flops, nbytes, peak, bandwidth)
    assert seconds >= flops / peak and seconds >= nbytes / bandwidth
    assert seconds == max(flops / peak, nbytes / bandwidth)
    # the same bound read off the roofline: FLOPs over the attainable rate at the op's intensity
    attainable = attainable_flops(arithmetic_intensity(flops, nbytes), peak, bandwidth)
    assert seconds == pytest.approx(flops / attainable, rel=1e-9)


@PROPERTY
@given(n=st.integers(1, 20_000), m=st.integers(1, 20_000))
def test_matmul_intensity_grows_with_n(n, m):
    assume(n != m)
    n, m = sorted((n, m))

    def intensity(size):
        return arithmetic_intensity(matmul_flops(size, size, size), matmul_bytes(size, size, size))

    assert intensity(n) < intensity(m)
    assert intensity(n) == pytest.approx(n / 6)  # 2n^3 FLOPs over 3 n^2 float32 values


@PROPERTY
@given(m=sizes, n=sizes, k=sizes)
def test_matmul_flops_and_bytes_formulas(m, n, k):
    assert matmul_flops(m, n, k) == 2 * m * n * k == matmul_flops(n, m, k)
    assert matmul_bytes(m, n, k, "float16") * 2 == matmul_bytes(m, n, k, "float32")


@PROPERTY
@given(numel=st.integers(1, 10**9), inputs=st.integers(1, 4), outputs=st.integers(1, 3),
       dtype=st.sampled_from(["float64", "float32", "bfloat16", "int8"]))
def test_elementwise_bytes_is_linear_in_numel_and_operands(numel, inputs, outputs, dtype):
    assert elementwise_bytes(numel, inputs, outputs, dtype) == numel * (inputs + outputs) * dtype_bytes(dtype)


@PROPERTY
@given(batch=st.integers(1, 8), cin=st.integers(1, 8), cout=st.integers(1, 8), size=st.integers(3, 32),
       kernel=st.integers(1, 3), stride=st.integers(1, 2), padding=st.integers(0, 1))
def test_conv2d_flops_scale_linearly_with_batch(batch, cin, cout, size, kernel, stride, padding):
    one = Conv2dShape(1, cin, cout, size, size, kernel, stride, padding)
    many = Conv2dShape(batch, cin, cout, size, size, kernel, stride, padding)
    assert conv2d_flops(many) == batch * conv2d_flops(one)
    assert conv2d_flops(one) == 2 * cout * one.out_height * one.out_width * cin * kernel**2


# --------------------------------------------------------------------------- bad input

def _cases(function, valid, bad_by_arg):
    """Parametrize cases: ``function(**valid)`` with one argument replaced by each of its bad values."""
    return [pytest.param(function, {**valid, arg: value}, error, arg, id=f"{function.__name__}-{arg}={value!r}")
            for arg, bads in bad_by_arg.items() for value, error in bads]


BAD_CALLS = (
    _cases(dtype_bytes, {"dtype": "float32"}, {"dtype": BAD_DTYPES})
    + _cases(matmul_flops, {"m": 2, "n": 3, "k": 4}, {"m": BAD_INTS, "n": BAD_INTS, "k": BAD_INTS})
    + _cases(matmul_bytes, {"m": 2, "n": 3, "k": 4, "dtype": "float32"},
             {"m": BAD_INTS, "n": BAD_INTS, "k": BAD_INTS, "dtype": BAD_DTYPES})
    + _cases(elementwise_flops, {"numel": 10, "flops_per_element": 1},
             {"numel": BAD_INTS, "flops_per_element": BAD_INTS})
    + _cases(elementwise_bytes, {"numel": 10, "inputs": 2, "outputs": 1, "dtype": "float32"},
             {"numel": BAD_INTS, "inputs": BAD_INTS, "outputs": BAD_INTS, "dtype": BAD_DTYPES})
    + _cases(conv2d_output_size, {"size": 32, "kernel_size": 3, "stride": 1, "padding": 0},
             {"size": BAD_INTS, "kernel_size": BAD_INTS, "stride": BAD_INTS,
              "padding": [("1", TypeError), (None, TypeError), (1.0, TypeError), (True, TypeError), (-1, ValueError)]})
    + _cases(arithmetic_intensity, {"flops": 1e9, "nbytes": 1e6}, {"flops": BAD_NUMBERS, "nbytes": BAD_NUMBERS})
    + _cases(ridge_point, {"peak_flops": 1e12, "bandwidth": 1e11},
             {"peak_flops": BAD_NUMBERS, "bandwidth": BAD_NUMBERS})
    + _cases(attainable_flops, {"intensity": 4.0, "peak_flops": 1e12, "bandwidth": 1e11},
             {"intensity": BAD_NUMBERS, "peak_flops": BAD_NUMBERS, "bandwidth": BAD_NUMBERS})
    + _cases(bound, {"intensity": 4.0, "peak_flops": 1e12, "bandwidth": 1e11},
             {"intensity": BAD_NUMBERS, "peak_flops": BAD_NUMBERS, "bandwidth": BAD_NUMBERS})
    + _cases(time_lower_bound, {"flops": 1e9, "nbytes": 1e6, "peak_flops": 1e12, "bandwidth": 1e11},
             {"flops": BAD_NUMBERS, "nbytes": BAD_NUMBERS, "peak_flops": BAD_NUMBERS, "bandwidth": BAD_NUMBERS})
)


@pytest.mark.parametrize("function, kwargs, error, argname", BAD_CALLS)
def test_bad_input_is_rejected_naming_the_argument(function, kwargs, error, argname):
    with pytest.raises(error, match=rf"^{argname}\b"):
        function(**kwargs)


def test_conv2d_output_size_rejects_a_kernel_larger_than_the_padded_input():
    with pytest.raises(ValueError, match=r"^kernel_size=7 is larger than the padded input \(6\)"):
        conv2d_output_size(4, 7, 1, 1)


def test_conv2d_output_size_accepts_numpy_ints_for_every_argument():
    assert conv2d_output_size(np.int64(32), np.int32(3), np.int64(1), np.int64(1)) == 32


CONV_VALID = {"batch": 1, "in_channels": 3, "out_channels": 8, "height": 32, "width": 32, "kernel_size": 3,
              "stride": 1, "padding": 1}


@pytest.mark.parametrize("arg", ["batch", "in_channels", "out_channels", "height", "width", "kernel_size", "stride"])
@pytest.mark.parametrize("value, error", BAD_INTS, ids=repr)
def test_conv2d_shape_rejects_bad_sizes_naming_them(arg, value, error):
    with pytest.raises(error, match=rf"^{arg}\b"):
        Conv2dShape(**{**CONV_VALID, arg: value})


@pytest.mark.parametrize("value, error", [(-1, ValueError), (1.5, TypeError), (None, TypeError)])
def test_conv2d_shape_rejects_a_bad_padding(value, error):
    with pytest.raises(error, match=r"^padding\b"):
        Conv2dShape(**{**CONV_VALID, "padding": value})


def test_conv2d_shape_rejects_a_kernel_larger_than_the_input():
    with pytest.raises(ValueError, match="kernel_size"):
        Conv2dShape(**{**CONV_VALID, "height": 2, "padding": 0})


@pytest.mark.parametrize("function", [conv2d_flops, conv2d_bytes])
@pytest.mark.parametrize("shape", [None, (1, 3, 8, 32, 32, 3), {"batch": 1}], ids=repr)
def test_conv2d_cost_functions_reject_a_non_shape(function, shape):
    with pytest.raises(TypeError, match=r"^shape must be a Conv2dShape"):
        function(shape)


@pytest.mark.parametrize("dtype, error", BAD_DTYPES)
def test_conv2d_bytes_rejects_a_bad_dtype(dtype, error):
    with pytest.raises(error, match=r"^dtype\b"):
        conv2d_bytes(Conv2dShape(**CONV_VALID), dtype)


# --------------------------------------------------------------------------- the plot

def test_plot_roofline_draws_each_roof_with_its_ridge_and_each_point():
    t4 = GPU_SPECS["T4"]
    roofs = [Roof("T4 (datasheet)", t4.peak_flops(), t4.bandwidth), Roof("CPU", 300e9, 40e9)]
    points = [RooflinePoint("add", 1 / 12, 20e9), RooflinePoint("matmul", 100.0, 5e12)]
    ax = plot_roofline(roofs, points)
    roof_lines = [line for line in ax.get_lines() if line.get_label() in {"T4 (datasheet)", "CPU"}]
    assert len(roof_lines) == 2
    y = roof_lines[0].get_ydata()
    assert max(y) == pytest.approx(t4.peak_flops() / 1e9)  # flat roof at the peak, in GFLOP/s
    ridges = [line.get_xdata()[0] for line in ax.get_lines() if line.get_linestyle() == ":"]
    assert sorted(ridges) == pytest.approx(sorted([t4.peak_flops() / t4.bandwidth, 300 / 40]))
    assert len(ax.collections) == 2 and {t.get_text() for t in ax.texts} == {"add", "matmul"}
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"


def test_plot_roofline_draws_on_a_given_axes():
    _, ax = plt.subplots()
    assert plot_roofline([Roof("CPU", 300e9, 40e9)], ax=ax) is ax


@pytest.mark.parametrize("kwargs, error, argname", [
    ({"roofs": []}, ValueError, "roofs"),
    ({"roofs": Roof("CPU", 300e9, 40e9)}, TypeError, "roofs"),
    ({"roofs": None}, TypeError, "roofs"),
    ({"roofs": [("CPU", 300e9, 40e9)]}, TypeError, "roofs"),
    ({"points": [(1.0, 1e9)]}, TypeError, "points"),
    ({"points": RooflinePoint("p", 1.0, 1e9)}, TypeError, "points"),
    ({"points": None}, TypeError, "points"),
    ({"intensity_range": None}, TypeError, "intensity_range"),
    ({"intensity_range": (1.0,)}, TypeError, "intensity_range"),
    ({"intensity_range": (0, 10)}, ValueError, "intensity_range"),
    ({"intensity_range": (10, 1)}, ValueError, "intensity_range"),
    ({"intensity_range": (1, float("nan"))}, ValueError, "intensity_range"),
    ({"ax": "axes"}, TypeError, "ax"),
], ids=str)
def test_plot_roofline_rejects_bad_input_naming_it(kwargs, error, argname):
    arguments = {"roofs": [Roof("CPU", 300e9, 40e9)], **kwargs}
    with pytest.raises(error, match=rf"^{argname}\b"):
        plot_roofline(**arguments)


@pytest.mark.parametrize("args, error, argname", [
    (("CPU", 0, 40e9), ValueError, "peak_flops"), (("CPU", 300e9, float("nan")), ValueError, "bandwidth"),
    (("CPU", "300e9", 40e9), TypeError, "peak_flops"), ((None, 300e9, 40e9), TypeError, "label"),
])
def test_roof_rejects_bad_figures_naming_them(args, error, argname):
    with pytest.raises(error, match=rf"^{argname}\b"):
        Roof(*args)


@pytest.mark.parametrize("args, error, argname", [
    (("p", 0, 1e9), ValueError, "intensity"), (("p", 1.0, -1e9), ValueError, "flops"),
    (("p", None, 1e9), TypeError, "intensity"), ((3, 1.0, 1e9), TypeError, "label"),
])
def test_roofline_point_rejects_bad_figures_naming_them(args, error, argname):
    with pytest.raises(error, match=rf"^{argname}\b"):
        RooflinePoint(*args)


# ---- SimulatedLayerDevice: lesson 02, Exercise 2's simulated GPU
def _layer_device(max_n: int = 4):
    import torch
    from torch import nn

    from gpucourse.roofline import SimulatedLayerDevice

    device = SimulatedLayerDevice(seed=1, max_n=max_n)
    model, make_input = device.build([("up", nn.Linear(8, 16)), ("act", nn.ReLU())], (3, 8), torch.float32,
                                     lambda name, n: 0.001 * n if name == "up" else 0.0005)
    return device, model, make_input


def test_layer_device_queues_until_sync():
    device, model, make_input = _layer_device()
    x = make_input(2)
    assert x.device.type == "meta" and tuple(x.shape) == (2, 3, 8)
    start = device.clock()
    y = model(x)
    assert tuple(y.shape) == (2, 3, 16) and y.device.type == "meta"
    assert device.clock() == start and device.queued_s > 0.0025  # first calls: 2 ms + 0.5 ms + 4 ms each, noisy
    device.sync()
    assert device.queued_s == 0.0 and device.clock() > start + 0.008


def test_layer_device_steady_calls_and_slow_fifth():
    device, model, make_input = _layer_device()
    x, times = make_input(1), []
    for _ in range(10):
        before = device.clock()
        model.up(x)
        device.sync()
        times.append(device.clock() - before)
    assert times[0] > 0.004  # the first call
    assert 0.0008 < np.median(times) < 0.0012  # 1 ms a call, 4% noise
    assert times[3] > 0.0025 and times[8] > 0.0025  # index 3 mod 5: twice its time plus 1 ms


def test_layer_device_out_of_memory_unless_watched():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class Watch(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    device, model, make_input = _layer_device(max_n=4)
    with pytest.raises(torch.OutOfMemoryError, match="does not fit"):
        model(make_input(8))
    with Watch():
        assert tuple(model(make_input(8)).shape) == (8, 3, 16)


def test_layer_device_refuses_bad_input():
    import torch
    from torch import nn

    from gpucourse.roofline import SimulatedLayerDevice

    with pytest.raises(ValueError, match="max_n"):
        SimulatedLayerDevice(seed=0, max_n=0)
    with pytest.raises(ValueError, match="seed"):
        SimulatedLayerDevice(seed=-1, max_n=2)
    device = SimulatedLayerDevice(seed=0, max_n=2)
    with pytest.raises(TypeError, match="layers"):
        device.build([("a", "not a module")], (4,), torch.float32, lambda name, n: 0.001)
    with pytest.raises(TypeError, match="seconds"):
        device.build([("a", nn.ReLU())], (4,), torch.float32, 0.001)
