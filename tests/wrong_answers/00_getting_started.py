"""Plausible wrong answers to lesson 00's exercises; each must lose exactly its own exercise's points."""

WRONG = {
    # keeps the device index: 'cuda:0' instead of 'cuda'
    "ex1-solution": '''def device_kind(report) -> str:
    """The kind of device the report chose: 'cuda', 'mps' or 'cpu'."""
    return report.device
''',
    # counts logical cores (hyper-threads) and divides bits by 8 (bytes) instead of 32
    "ex2-solution": '''def cpu_summary(report) -> dict:
    """Physical cores and float32 SIMD lanes of the report's CPU."""
    return {"cores": report.cpu.logical_cores, "lanes": report.cpu.simd_bits // 32}
''',
    # forgets that a fused multiply-add is two FLOPs
    "ex3-solution": '''def peak_gflops(report, fma_units: int = 2) -> float:
    """float32 peak of the report's CPU in GFLOP/s: cores x clock x lanes x 2 x FMA units."""
    lanes = report.cpu.simd_bits // 32
    return report.cpu.physical_cores * report.cpu.clock_hz * lanes * fma_units / 1e9
''',
    # checks the ratio but not impossible inputs (zero or negative rates)
    "ex4-solution": '''def efficiency(measured_flops: float, peak_flops: float) -> float:
    """Fraction of the peak a measurement reaches; ValueError if impossible (above peak, or not positive)."""
    if measured_flops > peak_flops:
        raise ValueError("above peak")
    return measured_flops / peak_flops
''',
}
