"""gpucourse.parallel.pipeline_schedules: orders of passes run on a simulated clock, GPipe and 1F1B."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpucourse import parallel
from gpucourse.parallel import ScheduleError, pipeline_orders, run_schedule

PROPERTY = settings(deadline=None, max_examples=40, derandomize=True, database=None)
DURATIONS = st.lists(st.floats(0.2, 3.0), min_size=6, max_size=6)


@PROPERTY
@given(st.integers(1, 6), st.integers(1, 10), DURATIONS, DURATIONS, st.sampled_from([0.0, 0.1, 0.5]))
def test_gpipe_orders_reproduce_gpipe_schedule(p, m, forwards, backwards, transfer):
    f, b = forwards[:p], backwards[:p]
    run = run_schedule(pipeline_orders("gpipe", p, m), f, b, transfer)
    assert list(run.events) == parallel.gpipe_schedule(p, m, f, b, transfer)
    assert run.peak_activations == (m,) * p


@PROPERTY
@given(st.integers(1, 6), st.integers(1, 12))
def test_1f1b_holds_p_minus_s_and_takes_gpipes_time_on_balanced_stages(p, m):
    gpipe, one_f_one_b = run_schedule(pipeline_orders("gpipe", p, m)), run_schedule(pipeline_orders("1f1b", p, m))
    assert one_f_one_b.peak_activations == tuple(min(p - s, m) for s in range(p))
    assert one_f_one_b.step_s == pytest.approx(gpipe.step_s) == (m + p - 1) * 3.0
    assert one_f_one_b.idle_share == pytest.approx((p - 1) / (m + p - 1))


def test_1f1b_waits_for_slow_transfers_in_its_steady_state():
    slow = {"transfer_s": 0.5}
    assert (run_schedule(pipeline_orders("1f1b", 4, 8), **slow).step_s
            > run_schedule(pipeline_orders("gpipe", 4, 8), **slow).step_s)


def test_a_schedule_that_waits_in_a_circle_is_a_deadlock():
    orders = [[("F", 0), ("B", 0), ("F", 1), ("B", 1)], [("F", 1), ("F", 0), ("B", 0), ("B", 1)]]
    with pytest.raises(ScheduleError, match="deadlock: .*stage 0 waits to run B0.*stage 1 waits to run F1"):
        run_schedule(orders)


@pytest.mark.parametrize("orders, message", [
    ([[("F", 0), ("B", 0)], [("F", 0)]], "exactly once"), ([[("F", 0), ("B", 0), ("B", 0)]], "exactly once"),
    ([[("B", 0), ("F", 0)]], "before its forward"), ([[]], "at least one")])
def test_broken_orders_are_refused(orders, message):
    with pytest.raises(ScheduleError, match=message):
        run_schedule(orders)


@pytest.mark.parametrize("orders", ["FB", [("F", 0)], [[("X", 0)]], [[("F", 0.0), ("B", 0)]], []])
def test_orders_must_be_lists_of_passes(orders):
    with pytest.raises(TypeError, match="orders"):
        run_schedule(orders)


@pytest.mark.parametrize("kwargs, error, name", [({"kind": "zb"}, ValueError, "kind"),
                                                 ({"stages": 0}, ValueError, "stages"),
                                                 ({"microbatches": 0}, ValueError, "microbatches")])
def test_pipeline_orders_validates(kwargs, error, name):
    with pytest.raises(error, match=name):
        pipeline_orders(**{"kind": "1f1b", "stages": 2, "microbatches": 2, **kwargs})


def test_run_schedule_validates_durations():
    with pytest.raises(ValueError, match="forward_s"):
        run_schedule(pipeline_orders("gpipe", 2, 2), forward_s=[1.0])
    with pytest.raises(ValueError, match="transfer_s"):
        run_schedule(pipeline_orders("gpipe", 2, 2), transfer_s=-1)
