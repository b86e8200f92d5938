"""Tests of gpucourse.kernels.triton_launch (through triton_backend, as lesson 06 calls it) and triton_kernels:
launch, the traffic counter, bounds, bad input.

Kernels run in Triton's interpreter on the CPU (one kernel at a time; TRITON_INTERPRET is never set), and compiled
on a CUDA GPU in the tests marked gpu. The counter wraps internal interpreter methods: these tests hold it to
exact counts so that a triton upgrade that changes them fails here, not in a learner's notebook.
"""

from __future__ import annotations

import inspect
import sys

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

from gpucourse.kernels import triton_backend as tb  # noqa: E402
from gpucourse.kernels import triton_kernels, triton_launch  # noqa: E402


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def relu_kernel(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(total, 0.0), mask=mask)


@triton.jit
def unmasked_store_kernel(out_ptr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.zeros((BLOCK,), dtype=tl.float32) + 1.0)


@triton.jit
def scale_in_place_kernel(x_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    row = tl.load(x_ptr + tl.program_id(0) * n_cols + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + tl.program_id(0), tl.sum(row, axis=0))


def _add(x, y, block=128):
    out = torch.empty_like(x)
    tb.launch(add_kernel, (triton.cdiv(x.numel(), block),), x, y, out, x.numel(), BLOCK=block)
    return out


# --------------------------------------------------------------------------- launch and values

def test_launch_interprets_on_cpu_tensors():
    x, y = torch.randn(1000), torch.randn(1000)
    assert not triton_launch.runs_compiled(x, y)
    assert torch.equal(_add(x, y), x + y)


def test_jit_helpers_inside_a_kernel_run_interpreted_and_calls_are_restored():
    x = torch.randn(5, 37)
    out = torch.empty(5)
    tb.launch(row_sum_kernel, (5,), x, out, 37, BLOCK=64)  # tl.sum is itself a @triton.jit function
    assert torch.allclose(out, x.sum(dim=1), atol=1e-5)
    with pytest.raises(RuntimeError, match="outside of the scope of a kernel"):
        add_kernel(x, x, x, 1, 1)  # the JITFunction call patch is gone after the launch


@triton.jit
def safe_divide_kernel(x_ptr, y_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    x, y = tl.load(x_ptr + offsets), tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, tl.where(y == 0.0, 0.0, x / y))   # 0 / 0 computed, then discarded


def test_interpreted_nan_that_a_kernel_discards_prints_nothing_to_stderr(capfd):
    """numpy's 'invalid value encountered' on 0 / 0 would reach stderr, and nbgrader scores such a cell 0."""
    import warnings

    x, y = torch.tensor([0.0, 1.0, 6.0, 0.0]), torch.tensor([0.0, 0.0, 3.0, 2.0])
    out = torch.empty(4)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tb.launch(safe_divide_kernel, (1,), x, y, out, BLOCK=4)
    assert out.tolist() == [0.0, 0.0, 2.0, 0.0]
    assert [str(w.message) for w in caught] == []
    assert capfd.readouterr().err == ""


def _fresh_add_kernel():
    @triton.jit
    def inner_add(x_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n_elements) + 1, mask=offsets < n_elements)

    return inner_add


def test_a_kernel_defined_inside_a_function_is_built_once_for_the_gpu():
    """Each call makes a new @triton.jit object; the compiled path reuses the first, whose binaries Triton caches."""
    first, second = _fresh_add_kernel(), _fresh_add_kernel()
    assert first is not second
    assert triton_launch._built_once(first) is triton_launch._built_once(second) is first
    assert triton_launch._built_once(add_kernel) is add_kernel
    assert triton_launch._built_once(relu_kernel) is relu_kernel   # another source: its own object


def test_in_place_kernel_sees_one_tensor():
    x = torch.arange(10, dtype=torch.float32)
    with tb.count_traffic() as traffic:
        tb.launch(scale_in_place_kernel, (1,), x, 10, BLOCK=16)
    assert torch.equal(x, torch.arange(10, dtype=torch.float32) * 2)
    assert traffic.elements_read(x) == 10 and traffic.elements_written(x) == 10


def test_course_kernels_match_torch():
    x = torch.randn(7, 65) * 1e4
    assert torch.allclose(triton_kernels.softmax(x), torch.softmax(x, dim=1), atol=1e-6)
    a, b = torch.randn(33, 17), torch.randn(17, 31)
    assert torch.allclose(triton_kernels.matmul(a, b, 16, 16, 16), a @ b, atol=1e-4)


def test_course_softmax_on_a_wide_float16_row():
    """Review v3r4 m3 and M1: softmax_kernel computes in float32 (tl.exp refuses float16), so a vocabulary-wide
    float16 row of near-equal values, whose float16 sum would pass 65,504, comes out right, in float16."""
    x = (torch.randn(1, 70000, generator=torch.Generator().manual_seed(0)) * 0.01).half()
    out = triton_kernels.softmax(x)
    assert out.dtype == torch.float16
    assert torch.allclose(out.double(), torch.softmax(x.double(), dim=1), rtol=2e-3, atol=1e-6)


def test_callable_grid_gets_the_arguments():
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    tb.launch(add_kernel, lambda meta: (triton.cdiv(meta["n_elements"], meta["BLOCK"]),), x, y, out, 300, BLOCK=64)
    assert torch.equal(out, x + y)


def test_a_list_grid_is_taken_as_triton_takes_it():
    x, y, out = torch.randn(300), torch.randn(300), torch.empty(300)
    with tb.count_traffic() as traffic:
        tb.launch(add_kernel, [5], x, y, out, 300, BLOCK=64)
    assert torch.equal(out, x + y) and traffic.launches[0].grid == (5, 1, 1)


def test_kernel_argument_names_are_read_once_per_kernel():
    triton_launch._parameter_names.cache_clear()
    x = torch.randn(64)
    for _ in range(3):
        tb.launch(add_kernel, (1,), x, x, torch.empty(64), 64, BLOCK=64)
    assert triton_launch._parameter_names.cache_info().misses == 1


# --------------------------------------------------------------------------- the traffic counter

def test_fused_add_relu_reads_8_and_writes_4_bytes_per_element_unfused_12_and_8():
    n = 1000
    x, y = torch.randn(n), torch.randn(n)
    with tb.count_traffic() as fused:
        out = torch.empty(n)
        tb.launch(add_relu_kernel, (8,), x, y, out, n, BLOCK=128)
    assert (fused.bytes_read(), fused.bytes_written()) == (8 * n, 4 * n)
    assert fused.bytes_read(x) == fused.bytes_read("y_ptr") == 4 * n and fused.bytes_written(out) == 4 * n
    with tb.count_traffic() as unfused:
        total, out = torch.empty(n), torch.empty(n)
        tb.launch(add_kernel, (8,), x, y, total, n, BLOCK=128)
        tb.launch(relu_kernel, (8,), total, out, n, BLOCK=128)
    assert len(unfused.launches) == 2
    assert (unfused.bytes_read(), unfused.bytes_written()) == (12 * n, 8 * n)
    assert unfused.bytes_written(total) == unfused.bytes_read(total) == 4 * n


def test_per_program_counts_and_grid():
    with tb.count_traffic() as traffic:
        _add(torch.randn(1000), torch.randn(1000))
    launch = traffic.launches[0]
    assert launch.grid == (8, 1, 1) and launch.num_programs == 8 and launch.kernel == "add_kernel"
    assert launch.programs[(0, 0, 0)] == [256, 128]
    assert launch.programs[(7, 0, 0)] == [2 * 104, 104]  # 1000 - 7 * 128 lanes are live in the last program
    header, rows = traffic.rows()
    assert len(header) == len(rows[0]) and [row[3] for row in rows] == ["x_ptr", "y_ptr", "out_ptr"]


@triton.jit
def scaled_copy_kernel(x_ptr, out_ptr, n_elements, SCALE: tl.constexpr, BLOCK: tl.constexpr = 64):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * SCALE, mask=mask)


def test_a_launch_records_its_constexprs_passed_by_position_keyword_or_default():
    x = torch.randn(100)
    with tb.count_traffic() as traffic:
        tb.launch(add_kernel, (1,), x, x, torch.empty(100), 100, 128)                 # BLOCK by position
        tb.launch(add_kernel, (1,), x, x, torch.empty(100), 100, BLOCK=128, num_warps=2)   # by keyword
        out = torch.empty(100)
        tb.launch(scaled_copy_kernel, (2,), x, out, 100, SCALE=2.0)                  # BLOCK by its default
    assert [launch.constexprs for launch in traffic.launches] == [{"BLOCK": 128}, {"BLOCK": 128},
                                                                  {"SCALE": 2.0, "BLOCK": 64}]
    assert torch.equal(out, 2 * x)


def test_counting_blocks_nest_and_launches_outside_are_not_counted():
    x, y = torch.randn(64), torch.randn(64)
    _add(x, y)
    with tb.count_traffic() as outer:
        _add(x, y)
        with tb.count_traffic() as inner:
            _add(x, y)
    assert len(outer.launches) == 2 and len(inner.launches) == 1
    assert "1 launches" in repr(inner)


def test_traffic_rejects_a_bad_query():
    with tb.count_traffic() as traffic:
        _add(torch.randn(8), torch.randn(8))
    with pytest.raises(TypeError, match="of must be"):
        traffic.bytes_read(3)


def test_missing_mask_is_stopped_before_memory_is_touched():
    out = torch.zeros(100)
    with pytest.raises(tb.OutOfBounds, match=r"program \(0,\) of unmasked_store_kernel: a tl.store.*past the end "
                                              r"of out_ptr"):
        tb.launch(unmasked_store_kernel, (1,), out, BLOCK=128)
    assert torch.equal(out, torch.zeros(100))  # nothing was stored
    from triton.runtime.interpreter import InterpreterBuilder
    assert "wrapped" not in repr(InterpreterBuilder.create_masked_store)
    assert InterpreterBuilder.create_masked_store.__name__ == "create_masked_store"  # restored after the error


def test_wrapped_interpreter_methods_keep_their_leading_arguments():
    """The counter reads (ptrs, mask) of loads and (ptrs, value, mask) of stores: triton 3.6 and 3.9 agree."""
    from triton.runtime.interpreter import InterpreterBuilder

    load = list(inspect.signature(InterpreterBuilder.create_masked_load).parameters)
    store = list(inspect.signature(InterpreterBuilder.create_masked_store).parameters)
    assert load[:3] == ["self", "ptrs", "mask"] and store[:4] == ["self", "ptrs", "value", "mask"]
    assert load[3] == "other"  # count_traffic(poison=True) reads it (triton 3.6 on the H100 image: the same)


@triton.jit
def row_sum_no_other_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    row = tl.load(x_ptr + tl.program_id(0) * n_cols + cols, mask=cols < n_cols)   # masked lanes: undefined
    tl.store(out_ptr + tl.program_id(0), tl.sum(row, axis=0))


@triton.jit
def int_row_sum_no_other_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    tl.store(out_ptr + tl.program_id(0), tl.sum(tl.load(x_ptr + cols, mask=cols < n_cols), axis=0))


def test_poison_fills_masked_lanes_of_loads_without_other():
    x, out = torch.ones(3, 100), torch.zeros(3)
    with tb.count_traffic() as plain:   # the interpreter's zeros: a sum without other= looks right
        tb.launch(row_sum_no_other_kernel, (3,), x, out, 100, BLOCK=128)
    assert torch.equal(out, torch.full((3,), 100.0))
    with tb.count_traffic(poison=True) as poisoned:
        tb.launch(row_sum_no_other_kernel, (3,), x, out, 100, BLOCK=128)
    assert torch.isnan(out).all()
    assert poisoned.elements_read(x) == plain.elements_read(x) == 300   # the count is the same
    with tb.count_traffic(poison=True):   # other= given: the poison changes nothing
        tb.launch(row_sum_kernel, (3,), x, out, 100, BLOCK=128)
    assert torch.equal(out, torch.full((3,), 100.0))
    with tb.count_traffic(poison=True):   # a full block has no masked-off lanes
        tb.launch(row_sum_no_other_kernel, (3,), torch.ones(3, 128), out, 128, BLOCK=128)
    assert torch.equal(out, torch.full((3,), 128.0))
    ints, total = torch.ones(5, dtype=torch.int32), torch.zeros(1, dtype=torch.int32)
    with tb.count_traffic(poison=True):   # integers get garbage, not 0
        tb.launch(int_row_sum_no_other_kernel, (1,), ints, total, 5, BLOCK=8)
    assert total.item() != 5
    with tb.count_traffic(poison=True):
        pass
    tb.launch(row_sum_no_other_kernel, (3,), x, out, 100, BLOCK=128)   # the poison ends with its block
    assert torch.equal(out, torch.full((3,), 100.0))
    with pytest.raises(TypeError, match="poison must be True or False"):
        with tb.count_traffic(poison=1):
            pass


@triton.jit
def block_dot_kernel(a_ptr, b_ptr, out_ptr, n, skip_from, BLOCK: tl.constexpr):
    """Program i: sum over blocks j < min(cdiv(n, BLOCK), skip_from + i) of dot(a block, b block); masked loads."""
    rows = tl.arange(0, BLOCK)
    acc = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
    for start in range(0, tl.minimum(n, (skip_from + tl.program_id(0)) * BLOCK), BLOCK):
        offsets = (start + rows)[:, None] * BLOCK + rows[None, :]
        inside = (start + rows)[:, None] < n
        a = tl.load(a_ptr + offsets, mask=inside, other=0.0)
        b = tl.load(b_ptr + offsets, mask=inside, other=0.0)
        acc += tl.dot(a, tl.trans(b))
    tl.load(a_ptr + n * BLOCK + rows, mask=rows < 0, other=0.0)   # a load with every lane off: issued, 0 elements
    tl.store(out_ptr + tl.program_id(0) * BLOCK * BLOCK + rows[:, None] * BLOCK + rows[None, :], acc)


def test_loads_stores_and_dots_are_counted_per_call_and_program():
    a, b = torch.randn(40, 8), torch.randn(40, 8)
    out = torch.zeros(3, 8, 8)
    with tb.count_traffic() as traffic:   # cdiv(40, 8) = 5 blocks; program i stops at block 1 + i
        tb.launch(block_dot_kernel, (3,), a, b, out, 40, 1, BLOCK=8)
    assert [traffic.dots((i,)) for i in range(3)] == [1, 2, 3] and traffic.dots() == 6
    assert traffic.loads(a) == 6 + 3 and traffic.loads(b) == 6   # one all-masked load of a per program
    assert traffic.elements_read(a) == traffic.elements_read(b) == 6 * 64
    assert traffic.stores(out) == 3 and traffic.stores() == 3 and traffic.loads() == 15
    assert traffic.dots((5, 0)) == 0
    with tb.count_traffic() as traffic:
        tb.launch(block_dot_kernel, (3,), a, b, out, 40, 9, BLOCK=8)   # no block skipped
    assert traffic.dots() == 15 and traffic.loads(b) == 15
    assert traffic.dot_operand_types() == ["fp32"]   # the float32 tiles as loaded
    with tb.count_traffic() as traffic:
        tb.launch(row_sum_kernel, (3,), torch.ones(3, 100), torch.zeros(3), 100, BLOCK=128)
    assert traffic.dots() == 0 and traffic.loads() == 3 and traffic.stores() == 3 and traffic.dot_operand_types() == []


def test_draw_matmul_tiles():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = tb.draw_matmul_tiles(40, 30, 50, 16, 16, 16, program=(1, 1), step=3)
    assert len(axes) == 3 and "program (1, 1)" in axes[2].get_title()
    assert axes[0].get_xlim() == (0, 64) and axes[0].get_ylim() == (48, 0)   # whole blocks, ragged edges hatched
    plt.close("all")
    _, given = plt.subplots(1, 3)
    assert tb.draw_matmul_tiles(16, 16, 16, 16, 16, 16, program=(0, 0), step=0, axes=given) is given
    plt.close("all")
    for kwargs, error, match in [({"M": 0}, ValueError, "M"), ({"program": (3, 0)}, ValueError, "program must lie"),
                                 ({"program": [0, 0]}, TypeError, "program must be a pair"),
                                 ({"step": 4}, ValueError, "step must be below"),
                                 ({"axes": [None]}, ValueError, "three matplotlib Axes")]:
        arguments = {"M": 40, "N": 30, "K": 50, "block_m": 16, "block_n": 16, "block_k": 16} | kwargs
        with pytest.raises(error, match=match):
            tb.draw_matmul_tiles(**arguments)
    plt.close("all")


def _emulate_triton_3_6_index(monkeypatch):
    """Make this interpreter set triton 3.6.0's tl.tensor.__index__, int() of the 1-element array an int argument
    becomes: numpy >= 2.4 raises TypeError on it (older numpy warns, made an error here)."""
    from triton.runtime import interpreter

    fixed = interpreter._patch_lang_tensor

    def patch_lang_tensor_of_triton_3_6(tensor, scope):
        fixed(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data))

    monkeypatch.setattr(interpreter, "_patch_lang_tensor", patch_lang_tensor_of_triton_3_6)
    return patch_lang_tensor_of_triton_3_6


def _matmul_launch():
    a, b = torch.randn(33, 40), torch.randn(40, 31)
    c = torch.empty(33, 31)
    tb.launch(triton_kernels.matmul_kernel, (3, 2), a, b, c, 33, 31, 40, BLOCK_M=16, BLOCK_N=16, BLOCK_K=16)
    return a @ b, c


def test_triton_3_6_index_of_an_int_argument_is_fixed_for_each_launch(monkeypatch):
    """`for k0 in range(0, K, BLOCK_K)` over an int argument: triton 3.6's interpreter fails with numpy >= 2.4
    (upstream fix: triton-lang/triton PR #9172); the launcher backports the fix for the launch only."""
    import warnings

    from triton.runtime import interpreter

    original_index = tl.tensor.__dict__.get("__index__")
    old = _emulate_triton_3_6_index(monkeypatch)
    assert triton_launch._index_needs_squeeze(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        expected, c = _matmul_launch()
        assert torch.allclose(c, expected, atol=1e-4)
        with tb.count_traffic() as traffic:
            _matmul_launch()
        assert traffic.launches[0].kernel == "matmul_kernel"
        assert interpreter._patch_lang_tensor is old  # restored, and tl.tensor with it
        assert tl.tensor.__dict__.get("__index__") is original_index

        monkeypatch.setattr(triton_launch, "_index_needs_squeeze", lambda patch: False)  # without the fix
        with pytest.raises(Exception) as failure:
            _matmul_launch()
    cause = failure.value
    while cause.__cause__ is not None:
        cause = cause.__cause__
    assert isinstance(cause, (TypeError, DeprecationWarning)), repr(failure.value)


def test_a_fixed_interpreter_is_left_alone():
    def patch_lang_tensor_of_triton_3_9(tensor, scope):
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.squeeze()))

    assert not triton_launch._index_needs_squeeze(patch_lang_tensor_of_triton_3_9)
    assert not triton_launch._index_needs_squeeze(len)  # no Python source: nothing to detect, nothing patched


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("grid, error, match", [
    ("8", TypeError, "grid must be a tuple"), ((), TypeError, "grid must be a tuple"), ([], TypeError, "grid must"),
    ((1, 1, 1, 1), TypeError, "grid must be a tuple"), ((0,), ValueError, "positive ints"),
    ((2.0,), ValueError, "positive ints"), ((True,), ValueError, "positive ints"),
])
def test_bad_grid(grid, error, match):
    x = torch.randn(8)
    with pytest.raises(error, match=match):
        tb.launch(add_kernel, grid, x, x, x, 8, BLOCK=8)


def test_bad_arguments_are_named():
    x = torch.randn(64)
    with pytest.raises(ValueError, match="BLOCK must be a power of two"):
        tb.launch(add_kernel, (1,), x, x, x, 64, BLOCK=48)
    with pytest.raises(ValueError, match="x_ptr is a non-contiguous tensor"):
        tb.launch(add_kernel, (1,), torch.randn(128)[::2], x, x, 64, BLOCK=64)
    with pytest.raises(TypeError, match="BLOK: the kernel has no argument"):
        tb.launch(add_kernel, (1,), x, x, x, 64, BLOK=64)
    with pytest.raises(TypeError, match="takes 5 arguments"):
        tb.launch(add_kernel, (1,), x, x, x, 64, 64, 64)
    with pytest.raises(TypeError, match="kernel must be a function decorated with @triton.jit"):
        tb.launch(add_kernel.fn, (1,), x, x, x, 64, BLOCK=64)
    with pytest.raises(ValueError, match="a and b: inner dimensions"):
        triton_kernels.matmul(torch.randn(3, 4), torch.randn(5, 3))
    with pytest.raises(TypeError, match="x must be a torch.Tensor"):
        triton_kernels.softmax([[1.0]])


def test_launch_takes_tritons_launch_options():
    """Review v3r2 M4: num_warps, num_stages and num_ctas are Triton's launch keywords (the Fused Softmax tutorial
    passes num_warps): checked, ignored by the interpreter, passed to the compiled kernel on a GPU."""
    x, y = torch.randn(300), torch.randn(300)
    out = torch.empty(300)
    tb.launch(add_kernel, (triton.cdiv(300, 64),), x, y, out, 300, BLOCK=64, num_warps=4, num_stages=3, num_ctas=1)
    assert torch.equal(out, x + y)
    with tb.count_traffic() as traffic:
        tb.launch(add_kernel, (5,), x, y, out, 300, BLOCK=64, num_warps=8)
    assert traffic.launches[0].grid == (5, 1, 1)
    for options, match in [({"num_warps": 3}, "num_warps must be a power of two"),
                           ({"num_warps": 0}, "num_warps must be a positive int"),
                           ({"num_stages": -1}, "num_stages must be a positive int"),
                           ({"num_ctas": 2.0}, "num_ctas must be a positive int"),
                           ({"num_stages": True}, "num_stages must be a positive int")]:
        with pytest.raises(ValueError, match=match):
            tb.launch(add_kernel, (5,), x, y, out, 300, BLOCK=64, **options)


def test_launch_options_reach_the_compiled_kernel(monkeypatch):
    """On a GPU the options go to kernel[grid](...) with the arguments (faked here: no GPU needed)."""
    calls = []

    class Launcher:
        def __call__(self, *args, **kwargs):
            calls.append((args, kwargs))

    monkeypatch.setattr(triton_launch, "runs_compiled", lambda *args: True)
    monkeypatch.setattr(type(add_kernel), "__getitem__", lambda self, grid: Launcher())
    x = torch.randn(8)
    tb.launch(add_kernel, (1,), x, x, x, 8, BLOCK=8, num_warps=2, num_stages=4)
    assert calls == [((x, x, x, 8), {"BLOCK": 8, "num_warps": 2, "num_stages": 4})]


def test_autotuned_kernel_is_refused_by_the_interpreter():
    tuned = triton.autotune(configs=[triton.Config({"BLOCK": 64})], key=["n_elements"])(add_kernel)
    x = torch.randn(64)
    with pytest.raises(ValueError, match="interpreter cannot autotune"):
        tb.launch(tuned, (1,), x, x, torch.empty(64), 64)


def test_is_power_of_two():
    assert [n for n in range(20) if triton_launch.is_power_of_two(n)] == [1, 2, 4, 8, 16]
    assert not triton_launch.is_power_of_two(True) and not triton_launch.is_power_of_two(4.0)


def test_missing_triton_says_take_the_lesson_on_colab(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", None)
    monkeypatch.setattr(sys, "platform", "darwin")
    with pytest.raises(ImportError, match="Triton ships for Linux only.*open the lesson on Colab"):
        tb.require_triton()


def test_mode_lines():
    assert tb.launches_compiled("cuda:0") and not tb.launches_compiled("cpu")
    assert "interpreter" in tb.describe_mode("cpu") and "compile" in tb.describe_mode("cuda:0")


# --------------------------------------------------------------------------- GPU only

def _has_cuda() -> bool:
    return torch.cuda.is_available()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU")
def test_gpu_compiles_and_counting_still_interprets():
    x, y = torch.randn(5000, device="cuda"), torch.randn(5000, device="cuda")
    assert triton_launch.runs_compiled(x, y)
    assert torch.equal(_add(x, y), x + y)
    with tb.count_traffic() as traffic:
        assert not triton_launch.runs_compiled(x, y)
        out = _add(x, y)
    assert out.is_cuda and torch.equal(out, x + y)
    assert traffic.bytes_read(x) == 4 * 5000 and traffic.bytes_written(out) == 4 * 5000
    a, b = torch.randn(300, 200, device="cuda"), torch.randn(200, 100, device="cuda")
    assert torch.allclose(triton_kernels.matmul(a, b), a @ b, atol=5e-2, rtol=1e-2)  # TF32 on the GPU


def test_traffic_records_are_importable_from_their_own_module():
    from gpucourse.kernels import triton_traffic

    assert tb.Traffic is triton_traffic.Traffic and tb.LaunchRecord is triton_traffic.LaunchRecord


def test_the_lesson_reaches_the_launcher_through_triton_backend():
    """Lesson 06 calls tb.launch, tb.count_traffic, tb.OutOfBounds and tb.require_triton: triton_launch's own."""
    for name in ("launch", "count_traffic", "OutOfBounds", "require_triton"):
        assert getattr(tb, name) is getattr(triton_launch, name), name


# --------------------------------------------------------------------------- lesson 06's correct alternatives

def _right_answers() -> list[tuple[str, str, str]]:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from notebook_utils import right_answers

    return right_answers("06_triton")


@pytest.mark.parametrize("grade_id, name, source", _right_answers(), ids=[f"{g}-{n}" for g, n, _ in _right_answers()])
def test_lesson_06_correct_alternatives_pass(grade_id: str, name: str, source: str) -> None:
    """Review v3r2 M3, M4: correct answers other than the model answer (allocate then move to the inputs' device;
    num_warps and num_stages at the launch) pass lesson 06's tests, visible and hidden, in a fresh interpreter."""
    import subprocess
    import textwrap
    from pathlib import Path

    code = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import builtins
        import gpucourse
        from notebook_utils import failure_of_test_cell
        builtins.REPORT = gpucourse.setup()  # what the setup cell gives the lesson's imports cell
        print(repr(failure_of_test_cell("06_triton", {grade_id!r}, {source!r})))
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "None", f"{name} failed {grade_id}: {result.stdout[-2000:]}"
