"""Pipeline parallelism for real: a two-stage GPipe pipeline on two processes, every pass timed.

Taught in 16_model_parallelism. PyTorch and matplotlib are imported only by the functions that need them.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, positive_int, positive_number
from gpucourse.parallel.data_parallel import _check_config
from gpucourse.parallel.pipeline_schedules import PipelineEvent
from gpucourse.parallel.workers import DEFAULT_TIMEOUT_S, launch, process_group
from gpucourse.timing import BenchmarkResult


@dataclass(frozen=True)
class PipelineConfig:
    """A network split into two stages on two processes: the sizes, the batch, and how many steps to time."""

    width: int = 512
    cut_width: int = 64
    hidden_layers: int = 1
    batch: int = 256
    steps: int = 5
    warmup: int = 1
    lr: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        """Reject sizes and counts that are not positive."""
        for name in ("width", "cut_width", "batch", "steps"):
            positive_int(name, getattr(self, name))
        non_negative_int("hidden_layers", self.hidden_layers)
        non_negative_int("warmup", self.warmup)
        positive_number("lr", self.lr)
        non_negative_int("seed", self.seed)

    @property
    def message_bytes(self) -> int:
        """Bytes that cross the cut each way in one step (activations forward, their gradients back), float32."""
        return self.batch * self.cut_width * 4


@dataclass(frozen=True)
class PipelineResult:
    """Measured pipeline steps per micro-batch count, the busy share of each step, a timeline, and one process alone."""

    config: PipelineConfig
    step_times_s: dict
    busy_fraction: dict
    timelines: dict
    single_process_s: tuple[float, ...]
    wall_s: float

    def median_step_s(self, microbatches: int) -> float:
        """Median step time with ``microbatches`` micro-batches."""
        return BenchmarkResult(times_s=self.step_times_s[microbatches], warmup=self.config.warmup).median_s

    @property
    def single_process_median_s(self) -> float:
        """Median step time of the whole model in one process with one thread (no pipeline)."""
        return BenchmarkResult(times_s=self.single_process_s, warmup=self.config.warmup).median_s


def _pipeline_stage(config: PipelineConfig, stage: int):
    """One stage: cut_width -> width -> (hidden_layers x width) -> cut_width, ReLUs between; stage 1 adds the head."""
    # Each stage computes with wide layers but hands over narrow activations: a pipeline is cut where the activations
    # are small, so that little has to travel between the devices.
    import numpy as np
    import torch
    from torch import nn

    rng = np.random.default_rng([config.seed, stage])
    sizes = [config.cut_width] + [config.width] * (config.hidden_layers + 1) + [config.cut_width]
    layers: list = []
    for fan_in, fan_out in zip(sizes, sizes[1:]):
        linear = nn.Linear(fan_in, fan_out)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(rng.normal(0, fan_in ** -0.5, (fan_out, fan_in)).astype(np.float32)))
            linear.bias.zero_()
        layers += [linear, nn.ReLU()]
    if stage == 1:
        layers.append(nn.Linear(config.cut_width, 1))  # the head: one output per example
    return nn.Sequential(*layers)


def _pipeline_data(config: PipelineConfig):
    """Inputs (batch, cut_width) and targets (batch, 1) of the pipeline's task, as torch tensors."""
    import numpy as np
    import torch

    rng = np.random.default_rng(config.seed + 7)
    x = rng.normal(size=(config.batch, config.cut_width)).astype(np.float32)
    y = rng.normal(size=(config.batch, 1)).astype(np.float32)
    return torch.from_numpy(x), torch.from_numpy(y)


def _stage0_step(dist, model, optimizer, x, microbatches: int) -> list[tuple]:
    """GPipe on the first stage: all forwards (sending activations), then backwards as the gradients come back."""
    import torch

    optimizer.zero_grad()
    events, outputs, sends = [], [], []
    for index, chunk in enumerate(torch.tensor_split(x, microbatches)):
        start = time.perf_counter()
        out = model(chunk)
        events.append((0, "F", index, start, time.perf_counter()))
        outputs.append(out)
        sends.append(dist.isend(out.detach(), dst=1, tag=index))  # non-blocking: compute the next one meanwhile
    grads = [torch.empty_like(out) for out in outputs]
    order = list(reversed(range(microbatches)))  # the last stage runs its backwards last-in, first-out
    receives = [dist.irecv(grads[index], src=1, tag=microbatches + index) for index in order]
    for index, request in zip(order, receives):
        request.wait()
        start = time.perf_counter()
        outputs[index].backward(grads[index])
        events.append((0, "B", index, start, time.perf_counter()))
    for request in sends:
        request.wait()
    optimizer.step()
    return events


def _stage1_step(dist, model, optimizer, y, width: int, microbatches: int) -> list[tuple]:
    """GPipe on the last stage: forward and loss of every micro-batch as it arrives, then all backwards in reverse."""
    import torch

    optimizer.zero_grad()
    targets = torch.tensor_split(y, microbatches)
    inputs = [torch.empty(len(target), width) for target in targets]
    receives = [dist.irecv(inputs[index], src=0, tag=index) for index in range(microbatches)]
    events, losses, sends = [], [], []
    for index, request in enumerate(receives):
        request.wait()
        inputs[index].requires_grad_(True)
        start = time.perf_counter()
        # each micro-batch's share of the full batch's mean squared error
        losses.append(torch.sum((model(inputs[index]) - targets[index]) ** 2) / len(y))
        events.append((1, "F", index, start, time.perf_counter()))
    for index in reversed(range(microbatches)):
        start = time.perf_counter()
        losses[index].backward()
        events.append((1, "B", index, start, time.perf_counter()))
        sends.append(dist.isend(inputs[index].grad, dst=0, tag=microbatches + index))
    for request in sends:
        request.wait()
    optimizer.step()
    return events


def pipeline_worker(rank: int, world_size: int, config: PipelineConfig, microbatch_counts: tuple[int, ...]) -> dict:
    """One stage of the two-stage pipeline: time steps for each micro-batch count; rank 0 also times the whole model."""
    # Times come from time.perf_counter, one clock for all processes of a machine: the parent can put both stages on
    # one timeline.
    import torch

    torch.set_num_threads(1)
    model = _pipeline_stage(config, rank)
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    x, y = _pipeline_data(config)
    found: dict = {"steps": {}, "events": {}}
    with process_group(rank, world_size, "gloo") as dist:
        for microbatches in microbatch_counts:
            steps = []
            for _ in range(config.warmup + config.steps):
                dist.barrier()  # both stages start the step together
                start = time.perf_counter()
                if rank == 0:
                    events = _stage0_step(dist, model, optimizer, x, microbatches)
                else:
                    events = _stage1_step(dist, model, optimizer, y, config.cut_width, microbatches)
                steps.append((start, time.perf_counter(), sum(end - begin for *_, begin, end in events)))
            found["steps"][microbatches] = steps[config.warmup:]
            found["events"][microbatches] = events
        dist.barrier()
        found["single"] = _time_whole_model(config) if rank == 0 else []
    return found


def _time_whole_model(config: PipelineConfig) -> list[float]:
    """Step times of both stages in one process, one thread, no micro-batches: the baseline of the pipeline."""
    import torch

    model = torch.nn.Sequential(_pipeline_stage(config, 0), _pipeline_stage(config, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=config.lr)
    x, y = _pipeline_data(config)
    times = []
    for _ in range(config.warmup + config.steps):
        start = time.perf_counter()
        optimizer.zero_grad()
        torch.mean((model(x) - y) ** 2).backward()
        optimizer.step()
        times.append(time.perf_counter() - start)
    return times[config.warmup:]


def run_pipeline(config: PipelineConfig, microbatch_counts: Iterable[int] = (1, 2, 4, 8), *,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> PipelineResult:
    """Train the two-stage pipeline on two processes (gloo, isend/irecv) once per micro-batch count; time each step."""
    _check_config("config", config, PipelineConfig)
    if isinstance(microbatch_counts, (str, bytes)) or not isinstance(microbatch_counts, Iterable):
        raise TypeError(f"microbatch_counts must be a sequence of ints, got {type(microbatch_counts).__name__}")
    counts = tuple(positive_int("microbatch_counts", m) for m in microbatch_counts)
    if not counts:
        raise ValueError("microbatch_counts must hold at least one micro-batch count")
    if len(set(counts)) != len(counts):
        raise ValueError(f"microbatch_counts must not repeat a count, got {list(counts)}")
    if max(counts) > config.batch:
        raise ValueError(f"microbatch_counts must be <= config.batch ({config.batch}): every micro-batch needs a "
                         f"row, got {max(counts)}")
    start = time.perf_counter()
    stage0, stage1 = launch(pipeline_worker, 2, (config, counts), timeout_s=timeout_s, backend="gloo")  # CPU stages
    times, busy, timelines = {}, {}, {}
    for m in counts:
        step_times, shares = [], []
        for (start0, end0, busy0), (start1, end1, busy1) in zip(stage0["steps"][m], stage1["steps"][m]):
            step = max(end0, end1) - min(start0, start1)  # from the first stage starting to the last one finishing
            step_times.append(step)
            shares.append((busy0 + busy1) / (2 * step))
        times[m], busy[m] = tuple(step_times), tuple(shares)
        origin = min(stage0["steps"][m][-1][0], stage1["steps"][m][-1][0])
        timelines[m] = tuple(PipelineEvent(stage, kind, index, begin - origin, end - origin)
                             for stage, kind, index, begin, end in stage0["events"][m] + stage1["events"][m])
    return PipelineResult(config, times, busy, timelines, tuple(stage0["single"]), time.perf_counter() - start)
