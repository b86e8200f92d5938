"""Tests of gpucourse.kernels.accumulators: float64 sums found in a kernel's source, float32 ones left alone."""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

pytest.importorskip("numba")
import numba  # noqa: E402
from numba import cuda, float32  # noqa: E402

from gpucourse.kernels.accumulators import (  # noqa: E402
    float64_accumulators, float64_accumulators_by_source, float64_accumulators_many, numba_float64_sums)


@cuda.jit
def sum_from_bare_float(p, out):
    i = cuda.grid(1)
    if i < out.size:
        total = 0.0
        for f in range(p.shape[0]):
            total += p[f, i] * p[f, i]
        out[i] = math.sqrt(total)


@cuda.jit
def sum_from_float32(p, out):
    i = cuda.grid(1)
    if i < out.size:
        a = float32(0)
        b = np.float32(0.0)
        c = numba.float32(0.0)
        acc = p[0, i] * p[0, i]
        n = 0
        for f in range(p.shape[0]):
            a += p[f, i]
            b -= p[f, i]
            c = c + p[f, i]
            acc += p[f, i]
            n += 1
        out[i] = a + b + c + acc + n


def plain_function(x):
    """Not a kernel: a plain function is read the same way."""
    s, t = 0.0, float32(0)
    for v in x:
        s = s + v
        t += v
    return s, t


def test_a_bare_float_start_is_found():
    assert float64_accumulators(sum_from_bare_float) == ["total"]


def test_float32_starts_int_counters_and_seeded_sums_pass():
    assert float64_accumulators(sum_from_float32) == []


def test_plain_function_tuple_assignment_and_name_equals_name_plus():
    assert float64_accumulators(plain_function) == ["s"]


@pytest.mark.parametrize("source, found", [
    ("def k(x):\n    acc = -1.5\n    acc *= x\n", ["acc"]),
    ("def k(x):\n    acc = float(0)\n    acc += x\n", ["acc"]),
    ("def k(x):\n    acc: float = 0.0\n    acc /= x\n", ["acc"]),
    ("def k(x):\n    scale = 0.5\n    y = scale * x\n", []),           # a float constant never accumulated
    ("def k(x):\n    acc = 0\n    acc += 1\n", []),                   # an int counter
    ("def k(x, i):\n    acc = 0\n    acc += x[i] * x[i]\n", ["acc"]),  # int start + float32 elements: float64
    ("def k(x, i):\n    acc = int(0)\n    acc = acc + x[i]\n", ["acc"]),
    ("def k(x):\n    off = 0\n    off += x.shape[1]\n", []),          # an int offset from a shape
    ("def k(x, i):\n    total = 0\n    for f in range(3):\n        v = x[f, i]\n        w = v * 2\n"
     "        total += w * w\n", ["total"]),                               # through local copies of elements
    ("def k(x, i):\n    n = 0\n    for f in range(3):\n        n += f\n    x[i] = n\n", []),
    ("def k(x):\n    acc = np.float64(0)\n    acc += x\n", ["acc"]),
    ("def k(x):\n    acc = float64(0.0)\n    acc -= x\n", ["acc"]),
    # float64 brought in by an update, whatever the start (review 5): math.pow with a bare number, a float literal
    ("def k(x, i):\n    t = np.float32(0.0)\n    t += math.pow(x[i], 2)\n", ["t"]),
    ("def k(x, i):\n    t = np.float32(0.0)\n    t = t + math.pow(x[i], 2.0)\n", ["t"]),
    ("def k(x, i):\n    t = np.float32(0.0)\n    t += 0.5 * x[i]\n", ["t"]),
    ("def k(x, i):\n    t = np.float32(0.0)\n    t += np.float64(x[i])\n", ["t"]),
    ("def k(x, i):\n    t = np.float32(0.0)\n    t += math.pow(x[i], x[i])\n", []),   # float32 ** float32
    ("def k(x, i):\n    t = np.float32(0.0)\n    t += math.pow(x[i], np.float32(2))\n", []),
    ("def k(x, i):\n    t = np.float32(0.0)\n    t += np.float32(0.5) * x[i] ** 2\n", []),
    ("def k(x, i):\n    t = np.float32(0.0)\n    t += x[int(0.5 * i)]\n", []),      # a float inside an index
    ("def k(x, i):\n    n = 0\n    n += 1\n    y = 0.5 * x[i]\n", []),           # a float outside any update
    ("    def k(x):\n        a = 0.0\n        b = 0.0\n        b += x\n        a += b\n", ["a", "b"]),  # indented
])
def test_source_text(source, found):
    assert float64_accumulators(source) == found


# Review 6: a float64 that reaches a sum through a local. Numba gives a variable one type over all its assignments
# (float32 with a bare float, or with an int, is float64), and a float64 operand makes the update float64.
_PAD = "def k(image, weights, out, i, j, rows, cols):\n    total = np.float32(0.0)\n    for a in range(3):\n" \
       "        for b in range(3):\n            r, c = i + a - 1, j + b - 1\n" \
       "            inside = r >= 0 and r < rows and c >= 0 and c < cols\n"


@pytest.mark.parametrize("source", [
    # r6_ifexp_zero_pad, then the same with an int 0
    _PAD + "            v = image[r, c] if inside else 0.0\n            total += weights[a, b] * v\n",
    _PAD + "            v = image[r, c] if inside else 0\n            total += weights[a, b] * v\n",  # int 0: float64
    _PAD + "            v = 0.0\n            if inside:\n                v = image[r, c]\n"
           "            total += weights[a, b] * v\n",  # r6_zero_then_assign
    _PAD + "            v = 0\n            if inside:\n                v = image[r, c]\n"
           "            total += weights[a, b] * v\n",  # int 0, then element
    "def k(p, out, i):\n    total = np.float32(0.0)\n    for f in range(p.shape[0]):\n"
    "        value = p[f, i] * 1.0\n        total += value * value\n",                             # r6_float64_local
    "def k(partial, db, j, first, stride):\n    total = np.float32(0.0)\n    for k in range(32):\n"
    "        r = first + k * stride\n        v = partial[r, j] if r < partial.shape[0] else 0.0\n"
    "        total += v\n    db[j] = total\n",  # r6_ifexp_zero_combine
    "def k(x, i):\n    t = np.float32(0.0)\n    s = float(x[i])\n    w = s * x[i]\n    t += w\n",   # two locals deep
    "def k(x, i):\n    t = np.float32(0.0)\n    d = math.sqrt(2)\n    t += d * x[i]\n",            # math of an int
    "def k(x, i):\n    t = np.float32(0.0)\n    t += x[i] if i > 0 else 0\n",  # in the update itself
    "def k(x, i):\n    t = np.float32(0.0)\n    t += 2 * x[i]\n",                                   # a bare int operand
    "def k(x, i):\n    t = np.float32(0.0)\n    v = x[i]\n    h = v / 2\n    t += h\n",            # through locals
    # review r8: a typed NumPy int mask (float32 * int32 is float64)
    _PAD + "            m = np.int32(1) if inside else np.int32(0)\n            total += weights[a, b] * image[r, c] * m\n",
    "def k(x, i):\n    t = np.float32(0.0)\n    m = np.int64(i > 0)\n    t += x[i] * m\n",
    "def k(x, i):\n    t = np.float32(0.0)\n    t += x[i] * np.uint32(1)\n",
])
def test_float64_through_a_local_is_found(source):
    expected = ["total"] if "total" in source else ["t"]
    assert float64_accumulators(source) == expected


@pytest.mark.parametrize("source", [
    _PAD + "            v = image[r, c] if inside else np.float32(0)\n            total += weights[a, b] * v\n",
    _PAD + "            v = image[r, c] if inside else float32(0.0)\n            total += weights[a, b] * v\n",
    _PAD + "            v = np.float32(0.0)\n            if inside:\n                v = image[r, c]\n"
           "            total += weights[a, b] * v\n",
    _PAD + "            if inside:\n                total += weights[a, b] * image[r, c]\n",       # lesson 04's model
    _PAD + "            m = np.int16(1) if inside else np.int16(0)\n            total += weights[a, b] * image[r, c] * m\n",
    "def k(x, out, i):\n    t = np.float32(0.0)\n    n = 0\n    for f in range(x.shape[0]):\n"
    "        d = math.sqrt(x[f, i])\n        t += d * d\n        n += 1\n    out[i] = t + n\n",   # math of a float32
    "def k(partial, db, j, first, stride):\n    total = np.float32(0.0)\n"
    "    for r in range(first, min(first + 32 * stride, partial.shape[0]), stride):\n"
    "        total += partial[r, j]\n    db[j] = total\n",                                         # loop indices
    "def k(dy, partial, c, chunks, j):\n    total = np.float32(0.0)\n"
    "    for i in range(c, dy.shape[0], chunks):\n        total += dy[i, j]\n    partial[c, j] = total\n",
    "def k(x, i):\n    t = np.float32(0.0)\n    scale = 0.5\n    y = scale * x[i]\n    x[i] = y\n"
    "    k = int(scale * i)\n    t += x[k]\n",  # a float64 only in an index
    "def k(x, i, c):\n    t = np.float32(0.0)\n    for r in range(32 * c, 32 * c + 32):\n"
    "        t += x[r, 2 * i + 1] ** 2\n",                                                     # ints in indices, ** 2
    "def k(private, labels, counts, t, bins, threads):\n    for b in range(t, bins, threads):\n"
    "        private[b] = 0\n    n = 0\n    n += 1\n",                                       # an int counter
])
def test_float32_locals_pass(source):
    assert float64_accumulators(source) == []


@pytest.mark.parametrize("bad, message", [(42, "expected a Numba kernel"), (None, "expected a Numba kernel"),
                                          ("def k(:\n", "does not parse"), (print, "expected a Numba kernel")])
def test_bad_input_raises_value_error(bad, message):
    with pytest.raises(ValueError, match=message):
        float64_accumulators(bad)


def test_a_function_without_source_raises_value_error():
    namespace: dict = {}
    exec("def k(x):\n    return x\n", namespace)  # no file, no linecache entry
    with pytest.raises(ValueError, match="cannot read the source"):
        float64_accumulators(namespace["k"])


# Review 7: an int multiplier. A local assigned only ints (m = 1 if inside else 0), an if/else of two ints, or a
# product of comparisons (bool * bool is int64 in Numba), times an array element, is float32 * int64: float64. A plain
# bool (x * inside) stays float32, and so do int counters and indices. Each case is checked against Numba's own types.
_CLAMP = "def k(image, weights, rows, cols, i, j):\n    total = np.float32(0.0)\n    for a in range(3):\n" \
         "        for b in range(3):\n            r, c = i + a - 1, j + b - 1\n" \
         "            rr, cc = min(max(r, 0), rows - 1), min(max(c, 0), cols - 1)\n"
_COMBINE = "def k(partial, j, first, stride):\n    n = partial.shape[0]\n    total = np.float32(0.0)\n" \
           "    for q in range(32):\n        r = first + q * stride\n"
_INT_MULTIPLIERS = [
    _CLAMP + "            inside = r >= 0 and r < rows and c >= 0 and c < cols\n            m = 1 if inside else 0\n"
             "            total += weights[a, b] * image[rr, cc] * m\n    return total\n",   # r7_int_mask_clamp
    _CLAMP + "            inside = (r >= 0) * (r < rows) * (c >= 0) * (c < cols)\n"
             "            total += weights[a, b] * image[rr, cc] * inside\n    return total\n",  # r7_bool_product_mask
    _COMBINE + "        ok = 1 if r < n else 0\n        total += partial[min(r, n - 1), j] * ok\n"
               "    return total\n",                                                           # r7_int_zero_mask_combine
    _COMBINE + "        total += partial[min(r, n - 1), j] * (1 if r < n else 0)\n    return total\n",  # inline
    _COMBINE + "        a, b = r < n, r >= 0\n        total += partial[min(r, n - 1), j] * (a * b)\n"
               "    return total\n",                                                           # bool locals' product
    "def k(x, i):\n    total = np.float32(0.0)\n    n = 0\n    for f in range(x.shape[0]):\n        n = n + 1\n"
    "        total += x[f, i] * n\n    return total\n",                                         # an int counter
]
_BOOL_AND_COUNTERS = [
    _CLAMP + "            inside = r >= 0 and r < rows and c >= 0 and c < cols\n"
             "            total += weights[a, b] * image[rr, cc] * inside\n    return total\n",   # a plain bool
    _COMBINE + "        total += partial[min(r, n - 1), j] * (r < n)\n    return total\n",     # a comparison
    "def k(x, i):\n    total = np.float32(0.0)\n    count = 0\n    for f in range(x.shape[0]):\n"
    "        total += x[f, i]\n        count += 1\n    return total\n",                           # an int counter
    _COMBINE + "        m = 1 if r < n else 0\n        total += partial[min(r, n - 1) * m, j]\n"
               "    return total\n",                                                           # an int in an index
]


def _numba_types_of_total(source: str) -> set[str]:
    """The types numba.njit gives every version of ``total`` in ``source``'s function k, run on small arrays."""
    namespace: dict = {"np": np}
    exec(source, namespace)
    kernel = numba.njit(namespace["k"])
    names = list(namespace["k"].__code__.co_varnames[:namespace["k"].__code__.co_argcount])
    arrays = {"image": np.ones((5, 5), np.float32), "weights": np.ones((3, 3), np.float32),
              "partial": np.ones((50, 3), np.float32), "x": np.ones((5, 3), np.float32)}
    kernel(*[arrays.get(name, 1) for name in names])
    typemap = kernel.overloads[kernel.signatures[0]].type_annotation.typemap
    return {str(kind) for name, kind in typemap.items() if name.split(".")[0] == "total"}


@pytest.mark.parametrize("source", _INT_MULTIPLIERS)
def test_an_int_multiplier_is_found_as_numba_types_it(source):
    assert "float64" in _numba_types_of_total(source)
    assert float64_accumulators(source) == ["total"]


@pytest.mark.parametrize("source", _BOOL_AND_COUNTERS)
def test_a_plain_bool_counters_and_indices_pass_as_numba_types_them(source):
    assert _numba_types_of_total(source) == {"float32"}
    assert float64_accumulators(source) == []


# --------------------------------------------------------------------- Numba's own typing (review 9): float64 from
# outside the kernel's source, which the source rules cannot see.

PAD = 0.0
PAD32 = np.float32(0.0)


@cuda.jit(device=True)
def _pixel64(image, r, c):
    if r >= 0 and r < image.shape[0] and c >= 0 and c < image.shape[1]:
        return image[r, c]
    return 0.0


@cuda.jit(device=True)
def _pixel32(image, r, c):
    if r >= 0 and r < image.shape[0] and c >= 0 and c < image.shape[1]:
        return image[r, c]
    return np.float32(0.0)


@cuda.jit
def conv_device_pad64(image, weights, out):
    x, y = cuda.grid(2)
    step_x, step_y = cuda.gridsize(2)
    for i in range(y, out.shape[0], step_y):
        for j in range(x, out.shape[1], step_x):
            total = np.float32(0.0)
            for a in range(3):
                for b in range(3):
                    total += weights[a, b] * _pixel64(image, i + a - 1, j + b - 1)
            out[i, j] = total


@cuda.jit
def conv_device_pad32(image, weights, out):
    x, y = cuda.grid(2)
    step_x, step_y = cuda.gridsize(2)
    for i in range(y, out.shape[0], step_y):
        for j in range(x, out.shape[1], step_x):
            total = np.float32(0.0)
            for a in range(3):
                for b in range(3):
                    total += weights[a, b] * _pixel32(image, i + a - 1, j + b - 1)
            out[i, j] = total


@cuda.jit
def conv_global_pad(image, weights, out):
    x, y = cuda.grid(2)
    step_x, step_y = cuda.gridsize(2)
    rows, cols = out.shape
    for i in range(y, rows, step_y):
        for j in range(x, cols, step_x):
            total = np.float32(0.0)
            for a in range(3):
                for b in range(3):
                    r, c = i + a - 1, j + b - 1
                    inside = r >= 0 and r < rows and c >= 0 and c < cols
                    v = image[r, c] if inside else PAD
                    total += weights[a, b] * v
            out[i, j] = total


@cuda.jit
def conv_global_pad32(image, weights, out):
    x, y = cuda.grid(2)
    step_x, step_y = cuda.gridsize(2)
    rows, cols = out.shape
    for i in range(y, rows, step_y):
        for j in range(x, cols, step_x):
            total = np.float32(0.0)
            for a in range(3):
                for b in range(3):
                    r, c = i + a - 1, j + b - 1
                    inside = r >= 0 and r < rows and c >= 0 and c < cols
                    v = image[r, c] if inside else PAD32
                    total += weights[a, b] * v
            out[i, j] = total


@cuda.jit
def every_cuda_name(dy, partial, db):
    staged = cuda.shared.array((4, 32), np.float32)
    kept = cuda.local.array(3, dtype=np.float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    j = cuda.blockIdx.x * cuda.blockDim.x + tx
    c = cuda.blockIdx.y * cuda.blockDim.y + ty
    step = cuda.gridDim.x * cuda.blockDim.x
    staged[ty, tx] = np.float32(0.0)
    kept[0] = np.float32(0.0)
    cuda.syncthreads()
    total = np.float32(0.0)
    for i in range(c, dy.shape[0], cuda.gridsize(2)[1]):
        if j < dy.shape[1]:
            total += dy[i, j]
    staged[ty, tx] = total
    cuda.syncthreads()
    if j < db.size and j < step:
        cuda.atomic.add(db, j, staged[ty, tx] + kept[0])
    if cuda.grid(1) < partial.size:
        partial[0, 0] = total


_IMAGE = (np.zeros((4, 5), np.float32), np.ones((3, 3), np.float32), np.zeros((4, 5), np.float32))


def test_a_device_function_padding_with_a_bare_float_is_found_by_numba_typing():
    assert float64_accumulators_by_source(conv_device_pad64) == []  # the source alone cannot see it
    assert float64_accumulators_by_source(conv_device_pad64, _IMAGE) == ["total"]
    assert numba_float64_sums(conv_device_pad64, _IMAGE) == ["total"]


def test_a_global_float_constant_is_found_and_a_float32_one_passes():
    assert float64_accumulators_by_source(conv_global_pad) == []  # the source alone cannot see it
    assert float64_accumulators_by_source(conv_global_pad, _IMAGE) == ["total"]
    assert float64_accumulators_by_source(conv_global_pad32, _IMAGE) == []


def test_float32_device_functions_and_every_cuda_name_the_lessons_use_pass():
    assert float64_accumulators_by_source(conv_device_pad32, _IMAGE) == []
    dy = np.ones((70, 3), np.float32)
    args = (dy, np.zeros((3, 3), np.float32), np.zeros(3, np.float32))
    assert numba_float64_sums(every_cuda_name, args) == []
    assert float64_accumulators_by_source(every_cuda_name, args) == []


def test_numba_typing_agrees_with_the_source_rules_on_a_bare_float_start():
    args = (np.ones((3, 8), np.float32), np.zeros(8, np.float32))
    assert numba_float64_sums(sum_from_bare_float, args) == ["total"]
    assert float64_accumulators_by_source(sum_from_bare_float, args) == ["total"]
    assert float64_accumulators_by_source(sum_from_float32, args) == []


def test_a_kernel_numba_cannot_type_falls_back_to_the_source_check_silently(capsys):
    @cuda.jit
    def uses_a_name_the_stub_lacks(p, out):
        i = cuda.grid(1)
        total = 0.0
        total += p[0, i] * cuda.const.array_like(p)[0, 0]
        out[i] = total

    args = (np.ones((3, 8), np.float32), np.zeros(8, np.float32))
    with pytest.raises(Exception):
        numba_float64_sums(uses_a_name_the_stub_lacks, args)
    assert float64_accumulators_by_source(uses_a_name_the_stub_lacks, args) == ["total"]
    assert capsys.readouterr() == ("", "")


def test_bad_args_are_refused():
    with pytest.raises(TypeError, match="^args"):
        float64_accumulators_by_source(sum_from_bare_float, "p, out")
    with pytest.raises(TypeError, match="^kernel"):
        numba_float64_sums(42, ())


def test_float64_arrays_operations_and_constructs_no_gpu_compiles_are_found():
    """Review r10: float64 kept in a local or shared array, a generator that the CUDA target refuses, and the warp
    functions the stub now types; a float64 ``** 0.5`` into the output is one operation, not a sum."""
    @cuda.jit
    def local_float64(p, out):
        i = cuda.grid(1)
        acc = cuda.local.array(1, np.float64)
        acc[0] = 0
        for r in range(p.shape[0]):
            acc[0] += p[r, i]
        out[i] = acc[0]

    @cuda.jit
    def pow_half(p, out):
        i = cuda.grid(1)
        total = np.float32(0.0)
        for r in range(p.shape[0]):
            total += p[r, i]
        out[i] = total ** 0.5

    @cuda.jit
    def generator_sum(p, out):
        i = cuda.grid(1)
        out[i] = sum(p[r, i] for r in range(p.shape[0]))

    PAD = 0.0  # noqa: N806

    @cuda.jit
    def warp_pad(p, out):
        i = cuda.grid(1)
        total = PAD
        cuda.syncwarp()
        total += cuda.shfl_down_sync(0xFFFFFFFF, p[0, i], 1) + cuda.laneid
        out[i] = total

    args = (np.ones((3, 8), np.float32), np.zeros(8, np.float32))
    assert float64_accumulators_by_source(local_float64, args) == ["acc (a float64 array)"]
    assert float64_accumulators_by_source(pow_half, args) == []  # one float64 operation per thread, not a sum: not counted
    [construct] = float64_accumulators_by_source(generator_sum, args)
    assert construct.startswith("(a construct Numba cannot compile for a GPU: a generator expression in the kernel")
    assert float64_accumulators_by_source(warp_pad, args) == ["total"]


@cuda.jit(device=True)
def _squares_in_a_list(p, i):
    return sum([p[r, i] * p[r, i] for r in range(p.shape[0])])


def test_constructs_cuda_refuses_and_float64_arithmetic_in_a_loop_are_found():
    """Review r11: a list comprehension (njit accepts it, the CUDA target does not), also in a device function, and a
    float64 product cast back to float32 before the sum; an int counter and one float64 division after the loop
    pass (the division is one operation per thread)."""
    @cuda.jit
    def list_sum(p, out):
        i = cuda.grid(1)
        out[i] = sum([p[r, i] for r in range(p.shape[0])])

    @cuda.jit
    def device_list(p, out):
        i = cuda.grid(1)
        out[i] = _squares_in_a_list(p, i)

    @cuda.jit
    def cast_back(p, out):
        i = cuda.grid(1)
        total = np.float32(0.0)
        for r in range(p.shape[0]):
            product = p[r, i] * 1.0
            total += np.float32(product)
        out[i] = total

    @cuda.jit
    def mean_with_counter(p, out):
        i = cuda.grid(1)
        total, n = np.float32(0.0), 0
        for r in range(p.shape[0]):
            total += p[r, i]
            n += 1
        out[i] = total / n

    args = (np.ones((3, 8), np.float32), np.zeros(8, np.float32))
    [construct] = float64_accumulators_by_source(list_sum, args)
    assert "a list comprehension in the kernel" in construct
    [construct] = float64_accumulators_by_source(device_list, args)
    assert "a list comprehension in device function _squares_in_a_list" in construct
    [arithmetic] = float64_accumulators_by_source(cast_back, args)
    assert arithmetic.startswith("(float64 arithmetic in a loop, line ") and "product = p[r, i] * 1.0" in arithmetic
    assert float64_accumulators_by_source(mean_with_counter, args) == []


# --------------------------------------------------------------------------- Numba's REAL CUDA compiler (review r12):
# float64 work from any source and constructs the CUDA target refuses, read from its LLVM IR, by source line.

@cuda.jit(device=True)
def _square64(v):
    return math.pow(v, 2)


_LENGTHS = (np.ones((3, 8), np.float32), np.zeros(8, np.float32))
_OFFSETS = (-1, 0, 1)  # a module-level tuple, as in review r13's Ex1 answer


def test_the_cuda_compiler_finds_float64_from_calls_and_after_the_loop():
    """math.pow cast back to float32 in the loop, a device function returning math.pow, ``** 0.5`` after the loop,
    a float64 division by an int counter: each line named."""
    @cuda.jit
    def pow_cast_back(p, out):
        i = cuda.grid(1)
        if i < out.size:
            total = np.float32(0.0)
            for f in range(p.shape[0]):
                total += np.float32(math.pow(p[f, i], 2))
            out[i] = math.sqrt(total)

    @cuda.jit
    def device_pow(p, out):
        i = cuda.grid(1)
        if i < out.size:
            total = np.float32(0.0)
            for f in range(p.shape[0]):
                total += np.float32(_square64(p[f, i]))
            out[i] = math.sqrt(total)

    @cuda.jit
    def pow_half(p, out):
        i = cuda.grid(1)
        if i < out.size:
            total = np.float32(0.0)
            for f in range(p.shape[0]):
                total += p[f, i] * p[f, i]
            out[i] = total ** 0.5

    @cuda.jit
    def mean_with_counter(p, out):
        i = cuda.grid(1)
        total, n = np.float32(0.0), 0
        for r in range(p.shape[0]):
            total += p[r, i]
            n += 1
        out[i] = total / n

    found = float64_accumulators_many([(kernel, _LENGTHS) for kernel in
                                       (pow_cast_back, device_pow, pow_half, mean_with_counter)])
    [cast], [device], [half], [mean] = found
    assert cast.startswith("(float64 arithmetic, line ") and "np.float32(math.pow(p[f, i], 2))" in cast
    assert device.startswith("(float64 arithmetic in device function _square64, line ") and "math.pow(v, 2)" in device
    assert "out[i] = total ** 0.5" in half
    assert "out[i] = total / n" in mean


def test_the_cuda_compiler_refuses_a_list_and_np_zeros_and_names_the_line():
    @cuda.jit
    def offsets_list(p, out):
        i = cuda.grid(1)
        offsets = [0, 1, 2]
        total = np.float32(0.0)
        for f in range(3):
            total += p[offsets[f], i]
        out[i] = total

    @cuda.jit
    def zeros_window(p, out):
        i = cuda.grid(1)
        window = np.zeros((3, 3), np.float32)
        window[0, 0] = p[0, i]
        out[i] = window[0, 0]

    [[listed], [zeros]] = float64_accumulators_many([(offsets_list, _LENGTHS), (zeros_window, _LENGTHS)])
    assert listed.startswith("(CUDA's compiler refuses your kernel, line ") and "offsets = [0, 1, 2]" in listed
    assert "a list" in listed
    assert zeros.startswith("(CUDA's compiler refuses your kernel, line ") and "np.zeros((3, 3)" in zeros


def test_a_float64_comparison_counts_and_float32_kernels_pass():
    """Decided: ``x > 0.0`` with x float32 is a float64 comparison (DSETP on a GPU, FP64 rate), so it counts;
    ``np.float32(0.0)``, ``x ** 2``, ``cuda.fma``, shared arrays, syncthreads, atomics and an if for min compile
    clean."""
    @cuda.jit
    def relu64(p, out):
        i = cuda.grid(1)
        if i < out.size and p[0, i] > 0.0:
            out[i] = p[0, i]

    @cuda.jit
    def float32_everything(p, out):
        staged = cuda.shared.array(32, np.float32)
        i = cuda.grid(1)
        t = cuda.threadIdx.x
        total = np.float32(0.0)
        fields = p.shape[0] if p.shape[0] < 8 else 8
        for f in range(fields):
            total = cuda.fma(p[f, i], p[f, i], total) + p[f, i] ** 2
        staged[t] = total if total > np.float32(0.0) else np.float32(0.0)
        cuda.syncthreads()
        cuda.atomic.add(out, i, staged[t])

    [[comparison], clean] = float64_accumulators_many([(relu64, _LENGTHS), (float32_everything, _LENGTHS)])
    assert "p[0, i] > 0.0" in comparison
    assert clean == []
    [counter] = float64_accumulators(sum_from_float32, _LENGTHS)  # its float32 sums pass; float32 + int64 does not
    assert "out[i] = a + b + c + acc + n" in counter
    assert float64_accumulators(conv_device_pad32, _IMAGE) == []
    [pad] = float64_accumulators(conv_device_pad64, _IMAGE)
    assert "in device function _pixel64" not in pad and "_pixel64(image" in pad  # the cast of its float64 result


def test_kernels_built_in_a_closure_are_compiled_each_with_its_own_values():
    def combine(scale, last):
        @cuda.jit
        def add(p, out):
            i = cuda.grid(1)
            if last:
                out[i] = p[0, i] * scale
        return add

    found = float64_accumulators_many([(combine(np.float32(2.0), True), _LENGTHS), (combine(2.0, True), _LENGTHS),
                                       (combine(2.0, False), _LENGTHS)])
    assert found[0] == [] and found[2] == []  # last=False: the multiply is not compiled
    [wide] = found[1]
    assert "p[0, i] * scale" in wide


def test_the_builtin_min_and_max_are_refused_with_the_line_and_the_fix():
    """Review r13 (critical): numba 0.66 to 0.68 cannot compile two-argument min/max on the CUDA target (numba issue
    #10753); the check runs numba's compiler unpatched, so it says so, naming the line, instead of hiding it."""
    import numba

    @cuda.jit
    def chunk_end_min(p, out):
        i = cuda.grid(1)
        total = np.float32(0.0)
        for f in range(0, min(p.shape[0], 8)):
            total += p[f, i]
        out[i] = total

    @cuda.jit
    def clamp_max(p, out):
        i = cuda.grid(1)
        out[i] = max(p[0, i], np.float32(0.0))

    found = float64_accumulators_many([(chunk_end_min, _LENGTHS), (clamp_max, _LENGTHS)])
    if tuple(int(part) for part in numba.__version__.split(".")[:2]) < (0, 66):
        assert found == [[], []]  # an older numba compiles them
        return
    [[chunk], [clamp]] = found
    assert chunk.startswith("(CUDA's compiler refuses your kernel, line ") and "min(p.shape[0], 8)" in chunk
    assert "numba issue #10753" in chunk and "a if a < b else b" in chunk
    assert "max(p[0, i], np.float32(0.0))" in clamp and "cannot compile the built-in min or max" in clamp


def test_writing_an_array_from_outside_the_kernel_is_refused_with_the_reason():
    """Review r14 (minor): a kernel that writes a closure (or global) numpy array is refused, as on a GPU, where
    Numba makes it a read-only constant; the finding says so instead of quoting numba's setitem signature."""
    scratch = np.zeros(8, np.float32)

    @cuda.jit
    def writes_closure_array(p, out):
        i = cuda.grid(1)
        if i < out.size:
            scratch[i] = p[0, i]
            out[i] = scratch[i]

    [found] = float64_accumulators(writes_closure_array, _LENGTHS)
    assert found.startswith("(CUDA's compiler refuses your kernel, line ") and "scratch[i] = p[0, i]" in found
    assert "`scratch` is an array from outside the kernel" in found and "read-only constant" in found
    assert "setitem" not in found


def test_tuples_from_the_closure_or_globals_are_compiled():
    """Review r13 (major): a tuple in the closure (Ex2's fields) or the module (Ex1's OFFSETS) is sent to the compiler,
    so float64 and allocation behind it are found; a right kernel reading tuples, nested too, is clean."""
    fields = (0, 1)
    nested = ((0, np.float32(1.0)), (1, np.float32(2.0)))

    @cuda.jit
    def tuple_pow_half(p, out):
        i = cuda.grid(1)
        if i < out.size:
            total = np.float32(0.0)
            for f in fields:
                total += p[f, i] * p[f, i]
            out[i] = total ** 0.5

    @cuda.jit
    def tuple_zeros(p, out):
        i = cuda.grid(1)
        window = np.zeros(2, np.float32)
        for f in range(2):
            window[f] = p[_OFFSETS[f] + 1, i]
        out[i] = window[0]

    @cuda.jit
    def nested_clean(p, out):
        i = cuda.grid(1)
        if i < out.size:
            total = np.float32(0.0)
            for f, weight in nested:
                total += weight * p[f, i]
            out[i] = math.sqrt(total * total) + np.float32(_OFFSETS[1])

    [[half], [zeros], clean] = float64_accumulators_many([(tuple_pow_half, _LENGTHS), (tuple_zeros, _LENGTHS),
                                                          (nested_clean, _LENGTHS)])
    assert half.startswith("(float64 arithmetic, line ") and "out[i] = total ** 0.5" in half
    assert zeros.startswith("(CUDA's compiler refuses your kernel, line ") and "np.zeros(2, np.float32)" in zeros
    assert clean == []


def test_what_cannot_be_sent_fails_the_check_visibly_and_names_the_value(capsys):
    """Review r13 (major): a value that cannot be sent to the compiler (an object, a list, a large array) is a
    finding that names it and asks for an argument, not a silent switch to the source check."""
    class Opaque:
        value = 0.0

    box = Opaque()

    @cuda.jit
    def reads_an_object(p, out):
        i = cuda.grid(1)
        total = 0.0
        total += p[0, i] + box.value
        out[i] = total

    from gpucourse.kernels.cuda_compile import compile_for_gpu

    big = np.zeros(1 << 15, np.float32)  # 128 KiB
    scales = [np.float32(1.0), np.float32(2.0)]

    @cuda.jit
    def reads_a_large_array(p, out):
        i = cuda.grid(1)
        out[i] = p[0, i] * big[i]

    @cuda.jit
    def reads_a_list(p, out):
        i = cuda.grid(1)
        out[i] = p[0, i] * scales[0]

    [report] = compile_for_gpu([(reads_an_object, _LENGTHS)])
    assert report.status == "cannot check" and "`box` (an Opaque)" in report.reason
    [[opaque], [large], [listed]] = float64_accumulators_many([(reads_an_object, _LENGTHS),
                                                               (reads_a_large_array, _LENGTHS),
                                                               (reads_a_list, _LENGTHS)])
    assert opaque.startswith("(could not check your kernel with CUDA's compiler: it reads `box` (an Opaque)")
    assert opaque.endswith("pass it to the kernel as an argument)")
    assert "`big` (an array of 131,072 bytes)" in large
    assert "`scales` (a list)" in listed
    assert capsys.readouterr() == ("", "")


def test_a_numba_without_the_cuda_target_falls_back_with_one_line(tmp_path, monkeypatch, capsys):
    from gpucourse.kernels import accumulators

    monkeypatch.setattr(accumulators, "_UNAVAILABLE_NOTED", [])
    fake = tmp_path / "numba"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('a numba without CUDA')\n")
    monkeypatch.setenv("PYTHONPATH", f"{tmp_path}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    from gpucourse.kernels import cuda_compile

    monkeypatch.setattr(cuda_compile, "_CACHE", {})
    [report] = cuda_compile.compile_for_gpu([(sum_from_bare_float, _LENGTHS)])
    assert report.status == "not checked" and "numba's CUDA target" in report.reason
    assert float64_accumulators(sum_from_bare_float, _LENGTHS) == ["total"]  # the fallback's answer
    printed = capsys.readouterr()
    assert printed.err == "" and printed.out.startswith("Note: Numba's CUDA compiler could not run here (numba's CUDA")
    assert printed.out.count("\n") == 1  # review r14: one line, not a silent switch


def test_a_crashed_subprocess_is_not_checked(monkeypatch):
    from gpucourse.kernels import cuda_compile

    monkeypatch.setattr(cuda_compile, "_CACHE", {})
    monkeypatch.setattr(cuda_compile.sys, "executable", "/bin/false")
    [report] = cuda_compile.compile_for_gpu([(sum_from_bare_float, _LENGTHS)])
    assert report == cuda_compile.CudaReport("not checked", reason="the compiler's subprocess failed")
    assert report.findings() == []


def test_a_compiler_that_cannot_run_is_said_once(monkeypatch, capsys):
    """Review r14 (minor): where Numba's CUDA target cannot be used (numba-cuda's API differs, say), the fallback to
    the source check prints one line, once, instead of switching silently."""
    from gpucourse.kernels import accumulators, cuda_compile

    monkeypatch.setattr(accumulators, "_UNAVAILABLE_NOTED", [])
    monkeypatch.setattr(cuda_compile, "compile_for_gpu", lambda pairs: [cuda_compile.CudaReport(
        "not checked", reason="numba's CUDA target: no module named numba.cuda.compiler")] * len(pairs))

    @cuda.jit
    def clean(p, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = p[0, i]

    assert float64_accumulators(clean, _LENGTHS) == []
    assert float64_accumulators(clean, _LENGTHS) == []
    printed = capsys.readouterr().out
    assert printed.count("Note: Numba's CUDA compiler could not run here") == 1 and "numba.cuda.compiler" in printed
