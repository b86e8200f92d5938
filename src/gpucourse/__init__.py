"""Helper package of the course "GPUs for Deep Learning": hardware facts, timing, roofline and exercise checks."""

from __future__ import annotations

import os
import re
import sys
import tempfile

__version__ = "0.4.0"


def quiet_frameworks() -> None:
    """Silence TensorFlow's and the PyTorch profiler's start-up log lines (run before importing them)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")  # the PyTorch profiler's start/stop lines on stderr


# Lines TensorFlow's C++ runtime writes to stderr at start-up whatever TF_CPP_MIN_LOG_LEVEL says (before its
# logging is initialised), or that report a missing GPU on a CPU-only machine: known, harmless, never errors.
_TF_STARTUP_NOISE = re.compile(
    r"All log messages before absl::InitializeLog\(\) is called are written to STDERR|"
    r"cudart_stub\.cc.*Could not find cuda drivers|failed call to cuInit|oneDNN custom operations are on|"
    r"This TensorFlow binary is optimized|Unable to register cu(?:DNN|FFT|BLAS) factory|"
    r"computation placer already registered|TF-TRT Warning: Could not find TensorRT|"
    r"To enable the following instructions: .* in other operations, rebuild TensorFlow")


def load_triton_before_tensorflow() -> bool:
    """Import triton (if installed) before TensorFlow can load; return True if it is loaded.

    Both bundle LLVM: a process that loads TensorFlow first aborts when triton loads later ("LLVM ERROR:
    inconsistency in registered CommandLine options"), and torch loads triton by itself (``torch.compile``,
    ``torch._dynamo``). Loaded in the other order, both work.
    """
    if "triton" in sys.modules:
        return True
    if "tensorflow" in sys.modules:
        return False  # too late: loading triton now would abort the process
    import importlib.util

    if importlib.util.find_spec("triton") is None:
        return False
    import triton  # noqa: F401

    return True


def import_tensorflow():
    """Import TensorFlow quietly (known start-up lines dropped from stderr), GPU memory growth on; return the module.

    By default TensorFlow reserves almost all of a GPU's memory when it first uses it, which would leave none for
    PyTorch in the same notebook; with memory growth on it takes only what it needs.
    """
    quiet_frameworks()
    load_triton_before_tensorflow()
    sys.stderr.flush()
    with tempfile.TemporaryFile(mode="w+b") as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)  # the C++ runtime writes to file descriptor 2, not to sys.stderr
        try:
            import tensorflow as tf

            for gpu in tf.config.list_physical_devices("GPU"):  # finds the devices (and reports a missing GPU)
                try:
                    tf.config.experimental.set_memory_growth(gpu, True)
                except RuntimeError:  # TensorFlow already runs on it (the cell ran before): too late to change
                    pass
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            other = [line for line in captured.read().decode("utf-8", "replace").splitlines()
                     if line.strip() and not _TF_STARTUP_NOISE.search(line)]
            if other:  # anything else TensorFlow said is passed on, so no error is hidden
                print("\n".join(other), file=sys.stderr)
    return tf


def setup() -> "hardware.EnvironmentReport":
    """Prepare a lesson: silence framework start-up noise, load triton before any TensorFlow, skip TensorFlow
    cells where it cannot be installed, print the report."""
    quiet_frameworks()
    load_triton_before_tensorflow()
    from gpucourse import hardware, without_tensorflow

    without_tensorflow.install()  # where TensorFlow cannot be installed, its cells say so and skip it
    report = hardware.environment_report()
    print(report.one_line())
    import gpucourse.referee  # noqa: F401  (its first load saves the genuine grading code, before any answer runs)

    return report


__all__ = ["__version__", "quiet_frameworks", "load_triton_before_tensorflow", "import_tensorflow", "setup"]
