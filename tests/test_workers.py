"""The launcher as the distributed lessons use it: notebook functions by value, off-limits helpers in every worker,
NCCL or gloo, a port in use, a rank killed from outside."""

from __future__ import annotations

import os
import signal
import socket
import textwrap
import time

import pytest

from gpucourse import checks, parallel
from gpucourse.parallel import WorkerError, launch, workers


pytestmark = pytest.mark.usefixtures("no_stray_processes")  # tests/conftest.py: no worker outlives its test


def _notebook(source: str) -> dict:
    """Run ``source`` as a notebook cell would: in a namespace whose module is __main__ (no worker can import it)."""
    namespace = {"__name__": "__main__"}
    exec(textwrap.dedent(source), namespace)  # noqa: S102 (test input written here)
    return namespace


def test_a_function_written_in_a_notebook_runs_in_the_workers_with_its_globals_and_helpers():
    cell = _notebook("""
        import math
        SCALE = 10

        def helper(rank):
            return rank * SCALE

        def my_worker(rank, world_size, offset):
            return helper(rank) + offset + math.floor(0.5)
    """)
    assert launch(cell["my_worker"], 2, (1,)) == [1, 11]
    assert launch(lambda rank, world_size: (rank, world_size), 2) == [(0, 2), (1, 2)]


def test_a_notebook_function_passed_as_an_argument_travels_too():
    cell = _notebook("""
        def square(x):
            return x * x
    """)
    assert launch(_apply_to_rank, 2, (cell["square"],)) == [0, 1]
    assert launch(_apply_to_rank, 3, (lambda x: x + 100,)) == [100, 101, 102]


def test_an_unwritten_function_in_a_worker_comes_back_as_not_implemented_error():
    cell = _notebook("""
        def exercise(x):
            # YOUR CODE HERE
            raise NotImplementedError()
    """)
    expected = r"exercise is not written yet \(worker rank [01] of 2: NotImplementedError"
    with pytest.raises(NotImplementedError, match=expected) as caught:
        launch(_apply_to_rank, 2, (cell["exercise"],))
    assert type(caught.value) is NotImplementedError


def _apply_to_rank(rank: int, world_size: int, fn) -> object:
    """A grader-like worker: call the function it was given on its rank."""
    return fn(rank)


def test_off_limits_helpers_stay_off_limits_in_every_worker_through_any_name():
    cell = _notebook("""
        from gpucourse import parallel
        from gpucourse.parallel import free_port as my_port        # the re-export, bound in the notebook

        def through_module(rank, world_size):
            return parallel.free_port()

        def through_name(rank, world_size):
            return my_port()

        def through_home(rank, world_size):
            from gpucourse.parallel import workers
            return workers.free_port()
    """)
    with checks.off_limits("gpucourse.parallel.workers.free_port", exercise="Exercise 9", namespace=cell):
        assert checks.active_off_limits() == [(("gpucourse.parallel.workers.free_port",), "Exercise 9")]
        for name in ("through_module", "through_name", "through_home"):
            with pytest.raises(WorkerError, match="OffLimits: Exercise 9 asks you to write this yourself"):
                launch(cell[name], 2)
    assert checks.active_off_limits() == []
    ports = launch(cell["through_name"], 2)
    assert all(isinstance(port, int) and port > 0 for port in ports), "restored once the guard ends"


@pytest.mark.parametrize("gpus, nccl, expected", [
    (0, False, "gloo"), (0, True, "gloo"), (1, True, "gloo"), (2, True, "nccl"), (4, True, "nccl"),
    (2, False, "gloo"),  # a CUDA build without NCCL (Windows)
])
def test_pick_backend_chooses_nccl_only_with_a_gpu_per_rank(monkeypatch, gpus, nccl, expected):
    monkeypatch.setattr(workers, "_gpu_count", lambda: gpus)
    monkeypatch.setattr(workers, "_nccl_available", lambda: nccl)
    assert parallel.pick_backend(2) == expected
    assert parallel.pick_backend(2, "gloo") == "gloo"
    if expected == "gloo":
        with pytest.raises(ValueError, match="backend='nccl' needs one CUDA GPU per process"):
            parallel.pick_backend(2, "nccl")
    else:
        assert parallel.pick_backend(2, "nccl") == "nccl"


def test_pick_backend_and_rank_device_reject_bad_input():
    with pytest.raises(ValueError, match="world_size"):
        parallel.pick_backend(0)
    with pytest.raises(ValueError, match="backend"):
        parallel.pick_backend(2, "mpi")
    with pytest.raises(ValueError, match="rank"):
        parallel.rank_device(-1, "gloo")
    with pytest.raises(ValueError, match="backend"):
        parallel.rank_device(0, "nccl2")


def test_the_launcher_passes_its_backend_to_the_workers(monkeypatch):
    assert launch(_backend_seen, 2) == [("gloo", "cpu")] * 2
    monkeypatch.setattr(workers, "_gpu_count", lambda: 2)
    monkeypatch.setattr(workers, "_nccl_available", lambda: True)
    env = workers._worker_environment(1, 2, 29500, 1, 10.0, parallel.pick_backend(2))
    assert env["GPUCOURSE_BACKEND"] == "nccl" and env["RANK"] == "1" and env["MASTER_PORT"] == "29500"


def _backend_seen(rank: int, world_size: int) -> tuple[str, str]:
    """What a worker reads: the group's backend and its own device."""
    return parallel.worker_backend(), str(parallel.rank_device(rank))


def test_a_port_in_use_is_refused_by_name_and_a_free_one_is_used():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ValueError, match=f"port {port} is in use"):
            launch(parallel.collective_worker, 2, port=port)
    free = parallel.free_port()
    assert launch(_port_seen, 2, port=free) == [free, free]


def _port_seen(rank: int, world_size: int) -> int:
    """The rendezvous port a worker was given."""
    return int(os.environ["MASTER_PORT"])


def test_a_rank_killed_from_outside_is_reported_and_the_launch_returns():
    start = time.monotonic()
    with pytest.raises(WorkerError, match="rank 1 of 2 failed: the process killed by signal SIGKILL"):
        launch(_killed_rank, 2, timeout_s=60)
    assert time.monotonic() - start < 20, "the surviving rank must be stopped, not waited for"


def _killed_rank(rank: int, world_size: int) -> int:
    """Rank 1 is killed by SIGKILL (as the out-of-memory killer would); rank 0 waits in a collective."""
    with parallel.process_group(rank, world_size) as dist:
        if rank == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        import torch

        dist.all_reduce(torch.ones(1))
    return rank


@pytest.mark.parametrize("method", ["forkserver", "exec"])
def test_both_start_methods_run_notebook_functions_and_report_failures(monkeypatch, method):
    monkeypatch.setenv("GPUCOURSE_WORKER_START", method)
    assert workers.start_method() == method
    cell = _notebook("""
        import os

        def who(rank, world_size):
            return rank, int(os.environ["OMP_NUM_THREADS"]), os.getsid(0) == os.getpid()
    """)
    assert launch(cell["who"], 2, threads_per_worker=2) == [(0, 2, True), (1, 2, True)]
    with pytest.raises(WorkerError, match="rank 1 of 2 failed: ValueError"):
        launch(parallel.failing_worker, 2, (1,), timeout_s=30)
    with pytest.raises(parallel.WorkerTimeout):
        launch(parallel.hanging_worker, 2, timeout_s=1)


def test_a_forked_worker_uses_the_thread_count_it_was_given(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_WORKER_START", "forkserver")
    assert launch(_torch_threads, 2, threads_per_worker=1) == [1, 1]


def _torch_threads(rank: int, world_size: int) -> int:
    """torch's intra-op thread count in a worker."""
    import torch

    return torch.get_num_threads()


def test_a_forked_worker_starts_with_torch_optim_and_dynamo_imported_and_the_servers_objects_frozen(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_WORKER_START", "forkserver")
    assert launch(_what_the_server_preloaded, 2) == [(True, True, True)] * 2


def _what_the_server_preloaded(rank: int, world_size: int) -> tuple[bool, bool, bool]:
    """Whether this worker inherited torch._dynamo (a second per fresh process otherwise) and frozen objects."""
    import gc
    import sys

    return "torch._dynamo" in sys.modules, "gpucourse.parallel.sharding" in sys.modules, gc.get_freeze_count() > 1000


def test_a_bad_start_method_is_named(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_WORKER_START", "fork")
    with pytest.raises(ValueError, match="GPUCOURSE_WORKER_START"):
        workers.start_method()


def test_code_shipped_to_a_worker_keeps_its_file_name() -> None:
    """cloudpickle names shipped code '<dynamic-code>'; launch keeps the cell's file name (tracebacks, coverage)."""
    import pickle

    from gpucourse.parallel.workers import _dumps_keeping_file_names

    namespace: dict = {}
    exec(compile("def outer(x):\n    inner = lambda y: y * 2\n    return inner(x) + 1\n", "/cells/answer.py", "exec"),
         namespace)
    shipped = pickle.loads(_dumps_keeping_file_names((namespace["outer"], 3)))
    function, argument = shipped
    assert function(argument) == 7
    assert function.__code__.co_filename == "/cells/answer.py"
    nested = [const for const in function.__code__.co_consts if hasattr(const, "co_filename")]
    assert nested and all(code.co_filename == "/cells/answer.py" for code in nested)
