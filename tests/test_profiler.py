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
