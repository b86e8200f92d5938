"""Plausible wrong answers to lesson 02's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: the visible test's), 'helper' (the course's own helper instead of the learner's
code), 'visible_only' (right on the visible test's inputs only), 'typical' (the lesson's usual mistake), and more.
"""

_E1 = '''\
def linear_layer_cost(batch: int, in_features: int, out_features: int, dtype_bytes: int) -> tuple[int, int]:
    """(FLOPs, bytes) of the forward pass y = x @ W.T + b."""
'''
_E2 = '''\
def roofline_verdict(flops: float, nbytes: float, peak_flops: float, bandwidth: float) -> dict:
    """Intensity, ridge point, attainable FLOP/s and 'memory' or 'compute' for one operation on one device."""
'''
_E3 = '''\
def conv2d_time_lower_bound(batch: int, in_channels: int, out_channels: int, size: int, kernel_size: int,
                            dtype_bytes: int, peak_flops: float, bandwidth: float) -> float:
    """Fewest seconds a stride-1, 'same'-padded convolution can take on a device with this roofline."""
'''
_E4 = '''\
def training_memory_gb(params: int, optimizer: str, precision: str, activations_gb: float = 0.0) -> float:
    """GB to train: weights, gradients, master weights and optimizer state for this precision, plus activations."""
'''
_E4_CHECKS = '''\
    if optimizer not in ("sgd", "momentum", "adam"):
        raise ValueError(f"optimizer must be 'sgd', 'momentum' or 'adam', got {optimizer!r}")
    if precision not in ("float32", "mixed", "bfloat16"):
        raise ValueError(f"precision must be 'float32', 'mixed' or 'bfloat16', got {precision!r}")
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # the visible example's answer
        "constant": _E1 + '''    return 2 * 64 * 784 * 128 + 64 * 128, (64 * 784 + 128 * 784 + 128 + 64 * 128) * 4
''',
        # the package's matmul counts, plus the bias
        "helper": _E1 + '''    from gpucourse import roofline
    dtype = {8: "float64", 4: "float32", 2: "float16", 1: "int8"}[dtype_bytes]
    flops = roofline.matmul_flops(batch, out_features, in_features) + batch * out_features
    return flops, roofline.matmul_bytes(batch, out_features, in_features, dtype) + out_features * dtype_bytes
''',
        # assumes float32: 4 bytes per element, as in the visible example
        "visible_only": _E1 + '''    flops = 2 * batch * in_features * out_features + batch * out_features
    elements = batch * in_features + out_features * in_features + out_features + batch * out_features
    return flops, elements * 4
''',
        # forgets that a multiply-add is two FLOPs
        "typical": _E1 + '''    flops = batch * in_features * out_features + batch * out_features
    elements = batch * in_features + out_features * in_features + out_features + batch * out_features
    return flops, elements * dtype_bytes
''',
        # forgets the bias: its FLOPs and its bytes
        "no_bias": _E1 + '''    flops = 2 * batch * in_features * out_features
    elements = batch * in_features + out_features * in_features + batch * out_features
    return flops, elements * dtype_bytes
''',
        # the output written with in_features elements per row: right only for square layers
        "square_only": _E1 + '''    flops = 2 * batch * in_features * out_features + batch * out_features
    elements = batch * in_features + out_features * in_features + out_features + batch * in_features
    return flops, elements * dtype_bytes
''',
    },
    "ex2-solution": {
        # the visible 1024-matmul verdict
        "constant": _E2 + '''    return {"intensity": 2 * 1024**3 / (3 * 1024**2 * 4), "ridge_point": 8.1e12 / 320e9, "attainable_flops": 8.1e12,
            "bound": "compute"}
''',
        # the package's roofline module does the arithmetic
        "helper": _E2 + '''    from gpucourse import roofline
    intensity = roofline.arithmetic_intensity(flops, nbytes)
    return {"intensity": intensity, "ridge_point": roofline.ridge_point(peak_flops, bandwidth),
            "attainable_flops": roofline.attainable_flops(intensity, peak_flops, bandwidth),
            "bound": roofline.bound(intensity, peak_flops, bandwidth)}
''',
        # decides the bound against the T4's ridge point of the visible examples
        "visible_only": _E2 + '''    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": min(peak_flops, bandwidth * intensity),
            "bound": "memory" if intensity < 8.1e12 / 320e9 else "compute"}
''',
        # compares against the wrong side of the ridge point
        "typical": _E2 + '''    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": min(peak_flops, bandwidth * intensity),
            "bound": "compute" if intensity < ridge else "memory"}
''',
        # counts the ridge point itself as memory-bound
        "at_ridge": _E2 + '''    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": min(peak_flops, bandwidth * intensity),
            "bound": "memory" if intensity <= ridge else "compute"}
''',
        # divides the larger of peak and bandwidth by the smaller: right whenever the peak is the larger number
        "sorted_ridge": _E2 + '''    intensity = flops / nbytes
    ridge = max(peak_flops, bandwidth) / min(peak_flops, bandwidth)
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": min(peak_flops, bandwidth * intensity),
            "bound": "memory" if intensity < ridge else "compute"}
''',
        # takes the higher roof instead of the lower one
        "max_roof": _E2 + '''    intensity = flops / nbytes
    ridge = peak_flops / bandwidth
    return {"intensity": intensity, "ridge_point": ridge,
            "attainable_flops": max(peak_flops, bandwidth * intensity),
            "bound": "memory" if intensity < ridge else "compute"}
''',
    },
    "ex3-solution": {
        # the first visible layer's bound
        "constant": _E3 + '''    return max(2 * 32 * 64 * 224**2 * 64 * 9 / 8.1e12, (32 * 64 * 224**2 * 2 + 64 * 64 * 9) * 4 / 320e9)
''',
        # the package's convolution counts and time bound
        "helper": _E3 + '''    from gpucourse import roofline
    shape = roofline.Conv2dShape(batch, in_channels, out_channels, size, size, kernel_size, 1, kernel_size // 2)
    dtype = {8: "float64", 4: "float32", 2: "float16", 1: "int8"}[dtype_bytes]
    return roofline.time_lower_bound(roofline.conv2d_flops(shape), roofline.conv2d_bytes(shape, dtype),
                                     peak_flops, bandwidth)
''',
        # assumes as many output channels as input channels, as both visible layers have
        "visible_only": _E3 + '''    flops = 2 * batch * in_channels * size**2 * in_channels * kernel_size**2
    elements = (batch * in_channels * size**2 + in_channels * in_channels * kernel_size**2
                + batch * in_channels * size**2)
    return max(flops / peak_flops, elements * dtype_bytes / bandwidth)
''',
        # only counts the arithmetic: ignores the time to move the bytes (wrong for memory-bound layers)
        "typical": _E3 + '''    flops = 2 * batch * out_channels * size**2 * in_channels * kernel_size**2
    return flops / peak_flops
''',
        # adds the two times: no overlap at all (an upper estimate, not the lower bound)
        "sum": _E3 + '''    flops = 2 * batch * out_channels * size**2 * in_channels * kernel_size**2
    elements = (batch * in_channels * size**2 + out_channels * in_channels * kernel_size**2
                + batch * out_channels * size**2)
    return flops / peak_flops + elements * dtype_bytes / bandwidth
''',
        # forgets the weights' bytes
        "no_weights": _E3 + '''    flops = 2 * batch * out_channels * size**2 * in_channels * kernel_size**2
    elements = batch * in_channels * size**2 + batch * out_channels * size**2
    return max(flops / peak_flops, elements * dtype_bytes / bandwidth)
''',
    },
    "ex4-solution": {
        # the visible VGG16 figure
        "constant": _E4 + _E4_CHECKS + '''    return 138_357_544 * 16 / 1e9
''',
        # the package's MemoryBreakdown adds up the parts
        "helper": _E4 + _E4_CHECKS + '''    from gpucourse import precision as p
    w, g, m, s = {"float32": (4, 4, 0, 4), "mixed": (2, 2, 4, 4), "bfloat16": (2, 2, 0, 2)}[precision]
    n = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    parts = p.MemoryBreakdown(params, params * (w + m), params * g, params * n * s, round(activations_gb * 1e9))
    return parts.total / 1e9
''',
        # right for the two visible calls (mixed Adam, float32 SGD): 16 bytes for Adam, 8 otherwise
        "visible_only": _E4 + _E4_CHECKS + '''    return params * (16 if optimizer == "adam" else 8) / 1e9 + activations_gb
''',
        # the optimizer state and master weights at the weights' precision: 7B in float16 with Adam "fits" in 56 GB
        "typical": _E4 + _E4_CHECKS + '''    size = 4 if precision == "float32" else 2
    copies = {"sgd": 2, "momentum": 3, "adam": 4}[optimizer]
    return params * size * copies / 1e9 + activations_gb
''',
        # forgets the float32 master weights of mixed precision
        "no_master": _E4 + _E4_CHECKS + '''    w, s = {"float32": (4, 4), "mixed": (2, 4), "bfloat16": (2, 2)}[precision]
    n = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    return params * (2 * w + n * s) / 1e9 + activations_gb
''',
        # GiB (2**30 bytes) where the question asks for GB (1e9 bytes)
        "gib": _E4 + _E4_CHECKS + '''    w, g, m, s = {"float32": (4, 4, 0, 4), "mixed": (2, 2, 4, 4), "bfloat16": (2, 2, 0, 2)}[precision]
    n = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    return params * (w + g + m + n * s) / 2**30 + activations_gb
''',
        # a KeyError, not a ValueError, for an unknown optimizer or precision
        "key_error": _E4 + '''    w, g, m, s = {"float32": (4, 4, 0, 4), "mixed": (2, 2, 4, 4), "bfloat16": (2, 2, 0, 2)}[precision]
    n = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    return params * (w + g + m + n * s) / 1e9 + activations_gb
''',
    },
}
