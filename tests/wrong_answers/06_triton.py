"""Plausible wrong answers to lesson 06's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: "constant", "helper" (the
course's own kernel where one computes the answer, blocked by off_limits; in Exercise 1, where none does, a torch
shortcut that launches no kernel), "visible_only" (right on the visible test's input only), "typical" (the lesson's
typical mistake, used in the full nbgrader pipeline), and more: a missing mask, an input read twice, a block size
ignored, masked softmax lanes loaded as 0, a K slice unmasked.
"""

from wrong_answers.tampering import with_tampering

# --------------------------------------------------------------------------- Exercise 1: fused residual + SiLU

_EX1_KERNEL_HEAD = '''\
@triton.jit
def residual_silu_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    """out = silu(x + y) for this program's block of BLOCK elements (masked at the end)."""
'''
_EX1_GOOD_KERNEL = _EX1_KERNEL_HEAD + '''\
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    z = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, z * tl.sigmoid(z), mask=mask)
'''
_EX1_LAUNCHER_HEAD = '''

def residual_silu(x, y, block=128):
    """Return silu(x + y) computed by residual_silu_kernel in one launch over cdiv(n, block) programs."""
'''
_EX1_GOOD_LAUNCHER = _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n = x.numel()
    tb.launch(residual_silu_kernel, (triton.cdiv(n, block),), x, y, out, n, BLOCK=block)
    return out
'''


def _ex1_kernel(mask: str = "offsets < n_elements", body: str = "") -> str:
    """The model kernel with another mask, or another body."""
    return _EX1_KERNEL_HEAD + (body or f'''\
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = {mask}
    z = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, z * tl.sigmoid(z), mask=mask)
''')


# --------------------------------------------------------------------------- Exercise 2: fused row softmax

_EX2_KERNEL_HEAD = '''\
@triton.jit
def softmax_kernel_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """Softmax of row tl.program_id(0): one load of the row, max subtracted, one store."""
'''
_EX2_LAUNCHER_HEAD = '''

def softmax_rows(x):
    """Return the row softmax of the 2-D float32 tensor x: one launch, one program per row."""
'''
_EX2_GOOD_LAUNCHER = _EX2_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out
'''


def _ex2_kernel(other: str = '-float("inf")', shift: str = "tl.max(x, axis=0)") -> str:
    """The model softmax kernel with another fill value for masked lanes, or another shift before exp."""
    return _EX2_KERNEL_HEAD + f'''\
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other={other})
    numerator = tl.exp(x - {shift})
    tl.store(out_ptr + row * n_cols + cols, numerator / tl.sum(numerator, axis=0), mask=mask)
'''


# --------------------------------------------------------------------------- Exercise 3: tiled matmul

_EX3_KERNEL_HEAD = '''\
@triton.jit
def matmul_kernel_tiled(a_ptr, b_ptr, c_ptr, M, N, K,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """One BLOCK_M x BLOCK_N tile of C = A @ B per program, tl.dot over K in BLOCK_K slices, masked edges."""
'''
_EX3_LAUNCHER_HEAD = '''

def matmul_tiled(a, b, block_m=16, block_n=16, block_k=16):
    """Return a @ b (float32) computed by matmul_kernel_tiled on a (cdiv(M, block_m), cdiv(N, block_n)) grid."""
'''
_EX3_GOOD_LAUNCHER = _EX3_LAUNCHER_HEAD + '''\
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    tb.launch(matmul_kernel_tiled, (triton.cdiv(M, block_m), triton.cdiv(N, block_n)), a, b, c, M, N, K,
              BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
'''


def _ex3_kernel(loop: str = "for k0 in range(0, K, BLOCK_K):", start: str = "k0",
                a_mask: str = "(rows[:, None] < M) & (k[None, :] < K)",
                b_mask: str = "(k[:, None] < K) & (cols[None, :] < N)") -> str:
    """The model matmul kernel with another K loop or other load masks."""
    return _EX3_KERNEL_HEAD + f'''\
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    {loop}
        k = {start} + ks
        a = tl.load(a_ptr + rows[:, None] * K + k[None, :], mask={a_mask}, other=0.0)
        b = tl.load(b_ptr + k[:, None] * N + cols[None, :], mask={b_mask}, other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], acc, mask=(rows[:, None] < M) & (cols[None, :] < N))
'''


_EX3_GOOD_KERNEL = _ex3_kernel()

WRONG = {
    "ex1-solution": {
        "constant": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    return torch.zeros_like(x)
''',
        # No course helper computes this; the shortcut is torch itself: right values, but no kernel of one's own.
        "helper": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    return torch.nn.functional.silu(x + y)
''',
        # The mask hard-codes the visible length 1000.
        "visible_only": _ex1_kernel(mask="offsets < 1000") + _EX1_GOOD_LAUNCHER,
        # Eager PyTorch's way: an add kernel writes x + y to memory, a SiLU kernel reads it back.
        "typical": '''\
@triton.jit
def add_kernel_1(x_ptr, y_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def residual_silu_kernel(z_ptr, out_ptr, n_elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    z = tl.load(z_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, z * tl.sigmoid(z), mask=mask)


def residual_silu(x, y, block=128):
    n = x.numel()
    total, out = torch.empty_like(x), torch.empty_like(x)
    tb.launch(add_kernel_1, (triton.cdiv(n, block),), x, y, total, n, BLOCK=block)
    tb.launch(residual_silu_kernel, (triton.cdiv(n, block),), total, out, n, BLOCK=block)
    return out
''',
        # No mask: the last program reads and writes past the ends (the counter raises OutOfBounds).
        "no_mask": _ex1_kernel(body='''\
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    z = tl.load(x_ptr + offsets) + tl.load(y_ptr + offsets)
    tl.store(out_ptr + offsets, z * tl.sigmoid(z))
''') + _EX1_GOOD_LAUNCHER,
        # x + y loaded again for the sigmoid: right values, each input read twice.
        "reads_twice": _ex1_kernel(body='''\
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n_elements
    z = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
    gate = tl.sigmoid(tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask))
    tl.store(out_ptr + offsets, z * gate, mask=mask)
''') + _EX1_GOOD_LAUNCHER,
        # The block argument ignored: always 128 lanes per program, so the grid is wrong for other blocks.
        "ignores_block": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n = x.numel()
    tb.launch(residual_silu_kernel, (triton.cdiv(n, 128),), x, y, out, n, BLOCK=128)
    return out
''',
    },
    "ex2-solution": {
        "constant": _ex2_kernel() + _EX2_LAUNCHER_HEAD + '''\
    return torch.full_like(x, 1.0 / x.shape[1])
''',
        # The course's own kernel, blocked in the test cell.
        "helper": _ex2_kernel() + _EX2_LAUNCHER_HEAD + '''\
    from gpucourse.kernels import triton_kernels
    return triton_kernels.softmax(x)
''',
        # BLOCK fixed at 128, enough for the visible 100 and 50 columns only.
        "visible_only": _ex2_kernel() + _EX2_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=128)
    return out
''',
        # The textbook formula without the max: exp overflows for entries near 1e4.
        "typical": _ex2_kernel(shift="0.0") + _EX2_GOOD_LAUNCHER,
        # Masked lanes loaded as 0: they add exp(0 - max) to the sum, and can be the max.
        "other_zero": _ex2_kernel(other="0.0") + _EX2_GOOD_LAUNCHER,
        # Two passes over memory: the row loaded once for its max, again for the exponentials.
        "two_passes": _EX2_KERNEL_HEAD + '''\
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    row_max = tl.max(tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")), axis=0)
    numerator = tl.exp(tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")) - row_max)
    tl.store(out_ptr + row * n_cols + cols, numerator / tl.sum(numerator, axis=0), mask=mask)
''' + _EX2_GOOD_LAUNCHER,
        # The output written with torch after an unfused kernel: the max and exp by a kernel, the rest by torch.
        "unfused": _EX2_KERNEL_HEAD + '''\
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    tl.store(out_ptr + row * n_cols + cols, tl.exp(x - tl.max(x, axis=0)), mask=mask)
''' + _EX2_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out / out.sum(dim=1, keepdim=True)
''',
    },
    "ex3-solution": {
        "constant": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    return torch.zeros((a.shape[0], b.shape[1]))
''',
        # The course's own kernel, blocked in the test cell.
        "helper": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    from gpucourse.kernels import triton_kernels
    return triton_kernels.matmul(a, b, block_m=block_m, block_n=block_n, block_k=block_k)
''',
        # The K loop hard-codes the visible K = 50.
        "visible_only": _ex3_kernel(loop="for k0 in range(0, 50, BLOCK_K):") + _EX3_GOOD_LAUNCHER,
        # The last, partial slice of K skipped: K // BLOCK_K full slices only.
        "typical": _ex3_kernel(loop="for step in range(K // BLOCK_K):", start="step * BLOCK_K") + _EX3_GOOD_LAUNCHER,
        # No mask along K: the last slice reads past the end of each row of A and of B.
        "no_k_mask": _ex3_kernel(a_mask="rows[:, None] < M", b_mask="cols[None, :] < N") + _EX3_GOOD_LAUNCHER,
        # torch computes c; the kernel only copies nothing: no launch at all.
        "torch_matmul": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    return a @ b
''',
        # Rows and columns swapped in the grid: program (i, j) computes the wrong tile for non-square c.
        "grid_swapped": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    (M, K), N = a.shape, b.shape[1]
    c = torch.zeros((M, N), dtype=torch.float32)
    tb.launch(matmul_kernel_tiled, (triton.cdiv(N, block_n), triton.cdiv(M, block_m)), a, b, c, M, N, K,
              BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
''',
    },
}


# --------------------------------------------------------------------------- Exercise 4: block sizes by traffic

_EX4_HEAD = '''\
def pick_blocks(M, N, K, candidates, min_programs):
    """Return the (block_m, block_n, block_k) of candidates that reads least with >= min_programs programs."""
'''


def _ex4_measured(choose: str) -> str:
    """Measure every candidate as the model answer does, then choose with ``choose`` (a block of code)."""
    return _EX4_HEAD + '''\
    a, b = torch.randn(M, K), torch.randn(K, N)
    measured = []
    for block_m, block_n, block_k in candidates:
        c = torch.empty(M, N)
        with tb.count_traffic() as traffic:
            tb.launch(triton_kernels.matmul_kernel, (triton.cdiv(M, block_m), triton.cdiv(N, block_n)), a, b, c,
                      M, N, K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
        measured.append((traffic.launches[0].num_programs, traffic.bytes_read(), (block_m, block_n, block_k)))
''' + choose


WRONG["ex4-solution"] = {
    "constant": _EX4_HEAD + '''\
    return candidates[0]
''',
    # No course helper picks block sizes; the shortcut is a guess without measuring: the biggest tile that still
    # gives enough programs.
    "helper": _EX4_HEAD + '''\
    enough = [c for c in candidates if triton.cdiv(M, c[0]) * triton.cdiv(N, c[1]) >= min_programs]
    pool = enough or candidates
    return max(pool, key=lambda c: c[0] * c[1])
''',
    # Answers learnt from the visible checks.
    "visible_only": _EX4_HEAD + '''\
    return {1: (64, 64, 16), 4: (32, 32, 16)}.get(min_programs, candidates[0])
''',
    # The fewest bytes, whatever the number of programs: big tiles that leave SMs idle.
    "typical": _ex4_measured('''\
    return min(measured, key=lambda entry: entry[1])[2]
'''),
    # The most programs, whatever the traffic.
    "most_programs": _ex4_measured('''\
    return max(measured, key=lambda entry: entry[0])[2]
'''),
    # A tie goes to the last candidate, not the first.
    "last_on_tie": _ex4_measured('''\
    enough = [entry for entry in measured if entry[0] >= min_programs] or measured
    best = min(entry[1] for entry in enough)
    return [entry for entry in enough if entry[1] == best][-1][2]
'''),
    # Nothing returned when no candidate has enough programs.
    "none_when_none_qualify": _ex4_measured('''\
    enough = [entry for entry in measured if entry[0] >= min_programs]
    if enough:
        return min(enough, key=lambda entry: entry[1])[2]
    return None
'''),
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
