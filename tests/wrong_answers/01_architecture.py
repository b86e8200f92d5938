"""Plausible wrong answers to lesson 01's exercises: each must lose exactly its own exercise's points."""

WRONG: dict[str, str] = {
    # Counts bits where bytes are meant: lanes = simd_bits / dtype_bytes (8x too many lanes).
    "ex1-solution": '''\
def peak_flops(cores: int, clock_hz: float, simd_bits: int, dtype_bytes: int, fma_units: int = 1) -> float:
    """Theoretical peak FLOP/s: cores x clock x lanes x 2 (an FMA is two FLOPs) x FMA units."""
    lanes = simd_bits // dtype_bytes
    return float(cores * clock_hz * lanes * 2 * fma_units)
''',
    # Forgets that a multiply-add is two FLOPs.
    "ex2-solution": '''\
def linear_layer_cost(batch: int, in_features: int, out_features: int, dtype_bytes: int) -> tuple[int, int]:
    """(FLOPs, bytes) of the forward pass y = x @ W.T + b."""
    flops = batch * in_features * out_features + batch * out_features
    elements = batch * in_features + out_features * in_features + out_features + batch * out_features
    return flops, elements * dtype_bytes
''',
    # Compares against the wrong side of the ridge point.
    "ex3-solution": '''\
def roofline_verdict(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> dict:
    """Intensity, ridge point, attainable FLOP/s and 'memory' or 'compute' for one operation on one device."""
    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": min(peak_flops, bandwidth * intensity),
            "bound": "compute" if intensity < ridge else "memory"}
''',
    # Only counts the arithmetic: ignores the time to move the bytes (wrong for memory-bound layers).
    "ex4-solution": '''\
def conv2d_time_lower_bound(batch: int, in_channels: int, out_channels: int, size: int, kernel_size: int,
                            dtype_bytes: int, peak_flops: float, bandwidth: float) -> float:
    """Fewest seconds a stride-1, 'same'-padded convolution can take on a device with this roofline."""
    flops = 2 * batch * out_channels * size**2 * in_channels * kernel_size**2
    return flops / peak_flops
''',
    # Ignores the optimizer state: counts only weights and gradients.
    "ex5-solution": '''\
def training_memory_gb(params: int, bytes_per_param: int, optimizer: str, activations_gb: float = 0.0) -> float:
    """GB to train: weights + gradients + optimizer state (all at bytes_per_param) + activations."""
    if optimizer not in ("sgd", "momentum", "adam"):
        raise ValueError(f"optimizer must be 'sgd', 'momentum' or 'adam', got {optimizer!r}")
    return params * bytes_per_param * 2 / 1e9 + activations_gb
''',
}
