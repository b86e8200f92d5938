"""Plausible wrong answers to lesson 00's exercises; each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: this machine's or the visible test's), 'helper' (the course's own helper instead of
the learner's code), 'visible_only' (right on the visible test's input only), 'typical' (the lesson's usual mistake).
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''def gpu_evidence(make, cuda, nvml) -> dict:
    """Make a tensor and return the evidence that it is on a GPU: its device, and memory this process allocated."""
'''
_EX2 = '''def diagnose(report: dict) -> dict:
    """Does the wheel of report run on its machine? If not, the first rule that fails and the fix."""
'''
_EX3 = '''def rated_peak(report: dict, dtype: str) -> float:
    """Peak FLOP/s a datasheet states for the GPU of report and dtype, as PyTorch runs it (float32 accumulation)."""
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


_DIAG_RIGHT = '''    def version(text: str) -> tuple:
        return tuple(int(part) for part in text.split("."))

    build = version(report["torch_cuda"])
    minimum = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580,)}   # the oldest driver of each CUDA major version
    if build[0] not in minimum:
        raise ValueError(f"CUDA {report['torch_cuda']}: minor-version compatibility needs CUDA 11 to 13")
    capability = tuple(report["compute_capability"])
    kernels = False
    for arch in report["arch_list"]:
        kind, _, digits = arch.partition("_")
        digits = digits.rstrip("af")                              # sm_90a: arch-specific code for 9.0
        target = (int(digits[:-1]), int(digits[-1]))
        if kind == "sm" and target[0] == capability[0] and target[1] <= capability[1]:
            kernels = True                                        # compiled code: same major, minor at most ours
        elif kind == "compute" and target <= capability:
            kernels = True                                        # PTX: compiled by the driver for newer GPUs
    if not kernels:
        return {"runs": False, "rule": "arch", "fix": "wheel"}
    driver = version(report["driver"])
    if driver >= minimum[build[0]]:
        return {"runs": True, "rule": None, "fix": None}          # backward and minor-version compatibility
    compat = report["compat"] is not None and version(report["compat"])[:2] >= build[:2]
    supported = DRIVER_BRANCH_END_OF_LIFE.get(driver[0], "0000-00") >= report["date"][:7]
    if report["brand"] != "datacenter":
        return {"runs": False, "rule": "forward_compat_gpu" if compat else "driver", "fix": "driver"}
    if not supported:
        return {"runs": False, "rule": "branch_eol" if compat else "driver", "fix": "driver"}
    if compat:
        return {"runs": True, "rule": None, "fix": None}          # forward compatibility
    return {"runs": False, "rule": "driver", "fix": "compat"}
'''
_PEAK_RIGHT = '''    capability = tuple(report["compute_capability"])
    if capability not in SM_RATES:
        raise ValueError(f"compute capability {capability} is not in SM_RATES")
    rates = SM_RATES[capability]
    clock = report["clocks"]["rated_boost"]                     # the datasheet's clock, not NVML's maximum
    if dtype == "float32":
        fmas = rates.fp32_lanes
    elif dtype in ("float16", "bfloat16", "tf32"):
        if dtype != "float16" and capability < (8, 0):
            raise ValueError(f"{dtype} Tensor Cores need compute capability 8.0, this GPU has {capability}")
        fmas = rates.fp16_tensor_fmas / (2 if dtype == "tf32" else 1)
        if report["brand"] == "geforce":
            fmas /= 2                                           # GeForce: float32 accumulation at half rate
        if capability == (9, 0):
            if report["name"] not in HOPPER_TENSOR_CLOCK_MHZ:
                raise ValueError(f"no published Tensor Core clock for {report['name']}")
            clock = HOPPER_TENSOR_CLOCK_MHZ[report["name"]]     # Hopper's Tensor figures: a lower clock
    else:
        raise ValueError(f"unknown dtype {dtype!r}")
    return report["sms"] * fmas * clock * 1e6 * 2
'''


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
        # NVML's used memory summed over every GPU: another process's allocation counts
        "summed_used": _evidence().replace(
            "used_after[index] - used_before[index]", "sum(used_after) - sum(used_before)"),
        # trusts the device string alone
        "device_only": _evidence(on_gpu="True"),
    },
    "ex2-solution": {
        # the visible verdicts: the T4 runs, anything else needs a driver
        "constant": _EX2 + '''    if report["name"] == "Tesla T4":
        return {"runs": True, "rule": None, "fix": None}
    return {"runs": False, "rule": "driver", "fix": "driver"}
''',
        # asks this machine (the course's NVML reader) instead of reading the report
        "helper": _EX2 + '''    from gpucourse import nvml
    installed, cuda = nvml.driver_versions()
    ok = int(report["driver"].split(".")[0]) >= 525
    return {"runs": ok, "rule": None if ok else "driver", "fix": None if ok else "driver"}
''',
        # right on the two visible reports only: the driver's branch alone
        "visible_only": _EX2 + '''    ok = int(report["driver"].split(".")[0]) >= 525
    return {"runs": ok, "rule": None if ok else "driver", "fix": None if ok else "driver"}
''',
        # the typical mistake: is_available() is True, so the GPU must be fine; the arch list never read
        "typical": _EX2 + _DIAG_RIGHT.replace("    if not kernels:\n", "    if False:\n"),
        # versions compared as text: '525.125.06' < '525.60.13'
        "string_versions": _EX2 + _DIAG_RIGHT.replace(
            "return tuple(int(part) for part in text.split(\".\"))", "return tuple(text.split(\".\"))").replace(
            "{11: (450, 80, 2), 12: (525, 60, 13), 13: (580,)}",
            "{11: (\"450\", \"80\", \"02\"), 12: (\"525\", \"60\", \"13\"), 13: (\"580\",)}").replace(
            "build[0] not in minimum", "int(build[0]) not in (11, 12, 13)").replace(
            "minimum[build[0]]", "minimum[int(build[0])]").replace(
            "DRIVER_BRANCH_END_OF_LIFE.get(driver[0]", "DRIVER_BRANCH_END_OF_LIFE.get(int(driver[0])"),
        # the exact minimum driver refused
        "strict": _EX2 + _DIAG_RIGHT.replace("if driver >= minimum[build[0]]:", "if driver > minimum[build[0]]:"),
        # forward compatibility on any GPU, GeForce included
        "compat_everywhere": _EX2 + _DIAG_RIGHT.replace('report["brand"] != "datacenter"', "False"),
        # GeForce found by 'RTX' in the name: a workstation RTX A6000 taken for a data-centre GPU
        "rtx_name": _EX2 + _DIAG_RIGHT.replace('report["brand"] != "datacenter"',
                                               '"rtx" in report["name"].lower()'),
        # the driver branch's end of life ignored (R418 with cuda-compat-12-4 accepted)
        "no_end_of_life": _EX2 + _DIAG_RIGHT.replace('DRIVER_BRANCH_END_OF_LIFE.get(driver[0], "0000-00") >= '
                                                     'report["date"][:7]', "True"),
        # compiled code only for the GPU's exact capability (no binary compatibility within a major)
        "exact_arch": _EX2 + _DIAG_RIGHT.replace("target[1] <= capability[1]", "target[1] == capability[1]"),
        # compiled code for any minor of the major (sm_86 taken to run on 8.0)
        "any_minor": _EX2 + _DIAG_RIGHT.replace(" and target[1] <= capability[1]", ""),
        # PTX ignored
        "no_ptx": _EX2 + _DIAG_RIGHT.replace('elif kind == "compute" and target <= capability:', "elif False:"),
        # a newer driver as the fix for everything
        "always_driver": _EX2 + _DIAG_RIGHT.replace('"fix": "compat"', '"fix": "driver"').replace(
            '"fix": "wheel"', '"fix": "driver"'),
    },
    "ex3-solution": {
        # the visible T4
        "constant": _EX3 + '''    return 40 * 512 * 1590e6 * 2 if dtype == "float16" else 40 * 64 * 1590e6 * 2
''',
        # the course's own derivation at the clock NVML reports
        "helper": _EX3 + '''    from gpucourse import nvml
    return nvml.derived_peak(tuple(report["compute_capability"]), report["sms"], report["clocks"]["nvml_max_sm"],
                             "float16" if dtype != "float32" else "float32")
''',
        # the T4's rates for every GPU
        "visible_only": _EX3 + '''    fmas = 512 if dtype == "float16" else 64
    return report["sms"] * fmas * report["clocks"]["rated_boost"] * 1e6 * 2
''',
        # the typical mistake: NVML's maximum SM clock, above the rated boost on GeForce cards
        "typical": _EX3 + _PEAK_RIGHT.replace('report["clocks"]["rated_boost"]', 'report["clocks"]["nvml_max_sm"]'),
        # the H100's Tensor formats at its 1980 MHz boost (v3's first draft)
        "hopper_boost": _EX3 + _PEAK_RIGHT.replace("if capability == (9, 0):", "if False:"),
        # Hopper's Tensor clock for float32 too
        "hopper_everywhere": _EX3 + _PEAK_RIGHT.replace(
            'clock = report["clocks"]["rated_boost"]', 'clock = HOPPER_TENSOR_CLOCK_MHZ.get(report["name"], '
            'report["clocks"]["rated_boost"])'),
        # GeForce found by 'RTX' in the name: an RTX A6000 halved
        "rtx_name": _EX3 + _PEAK_RIGHT.replace('report["brand"] == "geforce"', '"rtx" in report["name"].lower()'),
        # GeForce cards taken at the data-centre rate
        "no_geforce": _EX3 + _PEAK_RIGHT.replace('report["brand"] == "geforce"', "False"),
        # the graphics clock
        "graphics_clock": _EX3 + _PEAK_RIGHT.replace('report["clocks"]["rated_boost"]',
                                                     'report["clocks"]["nvml_max_graphics"]'),
        # the base clock
        "base_clock": _EX3 + _PEAK_RIGHT.replace('report["clocks"]["rated_boost"]', 'report["clocks"]["base"]'),
        # TF32 at the float16 rate
        "tf32_full_rate": _EX3 + _PEAK_RIGHT.replace('(2 if dtype == "tf32" else 1)', "1"),
        # bfloat16 and TF32 allowed before compute capability 8.0
        "no_capability_gate": _EX3 + _PEAK_RIGHT.replace("capability < (8, 0)", "False"),
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
