"""A training loop's input pipeline on a virtual clock: DataLoader workers that decode batches, a device that
trains on them, and the memory a batch needs (lesson ``09_feeding_and_watching``).

Real epochs take minutes, so choosing a batch size and a number of workers by trying every pair is what nobody can
afford. :class:`SimulatedLoader` keeps exact, repeatable time, so a learner can practise the engineer's way: probe
the cheap rates (the loader alone, the compute alone, the memory of a batch), predict, and confirm with few full
epochs (:meth:`SimulatedLoader.run`, which counts them).

The model, in one place:

- each worker process starts ``worker_start_s`` after the previous one (start-up is paid every epoch);
- a worker decodes a batch of ``b`` items in ``b * decode_s`` seconds, slowed by ``num_workers / cores`` when there
  are more workers than cores (they share the cores); without workers the main process decodes, between steps;
- each worker keeps at most ``prefetch_factor`` batches ready ahead of the training loop;
- a training step on a batch of ``b`` takes ``step_fixed_s + max(b, fill) * sample_s`` (a fixed cost per step; the
  device is only full from ``fill`` samples on);
- a step needs ``model_bytes + b * sample_bytes`` of device memory; more raises :class:`OutOfMemory`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, non_negative_number, positive_int, positive_number

BATCH_SIZES = (8, 16, 32, 64, 128, 256, 512, 1024, 2048)
"""The batch sizes a :class:`SimulatedLoader` accepts by default."""


class OutOfMemory(RuntimeError):
    """A batch that does not fit in the simulated device's memory (as ``torch.cuda.OutOfMemoryError`` would say)."""


@dataclass(frozen=True)
class EpochResult:
    """One simulated epoch: the settings, the samples and the virtual seconds they took."""

    batch_size: int
    num_workers: int
    samples: int
    seconds: float

    @property
    def samples_per_s(self) -> float:
        """Samples per second over the epoch."""
        return self.samples / self.seconds


class SimulatedLoader:
    """An input pipeline and a device on a virtual clock; :meth:`run` is one full epoch of the training loop (lesson
    ``09_feeding_and_watching``)."""

    def __init__(self, *, items: int = 16384, decode_s: float = 250e-6, cores: int = 4, worker_start_s: float = 0.05,
                 prefetch_factor: int = 2, step_fixed_s: float = 2e-3, sample_s: float = 20e-6, fill: int = 128,
                 memory_bytes: float = 16e9, model_bytes: float = 2e9, sample_bytes: float = 20e6,
                 batch_sizes: Sequence[int] = BATCH_SIZES, max_workers: int = 8) -> None:
        self.items = positive_int("items", items)
        self.decode_s = non_negative_number("decode_s", decode_s)
        self.cores = positive_int("cores", cores)
        self.worker_start_s = non_negative_number("worker_start_s", worker_start_s)
        self.prefetch_factor = positive_int("prefetch_factor", prefetch_factor)
        self.step_fixed_s = non_negative_number("step_fixed_s", step_fixed_s)
        self.sample_s = positive_number("sample_s", sample_s)
        self.fill = positive_int("fill", fill)
        self.memory_limit = positive_number("memory_bytes", memory_bytes)
        self.model_bytes = non_negative_number("model_bytes", model_bytes)
        self.sample_bytes = non_negative_number("sample_bytes", sample_bytes)
        if isinstance(batch_sizes, (str, bytes)) or not isinstance(batch_sizes, Sequence) or not batch_sizes:
            raise TypeError(f"batch_sizes must be a non-empty list of positive ints, got {batch_sizes!r}")
        self.batch_sizes = tuple(sorted(positive_int(f"batch_sizes[{i}]", b) for i, b in enumerate(batch_sizes)))
        self.max_workers = non_negative_int("max_workers", max_workers)
        self.epochs_run = 0

    def __repr__(self) -> str:
        return (f"SimulatedLoader({self.items} items, batch sizes {self.batch_sizes[0]}-{self.batch_sizes[-1]}, "
                f"0-{self.max_workers} workers, {self.memory_limit / 1e9:g} GB)")

    # ------------------------------------------------------------------ checks and costs

    def _settings(self, batch_size: int, num_workers: int = 0) -> tuple[int, int]:
        """Validated settings; OutOfMemory where the batch does not fit."""
        if isinstance(batch_size, bool) or batch_size not in self.batch_sizes:
            raise ValueError(f"batch_size must be one of {self.batch_sizes}, got {batch_size!r}")
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or \
                not 0 <= num_workers <= self.max_workers:
            raise ValueError(f"num_workers must be an int from 0 to {self.max_workers}, got {num_workers!r}")
        if self.memory_bytes(batch_size) > self.memory_limit:
            raise OutOfMemory(f"simulated out of memory: batch_size={batch_size} needs "
                              f"{self.memory_bytes(batch_size) / 1e9:.1f} GB of {self.memory_limit / 1e9:g} GB")
        return batch_size, num_workers

    def memory_bytes(self, batch_size: int) -> float:
        """Device memory a training step on ``batch_size`` samples needs (weights, optimizer state, activations)."""
        return self.model_bytes + positive_int("batch_size", batch_size) * self.sample_bytes

    def _sizes(self, batch_size: int) -> list[int]:
        full, rest = divmod(self.items, batch_size)
        return [batch_size] * full + ([rest] if rest else [])

    def _step_s(self, size: int) -> float:
        return self.step_fixed_s + max(size, self.fill) * self.sample_s

    def _epoch_s(self, batch_size: int, num_workers: int, train: bool) -> float:
        """Virtual seconds of one epoch, with or without the training steps."""
        sizes = self._sizes(batch_size)
        step = self._step_s if train else (lambda size: 0.0)
        if num_workers == 0:
            return sum(size * self.decode_s + step(size) for size in sizes)
        slow = max(1.0, num_workers / self.cores)
        free = [self.worker_start_s * (i + 1) for i in range(num_workers)]
        taken: list[float] = []
        main = 0.0
        ahead = num_workers * self.prefetch_factor
        for k, size in enumerate(sizes):
            worker = k % num_workers
            begin = free[worker] if k < ahead else max(free[worker], taken[k - ahead])
            free[worker] = begin + size * self.decode_s * slow
            take = max(free[worker], main)
            taken.append(take)
            main = take + step(size)
        return main

    # ------------------------------------------------------------------ what a learner can measure

    def compute_alone(self, batch_size: int) -> float:
        """Samples/s of the training steps alone (batches already on the device): a cheap probe."""
        batch_size, _ = self._settings(batch_size)
        return self.items / sum(self._step_s(size) for size in self._sizes(batch_size))

    def loader_alone(self, batch_size: int, num_workers: int) -> float:
        """Samples/s of the loader alone (an epoch of batches, no training), start-up included: a cheap probe."""
        batch_size, num_workers = self._settings(batch_size, num_workers)
        return self.items / self._epoch_s(batch_size, num_workers, train=False)

    def run(self, batch_size: int, num_workers: int) -> EpochResult:
        """One full epoch of the training loop (expensive: counted in ``epochs_run``)."""
        batch_size, num_workers = self._settings(batch_size, num_workers)
        self.epochs_run += 1
        return EpochResult(batch_size, num_workers, self.items, self._epoch_s(batch_size, num_workers, train=True))


def cheapest_settings(sim: SimulatedLoader, target_sps: float) -> dict:
    """The smallest batch size, then the fewest workers, whose epoch reaches ``target_sps`` (a dict with
    ``batch_size`` and ``num_workers``): probes first, one epoch to confirm each candidate. ValueError if none.
    The answer of lesson ``09_feeding_and_watching``'s exercise 3."""
    if not isinstance(sim, SimulatedLoader):
        raise TypeError(f"sim must be a SimulatedLoader, got {type(sim).__name__}")
    target_sps = positive_number("target_sps", target_sps)
    for batch_size in sim.batch_sizes:
        if sim.memory_bytes(batch_size) > sim.memory_limit or sim.compute_alone(batch_size) < target_sps:
            continue
        compute = sim.compute_alone(batch_size)
        for workers in range(sim.max_workers + 1):
            loader = sim.loader_alone(batch_size, workers)
            bound = 1 / (1 / loader + 1 / compute) if workers == 0 else min(loader, compute)
            if bound >= target_sps and sim.run(batch_size, workers).samples_per_s >= target_sps:
                return {"batch_size": batch_size, "num_workers": workers}
    raise ValueError(f"target_sps: no batch size and worker count reaches {target_sps:,.0f} samples/s")


__all__ = ["BATCH_SIZES", "EpochResult", "OutOfMemory", "SimulatedLoader", "cheapest_settings"]
