"""Tests of gpucourse.platforms: Linux-only parts (Triton, NCCL) say in one sentence why they cannot run elsewhere.

The systems are faked (sys.platform, platform.machine, importlib.util.find_spec, torch.distributed's NCCL check), so
every branch runs on the Linux CI machine; the last test executes lesson 06 in a kernel where triton is hidden.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import sys
from pathlib import Path

import pytest

from gpucourse import platforms, syllabus
from notebook_utils import execute_naming_dead_kernel

ROOT = Path(__file__).resolve().parents[1]

SYSTEMS = {"linux": ("linux", "x86_64", "Linux (x86_64)"), "linux-arm": ("linux", "aarch64", "Linux (aarch64)"),
           "macos": ("darwin", "arm64", "macOS (Apple silicon)"), "macos-intel": ("darwin", "x86_64", "macOS (x86_64)"),
           "windows": ("win32", "AMD64", "Windows (AMD64)")}


@pytest.fixture
def fake_system(monkeypatch):
    """fake_system(name, triton=True/False, nccl=True/False): pretend to be that machine."""

    def fake(name: str, triton: bool = True, nccl: bool = True) -> None:
        system, machine, _ = SYSTEMS[name]
        monkeypatch.setattr(sys, "platform", system)
        monkeypatch.setattr(platform, "machine", lambda: machine)
        real_find_spec = importlib.util.find_spec
        monkeypatch.setattr(importlib.util, "find_spec",
                            lambda module, *args: (object() if triton else None) if module == "triton"
                            else real_find_spec(module, *args))
        monkeypatch.delitem(sys.modules, "triton", raising=False)  # not loaded: decided by find_spec
        monkeypatch.delitem(sys.modules, "tensorflow", raising=False)  # nor TensorFlow (another test may have)
        torch_distributed = pytest.importorskip("torch.distributed")
        monkeypatch.setattr(torch_distributed, "is_nccl_available", lambda: nccl)

    return fake


def _one_sentence(text: str) -> bool:
    """One sentence: ends with a full stop, and no full stop followed by a space before the end."""
    return text.endswith(".") and ". " not in text[:-1].replace("e.g. ", "")


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_system_names(fake_system, name):
    fake_system(name)
    assert platforms.system_name() == SYSTEMS[name][2]


@pytest.mark.parametrize("name", ["linux", "linux-arm"])
def test_triton_runs_on_linux_where_it_is_installed(fake_system, name, capsys):
    fake_system(name, triton=True)
    found = platforms.available("triton")
    assert found.ok and bool(found) and found.reason == ""
    assert found.runs() is True and capsys.readouterr().out == ""
    found.require()  # no error


@pytest.mark.parametrize("name", ["macos", "macos-intel", "windows"])
def test_triton_elsewhere_names_the_system_and_says_to_use_colab(fake_system, name, capsys):
    fake_system(name, triton=True)  # even a triton that pip somehow found: there are no wheels for this system
    found = platforms.available("triton")
    assert not found.ok and not found
    assert found.reason.startswith(f"Triton ships for Linux only, so this {SYSTEMS[name][2]} machine cannot run "
                                   "lesson 06's kernels: open the lesson on Colab")
    assert _one_sentence(found.reason)
    assert ("WSL2" in found.reason) == (name == "windows")
    assert found.runs() is False
    captured = capsys.readouterr()
    assert captured.out == found.reason + "\n" and captured.err == ""


def test_triton_on_linux_without_it_says_how_to_install_it(fake_system):
    fake_system("linux", triton=False)
    found = platforms.available("triton")
    assert not found.ok and _one_sentence(found.reason)
    assert found.reason.startswith("Triton is not installed in this Python on Linux (x86_64)")
    assert "pip install -e '.[triton]'" in found.reason and "Colab" in found.reason


def test_triton_after_tensorflow_says_to_restart(fake_system, monkeypatch):
    fake_system("linux", triton=True)
    monkeypatch.setitem(sys.modules, "tensorflow", object())
    found = platforms.available("triton")
    assert not found.ok and "restart" in found.reason and _one_sentence(found.reason)


def test_triton_already_loaded_is_available_whatever_else_is(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", object())
    monkeypatch.setitem(sys.modules, "tensorflow", object())
    assert platforms.available("triton").ok


def test_nccl_on_linux_follows_the_torch_build(fake_system):
    fake_system("linux", nccl=True)
    assert platforms.available("nccl").ok
    fake_system("linux", nccl=False)
    found = platforms.available("nccl")
    assert not found.ok and _one_sentence(found.reason)
    assert found.reason.startswith("This PyTorch build has no NCCL") and "gloo" in found.reason


@pytest.mark.parametrize("name", ["macos", "windows"])
def test_nccl_elsewhere_names_the_system_and_the_gloo_fallback(fake_system, name):
    fake_system(name, nccl=True)
    found = platforms.available("nccl")
    assert not found.ok and _one_sentence(found.reason)
    assert (f"so on this {SYSTEMS[name][2]} machine lessons 14 and 15 run their process groups over gloo on the CPU"
            in found.reason) and "Kaggle" in found.reason


@pytest.mark.parametrize(("name", "gpus", "nccl", "expected"), [
    ("linux", 2, True, ""), ("linux", 4, True, ""),
    ("linux", 1, True, "2 processes, 1 CUDA GPU(s) visible here"),
    ("linux", 2, False, "this PyTorch build has none (a CPU build)"),
    ("macos", 0, False, "ships in PyTorch's Linux builds only, so not on this macOS (Apple silicon) machine"),
    ("windows", 2, False, "so not on this Windows (AMD64) machine"),
])
def test_nccl_refusal_says_why_in_one_sentence(fake_system, name, gpus, nccl, expected):
    """What parallel.pick_backend(2, 'nccl') raises where NCCL cannot serve two processes (empty where it can)."""
    fake_system(name)
    refusal = platforms.nccl_refusal(2, gpus, nccl)
    if not expected:
        assert refusal == ""
        return
    assert refusal.startswith("backend='nccl' needs one CUDA GPU per process") and expected in refusal
    assert "backend='gloo'" in refusal and _one_sentence(refusal)


def test_nccl_refusal_rejects_bad_input_naming_the_argument():
    with pytest.raises(ValueError, match="world_size"):
        platforms.nccl_refusal(0, 1, True)
    with pytest.raises(ValueError, match="gpus"):
        platforms.nccl_refusal(2, -1, True)
    with pytest.raises(TypeError, match="^nccl must be a bool"):
        platforms.nccl_refusal(2, 2, 1)


def test_require_raises_an_import_error_that_ipython_shows_as_one_line(fake_system):
    fake_system("macos")
    found = platforms.available("triton")
    with pytest.raises(platforms.NotAvailableHere) as caught:
        found.require()
    assert isinstance(caught.value, ImportError) and str(caught.value) == found.reason
    assert caught.value._render_traceback_() == [f"NotAvailableHere: {found.reason}"]


def test_stand_in_raises_the_sentence_on_any_use(fake_system):
    fake_system("windows")
    found = platforms.available("triton")
    triton = found.stand_in("triton")
    for use in (lambda: triton.jit, lambda: triton.cdiv(3, 2), lambda: triton(), lambda: setattr(triton, "x", 1)):
        with pytest.raises(platforms.NotAvailableHere, match="^Triton ships for Linux only"):
            use()
    assert not hasattr(triton, "_repr_html_")  # private names (IPython's probes) are plain missing attributes
    assert repr(triton).startswith("<triton: not available here. Triton ships")
    with pytest.raises(TypeError, match="^name must be"):
        found.stand_in("")


def test_triton_modules_hand_out_stand_ins_where_triton_cannot_run(fake_system):
    from gpucourse.kernels import triton_backend as tb

    fake_system("macos")
    triton, tl, kernels = tb.triton_modules()
    with pytest.raises(platforms.NotAvailableHere):
        triton.jit
    with pytest.raises(platforms.NotAvailableHere):
        kernels.softmax
    with pytest.raises(platforms.NotAvailableHere, match="^Triton ships for Linux only"):
        tb.require_triton()


@pytest.mark.parametrize("part", ["cuda", "", None, ["triton"]])
def test_unknown_parts_are_refused_naming_the_argument(part):
    with pytest.raises(ValueError, match=r"^part must be one of \['triton', 'nccl', 'tensorflow'\]"):
        platforms.available(part)


# --------------------------------------------------------------------------- lesson 06 without Triton

@pytest.mark.slow
def test_lesson_06_without_triton_skips_each_triton_cell_in_one_sentence(tmp_path, monkeypatch):
    """Lesson 06's solution in a Jupyter kernel where triton cannot be imported (a sitecustomize hides it): no
    cell that is not a graded test raises or writes to stderr, each cell that needs Triton prints the sentence, and
    each graded test that needs Triton fails with exactly that sentence (NotAvailableHere, no traceback)."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    hide = tmp_path / "hide"
    hide.mkdir()
    (hide / "sitecustomize.py").write_text("import sys\nsys.modules['triton'] = None  # as if not installed\n",
                                           encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(hide), str(ROOT / "src"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("GPUCOURSE_DEVICE", "cpu")
    monkeypatch.setitem(sys.modules, "triton", None)  # the same sentence, computed here
    reason = platforms.available("triton").reason
    assert reason.startswith("Triton is not installed in this Python on Linux")

    book = nbformat.read(ROOT / "solutions" / "06_triton" / "06_triton.ipynb", as_version=4)
    execute_naming_dead_kernel(nbclient.NotebookClient(book, timeout=syllabus.CELL_TIMEOUT_S, kernel_name="python3",
                                                       allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}),
                               "06_triton without triton")
    skipped, failed_tests = [], []
    for cell in book.cells:
        if cell.cell_type != "code":
            continue
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id", cell.get("id"))
        outputs = cell.get("outputs", [])
        assert not [out for out in outputs if out.get("name") == "stderr"], f"{grade_id} wrote to stderr"
        errors = [out for out in outputs if out.output_type == "error"]
        text = "".join(out.get("text", "") for out in outputs if out.output_type == "stream")
        if cell.metadata.get("nbgrader", {}).get("grade") and errors:
            (error,) = errors
            assert (error.ename, error.evalue) == ("NotAvailableHere", reason), grade_id
            assert error.traceback == [f"NotAvailableHere: {reason}"], grade_id
            failed_tests.append(grade_id)
            continue
        assert not errors, f"{grade_id}: {errors[0].ename}: {errors[0].evalue}"
        if reason in text:
            assert text.count(reason) == 1, grade_id
            skipped.append(grade_id)
    assert failed_tests == ["ex1-tests", "ex2-tests", "ex3-tests"]
    assert skipped == ["imports", "add-kernel", "no-mask-demo", "poison-demo", "fusion-demo", "ex1-smoke",
                       "softmax-time", "ex2-smoke", "ex3-smoke", "autotune"]
    assert json.dumps([cell.get("outputs", []) for cell in book.cells]).count("Traceback") == 0


def test_tensorflow_missing_is_one_sentence_naming_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # as if not installed
    found = platforms.available("tensorflow")
    assert not found.ok and found.reason.startswith("TensorFlow is not installed in this Python")
    assert "pip install -e '.[tensorflow]'" in found.reason and found.reason.count(": ") == 1
    monkeypatch.delitem(sys.modules, "tensorflow")
    assert platforms.available("tensorflow").ok  # installed in the test environment, found without importing it
