"""Data and model parallelism run for real on one machine: worker processes, DDP, a two-stage pipeline, pictures.

Everything here runs without a GPU cluster. Worker processes are started with :func:`launch` (fresh
interpreters, like the ``spawn`` start method), talk to each other over the loopback interface only
(127.0.0.1, a port the operating system picks), are stopped after ``timeout_s`` and never outlive the call.
A worker's failure comes back to the caller as :class:`WorkerError` with that rank's traceback.

PyTorch and TensorFlow are imported only by the functions that need them.
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

from gpucourse._validate import list_of, non_negative_int, non_negative_number, one_of, positive_int, positive_number
from gpucourse.timing import BenchmarkResult

LOOPBACK = "127.0.0.1"
"""The only address the workers use: nothing here opens a port to the network."""

DEFAULT_TIMEOUT_S = 60.0
"""Seconds a group of workers may run before all of them are stopped."""

MAX_WORKERS = 64
"""Most worker processes :func:`launch` starts at once (each is a whole Python interpreter)."""

_TIMEOUT_ENV = "GPUCOURSE_WORKER_TIMEOUT_S"

# A worker starts as `python -c _BOOT task_file rank`: it restores the caller's sys.path (so that modules the
# caller can import, a learner's own included, import in the worker too), then runs _child_main.
_BOOT = ("import pickle, sys\n"
         "with open(sys.argv[1], 'rb') as handle:\n"
         "    paths = pickle.load(handle)\n"
         "sys.path[:] = paths + [p for p in sys.path if p not in paths]\n"
         "from gpucourse.parallel import _child_main\n"
         "_child_main(sys.argv[1], int(sys.argv[2]))\n")


# --------------------------------------------------------------------------- launching worker processes

class WorkerError(RuntimeError):
    """A worker process failed: the message names its rank and shows its traceback."""

    def __init__(self, rank: int, world_size: int, summary: str, details: str) -> None:
        """Keep the failing rank, the group's size, a one-line summary and the worker's traceback or output."""
        self.rank, self.world_size, self.summary, self.details = rank, world_size, summary, details
        super().__init__(f"worker rank {rank} of {world_size} failed: {summary}\n"
                         f"--- rank {rank}'s traceback (all workers were stopped) ---\n{details.rstrip()}")


class WorkerTimeout(TimeoutError):
    """The workers did not finish within the time limit; all of them were stopped."""


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port on the loopback interface that is free now: bind to port 0 and let the OS choose."""
    if not isinstance(host, str):
        raise TypeError(f"host must be a str, got {type(host).__name__}")
    if host not in (LOOPBACK, "localhost"):
        raise ValueError(f"host must be the loopback address {LOOPBACK!r} (or 'localhost'), got {host!r}: "
                         "the course's workers never listen on the network")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        return int(sock.getsockname()[1])


def _loopback_interface() -> str | None:
    """Name of the network interface that carries 127.0.0.1 ('lo' on Linux, 'lo0' on macOS), if found."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(getattr(address, "address", None) == LOOPBACK for address in addresses):
            return name
    return None


def _check_worker_function(fn: object) -> None:
    """Raise TypeError unless ``fn`` is a top-level function of an importable module (a worker can import it)."""
    if not callable(fn):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if module in (None, "__main__") or "<" in name:
        raise TypeError(f"fn must be a top-level function of an importable module (a .py file), got {name or fn!r} "
                        f"from {module!r}: worker processes start fresh and cannot see functions defined in a "
                        "notebook or inside another function")
    try:
        pickle.loads(pickle.dumps(fn))
    except Exception as error:  # pickle raises several kinds
        raise TypeError(f"fn must be picklable by reference, got {name!r}: {error}") from None


def _worker_environment(rank: int, world_size: int, port: int, threads: int, timeout_s: float) -> dict[str, str]:
    """The environment of one worker: its rank, the loopback rendezvous address, thread counts, quiet frameworks."""
    env = dict(os.environ)
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
        "MASTER_ADDR": LOOPBACK, "MASTER_PORT": str(port), _TIMEOUT_ENV: repr(timeout_s),
        "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
        "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": env.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        "TF_ENABLE_ONEDNN_OPTS": env.get("TF_ENABLE_ONEDNN_OPTS", "0"),
    })
    interface = _loopback_interface()
    if interface and "GLOO_SOCKET_IFNAME" not in env:
        env["GLOO_SOCKET_IFNAME"] = interface  # gloo would otherwise look up the host name's interface
    return env


def _stop(processes: Sequence[subprocess.Popen]) -> None:
    """Stop every process that is still running, with its own children; reap them all."""
    import psutil

    victims = []
    for process in processes:
        if process.poll() is None:
            with contextlib.suppress(psutil.Error):
                parent = psutil.Process(process.pid)
                victims += parent.children(recursive=True) + [parent]
    for victim in victims:
        with contextlib.suppress(psutil.Error):
            victim.terminate()
    _, alive = psutil.wait_procs(victims, timeout=2.0)
    for victim in alive:
        with contextlib.suppress(psutil.Error):
            victim.kill()
    psutil.wait_procs(alive, timeout=2.0)
    for process in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=2.0)


def _tail(path: str, lines: int = 25) -> str:
    """Last lines of a worker's captured output ('' if none)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])


def _exit_reason(code: int) -> str:
    """Human-readable reason for a worker's exit code (negative: killed by a signal)."""
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by signal {signal.Signals(-code).name}"
        return f"killed by signal {-code}"
    return f"exited with code {code}"


def _failure(folder: str, failed: list[int], codes: list[int | None], world_size: int) -> WorkerError:
    """The WorkerError of the rank that failed first (the others often fail only because it did)."""
    reports = {}
    for rank in failed:
        with contextlib.suppress(OSError, EOFError, pickle.UnpicklingError):
            with open(os.path.join(folder, f"rank{rank}.error"), "rb") as handle:
                reports[rank] = pickle.load(handle)
    if reports:
        rank = min(reports, key=lambda r: reports[r]["time"])
        return WorkerError(rank, world_size, reports[rank]["summary"], reports[rank]["traceback"])
    rank = failed[0]
    output = _tail(os.path.join(folder, f"rank{rank}.log"))
    return WorkerError(rank, world_size, f"the process {_exit_reason(codes[rank])} without a Python traceback",
                       f"last lines of its output:\n{output}" if output else "(it printed nothing)")


def launch(fn: Callable[..., object], world_size: int, args: Sequence[object] = (), *,
           timeout_s: float = DEFAULT_TIMEOUT_S, threads_per_worker: int = 1) -> list[object]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes; return their results by rank."""
    _check_worker_function(fn)
    world_size = positive_int("world_size", world_size)
    if world_size > MAX_WORKERS:
        raise ValueError(f"world_size must be <= {MAX_WORKERS} (each worker is a whole Python process), "
                         f"got {world_size}")
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a tuple or list of arguments for fn, got {type(args).__name__}")
    timeout_s = positive_number("timeout_s", timeout_s)
    threads = positive_int("threads_per_worker", threads_per_worker)
    try:
        task = pickle.dumps((fn, tuple(args), world_size))
    except Exception as error:
        raise TypeError(f"args must be picklable (they travel to the worker processes): {error}") from None
    for attempt in range(2):
        try:
            return _launch_once(task, world_size, timeout_s, threads)
        except WorkerError as error:  # another program took the free port before rank 0 could: try a new one
            if attempt or not any(marker in error.details for marker in _PORT_TAKEN):
                raise
    raise AssertionError("unreachable")


_PORT_TAKEN = ("EADDRINUSE", "Address already in use", "address already in use")


def _launch_once(task: bytes, world_size: int, timeout_s: float, threads: int) -> list[object]:
    """Start the workers on a fresh free port, wait for all of them (or the first failure, or the time limit)."""
    folder = tempfile.mkdtemp(prefix="gpucourse-workers-")
    processes: list[subprocess.Popen] = []
    logs = []
    try:
        task_path = os.path.join(folder, "task.pkl")
        with open(task_path, "wb") as handle:
            pickle.dump([p for p in sys.path if p and os.path.isdir(p)], handle)
            handle.write(task)
        port = free_port()
        for rank in range(world_size):
            logs.append(open(os.path.join(folder, f"rank{rank}.log"), "wb"))
            processes.append(subprocess.Popen(
                [sys.executable, "-c", _BOOT, task_path, str(rank)], stdin=subprocess.DEVNULL,
                stdout=logs[-1], stderr=subprocess.STDOUT,  # nothing a worker prints reaches the notebook
                env=_worker_environment(rank, world_size, port, threads, timeout_s),
                start_new_session=os.name == "posix"))
        deadline = time.monotonic() + timeout_s
        while True:
            codes = [process.poll() for process in processes]
            failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
            if failed:
                time.sleep(0.2)  # a peer that fails because of this one reports a little later
                codes = [process.poll() for process in processes]
                failed = [rank for rank, code in enumerate(codes) if code not in (None, 0)]
                _stop(processes)
                raise _failure(folder, failed, codes, world_size)
            if all(code == 0 for code in codes):
                break
            if time.monotonic() > deadline:
                running = [rank for rank, code in enumerate(codes) if code is None]
                _stop(processes)
                output = _tail(os.path.join(folder, f"rank{running[0]}.log"), 10)
                raise WorkerTimeout(
                    f"the workers did not finish within timeout_s={timeout_s:g} s (ranks still running: {running}); "
                    f"all of them were stopped. A worker waiting for a peer that never arrives (a collective "
                    f"called by some ranks only, a rendezvous that failed) looks like this."
                    + (f"\nlast lines of rank {running[0]}'s output:\n{output}" if output else ""))
            time.sleep(0.01)
        results = []
        for rank in range(world_size):
            path = os.path.join(folder, f"rank{rank}.result")
            if not os.path.exists(path):
                raise WorkerError(rank, world_size, "the process exited without returning a result",
                                  _tail(os.path.join(folder, f"rank{rank}.log")) or "(it printed nothing)")
            with open(path, "rb") as handle:
                results.append(pickle.load(handle))
        return results
    finally:
        _stop(processes)
        for log in logs:
            log.close()
        shutil.rmtree(folder, ignore_errors=True)


def _write_atomically(path: str, payload: bytes) -> None:
    """Write a file so that a reader sees all of it or nothing."""
    with open(path + ".tmp", "wb") as handle:
        handle.write(payload)
    os.replace(path + ".tmp", path)


def _watch_parent(parent_pid: int, limit_s: float) -> None:
    """In a worker: exit if the launching process dies or the time limit has long passed (no stray workers)."""
    def watch() -> None:
        """Poll the parent's id and the clock; end this process when either says so."""
        start = time.monotonic()
        while True:
            time.sleep(0.25)
            if os.getppid() != parent_pid or time.monotonic() - start > limit_s:
                os._exit(3)

    threading.Thread(target=watch, name="gpucourse-watch-parent", daemon=True).start()


def _child_main(task_path: str, rank: int) -> None:
    """Entry point of a worker process (not for direct use): run the task, save its result or its traceback."""
    folder = os.path.dirname(task_path)
    _watch_parent(os.getppid(), float(os.environ.get(_TIMEOUT_ENV, DEFAULT_TIMEOUT_S)) + 30.0)
    try:
        with open(task_path, "rb") as handle:
            pickle.load(handle)  # the caller's sys.path, already applied by _BOOT
            fn, args, world_size = pickle.loads(handle.read())
        result = fn(rank, world_size, *args)
        payload = pickle.dumps(result)
    except BaseException as error:  # noqa: BLE001 (SystemExit and KeyboardInterrupt are reported too)
        report = {"time": time.time(), "summary": f"{type(error).__name__}: {error}",
                  "traceback": traceback.format_exc()}
        _write_atomically(os.path.join(folder, f"rank{rank}.error"), pickle.dumps(report))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # skip interpreter shutdown: a half-open process group can hang it
    _write_atomically(os.path.join(folder, f"rank{rank}.result"), payload)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


@contextlib.contextmanager
def process_group(rank: int, world_size: int, backend: str = "gloo") -> Iterator[object]:
    """In a worker: join the group at the launcher's loopback address, yield torch.distributed, barrier, leave."""
    import datetime

    import torch.distributed as dist

    one_of("backend", backend, ("gloo", "nccl"))
    timeout = datetime.timedelta(seconds=float(os.environ.get(_TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
    address = f"tcp://{os.environ.get('MASTER_ADDR', LOOPBACK)}:{os.environ['MASTER_PORT']}"
    dist.init_process_group(backend, init_method=address, rank=rank, world_size=world_size, timeout=timeout)
    try:
        yield dist
        dist.barrier()  # the barrier before shutdown: nobody leaves while a peer may still need it
    finally:
        dist.destroy_process_group()


# Workers for demonstrations and tests (top-level, so that a fresh process can import them).

def describe_worker(rank: int, world_size: int) -> dict[str, object]:
    """A worker that reports who and where it is: rank, process id, rendezvous address and thread setting."""
    return {"rank": rank, "world_size": world_size, "pid": os.getpid(), "parent_pid": os.getppid(),
            "master_addr": os.environ.get("MASTER_ADDR"), "master_port": int(os.environ.get("MASTER_PORT", 0)),
            "threads": int(os.environ.get("OMP_NUM_THREADS", 0))}


def failing_worker(rank: int, world_size: int, bad_rank: int = 1) -> int:
    """A worker for demonstrations: rank ``bad_rank`` raises ValueError; the others wait as if in a collective."""
    if rank == bad_rank:
        print(f"rank {rank}: this line goes to the worker's log, not to the notebook", file=sys.stderr)
        raise ValueError(f"rank {rank} found a NaN in its shard of the batch (a deliberate failure)")
    time.sleep(3600)
    return rank


def hanging_worker(rank: int, world_size: int, seconds: float = 3600.0) -> int:
    """A worker for demonstrations: sleeps ``seconds`` (longer than any timeout), as a deadlocked worker would."""
    time.sleep(seconds)
    return rank


def spin_worker(rank: int, world_size: int, seconds: float = 0.5) -> float:
    """A worker that computes flat out for ``seconds`` and returns the share of one core it got (CPU time / wall time)."""
    cpu_start, wall_start = time.process_time(), time.perf_counter()
    while time.perf_counter() - wall_start < seconds:
        sum(range(2000))
    return (time.process_time() - cpu_start) / (time.perf_counter() - wall_start)


def core_shares(workers: int = 2, seconds: float = 0.5, *, timeout_s: float = 30.0) -> list[float]:
    """How much of a core each of ``workers`` busy processes gets right now (1.0 each: the cores are free)."""
    workers = positive_int("workers", workers)
    seconds = positive_number("seconds", seconds)
    if seconds > 10:
        raise ValueError(f"seconds must be <= 10 (a quick probe), got {seconds}")
    return [float(share) for share in launch(spin_worker, workers, (seconds,), timeout_s=timeout_s)]


def collective_worker(rank: int, world_size: int) -> list[float]:
    """A worker that all-reduces the vector [rank, rank, rank] with gloo and returns the sum every rank sees."""
    import torch

    torch.set_num_threads(1)
    with process_group(rank, world_size, "gloo") as dist:
        values = torch.full((3,), float(rank))
        dist.all_reduce(values)
    return values.tolist()


# --------------------------------------------------------------------------- data parallelism: DDP vs one process

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

        device = pick_device(f"cuda:{rank}")  # one GPU per process
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


def _gpu_count() -> int:
    """CUDA GPUs visible here (via the course's one device module)."""
    from gpucourse.hardware import available_devices

    return sum(name.startswith("cuda") for name in available_devices())


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
    one_of("backend", backend, ("auto", "gloo", "nccl"))
    if backend == "auto":
        backend = "nccl" if _gpu_count() >= world_size else "gloo"  # one GPU shared by two processes: gloo on CPUs
    elif backend == "nccl" and _gpu_count() < world_size:
        raise ValueError(f"backend='nccl' needs one CUDA GPU per process: {world_size} processes, "
                         f"{_gpu_count()} GPU(s) visible; use backend='gloo'")
    start = time.perf_counter()
    ranks = launch(ddp_worker, world_size, (tuple(configs), backend, threads_per_worker), timeout_s=timeout_s,
                   threads_per_worker=threads_per_worker)
    wall_s = time.perf_counter() - start
    return tuple(DDPResult(tuple(rank[index] for rank in ranks), backend, wall_s) for index in range(len(configs)))


def run_ddp(config: TrainConfig, world_size: int = 2, *, backend: str = "auto", threads_per_worker: int = 1,
            timeout_s: float = DEFAULT_TIMEOUT_S) -> DDPResult:
    """Train with DistributedDataParallel on ``world_size`` processes (gloo on CPUs; NCCL with a GPU per rank)."""
    _check_config("config", config, TrainConfig)
    return run_ddp_all([config], world_size, backend=backend, threads_per_worker=threads_per_worker,
                       timeout_s=timeout_s)[0]


# --------------------------------------------------------------------------- simulated workers for all-reduce

def worker_buffers(n_workers: int, size: int, seed: int = 0, dtype: str = "float32") -> list:
    """One random gradient vector of ``size`` numbers per simulated worker (numpy, reproducible from ``seed``)."""
    import numpy as np

    n_workers, size = positive_int("n_workers", n_workers), positive_int("size", size)
    non_negative_int("seed", seed)
    one_of("dtype", dtype, ("float32", "float64"))
    rng = np.random.default_rng(seed)
    return [rng.normal(size=size).astype(dtype) for _ in range(n_workers)]


@dataclass(frozen=True)
class RingStep:
    """One step of a ring all-reduce: its phase, the (sender, receiver, chunk) transfers, and who holds what after it."""

    phase: str
    step: int
    transfers: tuple[tuple[int, int, int], ...]
    holdings: tuple[tuple[frozenset, ...], ...]


def ring_trace(n_workers: int) -> list[RingStep]:
    """Which worker's contributions each worker holds, chunk by chunk, before and after every step of the ring."""
    n = positive_int("n_workers", n_workers)
    holdings = [[frozenset({worker}) for _ in range(n)] for worker in range(n)]
    trace = [RingStep("start", 0, (), tuple(map(tuple, holdings)))]
    for phase in ("reduce-scatter", "all-gather"):
        for step in range(n - 1):
            offset = -step if phase == "reduce-scatter" else 1 - step
            transfers = tuple((i, (i + 1) % n, (i + offset) % n) for i in range(n))
            before = [row[:] for row in holdings]  # every worker sends at the same time
            for sender, receiver, chunk in transfers:
                if phase == "reduce-scatter":
                    holdings[receiver][chunk] = before[receiver][chunk] | before[sender][chunk]
                else:
                    holdings[receiver][chunk] = before[sender][chunk]
            trace.append(RingStep(phase, step + 1, transfers, tuple(map(tuple, holdings))))
    return trace


def plot_ring_steps(n_workers: int = 4):
    """Draw every step of a ring all-reduce over ``n_workers`` (2-8): who sends which chunk, who holds what."""
    import matplotlib.pyplot as plt
    import numpy as np

    n = positive_int("n_workers", n_workers)
    if not 2 <= n <= 8:
        raise ValueError(f"n_workers must be between 2 and 8 for a readable picture, got {n}")
    trace = ring_trace(n)
    fig, axes = plt.subplots(2, n, figsize=(2.3 * n + 0.6, 6.2), squeeze=False, layout="constrained")
    cmap = plt.get_cmap("Blues")
    panels = [(0, 0)] + [(0, k) for k in range(1, n)] + [(1, k) for k in range(1, n)]
    for (row, col), entry in zip(panels, trace):
        ax = axes[row][col]
        counts = np.array([[len(cell) for cell in worker] for worker in entry.holdings])
        ax.imshow(counts, cmap=cmap, vmin=0, vmax=n * 1.25)
        for worker in range(n):
            for chunk in range(n):
                cell = entry.holdings[worker][chunk]
                label = "all" if len(cell) == n else "+".join(str(w) for w in sorted(cell))
                ax.text(chunk, worker, label, ha="center", va="center", fontsize=8 if n <= 5 else 6,
                        color="white" if len(cell) == n else "black")
        for _, receiver, chunk in entry.transfers:
            ax.add_patch(plt.Rectangle((chunk - 0.5, receiver - 0.5), 1, 1, fill=False, edgecolor="tab:orange",
                                       linewidth=2.2))
        ax.set_xticks(range(n), [f"c{c}" for c in range(n)], fontsize=7)
        ax.set_yticks(range(n), [f"w{w}" for w in range(n)], fontsize=7)
        if entry.phase == "start":
            ax.set_title("start: each worker\nholds its own gradient", fontsize=8)
        else:
            moves = ", ".join(f"{s}→{r}:c{c}" for s, r, c in entry.transfers[:4]) + (" …" if n > 4 else "")
            ax.set_title(f"{entry.phase} {entry.step}/{n - 1}\n{moves}", fontsize=8)
    legend = axes[1][0]
    legend.axis("off")
    legend.text(0.0, 0.5, "rows: workers w0…\ncolumns: chunks c0…\ncell: whose numbers it sums\n"
                          "orange: just received\n'all': fully reduced", fontsize=8, va="center")
    fig.suptitle(f"Ring all-reduce over {n} workers: {n - 1} reduce-scatter steps, then {n - 1} all-gather steps\n"
                 f"in every step each worker sends one chunk (1/{n} of the data) to its right-hand neighbour",
                 fontsize=9)
    return fig


# --------------------------------------------------------------------------- simulated networks: ring and parameter server

class NetworkError(RuntimeError):
    """The programs on a simulated network deadlocked, timed out, or used it wrongly."""


@dataclass(frozen=True)
class Message:
    """One message on a simulated network: who sent it to whom, the sender's message number, its bytes and payload."""

    sender: object
    receiver: object
    index: int
    nbytes: int
    payload: object


@dataclass(frozen=True)
class NetworkRun:
    """What the programs on a simulated network returned (by node) and every message they sent."""

    results: dict
    messages: tuple[Message, ...]
    undelivered: tuple[Message, ...]

    def sent_by(self, node: object) -> list[Message]:
        """The messages ``node`` sent, in the order it sent them."""
        return sorted((m for m in self.messages if m.sender == node), key=lambda m: m.index)

    def bytes_sent(self, node: object) -> int:
        """Bytes ``node`` sent."""
        return sum(m.nbytes for m in self.messages if m.sender == node)

    def bytes_received(self, node: object) -> int:
        """Bytes sent to ``node`` (delivered or not)."""
        return sum(m.nbytes for m in self.messages if m.receiver == node)

    def traffic(self, node: object) -> int:
        """Bytes through ``node``'s link: sent plus received."""
        return self.bytes_sent(node) + self.bytes_received(node)


class _Network:
    """Mailboxes of a simulated network, one FIFO queue per (sender, receiver) link, and the deadlock watch."""

    def __init__(self, nodes: list, links: set | None, timeout_s: float) -> None:
        """Empty mailboxes for ``nodes``; ``links`` (None: all pairs) are the (sender, receiver) pairs allowed."""
        import collections

        self.nodes, self.links, self.timeout_s = nodes, links, timeout_s
        self.queues: dict = collections.defaultdict(collections.deque)
        self.condition = threading.Condition()
        self.waiting: dict = {}
        self.done: set = set()
        self.failed: list[tuple[float, object, BaseException]] = []
        self.messages: list[Message] = []
        self.counts: dict = collections.Counter()
        self.deadline = time.monotonic() + timeout_s

    def send(self, sender: object, receiver: object, array: object) -> None:
        """Queue a copy of ``array`` from ``sender`` to ``receiver`` (a real network copies too) and log it."""
        import numpy as np

        if not isinstance(array, np.ndarray):
            raise TypeError(f"array must be a numpy array (what travels on the network), got {type(array).__name__}")
        if receiver not in self.nodes:
            raise NetworkError(f"{sender!r} sent to {receiver!r}, which is not a node of this network "
                               f"(nodes: {self.nodes})")
        if self.links is not None and (sender, receiver) not in self.links:
            raise NetworkError(f"there is no link from {sender!r} to {receiver!r} in this network")
        payload = np.array(array, copy=True)
        with self.condition:
            message = Message(sender, receiver, self.counts[sender], int(payload.nbytes), payload)
            self.counts[sender] += 1
            self.messages.append(message)
            self.queues[sender, receiver].append(message)
            self.condition.notify_all()

    def _deadlocked(self) -> bool:
        """True if every node has finished or waits on an empty link (call with the lock held)."""
        return all(node in self.done or (node in self.waiting and not self.queues[self.waiting[node], node])
                   for node in self.nodes)

    def recv(self, receiver: object, sender: object):
        """The oldest message from ``sender`` to ``receiver``'s payload; wait for it, fail on deadlock or time-out."""
        if sender not in self.nodes:
            raise NetworkError(f"{receiver!r} waits for {sender!r}, which is not a node of this network "
                               f"(nodes: {self.nodes})")
        with self.condition:
            while True:
                queue = self.queues[sender, receiver]
                if queue:
                    return queue.popleft().payload
                if self.failed:
                    raise _Aborted()
                self.waiting[receiver] = sender
                if self._deadlocked():
                    waits = ", ".join(f"{node!r} waits for {self.waiting[node]!r}" for node in self.nodes
                                      if node in self.waiting)
                    raise NetworkError(f"deadlock: every node waits for a message that nobody will send ({waits}). "
                                       "Does every recv() have a matching send() on the other side?")
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    raise NetworkError(f"{receiver!r} waited more than {self.timeout_s:g} s for a message from "
                                       f"{sender!r}")
                self.condition.wait(min(remaining, 0.5))
                self.waiting.pop(receiver, None)

    def finish(self, node: object, error: BaseException | None) -> None:
        """Mark ``node`` done (and failed, if ``error``); wake every waiting node."""
        with self.condition:
            self.waiting.pop(node, None)
            self.done.add(node)
            if error is not None and not isinstance(error, _Aborted):
                self.failed.append((time.monotonic(), node, error))
            self.condition.notify_all()


class _Aborted(Exception):
    """Raised in a waiting node when another node failed (never shown: the first real failure is)."""


def run_network(programs: dict, links: set | None = None, *, timeout_s: float = 5.0) -> NetworkRun:
    """Run ``programs[node](send, recv)`` for every node at once (one thread each) on a simulated network.

    ``send(to, array)`` queues a copy of a numpy array for node ``to``; ``recv(frm)`` returns the oldest message from
    ``frm``, waiting for it. Every message is logged. The first error of any program is raised here (the others are
    stopped); a deadlock, or a run longer than ``timeout_s``, raises NetworkError.
    """
    if not isinstance(programs, dict) or not programs:
        raise TypeError(f"programs must be a non-empty dict node -> function(send, recv), got {type(programs).__name__}")
    for node, program in programs.items():
        if not callable(program):
            raise TypeError(f"programs[{node!r}] must be a function(send, recv), got {type(program).__name__}")
    if links is not None and not isinstance(links, (set, frozenset)):
        raise TypeError(f"links must be a set of (sender, receiver) pairs or None, got {type(links).__name__}")
    timeout_s = positive_number("timeout_s", timeout_s)
    network = _Network(list(programs), None if links is None else set(links), timeout_s)
    results: dict = {}

    def run(node: object, program: Callable) -> None:
        """One node's thread: run its program with its own send and recv; report how it ended."""
        error = None
        try:
            results[node] = program(lambda to, array: network.send(node, to, array),
                                    lambda frm: network.recv(node, frm))
        except BaseException as caught:  # noqa: BLE001 (reported to the caller below)
            error = caught
        network.finish(node, error)

    threads = [threading.Thread(target=run, args=(node, program), name=f"gpucourse-node-{node}", daemon=True)
               for node, program in programs.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, network.deadline - time.monotonic()) + 1.0)
    if any(thread.is_alive() for thread in threads):
        with network.condition:
            network.failed.append((time.monotonic(), None, NetworkError(
                f"the programs did not finish within {timeout_s:g} s (a loop that never ends?)")))
            network.condition.notify_all()
    if network.failed:
        _, node, error = min(network.failed, key=lambda failure: failure[0])
        if node is not None and not isinstance(error, NetworkError) and hasattr(error, "add_note"):
            error.add_note(f"(raised on node {node!r} of the simulated network)")
        raise error
    undelivered = tuple(m for queue in network.queues.values() for m in queue)
    return NetworkRun(dict(results), tuple(network.messages), undelivered)


def _check_buffers(name: str, buffers: object) -> list:
    """Return ``buffers`` as a list of 1-D numpy arrays of one length and dtype, else raise naming ``name``."""
    import numpy as np

    if isinstance(buffers, np.ndarray) or not isinstance(buffers, Sequence) or not buffers:
        raise TypeError(f"{name} must be a non-empty list of 1-D numpy arrays, got {type(buffers).__name__}")
    for buffer in buffers:
        if not isinstance(buffer, np.ndarray) or buffer.ndim != 1:
            raise TypeError(f"{name} must hold 1-D numpy arrays, got {type(buffer).__name__} "
                            f"{getattr(buffer, 'shape', '')}")
    if len({(len(b), b.dtype) for b in buffers}) != 1:
        raise ValueError(f"{name} must all have the same length and dtype, got "
                         f"{sorted({(len(b), str(b.dtype)) for b in buffers})}")
    return list(buffers)


def run_ring(worker: Callable, buffers: Sequence, *, timeout_s: float = 5.0) -> NetworkRun:
    """Run ``worker(rank, world_size, buffer, send, recv)`` on every rank of a simulated ring; log every message.

    Rank i owns a copy of ``buffers[i]``; ``send(array)`` goes to rank (i + 1) % N, ``recv()`` takes the oldest message
    from rank (i - 1) % N. ``results[i]`` is what rank i's worker returned.
    """
    if not callable(worker):
        raise TypeError(f"worker must be a function(rank, world_size, buffer, send, recv), got {type(worker).__name__}")
    buffers = _check_buffers("buffers", buffers)
    n = len(buffers)

    def program(rank: int) -> Callable:
        """Rank ``rank``'s program: the worker with its own buffer and its neighbours."""
        mine = buffers[rank].copy()
        return lambda send, recv: worker(rank, n, mine, lambda array: send((rank + 1) % n, array),
                                         lambda: recv((rank - 1) % n))

    return run_network({rank: program(rank) for rank in range(n)}, {(r, (r + 1) % n) for r in range(n)},
                       timeout_s=timeout_s)


def ps_worker(gradient, n_servers: int, send: Callable, recv: Callable):
    """A parameter-server worker: push slice s of its gradient to server s, pull the new slices; return the weights."""
    import numpy as np

    for server, part in enumerate(np.array_split(gradient, n_servers)):
        send(f"server{server}", part)
    return np.concatenate([recv(f"server{server}") for server in range(n_servers)])


def run_parameter_server(server: Callable, gradients: Sequence, weights, lr: float = 0.1, n_servers: int = 1, *,
                         timeout_s: float = 5.0) -> NetworkRun:
    """One synchronous step of a sharded parameter server on a simulated network; log every message.

    Nodes 'worker0'... run :func:`ps_worker` with ``gradients[k]``; nodes 'server0'... run
    ``server(s, n_workers, weights_slice, lr, send, recv)`` where ``weights_slice`` is a copy of slice s of
    ``weights`` (``np.array_split``), ``send(to, array)`` and ``recv(frm)`` name nodes such as 'worker3'.
    """
    import numpy as np

    if not callable(server):
        raise TypeError(f"server must be a function(server, n_workers, weights, lr, send, recv), "
                        f"got {type(server).__name__}")
    gradients = _check_buffers("gradients", gradients)
    if not isinstance(weights, np.ndarray) or weights.shape != gradients[0].shape:
        raise ValueError(f"weights must be a numpy array shaped like each gradient {gradients[0].shape}, "
                         f"got {getattr(weights, 'shape', type(weights).__name__)}")
    lr = positive_number("lr", lr)
    n_servers = positive_int("n_servers", n_servers)
    n = len(gradients)
    slices = np.array_split(weights, n_servers)
    programs: dict = {}
    for k in range(n):
        programs[f"worker{k}"] = (lambda k: lambda send, recv: ps_worker(gradients[k].copy(), n_servers, send, recv))(k)
    for s in range(n_servers):
        programs[f"server{s}"] = (lambda s: lambda send, recv: server(s, n, slices[s].copy(), lr, send, recv))(s)
    links = {(f"worker{k}", f"server{s}") for k in range(n) for s in range(n_servers)}
    links |= {(b, a) for a, b in links}
    return run_network(programs, links, timeout_s=timeout_s)


def sgd_step(weights, gradients: Sequence, lr: float):
    """One synchronous SGD step: the weights minus ``lr`` times the mean of the workers' gradients (a new array)."""
    import numpy as np

    weights = np.asarray(weights)
    if isinstance(gradients, np.ndarray) or not isinstance(gradients, Sequence) or not gradients:
        raise TypeError(f"gradients must be a non-empty list of arrays, got {type(gradients).__name__}")
    lr = positive_number("lr", lr)
    return weights - lr * np.mean(np.stack([np.asarray(g) for g in gradients]), axis=0)


def max_difference(a: dict, b: dict) -> float:
    """Largest absolute difference between two weight dicts with the same keys and shapes (arrays or tensors)."""
    import numpy as np

    if not isinstance(a, dict) or not isinstance(b, dict):
        raise TypeError(f"a and b must be dicts name -> array, got {type(a).__name__} and {type(b).__name__}")
    if set(a) != set(b):
        raise ValueError(f"a and b must have the same keys, got {sorted(a)} and {sorted(b)}")
    return max((float(np.abs(np.asarray(a[k], dtype=np.float64) - np.asarray(b[k], dtype=np.float64)).max())
                for k in a if np.size(a[k])), default=0.0)


# --------------------------------------------------------------------------- model parallelism on simulated devices

class DeviceMismatch(RuntimeError):
    """A computation mixed tensors or layers that live on different (simulated) devices, as PyTorch refuses to."""


@dataclass(frozen=True)
class Transfer:
    """One copy of a tensor between the host and a simulated device, or between two devices."""

    source: str
    target: str
    nbytes: int
    shape: tuple[int, ...]


class DeviceLog:
    """What the simulated devices of one group saw: transfers, layers run (device, layer), placements, weights' homes."""

    def __init__(self) -> None:
        """An empty log."""
        self.transfers: list[Transfer] = []
        self.ran: list[tuple[str, object]] = []
        self.owner: dict[int, str] = {}  # id(parameter or buffer) -> device name
        self.placements: list[tuple[str, object]] = []  # (device name, module) for every place() call

    def clear(self) -> None:
        """Forget the transfers and layer runs seen so far (placements stay)."""
        self.transfers.clear()
        self.ran.clear()

    def device_transfers(self) -> list[Transfer]:
        """Transfers between two devices (not to or from the host)."""
        return [t for t in self.transfers if "host" not in (t.source, t.target)]


class DeviceTensor:
    """A tensor that lives on a simulated device: move it with ``.to(device)``, bring it home with ``.cpu()``."""

    def __init__(self, value, device: "SimulatedDevice") -> None:
        """Wrap ``value`` (a torch tensor) as living on ``device``; use ``device.put`` rather than this."""
        self._value, self.device = value, device

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape."""
        return tuple(self._value.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor's data."""
        return self._value.numel() * self._value.element_size()

    def to(self, device: "SimulatedDevice") -> "DeviceTensor":
        """This tensor on ``device`` (a logged copy if it lives elsewhere; itself if it is already there)."""
        if not isinstance(device, SimulatedDevice):
            raise TypeError(f"device must be a SimulatedDevice (one of parallel.simulated_devices()), "
                            f"got {type(device).__name__}")
        if device is self.device:
            return self
        if device.log is not self.device.log:
            raise ValueError("device belongs to another group of simulated devices")
        device.log.transfers.append(Transfer(self.device.name, device.name, self.nbytes, self.shape))
        return DeviceTensor(self._value.detach().clone().requires_grad_(self._value.requires_grad), device)

    def cpu(self):
        """A copy of this tensor on the host (a plain torch tensor); the copy is logged."""
        self.device.log.transfers.append(Transfer(self.device.name, "host", self.nbytes, self.shape))
        return self._value.detach().clone()

    def __repr__(self) -> str:
        return f"DeviceTensor(shape={self.shape}, device={self.device.name!r})"

    def _refuse(self, *_: object, **__: object):
        raise TypeError("a DeviceTensor supports only .to(device) and .cpu(): run layers on it through "
                        "device.place(layer)(tensor)")

    __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = __matmul__ = __array__ = _refuse


class PlacedModule:
    """A module placed on a simulated device: call it on DeviceTensors that live on the same device."""

    def __init__(self, module, device: "SimulatedDevice") -> None:
        """Keep the module and its device; use ``device.place`` rather than this."""
        self.module, self.device = module, device

    def __call__(self, x: DeviceTensor) -> DeviceTensor:
        """Run the module on ``x`` (which must live on this device); log every layer that runs, and where."""
        import torch

        name = self.device.name
        if isinstance(x, torch.Tensor):
            raise DeviceMismatch(f"Expected all tensors to be on the same device, but found the input on the host "
                                 f"and the layer on {name}: move the input there first (device.put(x) or x.to(device))")
        if not isinstance(x, DeviceTensor):
            raise TypeError(f"x must be a DeviceTensor, got {type(x).__name__}")
        if x.device is not self.device:
            raise DeviceMismatch(f"Expected all tensors to be on the same device, but found at least two devices, "
                                 f"{x.device.name} and {name}: move the activations with .to(device) first")
        log = self.device.log
        for tensor in list(self.module.parameters()) + list(self.module.buffers()):
            if log.owner.get(id(tensor)) != name:
                raise DeviceMismatch(f"a layer's weights live on {log.owner.get(id(tensor), 'the host')}, not on "
                                     f"{name}: the module was placed elsewhere since")
        leaves = [m for m in self.module.modules() if not list(m.children())]
        hooks = [leaf.register_forward_hook(lambda layer, *_: log.ran.append((name, layer))) for leaf in leaves]
        try:
            out = self.module(x._value)
        finally:
            for hook in hooks:
                hook.remove()
        return DeviceTensor(out, self.device)

    def __repr__(self) -> str:
        return f"PlacedModule({type(self.module).__name__}, device={self.device.name!r})"


class SimulatedDevice:
    """One simulated device: ``put`` host tensors on it, ``place`` modules on it; everything is logged."""

    def __init__(self, name: str, log: DeviceLog) -> None:
        """A device called ``name`` that writes into ``log`` (shared by its group)."""
        self.name, self.log = name, log

    def put(self, tensor) -> DeviceTensor:
        """Copy a host tensor onto this device (logged)."""
        import torch

        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor must be a torch.Tensor on the host, got {type(tensor).__name__}")
        moved = DeviceTensor(tensor.detach().clone(), self)
        self.log.transfers.append(Transfer("host", self.name, moved.nbytes, moved.shape))
        return moved

    def place(self, module) -> PlacedModule:
        """Move ``module``'s weights onto this device (from wherever they were) and return it callable here."""
        from torch import nn

        if not isinstance(module, nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        for tensor in list(module.parameters()) + list(module.buffers()):
            self.log.owner[id(tensor)] = self.name
        self.log.placements.append((self.name, module))
        return PlacedModule(module, self)

    def __repr__(self) -> str:
        return f"SimulatedDevice({self.name!r})"


def simulated_devices(count: int = 2) -> list[SimulatedDevice]:
    """``count`` simulated devices 'sim:0', 'sim:1', ... sharing one log (``devices[0].log``)."""
    count = positive_int("count", count)
    log = DeviceLog()
    return [SimulatedDevice(f"sim:{index}", log) for index in range(count)]


def split_sequential(model, devices: Sequence[SimulatedDevice], cuts: Sequence[int]) -> Callable:
    """Place the layers of ``model`` between ``cuts`` on successive devices; return forward(host x) -> host output."""
    from torch import nn

    if not isinstance(model, nn.Sequential):
        raise TypeError(f"model must be a torch.nn.Sequential, got {type(model).__name__}")
    devices = list_of("devices", devices, SimulatedDevice, non_empty=True)
    cuts = [positive_int("cuts", c) for c in cuts]
    if cuts != sorted(set(cuts)) or (cuts and cuts[-1] >= len(model)) or len(cuts) != len(devices) - 1:
        raise ValueError(f"cuts must be {len(devices) - 1} increasing layer indices between 1 and {len(model) - 1}, "
                         f"got {cuts}")
    bounds = [0, *cuts, len(model)]
    stages = [device.place(model[start:end]) for device, start, end in zip(devices, bounds, bounds[1:])]

    def forward(x):
        """Run the split model on a host tensor: each stage on its device, activations moved at every cut."""
        activation = devices[0].put(x)
        for device, stage in zip(devices, stages):
            activation = stage(activation.to(device))
        return activation.cpu()

    return forward


# --------------------------------------------------------------------------- model parallelism: a 2-stage pipeline

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
class PipelineEvent:
    """One forward ('F') or backward ('B') pass of one micro-batch on one stage, in seconds from the step's start."""

    stage: int
    kind: str
    microbatch: int
    start_s: float
    end_s: float


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
    stage0, stage1 = launch(pipeline_worker, 2, (config, counts), timeout_s=timeout_s)
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


def _per_stage(name: str, value: object, stages: int) -> list[float]:
    """A duration for every stage: one number for all, or a sequence with one per stage (each > 0)."""
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if len(value) != stages:
            raise ValueError(f"{name} must hold one duration per stage ({stages}), got {len(value)}")
        return [positive_number(name, v) for v in value]
    return [positive_number(name, value)] * stages


def gpipe_schedule(stages: int, microbatches: int, forward_s: float | Sequence[float] = 1.0,
                   backward_s: float | Sequence[float] = 2.0, transfer_s: float = 0.0) -> list[PipelineEvent]:
    """The GPipe timeline on a simulated clock: every stage runs all forwards, then all backwards in reverse, each as
    soon as its input has arrived (``transfer_s`` after the neighbouring stage produced it); durations per stage."""
    p, m = positive_int("stages", stages), positive_int("microbatches", microbatches)
    f, b = _per_stage("forward_s", forward_s, p), _per_stage("backward_s", backward_s, p)
    hop = non_negative_number("transfer_s", transfer_s)
    forward_end = [[0.0] * m for _ in range(p)]
    backward_end = [[0.0] * m for _ in range(p)]
    events = []
    for s in range(p):
        free = 0.0
        for i in range(m):
            start = max(free, forward_end[s - 1][i] + hop if s else 0.0)
            forward_end[s][i] = free = start + f[s]
            events.append(PipelineEvent(s, "F", i, start, free))
    for s in reversed(range(p)):
        free = forward_end[s][m - 1]
        for i in reversed(range(m)):
            start = max(free, backward_end[s + 1][i] + hop if s < p - 1 else 0.0)
            backward_end[s][i] = free = start + b[s]
            events.append(PipelineEvent(s, "B", i, start, free))
    return sorted(events, key=lambda e: (e.stage, e.start_s))

def idle_fraction(events: Iterable[PipelineEvent]) -> float:
    """Share of a pipeline step that its stages spend idle: 1 - busy time / (stages x the step's span)."""
    events = list_of("events", events, PipelineEvent, non_empty=True)
    span = max(e.end_s for e in events) - min(e.start_s for e in events)
    if span <= 0:
        raise ValueError("events must span a positive time")
    stages = len({e.stage for e in events})
    return 1.0 - sum(e.end_s - e.start_s for e in events) / (stages * span)


def plot_pipeline_timeline(events: Iterable[PipelineEvent], ax=None, title: str = "", unit: str = "ms"):
    """Draw a pipeline schedule: one row per stage, forward and backward passes as labelled bars; return the Axes."""
    import matplotlib.pyplot as plt

    events = list_of("events", events, PipelineEvent, non_empty=True)
    if not isinstance(title, str):
        raise TypeError(f"title must be a str, got {type(title).__name__}")
    scale = {"s": 1.0, "ms": 1e3, "steps": 1.0}[one_of("unit", unit, ("s", "ms", "steps"))]
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 0.7 * (max(e.stage for e in events) + 1) + 1.4))
    elif not hasattr(ax, "broken_barh"):
        raise TypeError(f"ax must be a matplotlib Axes or None, got {type(ax).__name__}")
    colours = {"F": "tab:blue", "B": "tab:orange"}
    end = max(e.end_s for e in events) * scale
    for event in events:
        left, width = event.start_s * scale, (event.end_s - event.start_s) * scale
        ax.broken_barh([(left, width)], (event.stage - 0.38, 0.76), facecolors=colours[event.kind],
                       edgecolor="white", linewidth=0.6)
        if width > end / 60:
            ax.text(left + width / 2, event.stage, f"{event.kind}{event.microbatch}", ha="center", va="center",
                    fontsize=7, color="white")
    stages = sorted({e.stage for e in events})
    ax.set_yticks(stages, [f"stage {s}" for s in stages])
    ax.set_ylim(max(stages) + 0.6, -0.6)
    ax.set_xlim(0, end * 1.01)
    ax.set_xlabel({"s": "seconds", "ms": "milliseconds", "steps": "time (units of one forward pass)"}[unit])
    ax.legend(handles=[plt.Rectangle((0, 0), 1, 1, color=colours["F"]), plt.Rectangle((0, 0), 1, 1, color=colours["B"])],
              labels=["forward", "backward"], loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(True, axis="x", alpha=0.3)
    return ax


# --------------------------------------------------------------------------- TensorFlow: logical devices

@contextlib.contextmanager
def _quiet_stderr() -> Iterator[io.StringIO]:
    """Send what is written to stderr, by Python or by C++ libraries, to a buffer while the block runs."""
    captured = io.StringIO()
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (e.g. pythonw): only Python's stderr is redirected
        saved = None
    with tempfile.TemporaryFile() as sink, contextlib.redirect_stderr(captured):
        if saved is not None:
            os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            if saved is not None:
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                captured.write(sink.read().decode("utf-8", errors="replace"))


def _pass_on_unknown_lines(text: str) -> None:
    """Write to stderr the lines of ``text`` that are not TensorFlow's known start-up noise (no error is hidden)."""
    import gpucourse

    other = [line for line in text.splitlines() if line.strip() and not gpucourse._TF_STARTUP_NOISE.search(line)]
    if other:
        print("\n".join(other), file=sys.stderr)


def configure_tf_devices(count: int = 2, kind: str = "auto", memory_limit_mb: int = 1024) -> list[str]:
    """Give TensorFlow ``count`` logical CPU or GPU devices (before its first operation); return their names."""
    count = positive_int("count", count)
    one_of("kind", kind, ("auto", "CPU", "GPU"))
    memory_limit_mb = positive_int("memory_limit_mb", memory_limit_mb)
    import gpucourse

    try:
        tf = gpucourse.import_tensorflow()  # the package's one quiet import (GPU memory growth on)
        gpus = tf.config.list_physical_devices("GPU")
    except Exception as error:
        raise RuntimeError(f"TensorFlow could not start: {error}") from None
    if kind == "GPU" and not gpus:
        raise ValueError("kind='GPU' but TensorFlow sees no GPU: use kind='auto' or 'CPU'")
    device_type = "GPU" if (kind == "GPU" or (kind == "auto" and gpus)) else "CPU"
    physical = tf.config.list_physical_devices(device_type)
    wanted = None
    if len(physical) < count:  # split the first device so that there are `count` in all
        limit = memory_limit_mb if device_type == "GPU" else None  # TensorFlow sets no memory limit on CPUs
        wanted = [tf.config.LogicalDeviceConfiguration(memory_limit=limit) for _ in range(count - len(physical) + 1)]
    again = wanted is not None and tf.config.get_logical_device_configuration(physical[0]) == wanted
    try:
        with _quiet_stderr() as said:  # the first list_logical_devices starts TensorFlow's runtime
            if wanted is not None:
                tf.config.set_logical_device_configuration(physical[0], wanted)
            names = [device.name for device in tf.config.list_logical_devices(device_type)]
        _pass_on_unknown_lines(said.getvalue())
    except RuntimeError:
        current = [device.name for device in tf.config.list_logical_devices(device_type)]
        raise RuntimeError(
            f"TensorFlow has already started in this kernel, with {len(current)} logical {device_type} device(s) "
            f"{current}: logical devices can only be configured before TensorFlow's first operation. Restart the "
            "kernel (Colab: Runtime > Restart session; Jupyter: Kernel > Restart), then run the setup and imports cells before any other TensorFlow code."
        ) from None
    if again:
        print(f"TensorFlow already has these {count} logical {device_type} devices (configured earlier in this "
              "kernel): nothing to change")
    return names[:count]


__all__ = [
    "LOOPBACK", "DEFAULT_TIMEOUT_S", "WorkerError", "WorkerTimeout", "free_port", "launch", "process_group",
    "describe_worker", "failing_worker", "hanging_worker", "collective_worker", "spin_worker", "core_shares",
    "TrainConfig", "TrainResult", "DDPResult", "make_model", "make_batches", "train_single", "ddp_worker", "run_ddp",
    "run_ddp_all", "max_difference",
    "worker_buffers", "RingStep", "ring_trace", "plot_ring_steps",
    "NetworkError", "Message", "NetworkRun", "run_network", "run_ring", "ps_worker", "run_parameter_server", "sgd_step",
    "DeviceMismatch", "Transfer", "DeviceLog", "DeviceTensor", "PlacedModule", "SimulatedDevice", "simulated_devices",
    "split_sequential", "idle_fraction",
    "PipelineConfig", "PipelineEvent", "PipelineResult", "pipeline_worker", "run_pipeline", "gpipe_schedule",
    "plot_pipeline_timeline", "configure_tf_devices",
]
