"""Tests of gpucourse.compilers: the backend choice and its fallback, the recording backend, graph breaks, recompiles."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from gpucourse import compilers


def _failing_compile(fn, backend):
    """A torch.compile stand-in for a machine without a C++ compiler."""
    raise RuntimeError("InvalidCxxCompiler: No working C++ compiler found\nmore details")


def test_choose_backend_falls_back_to_aot_eager_with_the_reason():
    backend, why = compilers.choose_backend(_failing_compile)
    assert backend == "aot_eager"
    assert why == "RuntimeError: InvalidCxxCompiler: No working C++ compiler found"


def test_choose_backend_refuses_a_wrong_result():
    backend, why = compilers.choose_backend(lambda fn, backend: (lambda x: x))
    assert backend == "aot_eager" and "wrong result" in why


def test_choose_backend_accepts_a_working_compiler():
    assert compilers.choose_backend(lambda fn, backend: fn) == ("inductor", None)


def test_choose_backend_rejects_a_non_callable():
    with pytest.raises(TypeError, match="compile_fn"):
        compilers.choose_backend("inductor")


def test_recorder_counts_graphs_ops_and_calls():
    torch._dynamo.reset()
    recorder = compilers.GraphRecorder()
    compiled = torch.compile(lambda x: F.gelu(x) * 2, backend=recorder)
    for _ in range(3):
        out = compiled(torch.ones(4))
    assert torch.allclose(out, F.gelu(torch.ones(4)) * 2)
    assert recorder.graph_count == 1 and recorder.calls == 3
    assert "gelu" in recorder.graphs[0] and "mul" in recorder.graphs[0]


def test_count_graphs_sees_static_automatic_and_marked_shapes():
    inputs = [torch.randn(n, 6) for n in (2, 3, 4, 5)]

    def fn(x):
        return torch.tanh(x).sum(-1)

    assert compilers.count_graphs(fn, inputs, dynamic=False) == 4
    assert compilers.count_graphs(fn, inputs) == 2
    assert compilers.count_graphs(fn, inputs, dynamic=True) == 1
    assert compilers.count_graphs(fn, [torch.randn(n, 6) for n in (2, 3, 4)], mark_dynamic=(0,)) == 1


def test_count_graphs_stops_at_the_recompile_limit_quietly(capfd):
    inputs = [torch.randn(n) for n in range(2, compilers.recompile_limit() + 5)]
    assert compilers.count_graphs(torch.sin, inputs, dynamic=False) == compilers.recompile_limit()
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("inputs", [[], [1, 2], "x"])
def test_count_graphs_rejects_bad_inputs(inputs):
    with pytest.raises(TypeError, match="inputs"):
        compilers.count_graphs(torch.sin, inputs)


def test_break_report_of_the_noisy_mlp_and_its_fix(capfd):
    torch.manual_seed(0)
    model = compilers.NoisyMLP(dim=8, clip=1.0, faults=("item", "branch", "mask"))
    x = torch.randn(4, 8) * 3
    with torch.no_grad():
        broken = compilers.break_report(model, x)
        fixed = compilers.break_report(compilers.steady_forward, model, x, torch.tensor(0))
        for inputs in (x, x * 1e-3):
            assert torch.allclose(compilers.steady_forward(model, inputs, torch.tensor(0)), model(inputs), atol=1e-6)
    assert (broken.graphs, broken.breaks) == (4, 3) and "item" in broken.reasons[0]
    assert (fixed.graphs, fixed.breaks) == (1, 0) and fixed.ops_per_graph[0].count("linear") == 2
    assert capfd.readouterr().err == ""


def test_run_steady_compiles_once_over_steps_and_batch_sizes(capsys):
    torch.manual_seed(1)
    model = compilers.NoisyMLP(dim=6, warmup=3)
    batches = [torch.randn(5, 6), torch.randn(5, 6), torch.randn(3, 6), torch.randn(1, 6)]   # a last batch of 1 too
    torch._dynamo.reset()
    recorder = compilers.GraphRecorder()
    with torch.no_grad():
        outputs = compilers.run_steady(model, batches, recorder)
        expected = [model(x, step=step) for step, x in enumerate(batches)]
    assert recorder.graph_count == 1 and recorder.calls == 4
    assert all(torch.allclose(o, e, atol=1e-5) for o, e in zip(outputs, expected))
    assert capsys.readouterr().out.count("mean activation") == 4   # the eager model's log line, not the compiled one's


def test_kernel_traffic_reads_the_recorded_chains():
    readings = {name: compilers.kernel_traffic(compilers.recorded_code(name)["code"])
                for name in compilers.recorded_code()["chains"]}
    assert readings["tanh_chain"] == [{"kernel": "cpp_fused_add_mul_tanh_0", "read": 2000, "written": 2000}]
    assert [(k["read"], k["written"]) for k in readings["around_a_matmul"]] == [(252, 252), (180, 180)]
    assert readings["softmax_rows"][0]["written"] == 2 * 37 * 4 + 37 * 53 * 4
    assert readings["row_sums"] == [{"kernel": "cpp_fused_mul_sum_0", "read": 45 * 77 * 2, "written": 45 * 2}]
    assert len(readings["around_a_sort"]) == 2 and len(readings["return_a_view"]) == 1


def test_kernel_traffic_reads_views_and_size_arguments():
    """A kernel with a size argument (dynamic shapes) and a view passed to it directly or through a name."""
    code = """
cpp_fused_k_0 = async_compile.cpp_pybinding(['const double*', 'int64_t*', 'const int64_t'], r'''
extern "C"  void  kernel(const double* in_ptr0,
                       int64_t* out_ptr0,
                       const int64_t ks0)
{
}
''')
def call(self, args):
        arg0_1, = args
        assert_size_stride(arg0_1, (4, 6), (6, 1), 'input')
        buf0 = empty_strided_cpu((24, ), (1, ), torch.int64)
        buf1 = reinterpret_tensor(buf0, (2, 3), (3, 1), 0)
        cpp_fused_k_0(reinterpret_tensor(arg0_1, (3, 2), (2, 1), 0), buf1, 6)
        return (buf1, )
"""
    assert compilers.kernel_traffic(code) == [{"kernel": "cpp_fused_k_0", "read": 48, "written": 48}]


def test_recorded_code_is_labelled_and_names_its_chains():
    record = compilers.recorded_code()
    assert record["torch"] and record["date"] and record["machine"]
    entry = compilers.recorded_code("gated")
    assert "def gated" in entry["source"] and entry["inputs"][1]["shape"] == [53] and "def call(" in entry["code"]
    with pytest.raises(KeyError, match="recorded"):
        compilers.recorded_code("nope")


def test_tiny_block_keeps_its_shape_and_checks_its_sizes():
    block = compilers.TinyBlock(dim=16, heads=2)
    assert block(torch.randn(2, 5, 16)).shape == (2, 5, 16)
    with pytest.raises(ValueError, match="heads"):
        compilers.TinyBlock(dim=10, heads=4)
    with pytest.raises(TypeError, match="dim"):
        compilers.TinyBlock(dim=1.5)


def test_hand_written_layers_match_torch():
    x = torch.randn(3, 8)
    assert torch.allclose(compilers.gelu_tanh(x), F.gelu(x, approximate="tanh"), atol=1e-6)
    assert torch.allclose(compilers.rms_norm(x, torch.ones(8)), F.rms_norm(x, (8,), eps=1e-6), atol=1e-6)


def test_noisy_mlp_validates_its_arguments():
    with pytest.raises(ValueError, match="clip"):
        compilers.NoisyMLP(clip=0.0)
    with pytest.raises(TypeError, match="dim"):
        compilers.NoisyMLP(dim="16")
    with pytest.raises(ValueError, match="unknown faults"):
        compilers.NoisyMLP(faults=("item", "numpy"))


def test_time_compile_returns_first_and_steady_seconds():
    first, steady = compilers.time_compile(lambda: torch.ones(10).sum(), calls=3)
    assert first >= 0 and steady > 0
    with pytest.raises(TypeError, match="fn"):
        compilers.time_compile(3)


def test_op_name_reads_functions_methods_and_modules():
    assert compilers.op_name(torch.sin) == "sin"
    assert compilers.op_name("relu") == "relu"
    assert compilers.op_name("layers.0.fc1") == "fc1"


def test_quiet_compilation_drops_only_the_two_known_messages(capsys) -> None:
    """On Colab's CPU runtime a first torch.compile logs "No CUDA runtime is found" and, on Python 3.13.0, a guards
    warning; both are dropped inside quiet_compilation, while any other log line or warning still reaches stderr."""
    import logging
    import warnings

    logger = logging.getLogger("torch.utils.cpp_extension")
    handler = logging.StreamHandler()  # stderr, as torch's own handler
    logger.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with compilers.quiet_compilation():
                logger.warning("No CUDA runtime is found, using CUDA_HOME='/usr/local/cuda'")
                warnings.warn("Guards may run slower on Python 3.13.0. Consider upgrading", RuntimeWarning)
                logger.warning("something else")
                warnings.warn("another warning", RuntimeWarning)
            logger.warning("No CUDA runtime is found, outside")
    finally:
        logger.removeHandler(handler)
    err = capsys.readouterr().err
    assert "something else" in err and "outside" in err and "using CUDA_HOME" not in err
    assert [str(w.message) for w in caught] == ["another warning"]


def test_quiet_drops_the_tf32_notice_and_dynamo_warnings_only(capfd):
    import logging
    import warnings

    with compilers.quiet():
        warnings.warn(compilers.TF32_NOTICE + ". Consider setting ...", UserWarning)
        logging.getLogger("torch._dynamo.variables.tensor").warning("Graph break from `Tensor.item()`")
    assert capfd.readouterr().err == ""
    with pytest.warns(UserWarning, match="something else"):
        with compilers.quiet():
            warnings.warn("something else", UserWarning)


def test_compare_writings_reads_breaks_library_calls_and_fused_pairs():
    """Exercise 3's answer on the recorded pairs: graph breaks count every module, the same code is "fused", fewer
    kernels can move more bytes, equal bytes are "same" whatever the kernel counts."""
    def compare(a, b):
        return compilers.compare_writings(compilers.recorded_code(a), compilers.recorded_code(b))

    assert len(compilers.recorded_code("clip_by_item")["codes"]) == 2
    assert compare("clip_by_item", "clip_by_clamp") == {"bytes": [252004, 168004], "kernels": [2, 1],
                                                        "fewer_bytes": "b", "why": "graph break"}
    assert compare("gelu_by_hand", "gelu_library") == {"bytes": [19712, 19712], "kernels": [1, 1],
                                                       "fewer_bytes": "same", "why": "fused"}
    assert compare("scale_x_then_mm", "scale_w_then_mm") == {"bytes": [187200, 23680], "kernels": [2, 2],
                                                             "fewer_bytes": "b", "why": "extern call"}
    assert compare("mm_then_normalise", "normalise_then_mm")["fewer_bytes"] == "a"
    # the graph-broken writing launches more kernels but moves fewer bytes: torch.where reads both sides
    assert compare("pick_by_if", "pick_by_where") == {"bytes": [196677, 294980], "kernels": [2, 1],
                                                      "fewer_bytes": "a", "why": "graph break"}
    assert compare("scale_and_sine_logged", "scale_and_sine") == {"bytes": [20352, 20352], "kernels": [2, 1],
                                                                  "fewer_bytes": "same", "why": "graph break"}
    assert compare("scale_if_long", "scale_plain")["why"] == "fused"   # an if on a static shape breaks nothing
    # a fresh in_out_ptr (layer norm's statistics) holds nothing to read: written once, so the two writings tie
    assert compare("layer_norm_by_hand", "layer_norm_library") == {"bytes": [170400, 170400], "kernels": [1, 1],
                                                                   "fewer_bytes": "same", "why": "fused"}
    # one graph each, no library call, an extra transposed copy: "kernels differ", not "extern call"
    assert compare("columns_normalised", "columns_normalised_by_rows") == {
        "bytes": [168280, 252280], "kernels": [1, 1], "fewer_bytes": "a", "why": "kernels differ"}
    # a buffer written by one launch and read by the next counts for both; views at their own size
    assert compare("sort_then_reuse", "sort_then_scale_reuse") == {"bytes": [6660, 3996], "kernels": [2, 1],
                                                                   "fewer_bytes": "b", "why": "extern call"}
    assert compare("concat", "scale_and_sine")["bytes"] == [20352, 20352]
    # the same code around one library call is "fused"; a break is a break even with equal kernel counts
    assert compare("mm_gelu_by_hand", "mm_gelu_library") == {"bytes": [20480, 20480], "kernels": [1, 1],
                                                             "fewer_bytes": "same", "why": "fused"}
    assert compare("sort_then_scale", "sort_logged_then_scale") == {"bytes": [2664, 2664], "kernels": [1, 1],
                                                                    "fewer_bytes": "same", "why": "graph break"}
    # one generated kernel launched twice counts twice
    assert compare("sine_around_two_mm", "sine_after_two_mm") == {"bytes": [98304, 32768], "kernels": [3, 1],
                                                                  "fewer_bytes": "b", "why": "extern call"}


def test_kernel_traffic_counts_a_fresh_in_out_buffer_once():
    """An in_out_ptr buffer straight from empty_strided_cpu (or a reuse of it) is only written; once a library call
    has filled it, it is read and written."""
    library = compilers.kernel_traffic(compilers.recorded_code("layer_norm_library")["code"])
    assert library == [{"kernel": "cpp_fused_native_layer_norm_0", "read": 84000, "written": 1200 + 1200 + 84000}]
    filled = compilers.kernel_traffic(compilers.recorded_code("mm_then_scale")["code"])
    assert filled == [{"kernel": "cpp_fused_add_mul_0", "read": 9600, "written": 9600}]
