"""Simulated GPU parts for latency microbenchmarks on any machine: an SM hiding memory latency with warps, and a
memory hierarchy seen through a pointer chase (lesson 01_architecture).

Both are models, not measurements: their latencies and capacities are what the caller gives them. They let a learner
measure, estimate and verify the way one does on a real GPU (Jia et al., "Dissecting the NVIDIA Volta GPU
architecture via microbenchmarking", arXiv:1804.06826), where the real numbers are hidden until measured.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from gpucourse._validate import positive_int


@dataclass(frozen=True)
class SimRun:
    """What one run of the simulated SM did: how many cycles it took to issue how many instructions."""

    warps: int
    cycles: int
    instructions: int

    @property
    def busy(self) -> float:
        """Fraction of cycles in which the scheduler issued an instruction (1.0: latency fully hidden)."""
        return self.instructions / self.cycles


class SimulatedSM:
    """One SM with one warp scheduler (one instruction per cycle) and a memory latency it does not reveal.

    Every warp runs the same loop: one load, then ``work_per_load`` instructions that use the loaded value (so they
    wait for it), then the next load. While a warp waits, the scheduler issues from another warp that is ready.
    """

    def __init__(self, latency_cycles: int, work_per_load: int, max_warps: int = 32, name: str = "SM") -> None:
        self._latency = positive_int("latency_cycles", latency_cycles)
        self.work_per_load = positive_int("work_per_load", work_per_load)
        self.max_warps = positive_int("max_warps", max_warps)
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {type(name).__name__}")
        self.name = name

    def __repr__(self) -> str:
        return f"SimulatedSM({self.name!r}, work_per_load={self.work_per_load}, max_warps={self.max_warps})"

    def pointer_chase(self, loads: int) -> int:
        """Cycles one thread takes for ``loads`` loads that each need the previous one's value (a latency probe)."""
        return positive_int("loads", loads) * self._latency

    def run(self, warps: int, loads_per_warp: int = 32) -> SimRun:
        """Run the loop on ``warps`` resident warps (at most ``max_warps``) and count cycles and instructions."""
        warps = positive_int("warps", warps)
        loads_per_warp = positive_int("loads_per_warp", loads_per_warp)
        if warps > self.max_warps:
            raise ValueError(f"warps must be at most max_warps={self.max_warps} (the SM's resident limit), "
                             f"got {warps}")
        per_warp = loads_per_warp * (1 + self.work_per_load)
        ready = [(0, warp, 0) for warp in range(warps)]  # (cycle it can issue, warp, instructions issued)
        heapq.heapify(ready)
        clock = 0
        while ready:
            ready_at, warp, done = heapq.heappop(ready)
            issue = max(clock, ready_at)
            clock = issue + 1
            is_load = done % (1 + self.work_per_load) == 0
            if done + 1 < per_warp:
                heapq.heappush(ready, (issue + (self._latency if is_load else 1), warp, done + 1))
        return SimRun(warps=warps, cycles=clock, instructions=warps * per_warp)


def fewest_warps(sm: SimulatedSM, target: float = 0.9) -> int | None:
    """Fewest warps that keep ``sm`` at least ``target`` busy, or None if ``max_warps`` cannot (lesson 01_architecture).

    Measures the latency with a pointer chase, estimates the warps by Little's law, then verifies with runs.
    """
    if not isinstance(sm, SimulatedSM):
        raise TypeError(f"sm must be a SimulatedSM, got {type(sm).__name__}")
    if not (isinstance(target, (int, float)) and 0 < target <= 1):
        raise ValueError(f"target must be a fraction in (0, 1], got {target!r}")
    latency = sm.pointer_chase(100) / 100
    guess = min(sm.max_warps, max(1, math.ceil(target * (latency + sm.work_per_load) / (1 + sm.work_per_load))))
    warps = guess
    while warps < sm.max_warps and sm.run(warps).busy < target:
        warps += 1
    if sm.run(warps).busy < target:
        return None
    while warps > 1 and sm.run(warps - 1).busy >= target:
        warps -= 1
    return warps


class SimulatedMemory:
    """A memory hierarchy seen by a pointer chase: caches of given capacities and latencies, then DRAM.

    ``chase(footprint)`` is the average latency of a load when a chain of loads cycles over ``footprint`` bytes:
    the latency of the smallest level that holds the footprint, with a little measurement noise.
    """

    def __init__(self, caches: Sequence[tuple[int, float]], dram_latency: float, noise: float = 0.02,
                 seed: int = 0, name: str = "GPU") -> None:
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
        self._levels = tuple(levels)
        self._dram = float(dram_latency)
        self._noise = float(noise)
        self._random = random.Random(seed)
        self.name = name

    def __repr__(self) -> str:
        return f"SimulatedMemory({self.name!r})"

    def chase(self, footprint_bytes: int) -> float:
        """Average cycles per load of a pointer chase over ``footprint_bytes`` (at least one 128-byte line)."""
        footprint = positive_int("footprint_bytes", footprint_bytes)
        latency = next((lat for capacity, lat in self._levels if footprint <= capacity), self._dram)
        return latency * (1 + self._random.uniform(-self._noise, self._noise))


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
