"""Plausible wrong answers to lesson 11's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: 'constant' (a fixed plausible
value), 'helper' (the course's own helper, which off_limits blocks), 'visible_only' (right on the visible test's input
only), 'typical' (the lesson's typical mistake, used in the full nbgrader pipeline), and more: an unstable softmax, a
running sum never rescaled, stored blocks, the scores built in numpy, a query block against all keys, a causal mask off
by one, SDPA called inside, several backends enabled at once, the whole prefix recomputed at every step.
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''\
def streaming_logsumexp(blocks) -> torch.Tensor:
    """Row-wise logsumexp over a stream of (rows, width) blocks read once, with a running max and sum per row."""
'''
_EX2 = '''\
def tiled_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    block: int = 32) -> torch.Tensor:
    """softmax(q k^T / sqrt(d)) v, streaming blocks of k and v past blocks of q (FlashAttention's forward pass)."""
'''
_EX3 = '''\
def attention_with_fallback(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, preferred: list, **kwargs):
    """(SDPA output, backend) for the first backend of `preferred` that can run these inputs, tried one at a time."""
'''
_EX4 = '''\
def kv_decode_step(x_t: torch.Tensor, cache: dict, wq: torch.Tensor, wk: torch.Tensor,
                   wv: torch.Tensor) -> torch.Tensor:
    """One decoding step: attend from x_t's query over all cached keys and values, this token's included."""
'''


def _tiled(rescale_sum: str = "s * alpha", mask: str = "j > i", last: str = "qs + rows if causal else n_k",
           key_block: str = "block", scores_line: str = "scores = qb @ k[..., ks:ks + kb, :].transpose(-2, -1)") -> str:
    """A tiled attention with the given running-sum update, causal mask, key range and key block size."""
    return _EX2 + f'''\
    n_q, n_k = q.shape[-2], k.shape[-2]
    scale = 1.0 / math.sqrt(q.shape[-1])
    kb = {key_block}
    out = torch.empty(*q.shape[:-1], v.shape[-1], dtype=q.dtype, device=q.device)
    for qs in range(0, n_q, block):
        qb = q[..., qs:qs + block, :] * scale
        rows = qb.shape[-2]
        m = torch.full((*q.shape[:-2], rows), float("-inf"), dtype=q.dtype, device=q.device)
        s = torch.zeros_like(m)
        acc = torch.zeros(*q.shape[:-2], rows, v.shape[-1], dtype=q.dtype, device=q.device)
        for ks in range(0, {last}, kb):
            {scores_line}
            if causal:
                i = torch.arange(qs, qs + rows, device=q.device)[:, None]
                j = torch.arange(ks, ks + scores.shape[-1], device=q.device)[None, :]
                scores = scores.masked_fill({mask}, float("-inf"))
            new = torch.maximum(m, scores.amax(dim=-1))
            p = torch.exp(scores - new[..., None])
            alpha = torch.exp(m - new)
            s = {rescale_sum} + p.sum(dim=-1)
            acc = acc * alpha[..., None] + p @ v[..., ks:ks + kb, :]
            m = new
        out[..., qs:qs + rows, :] = acc / s[..., None]
    return out
'''


def _decode(body: str) -> str:
    """A decoding step with the given body."""
    return _EX4 + body


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        "constant": _EX1 + '''\
    return torch.zeros(4, dtype=torch.float64)
''',
        "helper": _EX1 + '''\
    from gpucourse import attention

    return attention.online_logsumexp(blocks)
''',
        "visible_only": _EX1 + '''\
    m = s = None
    for _, block in zip(range(4), blocks):          # the visible stream has 4 blocks
        block_max = block.max(dim=1).values
        if m is None:
            m, s = block_max, torch.exp(block - block_max[:, None]).sum(dim=1)
        else:
            new = torch.maximum(m, block_max)
            s = s * torch.exp(m - new) + torch.exp(block - new[:, None]).sum(dim=1)
            m = new
    return m + torch.log(s)
''',
        "typical": _EX1 + '''\
    m = s = None
    for block in blocks:
        block_max = block.max(dim=1).values
        if m is None:
            m, s = block_max, torch.exp(block - block_max[:, None]).sum(dim=1)
        else:
            new = torch.maximum(m, block_max)
            s = s + torch.exp(block - new[:, None]).sum(dim=1)      # the old sum is not rescaled
            m = new
    return m + torch.log(s)
''',
        "unstable": _EX1 + '''\
    s = None
    for block in blocks:
        part = torch.exp(block).sum(dim=1)                         # overflows at 1e4
        s = part if s is None else s + part
    return torch.log(s)
''',
        "stores_blocks": _EX1 + '''\
    kept = list(blocks)                                            # one pass, but every block stays in memory
    m = torch.stack([b.max(dim=1).values for b in kept]).max(dim=0).values
    s = sum(torch.exp(b - m[:, None]).sum(dim=1) for b in kept)
    return m + torch.log(s)
''',
        "concatenates": _EX1 + '''\
    return torch.logsumexp(torch.cat(list(blocks), dim=1), dim=1)
''',
    },
    "ex2-solution": {
        "constant": _EX2 + '''\
    return torch.zeros(*q.shape[:-1], v.shape[-1], dtype=q.dtype)
''',
        "helper": _EX2 + '''\
    from gpucourse import attention

    return attention.tiled_attention(q, k, v, causal=causal, block=block)
''',
        "visible_only": _tiled(last="n_k", mask="j > j"),        # ignores the causal mask: the visible test has none
        "typical": _EX2 + '''\
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])    # the whole N_q x N_k matrix
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
''',
        "no_rescale": _tiled(rescale_sum="s"),
        "mask_off_by_one": _tiled(mask="j >= i"),
        "query_block_all_keys": _tiled(key_block="n_k"),
        "numpy_scores": _EX2 + '''\
    import numpy as np

    scores = torch.from_numpy(np.asarray(q) @ np.asarray(k).swapaxes(-1, -2)) / math.sqrt(q.shape[-1])
    if causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
        scores = scores.masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v
''',
        "sdpa": _EX2 + '''\
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
''',
    },
    "ex3-solution": {
        "constant": _EX3 + '''\
    return F.scaled_dot_product_attention(q, k, v, **kwargs), SDPBackend.MATH
''',
        "helper": _EX3 + '''\
    from gpucourse import attention

    return attention.sdpa_with_fallback(q, k, v, preferred, **kwargs)
''',
        "visible_only": _EX3 + '''\
    for backend in preferred:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v), backend     # forgets kwargs
        except RuntimeError:
            continue
    raise RuntimeError("no backend can run these inputs")
''',
        "typical": _EX3 + '''\
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with sdpa_kernel(preferred):                 # all at once: torch picks, in its own order
            return F.scaled_dot_product_attention(q, k, v, **kwargs), preferred[0]
''',
        "last_that_runs": _EX3 + '''\
    result = None
    for backend in preferred:                        # does not stop at the first that runs
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with sdpa_kernel(backend):
                    result = F.scaled_dot_product_attention(q, k, v, **kwargs), backend
        except RuntimeError:
            continue
    if result is None:
        raise RuntimeError("no backend can run these inputs")
    return result
''',
        "returns_none": _EX3 + '''\
    for backend in preferred:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, **kwargs), backend
        except RuntimeError:
            continue
    return None, None                                # hides the failure
''',
    },
    "ex4-solution": {
        "constant": _decode('''\
    return torch.zeros(wv.shape[1], dtype=x_t.dtype)
'''),
        "helper": _decode('''\
    from gpucourse import attention

    return attention.kv_cache_step(x_t, cache, wq, wk, wv)
'''),
        "visible_only": _decode('''\
    q, k, v = x_t @ wq, x_t @ wk, x_t @ wv
    cache["k"] = torch.cat([cache["k"], k[None]]) if "k" in cache else k[None]
    cache["v"] = torch.cat([cache["v"], v[None]]) if "v" in cache else v[None]
    weights = torch.softmax(cache["k"] @ q / math.sqrt(8), dim=0)     # the visible head size
    return weights @ cache["v"]
'''),
        "typical": _decode('''\
    cache["x"] = torch.cat([cache["x"], x_t[None]]) if "x" in cache else x_t[None]
    xs = cache["x"]                                   # recomputes every earlier key and value at each step
    keys, values = xs @ wk, xs @ wv
    weights = torch.softmax(keys @ (x_t @ wq) / math.sqrt(wq.shape[1]), dim=0)
    return weights @ values
'''),
        "recompute_all_outputs": _decode('''\
    cache["x"] = torch.cat([cache["x"], x_t[None]]) if "x" in cache else x_t[None]
    xs = cache["x"]
    full = F.scaled_dot_product_attention((xs @ wq)[None], (xs @ wk)[None], (xs @ wv)[None], is_causal=True)[0]
    return full[-1]
'''),
        "before_append": _decode('''\
    q, k, v = x_t @ wq, x_t @ wk, x_t @ wv
    if "k" not in cache:
        cache["k"], cache["v"] = k[None], v[None]
        return v                                      # the first token: itself
    weights = torch.softmax(cache["k"] @ q / math.sqrt(q.shape[-1]), dim=0)   # the cache before this token
    out = weights @ cache["v"]
    cache["k"] = torch.cat([cache["k"], k[None]])
    cache["v"] = torch.cat([cache["v"], v[None]])
    return out
'''),
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
