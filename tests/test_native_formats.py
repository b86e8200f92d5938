"""gpucourse.native_formats: the low-precision gate decides from a probe (and explains with the flags)."""

from __future__ import annotations

import pytest

from gpucourse import native_formats


def test_a_fast_probe_with_flags_is_native():
    answer = native_formats.support("bfloat16", "cpu", probe=lambda dtype, device: 2.5, flags={"avx512_bf16", "avx2"})
    assert answer.native and answer.flags == ("avx512_bf16",) and answer.probe_ratio == 2.5
    assert answer.reason == "this CPU computes bfloat16 natively: a small matmul ran at 2.50x float32's rate"


def test_a_slow_probe_is_emulated_even_when_the_flags_claim_units():
    answer = native_formats.support("bfloat16", "cpu", probe=lambda dtype, device: 0.05, flags={"amx_bf16"})
    assert not answer.native and answer.flags == ("amx_bf16",)
    assert answer.reason.startswith("this CPU emulates bfloat16: a small matmul ran at 0.05x float32's rate")
    assert "reports amx_bf16, but the math library does not use them" in answer.reason


def test_a_fast_probe_without_flags_is_a_fast_conversion_not_units():
    answer = native_formats.support("bfloat16", "cpu", probe=lambda dtype, device: 0.45, flags={"avx512f"})
    assert answer.native and answer.flags == ()
    assert "reports no bfloat16 units but its math library converts bfloat16 to float32 on the fly" in answer.reason


def test_float16_flags_are_its_own():
    answer = native_formats.support("float16", "cpu", probe=lambda dtype, device: 0.03, flags={"avx512_bf16"})
    assert not answer.native and answer.flags == () and "emulates float16" in answer.reason


@pytest.mark.parametrize("dtype, capability, native", [("bfloat16", (7, 5), False), ("bfloat16", (8, 0), True),
                                                       ("float16", (7, 5), True), ("float16", (6, 1), False),
                                                       ("bfloat16", (9, 0), True)])
def test_a_cuda_gpu_answers_from_its_compute_capability(dtype, capability, native):
    answer = native_formats.support(dtype, "cuda:0", capability=capability)
    assert answer.native is native and answer.probe_ratio is None
    assert f"compute capability {capability[0]}.{capability[1]}" in answer.reason
    assert ("emulates" in answer.reason) is not native


def test_the_real_probe_is_quick_cached_and_decides_each_format():
    import time

    native_formats._CACHE.clear()
    start = time.perf_counter()
    first = [native_formats.support(dtype) for dtype in native_formats.FORMATS]
    assert time.perf_counter() - start < 5
    assert all(answer.probe_ratio > 0 for answer in first)
    assert [native_formats.support(dtype) for dtype in native_formats.FORMATS] == first  # cached: the same answers
    assert all(answer is native_formats._CACHE[(answer.dtype, "cpu")] for answer in first)


def test_the_probe_restores_the_thread_count():
    import torch

    before = torch.get_num_threads()
    native_formats.probe_ratio("bfloat16")
    assert torch.get_num_threads() == before


@pytest.mark.parametrize("call, error, message", [
    (lambda: native_formats.support("float8"), ValueError, r"^dtype must be one of \['bfloat16', 'float16'\]"),
    (lambda: native_formats.support("bfloat16", "tpu"), ValueError, r"^device must be one of"),
    (lambda: native_formats.support("bfloat16", probe=3), TypeError, r"^probe must be callable"),
])
def test_bad_input_is_refused_naming_the_argument(call, error, message):
    with pytest.raises(error, match=message):
        call()


def test_asking_for_a_cuda_gpu_that_is_not_there_says_so():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA GPU is visible here")
    with pytest.raises(ValueError, match=r"^device='cuda': no CUDA GPU is visible here"):
        native_formats.support("bfloat16", "cuda")
