"""Worker processes on one machine: launch, time limits, failures reported with the failing rank's traceback.

Worker processes are started with :func:`launch` (fresh interpreters, like the ``spawn`` start method: never a fork
of a notebook that may already run CUDA or TensorFlow), talk to each other over the loopback interface only
(127.0.0.1, a port the operating system picks), are stopped after ``timeout_s`` and never outlive the call. A
worker's failure comes back to the caller as :class:`WorkerError` with that rank's traceback.

The function and its arguments travel by value (cloudpickle), so a function written in a notebook runs in the
workers too; helpers made off-limits in the caller (:func:`gpucourse.checks.off_limits`) are off-limits in every
worker. :func:`pick_backend` chooses NCCL where every rank has its own CUDA GPU, gloo otherwise. Taught in
14_data_parallelism; used by every distributed cell of the course.
"""

from __future__ import annotations

import contextlib
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
from collections.abc import Callable, Iterator, Sequence

from gpucourse._validate import non_negative_int, one_of, positive_int, positive_number

LOOPBACK = "127.0.0.1"
"""The only address the workers use: nothing here opens a port to the network."""

DEFAULT_TIMEOUT_S = 60.0
"""Seconds a group of workers may run before all of them are stopped."""

MAX_WORKERS = 64
"""Most worker processes :func:`launch` starts at once (each is a whole Python interpreter)."""

_TIMEOUT_ENV = "GPUCOURSE_WORKER_TIMEOUT_S"
_START_ENV = "GPUCOURSE_WORKER_START"
START_METHODS = ("forkserver", "exec")
"""How workers start: forked from a clean server process that has torch imported already (fast: a launch costs a
fraction of a second instead of an import of torch per rank), or as a fresh interpreter each (``exec``). Neither
forks the notebook's own process. Set the environment variable ``GPUCOURSE_WORKER_START`` to choose; the default
is ``forkserver`` where the system has it (Linux, macOS), else ``exec``."""
_BACKEND_ENV = "GPUCOURSE_BACKEND"
BACKENDS = ("gloo", "nccl")

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
    return _os_chosen_port()


def _os_chosen_port() -> int:
    """Bind to port 0 on the loopback interface and return the port the OS chose (the launcher's own call)."""
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
    """Raise TypeError unless ``fn`` is a function that can travel to a worker process (by reference or by value)."""
    if not callable(fn) or isinstance(fn, type):
        raise TypeError(f"fn must be a function, got {type(fn).__name__}")
    import cloudpickle

    try:
        cloudpickle.dumps(fn)
    except Exception as error:  # pickling raises several kinds
        raise TypeError(f"fn must be picklable to travel to the worker processes, got {fn!r}: {error}") from None


def _gpu_count() -> int:
    """CUDA GPUs visible here (via the course's one device module; 0 without torch or CUDA)."""
    from gpucourse.hardware import available_devices

    return sum(name.startswith("cuda") for name in available_devices())


def _nccl_available() -> bool:
    """True if this torch build has NCCL (Linux CUDA builds; never macOS or Windows)."""
    try:
        import torch.distributed as dist
    except ImportError:
        return False
    return bool(dist.is_available() and dist.is_nccl_available())


def pick_backend(world_size: int, backend: str = "auto") -> str:
    """The process-group backend for ``world_size`` ranks: 'nccl' if each rank gets its own CUDA GPU, else 'gloo'."""
    world_size = positive_int("world_size", world_size)
    one_of("backend", backend, ("auto",) + BACKENDS)
    gpus = _gpu_count()
    nccl_usable = gpus >= world_size and _nccl_available()
    if backend == "auto":
        return "nccl" if nccl_usable else "gloo"
    if backend == "nccl" and not nccl_usable:
        from gpucourse import platforms

        raise ValueError(platforms.nccl_refusal(world_size, gpus, nccl=_nccl_available()))
    return backend


def _worker_environment(rank: int, world_size: int, port: int, threads: int, timeout_s: float,
                        backend: str = "gloo") -> dict[str, str]:
    """The environment of one worker: its rank, the loopback rendezvous address, thread counts, quiet frameworks."""
    env = dict(os.environ)
    env.update({
        "RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world_size),
        "MASTER_ADDR": LOOPBACK, "MASTER_PORT": str(port), _TIMEOUT_ENV: repr(timeout_s), _BACKEND_ENV: backend,
        "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
        "PYTHONUNBUFFERED": "1", "TF_CPP_MIN_LOG_LEVEL": env.get("TF_CPP_MIN_LOG_LEVEL", "2"),
        "TF_ENABLE_ONEDNN_OPTS": env.get("TF_ENABLE_ONEDNN_OPTS", "0"),
    })
    interface = _loopback_interface()
    if interface and "GLOO_SOCKET_IFNAME" not in env:
        env["GLOO_SOCKET_IFNAME"] = interface  # gloo would otherwise look up the host name's interface
    return env


def start_method() -> str:
    """How :func:`launch` starts workers here (see START_METHODS): the environment's choice, else the fastest."""
    import multiprocessing

    method = os.environ.get(_START_ENV, "")
    if method:
        return one_of(_START_ENV, method, START_METHODS)
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "exec"


def _forkserver():
    """multiprocessing's forkserver context, its server preloading torch (if installed) and the course's parallel
    package (:mod:`gpucourse.parallel.server_preload`)."""
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["gpucourse.parallel.server_preload"])  # once per notebook process
    return context


def service_pids() -> set[int]:
    """Process ids of the long-lived helpers multiprocessing keeps for :func:`launch` (its fork server and resource
    tracker): children of this process by design, never stray workers."""
    import multiprocessing.forkserver
    import multiprocessing.resource_tracker

    pids = {getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None),
            getattr(multiprocessing.resource_tracker._resource_tracker, "_pid", None)}
    return {pid for pid in pids if isinstance(pid, int)}


class _ForkedWorker:
    """A worker forked by the fork server, with the part of ``subprocess.Popen``'s face that the launcher uses."""

    def __init__(self, process: object) -> None:
        self._process = process
        self.pid = process.pid

    def poll(self) -> int | None:
        """The exit code (negative: killed by that signal), or None while it runs."""
        return self._process.exitcode

    def wait(self, timeout: float | None = None) -> int | None:
        """Wait up to ``timeout`` seconds for it to end; its exit code or None."""
        self._process.join(timeout)
        return self._process.exitcode


def _start_worker(method: str, task_path: str, rank: int, env: dict[str, str], log_path: str):
    """Start one worker by ``method``; a handle with poll(), wait() and pid."""
    if method == "forkserver":
        process = _forkserver().Process(target=_forked_child, args=(task_path, rank, env, log_path, os.getpid()),
                                        name=f"gpucourse-rank{rank}", daemon=False)
        with _main_module_left_out():
            process.start()
        return _ForkedWorker(process)
    with open(log_path, "wb") as log:  # the child keeps its own copy of the file
        return subprocess.Popen(
            [sys.executable, "-c", _BOOT, task_path, str(rank)], stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT,  # nothing a worker prints reaches the notebook
            env=env, start_new_session=os.name == "posix")


@contextlib.contextmanager
def _main_module_left_out() -> Iterator[None]:
    """While starting a forked worker, keep multiprocessing from re-importing the caller's ``__main__`` in it (a
    notebook kernel's launcher, or a learner's script without a ``__main__`` guard): the task needs none of it."""
    from multiprocessing import spawn

    original = spawn.get_preparation_data

    def preparation_data(name: str) -> dict:
        data = original(name)
        data.pop("init_main_from_name", None)
        data.pop("init_main_from_path", None)
        return data

    spawn.get_preparation_data = preparation_data
    try:
        yield
    finally:
        spawn.get_preparation_data = original


def _forked_child(task_path: str, rank: int, env: dict[str, str], log_path: str, launcher_pid: int) -> None:
    """In a worker forked by the fork server: its own session, output to its log, the launcher's environment."""
    os.setsid()
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.clear()
    os.environ.update(env)
    with open(task_path, "rb") as handle:
        paths = pickle.load(handle)
    sys.path[:] = paths + [p for p in sys.path if p not in paths]
    if "torch" in sys.modules:  # imported by the server before this rank's thread count was known
        sys.modules["torch"].set_num_threads(int(env.get("OMP_NUM_THREADS", "1")))
    _child_main(task_path, rank, launcher_pid)


def _stop(processes: Sequence[object]) -> None:
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
            process.wait(timeout=2.0)  # reaps it (a Popen) or joins it (a forked worker)


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


def _failure(folder: str, failed: list[int], codes: list[int | None], world_size: int) -> Exception:
    """The WorkerError of the rank that failed first (the others often fail only because it did).

    A function not written yet (NotImplementedError in a worker, e.g. an exercise's untouched stub) comes back as
    NotImplementedError itself, so that a notebook says "not answered yet" rather than "a worker failed".
    """
    reports = {}
    for rank in failed:
        with contextlib.suppress(OSError, EOFError, pickle.UnpicklingError):
            with open(os.path.join(folder, f"rank{rank}.error"), "rb") as handle:
                reports[rank] = pickle.load(handle)
    # A rank that died without a traceback (killed, out of memory, a crash in C++) is the likely cause: its peers'
    # errors ("connection reset by peer") follow from it. An abort (SIGABRT) is more often such a consequence.
    silent = [rank for rank in failed if rank not in reports and codes[rank] != -signal.SIGABRT]
    if reports and not silent:
        rank = min(reports, key=lambda r: reports[r]["time"])
        if reports[rank].get("not_implemented"):
            where = reports[rank].get("raised_in") or "a function"
            return NotImplementedError(f"{where} is not written yet (worker rank {rank} of {world_size}: "
                                       f"{reports[rank]['summary']})")
        return WorkerError(rank, world_size, reports[rank]["summary"], reports[rank]["traceback"])
    rank = (silent or failed)[0]
    output = _tail(os.path.join(folder, f"rank{rank}.log"))
    details = f"last lines of its output:\n{output}" if output else "(it printed nothing)"
    details += "".join(f"\n(then rank {other} failed: {report['summary'][:200]})" for other, report in reports.items())
    return WorkerError(rank, world_size, f"the process {_exit_reason(codes[rank])} without a Python traceback",
                       details)


def launch(fn: Callable[..., object], world_size: int, args: Sequence[object] = (), *,
           timeout_s: float = DEFAULT_TIMEOUT_S, threads_per_worker: int = 1, backend: str = "auto",
           port: int | None = None) -> list[object]:
    """Run ``fn(rank, world_size, *args)`` in ``world_size`` fresh processes; return their results by rank.

    ``backend`` ('auto', 'gloo' or 'nccl') is what :func:`process_group` joins with in the workers; 'auto' is
    :func:`pick_backend`'s choice. ``port`` fixes the rendezvous port (default: a free one, chosen again if another
    program takes it first).
    """
    import cloudpickle

    from gpucourse.checks import active_off_limits

    _check_worker_function(fn)
    world_size = positive_int("world_size", world_size)
    if world_size > MAX_WORKERS:
        raise ValueError(f"world_size must be <= {MAX_WORKERS} (each worker is a whole Python process), "
                         f"got {world_size}")
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError(f"args must be a tuple or list of arguments for fn, got {type(args).__name__}")
    timeout_s = positive_number("timeout_s", timeout_s)
    threads = positive_int("threads_per_worker", threads_per_worker)
    backend = pick_backend(world_size, backend)
    if port is not None:
        _check_port(port)
    try:
        task = _dumps_keeping_file_names((fn, tuple(args), world_size, active_off_limits()))
    except Exception as error:
        raise TypeError(f"args must be picklable (they travel to the worker processes): {error}") from None
    for attempt in range(2):
        try:
            return _launch_once(task, world_size, timeout_s, threads, backend, port)
        except WorkerError as error:  # another program took the free port before rank 0 could: try a new one
            if port is not None or attempt or not any(marker in error.details for marker in _PORT_TAKEN):
                raise
    raise AssertionError("unreachable")


def _check_port(port: object) -> None:
    """Raise unless ``port`` is a TCP port number that is free on the loopback interface now."""
    if isinstance(port, bool) or not isinstance(port, int):
        raise TypeError(f"port must be an int (a TCP port number), got {type(port).__name__}")
    if not 1024 <= port <= 65535:
        raise ValueError(f"port must be between 1024 and 65535, got {port}")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind((LOOPBACK, port))
        except OSError:
            raise ValueError(f"port {port} is in use on {LOOPBACK}: pass another port, or port=None to let the "
                             "operating system pick a free one") from None


_PORT_TAKEN = ("EADDRINUSE", "Address already in use", "address already in use")


def _launch_once(task: bytes, world_size: int, timeout_s: float, threads: int, backend: str,
                 port: int | None) -> list[object]:
    """Start the workers on a fresh free port, wait for all of them (or the first failure, or the time limit)."""
    folder = tempfile.mkdtemp(prefix="gpucourse-workers-")
    processes: list[object] = []
    method = start_method()
    try:
        task_path = os.path.join(folder, "task.pkl")
        with open(task_path, "wb") as handle:
            pickle.dump([p for p in sys.path if p and os.path.isdir(p)], handle)
            handle.write(task)
        port = port or _os_chosen_port()
        for rank in range(world_size):
            processes.append(_start_worker(method, task_path, rank,
                                           _worker_environment(rank, world_size, port, threads, timeout_s, backend),
                                           os.path.join(folder, f"rank{rank}.log")))
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
        shutil.rmtree(folder, ignore_errors=True)


def _dumps_keeping_file_names(payload: object) -> bytes:
    """``cloudpickle.dumps``, except that code shipped by value keeps its file name (cloudpickle writes
    '<dynamic-code>'): a worker's traceback then names the notebook cell, and the course's tests can measure which
    lines of a learner's function ran in the workers."""
    import collections
    import io
    import types

    import cloudpickle
    from cloudpickle import cloudpickle as implementation

    def code_reduce(code: types.CodeType) -> tuple:
        constructor, fields = implementation._code_reduce(code)
        return constructor, tuple(code.co_filename if field == "<dynamic-code>" else field for field in fields)

    class Pickler(cloudpickle.Pickler):  # the C pickler reads dispatch_table once, when it is made
        dispatch_table = collections.ChainMap({types.CodeType: code_reduce}, cloudpickle.Pickler.dispatch_table)

    buffer = io.BytesIO()
    Pickler(buffer).dump(payload)
    return buffer.getvalue()


def _write_atomically(path: str, payload: bytes) -> None:
    """Write a file so that a reader sees all of it or nothing."""
    with open(path + ".tmp", "wb") as handle:
        handle.write(payload)
    os.replace(path + ".tmp", path)


def _innermost_function(error: BaseException) -> str:
    """Name of the function in which ``error`` was raised ('' if unknown)."""
    frames = traceback.extract_tb(error.__traceback__)
    return frames[-1].name if frames else ""


def _alive(pid: int) -> bool:
    """True while process ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _watch_parent(launcher_pid: int, limit_s: float) -> None:
    """In a worker: exit if the launching process dies or the time limit has long passed (no stray workers)."""
    direct_child = os.getppid() == launcher_pid  # started by exec; a forked worker's parent is the fork server

    def launcher_gone() -> bool:
        """A direct child is re-parented when the launcher dies; a forked worker asks whether its id still exists."""
        return os.getppid() != launcher_pid if direct_child else not _alive(launcher_pid)

    def watch() -> None:
        """Poll the launcher and the clock; end this process when either says so."""
        start = time.monotonic()
        while True:
            time.sleep(0.25)
            if launcher_gone() or time.monotonic() - start > limit_s:
                os._exit(3)

    threading.Thread(target=watch, name="gpucourse-watch-parent", daemon=True).start()


def _child_main(task_path: str, rank: int, launcher_pid: int | None = None) -> None:
    """Entry point of a worker process (not for direct use): run the task, save its result or its traceback."""
    folder = os.path.dirname(task_path)
    _watch_parent(launcher_pid or os.getppid(), float(os.environ.get(_TIMEOUT_ENV, DEFAULT_TIMEOUT_S)) + 30.0)
    try:
        with open(task_path, "rb") as handle:
            pickle.load(handle)  # the caller's sys.path, already applied by _BOOT
            fn, args, world_size, blocked = pickle.loads(handle.read())
        if blocked:
            from gpucourse.checks import block_in_worker

            block_in_worker(blocked, (fn, *args))
        result = fn(rank, world_size, *args)
        payload = pickle.dumps(result)
    except BaseException as error:  # noqa: BLE001 (SystemExit and KeyboardInterrupt are reported too)
        report = {"time": time.time(), "summary": f"{type(error).__name__}: {error}",
                  "traceback": traceback.format_exc(), "not_implemented": isinstance(error, NotImplementedError),
                  "raised_in": _innermost_function(error)}
        _write_atomically(os.path.join(folder, f"rank{rank}.error"), pickle.dumps(report))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)  # skip interpreter shutdown: a half-open process group can hang it
    _write_atomically(os.path.join(folder, f"rank{rank}.result"), payload)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def worker_backend() -> str:
    """In a worker: the backend :func:`launch` chose for this group ('gloo' outside a launched worker)."""
    return os.environ.get(_BACKEND_ENV, "gloo")


def rank_device(rank: int, backend: str | None = None):
    """The torch device a rank computes on: its own GPU under NCCL, the CPU under gloo."""
    import torch

    rank = non_negative_int("rank", rank)
    backend = one_of("backend", backend or worker_backend(), BACKENDS)
    if backend == "nccl":
        return torch.device("cuda", rank % max(torch.cuda.device_count(), 1))
    return torch.device("cpu")


@contextlib.contextmanager
def process_group(rank: int, world_size: int, backend: str = "auto") -> Iterator[object]:
    """In a worker: join the group at the launcher's loopback address, yield torch.distributed, barrier, leave.

    ``backend='auto'`` uses the launcher's choice (:func:`pick_backend`: NCCL with a GPU per rank, else gloo); under
    NCCL each rank first selects its own GPU, so :func:`rank_device` is where its tensors belong.
    """
    import datetime

    import torch.distributed as dist

    one_of("backend", backend, ("auto",) + BACKENDS)
    if backend == "auto":
        backend = worker_backend()
    timeout = datetime.timedelta(seconds=float(os.environ.get(_TIMEOUT_ENV, DEFAULT_TIMEOUT_S)))
    address = f"tcp://{os.environ.get('MASTER_ADDR', LOOPBACK)}:{os.environ['MASTER_PORT']}"
    if backend == "nccl":
        import torch

        torch.cuda.set_device(rank_device(rank, "nccl"))
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
    with process_group(rank, world_size) as dist:
        values = torch.full((3,), float(rank), device=rank_device(rank))
        dist.all_reduce(values)
        return values.cpu().tolist()
