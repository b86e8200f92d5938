"""DDP observed from inside the workers: real collectives counted, all-reduce bandwidth, and a gradient-bucket timeline.

Taught in 14_data_parallelism. :func:`run_collectives` runs one all-reduce and the same sum as a reduce-scatter and an
all-gather on real processes, counted by :class:`~gpucourse.parallel.comm.CommCounter`, and times all-reduces of a
few sizes (warm-up, median). :func:`run_ddp_timeline` trains a small MLP with ``DistributedDataParallel`` and records,
for one backward pass, when each parameter's gradient became ready and when each bucket's all-reduce started and
finished; :func:`plot_ddp_timeline` draws it. PyTorch is imported only inside the functions that need it.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from gpucourse._validate import positive_int, positive_number
from gpucourse.parallel.comm import CommCounter
from gpucourse.parallel.workers import DEFAULT_TIMEOUT_S, launch, process_group, rank_device


def _check_sizes(name: str, sizes: object) -> tuple[int, ...]:
    """A non-empty tuple of positive ints, else an error naming ``name``."""
    if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
        raise TypeError(f"{name} must be a non-empty list of positive ints, got {sizes!r}")
    return tuple(positive_int(name, size) for size in sizes)


# ---------------------------------------------------------------- collectives and bandwidth

@dataclass(frozen=True)
class CollectivesRun:
    """All-reduce against reduce-scatter + all-gather on real processes, and the all-reduce bandwidth measured."""

    world_size: int
    backend: str
    numel: int
    same_result: bool
    calls: tuple[tuple[str, int], ...]
    ring_bytes_per_rank: dict
    bandwidth: tuple[dict, ...]


def _collectives(rank: int, world_size: int, dist, numel: int, sizes: tuple[int, ...], repeats: int) -> dict:
    """In a joined group: all-reduce, then reduce-scatter + all-gather of the same data, counted; time all-reduces."""
    import torch

    from gpucourse.parallel.workers import worker_backend

    device = rank_device(rank)
    data = torch.arange(float(numel), device=device) * (rank + 1)
    with CommCounter() as whole:
        summed = data.clone()
        dist.all_reduce(summed)
    with CommCounter() as split:
        shard = torch.empty(numel // world_size, device=device)
        dist.reduce_scatter_tensor(shard, data)
        gathered = torch.empty_like(data)
        dist.all_gather_into_tensor(gathered, shard)
    bandwidth = []
    for size in sizes:
        buffer = torch.ones(size // 4, dtype=torch.float32, device=device)
        times = []
        for index in range(repeats + 2):  # two warm-up calls, then the timed ones
            dist.barrier()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            start = time.perf_counter()
            dist.all_reduce(buffer)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if index >= 2:
                times.append(time.perf_counter() - start)
        bandwidth.append({"bytes": size, "median_s": statistics.median(times)})
    return {"same_result": bool(torch.equal(summed, gathered)), "backend": worker_backend(),
            "calls": [(call.kind, call.bytes) for call in whole.calls + split.calls],
            "ring": {"all-reduce": whole.ring_bytes_per_rank(world_size),
                     "reduce-scatter + all-gather": split.ring_bytes_per_rank(world_size)},
            "bandwidth": bandwidth}


def collectives_worker(rank: int, world_size: int, numel: int, sizes: tuple[int, ...], repeats: int) -> dict:
    """One rank: all-reduce, then reduce-scatter + all-gather of the same data, counted; then time all-reduces."""
    with process_group(rank, world_size) as dist:
        return _collectives(rank, world_size, dist, numel, sizes, repeats)


def _collectives_args(world_size: int, numel: int, sizes: Sequence[int], repeats: int) -> tuple:
    """Validated (numel, sizes, repeats) for :func:`collectives_worker`; errors name the argument."""
    numel = positive_int("numel", numel)
    if numel % world_size:
        raise ValueError(f"numel ({numel}) must be divisible by world_size ({world_size}): reduce-scatter gives "
                         "every rank an equal shard")
    sizes = _check_sizes("sizes", sizes)
    if any(size % 4 for size in sizes):
        raise ValueError(f"sizes must be multiples of 4 bytes (float32 buffers), got {list(sizes)}")
    return numel, sizes, positive_int("repeats", repeats)


def _collectives_run(world_size: int, numel: int, sizes: tuple[int, ...], ranks: list[dict]) -> CollectivesRun:
    """Rank 0's counts, and per size the slowest rank's median time as algbw and busbw."""
    share = 2 * (world_size - 1) / world_size  # busbw = algbw x 2(N-1)/N for an all-reduce (nccl-tests)
    bandwidth = []
    for index, size in enumerate(sizes):
        median_s = max(rank["bandwidth"][index]["median_s"] for rank in ranks)
        algbw = size / median_s / 1e9
        bandwidth.append({"bytes": size, "median_ms": median_s * 1e3, "algbw_gb_s": algbw, "busbw_gb_s": algbw * share})
    first = ranks[0]
    return CollectivesRun(world_size, first["backend"], numel, all(rank["same_result"] for rank in ranks),
                          tuple(tuple(call) for call in first["calls"]), dict(first["ring"]), tuple(bandwidth))


def run_collectives(world_size: int = 2, numel: int = 1 << 16, sizes: Sequence[int] = (4096, 262144, 4194304), *,
                    repeats: int = 5, timeout_s: float = DEFAULT_TIMEOUT_S) -> CollectivesRun:
    """Launch :func:`collectives_worker` once: the collectives counted, and all-reduce bandwidth per size."""
    world_size = positive_int("world_size", world_size)
    numel, sizes, repeats = _collectives_args(world_size, numel, sizes, repeats)
    ranks = launch(collectives_worker, world_size, (numel, sizes, repeats), timeout_s=timeout_s)
    return _collectives_run(world_size, numel, sizes, ranks)


# ---------------------------------------------------------------- the DDP timeline

@dataclass(frozen=True)
class BucketEvent:
    """One bucket's all-reduce during the recorded backward pass: index, bytes, parameters, start and end (s)."""

    index: int
    bytes: int
    params: tuple[str, ...]
    start_s: float
    end_s: float


@dataclass(frozen=True)
class DDPTimeline:
    """One rank's recorded backward pass: when each gradient was ready, each bucket's all-reduce, the pass's end."""

    rank: int
    bucket_cap_mb: float
    backend: str
    ready_s: dict
    buckets: tuple[BucketEvent, ...]
    backward_s: float
    gradient_bytes: int

    @property
    def last_ready_s(self) -> float:
        """When the last parameter's gradient was ready (s since backward() was called)."""
        return max(self.ready_s.values())

    @property
    def exposed_s(self) -> float:
        """Seconds backward() still waited for all-reduces after the last gradient was ready (not hidden by compute)."""
        return max(0.0, self.backward_s - self.last_ready_s)


def _mlp(layers: int, width: int):
    """A plain MLP of ``layers`` Linear(width, width) layers with tanh between them."""
    import torch

    parts = []
    for index in range(layers):
        parts.append(torch.nn.Linear(width, width))
        if index < layers - 1:
            parts.append(torch.nn.Tanh())
    return torch.nn.Sequential(*parts)


def _timelines(rank: int, world_size: int, dist, layers: int, width: int, batch: int, caps_mb: tuple[float, ...],
               steps: int) -> list[dict]:
    """In a joined group: for each bucket cap, train a DDP MLP ``steps`` steps; record the last backward's events."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from gpucourse.parallel.workers import worker_backend

    device = rank_device(rank)
    shard = batch // world_size
    results = []
    for cap in caps_mb:
        torch.manual_seed(0)
        model = _mlp(layers, width).to(device)
        names = {id(p): name for name, p in model.named_parameters()}
        ddp = DistributedDataParallel(model, bucket_cap_mb=cap)
        clock = {"t0": 0.0}
        ready: dict[str, float] = {}
        buckets: list[dict] = []

        def on_ready(name: str):
            """A tensor hook: note when this parameter's gradient was computed."""
            def hook(grad):
                """Record the time; leave the gradient unchanged."""
                ready[name] = time.perf_counter() - clock["t0"]
                return grad
            return hook

        for name, param in model.named_parameters():
            param.register_hook(on_ready(name))

        def all_reduce_hook(state, bucket):
            """DDP's comm hook: average the bucket with an async all-reduce and time it."""
            start = time.perf_counter() - clock["t0"]
            buffer = bucket.buffer()
            entry = {"index": bucket.index(), "bytes": buffer.numel() * buffer.element_size(),
                     "params": tuple(names[id(p)] for p in bucket.parameters()), "start_s": start}
            buckets.append(entry)
            future = dist.all_reduce(buffer.div_(world_size), async_op=True).get_future()

            def done(fut):
                """Record when the all-reduce finished; hand DDP the averaged bucket."""
                entry["end_s"] = time.perf_counter() - clock["t0"]
                return fut.value()[0]
            return future.then(done)

        ddp.register_comm_hook(None, all_reduce_hook)
        optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
        g = torch.Generator().manual_seed(1)
        for _ in range(steps):
            x = torch.randn(batch, width, generator=g)[rank * shard:(rank + 1) * shard].to(device)
            ready.clear()
            buckets.clear()
            optimizer.zero_grad()
            loss = ddp(x).pow(2).mean()
            dist.barrier()
            clock["t0"] = time.perf_counter()
            loss.backward()  # returns once DDP has waited for every bucket's all-reduce
            backward_s = time.perf_counter() - clock["t0"]
            optimizer.step()
        results.append({"rank": rank, "bucket_cap_mb": cap, "backend": worker_backend(), "ready_s": dict(ready),
                        "buckets": [dict(b) for b in buckets], "backward_s": backward_s,
                        "gradient_bytes": sum(p.numel() * p.element_size() for p in model.parameters())})
    return results


def ddp_timeline_worker(rank: int, world_size: int, layers: int, width: int, batch: int,
                        caps_mb: tuple[float, ...], steps: int) -> list[dict]:
    """One rank: for each bucket cap, train a DDP MLP ``steps`` steps and record the last backward pass's events."""
    with process_group(rank, world_size) as dist:
        return _timelines(rank, world_size, dist, layers, width, batch, caps_mb, steps)


def _timeline_args(world_size: int, bucket_caps_mb: object, layers: int, width: int, batch: int,
                   steps: int) -> tuple:
    """Validated (layers, width, batch, caps, steps) for :func:`ddp_timeline_worker`; errors name the argument."""
    if isinstance(bucket_caps_mb, (int, float)) and not isinstance(bucket_caps_mb, bool):
        bucket_caps_mb = (bucket_caps_mb,)
    if isinstance(bucket_caps_mb, (str, bytes)) or not isinstance(bucket_caps_mb, Sequence) or not bucket_caps_mb:
        raise TypeError(f"bucket_caps_mb must be a non-empty list of positive numbers, got {bucket_caps_mb!r}")
    caps = tuple(float(positive_number("bucket_cap_mb", cap)) for cap in bucket_caps_mb)
    layers, width = positive_int("layers", layers), positive_int("width", width)
    batch, steps = positive_int("batch", batch), positive_int("steps", steps)
    if batch % world_size:
        raise ValueError(f"batch ({batch}) must be divisible by world_size ({world_size}): every rank gets an equal "
                         "shard")
    return layers, width, batch, caps, steps


def _timeline_objects(entries: list[dict]) -> list[DDPTimeline]:
    """One rank's recorded dicts as DDPTimeline objects, buckets in the order their all-reduces started."""
    timelines = []
    for entry in entries:
        events = tuple(BucketEvent(b["index"], b["bytes"], tuple(b["params"]), b["start_s"], b["end_s"])
                       for b in sorted(entry["buckets"], key=lambda b: b["start_s"]))
        timelines.append(DDPTimeline(entry["rank"], entry["bucket_cap_mb"], entry["backend"], entry["ready_s"],
                                     events, entry["backward_s"], entry["gradient_bytes"]))
    return timelines


def run_ddp_timeline(bucket_caps_mb: Sequence[float] = (25.0, 0.1), *, world_size: int = 2, layers: int = 6,
                     width: int = 128, batch: int = 256, steps: int = 3,
                     timeout_s: float = DEFAULT_TIMEOUT_S) -> list[DDPTimeline]:
    """Rank 0's timeline of the last of ``steps`` DDP steps, one per bucket cap; all caps in one launch."""
    world_size = positive_int("world_size", world_size)
    args = _timeline_args(world_size, bucket_caps_mb, layers, width, batch, steps)
    ranks = launch(ddp_timeline_worker, world_size, args, timeout_s=timeout_s)
    return _timeline_objects(ranks[0])


@dataclass(frozen=True)
class ObservedRun:
    """What :func:`run_observed` saw: the collectives and bandwidth, the DDP timelines, the DDP trainings."""

    collectives: CollectivesRun
    timelines: tuple[DDPTimeline, ...]
    trainings: tuple  # one DDPResult per TrainConfig, as run_ddp_all returns them
    wall_s: float


def _trainings(rank: int, world_size: int, configs: tuple) -> list:
    """In a joined group: DDP training of each config on this rank's shard (as ``ddp_worker`` does)."""
    import torch
    from torch.nn.parallel import DistributedDataParallel

    from gpucourse.parallel.data_parallel import TrainResult, _train, make_model

    device = rank_device(rank)
    results = []
    for config in configs:
        shard = config.batch // world_size
        model = make_model(config).to(device)
        ddp = DistributedDataParallel(model, device_ids=[device.index] if device.type != "cpu" else None)
        weights, times = _train(ddp, config, slice(rank * shard, (rank + 1) * shard), device)
        results.append(TrainResult(weights, times, config.warmup, processes=world_size,
                                   threads=torch.get_num_threads()))
    return results


def observe_worker(rank: int, world_size: int, collectives_args: tuple, timeline_args: tuple,
                   configs: tuple = ()) -> dict:
    """One rank of :func:`run_observed`: collectives and bandwidth, DDP timelines, DDP trainings, in one group."""
    with process_group(rank, world_size) as dist:
        start = time.perf_counter()
        collectives = _collectives(rank, world_size, dist, *collectives_args)
        timelines = _timelines(rank, world_size, dist, *timeline_args)
        observe_s = time.perf_counter() - start
        return {"collectives": collectives, "timelines": timelines, "observe_s": observe_s,
                "trainings": _trainings(rank, world_size, configs)}


def run_observed(world_size: int = 2, *, numel: int = 1 << 16, sizes: Sequence[int] = (4096, 262144, 4194304),
                 repeats: int = 5, bucket_caps_mb: Sequence[float] = (25.0, 0.1), layers: int = 6, width: int = 128,
                 batch: int = 256, steps: int = 3, trainings: Sequence = (),
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> ObservedRun:
    """:func:`run_collectives`, :func:`run_ddp_timeline` and DDP training of each TrainConfig in ``trainings``
    (as :func:`~gpucourse.parallel.data_parallel.run_ddp_all`), all in ONE launch: the processes start once."""
    from gpucourse.parallel.data_parallel import DDPResult, TrainConfig, _check_config

    world_size = positive_int("world_size", world_size)
    collectives_args = _collectives_args(world_size, numel, sizes, repeats)
    timeline_args = _timeline_args(world_size, bucket_caps_mb, layers, width, batch, steps)
    if isinstance(trainings, (str, bytes)) or not isinstance(trainings, Sequence):
        raise TypeError(f"trainings must be a list of TrainConfig, got {type(trainings).__name__}")
    for config in trainings:
        _check_config("trainings", config, TrainConfig)
        if config.batch % world_size:
            raise ValueError(f"trainings: config.batch ({config.batch}) must be divisible by world_size "
                             f"({world_size}): DDP averages the gradients of equal shards")
    start = time.perf_counter()
    ranks = launch(observe_worker, world_size, (collectives_args, timeline_args, tuple(trainings)),
                   timeout_s=timeout_s)
    wall_s = time.perf_counter() - start
    collectives = _collectives_run(world_size, collectives_args[0], collectives_args[1],
                                   [rank["collectives"] for rank in ranks])
    backend = collectives.backend
    training_wall_s = wall_s - max(rank["observe_s"] for rank in ranks)  # start-up and training, as run_ddp_all's
    results = tuple(DDPResult(tuple(rank["trainings"][index] for rank in ranks), backend, training_wall_s)
                    for index in range(len(trainings)))
    return ObservedRun(collectives, tuple(_timeline_objects(ranks[0]["timelines"])), results, wall_s)


def plot_ddp_timeline(timelines: Sequence[DDPTimeline], ax=None):
    """One block per timeline: gradient-ready ticks on top, each bucket's all-reduce as a bar in its own lane."""
    import matplotlib.pyplot as plt

    if isinstance(timelines, DDPTimeline):
        timelines = [timelines]
    if isinstance(timelines, (str, bytes)) or not isinstance(timelines, Sequence) or not timelines or \
            not all(isinstance(t, DDPTimeline) for t in timelines):
        raise TypeError("timelines must be a non-empty list of DDPTimeline (from run_ddp_timeline)")
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.6 + 1.3 * len(timelines)), layout="constrained")
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, timeline in enumerate(timelines):
        top = len(timelines) - row  # this block spans (top - 1, top)
        ax.vlines([t * 1e3 for t in timeline.ready_s.values()], top - 0.3, top - 0.05, color="black", linewidth=1,
                  label="a parameter's gradient is ready" if row == 0 else None)
        lane = 0.6 / max(len(timeline.buckets), 1)
        for index, bucket in enumerate(timeline.buckets):
            ax.barh(top - 0.35 - (index + 0.5) * lane, (bucket.end_s - bucket.start_s) * 1e3,
                    left=bucket.start_s * 1e3, height=lane * 0.8, color=colors[index % len(colors)],
                    edgecolor="black", linewidth=0.5,
                    label="a bucket's all-reduce (start to finish)" if row == 0 and index == 0 else None)
        ax.plot([timeline.backward_s * 1e3] * 2, [top - 0.98, top - 0.02], color="red", linewidth=1.5,
                label="backward() returns" if row == 0 else None)
    ax.set_ylim(0, len(timelines))
    ax.set_yticks([len(timelines) - row - 0.5 for row in range(len(timelines))])
    ax.set_yticklabels([f"bucket_cap_mb={t.bucket_cap_mb:g}\n{len(t.buckets)} bucket(s)" for t in timelines],
                       fontsize=8)
    ax.set_xlim(left=0)
    ax.set_xlabel(f"ms since loss.backward() was called (rank {timelines[0].rank})")
    ax.set_title(f"DDP on {timelines[0].backend}, measured: gradients ready vs bucket all-reduces", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, axis="x", alpha=0.3)
    return ax
