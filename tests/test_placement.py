"""Tests of gpucourse.placement: device names, TensorFlow's configuration, the placement log, transfer bandwidth.

TensorFlow keeps its configuration for the life of a process, so every test that initialises TensorFlow runs in a
child process; those children start together (one module fixture) to keep the file fast.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from concurrent.futures import ThreadPoolExecutor

import pytest

torch = pytest.importorskip("torch")

from notebook_utils import failure_of_test_cell, right_answers  # noqa: E402

from gpucourse import placement  # noqa: E402
from gpucourse.placement import (PCIE_SPECS, TensorFlowSetup, TransferMeasurement,  # noqa: E402
                                 configure_tensorflow, measure_transfer_bandwidth, tf_device_name, tf_placement_log)

HAS_CUDA = torch.cuda.is_available()
HAS_TF = importlib.util.find_spec("tensorflow") is not None
needs_tf = pytest.mark.skipif(not HAS_TF, reason="needs TensorFlow")
# Tests that start TensorFlow in child processes (a few CPU-seconds each) are marked slow: not in `make test-fast`.


# --------------------------------------------------------------------------- child processes

_FRESH = """
from gpucourse.placement import configure_tensorflow
first = configure_tensorflow(memory_growth=True, logical_cpus=2)
same = configure_tensorflow(memory_growth=True, logical_cpus=2)
other = configure_tensorflow(memory_growth=True, logical_cpus=3)
try:
    configure_tensorflow(logical_cpus=3, strict=True)
    strict = "returned"
except RuntimeError as error:
    strict = str(error)
"""

_AFTER_AN_OP = """
import tensorflow as tf
tf.constant(1.0) + 1.0  # TensorFlow initialises here, with one logical CPU
from gpucourse.placement import configure_tensorflow
first = configure_tensorflow(memory_growth=True, logical_cpus=2)
same = other = first
strict = ""
"""

_REPORT = """
import json, sys
def as_dict(setup):
    return {"applied": setup.applied, "message": setup.message, "devices": list(setup.logical_devices),
            "gpus": list(setup.gpus), "growth": list(setup.memory_growth), "log": len(setup.startup_log),
            "text": str(setup)}
print("RESULT" + json.dumps({"first": as_dict(first), "same": as_dict(same), "other": as_dict(other),
                             "strict": strict, "tf_loaded": "tensorflow" in sys.modules}))
"""

_LIGHT = """
import sys
import gpucourse, gpucourse.placement
print("RESULT" + str(["torch" in sys.modules, "tensorflow" in sys.modules]))
"""


def _child(code: str) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter with the course's quiet settings unset (as a learner's kernel starts)."""
    quiet = ("TF_CPP_MIN_LOG_LEVEL", "TF_ENABLE_ONEDNN_OPTS")
    env = {key: value for key, value in os.environ.items() if key not in quiet}
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=300)


def _result(done: subprocess.CompletedProcess):
    """The value a child printed after 'RESULT' (failing with the child's stderr if it crashed)."""
    assert done.returncode == 0, done.stderr[-2000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    return line.removeprefix("RESULT")


_LOG_CODE = """
a = tf.ones((2, 2))
with tf.device("/GPU:0"):
    b = tf.matmul(a, a)
"""


@pytest.fixture(scope="module")
def children() -> dict:
    """Start every TensorFlow child process at once; return their outcomes by name."""
    if not HAS_TF:
        pytest.skip("needs TensorFlow")
    jobs = {"fresh": lambda: _child(_FRESH + _REPORT), "after_op": lambda: _child(_AFTER_AN_OP + _REPORT),
            "log": lambda: tf_placement_log(_LOG_CODE, timeout_s=240)}
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


# --------------------------------------------------------------------------- tf_device_name

@pytest.mark.parametrize("device, expected", [
    ("cpu", "/CPU:0"), ("cuda", "/GPU:0"), ("cuda:0", "/GPU:0"), ("cuda:3", "/GPU:3"), ("mps", "/GPU:0"),
    (torch.device("cpu"), "/CPU:0"), (torch.device("cuda", 2), "/GPU:2"),
])
def test_tf_device_name_maps_torch_devices(device, expected):
    assert tf_device_name(device) == expected


def test_tf_device_name_defaults_to_the_picked_device(no_gpu):
    assert tf_device_name() == "/CPU:0"


@pytest.mark.parametrize("bad, error", [(3, TypeError), (["cpu"], TypeError), ("gpu", ValueError), ("meta", ValueError),
                                        ("cuda:x", ValueError), ("CPU", ValueError), ("/GPU:0", ValueError)])
def test_tf_device_name_rejects_bad_devices_by_name(bad, error):
    with pytest.raises(error, match="device"):
        tf_device_name(bad)


# --------------------------------------------------------------------------- PCIe figures

def test_pcie_specs_are_the_specification_figures():
    assert PCIE_SPECS["PCIe 3.0 x16"] == pytest.approx(15.754e9, rel=1e-3)
    assert PCIE_SPECS["PCIe 4.0 x16"] == pytest.approx(2 * PCIE_SPECS["PCIe 3.0 x16"])
    assert PCIE_SPECS["PCIe 5.0 x16"] == pytest.approx(4 * PCIE_SPECS["PCIe 3.0 x16"])


# --------------------------------------------------------------------------- configure_tensorflow

@pytest.mark.parametrize("kwargs, error, name", [
    ({"memory_growth": "yes"}, TypeError, "memory_growth"), ({"memory_growth": 1}, TypeError, "memory_growth"),
    ({"logical_cpus": 0}, ValueError, "logical_cpus"), ({"logical_cpus": 2.0}, TypeError, "logical_cpus"),
    ({"logical_cpus": True}, TypeError, "logical_cpus"), ({"strict": None}, TypeError, "strict"),
])
def test_configure_tensorflow_rejects_bad_arguments_before_importing(kwargs, error, name):
    with pytest.raises(error, match=name):
        configure_tensorflow(**kwargs)


def test_importing_the_package_loads_no_framework():
    assert json.loads(_result(_child(_LIGHT)).lower()) == [False, False]


@pytest.mark.slow
@needs_tf
def test_configure_before_the_first_op_applies_and_captures_startup_noise(children):
    done = children["fresh"]
    report = json.loads(_result(done))
    first = report["first"]
    assert first["applied"] and first["message"] == ""
    assert [name.rsplit("/", 1)[-1] for name in first["devices"] if "CPU" in name] == ["device:CPU:0", "device:CPU:1"]
    assert len(first["growth"]) == len(first["gpus"]) and all(first["growth"])
    assert "TensorFlow" in first["text"] and "CPU:1" in first["text"]
    assert "absl" not in done.stderr and "cudart_stub" not in done.stderr, done.stderr  # kept in startup_log instead


@pytest.mark.slow
@needs_tf
def test_calling_again_with_the_same_settings_is_harmless(children):
    same = json.loads(_result(children["fresh"]))["same"]
    assert same["applied"] and same["message"] == "" and len([d for d in same["devices"] if "CPU" in d]) == 2


@pytest.mark.slow
@needs_tf
def test_calling_after_initialisation_explains_instead_of_crashing(children):
    report = json.loads(_result(children["fresh"]))
    other = report["other"]
    assert not other["applied"]
    assert "already initialised" in other["message"] and "restart the kernel" in other["message"]
    assert "2 logical device(s), not 3" in other["message"]
    assert len([d for d in other["devices"] if "CPU" in d]) == 2  # unchanged
    assert other["message"] in other["text"]
    assert report["strict"].startswith("TensorFlow was already initialised")


@pytest.mark.slow
@needs_tf
def test_an_op_before_configuring_is_reported(children):
    first = json.loads(_result(children["after_op"]))["first"]
    assert not first["applied"] and "1 logical device(s), not 2" in first["message"]
    assert len([d for d in first["devices"] if "CPU" in d]) == 1


def test_setup_text_names_gpus_growth_message_and_log():
    setup = TensorFlowSetup(version="2.99", gpus=("/physical_device:GPU:0",), memory_growth=(True,),
                            logical_devices=("/device:CPU:0", "/device:GPU:0"), applied=False,
                            message="cannot change now", startup_log=("a", "b"))
    text = str(setup)
    assert "TensorFlow 2.99" in text and "CPU:0, GPU:0" in text and "GPU:0 on" in text
    assert "cannot change now" in text and "2 start-up log line(s)" in text
    quiet = TensorFlowSetup("2.99", (), (), ("/device:CPU:0",), True, "")
    assert "no GPU visible" in str(quiet) and "start-up" not in str(quiet)


def test_captured_stderr_collects_c_and_python_writes():
    lines: list[str] = []
    with placement._captured_stderr(lines):
        os.write(2, b"written to descriptor 2\n")
        print("written to sys.stderr", file=sys.stderr)
    assert lines == ["written to descriptor 2", "written to sys.stderr"]


# --------------------------------------------------------------------------- tf_placement_log

def test_placement_log_rejects_bad_arguments():
    with pytest.raises(TypeError, match="code"):
        tf_placement_log(b"x = 1")
    with pytest.raises(ValueError, match="timeout_s"):
        tf_placement_log("x = 1", timeout_s=0)


def test_placement_log_keeps_placement_lines_without_log_prefixes(monkeypatch):
    stderr = ("WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
              "I0000 00:00:1795307638.926094   23678 execute.cc:1775] Executing op MatMul in device "
              "/job:localhost/replica:0/task:0/device:CPU:0\n"
              "I0000 00:00:1795307638.962041   23678 placer.cc:162] Relu: (Relu): "
              "/job:localhost/replica:0/task:0/device:CPU:0\n"
              "I0000 00:00:1795307641.684452   24665 port.cc:153] oneDNN custom operations are on.\n")
    monkeypatch.setattr(placement.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, "", stderr))
    assert tf_placement_log("pass") == [
        "Executing op MatMul in device /job:localhost/replica:0/task:0/device:CPU:0",
        "Relu: (Relu): /job:localhost/replica:0/task:0/device:CPU:0"]


def test_placement_log_reports_a_failing_snippet(monkeypatch):
    stderr = "Traceback (most recent call last):\nNameError: name 'x' is not defined\n"
    failed = subprocess.CompletedProcess([], 1, "", stderr)
    monkeypatch.setattr(placement.subprocess, "run", lambda *a, **k: failed)
    with pytest.raises(RuntimeError, match="NameError"):
        tf_placement_log("x")


def test_placement_log_reports_a_timeout(monkeypatch):
    def too_slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs["timeout"])

    monkeypatch.setattr(placement.subprocess, "run", too_slow)
    with pytest.raises(RuntimeError, match="timeout_s=5"):
        tf_placement_log("pass", timeout_s=5)


@pytest.mark.slow
@needs_tf
def test_placement_log_shows_where_ops_ran(children):
    executed = [line for line in children["log"] if line.startswith("Executing op")]
    matmul = next(line for line in executed if line.startswith("Executing op MatMul"))
    expected = "GPU:0" if HAS_CUDA else "CPU:0"  # a GPU request is soft-placed on the CPU where there is none
    assert matmul.endswith(f"device:{expected}")


# --------------------------------------------------------------------------- transfer bandwidth

@pytest.mark.parametrize("kwargs, error, name", [
    ({"nbytes": 0}, ValueError, "nbytes"), ({"nbytes": 2.5}, TypeError, "nbytes"),
    ({"nbytes": 1024, "pinned": "yes"}, TypeError, "pinned"),
    ({"nbytes": 1024, "non_blocking": 1}, TypeError, "non_blocking"),
    ({"nbytes": 1024, "repeats": 0}, ValueError, "repeats"), ({"nbytes": 1024, "device": "tpu"}, ValueError, "device"),
    ({"nbytes": 1024, "device": 7}, TypeError, "device"),
    ({"nbytes": 1024, "pinned": True, "device": "cpu"}, ValueError, "pinned"),
])
def test_measure_transfer_rejects_bad_arguments_by_name(kwargs, error, name):
    with pytest.raises(error, match=name):
        measure_transfer_bandwidth(**kwargs)


def test_measure_transfer_on_a_cpu_is_labelled_a_host_copy(no_gpu):
    result = measure_transfer_bandwidth(2**20, repeats=3)
    assert result.device == "cpu" and result.nbytes == 2**20 and not result.host_to_device
    assert result.median_s > 0 and result.bandwidth == pytest.approx(2**20 / result.median_s)
    assert "host copy" in result.kind and "not a host-to-device transfer" in result.kind
    assert "GB/s" in str(result) and "median of 3" in str(result)


def test_transfer_measurement_arithmetic_and_labels():
    pinned = TransferMeasurement(nbytes=2 * 10**9, median_s=0.1, device="cuda:0", pinned=True, non_blocking=True,
                                 repeats=5)
    assert pinned.bandwidth == pytest.approx(2e10) and pinned.host_to_device
    assert pinned.kind == "host to cuda:0, pinned memory, non_blocking"
    assert "20.00 GB/s" in str(pinned)
    pageable = TransferMeasurement(10**6, 1e-3, "cuda:1", False, False, 7)
    assert pageable.kind == "host to cuda:1, pageable memory"


# --------------------------------------------------------------------------- on a GPU

@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_pinned_and_pageable_transfers_to_the_gpu():
    pageable = measure_transfer_bandwidth(64 * 2**20, pinned=False, device="cuda")
    pinned = measure_transfer_bandwidth(64 * 2**20, pinned=True, device="cuda:0", non_blocking=True)
    for result in (pageable, pinned):
        assert result.host_to_device and 1e9 < result.bandwidth < 1e12, result
    assert "pinned memory" in pinned.kind and "pageable memory" in pageable.kind


@pytest.mark.gpu
@pytest.mark.skipif(not HAS_CUDA, reason="needs a CUDA GPU")
def test_the_picked_gpu_is_tensorflows_first_gpu():
    assert tf_device_name() == "/GPU:0"


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not (HAS_CUDA and HAS_TF), reason="needs a CUDA GPU and TensorFlow")
def test_memory_growth_is_on_for_every_gpu(children):
    first = json.loads(_result(children["fresh"]))["first"]
    assert first["gpus"] and first["growth"] == [True] * len(first["gpus"])


# --------------------------------------------------------------------------- moving batches, transfer times, layouts

def test_move_batch_moves_every_tensor_and_keeps_container_types():
    import collections

    torch = pytest.importorskip("torch")
    Pair = collections.namedtuple("Pair", "a b")
    array = object()
    batch = {"x": [torch.ones(2), (torch.zeros(1), "name")], 3: Pair(torch.ones(1), array), "n": 5}
    moved = placement.move_batch(batch, "meta")
    assert list(moved) == ["x", 3, "n"] and type(moved["x"]) is list and type(moved["x"][1]) is tuple
    assert moved["x"][0].device.type == "meta" and moved["x"][1][0].device.type == "meta"
    assert type(moved[3]) is Pair and moved[3].a.device.type == "meta" and moved[3].b is array
    assert moved["n"] == 5 and batch["x"][0].device.type == "cpu"
    encoded = placement.move_batch(collections.UserDict({"input_ids": torch.ones(2), "mask": [torch.ones(1)]}), "meta")
    assert type(encoded) is dict and encoded["input_ids"].device.type == encoded["mask"][0].device.type == "meta"


@pytest.mark.parametrize("kwargs, error, name", [
    ({"device": 3}, TypeError, "device"),
    ({"device": "cpu", "non_blocking": 1}, TypeError, "non_blocking"),
])
def test_move_batch_rejects_bad_arguments_by_name(kwargs, error, name):
    with pytest.raises(error, match=name):
        placement.move_batch([], **kwargs)


def test_transfer_seconds_is_latency_plus_bytes_over_bandwidth():
    assert placement.transfer_seconds(4_000_000, 16e9) == pytest.approx(2.5e-4, rel=1e-12)
    assert placement.transfer_seconds(0, 1e9, latency_s=7e-6) == pytest.approx(7e-6, rel=1e-12)
    with pytest.raises(ValueError, match="bytes_per_s"):
        placement.transfer_seconds(10, 0)
    with pytest.raises(ValueError, match="nbytes"):
        placement.transfer_seconds(-1, 1e9)


@pytest.mark.parametrize("name, short", [("/GPU:0", "GPU:0"), ("/device:CPU:1", "CPU:1"), ("/cpu:0", "CPU:0"),
                                         ("/job:localhost/replica:0/task:0/device:GPU:3", "GPU:3")])
def test_short_tf_device_spellings(name, short):
    pytest.importorskip("tensorflow")
    assert placement.short_tf_device(name) == short


def test_short_tf_device_rejects_names_without_a_device():
    pytest.importorskip("tensorflow")
    with pytest.raises(ValueError, match="name"):
        placement.short_tf_device("/job:localhost")
    with pytest.raises(TypeError, match="name"):
        placement.short_tf_device(None)


def test_keras_weights_transposes_kernels_and_skips_missing_biases():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(3, 5, bias=False), torch.nn.ReLU(),
                                torch.nn.Sequential(torch.nn.Linear(5, 2)))
    weights = placement.keras_weights(model)
    assert [w.shape for w in weights] == [(3, 5), (5, 2), (2,)]
    assert (weights[0] == model[0].weight.detach().numpy().T).all()
    with pytest.raises(TypeError, match="model"):
        placement.keras_weights([1, 2])


# --------------------------------------------------------------------------- hidden synchronisations, choosing a GPU

def test_count_host_syncs_sees_value_reads_masks_and_copies_and_restores_tensor_methods() -> None:
    import torch

    originals = {name: getattr(torch.Tensor, name) for name in ("tolist", "numpy", "cpu", "__repr__")}
    x = torch.randn(8)
    with placement.count_host_syncs() as syncs:
        x.sum()
        x.max() * 2
        x[:3]
        x[torch.tensor([0, 2])]
    assert syncs.count == 0 and str(syncs) == "no host synchronisation"
    with placement.count_host_syncs() as syncs:
        x.sum().item()
        if x.max() > 100:
            pass
        x[x > 0]
        x.tolist()
        x.cpu()
    kinds = [what for what, _ in syncs.events]
    assert kinds.count("aten::_local_scalar_dense") == 2 and "aten::index (boolean mask)" in kinds
    assert "Tensor.tolist" in kinds and "Tensor.cpu" in kinds and syncs.count == 5
    assert all("test_placement.py" in where for _, where in syncs.events)
    assert {name: getattr(torch.Tensor, name) for name in originals} == originals


def test_train_epoch_matches_a_plain_loop_without_synchronising() -> None:
    import copy

    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(3, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    batches = [(torch.randn(4, 3), torch.randint(0, 2, (4,))) for _ in range(3)]
    twin = copy.deepcopy(net)
    optimizer = torch.optim.SGD(twin.parameters(), lr=0.1)
    losses = []
    for inputs, labels in batches:
        loss = F.cross_entropy(twin(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.detach()))
    with placement.count_host_syncs() as syncs:
        mean = placement.train_epoch(net, batches, torch.optim.SGD(net.parameters(), lr=0.1), "cpu")
    assert syncs.count == 0 and mean.dim() == 0 and not mean.requires_grad
    assert abs(float(mean) - sum(losses) / 3) < 1e-6
    assert all(torch.allclose(a, b) for a, b in zip(net.parameters(), twin.parameters()))
    meta = copy.deepcopy(net).to("meta")
    assert placement.train_epoch(meta, batches, torch.optim.SGD(meta.parameters(), lr=0.1), "meta").device.type == "meta"
    with pytest.raises(ValueError, match="batches"):
        placement.train_epoch(net, [], torch.optim.SGD(net.parameters(), lr=0.1), "cpu")


@pytest.mark.skipif(not HAS_TF, reason="the lesson's imports cell imports TensorFlow")
@pytest.mark.parametrize("grade_id, name, source", right_answers("08_placement"),
                         ids=[f"{g}-{n}" for g, n, _ in right_answers("08_placement")])
def test_lesson_08_correct_alternatives_pass(grade_id: str, name: str, source: str) -> None:
    """Correct answers other than the model answer pass lesson 08's tests, visible and hidden."""
    assert failure_of_test_cell("08_placement", grade_id, source) is None, f"{name} failed {grade_id}"


def test_triton_loads_before_tensorflow_so_torch_compile_still_works_after_it(tmp_path):
    """A process that imports TensorFlow through the course, then torch._dynamo (which loads triton), must not abort
    (both bundle LLVM; TensorFlow first, then triton, aborts with 'LLVM ERROR: inconsistency in registered
    CommandLine options')."""
    import subprocess
    import sys

    script = ("import gpucourse; gpucourse.import_tensorflow()\n"
              "import torch, torch._dynamo\n"
              "print(torch.compile(lambda x: x + 1, backend='eager')(torch.ones(2)).tolist())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().endswith("[2.0, 2.0]")


def test_count_host_syncs_sees_blocking_copies_to_a_device_and_pin_marks_pinned_memory() -> None:
    import torch

    x = torch.randn(8)
    pinned = placement.pin(x)
    assert placement.is_pinned(pinned) and not placement.is_pinned(x) and torch.equal(pinned, x)
    with placement.count_host_syncs() as syncs:
        x.to("meta")                                       # blocking: non_blocking=False
        x.to("meta", non_blocking=True)                    # pageable: still blocking
        pinned.to("meta")                                  # pinned, but non_blocking=False
        pinned.clone().to("meta", non_blocking=True)       # a pageable copy of pinned memory
        torch.empty(8, device="meta").copy_(x)             # copy_ from pageable memory
    assert syncs.count == 5 and all("blocking host-to-device copy" in what for what, _ in syncs.events)
    with placement.count_host_syncs() as syncs:
        pinned.to("meta", non_blocking=True)
        torch.empty(8, device="meta").copy_(pinned, non_blocking=True)
        x.to("cpu")
        x.to(torch.float64)
    assert syncs.count == 0, str(syncs)
    with placement.count_host_syncs() as syncs:
        torch.tensor([1.0, 2.0], device="meta")            # built on the host, then copied with non_blocking=False
        torch.as_tensor([1.0], device=torch.device("meta"))
        torch.asarray([1, 2], device="meta")
    assert [what.split()[0] for what, _ in syncs.events] == ["torch.tensor", "torch.as_tensor", "torch.asarray"]
    assert all(what.endswith("(blocking host-to-device copy)") for what, _ in syncs.events)
    on_device = torch.ones(2, device="meta")
    with placement.count_host_syncs() as syncs:
        on_device.new_tensor([1.0, 2.0])                   # x.new_tensor(data): built on the host, copied to x's device
        x.new_tensor([3.0], device="meta")
        x.new_tensor([1.0, 2.0])                           # on the host: no copy
        on_device.new_tensor([1.0], device="cpu")
        on_device.new_zeros(3)                             # made on the device: no copy
    assert [what.split()[0] for what, _ in syncs.events] == ["Tensor.new_tensor"] * 2, str(syncs)
    assert all(what.endswith("(blocking host-to-device copy)") for what, _ in syncs.events)
    with placement.count_host_syncs() as syncs:
        torch.tensor([1.0, 2.0])                           # on the host: no copy
        torch.tensor(2.0, device="cpu")
        torch.arange(3, device="meta")                     # computed on the device: no copy
        torch.zeros(2, device="meta")
    assert syncs.count == 0, str(syncs)
    with pytest.raises(TypeError, match="tensor"):
        placement.pin([1.0])
    with pytest.raises(ValueError, match="tensor"):
        placement.pin(torch.ones(2, device="meta"))


def test_count_host_syncs_sees_unique_repeat_interleave_downloads_and_cuda_synchronize(monkeypatch) -> None:
    import torch

    calls = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: calls.append(device))
    x = torch.tensor([1, 2, 2, 3])
    with placement.count_host_syncs() as syncs:
        torch.unique(x)
        x.unique(return_counts=True)
        torch.unique(x, dim=0)
        torch.unique_consecutive(x)
        x.repeat_interleave(x)                             # the output's size is the sum of the repeats
        torch.cuda.synchronize()
    kinds = [what for what, _ in syncs.events]
    assert kinds == ["aten::_unique2", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive",
                     "aten::repeat_interleave", "torch.cuda.synchronize"], kinds
    assert calls == [None] and torch.cuda.synchronize is not None
    with placement.count_host_syncs() as syncs:
        x.repeat_interleave(2)                             # a fixed size: no synchronisation
        x.to("cpu")
    assert syncs.count == 0, str(syncs)
    on_device = torch.ones(2, device="meta")
    with placement.count_host_syncs() as syncs:
        for download in (lambda: on_device.to("cpu"), lambda: torch.empty(2).copy_(on_device), on_device.cpu):
            with pytest.raises(NotImplementedError):   # meta has no data to copy back, but the attempt is recorded
                download()
    assert [what for what, _ in syncs.events] == ["aten::_to_copy (device-to-host copy)",
                                                  "aten::copy_ (device-to-host copy)", "Tensor.cpu"], str(syncs)
    assert torch.cuda.synchronize is not None and torch.cuda.synchronize.__name__ == "<lambda>"


def test_a_view_of_pinned_memory_is_pinned_and_long_reports_are_shortened() -> None:
    import torch

    pinned = placement.pin(torch.randn(8))
    assert placement.is_pinned(pinned[2:]) and placement.is_pinned(pinned.view(2, 4))
    assert not placement.is_pinned(pinned.clone()) and not placement.is_pinned(torch.ones(2, device="meta"))
    with placement.count_host_syncs() as syncs:
        pinned[1:].to("meta", non_blocking=True)
    assert syncs.count == 0, str(syncs)
    with placement.count_host_syncs() as syncs:
        for _ in range(12):
            pinned.sum().item()
    assert str(syncs).splitlines()[-1] == "  ... and 2 more" and len(str(syncs).splitlines()) == 12
