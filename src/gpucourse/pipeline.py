"""Feeding the model: a deliberately slow dataset, the preprocess-once fix, throughput measurements of the
loader alone, the compute alone and the whole loop, and a batch-size sweep.

The slow part of :class:`SlowImages` is a ``time.sleep`` per item, not real arithmetic. That is a choice:

- it stands for the part of loading that *waits*: reading a file from disk or network storage, and decoding
  it in a C library (Pillow, libjpeg-turbo, libpng) that releases Python's GIL while it works;
- a sleep releases the GIL and costs no CPU, so extra DataLoader worker processes, threads and tf.data's
  parallel ``map`` speed it up honestly, as they speed up real I/O, even on a busy 2-core machine where
  CPU-bound busy work would only compete for the same two cores and give noisy, misleading numbers;
- a small real decode follows the sleep (uint8 -> float32, normalise), so the data is genuine.

Everything is synthetic and made from a fixed seed: nothing is downloaded.
"""

from __future__ import annotations

import numbers
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch.profiler import record_function
from torch.utils.data import BatchSampler, DataLoader, Dataset, RandomSampler, SequentialSampler, TensorDataset

from gpucourse._validate import non_negative_int, non_negative_number, positive_int, positive_number
from gpucourse.timing import benchmark, sync_for

STAGES = ("data", "to_device", "forward", "backward", "optimizer")
"""Names of the profiler regions (``torch.profiler.record_function``) of one training step, in order."""

MEAN, STD = 0.5, 0.25
"""Normalisation applied by the decode step: x = (pixel / 255 - MEAN) / STD."""


def _shape(name: str, value: object) -> tuple[int, ...]:
    """``value`` as a tuple of positive ints (an image shape such as (1, 28, 28))."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
        raise TypeError(f"{name} must be a non-empty tuple of positive ints such as (1, 28, 28), got {value!r}")
    return tuple(positive_int(f"{name}[{i}]", v) for i, v in enumerate(value))


def _torch_device(device: object) -> torch.device:
    """``device`` as a torch.device (None: pick_device()); rejects unknown or absent devices by name."""
    from gpucourse import hardware

    if device is None:
        return hardware.pick_device()
    if isinstance(device, torch.device):
        device = str(device)
    if not isinstance(device, str):
        raise TypeError(f"device must be a torch.device, a str such as 'cpu' or 'cuda:0', or None, "
                        f"got {type(device).__name__} ({device!r})")
    sync_for(device)  # raises ValueError for unknown devices and for GPUs that are not there
    return torch.device(device)


# --------------------------------------------------------------------------- the slow dataset

class SlowImages(Dataset):
    """``n`` small synthetic greyscale images in ``classes`` classes, stored as raw uint8 ("files"), decoded one
    at a time in ``__getitem__`` at a cost of ``decode_s`` seconds each (a sleep: see the module docstring).

    Each class has its own random pattern; an image is its class's pattern plus noise, so a model can learn
    them. ``dataset[i]`` returns ``(x, label)``: a float32 tensor of ``shape`` and an int.
    """

    def __init__(self, n: int = 512, shape: Sequence[int] = (1, 28, 28), classes: int = 10,
                 decode_s: float = 0.001, seed: int = 0) -> None:
        self.n = positive_int("n", n)
        self.shape = _shape("shape", shape)
        self.classes = positive_int("classes", classes)
        self.decode_s = non_negative_number("decode_s", decode_s)
        self.seed = non_negative_int("seed", seed)
        rng = np.random.default_rng(self.seed)
        patterns = rng.integers(0, 256, size=(self.classes, *self.shape))
        self.labels = rng.integers(0, self.classes, size=self.n).astype(np.int64)
        noise = rng.normal(0.0, 40.0, size=(self.n, *self.shape))
        self.raw = np.clip(patterns[self.labels] + noise, 0, 255).astype(np.uint8)
        self.reads = 0  # items decoded through dataset[i] in this process (DataLoader workers count in their own)

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise TypeError(f"index must be an int, got {type(index).__name__} ({index!r})")
        if not -self.n <= index < self.n:
            raise IndexError(f"index {index} out of range for a dataset of {self.n} items")
        self.reads += 1
        return self.decode(self.raw[index]), int(self.labels[index])

    def decode(self, raw: np.ndarray) -> torch.Tensor:
        """The per-item work: wait ``decode_s`` (reading and decoding a file), then convert and normalise."""
        if self.decode_s:
            time.sleep(self.decode_s)
        return torch.from_numpy((raw.astype(np.float32) / 255.0 - MEAN) / STD)

    def instant(self) -> "SlowImages":
        """The same images and labels with no decode cost (for compute-only baselines and checks)."""
        return SlowImages(self.n, self.shape, self.classes, 0.0, self.seed)

    def __repr__(self) -> str:
        return (f"SlowImages(n={self.n}, shape={self.shape}, classes={self.classes}, "
                f"decode_s={self.decode_s:g}, seed={self.seed})")


def preprocess_once(dataset: Dataset) -> TensorDataset:
    """Decode every item of ``dataset`` once and keep the results as two contiguous tensors (x, labels).

    This pays the decode cost ``len(dataset)`` times, once, instead of once per item per epoch. Real pipelines
    do the same offline into an efficient format (a .npy or memory-mapped array, TFRecord, WebDataset shards)
    and keep only the random augmentations on the fly.
    """
    if not hasattr(dataset, "__getitem__") or not hasattr(dataset, "__len__"):
        raise TypeError(f"dataset must be a map-style dataset (with __getitem__ and __len__), "
                        f"got {type(dataset).__name__}")
    if len(dataset) == 0:
        raise ValueError("dataset must hold at least one item")
    xs, ys = zip(*(dataset[i] for i in range(len(dataset))))
    return TensorDataset(torch.stack([torch.as_tensor(x) for x in xs]), torch.as_tensor(ys, dtype=torch.int64))


def batched_loader(tensors: TensorDataset, batch_size: int, shuffle: bool = True, seed: int = 0,
                   pin_memory: bool = False) -> DataLoader:
    """A DataLoader over in-memory tensors that indexes whole batches (``x[indices]``) instead of fetching and
    collating one item at a time; reshuffled every epoch when ``shuffle``."""
    if not isinstance(tensors, TensorDataset):
        raise TypeError(f"tensors must be a torch.utils.data.TensorDataset (e.g. from preprocess_once), "
                        f"got {type(tensors).__name__}")
    batch_size = positive_int("batch_size", batch_size)
    for name, flag in (("shuffle", shuffle), ("pin_memory", pin_memory)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {type(flag).__name__} ({flag!r})")
    seed = non_negative_int("seed", seed)
    order = (RandomSampler(tensors, generator=torch.Generator().manual_seed(seed)) if shuffle
             else SequentialSampler(tensors))
    return DataLoader(tensors, sampler=BatchSampler(order, batch_size, drop_last=False), batch_size=None,
                      pin_memory=pin_memory)


# --------------------------------------------------------------------------- the model and one training step

def tiny_model(shape: Sequence[int] = (1, 28, 28), classes: int = 10, hidden: int = 512,
               seed: int = 0) -> torch.nn.Module:
    """A small multi-layer perceptron for images of ``shape``: flatten, two hidden ReLU layers, ``classes`` logits."""
    shape = _shape("shape", shape)
    classes, hidden, seed = positive_int("classes", classes), positive_int("hidden", hidden), non_negative_int("seed", seed)
    with torch.random.fork_rng(devices=[]):  # the same weights for the same seed; the global RNG is untouched
        torch.manual_seed(seed)
        return torch.nn.Sequential(
            torch.nn.Flatten(),
            torch.nn.Linear(int(np.prod(shape)), hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
            torch.nn.Linear(hidden, classes),
        )


class TrainStep:
    """One SGD step on a batch: copy it to the device, forward, backward, update.

    Each stage runs inside ``torch.profiler.record_function`` (names in ``STAGES``), so a profile of a loop
    shows where a step's time goes. On a CUDA GPU the copy is ``non_blocking``: with pinned batches it
    overlaps with computation. The step does not wait for the GPU; ``sync()`` does.
    """

    def __init__(self, model: torch.nn.Module, device: object = None, lr: float = 0.05) -> None:
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
        self.device = _torch_device(device)
        self.model = model.to(self.device)
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=positive_number("lr", lr))
        self.sync = sync_for(self.device)
        self.non_blocking = self.device.type == "cuda"
        self.steps = 0
        self._loss: torch.Tensor | None = None

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        with record_function("to_device"):
            x = x.to(self.device, non_blocking=self.non_blocking)
            y = y.to(self.device, non_blocking=self.non_blocking)
        with record_function("forward"):
            loss = torch.nn.functional.cross_entropy(self.model(x), y)
        with record_function("backward"):
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with record_function("optimizer"):
            self.optimizer.step()
        self._loss = loss.detach()
        self.steps += 1

    @property
    def last_loss(self) -> float | None:
        """Loss of the latest step (reading it waits for the device)."""
        return None if self._loss is None else float(self._loss)


# --------------------------------------------------------------------------- throughput

@dataclass(frozen=True)
class Throughput:
    """Samples and batches processed in a measured number of seconds."""

    samples: int
    batches: int
    seconds: float

    @property
    def samples_per_s(self) -> float:
        """Samples per second."""
        return self.samples / self.seconds if self.seconds > 0 else float("inf")

    def __str__(self) -> str:
        return (f"{self.samples_per_s:,.0f} samples/s ({self.samples} samples in {self.batches} batches, "
                f"{self.seconds:.3f} s)")


def _batch_length(batch: object) -> int:
    """Number of samples in an (x, y) batch: the first dimension of x."""
    if not isinstance(batch, (tuple, list)) or len(batch) != 2:
        raise TypeError(f"each batch must be an (x, y) pair, got {type(batch).__name__}")
    shape = getattr(batch[0], "shape", None)
    if not shape:
        raise TypeError(f"x of a batch must be an array or tensor with a batch dimension, got "
                        f"{type(batch[0]).__name__}")
    return int(shape[0])


def _one_pass(batches: Iterable, step: Callable | None, max_batches: int | None,
              sync: Callable[[], None]) -> Throughput:
    """Time one pass: create the iterator (starting any workers), fetch each batch, run ``step`` on it."""
    samples = count = 0
    sync()
    start = time.perf_counter()
    iterator = iter(batches)
    try:
        while max_batches is None or count < max_batches:
            with record_function("data"):
                try:
                    batch = next(iterator)
                except StopIteration:
                    break
            samples += _batch_length(batch)
            count += 1
            if step is not None:
                step(*batch)
        sync()
        seconds = time.perf_counter() - start
    finally:
        del iterator  # a DataLoader iterator shuts its worker processes down when it goes
    if count == 0:
        raise ValueError("batches yielded no batch: pass a non-empty DataLoader, list of batches or dataset")
    return Throughput(samples, count, seconds)


def measure(batches: Iterable, step: Callable | None = None, *, max_batches: int | None = None,
            sync: Callable[[], None] | None = None, repeats: int = 1) -> Throughput:
    """Samples per second of a pass over ``batches`` (a DataLoader, a list of (x, y) batches, a tf.data dataset).

    - ``step=None`` measures the loader alone; a list of batches already in memory with a ``step`` measures the
      compute alone; a loader with a ``step`` measures the loop.
    - Each pass starts a fresh iterator, so a DataLoader's worker start-up is paid every pass, as every epoch.
    - ``max_batches`` stops a pass early (worker processes are shut down); ``sync`` (e.g. ``step.sync``) is
      called before the clock starts and before it stops, so queued GPU work is counted.
    - With ``repeats`` > 1 the fastest pass is returned: on a shared machine other programs can only slow a
      pass down, so the fastest is the best estimate of what this code can do.
    """
    if isinstance(batches, (str, bytes)) or not isinstance(batches, Iterable):
        raise TypeError(f"batches must be an iterable of (x, y) batches such as a DataLoader or a list, "
                        f"got {type(batches).__name__}")
    if step is not None and not callable(step):
        raise TypeError(f"step must be callable (x, y) -> None, or None, got {type(step).__name__}")
    if sync is not None and not callable(sync):
        raise TypeError(f"sync must be callable or None, got {type(sync).__name__}")
    if max_batches is not None:
        max_batches = positive_int("max_batches", max_batches)
    repeats = positive_int("repeats", repeats)
    if repeats > 1 and isinstance(batches, Iterator):
        raise ValueError("repeats > 1 needs batches that can be iterated again (a DataLoader, a list, a "
                         "tf.data dataset), not a one-pass iterator or generator")
    passes = [_one_pass(batches, step, max_batches, sync or (lambda: None)) for _ in range(repeats)]
    return max(passes, key=lambda result: result.samples_per_s)


# --------------------------------------------------------------------------- reading a profile

def profile_rows(prof) -> list[dict]:
    """The rows of a finished ``torch.profiler.profile`` as plain dicts, largest total CPU time first.

    Keys: ``name``, ``calls``, ``self_cpu_us`` (time in the op itself), ``cpu_total_us`` (including the ops it
    called), ``device_total_us`` (time of the GPU kernels it launched; 0 on a CPU). Times in microseconds.
    """
    if not callable(getattr(prof, "key_averages", None)):
        raise TypeError(f"prof must be a finished torch.profiler.profile, got {type(prof).__name__}")
    rows = [{"name": event.key, "calls": int(event.count), "self_cpu_us": float(event.self_cpu_time_total),
             "cpu_total_us": float(event.cpu_time_total),
             "device_total_us": float(getattr(event, "device_time_total", 0.0) or 0.0)}
            for event in prof.key_averages()]
    return sorted(rows, key=lambda row: row["cpu_total_us"], reverse=True)


def stage_times(rows: list[dict], stages: Sequence[str] = STAGES) -> dict[str, float]:
    """Each stage's time in microseconds from profiler rows: the larger of its CPU total and its device total (on a
    GPU a stage's CPU time is only the cost of launching its kernels). ValueError names a stage without a row."""
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise TypeError("rows must be a list of dicts, as pipeline.profile_rows returns")
    if isinstance(stages, (str, bytes)) or not isinstance(stages, Sequence) or not stages:
        raise TypeError(f"stages must be a non-empty list of stage names, got {stages!r}")
    by_name = {row.get("name"): row for row in rows}
    missing = [stage for stage in stages if stage not in by_name]
    if missing:
        raise ValueError(f"stages: no profiler row for {missing}")
    return {stage: max(float(by_name[stage]["cpu_total_us"]), float(by_name[stage]["device_total_us"]))
            for stage in stages}


def loop_rate(loader_sps: float, compute_sps: float, overlap: bool) -> float:
    """Samples/s of a loop whose loader alone delivers ``loader_sps`` and whose compute alone handles
    ``compute_sps``: 1 / (1/L + 1/C) when they take turns, min(L, C) when they overlap."""
    loader_sps, compute_sps = positive_number("loader_sps", loader_sps), positive_number("compute_sps", compute_sps)
    if not isinstance(overlap, bool):
        raise TypeError(f"overlap must be True or False, got {type(overlap).__name__} ({overlap!r})")
    return float(min(loader_sps, compute_sps)) if overlap else 1.0 / (1.0 / loader_sps + 1.0 / compute_sps)


# --------------------------------------------------------------------------- batch size vs throughput and memory

@dataclass(frozen=True)
class SweepPoint:
    """One batch size of a sweep: fastest step time, throughput, and memory with where the figure came from."""

    batch_size: int
    step_s: float
    samples_per_s: float
    memory_bytes: int
    memory_source: str


def saved_activation_bytes(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    """Bytes of the tensors autograd keeps from the forward pass for the backward pass (the activations),
    measured with ``torch.autograd.graph.saved_tensors_hooks``; parameters are not counted."""
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            saved[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        loss = torch.nn.functional.cross_entropy(model(x), y)
    del loss  # frees the graph without running backward
    return sum(saved.values())


def batch_size_sweep(batch_sizes: Sequence[int], *, shape: Sequence[int] = (1, 28, 28), classes: int = 10,
                     hidden: int = 512, device: object = None, warmup: int = 1, repeats: int = 3, rounds: int = 3,
                     progress: bool = True, file=None) -> list[SweepPoint]:
    """Train-step throughput (samples/s) and memory of ``tiny_model`` at each batch size, with a progress bar.

    Batches are made once per size and already sit on the device, so this measures the compute alone. The sizes
    are measured in ``rounds`` interleaved passes (``warmup`` + ``repeats`` steps each) and each size keeps its
    fastest timed step: other programs can only slow a step down, so a burst of load from them bends one pass, not
    the curve. Memory on a
    CUDA GPU is ``torch.cuda.max_memory_allocated`` during the steps (weights, gradients, activations and
    workspace); on other devices it is weights + gradients + the activations saved for backward (counted with
    saved-tensor hooks). A size that runs out of GPU memory is dropped with a message. The bar goes to ``file``
    (standard output by default, so notebooks show it as ordinary output).
    """
    if isinstance(batch_sizes, (str, bytes)) or not isinstance(batch_sizes, Sequence) or not batch_sizes:
        raise TypeError(f"batch_sizes must be a non-empty list of positive ints, got {batch_sizes!r}")
    sizes = [positive_int(f"batch_sizes[{i}]", b) for i, b in enumerate(batch_sizes)]
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"batch_sizes must not repeat a size, got {sizes}")
    shape = _shape("shape", shape)
    warmup, repeats = non_negative_int("warmup", warmup), positive_int("repeats", repeats)
    rounds = positive_int("rounds", rounds)
    if not isinstance(progress, bool):
        raise TypeError(f"progress must be True or False, got {type(progress).__name__}")
    from tqdm import tqdm

    step = TrainStep(tiny_model(shape, classes, hidden), device)
    on_cuda = step.device.type == "cuda"
    weights = sum(p.numel() * p.element_size() for p in step.model.parameters())
    generator = torch.Generator().manual_seed(0)
    times: dict[int, list[float]] = {size: [] for size in sizes}
    memory: dict[int, int] = {}
    sources: dict[int, str] = {}
    failed: set[int] = set()
    stream = file or sys.stdout
    bar = tqdm(total=rounds * len(sizes), desc="batch-size sweep", unit="point", file=stream, disable=not progress)
    try:
        for _ in range(rounds):
            for size in sizes:
                bar.update(1)
                if size in failed:
                    continue
                try:
                    x = torch.randn(size, *shape, generator=generator).to(step.device)
                    y = torch.randint(0, classes, (size,), generator=generator).to(step.device)
                    if on_cuda:
                        torch.cuda.reset_peak_memory_stats(step.device)
                    result = benchmark(lambda: step(x, y), warmup=warmup, repeats=repeats, sync=step.sync)
                    if on_cuda:
                        memory[size] = max(memory.get(size, 0), torch.cuda.max_memory_allocated(step.device))
                        sources[size] = "torch.cuda.max_memory_allocated (peak during the steps)"
                    elif size not in memory:
                        memory[size] = 2 * weights + saved_activation_bytes(step.model, x, y)
                        sources[size] = "weights + gradients + activations saved for backward (saved_tensors_hooks)"
                except torch.cuda.OutOfMemoryError:
                    failed.add(size)
                    bar.write(f"batch size {size}: out of GPU memory, left out", file=stream)
                    continue
                finally:
                    x = y = None
                    if on_cuda:
                        torch.cuda.empty_cache()
                times[size].extend(result.times_s)
                bar.set_postfix_str(f"{size}: {size / result.min_s:,.0f} samples/s")
    finally:
        bar.close()
    points = []
    for size in sizes:
        if size in failed or not times[size]:
            continue
        step_s = min(times[size])
        points.append(SweepPoint(size, step_s, size / step_s, int(memory[size]), sources[size]))
    return points


def saturation_batch(batch_sizes: Sequence[int], samples_per_s: Sequence[float], fraction: float = 0.9) -> int:
    """The smallest batch size whose throughput is at least ``fraction`` x the best measured (pairs in any order)."""
    if len(batch_sizes) == 0 or len(batch_sizes) != len(samples_per_s):
        raise ValueError("batch_sizes and samples_per_s must be non-empty and of the same length")
    fraction = positive_number("fraction", fraction)
    best = max(samples_per_s)
    return int(min(size for size, rate in zip(batch_sizes, samples_per_s) if rate >= fraction * best))


def plot_sweep(points: Sequence[SweepPoint], fraction: float = 0.9, device: object = ""):
    """Throughput and memory against batch size, side by side, with the saturation point marked; returns the figure."""
    if isinstance(points, (str, bytes)) or not isinstance(points, Sequence) or not points or \
            not all(isinstance(point, SweepPoint) for point in points):
        raise TypeError("points must be a non-empty list of SweepPoint, as batch_size_sweep returns")
    import matplotlib.pyplot as plt

    sizes = [point.batch_size for point in points]
    rates = [point.samples_per_s for point in points]
    knee = saturation_batch(sizes, rates, fraction)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 3.5))
    left.plot(sizes, rates, marker="o")
    left.axvline(knee, color="grey", ls=":", label=f"{fraction:.0%} of the best from batch {knee}")
    left.set(xlabel="batch size", ylabel="samples/s (compute alone)", title=f"Throughput, measured on {device}")
    left.legend(fontsize=8)
    right.plot(sizes, [point.memory_bytes / 2**20 for point in points], marker="o", color="tab:orange")
    right.set(xlabel="batch size", ylabel="MiB", title="Memory of a training step")
    right.annotate(points[0].memory_source, (0.02, 0.92), xycoords="axes fraction", fontsize=7)
    for ax in (left, right):
        ax.set_xscale("log", base=2)
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


# --------------------------------------------------------------------------- tf.data

class CallCounter:
    """A thread-safe count of calls (``tf.data`` runs map functions on several threads at once)."""

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    def add(self) -> None:
        """Count one call."""
        with self._lock:
            self._count += 1

    @property
    def count(self) -> int:
        """Calls counted so far."""
        with self._lock:
            return self._count


def tf_slow_decode(decode_s: float = 0.001) -> Callable:
    """A ``tf.data`` map function that decodes an (image uint8, label) pair as SlowImages does: a Python sleep of
    ``decode_s`` (inside ``tf.py_function``; the sleep releases the GIL, so parallel calls overlap), then
    float32 conversion and normalisation. Its ``counter.count`` says how many images it has decoded."""
    decode_s = non_negative_number("decode_s", decode_s)
    import tensorflow as tf

    counter = CallCounter()

    def _decode_numpy(image):
        counter.add()
        if decode_s:
            time.sleep(decode_s)
        return (image.numpy().astype(np.float32) / 255.0 - MEAN) / STD

    @tf.autograph.experimental.do_not_convert
    def decode(image, label):
        x = tf.py_function(_decode_numpy, [image], tf.float32)
        x.set_shape(image.shape)
        return x, label

    decode.counter = counter
    return decode


def tf_random_flip(seed: int = 0) -> Callable:
    """A ``tf.data`` map function for whole batches ``(x, labels)``: flips each image of ``x`` left-right (its last
    axis) with probability 1/2, drawn anew on every call (a random augmentation, as in lesson
    ``09_feeding_and_watching``). Its ``counter.count`` says how many batches it has augmented."""
    seed = non_negative_int("seed", seed)
    import tensorflow as tf

    counter = CallCounter()
    rng = np.random.default_rng(seed)
    lock = threading.Lock()

    def _flip_numpy(x):
        counter.add()
        x = x.numpy()
        if x.ndim < 2:
            raise ValueError(f"augment works on whole batches of images; got an element of shape {x.shape} "
                             "(apply it after .batch())")
        with lock:
            flip = rng.random(len(x)) < 0.5
        x = x.copy()
        x[flip] = x[flip][..., ::-1]
        return x

    @tf.autograph.experimental.do_not_convert
    def augment(x, label):
        flipped = tf.py_function(_flip_numpy, [x], x.dtype)
        flipped.set_shape(x.shape)
        return flipped, label

    augment.counter = counter
    return augment


def tf_pipeline(images: np.ndarray, labels: np.ndarray, decode: Callable, batch_size: int, *, parallel: bool = True,
                cache: bool = False, shuffle: bool = False, seed: int | None = None):
    """A ``tf.data`` input pipeline over undecoded ``images`` for the lesson's demo: map ``decode`` (in parallel with
    AUTOTUNE when ``parallel``), ``shuffle`` the whole set when ``shuffle``, ``cache()`` when ``cache``, batch, and
    prefetch (AUTOTUNE) when ``parallel``. With both on, the shuffle lies above the cache: it runs in the first epoch
    only, and every later epoch replays that epoch's order (the demo measures this, it is not a recipe)."""
    batch_size = positive_int("batch_size", batch_size)
    if not callable(decode):
        raise TypeError(f"decode must be a map function (image, label) -> (x, label), got {type(decode).__name__}")
    for name, flag in (("parallel", parallel), ("cache", cache), ("shuffle", shuffle)):
        if not isinstance(flag, bool):
            raise TypeError(f"{name} must be True or False, got {type(flag).__name__} ({flag!r})")
    if len(images) != len(labels) or len(images) == 0:
        raise ValueError(f"images and labels must be non-empty and as long as each other, got {len(images)} and "
                         f"{len(labels)}")
    import tensorflow as tf

    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE if parallel else None)
    if shuffle:
        dataset = dataset.shuffle(len(images), seed=seed, reshuffle_each_iteration=True)
    if cache:
        dataset = dataset.cache()
    dataset = dataset.batch(batch_size)
    return dataset.prefetch(tf.data.AUTOTUNE) if parallel else dataset


__all__ = ["MEAN", "STD", "STAGES", "CallCounter", "SlowImages", "SweepPoint", "Throughput", "TrainStep", "batch_size_sweep",
           "batched_loader", "loop_rate", "measure", "plot_sweep", "preprocess_once", "profile_rows",
           "saturation_batch", "saved_activation_bytes", "stage_times", "tf_pipeline", "tf_random_flip", "tf_slow_decode",
           "tiny_model"]
