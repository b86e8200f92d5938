"""Plausible wrong answers to lesson 00's exercises; each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: this machine's or the visible test's), 'helper' (the course's own helper instead of
the learner's code), 'visible_only' (right on the visible test's input only), 'typical' (the lesson's usual mistake).
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''def device_records(nvml) -> list:
    """One dict per GPU (name, driver, compute_capability, memory_gib, max_sm_clock_mhz, power_limit_w), via NVML."""
'''
_EX2 = '''def diagnose(evidence: dict) -> str:
    """The first broken link between a GPU runtime and work on its GPU, or 'GPU in use'."""
'''
_EX3 = '''def peak_flops(record: dict, sms: int, dtype: str = "float16") -> float:
    """Peak FLOP/s from the record's compute capability and max SM clock: SMs x FMAs/clock/SM x clock x 2."""
'''


def _records(memory: str = "nvml.nvmlDeviceGetMemoryInfo(handle).total / 2**30",
             clock: str = "nvml.NVML_CLOCK_SM", power: str = "nvml.nvmlDeviceGetPowerManagementLimit(handle) / 1000",
             name: str = "name.decode() if isinstance(name, bytes) else name", count: str = "nvml.nvmlDeviceGetCount()",
             shutdown: bool = True, guard: bool = True) -> str:
    """A device_records body with one part changed."""
    init = ("    try:\n        nvml.nvmlInit()\n    except nvml.NVMLError:\n        return []\n" if guard
            else "    nvml.nvmlInit()\n")
    body = f'''    driver = nvml.nvmlSystemGetDriverVersion()
    records = []
    for index in range({count}):
        handle = nvml.nvmlDeviceGetHandleByIndex(index)
        name = nvml.nvmlDeviceGetName(handle)
        records.append({{"name": {name}, "driver": driver,
                        "compute_capability": tuple(nvml.nvmlDeviceGetCudaComputeCapability(handle)),
                        "memory_gib": {memory},
                        "max_sm_clock_mhz": nvml.nvmlDeviceGetMaxClockInfo(handle, {clock}),
                        "power_limit_w": {power}}})
'''
    end = "    nvml.nvmlShutdown()\n" if shutdown else ""
    return _EX1 + init + body + end + "    return records\n"


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # the visible T4's record, whatever the module says
        "constant": _EX1 + '''    return [{"name": "Tesla T4", "driver": "550.54.15", "compute_capability": (7, 5),
             "memory_gib": 15_843_721_216 / 2**30, "max_sm_clock_mhz": 1590, "power_limit_w": 70.0}]
''',
        # the course's own reader
        "helper": _EX1 + '''    from gpucourse import nvml as course_nvml
    return [{key: value for key, value in record.as_dict().items() if key not in ("sms", "source")}
            for record in course_nvml.read_devices(nvml)]
''',
        # reads only the first GPU, as on the visible one-GPU machine
        "visible_only": _records(count="min(1, nvml.nvmlDeviceGetCount())"),
        # memory in GB (10**9 bytes) where GiB (2**30) are asked for
        "typical": _records(memory="nvml.nvmlDeviceGetMemoryInfo(handle).total / 1e9"),
        # the power limit left in milliwatts
        "milliwatts": _records(power="nvml.nvmlDeviceGetPowerManagementLimit(handle)"),
        # the memory clock instead of the SM clock
        "memory_clock": _records(clock="nvml.NVML_CLOCK_MEM"),
        # a bytes name kept as bytes (older pynvml)
        "bytes_name": _records(name="name"),
        # never shuts NVML down
        "no_shutdown": _records(shutdown=False),
        # a machine without a driver raises instead of answering []
        "no_guard": _records(guard=False),
    },
    "ex2-solution": {
        # this machine's answer
        "constant": _EX2 + '''    return "no GPU"
''',
        # asks the package which device this machine would use, instead of reading the evidence
        "helper": _EX2 + '''    from gpucourse import hardware
    return "GPU in use" if hardware.pick_device().type == "cuda" else "no GPU"
''',
        # right on the three visible runtimes only
        "visible_only": _EX2 + '''    if not evidence["gpus"]:
        return "no GPU"
    return "GPU in use" if evidence["tensor_devices"][0].startswith("cuda") else "not on the GPU"
''',
        # trusts torch.cuda.is_available(): a GPU that is available is taken for a GPU in use
        "typical": _EX2 + '''    if not evidence["gpus"]:
        return "no GPU"
    if evidence["torch_cuda"] is None:
        return "CPU-only torch"
    if evidence["cuda_visible_devices"] in ("", "-1"):
        return "GPU hidden"
    if not evidence["cuda_available"]:
        return "driver too old"
    if all(d == "cpu" for d in evidence["tensor_devices"]):
        return "not on the GPU"
    return "GPU in use"
''',
        # compares versions as strings: '12.10' < '12.8'
        "string_versions": _EX2 + '''    if not evidence["gpus"]:
        return "no GPU"
    if evidence["torch_cuda"] is None:
        return "CPU-only torch"
    if evidence["cuda_visible_devices"] in ("", "-1"):
        return "GPU hidden"
    if evidence["driver_cuda"] is None or evidence["driver_cuda"] < evidence["torch_cuda"]:
        return "driver too old"
    on_gpu = evidence["tensor_devices"] and all(d.startswith("cuda") for d in evidence["tensor_devices"])
    if not (on_gpu and evidence["pid"] in evidence["gpu_processes"]):
        return "not on the GPU"
    return "GPU in use"
''',
        # a busy GPU is taken for proof of use
        "utilisation": _EX2 + '''    if not evidence["gpus"]:
        return "no GPU"
    if evidence["torch_cuda"] is None:
        return "CPU-only torch"
    if evidence["cuda_visible_devices"] in ("", "-1"):
        return "GPU hidden"
    if not evidence["cuda_available"]:
        return "driver too old"
    return "GPU in use" if max(evidence["utilisation"], default=0) > 0 else "not on the GPU"
''',
    },
    "ex3-solution": {
        # the visible T4's float16 peak
        "constant": _EX3 + '''    return 40 * 512 * 1590e6 * 2 if dtype == "float16" else 40 * 64 * 1590e6 * 2
''',
        # the course's own derivation
        "helper": _EX3 + '''    from gpucourse import nvml
    return nvml.derived_peak(tuple(record["compute_capability"]), sms, record["max_sm_clock_mhz"], dtype)
''',
        # the T4's rates for every generation
        "visible_only": _EX3 + '''    fmas = 512 if dtype == "float16" else 64
    return sms * fmas * record["max_sm_clock_mhz"] * 1e6 * 2
''',
        # forgets that an FMA is two FLOPs
        "typical": _EX3 + '''    rates = SM_RATES[tuple(record["compute_capability"])]
    fmas = rates.fp16_tensor_fmas if dtype == "float16" else rates.fp32_lanes
    return sms * fmas * record["max_sm_clock_mhz"] * 1e6
''',
        # reads the rates of the major version only: 8.6 and 8.9 taken for 8.0
        "major_only": _EX3 + '''    major = record["compute_capability"][0]
    rates = SM_RATES[(major, 5 if major == 7 else 0)]
    fmas = rates.fp16_tensor_fmas if dtype == "float16" else rates.fp32_lanes
    return sms * fmas * record["max_sm_clock_mhz"] * 1e6 * 2
''',
        # an unknown capability falls back to the T4's rates instead of raising
        "fallback": _EX3 + '''    rates = SM_RATES.get(tuple(record["compute_capability"]), SM_RATES[(7, 5)])
    fmas = rates.fp16_tensor_fmas if dtype == "float16" else rates.fp32_lanes
    return sms * fmas * record["max_sm_clock_mhz"] * 1e6 * 2
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
