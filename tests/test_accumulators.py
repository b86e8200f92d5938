"""Tests of gpucourse.kernels.accumulators: float64 sums found in a kernel's source, float32 ones left alone."""

from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("numba")
import numba  # noqa: E402
from numba import cuda, float32  # noqa: E402

from gpucourse.kernels.accumulators import float64_accumulators  # noqa: E402


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
    ("    def k(x):\n        a = 0.0\n        b = 0.0\n        b += x\n        a += b\n", ["a", "b"]),  # indented
])
def test_source_text(source, found):
    assert float64_accumulators(source) == found


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
