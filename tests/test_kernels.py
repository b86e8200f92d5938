"""Tests of gpucourse.kernels: launch sizes, the kernel tracer (counts, maps, barriers, errors), backend choice, stack.

The tracer needs no GPU: the kernels below are ordinary @cuda.jit functions that it runs in Python. Backend choice
is tested in fresh processes, since Numba fixes its CUDA backend when numba.cuda is first imported.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from notebook_utils import right_answers

pytest.importorskip("numba")
from numba import cuda, float32, int32  # noqa: E402  (the tracer runs these kernels in Python, whatever the backend)

from gpucourse import kernels  # noqa: E402
from gpucourse.checks import CheckFailed  # noqa: E402


# --------------------------------------------------------------------------- kernels under test

@cuda.jit
def vector_add(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def vector_add_unguarded(a, b, out):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]


@cuda.jit
def scale_grid_stride(x, alpha, out):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, out.size, stride):
        out[i] = alpha * x[i]


@cuda.jit
def copy_along_rows(src, dst):  # consecutive threads in x touch consecutive elements of a row: coalesced
    j, i = cuda.grid(2)
    if i < src.shape[0] and j < src.shape[1]:
        dst[i, j] = src[i, j]


@cuda.jit
def copy_along_columns(src, dst):  # consecutive threads in x walk down a column: one sector each
    i, j = cuda.grid(2)
    if i < src.shape[0] and j < src.shape[1]:
        dst[i, j] = src[i, j]


@cuda.jit
def same_line_shared(out):
    t = cuda.threadIdx.x
    first = cuda.shared.array(4, float32); second = cuda.shared.array(4, float32)  # noqa: E702
    first[t] = 1.0
    second[t] = 2.0
    cuda.syncthreads()
    out[t] = first[t]


@cuda.jit(device=True)
def plus_one(value):
    return value + 1


@cuda.jit
def calls_device_function(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = plus_one(x[i]) + cuda.threadIdx.x * 0


@cuda.jit
def not_written_yet(out):
    raise NotImplementedError()


def make_tiled_matmul(tile: int, synchronise: bool = True):
    """A shared-memory tiled matmul C = A @ B (x along columns of C); optionally without its barriers."""

    @cuda.jit
    def matmul(A, B, C):
        sA = cuda.shared.array((tile, tile), float32)
        sB = cuda.shared.array((tile, tile), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col, row = cuda.blockIdx.x * tile + tx, cuda.blockIdx.y * tile + ty
        acc = float32(0.0)
        for step in range((A.shape[1] + tile - 1) // tile):
            k = step * tile + tx
            sA[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else 0.0
            k = step * tile + ty
            sB[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else 0.0
            if synchronise:
                cuda.syncthreads()
            for kk in range(tile):
                acc += sA[ty, kk] * sB[kk, tx]
            if synchronise:
                cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc

    return matmul


def make_with_local_cuda():
    """A kernel whose `cuda` is a closure variable (imported inside the factory), not a global."""
    from numba import cuda as local_cuda

    @local_cuda.jit
    def kernel(out):
        i = local_cuda.grid(1)
        if i < out.size:
            out[i] = i

    return kernel


def _vectors(n: int, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


# --------------------------------------------------------------------------- launch sizes

@pytest.mark.parametrize("n, threads, blocks", [(1, 32, 1), (32, 32, 1), (33, 32, 2), (100, 32, 4), (10**6, 256, 3907),
                                                (1024, 1024, 1)])
def test_blocks_for(n, threads, blocks):
    assert kernels.blocks_for(n, threads) == blocks


@pytest.mark.parametrize("args, error, word", [((0, 32), ValueError, "n"), ((-5, 32), ValueError, "n"),
                                               ((10, 0), ValueError, "threads_per_block"),
                                               ((10, 2048), ValueError, "threads_per_block"),
                                               ((10.5, 32), TypeError, "n"), ((10, True), TypeError, "threads_per_block"),
                                               (("10", 32), TypeError, "n")])
def test_blocks_for_rejects_bad_input(args, error, word):
    with pytest.raises(error, match=word):
        kernels.blocks_for(*args)


def test_grid_2d_runs_x_along_columns():
    assert kernels.grid_2d((20, 13), (8, 8)) == (2, 3)
    assert kernels.grid_2d((1, 1), (16, 16)) == (1, 1)
    assert kernels.grid_2d((33, 64), (32, 1)) == (2, 33)


@pytest.mark.parametrize("shape, block, error, word", [([20, 13], (8, 8), TypeError, "shape"),
                                                       ((20, 13, 1), (8, 8), TypeError, "shape"),
                                                       ((20, 13), 8, TypeError, "block"),
                                                       ((0, 13), (8, 8), ValueError, r"shape\[0\]"),
                                                       ((20, 13), (8, 0), ValueError, r"block\[1\]"),
                                                       ((20, 13), (64, 32), ValueError, "1024")])
def test_grid_2d_rejects_bad_input(shape, block, error, word):
    with pytest.raises(error, match=word):
        kernels.grid_2d(shape, block)


# --------------------------------------------------------------------------- the tracer: counts and maps

def test_vector_add_counts_and_result():
    a, b = _vectors(20)
    out = np.zeros(20, np.float32)
    trace = kernels.trace_kernel(vector_add, 3, 8, a, b, out)
    np.testing.assert_array_equal(out, a + b)  # the caller's arrays are updated, as by a launch
    assert trace.threads == 24 and trace.blocks == 3 and trace.threads_per_block == 8
    reads, writes = trace.reads_per_thread(), trace.writes_per_thread()
    assert reads.tolist() == [2] * 20 + [0] * 4 and writes.tolist() == [1] * 20 + [0] * 4
    assert trace.reads_per_thread("a").tolist() == [1] * 20 + [0] * 4
    assert trace.writes_per_thread("a").sum() == 0
    assert trace.writer_map("out", "thread").tolist() == list(range(20))
    assert trace.writer_map("out", "block").tolist() == [0] * 8 + [1] * 8 + [2] * 4
    assert trace.writer_map("out", "thread_x").tolist() == list(range(8)) * 2 + list(range(4))
    assert trace.writer_map("out", "global_x").tolist() == list(range(20))
    assert trace.writer_map("out", "count").tolist() == [1] * 20
    assert trace.writer_map("a", "thread").tolist() == [-1] * 20  # read, never written
    assert "idle threads (no global access): 4" in trace.summary()
    assert "out: 20 of 20 elements written, 0 more than once" in str(trace)


def test_check_budget_passes_and_names_the_worst_thread(capsys):
    a, b = _vectors(10)
    trace = kernels.trace_kernel(vector_add, 2, 8, a, b, np.zeros(10, np.float32))
    trace.check_budget(2, 1, name="vector add")
    assert "vector add" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=r"thread \(block \(0, 0, 0\), thread \(0, 0, 0\)\) made 2 global reads, "
                                          r"budget 1 per thread \(10 of 16 threads over\)"):
        trace.check_budget(1, 1)
    with pytest.raises(CheckFailed, match=r"(?s)made 1 global write, budget 0.*Hint: one write"):
        trace.check_budget(2, 0, hint="one write")
    trace.check_budget(1, 0, array="a", quiet=True)
    with pytest.raises(TypeError, match="reads"):
        trace.check_budget(2.5, 1)
    with pytest.raises(ValueError, match="writes"):
        trace.check_budget(2, -1)


def test_missing_guard_raises_index_error_naming_the_thread():
    a, b = _vectors(20)
    with pytest.raises(IndexError, match=r"thread \(block \(2, 0, 0\), thread \(4, 0, 0\)\) read a\[20\], outside a "
                                         r"of shape \(20,\)"):
        kernels.trace_kernel(vector_add_unguarded, 3, 8, a, b, np.zeros(20, np.float32))


def test_grid_stride_loop_covers_every_element_once():
    x = np.arange(20, dtype=np.float32)
    out = np.zeros(20, np.float32)
    trace = kernels.trace_kernel(scale_grid_stride, 2, 4, x, np.float32(3), out)
    np.testing.assert_array_equal(out, 3 * x)
    assert trace.writer_map("out", "thread").tolist() == [i % 8 for i in range(20)]
    assert trace.reads_per_thread().tolist() == [3, 3, 3, 3, 2, 2, 2, 2]


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 90), threads=st.integers(1, 40))
def test_every_element_written_once_and_idle_threads_counted(n, threads):
    a, b = _vectors(n)
    out = np.zeros(n, np.float32)
    trace = kernels.trace_kernel(vector_add, kernels.blocks_for(n, threads), threads, a, b, out)
    assert (trace.writer_map("out", "count") == 1).all()
    idle = (trace.reads_per_thread() + trace.writes_per_thread() == 0).sum()
    assert idle == kernels.blocks_for(n, threads) * threads - n
    np.testing.assert_array_equal(out, a + b)


def test_two_dimensional_maps_and_coalescing():
    src = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    rows_first, columns_first = np.zeros_like(src), np.zeros_like(src)
    trace = kernels.trace_kernel(copy_along_rows, kernels.grid_2d(src.shape, (32, 4)), (32, 4), src, rows_first)
    np.testing.assert_array_equal(rows_first, src)
    assert (trace.writer_map("dst", "global_x") == np.arange(32)[None, :]).all()
    assert (trace.writer_map("dst", "global_y") == np.arange(32)[:, None]).all()
    assert (trace.writer_map("dst", "thread_y") == np.arange(32)[:, None] % 4).all()
    assert (trace.writer_map("dst", "block_y") == np.arange(32)[:, None] // 4).all()
    assert trace.writer_map("dst", "block_x").max() == 0 and trace.writer_map("dst", "thread_z").max() == 0
    assert trace.sectors_per_request("src") == 4.0  # 32 threads x 4 bytes = 128 bytes = 4 sectors of 32 bytes
    assert trace.sectors_per_request("dst", "write", sector_bytes=128) == 1.0
    strided = kernels.trace_kernel(copy_along_columns, (1, 8), (32, 4), src, columns_first)
    np.testing.assert_array_equal(columns_first, src)
    assert strided.sectors_per_request("src") == 32.0  # each thread of a warp in a different row


def test_tiled_matmul_with_barriers_and_without():
    rng = np.random.default_rng(1)
    A, B = rng.standard_normal((20, 27)).astype(np.float32), rng.standard_normal((27, 13)).astype(np.float32)
    C = np.zeros((20, 13), np.float32)
    trace = kernels.trace_kernel(make_tiled_matmul(8), kernels.grid_2d(C.shape, (8, 8)), (8, 8), A, B, C)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)
    steps = 4  # ceil(27 / 8)
    assert trace.reads_per_thread().max() == 2 * steps and trace.barriers.max() == 2 * steps
    trace.check_budget(2 * steps, 1, quiet=True)
    unsynchronised = np.zeros((20, 13), np.float32)
    kernels.trace_kernel(make_tiled_matmul(8, synchronise=False), kernels.grid_2d(C.shape, (8, 8)), (8, 8), A, B,
                         unsynchronised)
    assert not np.allclose(unsynchronised, A @ B, rtol=1e-3, atol=1e-3, equal_nan=False)  # reads unloaded tiles


def test_shared_arrays_declared_on_one_line_stay_distinct():
    out = np.zeros(4, np.float32)
    kernels.trace_kernel(same_line_shared, 1, 4, out)
    assert out.tolist() == [1.0] * 4  # Numba's simulator gives 2.0 here: it tells shared arrays apart by line


def test_device_functions_and_closure_cuda_are_traced():
    x = np.arange(10, dtype=np.float32)
    out = np.zeros(10, np.float32)
    kernels.trace_kernel(calls_device_function, 1, 16, x, out)
    np.testing.assert_array_equal(out, x + 1)
    filled = np.full(7, -1, dtype=np.int64)
    kernels.trace_kernel(make_with_local_cuda(), 2, 4, filled)
    assert filled.tolist() == list(range(7))
    plain = np.zeros(5, np.float32)
    kernels.trace_kernel(vector_add.py_func, 1, 8, np.ones(5, np.float32), np.ones(5, np.float32), plain)
    assert plain.tolist() == [2.0] * 5


FROZEN_FIELDS = (0, 1)
FROZEN_TABLE = np.arange(4, dtype=np.float32)
FROZEN_OFFSET = 1.0


@cuda.jit
def sum_frozen_fields(p, out):  # reads the global FROZEN_FIELDS: Numba freezes it at the first compile
    i = cuda.grid(1)
    if i < out.size:
        total = 0.0
        for f in FROZEN_FIELDS:
            total += p[f, i]
        out[i] = total


@cuda.jit
def read_frozen_table(out):  # a global array: a constant on a GPU, frozen with the values it had
    i = cuda.grid(1)
    if i < out.size:
        out[i] = FROZEN_TABLE[i]


@cuda.jit(device=True)
def add_frozen_offset(value):
    return value + FROZEN_OFFSET


@cuda.jit
def calls_frozen_device_function(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = add_frozen_offset(out[i])


def test_a_global_changed_after_the_first_trace_fails_as_numba_freezes_it():
    """Review r14 (lesson 04): Numba freezes the globals a kernel reads at its first compile; the tracer used to
    read them afresh, so a kernel reconfigured through a global passed on a CPU and was wrong on a GPU."""
    global FROZEN_FIELDS, FROZEN_OFFSET
    p, out = np.arange(12, dtype=np.float32).reshape(3, 4), np.zeros(4, np.float32)
    try:
        kernels.trace_kernel(sum_frozen_fields, 1, 4, p, out)
        FROZEN_FIELDS = (0, 1)  # a new tuple, equal: what a GPU would use anyway
        kernels.trace_kernel(sum_frozen_fields, 1, 4, p, out)
        FROZEN_FIELDS = (1, 2)
        with pytest.raises(kernels.FrozenValueChanged, match=r"sum_frozen_fields reads the global `FROZEN_FIELDS`.*"
                                                             r"was \(0, 1\) then and is \(1, 2\) now"):
            kernels.trace_kernel(sum_frozen_fields, 1, 4, p, out)
        assert issubclass(kernels.FrozenValueChanged, CheckFailed)
        kernels.trace_kernel(sum_frozen_fields, 1, 4, p.astype(np.float64), out)  # new types: a new compile
        kernels.trace_kernel(sum_frozen_fields.py_func, 1, 4, p, out)  # a plain Python function: not compiled
        np.testing.assert_array_equal(out, p[1] + p[2])
        values = np.ones(3, np.float32)
        kernels.trace_kernel(calls_frozen_device_function, 1, 4, values)
        FROZEN_OFFSET = 2.0
        with pytest.raises(kernels.FrozenValueChanged, match=r"in device function add_frozen_offset\) reads the "
                                                             r"global `FROZEN_OFFSET`"):
            kernels.trace_kernel(calls_frozen_device_function, 1, 4, values)
    finally:
        FROZEN_FIELDS, FROZEN_OFFSET = (0, 1), 1.0


def test_a_global_array_changed_in_place_or_a_closure_reassigned_fails_too():
    out = np.zeros(4, np.float32)
    kernels.trace_kernel(read_frozen_table, 1, 4, out)
    FROZEN_TABLE[0] = 7.0
    try:
        with pytest.raises(kernels.FrozenValueChanged, match=r"an array of shape \(4,\) then"):
            kernels.trace_kernel(read_frozen_table, 1, 4, out)
    finally:
        FROZEN_TABLE[0] = 0.0
    kernels.trace_kernel(read_frozen_table, 1, 4, out)

    def make():
        scale = np.float32(2.0)

        @cuda.jit
        def scaled(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = scale

        def rescale(value):
            nonlocal scale
            scale = value
        return scaled, rescale

    scaled, rescale = make()
    kernels.trace_kernel(scaled, 1, 4, out)
    rescale(np.float32(3.0))
    with pytest.raises(kernels.FrozenValueChanged, match=r"reads `scale` from its closure.*was 2\.0 \(float32\) then "
                                                         r"and is 3\.0 \(float32\) now"):
        kernels.trace_kernel(scaled, 1, 4, out)
    rescale(np.float64(2.0))  # another type: numba would have frozen a float32
    with pytest.raises(kernels.FrozenValueChanged):
        kernels.trace_kernel(scaled, 1, 4, out)
    fresh, _ = make()  # a new kernel object: compiled afresh, with its own value
    kernels.trace_kernel(fresh, 1, 4, out)


def test_errors_keep_their_type_and_threads_end():
    before = threading.active_count()
    with pytest.raises(NotImplementedError) as caught:
        kernels.trace_kernel(not_written_yet, 2, 8, np.zeros(4))
    assert any("block (0, 0, 0), thread (0, 0, 0)" in note for note in getattr(caught.value, "__notes__", []))

    @cuda.jit
    def fails_after_barrier(out):
        cuda.syncthreads()
        out[cuda.threadIdx.x] = 1.0

    with pytest.raises(IndexError, match=r"thread \(4, 0, 0\)\) wrote out\[4\]"):  # threads 5-7 wait at the barrier
        kernels.trace_kernel(fails_after_barrier, 1, 8, np.zeros(4))
    for thread in threading.enumerate():
        if isinstance(thread, kernels._SimThread):
            thread.join(timeout=5)
    assert threading.active_count() <= before


@pytest.mark.parametrize("call, error, word", [
    (lambda: kernels.trace_kernel("kernel", 1, 1), TypeError, "kernel"),
    (lambda: kernels.trace_kernel(vector_add, 0, 8, *_vectors(4), np.zeros(4)), ValueError, "griddim"),
    (lambda: kernels.trace_kernel(vector_add, 1, (8, 8, 8, 8), *_vectors(4), np.zeros(4)), TypeError, "blockdim"),
    (lambda: kernels.trace_kernel(vector_add, 1, 1.5, *_vectors(4), np.zeros(4)), TypeError, "blockdim"),
    (lambda: kernels.trace_kernel(vector_add, 1, (64, 32), *_vectors(4), np.zeros(4)), ValueError, "1024"),
    (lambda: kernels.trace_kernel(vector_add, 100, 1024, *_vectors(4), np.zeros(4)), ValueError, "max_threads"),
    (lambda: kernels.trace_kernel(vector_add, 1, 8, np.zeros(4)), TypeError, "3 arguments"),
    (lambda: kernels.trace_kernel(vector_add, 1, 8, *_vectors(4), np.zeros(4), max_threads=0), ValueError,
     "max_threads"),
])
def test_trace_kernel_rejects_bad_input(call, error, word):
    with pytest.raises(error, match=word):
        call()


def test_trace_queries_reject_bad_input():
    trace = kernels.trace_kernel(vector_add, 1, 8, *_vectors(4), np.zeros(4, np.float32))
    with pytest.raises(ValueError, match="array"):
        trace.writer_map("c")
    with pytest.raises(ValueError, match="what"):
        trace.writer_map("out", "warp")
    with pytest.raises(ValueError, match="kind"):
        trace.sectors_per_request("a", "load")
    with pytest.raises(ValueError, match="no thread did a write"):
        trace.sectors_per_request("a", "write")
    assert trace.thread_id(5) == kernels.ThreadId(kernels.Dim3(0, 0, 0), kernels.Dim3(5, 0, 0))


def test_indexing_rules_of_traced_arrays():
    @cuda.jit
    def row_read(A, out):
        out[0] = A[0][0]

    with pytest.raises(TypeError, match="index all 2 dimension"):
        kernels.trace_kernel(row_read, 1, 1, np.zeros((2, 2)), np.zeros(1))

    @cuda.jit
    def last(x, out):
        out[0] = x[-1]  # negative indices wrap around, as in numpy and Numba

    out = np.zeros(1)
    trace = kernels.trace_kernel(last, 1, 1, np.arange(5.0), out)
    assert out[0] == 4.0 and trace.accesses[0] == (0, "x", "read", 4)


# --------------------------------------------------------------------------- the picture

def test_plot_thread_map_draws_blocks_and_labels():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    trace = kernels.trace_kernel(vector_add, 3, 8, *_vectors(20), np.zeros(20, np.float32))
    ax = kernels.plot_thread_map(trace, "out")
    assert len(ax.images) == 1 and ax.images[0].get_array().shape == (1, 20)
    assert [t.get_text() for t in ax.texts] == [str(i % 8) for i in range(20)]
    assert "who wrote each element of out" in ax.get_title()
    unwritten = kernels.trace_kernel(vector_add, 1, 8, *_vectors(20), np.zeros(20, np.float32))
    ax = kernels.plot_thread_map(unwritten, "out", wrap=10)
    assert ax.images[0].get_array().shape == (2, 10) and sum(t.get_text() == "-" for t in ax.texts) == 12
    src = np.zeros((5, 6), np.float32)
    two_d = kernels.trace_kernel(copy_along_rows, kernels.grid_2d(src.shape, (4, 4)), (4, 4), src, np.zeros_like(src))
    ax = kernels.plot_thread_map(two_d, "dst", annotate=False)
    assert ax.images[0].get_array().shape == (5, 6) and not ax.texts
    plt.close("all")
    with pytest.raises(TypeError, match="trace"):
        kernels.plot_thread_map("trace", "dst")
    with pytest.raises(ValueError, match="array"):
        kernels.plot_thread_map(two_d, "out")
    with pytest.raises(TypeError, match="annotate"):
        kernels.plot_thread_map(two_d, "dst", annotate="yes")
    with pytest.raises(ValueError, match="wrap"):
        kernels.plot_thread_map(two_d, "dst", wrap=0)


# --------------------------------------------------------------------------- backend choice (fresh processes)

def _fresh_python(code: str, timeout_s: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a new interpreter with Numba's CUDA settings removed from the environment."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("NUMBA_")}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=timeout_s)


def _has_cuda() -> bool:
    torch = pytest.importorskip("torch")
    return torch.cuda.is_available()


@pytest.mark.skipif(_has_cuda(), reason="on a GPU machine the GPU is chosen (see the gpu test)")
def test_simulator_is_chosen_without_a_gpu():
    done = _fresh_python("""
        import os, warnings
        from gpucourse import kernels
        print("BACKEND", kernels.use_cuda_or_simulator())
        from numba import cuda
        from numba.core import config
        assert cuda.is_available() and config.ENABLE_CUDASIM == 1 and os.environ["NUMBA_ENABLE_CUDASIM"] == "1"
        assert kernels.BACKEND == "simulator" and "simulator" in kernels.BACKEND_REASON
        print("AGAIN", kernels.use_cuda_or_simulator(verbose=False))
        import numpy as np
        @cuda.jit
        def add_one(x):
            i = cuda.grid(1)
            if i < x.size:
                x[i] += 1
        x = np.zeros(5)
        add_one[1, 8](x)
        assert x.tolist() == [1.0] * 5
        layers = {layer.name: layer for layer in kernels.software_stack()}
        assert layers["Numba"].version.endswith("(CUDA simulator)"), layers["Numba"]
    """)
    assert done.returncode == 0, done.stderr
    assert "BACKEND simulator" in done.stdout and "AGAIN simulator" in done.stdout
    assert "Numba CUDA backend: simulator (no CUDA GPU here" in done.stdout
    assert done.stderr == ""


@pytest.mark.skipif(_has_cuda(), reason="needs a machine without a GPU")
def test_asking_for_a_missing_gpu_or_switching_too_late_raises():
    done = _fresh_python("""
        from gpucourse import kernels
        try:
            kernels.use_cuda_or_simulator("gpu")
        except RuntimeError as error:
            print("RAISED", error)
        import numba.cuda  # the real target, imported before choosing: too late for the simulator
        try:
            kernels.use_cuda_or_simulator()
        except RuntimeError as error:
            print("LATE", error)
    """)
    assert done.returncode == 0, done.stderr
    assert "RAISED prefer='gpu' but no NVIDIA GPU is visible" in done.stdout
    assert "LATE numba.cuda was imported before use_cuda_or_simulator()" in done.stdout


def test_simulator_can_be_forced_and_then_sticks():
    done = _fresh_python("""
        from gpucourse import kernels
        print(kernels.use_cuda_or_simulator("simulator", verbose=False))
        try:
            kernels.use_cuda_or_simulator("gpu")
        except RuntimeError as error:
            print("STUCK", error)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("simulator") and "STUCK prefer='gpu' but numba.cuda was already imported with " \
                                                  "Numba's CUDA simulator" in done.stdout


@pytest.mark.parametrize("kwargs, error, word", [({"prefer": "cuda"}, ValueError, "prefer"),
                                                 ({"prefer": 1}, TypeError, "prefer"),
                                                 ({"verbose": "yes"}, TypeError, "verbose")])
def test_use_cuda_or_simulator_rejects_bad_input(kwargs, error, word):
    with pytest.raises(error, match=word):
        kernels.use_cuda_or_simulator(**kwargs)


# --------------------------------------------------------------------------- the software stack

def test_software_stack_lists_every_layer():
    layers = kernels.software_stack()
    assert [layer.name for layer in layers] == ["NVIDIA driver", "CUDA runtime", "cuBLAS", "cuDNN", "NCCL", "PyTorch",
                                                "TensorFlow", "Numba"]
    assert all(layer.role and layer.source for layer in layers)
    by_name = {layer.name: layer for layer in layers}
    torch = pytest.importorskip("torch")
    assert by_name["PyTorch"].version == torch.__version__
    assert by_name["CUDA runtime"].version == torch.version.cuda
    if not torch.cuda.is_available():
        assert by_name["NCCL"].version is None


def test_the_driver_layer_is_read_through_gpucourse_nvml(monkeypatch):
    from gpucourse import nvml
    from gpucourse.kernels import cuda_stack

    fake = nvml.FakeNvml([nvml._t4()], driver="550.54.15", cuda_driver=12040)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert cuda_stack._driver_version() == ("550.54.15 (supports CUDA up to 12.4)", "NVML") and fake.open == 0


def test_tensorflow_build_info_without_starting_tensorflow():
    if "tensorflow" in sys.modules:
        pytest.skip("TensorFlow already imported in this process")
    info = kernels.tensorflow_build_info()
    if info is None:
        pytest.skip("TensorFlow not installed")
    assert "is_cuda_build" in info and "tensorflow" not in sys.modules


@pytest.mark.parametrize("raw, text", [(90100, "9.1.0"), (91002, "9.10.2"), (8902, "8.9.2"), (7605, "7.6.5"),
                                       (None, None), (0, None)])
def test_cudnn_version_string(raw, text):
    assert kernels._cudnn_version_string(raw) == text


# --------------------------------------------------------------------------- GPU only

def _numba_compiles_for_the_gpu() -> bool:
    """True if Numba's real CUDA target compiles and runs a kernel here (it needs NVVM, not only a GPU)."""
    from gpucourse.kernels import numba_backend

    return numba_backend._numba_can_use_gpu()


@pytest.mark.gpu
@pytest.mark.skipif(not _has_cuda(), reason="needs a CUDA GPU")
def test_gpu_is_chosen_and_matches_the_tracer():
    if not _numba_compiles_for_the_gpu():
        pytest.skip("needs Numba's CUDA target to compile here (NVVM from a CUDA toolkit or numba-cuda[cu12]); "
                    "without it the lesson runs on the simulator, which the tests above check")
    done = _fresh_python("""
        import numpy as np
        from gpucourse import kernels
        assert kernels.use_cuda_or_simulator() == "gpu"
        from numba import cuda
        from numba.core import config
        assert config.ENABLE_CUDASIM == 0
        @cuda.jit
        def add(a, b, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a[i] + b[i]
        a, b = np.arange(1000, dtype=np.float32), np.ones(1000, np.float32)
        on_gpu, traced = np.zeros_like(a), np.zeros_like(a)
        add[kernels.blocks_for(1000, 128), 128](a, b, on_gpu)
        trace = kernels.trace_kernel(add, kernels.blocks_for(1000, 128), 128, a, b, traced)
        assert np.array_equal(on_gpu, traced) and np.array_equal(on_gpu, a + b)
        trace.check_budget(2, 1, quiet=True)
    """)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


# ---------------------------------------------------------------- occupancy

from gpucourse.kernels import SM_LIMITS, occupancy, occupancy_table  # noqa: E402


@pytest.mark.parametrize("gpu, threads, registers, shared, blocks, warps, limit", [
    ("T4", 256, 32, 0, 4, 32, "warps"),          # 8 warps per block, 32 warps per SM
    ("T4", 32, 32, 0, 16, 16, "blocks"),         # one-warp blocks hit the 16-block limit
    ("T4", 256, 64, 0, 4, 32, "warps"),          # 64 x 256 = 16384 registers per block: 4 blocks fit exactly
    ("T4", 256, 128, 0, 2, 16, "registers"),     # 32768 registers per block
    ("T4", 128, 32, 32 * 1024, 2, 8, "shared memory"),
    ("A100", 256, 32, 0, 8, 64, "warps"),
    ("A100", 256, 128, 0, 2, 16, "registers"),
    ("A100", 128, 32, 48 * 1024, 3, 12, "shared memory"),  # 164 KB / (48 + 1 KB reserved)
    ("H100", 128, 32, 48 * 1024, 4, 16, "shared memory"),  # 228 KB / 49 KB
    ("H100", 1024, 40, 0, 1, 32, "registers"),  # 40 regs -> 1280 per warp; 32 warps need 40960 > 32768 for 2
], ids=str)
def test_occupancy_matches_hand_calculation(gpu, threads, registers, shared, blocks, warps, limit):
    result = occupancy(threads, registers, shared, gpu)
    assert (result.blocks_per_sm, result.warps_per_sm, result.limited_by) == (blocks, warps, limit)
    assert 0 < result.fraction <= 1


def test_registers_round_up_to_the_allocation_unit():
    assert occupancy(256, 33, 0, "T4").limits == occupancy(256, 40, 0, "T4").limits


@pytest.mark.parametrize("kwargs, error, argname", [
    ({"threads_per_block": 0}, ValueError, "threads_per_block"),
    ({"threads_per_block": 2048}, ValueError, "threads_per_block"),
    ({"threads_per_block": 128, "registers_per_thread": 256}, ValueError, "registers_per_thread"),
    ({"threads_per_block": 128, "shared_bytes_per_block": 65 * 1024}, ValueError, "shared_bytes_per_block"),
    ({"threads_per_block": 128, "gpu": "V100"}, ValueError, "gpu"),
    ({"threads_per_block": 128.0}, TypeError, "threads_per_block"),
], ids=str)
def test_occupancy_rejects_bad_arguments(kwargs, error, argname):
    with pytest.raises(error, match=rf"^{argname}\b"):
        occupancy(**kwargs)


def test_sm_limits_name_their_source_and_table_renders():
    assert all("Compute Capabilit" in limits.source for limits in SM_LIMITS.values())
    table = occupancy_table([(256, 32, 0), (128, 64, 16 * 1024)])
    assert table.count("\n") == 3 and "T4" in table and "H100" in table


def test_nvidia_wheels_lists_only_nvidia_distributions():
    from gpucourse.kernels import nvidia_wheels

    wheels = nvidia_wheels()
    assert wheels == sorted(wheels)
    assert all(name.startswith("nvidia-") and isinstance(version, str) for name, version in wheels)


# ---------------------------------------------------------------- data races between blocks

def _make_block_sum(atomic: bool, threads: int = 8):
    """A block sum whose thread 0 adds the block's total into out[0], with an atomic or with a plain +=."""

    @cuda.jit
    def block_sum(x, out):
        partial = cuda.shared.array(threads, float32)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        partial[t] = x[i] if i < x.size else 0.0
        cuda.syncthreads()
        stride = threads // 2
        while stride > 0:
            if t < stride:
                partial[t] += partial[t + stride]
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            if atomic:
                cuda.atomic.add(out, 0, partial[0])
            else:
                out[0] += partial[0]

    return block_sum


@cuda.jit
def per_block_partials(x, partials):  # one writer per element: thread 0 of block b writes partials[b]
    if cuda.threadIdx.x == 0:
        total = 0.0
        for j in range(cuda.blockIdx.x * cuda.blockDim.x, min((cuda.blockIdx.x + 1) * cuda.blockDim.x, x.size)):
            total += x[j]
        partials[cuda.blockIdx.x] = total


@cuda.jit
def shift_left_in_place(x):  # x[i] = x[i + 1]: at a block boundary one block reads what the next block writes
    i = cuda.grid(1)
    if i + 1 < x.size:
        x[i] = x[i + 1]


def test_a_plain_read_modify_write_across_blocks_is_a_data_race():
    x = np.ones(20, dtype=np.float32)
    out = np.zeros(1, dtype=np.float32)
    with pytest.raises(kernels.DataRace, match=r"data race: block \(0, 0, 0\) and block \(1, 0, 0\) both write "
                                               r"out\[0\] without an atomic") as caught:
        kernels.trace_kernel(_make_block_sum(atomic=False), 3, 8, x, out)
    assert "cuda.atomic.add" in str(caught.value) and isinstance(caught.value, CheckFailed)
    assert out[0] == 20.0  # blocks ran one after another: the sum is right, which is why the race needs a detector


def test_allow_races_returns_the_trace_with_its_races():
    x = np.ones(20, dtype=np.float32)
    trace = kernels.trace_kernel(_make_block_sum(atomic=False), 3, 8, x, np.zeros(1, np.float32), allow_races=True)
    assert trace.races() == [kernels.Race("out", (0,), "write-write", (0, 1, 2), ())]
    assert trace.block_accesses("out")[(0,)] == {"read": {0, 1, 2}, "write": {0, 1, 2}, "atomic": set()}
    assert "data races between blocks: 1" in trace.summary()


def test_atomic_updates_and_one_writer_per_element_are_not_races():
    x = np.arange(20, dtype=np.float32)
    out = np.zeros(1, dtype=np.float32)
    trace = kernels.trace_kernel(_make_block_sum(atomic=True), 3, 8, x, out)
    assert out[0] == x.sum() and trace.races() == []
    assert trace.atomics_per_thread("out").tolist() == [1] + [0] * 7 + [1] + [0] * 7 + [1] + [0] * 7
    assert trace.writes_per_thread("out").sum() == 3 and trace.reads_per_thread("out").sum() == 3  # read-modify-write
    assert trace.block_accesses("out")[(0,)] == {"read": set(), "write": set(), "atomic": {0, 1, 2}}
    assert [a for a in trace.accesses if a[1] == "out"] == [(0, "out", "atomic", 0), (8, "out", "atomic", 0),
                                                            (16, "out", "atomic", 0)]
    partials = np.zeros(3, dtype=np.float32)
    trace = kernels.trace_kernel(per_block_partials, 3, 8, x, partials)
    assert partials.tolist() == [28.0, 92.0, 70.0] and trace.races() == []
    assert kernels.trace_kernel(vector_add, 4, 32, *_vectors(100), np.zeros(100, np.float32)).races() == []


def test_a_mix_of_plain_and_atomic_writes_is_a_race():
    @cuda.jit
    def mixed(out):
        if cuda.threadIdx.x == 0:
            if cuda.blockIdx.x == 0:
                out[0] = 1.0
            else:
                cuda.atomic.add(out, 0, 1.0)

    with pytest.raises(kernels.DataRace, match=r"block \(0, 0, 0\) writes out\[0\] without an atomic while block "
                                               r"\(1, 0, 0\) updates it atomically"):
        kernels.trace_kernel(mixed, 2, 4, np.zeros(1, np.float32))


def test_reading_what_another_block_writes_is_a_race():
    with pytest.raises(kernels.DataRace, match=r"block \(1, 0, 0\) writes x\[4\] and block \(0, 0, 0\) reads it"):
        kernels.trace_kernel(shift_left_in_place, 3, 4, np.arange(12, dtype=np.float32))
    trace = kernels.trace_kernel(shift_left_in_place, 1, 12, np.arange(12, dtype=np.float32))  # one block: no race
    assert trace.races() == []


def test_two_dimensional_races_name_the_element_and_blocks():
    @cuda.jit
    def row_sums_racy(x, out):  # every block adds its columns into out[row]: blocks side by side in x collide
        col, row = cuda.grid(2)
        if row < x.shape[0] and col < x.shape[1] and cuda.threadIdx.x == 0:
            out[row] += x[row, col]

    with pytest.raises(kernels.DataRace, match=r"block \(0, 0, 0\) and block \(1, 0, 0\) both write out\[0\]"):
        kernels.trace_kernel(row_sums_racy, (2, 1), (4, 4), np.ones((4, 8), np.float32), np.zeros(4, np.float32))


def test_trace_kernel_rejects_a_non_bool_allow_races():
    with pytest.raises(TypeError, match="^allow_races"):
        kernels.trace_kernel(vector_add, 1, 4, *_vectors(4), np.zeros(4, np.float32), allow_races=1)


def test_sectors_follow_strides_so_a_transposed_view_is_not_coalesced():
    @cuda.jit
    def first_row(p, out):  # thread i reads p[0, i]
        i = cuda.grid(1)
        if i < out.size:
            out[i] = p[0, i]

    points = np.arange(3 * 64, dtype=np.float32).reshape(64, 3)
    contiguous = np.ascontiguousarray(points.T)
    view = points.T                                  # the same (3, 64) shape, but 12 bytes between neighbours
    assert kernels.trace_kernel(first_row, 2, 32, contiguous, np.zeros(64, np.float32)).sectors_per_request("p") == 4
    assert kernels.trace_kernel(first_row, 2, 32, view, np.zeros(64, np.float32)).sectors_per_request("p") == 12


# ---------------------------------------------------------------- warp shuffles and shared-memory banks

@cuda.jit
def warp_sums(x, out):  # a shuffle tree in each warp; lane 0 adds its warp's sum atomically
    i = cuda.grid(1)
    value = x[i] if i < x.size else 0.0
    delta = 16
    while delta > 0:
        value += cuda.shfl_down_sync(0xFFFFFFFF, value, delta)
        delta //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(out, 0, value)


def test_shuffle_down_sums_each_warp_without_barriers():
    x = np.arange(100, dtype=np.float32)
    out = np.zeros(1, dtype=np.float32)
    trace = kernels.trace_kernel(warp_sums, 2, 64, x, out)
    assert out[0] == x.sum()
    assert trace.shuffles.tolist() == [5] * 128 and trace.barriers.max() == 0
    assert trace.atomics_per_thread("out").sum() == 4 and trace.races() == []


@pytest.mark.parametrize("call, expected", [
    ("cuda.shfl_sync(0xFFFFFFFF, lane * 10, 3)", [30] * 32),
    ("cuda.shfl_up_sync(0xFFFFFFFF, lane * 10, 1)", [0] + [10 * (lane - 1) for lane in range(1, 32)]),
    ("cuda.shfl_down_sync(0xFFFFFFFF, lane * 10, 2)", [10 * (lane + 2) for lane in range(30)] + [300, 310]),
    ("cuda.shfl_xor_sync(0xFFFFFFFF, lane * 10, 1)", [10 * (lane ^ 1) for lane in range(32)]),
], ids=["shfl", "up", "down", "xor"])
def test_each_shuffle_reads_the_right_lane(call, expected):
    namespace = {"cuda": cuda}
    exec(textwrap.dedent(f"""
        def kernel(out):
            lane = cuda.laneid
            out[cuda.grid(1)] = {call}
    """), namespace)
    out = np.zeros(64, dtype=np.int64)
    kernels.trace_kernel(cuda.jit(namespace["kernel"]), 1, 64, out)
    assert out.tolist() == expected * 2  # two warps, each on its own


def test_fma_is_traced_in_float32_with_one_rounding():
    """Review r13 (minor, from r12): cuda.fma, which the simulator and the GPU run, is traced too."""
    @cuda.jit
    def squares(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = cuda.fma(x[i], x[i], np.float32(1.0))

    x = np.array([0.1, 2.0, -3.0, 1e-4], np.float32)
    out = np.zeros(4, np.float32)
    kernels.trace_kernel(squares, 1, 32, x, out)
    expected = (x.astype(np.float64) ** 2 + 1.0).astype(np.float32)
    assert out.dtype == np.float32 and out.tolist() == expected.tolist()


def test_a_shuffle_that_not_every_lane_reaches_is_reported():
    @cuda.jit
    def divergent(out):
        lane = cuda.laneid
        if lane < 16:
            out[lane] = cuda.shfl_down_sync(0xFFFFFFFF, lane, 1)

    with pytest.raises(RuntimeError, match=r"lane 16 is in the mask 0xffffffff but did not reach it"):
        kernels.trace_kernel(divergent, 1, 32, np.zeros(32, np.int64))

    @cuda.jit
    def half_mask(out):  # the lower half shuffles among itself, with a mask that names only its lanes
        lane = cuda.laneid
        if lane < 16:
            out[lane] = cuda.shfl_down_sync(0x0000FFFF, lane, 1)

    out = np.zeros(32, np.int64)
    with pytest.raises(RuntimeError, match="reads lane 16, which did not take part"):
        kernels.trace_kernel(half_mask, 1, 32, out)


def test_syncwarp_meets_the_lanes_and_barriers_still_wait_for_the_block():
    @cuda.jit
    def staged(x, out):
        t = cuda.threadIdx.x
        s = cuda.shared.array(64, float32)
        s[t] = x[t]
        cuda.syncwarp()                   # enough for a lane to read its own warp's values
        mine = s[t ^ 1]
        cuda.syncthreads()                # needed to read the other warp's
        out[t] = mine + s[(t + 32) % 64]

    x = np.arange(64, dtype=np.float32)
    out = np.zeros(64, np.float32)
    trace = kernels.trace_kernel(staged, 1, 64, x, out)
    assert out.tolist() == [x[t ^ 1] + x[(t + 32) % 64] for t in range(64)]
    assert trace.shuffles.tolist() == [1] * 64 and trace.barriers.tolist() == [1] * 64


@pytest.mark.parametrize("columns, down, ways", [(32, False, 1), (32, True, 32), (33, True, 1), (64, True, 32),
                                                 (48, True, 16)])
def test_bank_conflict_ways_of_tile_reads(columns, down, ways):
    @cuda.jit
    def read_tile(out):
        tile = cuda.shared.array((32, columns), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        for row in range(ty, 32, cuda.blockDim.y):
            tile[row, tx] = row
        cuda.syncthreads()
        for row in range(ty, 32, cuda.blockDim.y):
            out[row, tx] = tile[tx, row] if down else tile[row, tx]

    trace = kernels.trace_kernel(read_tile, 1, (32, 4), np.zeros((32, 32), np.float32))
    assert trace.bank_conflict_ways(0, "read") == ways
    assert trace.bank_conflict_ways(0, "write") == 1       # the rows were written along the banks
    assert set(trace.shared) == {0} and trace.shared[0].shape == (32, columns)


def test_a_broadcast_is_not_a_conflict_and_bad_queries_are_refused():
    @cuda.jit
    def broadcast(out):
        s = cuda.shared.array(32, float32)
        s[cuda.threadIdx.x] = 1.0
        cuda.syncthreads()
        out[cuda.threadIdx.x] = s[0]      # every lane reads word 0: one pass

    trace = kernels.trace_kernel(broadcast, 1, 32, np.zeros(32, np.float32))
    assert trace.bank_conflict_ways(0) == 1
    with pytest.raises(ValueError, match="^shared"):
        trace.bank_conflict_ways(1)
    with pytest.raises(ValueError, match="^kind"):
        trace.bank_conflict_ways(0, "atomic")
    with pytest.raises(TypeError, match="^worst"):
        trace.bank_conflict_ways(0, worst=1)


def test_bank_conflict_ways_worst_is_the_maximum_not_the_mean():
    @cuda.jit
    def one_bad_read(out):
        s = cuda.shared.array((32, 32), float32)
        t = cuda.threadIdx.x
        s[0, t] = 1.0
        cuda.syncthreads()
        out[t] = s[0, t] + s[t, 0]        # one conflict-free read, then one 32-way read

    trace = kernels.trace_kernel(one_bad_read, 1, 32, np.zeros(32, np.float32))
    assert trace.bank_conflict_ways(0) == 16.5
    assert trace.bank_conflict_ways(0, worst=True) == 32


def test_shared_atomics_and_uninitialised_integers():
    @cuda.jit
    def count(labels, counts):
        private = cuda.shared.array(4, int32)
        t = cuda.threadIdx.x
        if t < 4:
            private[t] = 0
        cuda.syncthreads()
        cuda.atomic.add(private, labels[cuda.grid(1)], 1)
        cuda.syncthreads()
        if t < 4:
            cuda.atomic.add(counts, t, private[t])

    @cuda.jit
    def never_zeroed(out):
        private = cuda.shared.array(4, int32)
        out[cuda.threadIdx.x] = private[cuda.threadIdx.x]

    labels = np.array([0, 1, 1, 3, 3, 3, 2, 0], dtype=np.int32)
    counts = np.zeros(4, dtype=np.int32)
    trace = kernels.trace_kernel(count, 2, 4, labels, counts)
    assert counts.tolist() == [2, 2, 1, 3] and trace.races() == []
    assert sum(1 for access in trace.shared_accesses if access[2] == "atomic") == 8
    garbage = np.zeros(4, dtype=np.int32)
    kernels.trace_kernel(never_zeroed, 1, 4, garbage)
    assert (garbage == np.iinfo(np.int32).min).all()  # uninitialised shared memory shows as garbage, not zeros


def test_occupancy_rows_match_the_table():
    header, rows = kernels.occupancy_rows([(256, 32, 0)], ("T4",))
    assert header == ["threads / block", "registers / thread", "shared memory / block", "T4: warps per SM (limit)"]
    assert rows == [["256", "32", "0 KB", "32 / 32 (warps)"]]
    with pytest.raises(TypeError, match="^gpus"):
        kernels.occupancy_rows([(256, 32, 0)], "T4")


# --------------------------------------------------------------------------- interleave: a random adversarial order

def _make_shared_counter(atomic: bool, barrier: bool = True):
    """Every thread adds 1 to one shared counter (plainly or atomically); thread 0 copies it out."""
    @cuda.jit
    def counter(out):
        total = cuda.shared.array(1, int32)
        if cuda.threadIdx.x == 0:
            total[0] = 0
        cuda.syncthreads()
        if atomic:
            cuda.atomic.add(total, 0, 1)
        else:
            total[0] += 1
        if barrier:
            cuda.syncthreads()
        if cuda.threadIdx.x == 0:
            out[0] = total[0]

    return counter


def test_in_order_tracing_hides_a_shared_race_that_interleave_exposes():
    out = np.zeros(1, np.int32)
    kernels.trace_kernel(_make_shared_counter(atomic=False), 1, 32, out)
    assert out[0] == 32  # one thread at a time: no update lost, the default stays as it was
    trace = kernels.trace_kernel(_make_shared_counter(atomic=False), 1, 32, out, interleave=True, allow_races=True)
    assert out[0] < 32 and trace.block_races  # every thread read 0 before any wrote: updates lost
    assert "plain `x[i] += v`" in trace.block_races[0] and "cuda.atomic.add" in trace.block_races[0]
    assert "races between threads of one block (interleaved trace): 1" in trace.summary()
    with pytest.raises(kernels.DataRace, match=r"data race inside block \(0, 0, 0\): thread .* shared array 0\[0\]"):
        kernels.trace_kernel(_make_shared_counter(atomic=False), 1, 32, np.zeros(1, np.int32), interleave=True)


def test_interleaved_atomics_and_barriers_are_not_races_and_are_reproducible():
    for seed in (0, 1, 2):
        out = np.zeros(1, np.int32)
        trace = kernels.trace_kernel(_make_shared_counter(atomic=True), 1, 40, out, interleave=True, seed=seed)
        assert out[0] == 40 and trace.block_races == [] and trace.barriers.tolist() == [2] * 40
    x = np.arange(20, dtype=np.float32)
    out = np.zeros(1, np.float32)
    kernels.trace_kernel(_make_block_sum(atomic=True), 3, 8, x, out, interleave=True)
    assert out[0] == x.sum()
    orders = []
    for seed in (5, 5, 6):
        trace = kernels.trace_kernel(vector_add, 1, 16, *_vectors(16), np.zeros(16, np.float32), interleave=True,
                                     seed=seed)
        orders.append([access[0] for access in trace.accesses])
    assert orders[0] == orders[1] and orders[0] != orders[2]  # the seed fixes the schedule


def test_a_missing_barrier_is_a_race_under_interleave():
    with pytest.raises(kernels.DataRace, match=r"reads it with no barrier|writes it with no barrier"):
        kernels.trace_kernel(_make_shared_counter(atomic=True, barrier=False), 1, 8, np.zeros(1, np.int32),
                             interleave=True)
    with pytest.raises(kernels.DataRace, match="cuda.syncthreads"):
        kernels.trace_kernel(shift_left_in_place, 1, 12, np.arange(12, dtype=np.float32), interleave=True)


def test_interleave_keeps_shuffles_and_syncwarp_ordered():
    @cuda.jit
    def warp_sum(x, out):
        value = x[cuda.grid(1)]
        delta = 16
        while delta > 0:
            value += cuda.shfl_down_sync(0xFFFFFFFF, value, delta)
            delta //= 2
        if cuda.laneid == 0:
            cuda.atomic.add(out, 0, value)

    @cuda.jit
    def handoff(out):  # lane 0 writes, syncwarp, lane 1 reads: ordered within a warp
        note = cuda.shared.array(1, float32)
        if cuda.laneid == 0:
            note[0] = 7.0
        cuda.syncwarp()
        if cuda.laneid == 1:
            out[0] = note[0]

    x = np.arange(64, dtype=np.float32)
    out = np.zeros(1, np.float32)
    kernels.trace_kernel(warp_sum, 1, 64, x, out, interleave=True, seed=3)
    assert out[0] == x.sum()
    out = np.zeros(1, np.float32)
    kernels.trace_kernel(handoff, 1, 32, out, interleave=True)
    assert out[0] == 7.0


def test_errors_inside_interleaved_threads_end_every_thread():
    before = threading.active_count()
    with pytest.raises(IndexError, match="outside"):
        kernels.trace_kernel(vector_add_unguarded, 2, 8, *_vectors(10), np.zeros(10, np.float32), interleave=True)
    assert threading.active_count() <= before + 1


@pytest.mark.parametrize("kwargs, error, word", [({"interleave": 1}, TypeError, "^interleave"),
                                                 ({"seed": -1}, ValueError, "^seed"),
                                                 ({"seed": 1.5}, TypeError, "^seed")])
def test_trace_kernel_rejects_bad_interleave_arguments(kwargs, error, word):
    with pytest.raises(error, match=word):
        kernels.trace_kernel(vector_add, 1, 4, *_vectors(4), np.zeros(4, np.float32), **kwargs)


def test_a_write_write_race_gets_its_own_hint():
    @cuda.jit
    def everyone_writes_one(out):
        shared = cuda.shared.array(1, float32)
        shared[0] = cuda.threadIdx.x
        cuda.syncthreads()
        out[cuda.threadIdx.x] = shared[0]

    with pytest.raises(kernels.DataRace, match=r"(?s)writes shared array 0\[0\].*two threads write one element"):
        kernels.trace_kernel(everyone_writes_one, 1, 4, np.zeros(4, np.float32), interleave=True)


def test_check_barriers_finds_a_barrier_only_some_threads_reach(capsys):
    @cuda.jit
    def guarded_barrier(x, out):  # the barrier inside `if i < n`: threads past the end skip it
        i = cuda.grid(1)
        if i < x.size:
            out[i] = x[i]
            cuda.syncthreads()

    @cuda.jit
    def early_return(x, out):
        i = cuda.grid(1)
        if i >= x.size:
            return
        cuda.syncthreads()
        out[i] = x[i]

    for kernel in (guarded_barrier, early_return):
        for interleave in (False, True):
            trace = kernels.trace_kernel(kernel, 2, 8, np.ones(12, np.float32), np.zeros(12, np.float32),
                                         interleave=interleave)
            with pytest.raises(CheckFailed, match=r"in block \(1, 0, 0\), thread \(0, 0, 0\) passed 1 "
                                                  r"cuda.syncthreads\(\) and thread \(4, 0, 0\) only 0"):
                trace.check_barriers()
    trace = kernels.trace_kernel(guarded_barrier, 2, 8, np.ones(16, np.float32), np.zeros(16, np.float32))
    trace.check_barriers(name="all reach it")
    assert "all reach it" in capsys.readouterr().out
    trace.check_barriers(quiet=True)
    assert capsys.readouterr().out == ""
    with pytest.raises(TypeError, match="^quiet"):
        trace.check_barriers(quiet=1)


def test_the_adversarial_tracer_refuses_a_barrier_only_some_threads_of_a_block_pass():
    @cuda.jit
    def guarded_barrier(x, out):  # review r15: the barrier under the bounds guard, lesson 04's graders missed it
        i = cuda.grid(1)
        if i < x.size:
            out[i] = x[i]
            cuda.syncthreads()

    with pytest.raises(CheckFailed, match=r"in block \(1, 0, 0\), thread \(0, 0, 0\) passed 1"):
        kernels.trace_kernel_adversarial(guarded_barrier, 2, 8, np.ones(12, np.float32), np.zeros(12, np.float32))
    trace = kernels.trace_kernel_adversarial(guarded_barrier, 2, 8, np.ones(16, np.float32), np.zeros(16, np.float32))
    assert trace.barriers.tolist() == [1] * 16  # every thread passes it when the guard holds for the whole block


# --------------------------------------------------------------------------- lesson 04's correct alternatives

@pytest.mark.parametrize("grade_id, name, source", right_answers("04_cuda_model"),
                         ids=[f"{g}-{n}" for g, n, _ in right_answers("04_cuda_model")])
def test_lesson_04_correct_alternatives_pass(grade_id: str, name: str, source: str) -> None:
    """Review 7: correct answers other than the model answer (the filter loaded once per thread) pass lesson 04's
    tests, visible and hidden."""
    from pathlib import Path

    # In a fresh interpreter: the lesson's imports cell chooses Numba's backend, which this process has fixed already.
    result = _fresh_python(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import builtins
        import gpucourse
        from notebook_utils import failure_of_test_cell
        builtins.REPORT = gpucourse.setup()  # what the setup cell gives the lesson's imports cell
        print(repr(failure_of_test_cell("04_cuda_model", {grade_id!r}, {source!r})))
    """, timeout_s=300)  # a tree in 1,024-thread blocks: about 16 s in the tracer (the cell's limit: 300 s)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip().splitlines()[-1] == "None", f"{name} failed {grade_id}: {result.stdout[-2000:]}"
