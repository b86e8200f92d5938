"""CUDA from Python: the software stack, Numba's GPU or simulator, launch sizes, a tracer of global memory, occupancy.

One module per job (lessons 04_cuda_model and 05_cuda_shared_memory):

- :mod:`~gpucourse.kernels.cuda_stack`: the driver, runtime and libraries installed here;
- :mod:`~gpucourse.kernels.numba_backend`: Numba's real CUDA target or its simulator, chosen before
  ``numba.cuda`` is imported;
- :mod:`~gpucourse.kernels.geometry`: CUDA's limits, blocks and grids for a problem size;
- :mod:`~gpucourse.kernels.tracer`: runs a kernel's Python source on the CPU, one simulated thread at a time (or,
  with ``interleave=True``, switching threads at every memory access to expose races); ``trace_kernel_adversarial``
  is the same tracer in a random adversarial order (blocks shuffled, threads switched at every access, races
  flagged, negative indices refused, outputs poisoned), for grading;
- :mod:`~gpucourse.kernels.frozen`: what Numba freezes into a kernel at its first compile (the globals and
  closure values it reads); the tracer fails a kernel traced again after one of them changed;
- :mod:`~gpucourse.kernels.trace`: what a traced launch did (counts, writers, coalescing, budgets);
- :mod:`~gpucourse.kernels.thread_map`: the picture of who wrote what;
- :mod:`~gpucourse.kernels.occupancy_calculator`: resident warps per SM;
- :mod:`~gpucourse.kernels.triton_launch` (lesson 06_triton): Triton kernels compiled on a GPU or run in Triton's
  interpreter, and the counter of their memory traffic (records in :mod:`~gpucourse.kernels.triton_traffic`); it
  imports triton only when a kernel is launched, and :mod:`~gpucourse.kernels.triton_kernels` (the course's own
  softmax and matmul, launched through it) needs triton to import;
- :mod:`~gpucourse.kernels.triton_backend`: the lesson's one import, which hands out both (or stand-ins where
  Triton cannot run).

``BACKEND`` and ``BACKEND_REASON`` are read from :mod:`~gpucourse.kernels.numba_backend` on every access, so they
follow :func:`use_cuda_or_simulator`.
"""

from __future__ import annotations

from gpucourse.kernels import numba_backend, triton_backend
from gpucourse.kernels.cuda_stack import (StackLayer, _cudnn_version_string, nvidia_wheels, software_stack,
                                          tensorflow_build_info)
from gpucourse.kernels.frozen import FrozenValueChanged
from gpucourse.kernels.geometry import MAX_THREADS_PER_BLOCK, WARP_SIZE, Dim3, ThreadId, blocks_for, grid_2d
from gpucourse.kernels.numba_backend import BACKENDS, use_cuda_or_simulator
from gpucourse.kernels.occupancy_calculator import (REGISTER_ALLOCATION_UNIT, SM_LIMITS, Occupancy, SmLimits,
                                                    occupancy, occupancy_rows, occupancy_table)
from gpucourse.kernels.thread_map import plot_thread_map
from gpucourse.kernels.trace import DataRace, KernelTrace, Race
from gpucourse.kernels.tracer import MAX_TRACED_THREADS, _SimThread, trace_kernel, trace_kernel_adversarial

_FOLLOWED = ("BACKEND", "BACKEND_REASON")


def __getattr__(name: str) -> object:
    """The backend chosen so far, read live from numba_backend (a copy here would go stale)."""
    if name in _FOLLOWED:
        return getattr(numba_backend, name)
    raise AttributeError(f"module 'gpucourse.kernels' has no attribute {name!r}")


__all__ = ["BACKEND", "BACKEND_REASON", "BACKENDS", "DataRace", "Dim3", "FrozenValueChanged", "KernelTrace", "MAX_THREADS_PER_BLOCK",
           "MAX_TRACED_THREADS", "Occupancy", "REGISTER_ALLOCATION_UNIT", "Race", "SM_LIMITS", "SmLimits", "StackLayer",
           "ThreadId", "WARP_SIZE", "blocks_for", "grid_2d", "nvidia_wheels", "occupancy", "occupancy_rows",
           "occupancy_table",
           "plot_thread_map", "software_stack", "tensorflow_build_info", "trace_kernel", "trace_kernel_adversarial",
           "triton_backend",
           "use_cuda_or_simulator"]
