"""A simulated asynchronous GPU: see timing mistakes happen on a machine without one.

A real GPU call returns to Python as soon as the kernel is *queued*; the GPU runs it later, in order, and
``torch.cuda.synchronize()`` waits until the queue is empty. The first launch is slow: it creates the CUDA
context and loads the kernel. :class:`SimulatedGPU` behaves the same way, with sleeps standing in for kernels
and one background thread standing in for the GPU, so a timer that forgets to synchronise measures (almost)
nothing on it::

    with SimulatedGPU(kernel_s=0.02) as gpu:
        gpu.launch()          # returns after the launch overhead; the "kernel" runs for 20 ms in the background
        gpu.synchronize()     # returns when it has finished

With ``simulated_clock=True`` nothing sleeps: every duration advances the device's own clock, ``gpu.clock()``,
instead, so a benchmark timed with that clock gets exact, noise-free times, and ``kernel_times`` can give each
launch its own duration (graders use both to check a median exactly, fast, on a busy machine).

More behaviours of real GPUs, each off by default: float64 matmuls at their own (usually much lower) rate
(``fp64_flops_per_s``); a clock that drops after a burst of sustained work, suddenly or over ``throttle_ramp_s``
seconds, as power and temperature limits bring it down (``boost_s``, ``sustained_fraction``); timing noise and
random outliers (``jitter``, ``outlier_prob``, ``outlier_s``, ``seed``); and an L2 cache, so that
:meth:`SimulatedGPU.stream` reads a working set that fits it faster than one that must come from memory
(``l2_bytes``, ``l2_bytes_per_s``, ``memory_bytes_per_s``), and a :meth:`SimulatedGPU.launch` that reads the same
inputs as the kernel before it runs ``l2_hit_factor`` times as long, until a write of the whole L2
(``gpu.empty(nbytes).zero_()``) evicts them.

The device offers CUDA's events with ``torch.cuda``'s interface, so the same benchmark code runs on both::

    start, end = gpu.Event(enable_timing=True), gpu.Event(enable_timing=True)
    start.record(); gpu.launch(); end.record()
    end.synchronize()
    start.elapsed_time(end)   # milliseconds, measured on the device's own timeline

Lesson: 03_timing.
"""

from __future__ import annotations

import collections
import queue
import random
import threading
import time
import weakref
from collections.abc import Iterable
from typing import Any

from gpucourse._validate import non_negative_int, non_negative_number, positive_int, positive_number

MAX_SECONDS = 60.0
"""Longest duration accepted where it really elapses (a kernel on a real-time SimulatedGPU sleeps that long)."""

_STOP = object()
_WRITE = object()  # the L2 key prefix of a buffer's write: never sped up by the cache


def _seconds(name: str, value: object, *, positive: bool = False) -> float:
    """Return ``value`` as seconds: a finite number (> 0 if ``positive``) of at most MAX_SECONDS."""
    seconds = positive_number(name, value) if positive else non_negative_number(name, value)
    if seconds > MAX_SECONDS:
        raise ValueError(f"{name} must be <= {MAX_SECONDS:g} s (simulated durations really elapse), got {value}")
    return seconds


class _Stream:
    """The simulated GPU's queue and its worker thread (kept apart from SimulatedGPU so it can be collected)."""

    def __init__(self) -> None:
        self.kernels: queue.Queue[Any] = queue.Queue()
        self.stopping = threading.Event()
        self.completed = 0
        self.thread = threading.Thread(target=self._work, name="SimulatedGPU-stream", daemon=True)
        self.thread.start()

    def _work(self) -> None:
        """Run queued kernels one after the other, in launch order, until told to stop."""
        while True:
            item = self.kernels.get()
            try:
                if item is _STOP:
                    return
                if isinstance(item, SimulatedEvent):  # a marker: the device reached it now
                    item._reached(time.perf_counter())
                    continue
                if not self.stopping.is_set():
                    self.stopping.wait(item)  # "compute" for item seconds; a stop request cuts it short
                self.completed += 1
            finally:
                self.kernels.task_done()

    def stop(self) -> None:
        """Drop the remaining work and end the thread."""
        self.stopping.set()
        self.kernels.put(_STOP)
        self.thread.join(timeout=MAX_SECONDS)


class SimulatedGPU:
    """A pretend GPU on the CPU: calls queue work and return at once; ``synchronize()`` waits for it.

    - ``kernel_s``: duration of one :meth:`launch` (the default kernel);
    - ``init_s``: extra time of the first launch or copy (creating the "CUDA context" and loading the kernel),
      spent in the caller, so even an unsynchronised timer sees it; ``synchronize()`` alone does not pay it;
    - ``launch_s``: time each launch takes on the caller's side before it returns;
    - ``flops_per_s``: the device's peak, which sets how long :meth:`matmul` runs;
    - ``transfer_bytes_per_s``: speed of :meth:`to_device`, a blocking host-to-device copy;
    - ``hiccup_every`` and ``hiccup_s``: every ``hiccup_every``-th kernel takes ``hiccup_s`` longer
      (0 = never), a deterministic stand-in for the odd slow repeat;
    - ``simulated_clock``: if True, durations advance :meth:`clock` instead of really elapsing (no sleeps, no
      background thread); if False, :meth:`clock` is ``time.perf_counter``;
    - ``kernel_times``: durations of the 1st, 2nd, ... :meth:`launch` without an argument, in seconds (used
      instead of ``kernel_s``; a launch beyond the list raises RuntimeError);
    - ``fp64_flops_per_s``: the float64 peak of :meth:`matmul` (default ``flops_per_s / 32``, as on a T4);
    - ``boost_s`` and ``sustained_fraction``: after ``boost_s`` seconds of kernel time (None: never) every later
      kernel runs at ``sustained_fraction`` of the burst clock, so it takes 1 / sustained_fraction times longer;
    - ``l2_bytes``, ``l2_bytes_per_s`` and ``memory_bytes_per_s``: :meth:`stream` reads a working set of at most
      ``l2_bytes`` at the L2's bandwidth, a larger one at the memory's (a repeated sweep over more than the cache
      evicts every line before it is used again);
    - ``l2_hit_factor``: a :meth:`launch` with ``reads`` whose inputs are still in the L2 (the same ``reads`` key
      ran last, and nothing since wrote the L2 over) runs this fraction of its time (1.0: no effect);
    - ``throttle_ramp_s``: the clock falls from boost to ``sustained_fraction`` over this much kernel time after
      ``boost_s`` (0: at once);
    - ``jitter``, ``outlier_prob``, ``outlier_s`` and ``seed``: every kernel's time is multiplied by a random factor
      in [1 - jitter, 1 + jitter], and with probability ``outlier_prob`` it takes ``outlier_s`` longer (random, but
      reproducible from ``seed``);
    - ``flush_jitter``: a buffer's ``zero_()`` (the L2 flush) takes its time multiplied by a random factor in
      [1 - flush_jitter, 1 + flush_jitter] (0: exact), as a real memset's time varies by microseconds.

    Recording an event costs the host ``launch_s``, like any launch: an event recorded on an idle device is
    stamped when the record reaches it, after the host's launch time (as with ``cudaEventRecord``).
    """

    def __init__(self, kernel_s: float = 0.02, *, init_s: float = 0.25, launch_s: float = 0.0002,
                 flops_per_s: float = 1e12, transfer_bytes_per_s: float = 12e9, hiccup_every: int = 0,
                 hiccup_s: float = 0.0, simulated_clock: bool = False,
                 kernel_times: Iterable[float] | None = None, fp64_flops_per_s: float | None = None,
                 boost_s: float | None = None, sustained_fraction: float = 1.0, l2_bytes: int = 4 * 2**20,
                 l2_bytes_per_s: float = 3e12, memory_bytes_per_s: float = 1e12, l2_hit_factor: float = 1.0,
                 throttle_ramp_s: float = 0.0, jitter: float = 0.0, outlier_prob: float = 0.0,
                 outlier_s: float = 0.0, seed: int = 0, flush_jitter: float = 0.0) -> None:
        self.kernel_s = _seconds("kernel_s", kernel_s, positive=True)
        self.init_s = _seconds("init_s", init_s)
        self.launch_s = _seconds("launch_s", launch_s)
        self.flops_per_s = positive_number("flops_per_s", flops_per_s)
        self.transfer_bytes_per_s = positive_number("transfer_bytes_per_s", transfer_bytes_per_s)
        self.hiccup_every = non_negative_int("hiccup_every", hiccup_every)
        self.hiccup_s = _seconds("hiccup_s", hiccup_s)
        if not isinstance(simulated_clock, bool):
            raise TypeError(f"simulated_clock must be True or False, got {simulated_clock!r}")
        self.simulated_clock = simulated_clock
        if kernel_times is None:
            self.kernel_times: tuple[float, ...] | None = None
        elif isinstance(kernel_times, (str, bytes)) or not isinstance(kernel_times, Iterable):
            raise TypeError(f"kernel_times must be a list of seconds, got {type(kernel_times).__name__}")
        else:
            self.kernel_times = tuple(_seconds("kernel_times", t, positive=True) for t in kernel_times)
        self.fp64_flops_per_s = (self.flops_per_s / 32 if fp64_flops_per_s is None
                                 else positive_number("fp64_flops_per_s", fp64_flops_per_s))
        self.boost_s = None if boost_s is None else non_negative_number("boost_s", boost_s)
        self.sustained_fraction = positive_number("sustained_fraction", sustained_fraction)
        if self.sustained_fraction > 1:
            raise ValueError(f"sustained_fraction must be in (0, 1], got {sustained_fraction}")
        self.l2_bytes = non_negative_int("l2_bytes", l2_bytes)
        self.l2_bytes_per_s = positive_number("l2_bytes_per_s", l2_bytes_per_s)
        self.memory_bytes_per_s = positive_number("memory_bytes_per_s", memory_bytes_per_s)
        self.l2_hit_factor = positive_number("l2_hit_factor", l2_hit_factor)
        if self.l2_hit_factor > 1:
            raise ValueError(f"l2_hit_factor must be in (0, 1], got {l2_hit_factor}")
        self.throttle_ramp_s = non_negative_number("throttle_ramp_s", throttle_ramp_s)
        self.jitter = non_negative_number("jitter", jitter)
        if self.jitter >= 1:
            raise ValueError(f"jitter must be a fraction below 1 (e.g. 0.03), got {jitter}")
        self.outlier_prob = non_negative_number("outlier_prob", outlier_prob)
        if self.outlier_prob > 1:
            raise ValueError(f"outlier_prob must be in [0, 1], got {outlier_prob}")
        self.outlier_s = _seconds("outlier_s", outlier_s)
        self.flush_jitter = non_negative_number("flush_jitter", flush_jitter)
        if self.flush_jitter >= 1:
            raise ValueError(f"flush_jitter must be a fraction below 1 (e.g. 0.05), got {flush_jitter}")
        self._rng = random.Random(non_negative_int("seed", seed))
        self._l2: collections.OrderedDict[object, int] = collections.OrderedDict()  # what the L2 holds, oldest first
        self.busy_s = 0.0  # kernel time queued so far: past boost_s, the clock drops
        self.calls = 0
        self._default_launches = 0
        self.initialized = False
        self._lock = threading.Lock()
        self._now = 0.0           # simulated clock: the host's time
        self._ends: list[float] = []  # simulated clock: when each queued kernel finishes
        if simulated_clock:
            self._stream = None
            self._finalizer = weakref.finalize(self, lambda: None)
        else:
            self._stream = _Stream()
            self._finalizer = weakref.finalize(self, self._stream.stop)  # no thread outlives its device

    # ------------------------------------------------------------------ state

    @property
    def peak_flops(self) -> float:
        """The simulated device's peak FLOP/s (its matmuls run exactly at it)."""
        return self.flops_per_s

    @property
    def completed(self) -> int:
        """Kernels that have finished running."""
        if self._stream is None:
            return sum(end <= self._now for end in self._ends)
        return self._stream.completed

    def clock(self) -> float:
        """Seconds on the host's clock: the simulated one with ``simulated_clock=True``, else time.perf_counter()."""
        return self._now if self._stream is None else time.perf_counter()

    def _wait(self, seconds: float) -> None:
        """Spend ``seconds`` on the host: advance the simulated clock, or really sleep."""
        if self._stream is None:
            self._now += seconds
        else:
            time.sleep(seconds)

    @property
    def pending(self) -> int:
        """Kernels launched but not finished yet."""
        return self.calls - self.completed

    @property
    def closed(self) -> bool:
        """True once :meth:`close` has run."""
        return not self._finalizer.alive

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.calls} kernels launched, {self.pending} pending"
        return (f"SimulatedGPU(kernel_s={self.kernel_s:g}, init_s={self.init_s:g}, launch_s={self.launch_s:g}, "
                f"flops_per_s={self.flops_per_s:g}; {state})")

    # ------------------------------------------------------------------ the device's API

    def _ensure_ready(self, initialise: bool = True) -> None:
        """Refuse work after close(); with ``initialise``, pay the one-off start-up cost if it is still due."""
        if self.closed:
            raise RuntimeError("this SimulatedGPU is closed: create a new one")
        if not initialise:
            return
        with self._lock:
            if not self.initialized:
                self._wait(self.init_s)  # like creating a CUDA context and loading kernels: blocks the caller
                self.initialized = True

    def clock_fraction(self) -> float:
        """The fraction of the boost clock the next kernel runs at (1.0 until boost_s of kernel time has run)."""
        if self.boost_s is None or self.busy_s < self.boost_s:
            return 1.0
        if self.throttle_ramp_s and self.busy_s < self.boost_s + self.throttle_ramp_s:
            return 1.0 - (1.0 - self.sustained_fraction) * (self.busy_s - self.boost_s) / self.throttle_ramp_s
        return self.sustained_fraction

    def _touch_l2(self, key: object, nbytes: int) -> bool:
        """Record that a kernel used ``nbytes`` under ``key``; return True if they were all in the L2 already."""
        hit = key in self._l2 and nbytes <= self.l2_bytes
        self._l2.pop(key, None)
        if nbytes >= self.l2_bytes:
            self._l2.clear()  # a working set as large as the L2 evicts everything before it
        self._l2[key] = min(nbytes, self.l2_bytes)
        while sum(self._l2.values()) > self.l2_bytes:
            self._l2.popitem(last=False)
        return hit

    def _enqueue(self, seconds: float, *, uses: tuple[object, int] | None = None, noisy: bool = True,
                 own_jitter: float = 0.0) -> None:
        """Pay the launch overhead and queue one kernel of ``seconds`` (plus a hiccup when one is due).

        Past ``boost_s`` seconds of kernel time the kernel runs at the (falling, then sustained) clock; ``uses``
        (key, bytes) is the data it touches in the L2; ``noisy`` kernels get the jitter and outliers; ``own_jitter``
        is a jitter of this kernel's own (the flush's), applied whether noisy or not.
        """
        self._ensure_ready()
        with self._lock:
            self.calls += 1
            if uses is not None and self._touch_l2(*uses) and not (isinstance(uses[0], tuple) and uses[0][0] is _WRITE):
                seconds *= self.l2_hit_factor
            if self.hiccup_every and self.calls % self.hiccup_every == 0:
                seconds += self.hiccup_s
            seconds /= self.clock_fraction()
            if noisy and self.jitter:
                seconds *= 1.0 + self._rng.uniform(-self.jitter, self.jitter)
            if noisy and self.outlier_prob and self._rng.random() < self.outlier_prob:
                seconds += self.outlier_s
            if own_jitter:
                seconds *= 1.0 + self._rng.uniform(-own_jitter, own_jitter)
            self.busy_s += seconds
            self._wait(self.launch_s)
            if self._stream is None:
                start = max(self._now, self._ends[-1] if self._ends else 0.0)  # kernels run in launch order
                self._ends.append(start + seconds)
            else:
                self._stream.kernels.put(seconds)

    def launch(self, seconds: float | None = None, *, reads: int = 0) -> None:
        """Queue one kernel that runs for ``seconds`` (default ``kernel_s``) and return without waiting for it.

        With ``reads`` (bytes of input, the same inputs for the same value), a kernel whose inputs are still in the
        L2 runs ``l2_hit_factor`` times as long.
        """
        reads = non_negative_int("reads", reads)
        uses = (("launch", reads), reads) if reads else None
        if seconds is not None:
            self._enqueue(_seconds("seconds", seconds), uses=uses)
        elif self.kernel_times is None:
            self._enqueue(self.kernel_s, uses=uses)
        else:
            if self._default_launches >= len(self.kernel_times):
                raise RuntimeError(f"this SimulatedGPU was given {len(self.kernel_times)} kernel_times and all "
                                   "have been launched: fn() was called more often than expected")
            self._default_launches += 1
            self._enqueue(self.kernel_times[self._default_launches - 1], uses=uses)

    def matmul(self, n: int, dtype: str = "float32") -> None:
        """Queue an n x n matrix multiply: 2 n^3 FLOPs at the dtype's peak; returns without waiting for it."""
        n = positive_int("n", n)
        if dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
        seconds = 2 * n**3 / (self.flops_per_s if dtype == "float32" else self.fp64_flops_per_s)
        if seconds > MAX_SECONDS and not self.simulated_clock:  # a simulated clock never sleeps
            raise ValueError(f"n={n} would run for {seconds:.0f} s on this simulated device "
                             f"(at most {MAX_SECONDS:g} s): use a smaller n or a larger flops_per_s")
        self._enqueue(seconds)

    def stream(self, nbytes: int, passes: int = 1) -> None:
        """Queue a kernel that reads a working set of ``nbytes`` ``passes`` times (from L2 if it fits, else memory)."""
        nbytes = positive_int("nbytes", nbytes)
        passes = positive_int("passes", passes)
        rate = self.l2_bytes_per_s if nbytes <= self.l2_bytes else self.memory_bytes_per_s
        seconds = nbytes * passes / rate
        if seconds > MAX_SECONDS and not self.simulated_clock:  # a simulated clock never sleeps
            raise ValueError(f"nbytes={nbytes} x passes={passes} would run for {seconds:.0f} s on this simulated "
                             f"device (at most {MAX_SECONDS:g} s): read less")
        self._enqueue(seconds)

    def to_device(self, nbytes: int) -> None:
        """Copy ``nbytes`` from the host: waits for queued kernels, then blocks for nbytes / transfer_bytes_per_s."""
        nbytes = non_negative_int("nbytes", nbytes)
        seconds = nbytes / self.transfer_bytes_per_s
        if seconds > MAX_SECONDS and not self.simulated_clock:  # a simulated clock never sleeps
            raise ValueError(f"nbytes={nbytes} would take {seconds:.0f} s to copy on this simulated device "
                             f"(at most {MAX_SECONDS:g} s): copy less or raise transfer_bytes_per_s")
        self._ensure_ready()
        self.synchronize()  # an ordinary (pageable) copy waits for the kernels before it
        self._wait(seconds)

    def Event(self, enable_timing: bool = False, blocking: bool = False,  # noqa: N802 (torch.cuda.Event's name)
              interprocess: bool = False) -> SimulatedEvent:
        """A new event on this device, like ``torch.cuda.Event(enable_timing=...)`` (``blocking``, ``interprocess`` ignored)."""
        for name, value in (("blocking", blocking), ("interprocess", interprocess)):
            if not isinstance(value, bool):
                raise TypeError(f"{name} must be True or False, got {value!r}")
        return SimulatedEvent(self, enable_timing=enable_timing)

    def empty(self, nbytes: int) -> SimulatedBuffer:
        """A device buffer of ``nbytes`` (like ``torch.empty(nbytes, dtype=torch.int8, device=...)``)."""
        return SimulatedBuffer(self, positive_int("nbytes", nbytes))

    def _record(self, event: SimulatedEvent) -> None:
        """Queue ``event`` (the host pays ``launch_s``); the device stamps it once the kernels before it are done."""
        self._ensure_ready(initialise=False)
        with self._lock:
            self._wait(self.launch_s)  # like cudaEventRecord: an idle device stamps the event when the record arrives
            if self._stream is None:
                event._reached(max([self._now, *self._ends[-1:]]))
            else:
                self._stream.kernels.put(event)

    def synchronize(self) -> None:
        """Wait until every queued kernel has finished (like ``torch.cuda.synchronize()``)."""
        self._ensure_ready(initialise=False)  # nothing launched yet means nothing to wait for
        if self._stream is None:
            self._now = max([self._now, *self._ends[-1:]])
        else:
            self._stream.kernels.join()

    # ------------------------------------------------------------------ clean-up

    def close(self) -> None:
        """Stop the background thread, dropping queued work (safe to call twice)."""
        self._finalizer()

    def __enter__(self) -> SimulatedGPU:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class SimulatedEvent:
    """A marker in a SimulatedGPU's queue, with ``torch.cuda.Event``'s interface (times in milliseconds)."""

    def __init__(self, gpu: SimulatedGPU, *, enable_timing: bool = False) -> None:
        if not isinstance(enable_timing, bool):
            raise TypeError(f"enable_timing must be True or False, got {enable_timing!r}")
        self.gpu, self.enable_timing = gpu, enable_timing
        self._time: float | None = None  # when the device reached it (device timeline, seconds)
        self._recorded = False
        self._done = threading.Event()

    def _reached(self, seconds: float) -> None:
        self._time = seconds
        self._done.set()

    def record(self, stream: object = None) -> None:
        """Queue the event after the work launched so far (``stream`` is accepted and ignored: one stream)."""
        self._time, self._recorded = None, True
        self._done.clear()
        self.gpu._record(self)

    def query(self) -> bool:
        """True if the device has reached the event (or it was never recorded), like ``torch.cuda.Event.query``."""
        if not self._recorded:
            return True
        if self.gpu._stream is None:
            return self._done.is_set() and self._time <= self.gpu._now
        return self._done.is_set()

    def wait(self, stream: object = None) -> None:
        """Make later work wait for this event, like ``torch.cuda.Event.wait``: one in-order stream, so nothing to do."""
        self.gpu._ensure_ready(initialise=False)

    def synchronize(self) -> None:
        """Wait until the device has reached the event."""
        if not self._recorded:
            return
        if self.gpu._stream is None:
            self.gpu._now = max(self.gpu._now, self._time)
        else:
            self._done.wait(timeout=MAX_SECONDS * 10)

    def elapsed_time(self, end_event: SimulatedEvent) -> float:
        """Milliseconds from this event to ``end_event`` on the device; both must be recorded, timed and reached."""
        if not isinstance(end_event, SimulatedEvent):
            raise TypeError(f"end_event must be an event of the same device, got {type(end_event).__name__}")
        if not (self.enable_timing and end_event.enable_timing):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")  # as torch does
        if not (self._recorded and end_event._recorded):
            raise ValueError("Both events must be recorded before calculating elapsed time.")
        if not (self.query() and end_event.query()):
            raise RuntimeError("Both events must be completed before calculating elapsed time.")
        return (end_event._time - self._time) * 1e3

    def __repr__(self) -> str:
        return f"SimulatedEvent(enable_timing={self.enable_timing}, recorded={self._recorded})"


class SimulatedBuffer:
    """A buffer in a SimulatedGPU's memory; ``zero_()`` queues a kernel that writes all of it (through the L2)."""

    def __init__(self, gpu: SimulatedGPU, nbytes: int) -> None:
        self.gpu, self.nbytes = gpu, nbytes

    def zero_(self) -> SimulatedBuffer:
        """Queue a write of every byte at the memory's bandwidth: evicts what the L2 held, if as large as the L2."""
        self.gpu._enqueue(self.nbytes / self.gpu.memory_bytes_per_s, uses=((_WRITE, id(self)), self.nbytes),
                          noisy=False, own_jitter=self.gpu.flush_jitter)
        return self

    def __repr__(self) -> str:
        return f"SimulatedBuffer({self.nbytes} bytes)"
