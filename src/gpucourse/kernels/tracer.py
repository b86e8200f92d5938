"""The kernel tracer: runs a Numba CUDA kernel's Python source on the CPU, one simulated thread at a time.

:func:`trace_kernel` never needs a GPU: it swaps ``numba.cuda`` for a stand-in (:class:`_TracingCuda`), runs the
threads of each block in turn (switching at every ``syncthreads()``), and records every read and write of the arrays
passed to it in a :class:`~gpucourse.kernels.trace.KernelTrace`. It runs the same way on a Colab GPU as on a laptop
(lessons 04_cuda_model and 05_cuda_shared_memory).

With ``interleave=True`` it plays a random adversarial order instead (lesson 05's graders use it): the threads of a
block switch after every access to shared or global memory, in a seeded random order, so an unsynchronised
read-modify-write loses updates as it can on a GPU; and two threads of a block that touch one element between the
same two barriers, at least one of them writing, unless both use atomics, raise
:class:`~gpucourse.kernels.trace.DataRace`. Its other options use more of a GPU's freedoms against the kernel:
``shuffle_blocks`` runs the blocks in a seeded random order, ``refuse_negative`` makes a negative index into an array
argument an error (Numba wraps it round as Python does, on a GPU too, so a missing ``>= 0`` check silently reads the
far edge; CUDA C reads the memory before the array), and ``poison`` first fills the named array arguments with what
uninitialised memory may hold (NaN for floats), so an element the kernel forgets to write shows.
:func:`trace_kernel_adversarial` turns them all on (lesson 04's graders use it).

Like Numba, which compiles a kernel at its first launch and freezes the globals and closure values it reads, the
tracer remembers them at a kernel's first trace (per argument types) and raises
:class:`~gpucourse.kernels.frozen.FrozenValueChanged` when a later trace finds one changed
(:mod:`~gpucourse.kernels.frozen`).
"""

from __future__ import annotations

import numbers
import sys
import types
from dataclasses import dataclass, field

import greenlet
import numpy as np

from gpucourse._validate import non_negative_int, positive_int
from gpucourse.kernels.frozen import check_frozen
from gpucourse.kernels.geometry import MAX_THREADS_PER_BLOCK, WARP_SIZE, Dim3, ThreadId, _dim3
from gpucourse.kernels.trace import DataRace, KernelTrace

MAX_TRACED_THREADS = 1 << 16
"""Largest launch :func:`trace_kernel` accepts: it runs every thread in Python, so keep launches small."""


class _Aborted(Exception):
    """Raised inside waiting simulated threads when another thread of the block failed."""


def _fill_value(dtype: np.dtype) -> object:
    """What fresh shared and local memory holds in the tracer: real memory is uninitialised, so a value that shows.

    NaN for floats, the most negative value for signed integers, the largest for unsigned ones, False for bools.
    """
    if np.issubdtype(dtype, np.inexact):
        return np.nan
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        return info.min if info.min < 0 else info.max
    return 0


def _as_dtype(dtype: object) -> np.dtype:
    """A numpy dtype from a numpy dtype, a Python type or a Numba type such as numba.float32."""
    try:
        return np.dtype(dtype)
    except TypeError:
        return np.dtype(str(dtype))


class _SimThread(greenlet.greenlet):
    """One simulated CUDA thread: a greenlet that runs only when the scheduler switches to it.

    Greenlets switch within one OS thread in well under a microsecond, where handing a turn between OS threads costs
    tens of microseconds; a block of 1,024 threads passing many barriers runs about ten times faster this way.
    """

    def __init__(self, target, block: Dim3, thread: Dim3, gid: int, block_state: "_BlockState") -> None:
        super().__init__()  # its parent is the scheduler's greenlet, which creates it
        self._target_fn = target
        self.blockIdx, self.threadIdx, self.gid, self.block_state = block, thread, gid, block_state
        self.status, self.error, self.abort, self.barriers, self.allocations = "new", None, False, 0, 0
        self.shuffles, self.offered, self.source_lane, self.mask, self.received = 0, None, None, 0, None

    def run(self) -> None:
        try:
            self._target_fn()
        except _Aborted:
            pass
        except BaseException as error:  # handed to the scheduler, which re-raises it in the caller
            self.error = error
        finally:
            self.status = "finished"

    def resume(self) -> None:
        """Scheduler side: let this thread run until it reaches a barrier or ends."""
        self.status = "running"
        self.switch()

    def syncthreads(self) -> None:
        """Thread side: wait at the block's barrier (give the turn back to the scheduler)."""
        self.barriers += 1
        self._wait("waiting")

    def warp_exchange(self, mask: int, value: object, source_lane: int | None) -> object:
        """Thread side: meet the lanes of ``mask`` in this warp; return ``source_lane``'s value (own if None)."""
        if not isinstance(mask, numbers.Integral) or not 0 < int(mask) <= 0xFFFFFFFF:
            raise ValueError(f"warp mask must be a 32-bit lane mask such as 0xffffffff, got {mask!r}")
        self.shuffles += 1
        self.mask, self.offered, self.source_lane = int(mask), value, source_lane
        self._wait("warp")
        return self.received

    def _wait(self, status: str) -> None:
        """Give the turn back to the scheduler with ``status`` and wait for the next turn."""
        self.status = status
        self.parent.switch()
        if self.abort:
            raise _Aborted()


def _current() -> _SimThread:
    """The simulated thread running now (the traced kernel's code calls this through the stand-in ``cuda``)."""
    return greenlet.getcurrent()


@dataclass
class _BlockState:
    """Memory one block shares: its shared arrays, in the order the kernel declares them.

    In interleave mode it also logs every access (thread, barriers and warp exchanges passed, memory, element) for the
    check of races between the block's threads.
    """

    shared: list = field(default_factory=list)
    interleave: bool = False
    log: list = field(default_factory=list)


def _touched(memory: object, kind: str, flat: int) -> None:
    """After an access: in interleave mode, log it and hand the turn back, so that another thread may run next."""
    thread = _current()
    state = getattr(thread, "block_state", None)
    if state is not None and state.interleave:
        state.log.append((thread.gid, thread.barriers, thread.shuffles, memory, kind, flat))
        thread._wait("ready")


class _SharedArray:
    """A block's shared array as a traced kernel sees it: element reads and writes are recorded (for bank conflicts)."""

    def __init__(self, number: int, array: np.ndarray, trace: KernelTrace) -> None:
        self._number, self._array, self._trace = number, array, trace
        self.shape, self.size, self.ndim, self.dtype = array.shape, array.size, array.ndim, array.dtype

    def __len__(self) -> int:
        return len(self._array)

    def _flat(self, index: object, kind: str) -> int:
        """Flat position of an element index, or a clear error naming the thread for a bad one."""
        where = _current()
        parts = index if isinstance(index, tuple) else (index,)
        label = f"shared array {self._number}[{', '.join(map(str, parts))}]"
        if len(parts) != self.ndim or not all(isinstance(p, numbers.Integral) and not isinstance(p, bool)
                                              for p in parts):
            raise TypeError(f"thread ({ThreadId(where.blockIdx, where.threadIdx)}) {kind} {label}: index all "
                            f"{self.ndim} dimension(s) of a shared array with integers")
        fixed = []
        for part, size in zip(parts, self.shape):
            part = int(part)
            if not -size <= part < size:
                raise IndexError(f"thread ({ThreadId(where.blockIdx, where.threadIdx)}) {kind} {label}, outside "
                                 f"its shape {self.shape}")
            fixed.append(part % size)
        return int(np.ravel_multi_index(fixed, self.shape))

    def __getitem__(self, index):
        flat = self._flat(index, "read")
        self._trace._record_shared(self._number, "read", flat)
        value = self._array.flat[flat]
        _touched(self._number, "read", flat)
        return value

    def __setitem__(self, index, value) -> None:
        flat = self._flat(index, "wrote")
        self._array.flat[flat] = value
        self._trace._record_shared(self._number, "write", flat)
        _touched(self._number, "write", flat)

    def _atomic(self, index, value, combine):
        """An atomic read-modify-write of one shared element, recorded once as 'atomic'; returns the old value."""
        flat = self._flat(index, "updated atomically")
        old = self._array.flat[flat]
        self._array.flat[flat] = combine(old, value)
        self._trace._record_shared(self._number, "atomic", flat)
        _touched(self._number, "atomic", flat)
        return old

    def __repr__(self) -> str:
        return f"<traced shared array {self._number}: shape {self.shape}, {self.dtype}>"


class _Shared:
    """cuda.shared: one array per declaration and block, matched by declaration order (not by source line)."""

    def __init__(self, trace: KernelTrace) -> None:
        self._trace = trace

    def array(self, shape, dtype):
        """Allocate (first thread) or look up (other threads) this block's next shared array."""
        current = _current()
        dtype = _as_dtype(dtype)
        arrays, index = current.block_state.shared, current.allocations
        current.allocations += 1
        if index == len(arrays):
            memory = np.full(shape, _fill_value(dtype), dtype=dtype)
            arrays.append(_SharedArray(index, memory, self._trace))
            self._trace._declare_shared(index, memory)
        return arrays[index]


class _Local:
    """cuda.local: a private array per thread."""

    def array(self, shape, dtype):
        """A fresh per-thread array (NaN-filled floats, like uninitialised memory made visible)."""
        dtype = _as_dtype(dtype)
        return np.full(shape, _fill_value(dtype), dtype=dtype)


class _Atomic:
    """cuda.atomic: read-modify-write of one element (the tracer runs one thread at a time, so it is atomic).

    On a traced global array the update is recorded once, as 'atomic'; on shared or local memory it is a plain update.
    """

    @staticmethod
    def _update(array, index, value, combine):
        if isinstance(array, (_RecordingArray, _SharedArray)):
            return array._atomic(index, value, combine)
        old = array[index]
        array[index] = combine(old, value)
        return old

    def add(self, array, index, value):
        """array[index] += value; return the old value."""
        return self._update(array, index, value, lambda a, b: a + b)

    def max(self, array, index, value):
        """array[index] = max(array[index], value); return the old value."""
        return self._update(array, index, value, max)

    def min(self, array, index, value):
        """array[index] = min(array[index], value); return the old value."""
        return self._update(array, index, value, min)

    def sub(self, array, index, value):
        """array[index] -= value; return the old value."""
        return self._update(array, index, value, lambda a, b: a - b)

    def exch(self, array, index, value):
        """array[index] = value; return the old value."""
        return self._update(array, index, value, lambda a, b: b)

    def compare_and_swap(self, array, old, value):
        """array[0] = value if array[0] == old; return the value array[0] had (Numba's 1-D form)."""
        return self._update(array, 0, value, lambda a, b: b if a == old else a)

    def cas(self, array, index, old, value):
        """array[index] = value if array[index] == old; return the value it had."""
        return self._update(array, index, value, lambda a, b: b if a == old else a)


class _TracingCuda:
    """Stands in for ``numba.cuda`` inside a traced kernel."""

    warpsize = WARP_SIZE

    def __init__(self, griddim: Dim3, blockdim: Dim3, trace: KernelTrace) -> None:
        self.gridDim, self.blockDim = griddim, blockdim
        self.shared, self.local, self.atomic = _Shared(trace), _Local(), _Atomic()

    @property
    def threadIdx(self) -> Dim3:
        return _current().threadIdx

    @property
    def blockIdx(self) -> Dim3:
        return _current().blockIdx

    @property
    def laneid(self) -> int:
        t, b = _current().threadIdx, self.blockDim
        return (t.x + b.x * (t.y + b.y * t.z)) % WARP_SIZE

    def grid(self, ndim: int):
        """Global index of this thread: blockIdx * blockDim + threadIdx, in 1, 2 or 3 dimensions."""
        b, t, d = self.blockIdx, self.threadIdx, self.blockDim
        index = (b.x * d.x + t.x, b.y * d.y + t.y, b.z * d.z + t.z)
        if ndim not in (1, 2, 3):
            raise ValueError(f"cuda.grid(ndim) needs ndim 1, 2 or 3, got {ndim}")
        return index[0] if ndim == 1 else index[:ndim]

    def gridsize(self, ndim: int):
        """Threads in the whole grid along each of the first ``ndim`` dimensions."""
        size = tuple(g * d for g, d in zip(self.gridDim, self.blockDim))
        if ndim not in (1, 2, 3):
            raise ValueError(f"cuda.gridsize(ndim) needs ndim 1, 2 or 3, got {ndim}")
        return size[0] if ndim == 1 else size[:ndim]

    def syncthreads(self) -> None:
        """Barrier: every thread of the block waits here until all have arrived."""
        _current().syncthreads()

    def syncwarp(self, mask: int = 0xFFFFFFFF) -> None:
        """Warp barrier: the lanes of ``mask`` meet here."""
        _current().warp_exchange(mask, None, None)

    def shfl_sync(self, mask: int, value, src_lane: int):
        """The value held by lane ``src_lane`` (mod 32) of this warp."""
        return _current().warp_exchange(mask, value, int(src_lane) % WARP_SIZE)

    def shfl_down_sync(self, mask: int, value, delta: int):
        """The value of lane (this lane + delta); a lane past the warp's end keeps its own value."""
        lane = self.laneid + int(delta)
        return _current().warp_exchange(mask, value, lane if lane < WARP_SIZE else None)

    def shfl_up_sync(self, mask: int, value, delta: int):
        """The value of lane (this lane - delta); a lane before the warp's start keeps its own value."""
        lane = self.laneid - int(delta)
        return _current().warp_exchange(mask, value, lane if lane >= 0 else None)

    def shfl_xor_sync(self, mask: int, value, lane_mask: int):
        """The value of lane (this lane XOR lane_mask): the butterfly exchange of a warp reduction."""
        lane = self.laneid ^ int(lane_mask)
        return _current().warp_exchange(mask, value, lane if lane < WARP_SIZE else None)

    @staticmethod
    def fma(a, b, c):
        """a * b + c with one rounding (Numba's cuda.fma); float32 in, float32 out."""
        if all(np.asarray(value).dtype == np.float32 for value in (a, b, c)):
            return np.float32(np.float64(a) * np.float64(b) + np.float64(c))  # the product is exact in float64
        return a * b + c

    def threadfence(self) -> None:
        """Memory fence: nothing to do when threads run one at a time."""

    threadfence_block = threadfence_system = threadfence

    def __getattr__(self, name: str):
        raise AttributeError(f"cuda.{name} is not supported by gpucourse's kernel tracer (it supports threadIdx, "
                             "blockIdx, blockDim, gridDim, laneid, grid, gridsize, syncthreads, syncwarp, "
                             "shfl_sync, shfl_up_sync, shfl_down_sync, shfl_xor_sync, fma, shared, local, atomic)")


class _RecordingArray:
    """A global-memory array as a traced kernel sees it: every element read and write is recorded."""

    def __init__(self, name: str, array: np.ndarray, trace: "KernelTrace", refuse_negative: bool = False) -> None:
        self._name, self._array, self._trace, self._refuse_negative = name, array, trace, refuse_negative
        self.shape, self.size, self.ndim, self.dtype = array.shape, array.size, array.ndim, array.dtype

    def __len__(self) -> int:
        return len(self._array)

    def _flat(self, index: object, kind: str) -> int:
        """Flat position of an element index, or a clear error naming the thread for a bad one."""
        where = _current()
        label = f"{self._name}[{index if not isinstance(index, tuple) else ', '.join(map(str, index))}]"
        parts = index if isinstance(index, tuple) else (index,)
        if len(parts) != self.ndim or not all(isinstance(p, numbers.Integral) and not isinstance(p, bool)
                                              for p in parts):
            raise TypeError(f"thread ({ThreadId(where.blockIdx, where.threadIdx)}) {kind} {label}: the tracer "
                            f"follows element accesses, so index all {self.ndim} dimension(s) with integers")
        if self._refuse_negative and any(part < 0 for part in parts):
            raise IndexError(f"thread ({ThreadId(where.blockIdx, where.threadIdx)}) {kind} {label}: a negative "
                             f"index. Python and Numba (on a GPU too) wrap it round to the end of {self._name}, "
                             "silently; CUDA C reads the memory before the array. A missing `>= 0` in a guard?")
        fixed = []
        for part, size in zip(parts, self.shape):
            part = int(part)
            if not -size <= part < size:
                raise IndexError(f"thread ({ThreadId(where.blockIdx, where.threadIdx)}) {kind} {label}, outside "
                                 f"{self._name} of shape {self.shape}: a missing guard such as `if i < n:`?")
            fixed.append(part % size)
        return int(np.ravel_multi_index(fixed, self.shape))

    def __getitem__(self, index):
        flat = self._flat(index, "read")
        self._trace._record(self._name, "read", flat)
        value = self._array.flat[flat]
        _touched(self._name, "read", flat)
        return value

    def __setitem__(self, index, value) -> None:
        flat = self._flat(index, "wrote")
        self._array.flat[flat] = value
        self._trace._record(self._name, "write", flat)
        _touched(self._name, "write", flat)

    def _atomic(self, index, value, combine):
        """An atomic read-modify-write of one element, recorded once as 'atomic'; returns the old value."""
        flat = self._flat(index, "updated atomically")
        old = self._array.flat[flat]
        self._array.flat[flat] = combine(old, value)
        self._trace._record(self._name, "atomic", flat)
        _touched(self._name, "atomic", flat)
        return old

    def __repr__(self) -> str:
        return f"<traced global array {self._name}: shape {self.shape}, {self.dtype}>"


def _python_function(kernel: object) -> types.FunctionType:
    """The Python function behind a @cuda.jit kernel (real or simulated), or the function itself."""
    function = getattr(kernel, "py_func", kernel)
    if not isinstance(function, types.FunctionType):
        raise TypeError(f"kernel must be a @cuda.jit kernel or a Python function, got {type(kernel).__name__}")
    return function


def _is_numba_cuda(value: object) -> bool:
    """True for the numba.cuda module (simulator or real target; also when NVIDIA's numba-cuda package provides it)."""
    return isinstance(value, types.ModuleType) and (value is sys.modules.get("numba.cuda")
                                                    or value.__name__.endswith("numba.cuda"))


def _is_device_function(value: object) -> bool:
    """True for a @cuda.jit(device=True) function of either Numba backend."""
    options = getattr(value, "targetoptions", None)
    return bool(getattr(value, "_device", False) or (isinstance(options, dict) and options.get("device")))


def _names_used(code: types.CodeType) -> set[str]:
    """Global names a code object (and the functions and comprehensions nested in it) may look up."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names_used(constant)
    return names


def _rebind(function: types.FunctionType, fake: _TracingCuda, done: dict) -> types.FunctionType:
    """A copy of ``function`` whose ``cuda`` (global or closure variable) is the tracer's, device functions too."""
    if id(function) in done:
        return done[id(function)]

    def swap(value):
        if _is_numba_cuda(value):
            return fake
        if _is_device_function(value):
            return _rebind(_python_function(value), fake, done)
        return value

    cells = None
    if function.__closure__ is not None:
        cells = []
        for cell in function.__closure__:
            try:
                cells.append(types.CellType(swap(cell.cell_contents)))
            except ValueError:  # an empty cell (a variable not yet assigned)
                cells.append(cell)
        cells = tuple(cells)
    namespace = dict(function.__globals__)
    new = types.FunctionType(function.__code__, namespace, function.__name__, function.__defaults__, cells)
    done[id(function)] = new
    used = _names_used(function.__code__)
    namespace.update({name: swap(value) for name, value in function.__globals__.items()
                      if name in used or _is_numba_cuda(value)})
    return new


def _launch_size(grid: Dim3, block: Dim3, max_threads: int) -> int:
    """Threads per block of a launch, after refusing a block larger than CUDA's or a launch over ``max_threads``."""
    per_block = block.x * block.y * block.z
    if per_block > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"blockdim {tuple(block)} has {per_block} threads; CUDA allows at most "
                         f"{MAX_THREADS_PER_BLOCK} per block")
    total = per_block * grid.x * grid.y * grid.z
    if total > max_threads:
        raise ValueError(f"griddim x blockdim launches {total} threads, more than max_threads={max_threads}: the "
                         "tracer runs each one in Python, so trace a smaller problem")
    return per_block


def _array_arguments(function: types.FunctionType, args: tuple) -> tuple[list[str], dict[str, np.ndarray]]:
    """The kernel's parameter names and its array arguments by name; TypeError for a wrong count or a device array."""
    names = list(function.__code__.co_varnames[:function.__code__.co_argcount])
    if len(args) != len(names):
        raise TypeError(f"kernel {function.__name__}{tuple(names)} takes {len(names)} arguments, got {len(args)}")
    for name, value in zip(names, args):
        if not isinstance(value, np.ndarray) and hasattr(value, "copy_to_host"):
            raise TypeError(f"argument {name!r} is a device array: pass numpy arrays to trace_kernel")
    return names, {name: value for name, value in zip(names, args) if isinstance(value, np.ndarray) and value.ndim > 0}


def _poison(arrays: dict[str, np.ndarray], poison: object, kernel_name: str) -> None:
    """Fill the array arguments named in ``poison`` (in place) with what uninitialised memory may hold."""
    if isinstance(poison, str) or not isinstance(poison, (tuple, list)):
        raise TypeError(f"poison must be a tuple of argument names, got {poison!r}")
    unknown = [name for name in poison if name not in arrays]
    if unknown:
        raise ValueError(f"poison names {unknown}, which are not array arguments of {kernel_name} {list(arrays)}")
    for name in poison:
        arrays[name].fill(_fill_value(arrays[name].dtype))


def trace_kernel(kernel: object, griddim: int | tuple[int, ...], blockdim: int | tuple[int, ...],
                 *args: object, max_threads: int = MAX_TRACED_THREADS, allow_races: bool = False,
                 interleave: bool = False, seed: int = 0, shuffle_blocks: bool = False, refuse_negative: bool = False,
                 poison: tuple[str, ...] = ()) -> KernelTrace:
    """Run ``kernel[griddim, blockdim](*args)`` in Python, one thread at a time, recording every global access.

    Raises DataRace (a CheckFailed) when two blocks write one element without an atomic, or one block reads what
    another writes, unless ``allow_races``: blocks run one after another here, which would hide such a race.
    With ``interleave``, the threads of a block take turns after every memory access, in an order drawn from
    ``seed`` (a random adversarial order: a plain ``+=`` from several threads loses updates), and two threads of one
    block that touch an element between the same two barriers, at least one writing, unless both use atomics, are a
    DataRace too. With ``shuffle_blocks`` the blocks run in an order drawn from ``seed``; with ``refuse_negative`` a
    negative index into an array argument raises IndexError; the array arguments named in ``poison`` are first
    filled (in place) with NaN (floats) or an extreme integer. Raises FrozenValueChanged (a CheckFailed) when a
    global or closure value the kernel reads changed since its first trace with these argument types: Numba
    freezes them at the first compile, so a GPU would still use the old one.
    Taught in lessons 04_cuda_model and 05_cuda_shared_memory.
    """
    function = _python_function(kernel)
    grid, block = Dim3(*_dim3("griddim", griddim)), Dim3(*_dim3("blockdim", blockdim))
    max_threads = positive_int("max_threads", max_threads)
    for flag, value in (("allow_races", allow_races), ("interleave", interleave), ("shuffle_blocks", shuffle_blocks),
                        ("refuse_negative", refuse_negative)):
        if not isinstance(value, bool):
            raise TypeError(f"{flag} must be True or False, got {value!r}")
    order = np.random.default_rng(non_negative_int("seed", seed))
    per_block = _launch_size(grid, block, max_threads)
    blocks = grid.x * grid.y * grid.z
    names, arrays = _array_arguments(function, args)
    check_frozen(kernel, function, args)  # a GPU keeps the globals of the kernel's first launch: fail if they changed
    _poison(arrays, poison, function.__name__)
    trace = KernelTrace(griddim=grid, blockdim=block, arrays=arrays)
    traced = _rebind(function, _TracingCuda(grid, block, trace), {})
    call_args = [_RecordingArray(name, value, trace, refuse_negative) if name in arrays else value
                 for name, value in zip(names, args)]
    barriers, shuffles = np.zeros(per_block * blocks, dtype=np.int64), np.zeros(per_block * blocks, dtype=np.int64)
    for block_number in (order.permutation(blocks).tolist() if shuffle_blocks else range(blocks)):
        block_index = Dim3(block_number % grid.x, block_number // grid.x % grid.y, block_number // (grid.x * grid.y))
        state = _BlockState(interleave=interleave)
        threads = []
        for thread_number in range(per_block):
            thread_index = Dim3(thread_number % block.x, thread_number // block.x % block.y,
                                thread_number // (block.x * block.y))
            threads.append(_SimThread(lambda: traced(*call_args), block_index, thread_index,
                                      block_number * per_block + thread_number, state))
        if interleave:
            _run_block_interleaved(threads, order)
            trace.block_races.extend(_block_races(state.log, trace))
        else:
            _run_block(threads)
        for thread in threads:
            barriers[thread.gid], shuffles[thread.gid] = thread.barriers, thread.shuffles
    trace.barriers, trace.shuffles = barriers, shuffles
    if not allow_races:
        if trace.block_races:
            raise DataRace(f"{trace.block_races[0]}" + (f" ({len(trace.block_races)} races in all)"
                                                        if len(trace.block_races) > 1 else ""))
        trace.check_no_races()
    return trace


def trace_kernel_adversarial(kernel: object, griddim: int | tuple[int, ...], blockdim: int | tuple[int, ...],
                             *args: object, seed: int = 0, poison: tuple[str, ...] = (),
                             max_threads: int = MAX_TRACED_THREADS, allow_races: bool = False) -> KernelTrace:
    """:func:`trace_kernel` in a random adversarial order: blocks shuffled, threads switched at every access, races
    flagged, negative indices refused.

    The same as ``trace_kernel(..., interleave=True, shuffle_blocks=True, refuse_negative=True)``, with ``seed``,
    ``poison``, ``max_threads`` and ``allow_races`` passed on, and then :meth:`KernelTrace.check_barriers`: a
    ``cuda.syncthreads()`` that only some threads of a block reach (under ``if j < n``, after an early ``return``)
    is refused, as on a GPU it may hang or pair the wrong barriers. Taught in lesson 04_cuda_model, whose graders use it.
    """
    trace = trace_kernel(kernel, griddim, blockdim, *args, max_threads=max_threads, allow_races=allow_races,
                         interleave=True, seed=seed, shuffle_blocks=True, refuse_negative=True, poison=poison)
    trace.check_barriers(quiet=True)
    return trace


def _run_block_interleaved(threads: list[_SimThread], order: np.random.Generator) -> None:
    """Run a block's threads in turns of one memory access each, in a random order per round (interleave mode).

    When no thread can go on, lanes parked at a warp exchange get their values first; only when none is left do the
    threads parked at syncthreads() pass the barrier together.
    """
    while True:
        ready = [thread for thread in threads if thread.status in ("new", "ready")]
        if ready:
            for position in order.permutation(len(ready)):
                thread = ready[int(position)]
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
        for thread in waiting:
            thread.status = "ready"


_DID = {"read": "reads", "write": "writes", "atomic": "updates atomically"}


def _block_races(log: list, trace: KernelTrace) -> list[str]:
    """One sentence per element that two threads of a block touched between the same barriers, not only reading.

    Two accesses conflict unless both are reads or both atomics; two lanes of one warp are ordered by a warp
    exchange (syncwarp, a shuffle) between them.
    """
    groups: dict[tuple, list] = {}
    for gid, barriers, shuffles, memory, kind, flat in log:
        groups.setdefault((memory, flat, barriers), []).append((gid, shuffles, kind))
    found = []
    for (memory, flat, _), entries in groups.items():
        kinds = {kind for _, _, kind in entries}
        if kinds == {"read"} or kinds == {"atomic"}:
            continue
        writers = [entry for entry in entries if entry[2] != "read"]

        def conflict(a: tuple, b: tuple) -> bool:
            """Different threads, not both atomic, and not ordered by a warp exchange inside one warp."""
            return (b[0] != a[0] and not (a[2] == b[2] == "atomic")
                    and not (a[0] // WARP_SIZE == b[0] // WARP_SIZE and a[1] != b[1]))

        pair = (next(((a, b) for a in writers for b in writers if conflict(a, b)), None)  # two writers first
                or next(((a, b) for a in writers for b in entries if conflict(a, b)), None))
        if pair is None:
            continue
        (first, _, first_kind), (second, _, second_kind) = pair
        readers = {gid for gid, _, kind in entries if kind == "read"}
        updated = any(kind == "write" and gid in readers for gid, _, kind in entries)  # a plain x[i] += v
        if isinstance(memory, int):
            shape, name = trace.shared[memory].shape, f"shared array {memory}"
        else:
            shape, name = trace.arrays[memory].shape, memory
        element = f"{name}[{', '.join(str(int(i)) for i in np.unravel_index(flat, shape))}]"
        if updated or "atomic" in (first_kind, second_kind):
            fix = ("a plain `x[i] += v` from several threads loses updates when they interleave: use "
                   "cuda.atomic.add(x, i, v), or give each thread its own element")
        elif first_kind == second_kind == "write":
            fix = ("two threads write one element, so the value left depends on which writes last: let one thread "
                   "write it (check your indices and guards), or use cuda.atomic.add if the writes should add up")
        else:
            fix = ("a thread may read what another thread of its block wrote only after a cuda.syncthreads() that "
                   "both pass (and may overwrite what others read only after one, too)")
        found.append(f"data race inside block {tuple(trace.thread_id(first).block)}: thread "
                     f"{tuple(trace.thread_id(first).thread)} {_DID[first_kind]} {element} and thread "
                     f"{tuple(trace.thread_id(second).thread)} {_DID[second_kind]} it with no barrier between them. "
                     "On a GPU the threads of a block run at the same time, so the result depends on timing (this "
                     f"trace interleaved them).\n  Hint: {fix}")
    return found


def _run_block(threads: list[_SimThread]) -> None:
    """Run a block's threads one at a time, in order; each runs to its next syncthreads(), warp exchange or end.

    After a round, threads parked at a warp exchange (a shuffle or syncwarp) get their values and go on first; only
    when none is left do the threads parked at syncthreads() pass the barrier together.
    """
    active = threads
    while active:
        for thread in active:
            thread.resume()
            if thread.error is not None:
                _fail(threads, thread.error, thread)
        at_warp = [thread for thread in threads if thread.status == "warp"]
        if at_warp:
            try:
                _exchange(threads, at_warp)
            except RuntimeError as error:
                _fail(threads, error, None)
            active = at_warp
        else:
            active = [thread for thread in active if thread.status == "waiting"]


def _fail(threads: list[_SimThread], error: BaseException, thread: _SimThread | None) -> None:
    """Release the block's parked threads so they end, then raise ``error`` (noting the thread it came from)."""
    for other in threads:
        if other.status in ("waiting", "warp", "ready"):
            other.abort = True
            other.resume()
    if thread is not None and hasattr(error, "add_note") and "thread (block" not in str(error):
        error.add_note(f"in traced thread ({ThreadId(thread.blockIdx, thread.threadIdx)})")
    raise error


def _exchange(threads: list[_SimThread], at_warp: list[_SimThread]) -> None:
    """Hand every lane parked at a warp exchange the value of its source lane; RuntimeError if a lane is missing."""
    lanes = {thread.gid % len(threads): thread for thread in at_warp}
    for number, thread in lanes.items():
        warp, lane = divmod(number, WARP_SIZE)
        base = warp * WARP_SIZE
        existing = min(WARP_SIZE, len(threads) - base)
        where = f"warp {warp} of block {tuple(thread.blockIdx)}"
        for needed in range(existing):
            if thread.mask >> needed & 1 and base + needed not in lanes:
                raise RuntimeError(f"warp shuffle or syncwarp in {where}: lane {needed} is in the mask "
                                   f"{thread.mask:#x} but did not reach it (inside an `if` that not every lane "
                                   "takes?); every lane of the mask must call it")
        source = thread.source_lane
        if source is None or source >= existing:
            thread.received = thread.offered
        elif base + source in lanes:
            thread.received = lanes[base + source].offered
        else:
            raise RuntimeError(f"warp shuffle in {where}: lane {lane} reads lane {source}, which did not take part")


__all__ = ["MAX_TRACED_THREADS", "trace_kernel", "trace_kernel_adversarial"]
