"""The tracer as the worst legal GPU: blocks in a random order, threads interleaved at every global access.

:func:`trace_kernel_adversarial` records the same :class:`~gpucourse.kernels.trace.KernelTrace` as
:func:`~gpucourse.kernels.tracer.trace_kernel`, but a GPU's freedoms are used against the kernel: blocks run in a
shuffled order; inside a block, a random thread runs up to its next global read or write, so threads interleave
between a read and the write that depends on it; a negative index is an error (Numba wraps it round as Python does,
on a GPU too, so a missing ``>= 0`` check silently reads the far edge; CUDA C reads the memory before the array); and
the arrays named in ``poison`` start filled with what uninitialised memory may hold (NaN for floats), so an element
the kernel forgets to write shows. Graders use it (lesson 04_cuda_model); learners may too.
"""

from __future__ import annotations

import numbers
import threading

import numpy as np

from gpucourse._validate import non_negative_int, positive_int
from gpucourse.kernels.geometry import MAX_THREADS_PER_BLOCK, Dim3, ThreadId, _dim3
from gpucourse.kernels.trace import KernelTrace
from gpucourse.kernels.tracer import (MAX_TRACED_THREADS, _BlockState, _exchange, _fail, _fill_value,
                                      _python_function, _RecordingArray, _rebind, _SimThread, _TracingCuda)


class _InterleavedArray(_RecordingArray):
    """A traced global array that hands the turn to the scheduler before every access and refuses negative indices."""

    def _flat(self, index: object, kind: str) -> int:
        parts = index if isinstance(index, tuple) else (index,)
        if any(isinstance(part, numbers.Integral) and not isinstance(part, bool) and part < 0 for part in parts):
            where = threading.current_thread()
            label = f"{self._name}[{', '.join(map(str, parts))}]"
            raise IndexError(f"thread ({ThreadId(where.blockIdx, where.threadIdx)}) {kind} {label}: a negative "
                             f"index. Python and Numba (on a GPU too) wrap it round to the end of {self._name}, "
                             "silently; CUDA C reads the memory before the array. A missing `>= 0` in a guard?")
        return super()._flat(index, kind)

    def __getitem__(self, index):
        threading.current_thread()._wait("ready")
        return super().__getitem__(index)

    def __setitem__(self, index, value) -> None:
        threading.current_thread()._wait("ready")
        super().__setitem__(index, value)

    def _atomic(self, index, value, combine):
        threading.current_thread()._wait("ready")
        return super()._atomic(index, value, combine)


def _run_block_interleaved(threads: list[_SimThread], rng: np.random.Generator) -> None:
    """Run one block: a random ready thread goes on to its next global access, barrier, warp exchange or end."""
    while True:
        ready = [thread for thread in threads if thread.status in ("new", "ready")]
        if ready:
            thread = ready[int(rng.integers(len(ready)))]
            thread.resume()
            if thread.error is not None:
                _fail(threads, thread.error, thread)
            continue
        at_warp = [thread for thread in threads if thread.status == "warp"]
        if at_warp:
            try:
                _exchange(threads, at_warp)
            except RuntimeError as error:
                _fail(threads, error, None)
            for thread in at_warp:
                thread.status = "ready"
            continue
        waiting = [thread for thread in threads if thread.status == "waiting"]
        if not waiting:
            return
        for thread in waiting:  # every thread has reached the barrier (or ended): all pass it together
            thread.status = "ready"


def trace_kernel_adversarial(kernel: object, griddim: int | tuple[int, ...], blockdim: int | tuple[int, ...],
                             *args: object, seed: int = 0, poison: tuple[str, ...] = (),
                             max_threads: int = MAX_TRACED_THREADS, allow_races: bool = False) -> KernelTrace:
    """Run ``kernel[griddim, blockdim](*args)`` in Python as the worst legal GPU would, recording every global access.

    Blocks run in a random order (``seed``), threads interleave at every global access, negative indices raise
    IndexError, and the array arguments named in ``poison`` are first filled (in place) with NaN (floats) or an
    extreme integer. Raises DataRace as :func:`~gpucourse.kernels.tracer.trace_kernel` does, unless ``allow_races``.
    """
    function = _python_function(kernel)
    grid, block = Dim3(*_dim3("griddim", griddim)), Dim3(*_dim3("blockdim", blockdim))
    seed, max_threads = non_negative_int("seed", seed), positive_int("max_threads", max_threads)
    if not isinstance(allow_races, bool):
        raise TypeError(f"allow_races must be True or False, got {allow_races!r}")
    if isinstance(poison, str) or not isinstance(poison, (tuple, list)):
        raise TypeError(f"poison must be a tuple of argument names, got {poison!r}")
    per_block = block.x * block.y * block.z
    if per_block > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"blockdim {tuple(block)} has {per_block} threads; CUDA allows at most "
                         f"{MAX_THREADS_PER_BLOCK} per block")
    total = per_block * grid.x * grid.y * grid.z
    if total > max_threads:
        raise ValueError(f"griddim x blockdim launches {total} threads, more than max_threads={max_threads}: the "
                         "tracer runs each one in Python, so trace a smaller problem")
    names = list(function.__code__.co_varnames[:function.__code__.co_argcount])
    if len(args) != len(names):
        raise TypeError(f"kernel {function.__name__}{tuple(names)} takes {len(names)} arguments, got {len(args)}")
    for name, value in zip(names, args):
        if not isinstance(value, np.ndarray) and hasattr(value, "copy_to_host"):
            raise TypeError(f"argument {name!r} is a device array: pass numpy arrays to trace_kernel_adversarial")
    arrays = {name: value for name, value in zip(names, args) if isinstance(value, np.ndarray) and value.ndim > 0}
    unknown = [name for name in poison if name not in arrays]
    if unknown:
        raise ValueError(f"poison names {unknown}, which are not array arguments of {function.__name__} "
                         f"{list(arrays)}")
    for name in poison:
        arrays[name].fill(_fill_value(arrays[name].dtype))
    trace = KernelTrace(griddim=grid, blockdim=block, arrays=arrays)
    traced = _rebind(function, _TracingCuda(grid, block, trace), {})
    call_args = [_InterleavedArray(name, value, trace) if name in arrays else value
                 for name, value in zip(names, args)]
    rng = np.random.default_rng(seed)
    barriers, shuffles = np.zeros(total, dtype=np.int64), np.zeros(total, dtype=np.int64)
    for block_number in rng.permutation(grid.x * grid.y * grid.z).tolist():
        block_index = Dim3(block_number % grid.x, block_number // grid.x % grid.y, block_number // (grid.x * grid.y))
        state = _BlockState()
        threads = [_SimThread(lambda: traced(*call_args), block_index,
                              Dim3(n % block.x, n // block.x % block.y, n // (block.x * block.y)),
                              block_number * per_block + n, state) for n in range(per_block)]
        _run_block_interleaved(threads, rng)
        for thread in threads:
            barriers[thread.gid], shuffles[thread.gid] = thread.barriers, thread.shuffles
    trace.barriers, trace.shuffles = barriers, shuffles
    if not allow_races:
        trace.check_no_races()
    return trace


__all__ = ["trace_kernel_adversarial"]
