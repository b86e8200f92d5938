"""Number formats, mixed precision and training memory under one name (lessons 12_mixed_precision, 13_bigger_models).

The code lives in three modules, one job each: ``formats`` (bits, range, precision), ``mixed_precision`` (casts,
autocast, loss scales) and ``memory`` (training memory). This module re-exports their names so that
``from gpucourse import precision`` keeps working.
"""

from __future__ import annotations

from gpucourse.formats import (FORMATS, FP8_FORMATS, LOW_PRECISION, FormatFacts, format_facts,  # noqa: F401
                               format_table, plot_format_ranges, plot_number_line, representable_values, scaled_fp8,
                               unscale_fp8)
from gpucourse.memory import (MemoryBreakdown, MemoryCap, PeakMemory, accumulate_gradients,  # noqa: F401
                              checkpointed_forward, largest_micro_batch, parse_oom_message, peak_bytes,
                              peak_memory_bytes, saved_tensor_bytes, tensor_memory)
from gpucourse.mixed_precision import (NATIVE_BF16_CAPABILITY, AutocastCall, CastReport, OpRecord, autocast_dtype,  # noqa: F401
                                       autocast_op_dtypes, gradient_cast_report, needs_grad_scaler,
                                       plot_gradient_histogram, plot_loss_scales, record_autocast)

__all__ = ["FORMATS", "LOW_PRECISION", "FormatFacts", "format_facts", "format_table", "representable_values",
           "plot_format_ranges", "plot_number_line", "CastReport", "gradient_cast_report", "plot_gradient_histogram",
           "autocast_dtype", "OpRecord", "autocast_op_dtypes", "MemoryBreakdown", "tensor_memory",
           "saved_tensor_bytes", "peak_memory_bytes", "accumulate_gradients", "parse_oom_message", "plot_loss_scales",
           "FP8_FORMATS", "scaled_fp8", "unscale_fp8", "needs_grad_scaler", "NATIVE_BF16_CAPABILITY", "PeakMemory",
           "peak_bytes", "AutocastCall", "record_autocast", "MemoryCap", "largest_micro_batch", "checkpointed_forward"]
