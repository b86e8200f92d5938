"""Tests of gpucourse.kernels.triton_checks: what a GPU would refuse in a launch that the interpreter would run.

Triton's compiler front end runs here on the CPU for an sm_80 target (no GPU, no CUDA); where it is missing or its
API differs, the check degrades to "not checked" and refuses nothing (both paths tested). Mixed devices, and the
meta device that lesson 06's graders make the default, are refused on any machine.
"""

from __future__ import annotations

import time
import warnings

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from gpucourse.kernels import triton_backend as tb  # noqa: E402
from gpucourse.kernels import triton_checks, triton_launch  # noqa: E402


@triton.jit
def tile_sum_kernel(a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr, SCALAR_START: tl.constexpr):
    """c (BLOCK x BLOCK) = sum over K-slices of a_slice @ b_slice; SCALAR_START starts the accumulator at 0.0."""
    rows = tl.arange(0, BLOCK)
    if SCALAR_START:
        acc = 0.0   # the numpy habit: the interpreter runs it, the compiler refuses a loop-carried type change
    else:
        acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for k0 in range(0, K, BLOCK):
        a = tl.load(a_ptr + rows[:, None] * K + (k0 + rows)[None, :], mask=(k0 + rows)[None, :] < K, other=0.0)
        b = tl.load(b_ptr + (k0 + rows)[:, None] * BLOCK + rows[None, :], mask=(k0 + rows)[:, None] < K, other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * BLOCK + rows[None, :], acc)


@triton.jit
def copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)


@pytest.fixture(autouse=True)
def fresh_verdicts(monkeypatch):
    """Each test starts with no cached verdict (the cache is keyed on the kernel's source and signature)."""
    monkeypatch.setattr(triton_checks, "_VERDICTS", {})


def _tiles(scalar_start: bool, K: int = 40, block: int = 16):
    a, b = torch.randn(block, K), torch.randn(K, block)
    c = torch.empty(block, block)
    tb.launch(tile_sum_kernel, (1,), a, b, c, K, BLOCK=block, SCALAR_START=scalar_start)
    return c, a @ b


def test_the_front_end_accepts_a_right_kernel_and_the_launch_runs():
    c, expected = _tiles(scalar_start=False)
    assert torch.allclose(c, expected, atol=1e-4)
    verdict = triton_checks.front_end(tile_sum_kernel, {"a_ptr": torch.empty(1), "b_ptr": torch.empty(1),
                                                        "c_ptr": torch.empty(1), "K": 40, "BLOCK": 16,
                                                        "SCALAR_START": False})
    assert verdict == triton_checks.FrontEnd("accepted") and not verdict.refused


def test_a_loop_carried_type_change_is_refused_before_the_interpreter_runs():
    with pytest.raises(tb.CompileError, match="Loop-carried variable acc") as caught:
        _tiles(scalar_start=True)
    message = str(caught.value)
    assert "tile_sum_kernel" in message and "sm_80" in message and "Hint: a variable updated in a loop" in message
    assert isinstance(caught.value, tb.LaunchRefused)
    with tb.count_traffic() as traffic, pytest.raises(tb.CompileError):   # refused inside the counter too
        _tiles(scalar_start=True)
    assert traffic.launches == []


def test_a_dot_below_the_minimum_size_is_refused():
    with pytest.raises(tb.CompileError, match="K >= ") as caught:
        _tiles(scalar_start=False, block=4)
    assert "tl.dot needs tiles at least as large" in str(caught.value)


def test_positional_constexprs_and_defaults_are_described():
    x, out = torch.randn(100), torch.empty(100)
    tb.launch(copy_kernel, (2,), x, out, 100, 64)   # BLOCK passed positionally
    assert torch.equal(out, x)
    signature, constexprs = triton_checks._signature(copy_kernel, {"x_ptr": x, "out_ptr": out, "n": 100,
                                                                   "BLOCK": 64})
    assert signature == {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    assert constexprs == {"BLOCK": 64}
    assert triton_checks._signature(copy_kernel, {"x_ptr": x}) is None
    assert triton_checks.front_end(copy_kernel, {"x_ptr": x}).status == "not checked"


def test_verdicts_are_cached_and_fast_and_silent():
    bound = {"a_ptr": torch.empty(1), "b_ptr": torch.empty(1), "c_ptr": torch.empty(1), "K": 40, "BLOCK": 32,
             "SCALAR_START": False}
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # triton 3.9 warns about fp fusion unless the option is given
        start = time.perf_counter()
        first = triton_checks.front_end(tile_sum_kernel, bound)
        elapsed = time.perf_counter() - start
    assert first.status == "accepted" and elapsed < 1.0
    assert len(triton_checks._VERDICTS) == 1
    assert triton_checks.front_end(tile_sum_kernel, bound) is first


def test_without_the_front_end_nothing_is_refused(monkeypatch):
    def unavailable():
        raise ImportError("No module named 'triton.backends.nvidia'")

    monkeypatch.setattr(triton_checks, "_backend", unavailable)
    verdict = triton_checks.front_end(tile_sum_kernel, {"a_ptr": torch.empty(1)})
    assert verdict.status == "not checked" and "ImportError" in verdict.message
    c, expected = _tiles(scalar_start=True)   # the interpreter runs what the compiler would refuse: not checked
    assert torch.allclose(c, expected, atol=1e-4)


def test_a_front_end_whose_api_differs_refuses_nothing(monkeypatch):
    target, backend, options, ast_source, ir, compilation_error = triton_checks._backend()

    class OtherApi(ast_source):
        def make_ir(self, *args):
            raise TypeError("make_ir() takes 5 positional arguments but 6 were given")

    monkeypatch.setattr(triton_checks, "_backend",
                        lambda: (target, backend, options, OtherApi, ir, compilation_error))
    c, expected = _tiles(scalar_start=True)
    assert torch.allclose(c, expected, atol=1e-4)
    assert all(verdict.status == "not checked" for verdict in triton_checks._VERDICTS.values())


def test_hints_name_the_usual_cause():
    assert "tl.zeros" in triton_checks._hint("x\nAssertionError(\"Loop-carried variable acc has initial type\")")
    assert "BLOCK_K" in triton_checks._hint("Input shapes should have M >= 1, N >= 1 and K >= 16")
    assert "tl.constexpr" in triton_checks._hint("arange's arguments must be of type tl.constexpr")
    assert "caret" in triton_checks._hint("  BLOCK: tl.constexpr\nunsupported operand type(s) for **")
    assert "caret" in triton_checks._hint("")
    assert ".to(tl.float32)" in triton_checks._hint("ValueError(\"Expected dtype ['fp32', 'fp64'] but got fp16\")")


# --------------------------------------------------------------------------- devices

def test_tensors_on_two_devices_are_refused():
    x = torch.randn(10)
    with pytest.raises(tb.MixedDevices, match=r"x_ptr on cpu.*out_ptr on meta|a kernel reads all its tensors"):
        tb.launch(copy_kernel, (1,), x, torch.empty(10, device="meta"), 10, BLOCK=16)
    with pytest.raises(ValueError, match="meta device, which holds no data"):
        tb.launch(copy_kernel, (1,), torch.empty(10, device="meta"), torch.empty(10, device="meta"), 10, BLOCK=16)
    triton_checks.check_devices({"x": x, "y": torch.empty(3), "n": 3, "none": None})   # one device: fine


def test_an_output_made_without_device_is_refused_under_the_meta_default():
    """Lesson 06's graders call answers under torch.device("meta"): empty_like and device=x.device stay with x."""
    x = torch.randn(100)
    with torch.device("meta"):
        out = torch.empty_like(x)
        tb.launch(copy_kernel, (2,), x, out, 100, BLOCK=64)
        same = torch.empty(100, device=x.device)
        tb.launch(copy_kernel, (2,), x, same, 100, BLOCK=64)
        with pytest.raises(tb.MixedDevices, match=r"out_ptr on the default device, x_ptr on cpu.*cpu tensor\?"):
            tb.launch(copy_kernel, (2,), x, torch.empty(100), 100, BLOCK=64)
    assert torch.equal(out, x) and torch.equal(same, x)


def test_the_graders_meta_default_refuses_no_device_and_accepts_allocate_then_move():
    """Review v3r2 M3: tb.default_device_meta() refuses an output made without device= at the launch, as
    torch.device("meta") does, but torch.empty(shape).to(x.device) (correct on a GPU: it costs a copy) works, with the
    values the factory gave; any other use of the missing data is a MixedDevices that names the fix."""
    x = torch.randn(100)
    with tb.default_device_meta():
        with pytest.raises(tb.MixedDevices, match=r"out_ptr on the default device, x_ptr on cpu"):
            tb.launch(copy_kernel, (2,), x, torch.empty(100), 100, BLOCK=64)
        moved = torch.empty(100).to(x.device)
        tb.launch(copy_kernel, (2,), x, moved, 100, BLOCK=64)
        zeros = torch.zeros(4, 25).view(100).float().to(x)          # views and casts carry the values along
        assert zeros.device == x.device and not zeros.any()
        assert torch.ones(3).cpu().sum().item() == 3.0
        assert torch.empty(3).to(torch.float16).device.type == "meta"   # a dtype alone moves nothing
        assert torch.empty_like(x).device == x.device and torch.empty(3, device=x.device).device == x.device
    assert torch.equal(moved, x)
    with pytest.raises(tb.MixedDevices, match=r"device=x.device"):
        with tb.default_device_meta():
            torch.zeros(3).tolist()
    with pytest.raises(NotImplementedError) as raised:   # an unwritten answer's error passes through untouched
        with tb.default_device_meta():
            raise NotImplementedError
    assert not isinstance(raised.value, tb.LaunchRefused)
    assert torch.empty(2).device.type == "cpu"                       # the default device is back


def test_two_real_devices_are_refused_by_name(monkeypatch):
    class FakeCuda:
        device = "cuda:0"

        def data_ptr(self):
            return 0

    with pytest.raises(tb.MixedDevices, match=r"x on cpu; out on cuda:0"):
        triton_checks.check_devices({"x": torch.empty(2), "out": FakeCuda()})


def test_the_lesson_reaches_the_errors_through_triton_backend():
    for name in ("CompileError", "LaunchRefused", "MixedDevices"):
        assert getattr(tb, name) is getattr(triton_checks, name) is getattr(triton_launch, name)


# --------------------------------------------------------------------------- TF32 dots (count_traffic(tf32=True))

@triton.jit
def one_dot_kernel(a_ptr, b_ptr, c_ptr, PRECISION: tl.constexpr):
    rows = tl.arange(0, 16)
    a = tl.load(a_ptr + rows[:, None] * 16 + rows[None, :])
    b = tl.load(b_ptr + rows[:, None] * 16 + rows[None, :])
    if PRECISION == "ieee":
        c = tl.dot(a, b, input_precision="ieee")
    else:
        c = tl.dot(a, b)   # the default: "tf32" where the GPU has TF32 Tensor Cores
    tl.store(c_ptr + rows[:, None] * 16 + rows[None, :], c)


def test_to_tf32_keeps_ten_mantissa_bits():
    import numpy as np

    values = np.array([1.0, 1.0 + 2.0**-10, 1.0 + 2.0**-11, -3.0 - 2.0**-12, np.inf, np.nan], dtype=np.float32)
    truncated = triton_launch.to_tf32(values)
    assert truncated[:4].tolist() == [1.0, 1.0 + 2.0**-10, 1.0, -3.0] and np.isinf(truncated[4])
    assert np.isnan(truncated[5])
    assert triton_launch.to_tf32(np.array([1.0 + 2.0**-20])).dtype == np.float64   # float64 stays as it is


def test_tf32_dots_truncate_float32_operands_only_where_the_precision_is_tf32():
    a = torch.full((16, 16), 1.0 + 2.0**-12)   # 1 + 2^-12 reads as 1 in TF32
    b = torch.eye(16)
    c = torch.empty(16, 16)
    tb.launch(one_dot_kernel, (1,), a, b, c, PRECISION="tf32")
    assert torch.equal(c, a)                   # the interpreter alone: float32
    with tb.count_traffic(tf32=True):
        tb.launch(one_dot_kernel, (1,), a, b, c, PRECISION="tf32")
    assert torch.equal(c, torch.ones(16, 16))  # TF32, as on an Ampere or later GPU
    with tb.count_traffic(tf32=True):
        tb.launch(one_dot_kernel, (1,), a, b, c, PRECISION="ieee")
    assert torch.equal(c, a)
    with tb.count_traffic(tf32=True):
        tb.launch(one_dot_kernel, (1,), a.half(), b.half(), c, PRECISION="tf32")
    assert torch.equal(c, a.half().float())    # float16 operands are not TF32's business
    from triton.runtime.interpreter import InterpreterBuilder

    assert InterpreterBuilder.create_dot.__name__ == "create_dot"   # restored after each launch
    with pytest.raises(TypeError, match="tf32 must be True or False"):
        with tb.count_traffic(tf32=1):
            pass


# --------------------------------------------------------------------------- torch work around the kernel

def _copy_then(finish):
    """A row-copy kernel launched on x, then ``finish(out, x)`` in torch; returns out."""
    def run(x):
        out = torch.empty_like(x)
        tb.launch(copy_kernel, (1,), x, out, x.numel(), BLOCK=triton.next_power_of_2(x.numel()))
        finish(out, x)
        return out
    return run


@pytest.mark.parametrize("finish, op", [
    (lambda out, x: out.div_(out.sum()), "sum"),
    (lambda out, x: out.mul_(2.0), "mul_"),
    (lambda out, x: out.copy_(torch.softmax(x, 0)), "_softmax"),
    (lambda out, x: out.to(torch.float64), "_to_copy (a dtype conversion"),
    (lambda out, x: out.clone(), "clone (a copy"),
    (lambda out, x: out.numpy().__itruediv__(2.0), "Tensor.numpy"),   # numpy computing on out's memory, unseen
    (lambda out, x: __import__("numpy").asarray(out), "Tensor.array"),
    (lambda out, x: out.tolist(), "Tensor.tolist"),
])
def test_kernel_only_refuses_torch_arithmetic_around_the_launch(finish, op):
    x = torch.randn(100)
    with pytest.raises(tb.TorchOutsideKernel, match=r"torch ran " + op.replace("(", r"\(")) as refused:
        with tb.kernel_only():
            _copy_then(finish)(x)
    assert "test_triton_checks.py" in str(refused.value)   # the learner's line is named
    assert "must happen in the kernel" in str(refused.value)


def test_kernel_only_lets_allocations_views_moves_and_the_launcher_run():
    x = torch.randn(4, 25)
    with tb.count_traffic(poison=True) as traffic, tb.default_device_meta(), tb.kernel_only():
        out = torch.empty(x.shape, dtype=x.dtype).to(x.device)   # made on the meta default, moved: legal
        zeros, full = torch.zeros(3, device=x.device), torch.full((2,), 1.0, device=x.device)
        tb.launch(copy_kernel, [1], x.view(-1), out.reshape(-1), x.numel(), BLOCK=128)   # copies inside: allowed
        result = out.view(x.shape)[:, :].to(x)
    assert torch.equal(result, x) and len(traffic.launches) == 1 and zeros.sum() == 0 and full.sum() == 2
    assert triton_checks._LAUNCHER == [0]


def test_kernel_only_is_left_on_an_error():
    with pytest.raises(tb.TorchOutsideKernel):
        with tb.kernel_only():
            torch.ones(3) + 1
    assert torch.ones(3).add(1).sum() == 6   # no mode left behind
