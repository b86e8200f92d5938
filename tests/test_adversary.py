"""Tests of the tracer in a random adversarial order: trace_kernel_adversarial (lesson 04's grader) and the options of
trace_kernel it turns on.

Blocks in a random order, threads interleaved at every memory access (races inside a block raise DataRace),
negative indices refused, outputs poisoned; the same KernelTrace as trace_kernel otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("numba")
from numba import cuda  # noqa: E402  (the tracer runs these kernels in Python, whatever the backend)

from gpucourse import kernels  # noqa: E402
from gpucourse.kernels.trace import DataRace  # noqa: E402


@cuda.jit
def scale(x, out):
    """out[i] = 2 x[i], guarded."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i]


@cuda.jit
def column_sum_racy(dy, db):
    """One thread per element adding into db[j]: right only when the threads of a column run one after another."""
    j, i = cuda.grid(2)
    if i < dy.shape[0] and j < dy.shape[1]:
        if i == 0:
            db[j] = dy[0, j]
        else:
            db[j] = db[j] + dy[i, j]


@cuda.jit
def left_neighbour(x, out):
    """out[i] = x[i - 1]: reads x[-1] at i == 0 (no lower guard)."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[i - 1]


@cuda.jit
def block_sum_with_barrier(x, out):
    """Each block sums its 4 elements through shared memory, after a barrier."""
    tile = cuda.shared.array(4, np.float32)
    t = cuda.threadIdx.x
    tile[t] = x[cuda.grid(1)]
    cuda.syncthreads()
    if t == 0:
        out[cuda.blockIdx.x] = tile[0] + tile[1] + tile[2] + tile[3]


@cuda.jit
def warp_broadcast(x, out):
    """Every lane takes lane 0's value through a shuffle."""
    i = cuda.grid(1)
    out[i] = cuda.shfl_sync(0xFFFFFFFF, x[i], 0)


def test_same_result_and_counts_as_the_plain_tracer():
    x = np.arange(10, dtype=np.float32)
    plain, adversarial = np.zeros(10, np.float32), np.zeros(10, np.float32)
    expected = kernels.trace_kernel(scale, 3, 4, x, plain)
    trace = kernels.trace_kernel_adversarial(scale, 3, 4, x, adversarial, seed=5)
    assert np.array_equal(adversarial, 2 * x) and np.array_equal(plain, adversarial)
    assert trace.reads_per_thread().tolist() == expected.reads_per_thread().tolist()
    assert trace.writer_map("out", "thread").tolist() == expected.writer_map("out", "thread").tolist()
    assert trace.sectors_per_request("x") == expected.sectors_per_request("x")


def test_interleaving_loses_the_updates_that_one_thread_at_a_time_hides():
    dy = np.random.default_rng(0).standard_normal((6, 8)).astype(np.float32)
    in_order, interleaved = np.zeros(8, np.float32), np.zeros(8, np.float32)
    kernels.trace_kernel(column_sum_racy, (1, 1), (8, 8), dy, in_order)
    trace = kernels.trace_kernel_adversarial(column_sum_racy, (1, 1), (8, 8), dy, interleaved, seed=0,
                                             allow_races=True)
    assert np.allclose(in_order, dy.sum(axis=0), atol=1e-5)
    assert not np.allclose(interleaved, dy.sum(axis=0), atol=1e-5) and trace.block_races
    with pytest.raises(DataRace, match=r"data race inside block \(0, 0, 0\): thread .* db\[\d\]"):
        kernels.trace_kernel_adversarial(column_sum_racy, (1, 1), (8, 8), dy, np.zeros(8, np.float32), seed=0)


def test_races_between_blocks_still_raise():
    dy = np.ones((16, 8), np.float32)
    with pytest.raises(DataRace):
        kernels.trace_kernel_adversarial(column_sum_racy, (1, 2), (8, 8), dy, np.zeros(8, np.float32))
    trace = kernels.trace_kernel_adversarial(column_sum_racy, (1, 2), (8, 8), dy, np.zeros(8, np.float32),
                                             allow_races=True)
    assert trace.races()


def test_negative_indices_are_refused_where_the_plain_tracer_wraps_them():
    x, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    kernels.trace_kernel(left_neighbour, 1, 4, x, out)
    assert out[0] == x[-1]
    with pytest.raises(IndexError, match="negative index"):
        kernels.trace_kernel_adversarial(left_neighbour, 1, 4, x, np.zeros(4, np.float32))


def test_poison_fills_the_named_outputs_first():
    x, out, ints = np.arange(4, dtype=np.float32), np.zeros(8, np.float32), np.zeros(3, np.int32)

    @cuda.jit
    def first_half(x, out, ints):
        i = cuda.grid(1)
        if i < x.size:
            out[i] = x[i]

    kernels.trace_kernel_adversarial(first_half, 1, 4, x, out, ints, poison=("out", "ints"))
    assert np.array_equal(out[:4], x) and np.isnan(out[4:]).all()
    assert (ints == np.iinfo(np.int32).min).all()


def test_seeds_change_the_order_and_not_the_trace_of_a_correct_kernel():
    x = np.arange(64, dtype=np.float32)
    orders = []
    for seed in (0, 1):
        out = np.zeros(64, np.float32)
        trace = kernels.trace_kernel_adversarial(scale, 4, 16, x, out, seed=seed)
        orders.append([number for number, name, kind, _ in trace.accesses if kind == "write"])
        assert np.array_equal(out, 2 * x)
    assert orders[0] != orders[1] and sorted(orders[0]) == sorted(orders[1]) == list(range(64))


def test_barriers_and_warp_exchanges_still_work():
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(2, np.float32)
    trace = kernels.trace_kernel_adversarial(block_sum_with_barrier, 2, 4, x, out, seed=3)
    assert out.tolist() == [6.0, 22.0] and trace.barriers.tolist() == [1] * 8
    values, lanes = np.arange(32, dtype=np.float32) + 7, np.zeros(32, np.float32)
    kernels.trace_kernel_adversarial(warp_broadcast, 1, 32, values, lanes, seed=1)
    assert (lanes == 7).all()


def test_adversarial_is_trace_kernel_with_every_option_on():
    x = np.arange(64, dtype=np.float32)
    wrapper, options = np.zeros(64, np.float32), np.zeros(64, np.float32)
    first = kernels.trace_kernel_adversarial(scale, 4, 16, x, wrapper, seed=7, poison=("out",))
    second = kernels.trace_kernel(scale, 4, 16, x, options, seed=7, poison=("out",), interleave=True,
                                  shuffle_blocks=True, refuse_negative=True)
    assert first.accesses == second.accesses and np.array_equal(wrapper, options)


def test_each_option_works_alone():
    x = np.arange(64, dtype=np.float32)
    in_order = kernels.trace_kernel(scale, 4, 16, x, np.zeros(64, np.float32))
    shuffled = kernels.trace_kernel(scale, 4, 16, x, np.zeros(64, np.float32), shuffle_blocks=True, seed=0)
    blocks_of = [[number // 16 for number, _, kind, _ in trace.accesses if kind == "write"][::16]
                 for trace in (in_order, shuffled)]
    assert blocks_of[0] == [0, 1, 2, 3] and blocks_of[1] == [2, 0, 1, 3]
    with pytest.raises(IndexError, match="negative index"):
        kernels.trace_kernel(left_neighbour, 1, 4, x[:4], np.zeros(4, np.float32), refuse_negative=True)
    out = np.zeros(4, np.float32)
    kernels.trace_kernel(scale, 1, 2, x[:4], out, poison=("out",))
    assert out[:2].tolist() == [0.0, 2.0] and np.isnan(out[2:]).all()


@pytest.mark.parametrize("call, error, word", [
    (lambda: kernels.trace_kernel(scale, 1, 4, np.zeros(4), np.zeros(4), shuffle_blocks=1), TypeError,
     "^shuffle_blocks"),
    (lambda: kernels.trace_kernel(scale, 1, 4, np.zeros(4), np.zeros(4), refuse_negative="yes"), TypeError,
     "^refuse_negative"),
    (lambda: kernels.trace_kernel(scale, 1, 4, np.zeros(4), np.zeros(4), poison=("y",)), ValueError, "poison"),
    (lambda: kernels.trace_kernel_adversarial(scale, 1, 4, np.zeros(4), np.zeros(4), seed=-1), ValueError, "seed"),
    (lambda: kernels.trace_kernel_adversarial(scale, 1, 4, np.zeros(4), np.zeros(4), poison="out"), TypeError,
     "poison"),
    (lambda: kernels.trace_kernel_adversarial(scale, 1, 4, np.zeros(4), np.zeros(4), poison=("y",)), ValueError,
     "poison"),
    (lambda: kernels.trace_kernel_adversarial(scale, 1, 4, np.zeros(4)), TypeError, "arguments"),
    (lambda: kernels.trace_kernel_adversarial(scale, 1, 2048, np.zeros(4), np.zeros(4)), ValueError, "1024"),
    (lambda: kernels.trace_kernel_adversarial(scale, 64, 1024, np.zeros(4), np.zeros(4), max_threads=4096),
     ValueError, "max_threads"),
    (lambda: kernels.trace_kernel_adversarial(scale, 1, 4, np.zeros(4), np.zeros(4), allow_races=1), TypeError,
     "allow_races"),
])
def test_bad_input_is_refused_clearly(call, error, word):
    with pytest.raises(error, match=word):
        call()
