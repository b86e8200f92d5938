"""Plausible wrong answers to lesson 00's exercises; each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: this machine's or the visible test's), 'helper' (the course's own helper instead of
the learner's code), 'visible_only' (right on the visible test's input only), 'typical' (the lesson's usual mistake).
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''def gpu_evidence(make, cuda, nvml) -> dict:
    """Make a tensor and return the evidence that it is on a GPU: its device, and memory this process allocated."""
'''
_EX2 = '''def runs(driver: str, build_cuda: str, data_centre: bool = True, compat: str | None = None) -> bool:
    """True if a Linux NVIDIA driver runs a wheel built with CUDA build_cuda (minor-version and forward compat)."""
'''
_EX3_PEAK = '''def peak_flops(record: dict, dtype: str) -> float:
    """Peak FLOP/s of the GPU in record for dtype, as PyTorch runs it (float32 accumulation)."""
'''
_EX3_TIME = '''

def achieved_flops(device, n: int, dtype: str = "float32") -> float:
    """FLOP/s of one n x n matmul on device: warmed up, synchronised, the median of several timed calls."""
'''


def _evidence(allocated_after: str = "cuda.memory_allocated(index)", before: str = "cuda.memory_allocated(i)",
              finally_: bool = True, guard: bool = True, on_gpu: str = "allocated > 0") -> str:
    """A gpu_evidence body with one part changed."""
    init = ("    try:\n        nvml.nvmlInit()\n    except nvml.NVMLError:\n        used_before = used_after = None\n"
            "        tensor = make()\n    else:\n" if guard else "    nvml.nvmlInit()\n    if True:\n")
    if finally_:
        body = ("        try:\n            used_before = used_bytes()\n            tensor = make()\n"
                "            used_after = used_bytes()\n        finally:\n            nvml.nvmlShutdown()\n")
    else:
        body = ("        used_before = used_bytes()\n        tensor = make()\n        used_after = used_bytes()\n"
                "        nvml.nvmlShutdown()\n")
    return _EX1 + f'''    def used_bytes():
        try:
            return [nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(i)).used
                    for i in range(nvml.nvmlDeviceGetCount())]
        except nvml.NVMLError:
            return None

    allocated_before = [{before} for i in range(cuda.device_count())]
''' + init + body + f'''    device = tensor.device
    if device.type != "cuda":
        return {{"device": str(device), "allocated_bytes": 0, "device_used_bytes": None, "on_gpu": False}}
    index = device.index
    allocated = {allocated_after} - allocated_before[index]
    used = None if used_before is None or used_after is None else used_after[index] - used_before[index]
    return {{"device": str(device), "allocated_bytes": allocated, "device_used_bytes": used, "on_gpu": {on_gpu}}}
'''


_PEAK_RIGHT = '''    capability = tuple(record["compute_capability"])
    if capability not in SM_RATES:
        raise ValueError("unknown capability")
    rates = SM_RATES[capability]
    if dtype == "float32":
        fmas = rates.fp32_lanes
    elif dtype in ("float16", "bfloat16", "tf32"):
        if dtype != "float16" and capability < (8, 0):
            raise ValueError("no such Tensor Cores")
        fmas = rates.fp16_tensor_fmas / (2 if dtype == "tf32" else 1)
        if "geforce" in record["name"].lower():
            fmas /= 2
    else:
        raise ValueError("unknown dtype")
    return record["sms"] * fmas * record["max_sm_clock_mhz"] * 1e6 * 2
'''
_TIME_RIGHT = '''    import statistics
    times = []
    device.matmul(n, dtype)
    device.synchronize()
    for _ in range(7):
        start = device.clock()
        device.matmul(n, dtype)
        device.synchronize()
        times.append(device.clock() - start)
    return 2 * n**3 / statistics.median(times)
'''


def _ex3(peak: str = _PEAK_RIGHT, timing: str = _TIME_RIGHT) -> str:
    """Both exercise-3 functions, one of them wrong."""
    return _EX3_PEAK + peak + _EX3_TIME + timing


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # the visible case's answer, whatever happens
        "constant": _EX1 + '''    make()
    return {"device": "cuda:1", "allocated_bytes": 4 * 2**20, "device_used_bytes": 311 * 2**20, "on_gpu": True}
''',
        # the course's own runtime report (NVML's process list and this machine's torch) instead of the evidence
        "helper": _EX1 + '''    from gpucourse import nvml as course_nvml
    tensor = make()
    evidence = course_nvml.runtime_evidence([tensor])
    on_gpu = evidence["pid"] in evidence["gpu_processes"]
    return {"device": str(tensor.device), "allocated_bytes": 0, "device_used_bytes": None, "on_gpu": on_gpu}
''',
        # always reads GPU 0, as on a one-GPU machine
        "visible_only": _evidence(allocated_after="cuda.memory_allocated(0)", before="cuda.memory_allocated(0)"),
        # the v2 mistake: this process's id among NVML's compute processes (host ids inside a container)
        "typical": _evidence(on_gpu="os_pid_in(nvml, index)").replace(
            "    def used_bytes():", '''    import os

    def os_pid_in(nvml, index):
        nvml.nvmlInit()
        try:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            return any(p.pid == os.getpid() for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle))
        finally:
            nvml.nvmlShutdown()

    def used_bytes():''', 1),
        # the caching allocator's reserved memory, which need not grow
        "reserved": _evidence(allocated_after="cuda.memory_reserved(index)", before="cuda.memory_reserved(i)"),
        # the current device's memory after make(), not the tensor's device
        "current_device": _evidence(allocated_after="cuda.memory_allocated()"),
        # NVML shut down only when nothing raised
        "no_finally": _evidence(finally_=False),
        # no NVML library in the container: nvmlInit's error escapes
        "no_guard": _evidence(guard=False),
        # trusts the device string alone
        "device_only": _evidence(on_gpu="True"),
    },
    "ex2-solution": {
        # the visible verdicts
        "constant": _EX2 + '''    return driver.startswith("535")
''',
        # asks the course's NVML reader about this machine instead of deciding for the inputs
        "helper": _EX2 + '''    from gpucourse import nvml
    installed, cuda = nvml.driver_versions()
    return int(driver.split(".")[0]) >= 525
''',
        # right on the two visible cases only
        "visible_only": _EX2 + '''    return int(driver.split(".")[0]) >= 525 and build_cuda.startswith("12")
''',
        # the v2 rule: the driver's own CUDA version must be at least the build's (no minor-version compatibility)
        "typical": _EX2 + '''    own = {450: "11.0", 455: "11.1", 460: "11.2", 465: "11.3", 470: "11.4", 495: "11.5",
           510: "11.6", 515: "11.7", 520: "11.8", 525: "12.0", 530: "12.1", 535: "12.2", 545: "12.3",
           550: "12.4", 555: "12.5", 560: "12.6",
           565: "12.7", 570: "12.8", 575: "12.9", 580: "13.0"}
    if int(build_cuda.split(".")[0]) < 11:
        raise ValueError("too old")
    branch = max(b for b in own if b <= int(driver.split(".")[0])) if int(driver.split(".")[0]) >= 450 else None
    if branch is None:
        return False
    version = tuple(int(p) for p in own[branch].split("."))
    return version >= tuple(int(p) for p in build_cuda.split("."))
''',
        # versions compared as text: '525.125.06' < '525.60.13'
        "string_versions": _EX2 + '''    minimum = {11: "450.80.02", 12: "525.60.13", 13: "580"}
    major = int(build_cuda.split(".")[0])
    if major not in minimum:
        raise ValueError("too old")
    if driver >= minimum[major]:
        return True
    return data_centre and compat is not None and int(compat.split(".")[0]) >= major
''',
        # the exact minimum driver refused
        "strict": _EX2 + '''    minimum = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580,)}
    major = int(build_cuda.split(".")[0])
    if major not in minimum:
        raise ValueError("too old")
    if tuple(int(p) for p in driver.split(".")) > minimum[major]:
        return True
    return data_centre and compat is not None and int(compat.split(".")[0]) >= major
''',
        # forward compatibility on any GPU, GeForce included
        "compat_everywhere": _EX2 + '''    minimum = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580,)}
    major = int(build_cuda.split(".")[0])
    if major not in minimum:
        raise ValueError("too old")
    if tuple(int(p) for p in driver.split(".")) >= minimum[major]:
        return True
    return compat is not None and int(compat.split(".")[0]) >= major
''',
        # the driver branch alone: 525.53 taken for new enough
        "branch_only": _EX2 + '''    minimum = {11: 450, 12: 525, 13: 580}
    major = int(build_cuda.split(".")[0])
    if major not in minimum:
        raise ValueError("too old")
    if int(driver.split(".")[0]) >= minimum[major]:
        return True
    return data_centre and compat is not None and int(compat.split(".")[0]) >= major
''',
    },
    "ex3-solution": {
        # the visible T4 and the visible simulated GPU
        "constant": _ex3(peak='''    return 40 * 512 * 1590e6 * 2 if dtype == "float16" else 40 * 64 * 1590e6 * 2
''', timing='''    return 8e12
'''),
        # the course's own derivation and benchmark
        "helper": _ex3(peak='''    from gpucourse import nvml
    return nvml.derived_peak(tuple(record["compute_capability"]), record["sms"], record["max_sm_clock_mhz"],
                             "float16" if dtype != "float32" else "float32")
''', timing='''    from gpucourse.timing import benchmark
    result = benchmark(lambda: device.matmul(n, dtype), warmup=1, repeats=7, sync=device.synchronize)
    return 2 * n**3 / result.median_s
'''),
        # the T4's rates for every GPU
        "visible_only": _ex3(peak='''    fmas = 512 if dtype == "float16" else 64
    return record["sms"] * fmas * record["max_sm_clock_mhz"] * 1e6 * 2
'''),
        # GeForce cards taken at the data-centre rate
        "typical": _ex3(peak=_PEAK_RIGHT.replace('"geforce" in record["name"].lower()', 'False')),
        # the graphics clock, not the SM clock
        "graphics_clock": _ex3(peak=_PEAK_RIGHT.replace('record["max_sm_clock_mhz"]',
                                                        'record["max_graphics_clock_mhz"]')),
        # the base clock, not the boost clock
        "base_clock": _ex3(peak=_PEAK_RIGHT.replace('record["max_sm_clock_mhz"]', 'record["base_clock_mhz"]')),
        # TF32 at the float16 rate
        "tf32_full_rate": _ex3(peak=_PEAK_RIGHT.replace('(2 if dtype == "tf32" else 1)', '1')),
        # bfloat16 and TF32 allowed before compute capability 8.0
        "no_capability_gate": _ex3(peak=_PEAK_RIGHT.replace('capability < (8, 0)', 'False')),
        # never waits for the device: times the launch only
        "no_sync": _ex3(timing=_TIME_RIGHT.replace("        device.synchronize()\n", "")),
        # one block of calls, mean time: the slow calls count
        "mean_of_block": _ex3(timing='''    device.matmul(n, dtype)
    device.synchronize()
    start = device.clock()
    for _ in range(7):
        device.matmul(n, dtype)
    device.synchronize()
    return 7 * 2 * n**3 / (device.clock() - start)
'''),
        # counts n^3 FLOPs (a multiply-add as one)
        "n_cubed": _ex3(timing=_TIME_RIGHT.replace("2 * n**3", "n**3")),
        # always float32, whatever dtype it is asked for
        "float32_only": _ex3(timing=_TIME_RIGHT.replace("device.matmul(n, dtype)", 'device.matmul(n, "float32")')),
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
