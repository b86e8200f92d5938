"""Lesson 06_triton's one import (``from gpucourse.kernels import triton_backend as tb``): Triton on any machine.

- :func:`triton_modules` hands the lesson triton, triton.language and the course's own kernels
  (:mod:`~gpucourse.kernels.triton_kernels`), or stand-ins that say in one sentence why Triton cannot run here.
- :func:`launch`, :func:`count_traffic`, :class:`OutOfBounds`, :func:`require_triton` and what a launch that a
  GPU would refuse raises (:class:`LaunchRefused`: :class:`CompileError`, :class:`MixedDevices`) live in
  :mod:`~gpucourse.kernels.triton_launch` (below the course's kernels, which launch through it) and are re-exported
  here, where the lesson calls them, with what its tests run a learner's function under (:func:`default_device_meta`,
  :func:`kernel_only`, which raises :class:`TorchOutsideKernel`); the traffic records (:class:`Traffic`, ...) come from
  :mod:`~gpucourse.kernels.triton_traffic`.
- :func:`launches_compiled` and :func:`describe_mode` say how kernels on a device run: compiled, or interpreted.
- :func:`draw_matmul_tiles` draws which tiles of A, B and C one program of a tiled matmul touches (no Triton needed).
"""

from __future__ import annotations

from gpucourse.kernels.triton_checks import TorchOutsideKernel, default_device_meta, kernel_only
from gpucourse.kernels.triton_launch import (CompileError, LaunchRefused, MixedDevices, OutOfBounds, count_traffic,
                                             launch, require_triton)
from gpucourse.kernels.triton_traffic import LaunchRecord, TensorTraffic, Traffic


def triton_modules() -> tuple[object, object, object]:
    """(triton, triton.language, the course's :mod:`~gpucourse.kernels.triton_kernels`) where Triton runs; elsewhere
    three stand-ins whose every use raises :class:`~gpucourse.platforms.NotAvailableHere` with the one sentence of
    ``platforms.available("triton")``, so that lesson 06's kernels can be defined in functions on any machine and a
    cell that uses one fails in that sentence, not in a traceback."""
    from gpucourse import platforms

    availability = platforms.available("triton")
    if not availability.ok:
        return (availability.stand_in("triton"), availability.stand_in("triton.language"),
                availability.stand_in("gpucourse.kernels.triton_kernels"))
    import triton
    import triton.language as tl

    from gpucourse.kernels import triton_kernels

    return triton, tl, triton_kernels


def launches_compiled(device: object) -> bool:
    """True if kernels launched on tensors of ``device`` (a torch.device or str) compile for a GPU."""
    return str(device).startswith("cuda")


def describe_mode(device: object) -> str:
    """One line saying how kernels run on ``device``: compiled for the GPU, or in Triton's interpreter."""
    if launches_compiled(device):
        return f"Triton kernels compile for {device} (the real compiler: PTX, then machine code for this GPU)"
    return ("Triton kernels run in Triton's interpreter on the CPU (numpy, one program after another): right "
            "results and exact memory traffic, but no GPU speed")


def draw_matmul_tiles(M: int, N: int, K: int, block_m: int, block_n: int, block_k: int,
                      program: tuple[int, int] = (1, 1), step: int = 1, axes=None):
    """Draw A (M x K), B (K x N) and C (M x N) cut into blocks, with what program (i, j) reads and writes.

    The program's row strip of A and column strip of B are shaded, their slice number ``step`` along K darker (the
    tiles that one ``tl.dot`` multiplies), and its tile of C outlined; hatched cells lie past the matrices' ends,
    the lanes a mask switches off. Returns the three matplotlib Axes.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    from gpucourse._validate import non_negative_int, positive_int

    for name, value in (("M", M), ("N", N), ("K", K), ("block_m", block_m), ("block_n", block_n),
                        ("block_k", block_k)):
        positive_int(name, value)
    grid_m, grid_n, steps = -(-M // block_m), -(-N // block_n), -(-K // block_k)
    if not (isinstance(program, tuple) and len(program) == 2):
        raise TypeError(f"program must be a pair (i, j) of program ids, got {program!r}")
    i, j = (non_negative_int("program", value) for value in program)
    if i >= grid_m or j >= grid_n:
        raise ValueError(f"program must lie in the grid ({grid_m}, {grid_n}), got {program!r}")
    step = non_negative_int("step", step)
    if step >= steps:
        raise ValueError(f"step must be below cdiv(K, block_k) = {steps}, got {step}")
    if axes is None:
        _, axes = plt.subplots(1, 3, figsize=(11, 3.6), gridspec_kw={"width_ratios": [K, N, N], "wspace": 0.3})
    elif len(axes) != 3:
        raise ValueError(f"axes must hold three matplotlib Axes, got {len(axes)}")
    panels = ((f"A ({M} x {K}):\nrows of program {i}", M, K, block_m, block_k, (i, None), (i, step)),
              (f"B ({K} x {N}):\ncolumns of program {j}", K, N, block_k, block_n, (None, j), (step, j)),
              (f"C ({M} x {N}):\nprogram ({i}, {j}) stores one tile", M, N, block_m, block_n, (i, j), (i, j)))
    for ax, (title, rows, cols, brow, bcol, strip, tile) in zip(axes, panels):
        ax.add_patch(Rectangle((0, 0), cols, rows, facecolor="white", edgecolor="black", linewidth=1.5))
        for r in range(-(-rows // brow)):
            for c in range(-(-cols // bcol)):
                in_strip = strip[0] in (None, r) and strip[1] in (None, c)
                color = "tab:orange" if (r, c) == tile else ("moccasin" if in_strip else "none")
                ax.add_patch(Rectangle((c * bcol, r * brow), bcol, brow, facecolor=color, edgecolor="grey",
                                       linewidth=0.6, alpha=0.9))
        ax.add_patch(Rectangle((0, 0), cols, rows, facecolor="none", edgecolor="black", linewidth=1.5))
        full_rows, full_cols = -(-rows // brow) * brow, -(-cols // bcol) * bcol
        for x0, y0, width, height in ((cols, 0, full_cols - cols, full_rows), (0, rows, cols, full_rows - rows)):
            if width > 0 and height > 0:   # past the matrix's end: the masked-off lanes
                ax.add_patch(Rectangle((x0, y0), width, height, facecolor="none", hatch="///", edgecolor="grey",
                                       linewidth=0))
        ax.set_xlim(0, full_cols)
        ax.set_ylim(full_rows, 0)
        ax.set_aspect("equal")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(0, full_cols + 1, bcol))
        ax.set_yticks(range(0, full_rows + 1, brow))
        ax.tick_params(labelsize=7)
    axes[0].figure.suptitle(f"Tiles of {block_m} x {block_k} (A) and {block_k} x {block_n} (B): dark = slice "
                            f"{step} along K, multiplied by one tl.dot; hatched = masked off", fontsize=9, y=1.04)
    return axes


__all__ = ["CompileError", "LaunchRecord", "LaunchRefused", "MixedDevices", "OutOfBounds", "TensorTraffic", "Traffic", "count_traffic",
           "TorchOutsideKernel", "default_device_meta", "describe_mode",
           "draw_matmul_tiles", "kernel_only", "launch",
           "launches_compiled", "require_triton", "triton_modules"]
