"""Attention on a GPU: its cost on the roofline, the N x N wall, online softmax, the tiled (FlashAttention) forward
pass, scaled_dot_product_attention's backends, and the KV cache; with the instruments that grade them.

Taught in lesson 11_attention. PyTorch is imported lazily. The instruments observe behaviour: ``OpRecorder`` (a
``TorchDispatchMode``) records every operation's new output and its work, ``OneShotStream`` hands out blocks once
and notes how many the reader keeps, ``numpy_blocked`` stops tensors leaving torch, and ``FakeSDPA`` plays a device
on which only some ``scaled_dot_product_attention`` backends can run.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
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


def online_logsumexp(blocks: Iterable):
    """log(sum(exp(x))) per row of blocks (rows, width) read once, with a running max and sum (lesson 11_attention)."""
    import torch

    m = s = None
    for block in blocks:
        if not isinstance(block, torch.Tensor) or block.dim() != 2:
            raise TypeError("blocks must yield 2-D tensors (rows, width)")
        block_max = block.max(dim=1).values
        if m is None:
            m, s = block_max, torch.exp(block - block_max[:, None]).sum(dim=1)
            continue
        new = torch.maximum(m, block_max)
        s = s * torch.exp(m - new) + torch.exp(block - new[:, None]).sum(dim=1)
        m = new
    if m is None:
        raise ValueError("blocks must yield at least one block")
    return m + torch.log(s)


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


# --------------------------------------------------------------------------- scaled_dot_product_attention backends

_FLAGS = {"FLASH_ATTENTION": "flash_sdp_enabled", "EFFICIENT_ATTENTION": "mem_efficient_sdp_enabled",
          "MATH": "math_sdp_enabled", "CUDNN_ATTENTION": "cudnn_sdp_enabled"}


def sdpa_backends() -> list:
    """The SDPBackend members a caller may choose (MATH, FLASH_ATTENTION, EFFICIENT_ATTENTION, CUDNN_ATTENTION)."""
    from torch.nn.attention import SDPBackend

    return [getattr(SDPBackend, name) for name in ("MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION",
                                                    "CUDNN_ATTENTION") if hasattr(SDPBackend, name)]


def enabled_backends() -> frozenset[str]:
    """Names of the SDPA backends enabled now (``sdpa_kernel`` switches them; all are on by default)."""
    import torch

    return frozenset(name for name, flag in _FLAGS.items()
                     if hasattr(torch.backends.cuda, flag) and getattr(torch.backends.cuda, flag)())


def _first_sentence(text: str) -> str:
    """The text up to its first full stop (all of it if it has none)."""
    head = text.strip().splitlines()[0] if text.strip() else "no reason given"
    return head.split(". ")[0].rstrip(".") + "."


def backends_that_run(q, k, v, **kwargs) -> dict[str, str]:
    """For each backend, 'runs' or why it cannot run these inputs on their device (tried alone, warnings kept quiet)."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    found = {}
    for backend in sdpa_backends():
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                with sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, k, v, **kwargs)
                found[backend.name] = "runs"
            except RuntimeError as error:
                reasons = [str(w.message).split(" (Triggered")[0].strip() for w in caught]
                reasons = [r for r in reasons if r and not r.endswith(":")]
                found[backend.name] = "cannot run: " + (reasons[-1] if reasons else _first_sentence(str(error)))
    return found


def sdpa_with_fallback(q, k, v, preferred: Sequence, **kwargs):
    """(SDPA output, backend) with the first backend of ``preferred`` that can run the inputs (lesson 11_attention)."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    for backend in preferred:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                with sdpa_kernel(backend):
                    return F.scaled_dot_product_attention(q, k, v, **kwargs), backend
        except RuntimeError:
            continue
    raise RuntimeError(f"none of the backends {[b.name for b in preferred]} can run these inputs")


class FakeSDPA:
    """A simulated device on which only the backends named in ``available`` can run scaled_dot_product_attention.

    Inside ``with FakeSDPA({"MATH"}) as fake:`` every call records the set of backends enabled at that moment
    (``fake.calls``) and raises RuntimeError, as torch does, when none of them is available; otherwise it returns the
    exact result (computed with the MATH backend).
    """

    MESSAGE = "No available kernel. Aborting execution. (simulated by gpucourse.attention.FakeSDPA)"

    def __init__(self, available: Iterable[str]) -> None:
        names = set(available) if not isinstance(available, str) else {available}
        unknown = names - set(_FLAGS)
        if unknown:
            raise ValueError(f"available must name backends among {sorted(_FLAGS)}, got {sorted(unknown)}")
        self.available = frozenset(names)
        self.calls: list[frozenset[str]] = []
        self._mode = None

    def __enter__(self) -> FakeSDPA:
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        from torch.overrides import TorchFunctionMode

        fake = self

        class _Mode(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                if func is F.scaled_dot_product_attention:
                    enabled = enabled_backends()
                    fake.calls.append(enabled)
                    if not enabled & fake.available:
                        raise RuntimeError(FakeSDPA.MESSAGE)
                    with sdpa_kernel(SDPBackend.MATH):
                        return func(*args, **(kwargs or {}))
                return func(*args, **(kwargs or {}))

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        self._mode = None


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


class OneShotStream:
    """Blocks of columns of a (rows, n) tensor, handed out once, each a fresh tensor (lesson 11_attention).

    A second pass raises RuntimeError, as a real stream would. ``max_alive`` is the most blocks the reader still held
    (kept a reference or a view to) when it asked for the next one: 1 for a loop that keeps only the current block.
    """

    def __init__(self, data, widths: Sequence[int]) -> None:
        import torch

        if not isinstance(data, torch.Tensor) or data.dim() != 2:
            raise TypeError(f"data must be a 2-D torch.Tensor (rows, n), got {type(data).__name__}")
        widths = [positive_int("widths", w) for w in widths]
        if sum(widths) != data.shape[1]:
            raise ValueError(f"widths must add up to data's {data.shape[1]} columns, got {sum(widths)}")
        self._data, self._widths = data, widths
        self._started = False
        self._handed: list = []
        self.blocks_read = 0
        self.max_alive = 0

    def __iter__(self) -> Iterator:
        if self._started:
            raise RuntimeError("this stream of blocks can be read only once (a second pass would need the blocks "
                               "stored, which is what a one-pass algorithm avoids)")
        self._started = True
        return self._blocks()

    def _blocks(self) -> Iterator:
        """Yield the blocks one by one, noting how many earlier ones are still alive."""
        import weakref

        start = 0
        for width in self._widths:
            alive = sum(ref() is not None for ref in self._handed)
            self.max_alive = max(self.max_alive, alive)
            block = self._data[:, start:start + width].clone()
            self._handed.append(weakref.ref(block))
            self.blocks_read += 1
            start += width
            yield block
            del block


@contextmanager
def numpy_blocked(exercise: str = "this exercise"):
    """While active, tensors refuse numpy (``np.asarray``, ``.numpy()``, DLPack; lesson 11_attention)."""
    import torch

    def refuse(*_args, **_kwargs):
        raise TypeError(f"{exercise} is graded on torch operations: converting a tensor to numpy would hide the work "
                        "from the grader. Use torch operations only.")

    names = ("__array__", "numpy", "__dlpack__")
    saved = {name: torch.Tensor.__dict__.get(name) for name in names}
    try:
        for name in names:
            setattr(torch.Tensor, name, refuse)
        yield
    finally:
        for name, original in saved.items():
            if original is None:
                delattr(torch.Tensor, name)
            else:
                setattr(torch.Tensor, name, original)


def decode_with_cache(x, wq, wk, wv):
    """Causal single-head attention over the rows of x, token by token with a KV cache; (T, d_v) outputs."""
    import torch

    outputs, cache = [], {}
    for t in range(x.shape[0]):
        outputs.append(kv_cache_step(x[t], cache, wq, wk, wv))
    return torch.stack(outputs)


def kv_cache_step(x_t, cache: dict, wq, wk, wv):
    """One decoding step: project x_t, add its key and value to ``cache``, attend over it (lesson 11_attention)."""
    import torch

    if not isinstance(cache, dict):
        raise TypeError(f"cache must be a dict, got {type(cache).__name__}")
    q, k, v = x_t @ wq, x_t @ wk, x_t @ wv
    cache["k"] = k[None] if "k" not in cache else torch.cat([cache["k"], k[None]])
    cache["v"] = v[None] if "v" not in cache else torch.cat([cache["v"], v[None]])
    p = torch.softmax(cache["k"] @ q / math.sqrt(q.shape[-1]), dim=0)
    return p @ cache["v"]


def median_ms(fn: Callable[[], object], *, device: object = None, repeats: int = 5, warmup: int = 1) -> float:
    """Median milliseconds of ``fn()`` after ``warmup`` calls, synchronised on ``device`` (gpucourse.timing)."""
    from gpucourse import timing

    return timing.benchmark(fn, warmup=non_negative_int("warmup", warmup), repeats=positive_int("repeats", repeats),
                            device=device).median_s * 1e3


__all__ = ["StageCost", "attention_costs", "score_matrix_bytes", "kv_cache_bytes", "naive_attention",
           "online_logsumexp", "tiled_attention", "sdpa_backends", "enabled_backends", "backends_that_run",
           "sdpa_with_fallback", "FakeSDPA", "OpRecord", "OpRecorder", "OneShotStream", "numpy_blocked",
           "decode_with_cache", "kv_cache_step", "median_ms"]
