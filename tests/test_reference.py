"""Tests of gpucourse.reference: the recorded-measurement format, its refusals, show() and figures()."""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from gpucourse import reference

ROOT = Path(__file__).resolve().parents[1]


def good_record(device: str = "NVIDIA H100 80GB HBM3", kind: str = "cuda") -> dict:
    """A small well-formed record (made-up figures: tests only, never shipped)."""
    return {
        "format": "gpucourse-reference", "version": 1, "measured": True,
        "measured_by": "the course's maintainers", "date": "2026-11-22T16:00:00+00:00",
        "method": "gpucourse.record: median after warm-up, CUDA events",
        "device": {"name": device, "kind": kind, "compute_capability": [9, 0]},
        "software": {"torch": "2.11.0", "cuda": "13.0", "cudnn": None},
        "figures": {
            "matmul": {"method": "median of 10 after 3 warm-up", "rows": [
                {"dtype": "float32", "n": 4096, "median_ms": 3.0, "tflops": 45.8},
                {"dtype": "bfloat16", "n": 4096, "median_ms": 0.25, "tflops": 550.0}]},
            "speedup": {"method": "float32 matmul 4096", "rows": [
                {"workload": "matmul 4096 float32", "cpu_s": 2.0, "gpu_s": 0.004, "speedup": 500.0}]},
        },
        "errors": {"capstone": "RuntimeError: example"},
    }


@pytest.fixture
def shipped(monkeypatch, tmp_path):
    """Make the package's shipped references exactly the records written by the test."""
    paths: list[Path] = []
    monkeypatch.setattr(reference, "shipped_paths", lambda: sorted(paths))

    def add(data: dict, name: str = "gpu.json") -> Path:
        path = tmp_path / name
        path.write_text(json.dumps(data), encoding="utf-8")
        paths.append(path)
        return path

    return add


def write(tmp_path: Path, data: object, name: str = "ref.json") -> Path:
    """Write ``data`` as JSON to a file and return its path."""
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- load: accepted and refused

def test_load_accepts_a_well_formed_record(tmp_path):
    data = good_record()
    assert reference.load(write(tmp_path, data)) == data


def _broken(change) -> dict:
    """A good record with one change applied."""
    data = copy.deepcopy(good_record())
    change(data)
    return data


REFUSED = {
    "foreign format": (lambda d: d.update(format="tensorboard-run"), "format must be 'gpucourse-reference'"),
    "no format": (lambda d: d.pop("format"), "format must be"),
    "future version": (lambda d: d.update(version=2), "version must be 1"),
    "not measured": (lambda d: d.update(measured=False), "measured must be true"),
    "missing date": (lambda d: d.pop("date"), "lacks the field 'date'"),
    "bad date": (lambda d: d.update(date="last Tuesday"), "date must be an ISO 8601"),
    "device not an object": (lambda d: d.update(device="H100"), "the file.device must be a dict"),
    "unknown device kind": (lambda d: d["device"].update(kind="tpu"), "device.kind must be one of"),
    "unknown topic": (lambda d: d["figures"].update(flops={"method": "x", "rows": [{}]}),
                      r"unknown topic\(s\) \['flops'\]"),
    "row lacks a field": (lambda d: d["figures"]["matmul"]["rows"][0].pop("tflops"),
                          r"figures.matmul.rows\[0\] lacks the field 'tflops'"),
    "string rate": (lambda d: d["figures"]["matmul"]["rows"][0].update(tflops="45.8"),
                    r"figures.matmul.rows\[0\].tflops must be a finite number"),
    "bool size": (lambda d: d["figures"]["matmul"]["rows"][0].update(n=True), r"rows\[0\].n must be an int"),
    "negative time": (lambda d: d["figures"]["matmul"]["rows"][0].update(median_ms=-1), "finite number >= 0"),
    "empty rows": (lambda d: d["figures"]["matmul"].update(rows=[]), "rows is empty"),
    "no method": (lambda d: d["figures"]["matmul"].pop("method"), "figures.matmul lacks the field 'method'"),
    "unknown dtype": (lambda d: d["figures"]["matmul"]["rows"][0].update(dtype="fp8"), "dtype must be one of"),
    "above datasheet": (lambda d: d["figures"]["matmul"]["rows"][0].update(tflops=200.0),
                        "above the NVIDIA H100 80GB HBM3 datasheet peak of 67 TFLOP/s"),
    "inconsistent speed-up": (lambda d: d["figures"]["speedup"]["rows"][0].update(speedup=5.0),
                              "is not cpu_s / gpu_s"),
    "errors on unknown topic": (lambda d: d.update(errors={"flops": "x"}), "errors on unknown topic"),
    "skipped not text": (lambda d: d.update(skipped={"transfer": 1}), "skipped must be an object mapping"),
    "quick not a bool": (lambda d: d.update(quick="no"), "quick must be true or false"),
    "software not a string": (lambda d: d["software"].update(torch=2.11), "software.torch must be a version"),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_load_refuses_a_malformed_record_naming_the_file_and_the_fault(tmp_path, case):
    change, message = REFUSED[case]
    path = write(tmp_path, _broken(change))
    with pytest.raises(ValueError, match=message) as info:
        reference.load(path)
    assert str(info.value).startswith(f"{path}: not a usable gpucourse reference file: ")


@pytest.mark.parametrize("content, message", [
    ("{not json", "it is not valid JSON"),
    ("[1, 2, 3]", "the top level must be a JSON object, got list"),
    ('{"format": "gpucourse-reference"}', "version must be 1"),
], ids=["not json", "a list", "marker only"])
def test_load_refuses_a_foreign_file(tmp_path, content, message):
    path = tmp_path / "foreign.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        reference.load(path)


def test_load_refuses_a_missing_file_and_a_non_path(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        reference.load(tmp_path / "absent.json")
    with pytest.raises(TypeError, match="^path must be a str or pathlib.Path"):
        reference.load(3)


def test_an_unknown_gpu_has_no_datasheet_bound_but_a_known_one_does(tmp_path):
    data = _broken(lambda d: d["figures"]["matmul"]["rows"][0].update(tflops=200.0))
    data["device"]["name"] = "Some Future Accelerator"
    assert reference.load(write(tmp_path, data))["device"]["name"] == "Some Future Accelerator"


# --------------------------------------------------------------------------- the shipped files

def test_every_shipped_reference_is_valid_and_measured_on_a_gpu():
    for path in reference.shipped_paths():
        data = reference.load(path)
        assert data["device"]["kind"] == "cuda", f"{path.name}: CPU records are not shipped as GPU references"
        assert not data.get("quick"), f"{path.name}: a --quick record is a test, not a reference"
        assert path.stem == reference.device_slug(data["device"]["name"])


def test_pyproject_declares_the_reference_files_as_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "*.json" in config["tool"]["setuptools"]["package-data"]["gpucourse.reference"]


@pytest.mark.slow
def test_a_built_wheel_carries_the_reference_files(tmp_path):
    """Build a wheel from a copy of the package with one record added: the record must be inside it."""
    source = tmp_path / "source"
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    (source / "src/gpucourse/reference/nvidia-h100-80gb-hbm3.json").write_text(json.dumps(good_record()))
    script = ("import setuptools.build_meta as b, sys; print(b.build_wheel(sys.argv[1]))")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path / "dist")], cwd=source, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    wheel = tmp_path / "dist" / done.stdout.strip().splitlines()[-1]
    names = zipfile.ZipFile(wheel).namelist()
    assert "gpucourse/reference/nvidia-h100-80gb-hbm3.json" in names
    assert "gpucourse/reference/__init__.py" in names


def test_device_slug_is_a_file_name_and_rejects_bad_input():
    assert reference.device_slug("NVIDIA H100 80GB HBM3") == "nvidia-h100-80gb-hbm3"
    assert reference.device_slug("Tesla T4") == "tesla-t4"
    with pytest.raises(ValueError, match="^name must contain"):
        reference.device_slug("  ")
    with pytest.raises(TypeError, match="^name must be a str"):
        reference.device_slug(None)


# --------------------------------------------------------------------------- show and figures

def test_show_without_a_recording_says_so_then_shows_the_published_figures(capsys, shipped):
    reference.show("startup")
    out, err = capsys.readouterr()
    assert err == ""
    first, rest = out.split("Published measurement on ", 1)
    rest = "Published measurement on " + rest
    assert " ".join(first.split()) == ("No GPU measurement of 'startup' has been recorded for the course yet (a maintainer records "
                     "one with `python -m gpucourse record` on a GPU machine). Published ones:")
    published = [entry for entry in reference.PUBLIC if entry["topic"] == "startup"]
    assert rest.count("Published measurement on ") == len(published) >= 1
    for entry in published:
        assert entry["url"] in rest


def test_show_prints_recorded_figures_with_their_label_then_public_ones(capsys, shipped):
    shipped(good_record())
    reference.show("matmul")
    out, err = capsys.readouterr()
    assert err == ""
    recorded, published = out.split("Published measurement on ", 1)
    lines = recorded.splitlines()
    assert lines[0] == ("measured on NVIDIA H100 80GB HBM3 by the course's maintainers on 2026-11-22 "
                        "(median of 10 after 3 warm-up):")
    assert lines[1].split() == ["dtype", "n", "median", "ms", "TFLOP/s"]
    assert lines[2].split() == ["float32", "4096", "3", "45.8"]
    assert lines[3].split() == ["bfloat16", "4096", "0.25", "550"]
    assert len(lines) == 4
    entries = [entry for entry in reference.PUBLIC if entry["topic"] == "matmul"]
    assert out.count("Published measurement on ") == len(entries)
    assert "No GPU measurement" not in out
    for entry in entries:
        assert f"source: {entry['source']}" in " ".join(out.split())
        assert entry["url"] in out


def test_a_published_entry_reads_as_published_with_its_conditions_and_source():
    entry = {"topic": "matmul", "device": "T9", "value": 12.5, "unit": "TFLOP/s", "precision": "float16",
             "conditions": "4096 x 4096, mean of 10", "date": "2024-05", "figure": "12.5 TFLOP/s in float16",
             "why": "power capping", "source": "A. Author, 'A title'", "url": "https://example.org/a"}
    text = reference.public_text(entry)
    assert text.startswith("Published measurement on T9 (2024-05), from its source, not measured by the course: "
                           "12.5 TFLOP/s in float16.")
    flat = " ".join(text.split())
    assert "precision: float16; conditions: 4096 x 4096, mean of 10." in flat
    assert "why: power capping." in flat and flat.endswith("source: A. Author, 'A title', https://example.org/a")
    assert max(len(line) for line in text.splitlines()) <= 120


def test_show_ignores_a_cpu_record(capsys, shipped):
    shipped(good_record(device="Intel Xeon", kind="cpu"))
    reference.show("speedup")
    out = capsys.readouterr().out
    assert out.startswith("No GPU measurement of 'speedup' has been recorded") and "measured on Intel" not in out


def test_show_refuses_a_malformed_shipped_file(shipped):
    shipped({"format": "gpucourse-reference", "version": 1}, name="broken.json")
    with pytest.raises(ValueError, match=r"broken.json: not a usable gpucourse reference file"):
        reference.show("matmul")


def test_figures_returns_labelled_recorded_rows_then_public_ones(shipped):
    shipped(good_record())
    rows = reference.figures("matmul")
    public = [entry for entry in reference.PUBLIC if entry["topic"] == "matmul"]
    assert [row["kind"] for row in rows] == ["recorded", "recorded"] + ["public"] * len(public)
    assert rows[0]["tflops"] == 45.8 and rows[0]["device"] == "NVIDIA H100 80GB HBM3"
    assert rows[0]["label"].startswith("measured on NVIDIA H100 80GB HBM3 by the course's maintainers on 2026-11-22")
    assert rows[2]["source"] and rows[2]["url"].startswith("https://")
    assert reference.figures("capstone") and {row["kind"] for row in reference.figures("capstone")} == {"public"}


def test_every_published_measurement_is_complete_and_every_topic_has_one():
    assert reference.check_public() == reference.PUBLIC
    assert len(reference.PUBLIC) >= 15
    for topic in reference.TOPICS + reference.PUBLIC_ONLY_TOPICS:
        assert [entry for entry in reference.PUBLIC if entry["topic"] == topic], f"no published figure on {topic!r}"


def _entry(**changes: object) -> dict:
    entry = {"topic": "transfer", "device": "T9", "value": 11, "unit": "GB/s", "precision": "not stated",
             "conditions": "pinned, 16 MB", "date": "2021", "figure": "11 GB/s host to device",
             "why": "PCIe 3", "source": "A forum", "url": "https://example.org/t"}
    entry.update(changes)
    return {key: value for key, value in entry.items() if value is not ...}


@pytest.mark.parametrize("changes, message", [
    ({"source": ...}, r"lacks 'source'"),
    ({"url": ""}, r"lacks 'url'"),
    ({"device": "  "}, r"lacks 'device'"),
    ({"unit": ...}, r"lacks 'unit'"),
    ({"precision": None}, r"lacks 'precision'"),
    ({"date": ...}, r"lacks 'date'"),
    ({"unit": "GB"}, r"unit must be one of \['TFLOP/s'"),
    ({"unit": 3}, r"unit must be a str"),
    ({"value": "11"}, r"value must be a finite number >= 0, got '11'"),
    ({"value": float("nan")}, r"value must be a finite number"),
    ({"value": True}, r"value must be a finite number"),
    ({"value": 12}, r"the figure's text must state its value 12 GB/s"),
    ({"date": "last year"}, r"date must be YYYY, YYYY-MM or YYYY-MM-DD, got 'last year'"),
    ({"topic": "flops"}, r"topic must be one of \['matmul'"),
    ({"url": "http://example.org"}, r"url must be a public https:// address"),
    ({"sources": "x"}, r"unknown field\(s\) \['sources'\]"),
])
def test_an_incomplete_or_malformed_published_entry_is_refused_naming_the_fault(changes, message):
    assert reference.check_public_entry(_entry()) == _entry()
    with pytest.raises(ValueError, match=message):
        reference.check_public_entry(_entry(**changes), where="entry 3")
    with pytest.raises(ValueError, match="^entry 3"):
        reference.check_public_entry(_entry(**changes), where="entry 3")


def test_a_topic_without_a_published_measurement_is_refused():
    complete = [dict(entry) for entry in reference.PUBLIC]
    with pytest.raises(ValueError, match=r"topic\(s\) \['startup'\] have no published measurement"):
        reference.check_public([entry for entry in complete if entry["topic"] != "startup"])
    with pytest.raises(ValueError, match=r"published measurement 0 \(matmul\) lacks 'url'"):
        reference.check_public([{**complete[0], "url": ""}, *complete[1:]])
    with pytest.raises(TypeError, match="^entries must be a list or tuple"):
        reference.check_public("matmul")
    with pytest.raises(ValueError, match="must be a dict, got str"):
        reference.check_public(["matmul"])


@pytest.mark.parametrize("topic", reference.PUBLIC_ONLY_TOPICS)
def test_a_public_only_topic_has_published_figures_and_shows_them(capsys, topic):
    """Topics the recorder never measures must show at least one published figure, never an empty table."""
    assert [entry for entry in reference.PUBLIC if entry["topic"] == topic], f"no published figure on {topic!r}"
    assert reference.figures(topic) and all(row["kind"] == "public" for row in reference.figures(topic))
    reference.show(topic)
    out, err = capsys.readouterr()
    assert err == "" and "source:" in out and "recorded" not in out


@pytest.mark.parametrize("function", [reference.show, reference.figures])
def test_an_unknown_topic_is_refused_naming_the_argument_and_the_topics(function):
    with pytest.raises(ValueError, match=r"^topic must be one of \['matmul', 'matmul_10k', 'startup'"):
        function("flops")
    with pytest.raises(TypeError, match="^topic must be a str"):
        function(None)


@pytest.mark.parametrize("topic", reference.TOPICS)
def test_show_runs_for_every_topic_on_the_shipped_files(capsys, topic):
    reference.show(topic)
    out, err = capsys.readouterr()
    assert err == "" and out.strip()


def test_show_compact_prints_one_table_with_each_figure_and_the_shared_source_once(capsys):
    published = [entry for entry in reference.PUBLIC if entry["topic"] == "matmul_kernels"]
    reference.show("matmul_kernels", compact=True)
    out, err = capsys.readouterr()
    assert err == "" and "| measurement | figure |" in out
    assert out.count(published[0]["url"]) == 1 and "Published measurement on " not in out
    for entry in published:
        assert entry["label"] in out and f"{entry['value']:,g} {entry['unit']}" in out


def test_public_table_gives_each_row_what_the_figures_do_not_share(capsys):
    entries = [entry for entry in reference.PUBLIC if entry["topic"] == "matmul"][:2]
    reference.public_table(entries)
    out, _ = capsys.readouterr()
    assert "| device |" in out and all(entry["url"] in out and entry["figure"] in out for entry in entries)


def test_show_and_public_table_refuse_bad_arguments():
    with pytest.raises(TypeError, match="compact"):
        reference.show("matmul_kernels", compact="yes")
    with pytest.raises(ValueError, match="entries"):
        reference.public_table([])
    entry = dict(next(e for e in reference.PUBLIC if e["topic"] == "histogram"), label=" ")
    with pytest.raises(ValueError, match="label"):
        reference.check_public_entry(entry)


def test_every_topic_is_shown_by_at_least_one_lesson():
    """Each topic's published figures reach a learner: some lesson calls reference.show on it."""
    root = Path(__file__).resolve().parents[1]
    shown: set[str] = set()
    for path in sorted(root.glob("solutions/*/*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                shown |= set(re.findall(r"""reference\.show\(\s*["'](\w+)["']\s*(?:,\s*compact\s*=\s*\w+\s*)?\)""", source))
    missing = sorted(set(reference.TOPICS + reference.PUBLIC_ONLY_TOPICS) - shown)
    assert not missing, f"no lesson shows the published figures on {missing}"
    assert not shown - set(reference.TOPICS + reference.PUBLIC_ONLY_TOPICS)
