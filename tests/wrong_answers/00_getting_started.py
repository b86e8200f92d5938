"""Plausible wrong answers to lesson 00's exercises; each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: this machine's or the visible test's), 'helper' (the course's own helper instead of
the learner's code), 'visible_only' (right on the visible test's input only), 'typical' (the lesson's usual mistake).
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''def gpu_evidence(make, cuda, nvml) -> dict:
    """Make a tensor and return the evidence that it is on a GPU: its device, and memory this process allocated."""
'''
_EX2 = '''def diagnose(machine: dict) -> dict:
    """Does the wheel run on this machine? Read the tools' outputs; if not, the first rule that fails."""
'''
_EX3 = '''def check_peak(gpu, dtype: str, n: int) -> dict:
    """Derive gpu's datasheet peak for dtype from its tools' outputs, time an n x n matmul, and name any cause."""
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


_DIAG_RIGHT = r'''    import datetime
    import re

    def version(text: str) -> tuple:
        return tuple(int(part) for part in text.split("."))

    smi = machine["nvidia-smi"]
    driver = version(re.search(r"Driver Version:\s*([\d.]+)", smi).group(1))
    driver_cuda = version(re.search(r"CUDA Version:\s*([\d.]+)", smi).group(1))
    month = datetime.datetime.strptime(smi.strip().splitlines()[0].strip(), "%a %b %d %H:%M:%S %Y").strftime("%Y-%m")
    capability = version(machine["compute_cap"].strip())
    if capability not in FIRST_CUDA:
        raise ValueError(f"compute capability {capability} is not in FIRST_CUDA")
    if driver_cuda < FIRST_CUDA[capability]:
        return {"runs": False, "rule": "gpu"}                         # the driver does not know this GPU
    cubin = ptx = False
    for arch in machine["torch.cuda.get_arch_list()"]:
        kind, _, digits = arch.partition("_")
        specific = digits.endswith("a")                              # sm_90a: for exactly 9.0, nothing else
        digits = digits.rstrip("a")
        target = (int(digits[:-1]), int(digits[-1]))
        if kind == "sm" and (target == capability or (not specific and target[0] == capability[0]
                                                      and target[1] <= capability[1])):
            cubin = True                                             # compiled code for this GPU
        elif kind == "compute" and (target == capability if specific else target <= capability):
            ptx = True                                               # PTX the driver can compile for it
    if not (cubin or ptx):
        return {"runs": False, "rule": "arch"}
    local = machine["torch.__version__"].partition("+")[2]           # 'cu126': built with CUDA 12.6
    build = (int(local[2:-1]), int(local[-1]))
    minimum = {11: (450, 80, 2), 12: (525, 60, 13), 13: (580,)}
    if build[0] not in minimum:
        raise ValueError(f"a CUDA {build} wheel: minor-version compatibility needs CUDA 11 to 13")
    if driver_cuda >= build or (driver >= minimum[build[0]] and cubin):
        return {"runs": True, "rule": None}                          # backward or minor-version compatibility
    found = re.search(r"cuda-compat-(\d+)-(\d+)", machine["cuda-compat"])
    compat = found is not None and (int(found.group(1)), int(found.group(2))) >= build
    supported = DRIVER_BRANCH_END_OF_LIFE.get(driver[0], "0000-00") >= month
    if machine["brand"] == "datacenter" and supported and compat:
        return {"runs": True, "rule": None}                          # forward compatibility
    return {"runs": False, "rule": "driver"}
'''
_PEAK_RIGHT = r'''    import re
    import statistics

    query, smi = gpu.tools["deviceQuery"], gpu.tools["nvidia-smi -q"]
    name = re.search(r'Device \d+: "(.*)"', query).group(1)
    capability = tuple(int(x) for x in re.search(r"Major/Minor version number:\s*(\d+)\.(\d+)", query).groups())
    sms = int(re.search(r"\((\d+)\) Multiprocessors", query).group(1))
    rated = float(re.search(r"GPU Max Clock rate:\s*([\d.]+) MHz", query).group(1))
    max_sm = float(re.search(r"SM\s*:\s*(\d+) MHz", smi.split("Max Clocks")[1]).group(1))  # NVML's maximum
    if capability not in SM_RATES:
        raise ValueError(f"compute capability {capability} is not in SM_RATES")
    rates = SM_RATES[capability]
    clock = rated                                               # the rated boost clock, not NVML's maximum
    if dtype == "float32":
        fmas = rates.fp32_lanes
    elif dtype in ("float16", "bfloat16"):
        if dtype == "bfloat16" and capability < (8, 0):
            raise ValueError(f"bfloat16 Tensor Cores need compute capability 8.0, this GPU has {capability}")
        fmas = rates.fp16_tensor_fmas
        if "GeForce" in name:
            fmas /= 2                                           # GeForce: float32 accumulation at half rate
        if capability == (9, 0):
            if name not in HOPPER_TENSOR_CLOCK_MHZ:
                raise ValueError(f"no published Tensor Core clock for {name}")
            clock = HOPPER_TENSOR_CLOCK_MHZ[name]               # Hopper's Tensor figures: a lower clock
    else:
        raise ValueError(f"unknown dtype {dtype!r}")
    peak = sms * fmas * clock * 1e6 * 2

    def once() -> float:
        start = gpu.clock()
        gpu.matmul(n, dtype)
        gpu.synchronize()                                       # the call only queued the work
        return gpu.clock() - start

    for _ in range(3):                                          # warm-up: the first call starts the libraries
        once()
    achieved = 2 * n**3 / statistics.median(once() for _ in range(15))
    if achieved > peak * max_sm / clock:
        verdict = "no sync"                                     # faster than any clock the card reaches
    elif achieved > peak:
        verdict = "boost"
    else:
        verdict = "plausible"
    return {"peak": peak, "achieved": achieved, "verdict": verdict}
'''


def _replaced(text: str, old: str, new: str) -> str:
    """text with old replaced by new, which must occur exactly once."""
    assert text.count(old) == 1, old
    return text.replace(old, new)


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
        # NVML's GPU of the same index as the CUDA device: wrong under CUDA_VISIBLE_DEVICES (review 3)
        "nvml_by_index": _evidence(),
        # trusts the device string alone
        "device_only": _evidence(on_gpu="True"),
    },
    "ex2-solution": {
        # the visible verdicts: the T4 runs, anything else needs a driver
        "constant": _EX2 + '''    if "Tesla T4" in machine["nvidia-smi"]:
        return {"runs": True, "rule": None}
    return {"runs": False, "rule": "driver"}
''',
        # asks this machine (the course's NVML reader) instead of reading the outputs
        "helper": _EX2 + '''    from gpucourse import nvml
    installed, cuda = nvml.driver_versions()
    ok = installed is not None and int(installed.split(".")[0]) >= 525
    return {"runs": ok, "rule": None if ok else "driver"}
''',
        # right on the two visible machines only: the driver's branch alone
        "visible_only": _EX2 + '''    import re
    driver = int(re.search(r"Driver Version:\\s*(\\d+)", machine["nvidia-smi"]).group(1))
    ok = driver >= 525
    return {"runs": ok, "rule": None if ok else "driver"}
''',
        # the typical mistake: is_available() is True, so the GPU must be fine; the arch list never read
        "typical": _EX2 + _DIAG_RIGHT.replace("    if not (cubin or ptx):\n", "    cubin = True\n    if False:\n"),
        # the review's case: never asks whether the driver knows the GPU (an RTX PRO 6000 Blackwell on R535)
        "no_gpu_support": _EX2 + _DIAG_RIGHT.replace("if driver_cuda < FIRST_CUDA[capability]:", "if False:"),
        # nvidia-smi's CUDA Version read as a ceiling: a cu126 wheel refused on a CUDA 12.4 driver
        "smi_cuda_ceiling": _EX2 + _DIAG_RIGHT.replace(" or (driver >= minimum[build[0]] and cubin)", ""),
        # sm_90a taken to run on any newer GPU, like PTX (a B200 with sm_90a code only)
        "arch_specific_forward": _EX2 + _DIAG_RIGHT.replace('if kind == "sm" and (target == capability or',
                                                            'if kind == "sm" and ((specific and target <= capability) '
                                                            "or target == capability or"),
        # PTX JIT taken to work under minor-version compatibility
        "ptx_minor_version": _EX2 + _DIAG_RIGHT.replace("(driver >= minimum[build[0]] and cubin)",
                                                        "(driver >= minimum[build[0]])"),
        # versions compared as text: '525.125.06' < '525.60.13'
        "string_versions": _EX2 + _DIAG_RIGHT.replace(
            "driver = version(re.search", "driver = tuple(re.search").replace(
            '.group(1))\n    driver_cuda', '.group(1).split("."))\n    driver_cuda').replace(
            "{11: (450, 80, 2), 12: (525, 60, 13), 13: (580,)}",
            "{11: (\"450\", \"80\", \"02\"), 12: (\"525\", \"60\", \"13\"), 13: (\"580\",)}").replace(
            "DRIVER_BRANCH_END_OF_LIFE.get(driver[0]", "DRIVER_BRANCH_END_OF_LIFE.get(int(driver[0])"),
        # the exact minimum driver refused
        "strict": _EX2 + _DIAG_RIGHT.replace("driver >= minimum[build[0]]", "driver > minimum[build[0]]"),
        # forward compatibility on any GPU, GeForce included
        "compat_everywhere": _EX2 + _DIAG_RIGHT.replace('machine["brand"] == "datacenter"', "True"),
        # the driver branch's end of life ignored
        "no_end_of_life": _EX2 + _DIAG_RIGHT.replace('DRIVER_BRANCH_END_OF_LIFE.get(driver[0], "0000-00") >= month',
                                                     "True"),
        # compiled code only for the GPU's exact capability (no binary compatibility within a major)
        "exact_arch": _EX2 + _DIAG_RIGHT.replace("and target[1] <= capability[1]", "and target[1] == capability[1]"),
        # compiled code for any minor of the major (sm_86 taken to run on 8.0)
        "any_minor": _EX2 + _DIAG_RIGHT.replace("\n                                                      and target[1] <= capability[1])", ")"),
        # PTX ignored
        "no_ptx": _EX2 + _DIAG_RIGHT.replace(
            'elif kind == "compute" and (target == capability if specific else target <= capability):', "elif False:"),
        # PTX taken only for an older capability: compute_120 refused on a 12.0 GPU (review 3)
        "ptx_strictly_older": _EX2 + _DIAG_RIGHT.replace(
            'elif kind == "compute" and (target == capability if specific else target <= capability):',
            'elif kind == "compute" and (target == capability if specific else target < capability):'),
        # PTX-only needs a driver whose CUDA is newer than the wheel's, not as new (review 3)
        "driver_cuda_strict": _EX2 + _DIAG_RIGHT.replace("if driver_cuda >= build or", "if driver_cuda > build or"),
    },
    "ex3-solution": {
        # the visible simulated T4's answer
        "constant": _EX3 + '''    return {"peak": 65.1264e12, "achieved": 30e12, "verdict": "plausible"}
''',
        # the course's own derivation and its matmul timer
        "helper": _EX3 + '''    import re
    from gpucourse import hardware, nvml
    query = gpu.tools["deviceQuery"]
    capability = tuple(int(x) for x in re.search(r"version number:\\s*(\\d+)\\.(\\d+)", query).groups())
    sms = int(re.search(r"\\((\\d+)\\) Multiprocessors", query).group(1))
    clock = float(re.search(r"GPU Max Clock rate:\\s*([\\d.]+)", query).group(1))
    peak = nvml.derived_peak(capability, sms, clock, "float16" if dtype != "float32" else "float32")
    return {"peak": peak, "achieved": hardware.measure_matmul_rate(n, "float32"), "verdict": "plausible"}
''',
        # the T4's rates for every GPU
        "visible_only": _EX3 + _PEAK_RIGHT.replace("    peak = sms * fmas", '    fmas = 512 if dtype != "float32" else 64\n'
                                                   "    peak = sms * fmas"),
        # the typical mistake: NVML's Max Clocks SM, above the rated boost on GeForce cards
        "typical": _EX3 + _PEAK_RIGHT.replace("    clock = rated ", "    clock = max_sm "),
        # the current SM clock (the Clocks section), low under a power cap
        "current_clock": _EX3 + _PEAK_RIGHT.replace(
            "    clock = rated ",
            '    clock = float(re.search(r"\\n    Clocks\\n(?:.*\\n)*?\\s*SM\\s*:\\s*(\\d+) MHz", smi).group(1)) '),
        # the Max Clocks graphics clock
        "graphics_clock": _EX3 + _PEAK_RIGHT.replace(
            'max_sm = float(re.search(r"SM\\s*:', 'max_sm = float(re.search(r"Graphics\\s*:').replace(
            "    clock = rated ", "    clock = max_sm "),
        # never synchronises: the matmul is only queued when the clock stops
        "no_sync": _EX3 + _replaced(_PEAK_RIGHT, "        gpu.synchronize()", "        pass  # no synchronize"),
        # the fastest call: noise makes some calls faster than the GPU's rate
        "min": _EX3 + _replaced(_PEAK_RIGHT, "statistics.median(once() for _ in range(15))",
                                "min(once() for _ in range(15))"),
        # the mean of the repeats: pulled by outliers
        "mean": _EX3 + _replaced(_PEAK_RIGHT, "statistics.median(once()", "statistics.mean(once()"),
        # a batch of calls and one synchronisation: the mean in disguise
        "batched": _EX3 + _replaced(_replaced(_PEAK_RIGHT, "statistics.median(once() for _ in range(15))", "batch()"),
                                    "    for _ in range(3):", '''    def batch() -> float:
        start = gpu.clock()
        for _ in range(15):
            gpu.matmul(n, dtype)
        gpu.synchronize()
        return (gpu.clock() - start) / 15

    for _ in range(3):'''),
        # one timed call with no warm-up (the slow first call)
        "one_cold_call": _EX3 + _replaced(_replaced(_PEAK_RIGHT, "        once()\n", "        pass\n"),
                                          "statistics.median(once() for _ in range(15))", "once()"),
        # n^3 FLOPs, an FMA counted once
        "fma_once": _EX3 + _replaced(_PEAK_RIGHT, "achieved = 2 * n**3 /", "achieved = n**3 /"),
        # the H100's Tensor formats at its boost clock
        "hopper_boost": _EX3 + _PEAK_RIGHT.replace("if capability == (9, 0):", "if False:"),
        # GeForce cards taken at the data-centre rate
        "no_geforce": _EX3 + _PEAK_RIGHT.replace('"GeForce" in name', "False"),
        # GeForce found by 'RTX' in the name: an RTX A6000 halved
        "rtx_name": _EX3 + _PEAK_RIGHT.replace('"GeForce" in name', '"RTX" in name'),
        # any result above the datasheet peak blamed on the timer (the GeForce boost ignored)
        "above_is_timer": _EX3 + _PEAK_RIGHT.replace("if achieved > peak * max_sm / clock:", "if achieved > peak:"),
        # review 4: a fixed 2x margin for "no sync" instead of the Max Clocks peak
        "fixed_margin": _EX3 + _PEAK_RIGHT.replace("if achieved > peak * max_sm / clock:", "if achieved > 2 * peak:"),
        # review r7: fixed 1.2x and 1.25x margins (Max Clocks / rated is 1.009x on a T4, 1.24x on an RTX 4090)
        "r7_margin_1_2": _EX3 + _PEAK_RIGHT.replace("if achieved > peak * max_sm / clock:", "if achieved > 1.2 * peak:"),
        "r7_margin_1_25": _EX3 + _PEAK_RIGHT.replace("if achieved > peak * max_sm / clock:",
                                                     "if achieved > 1.25 * peak:"),
        # review r7: only GeForce cards boost; any other card above its peak is a timing fault
        "r7_only_geforce_boosts": _EX3 + _PEAK_RIGHT.replace("if achieved > peak * max_sm / clock:",
                                                             'if achieved > peak and "GeForce" not in name:'),
    },
}

# ---- reviewer 00_r5's wrong answers ----
WRONG["ex1-solution"].update({
    # NVML's whole-GPU growth (any process) taken as evidence that this process allocated
    "r5_either_evidence": _evidence(on_gpu="allocated > 0 or (used or 0) > 0"),
    # this process's growth summed over every GPU, not that of the tensor's GPU
    "r5_summed_allocated": _evidence(
        allocated_after="sum(cuda.memory_allocated(i) for i in range(cuda.device_count())) - sum(allocated_before)"
                        " + allocated_before[index]"),
})
# compute_90a (arch-specific PTX) treated as portable PTX
WRONG["ex2-solution"]["r5_compute_arch_specific"] = _EX2 + _DIAG_RIGHT.replace(
    'elif kind == "compute" and (target == capability if specific else target <= capability):',
    'elif kind == "compute" and target <= capability:')
# compute_90a ignored: arch-specific PTX refused even on exactly 9.0
WRONG["ex2-solution"]["compute_a_ignored"] = _EX2 + _DIAG_RIGHT.replace(
    'elif kind == "compute" and (target == capability if specific else target <= capability):',
    'elif kind == "compute" and not specific and target <= capability:')
# ---- reviewer 00_r7's wrong answers (all were caught; kept under the runs/rule contract) ----
WRONG["ex2-solution"].update({
    # the branch's end-of-life month compared with '>': its final month refused
    "r7_eol_strict": _EX2 + _replaced(_DIAG_RIGHT, '"0000-00") >= month', '"0000-00") > month'),
    # minor-version compatibility judged by nvidia-smi's CUDA major alone (no minimum driver)
    "r7_smi_major": _EX2 + _replaced(_DIAG_RIGHT, "(driver >= minimum[build[0]] and cubin)",
                                     "(driver_cuda[0] == build[0] and cubin)"),
    # forward compatibility refused only on GeForce: workstation cards allowed
    "r7_compat_not_geforce": _EX2 + _replaced(_DIAG_RIGHT, 'machine["brand"] == "datacenter"',
                                              'machine["brand"] != "geforce"'),
})
for _answer in (WRONG["ex1-solution"]["r5_either_evidence"], WRONG["ex1-solution"]["r5_summed_allocated"],
                WRONG["ex2-solution"]["r5_compute_arch_specific"], WRONG["ex2-solution"]["compute_a_ignored"]):
    assert _answer.count("\n") > 5

# ---- reviewer 00_r8's wrong answers that passed ----
# "if NVML fails, run without it": an NVML error after make() (no UUIDs) makes a second tensor
WRONG["ex1-solution"]["r8_make_twice"] = _EX1 + """    allocated_before = [cuda.memory_allocated(i) for i in range(cuda.device_count())]
    used = None
    try:
        nvml.nvmlInit()
        try:
            count = nvml.nvmlDeviceGetCount()
            before = [nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(i)).used for i in range(count)]
            tensor = make()
            after = [nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(i)).used for i in range(count)]
            if tensor.device.type == "cuda":
                uuids = [str(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i))).removeprefix("GPU-")
                         for i in range(count)]
                uuid = str(cuda.get_device_properties(tensor.device.index).uuid).removeprefix("GPU-")
                if uuid in uuids:
                    used = after[uuids.index(uuid)] - before[uuids.index(uuid)]
        finally:
            nvml.nvmlShutdown()
    except nvml.NVMLError:
        used = None
        tensor = make()
    device = tensor.device
    if device.type != "cuda":
        return {"device": str(device), "allocated_bytes": 0, "device_used_bytes": None, "on_gpu": False}
    allocated = cuda.memory_allocated(device.index) - allocated_before[device.index]
    return {"device": str(device), "allocated_bytes": allocated, "device_used_bytes": used, "on_gpu": allocated > 0}
"""
WRONG["ex2-solution"].update({
    # no minor-version compatibility for CUDA 13.x (a cu132 wheel on R580 sent to upgrade the driver)
    "r8_no_minor_13": _EX2 + _replaced(_DIAG_RIGHT, "13: (580,)}", "13: (9999,)}"),
    # no minimum driver for 13.x at all (a cu131 wheel taken to run on driver 575)
    "r8_no_minimum_13": _EX2 + _replaced(_DIAG_RIGHT, "13: (580,)}", "13: (0,)}"),
    # nvidia-smi's date line not stripped: real nvidia-smi pads it with spaces
    "r8_no_strip_date": _EX2 + _replaced(_DIAG_RIGHT, "smi.strip().splitlines()[0].strip()", "smi.splitlines()[0]"),
})
WRONG["ex3-solution"].update({
    # review r12: Hopper's Tensor clock matched by name prefix, so an H200 NVL is priced at the H200's clock
    "r12_hopper_prefix": _EX3 + _replaced(
        _PEAK_RIGHT,
        """            if name not in HOPPER_TENSOR_CLOCK_MHZ:
                raise ValueError(f"no published Tensor Core clock for {name}")
            clock = HOPPER_TENSOR_CLOCK_MHZ[name] """,
        """            listed = [key for key in HOPPER_TENSOR_CLOCK_MHZ if name.startswith(key)]
            if not listed:
                raise ValueError(f"no published Tensor Core clock for {name}")
            clock = HOPPER_TENSOR_CLOCK_MHZ[listed[0]] """),
    # no bfloat16-before-8.0 check, no unlisted-Hopper check, unknown formats priced as float32
    "r8_no_format_checks": _EX3 + _replaced(_replaced(_replaced(
        _PEAK_RIGHT,
        """        if dtype == "bfloat16" and capability < (8, 0):
            raise ValueError(f"bfloat16 Tensor Cores need compute capability 8.0, this GPU has {capability}")
""", ""),
        """            if name not in HOPPER_TENSOR_CLOCK_MHZ:
                raise ValueError(f"no published Tensor Core clock for {name}")
            clock = HOPPER_TENSOR_CLOCK_MHZ[name] """, """            clock = HOPPER_TENSOR_CLOCK_MHZ.get(name, rated) """),
        """    else:
        raise ValueError(f"unknown dtype {dtype!r}")
""", """    else:
        fmas = rates.fp32_lanes
"""),
    # any format other than float32 priced as a Tensor format (int4, tf32 on an A100)
    "r8_other_dtypes_as_tensor": _EX3 + _replaced(_PEAK_RIGHT, 'elif dtype in ("float16", "bfloat16"):', "elif True:"),
    # times the matmuls first, then raises for a format without a peak
    "r8_time_then_raise": _EX3 + _replaced(_replaced(
        _PEAK_RIGHT, "    if capability not in SM_RATES:", """    for _ in range(3):
        gpu.matmul(n, dtype)
        gpu.synchronize()
    if capability not in SM_RATES:"""), "    for _ in range(3):                                          # warm-up",
        "    for _ in range(0):                                          # warmed up above"),
})

# ---- reviewer 00_r9's wrong answers that passed ----
WRONG["ex2-solution"].update({
    # cuda-compat accepted only when it equals the wheel's CUDA (a cuda-compat-12-8 covers a cu126 wheel too)
    "r9_compat_exact": _EX2 + _replaced(_DIAG_RIGHT, "int(found.group(2))) >= build", "int(found.group(2))) == build"),
    # the date line split on single spaces: nvidia-smi pads a one-digit day with a space ('Sun Mar  1 ...')
    "r9_split_space": _EX2 + _replaced(
        _DIAG_RIGHT, '(smi.strip().splitlines()[0].strip(), "%a %b %d %H:%M:%S %Y")',
        '(" ".join(smi.strip().splitlines()[0].strip().split(" ")[i] for i in (1, 4)), "%b %Y")'),
})
# the "no sync" ceiling read from Max Clocks' Graphics line, not its SM line
WRONG["ex3-solution"]["r9_graphics_ceiling"] = _EX3 + _replaced(
    _PEAK_RIGHT, r'max_sm = float(re.search(r"SM\s*:', r'max_sm = float(re.search(r"Graphics\s*:')

# ---- reviewer 00_r13's wrong answers: NVML's "before" reading taken on another GPU than the "after" one ----
_EVIDENCE_RIGHT = '''    def used_bytes() -> list | None:
        """NVML's used memory of every GPU (all processes), or None if a query fails."""
        try:
            return [nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(i)).used
                    for i in range(nvml.nvmlDeviceGetCount())]
        except nvml.NVMLError:
            return None

    def nvml_index(index: int) -> int | None:
        """NVML's number of CUDA device index (CUDA_VISIBLE_DEVICES renumbers GPUs), matched by UUID."""
        try:
            uuids = [str(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i))).removeprefix("GPU-")
                     for i in range(nvml.nvmlDeviceGetCount())]
        except nvml.NVMLError:
            return None
        uuid = str(cuda.get_device_properties(index).uuid).removeprefix("GPU-")
        return uuids.index(uuid) if uuid in uuids else None   # no match: a MIG slice has its own UUID

    allocated_before = [cuda.memory_allocated(i) for i in range(cuda.device_count())]
    used = None
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:                        # no NVML in this container: the allocator still answers
        tensor = make()
    else:
        try:
            used_before = used_bytes()
            tensor = make()
            used_after = used_bytes()
            if tensor.device.type == "cuda" and used_before is not None and used_after is not None:
                match = nvml_index(tensor.device.index)
                used = None if match is None else used_after[match] - used_before[match]
        finally:
            nvml.nvmlShutdown()
    device = tensor.device
    if device.type != "cuda":
        return {"device": str(device), "allocated_bytes": 0, "device_used_bytes": None, "on_gpu": False}
    index = device.index
    allocated = cuda.memory_allocated(index) - allocated_before[index]
    return {"device": str(device), "allocated_bytes": allocated, "device_used_bytes": used, "on_gpu": allocated > 0}
'''
WRONG["ex1-solution"].update({
    # the UUID match used after make(), the CUDA index before it
    "r13_before_cuda_index": _EX1 + _replaced(_EVIDENCE_RIGHT, "used_after[match] - used_before[match]",
                                              "used_after[match] - used_before[tensor.device.index]"),
    # the "before" reading taken on the current GPU: the learner cannot know where make() puts the tensor
    "r13_before_current": _EX1 + _replaced(_EVIDENCE_RIGHT, "used_after[match] - used_before[match]",
                                           "used_after[match] - used_before[nvml_index(cuda.current_device())]"),
})

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
