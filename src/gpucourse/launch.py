"""Launch overhead: a GPU stream on a virtual clock, where queueing every kernel costs the host time.

In eager PyTorch every operation is at least one kernel launch: Python, the framework's dispatcher and the CUDA
driver spend some microseconds of CPU time to queue it, and only then can the GPU run it. While kernels take longer
than their launches, the host runs ahead and the GPU never waits. When they are shorter (small tensors, chains of
elementwise ops), the GPU finishes each kernel before the next one is queued and sits idle between them: the loop is
*launch-bound*. The cures cut the number of launches: fusion (one kernel does the work of several), CUDA Graphs
(a captured sequence of kernels replayed with one launch), ``torch.compile`` (which does both).

:class:`LaunchSimulator` keeps time on a virtual clock, so what it reports is exact and the same on every run::

    sim = LaunchSimulator(launch_s=10e-6)
    sim.synchronize(); start = sim.now_s
    for _ in range(8):
        sim.launch(2e-6)                 # the host pays 10 us per launch; each kernel runs 2 us
    sim.synchronize()
    print(sim.now_s - start)             # 8 launches + the last kernel: 82 us; the device was busy 16 us of it

It models one stream (kernels run one at a time, in launch order) and a host that does nothing but launch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_number, positive_int, positive_number
from gpucourse.monitor import busy_fraction
from gpucourse.timing import benchmark


def _kernel_times(name: str, kernel_s: object) -> list[float]:
    """``kernel_s`` as a non-empty list of non-negative durations in seconds."""
    if isinstance(kernel_s, (str, bytes)) or not isinstance(kernel_s, Sequence) or len(kernel_s) == 0:
        raise TypeError(f"{name} must be a non-empty list of kernel durations in seconds, got {kernel_s!r}")
    return [non_negative_number(f"{name}[{i}]", k) for i, k in enumerate(kernel_s)]


@dataclass(frozen=True)
class KernelRun:
    """One kernel on the simulated device: when its launch returned on the host, when it ran on the device."""

    name: str
    launched_s: float
    start_s: float
    end_s: float

    @property
    def waited_s(self) -> float:
        """How long the kernel sat in the queue after its launch (the device was busy with earlier work)."""
        return self.start_s - self.launched_s


class LaunchSimulator:
    """A GPU stream on a virtual clock.

    - every :meth:`launch` costs the host ``launch_s`` seconds; the kernel can start once its launch has returned
      and the kernels before it have finished;
    - :meth:`replay` launches a captured sequence of kernels (a CUDA Graph) for one ``graph_launch_s`` (default:
      ``launch_s``); its kernels then run back to back;
    - :meth:`host` spends host time without launching anything (Python work between launches);
    - :meth:`synchronize` makes the host wait until the device has finished, like ``torch.cuda.synchronize()``.
    """

    def __init__(self, launch_s: float = 5e-6, *, graph_launch_s: float | None = None) -> None:
        self.launch_s = non_negative_number("launch_s", launch_s)
        self.graph_launch_s = self.launch_s if graph_launch_s is None else non_negative_number("graph_launch_s",
                                                                                               graph_launch_s)
        self.now_s = 0.0
        self.launches = 0
        self.runs: list[KernelRun] = []
        self.launch_spans: list[tuple[float, float]] = []  # (start, end) of each launch on the host
        self._device_free_s = 0.0

    def __repr__(self) -> str:
        return (f"LaunchSimulator(launch_s={self.launch_s:g}, graph_launch_s={self.graph_launch_s:g}; "
                f"{self.launches} launches, {len(self.runs)} kernels, host at {self.now_s:.6g} s)")

    def _run(self, kernel_s: float, name: str) -> None:
        start = max(self.now_s, self._device_free_s)
        self._device_free_s = start + kernel_s
        self.runs.append(KernelRun(name, self.now_s, start, self._device_free_s))

    def launch(self, kernel_s: float, name: str = "kernel") -> None:
        """Queue one kernel of ``kernel_s`` seconds; the host pays ``launch_s`` and does not wait for the kernel."""
        kernel_s = non_negative_number("kernel_s", kernel_s)
        self.launch_spans.append((self.now_s, self.now_s + self.launch_s))
        self.now_s += self.launch_s
        self.launches += 1
        self._run(kernel_s, name)

    def replay(self, kernel_s: Sequence[float], name: str = "graph") -> None:
        """Launch a captured graph of kernels with one launch; they run back to back, in order."""
        times = _kernel_times("kernel_s", kernel_s)
        self.launch_spans.append((self.now_s, self.now_s + self.graph_launch_s))
        self.now_s += self.graph_launch_s
        self.launches += 1
        for index, seconds in enumerate(times):
            self._run(seconds, f"{name}[{index}]")

    def host(self, seconds: float) -> None:
        """Spend ``seconds`` on the host without launching anything."""
        self.now_s += non_negative_number("seconds", seconds)

    def synchronize(self) -> None:
        """Wait until every queued kernel has finished."""
        self.now_s = max(self.now_s, self._device_free_s)

    def busy_fraction(self, start_s: float = 0.0, end_s: float | None = None) -> float:
        """Share of [start_s, end_s] (default: up to the host's clock) during which a kernel ran: what NVML and
        `nvidia-smi` report as "utilisation"."""
        end = self.now_s if end_s is None else float(end_s)
        return busy_fraction([(run.start_s, run.end_s) for run in self.runs], start_s, end)


def measure_step_s(kernel_s: Sequence[float], launch_s: float, *, graph: bool = False) -> float:
    """Seconds from a synchronised start until ``kernel_s``'s kernels have all run, measured on a
    :class:`LaunchSimulator`: one launch per kernel, or (``graph=True``) one replay of them as a CUDA Graph."""
    times = _kernel_times("kernel_s", kernel_s)
    if not isinstance(graph, bool):
        raise TypeError(f"graph must be True or False, got {type(graph).__name__} ({graph!r})")
    sim = LaunchSimulator(launch_s)
    sim.synchronize()
    start = sim.now_s
    if graph:
        sim.replay(times)
    else:
        for seconds in times:
            sim.launch(seconds)
    sim.synchronize()
    return sim.now_s - start


def elementwise_kernels(n_elements: int, ops: int, bytes_per_s: float, *, element_bytes: int = 4,
                        fused: bool = False, min_kernel_s: float = 0.0) -> list[float]:
    """Kernel durations of a chain of ``ops`` elementwise operations on ``n_elements`` numbers, each kernel limited
    by memory bandwidth ``bytes_per_s`` (the roofline bound for such ops) and lasting at least ``min_kernel_s`` (a
    kernel's start-up and drain, however little it moves): unfused, each op reads its input and writes its output;
    ``fused``, one kernel reads the input once and writes the result once."""
    n_elements, ops = positive_int("n_elements", n_elements), positive_int("ops", ops)
    bytes_per_s, element_bytes = positive_number("bytes_per_s", bytes_per_s), positive_int("element_bytes", element_bytes)
    min_kernel_s = non_negative_number("min_kernel_s", min_kernel_s)
    if not isinstance(fused, bool):
        raise TypeError(f"fused must be True or False, got {type(fused).__name__} ({fused!r})")
    one_pass_s = max(2 * n_elements * element_bytes / bytes_per_s, min_kernel_s)
    return [one_pass_s] if fused else [one_pass_s] * ops


def plot_timeline(sim: LaunchSimulator, ax=None, title: str = ""):
    """Kernels of a simulation as bars on a time axis in microseconds (the idle gaps between them are what a
    profiler's trace view shows); returns the axes."""
    if not isinstance(sim, LaunchSimulator):
        raise TypeError(f"sim must be a LaunchSimulator, got {type(sim).__name__}")
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 1.6))
    ax.broken_barh([(run.start_s * 1e6, (run.end_s - run.start_s) * 1e6) for run in sim.runs], (0, 1),
                   facecolors="tab:green", edgecolors="white")
    ax.broken_barh([(start * 1e6, (end - start) * 1e6) for start, end in sim.launch_spans], (1.2, 1),
                   facecolors="tab:blue", edgecolors="white")
    ax.set_yticks([0.5, 1.7], ["GPU: kernels", "host: launches"])
    ax.set_xlabel("µs")
    ax.set_title(title or f"busy {sim.busy_fraction():.0%} of the time", fontsize=9)
    ax.set_xlim(0, max(sim.now_s, 1e-12) * 1e6)
    return ax


def time_per_call(fn: Callable[[], object], *, calls: int = 100, repeats: int = 7,
                  sync: Callable[[], None] | None = None) -> float:
    """Median seconds per call of ``fn``: each timed repeat makes ``calls`` calls, then ``sync()`` (pass a device's
    sync on a GPU, so queued kernels are counted); two warm-up repeats first. Many calls per repeat keep
    microsecond-scale calls above the clock's resolution."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    calls = positive_int("calls", calls)

    def many() -> None:
        for _ in range(calls):
            fn()

    return benchmark(many, warmup=2, repeats=positive_int("repeats", repeats), sync=sync).median_s / calls


__all__ = ["KernelRun", "LaunchSimulator", "elementwise_kernels", "measure_step_s", "plot_timeline", "time_per_call"]
