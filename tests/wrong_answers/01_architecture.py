"""Plausible wrong answers to lesson 01's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: the visible test's), 'helper' (the course's own helper instead of the learner's
code), 'visible_only' (right on the visible test's inputs only), 'typical' (the lesson's usual mistake), and more.
"""

_EX1 = '''\
def peak_flops(cores: int, clock_hz: float, simd_bits: int, dtype_bytes: int, fma_units: int = 1) -> float:
    """Theoretical peak FLOP/s: cores x clock x lanes x 2 (an FMA is two FLOPs) x FMA units."""
'''
_EX2 = '''\
def linear_layer_cost(batch: int, in_features: int, out_features: int, dtype_bytes: int) -> tuple[int, int]:
    """(FLOPs, bytes) of the forward pass y = x @ W.T + b."""
'''
_EX3 = '''\
def roofline_verdict(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> dict:
    """Intensity, ridge point, attainable FLOP/s and 'memory' or 'compute' for one operation on one device."""
'''
_EX4 = '''\
def conv2d_time_lower_bound(batch: int, in_channels: int, out_channels: int, size: int, kernel_size: int,
                            dtype_bytes: int, peak_flops: float, bandwidth: float) -> float:
    """Fewest seconds a stride-1, 'same'-padded convolution can take on a device with this roofline."""
'''
_EX5 = '''\
def training_memory_gb(params: int, bytes_per_param: int, optimizer: str, activations_gb: float = 0.0) -> float:
    """GB to train: weights + gradients + optimizer state (all at bytes_per_param) + activations."""
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # the T4 example's figure, whatever the inputs
        "constant": _EX1 + '''    return 2560 * 1.59e9 * 2
''',
        # the package's PeakEstimate does the arithmetic
        "helper": _EX1 + '''    from gpucourse import hardware
    dtype = {8: "float64", 4: "float32", 2: "float16"}[dtype_bytes]
    return hardware.PeakEstimate(dtype, cores, clock_hz, "given", simd_bits, fma_units, ()).flops
''',
        # assumes float32 (4 bytes), as every visible example is
        "visible_only": _EX1 + '''    lanes = simd_bits // 32
    return float(cores * clock_hz * lanes * 2 * fma_units)
''',
        # counts bits where bytes are meant: lanes = simd_bits / dtype_bytes (8x too many lanes)
        "typical": _EX1 + '''    lanes = simd_bits // dtype_bytes
    return float(cores * clock_hz * lanes * 2 * fma_units)
''',
        # forgets the FMA's factor 2
        "no_fma_factor": _EX1 + '''    return float(cores * clock_hz * (simd_bits // (8 * dtype_bytes)) * fma_units)
''',
    },
    "ex2-solution": {
        # the visible example's answer
        "constant": _EX2 + '''    return 2 * 64 * 784 * 128 + 64 * 128, (64 * 784 + 128 * 784 + 128 + 64 * 128) * 4
''',
        # the package's matmul counts, plus the bias
        "helper": _EX2 + '''    from gpucourse import roofline
    dtype = {8: "float64", 4: "float32", 2: "float16", 1: "int8"}[dtype_bytes]
    flops = roofline.matmul_flops(batch, out_features, in_features) + batch * out_features
    return flops, roofline.matmul_bytes(batch, out_features, in_features, dtype) + out_features * dtype_bytes
''',
        # assumes float32: 4 bytes per element, as in the visible example
        "visible_only": _EX2 + '''    flops = 2 * batch * in_features * out_features + batch * out_features
    elements = batch * in_features + out_features * in_features + out_features + batch * out_features
    return flops, elements * 4
''',
        # forgets that a multiply-add is two FLOPs
        "typical": _EX2 + '''    flops = batch * in_features * out_features + batch * out_features
    elements = batch * in_features + out_features * in_features + out_features + batch * out_features
    return flops, elements * dtype_bytes
''',
        # forgets the bias: its FLOPs and its bytes
        "no_bias": _EX2 + '''    flops = 2 * batch * in_features * out_features
    elements = batch * in_features + out_features * in_features + batch * out_features
    return flops, elements * dtype_bytes
''',
        # the output written with in_features elements per row: right only for square layers
        "square_only": _EX2 + '''    flops = 2 * batch * in_features * out_features + batch * out_features
    elements = batch * in_features + out_features * in_features + out_features + batch * in_features
    return flops, elements * dtype_bytes
''',
    },
    "ex3-solution": {
        # the visible 1024-matmul verdict
        "constant": _EX3 + '''    return {"intensity": 2 * 1024**3 / (3 * 1024**2 * 4), "ridge_point": 8.1e12 / 320e9, "attainable_flops": 8.1e12,
            "bound": "compute"}
''',
        # the package's roofline module does the arithmetic
        "helper": _EX3 + '''    from gpucourse import roofline
    intensity = roofline.arithmetic_intensity(flops, nbytes)
    return {"intensity": intensity, "ridge_point": roofline.ridge_point(peak_flops, bandwidth),
            "attainable_flops": roofline.attainable_flops(intensity, peak_flops, bandwidth),
            "bound": roofline.bound(intensity, peak_flops, bandwidth)}
''',
        # decides the bound against the T4's ridge point of the visible examples
        "visible_only": _EX3 + '''    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": min(peak_flops, bandwidth * intensity),
            "bound": "memory" if intensity < 8.1e12 / 320e9 else "compute"}
''',
        # compares against the wrong side of the ridge point
        "typical": _EX3 + '''    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": min(peak_flops, bandwidth * intensity),
            "bound": "compute" if intensity < ridge else "memory"}
''',
        # counts the ridge point itself as memory-bound
        "at_ridge": _EX3 + '''    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": min(peak_flops, bandwidth * intensity),
            "bound": "memory" if intensity <= ridge else "compute"}
''',
        # divides the larger of peak and bandwidth by the smaller: right whenever the peak is the larger number
        "sorted_ridge": _EX3 + '''    intensity = flops / nbytes
    ridge = max(peak_flops, bandwidth) / min(peak_flops, bandwidth)
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": min(peak_flops, bandwidth * intensity),
            "bound": "memory" if intensity < ridge else "compute"}
''',
        # takes the higher roof instead of the lower one
        "max_roof": _EX3 + '''    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": max(peak_flops, bandwidth * intensity),
            "bound": "memory" if intensity < ridge else "compute"}
''',
    },
    "ex4-solution": {
        # the first visible layer's bound
        "constant": _EX4 + '''    return max(2 * 32 * 64 * 224**2 * 64 * 9 / 8.1e12, (32 * 64 * 224**2 * 2 + 64 * 64 * 9) * 4 / 320e9)
''',
        # the package's convolution counts and time bound
        "helper": _EX4 + '''    from gpucourse import roofline
    shape = roofline.Conv2dShape(batch, in_channels, out_channels, size, size, kernel_size, 1, kernel_size // 2)
    dtype = {8: "float64", 4: "float32", 2: "float16", 1: "int8"}[dtype_bytes]
    return roofline.time_lower_bound(roofline.conv2d_flops(shape), roofline.conv2d_bytes(shape, dtype),
                                     peak_flops, bandwidth)
''',
        # assumes as many output channels as input channels, as both visible layers have
        "visible_only": _EX4 + '''    flops = 2 * batch * in_channels * size**2 * in_channels * kernel_size**2
    elements = (batch * in_channels * size**2 + in_channels * in_channels * kernel_size**2
                + batch * in_channels * size**2)
    return max(flops / peak_flops, elements * dtype_bytes / bandwidth)
''',
        # only counts the arithmetic: ignores the time to move the bytes (wrong for memory-bound layers)
        "typical": _EX4 + '''    flops = 2 * batch * out_channels * size**2 * in_channels * kernel_size**2
    return flops / peak_flops
''',
        # adds the two times: no overlap at all (an upper estimate, not the lower bound)
        "sum": _EX4 + '''    flops = 2 * batch * out_channels * size**2 * in_channels * kernel_size**2
    elements = (batch * in_channels * size**2 + out_channels * in_channels * kernel_size**2
                + batch * out_channels * size**2)
    return flops / peak_flops + elements * dtype_bytes / bandwidth
''',
        # forgets the weights' bytes
        "no_weights": _EX4 + '''    flops = 2 * batch * out_channels * size**2 * in_channels * kernel_size**2
    elements = batch * in_channels * size**2 + batch * out_channels * size**2
    return max(flops / peak_flops, elements * dtype_bytes / bandwidth)
''',
    },
    "ex5-solution": {
        # the visible VGG16 figure
        "constant": _EX5 + '''    if optimizer not in ("sgd", "momentum", "adam"):
        raise ValueError(optimizer)
    return 138_357_544 * 4 * 4 / 1e9
''',
        # the package's MemoryBreakdown adds up the parts
        "helper": _EX5 + '''    from gpucourse import precision
    copies = {"sgd": 0, "momentum": 1, "adam": 2}
    if optimizer not in copies:
        raise ValueError(optimizer)
    size = params * bytes_per_param
    parts = precision.MemoryBreakdown(params, size, size, copies[optimizer] * size, round(activations_gb * 1e9))
    return parts.total / 1e9
''',
        # any optimizer other than SGD treated as Adam: right for the visible 'adam' and 'sgd' only
        "visible_only": _EX5 + '''    if optimizer not in ("sgd", "momentum", "adam"):
        raise ValueError(optimizer)
    copies = 2 if optimizer == "sgd" else 4
    return params * bytes_per_param * copies / 1e9 + activations_gb
''',
        # ignores the optimizer state: counts only weights and gradients
        "typical": _EX5 + '''    if optimizer not in ("sgd", "momentum", "adam"):
        raise ValueError(f"optimizer must be 'sgd', 'momentum' or 'adam', got {optimizer!r}")
    return params * bytes_per_param * 2 / 1e9 + activations_gb
''',
        # GiB (2**30 bytes) where the question asks for GB (1e9 bytes)
        "gib": _EX5 + '''    copies = {"sgd": 2, "momentum": 3, "adam": 4}
    if optimizer not in copies:
        raise ValueError(optimizer)
    return params * bytes_per_param * copies[optimizer] / 2**30 + activations_gb
''',
        # a KeyError, not a ValueError, for an unknown optimizer
        "key_error": _EX5 + '''    copies = {"sgd": 2, "momentum": 3, "adam": 4}[optimizer]
    return params * bytes_per_param * copies / 1e9 + activations_gb
''',
    },
}
