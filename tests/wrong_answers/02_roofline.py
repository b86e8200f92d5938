"""Plausible wrong answers to lesson 02's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed value: the visible test's), 'helper' (the course's own helper instead of the learner's
code), 'visible_only' (right on the visible test's inputs only), 'typical' (the lesson's usual mistake), and more.
"""

from wrong_answers.tampering import with_tampering

_E1 = '''\
def fusion_report(chain, inputs: tuple, bandwidth: float, fuse=fuse, sync=sync_for(DEVICE)) -> dict[str, dict[str, float]]:
    """Bytes moved, memory lower bound and measured median seconds of `chain(*inputs)`, unfused and fused."""
'''
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
            if COUNT_VIEWS or not func.is_view:
                self.total += nbytes((args, kwargs), SIZE) + nbytes(result, SIZE)
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
def diagnose(profile: dict[str, tuple[float, float, float]], peak_flops: float, bandwidth: float) -> dict[str, str]:
    """For each layer: 'compute', 'memory', 'overhead' or 'cache', what limits it (section 4)."""
'''


def _diagnose(impossible: str = "measured_s < compute_s", overhead: str = "measured_s > 10 * max(compute_s, memory_s)",
              compute: str = ">=", cache: str = "<", peak: str = "peak_flops", bw: str = "bandwidth") -> str:
    """A diagnose() with one rule changed."""
    return _E2 + f'''    peak_flops, bandwidth = {peak}, {bw}
    limits = {{}}
    for name, (flops, nbytes, measured_s) in profile.items():
        compute_s, memory_s = flops / peak_flops, nbytes / bandwidth
        if {impossible}:
            raise ValueError(name)
        if {overhead}:
            limits[name] = "overhead"
        elif compute_s {compute} memory_s:
            limits[name] = "compute"
        elif measured_s {cache} memory_s:
            limits[name] = "cache"
        else:
            limits[name] = "memory"
    return limits
'''


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # the visible example's answer
        "constant": _E1 + '''    return {"unfused": {"bytes": 590_848, "bound_s": 590_848 / bandwidth, "measured_s": 0.004},
            "fused": {"bytes": 197_632, "bound_s": 197_632 / bandwidth, "measured_s": 0.0015}}
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
        # the visible answer
        "constant": _E2 + '''    return {"attention matmul": "compute", "gelu": "memory", "small layer norm": "cache",
            "bias add, batch 1": "overhead"}
''',
        # the package's roofline helpers (off_limits blocks them)
        "helper": _E2 + '''    from gpucourse import roofline

    limits = {}
    for name, (flops, nbytes, measured_s) in profile.items():
        if measured_s < flops / peak_flops:
            raise ValueError(name)
        low = roofline.time_lower_bound(flops, nbytes, peak_flops, bandwidth)
        if measured_s > 10 * low:
            limits[name] = "overhead"
        elif roofline.bound(flops / nbytes, peak_flops, bandwidth) == "compute":
            limits[name] = "compute"
        else:
            limits[name] = "cache" if measured_s < nbytes / bandwidth else "memory"
    return limits
''',
        # the visible roof, whatever the device
        "visible_only": _diagnose(peak="2.0**46", bw="2.0**41"),
        # v2's rule: no overhead regime, a launch-bound layer is called compute- or memory-bound
        "typical": _diagnose(overhead="False"),
        # overhead judged against the FLOP time only: a memory-bound layer looks overhead-bound
        "overhead_vs_flops": _diagnose(overhead="measured_s > 10 * compute_s"),
        # overhead judged against the byte time only: a compute-bound layer looks overhead-bound
        "overhead_vs_bytes": _diagnose(overhead="measured_s > 10 * memory_s"),
        # the ridge point counted as memory-bound
        "ridge_memory": _diagnose(compute=">"),
        # a layer exactly at its DRAM bound called cached
        "cache_at_bound": _diagnose(cache="<="),
        # v2's rule: anything faster than its DRAM bound raises
        "raise_on_cache": _diagnose(impossible="measured_s < max(compute_s, memory_s)"),
        # an impossible timing caught only on compute-bound layers
        "raise_only_compute": _diagnose(impossible="compute_s >= memory_s and measured_s < compute_s"),
        # no check for an impossible timing
        "no_raise": _diagnose(impossible="False"),
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
