"""Tests of tools/gpu_check.py on the CPU: the notebook runners and their fallbacks, the report, what could not run."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("gpu_check", ROOT / "tools" / "gpu_check.py")
gpu_check = importlib.util.module_from_spec(_spec)
sys.modules["gpu_check"] = gpu_check  # dataclasses look their module up by name
_spec.loader.exec_module(gpu_check)

CELLS = [
    "x = 41\nprint('hello')",
    "%matplotlib inline\nx += 1",
    "import a_package_nobody_installed as tf",
    "print(tf.constant(1))",
    "import sys\nprint('a warning', file=sys.stderr)",
    "raise ValueError('broken cell')",
    "assert x == 42, x",
]
EXPECTED = ["PASS", "PASS", "NOT RUN", "NOT RUN", "PASS", "FAIL", "PASS"]


def tiny_notebook(folder: Path, cells: list[str] = CELLS) -> Path:
    """A small notebook: a magic, a missing package, a cell depending on it, stderr, and a failing cell."""
    notebook = {"cells": [{"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# tiny"]}] + [
        {"cell_type": "code", "id": f"c{i}", "metadata": {}, "execution_count": None, "outputs": [],
         "source": source} for i, source in enumerate(cells)],
        "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
        "nbformat": 4, "nbformat_minor": 5}
    path = folder / "tiny.ipynb"
    path.write_text(json.dumps(notebook), encoding="utf-8")
    return path


RUNNERS = ["exec", "ipython"] + (["nbclient"] if importlib.util.find_spec("nbclient") else [])


@pytest.mark.parametrize("runner", RUNNERS)
def test_each_runner_reports_pass_fail_not_run_and_stderr_per_cell(tmp_path, runner):
    cells, note = gpu_check._notebook_in_subprocess(tiny_notebook(tmp_path), runner, 120, gpu_check._env())
    assert [cell.status for cell in cells] == EXPECTED, (cells, note)
    assert cells[2].reason == "needs a_package_nobody_installed, which is not installed here"
    assert cells[3].reason.startswith("depends on an earlier cell that could not run")
    assert cells[4].stderr == "a warning\n" and cells[0].stderr == ""
    assert cells[5].error == "ValueError: broken cell"
    assert [cell.cell_id for cell in cells] == [f"c{i}" for i in range(len(CELLS))]


def test_a_magic_other_than_matplotlib_fails_by_name_without_ipython(tmp_path):
    path = tiny_notebook(tmp_path, ["%timeit 1 + 1"])
    (cell,) = gpu_check.run_notebook(path, "exec")
    assert cell.status == "FAIL" and "magic %timeit needs IPython" in cell.error


def test_the_runner_falls_back_from_jupyter_to_ipython_to_plain_exec(monkeypatch):
    real = importlib.util.find_spec
    gone: set[str] = set()
    monkeypatch.setattr(gpu_check.importlib.util, "find_spec", lambda name: None if name in gone else real(name))
    gone.add("nbclient")
    assert gpu_check.pick_runner() == "ipython"
    gone.add("IPython")
    assert gpu_check.pick_runner() == "exec"
    assert gpu_check.pick_runner("nbclient") == "nbclient", "a named runner is used as asked"
    with pytest.raises(ValueError, match="^runner must be one of"):
        gpu_check.pick_runner("papermill")


def test_a_cell_stopped_by_a_missing_package_runs_the_statements_after_it(tmp_path):
    path = tiny_notebook(tmp_path, ["import os\nimport a_package_nobody_installed as tf\nx = tf.zeros(3)\ny = 5",
                                    "assert y == 5", "z = undefined_name"])
    cells = gpu_check.run_notebook(path, "exec")
    assert [cell.status for cell in cells] == ["PARTLY RUN", "PASS", "NOT RUN"]
    assert cells[0].reason == ("needs a_package_nobody_installed, which is not installed here; the 1 statement(s) "
                               "after it that do not need it ran (1 more skipped)")
    assert cells[2].reason.startswith("depends on an earlier cell that could not run")


def test_a_name_error_without_a_missing_package_is_a_failure(tmp_path):
    (cell,) = gpu_check.run_notebook(tiny_notebook(tmp_path, ["z = undefined_name"]), "exec")
    assert (cell.status, cell.error) == ("FAIL", "NameError: name 'undefined_name' is not defined")


def test_statements_after_skips_the_failing_statement_and_keeps_decorated_functions_whole():
    source = "import a\n@decorate\ndef f():\n    return 1\n\nb = 2"
    assert gpu_check.statements_after(source, 1) == ["@decorate\ndef f():\n    return 1", "b = 2"]
    assert gpu_check.statements_after(source, 3) == ["b = 2"]
    assert gpu_check.statements_after("x = (", 1) == []


def test_a_file_that_is_not_a_notebook_is_refused(tmp_path):
    path = tmp_path / "x.ipynb"
    path.write_text("[]")
    with pytest.raises(ValueError, match="is not a Jupyter notebook"):
        gpu_check.code_cells(path)


def test_without_pytest_the_pytest_step_is_listed_as_not_run(monkeypatch):
    monkeypatch.setattr(gpu_check.importlib.util, "find_spec", lambda name: None)
    step = gpu_check.step_pytest(gpu_check.parse([]), 60)
    assert (step.status, step.summary) == ("NOT RUN", "pytest is not installed here")


def test_without_nbval_the_pytest_step_is_not_run_and_says_how_to_carry_it(monkeypatch):
    """The tests' conftest loads nbval: without it pytest fails before collecting (seen on an H100, 2026-11-28)."""
    real_find_spec = gpu_check.importlib.util.find_spec
    monkeypatch.setattr(gpu_check.importlib.util, "find_spec",
                        lambda name: None if name == "nbval" else real_find_spec(name))
    step = gpu_check.step_pytest(gpu_check.parse([]), 60)
    assert step.status == "NOT RUN" and "nbval is not installed" in step.summary and "wheels" in step.summary


def test_gpu_test_files_are_the_ones_with_gpu_marks():
    files = gpu_check.gpu_test_files()
    assert "tests/test_gpu.py" in files and "tests/test_reference.py" not in files


def test_the_check_writes_one_report_listing_what_could_not_run(tmp_path, capsys):
    report = tmp_path / "report.md"
    status = gpu_check.main(["--report", str(report), "--steps", "notebooks", "record", "--runner", "exec",
                             "--notebooks", str(tiny_notebook(tmp_path)), "--quick"])
    assert status == 1, "a failing cell fails the check"
    text = report.read_text()
    assert text.startswith("# GPU check report\n")
    assert "| notebooks | FAIL |" in text and "| record | PASS |" in text
    could_not = text.split("## Could not run\n")[1].split("\n## ")[0]
    assert "- notebook tiny, code cells [2]: needs a_package_nobody_installed" in could_not
    assert "- notebook tiny, code cells [3]: depends on an earlier cell" in could_not
    assert "- record, topic transfer: needs a CUDA GPU" in could_not
    assert "- cell 4 (c4): PASS: passed, but wrote to stderr" in text and "stderr: a warning" in text
    assert "- cell 5 (c5): FAIL: ValueError: broken cell" in text
    record = json.loads((tmp_path / "gpucourse-record.json").read_text())
    assert record["quick"] is True
    assert "report written to" in capsys.readouterr().out


def test_a_spent_time_budget_lists_the_steps_not_started(tmp_path):
    report = tmp_path / "report.md"
    gpu_check.main(["--report", str(report), "--steps", "record", "--budget-s", "1"])
    assert "- step record: the time budget was spent before this step" in report.read_text()


def test_the_wheel_list_carries_the_jupyter_stack_but_not_what_the_gpu_image_has():
    pytest.importorskip("nbclient")
    names = {line.split("==")[0] for line in gpu_check.wheel_list()}
    assert {"nbclient", "nbformat", "ipykernel", "jupyter-client", "pyzmq", "ipython", "nbval"} <= names
    assert not names & {"numpy", "torch", "pytest", "psutil"}


def test_the_download_command_fetches_cpython_312_manylinux_wheels_without_dependencies(capsys):
    command = gpu_check.download_command(["nbclient==0.10.2"], ".whl")
    assert command[1:5] == ["-m", "pip", "download", "--no-deps"]
    assert "--only-binary=:all:" in command and command[command.index("--python-version") + 1] == "3.12"
    assert "manylinux_2_17_x86_64" in command and command[-3:] == ["-d", ".whl", "nbclient==0.10.2"]
    pytest.importorskip("nbclient")
    assert gpu_check.main(["wheels", "--dry-run"]) == 0
    assert " download --no-deps " in capsys.readouterr().out


@pytest.mark.parametrize("runner", ["exec", "ipython"])
def test_the_in_process_runners_catch_stderr_written_by_c_code(tmp_path, runner):
    path = tiny_notebook(tmp_path, ["import os\nos.write(2, b'from C\\n')"])
    (cell,) = gpu_check.run_notebook(path, runner)
    assert cell.status == "PASS" and cell.stderr == "from C\n"


def test_an_error_naming_a_missing_module_anywhere_counts_as_the_module_missing():
    assert gpu_check.missing_module("RuntimeError: the child failed: ModuleNotFoundError: "
                                    "No module named 'tensorflow.keras'") == "tensorflow"
    assert gpu_check.missing_module("ValueError: broken") is None


@pytest.mark.skipif(not importlib.util.find_spec("nbclient"), reason="needs nbclient")
def test_the_kernel_runner_follows_display_updates_of_an_earlier_cell(tmp_path):
    path = tiny_notebook(tmp_path, ["from IPython.display import display\nhandle = display('a', display_id=True)",
                                    "handle.update('b')"])
    cells, note = gpu_check._notebook_in_subprocess(path, "nbclient", 120, gpu_check._env())
    assert [cell.status for cell in cells] == ["PASS", "PASS"], (cells, note)


def test_the_sustained_load_step_runs_before_the_long_steps_and_reports_its_figures(tmp_path):
    assert gpu_check.STEPS.index("sustained") < gpu_check.STEPS.index("pytest") < gpu_check.STEPS.index("notebooks")
    assert gpu_check.SUSTAINED_S == 30 and gpu_check.parse([]).sustained_s is None
    report = tmp_path / "report.md"
    assert gpu_check.main(["--report", str(report), "--steps", "sustained", "--sustained-s", "0.3"]) == 0
    text = report.read_text()
    row = next(line for line in text.splitlines() if line.startswith("| sustained | PASS |"))
    assert "burst" in row and "TFLOP/s, sustained" in row
    assert "Sustained load on" in text and "gpucourse-sustained.json" in text
    data = json.loads((tmp_path / "gpucourse-sustained.json").read_text())
    assert data["tflops"] and (tmp_path / "gpucourse-sustained.png").exists()


def test_the_sustained_summary_names_the_fall_and_its_reason():
    data = {"name": "Tesla T4", "device": "cuda:0", "n": 4096, "dtype": "float16", "burst_tflops": 25.0,
            "sustained_tflops": 15.0, "drop": 0.4, "reason": "power cap in 100% of the samples"}
    assert gpu_check.sustained_summary(data) == ("Tesla T4 (cuda:0), 4096x4096 float16: burst 25 TFLOP/s, sustained "
                                                 "15 TFLOP/s (40% lower); why: power cap in 100% of the samples")
    assert gpu_check.sustained_summary({**data, "drop": -0.1, "reason": ""}).endswith("(0% lower)")


def test_without_torch_the_sustained_step_is_listed_as_not_run(monkeypatch, tmp_path):
    monkeypatch.setattr(gpu_check.importlib.util, "find_spec", lambda name: None)
    step = gpu_check.step_sustained(gpu_check.parse(["--report", str(tmp_path / "r.md")]), 60)
    assert (step.status, step.summary) == ("NOT RUN", "needs torch, which is not installed here")


def test_a_name_a_skipped_statement_would_have_set_is_not_read_from_an_earlier_cell(tmp_path):
    """Lesson 09 without TensorFlow: `mine` was a float from exercise 1, and the tf.data smoke check's `mine` could
    not be built; the check must be NOT RUN, not a FAIL on the stale float."""
    path = tiny_notebook(tmp_path, ["mine = 1.5", "import a_package_nobody_installed as tf",
                                    "def build(data):\n    return tf.data(data)",
                                    "decode = tf.decode\nmine = build(decode)\nprint(len(mine))\nafter = 2",
                                    "assert after == 2\nresult = mine + 1", "print(after)"])
    cells = gpu_check.run_notebook(path, "exec")
    assert [cell.status for cell in cells] == ["PASS", "NOT RUN", "PASS", "PARTLY RUN", "PARTLY RUN", "PASS"]
    assert cells[3].reason.startswith("depends on an earlier cell that could not run (needs a_package_nobody_installed)")
    assert "(2 more skipped)" in cells[3].reason and "the 1 statement(s) after it" in cells[3].reason
    assert gpu_check.names_bound_and_read("@deco\ndef f(x=default):\n    return inside\n[y for y in z]") == (
        {"f", "y"}, {"deco", "default", "y", "z"})
