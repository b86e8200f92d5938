"""A picture of a traced launch: which block and thread wrote each element of an array (lesson 04_cuda_model)."""

from __future__ import annotations

import numpy as np

from gpucourse._validate import positive_int
from gpucourse.kernels.trace import KernelTrace


def plot_thread_map(trace: KernelTrace, array: str, ax=None, annotate: bool | None = None, wrap: int = 64):
    """Draw which thread wrote each element of ``array``: colour = block, label = threadIdx; return the Axes.

    Taught in lesson 04_cuda_model.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import ListedColormap

    if not isinstance(trace, KernelTrace):
        raise TypeError(f"trace must be a KernelTrace (from trace_kernel), got {type(trace).__name__}")
    trace._check_array(array)
    wrap = positive_int("wrap", wrap)
    if annotate is not None and not isinstance(annotate, bool):
        raise TypeError(f"annotate must be True, False or None, got {annotate!r}")
    shape = trace.arrays[array].shape
    if len(shape) > 2:
        raise ValueError(f"array must be 1-D or 2-D to draw, {array!r} has shape {shape}")
    blocks, count = trace.writer_map(array, "block"), trace.writer_map(array, "count")
    tx, ty = trace.writer_map(array, "thread_x"), trace.writer_map(array, "thread_y")
    if len(shape) == 1:  # a long vector is drawn as rows of `wrap` elements
        width = min(shape[0], wrap)
        rows = -(-shape[0] // width)
        pad = rows * width - shape[0]
        blocks, count, tx, ty = (np.concatenate([m, np.full(pad, -2)]).reshape(rows, width)
                                 for m in (blocks, count, tx, ty))
    if ax is None:
        rows, columns = blocks.shape
        _, ax = plt.subplots(figsize=(min(14, 1 + 0.45 * columns), min(10, 1 + 0.45 * rows)))
    palette = plt.get_cmap("tab20").colors
    colors = ["#ffffff", "#f2f2f2"] + [palette[(2 * i) % 20 if i < 10 else (2 * i + 1) % 20] for i in range(20)]
    image = np.where(blocks >= 0, 2 + blocks % 20, np.where(blocks == -1, 0, 1))
    ax.imshow(image, cmap=ListedColormap(colors), vmin=0, vmax=len(colors) - 1, interpolation="nearest")
    rows, columns = blocks.shape
    for r in range(rows):  # block boundaries: a thick line wherever the writing block changes
        for c in range(columns):
            if c + 1 < columns and blocks[r, c] != blocks[r, c + 1]:
                ax.plot([c + 0.5, c + 0.5], [r - 0.5, r + 0.5], color="black", lw=2)
            if r + 1 < rows and blocks[r, c] != blocks[r + 1, c]:
                ax.plot([c - 0.5, c + 0.5], [r + 0.5, r + 0.5], color="black", lw=2)
            if count[r, c] > 1:
                ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, fill=False, edgecolor="red", lw=2))
    if annotate is None:
        annotate = rows * columns <= 400
    if annotate:
        two_d = trace.blockdim.y > 1
        for r in range(rows):
            for c in range(columns):
                if blocks[r, c] >= 0:
                    label = f"{tx[r, c]},{ty[r, c]}" if two_d else f"{tx[r, c]}"
                    ax.text(c, r, label, ha="center", va="center", fontsize=6 if two_d else 8)
                elif blocks[r, c] == -1:
                    ax.text(c, r, "-", ha="center", va="center", color="grey")
    ax.set_xticks(range(columns) if columns <= 40 else [])
    ax.set_yticks(range(rows) if len(shape) == 2 and rows <= 40 else [])
    ax.tick_params(labelsize=7)
    label = "threadIdx.x,threadIdx.y" if trace.blockdim.y > 1 else "threadIdx.x"
    ax.set_title(f"who wrote each element of {array}\ncolour = block, label = {label}; "
                 f"'-' = never written, red = written twice or more", fontsize=9)
    ax.set_xlabel("column index j" if len(shape) == 2 else
                  "element index" if rows == 1 else f"element index mod {columns} (one row per {columns} elements)")
    if len(shape) == 2:
        ax.set_ylabel("row index i")
    return ax


__all__ = ["plot_thread_map"]
