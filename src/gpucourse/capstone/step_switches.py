"""The capstone's step switches (17_capstone): ``torch.compile``, CUDA Graphs and ``cudnn.benchmark`` on one step.

Each switch trades a one-time cost (compiling, capturing a graph, searching cuDNN's algorithms) for a faster steady
step. :func:`time_step_variants` measures both on this device, and :func:`payback_steps` says after how many steps
the one-time cost is repaid: the number that decides whether a run of a given length should use the switch.
Inductor (``torch.compile``'s default backend) needs a C++ compiler on a CPU: :func:`compile_backend` tries one tiny
compile and falls back to ``aot_eager`` (tracing without code generation) with the reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, positive_int

VARIANTS = ("eager", "torch.compile", "torch.compile + CUDA Graphs", "cudnn.benchmark")
"""The step variants :func:`time_step_variants` knows; the last two act on a CUDA GPU only."""

GPU_ONLY = ("torch.compile + CUDA Graphs", "cudnn.benchmark")


def compile_backend() -> tuple[str, str | None]:
    """('inductor', None) if one tiny ``torch.compile`` works here, else ('aot_eager', why inductor failed)."""
    from gpucourse import compilers  # lesson 10's probe: one place decides whether inductor runs here

    return compilers.choose_backend()


@dataclass(frozen=True)
class StepTiming:
    """One variant of the training step: its first call (one-time costs included) and its steady median."""

    variant: str
    backend: str
    first_call_s: float
    median_step_s: float


def payback_steps(variant: StepTiming, eager: StepTiming) -> float:
    """Steps after which ``variant``'s one-time cost is repaid by its faster steps (math.inf if it is not faster)."""
    if not isinstance(variant, StepTiming) or not isinstance(eager, StepTiming):
        raise TypeError("variant and eager must be StepTiming results of time_step_variants")
    saving = eager.median_step_s - variant.median_step_s
    extra = max(0.0, (variant.first_call_s - variant.median_step_s) - (eager.first_call_s - eager.median_step_s))
    if saving <= 0:
        return math.inf
    return extra / saving


def time_step_variants(image_size: int, device: object = "auto", variants: Sequence[str] = ("eager", "torch.compile"),
                       batch_size: int = 128, steps: int = 20, warmup: int = 3,
                       backend: str | None = None, in_channels: int = 1) -> list[StepTiming]:
    """Time a training step of :func:`small_cnn` in each variant: first call (synchronised), then the median step."""
    import torch

    from gpucourse.capstone.models import _image_size
    from gpucourse.capstone.training import _device
    from gpucourse.compilers import quiet
    from gpucourse.timing import sync_for

    size = _image_size(image_size)
    batch_size, steps = positive_int("batch_size", batch_size), positive_int("steps", steps)
    warmup = non_negative_int("warmup", warmup)
    in_channels = positive_int("in_channels", in_channels)
    if isinstance(variants, str) or not all(isinstance(v, str) for v in variants) or not variants:
        raise TypeError(f"variants must be a non-empty list of names from {list(VARIANTS)}, got {variants!r}")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise ValueError(f"variants must be names from {list(VARIANTS)}, got {unknown}")
    device = _device(device)
    gpu_only = [v for v in variants if v in GPU_ONLY]
    if gpu_only and device.type != "cuda":
        raise ValueError(f"variants {gpu_only} act on a CUDA GPU only; this device is {device}")
    if backend is None:
        backend = compile_backend()[0] if any("compile" in v for v in variants) else "eager"
    sync = sync_for(device)
    generator = torch.Generator().manual_seed(0)
    x = torch.rand(batch_size, in_channels, size, size, generator=generator).to(device)
    y = torch.randint(0, 10, (batch_size,), generator=generator).to(device)
    results = []
    with quiet():  # inductor's TF32 notice too: every variant times the same float32 step, TF32 off (lesson 12)
        for variant in variants:
            results.append(_time_variant(variant, backend, size, x, y, device, sync, steps, warmup))
    return results


def _time_variant(variant: str, backend: str, size: int, x, y, device, sync, steps: int, warmup: int) -> StepTiming:
    """One variant of :func:`time_step_variants`: a fresh model and optimizer, its first call, then its median step."""
    import torch
    import torch.nn.functional as F

    from gpucourse.capstone.models import small_cnn
    from gpucourse.timing import benchmark

    torch.manual_seed(0)
    model = small_cnn(size, in_channels=x.shape[1]).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    net, used = model, "eager"
    if variant == "torch.compile":
        net, used = torch.compile(model, backend=backend), backend
    elif variant == "torch.compile + CUDA Graphs" and backend == "inductor":  # replays the step as a CUDA Graph
        net, used = torch.compile(model, mode="reduce-overhead"), "inductor, CUDA Graphs"
    elif variant == "torch.compile + CUDA Graphs":  # without inductor: dynamo's CUDA Graphs backend alone
        net, used = torch.compile(model, backend="cudagraphs"), "cudagraphs"
    previous = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = variant == "cudnn.benchmark"
    try:
        def step() -> None:
            loss = F.cross_entropy(net(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

        sync()
        start = time.perf_counter()
        step()  # compiling, capturing or searching happens here, once
        sync()
        first = time.perf_counter() - start
        median = benchmark(step, warmup=warmup, repeats=steps, sync=sync).median_s
    finally:
        torch.backends.cudnn.benchmark = previous
    return StepTiming(variant, used, first, median)


def show_step_timings(timings: Sequence[StepTiming], run_steps: int | None = None) -> None:
    """A table: each variant's first call, steady step, speed against eager and the steps that repay its set-up."""
    from gpucourse.plots import show_table

    timings = list(timings)
    if not timings or not all(isinstance(t, StepTiming) for t in timings) or timings[0].variant != "eager":
        raise ValueError("timings must be StepTiming results of time_step_variants, the first one 'eager'")
    if run_steps is not None:
        run_steps = positive_int("run_steps", run_steps)
    eager = timings[0]
    rows = []
    for timing in timings:
        payback = payback_steps(timing, eager) if timing is not eager else 0.0
        verdict = "-"
        if timing is not eager and run_steps is not None:
            verdict = "yes" if payback < run_steps else "no"
        rows.append([timing.variant, timing.backend, f"{timing.first_call_s:.2f} s",
                     f"{timing.median_step_s * 1e3:.2f} ms", f"{eager.median_step_s / timing.median_step_s:.2f}x",
                     "-" if timing is eager else ("never" if math.isinf(payback) else f"{payback:,.0f}"), verdict])
    last = f"pays off in a run of {run_steps:,} steps" if run_steps is not None else "pays off"
    show_table(["step", "backend", "first call", "steady step (median)", "vs eager", "steps to repay set-up", last],
               rows)

