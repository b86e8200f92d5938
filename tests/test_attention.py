"""Unit tests of gpucourse.attention: costs, reference implementations, the GQA KV cache, the tile picture and
the instruments."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

from gpucourse import attention  # noqa: E402


def _qkv(*lead, n_q=20, n_k=20, d=8, d_v=8, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*lead, n_q, d, generator=g, dtype=dtype), torch.randn(*lead, n_k, d, generator=g, dtype=dtype),
            torch.randn(*lead, n_k, d_v, generator=g, dtype=dtype))


# --------------------------------------------------------------------------- costs

def test_attention_costs_counts_flops_and_bytes_of_each_stage():
    qk, softmax, pv, fused = attention.attention_costs(4, 6, 2, batch=1, heads=1, bytes_per_element=2)
    assert qk.flops == 2 * 4 * 6 * 2 and qk.bytes == 2 * (4 * 2 + 6 * 2 + 4 * 6)
    assert softmax.flops == 5 * 24 and softmax.bytes == 2 * 2 * 24
    assert pv.flops == qk.flops and pv.bytes == 2 * (24 + 12 + 8)
    assert fused.flops == qk.flops + softmax.flops + pv.flops and fused.bytes == 2 * (8 + 24 + 8)
    big = attention.attention_costs(2048, 2048, 64)
    assert big[3].intensity > big[0].intensity > big[1].intensity


def test_unfused_intensity_is_about_d_for_long_sequences():
    qk = attention.attention_costs(65536, 65536, 64)[0]
    assert 60 < qk.intensity < 64


def test_score_matrix_and_kv_cache_bytes():
    assert attention.score_matrix_bytes(8192, batch=8, heads=32) == 8 * 32 * 8192 ** 2 * 2
    assert attention.kv_cache_bytes(32, 32, 128, 4096) == 2 * 2**30
    assert attention.kv_cache_bytes(32, 8, 128, 32768, batch=2, bytes_per_element=1) == 4 * 2**30


@pytest.mark.parametrize("call", [lambda: attention.attention_costs(0, 4, 4), lambda: attention.score_matrix_bytes(-1),
                                  lambda: attention.kv_cache_bytes(1, 1, 1, 1, batch=0),
                                  lambda: attention.attention_costs(4, 4, 4, heads=0)])
def test_cost_helpers_refuse_sizes_below_one(call):
    with pytest.raises(ValueError):
        call()


def test_cost_helpers_refuse_non_integers():
    with pytest.raises(TypeError, match="n"):
        attention.score_matrix_bytes(8.5)


# --------------------------------------------------------------------------- reference implementations

@pytest.mark.parametrize("causal", [False, True])
def test_naive_and_tiled_attention_equal_sdpa(causal):
    q, k, v = _qkv(2, 3, n_q=45, n_k=45, d=8, d_v=5)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert torch.allclose(attention.naive_attention(q, k, v, causal=causal), expected, atol=1e-12)
    for block in (1, 7, 16, 64):
        assert torch.allclose(attention.tiled_attention(q, k, v, causal=causal, block=block), expected, atol=1e-12)


def test_tiled_attention_with_more_keys_than_queries_and_large_scores():
    q, k, v = _qkv(3, n_q=10, n_k=77)
    q = q * 400
    expected = F.scaled_dot_product_attention(q, k, v)
    assert torch.allclose(attention.tiled_attention(q, k, v, block=16), expected, atol=1e-10)


def test_tiled_attention_never_builds_the_score_matrix():
    q, k, v = _qkv(1, 2, n_q=128, n_k=128, d=4, d_v=4)
    with attention.OpRecorder() as tiled:
        attention.tiled_attention(q, k, v, block=16)
    with attention.OpRecorder() as naive:
        attention.naive_attention(q, k, v)
    assert naive.largest == 2 * 128 * 128
    assert tiled.largest <= 2 * max(2 * 16 * 16, 128 * 4)
    assert tiled.work >= 2 * 128 * 128 * 8


def test_attention_helpers_refuse_bad_inputs():
    q, k, v = _qkv(n_q=4, n_k=6)
    with pytest.raises(TypeError, match="q"):
        attention.naive_attention(q.numpy(), k, v)
    with pytest.raises(ValueError, match="shapes"):
        attention.tiled_attention(q, k[..., :3], v)
    with pytest.raises(ValueError, match="causal"):
        attention.tiled_attention(q, k, v, causal=True)
    with pytest.raises(ValueError, match="block"):
        attention.tiled_attention(q, k, v, block=0)


# --------------------------------------------------------------------------- the KV cache and the tile picture

def test_gqa_decode_with_a_preallocated_cache_equals_full_causal_attention():
    g = torch.Generator().manual_seed(3)
    n_heads, n_kv, d, steps = 6, 2, 4, 12
    q = torch.randn(steps, n_heads, d, generator=g, dtype=torch.float64)
    k, v = (torch.randn(steps, n_kv, d, generator=g, dtype=torch.float64) for _ in range(2))
    cache = attention.allocate_kv_cache(n_kv, 16, d, q)
    pointer, outs, largest = cache["k"].data_ptr(), [], []
    for t in range(steps):
        with attention.OpRecorder() as rec:
            outs.append(attention.gqa_decode_step(q[t], k[t], v[t], cache, t))
        largest.append(rec.largest)
    assert cache["k"].data_ptr() == pointer and tuple(cache["v"].shape) == (n_kv, 16, d)
    full = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1), is_causal=True,
                                          enable_gqa=True).transpose(0, 1)
    assert torch.allclose(torch.stack(outs), full, atol=1e-12)
    assert largest == [n_heads * max(t + 1, d) for t in range(steps)]   # the scores or the output, never the cache
    meta = torch.empty(n_heads, d, device="meta", dtype=torch.float16)
    cache = attention.allocate_kv_cache(n_kv, 8, d, meta)
    assert cache["k"].device.type == "meta" and cache["v"].dtype == torch.float16
    out = attention.gqa_decode_step(meta, meta[:n_kv], meta[:n_kv], cache, 5)
    assert out.device.type == "meta" and tuple(out.shape) == (n_heads, d)
    with pytest.raises(ValueError, match="multiple"):
        attention.gqa_decode_step(q[0, :5], k[0], v[0], attention.allocate_kv_cache(n_kv, 4, d, q), 0)


@pytest.mark.parametrize("align", ["lower_right", "upper_left"])
def test_draw_attention_tiles_counts_computed_masked_and_skipped_tiles(align):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ax = attention.draw_attention_tiles(48, 20, 16, 8, align=align)
    title = ax.get_title()
    if align == "lower_right":   # key j visible to query i if j <= i - 28: rows 0-27 see nothing
        assert "0 tiles whole, 4 masked, 5 skipped; rows 0-27 see no key" in title
    else:
        assert "5 tiles whole, 3 masked, 1 skipped" in title and "see no key" not in title
    plt.close("all")
    _, axes = plt.subplots()
    assert attention.draw_attention_tiles(4, 4, 2, 2, ax=axes) is axes
    plt.close("all")
    with pytest.raises(ValueError, match="align"):
        attention.draw_attention_tiles(4, 4, 2, 2, align="diagonal")


# --------------------------------------------------------------------------- instruments

def test_op_recorder_counts_matmul_work_and_skips_views():
    a, b = torch.randn(3, 4), torch.randn(4, 5)
    c, e = torch.randn(2, 3, 4), torch.randn(2, 4, 6)
    with attention.OpRecorder() as rec:
        a @ b
        a.t()
        a.expand(2, 3, 4)
        torch.exp(a)
        c @ e
    names = [op.name for op in rec.ops]
    assert "mm" in names and "bmm" in names
    mm = next(op for op in rec.ops if op.name == "mm")
    assert mm.work == 3 * 4 * 5 and mm.new_elements == 15
    assert all(op.new_elements == 0 and op.work == 0 for op in rec.ops if op.name in ("t", "expand"))
    assert next(op for op in rec.ops if op.name == "bmm").work == 2 * 3 * 4 * 6
    assert rec.largest == 36 and rec.largest_op == "bmm" and not rec.used("scaled_dot_product")
    with attention.OpRecorder() as rec:
        F.scaled_dot_product_attention(*_qkv(1, 1, dtype=torch.float32))
    assert rec.used("scaled_dot_product")


def test_op_recorder_counts_matrix_vector_products():
    m, x = torch.randn(7, 3), torch.randn(3)
    with attention.OpRecorder() as rec:
        m @ x
        x @ x
    assert [op.work for op in rec.ops] == [21, 3]


def test_median_ms_times_a_call():
    assert attention.median_ms(lambda: math.sqrt(2), repeats=3) >= 0
    with pytest.raises(ValueError):
        attention.median_ms(lambda: None, repeats=0)
