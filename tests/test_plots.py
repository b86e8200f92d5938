"""Tests of gpucourse.plots: the worker-pool model and the lesson plots built on it and on the datasheets."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402

from gpucourse.hardware import GPU_SPECS  # noqa: E402
from gpucourse.plots import WorkerPool, mark_points, plot_gpu_memory, plot_latency_throughput  # noqa: E402
from gpucourse.roofline import Roof, RooflinePoint, plot_roofline  # noqa: E402

PROPERTY = settings(deadline=None, max_examples=50, derandomize=True, database=None)

workers = st.integers(1, 10_000)
task_times = st.floats(1e-9, 1e3)
task_counts = st.integers(1, 10**9)

# Wrong values for each kind of argument, with the error each must raise.
BAD_INTS = [("8", TypeError), (None, TypeError), (8.0, TypeError), (True, TypeError), (False, TypeError),
            (0, ValueError), (-2, ValueError)]
BAD_NUMBERS = [("1e-6", TypeError), (None, TypeError), (True, TypeError), (0, ValueError), (-1.0, ValueError),
               (float("nan"), ValueError), (float("inf"), ValueError)]

# The two pools of the architecture lesson: few fast workers against many slow ones.
JET = WorkerPool("jet", workers=16, task_s=1e-6)
CARGO = WorkerPool("cargo plane", workers=4096, task_s=20e-6)

POINTS = [RooflinePoint("add", 1 / 12, 20e9), RooflinePoint("matmul", 100.0, 5e12)]


@pytest.fixture(autouse=True)
def _close_figures():
    plt.close("all")  # a figure another module's test left open in this worker must not count here
    yield
    plt.close("all")


# --------------------------------------------------------------------------- WorkerPool: known values

@pytest.mark.parametrize("n_tasks, rounds", [(1, 1), (3, 1), (4, 1), (5, 2), (8, 2), (9, 3), (12, 3), (13, 4)])
def test_finish_time_counts_whole_rounds_of_tasks(n_tasks, rounds):
    pool = WorkerPool("four", workers=4, task_s=2.0)
    assert pool.finish_time(n_tasks) == rounds * 2.0


@pytest.mark.parametrize("n_tasks, rate", [(1, 0.5), (2, 1.0), (4, 2.0), (5, 1.25), (8, 2.0), (9, 1.5), (400, 2.0)])
def test_throughput_known_values(n_tasks, rate):
    pool = WorkerPool("four", workers=4, task_s=2.0)
    assert pool.throughput(n_tasks) == pytest.approx(rate)


def test_one_worker_finishes_tasks_one_after_another():
    pool = WorkerPool("serial", workers=1, task_s=0.25)
    assert [pool.finish_time(n) for n in (1, 2, 7)] == [0.25, 0.5, 1.75]
    assert pool.throughput(7) == pytest.approx(4.0)


def test_the_jet_wins_on_latency_and_the_cargo_plane_on_throughput():
    """The lesson's point: one task is 20x quicker on the jet; a million are 12.8x quicker on the cargo plane."""
    assert JET.finish_time(1) == pytest.approx(1e-6) and CARGO.finish_time(1) == pytest.approx(20e-6)
    assert JET.finish_time(10**6) == pytest.approx(62_500 * 1e-6)  # ceil(1e6 / 16) rounds of 1 µs
    assert CARGO.finish_time(10**6) == pytest.approx(245 * 20e-6)  # ceil(1e6 / 4096) rounds of 20 µs
    assert JET.throughput(10**6) == pytest.approx(16e6)
    assert CARGO.throughput(10**6) == pytest.approx(10**6 / 4.9e-3)
    assert CARGO.throughput(10**6) > JET.throughput(10**6)


def test_worker_pool_accepts_numpy_numbers_and_is_frozen():
    pool = WorkerPool("np", workers=np.int64(8), task_s=np.float32(0.5))
    assert pool.finish_time(np.int64(17)) == pytest.approx(1.5)
    with pytest.raises(AttributeError):
        pool.workers = 2


# --------------------------------------------------------------------------- WorkerPool: properties

@PROPERTY
@given(n_workers=workers, task_s=task_times, n=task_counts)
def test_finish_time_is_whole_rounds_bracketing_perfect_sharing(n_workers, task_s, n):
    pool = WorkerPool("p", n_workers, task_s)
    seconds = pool.finish_time(n)
    rounds = seconds / task_s
    assert rounds == pytest.approx(round(rounds)) and round(rounds) == -(-n // n_workers)
    assert n * task_s / n_workers <= seconds * (1 + 1e-12)
    assert seconds < (n / n_workers + 1) * task_s


@PROPERTY
@given(n_workers=workers, task_s=task_times, a=task_counts, b=task_counts)
def test_finish_time_never_falls_as_tasks_are_added(n_workers, task_s, a, b):
    pool = WorkerPool("p", n_workers, task_s)
    low, high = sorted((a, b))
    assert pool.finish_time(low) <= pool.finish_time(high)


@PROPERTY
@given(a=workers, b=workers, task_s=task_times, n=task_counts)
def test_more_workers_never_finish_later(a, b, task_s, n):
    few, many = sorted((a, b))
    assert WorkerPool("many", many, task_s).finish_time(n) <= WorkerPool("few", few, task_s).finish_time(n)


@PROPERTY
@given(n_workers=workers, task_s=task_times, n=task_counts)
def test_throughput_never_exceeds_the_pools_peak_and_reaches_it_on_full_rounds(n_workers, task_s, n):
    pool = WorkerPool("p", n_workers, task_s)
    peak = n_workers / task_s
    assert 0 < pool.throughput(n) <= peak * (1 + 1e-12)
    assert pool.throughput(n) == pytest.approx(n / pool.finish_time(n))
    full = n_workers * (1 + n % 50)  # a whole number of rounds: every worker busy the whole time
    assert pool.throughput(full) == pytest.approx(peak, rel=1e-12)


@PROPERTY
@given(n_workers=workers, task_s=task_times, scale=st.floats(0.01, 100), n=task_counts)
def test_finish_time_is_proportional_to_the_task_time(n_workers, task_s, scale, n):
    slow, fast = WorkerPool("slow", n_workers, task_s * scale), WorkerPool("fast", n_workers, task_s)
    assert slow.finish_time(n) == pytest.approx(scale * fast.finish_time(n), rel=1e-12)


@PROPERTY
@given(n_workers=workers, task_s=task_times, n=st.integers(1, 10**6))
def test_up_to_one_round_latency_is_flat_and_throughput_grows_linearly(n_workers, task_s, n):
    pool = WorkerPool("p", n_workers, task_s)
    k = min(n, n_workers)
    assert pool.finish_time(k) == task_s
    assert pool.throughput(k) == pytest.approx(k / task_s)


# --------------------------------------------------------------------------- WorkerPool: bad input

@pytest.mark.parametrize("argname, value, error", [
    *[("label", value, error) for value, error in [(None, TypeError), (3, TypeError), (b"jet", TypeError),
                                                     ("", ValueError)]],
    *[("workers", value, error) for value, error in BAD_INTS],
    *[("task_s", value, error) for value, error in BAD_NUMBERS],
], ids=str)
def test_worker_pool_rejects_bad_fields_naming_them(argname, value, error):
    fields = {"label": "jet", "workers": 16, "task_s": 1e-6, argname: value}
    with pytest.raises(error, match=rf"^{argname}\b"):
        WorkerPool(**fields)


@pytest.mark.parametrize("method", ["finish_time", "throughput"])
@pytest.mark.parametrize("value, error", BAD_INTS, ids=repr)
def test_finish_time_and_throughput_reject_a_bad_task_count(method, value, error):
    with pytest.raises(error, match=r"^n_tasks\b"):
        getattr(JET, method)(value)


# --------------------------------------------------------------------------- plot_latency_throughput

def test_latency_throughput_draws_one_line_per_pool_on_log_log_axes():
    time_ax, rate_ax = plot_latency_throughput([JET, CARGO], max_tasks=10**6)
    for ax in (time_ax, rate_ax):
        assert isinstance(ax, Axes)
        assert len(ax.get_lines()) == 2
        assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
        assert ax.get_xlabel() == "number of independent tasks"
    assert time_ax.figure is rate_ax.figure
    assert "µs" in time_ax.get_ylabel() and "per second" in rate_ax.get_ylabel()
    legend = [text.get_text() for text in time_ax.get_legend().get_texts()]
    assert legend == ["jet: 16 workers x 1 µs/task", "cargo plane: 4096 workers x 20 µs/task"]


def test_latency_throughput_lines_are_the_models_figures():
    time_ax, rate_ax = plot_latency_throughput([JET, CARGO], max_tasks=10**6)
    for pool, time_line, rate_line in zip((JET, CARGO), time_ax.get_lines(), rate_ax.get_lines()):
        counts = np.asarray(time_line.get_xdata())
        assert np.array_equal(counts, rate_line.get_xdata())
        assert counts[0] == 1 and counts[-1] == 10**6
        assert np.all(np.diff(counts) > 0) and np.all(counts == np.round(counts))
        assert 300 <= len(counts) <= 400  # about 400 points, evenly spread on the log axis, duplicates merged
        np.testing.assert_allclose(time_line.get_ydata(), [pool.finish_time(int(n)) * 1e6 for n in counts])
        np.testing.assert_allclose(rate_line.get_ydata(), [pool.throughput(int(n)) for n in counts])
    # the curves cross: the jet ends the single task first, the cargo plane the million
    (jet_time, cargo_time) = (np.asarray(line.get_ydata()) for line in time_ax.get_lines())
    assert jet_time[0] < cargo_time[0] and jet_time[-1] > cargo_time[-1]


@pytest.mark.parametrize("max_tasks, expected", [(2, [1, 2]), (10, list(range(1, 11)))])
def test_latency_throughput_covers_every_count_of_a_small_range(max_tasks, expected):
    time_ax, _ = plot_latency_throughput([JET], max_tasks=max_tasks)
    assert list(time_ax.get_lines()[0].get_xdata()) == expected


def test_latency_throughput_draws_on_given_axes_and_accepts_any_iterable_of_pools():
    _, axes = plt.subplots(1, 2)  # a numpy array of two Axes, as plt.subplots gives it
    returned = plot_latency_throughput(iter([JET]), max_tasks=100, axes=axes)
    assert returned[0] is axes[0] and returned[1] is axes[1]
    assert len(plt.get_fignums()) == 1
    first, second = plt.figure().subplots(2, 1)
    assert plot_latency_throughput((JET,), max_tasks=100, axes=[first, second]) == (first, second)


LATENCY_BAD = [
    ({"pools": []}, ValueError, "pools"),
    ({"pools": JET}, TypeError, "pools"),
    ({"pools": None}, TypeError, "pools"),
    ({"pools": "jet"}, TypeError, "pools"),
    ({"pools": [JET, ("cargo", 4096, 20e-6)]}, TypeError, "pools"),
    *[({"max_tasks": value}, error, "max_tasks") for value, error in BAD_INTS],
    ({"max_tasks": 1}, ValueError, "max_tasks"),
    ({"max_tasks": 10**400}, ValueError, "max_tasks"),
    ({"axes": "ab"}, TypeError, "axes"),
    ({"axes": 3}, TypeError, "axes"),
    ({"axes": ("time", "rate")}, TypeError, "axes"),
]


@pytest.mark.parametrize("kwargs, error, argname", LATENCY_BAD, ids=str)
def test_latency_throughput_rejects_bad_input_naming_it(kwargs, error, argname):
    arguments = {"pools": [JET], "max_tasks": 1000, **kwargs}
    open_before = plt.get_fignums()  # another test on this worker may have left one open
    with pytest.raises(error, match=rf"^{argname}\b"):
        plot_latency_throughput(**arguments)
    assert plt.get_fignums() == open_before  # rejected before a figure is made


def _two_axes():
    return list(plt.subplots(1, 2)[1])


# Axes the caller made, in shapes plot_latency_throughput cannot use: (builder, error).
BAD_AXES = {
    "a single Axes": (lambda: _two_axes()[0], TypeError),
    "a list of one Axes": (lambda: _two_axes()[:1], ValueError),
    "a list of four Axes": (lambda: _two_axes() * 2, ValueError),
    "a 2x2 array (rows of Axes)": (lambda: plt.subplots(2, 2)[1], TypeError),
    "an Axes and None": (lambda: [_two_axes()[0], None], TypeError),
}


@pytest.mark.parametrize("case", list(BAD_AXES))
def test_latency_throughput_rejects_axes_of_the_wrong_shape_drawing_nothing(case):
    build, error = BAD_AXES[case]
    axes = build()
    figures = plt.get_fignums()

    def lines_drawn() -> list[int]:  # another test on this worker may have left a figure with lines open
        return [len(ax.get_lines()) for fig in map(plt.figure, figures) for ax in fig.axes]

    before = lines_drawn()
    with pytest.raises(error, match=r"^axes\b"):
        plot_latency_throughput([JET], max_tasks=1000, axes=axes)
    assert plt.get_fignums() == figures
    assert lines_drawn() == before


# --------------------------------------------------------------------------- plot_gpu_memory

SPECS = [GPU_SPECS["K80"], GPU_SPECS["V100"], GPU_SPECS["A100-80GB"], GPU_SPECS["T4"]]


def test_gpu_memory_scatters_one_point_per_gpu_at_year_and_memory():
    ax = plot_gpu_memory(SPECS)
    assert isinstance(ax, Axes)
    assert len(ax.collections) == 1
    offsets = np.asarray(ax.collections[0].get_offsets())
    np.testing.assert_array_equal(offsets, [(s.year, s.memory_gb) for s in SPECS])
    assert sorted(t.get_text() for t in ax.texts) == sorted(f"{s.name} ({s.memory_gb:g} GB)" for s in SPECS)
    assert ax.get_xlabel() == "launch year" and "GB" in ax.get_ylabel()
    years = [s.year for s in SPECS]
    assert ax.get_xlim() == (min(years) - 1, max(years) + 2)
    assert len(ax.get_lines()) == 0 and ax.get_legend() is None  # no claim, no ceiling line


def test_gpu_memory_draws_the_claimed_ceiling_with_its_label():
    ax = plot_gpu_memory(SPECS, claim_gb=24, claim_label="article: 'at most'")
    (line,) = ax.get_lines()
    assert list(line.get_ydata()) == [24, 24] and line.get_linestyle() == "--"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["article: 'at most': 24 GB"]


def test_gpu_memory_moves_the_label_of_a_crowded_point_below_it():
    """P100 (2016, 16 GB) and T4 (2018, 16 GB) would overlap: the later one's label goes below its point."""
    ax = plot_gpu_memory([GPU_SPECS["T4"], GPU_SPECS["P100"], GPU_SPECS["H200"]])
    offsets = {text.get_text().split()[0]: text.xyann[1] for text in ax.texts}
    assert offsets["P100"] > 0 and offsets["T4"] < 0 and offsets["H200"] > 0
    apart = plot_gpu_memory([GPU_SPECS["K80"], GPU_SPECS["V100"]])  # three years and 8 GB apart
    assert all(text.xyann[1] > 0 for text in apart.texts)


def test_gpu_memory_draws_on_a_given_axes_and_accepts_every_datasheet():
    _, ax = plt.subplots()
    assert plot_gpu_memory(GPU_SPECS.values(), ax=ax) is ax
    assert len(ax.collections[0].get_offsets()) == len(GPU_SPECS)
    assert len(plt.get_fignums()) == 1


MEMORY_BAD = [
    ({"specs": []}, ValueError, "specs"),
    ({"specs": GPU_SPECS["T4"]}, TypeError, "specs"),
    ({"specs": None}, TypeError, "specs"),
    ({"specs": "T4"}, TypeError, "specs"),
    ({"specs": ["T4"]}, TypeError, "specs"),
    ({"specs": GPU_SPECS}, TypeError, "specs"),  # the dict's keys are names, not GpuSpec objects
    *[({"claim_gb": value}, error, "claim_gb") for value, error in BAD_NUMBERS if value is not None],
    ({"claim_label": None}, TypeError, "claim_label"),
    ({"claim_label": 24}, TypeError, "claim_label"),
    ({"ax": "axes"}, TypeError, "ax"),
    ({"ax": (1, 2)}, TypeError, "ax"),
]


@pytest.mark.parametrize("kwargs, error, argname", MEMORY_BAD, ids=str)
def test_gpu_memory_rejects_bad_input_naming_it(kwargs, error, argname):
    arguments = {"specs": SPECS, "claim_gb": 24, **kwargs}
    open_before = plt.get_fignums()  # another test on this worker may have left one open
    with pytest.raises(error, match=rf"^{argname}\b"):
        plot_gpu_memory(**arguments)
    assert plt.get_fignums() == open_before  # rejected before a figure is made


# --------------------------------------------------------------------------- mark_points

def test_mark_points_scatters_and_annotates_each_point_in_gigaflops():
    _, ax = plt.subplots()
    assert mark_points(ax, POINTS, color="red", marker="s", label="measured") is None
    assert len(ax.collections) == len(POINTS)
    for collection, point in zip(ax.collections, POINTS):
        np.testing.assert_allclose(collection.get_offsets(), [(point.intensity, point.flops / 1e9)])
        np.testing.assert_allclose(collection.get_facecolor()[0], to_rgba("red"))
    assert [text.get_text() for text in ax.texts] == ["add", "matmul"]
    assert all(text.get_color() == "red" for text in ax.texts)
    _, labels = ax.get_legend_handles_labels()
    assert labels == ["measured"]  # the group is named once in the legend, not once per point


def test_mark_points_without_a_label_adds_nothing_to_the_legend():
    _, ax = plt.subplots()
    mark_points(ax, iter(POINTS))
    assert len(ax.collections) == 2
    assert ax.get_legend_handles_labels() == ([], [])


def test_mark_points_with_no_points_draws_nothing():
    _, ax = plt.subplots()
    mark_points(ax, [], label="nothing")
    assert len(ax.collections) == 0 and len(ax.texts) == 0


def test_mark_points_on_a_roofline_adds_groups_to_its_legend():
    ax = plot_roofline([Roof("CPU", 300e9, 40e9)], POINTS[:1])
    mark_points(ax, POINTS, color="black", marker="o", label="CPU, numpy")
    mark_points(ax, POINTS[1:], color="tab:red", marker="^", label="GPU, torch")
    assert len(ax.collections) == 1 + 2 + 1
    _, labels = ax.get_legend_handles_labels()
    assert labels == ["CPU", "CPU, numpy", "GPU, torch"]


MARK_BAD = [
    ({"ax": None}, TypeError, "ax"),
    ({"ax": "axes"}, TypeError, "ax"),
    ({"ax": None, "points": []}, TypeError, "ax"),
    ({"points": None}, TypeError, "points"),
    ({"points": POINTS[0]}, TypeError, "points"),
    ({"points": "add"}, TypeError, "points"),
    ({"points": [(1.0, 1e9)]}, TypeError, "points"),
    ({"points": [POINTS[0], Roof("CPU", 300e9, 40e9)]}, TypeError, "points"),
    ({"color": None}, TypeError, "color"),
    ({"color": (1, 0, 0)}, TypeError, "color"),
    ({"color": "notacolour"}, ValueError, "color"),
    ({"color": "notacolour", "points": []}, ValueError, "color"),
    ({"marker": None}, TypeError, "marker"),
    ({"marker": 3}, TypeError, "marker"),
    ({"marker": "zz"}, ValueError, "marker"),
    ({"label": 3}, TypeError, "label"),
    ({"label": ["CPU"]}, TypeError, "label"),
]


@pytest.mark.parametrize("kwargs, error, argname", MARK_BAD, ids=str)
def test_mark_points_rejects_bad_input_naming_it_and_draws_nothing(kwargs, error, argname):
    _, ax = plt.subplots()
    arguments = {"ax": ax, "points": POINTS, **kwargs}
    with pytest.raises(error, match=rf"^{argname}\b"):
        mark_points(**arguments)
    assert len(ax.collections) == 0 and len(ax.texts) == 0


def test_bad_worker_pool_messages_say_what_was_given():
    with pytest.raises(ValueError, match=r"^workers must be > 0, got 0$"):
        WorkerPool("jet", 0, 1e-6)
    with pytest.raises(TypeError, match=r"^n_tasks must be an int, got float \(1\.5\)$"):
        JET.finish_time(1.5)
    assert math.isclose(JET.throughput(16), 16e6)


# --------------------------------------------------------------------------- tables and rate bars

from gpucourse.plots import markdown_table, plot_rates, show_table  # noqa: E402


def test_markdown_table_has_a_header_a_rule_and_one_line_per_row():
    text = markdown_table(["GPU", "TFLOP/s"], [["T4", 8.1], ["A100", 19.5]])
    assert text.splitlines() == ["| GPU | TFLOP/s |", "| --- | --- |", "| T4 | 8.1 |", "| A100 | 19.5 |"]


def test_markdown_table_escapes_pipes_and_newlines_inside_cells():
    assert markdown_table(["a"], [["x|y\nz"]]).splitlines()[-1] == "| x\\|y z |"


@pytest.mark.parametrize("header, rows, error, argname", [
    ("GPU", [], TypeError, "header"), ([], [], ValueError, "header"), (None, [], TypeError, "header"),
    (["a"], "row", TypeError, "rows"), (["a"], None, TypeError, "rows"), (["a"], ["x"], TypeError, r"rows\[0\]"),
    (["a", "b"], [["x"]], ValueError, r"rows\[0\]"),
])
def test_markdown_table_rejects_bad_input_naming_it(header, rows, error, argname):
    with pytest.raises(error, match=rf"^{argname}"):
        markdown_table(header, rows)


def test_show_table_prints_markdown_outside_a_notebook(capsys):
    show_table(["a", "b"], [[1, 2]])
    assert capsys.readouterr().out.splitlines()[0] == "| a | b |"


def test_plot_rates_draws_one_bar_per_rate_in_gflops_coloured_by_kind():
    ax = plot_rates({"estimate": 300e9, "measured": 200e9, "T4 datasheet": 8.1e12}, measured=["measured"], title="t")
    heights = [patch.get_height() for patch in ax.patches]
    assert heights == pytest.approx([300, 200, 8100])
    assert [patch.get_facecolor() for patch in ax.patches] == [to_rgba("tab:gray"), to_rgba("tab:blue"),
                                                                to_rgba("tab:gray")]
    assert ax.get_yscale() == "log" and ax.get_title() == "t"
    plt.close("all")


@pytest.mark.parametrize("kwargs, error, argname", [
    ({"rates": {}}, TypeError, "rates"), ({"rates": [1e9]}, TypeError, "rates"),
    ({"rates": {"a": 0}}, ValueError, "rates"), ({"rates": {"a": "1"}}, TypeError, "rates"),
    ({"rates": {1: 1e9}}, TypeError, "rates"), ({"measured": "a"}, TypeError, "measured"),
    ({"measured": ["b"]}, ValueError, "measured"), ({"title": 3}, TypeError, "title"), ({"ax": "ax"}, TypeError, "ax"),
], ids=str)
def test_plot_rates_rejects_bad_input_naming_it(kwargs, error, argname):
    with pytest.raises(error, match=rf"^{argname}"):
        plot_rates(**{"rates": {"a": 1e9}, **kwargs})
