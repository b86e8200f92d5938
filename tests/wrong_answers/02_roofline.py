"""Plausible wrong answers to lesson 02's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: the visible test's), 'helper' (the course's own helper instead of the learner's
code), 'visible_only' (right on the visible test's inputs only), 'typical' (the lesson's usual mistake), and more.
"""

from wrong_answers.tampering import with_tampering

_E1_NEW = '''\
def fusion_report(chain, inputs: tuple, flops: float, peak_flops: float, bandwidth: float, fuse=fuse,
                  sync=sync_for(DEVICE)) -> dict[str, dict[str, float]]:
    """`chain(*inputs)`, unfused and fused, on the roofline: bytes, intensity, FLOP/s, lower bound, median seconds."""
'''
# the answers written for v2's signature (bytes, bound_s, measured_s), each wrapped by _placed() into today's
_E1 = '''\
def _fusion_v1(chain, inputs: tuple, bandwidth: float, fuse=fuse, sync=sync_for(DEVICE)) -> dict[str, dict[str, float]]:
    """Bytes moved, memory lower bound and measured median seconds of `chain(*inputs)`, unfused and fused."""
'''
_PLACE = '''

def fusion_report(chain, inputs: tuple, flops: float, peak_flops: float, bandwidth: float, fuse=fuse,
                  sync=sync_for(DEVICE)) -> dict[str, dict[str, float]]:
    """The v2 answer above, placed on the roofline and judged correctly (so only its own mistake remains)."""
    report = _fusion_v1(chain, inputs, bandwidth, fuse, sync)
    for entry in report.values():
        entry.update(intensity=flops / entry["bytes"], flops_per_s=flops / entry["measured_s"],
                     bound_s=BOUND)
    u, f = report["unfused"], report["fused"]
    promised = u["measured_s"] * f["bytes"] / u["bytes"]
    f["really_fused"] = bool(DECISION)
    return report
'''
_DECIDED = "u['measured_s'] - f['measured_s'] >= (u['measured_s'] - promised) / 2"


def _placed(answer: str, bound: str = "max(flops / peak_flops, entry['bytes'] / bandwidth)",
            decision: str = _DECIDED) -> str:
    """A v2 answer (`_E1` + body) wrapped into today's fusion_report; `bound` is its bound_s expression and
    `decision` its really_fused expression."""
    return answer + _PLACE.replace("BOUND", bound).replace("DECISION", decision)
# a correct byte counter with a switch for the planted mistakes, and a timing loop
_E1_PARTS = '''\
    from torch.utils._pytree import tree_leaves

    def nbytes(tree, size=None) -> int:
        return sum(t.numel() * (size or t.element_size()) for t in tree_leaves(tree) if isinstance(t, torch.Tensor))

    class CountBytes(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            if COUNT_VIEWS or not (func.is_view or func is torch.ops.aten._unsafe_view.default):
                written = tree_leaves(result)  # an out= buffer is returned: written, not read
                read = tree_leaves(args) + [k for k in tree_leaves(kwargs) if not any(k is w for w in written)]
                self.total += nbytes(read, SIZE) + nbytes(written, SIZE)
            return result

    with CountBytes() as counter:
        outputs = chain(*inputs)
    moved = {"unfused": counter.total, "fused": nbytes(inputs, SIZE) + nbytes(outputs, SIZE)}
'''
_E1_TIMED = '''\
    runs = {"unfused": chain, "fused": fuse(chain)}
    report = {}
    for name, fn in runs.items():
        median_s = benchmark(lambda: fn(*inputs), warmup=3, repeats=15, sync=sync).median_s
        report[name] = {"bytes": moved[name], "bound_s": moved[name] / bandwidth, "measured_s": median_s}
    return report
'''

_E2 = '''\
def diagnose(model, make_input, batch: int, peak_flops: float, bandwidth: float,
             sync=sync_for(DEVICE), clock=time.perf_counter) -> dict[str, dict]:
    """For each layer of `model` at `batch`: what limits it, what would help, and its seconds per sample at 4 x batch."""
'''
_COUNT_ALL = "nbytes((args, kwargs)) + nbytes(result)"
_TIME = "benchmark(lambda: layer(x), warmup=2, repeats=9, sync=sync, clock=clock).median_s"


def _diagnose(count: str = _COUNT_ALL, time_call: str = _TIME, fixed: str = "t2 < 1.5 * t1",
              overhead: str = "fixed and t1 > 3 * max(compute_s, memory_s)",
              batch_pays: str = "2 * counts[name, batch][1] - counts[name, 2 * batch][1] > counts[name, batch][1] / 2",
              predict: str = "max(t1 + 3 * (t2 - t1), roofline_4x) / (4 * batch)", counted_at: str = "batch") -> str:
    """A diagnose() with one rule changed."""
    return _E2 + f'''    from torch.utils.flop_counter import FlopCounterMode
    from torch.utils._pytree import tree_leaves

    def nbytes(tree) -> int:
        return sum(t.numel() * t.element_size() for t in tree_leaves(tree) if isinstance(t, torch.Tensor))

    class CountBytes(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {{}}
            result = func(*args, **kwargs)
            if not (func.is_view or func is torch.ops.aten._unsafe_view.default):
                self.total += {count}
            return result

    counts, times = {{}}, {{}}
    with torch.no_grad():
        for n in (batch, 2 * batch):
            x = make_input(n)
            for name, layer in model.named_children():
                with FlopCounterMode(display=False) as flops, CountBytes() as moved:
                    layer(x)
                counts[name, n] = (flops.get_total_flops(), moved.total)
                times[name, n] = {time_call}
                x = layer(x)
    report = {{}}
    for name, _ in model.named_children():
        (flops, nbytes_moved), (flops2, nbytes2) = counts[name, batch], counts[name, 2 * batch]
        roofline_4x = max((3 * flops2 - 2 * flops) / peak_flops, (3 * nbytes2 - 2 * nbytes_moved) / bandwidth)
        flops, nbytes_moved = counts[name, {counted_at}]
        compute_s, memory_s = flops / peak_flops, nbytes_moved / bandwidth
        t1, t2 = times[name, batch], times[name, 2 * batch]
        fixed = {fixed}
        if {overhead}:
            report[name] = {{"limit": "overhead", "remedy": "fewer calls"}}
        elif compute_s >= memory_s:
            report[name] = {{"limit": "compute", "remedy": "faster arithmetic"}}
        else:
            report[name] = {{"limit": "memory", "remedy": "bigger batch" if {batch_pays} else "fuse"}}
        report[name]["per_sample_s"] = {predict}
    return report
'''


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # the visible example's answer
        "constant": _E1_NEW + '''    return {"unfused": {"bytes": 590_848, "intensity": flops / 590_848, "flops_per_s": flops / 0.004,
                        "bound_s": 590_848 / bandwidth, "measured_s": 0.004},
            "fused": {"bytes": 197_632, "intensity": flops / 197_632, "flops_per_s": flops / 0.0015,
                      "bound_s": 197_632 / bandwidth, "measured_s": 0.0015, "really_fused": True}}
''',
        # the course's lesson-11 recorder: elements of new outputs and 'work', not bytes read and written
        "helper": _E1 + '''    from gpucourse.attention import OpRecorder

    with OpRecorder() as recorder:
        outputs = chain(*inputs)
    size = inputs[0].element_size()
    moved = {"unfused": 3 * size * sum(op.new_elements for op in recorder.ops),
             "fused": size * (sum(t.numel() for t in inputs) + recorder.ops[-1].new_elements)}
''' + _E1_TIMED,
        # 4 bytes per element, as in the visible float32 example
        "visible_only": _E1 + "    COUNT_VIEWS, SIZE = False, 4\n" + _E1_PARTS + _E1_TIMED,
        # views counted as if they copied their input
        "typical": _E1 + "    COUNT_VIEWS, SIZE = True, None\n" + _E1_PARTS + _E1_TIMED,
        # outputs that alias an input (in-place results) not counted as written
        "no_inplace_write": _E1 + '''    from torch.utils._pytree import tree_leaves

    def tensors(tree):
        return [t for t in tree_leaves(tree) if isinstance(t, torch.Tensor)]

    class CountBytes(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            if not func.is_view:
                ins = tensors((args, kwargs))
                seen = {t.data_ptr() for t in ins}
                self.total += sum(t.numel() * t.element_size() for t in ins)
                self.total += sum(t.numel() * t.element_size() for t in tensors(result) if t.data_ptr() not in seen)
            return result

    with CountBytes() as counter:
        outputs = chain(*inputs)
    moved = {"unfused": counter.total,
             "fused": sum(t.numel() * t.element_size() for t in tensors(inputs) + tensors(outputs))}
''' + _E1_TIMED,
        # the mean of all calls, the compiling first call included
        "mean_with_compile": _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS + '''    import time

    report = {}
    for name, fn in {"unfused": chain, "fused": fuse(chain)}.items():
        start = time.perf_counter()
        for _ in range(10):
            fn(*inputs)
        sync()
        report[name] = {"bytes": moved[name], "bound_s": moved[name] / bandwidth,
                        "measured_s": (time.perf_counter() - start) / 10}
    return report
''',
        # one call timed after one warm-up call
        "single_call": _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS + '''    import time

    report = {}
    for name, fn in {"unfused": chain, "fused": fuse(chain)}.items():
        fn(*inputs)
        sync()
        start = time.perf_counter()
        fn(*inputs)
        sync()
        report[name] = {"bytes": moved[name], "bound_s": moved[name] / bandwidth,
                        "measured_s": time.perf_counter() - start}
    return report
''',
        # the eager chain timed for both versions: fuse() never called
        "never_fused": _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS + '''    report = {}
    for name in ("unfused", "fused"):
        median_s = benchmark(lambda: chain(*inputs), warmup=3, repeats=15, sync=sync).median_s
        report[name] = {"bytes": moved[name], "bound_s": moved[name] / bandwidth, "measured_s": median_s}
    return report
''',
        # no sync: on a GPU (and on the grader's device) this times only the launches, below the chain's own bound
        "no_sync": _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS + '''    report = {}
    for name, fn in {"unfused": chain, "fused": fuse(chain)}.items():
        median_s = benchmark(lambda: fn(*inputs), warmup=3, repeats=15).median_s
        report[name] = {"bytes": moved[name], "bound_s": moved[name] / bandwidth, "measured_s": median_s}
    return report
''',
    },
    "ex2-solution": {
        # the first visible model's answer
        "constant": _E2 + """    return {"norm": {"limit": "overhead", "remedy": "fewer calls", "per_sample_s": 2.28e-5},
            "up": {"limit": "memory", "remedy": "fuse", "per_sample_s": 2.86e-4},
            "gelu": {"limit": "memory", "remedy": "fuse", "per_sample_s": 5.42e-4},
            "down": {"limit": "compute", "remedy": "faster arithmetic", "per_sample_s": 6.91e-4}}
""",
        # the package's roofline helper for the bound (off_limits blocks it)
        "helper": _diagnose(overhead="fixed and t1 > 3 * __import__('gpucourse').roofline.time_lower_bound("
                                     "flops, nbytes_moved, peak_flops, bandwidth)"),
        # the visible devices' roof, whatever roof it is given
        "visible_only": _diagnose(overhead="fixed and t1 > 3 * max(flops / 1e11, nbytes_moved / 2e9)"),
        # the lesson's typical mistake: overhead judged from the bound ratio alone, no batch test (a poor kernel,
        # far above its bound but growing with the batch, is called overhead)
        "typical": _diagnose(overhead="t1 > 3 * max(compute_s, memory_s)"),
        # the same at a fixed 10x
        "ratio_only_10x": _diagnose(overhead="t1 > 10 * max(compute_s, memory_s)"),
        # a fixed threshold on the time itself: anything under half a millisecond is overhead
        "absolute_threshold": _diagnose(overhead="t1 < 5e-4"),
        # only activations counted: the weights' bytes are left out, so a weight-heavy layer looks compute-bound
        "no_weights": _diagnose(count="nbytes([a for a in args if isinstance(a, torch.Tensor) and a.dim() > 1]"
                                      "[:1] if func.overloadpacket.__name__ in ('addmm', 'mm') else (args, kwargs)) + nbytes(result)"),
        # a bigger batch 'pays' whenever the time grows less than 2x
        "batch_pays_any_saving": _diagnose(batch_pays="t2 < 1.95 * t1"),
        # no sync: the device's calls return before their work is done
        "no_sync": _diagnose(time_call="benchmark(lambda: layer(x), warmup=2, repeats=9, clock=clock).median_s"),
        # the machine's clock instead of the device's
        "host_clock": _diagnose(time_call="benchmark(lambda: layer(x), warmup=2, repeats=9, sync=sync).median_s"),
        # one timed call, no warm-up: the slow first call lands in it
        "single_call": _diagnose(time_call="benchmark(lambda: layer(x), warmup=0, repeats=1, sync=sync, "
                                           "clock=clock).median_s"),
    },
}

# ---- review r2's wrong answers to Exercise 1 (each was caught)
_R_COUNT_TOP = _E1 + """    class CountBytes(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            if not func.is_view:
                self.total += sum(a.numel() * a.element_size() for a in args if isinstance(a, torch.Tensor))
                if isinstance(result, torch.Tensor):
                    self.total += result.numel() * result.element_size()
            return result

    with CountBytes() as counter:
        outputs = chain(*inputs)
    outs = outputs if isinstance(outputs, tuple) else (outputs,)
    moved = {"unfused": counter.total,
             "fused": sum(t.numel() * t.element_size() for t in list(inputs) + list(outs))}
""" + _E1_TIMED

_R_STORAGE = _E1 + """    from torch.utils._pytree import tree_leaves

    def nbytes(tree) -> int:
        return sum(t.untyped_storage().nbytes() for t in tree_leaves(tree) if isinstance(t, torch.Tensor))

    class CountBytes(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            if not func.is_view:
                self.total += nbytes((args, kwargs)) + nbytes(result)
            return result

    with CountBytes() as counter:
        outputs = chain(*inputs)
    moved = {"unfused": counter.total, "fused": nbytes(inputs) + nbytes(outputs)}
""" + _E1_TIMED

_R_SAME_SIZE = _E1 + """    from torch.utils._pytree import tree_leaves
    size = inputs[0].element_size()

    def nbytes(tree) -> int:
        return sum(t.numel() * size for t in tree_leaves(tree) if isinstance(t, torch.Tensor))

    class CountBytes(TorchDispatchMode):
        total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            if not func.is_view:
                self.total += nbytes((args, kwargs)) + nbytes(result)
            return result

    with CountBytes() as counter:
        outputs = chain(*inputs)
    moved = {"unfused": counter.total, "fused": nbytes(inputs) + nbytes(outputs)}
""" + _E1_TIMED

_R_LAST_OP = _E1 + """    from torch.utils._pytree import tree_leaves

    def nbytes(tree) -> int:
        return sum(t.numel() * t.element_size() for t in tree_leaves(tree) if isinstance(t, torch.Tensor))

    class CountBytes(TorchDispatchMode):
        total = 0
        last = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            result = func(*args, **kwargs)
            if not func.is_view:
                self.total += nbytes((args, kwargs)) + nbytes(result)
                self.last = nbytes(result)
            return result

    with CountBytes() as counter:
        outputs = chain(*inputs)
    moved = {"unfused": counter.total, "fused": nbytes(inputs) + counter.last}
""" + _E1_TIMED

_R_MEAN_WARM = _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS + """    import time

    report = {}
    for name, fn in {"unfused": chain, "fused": fuse(chain)}.items():
        for _ in range(3):
            fn(*inputs)
        sync()
        times = []
        for _ in range(15):
            start = time.perf_counter()
            fn(*inputs)
            sync()
            times.append(time.perf_counter() - start)
        report[name] = {"bytes": moved[name], "bound_s": moved[name] / bandwidth,
                        "measured_s": sum(times) / len(times)}
    return report
"""

_R_SYNC_BEFORE = _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS + """    import statistics, time

    report = {}
    for name, fn in {"unfused": chain, "fused": fuse(chain)}.items():
        for _ in range(3):
            fn(*inputs)
        times = []
        for _ in range(15):
            sync()
            start = time.perf_counter()
            fn(*inputs)
            times.append(time.perf_counter() - start)
        report[name] = {"bytes": moved[name], "bound_s": moved[name] / bandwidth,
                        "measured_s": statistics.median(times)}
    return report
"""

_R_BATCHED = _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS + """    import statistics, time

    report = {}
    for name, fn in {"unfused": chain, "fused": fuse(chain)}.items():
        fn(*inputs)
        sync()
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(4):
                fn(*inputs)
            sync()
            times.append((time.perf_counter() - start) / 4)
        report[name] = {"bytes": moved[name], "bound_s": moved[name] / bandwidth,
                        "measured_s": statistics.median(times)}
    return report
"""

_R_NO_WARMUP_MEDIAN = _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS + """    report = {}
    for name, fn in {"unfused": chain, "fused": fuse(chain)}.items():
        median_s = benchmark(lambda: fn(*inputs), warmup=0, repeats=3, sync=sync).median_s
        report[name] = {"bytes": moved[name], "bound_s": moved[name] / bandwidth, "measured_s": median_s}
    return report
"""

WRONG["ex1-solution"].update({
    "r2_top_level_args_tensor_result": _R_COUNT_TOP,
    "r2_storage_nbytes": _R_STORAGE,
    "r2_first_input_element_size": _R_SAME_SIZE,
    "r2_fused_last_op_output": _R_LAST_OP,
    "r2_mean_after_warmup": _R_MEAN_WARM,
    "r2_sync_before_not_after": _R_SYNC_BEFORE,
    "r2_batched_calls_median": _R_BATCHED,
    "r2_no_warmup_median_of_3": _R_NO_WARMUP_MEDIAN,
})

# ---- review r3's wrong answers that the stated rules now make wrong (each must be caught)
WRONG["ex1-solution"]["r3_kwargs_not_counted"] = (  # tensor keyword arguments (out=) left out
    _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS.replace("tree_leaves(args) + [k for k in tree_leaves(kwargs) if not any(k is w for w in written)]",
                                                                 "tree_leaves(args)")
    + _E1_TIMED)
WRONG["ex2-solution"].update({
    "r3_overhead_10x_with_batch_test": _diagnose(overhead="fixed and t1 > 10 * max(compute_s, memory_s)"),
    "r3_grows_less_than_1p2": _diagnose(fixed="t2 < 1.2 * t1"),
})

for _kind, _answer in list(WRONG["ex1-solution"].items()):
    if _kind != "constant":
        WRONG["ex1-solution"][_kind] = _placed(_answer)
_CORRECT_V1 = _E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS + _E1_TIMED
WRONG["ex1-solution"].update({
    # v3 (review r4, item 2): the placement itself
    "bound_memory_only": _placed(_CORRECT_V1, "entry['bytes'] / bandwidth"),  # as if every chain were memory-bound
    "bound_sum": _placed(_CORRECT_V1, "flops / peak_flops + entry['bytes'] / bandwidth"),
    "flops_per_s_of_the_roof": _CORRECT_V1 + _PLACE.replace("BOUND", "max(flops / peak_flops, entry['bytes'] / bandwidth)")
    .replace("DECISION", _DECIDED).replace('flops_per_s=flops / entry["measured_s"]', 'flops_per_s=min(peak_flops, bandwidth * flops / entry["bytes"])'),
    "intensity_bytes_over_flops": _CORRECT_V1 + _PLACE.replace("BOUND", "max(flops / peak_flops, entry['bytes'] / bandwidth)")
    .replace("DECISION", _DECIDED).replace('intensity=flops / entry["bytes"]', 'intensity=entry["bytes"] / flops'),
})
WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
# ---- review r4 (02c) wrong answers
_R4_E1_UNSAFE = (_E1 + "    COUNT_VIEWS, SIZE = False, None\n"
                 + _E1_PARTS.replace("COUNT_VIEWS or not (func.is_view or func is torch.ops.aten._unsafe_view.default)",
                                     "not func.is_view")
                 + _E1_TIMED)
_R4_E2_COUNTS_AT_2B = _diagnose(counted_at="2 * batch")
_R4_E2_COMPUTE_FIRST = _diagnose().replace(
    '''        if fixed and t1 > 3 * max(compute_s, memory_s):
            report[name] = {"limit": "overhead", "remedy": "fewer calls"}
        elif compute_s >= memory_s:
            report[name] = {"limit": "compute", "remedy": "faster arithmetic"}
''', '''        if compute_s >= memory_s:
            report[name] = {"limit": "compute", "remedy": "faster arithmetic"}
        elif fixed and t1 > 3 * max(compute_s, memory_s):
            report[name] = {"limit": "overhead", "remedy": "fewer calls"}
''')
assert _R4_E2_COMPUTE_FIRST != _diagnose() and _R4_E2_COUNTS_AT_2B != _diagnose() and "_unsafe_view" not in _R4_E1_UNSAFE.split("COUNT_VIEWS, SIZE")[1].split("runs =")[0]
WRONG["ex1-solution"].update({
    "r4_unsafe_view_counted": _placed(_R4_E1_UNSAFE),
})
WRONG["ex2-solution"].update({
    "r4_unsafe_view_counted": _diagnose().replace(
        "if not (func.is_view or func is torch.ops.aten._unsafe_view.default):", "if not func.is_view:"),
    "r4_roofline_time_sum": _diagnose(overhead="fixed and t1 > 3 * (compute_s + memory_s)"),
    "r4_counts_at_2x_batch": _R4_E2_COUNTS_AT_2B,
    "r4_compute_before_overhead": _R4_E2_COMPUTE_FIRST,
    # v3 (review r4, item 1): the prediction at 4 x batch
    "predict_no_roofline_floor": _diagnose(predict="(t1 + 3 * (t2 - t1)) / (4 * batch)"),  # misses the ridge crossing
    "predict_measured_at_2x": _diagnose(predict="t2 / (2 * batch)"),  # the per-sample time measured, not predicted
    "predict_roofline_only": _diagnose(predict="roofline_4x / (4 * batch)"),  # the fixed cost per call forgotten
    "predict_proportional": _diagnose(predict="t1 / batch"),  # as if the time grew in proportion to the batch
    # measured at 4 x batch instead of predicted (the grader's device has memory for 2 x batch)
    # (the first layer's call on 4 x batch samples is the one that runs out of memory)
    "predict_by_running_4x": _diagnose(predict="benchmark(lambda: dict(model.named_children())[name](make_input("
                                               "4 * batch)), warmup=2, repeats=9, sync=sync, clock=clock).median_s "
                                               "/ (4 * batch)"),
    "predict_fixed_cost_only": _diagnose(predict="max(t1, roofline_4x) / (4 * batch)"),  # nothing grows with the batch
    "r4_mean_not_median": _diagnose(time_call="benchmark(lambda: layer(x), warmup=2, repeats=9, sync=sync, clock=clock).mean_s"),
})
# ---- review r5 wrong answers (section 4's rule is now one rule: the remedy comes from the weight bytes)
WRONG["ex2-solution"].update({
    # section 4's old wording: a fixed time that is not overhead read as weights (memory, bigger batch)
    "r5_text_literal_rule": _diagnose().replace(
        """        elif compute_s >= memory_s:
            report[name] = {"limit": "compute", "remedy": "faster arithmetic"}
""", """        elif fixed:
            report[name] = {"limit": "memory", "remedy": "bigger batch"}
        elif compute_s >= memory_s:
            report[name] = {"limit": "compute", "remedy": "faster arithmetic"}
""", 1),
    # the old model answer: the remedy read from the timing (a launch as long as the traffic looks like weights)
    "r5_batch_from_timing": _diagnose(batch_pays="fixed"),
    "r5_weights_any_share": _diagnose(batch_pays="2 * counts[name, batch][1] - counts[name, 2 * batch][1] > 0"),
})
assert "elif fixed:" in WRONG["ex2-solution"]["r5_text_literal_rule"]

# ---- review r5, item "make Ex1 a decision": report["fused"]["really_fused"] judged from the measurement
WRONG["ex1-solution"].update({
    "r6_always_fused": _placed(_CORRECT_V1, decision="True"),
    "r6_faster_means_fused": _placed(_CORRECT_V1, decision="f['measured_s'] < u['measured_s']"),  # any noise passes
    "r6_fused_from_bytes": _placed(_CORRECT_V1, decision="f['bytes'] < u['bytes']"),  # no measurement
    "r6_ten_percent_faster": _placed(_CORRECT_V1, decision="f['measured_s'] < 0.9 * u['measured_s']"),
    "r6_within_20pc_of_promise": _placed(_CORRECT_V1, decision="f['measured_s'] <= 1.2 * promised"),  # too strict
    "r6_fused_near_its_bound": _placed(_CORRECT_V1, decision="f['measured_s'] < 3 * f['bound_s']"),  # the roof, not the eager run
    # minor 4's old convention: an out= buffer counted as read as well as written
    "r6_out_buffer_read": _placed(_E1 + "    COUNT_VIEWS, SIZE = False, None\n" + _E1_PARTS.replace(
        "tree_leaves(args) + [k for k in tree_leaves(kwargs) if not any(k is w for w in written)]",
        "tree_leaves((args, kwargs))") + _E1_TIMED),
})

# ---- review r6's wrong answers (each was caught; kept so that it stays caught)
_R6_E1_FUSED_BY_MODE = (_E1 + "    COUNT_VIEWS, SIZE = False, None\n"
                        + _E1_PARTS.replace('''    moved = {"unfused": counter.total, "fused": nbytes(inputs, SIZE) + nbytes(outputs, SIZE)}
''', '''    fused_fn = fuse(chain)
    with CountBytes() as fused_counter:  # the fused bytes counted by watching the fused call
        fused_fn(*inputs)
    moved = {"unfused": counter.total, "fused": fused_counter.total}
''') + _E1_TIMED.replace('"fused": fuse(chain)', '"fused": fused_fn'))
assert "fused_counter" in _R6_E1_FUSED_BY_MODE and "fuse(chain)}" not in _R6_E1_FUSED_BY_MODE
WRONG["ex1-solution"].update({
    # "half the saving" read as half the speed-up: fused if u/f >= 0.5 x the byte ratio
    "r7_half_the_speedup": _placed(_CORRECT_V1, decision="u['measured_s'] / f['measured_s'] >= "
                                                         "0.5 * u['bytes'] / f['bytes']"),
    "r7_fused_counted_by_mode": _placed(_R6_E1_FUSED_BY_MODE),
})
WRONG["ex2-solution"].update({
    # the roofline floor at 4 x batch from 4 x the counts at batch (the weights counted 4 times)
    "r7_floor_counts_times_4": _diagnose(predict="max(t1 + 3 * (t2 - t1), 4 * flops / peak_flops, "
                                                 "4 * nbytes_moved / bandwidth) / (4 * batch)"),
    "r7_marginal_only": _diagnose(predict="(t2 - t1) / batch"),  # the fixed cost per call forgotten
    "r7_batch_if_has_params": _diagnose(  # "bigger batch" for any layer with weights
        batch_pays="any(True for _ in dict(model.named_children())[name].parameters())"),
})
# ---- review r7's two Ex2 answers that passed (a hidden case with t2/t1 of 1.25-1.37 and a 57% weight share now
# catches them)
WRONG["ex2-solution"].update({
    # a power law through the two points (log-log extrapolation) in place of fixed cost + cost per sample
    "r8_power_law_extrapolation": _diagnose(predict="max(t2 * t2 / t1, roofline_4x) / (4 * batch)"),
    # the weight share judged at 2 x batch: weights > bytes(2b) / 2
    "r8_weight_share_at_2b": _diagnose(
        batch_pays="2 * counts[name, batch][1] - counts[name, 2 * batch][1] > counts[name, 2 * batch][1] / 2"),
})
# ---- review r8's Ex1 answers: a fixed threshold on the speed-up, the bytes ignored (the 4th hidden case, fused at
# 0.72 of the unfused time, and the 5th, not fused at 0.71, leave no threshold that passes both)
WRONG["ex1-solution"].update({
    "r8_fixed_threshold_0p7": _placed(_CORRECT_V1, decision="f['measured_s'] < 0.7 * u['measured_s']"),
    "r8_fixed_threshold_0p8": _placed(_CORRECT_V1, decision="f['measured_s'] < 0.8 * u['measured_s']"),
})
