"""Plausible wrong answers to lesson 11's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: 'constant' (a fixed plausible
value), 'helper' (the course's own torch reference, which off_limits blocks, or torch's SDPA, which launches no
kernel), 'visible_only' (right on the visible test's input only), 'typical' (the lesson's typical mistake, used in the
full nbgrader pipeline), and more: the running max started at 0 (a row whose scores are all far below 0 divides 0 by
0), the accumulator not rescaled, padded values loaded without other= (poisoned), K and V read once per query row, the
scores stored to memory, Q loaded inside the loop, all keys in one tile (no streaming), ell and acc or the scores'
dot in float16; upper-left causal for N_q != N_k, every key block loaded and masked instead of skipped, rows that see
no key giving NaN; a cache grown with torch.cat, made without device=, KV heads mapped with h % n_kv, KV heads
repeated for each query head, the cache read before this token is written.
"""

from notebook_utils import cell_by_grade_id, load, solution_path, source
from wrong_answers.tampering import with_tampering

_EX1 = '''\
def flash_attention(q, k, v, block_m=16, block_n=16):
    """softmax(q k^T / sqrt(D)) v from one Triton kernel: a program per (query block, batch x head)."""
'''
_EX2 = '''\
def flash_attention_causal(q, k, v, block_m=16, block_n=16):
    """Lower-right causal softmax(q k^T / sqrt(D)) v from one Triton kernel; key blocks above the diagonal skipped."""
'''
_EX3 = '''\
def gqa_decode_step(q_t, k_t, v_t, cache, t, max_len):
    """One decoding step of grouped-query attention with a KV cache preallocated at step 0 and filled in place."""
'''


def _kernel(header: str, causal: bool = False, m0: str = 'float("-inf")', rescale: str = "acc * alpha[:, None]",
            v_other: str = ", other=0.0", end: str = "tl.minimum(N_K, first + BLOCK_M + N_K - N_Q)",
            diagonal: str = "rows[:, None] + (N_K - N_Q)", guard: bool = True, load_mask: str = "inside",
            q_in_loop: bool = False, store_scores: bool = False, out_dtype: str = "o_ptr.dtype.element_ty",
            grid: str = "(triton.cdiv(n_q, block_m), q.numel() // (n_q * d))", block_m: str = "block_m") -> str:
    """A FlashAttention solution cell (Exercise 1's or 2's) with one or more lines changed."""
    load_q = ("tl.load(q_ptr + bh * N_Q * D + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N_Q, "
              "other=0.0)")
    loop_q = f"\n            q = {load_q}" if q_in_loop else ""
    first_q = "" if q_in_loop else f"\n        q = {load_q}"
    loop = f"for start in range(0, {end if causal else 'N_K'}, BLOCK_N):"
    visible = (f"(keys[None, :] < N_K) & (keys[None, :] <= {diagonal})" if causal else "keys[None, :] < N_K")
    safe = ('\n            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)' if guard
            else "\n            m_safe = m_new")
    scores_arg = ", s_ptr" if store_scores else ""
    store_s = ("\n            tl.store(s_ptr + bh * N_Q * N_K + rows[:, None] * N_K + keys[None, :], s, "
               "mask=(rows[:, None] < N_Q) & (keys[None, :] < N_K))" if store_scores else "")
    divide = "tl.where(ell == 0.0, 1.0, ell)" if guard else "ell"
    scratch = ("\n    scores = torch.empty(q.numel() // (n_q * d), n_q, k.shape[-2], dtype=torch.float32, "
               "device=q.device)" if store_scores else "")
    scratch_arg = ", scores" if store_scores else ""
    return header + f'''\
    @triton.jit
    def kernel(q_ptr, k_ptr, v_ptr, o_ptr{scores_arg}, N_Q, N_K, scale,
               D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        bh = tl.program_id(1)
        first = tl.program_id(0) * BLOCK_M
        rows = first + tl.arange(0, BLOCK_M)
        cols = tl.arange(0, BLOCK_N)
        dims = tl.arange(0, D){first_q}
        m = tl.full((BLOCK_M,), {m0}, dtype=tl.float32)
        ell = tl.zeros((BLOCK_M,), dtype=tl.float32)
        acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)
        {loop}
            keys = start + cols
            inside = keys[:, None] < N_K{loop_q}
            k = tl.load(k_ptr + bh * N_K * D + keys[:, None] * D + dims[None, :], mask={load_mask}, other=0.0)
            v = tl.load(v_ptr + bh * N_K * D + keys[:, None] * D + dims[None, :], mask={load_mask}{v_other})
            s = tl.dot(q, tl.trans(k)) * scale
            s = tl.where({visible}, s, float("-inf")){store_s}
            m_new = tl.maximum(m, tl.max(s, 1)){safe}
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m - m_safe)
            ell = ell * alpha + tl.sum(p, 1)
            acc = {rescale} + tl.dot(p.to(v.dtype), v)
            m = m_new
        out = acc / {divide}[:, None]
        tl.store(o_ptr + bh * N_Q * D + rows[:, None] * D + dims[None, :], out.to({out_dtype}),
                 mask=rows[:, None] < N_Q)

    n_q, d = q.shape[-2], q.shape[-1]
    o = torch.empty_like(q){scratch}
    tb.launch(kernel, {grid}, q, k, v, o{scratch_arg}, n_q, k.shape[-2], 1.0 / math.sqrt(d), D=d, BLOCK_M={block_m},
              BLOCK_N=block_n)
    return o
'''


def _decode(body: str) -> str:
    """An Exercise 3 solution cell with the given body."""
    return _EX3 + body


_ALLOCATE = '''\
    n_heads, d = q_t.shape
    n_kv = k_t.shape[0]
    if t == 0:
        cache["k"] = torch.empty(n_kv, max_len, d, dtype=k_t.dtype, device=k_t.device)
        cache["v"] = torch.empty(n_kv, max_len, d, dtype=v_t.dtype, device=v_t.device)
'''
_ATTEND = '''\
    cache["k"][:, t] = k_t
    cache["v"][:, t] = v_t
    keys, values = cache["k"][:, :t + 1], cache["v"][:, :t + 1]
    q = q_t.reshape(n_kv, n_heads // n_kv, d)
    weights = torch.softmax(q @ keys.transpose(-2, -1) / math.sqrt(d), dim=-1)
    return (weights @ values).reshape(n_heads, -1)
'''

_ONE_TILE = _EX1 + '''\
    @triton.jit
    def kernel(q_ptr, k_ptr, v_ptr, o_ptr, N_Q, N_K, scale,
               D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
        bh = tl.program_id(1)
        rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
        keys = tl.arange(0, BLOCK_N)
        dims = tl.arange(0, D)
        q = tl.load(q_ptr + bh * N_Q * D + rows[:, None] * D + dims[None, :], mask=rows[:, None] < N_Q, other=0.0)
        k = tl.load(k_ptr + bh * N_K * D + keys[:, None] * D + dims[None, :], mask=keys[:, None] < N_K, other=0.0)
        v = tl.load(v_ptr + bh * N_K * D + keys[:, None] * D + dims[None, :], mask=keys[:, None] < N_K, other=0.0)
        s = tl.dot(q, tl.trans(k)) * scale
        s = tl.where(keys[None, :] < N_K, s, float("-inf"))
        p = tl.exp(s - tl.max(s, 1)[:, None])
        out = tl.dot(p.to(v.dtype), v) / tl.sum(p, 1)[:, None]
        tl.store(o_ptr + bh * N_Q * D + rows[:, None] * D + dims[None, :], out.to(o_ptr.dtype.element_ty),
                 mask=rows[:, None] < N_Q)

    n_q, d, n_k = q.shape[-2], q.shape[-1], k.shape[-2]
    o = torch.empty_like(q)
    tb.launch(kernel, (triton.cdiv(n_q, block_m), q.numel() // (n_q * d)), q, k, v, o, n_q, n_k,
              1.0 / math.sqrt(d), D=d, BLOCK_M=block_m, BLOCK_N=max(16, triton.next_power_of_2(n_k)))
    return o
'''


def _low_state(cell: str) -> str:
    """ell and acc kept in the inputs' dtype (float16 for float16 inputs) instead of float32."""
    for old, new in (("ell = tl.zeros((BLOCK_M,), dtype=tl.float32)", "ell = tl.zeros((BLOCK_M,), dtype=q.dtype)"),
                     ("acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)", "acc = tl.zeros((BLOCK_M, D), dtype=q.dtype)"),
                     ("ell = ell * alpha + tl.sum(p, 1)", "ell = (ell * alpha + tl.sum(p, 1)).to(q.dtype)"),
                     ("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
                      "acc = (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v, out_dtype=q.dtype)).to(q.dtype)")):
        assert cell.count(old) == 1, old
        cell = cell.replace(old, new)
    return cell


def _low_acc(cell: str) -> str:
    """acc alone kept in the inputs' dtype (ell in float32): off by a few 1e-3 only, on long float16 rows."""
    for old, new in (("acc = tl.zeros((BLOCK_M, D), dtype=tl.float32)", "acc = tl.zeros((BLOCK_M, D), dtype=q.dtype)"),
                     ("acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)",
                      "acc = (acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)).to(q.dtype)")):
        assert cell.count(old) == 1, old
        cell = cell.replace(old, new)
    return cell


def _v_every_block(cell: str) -> str:
    """V loaded for every key block; the K load and the block's work under `if start < end:` (skipped past the
    diagonal): what a learner adding a skip to Exercise 1's loop may write."""
    lines = cell.splitlines(keepends=True)
    first = next(i for i, line in enumerate(lines) if "k = tl.load(k_ptr" in line)
    last = next(i for i, line in enumerate(lines) if line.strip() == "m = m_new")
    body = [line for line in lines[first:last + 1] if "v = tl.load(v_ptr" not in line]
    load_v = [line for line in lines[first:last + 1] if "v = tl.load(v_ptr" in line]
    lines[first:last + 1] = load_v + ["            if start < end:\n"] + ["    " + line for line in body]
    loop = next(i for i, line in enumerate(lines) if "for start in range(0, N_K, BLOCK_N):" in line)
    lines.insert(loop, "        end = tl.minimum(N_K, first + BLOCK_M + N_K - N_Q)\n")
    return "".join(lines)


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        "constant": _EX1 + "    return torch.zeros_like(q)\n",
        "helper": _EX1 + "    return attention.tiled_attention(q, k, v, block=block_m).to(q.dtype)\n",
        "sdpa": _EX1 + "    return F.scaled_dot_product_attention(q, k, v)\n",
        "visible_only": _kernel(_EX1, out_dtype="tl.float16").replace(   # float16 out, whatever came in
            "o = torch.empty_like(q)", "o = torch.empty_like(q, dtype=torch.float16)"),
        "typical": _kernel(_EX1, m0="0.0"),                 # a row whose scores all lie far below 0: 0 / 0
        "no_rescale": _kernel(_EX1, rescale="acc"),
        "values_without_other": _kernel(_EX1, v_other=""),  # padded rows of V: NaN under poison, 0 * NaN = NaN
        "per_query_row": _kernel(_EX1, grid="(n_q, q.numel() // (n_q * d))", block_m="1"),
        "scores_stored": _kernel(_EX1, store_scores=True),
        "q_in_loop": _kernel(_EX1, q_in_loop=True),
        "one_tile": _ONE_TILE,                              # all keys in one tile, one-pass softmax: no streaming
        "float16_state": _low_state(_kernel(_EX1)),         # ell and acc in float16: off on long peaked rows
        "float16_scores": _kernel(_EX1).replace(            # q k^T accumulated in float16
            "s = tl.dot(q, tl.trans(k)) * scale",
            "s = tl.dot(q, tl.trans(k), out_dtype=q.dtype).to(tl.float32) * scale"),
        # review v3r3: right on the CPU, refused by a GPU (M1)
        "r3_output_without_device": _kernel(_EX1).replace("o = torch.empty_like(q)",
                                                          "o = torch.empty(q.shape, dtype=q.dtype)"),
        "r3_zeros_without_device": _kernel(_EX1).replace("o = torch.empty_like(q)",
                                                         "o = torch.zeros(q.shape, dtype=q.dtype)"),
        "r3_float16_acc": _low_acc(_kernel(_EX1)),          # review v3r3 minor 1: failed by 10 % only
    },
    "ex2-solution": {
        "constant": _EX2 + "    return torch.zeros_like(q)\n",
        "helper": _EX2 + "    return attention.tiled_attention(q, k, v, causal=True, block=block_m).to(q.dtype)\n",
        "sdpa_is_causal": _EX2 + "    return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n",
        "visible_only": _kernel(_EX2, causal=True, guard=False),   # N_q <= N_k only: rows with no key give NaN
        "typical": _kernel(_EX2, causal=True, end="tl.minimum(N_K, first + BLOCK_M)", diagonal="rows[:, None]"),
        "no_skip": _kernel(_EX2, causal=True, end="N_K"),           # every block loaded, then masked
        "masked_loads": _kernel(_EX2, causal=True, end="N_K",       # loads issued with an all-False mask
                                load_mask="tl.where(start <= first + BLOCK_M - 1 + N_K - N_Q, inside, False)"),
        "m_zero": _kernel(_EX2, causal=True, m0="0.0"),
        "upper_left_mask_only": _kernel(_EX2, causal=True, diagonal="rows[:, None]"),
        "float16_state": _low_state(_kernel(_EX2, causal=True)),
        "r3_output_without_device": _kernel(_EX2, causal=True).replace("o = torch.empty_like(q)",
                                                                       "o = torch.empty(q.shape, dtype=q.dtype)"),
        # M3: V loaded for every key block (K and the dots skipped past the diagonal); Q reloaded per key block
        "r3_v_every_block": _v_every_block(_kernel(_EX2, causal=True, end="N_K")),
        "r3_q_in_loop": _kernel(_EX2, causal=True, q_in_loop=True),
        "r3_float16_acc": _low_acc(_kernel(_EX2, causal=True)),
    },
    "ex3-solution": {
        "constant": _EX3 + "    return torch.zeros(q_t.shape, dtype=q_t.dtype, device=q_t.device)\n",
        "helper": _decode('''\
    if t == 0:
        cache.update(attention.allocate_kv_cache(k_t.shape[0], max_len, k_t.shape[1], k_t))
    return attention.gqa_decode_step(q_t, k_t, v_t, cache, t)
'''),
        "visible_only": _decode(_ALLOCATE + _ATTEND.replace("n_heads // n_kv, d)", "2, d)")),   # a group of 2
        "typical": _decode('''\
    n_heads, d = q_t.shape
    n_kv = k_t.shape[0]
    if t == 0:
        cache["k"], cache["v"] = k_t[:, None], v_t[:, None]
    else:                                                  # the cache grows: a copy of all of it at every step
        cache["k"] = torch.cat([cache["k"], k_t[:, None]], dim=1)
        cache["v"] = torch.cat([cache["v"], v_t[:, None]], dim=1)
    q = q_t.reshape(n_kv, n_heads // n_kv, d)
    weights = torch.softmax(q @ cache["k"].transpose(-2, -1) / math.sqrt(d), dim=-1)
    return (weights @ cache["v"]).reshape(n_heads, -1)
'''),
        "no_device": _decode(_ALLOCATE.replace(", device=k_t.device", "").replace(", device=v_t.device", "")
                             + _ATTEND),
        "heads_modulo": _decode(_ALLOCATE + _ATTEND.replace(
            "q = q_t.reshape(n_kv, n_heads // n_kv, d)",
            "q = q_t.reshape(n_heads // n_kv, n_kv, d).transpose(0, 1)   # head h on KV head h % n_kv")),
        "repeat_kv": _decode(_ALLOCATE + '''\
    cache["k"][:, t] = k_t
    cache["v"][:, t] = v_t
    keys = cache["k"][:, :t + 1].repeat_interleave(n_heads // n_kv, dim=0)     # one copy per query head
    values = cache["v"][:, :t + 1].repeat_interleave(n_heads // n_kv, dim=0)
    weights = torch.softmax(q_t[:, None] @ keys.transpose(-2, -1) / math.sqrt(d), dim=-1)
    return (weights @ values)[:, 0]
'''),
        "read_before_write": _decode(_ALLOCATE + _ATTEND.replace(
            "    cache[\"k\"][:, t] = k_t\n    cache[\"v\"][:, t] = v_t\n", "").replace(
            "return (weights @ values).reshape(n_heads, -1)",
            "out = (weights @ values).reshape(n_heads, -1)\n    cache[\"k\"][:, t] = k_t\n"
            "    cache[\"v\"][:, t] = v_t\n    return out").replace("[:, :t + 1]", "[:, :t]")),
    },
}

# Lesson 06's review v3r3 (major M1), carried here: torch work around the launch was unseen by the traffic counter.
_EX1_MODEL = source(cell_by_grade_id(load(solution_path("11_attention")), "ex1-solution"))
WRONG["ex1-solution"]["r5_float32_output_cast_by_torch"] = _EX1_MODEL.replace(
    "    o = torch.empty_like(q)\n", "    o = torch.empty_like(q, dtype=torch.float32)   # cast after the kernel\n").replace(
    "    return o\n", "    return o.to(q.dtype)\n")
WRONG["ex1-solution"]["r5_normalised_again_by_torch"] = _EX1_MODEL.replace(
    "    return o\n", "    return o / o.new_ones(()).sum()   # a no-op division, done by torch\n")
assert _EX1_MODEL not in (WRONG["ex1-solution"]["r5_float32_output_cast_by_torch"],
                          WRONG["ex1-solution"]["r5_normalised_again_by_torch"])

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
