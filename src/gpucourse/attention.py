"""Attention on a GPU: its cost, the N x N wall, the tiled (FlashAttention) forward pass in torch, a picture of the
tiles a causal kernel computes or skips, and a grouped-query KV cache; with the instrument that grades the cache.

Taught in lesson 11_attention (its Triton kernel is the learner's; lesson 06's traffic counter grades it). PyTorch is
imported lazily. ``OpRecorder`` (a ``TorchDispatchMode``) records every operation's new output and its work.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, positive_int
from gpucourse.memory import OpObserver, _tensors

# --------------------------------------------------------------------------- cost on the roofline


@dataclass(frozen=True)
class StageCost:
    """FLOPs and bytes of one stage of attention, read from and written to the GPU's main memory."""

    stage: str
    flops: int
    bytes: int

    @property
    def intensity(self) -> float:
        """FLOPs per byte moved (the roofline's x axis)."""
        return self.flops / self.bytes


def attention_costs(n_q: int, n_k: int, d: int, *, batch: int = 1, heads: int = 1,
                    bytes_per_element: int = 2) -> list[StageCost]:
    """Unfused attention's three stages (S = QK^T, P = softmax(S), O = PV), then the fused one (lesson 11_attention).

    Unfused, each stage reads its inputs from and writes its output to memory, so S and P (n_q x n_k per head) cross
    it four times; softmax is counted as 5 FLOPs per score (max, subtract, exp, sum, divide). Fused (FlashAttention)
    reads Q, K, V and writes O once: the same FLOPs, with only the small tensors moved.
    """
    n_q, n_k, d = positive_int("n_q", n_q), positive_int("n_k", n_k), positive_int("d", d)
    bh = positive_int("batch", batch) * positive_int("heads", heads)
    size = positive_int("bytes_per_element", bytes_per_element)
    scores = bh * n_q * n_k
    q, kv, o = bh * n_q * d, bh * n_k * d, bh * n_q * d
    stages = [
        StageCost("S = Q K^T", 2 * scores * d, size * (q + kv + scores)),
        StageCost("P = softmax(S)", 5 * scores, size * 2 * scores),
        StageCost("O = P V", 2 * scores * d, size * (scores + kv + o)),
    ]
    stages.append(StageCost("fused, ideal (FlashAttention)", sum(s.flops for s in stages), size * (q + 2 * kv + o)))
    return stages


def score_matrix_bytes(n: int, *, batch: int = 1, heads: int = 1, bytes_per_element: int = 2) -> int:
    """Bytes of the n x n attention scores for every sequence and head (the memory wall; lesson 11_attention)."""
    n = positive_int("n", n)
    return positive_int("batch", batch) * positive_int("heads", heads) * n * n * positive_int(
        "bytes_per_element", bytes_per_element)


def kv_cache_bytes(layers: int, kv_heads: int, head_dim: int, context: int, *, batch: int = 1,
                   bytes_per_element: int = 2) -> int:
    """Bytes of a KV cache: one key and one value vector per layer, KV head and token (lesson 11_attention)."""
    return (2 * positive_int("layers", layers) * positive_int("kv_heads", kv_heads) * positive_int("head_dim", head_dim)
            * positive_int("context", context) * positive_int("batch", batch)
            * positive_int("bytes_per_element", bytes_per_element))


# --------------------------------------------------------------------------- reference implementations


def _check_qkv(q, k, v) -> None:
    """Raise TypeError/ValueError unless q, k, v are tensors of shape (..., n_q, d), (..., n_k, d), (..., n_k, d_v)."""
    import torch

    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{name} must have at least 2 dimensions (..., sequence, head size), got {tuple(t.shape)}")
    if (q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2] or q.shape[:-2] != k.shape[:-2]
            or k.shape[:-2] != v.shape[:-2]):
        raise ValueError(f"q, k, v shapes do not fit: q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} "
                         "(expected (..., n_q, d), (..., n_k, d), (..., n_k, d_v))")


def naive_attention(q, k, v, *, causal: bool = False, scale: float | None = None):
    """softmax(Q K^T * scale) V with the whole score matrix in memory (the unfused baseline; lesson 11_attention)."""
    import torch

    _check_qkv(q, k, v)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    scores = (q @ k.transpose(-2, -1)) * scale
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def tiled_attention(q, k, v, *, causal: bool = False, block: int = 32):
    """FlashAttention's forward pass in torch: K, V blocks streamed past each Q block (lesson 11_attention)."""
    import torch

    _check_qkv(q, k, v)
    block = positive_int("block", block)
    n_q, n_k = q.shape[-2], k.shape[-2]
    if causal and n_q != n_k:
        raise ValueError(f"causal attention needs as many queries as keys here, got {n_q} and {n_k}")
    scale = 1.0 / math.sqrt(q.shape[-1])
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    for qs in range(0, n_q, block):
        qb = q[..., qs:qs + block, :] * scale
        rows = qb.shape[-2]
        m = torch.full((*q.shape[:-2], rows), float("-inf"), dtype=q.dtype, device=q.device)
        s = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-2], rows, v.shape[-1], dtype=q.dtype, device=q.device)
        for ks in range(0, qs + rows if causal else n_k, block):
            scores = qb @ k[..., ks:ks + block, :].transpose(-2, -1)
            if causal and ks + block > qs:
                i = torch.arange(qs, qs + rows, device=q.device)[:, None]
                j = torch.arange(ks, ks + scores.shape[-1], device=q.device)[None, :]
                scores = scores.masked_fill(j > i, float("-inf"))
            new = torch.maximum(m, scores.amax(dim=-1))
            p = torch.exp(scores - new[..., None])
            alpha = torch.exp(m - new)
            s = s * alpha + p.sum(dim=-1)
            acc = acc * alpha[..., None] + p @ v[..., ks:ks + block, :]
            m = new
        out[..., qs:qs + rows, :] = acc / s[..., None]
    return out


# --------------------------------------------------------------------------- instruments

_MATMULS = {"mm", "bmm", "addmm", "baddbmm", "addbmm", "mv", "addmv", "dot", "vdot"}


def _macs(name: str, args: tuple) -> int | None:
    """Multiply-adds of a matrix-product op from its arguments' shapes (None if ``name`` is not one)."""
    if name not in _MATMULS:
        return None
    a, b = (args[1], args[2]) if name in ("addmm", "baddbmm", "addbmm", "addmv") else (args[0], args[1])
    if name in ("dot", "vdot"):
        return a.numel()
    if name in ("mv", "addmv"):
        return a.numel()
    return a.numel() * b.shape[-1]


@dataclass
class OpRecord:
    """One operation seen by ``OpRecorder``: its name, the elements of its new outputs, and its work."""

    name: str
    new_elements: int
    work: int


class OpRecorder(OpObserver):
    """Record every torch operation run inside ``with OpRecorder() as rec:`` (any device; lesson 11_attention).

    For each op: the elements of the outputs it allocates (views and in-place results of its inputs do not count) and
    its work: multiply-adds for matrix products, else the elements it reads or writes, whichever is more. ``largest``
    is the biggest new output of any single op, ``work`` the total.
    """

    def __init__(self) -> None:
        self.ops: list[OpRecord] = []

    @property
    def largest(self) -> int:
        """Elements of the largest tensor a single op created (0 if none)."""
        return max((op.new_elements for op in self.ops), default=0)

    @property
    def largest_op(self) -> str:
        """Name of the op that created the largest tensor ('' if none)."""
        return max(self.ops, key=lambda op: op.new_elements).name if self.ops else ""

    @property
    def work(self) -> int:
        """Total work of the recorded ops."""
        return sum(op.work for op in self.ops)

    def used(self, fragment: str) -> bool:
        """True if an op whose name contains ``fragment`` ran (e.g. 'scaled_dot_product')."""
        return any(fragment in op.name for op in self.ops)

    def _observe(self, func: Callable, args: tuple, kwargs: dict) -> object:
        """Run one operation and record the elements it allocated and its work."""
        out = func(*args, **kwargs)
        inputs = _tensors((args, kwargs))
        outputs = _tensors(out)
        seen = {t.untyped_storage().data_ptr() for t in inputs}
        new = sum(t.numel() for t in outputs if t.untyped_storage().data_ptr() not in seen)
        name = func.overloadpacket.__name__
        macs = _macs(name, args)
        work = macs if macs is not None else (max([t.numel() for t in inputs + outputs], default=0)
                                              if new or not outputs else 0)
        self.ops.append(OpRecord(name, new, work))
        return out


def allocate_kv_cache(n_kv_heads: int, max_len: int, head_dim: int, like) -> dict:
    """A KV cache for one sequence: keys and values of shape (n_kv_heads, max_len, head_dim), allocated once, on
    ``like``'s device and dtype, filled in place as tokens arrive (lesson 11_attention's reference)."""
    import torch

    shape = (positive_int("n_kv_heads", n_kv_heads), positive_int("max_len", max_len), positive_int("head_dim", head_dim))
    return {"k": torch.zeros(shape, dtype=like.dtype, device=like.device),
            "v": torch.zeros(shape, dtype=like.dtype, device=like.device)}


def gqa_decode_step(q_t, k_t, v_t, cache: dict, t: int):
    """One decoding step of grouped-query attention with a preallocated cache (lesson 11_attention's reference).

    ``q_t`` (n_heads, d), ``k_t`` and ``v_t`` (n_kv_heads, d); ``cache`` from :func:`allocate_kv_cache`. Writes this
    token's key and value at position ``t`` in place and returns (n_heads, d): query head h attends over KV head
    h // (n_heads // n_kv_heads), positions 0..t.
    """
    n_heads, d = q_t.shape
    n_kv = k_t.shape[0]
    if n_heads % n_kv:
        raise ValueError(f"n_heads ({n_heads}) must be a multiple of n_kv_heads ({n_kv})")
    cache["k"][:, t] = k_t
    cache["v"][:, t] = v_t
    keys, values = cache["k"][:, :t + 1], cache["v"][:, :t + 1]
    q = q_t.reshape(n_kv, n_heads // n_kv, d)
    weights = (q @ keys.transpose(-2, -1) / math.sqrt(d)).softmax(dim=-1)
    return (weights @ values).reshape(n_heads, values.shape[-1])


def draw_attention_tiles(n_q: int, n_k: int, block_m: int, block_n: int, *, align: str = "lower_right", ax=None):
    """Draw the (query block, key block) tiles of a causal attention kernel: which it computes whole, which need the
    mask, which it can skip, and the query rows that see no key at all (lesson 11_attention).

    ``align`` is "lower_right" (query i sees key j if j <= i + n_k - n_q: FlashAttention-2's causal, and
    torch.nn.attention.bias.causal_lower_right) or "upper_left" (j <= i: SDPA's ``is_causal=True``). Each tile is
    judged element by element from the mask; returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.patches import Patch, Rectangle

    n_q, n_k = positive_int("n_q", n_q), positive_int("n_k", n_k)
    block_m, block_n = positive_int("block_m", block_m), positive_int("block_n", block_n)
    if align not in ("lower_right", "upper_left"):
        raise ValueError(f"align must be 'lower_right' or 'upper_left', got {align!r}")
    offset = n_k - n_q if align == "lower_right" else 0
    keep = np.arange(n_k)[None, :] <= np.arange(n_q)[:, None] + offset
    if ax is None:
        _, ax = plt.subplots(figsize=(min(2 + 0.04 * n_k, 9), min(1.5 + 0.04 * n_q, 7)))
    colours = {"computed": "#4c72b0", "masked": "#dd8452", "skipped": "#eeeeee"}
    counts = dict.fromkeys(colours, 0)
    for qs in range(0, n_q, block_m):
        for ks in range(0, n_k, block_n):
            tile = keep[qs:qs + block_m, ks:ks + block_n]
            kind = "computed" if tile.all() else "masked" if tile.any() else "skipped"
            counts[kind] += 1
            ax.add_patch(Rectangle((ks, qs), min(block_n, n_k - ks), min(block_m, n_q - qs),
                                   facecolor=colours[kind], edgecolor="black", linewidth=0.8))
    ax.imshow(np.where(keep, 1.0, np.nan), cmap="Greys", vmin=0, vmax=3, alpha=0.35, aspect="auto",
              extent=(0, n_k, n_q, 0), interpolation="nearest")
    blind = int((~keep.any(axis=1)).sum())
    if blind:
        ax.axhspan(0, blind, xmin=0, xmax=1, facecolor="none", edgecolor="red", hatch="//", linewidth=0)
    ax.set_xlim(0, n_k)
    ax.set_ylim(n_q, 0)
    ax.set_xlabel(f"key position (N_k = {n_k}, blocks of {block_n})")
    ax.set_ylabel(f"query position (N_q = {n_q}, blocks of {block_m})")
    ax.set_title(f"causal, {align.replace('_', '-')} aligned: {counts['computed']} tiles whole, {counts['masked']} "
                 f"masked, {counts['skipped']} skipped" + (f"; rows 0-{blind - 1} see no key" if blind else ""),
                 fontsize=9)
    handles = [Patch(facecolor=c, edgecolor="black", label=k) for k, c in colours.items()]
    if blind:
        handles.append(Patch(facecolor="none", edgecolor="red", hatch="//", label="rows with no key"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
    return ax


def median_ms(fn: Callable[[], object], *, device: object = None, repeats: int = 5, warmup: int = 1) -> float:
    """Median milliseconds of ``fn()`` after ``warmup`` calls, synchronised on ``device`` (gpucourse.timing)."""
    from gpucourse import timing

    return timing.benchmark(fn, warmup=non_negative_int("warmup", warmup), repeats=positive_int("repeats", repeats),
                            device=device).median_s * 1e3


__all__ = ["StageCost", "attention_costs", "score_matrix_bytes", "kv_cache_bytes", "naive_attention",
           "tiled_attention", "OpRecord", "OpRecorder", "allocate_kv_cache", "gqa_decode_step",
           "draw_attention_tiles", "median_ms"]
