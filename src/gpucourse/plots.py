"""Lesson plots and tables that take more than a few lines: latency vs throughput, GPU memory by year, roofline
points, peak-versus-measured bars, Markdown tables."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gpucourse._validate import list_of, positive_int, positive_number
from gpucourse.hardware import GpuSpec
from gpucourse.roofline import RooflinePoint

MAX_TASKS_LIMIT = 10**15
"""Largest ``max_tasks`` :func:`plot_latency_throughput` accepts (far beyond any lesson, well inside float range)."""


def _check_ax(name: str, ax: object) -> None:
    """Raise a TypeError naming ``name`` unless ``ax`` looks like a matplotlib Axes."""
    if not (hasattr(ax, "plot") and hasattr(ax, "scatter") and hasattr(ax, "annotate")):
        raise TypeError(f"{name} must be a matplotlib Axes, got {type(ax).__name__}")


@dataclass(frozen=True)
class WorkerPool:
    """A model processor: ``workers`` identical workers, each finishing one task in ``task_s`` seconds."""

    label: str
    workers: int
    task_s: float

    def __post_init__(self) -> None:
        """Reject an empty label, a non-positive worker count or task time."""
        if not isinstance(self.label, str):
            raise TypeError(f"label must be a str, got {type(self.label).__name__}")
        if not self.label:
            raise ValueError("label must be a non-empty str")
        positive_int("workers", self.workers)
        positive_number("task_s", self.task_s)

    def finish_time(self, n_tasks: int) -> float:
        """Seconds to finish ``n_tasks`` independent tasks: ceil(n_tasks / workers) rounds of ``task_s``."""
        return math.ceil(positive_int("n_tasks", n_tasks) / self.workers) * self.task_s

    def throughput(self, n_tasks: int) -> float:
        """Tasks finished per second when there are ``n_tasks`` to do."""
        return n_tasks / self.finish_time(n_tasks)


def _task_counts(max_tasks: int, points: int = 400) -> list[int]:
    """Distinct task counts from 1 to ``max_tasks``, evenly spaced on a log axis."""
    top = math.log10(max_tasks)
    return sorted({max(1, round(10 ** (top * i / (points - 1)))) for i in range(points)})


def plot_latency_throughput(pools: Iterable[WorkerPool], max_tasks: int = 10**6, axes=None):
    """Plot time to finish and throughput against the number of tasks for each pool; return the two Axes."""
    import matplotlib.pyplot as plt

    pools = list_of("pools", pools, WorkerPool, non_empty=True)
    max_tasks = positive_int("max_tasks", max_tasks)
    if max_tasks < 2:
        raise ValueError(f"max_tasks must be >= 2, got {max_tasks}")
    if max_tasks > MAX_TASKS_LIMIT:
        raise ValueError(f"max_tasks must be <= {MAX_TASKS_LIMIT:.0e}, got {max_tasks}")
    if axes is not None:
        if isinstance(axes, str) or not isinstance(axes, Iterable):
            raise TypeError(f"axes must be a pair of matplotlib Axes or None, got {type(axes).__name__}")
        axes = list(axes)
        if len(axes) != 2:
            raise ValueError(f"axes must hold two matplotlib Axes, got {len(axes)}")
        for item in axes:
            _check_ax("axes", item)
    else:
        _, axes = plt.subplots(1, 2, figsize=(11, 4))
    time_ax, rate_ax = axes
    counts = _task_counts(max_tasks)
    for pool in pools:
        name = f"{pool.label}: {pool.workers} workers x {pool.task_s * 1e6:g} µs/task"
        time_ax.plot(counts, [pool.finish_time(n) * 1e6 for n in counts], label=name)
        rate_ax.plot(counts, [pool.throughput(n) for n in counts], label=name)
    for ax, ylabel, title in ((time_ax, "time to finish all tasks (µs)", "latency: how long until done"),
                              (rate_ax, "tasks finished per second", "throughput: how much per second")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("number of independent tasks")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{title} (model)", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    time_ax.legend(fontsize=8, loc="upper left")
    return time_ax, rate_ax


def plot_gpu_memory(specs: Iterable[GpuSpec], claim_gb: float | None = None, claim_label: str = "claim", ax=None):
    """Scatter each GPU's datasheet memory (GB) against its launch year, with an optional claimed ceiling."""
    import matplotlib.pyplot as plt

    specs = list_of("specs", specs, GpuSpec, non_empty=True)
    if not isinstance(claim_label, str):
        raise TypeError(f"claim_label must be a str, got {type(claim_label).__name__}")
    if claim_gb is not None:
        claim_gb = positive_number("claim_gb", claim_gb)
    if ax is not None:
        _check_ax("ax", ax)
    else:
        _, ax = plt.subplots(figsize=(7, 4))
    ax.scatter([s.year for s in specs], [s.memory_gb for s in specs], zorder=3)
    placed: list[tuple[float, float]] = []
    for spec in sorted(specs, key=lambda s: (s.year, s.memory_gb)):
        crowded = any(abs(year - spec.year) <= 2 and abs(gb - spec.memory_gb) < 5 for year, gb in placed)
        ax.annotate(f"{spec.name} ({spec.memory_gb:g} GB)", (spec.year, spec.memory_gb), textcoords="offset points",
                    xytext=(5, -12 if crowded else 4), fontsize=8)
        placed.append((spec.year, spec.memory_gb))
    if claim_gb is not None:
        ax.axhline(claim_gb, color="red", linestyle="--", linewidth=1,
                   label=f"{claim_label}: {claim_gb:g} GB")
        ax.legend(fontsize=8, loc="upper left")
    ax.set_xlabel("launch year")
    ax.set_ylabel("memory (GB, datasheet)")
    ax.set_xlim(min(s.year for s in specs) - 1, max(s.year for s in specs) + 2)
    ax.grid(True, alpha=0.3)
    return ax


def mark_points(ax, points: Iterable[RooflinePoint], color: str = "black", marker: str = "o",
                label: str | None = None) -> None:
    """Draw roofline points on ``ax`` in one colour and marker, each annotated; ``label`` names the group in the legend."""
    from matplotlib.colors import is_color_like
    from matplotlib.markers import MarkerStyle

    _check_ax("ax", ax)
    points = list_of("points", points, RooflinePoint)
    for name, value in (("color", color), ("marker", marker)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a str (a matplotlib name such as 'black' or 'o'), got {type(value).__name__}")
    if not is_color_like(color):
        raise ValueError(f"color must be a matplotlib colour name such as 'black' or '#1f77b4', got {color!r}")
    try:
        MarkerStyle(marker)
    except ValueError:
        raise ValueError(f"marker must be a matplotlib marker such as 'o' or 's', got {marker!r}") from None
    if label is not None and not isinstance(label, str):
        raise TypeError(f"label must be a str or None, got {type(label).__name__}")
    for index, point in enumerate(points):
        ax.scatter(point.intensity, point.flops / 1e9, color=color, marker=marker, zorder=4,
                   label=label if index == 0 else None)
        ax.annotate(point.label, (point.intensity, point.flops / 1e9), textcoords="offset points",
                    xytext=(6, -4), fontsize=8, color=color)


def markdown_table(header: Iterable[object], rows: Iterable[Iterable[object]]) -> str:
    """A Markdown table: one header row, then one line per row (each row as long as the header)."""
    if isinstance(header, (str, bytes)) or not isinstance(header, Iterable):
        raise TypeError(f"header must be a list of column headings, got {type(header).__name__}")
    header = [str(h) for h in header]
    if not header:
        raise ValueError("header must name at least one column")
    if isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
        raise TypeError(f"rows must be a list of rows, got {type(rows).__name__}")
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for index, row in enumerate(rows):
        if isinstance(row, (str, bytes)) or not isinstance(row, Iterable):
            raise TypeError(f"rows[{index}] must be a list of cells, got {type(row).__name__}")
        cells = [str(cell).replace("|", "\\|").replace("\n", " ") for cell in row]
        if len(cells) != len(header):
            raise ValueError(f"rows[{index}] has {len(cells)} cells, the header {len(header)}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def show_table(header: Iterable[object], rows: Iterable[Iterable[object]]) -> None:
    """Display a table: rendered Markdown in a notebook, plain Markdown text elsewhere."""
    text = markdown_table(header, rows)
    try:
        from IPython import get_ipython
        from IPython.display import Markdown, display
    except ImportError:
        print(text)
        return
    if getattr(get_ipython(), "kernel", None) is None:  # no notebook front end (plain Python, terminal IPython)
        print(text)
    else:
        display(Markdown(text))


def plot_rates(rates: Mapping[str, float], measured: Iterable[str] = (), title: str = "", ax=None):
    """Bar chart of FLOP/s figures in GFLOP/s on a log axis: measured ones blue, estimates and datasheets grey."""
    import matplotlib.pyplot as plt

    if not isinstance(rates, Mapping) or not rates:
        raise TypeError(f"rates must be a non-empty dict of label -> FLOP/s, got {type(rates).__name__}")
    for label, rate in rates.items():
        if not isinstance(label, str):
            raise TypeError(f"rates: labels must be str, got {type(label).__name__}")
        positive_number(f"rates[{label!r}]", rate)
    if isinstance(measured, str) or not isinstance(measured, Iterable):
        raise TypeError(f"measured must be a list of labels of rates, got {type(measured).__name__}")
    measured = set(measured)
    unknown = measured - set(rates)
    if unknown:
        raise ValueError(f"measured names labels that are not in rates: {sorted(unknown)}")
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    if ax is not None:
        _check_ax("ax", ax)
    else:
        _, ax = plt.subplots(figsize=(7, 3.5))
    colors = ["tab:blue" if label in measured else "tab:gray" for label in rates]
    container = ax.bar(list(rates), [rate / 1e9 for rate in rates.values()], color=colors)
    ax.bar_label(container, fmt="%.0f")
    ax.set_yscale("log")
    ax.set_ylabel("GFLOP/s (log scale)")
    ax.set_title(title or "measured (blue) and estimated or datasheet (grey) rates", fontsize=10)
    return ax


__all__ = ["WorkerPool", "plot_latency_throughput", "plot_gpu_memory", "mark_points", "markdown_table", "show_table",
           "plot_rates"]
