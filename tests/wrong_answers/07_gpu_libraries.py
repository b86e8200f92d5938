"""Plausible wrong answers to lesson 07's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper, blocked by off_limits; in Exercise 1,
where none computes the answer, a reading of PyTorch op names instead of kernel names; in Exercise 3, the course's
simulator recognised by its class name), "visible_only" (right on the visible test's input only), "typical" (the
lesson's typical mistake, used in the full nbgrader pipeline), and more: the parts of a kernel name read in the wrong
order, every algorithm read as gemm, bf16 read as f16, "xmma" or a 16-bit type taken for Tensor Cores (typical), float16 convolutions read as float32; too few runs, a tolerance instead of bits, registration order,
PyTorch's determinism flag alone, hooks left behind, inputs recorded after an in-place forward; the first differing output with its inputs unchecked, a
model run in training mode or left in eval mode; modes or switches put back outside a finally block, switches reset to defaults, a global hook left after an error.
"""

from notebook_utils import cell_by_grade_id, load, solution_path, source
from wrong_answers.tampering import with_tampering

_EX1 = """\
def read_kernel(name: str) -> dict:
    \"\"\"What a cuBLAS/cuDNN/CUTLASS kernel name says: {"tensor_cores", "inputs", "algorithm"}.\"\"\"
"""
_EX1_GOOD_ALGORITHM = """\
    low = name.lower()
    if "winograd" in low:
        algorithm = "winograd"
    elif "fft" in low:
        algorithm = "fft"
    elif "implicit_gemm" in low or "implicit_convolve" in low:
        algorithm = "implicit_gemm"
    elif re.search(r"convolve|fprop|dgrad|wgrad|[sh]\\d*cudnn", low):
        algorithm = "convolution"
    elif "gemm" in low:
        algorithm = "gemm"
    else:
        return {"tensor_cores": False, "inputs": None, "algorithm": "other"}
"""
_EX1_GOOD_INPUTS = """\
    if "tf32" in low:
        inputs = "tf32"
    elif "bf16" in low:
        inputs = "bf16"
    elif "f16" in low or "fp16" in low or re.search(r"(^|_)h+\\d*(gemm|cudnn|fprop|dgrad|wgrad)|__half", low):
        inputs = "fp16"
    else:
        inputs = "fp32"
"""
_EX1_GOOD_CORES = """\
    mma = re.search(r"\\d{3,6}(gemm|cudnn|fprop|dgrad|wgrad)|tensorop|wmma|hmma|gmma|xmma|tensor\\d+x\\d+|warpgroupsize", low)
    cuda_cores = "simt" in low or "ffma" in low
"""
_EX1_RETURN = """\
    return {"tensor_cores": bool(mma) and not cuda_cores, "inputs": inputs, "algorithm": algorithm}
"""
_EX2 = """\
def tf32_matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    \"\"\"a @ b with both inputs rounded to TF32 (10 mantissa bits, nearest, ties to even), summed in float32.\"\"\"
"""
_EX3 = """\
def find_nondeterministic(model: nn.Module, x: torch.Tensor) -> str | None:
    \"\"\"The name of the submodule whose output varies between runs on identical inputs, or None.\"\"\"
"""


def _ex3(runs: int = 8, compare: str = "torch.equal(output_0, output)", same_inputs: str =
         "all(torch.equal(a, b) for a, b in zip(inputs_0, inputs))", cleanup: bool = True,
         enter: str = "model.eval()", restore: str = "for module, training in modes.items(): module.training = training",
         before_run: str = "pass", after: str = "pass", copy_inputs: str = "[t.detach().clone() for t in inputs]") -> str:
    """The model answer of Exercise 3 with one part changed."""
    body = f"""\
    names = {{module: name for name, module in model.named_modules() if name}}
    runs = []
    seen = {{}}

    def before(module, inputs):
        seen.setdefault(module, []).append({copy_inputs})

    def record(module, inputs, output):
        runs[-1].append((names[module], seen[module].pop(), output.detach().clone()))

    modes = {{module: module.training for module in model.modules()}}
    handles = [module.register_forward_pre_hook(before) for module in names]
    handles += [module.register_forward_hook(record) for module in names]
    try:
        {enter}
        with torch.no_grad():
            for _ in range({runs}):
                {before_run}
                runs.append([])
                model(x)
    finally:
        {"for handle in handles: handle.remove()" if cleanup else "pass"}
        {restore}
    {after}
    for run in runs[1:]:
        for (name, inputs_0, output_0), (_, inputs, output) in zip(runs[0], run):
            if ({same_inputs}) and not ({compare}):
                return name
    return None
"""
    return _EX3 + body


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # One reading for every name: a float32 GEMM on CUDA cores (the first kernel of the constructed trace).
        "constant": _EX1 + """\
    return {"tensor_cores": False, "inputs": "fp32", "algorithm": "gemm"}
""",
        # There is no course helper for this: a reading of PyTorch's own op names instead of kernel names.
        "helper": _EX1 + """\
    low = name.lower()
    algorithm = "implicit_gemm" if "conv" in low else "gemm" if ("mm" in low or "gemm" in low) else "other"
    return {"tensor_cores": False, "inputs": None if algorithm == "other" else "fp32", "algorithm": algorithm}
""",
        # A table of the names shown in the lesson; anything else read as a float16 Tensor Core GEMM.
        "visible_only": _EX1 + """\
    table = {"ampere_sgemm_128x64_tn": (False, "fp32", "gemm"),
             "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x64x16_stage6_warpsize2x2x1_tensor16x8x8": (True, "tf32", "gemm"),
             "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_32x3_nn": (True, "bf16", "gemm"),
             "sm80_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc_tilesize128x32x32_stage4_warpsize4x1x1_g1_"
             "tensor16x8x16_execute_kernel__5x_cudnn": (True, "fp16", "implicit_gemm")}
    if name in table:
        tensor_cores, inputs, algorithm = table[name]
        return {"tensor_cores": tensor_cores, "inputs": inputs, "algorithm": algorithm}
    if "elementwise" in name:
        return {"tensor_cores": False, "inputs": None, "algorithm": "other"}
    if "winograd" in name:
        return {"tensor_cores": False, "inputs": "fp32", "algorithm": "winograd"}
    return {"tensor_cores": True, "inputs": "fp16", "algorithm": "gemm"}
""",
        # f32 looked for before tf32: TF32 kernels (f32f32_tf32f32) read as float32.
        "f32_first": _EX1 + _EX1_GOOD_ALGORITHM + """\
    if "bf16" in low:
        inputs = "bf16"
    elif "f16" in low or "fp16" in low or re.search(r"(^|_)h\\d*gemm", low):
        inputs = "fp16"
    elif "f32" in low or "sgemm" in low or "float" in low:
        inputs = "fp32"
    elif "tf32" in low:
        inputs = "tf32"
    else:
        inputs = "fp32"
""" + _EX1_GOOD_CORES + _EX1_RETURN,
        # "xmma" taken for Tensor Cores: the sm80 xmma float32 kernels on CUDA cores (ffma) count as Tensor Cores.
        "xmma_means_tensor_cores": _EX1 + _EX1_GOOD_ALGORITHM + _EX1_GOOD_INPUTS + """\
    mma = re.search(r"\\d{3,6}(gemm|cudnn|fprop|dgrad|wgrad)|tensorop|wmma|hmma|gmma|xmma|tensor\\d+x\\d+|warpgroupsize", low)
    cuda_cores = "simt" in low
""" + _EX1_RETURN,
        # Tensor Cores whenever the inputs are 16-bit or TF32: float16 on CUDA cores (hgemm) passes as Tensor Cores.
        "low_precision_means_tensor_cores": _EX1 + _EX1_GOOD_ALGORITHM + _EX1_GOOD_INPUTS + """\
    return {"tensor_cores": inputs != "fp32", "inputs": inputs, "algorithm": algorithm}
""",
        # Tensor Cores read from the type marker alone (typical: "16-bit means Tensor Cores"): a 16-bit type (fp16, f16,
        # bf16, h for half) means Tensor Cores, so float16 sgemm kernels with no MMA shape (..._fp16_sgemm_fp16_...),
        # on CUDA cores, count as Tensor Cores.
        "typical": _EX1 + _EX1_GOOD_ALGORITHM + _EX1_GOOD_INPUTS + _EX1_GOOD_CORES + """\
    sixteen_bit = bool(re.search(r"fp16|f16|bf16", low))
    return {"tensor_cores": (bool(mma) or sixteen_bit) and not cuda_cores, "inputs": inputs, "algorithm": algorithm}
""",
        # cuDNN names that give the pass, not the algorithm (scudnn, h884cudnn, dgrad, wgrad), read as "other": the
        # Tensor Core shape is never reached, and a convolution that takes most of the time is never the answer.
        "cudnn_names_other": _EX1 + _EX1_GOOD_ALGORITHM.replace(
            """    elif re.search(r"convolve|fprop|dgrad|wgrad|[sh]\\d*cudnn", low):
        algorithm = "convolution"
""", "") + _EX1_GOOD_INPUTS + _EX1_GOOD_CORES + _EX1_RETURN,
        # The Tensor Core shape looked for before "gemm" only: h884cudnn and s1688cudnn convolutions read as CUDA cores.
        "shape_before_gemm_only": _EX1 + _EX1_GOOD_ALGORITHM + _EX1_GOOD_INPUTS
        + _EX1_GOOD_CORES.replace("(gemm|cudnn|fprop|dgrad|wgrad)", "gemm") + _EX1_RETURN,
        # xmma without ffma not read as Tensor Cores: a truncated TF32 xmma name (its tensor shape cut off) is missed.
        "xmma_ignored": _EX1 + _EX1_GOOD_ALGORITHM + _EX1_GOOD_INPUTS
        + _EX1_GOOD_CORES.replace("|xmma", "") + _EX1_RETURN,
        # Only names with "gemm" are matmuls or convolutions: Winograd and FFT convolutions are missed.
        "gemm_only": _EX1 + """\
    low = name.lower()
    if "implicit_gemm" in low or "implicit_convolve" in low:
        algorithm = "implicit_gemm"
    elif "gemm" in low:
        algorithm = "gemm"
    else:
        return {"tensor_cores": False, "inputs": None, "algorithm": "other"}
""" + _EX1_GOOD_INPUTS + _EX1_GOOD_CORES + _EX1_RETURN,
        # Every matmul or convolution read as "gemm": Winograd, FFT, implicit GEMM and convolution passes never told
        # apart (the reviewer's wrong answer).
        "algorithm_always_gemm": _EX1 + _EX1_GOOD_ALGORITHM.replace(
            'algorithm = "winograd"', 'algorithm = "gemm"').replace('algorithm = "fft"', 'algorithm = "gemm"').replace(
            'algorithm = "implicit_gemm"', 'algorithm = "gemm"').replace('algorithm = "convolution"', 'algorithm = "gemm"')
        + _EX1_GOOD_INPUTS + _EX1_GOOD_CORES + _EX1_RETURN,
        # "f16" looked for before "bf16": every bfloat16 kernel reads as float16 (the reviewer's wrong answer).
        "f16_before_bf16": _EX1 + _EX1_GOOD_ALGORITHM + _EX1_GOOD_INPUTS.replace("""\
    elif "bf16" in low:
        inputs = "bf16"
""", "").replace("""\
    else:
        inputs = "fp32"
""", """\
    elif "bf16" in low:
        inputs = "bf16"
    else:
        inputs = "fp32"
""") + _EX1_GOOD_CORES + _EX1_RETURN,
        # bfloat16 and float16 both returned as "half" (the reviewer's wrong answer).
        "inputs_coarse": _EX1 + _EX1_GOOD_ALGORITHM + _EX1_GOOD_INPUTS.replace(
            'inputs = "bf16"', 'inputs = "half"').replace('inputs = "fp16"', 'inputs = "half"')
        + _EX1_GOOD_CORES + _EX1_RETURN,
        # Case-sensitive: an upper-case name is read as nothing at all.
        "case_sensitive": _EX1 + _EX1_GOOD_ALGORITHM.replace("low = name.lower()", "low = name")
        + _EX1_GOOD_INPUTS + _EX1_GOOD_CORES + _EX1_RETURN,
        # h for half read only before gemm or cudnn, and a __half template argument not read (the model answer of review
        # v3r4): cuDNN's and CUTLASS's float16 convolutions (h884fprop, h16816fprop, implicit_convolve_hhgemm<__half>)
        # read as float32, so a pure float16 trace says "float32 convolutions ran, none in TF32".
        "r4_half_conv_as_fp32": _EX1 + _EX1_GOOD_ALGORITHM + _EX1_GOOD_INPUTS.replace(
            "(gemm|cudnn|fprop|dgrad|wgrad)|__half", "(gemm|cudnn)").replace("h+", "h") + _EX1_GOOD_CORES + _EX1_RETURN,
        # Other kernels typed too (the reviewer's wrong answer, v3r4): NCCL's ..._bf16_... read as "bf16" although the
        # exercise specifies None for every kernel that is not a matmul or convolution.
        "r4_other_inputs_typed": _EX1 + _EX1_GOOD_ALGORITHM.replace(
            'return {"tensor_cores": False, "inputs": None, "algorithm": "other"}', 'algorithm = "other"')
        + _EX1_GOOD_INPUTS + _EX1_GOOD_CORES + _EX1_RETURN,
    },
    "ex2-solution": {
        # Plain float32: no rounding at all (what a CPU computes, not a Tensor Core in TF32 mode).
        "constant": _EX2 + '''\
    return np.matmul(np.asarray(a, dtype=np.float32), np.asarray(b, dtype=np.float32))
''',
        # The course's own emulation: off-limits here.
        "helper": _EX2 + '''\
    return library_switches.tf32_matmul(a, b)
''',
        # Rounds only the first input: the visible tests' random products are close, ties in b are not.
        "visible_only": _EX2 + '''\
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
        "typical": _EX2 + '''\
    def cut(values):
        return (np.asarray(values, dtype=np.float32).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.matmul(cut(a), cut(b)).astype(np.float32)
''',
        # Rounds ties away from zero (half an ulp always added): wrong on exact ties only.
        "ties_away": _EX2 + '''\
    def to_tf32(values):
        bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
        bits = (bits + np.uint64(0x1000)) & np.uint64(0xFFFFE000)
        return bits.astype(np.uint32).view(np.float32)
    return np.matmul(to_tf32(a), to_tf32(b)).astype(np.float32)
''',
        # float16's 10-bit mantissa with one power-of-two scale per matrix (the reviewer's wrong answer, v3r4): entries more
        # than 2^14 below the matrix's largest fall into float16's subnormals or flush to zero.
        "r4_fp16_cast_scaled": _EX2 + '''\
    def r(x):
        x = np.asarray(x, dtype=np.float32)
        m = np.abs(x).max()
        e = np.float32(2.0) ** np.floor(np.log2(m)) if m > 0 else np.float32(1)
        return ((x / e).astype(np.float16).astype(np.float32) * e).astype(np.float32)
    return np.matmul(r(a), r(b)).astype(np.float32)
''',
        # Ties to even in a, ties away from zero in b (the reviewer's wrong answer, v3r4).
        "r4_ties_away_b": _EX2 + '''\
    def rn(values):
        bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
        last = (bits >> np.uint64(13)) & np.uint64(1)
        return ((bits + np.uint64(0x0FFF) + last) & np.uint64(0xFFFFE000)).astype(np.uint32).view(np.float32)
    def rna(values):
        bits = np.asarray(values, dtype=np.float32).view(np.uint32)
        return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)
    return np.matmul(rn(a), rna(b)).astype(np.float32)
''',
        # A Veltkamp split (x * 8193) that overflows above about 4e34 and leaves those values unrounded (the reviewer's
        # wrong answer, v3r4).
        "r4_veltkamp": _EX2 + '''\
    def r(x):
        x = np.asarray(x, dtype=np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            c = x * np.float32(8193.0); hi = c - (c - x)
        return np.where(np.isfinite(c), hi, x).astype(np.float32)
    return np.matmul(r(a), r(b)).astype(np.float32)
''',
        # Rounds in place: right numbers, but the caller's arrays are changed.
        "in_place": _EX2 + '''\
    for x in (a, b):
        bits = x.view(np.uint32)
        bits[...] = ((bits.astype(np.uint64) + 0x0FFF + ((bits >> 13) & 1)) & 0xFFFFE000).astype(np.uint32)
    return np.matmul(a, b).astype(np.float32)
''',
    },
    "ex3-solution": {
        # The visible model's answer.
        "constant": _EX3 + """\
    return "3"
""",
        # The course's simulator recognised by its class name: a custom kernel is missed.
        "helper": _EX3 + """\
    for name, module in model.named_modules():
        if type(module).__name__ == "AtomicSum":
            return name
    return None
""",
        # Right on the visible models: looks for the module that sums over the last dimension, by its repr.
        "visible_only": _EX3 + """\
    for name, module in model.named_modules():
        if "flagged" in repr(module) and not list(module.children()):
            return name
    return None
""",
        # Compares values within a tolerance: the last-bit differences of atomics pass as equal.
        "typical": _ex3(compare="torch.allclose(output_0, output)"),
        # Inputs recorded after the forward (in the forward hook): a module that changes its input in place shows
        # changed inputs on every run, so it and every later module are skipped (the model answer of v3r3's review).
        "inputs_after_forward": _ex3(copy_inputs="None").replace(
            "seen[module].pop()", "[t.detach().clone() for t in inputs]"),
        # Two runs only: a kernel that changes once in 6 calls looks deterministic.
        "two_runs": _ex3(runs=2),
        # The first module, in the order they ran, whose output differs, its inputs never checked: an atomic sum in a
        # parent's own forward makes its deterministic child differ first (the reviewer's wrong answer).
        "first_output_differs": _ex3(same_inputs="True"),
        # Runs the model in the mode it was given: in training mode Dropout is reported (random numbers, the other
        # cause) and every BatchNorm updates its running statistics 8 times.
        "train_mode": _ex3(enter="pass", restore="pass"),
        # Switches to eval mode and never switches back: the model is left in eval mode.
        "left_in_eval": _ex3(restore="pass"),
        # Puts the mode back with model.train(...): a frozen BatchNorm (eval inside a training model) is unfrozen.
        "train_all_back": _ex3(restore="model.train(modes[model])"),
        # Puts every module's mode back after the runs, not in the finally block: when a forward pass raises, the
        # model is left in eval mode (its frozen BatchNorm is fine, every other module is not).
        "modes_outside_finally": _ex3(restore="pass",
                                      after="for module, training in modes.items(): module.training = training"),
        # Turns cuDNN's autotuning off for the search and puts it back after the runs, not in the finally block: when
        # a forward pass raises, a learner's cudnn.benchmark = True stays off for the rest of the process.
        "switches_outside_finally": _ex3(
            enter="model.eval(); saved = torch.backends.cudnn.benchmark; torch.backends.cudnn.benchmark = False",
            after="torch.backends.cudnn.benchmark = saved"),
        # Turns cuDNN's determinism on and "puts back" PyTorch's defaults in the finally block, not what it found: a
        # learner's cudnn.benchmark = True is lost (the reviewer's wrong answer).
        "switches_reset_to_default": _ex3(
            enter="model.eval(); torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False",
            restore="for module, training in modes.items(): module.training = training\n"
                    "        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = False, False"),
        # A global module hook (register_module_forward_hook) removed after the runs, not in the finally block: after
        # an error it stays on every module of the process (the reviewer's wrong answer).
        "global_hook_left": _ex3(
            enter="model.eval(); extra = torch.nn.modules.module.register_module_forward_hook(lambda m, i, o: None)",
            after="extra.remove()"),
        # Reseeds PyTorch before each run in training mode: Dropout repeats, but BatchNorm's buffers are updated.
        "reseed_in_train_mode": _ex3(enter="pass", restore="pass", before_run="torch.manual_seed(0)"),
        # One record per module and run, the last call's (the reviewer's wrong answer, v3r4): a module called twice per
        # forward pass keeps only its second call, whose inputs come from the first call's varying output.
        "r4_last_call_per_name": _EX3 + """\
    names = {m: n for n, m in model.named_modules() if n}
    runs, order, pending = [], [], {}
    def pre(m, inputs):
        pending[m] = [t.detach().clone() for t in inputs]
    def post(m, inputs, output):
        name = names[m]
        runs[-1][name] = (pending.pop(m), output.detach().clone())
        if len(runs) == 1 and name not in order:
            order.append(name)
    modes = {m: m.training for m in model.modules()}
    handles = [m.register_forward_pre_hook(pre) for m in names] + [m.register_forward_hook(post) for m in names]
    try:
        model.eval()
        with torch.no_grad():
            for _ in range(8):
                runs.append({})
                model(x)
    finally:
        for h in handles:
            h.remove()
        for m, t in modes.items():
            m.training = t
    for name in order:
        i0, o0 = runs[0][name]
        for run in runs[1:]:
            i, o = run[name]
            if all(torch.equal(a, b) for a, b in zip(i0, i)) and not torch.equal(o0, o):
                return name
    return None
""",
        # One record per module and run, its FIRST call (the reviewer's wrong answer, v3r5 MA1): misses a shared
        # module that varies only on a later call of the pass.
        "r5_first_call_only": _ex3().replace(
            "        runs[-1].append((names[module], seen[module].pop(), output.detach().clone()))\n",
            "        rec = (names[module], seen[module].pop(), output.detach().clone())\n"
            "        if all(r[0] != rec[0] for r in runs[-1]):\n"
            "            runs[-1].append(rec)\n"),
        # One record per module and run merging its calls: the first call's inputs, the last call's output (the
        # reviewer's wrong answer, v3r6 MA1): blames a block shared around the culprit, misses a middle call.
        "r6_first_inputs_last_output": _EX3 + """\
    names = {m: n for n, m in model.named_modules() if n}
    runs = []          # per run: (first-call inputs by name, last-call output by name, names in the order they ran)

    def before(m, inputs):
        runs[-1][0].setdefault(names[m], [t.detach().clone() for t in inputs])

    def after(m, inputs, output):
        ins, outs, order = runs[-1]
        if names[m] not in outs:
            order.append(names[m])
        outs[names[m]] = output.detach().clone()

    modes = {m: m.training for m in model.modules()}
    handles = [m.register_forward_pre_hook(before) for m in names] + [m.register_forward_hook(after) for m in names]
    try:
        model.eval()
        with torch.no_grad():
            for _ in range(8):
                runs.append(({}, {}, []))
                model(x)
    finally:
        for h in handles:
            h.remove()
        for m, t in modes.items():
            m.training = t
    ins0, outs0, order = runs[0]
    for name in order:
        for ins, outs, _ in runs[1:]:
            if all(torch.equal(a, b) for a, b in zip(ins0[name], ins[name])) and not torch.equal(outs0[name], outs[name]):
                return name
    return None
""",
        # Only each call's first positional input copied and compared, the common hook idiom (review v3r7 MA1): blames a
        # two-input child whose second input varies.
        "r7_first_input_only": _ex3(copy_inputs="[inputs[0].detach().clone()]"),
        # A record per call in run order, but each compared with the module's FIRST call's inputs of the run (review
        # v3r7 MA1): blames a shared projection run before and after the varying op.
        "r7_module_first_call_inputs": _ex3().replace(
            "                runs.append([])\n", "                runs.append([])\n                first.clear()\n").replace(
            "        runs[-1].append((names[module], seen[module].pop(), output.detach().clone()))\n",
            "        inputs = seen[module].pop()\n"
            "        runs[-1].append((names[module], first.setdefault(names[module], inputs), output.detach().clone()))\n"
        ).replace("    modes = {module:", "    first = {}\n    modes = {module:"),
        # Grad mode turned off for good instead of `with torch.no_grad():` (v3r5 m11): the learner's next
        # loss.backward() would raise.
        "r5_grad_left_off": _ex3().replace("        with torch.no_grad():\n",
                                            "        torch.set_grad_enabled(False)\n        if True:\n"),
        # Training mode, PyTorch reseeded before each run and the state dict put back (the reviewer's wrong answer,
        # v3r4): Dropout repeats, buffers are restored, but the learner's global generator is left reseeded.
        "r4_train_mode_reseed": _ex3(enter="saved = {k: v.clone() for k, v in model.state_dict().items()}",
                                     before_run="torch.manual_seed(0)",
                                     restore="for module, training in modes.items(): module.training = training\n"
                                             "        model.load_state_dict(saved)"),
        # Ignores the inputs: the first module whose output differs in registration order, downstream ones included.
        "registration_order": _EX3 + """\
    outputs = {}
    hooks = [module.register_forward_hook(lambda m, i, o, name=name: outputs.setdefault(name, []).append(o.detach().clone()))
             for name, module in model.named_modules() if name]
    try:
        with torch.no_grad():
            for _ in range(8):
                model(x)
    finally:
        for hook in hooks:
            hook.remove()
    for name, _ in model.named_modules():
        if name and any(not torch.equal(outputs[name][0], out) for out in outputs[name][1:]):
            return name
    return None
""",
        # Looks for a culprit only when the model's output changes: a sign() at the end hides it.
        "final_output_only": _EX3 + """\
    with torch.no_grad():
        outputs = [model(x) for _ in range(8)]
    if all(torch.equal(outputs[0], out) for out in outputs):
        return None
    names = {module: name for name, module in model.named_modules() if name}
    runs = []
    handles = [m.register_forward_hook(lambda m, i, o: runs[-1].append((names[m], [t.clone() for t in i], o.clone())))
               for m in names]
    try:
        with torch.no_grad():
            for _ in range(8):
                runs.append([])
                model(x)
    finally:
        for handle in handles:
            handle.remove()
    for run in runs[1:]:
        for (name, i0, o0), (_, i1, o1) in zip(runs[0], run):
            if all(torch.equal(a, b) for a, b in zip(i0, i1)) and not torch.equal(o0, o1):
                return name
    return None
""",
        # PyTorch's flag only: custom kernels are not flagged, so nothing is found.
        "flag_only": _EX3 + """\
    last = []
    handles = [m.register_forward_pre_hook(lambda m, i, name=name: last.append(name))
               for name, m in model.named_modules() if name]
    before = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        with torch.no_grad():
            model(x)
    except RuntimeError:
        return last[-1]
    finally:
        torch.use_deterministic_algorithms(before)
        for handle in handles:
            handle.remove()
    return None
""",
        # Hooks left on the model when a forward pass raises (removed after the loop, not in a finally block).
        "hooks_left": _EX3 + """\
    names = {module: name for name, module in model.named_modules() if name}
    runs = []
    handles = [m.register_forward_hook(lambda m, i, o: runs[-1].append((names[m], [t.clone() for t in i], o.clone())))
               for m in names]
    with torch.no_grad():
        for _ in range(8):
            runs.append([])
            model(x)
    for handle in handles:
        handle.remove()
    for run in runs[1:]:
        for (name, i0, o0), (_, i1, o1) in zip(runs[0], run):
            if all(torch.equal(a, b) for a, b in zip(i0, i1)) and not torch.equal(o0, o1):
                return name
    return None
""",
    },
}

# Review v3r8 (major MA1): two rules cell 8 teaches that no hidden name needed: tensorop alone means Tensor Cores
# (CUTLASS 3's Hopper GEMMs), __half alone means float16 (a cuDNN convolution's template argument).
_EX1_MODEL = source(cell_by_grade_id(load(solution_path("07_gpu_libraries")), "ex1-solution"))
WRONG["ex1-solution"]["r8_no_tensorop"] = _EX1_MODEL.replace("|tensorop|xmma", "|xmma")
WRONG["ex1-solution"]["r8_no_half"] = _EX1_MODEL.replace("|__half", "")
assert _EX1_MODEL not in (WRONG["ex1-solution"]["r8_no_tensorop"], WRONG["ex1-solution"]["r8_no_half"])

# Review v3r9 (sitting): Exercise 3 hands over record_calls (the hooks). The mistakes a learner can still make with it
# (v3r10: its prompt states facts about the models, no longer the steps, so each of these is a decision to get wrong):
# calls keyed by name (a module run several times per pass keeps only its last call), the last differing call (the
# outermost), inputs not compared, too few runs, the model's modes not put back, the model's error swallowed.
_EX3_MODEL = source(cell_by_grade_id(load(solution_path("07_gpu_libraries")), "ex3-solution"))
_PAIRS = "zip(run_0, record_calls(model, x))"
_R10 = {
    "r10_by_name": _EX3_MODEL.replace(
        _PAIRS, "((by_name[name], call) for by_name in [{c[0]: c for c in run_0}] "
                "for call in record_calls(model, x) for name in [call[0]])"),
    "r10_inputs_unchecked": _EX3_MODEL.replace("if same(inputs_0, inputs) and not", "if not"),
    "r10_five_runs": _EX3_MODEL.replace("range(7)", "range(4)"),
    "r10_modes_not_restored": _EX3_MODEL.replace("module.training = training", "pass"),
    "r10_error_swallowed": _EX3_MODEL.replace("    finally:\n", "    except RuntimeError:\n        return None\n    finally:\n"),
    "r10_outermost": _EX3_MODEL.replace(
        _PAIRS, "reversed(list(zip(run_0, record_calls(model, x))))"),
}
for kind, answer in _R10.items():
    assert answer != _EX3_MODEL, kind
    WRONG["ex3-solution"][kind] = answer

# Review v3r11 (majors MA1, MA2): outputs compared with a bare torch.equal, which raises on nn.LSTM's (output, (h, c))
# and on nn.MultiheadAttention's (output, None); a determinism switch turned on and never put back.
_SAME = "if same(inputs_0, inputs) and not same(output_0, output)"
_R11 = {
    "r11_tensor_only_equal": _EX3_MODEL.replace(
        _SAME, "if all(torch.equal(a, b) for a, b in zip(inputs_0, inputs)) and not torch.equal(output_0, output)"),
    "r11_leak_det_warn_only": _EX3_MODEL.replace(
        "model.eval()", "model.eval(); torch.use_deterministic_algorithms(True, warn_only=True)"),
    "r11_leak_cudnn_det": _EX3_MODEL.replace("model.eval()", "model.eval(); torch.backends.cudnn.deterministic = True"),
}
assert _EX3_MODEL.count(_SAME) == 1 and _EX3_MODEL.count("model.eval()") == 1
for kind, answer in _R11.items():
    WRONG["ex3-solution"][kind] = answer

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
