"""Tests of gpucourse.parallel: worker processes that never hang or linger, DDP == one process, the pipeline, TF devices."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from gpucourse import parallel  # noqa: E402
from gpucourse.parallel import (PipelineConfig, PipelineEvent, TrainConfig, WorkerError, WorkerTimeout,  # noqa: E402
                                gpipe_schedule, launch, ring_trace)
from parallel_workers import (add_ranks, averaging_server, exit_abruptly,  # noqa: E402  (tests/ is on sys.path)
                              ring_allreduce_reference)

PROPERTY = settings(deadline=None, max_examples=40, derandomize=True, database=None)


@pytest.fixture(autouse=True)
def _no_stray_processes(no_stray_processes):
    """Every test leaves no child process behind (tests/conftest.py), and closes its figures."""
    yield
    plt.close("all")


# --------------------------------------------------------------------------- the subpackage keeps the old module's face

# Every public name of the single parallel.py that lessons and tests used before it was split into a subpackage.
_OLD_NAMES = (
    "LOOPBACK DEFAULT_TIMEOUT_S WorkerError WorkerTimeout free_port launch process_group describe_worker failing_worker "
    "hanging_worker collective_worker spin_worker core_shares TrainConfig TrainResult DDPResult make_model make_batches "
    "train_single ddp_worker run_ddp run_ddp_all max_difference worker_buffers RingStep ring_trace plot_ring_steps "
    "NetworkError Message NetworkRun run_network run_ring ps_worker run_parameter_server sgd_step DeviceMismatch Transfer "
    "DeviceLog DeviceTensor PlacedModule SimulatedDevice simulated_devices split_sequential idle_fraction PipelineConfig "
    "PipelineEvent PipelineResult pipeline_worker run_pipeline gpipe_schedule plot_pipeline_timeline "
    "configure_tf_devices _child_main _pipeline_stage").split()


def test_every_old_name_is_still_importable_from_gpucourse_parallel():
    missing = [name for name in _OLD_NAMES if not hasattr(parallel, name)]
    assert missing == []
    assert set(parallel.__all__) <= set(dir(parallel))


def test_workers_start_through_the_old_import_line():
    """Spawned workers run `from gpucourse.parallel import _child_main`: it must keep working after the split."""
    assert "from gpucourse.parallel import _child_main" in parallel.workers._BOOT
    done = subprocess.run([sys.executable, "-c", "from gpucourse.parallel import _child_main; print(_child_main.__module__)"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == "gpucourse.parallel.workers", done.stderr


def test_each_module_of_the_subpackage_stays_readable():
    from pathlib import Path

    sizes = {path.name: len(path.read_text(encoding="utf-8").splitlines())
             for path in Path(parallel.__file__).parent.glob("*.py")}
    assert len(sizes) >= 7 and max(sizes.values()) <= 800, sizes


# --------------------------------------------------------------------------- free_port

def test_free_port_is_a_bindable_loopback_port():
    port = parallel.free_port()
    assert isinstance(port, int) and 1024 <= port <= 65535
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize("host, error", [("0.0.0.0", ValueError), ("192.0.2.1", ValueError), (1, TypeError),
                                         (None, TypeError)])
def test_free_port_refuses_anything_but_loopback(host, error):
    with pytest.raises(error, match="host"):
        parallel.free_port(host)


# --------------------------------------------------------------------------- launch: arguments


@pytest.mark.parametrize("fn", ["add_ranks", None, TrainConfig, threading.Lock().acquire])
def test_launch_rejects_what_cannot_travel_to_a_worker(fn):
    with pytest.raises(TypeError, match="fn must"):
        launch(fn, 2)


@pytest.mark.parametrize("kwargs, error, name", [
    ({"world_size": 0}, ValueError, "world_size"), ({"world_size": "2"}, TypeError, "world_size"),
    ({"world_size": 2.0}, TypeError, "world_size"), ({"world_size": parallel.MAX_WORKERS + 1}, ValueError, "world_size"),
    ({"timeout_s": 0}, ValueError, "timeout_s"), ({"timeout_s": float("inf")}, ValueError, "timeout_s"),
    ({"timeout_s": "1"}, TypeError, "timeout_s"), ({"threads_per_worker": 0}, ValueError, "threads_per_worker"),
    ({"args": "ab"}, TypeError, "args"), ({"args": 3}, TypeError, "args"),
    ({"args": (threading.Lock(),)}, TypeError, "args"), ({"backend": "mpi"}, ValueError, "backend"),
    ({"port": 80}, ValueError, "port"), ({"port": "29500"}, TypeError, "port"),
])
def test_launch_rejects_bad_arguments_by_name(kwargs, error, name):
    call = {"world_size": 2, **kwargs}
    with pytest.raises(error, match=name):
        launch(add_ranks, **call)


# --------------------------------------------------------------------------- launch: running, failing, hanging

def test_results_come_back_in_rank_order_from_separate_loopback_processes():
    info = launch(parallel.describe_worker, 3, threads_per_worker=2)
    assert [i["rank"] for i in info] == [0, 1, 2] and all(i["world_size"] == 3 for i in info)
    assert len({i["pid"] for i in info}) == 3 and os.getpid() not in {i["pid"] for i in info}
    assert all(i["parent_pid"] in {os.getpid()} | parallel.workers.service_pids() for i in info)
    assert {i["master_addr"] for i in info} == {"127.0.0.1"} and len({i["master_port"] for i in info}) == 1
    assert {i["threads"] for i in info} == {2}
    assert launch(add_ranks, 2, (10,)) == [10, 11]


def test_a_collective_runs_across_processes():
    assert parallel.launch(parallel.collective_worker, 2) == [[1.0, 1.0, 1.0]] * 2


@pytest.mark.parametrize("bad_rank", [0, 1])
def test_a_failing_worker_raises_with_its_rank_and_traceback_quickly(bad_rank, capfd):
    start = time.monotonic()
    with pytest.raises(WorkerError) as caught:
        launch(parallel.failing_worker, 2, (bad_rank,))
    assert time.monotonic() - start < 15, "the other worker must be stopped, not waited for"
    error = caught.value
    assert error.rank == bad_rank and error.world_size == 2
    message = str(error)
    assert f"rank {bad_rank} of 2 failed: ValueError" in message
    assert "Traceback (most recent call last)" in message and "failing_worker" in message
    out, err = capfd.readouterr()
    assert "goes to the worker's log" not in out + err, "a worker's output must not reach the caller's terminal"


def test_a_worker_dying_without_a_traceback_is_reported_with_its_exit_code():
    with pytest.raises(WorkerError, match="rank 1 of 2 failed.*exited with code 7"):
        launch(exit_abruptly, 2, timeout_s=30)


def test_a_hanging_worker_times_out_and_is_stopped(no_stray_processes):
    start = time.monotonic()
    with pytest.raises(WorkerTimeout, match=r"timeout_s=1 s .*ranks still running: \[0, 1\]"):
        launch(parallel.hanging_worker, 2, timeout_s=1)
    assert time.monotonic() - start < 10
    assert no_stray_processes() == []


# --------------------------------------------------------------------------- DDP == one process on the full batch

@pytest.fixture(scope="module")
def ddp_runs():
    """One launch of 2 DDP processes training two configs, and the single-process references (shared below)."""
    configs = (TrainConfig(steps=6, warmup=1), TrainConfig(features=5, hidden=7, batch=6, steps=3, warmup=1, seed=3))
    runs = parallel.run_ddp_all(configs, 2, timeout_s=60)
    return [(config, run, parallel.train_single(config)) for config, run in zip(configs, runs)]


@pytest.fixture
def ddp_run(ddp_runs):
    """The first config's DDP run and its single-process reference."""
    return ddp_runs[0]


def test_several_configs_train_in_one_launch(ddp_runs):
    (_, first, _), (config, second, single) = ddp_runs
    assert first.wall_s == second.wall_s and second.replicas_identical
    assert second.weights["hidden.weight"].shape == (7, 5) and len(second.ranks[1].step_times_s) == config.steps
    for name, value in single.weights.items():
        np.testing.assert_allclose(second.weights[name], value, rtol=1e-5, atol=1e-6)


def test_ddp_on_two_processes_equals_one_process_on_the_full_batch(ddp_run):
    config, ddp, single = ddp_run
    assert ddp.backend == "gloo" and len(ddp.ranks) == 2 and ddp.replicas_identical
    assert set(ddp.weights) == set(single.weights) == {"hidden.weight", "hidden.bias", "out.weight", "out.bias"}
    for name, value in single.weights.items():
        assert ddp.weights[name].dtype == np.float32 and ddp.weights[name].shape == value.shape
        np.testing.assert_allclose(ddp.weights[name], value, rtol=1e-5, atol=1e-6)
    initial = {name: t.detach().numpy() for name, t in parallel.make_model(config).state_dict().items()}
    assert max(np.abs(single.weights[k] - initial[k]).max() for k in initial) > 1e-3, "training must move the weights"


def test_ddp_does_not_equal_one_process_on_half_the_batch(ddp_run):
    config, ddp, _ = ddp_run
    half = parallel.train_single(config, rows=slice(0, config.batch // 2))
    assert max(np.abs(ddp.weights[k] - half.weights[k]).max() for k in half.weights) > 1e-4


def test_ddp_and_single_runs_report_their_step_times(ddp_run):
    config, ddp, single = ddp_run
    for result in (*ddp.ranks, single):
        assert len(result.step_times_s) == config.steps and all(t > 0 for t in result.step_times_s)
        assert len(result.timing.times_s) == config.steps - config.warmup
    assert ddp.ranks[0].processes == 2 and ddp.ranks[0].threads == 1 and single.processes == 1
    assert ddp.wall_s > ddp.timing.median_s > 0


def test_single_process_training_is_reproducible_and_restores_threads():
    import torch

    config = TrainConfig(steps=3, warmup=1)
    threads = torch.get_num_threads()
    first, second = parallel.train_single(config, threads=1), parallel.train_single(config)
    assert first.threads == 1 and torch.get_num_threads() == threads
    for name in first.weights:
        np.testing.assert_array_equal(first.weights[name], second.weights[name])


@pytest.mark.parametrize("kwargs, error, name", [
    ({"features": 0}, ValueError, "features"), ({"batch": 2.5}, TypeError, "batch"), ({"lr": -1.0}, ValueError, "lr"),
    ({"steps": 2, "warmup": 2}, ValueError, "warmup"), ({"seed": -1}, ValueError, "seed"),
])
def test_train_config_validates_its_fields(kwargs, error, name):
    with pytest.raises(error, match=name):
        TrainConfig(**kwargs)


def test_run_ddp_rejects_bad_arguments_before_starting_processes(no_gpu):
    with pytest.raises(ValueError, match="divisible by world_size"):
        parallel.run_ddp(TrainConfig(batch=63), 2)
    with pytest.raises(ValueError, match="nccl"):
        parallel.run_ddp(TrainConfig(), 2, backend="nccl")
    with pytest.raises(ValueError, match="backend"):
        parallel.run_ddp(TrainConfig(), 2, backend="mpi")
    with pytest.raises(TypeError, match="config"):
        parallel.run_ddp({"batch": 64}, 2)
    with pytest.raises(ValueError, match="configs"):
        parallel.run_ddp_all([], 2)
    with pytest.raises(TypeError, match="configs"):
        parallel.run_ddp_all(TrainConfig(), 2)
    with pytest.raises(ValueError, match="divisible"):
        parallel.run_ddp_all([TrainConfig(), TrainConfig(batch=9)], 2)
    with pytest.raises(TypeError, match="rows"):
        parallel.train_single(TrainConfig(), rows=(0, 32))
    with pytest.raises(ValueError, match="device"):
        parallel.train_single(TrainConfig(), device="tpu")
    with pytest.raises(ValueError, match="device"):
        parallel.train_single(TrainConfig(), device="cuda:0")


_CUDA = pytest.importorskip("torch").cuda


@pytest.mark.gpu
@pytest.mark.skipif(not _CUDA.is_available(), reason="needs a CUDA GPU")
def test_single_process_training_on_a_gpu_matches_the_cpu():
    config = TrainConfig(steps=4, warmup=1)
    gpu, cpu = parallel.train_single(config, device="cuda:0"), parallel.train_single(config)
    for name, value in cpu.weights.items():
        np.testing.assert_allclose(gpu.weights[name], value, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(_CUDA.device_count() < 2, reason="needs two CUDA GPUs")
def test_ddp_with_nccl_on_two_gpus_matches_one_gpu():
    config = TrainConfig(steps=4, warmup=1)
    ddp = parallel.run_ddp(config, 2, timeout_s=120)
    assert ddp.backend == "nccl" and ddp.replicas_identical
    single = parallel.train_single(config, device="cuda:0")
    for name, value in single.weights.items():
        np.testing.assert_allclose(ddp.weights[name], value, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- simulated workers and the ring

def test_worker_buffers_are_reproducible_and_typed():
    first, second = parallel.worker_buffers(3, 10, seed=4), parallel.worker_buffers(3, 10, seed=4)
    assert len(first) == 3 and all(b.shape == (10,) and b.dtype == np.float32 for b in first)
    assert all(np.array_equal(a, b) for a, b in zip(first, second))
    assert not np.array_equal(first[0], first[1])
    assert parallel.worker_buffers(2, 5, dtype="float64")[0].dtype == np.float64
    for kwargs, error in (({"n_workers": 0}, ValueError), ({"size": "5"}, TypeError), ({"dtype": "int8"}, ValueError)):
        with pytest.raises(error, match=next(iter(kwargs))):
            parallel.worker_buffers(**{"n_workers": 2, "size": 5, **kwargs})


@given(st.integers(1, 9))
@PROPERTY
def test_ring_trace_ends_with_every_chunk_fully_reduced_everywhere(n):
    trace = ring_trace(n)
    assert len(trace) == 1 + 2 * (n - 1)
    everyone = frozenset(range(n))
    assert all(cell == everyone for worker in trace[-1].holdings for cell in worker)
    for entry in trace[1:]:
        senders = [s for s, _, _ in entry.transfers]
        receivers = [r for _, r, _ in entry.transfers]
        assert sorted(senders) == sorted(receivers) == list(range(n)), "each worker sends and receives one chunk"
        assert all(r == (s + 1) % n for s, r, _ in entry.transfers), "a ring: always to the right neighbour"
        assert sorted(c for _, _, c in entry.transfers) == list(range(n)), "each chunk travels once per step"
    after_reduce_scatter = trace[n - 1].holdings
    for worker in range(n):
        assert after_reduce_scatter[worker][(worker + 1) % n] == everyone


def test_plot_ring_steps_draws_one_panel_per_step():
    fig = parallel.plot_ring_steps(4)
    titled = [ax for ax in fig.axes if ax.get_title()]
    assert len(titled) == 1 + 2 * 3
    for bad, error in ((1, ValueError), (9, ValueError), ("4", TypeError)):
        with pytest.raises(error, match="n_workers"):
            parallel.plot_ring_steps(bad)


# --------------------------------------------------------------------------- simulated networks

def _node_threads() -> list[threading.Thread]:
    """Threads of simulated-network nodes still alive."""
    return [t for t in threading.enumerate() if t.name.startswith("gpucourse-node-")]


@given(st.integers(1, 9), st.integers(1, 40), st.sampled_from(["float32", "float64"]))
@PROPERTY
def test_a_reference_ring_allreduce_sums_and_sends_2_n_minus_1_chunks(n, length, dtype):
    buffers = parallel.worker_buffers(n, length, seed=length, dtype=dtype)
    copies = [b.copy() for b in buffers]
    run = parallel.run_ring(ring_allreduce_reference, buffers)
    exact = np.sum(np.array(buffers, dtype=np.float64), axis=0)
    sizes = [len(c) for c in np.array_split(np.arange(length), n)]
    for rank in range(n):
        np.testing.assert_allclose(run.results[rank], exact, rtol=1e-5, atol=1e-5)
        sent = run.sent_by(rank)
        assert [m.index for m in sent] == list(range(2 * (n - 1)))
        assert all(m.receiver == (rank + 1) % n for m in sent)
        assert [m.nbytes for m in sent] == [sizes[(rank - s) % n] * buffers[0].itemsize for s in range(n - 1)] + \
                                           [sizes[(rank + 1 - s) % n] * buffers[0].itemsize for s in range(n - 1)]
    assert sum(run.bytes_sent(r) for r in range(n)) == 2 * (n - 1) * buffers[0].nbytes
    assert not run.undelivered
    assert all(np.array_equal(b, c) for b, c in zip(buffers, copies)), "each rank works on a copy of its buffer"
    assert not _node_threads()


def test_messages_are_copies_and_traffic_counts_both_directions():
    def program(name):
        def run(send, recv):
            if name == "a":
                data = np.ones(4, dtype=np.float32)
                send("b", data)
                data[:] = 7  # changing the array after sending does not change the message
                return recv("b")
            return send("a", recv("a") * 2)
        return run

    run = parallel.run_network({"a": program("a"), "b": program("b")})
    np.testing.assert_array_equal(run.results["a"], np.full(4, 2.0))
    assert run.bytes_sent("a") == run.bytes_received("a") == 16 and run.traffic("b") == 32
    assert [(m.sender, m.receiver, m.index, m.nbytes) for m in run.sent_by("a")] == [("a", "b", 0, 16)]


def test_a_deadlock_is_reported_at_once_naming_who_waits_for_whom():
    def wait_first(rank, world_size, buffer, send, recv):
        recv()
        send(buffer)

    start = time.perf_counter()
    with pytest.raises(parallel.NetworkError, match="deadlock.*0 waits for 2"):
        parallel.run_ring(wait_first, [np.zeros(3)] * 3, timeout_s=20)
    assert time.perf_counter() - start < 2, "a deadlock must not wait for the time limit"
    assert not _node_threads()


def test_the_first_error_of_a_node_is_raised_with_its_node_named():
    def failing(rank, world_size, buffer, send, recv):
        if rank == 1:
            raise NotImplementedError("rank 1 is not written yet")
        return recv()

    with pytest.raises(NotImplementedError, match="rank 1 is not written yet") as caught:
        parallel.run_ring(failing, [np.zeros(2)] * 3)
    assert any("node 1" in note for note in getattr(caught.value, "__notes__", ["node 1"]))
    assert not _node_threads()


def test_a_node_that_never_finishes_times_out():
    def endless(send, recv):
        while True:
            time.sleep(0.01)

    with pytest.raises(parallel.NetworkError, match="did not finish within 0.3 s"):
        parallel.run_network({"a": endless}, timeout_s=0.3)


@pytest.mark.parametrize("program, error, match", [
    (lambda send, recv: send(1, [1.0, 2.0]), TypeError, "array must be a numpy array"),
    (lambda send, recv: send(2, np.zeros(2)), parallel.NetworkError, "no link from 0 to 2"),
    (lambda send, recv: send("elsewhere", np.zeros(2)), parallel.NetworkError, "not a node"),
    (lambda send, recv: recv("elsewhere"), parallel.NetworkError, "not a node"),
])
def test_the_network_refuses_wrong_use(program, error, match):
    programs = {0: program, 1: lambda send, recv: None, 2: lambda send, recv: None}
    with pytest.raises(error, match=match):
        parallel.run_network(programs, {(0, 1), (1, 2), (2, 0)})


@pytest.mark.parametrize("call, error, name", [
    (lambda: parallel.run_network({}), TypeError, "programs"),
    (lambda: parallel.run_network({"a": 3}), TypeError, "programs"),
    (lambda: parallel.run_network({"a": lambda s, r: 0}, links=[("a", "a")]), TypeError, "links"),
    (lambda: parallel.run_network({"a": lambda s, r: 0}, timeout_s=0), ValueError, "timeout_s"),
    (lambda: parallel.run_ring(3, [np.zeros(2)]), TypeError, "worker"),
    (lambda: parallel.run_ring(ring_allreduce_reference, np.zeros((2, 3))), TypeError, "buffers"),
    (lambda: parallel.run_ring(ring_allreduce_reference, [np.zeros(2), np.zeros(3)]), ValueError, "buffers"),
    (lambda: parallel.run_ring(ring_allreduce_reference, [np.zeros((2, 2))]), TypeError, "buffers"),
    (lambda: parallel.run_parameter_server(averaging_server, [np.zeros(3)], np.zeros(4)), ValueError, "weights"),
    (lambda: parallel.run_parameter_server(averaging_server, [np.zeros(3)], np.zeros(3), n_servers=0), ValueError,
     "n_servers"),
    (lambda: parallel.run_parameter_server(averaging_server, [np.zeros(3)], np.zeros(3), lr=-1), ValueError, "lr"),
    (lambda: parallel.run_parameter_server("server", [np.zeros(3)], np.zeros(3)), TypeError, "server"),
])
def test_network_runners_validate_their_arguments(call, error, name):
    with pytest.raises(error, match=name):
        call()


@pytest.mark.parametrize("n_workers, length, n_servers", [(1, 5, 1), (4, 10, 1), (3, 11, 4), (6, 7, 7)])
def test_a_sharded_parameter_server_updates_every_worker_and_concentrates_the_traffic(n_workers, length, n_servers):
    grads = parallel.worker_buffers(n_workers, length, seed=3, dtype="float64")
    weights = np.linspace(-1, 1, length)
    run = parallel.run_parameter_server(averaging_server, grads, weights, lr=0.25, n_servers=n_servers)
    expected = weights - 0.25 * np.mean(grads, axis=0)
    for k in range(n_workers):
        np.testing.assert_allclose(run.results[f"worker{k}"], expected, rtol=1e-12)
        assert run.traffic(f"worker{k}") == 2 * grads[0].nbytes
    slices = [len(s) for s in np.array_split(weights, n_servers)]
    for s in range(n_servers):
        assert run.traffic(f"server{s}") == 2 * n_workers * slices[s] * 8
    assert not run.undelivered


def test_sgd_step_averages_the_gradients_and_validates():
    np.testing.assert_allclose(parallel.sgd_step(np.ones(3), [np.zeros(3), np.full(3, 2.0)], lr=0.5), np.full(3, 0.5))
    with pytest.raises(TypeError, match="gradients"):
        parallel.sgd_step(np.ones(3), np.ones((2, 3)), lr=0.1)
    with pytest.raises(ValueError, match="lr"):
        parallel.sgd_step(np.ones(3), [np.ones(3)], lr=0)


def test_max_difference_of_weight_dicts():
    a = {"w": np.array([1.0, 2.0]), "b": np.array([0.5])}
    assert parallel.max_difference(a, {"w": np.array([1.0, 2.5]), "b": np.array([0.5])}) == 0.5
    assert parallel.max_difference({}, {}) == 0.0
    with pytest.raises(ValueError, match="same keys"):
        parallel.max_difference(a, {"w": a["w"]})
    with pytest.raises(TypeError, match="dicts"):
        parallel.max_difference(a, [1.0])


# --------------------------------------------------------------------------- simulated devices

def _model():
    import torch

    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3), torch.nn.Tanh(),
                               torch.nn.Linear(3, 2))


@pytest.mark.parametrize("cuts", [[1], [2], [4], [1, 3], [1, 2, 3, 4]])
def test_split_sequential_equals_the_whole_model_and_logs_every_copy_and_layer(cuts):
    import torch

    model = _model()
    devices = parallel.simulated_devices(len(cuts) + 1)
    forward = parallel.split_sequential(model, devices, cuts)
    x = torch.randn(7, 5)
    with torch.no_grad():
        expected = model(x)
    log = devices[0].log
    log.clear()
    torch.testing.assert_close(forward(x), expected, rtol=0, atol=0)
    bounds = [0, *cuts, len(model)]
    owner = {id(model[i]): f"sim:{d}" for d in range(len(cuts) + 1) for i in range(bounds[d], bounds[d + 1])}
    assert [(device, id(layer)) for device, layer in log.ran] == [(owner[id(layer)], id(layer)) for layer in model]
    assert [(t.source, t.target) for t in log.transfers] == (
        [("host", "sim:0")] + [(f"sim:{d}", f"sim:{d + 1}") for d in range(len(cuts))] + [(f"sim:{len(cuts)}", "host")])
    with torch.no_grad():
        assert [t.nbytes for t in log.device_transfers()] == [model[:c](x).numel() * 4 for c in cuts]
    assert len(log.placements) == len(cuts) + 1


def test_simulated_devices_refuse_computation_across_devices():
    import torch

    devices = parallel.simulated_devices(2)
    layer = torch.nn.Linear(4, 2)
    on_one = devices[1].place(layer)
    with pytest.raises(parallel.DeviceMismatch, match="sim:0 and sim:1"):
        on_one(devices[0].put(torch.randn(3, 4)))
    with pytest.raises(parallel.DeviceMismatch, match="on the host"):
        on_one(torch.randn(3, 4))
    devices[0].place(layer)  # the weights move: the old placement no longer holds them
    with pytest.raises(parallel.DeviceMismatch, match="weights live on sim:0"):
        on_one(devices[1].put(torch.randn(3, 4)))
    moved = devices[0].put(torch.randn(2, 4))
    assert moved.to(devices[0]) is moved and moved.shape == (2, 4) and moved.nbytes == 32
    with pytest.raises(TypeError, match="DeviceTensor supports only"):
        moved + moved
    with pytest.raises(TypeError, match="device"):
        moved.to("cuda:1")
    with pytest.raises(ValueError, match="another group"):
        moved.to(parallel.simulated_devices(1)[0])
    with pytest.raises(TypeError, match="module"):
        devices[0].place(lambda t: t)
    with pytest.raises(TypeError, match="tensor"):
        devices[0].put(np.zeros(3))


@pytest.mark.parametrize("kwargs, error, name", [
    ({"model": "net"}, TypeError, "model"), ({"cuts": [5]}, ValueError, "cuts"), ({"cuts": [3, 1]}, ValueError, "cuts"),
    ({"cuts": [1, 2]}, ValueError, "cuts"), ({"devices": []}, ValueError, "devices"), ({"cuts": [0]}, ValueError, "cuts"),
])
def test_split_sequential_validates(kwargs, error, name):
    arguments = {"model": _model(), "devices": parallel.simulated_devices(2), "cuts": [2], **kwargs}
    with pytest.raises(error, match=name):
        parallel.split_sequential(**arguments)
    with pytest.raises(ValueError, match="count"):
        parallel.simulated_devices(0)


# --------------------------------------------------------------------------- the pipeline schedule

@given(st.integers(1, 6), st.integers(1, 12), st.sampled_from([0.5, 1.0, 3.0]), st.sampled_from([1.0, 2.0]))
@PROPERTY
def test_gpipe_schedule_takes_m_plus_p_minus_1_slots(p, m, f, b):
    events = gpipe_schedule(p, m, f, b)
    assert len(events) == 2 * p * m
    assert max(e.end_s for e in events) == pytest.approx((m + p - 1) * (f + b))
    by_key = {(e.stage, e.kind, e.microbatch): e for e in events}
    for e in events:  # dependencies: activations flow down the stages, gradients flow back up
        if e.kind == "F" and e.stage > 0:
            assert e.start_s >= by_key[(e.stage - 1, "F", e.microbatch)].end_s - 1e-9
        if e.kind == "B":
            assert e.start_s >= by_key[(e.stage, "F", e.microbatch)].end_s - 1e-9
            if e.stage < p - 1:
                assert e.start_s >= by_key[(e.stage + 1, "B", e.microbatch)].end_s - 1e-9
    for stage in range(p):  # one stage does one thing at a time
        own = sorted((e for e in events if e.stage == stage), key=lambda e: e.start_s)
        assert all(a.end_s <= b.start_s + 1e-9 for a, b in zip(own, own[1:]))


def test_plot_pipeline_timeline_draws_every_event():
    events = gpipe_schedule(2, 4)
    ax = parallel.plot_pipeline_timeline(events, title="GPipe", unit="steps")
    assert len(ax.collections) == len(events) and ax.get_title() == "GPipe"
    with pytest.raises(ValueError, match="events"):
        parallel.plot_pipeline_timeline([])
    with pytest.raises(TypeError, match="events"):
        parallel.plot_pipeline_timeline([(0, "F", 0, 0.0, 1.0)])
    with pytest.raises(ValueError, match="unit"):
        parallel.plot_pipeline_timeline(events, unit="hours")


@given(st.integers(1, 6), st.integers(1, 12))
@PROPERTY
def test_idle_fraction_of_an_ideal_schedule_is_the_bubble_formula(p, m):
    assert parallel.idle_fraction(gpipe_schedule(p, m)) == pytest.approx((p - 1) / (m + p - 1), abs=1e-12)


def test_unbalanced_stages_and_transfers_idle_more_than_the_formula():
    balanced = parallel.idle_fraction(gpipe_schedule(2, 4))
    assert parallel.idle_fraction(gpipe_schedule(2, 4, forward_s=[1, 2], backward_s=[2, 4])) == pytest.approx(1 / 3)
    assert parallel.idle_fraction(gpipe_schedule(2, 4, transfer_s=0.5)) > balanced
    shifted = [PipelineEvent(e.stage, e.kind, e.microbatch, e.start_s + 5, e.end_s + 5) for e in gpipe_schedule(2, 4)]
    assert parallel.idle_fraction(shifted) == pytest.approx(balanced)
    with pytest.raises(ValueError, match="events"):
        parallel.idle_fraction([])
    with pytest.raises(ValueError, match="positive time"):
        parallel.idle_fraction([PipelineEvent(0, "F", 0, 1.0, 1.0)])
    with pytest.raises(ValueError, match="forward_s"):
        gpipe_schedule(3, 2, forward_s=[1.0, 2.0])
    with pytest.raises(ValueError, match="transfer_s"):
        gpipe_schedule(3, 2, transfer_s=-1)


@pytest.mark.parametrize("kwargs, error, name", [({"stages": 0}, ValueError, "stages"),
                                                 ({"microbatches": 1.5}, TypeError, "microbatches"),
                                                 ({"forward_s": 0}, ValueError, "forward_s")])
def test_gpipe_schedule_validates(kwargs, error, name):
    with pytest.raises(error, match=name):
        gpipe_schedule(**{"stages": 2, "microbatches": 4, **kwargs})


@pytest.mark.slow  # two processes importing PyTorch; the lesson's execution runs a pipeline too
def test_run_pipeline_returns_step_times_busy_fractions_and_timelines():
    config = PipelineConfig(width=64, batch=16, steps=2, warmup=1)
    result = parallel.run_pipeline(config, (1, 2, 4), timeout_s=60)
    assert set(result.step_times_s) == {1, 2, 4}
    for m in (1, 2, 4):
        assert len(result.step_times_s[m]) == config.steps and all(t > 0 for t in result.step_times_s[m])
        assert all(0 < f <= 1 for f in result.busy_fraction[m])
        events = result.timelines[m]
        assert all(isinstance(e, PipelineEvent) for e in events) and len(events) == 2 * 2 * m
        assert {(e.stage, e.kind) for e in events} == {(0, "F"), (0, "B"), (1, "F"), (1, "B")}
        assert result.median_step_s(m) > 0
    assert len(result.single_process_s) == config.steps and result.single_process_median_s > 0


@pytest.mark.parametrize("kwargs, error, name", [({"width": 0}, ValueError, "width"), ({"cut_width": 1.5}, TypeError, "cut_width"),
                                                 ({"hidden_layers": -1}, ValueError, "hidden_layers"),
                                                 ({"steps": 0}, ValueError, "steps"), ({"lr": 0}, ValueError, "lr")])
def test_pipeline_config_validates_its_fields(kwargs, error, name):
    with pytest.raises(error, match=name):
        PipelineConfig(**kwargs)


def test_pipeline_stages_hand_over_narrow_activations():
    config = PipelineConfig(width=32, cut_width=8, hidden_layers=2, batch=4)
    assert config.message_bytes == 4 * 8 * 4
    import torch

    x = torch.zeros(4, 8)
    middle = parallel._pipeline_stage(config, 0)(x)
    assert middle.shape == (4, 8) and parallel._pipeline_stage(config, 1)(middle).shape == (4, 1)


@pytest.mark.parametrize("counts, error", [((), ValueError), ((2, 2), ValueError), ((1, 17), ValueError),
                                           ((0,), ValueError), ("12", TypeError), ((1.0,), TypeError)])
def test_run_pipeline_validates_microbatch_counts(counts, error):
    with pytest.raises(error, match="microbatch_counts"):
        parallel.run_pipeline(PipelineConfig(batch=16), counts)


# --------------------------------------------------------------------------- TensorFlow logical devices

@pytest.mark.slow  # starts TensorFlow in a fresh interpreter (several seconds); the lesson's execution covers it too
def test_tf_logical_devices_are_configured_once_and_a_rerun_says_so():
    """In a fresh interpreter: two logical CPUs, an op, the same request again (a message), another (a clear error)."""
    script = textwrap.dedent("""
        from gpucourse import parallel
        print("FIRST", parallel.configure_tf_devices(2, kind="CPU"))
        import tensorflow as tf
        print("SUM", float(tf.reduce_sum(tf.ones(3))))
        print("AGAIN", parallel.configure_tf_devices(2, kind="CPU"))
        try:
            parallel.configure_tf_devices(3, kind="CPU")
        except RuntimeError as error:
            print("ERROR", error)
    """)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "TF_ENABLE_ONEDNN_OPTS": "0"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "FIRST ['/device:CPU:0', '/device:CPU:1']" in lines and "SUM 3.0" in lines
    assert any(line.startswith("TensorFlow already has these 2 logical CPU devices") for line in lines)
    assert "AGAIN ['/device:CPU:0', '/device:CPU:1']" in lines
    error = next(line for line in lines if line.startswith("ERROR"))
    assert "already started" in error and "Restart the kernel" in error
    assert done.stderr == "", "TensorFlow's start-up lines must not reach stderr"


@pytest.mark.parametrize("kwargs, error, name", [({"count": 0}, ValueError, "count"), ({"kind": "TPU"}, ValueError, "kind"),
                                                 ({"kind": "cpu"}, ValueError, "kind"),
                                                 ({"memory_limit_mb": 0}, ValueError, "memory_limit_mb")])
def test_configure_tf_devices_validates_before_starting_tensorflow(kwargs, error, name):
    with pytest.raises(error, match=name):
        parallel.configure_tf_devices(**kwargs)
