"""TensorFlow's logical devices: two (or more) devices out of one CPU or GPU, for MirroredStrategy anywhere.

Taught in 14_data_parallelism. TensorFlow is imported only when the function runs.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from collections.abc import Iterator

from gpucourse._validate import one_of, positive_int


@contextlib.contextmanager
def _quiet_stderr() -> Iterator[io.StringIO]:
    """Send what is written to stderr, by Python or by C++ libraries, to a buffer while the block runs."""
    captured = io.StringIO()
    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no file descriptor 2 (e.g. pythonw): only Python's stderr is redirected
        saved = None
    with tempfile.TemporaryFile() as sink, contextlib.redirect_stderr(captured):
        if saved is not None:
            os.dup2(sink.fileno(), 2)
        try:
            yield captured
        finally:
            if saved is not None:
                os.dup2(saved, 2)
                os.close(saved)
                sink.seek(0)
                captured.write(sink.read().decode("utf-8", errors="replace"))


def _pass_on_unknown_lines(text: str) -> None:
    """Write to stderr the lines of ``text`` that are not TensorFlow's known start-up noise (no error is hidden)."""
    import gpucourse

    other = [line for line in text.splitlines() if line.strip() and not gpucourse._TF_STARTUP_NOISE.search(line)]
    if other:
        print("\n".join(other), file=sys.stderr)


def configure_tf_devices(count: int = 2, kind: str = "auto", memory_limit_mb: int = 1024) -> list[str]:
    """Give TensorFlow ``count`` logical CPU or GPU devices (before its first operation); return their names."""
    count = positive_int("count", count)
    one_of("kind", kind, ("auto", "CPU", "GPU"))
    memory_limit_mb = positive_int("memory_limit_mb", memory_limit_mb)
    import gpucourse

    try:
        tf = gpucourse.import_tensorflow()  # the package's one quiet import (GPU memory growth on)
        gpus = tf.config.list_physical_devices("GPU")
    except Exception as error:
        raise RuntimeError(f"TensorFlow could not start: {error}") from None
    if kind == "GPU" and not gpus:
        raise ValueError("kind='GPU' but TensorFlow sees no GPU: use kind='auto' or 'CPU'")
    device_type = "GPU" if (kind == "GPU" or (kind == "auto" and gpus)) else "CPU"
    physical = tf.config.list_physical_devices(device_type)
    wanted = None
    if len(physical) < count:  # split the first device so that there are `count` in all
        limit = memory_limit_mb if device_type == "GPU" else None  # TensorFlow sets no memory limit on CPUs
        wanted = [tf.config.LogicalDeviceConfiguration(memory_limit=limit) for _ in range(count - len(physical) + 1)]
    again = wanted is not None and tf.config.get_logical_device_configuration(physical[0]) == wanted
    try:
        with _quiet_stderr() as said:  # the first list_logical_devices starts TensorFlow's runtime
            if wanted is not None:
                tf.config.set_logical_device_configuration(physical[0], wanted)
            names = [device.name for device in tf.config.list_logical_devices(device_type)]
        _pass_on_unknown_lines(said.getvalue())
    except RuntimeError:
        current = [device.name for device in tf.config.list_logical_devices(device_type)]
        raise RuntimeError(
            f"TensorFlow has already started in this kernel, with {len(current)} logical {device_type} device(s) "
            f"{current}: logical devices can only be configured before TensorFlow's first operation. Restart the "
            "kernel (Colab: Runtime > Restart session; Jupyter: Kernel > Restart), then run the setup and imports cells before any other TensorFlow code."
        ) from None
    if again:
        print(f"TensorFlow already has these {count} logical {device_type} devices (configured earlier in this "
              "kernel): nothing to change")
    return names[:count]
