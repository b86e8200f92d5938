"""GPU-only tests: the self-test, device choice, synchronised timing and measured rates on a real CUDA GPU.

Skipped (not failed) without one; on Colab or a GPU machine run `pytest -m gpu tests/test_gpu.py`.
"""

from __future__ import annotations

import importlib.util

import pytest

torch = pytest.importorskip("torch")

from gpucourse import hardware  # noqa: E402
from gpucourse.diagnostics import selftest  # noqa: E402
from gpucourse.timing import benchmark, sync_for  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def _spec_or_none():
    """Datasheet figures of GPU 0, or None where the course's table does not hold it."""
    try:
        return hardware.gpu_spec(torch.cuda.get_device_name(0))
    except ValueError:
        return None


def _spec_or_skip():
    """Datasheet figures of GPU 0, or skip where the course's table does not hold it."""
    spec = _spec_or_none()
    if spec is None:
        pytest.skip(f"{torch.cuda.get_device_name(0)} is not in GPU_SPECS: no datasheet bound")
    return spec


def test_every_selftest_step_passes_on_a_gpu():
    results = {r.name: r for r in selftest()}
    nvml_installed = importlib.util.find_spec("pynvml") is not None
    for name, result in results.items():
        if name == "NVML metrics" and not nvml_installed:
            assert result.status == "SKIP", result
        else:
            assert result.status == "PASS", result


def test_pick_device_is_the_first_cuda_gpu():
    device = hardware.pick_device()
    assert device.type == "cuda" and device.index == 0
    assert hardware.pick_device("cuda") == device


def test_environment_report_names_the_gpu():
    report = hardware.environment_report()
    assert report.device == "cuda:0" and report.gpus
    assert report.gpus[0].name == torch.cuda.get_device_name(0)
    assert f"GPU: {report.gpus[0].name}" in report.one_line()
    assert report.cuda_version


def _fastest_float32_flops(spec) -> float:
    """The fastest a float32 matmul can go on this chip: the TF32 Tensor Core peak where it has one."""
    return (spec.tf32_tensor_tflops or spec.fp32_tflops) * 1e12


def test_benchmark_with_sync_times_the_kernel_and_without_only_the_launch():
    a = torch.randn(4096, 4096, device="cuda")
    synced = benchmark(lambda: a @ a, warmup=2, repeats=5, sync=sync_for("cuda")).median_s
    torch.cuda.synchronize()
    unsynced = benchmark(lambda: a @ a, warmup=0, repeats=3).median_s
    torch.cuda.synchronize()
    assert synced > unsynced
    spec = _spec_or_none()
    if spec is not None:  # a synchronised time covers the kernel, so it cannot beat the datasheet
        assert synced >= 2 * 4096**3 / _fastest_float32_flops(spec)


def test_sync_for_an_indexed_gpu_times_the_whole_kernel():
    """With sync_for('cuda:0') each timed call covers the kernel: no faster than the datasheet allows."""
    spec = _spec_or_skip()
    a = torch.randn(2048, 2048, device="cuda:0")
    times = benchmark(lambda: a @ a, warmup=1, repeats=3, sync=sync_for("cuda:0")).times_s
    assert min(times) >= 2 * 2048**3 / _fastest_float32_flops(spec)


def test_measured_float32_matmul_rate_stays_below_the_datasheet_peak():
    spec = _spec_or_skip()
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        rate = hardware.measure_matmul_rate(4096, "float32", "torch", "cuda", repeats=5)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    assert 0.05 * spec.peak_flops("float32") < rate <= 1.1 * spec.peak_flops("float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_measured_tensor_core_rate_stays_below_the_datasheet_peak(dtype):
    spec = _spec_or_skip()
    try:
        peak = spec.peak_flops(dtype)
    except ValueError:
        pytest.skip(f"the {spec.name} has no {dtype} Tensor Cores")
    rate = hardware.measure_matmul_rate(4096, dtype, "torch", "cuda", repeats=5)
    assert 0 < rate <= 1.1 * peak


def test_measured_copy_bandwidth_stays_below_the_datasheet_figure():
    spec = _spec_or_skip()
    bandwidth = hardware.measure_memory_bandwidth(256, device="cuda", repeats=5)
    assert 0.1 * spec.bandwidth < bandwidth <= 1.1 * spec.bandwidth


def test_sync_for_rejects_a_gpu_index_beyond_the_visible_ones():
    with pytest.raises(ValueError, match="^device="):
        sync_for(f"cuda:{torch.cuda.device_count()}")


# --------------------------------------------------------------------------- timing, placement, precision, recorder

def test_benchmark_on_a_cuda_device_uses_cuda_events_and_cannot_beat_the_datasheet():
    a = torch.randn(4096, 4096, device="cuda")
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        result = benchmark(lambda: a @ a, warmup=2, repeats=5, device="cuda")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    assert result.clock == "cuda events"
    spec = _spec_or_none()
    if spec is not None:
        assert result.min_s >= 2 * 4096**3 / (1.1 * spec.peak_flops("float32"))


def test_pinned_host_memory_copies_to_the_gpu_at_least_as_fast_as_pageable():
    from gpucourse.placement import measure_transfer_bandwidth

    pageable = measure_transfer_bandwidth(256 * 2**20, pinned=False, device="cuda", repeats=5)
    pinned = measure_transfer_bandwidth(256 * 2**20, pinned=True, device="cuda", repeats=5)
    assert pinned.host_to_device and pageable.host_to_device
    assert pinned.bandwidth >= 0.9 * pageable.bandwidth, (str(pinned), str(pageable))


def test_mixed_precision_uses_bfloat16_only_where_the_gpu_runs_it_natively():
    from gpucourse import capstone

    dtype, scaled = capstone.autocast_dtype("cuda", "mixed")
    if hardware.has_native_bf16():
        assert (dtype, scaled) == (torch.bfloat16, False)
    else:  # a T4: float16 with a GradScaler, never emulated bfloat16
        assert (dtype, scaled) == (torch.float16, True)


def test_the_recorder_measures_every_topic_on_the_gpu():
    from gpucourse import record, reference

    data = record.record(quick=True, device="cuda")
    assert data["errors"] == {} and data["skipped"] == {}, (data["errors"], data["skipped"])
    assert set(data["figures"]) == set(reference.TOPICS)
    assert data["device"]["kind"] == "cuda" and data["device"]["name"] == torch.cuda.get_device_name(0)
    assert data["software"]["cuda"] == torch.version.cuda
    dtypes = {row["dtype"] for row in data["figures"]["matmul"]["rows"]}
    assert ("tf32" in dtypes) == hardware.has_tf32()
    assert ("bfloat16" in dtypes) == hardware.has_native_bf16()
    memories = [row["memory"] for row in data["figures"]["transfer"]["rows"]]
    assert memories.count("pinned") == memories.count("pageable") > 0
    assert [row["benchmark"] for row in data["figures"]["cudnn_benchmark"]["rows"]] == [False, True]
    assert len({row["layer"] for row in data["figures"]["cudnn_benchmark"]["rows"]}) == 2  # a fresh shape each
    steps = [row["step"] for row in data["figures"]["startup"]["rows"]]
    assert "first CUDA call (context creation)" in steps
    assert all(row["speedup"] > 0 for row in data["figures"]["speedup"]["rows"])
