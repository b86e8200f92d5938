"""Plausible wrong answers to lesson 06's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: "constant", "helper" (the
course's own kernel where one computes the answer, blocked by off_limits; in Exercise 2, where none does, torch's
rms_norm, which launches no kernel), "visible_only" (right on the visible test's input only), "typical" (the
lesson's typical mistake, used in the full nbgrader pipeline), and more: masked loads without other= (zeros in the
interpreter, undefined on a GPU: the tests poison them), a flat result, float32 returned for float16 or float64
inputs, statistics in float16, a row read twice, masked softmax lanes loaded as 0, a K slice unmasked; and what only
a GPU refuses: outputs made without device= (the tests make the default device meta), accumulators whose type
changes in the loop (Triton's compiler front end refuses them), a matmul without tl.dot; and torch work around the
launch (a normalisation in place, a conversion, the K tail), which tb.kernel_only() refuses, and 16-bit tl.dot
operands in the float32 matmul, refused by their type.
"""

from wrong_answers.tampering import with_tampering

# --------------------------------------------------------------------------- Exercise 1: fused row softmax

_EX1_KERNEL_HEAD = '''\
@triton.jit
def softmax_kernel_rows(x_ptr, out_ptr, n_cols, BLOCK: tl.constexpr):
    """Softmax of row tl.program_id(0): one load of the row, max subtracted, one store."""
'''
_EX1_LAUNCHER_HEAD = '''

def softmax_rows(x):
    """Return the row softmax of the 2-D tensor x, in x's dtype: one launch, one program per row."""
'''
_EX1_GOOD_LAUNCHER = _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out
'''


def _ex1_kernel(other: str = ', other=-float("inf")', shift: str = "tl.max(x, axis=0)") -> str:
    """The model softmax kernel with another fill for masked lanes (``other`` is the load's keyword, or ''), or
    another shift before exp."""
    return _EX1_KERNEL_HEAD + f'''\
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask{other}).to(tl.float32)
    numerator = tl.exp(x - {shift})
    tl.store(out_ptr + row * n_cols + cols, numerator / tl.sum(numerator, axis=0), mask=mask)
'''


_EX1_GOOD_KERNEL = _ex1_kernel()
_EX1_NUMERATOR_BODY = '''\
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    tl.store(out_ptr + row * n_cols + cols, tl.exp(x - tl.max(x, axis=0)), mask=mask)
'''

# --------------------------------------------------------------------------- Exercise 2: fused residual add + RMSNorm

_EX2_KERNEL_HEAD = """\
@triton.jit
def add_rmsnorm_kernel(x_ptr, r_ptr, w_ptr, y_ptr, h_ptr, n_cols, eps, BLOCK: tl.constexpr):
    \"\"\"h = x + residual and y = rmsnorm(h) * w for row tl.program_id(0): statistics in float32.\"\"\"
"""
_EX2_LAUNCHER_HEAD = """

def add_rmsnorm(x, residual, weight, eps=1e-6):
    \"\"\"Return (y, h): h = x + residual, y = rmsnorm(h) * weight, in x's dtype: one Triton kernel.\"\"\"
"""
_EX2_GOOD_LAUNCHER = _EX2_LAUNCHER_HEAD + """\
    y, h = torch.empty_like(x), torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(add_rmsnorm_kernel, (n_rows,), x, residual, weight, y, h, n_cols, eps,
              BLOCK=triton.next_power_of_2(n_cols))
    return y, h
"""


def _ex2_launcher(y: str = "torch.empty_like(x)", h: str = "torch.empty_like(x)", eps: str = "eps",
                  block: str = "triton.next_power_of_2(n_cols)", returned: str = "y, h") -> str:
    """The model launcher with other outputs allocated, another eps or BLOCK passed, or another value returned."""
    return _EX2_LAUNCHER_HEAD + f"""\
    y, h = {y}, {h}
    n_rows, n_cols = x.shape
    tb.launch(add_rmsnorm_kernel, (n_rows,), x, residual, weight, y, h, n_cols, {eps}, BLOCK={block})
    return {returned}
"""


def _ex2_kernel(other: str = ", other=0.0", stats: str = "h.to(tl.float32)", divide: str = "n_cols",
                normalise: str = "hf * tl.rsqrt(mean_square + eps) * w", w: str = "{load}.to(tl.float32)") -> str:
    """The model kernel with another fill for masked lanes, the statistics taken from another value (``hf``: what
    they are computed from, given ``h``, the sum in x's dtype), another divisor of the mean, another normalisation
    (of ``hf``, ``w``) or another weight load."""
    weight = w.format(load=f"tl.load(w_ptr + cols, mask=mask{other})")
    return _EX2_KERNEL_HEAD + f"""\
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    offsets = row * n_cols + cols
    h = tl.load(x_ptr + offsets, mask=mask{other}) + tl.load(r_ptr + offsets, mask=mask{other})
    tl.store(h_ptr + offsets, h, mask=mask)
    hf = {stats}
    w = {weight}
    mean_square = tl.sum(hf * hf, axis=0) / {divide}
    tl.store(y_ptr + offsets, {normalise}, mask=mask)
"""


_EX2_GOOD_KERNEL = _ex2_kernel()

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
                b_mask: str = "(k[:, None] < K) & (cols[None, :] < N)", other: str = ", other=0.0",
                acc: str = "tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)", product: str = "tl.dot(a, b)",
                stored: str = "acc") -> str:
    """The model matmul kernel with another K loop, other load masks, another fill for masked lanes, another
    accumulator, another product of two tiles or another value stored."""
    return _EX3_KERNEL_HEAD + f'''\
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    acc = {acc}
    {loop}
        k = {start} + ks
        a = tl.load(a_ptr + rows[:, None] * K + k[None, :], mask={a_mask}{other})
        b = tl.load(b_ptr + k[:, None] * N + cols[None, :], mask={b_mask}{other})
        acc += {product}
    tl.store(c_ptr + rows[:, None] * N + cols[None, :], {stored}, mask=(rows[:, None] < M) & (cols[None, :] < N))
'''


_EX3_GOOD_KERNEL = _ex3_kernel()

WRONG = {
    "ex1-solution": {
        "constant": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    return torch.full_like(x, 1.0 / x.shape[1])
''',
        # The course's own kernel, blocked in the test cell.
        "helper": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    from gpucourse.kernels import triton_kernels
    return triton_kernels.softmax(x)
''',
        # BLOCK fixed at 128, enough for the visible 100 and 50 columns only.
        "visible_only": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=128)
    return out
''',
        # The textbook formula without the max: exp overflows for entries near 1e4.
        "typical": _ex1_kernel(shift="0.0") + _EX1_GOOD_LAUNCHER,
        # Masked lanes loaded as 0: they add exp(0 - max) to the sum, and can be the max.
        "other_zero": _ex1_kernel(other=", other=0.0") + _EX1_GOOD_LAUNCHER,
        # No other=: the interpreter's zeros would pass rows whose max is large; a GPU's lanes are undefined.
        "no_other": _ex1_kernel(other="") + _EX1_GOOD_LAUNCHER,
        # The max clamped at 0: right for rows near +1e4, 0 / 0 for rows far below zero.
        "max_clamped_at_zero": _ex1_kernel(shift="tl.maximum(tl.max(x, axis=0), 0.0)") + _EX1_GOOD_LAUNCHER,
        # The output always float32: right values, wrong dtype for float16 and float64 inputs.
        "float32_out": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out
''',
        # The output made without device=: on the CPU whatever x's device (on a GPU the launch fails).
        "no_device": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty(x.shape, dtype=x.dtype)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out
''',
        # A flat output: the right numbers, the wrong shape.
        "flat": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty(x.numel(), dtype=x.dtype, device=x.device)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out
''',
        # Two passes over memory: the row loaded once for its max, again for the exponentials.
        "two_passes": _EX1_KERNEL_HEAD + '''\
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    row_max = tl.max(tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32), axis=0)
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - row_max)
    tl.store(out_ptr + row * n_cols + cols, numerator / tl.sum(numerator, axis=0), mask=mask)
''' + _EX1_GOOD_LAUNCHER,
        # The normalisation done by torch after the kernel: a second pass over memory.
        "unfused": _EX1_KERNEL_HEAD + _EX1_NUMERATOR_BODY + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out / out.sum(dim=1, keepdim=True)
''',
        # Review v3r2 M1: BLOCK hard-coded at the lesson's own 1,024 (or 256): the rest of a wider row is never
        # stored, and its max and sum miss it (a 4,096-wide hidden dimension is common).
        "r2_block_1024": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=1024)
    return out
''',
        "r2_block_256": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=256)
    return out
''',
        # Review v3r5 M1: a constant BLOCK as wide as Llama 3's 128,256-entry vocabulary: right on every narrower
        # row, yet 131,072 registers' worth of lanes per program, and wrong past it (Qwen's 151,936, Gemma's 256,000).
        "r5_block_const_131072": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=131072)
    return out
''',
        # Review v3r3 M1: the kernel stores exp(x - max), torch normalises in place: two more passes over memory,
        # which the counter (the kernel's loads and stores only) did not see. The tests refuse torch arithmetic.
        "r3_inplace_divide": _EX1_KERNEL_HEAD + _EX1_NUMERATOR_BODY + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    out /= out.sum(dim=1, keepdim=True)
    return out
''',
        # Review v3r3 M1: a copy kernel with the right traffic, then torch's softmax copied into its output.
        "r3_copy_kernel_then_torch": _EX1_KERNEL_HEAD + '''\
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    tl.store(out_ptr + row * n_cols + cols, tl.load(x_ptr + row * n_cols + cols, mask=mask), mask=mask)
''' + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    out.copy_(torch.softmax(x.float(), dim=1))
    return out
''',
        # Review v3r3 m3: a float32 output converted on return: a second pass, refused with the conversion named.
        "r3_float32_then_to": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty(x.shape, dtype=torch.float32, device=x.device)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out.to(x.dtype)
''',
        # The input converted to float32 by torch before the kernel (a float32 copy of x in memory); a no-op on the
        # visible float32 inputs.
        "r3_input_to_float32": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x.float(), out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out
''',
        # Review v3r4 M1: tl.exp in float32 as told, then the exponentials converted back to x's dtype before
        # tl.sum, which keeps its input's type: exact for float32 and float64, and within one rounding for float16
        # rows up to 4,097 wide, but a float16 sum passes 65,504 on a 70,000-wide row of near-equal values (a
        # vocabulary): inf, and every output 0.
        "r4_exp_back_to_input_dtype": _EX1_KERNEL_HEAD + '''\
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x16 = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf"))
    x = x16.to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0)).to(x16.dtype)
    tl.store(out_ptr + row * n_cols + cols, numerator / tl.sum(numerator, axis=0), mask=mask)
''' + _EX1_GOOD_LAUNCHER,
        # Review v3r4 M1: the numerator and its sum each converted to out's dtype before the division.
        "r4_div_in_out_dtype": _EX1_KERNEL_HEAD + '''\
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * n_cols + cols, mask=mask, other=-float("inf")).to(tl.float32)
    numerator = tl.exp(x - tl.max(x, axis=0))
    out_type = out_ptr.dtype.element_ty
    tl.store(out_ptr + row * n_cols + cols, numerator.to(out_type) / tl.sum(numerator, axis=0).to(out_type),
             mask=mask)
''' + _EX1_GOOD_LAUNCHER,
    },
    "ex2-solution": {
        "constant": _EX2_GOOD_KERNEL + _EX2_LAUNCHER_HEAD + """\
    return x.clone(), residual.clone()
""",
        # No course helper computes this; the shortcut is torch's own add and rms_norm: no kernel of one's own.
        "helper": _EX2_GOOD_KERNEL + _EX2_LAUNCHER_HEAD + """\
    h = x + residual
    return torch.nn.functional.rms_norm(h.float(), (x.shape[1],), weight.float(), eps=eps).to(x.dtype), h
""",
        # BLOCK fixed at 128, enough for the visible 100 columns only.
        "visible_only": _EX2_GOOD_KERNEL + _ex2_launcher(block="128"),
        # Statistics in float16: h * h overflows above 256 and underflows below about 2e-4.
        "typical": _ex2_kernel(stats="h", normalise="hf.to(tl.float32) * tl.rsqrt(mean_square.to(tl.float32) + eps) * w"
                               ) + _EX2_GOOD_LAUNCHER,
        # No other=: the interpreter's zeros add nothing to the sum of squares; a GPU's lanes are undefined.
        "no_other": _ex2_kernel(other="") + _EX2_GOOD_LAUNCHER,
        # The mean over the block, not over the row: wrong whenever n_cols is not a power of two.
        "divides_by_block": _ex2_kernel(divide="BLOCK") + _EX2_GOOD_LAUNCHER,
        # eps added outside the square root: wrong where mean(h²) is not much larger than eps.
        "eps_outside_root": _ex2_kernel(normalise="hf / (tl.sqrt(mean_square) + eps) * w") + _EX2_GOOD_LAUNCHER,
        # The eps argument ignored: the default 1e-6 always.
        "ignores_eps": _EX2_GOOD_KERNEL + _ex2_launcher(eps="1e-6"),
        # The normalised rows always float32: the right numbers, twice the bytes, the wrong dtype.
        "float32_out": _EX2_GOOD_KERNEL + _ex2_launcher(y="torch.empty(x.shape, dtype=torch.float32, device=x.device)"),
        # The residual stream kept in float32 "for accuracy": the next block reads twice the bytes, the wrong dtype.
        "h_float32": _EX2_GOOD_KERNEL + _ex2_launcher(h="torch.empty(x.shape, dtype=torch.float32, device=x.device)"),
        # Always float16 out: right for float16 inputs, the wrong dtype for float32 ones.
        "float16_out": _EX2_GOOD_KERNEL + _ex2_launcher(
            y="torch.empty(x.shape, dtype=torch.float16, device=x.device)",
            h="torch.empty(x.shape, dtype=torch.float16, device=x.device)"),
        # The outputs made without device=: on the CPU whatever x's device (on a GPU the launch fails).
        "no_device": _EX2_GOOD_KERNEL + _ex2_launcher(y="torch.empty(x.shape, dtype=x.dtype)",
                                                      h="torch.empty(x.shape, dtype=x.dtype)"),
        # Flat outputs: the right numbers, the wrong shape.
        "flat": _EX2_GOOD_KERNEL + _ex2_launcher(y="torch.empty(x.numel(), dtype=x.dtype, device=x.device)",
                                                 h="torch.empty(x.numel(), dtype=x.dtype, device=x.device)"),
        # The pair in the other order.
        "h_y_swapped": _EX2_GOOD_KERNEL + _ex2_launcher(returned="h, y"),
        # The norm of x, not of the updated residual: the old RMSNorm with an add stored beside it.
        "normalises_x": _EX2_KERNEL_HEAD + """\
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    offsets = row * n_cols + cols
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    h = x + tl.load(r_ptr + offsets, mask=mask, other=0.0)
    tl.store(h_ptr + offsets, h, mask=mask)
    xf = x.to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offsets, xf * tl.rsqrt(tl.sum(xf * xf, axis=0) / n_cols + eps) * w, mask=mask)
""" + _EX2_GOOD_LAUNCHER,
        # h stored, then loaded back for the norm: another pass over memory (on a GPU, a read of what this program
        # just wrote).
        "reloads_h": _ex2_kernel(stats="tl.load(h_ptr + offsets, mask=mask, other=0.0).to(tl.float32)") +
        _EX2_GOOD_LAUNCHER,
        # Unfused: an add kernel, then an RMSNorm kernel that reads h back: two launches, five passes.
        "two_kernels": """\
@triton.jit
def add_kernel_rows(x_ptr, r_ptr, h_ptr, n_cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * n_cols + tl.arange(0, BLOCK)
    mask = tl.arange(0, BLOCK) < n_cols
    tl.store(h_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(r_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def rmsnorm_kernel(h_ptr, w_ptr, y_ptr, n_cols, eps, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    offsets = tl.program_id(0).to(tl.int64) * n_cols + cols
    h = tl.load(h_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(y_ptr + offsets, h * tl.rsqrt(tl.sum(h * h, axis=0) / n_cols + eps) * w, mask=mask)
""" + _EX2_LAUNCHER_HEAD + """\
    y, h = torch.empty_like(x), torch.empty_like(x)
    n_rows, n_cols = x.shape
    block = triton.next_power_of_2(n_cols)
    tb.launch(add_kernel_rows, (n_rows,), x, residual, h, n_cols, BLOCK=block)
    tb.launch(rmsnorm_kernel, (n_rows,), h, weight, y, n_cols, eps, BLOCK=block)
    return y, h
""",
        # The residual added by torch before the kernel: a pass over memory the counter would not see.
        "add_by_torch": _EX2_GOOD_KERNEL + _EX2_LAUNCHER_HEAD + """\
    y, h = torch.empty_like(x), torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(add_rmsnorm_kernel, (n_rows,), x + residual, torch.zeros_like(x), weight, y, h, n_cols, eps,
              BLOCK=triton.next_power_of_2(n_cols))
    return y, h
""",
        # Review v3r2 M1: BLOCK hard-coded at 1,024: wider rows are normalised by part of their sum, half unstored.
        "r2_block_1024": _EX2_GOOD_KERNEL + _ex2_launcher(block="1024"),
        # Review v3r5 M1: a constant BLOCK of 8,192 (Llama 2/3 70B's hidden size): right on narrower rows, NaN on a
        # 16,385-wide one (Llama 3 405B's is 16,384), where the rest of h and y is never stored.
        "r5_block_const_8192": _EX2_GOOD_KERNEL + _ex2_launcher(block="8192"),
        # Review v3r3 M2: float32 statistics, but h * w multiplied in float16 first: inf once |h * w| passes 65,504
        # (rows ~1e4, weights of a few units).
        "r3_x_times_w_first": _ex2_kernel(w="{load}", normalise="(h * w).to(tl.float32) * tl.rsqrt(mean_square + eps)")
        + _EX2_GOOD_LAUNCHER,
        # Review v3r3 M1 (the RMSNorm's version): the kernel stores h and h * w, torch scales y in place.
        "r3_torch_scale_inplace": _ex2_kernel(normalise="hf * w") + _EX2_LAUNCHER_HEAD + """\
    y, h = torch.empty_like(x), torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(add_rmsnorm_kernel, (n_rows,), x, residual, weight, y, h, n_cols, eps,
              BLOCK=triton.next_power_of_2(n_cols))
    y.mul_(torch.rsqrt(h.float().pow(2).mean(dim=1, keepdim=True) + eps).to(y.dtype))
    return y, h
""",
        # The weight applied by torch after the kernel, in place: one more read and write of y.
        "r3_weight_by_torch": _ex2_kernel(normalise="hf * tl.rsqrt(mean_square + eps)") + _EX2_LAUNCHER_HEAD + """\
    y, h = torch.empty_like(x), torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(add_rmsnorm_kernel, (n_rows,), x, residual, weight, y, h, n_cols, eps,
              BLOCK=triton.next_power_of_2(n_cols))
    y *= weight
    return y, h
""",
        # The normalised rows written to memory in float32, the weight applied by torch: an intermediate in memory.
        "float32_intermediate": _ex2_kernel(normalise="hf * tl.rsqrt(mean_square + eps)") + _EX2_LAUNCHER_HEAD + """\
    normed, h = torch.empty(x.shape, dtype=torch.float32, device=x.device), torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(add_rmsnorm_kernel, (n_rows,), x, residual, weight, normed, h, n_cols, eps,
              BLOCK=triton.next_power_of_2(n_cols))
    return (normed * weight.float()).to(x.dtype), h
""",
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
        # Masked loads without other=: the interpreter's zeros add nothing; a GPU's lanes are undefined.
        "no_other": _ex3_kernel(other="") + _EX3_GOOD_LAUNCHER,
        # No mask along K: the last slice reads past the end of each row of A and of B.
        "no_k_mask": _ex3_kernel(a_mask="rows[:, None] < M", b_mask="cols[None, :] < N") + _EX3_GOOD_LAUNCHER,
        # The numpy habit, a scalar accumulator: the interpreter runs it; Triton's compiler refuses a loop-carried
        # variable whose type changes (fp32 scalar, then a BLOCK_M x BLOCK_N tile).
        "acc_scalar": _ex3_kernel(acc="0.0") + _EX3_GOOD_LAUNCHER,
        # A float16 accumulator "to save registers": tl.dot returns float32, the compiler refuses the change.
        "acc_float16": _ex3_kernel(acc="tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)") + _EX3_GOOD_LAUNCHER,
        # No tl.dot: the same values and traffic from a broadcast product, without Tensor Cores.
        "no_tl_dot": _ex3_kernel(product="tl.sum(a[:, :, None] * b[None, :, :], axis=1)") + _EX3_GOOD_LAUNCHER,
        # c made without device=: a CPU tensor when a is on a GPU, where the launch fails.
        "no_device": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N))
    tb.launch(matmul_kernel_tiled, (triton.cdiv(M, block_m), triton.cdiv(N, block_n)), a, b, c, M, N, K,
              BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
''',
        # torch computes c: no launch at all.
        "torch_matmul": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    return a @ b
''',
        # Rows and columns swapped in the grid: program (i, j) computes the wrong tile for non-square c.
        "grid_swapped": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    (M, K), N = a.shape, b.shape[1]
    c = torch.zeros((M, N), dtype=torch.float32, device=a.device)
    tb.launch(matmul_kernel_tiled, (triton.cdiv(N, block_n), triton.cdiv(M, block_m)), a, b, c, M, N, K,
              BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
''',
        # Review v3r2 M2: float16 inside a float32 matmul, right on standard-normal entries only. The Triton
        # tutorial's habit, c stored as float16: inf once c passes 65,504 (entries ~100).
        "r2_c_float16_store": _ex3_kernel(stored="acc.to(tl.float16)") + _EX3_GOOD_LAUNCHER,
        # Each slice's product accumulated in float16 by the Tensor Core: inf at entries ~100, subnormal at ~1e-6.
        "r2_float16_out_dtype": _ex3_kernel(
            product="tl.dot(a.to(tl.float16), b.to(tl.float16), out_dtype=tl.float16).to(tl.float32)") +
        _EX3_GOOD_LAUNCHER,
        # "Tensor Cores want float16": operands rounded to float16, whose subnormals lose gradient-sized entries.
        "r2_float16_operands": _ex3_kernel(product="tl.dot(a.to(tl.float16), b.to(tl.float16))") + _EX3_GOOD_LAUNCHER,
        # Review v3r3 m2: bfloat16 operands (3 mantissa bits fewer than TF32), refused by their type: on a GPU their
        # error would pass the tolerance, and the interpreter (triton 3.9) multiplies bfloat16 tiles wrongly.
        "r3_bfloat16_operands": _ex3_kernel(product="tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))") +
        _EX3_GOOD_LAUNCHER,
        # The last, partial slice of K left to torch after the kernel: c += a[:, k_full:] @ b[k_full:].
        "r3_k_tail_by_torch": _ex3_kernel(loop="for step in range(K // BLOCK_K):", start="step * BLOCK_K") +
        _EX3_LAUNCHER_HEAD + '''\
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    tb.launch(matmul_kernel_tiled, (triton.cdiv(M, block_m), triton.cdiv(N, block_n)), a, b, c, M, N, K,
              BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    k_full = K // block_k * block_k
    if k_full < K:
        c += a[:, k_full:] @ b[k_full:]
    return c
''',
        # "Tensor Cores want float16": the operands converted by torch before the launch (two more passes).
        "r3_operands_halved_by_torch": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    (M, K), N = a.shape, b.shape[1]
    c = torch.empty((M, N), dtype=torch.float32, device=a.device)
    tb.launch(matmul_kernel_tiled, (triton.cdiv(M, block_m), triton.cdiv(N, block_n)), a.half(), b.half(), c,
              M, N, K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
''',
    },
}

# Correct answers other than the model answer that the tests must accept (tests/test_triton.py runs them).
RIGHT = {
    "ex1-solution": {
        # Review v3r2 M3: allocate, then move to x's device (a copy on a GPU, legal): not refused by the meta default.
        "r2_allocate_then_move": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty(x.shape, dtype=x.dtype).to(x.device)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out
''',
        # Review v3r3 m1: the grid as a list, which Triton's kernel[grid] accepts.
        "r3_list_grid": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, [n_rows], x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols))
    return out
''',
        # Review v3r2 M4: Triton's num_warps, as the Fused Softmax tutorial passes it.
        "r2_num_warps": _EX1_GOOD_KERNEL + _EX1_LAUNCHER_HEAD + '''\
    out = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(softmax_kernel_rows, (n_rows,), x, out, n_cols, BLOCK=triton.next_power_of_2(n_cols), num_warps=4)
    return out
''',
    },
    "ex2-solution": {
        "r2_allocate_then_move": _EX2_GOOD_KERNEL + _EX2_LAUNCHER_HEAD + """\
    y, h = torch.empty(x.shape, dtype=x.dtype).to(x.device), torch.empty(x.shape, dtype=x.dtype).to(x.device)
    n_rows, n_cols = x.shape
    tb.launch(add_rmsnorm_kernel, (n_rows,), x, residual, weight, y, h, n_cols, eps,
              BLOCK=triton.next_power_of_2(n_cols), num_warps=8, num_stages=2)
    return y, h
""",
        # vLLM's fused_add_rms_norm: the residual updated in place (h stored over it).
        "r4_residual_in_place": _EX2_GOOD_KERNEL + _EX2_LAUNCHER_HEAD + """\
    y = torch.empty_like(x)
    n_rows, n_cols = x.shape
    tb.launch(add_rmsnorm_kernel, (n_rows,), x, residual, weight, y, residual, n_cols, eps,
              BLOCK=triton.next_power_of_2(n_cols))
    return y, residual
""",
        # The statistics from the float32 sum of x and residual (not the sum rounded to x's dtype): one rounding
        # of h apart, within float16's tolerance.
        "r4_stats_from_float32_sum": _EX2_KERNEL_HEAD + """\
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    offsets = row * n_cols + cols
    h = (tl.load(x_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
         + tl.load(r_ptr + offsets, mask=mask, other=0.0).to(tl.float32))
    tl.store(h_ptr + offsets, h, mask=mask)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    y = h * tl.rsqrt(tl.sum(h * h, axis=0) / n_cols + eps) * w
    tl.store(y_ptr + offsets, y.to(y_ptr.dtype.element_ty), mask=mask)
""" + _EX2_GOOD_LAUNCHER,
    },
    "ex3-solution": {
        # The one output empty_like cannot make: zeros on the CPU, moved to a's device.
        "r2_allocate_then_move": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    (M, K), N = a.shape, b.shape[1]
    c = torch.zeros(M, N).to(a.device)
    tb.launch(matmul_kernel_tiled, (triton.cdiv(M, block_m), triton.cdiv(N, block_n)), a, b, c, M, N, K,
              BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
''',
        # Review v3r3 m1: the grid as a list.
        "r3_list_grid": _EX3_GOOD_KERNEL + _EX3_LAUNCHER_HEAD + '''\
    (M, K), N = a.shape, b.shape[1]
    c = a.new_empty((M, N))
    tb.launch(matmul_kernel_tiled, [triton.cdiv(M, block_m), triton.cdiv(N, block_n)], a, b, c, M, N, K,
              BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return c
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
