"""Does this device compute a low-precision format natively, or emulate it? Ask the machine, not the datasheet.

A CPU without bfloat16 units (most Intel laptops since the 12th generation, AMD before Zen 4) multiplies bfloat16
matrices through a generic path tens of times slower than float32, and float16 is that slow on almost every x86 CPU.
The flags a CPU reports (``avx512_bf16``, ``amx_bf16``, ``avx512_fp16``, ``amx_fp16``; Arm's ``bf16``,
``asimdhp``) say what the silicon has, not what the math library uses: a library capped below them (e.g.
``ONEDNN_MAX_CPU_ISA=AVX2``) emulates anyway. So on a CPU the answer comes from a probe well under a second (a small
matmul in the format against float32), with the flags as the explanation; on a CUDA GPU from its compute capability::

    support = native_formats.support("bfloat16", "cpu")
    if not support.native:
        print(support.reason)            # one sentence a learner reads
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpucourse import hardware
from gpucourse._validate import one_of

FORMATS = ("bfloat16", "float16")
"""The 16-bit formats the gate decides on."""

NATIVE_RATIO = 0.3
"""A format runs natively when its probe reaches at least this share of float32's rate (emulation gives a few %)."""

PROBE_N = 256
"""Side of the probe's square matmul: 34 MFLOP, milliseconds in float32, well under a second emulated."""

CPU_FLAGS = {"bfloat16": ("avx512_bf16", "amx_bf16", "bf16"), "float16": ("avx512_fp16", "amx_fp16", "asimdhp")}
"""CPU flags (x86 /proc/cpuinfo flags, Arm Features) that claim units for each format."""


@dataclass(frozen=True)
class FormatSupport:
    """The gate's answer for one format on one device, with the evidence behind it."""

    dtype: str
    device: str
    native: bool
    flags: tuple[str, ...]
    probe_ratio: float | None  # the format's matmul rate over float32's, on a CPU (None: decided otherwise)
    reason: str


def cpu_flags() -> set[str]:
    """Every flag the CPU reports (x86 'flags' or Arm 'Features' of /proc/cpuinfo; empty where it cannot be read)."""
    fields = hardware._read_proc_cpuinfo()
    return set((fields.get("flags") or fields.get("Features") or "").split())


def probe_ratio(dtype: str, device: str = "cpu") -> float:
    """The rate of a PROBE_N matmul in ``dtype`` over float32's on ``device``: the best of three after a warm-up."""
    import torch

    from gpucourse.timing import sync_for

    sync = sync_for(device)

    def best_seconds(torch_dtype) -> float:
        a = torch.ones(PROBE_N, PROBE_N, dtype=torch_dtype, device=device)
        a @ a
        sync()
        times = []
        for _ in range(3):
            start = time.perf_counter()
            a @ a
            sync()
            times.append(time.perf_counter() - start)
        return min(times)

    with _one_thread(torch):
        return best_seconds(torch.float32) / best_seconds(getattr(torch, dtype))


@contextlib.contextmanager
def _one_thread(torch) -> Iterator[None]:
    """Run the probe on one thread (the ratio, not the speed, matters), then restore the lesson's setting."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


_CACHE: dict[tuple[str, str], FormatSupport] = {}


def support(dtype: str, device: object = "cpu", *, probe: Callable[[str, str], float] | None = None,
            flags: set[str] | None = None, capability: tuple[int, int] | None = None) -> FormatSupport:
    """Whether ``device`` computes ``dtype`` natively (cached per dtype and device for the default probe).

    ``probe``, ``flags`` and ``capability`` replace the machine's own answers (tests, or a lesson showing another
    machine): ``probe(dtype, device)`` returns the format's rate over float32's.
    """
    dtype = one_of("dtype", dtype, FORMATS)
    kind = one_of("device", str(device).split(":")[0], ("cpu", "cuda", "mps"))
    key = (dtype, str(device))
    custom = probe is not None or flags is not None or capability is not None
    if not custom and key in _CACHE:
        return _CACHE[key]
    if kind == "cuda":
        answer = _cuda_support(dtype, str(device), capability)
    else:
        answer = _probed_support(dtype, str(device), kind, probe or probe_ratio, flags)
    if not custom:
        _CACHE[key] = answer
    return answer


def _cuda_support(dtype: str, device: str, capability: tuple[int, int] | None) -> FormatSupport:
    """A CUDA GPU's answer, from its compute capability."""
    if capability is None:
        capability = hardware.cuda_capability(device)
    if capability is None:
        raise ValueError(f"device={device!r}: no CUDA GPU is visible here")
    needed = hardware.TENSOR_CORE_CAPABILITY[dtype]
    native = tuple(capability) >= needed
    text = f"compute capability {capability[0]}.{capability[1]}"
    reason = (f"this GPU ({text}) has {dtype} Tensor Cores" if native else
              f"this GPU ({text}) has no {dtype} Tensor Cores (they start at {needed[0]}.{needed[1]}): it emulates "
              f"{dtype}, slower than float32")
    return FormatSupport(dtype, device, native, (text,), None, reason)


def _probed_support(dtype: str, device: str, kind: str, probe: Callable[[str, str], float],
                    flags: set[str] | None) -> FormatSupport:
    """A CPU's (or Apple GPU's) answer: the probe decides, the flags explain."""
    if not callable(probe):
        raise TypeError(f"probe must be callable (dtype, device) -> rate over float32, got {type(probe).__name__}")
    claimed = tuple(sorted((cpu_flags() if flags is None else set(flags)) & set(CPU_FLAGS[dtype]))) \
        if kind == "cpu" else ()
    ratio = float(probe(dtype, device))
    native = ratio >= NATIVE_RATIO
    where = "this CPU" if kind == "cpu" else "this Apple GPU"
    if native and (claimed or kind != "cpu"):
        reason = f"{where} computes {dtype} natively: a small matmul ran at {ratio:.2f}x float32's rate"
    elif native:
        reason = (f"{where} reports no {dtype} units but its math library converts {dtype} to float32 on the fly "
                  f"fast enough to time: a small matmul ran at {ratio:.2f}x float32's rate")
    else:
        reason = (f"{where} emulates {dtype}: a small matmul ran at {ratio:.2g}x float32's rate, so timing or "
                  f"training in {dtype} here measures the emulation, not the format")
        if claimed:
            reason += (f" (the CPU reports {', '.join(claimed)}, but the math library does not use them here, e.g. "
                       "capped by ONEDNN_MAX_CPU_ISA)")
    return FormatSupport(dtype, device, native, claimed, ratio, reason)
