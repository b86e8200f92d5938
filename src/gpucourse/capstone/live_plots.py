"""The capstone's pictures and reports (17_capstone): the live training plot, the speed-up table and chart."""

from __future__ import annotations

import io
import math
import sys
import time
from collections.abc import Sequence

import numpy as np

from gpucourse._validate import non_negative_number, positive_int, positive_number
from gpucourse.capstone.datasets import ImageData
from gpucourse.plots import show_table


class LivePlot:
    """Loss and accuracy against training time, redrawn in place in Jupyter (a final static plot elsewhere)."""

    def __init__(self, target: float | None = None, title: str = "training", min_interval_s: float = 2.0) -> None:
        from matplotlib.figure import Figure

        if target is not None:
            target = positive_number("target", target)
        if not isinstance(title, str):
            raise TypeError(f"title must be a str, got {type(title).__name__}")
        self.target, self.title = target, title
        self.min_interval_s = non_negative_number("min_interval_s", min_interval_s)
        self.figure = Figure(figsize=(10, 3.2))  # not a pyplot figure: nothing shows it unless asked
        self.loss_ax, self.acc_ax = self.figure.subplots(1, 2)
        self.figure.subplots_adjust(left=0.07, right=0.98, bottom=0.17, top=0.88, wspace=0.25)  # fixed: redraws stay cheap
        self.handle = None
        self.history: list[dict] = []
        self._drawn_at = -math.inf
        self._stale = False

    @staticmethod
    def in_notebook() -> bool:
        """True inside a Jupyter kernel, where a display can be updated in place."""
        module = sys.modules.get("IPython")
        ipython = module.get_ipython() if module is not None and hasattr(module, "get_ipython") else None
        return ipython is not None and "IPKernelApp" in getattr(ipython, "config", {})

    def draw(self) -> None:
        """Redraw both panels from the history."""
        seconds = [h["seconds"] for h in self.history]
        for ax in (self.loss_ax, self.acc_ax):
            ax.clear()
            ax.grid(True, alpha=0.3)
            ax.set_xlabel("training time (s, synchronised; evaluation excluded)")
        self.loss_ax.plot(seconds, [h["loss"] for h in self.history], marker="o", markersize=3)
        self.loss_ax.set_ylabel("training loss (mean since last point)")
        self.loss_ax.set_yscale("log")
        self.acc_ax.plot(seconds, [h["accuracy"] for h in self.history], marker="o", markersize=3, color="tab:green")
        self.acc_ax.set_ylabel("test accuracy")
        if self.target is not None:
            self.acc_ax.axhline(self.target, color="red", linestyle="--", linewidth=1, label=f"target {self.target:.0%}")
            self.acc_ax.legend(loc="lower right", fontsize=8)
        self.figure.suptitle(self.title, fontsize=10)

    def _show(self) -> None:
        """Draw, and in Jupyter put the picture in the cell's output (replacing the previous one)."""
        self.draw()
        self._drawn_at, self._stale = time.perf_counter(), False
        if not self.in_notebook():
            return
        from IPython.display import Image, display

        buffer = io.BytesIO()
        self.figure.savefig(buffer, format="png", dpi=72)
        picture = Image(buffer.getvalue())
        if self.handle is None:
            self.handle = display(picture, display_id=True)
        else:
            self.handle.update(picture)

    def start(self) -> None:
        """In Jupyter, show the (still empty) axes now, so that later output appears below them."""
        if self.in_notebook() and self.handle is None:
            self._show()

    def update(self, history: Sequence[dict]) -> None:
        """Take the history so far; in Jupyter, redraw if ``min_interval_s`` has passed since the last drawing."""
        self.history = list(history)
        self._stale = True
        if self.in_notebook() and time.perf_counter() - self._drawn_at >= self.min_interval_s:
            self._show()

    def close(self) -> None:
        """Draw the final picture (in Jupyter it replaces the live one; elsewhere ``figure`` holds it)."""
        if self.history and self._stale:
            self._show()


def plot_speedups(rows: Sequence[dict], title: str = "", ax=None):
    """Bar chart of each technique's throughput and time-to-accuracy speed-up over the baseline; return the Axes."""
    import matplotlib.pyplot as plt

    rows = list(rows)
    needed = {"technique", "throughput_speedup", "tta_speedup"}
    if not rows or not all(isinstance(r, dict) and needed <= set(r) for r in rows):
        raise ValueError(f"rows must be a non-empty list of dicts with keys {sorted(needed)}")
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 3.8))
    positions = np.arange(len(rows))
    width = 0.4
    throughput = [r["throughput_speedup"] or 0.0 for r in rows]
    tta = [r["tta_speedup"] or 0.0 for r in rows]
    ax.bar(positions - width / 2, throughput, width, label="throughput (images/s) speed-up")
    ax.bar(positions + width / 2, tta, width, label="time-to-accuracy speed-up")
    for x, r in zip(positions, rows):
        if r["tta_speedup"] is None:
            ax.annotate("target\nnot reached", (x + width / 2, 0), ha="center", va="bottom", fontsize=7)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(positions, [r["technique"] for r in rows], rotation=15, ha="right", fontsize=8)
    ax.set_ylabel("x faster than the baseline")
    ax.set_title(title or "measured speed-up of each technique (higher is better)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, axis="y", alpha=0.3)
    return ax


def show_speedups(rows: Sequence[dict], target: float | None = None, title: str = "") -> None:
    """The speed-up report: a table (each row against the one above and against the baseline) and its bar chart."""
    import matplotlib.pyplot as plt

    rows = list(rows)
    needed = {"technique", "images_per_s", "throughput_speedup", "time_to_accuracy_s", "tta_speedup"}
    if not rows or not all(isinstance(r, dict) and needed <= set(r) for r in rows):
        raise ValueError(f"rows must be a non-empty list of dicts with keys {sorted(needed)} (from speedup_rows)")
    goal = f"time to {target:.0%}" if target is not None else "time to target"
    table, previous = [], None
    for row in rows:
        step_gain = f"{row['images_per_s'] / previous:.2f}x" if previous else "-"
        previous = row["images_per_s"]
        table.append([row["technique"], f"{row['images_per_s']:,.0f}", step_gain,
                      f"{row['throughput_speedup']:.2f}x" if row["throughput_speedup"] else "-",
                      f"{row['time_to_accuracy_s']:.2f} s" if row["time_to_accuracy_s"] else "not reached",
                      f"{row['tta_speedup']:.2f}x" if row["tta_speedup"] else "-"])
    show_table(["technique (cumulative)", "images/s", "vs row above", "throughput vs baseline", goal,
                "time-to-accuracy vs baseline"], table)
    plot_speedups(rows, title=title)
    plt.tight_layout()
    plt.show()


def plot_examples(data: ImageData, count: int = 10) -> None:
    """Show the first ``count`` training images with their class names."""
    import matplotlib.pyplot as plt

    if not isinstance(data, ImageData):
        raise TypeError(f"data must be an ImageData (from load_data), got {type(data).__name__}")
    count = min(positive_int("count", count), len(data.train_y))
    fig, axes = plt.subplots(1, count, figsize=(count, 1.4), squeeze=False)
    for ax, index in zip(axes[0], range(count)):
        ax.imshow(data.raw_train[index], cmap="gray_r")
        ax.set_title(data.class_names[data.train_y[index]], fontsize=8)
        ax.axis("off")
    fig.suptitle(f"the first training images ({data.name}, {data.image_size}x{data.image_size})", fontsize=9, y=1.08)
    plt.show()
