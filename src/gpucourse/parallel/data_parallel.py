"""Data parallelism for real: a small regression task trained by PyTorch DDP on worker processes and in one process.

Taught in 14_data_parallelism. PyTorch is imported only by the functions that need it.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, positive_int, positive_number
from gpucourse.parallel.workers import (DEFAULT_TIMEOUT_S, _gpu_count, launch, pick_backend,  # noqa: F401
                                        process_group)
from gpucourse.timing import BenchmarkResult


@dataclass(frozen=True)
class TrainConfig:
    """A small regression task trained with plain SGD: sizes, batch, steps, learning rate, seed, warm-up steps."""

    features: int = 16
    hidden: int = 32
    batch: int = 64
    steps: int = 20
    lr: float = 0.05
    seed: int = 0
    warmup: int = 2

    def __post_init__(self) -> None:
        """Reject sizes, steps or rates that are not positive numbers."""
        for name in ("features", "hidden", "batch", "steps"):
            positive_int(name, getattr(self, name))
        positive_number("lr", self.lr)
        non_negative_int("seed", self.seed)
        non_negative_int("warmup", self.warmup)
        if self.warmup >= self.steps:
            raise ValueError(f"warmup must be < steps ({self.steps}) so that some steps are timed, got {self.warmup}")


@dataclass(frozen=True)
class TrainResult:
    """Final weights (name -> float32 array) and the time of every step of one training run (one rank of it)."""

    weights: dict
    step_times_s: tuple[float, ...]
    warmup: int
    processes: int
    threads: int

    @property
    def timing(self) -> BenchmarkResult:
        """Median and spread of the step times after the warm-up steps."""
        return BenchmarkResult(times_s=self.step_times_s[self.warmup:], warmup=self.warmup)


@dataclass(frozen=True)
class DDPResult:
    """What a DistributedDataParallel run returns: every rank's result, the backend and the whole run's wall time."""

    ranks: tuple[TrainResult, ...]
    backend: str
    wall_s: float

    @property
    def weights(self) -> dict:
        """Rank 0's final weights (every replica holds the same ones)."""
        return self.ranks[0].weights

    @property
    def replicas_identical(self) -> bool:
        """True if every rank ends with bit-for-bit the same weights as rank 0."""
        import numpy as np

        return all(set(r.weights) == set(self.weights) and all(np.array_equal(r.weights[k], self.weights[k])
                                                               for k in self.weights) for r in self.ranks)

    @property
    def timing(self) -> BenchmarkResult:
        """Step times of the slowest rank, after the warm-up steps (a step ends when every rank is done)."""
        steps = zip(*(r.step_times_s for r in self.ranks))
        times = tuple(max(step) for step in steps)
        return BenchmarkResult(times_s=times[self.ranks[0].warmup:], warmup=self.ranks[0].warmup)


def _check_config(name: str, config: object, kind: type) -> None:
    """Raise TypeError unless ``config`` is an instance of ``kind``."""
    if not isinstance(config, kind):
        raise TypeError(f"{name} must be a {kind.__name__}, got {type(config).__name__}")


def make_model(config: TrainConfig):
    """The task's model, features -> hidden (tanh) -> 1, initialised from the seed with numpy (same in every process)."""
    import numpy as np
    import torch
    from torch import nn

    _check_config("config", config, TrainConfig)
    rng = np.random.default_rng(config.seed)
    model = nn.Sequential()
    model.add_module("hidden", nn.Linear(config.features, config.hidden))
    model.add_module("act", nn.Tanh())
    model.add_module("out", nn.Linear(config.hidden, 1))
    with torch.no_grad():
        for layer in (model.hidden, model.out):
            fan_in = layer.weight.shape[1]
            layer.weight.copy_(torch.from_numpy(rng.normal(0.0, fan_in ** -0.5, layer.weight.shape).astype(np.float32)))
            layer.bias.copy_(torch.from_numpy(rng.normal(0.0, 0.1, layer.bias.shape).astype(np.float32)))
    return model


def make_batches(config: TrainConfig):
    """The task's data: inputs of shape (steps, batch, features) and targets (steps, batch, 1), float32 numpy."""
    import numpy as np

    _check_config("config", config, TrainConfig)
    rng = np.random.default_rng(config.seed + 1)
    x = rng.normal(size=(config.steps, config.batch, config.features)).astype(np.float32)
    direction = rng.normal(size=(config.features, 1)).astype(np.float32) / math.sqrt(config.features)
    y = (np.sin(3.0 * x @ direction) + 0.1 * rng.normal(size=(config.steps, config.batch, 1))).astype(np.float32)
    return x, y


def _train(model, config: TrainConfig, rows: slice, device) -> tuple[dict, tuple[float, ...]]:
    """SGD on the mean squared error of ``rows`` of every step's batch; return the final weights and step times."""
    import torch

    x_all, y_all = make_batches(config)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    times = []
    for step in range(config.steps):
        x = torch.from_numpy(x_all[step, rows]).to(device)
        y = torch.from_numpy(y_all[step, rows]).to(device)
        start = time.perf_counter()
        optimizer.zero_grad()
        loss = torch.mean((model(x) - y) ** 2)
        loss.backward()  # under DDP, this also all-reduces (averages) the gradients across the ranks
        optimizer.step()
        if device.type != "cpu":
            from gpucourse.timing import sync_for

            sync_for(device)()
        times.append(time.perf_counter() - start)
    module = getattr(model, "module", model)  # DDP wraps the model: its weights live in .module
    weights = {name: tensor.detach().cpu().numpy().copy() for name, tensor in module.state_dict().items()}
    return weights, tuple(times)


@contextlib.contextmanager
def _torch_threads(threads: int | None) -> Iterator[None]:
    """Run the block with ``threads`` intra-op threads in this process (None: leave as is), then restore."""
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def train_single(config: TrainConfig, threads: int | None = None, rows: slice | None = None,
                 device: str = "cpu") -> TrainResult:
    """Train in this process on the full batch (or on ``rows`` of it) with ``threads`` CPU threads, on ``device``."""
    import torch

    from gpucourse.hardware import pick_device

    _check_config("config", config, TrainConfig)
    if threads is not None:
        threads = positive_int("threads", threads)
    if rows is None:
        rows = slice(None)
    elif not isinstance(rows, slice):
        raise TypeError(f"rows must be a slice of the batch (e.g. slice(0, 32)) or None, got {type(rows).__name__}")
    try:
        target = pick_device(device)  # validates the name ('cpu', 'cuda:0', ...) and that the device is there
    except (TypeError, ValueError) as error:
        raise type(error)(str(error).replace("prefer", "device")) from None
    with _torch_threads(threads):
        weights, times = _train(make_model(config).to(target), config, rows, target)
        used = torch.get_num_threads()
    return TrainResult(weights, times, config.warmup, processes=1, threads=used)


def ddp_worker(rank: int, world_size: int, configs: tuple[TrainConfig, ...], backend: str = "gloo",
               threads: int = 1) -> list[TrainResult]:
    """One rank of DDP runs: the same model everywhere, this rank's shard of every batch, gradients averaged."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(threads)
    if backend == "nccl":
        from gpucourse.hardware import pick_device

        device = pick_device(f"cuda:{rank}")  # one GPU per process, on one node only (several nodes: LOCAL_RANK)
    else:
        device = torch.device("cpu")
    results = []
    with process_group(rank, world_size, backend):  # joined once: several trainings share the start-up cost
        for config in configs:
            shard = config.batch // world_size
            model = make_model(config).to(device)
            ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type != "cpu" else None)
            weights, times = _train(ddp, config, slice(rank * shard, (rank + 1) * shard), device)
            results.append(TrainResult(weights, times, config.warmup, processes=world_size,
                                       threads=torch.get_num_threads()))
    return results


def run_ddp_all(configs: Sequence[TrainConfig], world_size: int = 2, *, backend: str = "auto",
                threads_per_worker: int = 1, timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[DDPResult, ...]:
    """Train each config in turn with DistributedDataParallel on the same ``world_size`` processes, started once."""
    if isinstance(configs, (str, bytes)) or not isinstance(configs, Sequence):
        raise TypeError(f"configs must be a list of TrainConfig, got {type(configs).__name__}")
    if not configs:
        raise ValueError("configs must hold at least one TrainConfig")
    world_size = positive_int("world_size", world_size)
    for config in configs:
        _check_config("configs", config, TrainConfig)
        if config.batch % world_size:
            raise ValueError(f"config.batch ({config.batch}) must be divisible by world_size ({world_size}): DDP "
                             "averages the gradients of equal shards")
    backend = pick_backend(world_size, backend)  # one GPU shared by two processes: gloo on the CPUs
    start = time.perf_counter()
    ranks = launch(ddp_worker, world_size, (tuple(configs), backend, threads_per_worker), timeout_s=timeout_s,
                   threads_per_worker=threads_per_worker, backend=backend)
    wall_s = time.perf_counter() - start
    return tuple(DDPResult(tuple(rank[index] for rank in ranks), backend, wall_s) for index in range(len(configs)))


def run_ddp(config: TrainConfig, world_size: int = 2, *, backend: str = "auto", threads_per_worker: int = 1,
            timeout_s: float = DEFAULT_TIMEOUT_S) -> DDPResult:
    """Train with DistributedDataParallel on ``world_size`` processes (gloo on CPUs; NCCL with a GPU per rank)."""
    _check_config("config", config, TrainConfig)
    return run_ddp_all([config], world_size, backend=backend, threads_per_worker=threads_per_worker,
                       timeout_s=timeout_s)[0]


def max_difference(a: dict, b: dict) -> float:
    """Largest absolute difference between two weight dicts with the same keys and shapes (arrays or tensors)."""
    import numpy as np

    if not isinstance(a, dict) or not isinstance(b, dict):
        raise TypeError(f"a and b must be dicts name -> array, got {type(a).__name__} and {type(b).__name__}")
    if set(a) != set(b):
        raise ValueError(f"a and b must have the same keys, got {sorted(a)} and {sorted(b)}")
    return max((float(np.abs(np.asarray(a[k], dtype=np.float64) - np.asarray(b[k], dtype=np.float64)).max())
                for k in a if np.size(a[k])), default=0.0)
