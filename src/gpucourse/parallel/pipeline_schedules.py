"""Pipeline schedules on a simulated clock: GPipe's timeline, any per-stage order of passes, the bubble, pictures.

A schedule is, for every stage, the order in which it runs the forward ('F') and backward ('B') pass of every
micro-batch. :func:`run_schedule` runs one: a pass starts when its stage is free and its input has arrived (the forward
of micro-batch i on stage s needs stage s - 1's forward of i; its backward needs stage s + 1's backward of i), and the
run reports the timeline, the step time and how many micro-batches' activations each stage held at most. Taught in
16_model_parallelism.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from gpucourse._validate import list_of, non_negative_number, one_of, positive_int, positive_number


@dataclass(frozen=True)
class PipelineEvent:
    """One forward ('F') or backward ('B') pass of one micro-batch on one stage, in seconds from the step's start."""

    stage: int
    kind: str
    microbatch: int
    start_s: float
    end_s: float


def _per_stage(name: str, value: object, stages: int) -> list[float]:
    """A duration for every stage: one number for all, or a sequence with one per stage (each > 0)."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) != stages:
            raise ValueError(f"{name} must hold one duration per stage ({stages}), got {len(value)}")
        return [positive_number(name, v) for v in value]
    return [positive_number(name, value)] * stages


def gpipe_schedule(stages: int, microbatches: int, forward_s: float | Sequence[float] = 1.0,
                   backward_s: float | Sequence[float] = 2.0, transfer_s: float = 0.0) -> list[PipelineEvent]:
    """The GPipe timeline on a simulated clock: every stage runs all forwards, then all backwards in reverse, each as
    soon as its input has arrived (``transfer_s`` after the neighbouring stage produced it); durations per stage."""
    p, m = positive_int("stages", stages), positive_int("microbatches", microbatches)
    f, b = _per_stage("forward_s", forward_s, p), _per_stage("backward_s", backward_s, p)
    hop = non_negative_number("transfer_s", transfer_s)
    forward_end = [[0.0] * m for _ in range(p)]
    backward_end = [[0.0] * m for _ in range(p)]
    events = []
    for s in range(p):
        free = 0.0
        for i in range(m):
            start = max(free, forward_end[s - 1][i] + hop if s else 0.0)
            forward_end[s][i] = free = start + f[s]
            events.append(PipelineEvent(s, "F", i, start, free))
    for s in reversed(range(p)):
        free = forward_end[s][m - 1]
        for i in reversed(range(m)):
            start = max(free, backward_end[s + 1][i] + hop if s < p - 1 else 0.0)
            backward_end[s][i] = free = start + b[s]
            events.append(PipelineEvent(s, "B", i, start, free))
    return sorted(events, key=lambda e: (e.stage, e.start_s))


def idle_fraction(events: Iterable[PipelineEvent]) -> float:
    """Share of a pipeline step that its stages spend idle: 1 - busy time / (stages x the step's span)."""
    events = list_of("events", events, PipelineEvent, non_empty=True)
    span = max(e.end_s for e in events) - min(e.start_s for e in events)
    if span <= 0:
        raise ValueError("events must span a positive time")
    stages = len({e.stage for e in events})
    return 1.0 - sum(e.end_s - e.start_s for e in events) / (stages * span)


def plot_pipeline_timeline(events: Iterable[PipelineEvent], ax=None, title: str = "", unit: str = "ms"):
    """Draw a pipeline schedule: one row per stage, forward and backward passes as labelled bars; return the Axes."""
    import matplotlib.pyplot as plt

    events = list_of("events", events, PipelineEvent, non_empty=True)
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    scale = {"s": 1.0, "ms": 1e3, "steps": 1.0}[one_of("unit", unit, ("s", "ms", "steps"))]
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.7 * (max(e.stage for e in events) + 1) + 1.4))
    elif not hasattr(ax, "broken_barh"):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    colours = {"F": "tab:blue", "B": "tab:orange"}
    end = max(e.end_s for e in events) * scale
    for event in events:
        left, width = event.start_s * scale, (event.end_s - event.start_s) * scale
        ax.broken_barh([(left, width)], (event.stage - 0.38, 0.76), facecolors=colours[event.kind],
                       edgecolor="white", linewidth=0.6)
        if width > end / 60:
            ax.text(left + width / 2, event.stage, f"{event.kind}{event.microbatch}", ha="center", va="center",
                    fontsize=7, color="white")
    stages = sorted({e.stage for e in events})
    ax.set_yticks(stages, [f"stage {s}" for s in stages])
    ax.set_ylim(max(stages) + 0.6, -0.6)
    ax.set_xlim(0, end * 1.01)
    ax.set_xlabel({"s": "seconds", "ms": "milliseconds", "steps": "time (units of one forward pass)"}[unit])
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours["F"]), plt.Rectangle((0, 0), 1, 1, color=colours["B"])],
              labels=["forward", "backward"], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return ax


class ScheduleError(ValueError):
    """A pipeline schedule that cannot run: a pass missing or repeated, a backward before its forward, a deadlock."""


@dataclass(frozen=True)
class ScheduleRun:
    """A schedule run on the simulated clock: its timeline, step time and each stage's peak of held activations."""

    events: tuple[PipelineEvent, ...]
    step_s: float
    peak_activations: tuple[int, ...]

    @property
    def idle_share(self) -> float:
        """Share of the step that the stages sit idle (the bubble, measured)."""
        return idle_fraction(self.events)


def _check_orders(orders: object) -> tuple[list[list[tuple[str, int]]], int]:
    """Validate per-stage orders of ('F' | 'B', micro-batch) passes; return them as lists and the micro-batch count."""
    if isinstance(orders, (str, bytes)) or not isinstance(orders, Sequence) or not orders:
        raise TypeError(f"orders must be a non-empty list with one list of passes per stage, got {type(orders).__name__}")
    stages = []
    for s, order in enumerate(orders):
        if isinstance(order, (str, bytes)) or not isinstance(order, Sequence):
            raise TypeError(f"orders[{s}] must be a list of ('F' or 'B', micro-batch) pairs, got {type(order).__name__}")
        passes = []
        for item in order:
            if (not isinstance(item, Sequence) or isinstance(item, str) or len(item) != 2 or item[0] not in ("F", "B")
                    or not isinstance(item[1], int) or isinstance(item[1], bool)):
                raise TypeError(f"orders[{s}] must hold ('F' or 'B', micro-batch index) pairs, got {item!r}")
            passes.append((item[0], item[1]))
        stages.append(passes)
    m = sum(kind == "F" for kind, _ in stages[0])
    expected = sorted((kind, i) for kind in ("F", "B") for i in range(m))
    for s, passes in enumerate(stages):
        if sorted(passes) != expected:
            raise ScheduleError(f"orders[{s}] must run the forward and the backward of every micro-batch 0..{m - 1} "
                                f"exactly once (stage 0 has {m} forwards), got {passes}")
        seen = set()
        for kind, i in passes:
            if kind == "B" and ("F", i) not in seen:
                raise ScheduleError(f"stage {s} runs the backward of micro-batch {i} before its forward")
            seen.add((kind, i))
    if m == 0:
        raise ScheduleError("orders must hold at least one micro-batch")
    return stages, m


def run_schedule(orders: Sequence, forward_s: float | Sequence[float] = 1.0, backward_s: float | Sequence[float] = 2.0,
                 transfer_s: float = 0.0) -> ScheduleRun:
    """Run per-stage orders of passes, e.g. ``[[("F", 0), ("B", 0)], ...]``, on a simulated clock (see the module).

    Durations are one number for every stage or one per stage; ``transfer_s`` is the time between a pass ending on
    one stage and its output arriving on the neighbouring stage. A schedule whose stages wait for each other forever
    raises ScheduleError, naming the pass each stage waits on. Taught in 16_model_parallelism.
    """
    stages, m = _check_orders(orders)
    p = len(stages)
    f, b = _per_stage("forward_s", forward_s, p), _per_stage("backward_s", backward_s, p)
    hop = non_negative_number("transfer_s", transfer_s)
    end: dict[tuple[int, str, int], float] = {}
    position, free = [0] * p, [0.0] * p
    events = []
    while any(position[s] < len(stages[s]) for s in range(p)):
        progress = False
        for s in range(p):
            while position[s] < len(stages[s]):
                kind, i = stages[s][position[s]]
                source = (s - 1, "F", i) if kind == "F" else (s + 1, "B", i)
                if 0 <= source[0] < p and source not in end:
                    break  # its input has not been produced yet
                ready = end[source] + hop if 0 <= source[0] < p else 0.0
                start = max(free[s], ready)
                free[s] = end[s, kind, i] = start + (f[s] if kind == "F" else b[s])
                events.append(PipelineEvent(s, kind, i, start, free[s]))
                position[s] += 1
                progress = True
        if not progress:
            waits = "; ".join(f"stage {s} waits to run {stages[s][position[s]][0]}{stages[s][position[s]][1]}"
                              for s in range(p) if position[s] < len(stages[s]))
            raise ScheduleError(f"deadlock: every stage waits for an input that no stage will produce ({waits})")
    peaks = []
    for passes in stages:
        held = peak = 0
        for kind, _ in passes:
            held += 1 if kind == "F" else -1
            peak = max(peak, held)
        peaks.append(peak)
    events.sort(key=lambda e: (e.stage, e.start_s))
    return ScheduleRun(tuple(events), max(e.end_s for e in events), tuple(peaks))


def pipeline_orders(kind: str, stages: int, microbatches: int) -> list[list[tuple[str, int]]]:
    """Per-stage orders of passes for GPipe ('gpipe': all forwards, then all backwards in reverse) or PipeDream-Flush's
    one-forward-one-backward ('1f1b': p - s - 1 warm-up forwards on stage s, then F and B alternate);
    16_model_parallelism."""
    one_of("kind", kind, ("gpipe", "1f1b"))
    p, m = positive_int("stages", stages), positive_int("microbatches", microbatches)
    orders = []
    for s in range(p):
        if kind == "gpipe":
            orders.append([("F", i) for i in range(m)] + [("B", i) for i in reversed(range(m))])
            continue
        warmup = min(p - s - 1, m)
        order = [("F", i) for i in range(warmup)]
        for i in range(m - warmup):
            order += [("F", warmup + i), ("B", i)]
        orders.append(order + [("B", i) for i in range(m - warmup, m)])
    return orders
