"""Recorded GPU measurements shipped with the course, and public measurements with their sources.

A maintainer runs ``python -m gpucourse record`` on a GPU machine; it writes one JSON file
(``src/gpucourse/reference/<device>.json``) that ships inside the package, so that a learner without a GPU
sees what a real GPU measured beside its datasheet figures: ``reference.show("matmul")``.
"""

from __future__ import annotations

import datetime
import importlib.resources
import json
import math
import numbers
import re
import textwrap
from pathlib import Path

from gpucourse.reference.published import PUBLIC

FORMAT = "gpucourse-reference"
VERSION = 1

TOPICS = ("matmul", "matmul_10k", "startup", "transfer", "cudnn_benchmark", "capstone", "speedup")
"""What the course records, one entry per figure the lessons discuss."""

PUBLIC_ONLY_TOPICS: tuple[str, ...] = (
    # lesson 04 (coalesced against strided global-memory access)
    "coalescing",
    # lesson 05 (hand-written CUDA matmul kernels against cuBLAS; a privatised histogram; a tiled transpose)
    "matmul_kernels", "histogram", "transpose",

    # lesson 06 (Triton kernels against torch on a GPU)
    "triton_kernels",

    # lesson 10 (torch.compile, CUDA Graphs at model scale)
    "torch_compile", "cuda_graphs",

    # lesson 11 (attention kernels, SDPA backends)
    "attention",

    # lesson 14 (all-reduce bandwidth within a node, NCCL)
    "allreduce",

    # lesson 15 (all-reduce bandwidth as nodes are added)
    "allreduce_scaling",

    # lesson 12 (mixed-precision training throughput)
    "mixed_precision",

    # lesson 09 and gpucourse.sustained (clocks and power under sustained load)
    "sustained",

)
"""Topics the recorder does not measure: ``show`` prints their published measurements (each needs one at least)."""

DEVICE_KINDS = ("cuda", "cpu", "mps")
MATMUL_DTYPES = ("float64", "float32", "tf32", "float16", "bfloat16")

_NUMBER = "number"
_OPTIONAL_NUMBER = "number or null"
ROW_FIELDS: dict[str, dict[str, object]] = {
    "matmul": {"dtype": str, "n": int, "median_ms": _NUMBER, "tflops": _NUMBER},
    "matmul_10k": {"dtype": str, "n": int, "median_s": _NUMBER, "tflops": _NUMBER, "first_call_s": _NUMBER},
    "startup": {"step": str, "seconds": _NUMBER},
    "transfer": {"megabytes": _NUMBER, "memory": str, "gb_s": _NUMBER},
    "cudnn_benchmark": {"layer": str, "benchmark": bool, "first_call_ms": _NUMBER, "median_ms": _NUMBER},
    "capstone": {"dataset": str, "precision": str, "target_accuracy": _NUMBER, "seconds_to_target": _OPTIONAL_NUMBER,
                 "final_accuracy": _NUMBER, "images_per_s": _NUMBER},
    "speedup": {"workload": str, "cpu_s": _NUMBER, "gpu_s": _NUMBER, "speedup": _NUMBER},
}
"""The fields every row of a topic holds, and their types (JSON numbers are ints or floats, never booleans)."""

_HEADINGS = {"median_ms": "median ms", "median_s": "median s", "tflops": "TFLOP/s", "first_call_s": "first call s",
             "first_call_ms": "first call ms", "gb_s": "GB/s", "megabytes": "MB", "seconds_to_target": "s to target",
             "target_accuracy": "target", "final_accuracy": "final acc.", "images_per_s": "images/s",
             "cpu_s": "CPU s", "gpu_s": "GPU s", "speedup": "speed-up"}

PUBLIC_FIELDS: dict[str, object] = {
    "topic": str, "device": str, "value": _NUMBER, "unit": str, "precision": str, "conditions": str, "date": str,
    "figure": str, "why": str, "source": str, "url": str}
"""The fields every published measurement holds, and their types."""

PUBLIC_OPTIONAL_FIELDS: dict[str, object] = {"label": str}
"""Fields a published measurement may hold: ``label``, a short name for its row in ``show(topic, compact=True)``."""

UNITS = ("TFLOP/s", "PFLOP/s", "GFLOP/s", "GB/s", "s", "ms", "us", "min", "h", "MHz", "W", "x", "%", "images/s",
         "tokens/s", "bytes")
"""The units a published figure may carry (``x`` for a speed-up ratio, ``%`` for a share or an improvement)."""


# --------------------------------------------------------------------------- validation

def _fail(where: str, problem: str) -> None:
    """Raise the one error a refused reference file gets: which file, and what is wrong with it."""
    raise ValueError(f"{where}: not a usable gpucourse reference file: {problem}")


def _is_number(value: object) -> bool:
    """True for a finite int or float that is not a bool."""
    return (isinstance(value, numbers.Real) and not isinstance(value, bool)
            and math.isfinite(float(value)))


def _check_type(where: str, field: str, value: object, expected: object) -> None:
    """Refuse ``value`` unless it has the ``expected`` type (a Python type, _NUMBER or _OPTIONAL_NUMBER)."""
    if expected == _OPTIONAL_NUMBER and value is None:
        return
    if expected in (_NUMBER, _OPTIONAL_NUMBER):
        if not _is_number(value) or value < 0:
            _fail(where, f"{field} must be a finite number >= 0, got {value!r}")
        return
    if (expected is int and isinstance(value, bool)) or not isinstance(value, expected):
        _fail(where, f"{field} must be {'a' if expected is not int else 'an'} {expected.__name__}, "
                     f"got {type(value).__name__} ({value!r})")


def _check_fields(where: str, what: str, data: object, fields: dict[str, object]) -> None:
    """Refuse ``data`` unless it is an object holding every field of ``fields`` with its type."""
    if not isinstance(data, dict):
        _fail(where, f"{what} must be a JSON object, got {type(data).__name__}")
    for field, expected in fields.items():
        if field not in data:
            _fail(where, f"{what} lacks the field {field!r}")
        _check_type(where, f"{what}.{field}", data[field], expected)


def _datasheet_peak(device_name: str, dtype: str) -> float | None:
    """Datasheet peak FLOP/s of a known GPU for ``dtype``, or None where the course's table has no figure."""
    from gpucourse import hardware

    try:
        return hardware.gpu_spec(device_name).peak_flops(dtype)
    except ValueError:
        return None


def _check_topic(where: str, topic: str, entry: object, device: dict) -> None:
    """Refuse one topic's figures if a row lacks a field, has a wrong type, or breaks the laws of the chip."""
    _check_fields(where, f"figures.{topic}", entry, {"method": str, "rows": list})
    if not entry["rows"]:
        _fail(where, f"figures.{topic}.rows is empty: leave the topic out instead")
    for index, row in enumerate(entry["rows"]):
        what = f"figures.{topic}.rows[{index}]"
        _check_fields(where, what, row, ROW_FIELDS[topic])
        if topic in ("matmul", "matmul_10k"):
            if row["dtype"] not in MATMUL_DTYPES:
                _fail(where, f"{what}.dtype must be one of {list(MATMUL_DTYPES)}, got {row['dtype']!r}")
            peak = _datasheet_peak(device["name"], row["dtype"]) if device["kind"] == "cuda" else None
            if peak is not None and row["tflops"] * 1e12 > 1.1 * peak:
                _fail(where, f"{what}: {row['tflops']} TFLOP/s {row['dtype']} is above the {device['name']} "
                             f"datasheet peak of {peak / 1e12:g} TFLOP/s: the timing was not synchronised")
        if topic == "transfer" and row["memory"] not in ("pageable", "pinned"):
            _fail(where, f"{what}.memory must be 'pageable' or 'pinned', got {row['memory']!r}")
        if topic == "speedup" and row["gpu_s"] > 0 and not math.isclose(
                row["speedup"], row["cpu_s"] / row["gpu_s"], rel_tol=0.01):
            _fail(where, f"{what}.speedup {row['speedup']} is not cpu_s / gpu_s = {row['cpu_s'] / row['gpu_s']:.4g}")


def validate(data: object, where: str = "reference") -> dict:
    """Return ``data`` if it is a well-formed reference record, else raise ValueError naming ``where`` and the fault."""
    if not isinstance(data, dict):
        _fail(where, f"the top level must be a JSON object, got {type(data).__name__}")
    if data.get("format") != FORMAT:
        _fail(where, f"format must be {FORMAT!r}, got {data.get('format')!r} (a file from another tool?)")
    if data.get("version") != VERSION:
        _fail(where, f"version must be {VERSION}, got {data.get('version')!r}")
    _check_fields(where, "the file", data, {"measured": bool, "measured_by": str, "date": str, "method": str,
                                            "device": dict, "software": dict, "figures": dict})
    if data["measured"] is not True:
        _fail(where, "measured must be true: the course ships measurements only, never estimates")
    try:
        datetime.datetime.fromisoformat(data["date"])
    except ValueError:
        _fail(where, f"date must be an ISO 8601 date or time (e.g. '2026-11-22'), got {data['date']!r}")
    device = data["device"]
    _check_fields(where, "device", device, {"name": str, "kind": str})
    if device["kind"] not in DEVICE_KINDS:
        _fail(where, f"device.kind must be one of {list(DEVICE_KINDS)}, got {device['kind']!r}")
    for key, value in data["software"].items():
        if value is not None and not isinstance(value, str):
            _fail(where, f"software.{key} must be a version string or null, got {value!r}")
    unknown = sorted(set(data["figures"]) - set(TOPICS))
    if unknown:
        _fail(where, f"figures on unknown topic(s) {unknown}: the topics are {list(TOPICS)}")
    for topic, entry in data["figures"].items():
        _check_topic(where, topic, entry, device)
    for field in ("errors", "skipped"):  # topics that failed, or that mean nothing on this device: why
        reasons = data.get(field, {})
        if not isinstance(reasons, dict) or not all(isinstance(v, str) for v in reasons.values()):
            _fail(where, f"{field} must be an object mapping a topic to a message")
        if set(reasons) - set(TOPICS):
            _fail(where, f"{field} on unknown topic(s) {sorted(set(reasons) - set(TOPICS))}")
    if not isinstance(data.get("quick", False), bool):
        _fail(where, f"quick must be true or false, got {data['quick']!r}")
    return data


_DATE = re.compile(r"\d{4}(-\d{2}(-\d{2})?)?")


def check_public_entry(entry: object, where: str = "published measurement") -> dict:
    """Return ``entry`` if it is a complete published measurement, else raise ValueError naming ``where`` and the fault."""
    if not isinstance(entry, dict):
        raise ValueError(f"{where} must be a dict, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(PUBLIC_FIELDS) - set(PUBLIC_OPTIONAL_FIELDS))
    if unknown:
        raise ValueError(f"{where} has unknown field(s) {unknown}: the fields are {list(PUBLIC_FIELDS)}, "
                         f"optionally {list(PUBLIC_OPTIONAL_FIELDS)}")
    if "label" in entry and not (isinstance(entry["label"], str) and entry["label"].strip()):
        raise ValueError(f"{where}: label must be a non-empty str, got {entry['label']!r}")
    for field, expected in PUBLIC_FIELDS.items():
        value = entry.get(field)
        if field not in entry or value is None or (isinstance(value, str) and not value.strip()):
            raise ValueError(f"{where} lacks {field!r}: every published figure needs its topic, device, value, unit, "
                             "precision, conditions (or 'not stated'), date, source and url")
        if expected == _NUMBER and not (_is_number(value) and value >= 0):
            raise ValueError(f"{where}: value must be a finite number >= 0, got {value!r}")
        if expected is str and not isinstance(value, str):
            raise ValueError(f"{where}: {field} must be a str, got {type(value).__name__} ({value!r})")
    if entry["topic"] not in TOPICS + PUBLIC_ONLY_TOPICS:
        raise ValueError(f"{where}: topic must be one of {list(TOPICS + PUBLIC_ONLY_TOPICS)}, got {entry['topic']!r}")
    if entry["unit"] not in UNITS:
        raise ValueError(f"{where}: unit must be one of {list(UNITS)}, got {entry['unit']!r}")
    if not _DATE.fullmatch(entry["date"]):
        raise ValueError(f"{where}: date must be YYYY, YYYY-MM or YYYY-MM-DD, got {entry['date']!r}")
    if f"{entry['value']:g}" not in entry["figure"].replace(",", ""):
        raise ValueError(f"{where}: the figure's text must state its value {entry['value']:g} {entry['unit']}, so "
                         "that the headline number and the sentence cannot disagree")
    if not entry["url"].startswith("https://"):
        raise ValueError(f"{where}: url must be a public https:// address, got {entry['url']!r}")
    return entry


def check_public(entries: object = None) -> tuple[dict, ...]:
    """Return ``entries`` (default PUBLIC) if every one is complete and every topic has one, else raise ValueError."""
    entries = PUBLIC if entries is None else entries
    if not isinstance(entries, (list, tuple)):
        raise TypeError(f"entries must be a list or tuple of dicts, got {type(entries).__name__}")
    for index, entry in enumerate(entries):
        name = entry.get("topic", "?") if isinstance(entry, dict) else "?"
        check_public_entry(entry, where=f"published measurement {index} ({name})")
    bare = [topic for topic in TOPICS + PUBLIC_ONLY_TOPICS if not any(e["topic"] == topic for e in entries)]
    if bare:
        raise ValueError(f"topic(s) {bare} have no published measurement: add one with its source, so that a learner "
                         "without a GPU never sees 'nothing recorded' alone")
    return tuple(entries)


def load(path: object) -> dict:
    """Read and validate one reference file; a malformed or foreign file raises ValueError naming it."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or pathlib.Path, got {type(path).__name__}")
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"path {str(path)!r} does not exist") from None
    except UnicodeDecodeError:
        _fail(str(path), "it is not UTF-8 text")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        _fail(str(path), f"it is not valid JSON ({error})")
    return validate(data, where=str(path))


# --------------------------------------------------------------------------- the shipped files

def device_slug(name: str) -> str:
    """File-name form of a device name: 'NVIDIA H100 80GB HBM3' -> 'nvidia-h100-80gb-hbm3'."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")
    if not slug:
        raise ValueError(f"name must contain a letter or digit, got {name!r}")
    return slug


def shipped_paths() -> list[Path]:
    """The reference files inside the installed package, sorted by name."""
    folder = importlib.resources.files(__name__)
    return sorted(Path(str(item)) for item in folder.iterdir() if item.name.endswith(".json"))


def recorded() -> list[dict]:
    """Every shipped reference measured on a GPU (CPU records are never shipped as GPU references)."""
    return [data for data in map(load, shipped_paths()) if data["device"]["kind"] != "cpu"]


def _topic(topic: object) -> str:
    """Return ``topic`` if it is one the course records or shows published figures on, else raise naming it."""
    known = list(TOPICS + PUBLIC_ONLY_TOPICS)
    if not isinstance(topic, str):
        raise TypeError(f"topic must be a str, one of {known}, got {type(topic).__name__}")
    if topic not in known:
        raise ValueError(f"topic must be one of {known}, got {topic!r}")
    return topic


def label(data: dict, topic: str) -> str:
    """'measured on <device> by <who> on <date> (<method>)' for one topic of one record."""
    method = data["figures"][topic]["method"] if topic in data["figures"] else data["method"]
    return f"measured on {data['device']['name']} by {data['measured_by']} on {data['date'][:10]} ({method})"


def figures(topic: str) -> list[dict]:
    """Rows on ``topic``: recorded ones (kind 'recorded', with device, date and label), then public ones."""
    topic = _topic(topic)
    rows = []
    for data in recorded():
        if topic in data["figures"]:
            for row in data["figures"][topic]["rows"]:
                rows.append({"kind": "recorded", "device": data["device"]["name"], "date": data["date"],
                             "label": label(data, topic), **row})
    rows += [{"kind": "public", **entry} for entry in PUBLIC if entry["topic"] == topic]
    return rows


def _cell(value: object) -> str:
    """A table cell: floats to 3 significant figures, None as '-'."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1e4 else f"{value:,.0f}"
    return str(value)


def table(topic: str, rows: list[dict]) -> str:
    """A small text table of rows on ``topic``, indented for show()."""
    columns = list(ROW_FIELDS[_topic(topic)])
    header = [_HEADINGS.get(column, column) for column in columns]
    body = [[_cell(row.get(column)) for column in columns] for row in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(columns))]
    text = [ROW_FIELDS[topic][column] is str for column in columns]  # text left-aligned, numbers right-aligned
    return "\n".join("    " + "  ".join(cell.ljust(width) if left else cell.rjust(width)
                                          for cell, width, left in zip(line, widths, text)).rstrip()
                     for line in [header, *body])


def public_text(entry: dict) -> str:
    """One published measurement as a learner reads it: the figure, its conditions, why, and the source."""
    lines = [f"Published measurement on {entry['device']} ({entry['date']}), from its source, not measured by the "
             f"course: {entry['figure']}.",
             f"precision: {entry['precision']}; conditions: {entry['conditions']}.",
             f"why: {entry['why']}.",
             f"source: {entry['source']}, {entry['url']}"]
    return "\n".join(textwrap.fill(line, width=116, initial_indent="" if i == 0 else "    ",
                                    subsequent_indent="    ", break_on_hyphens=False, break_long_words=False)
                      for i, line in enumerate(lines))


def public_table(entries: list[dict]) -> None:
    """Published measurements as one table: a row per figure (its label and value), what they share said once."""
    from gpucourse.plots import show_table

    if not isinstance(entries, (list, tuple)) or not entries:
        raise ValueError("entries must be a non-empty list of published measurements")
    entries = [check_public_entry(entry) for entry in entries]
    shared = [field for field in ("device", "date", "precision", "conditions", "source", "url")
              if len({entry[field] for entry in entries}) == 1]
    first = entries[0]
    where = ", ".join(first[field] for field in ("device", "date") if field in shared)
    head = [f"Published measurements{f' on {where}' if where else ''}, from their source, not measured by the course."]
    head += [f"{field.capitalize()}: {first[field]}." for field in ("precision", "conditions") if field in shared]
    print(textwrap.fill(" ".join(head), width=116, break_on_hyphens=False, break_long_words=False))
    varying = [field for field in ("device", "date", "precision", "conditions") if field not in shared]
    rows = [[entry.get("label", entry["figure"]), f"{entry['value']:,g} {entry['unit']}"]
            + [entry[field] for field in varying] for entry in entries]
    sourced = "source" in shared and "url" in shared
    if not sourced:
        rows = [row + [f"{entry['source']}, {entry['url']}"] for row, entry in zip(rows, entries)]
    show_table(["measurement", "figure", *varying] + ([] if sourced else ["source"]), rows)
    if sourced:
        print(textwrap.fill(f"source: {first['source']}, {first['url']}", width=116, break_on_hyphens=False,
                            break_long_words=False))


def show(topic: str, compact: bool = False) -> None:
    """Print the course's recorded GPU measurements on ``topic`` (labelled), then published ones with their sources.

    With ``compact``, the published ones form one table (label and value per row, their shared conditions and
    source said once) instead of a paragraph each.
    """
    topic = _topic(topic)
    if not isinstance(compact, bool):
        raise TypeError(f"compact must be a bool, got {type(compact).__name__}")
    records = [data for data in recorded() if topic in data["figures"]]
    published = [entry for entry in PUBLIC if entry["topic"] == topic]
    if not records and topic in TOPICS:
        print(textwrap.fill(f"No GPU measurement of {topic!r} has been recorded for the course yet (a maintainer "
                            "records one with `python -m gpucourse record` on a GPU machine)."
                            + (" Published ones:" if published else ""), width=116, break_on_hyphens=False))
    for data in records:
        print(label(data, topic) + ":")
        print(table(topic, data["figures"][topic]["rows"]))
    if compact and published:
        public_table(published)
        return
    for entry in published:
        print(public_text(entry))
