"""``torch.compile`` at model scale (lesson ``10_compilers``): which backend works here, what Dynamo captured.

- :func:`choose_backend` tries one tiny compile with inductor (it needs a C++ compiler on a CPU) and falls back to
  ``aot_eager`` (tracing without code generation), saying why.
- :class:`GraphRecorder` is a ``torch.compile`` backend that records every graph Dynamo hands it (its operations) and
  counts the calls of the compiled graphs; it runs each graph as it is (``gm.forward``), so no compiler is needed.
  :func:`count_graphs` uses it to count (re)compilations over a list of inputs.
- :func:`break_report` reads ``torch._dynamo.explain``: graphs, graph breaks and their reasons, operations per graph.
- :class:`TinyBlock` (a transformer block) and :class:`NoisyMLP` (a model with graph breaks and a recompile) are the
  lesson's models. :func:`steady_forward` and :func:`run_steady` are the instructor's answer to its exercise 2, and
  :func:`compare_writings` with :func:`kernel_traffic` (the bytes each launch in inductor's generated code names) to
  its exercise 3: off-limits while those are graded. :func:`recorded_code` holds the code exercise 3 reads.

Graph breaks and recompiles are observed with the ``eager`` backend or a :class:`GraphRecorder`: fast, no compiler.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import re
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from gpucourse._validate import positive_int, positive_number
from gpucourse.timing import NO_CUDA_RUNTIME_MESSAGE, _DropMessage

_DYNAMO_LOGGER = "torch._dynamo"
TF32_NOTICE = "TensorFloat32 tensor cores for float32 matrix multiplication available but not enabled"
"""Start of inductor's notice on an Ampere or newer GPU (lesson 07 teaches TF32): dropped by :func:`quiet`."""


GUARDS_WARNING = "Guards may run slower on Python 3.13.0"
"""Start of the RuntimeWarning torch.compile gives on Python 3.13.0 (Colab's twin): harmless, and not ours to fix."""


@contextlib.contextmanager
def quiet_compilation() -> Iterator[None]:
    """Drop the two known, harmless stderr lines of a first ``torch.compile`` on a CPU runtime with a CUDA build of
    torch (Colab's): "No CUDA runtime is found" and Python 3.13.0's guards warning. Anything else still shows."""
    logger = logging.getLogger("torch.utils.cpp_extension")
    drop = _DropMessage(NO_CUDA_RUNTIME_MESSAGE)
    logger.addFilter(drop)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=GUARDS_WARNING, category=RuntimeWarning)
            yield
    finally:
        logger.removeFilter(drop)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Compile without stderr: :func:`quiet_compilation`'s known harmless lines, inductor's TF32 notice, and Dynamo's
    warnings (a graph break from ``Tensor.item()``, the recompile limit reached), which :func:`break_report` and
    :class:`GraphRecorder` report."""
    logger = logging.getLogger(_DYNAMO_LOGGER)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with quiet_compilation(), warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=TF32_NOTICE, category=UserWarning)
            yield
    finally:
        logger.setLevel(level)


def _tiny(x: torch.Tensor) -> torch.Tensor:
    """The function :func:`choose_backend` compiles: two elementwise operations, fused into one kernel."""
    return x * 2 + 1


def choose_backend(compile_fn: Callable[..., Callable] | None = None) -> tuple[str, str | None]:
    """('inductor', None) if a tiny ``compile_fn(fn, backend="inductor")`` (default ``torch.compile``) compiles and
    runs right here, else ('aot_eager', why inductor failed): a CPU without a C++ compiler, say."""
    if compile_fn is None:
        compile_fn = torch.compile
    if not callable(compile_fn):
        raise TypeError(f"compile_fn must be callable like torch.compile, got {type(compile_fn).__name__}")
    try:
        with quiet():
            compiled = compile_fn(_tiny, backend="inductor")
            if not torch.equal(compiled(torch.ones(3)), torch.full((3,), 3.0)):
                raise RuntimeError("the compiled function returned a wrong result")
        return "inductor", None
    except Exception as error:  # noqa: BLE001  (no C++ compiler, an unsupported platform, ...: all fall back)
        first_line = (str(error).strip().splitlines() or [""])[0][:160]
        return "aot_eager", f"{type(error).__name__}: {first_line}"


def op_name(target: object) -> str:
    """A readable name for an FX node's target: 'linear', 'gelu', 'add', 'amax', ... (a method's or module's name)."""
    if isinstance(target, str):
        return target.rpartition(".")[2]
    name = getattr(target, "__name__", None)
    return name if isinstance(name, str) else str(target)


class GraphRecorder:
    """A ``torch.compile`` backend: records each graph's operations (``graphs``), counts calls of the compiled graphs
    (``calls``) and runs every graph unchanged (``gm.forward``). One compilation = one entry of ``graphs``."""

    def __init__(self) -> None:
        self.graphs: list[list[str]] = []
        self.calls = 0

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence[object]) -> Callable[..., object]:
        """The backend hook: Dynamo passes each graph it captured and runs what this returns."""
        self.graphs.append([op_name(node.target) for node in gm.graph.nodes
                            if node.op in ("call_function", "call_method", "call_module")])
        forward = gm.forward

        def run(*args: object) -> object:
            self.calls += 1
            return forward(*args)

        return run

    @property
    def graph_count(self) -> int:
        """How many graphs Dynamo compiled: the first compilation, plus one per graph break and per recompile."""
        return len(self.graphs)


def count_graphs(fn: Callable[[torch.Tensor], object], inputs: Sequence[torch.Tensor], *, dynamic: bool | None = None,
                 mark_dynamic: Sequence[int] = ()) -> int:
    """Compile ``fn`` afresh with a :class:`GraphRecorder` and ``dynamic``, call it on each input (marking the dims
    ``mark_dynamic`` of each with ``torch._dynamo.mark_dynamic`` first) and return how many graphs were compiled."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if not isinstance(inputs, Sequence) or not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
        raise TypeError("inputs must be a non-empty list of tensors")
    if dynamic not in (None, True, False):
        raise TypeError(f"dynamic must be None, True or False, got {dynamic!r}")
    recorder = GraphRecorder()
    torch._dynamo.reset()
    compiled = torch.compile(fn, backend=recorder, dynamic=dynamic)
    with quiet():
        for x in inputs:
            for dim in mark_dynamic:
                torch._dynamo.mark_dynamic(x, dim)
            compiled(x)
    return recorder.graph_count


def recompile_limit() -> int:
    """How many compilations Dynamo keeps for one function before it gives up and runs it eagerly."""
    config = torch._dynamo.config
    return int(getattr(config, "recompile_limit", getattr(config, "cache_size_limit", 8)))


@dataclass(frozen=True)
class BreakReport:
    """What ``torch._dynamo.explain`` saw: graphs, graph breaks, each break's reason and each graph's operations."""

    graphs: int
    breaks: int
    reasons: tuple[str, ...]
    ops_per_graph: tuple[tuple[str, ...], ...]


def break_report(fn: Callable[..., object], *args: object) -> BreakReport:
    """Run ``torch._dynamo.explain(fn)(*args)`` quietly (it calls ``fn`` once) and summarise it."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    torch._dynamo.reset()
    with quiet():
        explained = torch._dynamo.explain(fn)(*args)
    reasons = []
    for reason in explained.break_reasons:
        text = (str(reason.reason).strip().splitlines() or [""])[0]
        stack = getattr(reason, "user_stack", None) or []
        line = (getattr(stack[-1], "line", "") or "").strip() if stack else ""
        reasons.append(f"{text} (at `{line}`)" if line else text)
    return BreakReport(graphs=int(explained.graph_count), breaks=int(explained.graph_break_count),
                       reasons=tuple(reasons),
                       ops_per_graph=tuple(tuple(op_name(op) for op in ops) for ops in explained.ops_per_graph))


# --- the lesson's models ------------------------------------------------------------------------------------------

def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    """GELU in its tanh form, written out as separate operations (as many model codebases once did)."""
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x * x * x)))


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """RMSNorm written out: x / sqrt(mean(x^2) + eps) * weight."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


class TinyBlock(nn.Module):
    """A pre-norm transformer block (causal attention, then an MLP) with hand-written RMSNorm and GELU."""

    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        dim, heads = positive_int("dim", dim), positive_int("heads", heads)
        if dim % heads:
            raise ValueError(f"dim must be a multiple of heads, got dim={dim}, heads={heads}")
        self.heads = heads
        self.norm1 = nn.Parameter(torch.ones(dim))
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.Parameter(torch.ones(dim))
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x: (batch, tokens, dim) -> the same shape."""
        batch, tokens, dim = x.shape
        q, k, v = self.qkv(rms_norm(x, self.norm1)).split(dim, dim=-1)
        q, k, v = (t.view(batch, tokens, self.heads, dim // self.heads).transpose(1, 2) for t in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(batch, tokens, dim))
        return x + self.fc2(gelu_tanh(self.fc1(rms_norm(x, self.norm2))))


class NoisyMLP(nn.Module):
    """An MLP block with habits of real training code that break graphs or recompile (lesson 10, exercise 2).

    ``faults`` picks which habits it has: ``"item"`` (clip the hidden activations by their peak, read with ``.item()``,
    behind a Python ``if``), ``"branch"`` (a Python ``if`` on a tensor's value), ``"print"`` (a log line),
    ``"mask"`` (a boolean-mask selection: a data-dependent shape) and ``"step"`` (a warm-up ramp on the Python int
    ``step``, which changes every call)."""

    FAULTS = ("item", "branch", "print", "mask", "step")

    def __init__(self, dim: int = 16, clip: float = 2.0, shift: float = 0.1, floor: float = 0.5, warmup: int = 4,
                 faults: Sequence[str] = FAULTS, hidden: int | None = None) -> None:
        super().__init__()
        dim = positive_int("dim", dim)
        self.fc1 = nn.Linear(dim, positive_int("hidden", hidden) if hidden is not None else 4 * dim)
        self.fc2 = nn.Linear(self.fc1.out_features, dim)
        self.clip, self.floor = positive_number("clip", clip), positive_number("floor", floor)
        self.shift, self.warmup = float(shift), positive_int("warmup", warmup)
        unknown = set(faults) - set(self.FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; choose from {self.FAULTS}")
        self.faults = frozenset(faults)

    def forward(self, x: torch.Tensor, step: int = 0) -> torch.Tensor:
        """x + fc2(gelu(h)) with h = fc1(x) and the habits in ``faults``; ``step`` counts the training steps."""
        h = self.fc1(x)
        if "item" in self.faults:
            peak = h.abs().max().item()              # a Python float: the graph stops here
            if peak > self.clip:                     # a Python branch on it
                h = h * (self.clip / peak)
        if "branch" in self.faults:
            if h.mean() > self.shift:                # Python control flow on a tensor's value
                h = h - self.shift
        if "print" in self.faults:
            print(f"step {step}: mean activation {h.mean():.3f}")   # a side effect outside torch
        if "mask" in self.faults:
            kept = h[h.abs() > self.floor]           # the size of `kept` depends on the values
            h = h - kept.sum() / h.numel()
        out = self.fc2(F.gelu(h))
        if "step" in self.faults:
            out = out * min(1.0, (step + 1) / self.warmup)   # a Python int that changes every call
        return out + x


def steady_forward(model: NoisyMLP, x: torch.Tensor, step: torch.Tensor) -> torch.Tensor:
    """``model(x, step)`` of a :class:`NoisyMLP` in tensor operations only, ``step`` a 0-d tensor: one graph, no
    break (exercise 2's answer)."""
    h = model.fc1(x)
    if "item" in model.faults:
        h = h * torch.clamp(model.clip / h.abs().amax(), max=1.0)
    if "branch" in model.faults:
        h = torch.where(h.mean() > model.shift, h - model.shift, h)
    if "mask" in model.faults:
        h = h - torch.where(h.abs() > model.floor, h, 0.0).sum() / h.numel()
    out = model.fc2(F.gelu(h))
    if "step" in model.faults:
        out = out * torch.clamp((step + 1) / model.warmup, max=1.0)
    return out + x


def run_steady(model: NoisyMLP, batches: Sequence[torch.Tensor], backend: object = "eager") -> list[torch.Tensor]:
    """:func:`steady_forward` compiled once with ``backend`` on each batch, the step a tensor (exercise 2's answer).
    Every size but the features is *unbacked*: ``dynamic=True`` would still specialise a size of 1 and recompile
    for a last batch of one example."""
    compiled = torch.compile(steady_forward, backend=backend)
    outputs = []
    with quiet():
        for step, x in enumerate(batches):
            for dim in range(x.dim() - 1):
                torch._dynamo.decorators.mark_unbacked(x, dim)
            outputs.append(compiled(model, x, torch.tensor(step)))
    return outputs


# --- reading inductor's generated code (exercise 3) ----------------------------------------------------------------

RECORDED_CODE = Path(__file__).with_name("recorded") / "inductor_cpu.json"
"""Code inductor generated on a CPU for the lesson's chains (tools/record_inductor_code.py): exercise 3 reads it, so
its grade does not depend on whether the grader's machine can compile."""

ITEMSIZE = {"float": 4, "double": 8, "at::Half": 2, "at::BFloat16": 2, "half": 2, "bfloat16": 2, "int64_t": 8,
            "int32_t": 4, "int16_t": 2, "int8_t": 1, "uint8_t": 1, "bool": 1}
"""Bytes per element of the C++ element types in inductor's CPU kernels."""


def recorded_code(name: str | None = None) -> dict:
    """The recording (``name=None``: its metadata and every chain) or one chain's entry: ``source`` (the function
    compiled), ``inputs`` (shapes and dtypes) and ``code`` (the text ``run_and_get_code`` returned), labelled with the
    torch version, machine and date it was recorded on. ``codes`` holds every module the call compiled, in the order
    they ran (several after a graph break); ``code`` is the first."""
    record = json.loads(RECORDED_CODE.read_text(encoding="utf-8"))
    if name is None:
        return record
    if name not in record["chains"]:
        raise KeyError(f"no recorded chain {name!r}; recorded: {sorted(record['chains'])}")
    entry = record["chains"][name]
    return {"codes": [entry["code"]], **entry, "torch": record["torch"], "machine": record["machine"],
            "date": record["date"]}


def _split_arguments(text: str) -> list[str]:
    """A call's arguments, split at the commas outside parentheses."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        depth += (char == "(") - (char == ")")
        if char == "," and depth == 0:
            parts.append(text[start:index].strip())
            start = index + 1
    parts.append(text[start:].strip())
    return [part for part in parts if part]


def _elements(sizes: str) -> int:
    """Elements of a tensor whose sizes are written ``(37, 53)`` inside the parentheses (``()`` is one element)."""
    return math.prod(int(size) for size in sizes.replace(" ", "").split(",") if size)


def kernel_traffic(code: str) -> list[dict]:
    """Each launch of a generated kernel in inductor's C++ output ``code``, in order: its name and the bytes of the
    buffers it reads (``in_ptr``, ``in_out_ptr``) and writes (``out_ptr``, ``in_out_ptr``). An ``in_out_ptr`` buffer
    that is still *fresh* (allocated by ``empty_strided_cpu``, or a reuse of such a buffer, and named by no line of
    ``call`` since) holds nothing to read: it counts as written only."""
    kernels = {}   # name -> [(kind of parameter or None, bytes per element)] in the order of its parameters
    for name, source in re.findall(r"^(\w+) = async_compile\.cpp_pybinding\(.*?r\'\'\'(.*?)\'\'\'", code, re.M | re.S):
        params = re.search(r'extern "C"\s+void\s+kernel\((.*?)\)', source, re.S).group(1)
        kernels[name] = []
        for param in params.split(","):
            pointer = re.fullmatch(r"\s*(?:const\s+)?([\w:]+)\s*\*\s*(in_out_ptr|in_ptr|out_ptr)\d+\s*", param)
            kernels[name].append((pointer.group(2), ITEMSIZE[pointer.group(1)]) if pointer else (None, 0))
    elements: dict[str, int] = {}
    fresh: set[str] = set()   # buffers allocated and not yet named by a launch or a library call
    launches = []
    for line in code[code.index("def call("):].splitlines():
        line = line.strip()
        if match := re.match(r"assert_size_stride\((\w+), \(([^)]*)\)", line):
            elements[match.group(1)] = _elements(match.group(2))
        elif match := re.match(r"(\w+) = empty_strided\w*\(\(([^)]*)\)", line):
            elements[match.group(1)] = _elements(match.group(2))
            fresh.add(match.group(1))
        elif match := re.match(r"(\w+) = reinterpret_tensor\((\w+), \(([^)]*)\)", line):
            elements[match.group(1)] = _elements(match.group(3))
        elif match := re.match(r"(\w+) = (\w+); del \2", line):
            elements[match.group(1)] = elements[match.group(2)]
            if match.group(2) in fresh:
                fresh.add(match.group(1))
        elif (match := re.match(r"(\w+)\((.*)\)$", line)) and match.group(1) in kernels:
            read = written = 0
            for (kind, itemsize), argument in zip(kernels[match.group(1)], _split_arguments(match.group(2))):
                if kind is None:
                    continue
                view = re.match(r"reinterpret_tensor\((\w+), \(([^)]*)\)", argument)
                size = (_elements(view.group(2)) if view else elements[argument]) * itemsize
                read += size if kind == "in_ptr" or (kind == "in_out_ptr" and argument not in fresh) else 0
                written += size if kind in ("out_ptr", "in_out_ptr") else 0
            launches.append({"kernel": match.group(1), "read": read, "written": written})
            fresh -= set(re.findall(r"\w+", match.group(2)))
        else:
            fresh -= set(re.findall(r"\w+", line))   # a library call (out=buf0) fills the buffers it names
    return launches


LIBRARY_CALL = re.compile(r"\b(?:extern_kernels|torch\.ops\.aten|aten)\.[\w.]+\(")
"""A call in ``call`` of code inductor did not generate: a library kernel (``extern_kernels.mm``) or an ATen fallback
(``torch.ops.aten.sort.stable``)."""


def compare_writings(a: dict, b: dict) -> dict:
    """Bytes and kernels of two writings of one computation in inductor's generated kernels, which moves fewer bytes
    and why they differ. ``a`` and ``b`` hold ``codes``: every module ``run_and_get_code`` returned
    (:func:`recorded_code`). Exercise 3's answer.

    ``why``: "graph break" when the two compiled to different numbers of graphs; otherwise "fused" when they launch as
    many kernels moving as many bytes; otherwise "extern call" when either calls a library kernel or an ATen fallback
    in ``call`` (the elementwise work sits differently around it), else "kernels differ" (inductor generated other
    kernels). ``fewer_bytes`` is "same" on equal bytes, whatever the kernel counts."""
    traffic = {}
    for side, writing in (("a", a), ("b", b)):
        launches = [launch for code in writing["codes"] for launch in kernel_traffic(code)]
        library = any(LIBRARY_CALL.search(code[code.index("def call("):]) for code in writing["codes"])
        traffic[side] = (len(writing["codes"]), len(launches), sum(launch["read"] + launch["written"]
                                                                     for launch in launches), library)
    (graphs_a, kernels_a, bytes_a, library_a), (graphs_b, kernels_b, bytes_b, library_b) = traffic["a"], traffic["b"]
    fewer = "same" if bytes_a == bytes_b else "a" if bytes_a < bytes_b else "b"
    if graphs_a != graphs_b:
        why = "graph break"
    elif (kernels_a, bytes_a) == (kernels_b, bytes_b):
        why = "fused"
    elif library_a or library_b:
        why = "extern call"
    else:
        why = "kernels differ"
    return {"bytes": [bytes_a, bytes_b], "kernels": [kernels_a, kernels_b], "fewer_bytes": fewer, "why": why}


def time_compile(fn: Callable[[], object], *, calls: int = 10, sync: Callable[[], None] | None = None
                 ) -> tuple[float, float]:
    """(seconds of the first call, median seconds of a later call) of ``fn``; the first call of a compiled function
    compiles it."""
    from gpucourse.launch import time_per_call

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    calls = positive_int("calls", calls)
    sync = sync or (lambda: None)
    with quiet():
        start = time.perf_counter()
        fn()
        sync()
        first_s = time.perf_counter() - start
        return first_s, time_per_call(fn, calls=calls, repeats=5, sync=sync)


__all__ = ["BreakReport", "GraphRecorder", "NoisyMLP", "TinyBlock", "break_report", "choose_backend", "count_graphs",
           "gelu_tanh", "op_name", "quiet", "quiet_compilation", "recompile_limit", "kernel_traffic", "compare_writings", "recorded_code", "rms_norm",
           "run_steady", "steady_forward", "time_compile"]
