"""Tests of gpucourse.profiler: steps with planted bottlenecks, profiled on the CPU, and the reading that names them
(real profiles on a busy machine: each diagnosis gets three tries)."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
os.environ.setdefault("KINETO_LOG_LEVEL", "6")

from gpucourse import profiler  # noqa: E402
from gpucourse.profiler import PlantedStep, bottleneck, profile_steps  # noqa: E402

ROLES = ("data", "forward", "backward", "optimizer")
pytestmark = pytest.mark.slow  # real profiles: the profiler's first start alone takes seconds on a small machine


@pytest.fixture(autouse=True)
def one_thread(one_torch_thread):
    """Every test here runs with one torch thread (tests/conftest.py)."""


def diagnosed(expected: dict, stages, plants, calls=None) -> bool:
    """True once a profile of the planted step reads as ``expected``; three tries (a stall on a busy machine can land
    anywhere)."""
    step = PlantedStep(stages, plants, calls=calls)
    return any(bottleneck(profile_steps(step, steps=2), stages) == expected for _ in range(3))


@pytest.mark.parametrize("stage, plant, op, kind", [
    ("data", "sleep", None, "waiting"),
    ("forward", "python", None, "waiting"),
    ("forward", "linear", "aten::addmm", "op-bound"),
    ("optimizer", "mm", "aten::mm", "op-bound"),
    ("backward", "sort", "aten::sort", "op-bound"),
    ("optimizer", "add", "aten::add", "launch-bound"),
])
def test_bottleneck_names_the_planted_stage_operation_and_kind(stage, plant, op, kind):
    assert diagnosed({"stage": stage, "op": op, "kind": kind}, ROLES, {stage: (plant, 1.0)})


def test_tiny_calls_in_a_stage_that_waits_do_not_make_it_launch_bound():
    """Lesson 09's starved loop: a collate's few hundred tiny calls are a sliver of a stage that waits on decoding."""
    assert diagnosed({"stage": "data", "op": None, "kind": "waiting"}, ROLES, {"data": [("sleep", 1.0), ("add", 0.05)]})


def test_repeated_stage_calls_add_up():
    names = ("fetch", "fwd", "bwd", "step")
    expected = {"stage": "fwd", "op": "aten::mm", "kind": "op-bound"}
    assert diagnosed(expected, names, {"fwd": ("mm", 0.4), "step": ("cumsum", 0.7)}, calls={"fwd": 6, "bwd": 6})


def test_every_role_runs_once_per_call_and_the_profile_has_every_stage():
    step = PlantedStep(("a", "b", "c", "d"))
    prof = profile_steps(step, steps=2, warmup=0)
    names = [event.name for event in prof.events()]
    assert all(names.count(stage) == 2 for stage in "abcd")
    assert "aten::addmm" in names


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="stages"):
        PlantedStep(("data", "forward", "backward"))
    with pytest.raises(ValueError, match="stages"):
        PlantedStep(("a", "a", "b", "c"))
    with pytest.raises(ValueError, match="plant"):
        PlantedStep(ROLES, {"data": ("teleport", 1.0)})
    with pytest.raises(ValueError, match="plants"):
        PlantedStep(ROLES, {"loss": ("sleep", 1.0)})
    with pytest.raises(ValueError, match="calls"):
        PlantedStep(ROLES, calls={"loss": 2})
    with pytest.raises(ValueError, match="amount"):
        PlantedStep(ROLES, {"data": ("sleep", 0.0)})
    with pytest.raises(TypeError, match="step"):
        profile_steps("not callable")
    with pytest.raises(TypeError, match="prof"):
        bottleneck([], ROLES)
    prof = profile_steps(PlantedStep(ROLES), steps=1, warmup=0)
    with pytest.raises(ValueError, match="loss"):
        bottleneck(prof, ("data", "loss"))
    assert set(profiler.KINDS) == {"waiting", "launch-bound", "op-bound"}


def test_backward_on_autograd_thread_belongs_to_its_range():
    """On a GPU autograd runs backward on its own thread: the main thread's `backward` range has no children, and
    its operations are top-level events of another thread inside the range's time (v3r2 major 3)."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    def event(name, start, cpu_self, children=(), thread=1):
        children = list(children)
        node = SimpleNamespace(name=name, thread=thread, cpu_parent=None, device_type=DeviceType.CPU,
                               cpu_children=children, self_cpu_time_total=cpu_self,
                               cpu_time_total=cpu_self + sum(c.cpu_time_total for c in children))
        node.time_range = SimpleNamespace(start=start, end=start + node.cpu_time_total)
        for child in children:
            child.cpu_parent = node
        return node

    forward = event("forward", 0.0, 50.0, [event("aten::addmm", 10.0, 30.0)])
    mm = event("aten::mm", 120.0, 800.0, thread=2)
    evaluate = event("autograd::engine::evaluate_function: MmBackward0", 110.0, 5.0,
                     [event("MmBackward0", 115.0, 5.0, [mm], thread=2)], thread=2)
    backward = event("backward", 100.0, 1000.0)
    flat = [forward, *forward.cpu_children, backward, evaluate, *evaluate.cpu_children, mm]
    prof = SimpleNamespace(events=lambda: flat)
    assert bottleneck(prof, ["forward", "backward"]) == {"stage": "backward", "op": "aten::mm", "kind": "op-bound"}


def test_bottleneck_counts_calls_per_run_of_the_stage():
    """60 tiny calls per run are not launch-bound however many steps were profiled; 146 calls of several operations
    per run are, although no single operation ran 100 times (lesson 10 review v3r3, major 4)."""
    from types import SimpleNamespace

    from torch.autograd import DeviceType

    def profile(runs, ops):
        flat, clock = [], 0.0
        for _ in range(runs):
            for stage, own, rows in (("data", 100.0, []), ("forward", 20.0, ops)):
                children = [SimpleNamespace(name=name, self_cpu_time_total=us, cpu_time_total=us, cpu_children=[],
                                            thread=1, device_type=DeviceType.CPU)
                            for name, calls, us in rows for _ in range(calls)]
                node = SimpleNamespace(name=stage, self_cpu_time_total=own, cpu_children=children, thread=1,
                                       cpu_time_total=own + sum(c.cpu_time_total for c in children),
                                       device_type=DeviceType.CPU, cpu_parent=None)
                node.time_range = SimpleNamespace(start=clock, end=clock + node.cpu_time_total)
                for child in children:
                    child.cpu_parent = node
                    child.time_range = node.time_range
                clock = node.time_range.end + 1.0
                flat += [node, *children]
        return SimpleNamespace(events=lambda: list(flat))

    sixty = [("aten::add", 60, 8.0)]
    for runs in (1, 5):
        assert bottleneck(profile(runs, sixty), ["data", "forward"]) == {
            "stage": "forward", "op": "aten::add", "kind": "op-bound"}
    block = [("aten::mul", 40, 3.0), ("aten::add", 40, 2.5), ("aten::view", 50, 1.0), ("aten::addmm", 16, 6.0)]
    for runs in (1, 2):
        assert bottleneck(profile(runs, block), ["data", "forward"]) == {
            "stage": "forward", "op": "aten::mul", "kind": "launch-bound"}


def test_synthetic_gpu_profile_has_the_shape_of_a_cuda_profile():
    """Exercise 1's tests build GPU profiles with it: CPU-side runs (a repeated stage once per run), a device-side copy
    of each range, backward's operations on autograd's thread inside its range, totals that include the children."""
    from torch.autograd import DeviceType

    stages = {"data": (500.0, []), "fwd": (80.0, [("aten::addmm", 4, 9.0, 100.0, "aten::linear")]),
              "bwd": (40.0, [("aten::mm", 4, 12.0, 400.0, "MmBackward0")])}
    events = profiler.synthetic_gpu_profile(2, stages, autograd=("bwd",), repeat={"fwd": 3}).events()
    runs = [e for e in events if e.name == "fwd" and e.device_type == DeviceType.CPU]
    assert len(runs) == 6 and all(run.cpu_time_total == 80.0 + 4 * (2.0 + 9.0) for run in runs)
    device_copies = [e for e in events if e.name == "fwd" and e.device_type != DeviceType.CPU]
    assert len(device_copies) == 6 and device_copies[0].device_time_total == pytest.approx(1.1 * 4 * 100.0)
    backward = next(e for e in events if e.name == "bwd" and e.device_type == DeviceType.CPU)
    adopted = profiler._other_threads_inside(backward, events)
    assert backward.cpu_children == [] and len(adopted) == 4
    assert all(e.name.startswith("autograd::engine::evaluate_function") and e.thread == 2 for e in adopted)
    assert bottleneck(profiler.synthetic_gpu_profile(2, stages, autograd=("bwd",)), list(stages))["stage"] == "data"
    with pytest.raises(ValueError, match="steps"):
        profiler.synthetic_gpu_profile(0, stages)
