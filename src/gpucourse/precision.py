"""Number formats, mixed precision and training memory under one name (lessons 14_mixed_precision, 15_bigger_models).

The code lives in three modules, one job each: ``formats`` (bits, range, precision), ``mixed_precision`` (casts,
autocast, loss scales) and ``memory`` (training memory). This module re-exports their names so that
``from gpucourse import precision`` keeps working.
"""

from __future__ import annotations

from gpucourse.formats import (FORMATS, LOW_PRECISION, FormatFacts, format_facts, format_table,  # noqa: F401
                               plot_format_ranges, plot_number_line, representable_values)
from gpucourse.memory import (MemoryBreakdown, accumulate_gradients, parse_oom_message,  # noqa: F401
                              peak_memory_bytes, saved_tensor_bytes, tensor_memory)
from gpucourse.mixed_precision import (CastReport, OpRecord, autocast_dtype, autocast_op_dtypes,  # noqa: F401
                                       gradient_cast_report, plot_gradient_histogram, plot_loss_scales)

__all__ = ["FORMATS", "LOW_PRECISION", "FormatFacts", "format_facts", "format_table", "representable_values",
           "plot_format_ranges", "plot_number_line", "CastReport", "gradient_cast_report", "plot_gradient_histogram",
           "autocast_dtype", "OpRecord", "autocast_op_dtypes", "MemoryBreakdown", "tensor_memory",
           "saved_tensor_bytes", "peak_memory_bytes", "accumulate_gradients", "parse_oom_message", "plot_loss_scales"]
