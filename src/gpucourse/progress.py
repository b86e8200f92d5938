"""Progress for long cells: what runs, and how far it got, every few seconds (never silent for long).

A cell that computes for more than about ten seconds without a word looks hung. :func:`running` wraps such work::

    with progress.running("compiling the training step with inductor"):
        model = torch.compile(model); model(x)
    # on a slow machine, every 5 s:  compiling the training step with inductor ... 5 s
    #                                still compiling the training step with inductor: 10 s
    #                                compiling the training step with inductor: done in 12.3 s

and, for a loop whose steps are long, counts them::

    with progress.running("timing the training step", steps=len(variants), unit="variant") as run:
        for variant in variants:
            run.step(variant)        # once the work has been slow: "variant 2 of 4: torch.compile"
            ...

Work that ends before the first interval prints nothing at all, so fast machines (a GPU, a warm cache) see no
clutter. The lines come from a background thread while the work runs in the cell's own thread; they go to stdout
(stderr would cost an nbgrader test cell its points), flushed, through whatever ``sys.stdout`` is when each line is
printed: in Jupyter that is the kernel's stream, which shows them under the running cell, in nbclient and nbconvert
runs too, and in plain Python the terminal. The thread stops when the block ends, also when it raises.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from gpucourse._validate import positive_int, positive_number

DEFAULT_EVERY_S = 5.0
"""Seconds between progress lines: the first comes after this long, so quick work prints nothing."""


def _text(name: str, value: object) -> str:
    """``value`` if it is a non-empty str, else a TypeError/ValueError naming ``name``."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str saying what runs (e.g. 'compiling the step'), got "
                        f"{type(value).__name__} ({value!r})")
    if not value.strip():
        raise ValueError(f"{name} must say what runs (e.g. 'compiling the step'), got an empty str")
    return value.strip()


class Run:
    """The state of one :func:`running` block: what runs, its step, and whether it has printed (it was slow)."""

    def __init__(self, what: str, steps: int | None, unit: str, clock: Callable[[], float], file: TextIO | None):
        self.what, self.steps, self.unit = what, steps, unit
        self.clock, self.file = clock, file
        self.started = clock()
        self.step_index = 0
        self.step_label = ""
        self.lines = 0  # progress lines printed so far
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ printing

    def _print(self, line: str) -> None:
        """One line to stdout (the current sys.stdout, or ``file``), flushed."""
        stream = self.file if self.file is not None else sys.stdout
        print(line, file=stream, flush=True)
        self.lines += 1

    def elapsed(self) -> float:
        """Seconds since the block began."""
        return max(0.0, self.clock() - self.started)

    def _where(self) -> str:
        """', variant 2 of 4 (torch.compile)' while a counted step runs, else ''."""
        if self.steps is None or self.step_index == 0:
            return ""
        label = f" ({self.step_label})" if self.step_label else ""
        return f", {self.unit} {self.step_index} of {self.steps}{label}"

    def tick(self) -> None:
        """Print how long the work has run so far (called by the background thread every interval)."""
        with self._lock:
            seconds = self.elapsed()
            if self.lines == 0:
                self._print(f"{self.what} ... {seconds:.0f} s{self._where()}")
            else:
                self._print(f"still {self.what}: {seconds:.0f} s{self._where()}")

    def step(self, label: str = "") -> None:
        """Start the next counted step (``label`` says which); announced at once if the work has already been slow."""
        if self.steps is None:
            raise ValueError("step: this block counts no steps; pass steps=N to running() to count them")
        if not isinstance(label, str):
            raise TypeError(f"label must be a str naming the step, got {type(label).__name__} ({label!r})")
        with self._lock:
            if self.step_index >= self.steps:
                raise ValueError(f"step: all {self.steps} {self.unit}s have started already (steps={self.steps})")
            self.step_index += 1
            self.step_label = label.strip()
            if self.lines:
                label_text = f": {self.step_label}" if self.step_label else ""
                self._print(f"{self.unit} {self.step_index} of {self.steps}{label_text}")

    def finish(self) -> None:
        """Say it is done, with its time, if anything was printed (quick work stays silent)."""
        with self._lock:
            if self.lines:
                self._print(f"{self.what}: done in {self.elapsed():.1f} s")


@contextmanager
def running(what: str, *, every_s: float = DEFAULT_EVERY_S, steps: int | None = None, unit: str = "step",
            file: TextIO | None = None, clock: Callable[[], float] = time.monotonic) -> Iterator[Run]:
    """Within the block, print a line every ``every_s`` seconds saying ``what`` runs and for how long.

    ``what`` reads best as an -ing phrase ("compiling the step with inductor"). With ``steps=N`` the block counts
    N steps: call ``run.step(label)`` at the start of each, and the lines say "<unit> i of N (label)". Nothing is
    printed if the block ends within ``every_s``; otherwise a last line gives the total time. The background thread
    stops when the block ends, whether it returns or raises. ``file`` (default: ``sys.stdout`` at each line) and
    ``clock`` (default: ``time.monotonic``) are for tests.
    """
    what = _text("what", what)
    every_s = positive_number("every_s", every_s)
    if math.isinf(every_s):
        raise ValueError("every_s must be a finite number of seconds, got inf")
    if steps is not None:
        steps = positive_int("steps", steps)
    unit = _text("unit", unit)
    if not callable(clock):
        raise TypeError(f"clock must be a function returning seconds (e.g. time.monotonic), got {clock!r}")
    if file is not None and not callable(getattr(file, "write", None)):
        raise TypeError(f"file must be a text stream with write() (or None for stdout), got {type(file).__name__}")
    run = Run(what, steps, unit, clock, file)
    stop = threading.Event()

    def ticker() -> None:
        while not stop.wait(every_s):
            run.tick()

    thread = threading.Thread(target=ticker, name=f"gpucourse.progress: {what}", daemon=True)
    thread.start()
    try:
        yield run
    finally:
        stop.set()
        thread.join()
    run.finish()


__all__ = ["DEFAULT_EVERY_S", "Run", "running"]
