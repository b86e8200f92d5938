"""gpucourse.without_tensorflow: on an install without TensorFlow (Python 3.14), TensorFlow statements are skipped
with one sentence per cell, and graded TensorFlow tests fail with that sentence."""

from __future__ import annotations

import ast
import collections
import os
import re
import sys

import pytest

from notebook_utils import LESSONS, ROOT, execute_naming_dead_kernel, load, nbgrader, solution_path, source

from gpucourse import syllabus, without_tensorflow
from gpucourse.platforms import NotAvailableHere


@pytest.fixture(autouse=True)
def tensorflow_missing(monkeypatch):
    """This process as on an install without TensorFlow (the sentence is platforms.available's)."""
    monkeypatch.setitem(sys.modules, "tensorflow", None)


def test_the_sentence_is_the_one_platforms_gives_for_tensorflow():
    from gpucourse import platforms

    availability = platforms.available("tensorflow")
    assert not availability.ok and without_tensorflow.reason() == availability.reason != ""


def _run_cells(cells: list[str], capsys) -> tuple[dict, list[str]]:
    """Run cells through one transformer, as IPython would: (namespace, what each cell printed)."""
    skipper, namespace, printed = without_tensorflow.SkipTensorFlow(), {}, []
    for cell in cells:
        module = skipper.visit(ast.parse(cell))
        exec(compile(module, "<cell>", "exec"), namespace)
        printed.append(capsys.readouterr().out)
    return namespace, printed


def test_tensorflow_statements_are_skipped_with_one_sentence_and_the_rest_runs(capsys):
    namespace, printed = _run_cells(["import tensorflow as tf\nx = 2\ny = tf.constant(x)\nz = x + 1",
                                     "w = x * 10"], capsys)
    assert namespace["x"] == 2 and namespace["z"] == 3 and namespace["w"] == 20
    assert "y" not in namespace and "tf" not in namespace
    assert printed[0] == without_tensorflow.reason() + "\n" and printed[1] == ""


def test_what_a_skipped_statement_would_define_is_skipped_in_later_cells_until_it_is_set_again(capsys):
    namespace, printed = _run_cells([
        "TF_SETUP = placement.configure_tensorflow()\nlogical = TF_SETUP.logical",  # helper calls named for TF
        "print(logical)",                                   # uses a name the skipped statement would have set
        "logical = 4\nprint(logical)",                      # set again without TensorFlow: runs
        "def report(free):\n    return free * 2\nout = [free for free in range(3)]\nprint(report(logical))",
    ], capsys)
    assert printed[0] == printed[1] == without_tensorflow.reason() + "\n"
    assert printed[2] == "4\n"
    assert printed[3] == "8\n" and namespace["out"] == [0, 1, 2]  # local names never count as skipped ones


def test_a_graded_test_cell_that_needs_tensorflow_fails_with_the_sentence(capsys):
    with pytest.raises(NotAvailableHere) as raised:
        _run_cells(['off_limits("gpucourse.placement.short_tf_device", exercise="Exercise 4")\n'
                    "import tensorflow as tf\ncheck('x', 1, 1)"], capsys)
    assert str(raised.value) == without_tensorflow.reason()
    assert raised.value._render_traceback_() == [f"NotAvailableHere: {without_tensorflow.reason()}"]


def test_a_cell_without_tensorflow_is_left_as_it_is():
    module = ast.parse("import torch\nx = torch.ones(2)\nround_to_tf32 = tf32_matmul = 1")
    assert without_tensorflow.SkipTensorFlow().visit(module) is module
    assert len(module.body) == 3


@pytest.mark.parametrize("name, expected", [("tf", True), ("keras", True), ("TF_SETUP", True),
                                            ("configure_tf_devices", True), ("import_tensorflow", True),
                                            ("tf32", False), ("round_to_tf32", False), ("stuff", False)])
def test_tensorflow_words(name, expected):
    assert without_tensorflow.uses_tensorflow(ast.parse(f"{name}()").body[0]) is expected


def test_active_only_where_tensorflow_is_missing_and_asked_for(monkeypatch):
    monkeypatch.setenv(without_tensorflow.FORCE_ENV, "1")
    assert without_tensorflow.active()
    monkeypatch.setenv(without_tensorflow.FORCE_ENV, "0")
    assert without_tensorflow.active() is (sys.version_info >= (3, 14))
    monkeypatch.delitem(sys.modules, "tensorflow")  # installed here: nothing to skip
    monkeypatch.setenv(without_tensorflow.FORCE_ENV, "1")
    assert not without_tensorflow.active()
    monkeypatch.setenv(without_tensorflow.FORCE_ENV, "yes")
    with pytest.raises(ValueError, match=without_tensorflow.FORCE_ENV):
        without_tensorflow.active()


def test_the_sentence_names_python_3_14_there(monkeypatch):
    version = collections.namedtuple("version_info", "major minor micro releaselevel serial")
    monkeypatch.setattr(sys, "version_info", version(3, 14, 0, "final", 0))
    sentence = without_tensorflow.reason()
    assert sentence.startswith("TensorFlow publishes no wheel for Python 3.14 yet") and sentence.endswith(".")
    assert not re.search(r"[.!?]\s+[A-Z]", sentence), "one sentence"


def test_install_adds_the_transformer_once_and_refuses_a_shell_that_is_not_one(monkeypatch):
    class Shell:
        ast_transformers: list = []

    monkeypatch.setattr(without_tensorflow, "active", lambda: True)
    shell = Shell()
    assert without_tensorflow.install(shell) and without_tensorflow.install(shell)
    assert [type(t) for t in shell.ast_transformers] == [without_tensorflow.SkipTensorFlow]
    with pytest.raises(TypeError, match="shell must be an IPython shell"):
        without_tensorflow.install(object())
    monkeypatch.setattr(without_tensorflow, "active", lambda: False)
    assert not without_tensorflow.install(Shell())


def _tensorflow_lessons() -> list[str]:
    """Lessons whose solution code names TensorFlow outside the stamped setup cell."""
    found = []
    for lesson in LESSONS:
        cells = [cell for cell in load(solution_path(lesson))["cells"]
                 if cell["cell_type"] == "code" and "setup" not in cell.get("metadata", {}).get("tags", [])]
        if any("tensorflow" in source(cell) or "keras" in source(cell) for cell in cells):
            found.append(lesson)
    return found


@pytest.mark.slow
@pytest.mark.parametrize("lesson", _tensorflow_lessons())
def test_a_lesson_runs_without_tensorflow_saying_why_in_each_cell_that_needs_it(lesson, tmp_path, monkeypatch):
    """In a kernel where tensorflow and keras cannot be imported: nothing on stderr, no error but the graded tests of
    TensorFlow exercises (NotAvailableHere with the sentence), and the sentence once in each skipping cell."""
    import shutil

    import nbformat
    from nbclient import NotebookClient

    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['tensorflow'] = sys.modules['keras'] = None\n",
                                           encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hide), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv(without_tensorflow.FORCE_ENV, "1")
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")
    shutil.copytree(solution_path(lesson).parent, tmp_path / lesson)
    book = nbformat.read(solution_path(lesson), as_version=4)
    execute_naming_dead_kernel(NotebookClient(book, timeout=syllabus.CELL_TIMEOUT_S, kernel_name="python3",
                                              allow_errors=True, resources={"metadata": {"path": str(tmp_path / lesson)}}),
                               f"{lesson} without TensorFlow")
    reason = without_tensorflow.reason()
    skipping, failed = [], []
    for index, cell in enumerate(book.cells):
        if cell.cell_type != "code":
            continue
        name = nbgrader(cell).get("grade_id") or f"cell {index}"
        outputs = cell.get("outputs", [])
        assert not [o for o in outputs if o.get("name") == "stderr"], f"{lesson} {name} wrote to stderr"
        errors = [o for o in outputs if o.output_type == "error"]
        if errors:
            assert nbgrader(cell).get("grade") and (errors[0].ename, errors[0].evalue) == ("NotAvailableHere", reason), \
                f"{lesson} {name}: {errors[0].ename}: {errors[0].evalue}"
            failed.append(name)
        printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
        if reason in printed:
            assert printed.count(reason) == 1, name
            skipping.append(name)
    assert skipping, f"{lesson}: no cell said it skipped TensorFlow"
    tensorflow_tests = [nbgrader(c)["grade_id"] for c in book.cells
                        if nbgrader(c).get("grade") and not nbgrader(c).get("solution")
                        and re.search(r"\btf\.|tensorflow|keras", source(c))]
    assert failed == tensorflow_tests


def test_the_readme_names_the_lessons_that_skip_tensorflow_on_python_3_14():
    row = next(line for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
               if line.startswith("| 3.14 |"))
    named = re.findall(r"\b(\d\d)\b", row.split("their cells", 1)[1].split(")", 1)[0])
    assert named == [lesson[:2] for lesson in _tensorflow_lessons()]
