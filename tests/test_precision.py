"""Tests of gpucourse.precision: format facts, number lines, gradient casts, autocast dtypes and memory accounting."""

from __future__ import annotations

import math
import sys

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

torch = pytest.importorskip("torch")
nn, F = torch.nn, torch.nn.functional

import gpucourse  # noqa: E402
from gpucourse import precision  # noqa: E402
from gpucourse.precision import (  # noqa: E402
    FORMATS,
    CastReport,
    MemoryBreakdown,
    autocast_dtype,
    autocast_op_dtypes,
    format_facts,
    format_table,
    gradient_cast_report,
    peak_memory_bytes,
    plot_format_ranges,
    plot_gradient_histogram,
    plot_number_line,
    representable_values,
    saved_tensor_bytes,
    tensor_memory,
)

PROPERTY = settings(deadline=None, max_examples=40, derandomize=True, database=None)
HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


# --------------------------------------------------------------------------- format facts

@pytest.mark.parametrize("name, exponent, mantissa, largest, normal, subnormal, eps, storage", [
    ("float16", 5, 10, 65504.0, 2.0**-14, 2.0**-24, 2.0**-10, 2),
    ("bfloat16", 8, 7, (2 - 2**-7) * 2.0**127, 2.0**-126, 2.0**-133, 2.0**-7, 2),
    ("float32", 8, 23, (2 - 2**-23) * 2.0**127, 2.0**-126, 2.0**-149, 2.0**-23, 4),
    ("float64", 11, 52, sys.float_info.max, 2.0**-1022, 5e-324, 2.0**-52, 8),
    ("tf32", 8, 10, (2 - 2**-23) * 2.0**127, 2.0**-126, 2.0**-136, 2.0**-10, 4),
    ("float8_e5m2", 5, 2, 57344.0, 2.0**-14, 2.0**-16, 0.25, 1),
    ("float8_e4m3fn", 4, 3, 448.0, 2.0**-6, 2.0**-9, 0.125, 1),
])
def test_format_facts_known_values(name, exponent, mantissa, largest, normal, subnormal, eps, storage) -> None:
    facts = format_facts(name)
    assert (facts.exponent_bits, facts.mantissa_bits, facts.storage_bytes) == (exponent, mantissa, storage)
    assert (facts.max, facts.smallest_normal, facts.smallest_subnormal, facts.eps) == (largest, normal, subnormal, eps)
    assert facts.bits == 1 + exponent + mantissa
    assert facts.name in str(facts) and facts.source


def test_format_facts_agree_with_numpy() -> None:
    for name in ("float16", "float32", "float64"):
        info = np.finfo(np.dtype(name))
        facts = format_facts(name)
        assert facts.max == float(info.max) and facts.eps == float(info.eps)
        assert facts.smallest_subnormal == float(info.smallest_subnormal)


def test_derived_properties() -> None:
    assert format_facts("float32").decimal_digits == pytest.approx(24 * math.log10(2))
    assert format_facts("float16").decades == pytest.approx(math.log10(65504 / 2**-24))
    assert math.isfinite(format_facts("float64").decades)
    assert format_facts("bfloat16").decades > 75 > 15 > format_facts("float16").decades


@pytest.mark.parametrize("bad, error", [("fp16", ValueError), ("half", ValueError), ("", ValueError),
                                        (None, TypeError), (16, TypeError)])
def test_format_facts_rejects_bad_names(bad, error) -> None:
    with pytest.raises(error, match="name"):
        format_facts(bad)


def test_format_table() -> None:
    assert [f.name for f in format_table()] == ["float32", "tf32", "bfloat16", "float16"]
    assert [f.name for f in format_table(FORMATS)] == list(FORMATS)
    with pytest.raises(TypeError, match="names"):
        format_table("float16")
    with pytest.raises(ValueError, match="name"):
        format_table(["float16", "fp8"])


# --------------------------------------------------------------------------- representable values

def _all_values(torch_dtype, bits: int) -> np.ndarray:
    """Every finite non-negative value of a torch dtype, from its bit patterns."""
    patterns = torch.arange(2**bits, dtype=torch.int32).to(torch.int16 if bits == 16 else torch.uint8)
    values = patterns.view(torch_dtype).double().numpy()
    return np.unique(values[np.isfinite(values) & (values >= 0)])


@pytest.mark.parametrize("name, dtype, bits, hi", [("float16", torch.float16, 16, 1e5), ("bfloat16", torch.bfloat16, 16, 4e38),
                                                  ("float8_e5m2", torch.float8_e5m2, 8, 1e5),
                                                  ("float8_e4m3fn", torch.float8_e4m3fn, 8, 1e3)])
def test_representable_values_are_every_bit_pattern(name, dtype, bits, hi) -> None:
    assert np.array_equal(representable_values(name, 0.0, hi, max_values=10**5), _all_values(dtype, bits))


def test_representable_values_counts() -> None:
    assert len(representable_values("float16", 1.0, 2.0)) == 2**10 + 1
    assert len(representable_values("bfloat16", 1.0, 2.0)) == 2**7 + 1
    assert len(representable_values("tf32", 1.0, 2.0)) == 2**10 + 1
    assert len(representable_values("float32", 1.0, 1.0 + 2**-13)) == 2**10 + 1
    assert representable_values("float16", 65000, 70000)[-1] == 65504.0
    assert representable_values("float64", 0.0, 1e-322)[:2].tolist() == [0.0, 5e-324]
    assert representable_values("float16", 0.1, 0.1 + 1e-6).size == 0  # spacing there is ~6e-5


@PROPERTY
@given(st.sampled_from([("float16", torch.float16), ("bfloat16", torch.bfloat16)]), st.floats(0, 1e4),
       st.floats(1e-3, 50.0))
def test_representable_values_round_trip(fmt, lo, width) -> None:
    name, dtype = fmt
    values = representable_values(name, lo, lo + width, max_values=10**6)
    assert np.all(np.diff(values) > 0) and np.all((values >= lo) & (values <= lo + width))
    assert np.array_equal(torch.from_numpy(values).to(dtype).double().numpy(), values)


@pytest.mark.parametrize("kwargs, error, word", [
    ({"lo": -1.0, "hi": 1.0}, ValueError, "lo"), ({"lo": 2.0, "hi": 1.0}, ValueError, "hi"),
    ({"lo": 0.0, "hi": float("inf")}, ValueError, "hi"), ({"lo": "0", "hi": 1.0}, TypeError, "lo"),
    ({"lo": 1.0, "hi": 2.0, "max_values": 10}, ValueError, "max_values"),
    ({"lo": 1.0, "hi": 2.0, "max_values": 0}, ValueError, "max_values"),
])
def test_representable_values_rejects_bad_input(kwargs, error, word) -> None:
    with pytest.raises(error, match=word):
        representable_values("float16", **kwargs)


def test_plots_return_axes_and_validate() -> None:
    ax = plot_format_ranges(marks={"one": 1.0})
    assert len(ax.get_yticks()) == 4 and ax.get_xlabel()
    ax = plot_number_line(["bfloat16", "float32"], 1.0, 1.0625)
    assert [t.get_text() for t in ax.get_yticklabels()] == ["bfloat16", "float32"]
    assert any("too dense" in t.get_text() for t in ax.texts)  # float32 has ~500k values there
    _, axes = plt.subplots(1, 2)
    assert plot_number_line(["float16"], 2040.0, 2060.0, ax=axes[0]) is axes[0]
    with pytest.raises(TypeError, match="names"):
        plot_format_ranges("float16")
    with pytest.raises(ValueError, match="names"):
        plot_number_line([])
    with pytest.raises(ValueError, match="marks"):
        plot_format_ranges(marks={"zero": 0.0})
    with pytest.raises(TypeError, match="ax"):
        plot_number_line(ax="not an axes")


# --------------------------------------------------------------------------- gradients cast to low precision

def test_gradient_cast_report_counts_each_kind() -> None:
    values = torch.tensor([0.0, 1e-9, -1e-7, 1.0, 1e5, float("nan")])
    report = gradient_cast_report(values, "float16")
    assert (report.total, report.zero, report.underflow, report.subnormal, report.normal, report.overflow) == (5, 1, 1, 1, 1, 1)
    assert sum(report.fraction(k) for k in ("underflow", "subnormal", "normal", "overflow")) == pytest.approx(1.0)
    assert "float16" in str(report)
    scaled = gradient_cast_report([values], "float16", scale=2.0**16)
    assert (scaled.underflow, scaled.subnormal, scaled.normal, scaled.overflow) == (0, 0, 2, 2)
    assert gradient_cast_report(values, "bfloat16").fraction("normal") == 1.0


def test_gradient_cast_report_reads_a_model() -> None:
    model = nn.Linear(4, 3)
    with pytest.raises(ValueError, match="backward"):
        gradient_cast_report(model)
    F.mse_loss(model(torch.ones(2, 4)), torch.zeros(2, 3)).backward()
    report = gradient_cast_report(model)
    assert report.total == 15 and report.nonzero > 0
    assert gradient_cast_report([None, model.weight.grad]).total == 12


@pytest.mark.parametrize("kwargs, error, word", [
    ({"dtype": "float32"}, ValueError, "dtype"), ({"dtype": "tf32"}, ValueError, "dtype"),
    ({"scale": 0}, ValueError, "scale"), ({"scale": "1"}, TypeError, "scale"),
])
def test_gradient_cast_report_rejects_bad_arguments(kwargs, error, word) -> None:
    with pytest.raises(error, match=word):
        gradient_cast_report(torch.ones(3), **kwargs)


@pytest.mark.parametrize("grads, error", [([], ValueError), ([None], ValueError), ("grads", TypeError),
                                          ([1.0, 2.0], TypeError), (3.0, TypeError)])
def test_gradient_cast_report_rejects_bad_grads(grads, error) -> None:
    with pytest.raises(error, match="grads"):
        gradient_cast_report(grads)


def test_gradient_histogram() -> None:
    grads = [torch.logspace(-12, -2, 200)]
    ax = plot_gradient_histogram(grads, "float16", scales=(1.0, 2.0**16))
    assert len(ax.patches) > 0 and ax.get_legend() is not None
    with pytest.raises(ValueError, match="scales"):
        plot_gradient_histogram(grads, scales=())
    with pytest.raises(ValueError, match="scales"):
        plot_gradient_histogram(grads, scales=(-1.0,))


# --------------------------------------------------------------------------- autocast

@pytest.fixture
def fake_gpu(monkeypatch):
    """Make torch report a CUDA GPU of a given compute capability (a T4 is (7, 5), an A100 (8, 0)); returns a setter."""
    seen = []

    def install(capability: tuple[int, int]) -> list:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: True)  # as on a real T4
        monkeypatch.setattr(torch.cuda, "get_device_capability",
                            lambda device=None: (seen.append(device), capability)[1])
        return seen

    return install


def test_autocast_dtype_on_cpu_and_mps() -> None:
    assert autocast_dtype("cpu") is torch.bfloat16
    assert autocast_dtype(torch.device("cpu")) is torch.bfloat16
    assert autocast_dtype(torch.device("mps")) is torch.float16
    assert precision.needs_grad_scaler("cpu") is False and precision.needs_grad_scaler("mps") is True
    with pytest.raises(ValueError, match="device"):
        autocast_dtype("tpu")
    with pytest.raises(TypeError, match="device"):
        autocast_dtype(0)


@pytest.mark.parametrize("capability, dtype, scaler", [
    ((7, 5), torch.float16, True),    # T4: is_bf16_supported() says True, but bfloat16 is emulated there
    ((7, 0), torch.float16, True),    # V100
    ((8, 0), torch.bfloat16, False),  # A100
    ((8, 9), torch.bfloat16, False),  # L4
    ((9, 0), torch.bfloat16, False),  # H100
])
def test_autocast_dtype_follows_the_compute_capability(fake_gpu, capability, dtype, scaler) -> None:
    asked = fake_gpu(capability)
    assert autocast_dtype("cuda") is dtype and autocast_dtype(torch.device("cuda", 1)) is dtype
    assert precision.needs_grad_scaler("cuda:1") is scaler
    assert 1 in asked  # the capability of the device named, not of the current one


def test_autocast_dtype_is_the_capstones(fake_gpu) -> None:
    """One answer in the course: the precision modules agree with each other (the capstone delegates to them)."""
    from gpucourse import mixed_precision

    fake_gpu((7, 5))
    assert mixed_precision.autocast_dtype is precision.autocast_dtype
    assert (autocast_dtype("cuda"), precision.needs_grad_scaler("cuda")) == (torch.float16, True)


def test_autocast_dtype_without_a_gpu(no_gpu) -> None:
    with pytest.raises(ValueError, match="CUDA"):
        autocast_dtype("cuda")


def _forward_and_loss(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits, y) + 0.0 * torch.softmax(logits, dim=-1).sum()


def test_autocast_op_dtypes_on_cpu() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))
    x, y = torch.randn(5, 8), torch.randint(0, 4, (5,))
    records = autocast_op_dtypes(lambda: _forward_and_loss(model, x, y), "cpu", torch.bfloat16)
    by_name = {}
    for record in records:
        by_name.setdefault(record.name, record)
    assert by_name["linear"].input_dtypes == ("float32", "float32", "float32")
    assert by_name["linear"].output_dtype == "bfloat16"
    assert by_name["relu"].output_dtype == "bfloat16"
    assert by_name["cross_entropy"].output_dtype == "float32"
    assert [r.name for r in records][:3] == ["linear", "relu", "linear"]
    assert not torch.is_autocast_enabled("cpu") and model[0].weight.dtype == torch.float32


@pytest.mark.parametrize("kwargs, error, word", [
    ({"fn": 3}, TypeError, "fn"), ({"device_type": "gpu"}, ValueError, "device_type"),
    ({"dtype": torch.float32}, ValueError, "dtype"), ({"dtype": "bfloat16"}, TypeError, "dtype"),
])
def test_autocast_op_dtypes_rejects_bad_arguments(kwargs, error, word) -> None:
    arguments = {"fn": lambda: None, "device_type": "cpu", "dtype": torch.bfloat16, **kwargs}
    with pytest.raises(error, match=word):
        autocast_op_dtypes(**arguments)


def test_autocast_op_dtypes_needs_the_device(no_gpu) -> None:
    with pytest.raises(ValueError, match="cuda"):
        autocast_op_dtypes(lambda: None, "cuda", torch.float16)


# --------------------------------------------------------------------------- memory

def test_tensor_memory_after_an_adam_step() -> None:
    model = nn.Sequential(nn.Linear(10, 20), nn.ReLU(), nn.Linear(20, 3))
    params = sum(p.numel() for p in model.parameters())
    optimizer = torch.optim.Adam(model.parameters())
    before = tensor_memory(model, optimizer)
    assert (before.parameters, before.weights, before.gradients, before.optimizer_state) == (params, 4 * params, 0, 0)
    F.cross_entropy(model(torch.randn(4, 10)), torch.tensor([0, 1, 2, 0])).backward()
    optimizer.step()
    after = tensor_memory(model, optimizer, activations=100)
    assert (after.gradients, after.optimizer_state, after.activations) == (4 * params, 8 * params, 100)
    assert after.total == 16 * params + 100
    assert after.per_parameter()["optimizer_state"] == 8.0
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    sgd.step()
    assert tensor_memory(model, sgd).optimizer_state == 0


def test_tensor_memory_rejects_bad_arguments() -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="model"):
        tensor_memory("model")
    with pytest.raises(TypeError, match="optimizer"):
        tensor_memory(model, optimizer="adam")
    with pytest.raises(ValueError, match="activations"):
        tensor_memory(model, activations=-1)
    with pytest.raises(ValueError, match="parameters"):
        MemoryBreakdown(0, 0, 0, 0).per_parameter()


def test_saved_tensor_bytes_halve_under_autocast() -> None:
    layer = nn.Linear(64, 32, bias=False)
    x = torch.randn(16, 64, requires_grad=True)  # so that the backward pass needs the weight too

    def forward(use_autocast: bool):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=use_autocast):
            return layer(x).sum()

    # float32: linear saves its input (the weight is excluded as a parameter)
    assert saved_tensor_bytes(lambda: forward(False), exclude=layer.parameters()) == {"float32": 16 * 64 * 4}
    # bfloat16: the input and autocast's 16-bit copy of the weight
    assert saved_tensor_bytes(lambda: forward(True), exclude=layer.parameters()) == {"bfloat16": (16 * 64 + 32 * 64) * 2}
    assert saved_tensor_bytes(lambda: forward(False)) == {"float32": (16 * 64 + 32 * 64) * 4}
    with pytest.raises(TypeError, match="fn"):
        saved_tensor_bytes(None)
    with pytest.raises(TypeError, match="exclude"):
        saved_tensor_bytes(lambda: None, exclude=[1, 2])


def test_peak_memory_bytes_needs_cuda() -> None:
    with pytest.raises(ValueError, match="CUDA"):
        peak_memory_bytes(lambda: None, "cpu")
    with pytest.raises(TypeError, match="fn"):
        peak_memory_bytes(None, "cpu")


def test_cast_report_fraction_validates() -> None:
    report = CastReport("float16", 1.0, 0, 0, 0, 0, 0, 0)
    assert report.fraction("underflow") == 0.0
    with pytest.raises(ValueError, match="kind"):
        report.fraction("zero")


# --------------------------------------------------------------------------- TensorFlow's start-up lines
# (gpucourse.import_tensorflow, which this lesson uses; the notebook tests check that its cells write no stderr)

@pytest.mark.parametrize("line, noise", [
    ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR", True),
    ("I0000 00:00:1.0  123 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.", True),
    ("E0000 00:00:1.0  123 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error", True),
    ("E0000 00:00:1.0  123 some_op.cc:10] Out of memory while allocating", False),
    ("Traceback (most recent call last):", False),
])
def test_tensorflow_startup_noise_filter(line, noise) -> None:
    assert bool(gpucourse._TF_STARTUP_NOISE.search(line)) is noise



# --------------------------------------------------------------------------- GPU only

@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_autocast_on_cuda_keeps_softmax_and_layer_norm_in_float32() -> None:
    model = nn.Sequential(nn.Linear(8, 16), nn.LayerNorm(16), nn.Linear(16, 4)).cuda()
    x, y = torch.randn(5, 8, device="cuda"), torch.randint(0, 4, (5,), device="cuda")
    records = {r.name: r.output_dtype for r in autocast_op_dtypes(lambda: _forward_and_loss(model, x, y), "cuda",
                                                                  torch.float16)}
    assert records["linear"] == "float16"
    assert records["layer_norm"] == records["softmax"] == records["cross_entropy"] == "float32"


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_peak_memory_bytes_on_cuda() -> None:
    def allocate() -> None:
        block = torch.empty(2**20, dtype=torch.float32, device="cuda")  # 4 MiB
        del block

    assert peak_memory_bytes(allocate, "cuda") >= 4 * 2**20
    assert peak_memory_bytes(allocate, torch.device("cuda:0")) >= 4 * 2**20


@pytest.mark.parametrize("n, micro", [(64, 16), (50, 16), (7, 100), (33, 1)])
def test_accumulate_gradients_equals_one_big_backward_pass(n, micro) -> None:
    torch.manual_seed(n)
    model = nn.Sequential(nn.Linear(6, 9), nn.Tanh(), nn.Linear(9, 3))
    x, y = torch.randn(n, 6), torch.randint(0, 3, (n,))
    loss = precision.accumulate_gradients(model, x, y, micro)
    accumulated = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    full = F.cross_entropy(model(x), y)
    full.backward()
    assert loss == pytest.approx(full.item(), rel=1e-5)
    for a, b in zip(accumulated, model.parameters()):
        torch.testing.assert_close(a, b.grad, rtol=1e-5, atol=1e-6)


def test_accumulate_gradients_validates() -> None:
    model = nn.Linear(2, 2)
    x, y = torch.randn(4, 2), torch.randint(0, 2, (4,))
    with pytest.raises(ValueError, match="micro_batch_size"):
        precision.accumulate_gradients(model, x, y, 0)
    with pytest.raises(ValueError, match="same"):
        precision.accumulate_gradients(model, x, y[:3], 2)
    with pytest.raises(TypeError, match="model"):
        precision.accumulate_gradients("model", x, y, 2)
    with pytest.raises(TypeError, match="loss_fn"):
        precision.accumulate_gradients(model, x, y, 2, loss_fn=3)


def test_parse_oom_message_reads_each_number() -> None:
    message = ("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total capacity of 79.15 GiB of which "
               "3.81 MiB is free. Of the allocated memory 78.10 GiB is allocated by PyTorch, and 512.00 KiB is "
               "reserved by PyTorch but unallocated.")
    assert precision.parse_oom_message(message) == {
        "tried_to_allocate": 20 * 2**20, "total_capacity": round(79.15 * 2**30), "free": round(3.81 * 2**20),
        "allocated_by_pytorch": round(78.10 * 2**30), "reserved_unallocated": 512 * 2**10}
    assert precision.parse_oom_message("Tried to allocate 1.50 GiB") == {"tried_to_allocate": round(1.5 * 2**30)}
    with pytest.raises(ValueError, match="out-of-memory"):
        precision.parse_oom_message("RuntimeError: shapes do not match")
    with pytest.raises(TypeError):
        precision.parse_oom_message(None)


def test_plot_loss_scales_draws_and_validates() -> None:
    ax = precision.plot_loss_scales([4.0, 8.0, 4.0], [4.0, 8.0, 4.0], [False, True, False], title="t")
    assert ax.get_ylabel() == "log2(loss scale)" and len(ax.lines) == 2
    with pytest.raises(ValueError):
        precision.plot_loss_scales([1.0], [1.0, 2.0], [False])
    with pytest.raises(ValueError):
        precision.plot_loss_scales([0.0], [1.0], [False])
    plt.close("all")


# --------------------------------------------------------------------------- FP8 with per-tensor scaling

@pytest.mark.parametrize("dtype, mantissa", [("float8_e4m3fn", 3), ("float8_e5m2", 2)])
@pytest.mark.parametrize("magnitude", [1e-9, 1e-3, 1.0, 1e5])
def test_scaled_fp8_round_trip_within_half_a_spacing(dtype, mantissa, magnitude) -> None:
    x = torch.randn(4000, generator=torch.Generator().manual_seed(0)) * magnitude
    q, scale = precision.scaled_fp8(x, dtype)
    assert q.dtype == getattr(torch, dtype) and q.shape == x.shape and scale.dtype == torch.float32
    assert q.float().abs().max().item() == torch.finfo(q.dtype).max  # amax lands on the format's largest value
    back = precision.unscale_fp8(q, scale)
    normal = x.abs() * scale >= torch.finfo(q.dtype).smallest_normal
    relative = ((back - x).abs() / x.abs())[normal]
    assert relative.max().item() <= 2.0 ** -(mantissa + 1) * (1 + 1e-6)
    assert normal.float().mean() > 0.95


def test_scaled_fp8_edge_cases() -> None:
    q, scale = precision.scaled_fp8(torch.zeros(5), torch.float8_e4m3fn)
    assert scale.item() == 1.0 and precision.unscale_fp8(q, scale).tolist() == [0.0] * 5
    q, scale = precision.scaled_fp8(torch.tensor([-300.0, 2.0]))
    assert precision.unscale_fp8(q, scale)[0].item() == -300.0
    with pytest.raises(ValueError, match="dtype"):
        precision.scaled_fp8(torch.ones(2), "float16")
    with pytest.raises(TypeError, match="x"):
        precision.scaled_fp8([1.0])
    with pytest.raises(ValueError, match="inf"):
        precision.scaled_fp8(torch.tensor([1.0, float("inf")]))
    with pytest.raises(TypeError, match="q"):
        precision.unscale_fp8(3, 1.0)


# --------------------------------------------------------------------------- peak memory, a capped device

def test_peak_memory_counts_new_tensors_and_frees() -> None:
    with precision.PeakMemory() as tracker:
        a = torch.empty(1024, dtype=torch.float32)      # 4 KiB
        b = torch.empty(2048, dtype=torch.float32)      # 8 KiB
        del a
        c = torch.empty(256, dtype=torch.float64)       # 2 KiB, after a was freed
        view = b[:10]                                   # a view: no new memory
    assert tracker.peak == 12 * 2**10 and tracker.current == 10 * 2**10
    del b, c, view


def test_peak_memory_ignores_tensors_made_before_and_sees_backward() -> None:
    lin = nn.Linear(256, 256, bias=False)
    x = torch.randn(4, 256)
    with precision.PeakMemory() as tracker:
        lin(x).sum().backward()
    assert tracker.current == 256 * 256 * 4  # the weight's gradient stays; the weight itself is not counted
    assert precision.peak_bytes(lambda: lin(x).sum()) < 256 * 256 * 4


def test_peak_bytes_falls_with_checkpointing_and_gradients_agree() -> None:
    torch.manual_seed(0)
    blocks = nn.ModuleList(nn.Sequential(nn.Linear(32, 128), nn.GELU(), nn.Linear(128, 32)) for _ in range(6))
    x = torch.randn(256, 32)

    def step(every: int) -> list:
        blocks.zero_grad(set_to_none=True)
        h = precision.checkpointed_forward(blocks, x, every=every, residual=True) if every else x
        if not every:
            for block in blocks:
                h = h + block(h)
        h.square().mean().backward()
        return [p.grad.clone() for p in blocks.parameters()]

    peaks = {every: precision.peak_bytes(lambda: step(every)) for every in (0, 1, 3)}
    assert peaks[1] < peaks[3] < peaks[0]
    for a, b in zip(step(0), step(1)):
        torch.testing.assert_close(a, b)
    with pytest.raises(ValueError, match="every"):
        precision.checkpointed_forward(blocks, x, every=0)


def test_memory_cap_raises_pytorchs_error_with_a_readable_message() -> None:
    with pytest.raises(torch.OutOfMemoryError) as caught:
        with precision.MemoryCap(10 * 2**10):
            torch.ones(4096)  # 16 KiB
    numbers = precision.parse_oom_message(str(caught.value))
    assert numbers["tried_to_allocate"] == 16 * 2**10 and numbers["total_capacity"] == 10 * 2**10
    assert "Simulated" in str(caught.value)
    with precision.MemoryCap(20 * 2**10) as cap:
        torch.ones(4096)
    assert cap.peak == 16 * 2**10
    with precision.MemoryCap(20 * 2**10) as cap:  # an allocation that fails never held its bytes: peak stays
        torch.ones(1024)
        with pytest.raises(torch.OutOfMemoryError):
            torch.ones(8192)
    assert cap.peak == 4 * 2**10
    with pytest.raises(ValueError, match="capacity"):
        precision.MemoryCap(0)


def test_memory_cap_in_a_backward_pass_raises_out_of_memory() -> None:
    model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 64))
    x = torch.randn(32, 64)
    with pytest.raises(torch.OutOfMemoryError):
        with precision.MemoryCap(200 * 2**10):  # the forward pass fits, the weight gradients (256 KiB) do not
            model(x).sum().backward()


@pytest.mark.parametrize("batch, limit", [(64, 37), (64, 64), (64, 0), (1, 1), (1, 0), (1000, 999), (300, 1)])
def test_largest_micro_batch_bisects(batch, limit) -> None:
    calls = []

    def try_step(m: int) -> None:
        calls.append(m)
        if m > limit:
            raise torch.OutOfMemoryError("simulated")

    assert precision.largest_micro_batch(try_step, batch) == limit
    assert len(calls) <= math.ceil(math.log2(batch)) + 2 if batch > 1 else len(calls) <= 2


def test_largest_micro_batch_lets_other_errors_through() -> None:
    def buggy(m: int) -> None:
        raise ValueError("a bug in the step")

    with pytest.raises(ValueError, match="bug"):
        precision.largest_micro_batch(buggy, 8)
    with pytest.raises(ValueError, match="batch_size"):
        precision.largest_micro_batch(lambda m: None, 0)
    with pytest.raises(TypeError, match="try_step"):
        precision.largest_micro_batch(3, 8)


def test_old_names_still_importable() -> None:
    from gpucourse import formats, memory, mixed_precision

    for name in precision.__all__:
        assert hasattr(precision, name), name
    assert precision.format_facts is formats.format_facts and precision.tensor_memory is memory.tensor_memory
    assert precision.gradient_cast_report is mixed_precision.gradient_cast_report


def test_live_bytes_counts_what_survives_and_frees_reference_cycles_first():
    import torch

    from gpucourse.memory import PeakMemory

    class Holder:
        """An object in a reference cycle, like a finished collective's work handle holding its buffers."""

    tracker, kept = PeakMemory(), []
    with tracker:
        kept.append(torch.zeros(100))          # 400 bytes that stay alive
        cycle = Holder()
        cycle.me, cycle.buffer = cycle, torch.zeros(1000)   # 4,000 bytes alive only through the cycle
        del cycle
        torch.ones(50) * 2                     # temporaries: freed at once
    assert tracker.live_bytes() == 400 and tracker.peak >= 4400


# --------------------------------------------------------------------------- record_autocast

def test_record_autocast_notes_what_was_asked_and_runs_on_the_graders_device() -> None:
    layer = torch.nn.Linear(4, 3)
    with precision.record_autocast("cpu") as calls:
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):  # asked for CUDA: run as CPU autocast
            out = layer(torch.randn(2, 4))
        with torch.amp.autocast("cpu", enabled=False):
            plain = layer(torch.randn(2, 4))
    assert out.dtype == torch.bfloat16 and plain.dtype == torch.float32
    assert calls == [precision.AutocastCall("cuda", "bfloat16", True), precision.AutocastCall("cpu", None, False)]
    assert torch.autocast is torch.amp.autocast_mode.autocast and torch.amp.autocast is torch.autocast


def test_record_autocast_replaces_a_name_imported_into_the_answers_globals_and_restores_it() -> None:
    namespace: dict = {}
    exec("from torch import autocast\n"
         "def answer(device_type):\n"
         "    with autocast(device_type, dtype=__import__('torch').bfloat16):\n"
         "        return 1\n", namespace)
    real = namespace["autocast"]
    with pytest.raises(RuntimeError, match="boom"):
        with precision.record_autocast("cpu", namespace["answer"]) as calls:
            namespace["answer"]("cuda")
            raise RuntimeError("boom")
    assert [call.device_type for call in calls] == ["cuda"]
    assert namespace["autocast"] is real and torch.autocast is real


def test_record_autocast_refuses_bad_arguments_by_name() -> None:
    with pytest.raises(ValueError, match="run_on"):
        with precision.record_autocast("gpu"):
            pass
    with pytest.raises(TypeError, match=r"functions\[0\]"):
        with precision.record_autocast("cpu", len):
            pass


def test_layer_activation_bytes_is_the_papers_count_and_what_pytorch_saves() -> None:
    """Korthikanti et al.'s s·b·h·(34 + 5·a·s/h) with the defaults; with the CPU's mask size, a real layer's saved bytes."""
    import torch.nn as nn
    import torch.nn.functional as F

    from gpucourse import memory

    assert memory.layer_activation_bytes(2048, 1, 12288, 96) == 2048 * 12288 * (34 + 80)
    assert memory.layer_activation_bytes(64, 2, 32, 4, dropout=False) == 64 * 2 * 32 * 32 + 2 * 4 * 64 * 64 * 2

    class Layer(nn.Module):
        def __init__(self, h, a):
            super().__init__()
            self.a = a
            self.ln1, self.qkv, self.proj = nn.LayerNorm(h), nn.Linear(h, 3 * h), nn.Linear(h, h)
            self.ln2, self.fc1, self.fc2 = nn.LayerNorm(h), nn.Linear(h, 4 * h), nn.Linear(4 * h, h)

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, self.a, h // self.a).permute(2, 0, 3, 1, 4)
            o = F.dropout((q @ k.transpose(-2, -1) * q.shape[-1] ** -0.5).softmax(-1), 0.1) @ v
            x = x + F.dropout(self.proj(o.transpose(1, 2).reshape(b, s, h)), 0.1)
            return x + F.dropout(self.fc2(F.gelu(self.fc1(self.ln2(x)))), 0.1)

    layer = Layer(16, 2)
    skip = {p.untyped_storage().data_ptr() for p in layer.parameters()}
    seen = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in skip and t.shape[-1] != 1:   # LayerNorm's statistics left out
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        layer(torch.randn(3, 24, 16))
    assert sum(seen.values()) == memory.layer_activation_bytes(24, 3, 16, 2, bytes_per_value=4, mask_bytes=4)
    with pytest.raises(ValueError):
        memory.layer_activation_bytes(0, 1, 16, 2)


def test_forward_memory_counts_what_a_forward_pass_keeps_and_its_peak() -> None:
    from gpucourse import memory

    layer = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
    x = torch.randn(32, 64)
    kept, peak = memory.forward_memory(lambda: layer(x), "cpu")
    # kept: the first Linear's output and GELU's output (both saved), the result; the peak is no smaller
    assert kept == (2 * 32 * 256 + 32 * 64) * 4 and peak >= kept
    with pytest.raises(TypeError, match="callable"):
        memory.forward_memory(None, "cpu")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_forward_memory_on_cuda() -> None:
    from gpucourse import memory

    layer = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64)).cuda()
    x = torch.randn(32, 64, device="cuda")
    kept, peak = memory.forward_memory(lambda: layer(x), "cuda")
    assert kept >= (2 * 32 * 256 + 32 * 64) * 4 and peak >= kept
