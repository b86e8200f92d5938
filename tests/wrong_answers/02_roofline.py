"""Plausible wrong answers to lesson 02's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: the visible test's), 'helper' (the course's own helper instead of the learner's
code), 'visible_only' (right on the visible test's inputs only), 'typical' (the lesson's usual mistake), and more.
"""

from wrong_answers.tampering import with_tampering

_E1 = '''\
def linear_layer_cost(batch: int, in_features: int, out_features: int, dtype_bytes: int) -> tuple[int, int]:
    """(FLOPs, bytes) of the forward pass y = x @ W.T + b."""
'''
_E2 = '''\
def worth_optimising(layers: dict[str, tuple[float, float, float]], peak_flops: float, bandwidth: float,
                     min_gain_s: float = 0.0) -> list[str]:
    """Layers whose measured time exceeds their roofline lower bound by more than min_gain_s, largest excess first."""
'''
_E3 = '''\
def training_memory_gb(params: int, optimizer: str, precision: str, activations_gb: float = 0.0) -> float:
    """GB to train: weights, gradients, master weights and optimizer state for this precision, plus activations."""
'''
_E3_CHECKS = '''\
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
        # the visible answer
        "constant": _E2 + '''    return ["softmax", "qkv projection", "mlp up", "layer norm"]
''',
        # the package's time_lower_bound does the arithmetic (off_limits blocks it)
        "helper": _E2 + '''    from gpucourse import roofline
    savings = {}
    for name, (flops, nbytes, measured_s) in layers.items():
        bound = roofline.time_lower_bound(flops, nbytes, peak_flops, bandwidth)
        if measured_s < bound:
            raise ValueError(name)
        savings[name] = measured_s - bound
    return sorted((n for n, s in savings.items() if s > min_gain_s), key=lambda n: -savings[n])
''',
        # right for the visible step only: keeps the A100's roof whatever the device
        "visible_only": _E2 + '''    savings = {}
    for name, (flops, nbytes, measured_s) in layers.items():
        bound = max(flops / 312e12, nbytes / 2039e9)
        if measured_s < bound:
            raise ValueError(name)
        savings[name] = measured_s - bound
    return sorted((n for n, s in savings.items() if s > min_gain_s), key=lambda n: -savings[n])
''',
        # the bound from the arithmetic alone: memory-bound layers look far slower than they must be
        "typical": _E2 + '''    savings = {}
    for name, (flops, nbytes, measured_s) in layers.items():
        bound = flops / peak_flops
        if measured_s < bound:
            raise ValueError(name)
        savings[name] = measured_s - bound
    return sorted((n for n, s in savings.items() if s > min_gain_s), key=lambda n: -savings[n])
''',
        # "optimise the slowest layer": ranks by measured time, not by what could be saved
        "by_time": _E2 + '''    savings = {}
    for name, (flops, nbytes, measured_s) in layers.items():
        bound = max(flops / peak_flops, nbytes / bandwidth)
        if measured_s < bound:
            raise ValueError(name)
        savings[name] = measured_s - bound
    return sorted((n for n, s in savings.items() if s > min_gain_s), key=lambda n: -layers[n][2])
''',
        # ranks by measured / bound: a tiny layer 3x off its bound outranks a big one that loses more time
        "ratio": _E2 + '''    savings, ratios = {}, {}
    for name, (flops, nbytes, measured_s) in layers.items():
        bound = max(flops / peak_flops, nbytes / bandwidth)
        if measured_s < bound:
            raise ValueError(name)
        savings[name], ratios[name] = measured_s - bound, measured_s / bound
    return sorted((n for n, s in savings.items() if s > min_gain_s), key=lambda n: -ratios[n])
''',
        # trusts an impossible timing: a layer faster than its bound gets a negative saving and is dropped
        "no_raise": _E2 + '''    savings = {}
    for name, (flops, nbytes, measured_s) in layers.items():
        savings[name] = measured_s - max(flops / peak_flops, nbytes / bandwidth)
    return sorted((n for n, s in savings.items() if s > min_gain_s), key=lambda n: -savings[n])
''',
    },
    "ex3-solution": {
        # the visible VGG16 figure
        "constant": _E3 + _E3_CHECKS + '''    return 138_357_544 * 16 / 1e9
''',
        # the package's MemoryBreakdown adds up the parts
        "helper": _E3 + _E3_CHECKS + '''    from gpucourse import precision as p
    w, g, m, s = {"float32": (4, 4, 0, 4), "mixed": (2, 2, 4, 4), "bfloat16": (2, 2, 0, 2)}[precision]
    n = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    parts = p.MemoryBreakdown(params, params * (w + m), params * g, params * n * s, round(activations_gb * 1e9))
    return parts.total / 1e9
''',
        # right for the two visible calls (mixed Adam, float32 SGD): 16 bytes for Adam, 8 otherwise
        "visible_only": _E3 + _E3_CHECKS + '''    return params * (16 if optimizer == "adam" else 8) / 1e9 + activations_gb
''',
        # the optimizer state and master weights at the weights' precision: 7B in float16 with Adam "fits" in 56 GB
        "typical": _E3 + _E3_CHECKS + '''    size = 4 if precision == "float32" else 2
    copies = {"sgd": 2, "momentum": 3, "adam": 4}[optimizer]
    return params * size * copies / 1e9 + activations_gb
''',
        # forgets the float32 master weights of mixed precision
        "no_master": _E3 + _E3_CHECKS + '''    w, s = {"float32": (4, 4), "mixed": (2, 4), "bfloat16": (2, 2)}[precision]
    n = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    return params * (2 * w + n * s) / 1e9 + activations_gb
''',
        # GiB (2**30 bytes) where the question asks for GB (1e9 bytes)
        "gib": _E3 + _E3_CHECKS + '''    w, g, m, s = {"float32": (4, 4, 0, 4), "mixed": (2, 2, 4, 4), "bfloat16": (2, 2, 0, 2)}[precision]
    n = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    return params * (w + g + m + n * s) / 2**30 + activations_gb
''',
        # a KeyError, not a ValueError, for an unknown optimizer or precision
        "key_error": _E3 + '''    w, g, m, s = {"float32": (4, 4, 0, 4), "mixed": (2, 2, 4, 4), "bfloat16": (2, 2, 0, 2)}[precision]
    n = {"sgd": 0, "momentum": 1, "adam": 2}[optimizer]
    return params * (w + g + m + n * s) / 1e9 + activations_gb
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
