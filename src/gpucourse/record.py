"""The course's measurement suite: ``python -m gpucourse record`` measures this device and writes one JSON record.

Each topic of :mod:`gpucourse.reference` is measured by its own function; a failure in one is recorded as that
topic's error and the others go on. Timing uses :func:`gpucourse.timing.benchmark` (CUDA events on a CUDA GPU):
warm-up, synchronisation, repeats, the median. ``quick=True`` uses small sizes (seconds, for tests); a quick or
CPU record is never a GPU reference and is written outside the package by default.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpucourse import hardware, nvml, reference
from gpucourse.timing import benchmark, sync_for

MEASURED_BY = "the course's maintainers"


class Skipped(Exception):
    """Raised by a measurement that has no meaning on this device (e.g. pinned transfers without a GPU)."""


@dataclass(frozen=True)
class Plan:
    """Sizes and repeats of one recording: the full suite on a GPU, smaller ones on a CPU, tiny ones in quick mode."""

    matmul_sizes: tuple[int, ...]
    big_n: int
    transfer_megabytes: tuple[int, ...]
    conv_batch: int
    speedup_n: int
    capstone_epochs: int
    capstone_dataset: str
    repeats: int

    @staticmethod
    def for_device(kind: str, quick: bool) -> Plan:
        """The plan for a device kind ('cuda', 'mps', 'cpu'); ``quick`` shrinks every size to run in seconds."""
        if quick:
            return Plan((64, 128), 256, (1, 4), 4, 128, 1, "digits", 3)
        if kind == "cuda":  # about a minute on an H100; the T4 takes a few
            return Plan((1024, 4096, 8192), 10_000, (1, 8, 64, 256, 1024), 64, 4096, 5, "mnist", 10)
        return Plan((256, 1024, 2048), 10_000, (1, 8, 64), 16, 2048, 3, "mnist", 3)


def _torch():
    """Import torch, or raise a clear ImportError: every measurement of the suite runs on PyTorch."""
    torch = hardware._torch_or_none()
    if torch is None:
        raise ImportError("the measurement suite needs PyTorch: pip install 'gpucourse[torch]'")
    return torch


def _needs_cuda(device) -> None:
    """Skip a measurement that only means something on a CUDA GPU."""
    if device.type != "cuda":
        raise Skipped(f"needs a CUDA GPU (this record is of {device.type})")


def _matmul_dtypes(device) -> list[str]:
    """The dtypes to time here: float32 everywhere; TF32, float16 and bfloat16 on a GPU that runs them natively."""
    if device.type != "cuda":
        return ["float32"]
    dtypes = ["float32", "float16"]
    if hardware.has_tf32():
        dtypes.insert(1, "tf32")
    if hardware.has_native_bf16():
        dtypes.append("bfloat16")
    return dtypes


def measure_matmul(device, plan: Plan) -> dict:
    """Matrix-multiply rate per dtype and size (float32 in true float32; TF32 as its own row)."""
    torch = _torch()
    rows = []
    for dtype in _matmul_dtypes(device):
        for n in plan.matmul_sizes:
            with hardware.tf32_matmuls(torch, dtype == "tf32"):
                rate = hardware.measure_matmul_rate(n, "float32" if dtype == "tf32" else dtype, "torch",
                                                    str(device), repeats=plan.repeats)
            rows.append({"dtype": dtype, "n": n, "median_ms": 2 * n**3 / rate * 1e3, "tflops": rate / 1e12})
    return {"method": f"n x n @ n x n, torch, median of {plan.repeats} after 2 warm-up calls, synchronised",
            "rows": rows}


def measure_matmul_10k(device, plan: Plan) -> dict:
    """The big square matmul done right: the first call (with its start-up) apart, then the median of warm calls."""
    torch = _torch()
    n, sync = plan.big_n, sync_for(str(device))
    rows = []
    for dtype in ["float32", "tf32"] if hardware.has_tf32() and device.type == "cuda" else ["float32"]:
        generator = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=generator).to(device)
        b = torch.randn(n, n, generator=generator).to(device)
        with hardware.tf32_matmuls(torch, dtype == "tf32"):
            sync()
            start = time.perf_counter()
            a @ b
            sync()
            first = time.perf_counter() - start
            repeats = plan.repeats if device.type == "cuda" else 2
            result = benchmark(lambda: a @ b, warmup=1, repeats=repeats, sync=sync, device=str(device))
        rows.append({"dtype": dtype, "n": n, "median_s": result.median_s, "tflops": 2 * n**3 / result.median_s / 1e12,
                     "first_call_s": first})
        del a, b
    return {"method": f"float32 {n} x {n}: first call timed alone, then median of the warm calls after 1 warm-up, "
                      "synchronised", "rows": rows}


_STARTUP_SCRIPT = r"""
import json, sys, time
t = time.perf_counter(); import torch; rows = [["import torch", time.perf_counter() - t]]
device = sys.argv[1]
sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
if device == "cuda":
    t = time.perf_counter(); torch.zeros(1, device="cuda"); sync()
    rows.append(["first CUDA call (context creation)", time.perf_counter() - t])
a = torch.randn(1024, 1024, device=device)
sync()
t = time.perf_counter(); a @ a; sync(); rows.append(["first 1024 matmul (library start-up)", time.perf_counter() - t])
t = time.perf_counter(); a @ a; sync(); rows.append(["the same matmul again (warm)", time.perf_counter() - t])
print(json.dumps(rows))
"""


def measure_startup(device, plan: Plan) -> dict:
    """First-call costs in a fresh Python process: import torch, CUDA context, first matmul, then a warm one."""
    kind = "cuda" if device.type == "cuda" else "cpu"
    done = subprocess.run([sys.executable, "-c", _STARTUP_SCRIPT, kind], capture_output=True, text=True,
                          timeout=300, env=os.environ.copy())
    if done.returncode != 0:
        raise RuntimeError(f"the start-up probe failed: {done.stderr.strip()[-300:]}")
    rows = [{"step": step, "seconds": seconds} for step, seconds in json.loads(done.stdout.strip().splitlines()[-1])]
    return {"method": "a fresh Python process, each step timed once with perf_counter after a synchronisation",
            "rows": rows}


def measure_transfer(device, plan: Plan) -> dict:
    """Host-to-device bandwidth from pageable and from pinned host memory over a sweep of sizes (lesson 04's way)."""
    _needs_cuda(device)
    from gpucourse.placement import measure_transfer_bandwidth

    rows = []
    for megabytes in plan.transfer_megabytes:
        for pinned in (False, True):
            result = measure_transfer_bandwidth(megabytes * 2**20, pinned=pinned, device=str(device),
                                                repeats=plan.repeats)
            rows.append({"megabytes": megabytes, "memory": "pinned" if pinned else "pageable",
                         "gb_s": result.bandwidth / 1e9})
    return {"method": f"gpucourse.placement.measure_transfer_bandwidth: tensor.copy_ host to device, median of "
                      f"{plan.repeats} after 2 warm-up, synchronised; MB = 2**20 bytes, GB/s = 1e9 bytes/s",
            "rows": rows}


def measure_cudnn_benchmark(device, plan: Plan) -> dict:
    """A 3x3 convolution's forward pass with torch.backends.cudnn.benchmark off, then on, each on a fresh shape."""
    _needs_cuda(device)
    torch = _torch()
    before = torch.backends.cudnn.benchmark
    generator = torch.Generator().manual_seed(0)
    conv = torch.nn.Conv2d(64, 64, 3, padding=1).to(device)
    sync = sync_for(str(device))
    rows = []
    try:
        with torch.no_grad():
            torch.backends.cudnn.benchmark = False
            conv(torch.randn(plan.conv_batch, 64, 56, 56, generator=generator).to(device))  # CUDA and cuDNN start-up
            sync()
            # cuDNN's plan cache is keyed by shape, not by the flag: a plan found with benchmark off is reused when it
            # is turned on, so each setting gets a batch size this process has not run yet.
            for enabled, batch in ((False, plan.conv_batch - 1), (True, plan.conv_batch + 1)):
                torch.backends.cudnn.benchmark = enabled
                x = torch.randn(batch, 64, 56, 56, generator=generator).to(device)
                sync()
                start = time.perf_counter()
                conv(x)
                sync()
                first = time.perf_counter() - start
                result = benchmark(lambda: conv(x), warmup=2, repeats=plan.repeats, sync=sync, device=str(device))
                rows.append({"layer": f"Conv2d 64->64 3x3, input {batch}x64x56x56 float32, forward",
                             "benchmark": enabled, "first_call_ms": first * 1e3, "median_ms": result.median_s * 1e3})
    finally:
        torch.backends.cudnn.benchmark = before
    return {"method": f"one warm-up call on another shape; then per setting a fresh shape, its first call timed "
                      f"alone (with benchmark on, cuDNN's tuning), then median of {plan.repeats} after 2 warm-up, "
                      "CUDA events; torch's default cuDNN settings otherwise (TF32 allowed)", "rows": rows}


def measure_capstone(device, plan: Plan) -> dict:
    """The capstone's time-to-accuracy and throughput in float32 and mixed precision (gpucourse.capstone.train)."""
    from gpucourse import capstone

    offline = True if plan.capstone_dataset == "digits" else None
    data = capstone.load_data(plan.capstone_dataset, offline=offline)
    dataset = data.name + (f" (fallback: {data.fallback_reason})" if data.fallback_reason else "")
    rows = []
    for precision in ("float32", "mixed"):
        config = capstone.TrainConfig(epochs=plan.capstone_epochs, batch_size=128, device=str(device),
                                      precision=precision, target_accuracy=data.target_accuracy, stop_at_target=False,
                                      evals_per_epoch=4, label=precision)
        result = capstone.train(data, config, progress=False)
        rows.append({"dataset": dataset, "precision": result.precision_used, "target_accuracy": data.target_accuracy,
                     "seconds_to_target": result.time_to_accuracy_s, "final_accuracy": result.final_accuracy,
                     "images_per_s": result.images_per_s, "epochs": plan.capstone_epochs, "batch_size": 128})
    return {"method": f"gpucourse.capstone.train, small_cnn, Adam, batch 128, {plan.capstone_epochs} epoch(s), "
                      "4 evaluations per epoch; training-step time only, synchronised", "rows": rows}


def measure_speedup(device, plan: Plan) -> dict:
    """The same work on this machine's CPU and on its GPU: a float32 matmul and a small CNN's training step."""
    if device.type == "cpu":
        raise Skipped("a CPU record has nothing to compare its CPU with")
    torch = _torch()
    from gpucourse import capstone

    n = plan.speedup_n
    with hardware.tf32_matmuls(torch, False):
        cpu_rate = hardware.measure_matmul_rate(n, "float32", "torch", "cpu", repeats=plan.repeats)
        gpu_rate = hardware.measure_matmul_rate(n, "float32", "torch", str(device), repeats=plan.repeats)
    flops = 2 * n**3
    rows = [{"workload": f"{n} x {n} float32 matmul", "cpu_s": flops / cpu_rate, "gpu_s": flops / gpu_rate,
             "speedup": gpu_rate / cpu_rate}]
    batch = 64
    cpu_ips = capstone.speed_score(28, "cpu", batch_size=batch, steps=plan.repeats)
    gpu_ips = capstone.speed_score(28, str(device), batch_size=batch, steps=plan.repeats)
    rows.append({"workload": f"small CNN training step, batch {batch}, 28x28", "cpu_s": batch / cpu_ips,
                 "gpu_s": batch / gpu_ips, "speedup": gpu_ips / cpu_ips})
    return {"method": f"median of {plan.repeats} after warm-up, synchronised; the CPU is this machine's host "
                      f"({torch.get_num_threads()} torch threads)", "rows": rows}


MEASUREMENTS: dict[str, Callable] = {
    "matmul": measure_matmul, "matmul_10k": measure_matmul_10k, "startup": measure_startup,
    "transfer": measure_transfer, "cudnn_benchmark": measure_cudnn_benchmark, "capstone": measure_capstone,
    "speedup": measure_speedup,
}
"""One function per topic of gpucourse.reference.TOPICS."""


def describe_device(device) -> dict:
    """Name, kind and facts of the device measured (and the host CPU, which the speed-up is set against)."""
    torch = _torch()
    facts = {"kind": device.type, "host_cpu": hardware.cpu_info().model,
             "host_cores": hardware.cpu_info().physical_cores}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        facts.update(name=props.name, compute_capability=[props.major, props.minor],
                     memory_gib=round(props.total_memory / 2**30, 1), multiprocessors=props.multi_processor_count,
                     driver=nvml.driver_versions()[0])  # None without NVML
    elif device.type == "mps":
        facts.update(name=f"Apple MPS ({platform.machine()})")
    else:
        facts.update(name=hardware.cpu_info().model)
    return facts


def describe_software() -> dict:
    """Versions of Python, CUDA, cuDNN and the frameworks the measurements ran on."""
    torch = _torch()
    report = hardware.environment_report()
    versions = {"python": platform.python_version(), "platform": f"{platform.system()} {platform.machine()}",
                "cuda": torch.version.cuda,
                "cudnn": str(torch.backends.cudnn.version()) if torch.backends.cudnn.is_available() else None}
    versions.update({name: version for name, version in report.versions.items()})
    return versions


def _run_one(topic: str, device, plan: Plan, device_facts: dict) -> tuple[str, object]:
    """Measure one topic: ('ok', figures), ('skipped', why) or ('error', message); its figures are validated."""
    try:
        entry = MEASUREMENTS[topic](device, plan)
        reference._check_topic(f"the {topic} measurement", topic, entry, device_facts)
        return "ok", entry
    except Skipped as why:
        return "skipped", str(why)
    except Exception as error:  # a broken measurement is recorded as such; the others still run
        return "error", f"{type(error).__name__}: {error}"


def record(quick: bool = False, device: str = "auto", topics: tuple[str, ...] | None = None,
           measured_by: str = MEASURED_BY, progress: Callable[[str], None] | None = None) -> dict:
    """Run the measurement suite on ``device`` and return the validated record (nothing is written)."""
    if not isinstance(quick, bool):
        raise TypeError(f"quick must be True or False, got {type(quick).__name__} ({quick!r})")
    if not isinstance(measured_by, str) or not measured_by.strip():
        raise ValueError(f"measured_by must be a non-empty str, got {measured_by!r}")
    topics = reference.TOPICS if topics is None else tuple(reference._topic(t) for t in topics)
    _torch()
    chosen = hardware.pick_device(device)
    plan = Plan.for_device(chosen.type, quick)
    device_facts = describe_device(chosen)
    data = {"format": reference.FORMAT, "version": reference.VERSION, "measured": True, "measured_by": measured_by,
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "method": ("python -m gpucourse record" + (" --quick" if quick else "") +
                       ": gpucourse.timing.benchmark (CUDA events on a CUDA GPU), warm-up, synchronised, median"),
            "quick": quick, "device": device_facts, "software": describe_software(),
            "figures": {}, "errors": {}, "skipped": {}}
    for topic in topics:
        start = time.perf_counter()
        status, value = _run_one(topic, chosen, plan, device_facts)
        {"ok": data["figures"], "skipped": data["skipped"], "error": data["errors"]}[status][topic] = value
        if progress is not None:
            progress(f"{topic:<16} {status:<8} {time.perf_counter() - start:6.1f} s"
                     + ("" if status == "ok" else f"  {value}"))
    return reference.validate(data, where="the new record")


def default_path(data: dict) -> Path:
    """Where a record goes: the package's reference folder for a full GPU record in a checkout, else here."""
    slug = reference.device_slug(data["device"]["name"])
    folder = Path(reference.__file__).parent
    in_checkout = (folder.parents[2] / "pyproject.toml").is_file() and folder.parent.parent.name == "src"
    if data["device"]["kind"] == "cuda" and not data.get("quick") and in_checkout:
        return folder / f"{slug}.json"
    return Path.cwd() / f"gpucourse-record-{data['device']['kind']}-{slug}{'-quick' if data.get('quick') else ''}.json"


def write(data: dict, path: object, force: bool = False) -> Path:
    """Write a validated record to ``path`` as indented JSON; an existing file is kept unless ``force``."""
    if not isinstance(path, (str, Path)):
        raise TypeError(f"path must be a str or pathlib.Path, got {type(path).__name__}")
    reference.validate(data, where="the record to write")
    path = Path(path)
    if path.exists() and not force:
        raise FileExistsError(f"path {str(path)!r} exists: pass force=True (--force) to overwrite it")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``python -m gpucourse record``."""
    parser.add_argument("--quick", action="store_true", help="tiny sizes (seconds; a test, not a reference)")
    parser.add_argument("--output", help="where to write the JSON record (default: the package's reference "
                                         "folder for a full GPU record in a checkout, else the current folder)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing file")
    parser.add_argument("--device", default="auto", help="auto (default), cuda, cuda:N, mps or cpu")


def run(args: argparse.Namespace) -> int:
    """Record, print one line per topic, write the file; return the exit status (1 if a measurement failed)."""
    data = record(quick=args.quick, device=args.device, progress=print)
    path = Path(args.output) if args.output else default_path(data)
    try:
        write(data, path, force=args.force)
    except FileExistsError as error:
        print(f"not written: {error}", file=sys.stderr)
        return 2
    print(f"wrote {path} ({data['device']['name']}, {len(data['figures'])} topics measured, "
          f"{len(data['skipped'])} skipped, {len(data['errors'])} failed)")
    return 1 if data["errors"] else 0
