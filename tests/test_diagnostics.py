"""Tests of the learner-facing checks: selftest(), doctor(), `python -m gpucourse`, and gpucourse.setup()."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

import gpucourse
from gpucourse import diagnostics, hardware
from gpucourse.__main__ import main
from gpucourse.diagnostics import SelfTestResult, doctor, selftest

GPU_STEPS = {"GPU matmul correct", "GPU reduced precision correct", "GPU convolution correct",
             "GPU matmul rate plausible", "GPU bandwidth plausible", "GPU launches asynchronous",
             "NVML metrics"}
CPU_STEPS = {"device chosen", "CPU peak"}


def run_cli(*args: str) -> subprocess.CompletedProcess:
    """Run `python -m gpucourse ARGS` with this interpreter (the venv's), outside the repository."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    return subprocess.run([sys.executable, "-m", "gpucourse", *args], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(os.path.abspath(__file__)), env=env)


# --------------------------------------------------------------------------- selftest

def test_selftest_without_a_gpu_skips_gpu_steps_and_passes_cpu_steps(no_gpu):
    results = selftest()
    by_name = {r.name: r for r in results}
    assert set(by_name) == GPU_STEPS | CPU_STEPS
    for name in GPU_STEPS:
        assert by_name[name].status == "SKIP", by_name[name]
        assert "Runtime > Change runtime type > GPU" in by_name[name].detail
    for name in CPU_STEPS:
        assert by_name[name].status == "PASS", by_name[name]
    assert by_name["device chosen"].detail == "cpu"


def test_selftest_reports_a_failing_step_and_carries_on(monkeypatch, no_gpu):
    def broken(*args, **kwargs):
        raise RuntimeError("BLAS is broken")

    monkeypatch.setattr(hardware, "measure_matmul_rate", broken)
    results = selftest()
    cpu_peak = next(r for r in results if r.name == "CPU peak")
    assert cpu_peak.status == "FAIL" and cpu_peak.detail == "RuntimeError: BLAS is broken"
    assert len(results) == len(GPU_STEPS | CPU_STEPS), "a failing step must not stop the others"


def test_a_failed_assertion_in_a_step_is_a_fail_with_its_message():
    def step():
        raise AssertionError("rate above the datasheet peak")

    result = diagnostics._run("rate", step)
    assert (result.status, result.detail) == ("FAIL", "AssertionError: rate above the datasheet peak")


def test_nvml_step_reads_the_first_gpu_through_gpucourse_nvml(monkeypatch):
    torch = pytest.importorskip("torch")
    from gpucourse import nvml

    fake = nvml.t4_power_capped()
    monkeypatch.setattr(diagnostics, "_cuda_or_skip", lambda: torch)
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert diagnostics._nvml_readable() == "utilisation 100%, memory 3.0/14.9 GiB, 58 W, 52 C"
    assert fake.open == 0
    no_power = nvml.FakeGpu("G", (7, 5), 2**30, {"sm": 1590, "graphics": 1590, "mem": 5001},
                            unsupported=("nvmlDeviceGetPowerUsage",))
    monkeypatch.setitem(sys.modules, "pynvml", nvml.FakeNvml([no_power]))
    with pytest.raises(RuntimeError, match=r"NVML gave no value for \['gpu_power'\]: nvmlDeviceGetPowerUsage: not"):
        diagnostics._nvml_readable()


def test_nvml_step_is_skipped_without_nvidia_ml_py(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(diagnostics, "_cuda_or_skip", lambda: torch)
    monkeypatch.setitem(sys.modules, "pynvml", None)
    result = diagnostics._run("NVML metrics", diagnostics._nvml_readable)
    assert (result.status, result.detail) == ("SKIP", "nvidia-ml-py not installed: pip install nvidia-ml-py")


def test_selftest_result_prints_status_name_and_detail():
    assert str(SelfTestResult("CPU peak", "PASS", "consistent")) == "[PASS] CPU peak: consistent"


# --------------------------------------------------------------------------- doctor

def test_doctor_quick_reports_the_environment_the_cpu_peak_and_the_bandwidth(no_gpu):
    text = doctor(quick=True)
    assert "device chosen" in text
    assert any(row.startswith("numpy ") and row.endswith(np.__version__) for row in text.splitlines())
    assert "CPU peak (float32)" in text
    assert "estimated : " in text and "GFLOP/s float32 = " in text
    assert "measured  : numpy 512x512 matmul" in text
    verdicts = [line for line in text.splitlines() if line.startswith("  verdict   : ")]
    assert len(verdicts) == 1
    assert any(word in verdicts[0] for word in ("consistent", "only", "too low"))
    assert "GB/s (numpy copy, read + write)" in text
    assert "\n\nGPU " not in text and "datasheet :" not in text, "no GPU section without a GPU"


@pytest.mark.parametrize("quick", ["yes", 1, None], ids=repr)
def test_doctor_rejects_a_non_bool_quick(quick):
    with pytest.raises(TypeError, match=r"^quick must be True or False"):
        doctor(quick=quick)


# --------------------------------------------------------------------------- the command line

def test_main_selftest_prints_every_step_and_returns_zero_without_failures(capsys, no_gpu):
    assert main(["selftest"]) == 0
    out, err = capsys.readouterr()
    assert out.count("[SKIP]") == len(GPU_STEPS) and out.count("[PASS]") == len(CPU_STEPS)
    assert err == ""


def test_main_selftest_returns_one_when_a_step_fails(capsys, monkeypatch, no_gpu):
    monkeypatch.setattr(hardware, "estimate_cpu_peak", lambda *a, **k: 1 / 0)
    assert main(["selftest"]) == 1
    assert "[FAIL] CPU peak: ZeroDivisionError" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [[], ["bogus"], ["doctor", "--fast"]], ids=str)
def test_main_rejects_a_missing_or_unknown_command_with_usage(capsys, argv):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    assert "usage: python -m gpucourse" in capsys.readouterr().err


def test_python_m_gpucourse_selftest_exits_zero_here():
    done = run_cli("selftest")
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(GPU_STEPS | CPU_STEPS)
    assert all(line.startswith(("[PASS]", "[SKIP]")) for line in lines)


def test_python_m_gpucourse_doctor_quick_prints_the_report_and_a_verdict():
    done = run_cli("doctor", "--quick")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "device chosen" in done.stdout and "numpy" in done.stdout
    assert any(line.startswith("  verdict   : ") for line in done.stdout.splitlines())


# --------------------------------------------------------------------------- gpucourse.setup

def test_quiet_frameworks_silences_tensorflow_without_overriding_a_choice(monkeypatch):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.setenv("TF_ENABLE_ONEDNN_OPTS", "1")
    gpucourse.quiet_frameworks()
    assert os.environ["TF_CPP_MIN_LOG_LEVEL"] == "2"
    assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "1"


def test_setup_prints_the_one_line_report_and_returns_it(capsys, monkeypatch, no_gpu):
    monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
    monkeypatch.delenv("TF_ENABLE_ONEDNN_OPTS", raising=False)
    report = gpucourse.setup()
    out, err = capsys.readouterr()
    assert out == report.one_line() + "\n" and out.startswith("device=cpu |")
    assert err == ""
    assert os.environ["TF_ENABLE_ONEDNN_OPTS"] == "0"


def test_doctor_prints_each_gpu_record_nvml_reads(monkeypatch, no_gpu):
    from gpucourse import nvml

    fake = nvml.read_devices(nvml.t4_example())
    monkeypatch.setattr(nvml, "read_devices", lambda: fake)
    text = doctor(quick=True)
    assert "GPU 0 (NVML)  Tesla T4, driver (example), compute capability 7.5" in text
    assert "max SM clock 1590 MHz, power limit 70 W" in text
