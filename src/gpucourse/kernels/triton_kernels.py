"""The course's own Triton kernels (lesson 06_triton): a fused row softmax and a tiled matmul, timed against torch.

Importing this module needs triton (Linux, or Colab); :mod:`~gpucourse.kernels.triton_launch` does not. Each
wrapper allocates its output and calls :func:`~gpucourse.kernels.triton_launch.launch`, so it runs compiled on a
CUDA GPU and in Triton's interpreter on the CPU.
"""

from __future__ import annotations

from gpucourse._validate import positive_int
from gpucourse.kernels.triton_launch import launch, require_triton

triton = require_triton()
import triton.language as tl  # noqa: E402  (after the check that triton is installed)


@triton.jit
def softmax_kernel(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """One program per row: load the row once, subtract its max, exponentiate, normalise, store once.

    The row index is int64 (``row * n_cols`` passes 2**31 in tensors of over 2**31 elements), and the row is
    computed in float32 whatever its dtype (``tl.exp`` takes float32 or float64; a float16 sum of a wide row
    overflows); ``tl.store`` converts to out's dtype.
    """
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    tl.store(out_ptr + row * n_cols + cols, numerator / tl.sum(numerator, axis=0), mask=mask)


@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """C = A @ B for contiguous row-major A (M x K), B (K x N): one BLOCK_M x BLOCK_N tile of C per program.

    Offsets are int64 (rows, columns and the K index), so matrices of over 2**31 elements are addressed right.
    """
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K).to(tl.int64)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        k = k0 + ks
        a = tl.load(a_ptr + rows[:, None] * K + k[None, :], mask=(rows[:, None] < M) & (k[None, :] < K), other=0.0)
        b = tl.load(b_ptr + k[:, None] * N + cols[None, :], mask=(k[:, None] < K) & (cols[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def _matrix(name: str, value: object):
    """Return ``value`` if it is a 2-D floating-point torch tensor, else raise naming ``name``."""
    import torch

    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dim() != 2 or not value.is_floating_point():
        raise ValueError(f"{name} must be a 2-D floating-point tensor, got shape {tuple(value.shape)}, {value.dtype}")
    return value.contiguous()


def softmax(x: object):
    """Row softmax of a 2-D tensor with softmax_kernel (one launch, one program per row). Lesson: 06_triton."""
    import torch

    x = _matrix("x", x)
    out = torch.empty_like(x)
    launch(softmax_kernel, (x.shape[0],), x, out, x.shape[1], BLOCK=triton.next_power_of_2(x.shape[1]))
    return out


def matmul(a: object, b: object, block_m: int = 64, block_n: int = 64, block_k: int = 32):
    """A @ B with matmul_kernel on a (cdiv(M, block_m), cdiv(N, block_n)) grid. Lesson: 06_triton."""
    import torch

    a, b = _matrix("a", a), _matrix("b", b)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"a and b: inner dimensions differ, {tuple(a.shape)} @ {tuple(b.shape)}")
    for name, value in (("block_m", block_m), ("block_n", block_n), ("block_k", block_k)):
        positive_int(name, value)
    (m, k), n = a.shape, b.shape[1]
    c = torch.empty((m, n), dtype=torch.float32, device=a.device)
    launch(matmul_kernel, (triton.cdiv(m, block_m), triton.cdiv(n, block_n)), a, b, c, m, n, k,
           BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c


__all__ = ["matmul", "matmul_kernel", "softmax", "softmax_kernel"]
