"""Tests of gpucourse.record (the measurement suite) and `python -m gpucourse record`, on the CPU in quick mode."""

from __future__ import annotations

import json
import math

import pytest

from gpucourse import record, reference
from gpucourse.__main__ import main

pytest.importorskip("torch")


@pytest.fixture(scope="module")
def quick_cpu_record() -> dict:
    """One quick recording on the CPU, shared by the tests that only read it."""
    return record.record(quick=True, device="cpu")


def test_a_quick_cpu_record_is_valid_and_labelled_as_measured_on_the_cpu(quick_cpu_record):
    data = quick_cpu_record
    assert reference.validate(data) is data
    assert data["measured"] is True and data["quick"] is True
    assert data["device"]["kind"] == "cpu" and data["device"]["name"]
    assert data["software"]["torch"] and data["software"]["python"]
    assert data["measured_by"] == "the course's maintainers"
    assert data["method"].startswith("python -m gpucourse record --quick")


def test_on_the_cpu_the_gpu_only_topics_are_skipped_with_a_reason_and_the_rest_measured(quick_cpu_record):
    data = quick_cpu_record
    assert data["errors"] == {}, data["errors"]
    assert set(data["figures"]) == {"matmul", "matmul_10k", "startup", "capstone"}
    assert set(data["skipped"]) == {"transfer", "cudnn_benchmark", "speedup"}
    assert "needs a CUDA GPU" in data["skipped"]["transfer"]
    assert set(data["figures"]) | set(data["skipped"]) == set(reference.TOPICS)


def test_matmul_rows_are_consistent_rates_of_the_quick_sizes(quick_cpu_record):
    rows = quick_cpu_record["figures"]["matmul"]["rows"]
    assert [(row["dtype"], row["n"]) for row in rows] == [("float32", 64), ("float32", 128)]
    for row in rows:
        assert math.isclose(row["tflops"], 2 * row["n"] ** 3 / (row["median_ms"] / 1e3) / 1e12, rel_tol=1e-9)
        assert 0 < row["tflops"] < 100, "a CPU cannot multiply at 100 TFLOP/s: the timing is broken"


def test_the_big_matmul_times_its_first_call_apart(quick_cpu_record):
    (row,) = quick_cpu_record["figures"]["matmul_10k"]["rows"]
    assert row["n"] == 256 and row["first_call_s"] > 0 and row["median_s"] > 0
    assert "first call timed alone" in quick_cpu_record["figures"]["matmul_10k"]["method"]


def test_startup_is_measured_in_a_fresh_process(quick_cpu_record):
    steps = [row["step"] for row in quick_cpu_record["figures"]["startup"]["rows"]]
    assert steps == ["import torch", "first 1024 matmul (library start-up)", "the same matmul again (warm)"]


def test_the_capstone_is_trained_in_float32_and_mixed_precision(quick_cpu_record):
    rows = quick_cpu_record["figures"]["capstone"]["rows"]
    assert [row["precision"] for row in rows] == ["float32", "bfloat16 autocast"]
    for row in rows:
        assert row["dataset"] == "digits" and row["target_accuracy"] == 0.95
        assert 0 <= row["final_accuracy"] <= 1 and row["images_per_s"] > 0


def test_a_failing_measurement_is_recorded_and_the_others_still_run(monkeypatch):
    def broken(device, plan):
        raise RuntimeError("cuBLAS is broken")

    monkeypatch.setitem(record.MEASUREMENTS, "matmul", broken)
    data = record.record(quick=True, device="cpu", topics=("matmul", "matmul_10k"))
    assert data["errors"] == {"matmul": "RuntimeError: cuBLAS is broken"}
    assert set(data["figures"]) == {"matmul_10k"}


def test_a_rate_above_the_datasheet_peak_is_an_error_not_a_figure(monkeypatch):
    torch = pytest.importorskip("torch")
    too_fast = {"method": "m", "rows": [{"dtype": "float32", "n": 4096, "median_ms": 0.001, "tflops": 5000.0}]}
    monkeypatch.setitem(record.MEASUREMENTS, "matmul", lambda device, plan: too_fast)
    status, message = record._run_one("matmul", torch.device("cpu"), record.Plan.for_device("cpu", True),
                                      {"name": "NVIDIA H100 80GB HBM3", "kind": "cuda"})
    assert status == "error"
    assert "above the NVIDIA H100 80GB HBM3 datasheet peak" in message


def test_a_progress_callback_gets_one_line_per_topic():
    lines: list[str] = []
    record.record(quick=True, device="cpu", topics=("matmul", "transfer"), progress=lines.append)
    assert [line.split()[:2] for line in lines] == [["matmul", "ok"], ["transfer", "skipped"]]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"quick": "yes"}, TypeError, "^quick must be True or False"),
    ({"topics": ("flops",)}, ValueError, "^topic must be one of"),
    ({"measured_by": " "}, ValueError, "^measured_by must be a non-empty str"),
    ({"device": "tpu"}, ValueError, "^prefer must be one of"),
], ids=["quick", "topics", "measured_by", "device"])
def test_record_rejects_bad_arguments_by_name(kwargs, error, message):
    with pytest.raises(error, match=message):
        record.record(**kwargs)


def test_plans_shrink_in_quick_mode_and_do_the_10000_case_on_a_gpu():
    gpu, quick = record.Plan.for_device("cuda", False), record.Plan.for_device("cuda", True)
    assert gpu.big_n == 10_000 and max(gpu.transfer_megabytes) >= 256
    assert quick.big_n < 1000 and max(quick.matmul_sizes) <= 128


# --------------------------------------------------------------------------- writing

def test_write_then_load_round_trips_and_an_existing_file_is_kept_unless_forced(tmp_path, quick_cpu_record):
    path = tmp_path / "out.json"
    assert record.write(quick_cpu_record, path) == path
    assert reference.load(path) == quick_cpu_record
    with pytest.raises(FileExistsError, match="exists: pass force=True"):
        record.write(quick_cpu_record, path)
    record.write(quick_cpu_record, path, force=True)


def test_write_refuses_a_malformed_record(tmp_path):
    with pytest.raises(ValueError, match="not a usable gpucourse reference file: format must be"):
        record.write({"format": "other"}, tmp_path / "x.json")
    assert not (tmp_path / "x.json").exists()


def test_cpu_and_quick_records_go_to_the_current_folder_a_full_gpu_record_into_the_package(
        tmp_path, monkeypatch, quick_cpu_record):
    monkeypatch.chdir(tmp_path)
    cpu_path = record.default_path(quick_cpu_record)
    assert cpu_path.parent == tmp_path and cpu_path.name.startswith("gpucourse-record-cpu-")
    assert cpu_path.name.endswith("-quick.json")
    gpu = {**quick_cpu_record, "quick": False, "device": {"name": "NVIDIA H100 80GB HBM3", "kind": "cuda"}}
    assert record.default_path(gpu).parent.name == "reference"
    assert record.default_path(gpu).name == "nvidia-h100-80gb-hbm3.json"
    assert record.default_path({**gpu, "quick": True}).parent == tmp_path


# --------------------------------------------------------------------------- the command line

def test_python_m_gpucourse_record_quick_writes_a_valid_file_and_refuses_to_overwrite_it(tmp_path, capsys):
    path = tmp_path / "record.json"
    assert main(["record", "--quick", "--device", "cpu", "--output", str(path)]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.splitlines()[-1].startswith(f"wrote {path} (")
    assert {line.split()[0] for line in out.splitlines()[:-1]} == set(reference.TOPICS)
    assert reference.load(path)["device"]["kind"] == "cpu"
    before = path.read_text()
    assert main(["record", "--quick", "--device", "cpu", "--output", str(path)]) == 2
    assert "exists: pass force=True (--force)" in capsys.readouterr().err
    assert path.read_text() == before
    assert main(["record", "--quick", "--device", "cpu", "--output", str(path), "--force"]) == 0
    assert json.loads(path.read_text())["date"] >= json.loads(before)["date"]
