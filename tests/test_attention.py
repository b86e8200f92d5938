"""Unit tests of gpucourse.attention: costs, reference implementations, the SDPA fallback and the instruments."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

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


def test_online_logsumexp_is_exact_and_stable():
    data = torch.randn(3, 50, dtype=torch.float64) * 30 + torch.tensor([[1e4], [-1e4], [0.0]], dtype=torch.float64)
    stream = attention.OneShotStream(data, [1, 20, 29])
    assert torch.allclose(attention.online_logsumexp(stream), torch.logsumexp(data, dim=1), rtol=0, atol=1e-9)
    with pytest.raises(ValueError):
        attention.online_logsumexp(iter([]))


def test_kv_cache_decoding_equals_full_attention_with_linear_work():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(30, 12, generator=g, dtype=torch.float64)
    wq, wk, wv = (torch.randn(12, 6, generator=g, dtype=torch.float64) for _ in range(3))
    full = F.scaled_dot_product_attention((x @ wq)[None], (x @ wk)[None], (x @ wv)[None], is_causal=True)[0]
    assert torch.allclose(attention.decode_with_cache(x, wq, wk, wv), full, atol=1e-12)
    cache, work = {}, []
    for t in range(30):
        with attention.OpRecorder() as rec:
            attention.kv_cache_step(x[t], cache, wq, wk, wv)
        work.append(rec.work)
    steps = np.diff(work)[1:]  # from the second token on, the cache grows by concatenation
    assert (steps == steps[0]).all() and steps[0] > 0  # the same extra work per token: linear in t
    with pytest.raises(TypeError, match="cache"):
        attention.kv_cache_step(x[0], [], wq, wk, wv)


# --------------------------------------------------------------------------- SDPA backends

def test_sdpa_backends_and_the_default_enabled_set():
    names = [b.name for b in attention.sdpa_backends()]
    assert names[0] == "MATH" and "FLASH_ATTENTION" in names
    assert {"MATH", "FLASH_ATTENTION"} <= attention.enabled_backends()
    with sdpa_kernel(SDPBackend.MATH):
        assert attention.enabled_backends() == {"MATH"}


def test_backends_that_run_reports_math_and_the_reasons_of_refusals():
    q, k, v = _qkv(1, 1, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the helper keeps the refusals' warnings to itself
        found = attention.backends_that_run(q, k, v)
    assert found["MATH"] == "runs"
    assert all(value == "runs" or value.startswith("cannot run: ") for value in found.values())
    if not torch.cuda.is_available():
        assert found["EFFICIENT_ATTENTION"].startswith("cannot run")
        assert attention.backends_that_run(q, k, v, dropout_p=0.5)["FLASH_ATTENTION"].startswith("cannot run")


def test_fake_sdpa_records_enabled_backends_and_refuses_unavailable_ones():
    q, k, v = _qkv(1, 2, dtype=torch.float32)
    with attention.FakeSDPA({"EFFICIENT_ATTENTION"}) as fake:
        with sdpa_kernel(SDPBackend.MATH), pytest.raises(RuntimeError, match="No available kernel"):
            F.scaled_dot_product_attention(q, k, v)
        with sdpa_kernel(SDPBackend.EFFICIENT_ATTENTION):  # not on a CPU for real: the fake runs it exactly
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert fake.calls == [frozenset({"MATH"}), frozenset({"EFFICIENT_ATTENTION"})]
    assert torch.allclose(out, attention.naive_attention(q, k, v, causal=True), atol=1e-5)
    with pytest.raises(ValueError, match="available"):
        attention.FakeSDPA({"FAST"})


def test_sdpa_with_fallback_takes_the_first_that_runs_one_at_a_time():
    q, k, v = _qkv(1, 2, dtype=torch.float32)
    with attention.FakeSDPA({"FLASH_ATTENTION", "MATH"}) as fake:
        _, used = attention.sdpa_with_fallback(q, k, v, [SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION,
                                                         SDPBackend.MATH])
    assert used == SDPBackend.FLASH_ATTENTION
    assert fake.calls == [frozenset({"CUDNN_ATTENTION"}), frozenset({"FLASH_ATTENTION"})]
    with attention.FakeSDPA({"MATH"}), pytest.raises(RuntimeError, match="none of the backends"):
        attention.sdpa_with_fallback(q, k, v, [SDPBackend.FLASH_ATTENTION])


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


def test_one_shot_stream_hands_out_blocks_once_and_counts_what_is_kept():
    data = torch.arange(20.0).reshape(2, 10)
    stream = attention.OneShotStream(data, [3, 3, 4])
    kept = list(stream)
    assert [tuple(b.shape) for b in kept] == [(2, 3), (2, 3), (2, 4)] and torch.equal(torch.cat(kept, 1), data)
    assert stream.blocks_read == 3 and stream.max_alive == 2
    with pytest.raises(RuntimeError, match="once"):
        iter(stream)
    loop = attention.OneShotStream(data, [5, 5])
    for block in loop:
        block.sum()
    assert loop.max_alive == 1
    with pytest.raises(ValueError, match="widths"):
        attention.OneShotStream(data, [3, 3])
    with pytest.raises(TypeError, match="data"):
        attention.OneShotStream(data[0], [10])


def test_numpy_blocked_refuses_conversions_and_restores_them():
    t = torch.ones(3)
    with attention.numpy_blocked("Exercise 9"):
        for convert in (lambda: np.asarray(t), lambda: t.numpy(), lambda: np.from_dlpack(t)):
            with pytest.raises(TypeError, match="Exercise 9"):
                convert()
        assert torch.equal(t * 2, torch.full((3,), 2.0))
    assert np.asarray(t).tolist() == [1.0, 1.0, 1.0] and t.numpy().sum() == 3
    with pytest.raises(KeyError):
        with attention.numpy_blocked():
            raise KeyError("inside")
    assert t.numpy().sum() == 3


def test_median_ms_times_a_call():
    assert attention.median_ms(lambda: math.sqrt(2), repeats=3) >= 0
    with pytest.raises(ValueError):
        attention.median_ms(lambda: None, repeats=0)


def test_first_sentence_keeps_a_refusal_short():
    assert attention._first_sentence("No viable backend was found. This is likely due to x.\nmore") == \
        "No viable backend was found."
    assert attention._first_sentence("") == "no reason given."
