"""Simulated GPU parts for latency microbenchmarks on any machine: an SM hiding memory latency with warps, and a
memory hierarchy seen through a pointer chase (lesson 01_architecture).

Both are models, not measurements: their latencies and capacities are what the caller gives them. They let a learner
measure, estimate and verify the way one does on a real GPU (Jia et al., "Dissecting the NVIDIA Volta GPU
architecture via microbenchmarking", arXiv:1804.06826), where the real numbers are hidden until measured.
"""

from __future__ import annotations

import random
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, positive_int


_RUNS = [0]  # every SimulatedSM.run so far, on any instance (a grader counts an answer's runs with runs_made())


# What each simulated part hides from the learner (an SM's latency, a hierarchy's levels), kept outside the instance:
# an answer must measure it, not read it off an attribute.
_HIDDEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def runs_made() -> int:
    """How many times SimulatedSM.run has been called in this process, on any SM."""
    return _RUNS[0]


@dataclass(frozen=True)
class SimRun:
    """One steady-state period of the simulated SM: how many issue slots it had and how many it used."""

    warps: int
    cycles: int
    instructions: int

    @property
    def busy(self) -> float:
        """Fraction of issue slots in which a scheduler issued an instruction (1.0: latency fully hidden)."""
        return self.instructions / self.cycles


class SimulatedSM:
    """One SM with ``schedulers`` warp schedulers (each issues at most one instruction per cycle) and a hidden latency.

    Every warp runs the same loop: one load, then ``work_per_load`` instructions that need the loaded value, then the
    next load. Warp i is served by scheduler i % schedulers (round robin). Each scheduler keeps issuing from the warp
    it issued from last while that warp is ready, and otherwise from the ready warp that has waited longest.
    ``run`` steps the schedulers cycle by cycle and reports the steady state; ``pointer_chase`` is measured like a
    real chase: a fixed start-up cost (``chase_overhead`` cycles) and up to ``jitter`` cycles of noise come with
    every call.
    """

    def __init__(self, latency_cycles: int, work_per_load: int, max_warps: int = 32, name: str = "SM", *,
                 schedulers: int = 1, chase_overhead: int = 0, jitter: int = 0, seed: int = 0) -> None:
        _HIDDEN[self] = positive_int("latency_cycles", latency_cycles)
        self.work_per_load = positive_int("work_per_load", work_per_load)
        self.max_warps = positive_int("max_warps", max_warps)
        self.schedulers = positive_int("schedulers", schedulers)
        self._overhead = non_negative_int("chase_overhead", chase_overhead)
        self._jitter = non_negative_int("jitter", jitter)
        self._random = random.Random(seed)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        self.name = name

    def __repr__(self) -> str:
        return (f"SimulatedSM({self.name!r}, schedulers={self.schedulers}, work_per_load={self.work_per_load}, "
                f"max_warps={self.max_warps})")

    def pointer_chase(self, loads: int) -> int:
        """Cycles one thread takes for ``loads`` loads that each need the previous one's value (a latency probe)."""
        jitter = self._random.randint(-self._jitter, self._jitter)
        return self._overhead + positive_int("loads", loads) * _HIDDEN[self] + jitter

    def run(self, warps: int) -> SimRun:
        """The steady state of the loop on ``warps`` resident warps (at most ``max_warps``), simulated cycle by cycle."""
        warps = positive_int("warps", warps)
        if warps > self.max_warps:
            raise ValueError(f"warps must be at most max_warps={self.max_warps} (the SM's resident limit), "
                             f"got {warps}")
        _RUNS[0] += 1
        settle = 8 * (_HIDDEN[self] + self.work_per_load + 1)  # long enough for the start to be forgotten
        window = 4 * (_HIDDEN[self] + self.work_per_load)      # whole turns of the loop: the count repeats exactly
        issued = sum(_issued(_HIDDEN[self], self.work_per_load, len(range(j, warps, self.schedulers)), settle, window)
                     for j in range(self.schedulers))
        return SimRun(warps=warps, cycles=self.schedulers * window, instructions=issued)


def _issued(latency: int, work: int, warps: int, settle: int, window: int) -> int:
    """Instructions one scheduler issues in cycles [settle, settle + window) to ``warps`` warps running the loop."""
    if not warps:
        return 0
    ready = [0] * warps                  # the first cycle at which each warp can issue its next instruction
    left = [0] * warps                   # instructions before its next load (0: the next one is the load)
    last, cycle, count = 0, 0, 0
    while cycle < settle + window:
        if ready[last] > cycle:          # greedy, then oldest: the warp that became ready first, lowest index on ties
            last = min(range(warps), key=lambda w: (ready[w], w))
            cycle = max(cycle, ready[last])  # no warp ready: the scheduler idles until one is
            if cycle >= settle + window:
                break
        if left[last]:                   # an instruction that uses the loaded value
            left[last] -= 1
            ready[last] = cycle + 1
        else:                            # the load: its value arrives `latency` cycles later
            left[last] = work
            ready[last] = cycle + latency
        count += cycle >= settle
        cycle += 1
    return count


def fewest_warps(sm: SimulatedSM, target: float = 0.9) -> int | None:
    """Fewest warps that keep ``sm`` at least ``target`` busy, or None if ``max_warps`` cannot (lesson 01_architecture).

    Searches with the simulator from one warp up (each step is one run): what the lesson's Exercise 1 must not do.
    """
    if not isinstance(sm, SimulatedSM):
        raise TypeError(f"sm must be a SimulatedSM, got {type(sm).__name__}")
    if not (isinstance(target, (int, float)) and not isinstance(target, bool) and 0 < target <= 1):
        raise ValueError(f"target must be a fraction in (0, 1], got {target!r}")
    for warps in range(1, sm.max_warps + 1):
        if sm.run(warps).busy >= target:
            return warps
    return None


class SimulatedMemory:
    """A memory hierarchy seen by a pointer chase: caches of given capacities and latencies, then DRAM.

    ``chase(footprint)`` is the average latency of a load when a chain of loads cycles over ``footprint`` bytes:
    the latency of the smallest level that holds the footprint, with a little measurement noise. Like a real probe,
    it can be harsher: with ``outliers`` that probability, a call is disturbed (an interrupt, another program) and
    reads 2 to 8 times too slow; with ``soft_edges``, a footprint between a cache's capacity and twice it still
    partly hits that cache (a share 2 - footprint / capacity of its loads), so the step between two levels shows a
    mixed latency first.
    """

    def __init__(self, caches: Sequence[tuple[int, float]], dram_latency: float, noise: float = 0.02,
                 seed: int = 0, name: str = "GPU", *, outliers: float = 0.0, soft_edges: bool = False) -> None:
        levels = []
        for index, level in enumerate(caches):
            if not (isinstance(level, tuple) and len(level) == 2):
                raise TypeError(f"caches[{index}] must be a (capacity_bytes, latency_cycles) tuple, got {level!r}")
            levels.append((positive_int(f"caches[{index}] capacity", level[0]), float(level[1])))
        capacities = [c for c, _ in levels]
        latencies = [lat for _, lat in levels] + [float(dram_latency)]
        if capacities != sorted(set(capacities)) or latencies != sorted(latencies) or latencies[0] <= 0:
            raise ValueError("caches must grow in capacity and latency, and dram_latency must be the largest latency")
        if not (isinstance(noise, (int, float)) and 0 <= noise < 0.2):
            raise ValueError(f"noise must be a fraction in [0, 0.2), got {noise!r}")
        if not (isinstance(outliers, (int, float)) and not isinstance(outliers, bool) and 0 <= outliers < 0.5):
            raise ValueError(f"outliers must be a probability in [0, 0.5), got {outliers!r}")
        if not isinstance(soft_edges, bool):
            raise TypeError(f"soft_edges must be a bool, got {type(soft_edges).__name__}")
        self._outliers = float(outliers)
        self._soft = soft_edges
        _HIDDEN[self] = (tuple(levels), float(dram_latency))
        self._noise = float(noise)
        self._random = random.Random(seed)
        self.name = name

    def __repr__(self) -> str:
        return f"SimulatedMemory({self.name!r})"

    def chase(self, footprint_bytes: int) -> float:
        """Average cycles per load of a pointer chase over ``footprint_bytes`` (at least one 128-byte line)."""
        footprint = positive_int("footprint_bytes", footprint_bytes)
        levels, dram = _HIDDEN[self]
        latency, served = 0.0, 0.0                      # served: share of the loads answered by the levels so far
        for capacity, level_latency in levels:
            holds = 1.0 if footprint <= capacity else (max(0.0, 2 - footprint / capacity) if self._soft else 0.0)
            latency += (max(served, holds) - served) * level_latency
            served = max(served, holds)
        latency += (1 - served) * dram
        latency *= 1 + self._random.uniform(-self._noise, self._noise)
        if self._outliers and self._random.random() < self._outliers:
            latency *= self._random.uniform(2, 8)
        return latency


def cache_levels(memory: SimulatedMemory, smallest: int = 1024, largest: int = 2**31) -> dict:
    """Capacities and latencies of the cache levels of ``memory``, found by a footprint sweep (lesson 01_architecture).

    Returns {'caches': [(capacity_bytes, latency_cycles), ...], 'dram_latency': cycles}; capacities are the
    largest swept footprint (a power of two times ``smallest``) before the latency jumps.
    """
    if not isinstance(memory, SimulatedMemory):
        raise TypeError(f"memory must be a SimulatedMemory, got {type(memory).__name__}")
    sizes, size = [], positive_int("smallest", smallest)
    while size <= positive_int("largest", largest):
        sizes.append(size)
        size *= 2
    latencies = [memory.chase(s) for s in sizes]
    plateaus: list[list[tuple[int, float]]] = [[(sizes[0], latencies[0])]]
    for footprint, latency in zip(sizes[1:], latencies[1:]):
        if latency > 1.3 * plateaus[-1][-1][1]:
            plateaus.append([])
        plateaus[-1].append((footprint, latency))
    median = [sorted(lat for _, lat in plateau)[len(plateau) // 2] for plateau in plateaus]
    caches = [(plateau[-1][0], latency) for plateau, latency in zip(plateaus[:-1], median[:-1])]
    return {"caches": caches, "dram_latency": median[-1]}
