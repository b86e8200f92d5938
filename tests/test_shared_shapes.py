"""Tests of gpucourse.kernels.shared_shapes: shared-array shapes that would not compile on a GPU are found."""

from __future__ import annotations

import pytest

pytest.importorskip("numba")
from numba import cuda, float32, int32  # noqa: E402

from gpucourse.kernels.shared_shapes import non_constant_shared_shapes  # noqa: E402

TILE = 16
NOT_AN_INT = 16.0


def make_tiled(tile: int):
    """A factory whose kernel sizes its tiles with the captured `tile` (a closure variable: constant)."""
    @cuda.jit
    def kernel(a):
        tile_a = cuda.shared.array((tile, tile), float32)
        double = cuda.shared.array((2, tile, tile + 1), float32)
        flat = cuda.shared.array(tile * tile, float32)
        tile_a[0, 0] = a[0]
        double[0, 0, 0] = a[0]
        flat[0] = a[0]

    return kernel


@cuda.jit
def global_and_literal(a):
    t = cuda.shared.array((TILE, 33), float32)
    u = cuda.shared.array(shape=32 * 4, dtype=int32)
    t[0, 0] = a[0]
    u[0] = 1


@cuda.jit
def from_block_dim(a):
    t = cuda.shared.array((cuda.blockDim.y, cuda.blockDim.x), float32)
    t[0, 0] = a[0]


def make_histogram(bins: int):
    @cuda.jit
    def kernel(labels, counts):
        private = cuda.shared.array(counts.size, int32)
        padded = cuda.shared.array((32, cuda.blockDim.x + 1), float32)
        by_shape = cuda.shared.array(counts.shape[0], int32)
        private[0] = bins

    return kernel


@cuda.jit
def from_parameter_and_local(n, a):
    m = 32
    t = cuda.shared.array(n, float32)
    u = cuda.shared.array(m, float32)
    v = cuda.shared.array(len(a), float32)
    w = cuda.shared.array(NOT_AN_INT, float32)
    t[0] = u[0] + v[0] + w[0]


def test_constants_pass() -> None:
    assert non_constant_shared_shapes(make_tiled(8)) == []
    assert non_constant_shared_shapes(make_tiled(8).py_func) == []
    assert non_constant_shared_shapes(global_and_literal) == []


def test_non_constants_found_in_source_order() -> None:
    assert non_constant_shared_shapes(from_block_dim) == ["(cuda.blockDim.y, cuda.blockDim.x)"]
    assert non_constant_shared_shapes(make_histogram(8)) == ["counts.size", "(32, cuda.blockDim.x + 1)",
                                                             "counts.shape[0]"]
    assert non_constant_shared_shapes(from_parameter_and_local) == ["n", "m", "len(a)", "NOT_AN_INT"]


def test_source_text() -> None:
    source = "def k(a):\n    t = cuda.shared.array((tile, 4), float32)\n"
    assert non_constant_shared_shapes(source) == ["(tile, 4)"]
    assert non_constant_shared_shapes(source, constants={"tile": 8}) == []
    bound_tuple = "def k(a):\n    t = cuda.shared.array(shape, float32)\n"  # review 6: shape = (tile, tile) bound
    assert non_constant_shared_shapes(bound_tuple, constants={"shape": (8, 8)}) == []
    assert non_constant_shared_shapes(bound_tuple, constants={"shape": (8, 8.0)}) == ["shape"]
    assert non_constant_shared_shapes(bound_tuple, constants={"shape": ()}) == ["shape"]


def test_bad_input() -> None:
    with pytest.raises(TypeError, match="kernel"):
        non_constant_shared_shapes(42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kernel"):
        non_constant_shared_shapes("def k(:\n")
