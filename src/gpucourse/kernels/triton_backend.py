"""Lesson 06_triton's one import (``from gpucourse.kernels import triton_backend as tb``): Triton on any machine.

- :func:`triton_modules` hands the lesson triton, triton.language and the course's own kernels
  (:mod:`~gpucourse.kernels.triton_kernels`), or stand-ins that say in one sentence why Triton cannot run here.
- :func:`launch`, :func:`count_traffic`, :class:`OutOfBounds` and :func:`require_triton` live in
  :mod:`~gpucourse.kernels.triton_launch` (below the course's kernels, which launch through it) and are re-exported
  here, where the lesson calls them; the traffic records (:class:`Traffic`, ...) come from
  :mod:`~gpucourse.kernels.triton_traffic`.
- :func:`launches_compiled` and :func:`describe_mode` say how kernels on a device run: compiled, or interpreted.
"""

from __future__ import annotations

from gpucourse.kernels.triton_launch import OutOfBounds, count_traffic, launch, require_triton
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


__all__ = ["LaunchRecord", "OutOfBounds", "TensorTraffic", "Traffic", "count_traffic", "describe_mode", "launch",
           "launches_compiled", "require_triton", "triton_modules"]
