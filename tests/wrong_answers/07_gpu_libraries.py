"""Plausible wrong answers to lesson 07's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''\
def tf32_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a @ b with both inputs rounded to TF32 (10 mantissa bits, nearest, ties to even), summed in float32."""
'''
_EX2 = '''\
def make_reproducible(seed: int) -> None:
    """Seed every generator with seed and allow only deterministic kernels, in PyTorch and TensorFlow."""
'''
_EX3 = '''\
def choose_switches(goal: dict) -> dict:
    """The fastest library switches that meet a goal {"fixed_shapes", "repeatable", "match_float32"}."""
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # Plain float32: no rounding at all (what a CPU computes, not a Tensor Core in TF32 mode).
        "constant": _EX1 + '''\
    return np.matmul(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))
''',
        # The course's own emulation: off-limits here.
        "helper": _EX1 + '''\
    return library_switches.tf32_matmul(a, b)
''',
        # Rounds only the first input: the visible tests' random products are close, ties in b are not.
        "visible_only": _EX1 + '''\
    bits = np.asarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + np.uint64(0x0FFF) + ((bits >> np.uint64(13)) & np.uint64(1))) & np.uint64(0xFFFFE000)
    rounded = bits.astype(np.uint32).view(np.float32)
    if a.shape[0] <= 2 or a.shape[0] == 64:
        b_bits = np.asarray(b, dtype=np.float32).view(np.uint32).astype(np.uint64)
        b_bits = (b_bits + np.uint64(0x0FFF) + ((b_bits >> np.uint64(13)) & np.uint64(1))) & np.uint64(0xFFFFE000)
        b = b_bits.astype(np.uint32).view(np.float32)
    return np.matmul(rounded, b).astype(np.float32)
''',
        # Truncates the 13 bits (rounds towards zero), as if TF32 simply dropped them.
        "typical": _EX1 + '''\
    def cut(values):
        return (np.asarray(values, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.matmul(cut(a), cut(b)).astype(np.float32)
''',
        # Rounds ties away from zero (half an ulp always added): wrong on exact ties only.
        "ties_away": _EX1 + '''\
    def to_tf32(values):
        bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + np.uint64(0x1000)) & np.uint64(0xFFFFE000)
        return bits.astype(np.uint32).view(np.float32)
    return np.matmul(to_tf32(a), to_tf32(b)).astype(np.float32)
''',
        # Rounds in place: right numbers, but the caller's arrays are changed.
        "in_place": _EX1 + '''\
    for x in (a, b):
        bits = x.view(np.uint32)
        bits[...] = ((bits.astype(np.uint64) + 0x0FFF + ((bits >> 13) & 1)) & 0xFFFFE000).astype(np.uint32)
    return np.matmul(a, b).astype(np.float32)
''',
    },
    "ex2-solution": {
        # One fixed seed, whatever the caller asks for.
        "constant": _EX2 + '''\
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic = False, True
    keras.utils.set_random_seed(0)
    tf.config.experimental.enable_op_determinism()
''',
        # The course's own function: off-limits here.
        "helper": _EX2 + '''\
    library_switches.make_reproducible(seed)
''',
        # What the visible checks see: PyTorch's switch and every generator, nothing for cuBLAS, cuDNN or TensorFlow.
        "visible_only": _EX2 + '''\
    torch.use_deterministic_algorithms(True)
    keras.utils.set_random_seed(seed)
''',
        # Seeds everything but leaves the kernels alone: "seeds are enough".
        "typical": _EX2 + '''\
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    keras.utils.set_random_seed(seed)
''',
        # Everything but cuDNN's benchmark left on: its timing-based choice can differ between runs.
        "benchmark_left_on": _EX2 + '''\
    os.environ["CUBLAS_WORKSPACE_CONFIG"] = ":4096:8"
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic = True
    keras.utils.set_random_seed(seed)
    tf.config.experimental.enable_op_determinism()
''',
    },
    "ex3-solution": {
        # The fast settings for every goal.
        "constant": _EX3 + '''\
    return {"cudnn.benchmark": True, "cudnn.deterministic": False, "deterministic_algorithms": False,
            "tf_op_determinism": False, "CUBLAS_WORKSPACE_CONFIG": None, "tf32": True}
''',
        # The course's own choice: off-limits here.
        "helper": _EX3 + '''\
    return library_switches.choose_switches(goal)
''',
        # Right for the visible goal (fixed shapes, nothing to repeat), strict and deterministic otherwise.
        "visible_only": _EX3 + '''\
    fast = goal == {"fixed_shapes": True, "repeatable": False, "match_float32": False}
    return {"cudnn.benchmark": fast, "cudnn.deterministic": not fast, "deterministic_algorithms": not fast,
            "tf_op_determinism": not fast, "CUBLAS_WORKSPACE_CONFIG": None if fast else ":4096:8", "tf32": fast}
''',
        # Turns TF32 off for repeatable runs too ("TF32 is not reproducible"), and forgets that bit-equality with
        # float32 must also repeat.
        "typical": _EX3 + '''\
    repeatable = goal["repeatable"]
    return {"cudnn.benchmark": goal["fixed_shapes"] and not repeatable, "cudnn.deterministic": repeatable,
            "deterministic_algorithms": repeatable, "tf_op_determinism": repeatable,
            "CUBLAS_WORKSPACE_CONFIG": ":4096:8" if repeatable else None,
            "tf32": not (goal["match_float32"] or repeatable)}
''',
        # cudnn.benchmark whenever shapes are fixed, even for repeatable runs.
        "benchmark_always": _EX3 + '''\
    repeatable = goal["repeatable"] or goal["match_float32"]
    return {"cudnn.benchmark": goal["fixed_shapes"], "cudnn.deterministic": repeatable,
            "deterministic_algorithms": repeatable, "tf_op_determinism": repeatable,
            "CUBLAS_WORKSPACE_CONFIG": ":4096:8" if repeatable else None, "tf32": not goal["match_float32"]}
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
