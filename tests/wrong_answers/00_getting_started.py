"""Plausible wrong answers to lesson 00's exercises; each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: this machine's or the visible test's), 'helper' (the course's own helper instead of
the learner's code), 'visible_only' (right on the visible test's input only), 'typical' (the lesson's usual mistake).
"""

_EX1 = '''def device_kind(report) -> str:
    """The kind of device the report chose: 'cuda', 'mps' or 'cpu'."""
'''
_EX2 = '''def cpu_summary(report) -> dict:
    """Physical cores and float32 SIMD lanes of the report's CPU."""
'''
_EX3 = '''def peak_gflops(report, fma_units: int = 2) -> float:
    """float32 peak of the report's CPU in GFLOP/s: cores x clock x lanes x 2 x FMA units."""
'''
_EX4 = '''def efficiency(measured_flops: float, peak_flops: float) -> float:
    """Fraction of the peak a measurement reaches; ValueError if impossible (above peak, or not positive)."""
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # the course machine's answer, whatever the report says
        "constant": _EX1 + '''    return "cpu"
''',
        # asks the package which device this machine would use, instead of reading the report it was given
        "helper": _EX1 + '''    from gpucourse import hardware
    return hardware.pick_device().type
''',
        # reads the notebook's own REPORT, not the argument: right for this machine's report only
        "visible_only": _EX1 + '''    return REPORT.device.split(":")[0]
''',
        # keeps the device index: 'cuda:0' instead of 'cuda'
        "typical": _EX1 + '''    return report.device
''',
        # strips a fixed number of characters: right for 'cuda:0', wrong for 'cuda:12' and 'cpu'
        "slice": _EX1 + '''    return report.device[:-2] if report.device.startswith("cuda") else report.device
''',
    },
    "ex2-solution": {
        # this machine's figures
        "constant": _EX2 + '''    return {"cores": 2, "lanes": 16}
''',
        # the package's peak estimate describes this machine, not the report's
        "helper": _EX2 + '''    from gpucourse import hardware
    estimate = hardware.estimate_cpu_peak("float32")
    return {"cores": estimate.cores, "lanes": estimate.lanes}
''',
        # reads the notebook's REPORT instead of the argument
        "visible_only": _EX2 + '''    return {"cores": REPORT.cpu.physical_cores, "lanes": REPORT.cpu.simd_bits // 32}
''',
        # counts logical cores (hyper-threads), equal to the physical ones on the course machine
        "typical": _EX2 + '''    return {"cores": report.cpu.logical_cores, "lanes": report.cpu.simd_bits // 32}
''',
        # divides bits by 8 (bytes in a float32 taken for bits)
        "bits_for_bytes": _EX2 + '''    return {"cores": report.cpu.physical_cores, "lanes": report.cpu.simd_bits // 4}
''',
        # true division: lanes is a float
        "float_lanes": _EX2 + '''    return {"cores": report.cpu.physical_cores, "lanes": report.cpu.simd_bits / 32}
''',
    },
    "ex3-solution": {
        # the visible test's expected value
        "constant": _EX3 + '''    return 332.8
''',
        # the package's PeakEstimate does the arithmetic
        "helper": _EX3 + '''    from gpucourse import hardware
    cpu = report.cpu
    estimate = hardware.PeakEstimate("float32", cpu.physical_cores, cpu.clock_hz, "report", cpu.simd_bits, fma_units, ())
    return estimate.flops / 1e9
''',
        # ignores the fma_units argument: right where it is 2, as in the visible test
        "visible_only": _EX3 + '''    lanes = report.cpu.simd_bits // 32
    return report.cpu.physical_cores * report.cpu.clock_hz * lanes * 2 * 2 / 1e9
''',
        # forgets that a fused multiply-add is two FLOPs
        "typical": _EX3 + '''    lanes = report.cpu.simd_bits // 32
    return report.cpu.physical_cores * report.cpu.clock_hz * lanes * fma_units / 1e9
''',
        # counts logical cores
        "logical_cores": _EX3 + '''    lanes = report.cpu.simd_bits // 32
    return report.cpu.logical_cores * report.cpu.clock_hz * lanes * 2 * fma_units / 1e9
''',
    },
    "ex4-solution": {
        # the visible example's ratio, and the visible error
        "constant": _EX4 + '''    if measured_flops > 65e12:
        raise ValueError("above peak")
    return 24 / 65
''',
        # the package's plausibility check does the work
        "helper": _EX4 + '''    from gpucourse import timing
    if measured_flops <= 0:
        raise ValueError("not a measurement")
    result = timing.plausibility(measured_flops, peak_flops)
    if result.verdict == "above peak":
        raise ValueError("above peak")
    return result.fraction_of_peak
''',
        # compares with the visible example's peak (65 TFLOP/s), not the one it was given
        "visible_only": _EX4 + '''    if measured_flops <= 0 or peak_flops <= 0:
        raise ValueError("not positive")
    if measured_flops > 65e12:
        raise ValueError("above peak")
    return measured_flops / peak_flops
''',
        # checks the ratio but not impossible inputs (zero or negative rates)
        "typical": _EX4 + '''    if measured_flops > peak_flops:
        raise ValueError("above peak")
    return measured_flops / peak_flops
''',
        # tolerates 1% above the peak ("measurement noise")
        "margin": _EX4 + '''    if measured_flops <= 0 or peak_flops <= 0:
        raise ValueError("not positive")
    if measured_flops > 1.01 * peak_flops:
        raise ValueError("above peak")
    return measured_flops / peak_flops
''',
    },
}
