"""Device placement: one device for PyTorch and TensorFlow, TensorFlow's configuration, transfer bandwidth.

PyTorch and TensorFlow are imported inside the functions that need them, so ``import gpucourse`` stays light.
The device itself always comes from :func:`gpucourse.hardware.pick_device`; nothing here hard-codes a GPU.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from gpucourse._validate import non_negative_int, non_negative_number, positive_int, positive_number
from gpucourse.timing import benchmark, sync_for


def _pcie_bytes_per_s(gigatransfers_per_s: float, lanes: int = 16) -> float:
    """Theoretical bandwidth of a PCIe 3.0+ link per direction: transfers/s x lanes x 128/130 (encoding) / 8 bits."""
    return gigatransfers_per_s * 1e9 * lanes * (128 / 130) / 8


PCIE_SPECS: dict[str, float] = {
    "PCIe 3.0 x16": _pcie_bytes_per_s(8.0),
    "PCIe 4.0 x16": _pcie_bytes_per_s(16.0),
    "PCIe 5.0 x16": _pcie_bytes_per_s(32.0),
}
"""Specification bandwidth (bytes/s, one direction) of the host links GPUs sit on: 8, 16 and 32 GT/s per lane with
128b/130b encoding (PCI-SIG base specifications 3.0, 4.0, 5.0). Theoretical figures, not measurements: real copies
reach less (packet headers, the DMA engines, the host's memory). A T4 has a PCIe 3.0 x16 link, an L4 and an A100
PCIe 4.0 x16, an H100 PCIe 5.0 x16 (NVIDIA datasheets)."""

_TORCH_DEVICE = re.compile(r"(cpu|cuda|mps)(?::(\d+))?")


# --------------------------------------------------------------------------- one device for both frameworks

def tf_device_name(device: object = None) -> str:
    """TensorFlow's name ('/GPU:0', '/CPU:0') for a PyTorch device (a torch.device or its name; None: pick_device()).

    'cuda:N' maps to '/GPU:N' (both frameworks number the GPUs they can see the same way, after
    CUDA_VISIBLE_DEVICES), Apple's 'mps' to '/GPU:0' (tensorflow-metal's name for it) and 'cpu' to '/CPU:0'.
    """
    if device is None:
        from gpucourse.hardware import pick_device

        device = pick_device()
    if type(device).__module__ == "torch" and type(device).__name__ == "device":
        device = str(device)
    if not isinstance(device, str):
        raise TypeError(f"device must be a torch.device or a str such as 'cuda:0' or 'cpu', "
                        f"got {type(device).__name__} ({device!r})")
    match = _TORCH_DEVICE.fullmatch(device)
    if match is None:
        raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N' or 'mps', got {device!r}")
    kind, index = match.groups()
    if kind == "cpu":
        return "/CPU:0"
    return f"/GPU:{index or 0}" if kind == "cuda" else "/GPU:0"


# --------------------------------------------------------------------------- TensorFlow's configuration

@dataclass(frozen=True)
class TensorFlowSetup:
    """What :func:`configure_tensorflow` found and did."""

    version: str
    gpus: tuple[str, ...]
    memory_growth: tuple[bool, ...]
    logical_devices: tuple[str, ...]
    applied: bool
    message: str
    startup_log: tuple[str, ...] = ()

    def __str__(self) -> str:
        devices = ", ".join(name.removeprefix("/device:") for name in self.logical_devices)
        if self.gpus:
            growth = ", ".join(f"{name.rsplit(':', 2)[-2]}:{name.rsplit(':', 1)[-1]} {'on' if on else 'off'}"
                               for name, on in zip(self.gpus, self.memory_growth))
            memory = f"memory growth: {growth}"
        else:
            memory = "no GPU visible, so memory growth has nothing to apply to"
        lines = [f"TensorFlow {self.version}: logical devices {devices}; {memory}", self.message]
        if self.startup_log:
            lines.append(f"({len(self.startup_log)} start-up log line(s) from TensorFlow's C++ libraries captured "
                         "in .startup_log instead of the notebook's stderr)")
        return "\n".join(line for line in lines if line)


@contextlib.contextmanager
def _captured_stderr(lines: list[str]) -> Iterator[None]:
    """Collect what is written to stderr, by Python and by C++ libraries (file descriptor 2), into ``lines``."""
    python_stderr = io.StringIO()
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no usable descriptor 2 (e.g. pythonw): capture Python only
        with contextlib.redirect_stderr(python_stderr):
            yield
        lines.extend(line for line in python_stderr.getvalue().splitlines() if line.strip())
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            with contextlib.redirect_stderr(python_stderr):
                yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", errors="replace") + python_stderr.getvalue()
            lines.extend(line for line in text.splitlines() if line.strip())


def configure_tensorflow(memory_growth: bool = True, logical_cpus: int | None = None, *,
                         strict: bool = False) -> TensorFlowSetup:
    """Import and configure TensorFlow before its first op; return what it now runs on.

    ``memory_growth``: let TensorFlow take GPU memory as it needs it instead of nearly all of it at start-up (so
    PyTorch can share the GPU). ``logical_cpus``: split the CPU into this many logical devices ('/CPU:0',
    '/CPU:1', ...), e.g. to try multi-device code without GPUs; None leaves the CPU as it is.

    TensorFlow fixes its devices when it initialises (its first op, or listing logical devices, which this function
    does last). Called again afterwards, e.g. by re-running a notebook cell, with the same settings it changes
    nothing and succeeds (``applied`` True); with different ones it cannot apply them and says why in ``message``
    (``applied`` False), or raises RuntimeError if ``strict``. TensorFlow's C++ start-up lines, which would reach
    stderr whatever TF_CPP_MIN_LOG_LEVEL says, are kept in ``startup_log`` instead.
    """
    if not isinstance(memory_growth, bool):
        raise TypeError(f"memory_growth must be True or False, got {type(memory_growth).__name__} ({memory_growth!r})")
    if logical_cpus is not None:
        logical_cpus = positive_int("logical_cpus", logical_cpus)
    if not isinstance(strict, bool):
        raise TypeError(f"strict must be True or False, got {type(strict).__name__} ({strict!r})")
    from gpucourse import load_triton_before_tensorflow, quiet_frameworks

    quiet_frameworks()  # no-op if the setup cell already did it; must precede the import below
    load_triton_before_tensorflow()
    log: list[str] = []
    kept: list[str] = []
    with _captured_stderr(log):
        import tensorflow as tf

        gpus = tf.config.list_physical_devices("GPU")
        for gpu in gpus:
            current = tf.config.experimental.get_memory_growth(gpu)
            if current != memory_growth:
                try:
                    tf.config.experimental.set_memory_growth(gpu, memory_growth)
                except RuntimeError:
                    kept.append(f"memory growth of {gpu.name} stays {'on' if current else 'off'}")
        if logical_cpus is not None:
            cpu = tf.config.list_physical_devices("CPU")[0]
            current_cpus = len(tf.config.get_logical_device_configuration(cpu) or [None])
            if current_cpus != logical_cpus:
                try:
                    tf.config.set_logical_device_configuration(
                        cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(logical_cpus)])
                except RuntimeError:
                    kept.append(f"the CPU stays split into {current_cpus} logical device(s), not {logical_cpus}")
        logical = tf.config.list_logical_devices()  # initialises TensorFlow: its devices are fixed from here on
        growth = tuple(bool(tf.config.experimental.get_memory_growth(gpu)) for gpu in gpus)
    if kept:
        message = ("TensorFlow was already initialised (an op ran, or this cell ran before), so its devices can no "
                   f"longer change: {'; '.join(kept)}. To change them, restart the kernel and run the notebook from "
                   "the top, with configure_tensorflow() before any other TensorFlow code.")
        if strict:
            raise RuntimeError(message)
    else:
        message = ""
    return TensorFlowSetup(version=tf.__version__, gpus=tuple(gpu.name for gpu in gpus), memory_growth=growth,
                           logical_devices=tuple(device.name for device in logical), applied=not kept,
                           message=message, startup_log=tuple(log))


_LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ \S+:\d+\] ")
_PLACEMENT_PREAMBLE = """\
import tensorflow as tf
for _gpu in tf.config.list_physical_devices("GPU"):
    tf.config.experimental.set_memory_growth(_gpu, True)
tf.debugging.set_log_device_placement(True)
"""


def tf_placement_log(code: str, *, timeout_s: float = 120.0) -> list[str]:
    """Run ``code`` in a fresh Python process with TensorFlow's placement log on; return the log's lines.

    ``code`` sees ``tf`` (TensorFlow, imported, memory growth on). Each returned line names an op and the device it
    ran on ('Executing op MatMul in device .../device:CPU:0'; for graphs, 'name: (Op): device'). A separate process
    is used because TensorFlow writes this log from C++ to stderr, which a lesson silences and which must never
    reach an autograded cell; a child process also leaves this kernel's TensorFlow state untouched.
    """
    if not isinstance(code, str):
        raise TypeError(f"code must be a str of Python statements, got {type(code).__name__}")
    timeout_s = positive_number("timeout_s", timeout_s)
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0", "TF_ENABLE_ONEDNN_OPTS": "0"}
    program = _PLACEMENT_PREAMBLE + textwrap.dedent(code)
    try:
        done = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"the placement-log run took more than timeout_s={timeout_s:g} s") from None
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"code failed in the placement-log process (exit {done.returncode}):\n{tail}")
    lines = []
    for line in done.stderr.splitlines():
        if "execute.cc" in line or "placer.cc" in line:
            lines.append(_LOG_PREFIX.sub("", line).strip())
    return lines


# --------------------------------------------------------------------------- transfer bandwidth

@dataclass(frozen=True)
class TransferMeasurement:
    """The median time to copy ``nbytes`` from host memory to ``device`` and the bandwidth it implies."""

    nbytes: int
    median_s: float
    device: str
    pinned: bool
    non_blocking: bool
    repeats: int

    @property
    def host_to_device(self) -> bool:
        """False on a CPU-only machine, where the copy stays within main memory."""
        return self.device != "cpu"

    @property
    def bandwidth(self) -> float:
        """Bytes moved per second (each byte counted once)."""
        return self.nbytes / self.median_s

    @property
    def kind(self) -> str:
        """What was measured, in words."""
        if not self.host_to_device:
            return "host copy (no GPU: main memory to main memory, not a host-to-device transfer)"
        memory = "pinned" if self.pinned else "pageable"
        return f"host to {self.device}, {memory} memory{', non_blocking' if self.non_blocking else ''}"

    def __str__(self) -> str:
        return (f"{self.nbytes / 1e6:,.1f} MB in {self.median_s * 1e3:.3f} ms = {self.bandwidth / 1e9:.2f} GB/s "
                f"[{self.kind}; median of {self.repeats}]")


def measure_transfer_bandwidth(nbytes: int, pinned: bool = False, device: object = None, *,
                               non_blocking: bool = False, repeats: int = 5) -> TransferMeasurement:
    """Time copying ``nbytes`` from host memory to ``device`` (None: pick_device()); warm-up, sync, median.

    ``pinned`` copies from page-locked host memory (CUDA only), which the GPU's copy engine reads directly;
    pageable memory is first staged through a pinned buffer by the driver. ``non_blocking`` lets the copy return
    before it finishes (the timing still waits for it). On a CPU-only machine the copy stays in main memory: the
    result says so (``host_to_device`` False) and is no PCIe figure.
    """
    nbytes = positive_int("nbytes", nbytes)
    repeats = positive_int("repeats", repeats)
    for name, value in (("pinned", pinned), ("non_blocking", non_blocking)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {type(value).__name__} ({value!r})")
    import torch

    from gpucourse.hardware import pick_device

    if device is None:
        device = pick_device()
    sync = sync_for(device)  # rejects unknown devices, and GPUs that are not there, by name
    device = str(device)
    if pinned and not device.startswith("cuda"):
        raise ValueError(f"pinned=True needs a CUDA device (page-locked memory speeds up copies to a GPU), "
                         f"got device={device!r}")
    source = torch.ones(nbytes, dtype=torch.uint8)
    if pinned:
        source = source.pin_memory()
    target = torch.empty(nbytes, dtype=torch.uint8, device=device)
    result = benchmark(lambda: target.copy_(source, non_blocking=non_blocking), warmup=2, repeats=repeats, sync=sync)
    return TransferMeasurement(nbytes=nbytes, median_s=result.median_s, device=device, pinned=pinned,
                               non_blocking=non_blocking, repeats=repeats)


# --------------------------------------------------------------------------- moving batches, transfer times

def move_batch(batch: object, device: object, non_blocking: bool = False) -> object:
    """A copy of ``batch`` with every tensor moved to ``device``, however deeply nested in dicts, lists, tuples and
    named tuples (which keep their types) and other mappings (which come back as dicts); anything else comes back as
    the very same object."""
    import torch

    if not isinstance(non_blocking, bool):
        raise TypeError(f"non_blocking must be True or False, got {type(non_blocking).__name__} ({non_blocking!r})")
    if not isinstance(device, (str, torch.device)):
        raise TypeError(f"device must be a torch.device or a str such as 'cpu', got {type(device).__name__}")

    def move(item: object) -> object:
        if isinstance(item, torch.Tensor):
            return item.to(device, non_blocking=non_blocking)
        if isinstance(item, Mapping):  # a dict, or another mapping (a UserDict such as Hugging Face's BatchEncoding)
            return {key: move(value) for key, value in item.items()}
        if isinstance(item, tuple) and hasattr(item, "_fields"):
            return type(item)(*(move(value) for value in item))
        if isinstance(item, (list, tuple)):
            return type(item)(move(value) for value in item)
        return item

    return move(batch)


def transfer_seconds(nbytes: int, bytes_per_s: float, latency_s: float = 0.0) -> float:
    """Best-case seconds to send ``nbytes`` over a link of ``bytes_per_s``, plus a fixed ``latency_s`` per copy."""
    nbytes = non_negative_int("nbytes", nbytes)
    return non_negative_number("latency_s", latency_s) + nbytes / positive_number("bytes_per_s", bytes_per_s)


def short_tf_device(name: str) -> str:
    """TensorFlow's device name in its short form 'TYPE:index' ('/job:localhost/.../device:GPU:0' -> 'GPU:0')."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"name must be a non-empty str such as '/GPU:0', got {name!r}")
    import tensorflow as tf

    spec = tf.DeviceSpec.from_string(name)
    if spec.device_type is None or spec.device_index is None:
        raise ValueError(f"name must name a device type and index, such as '/GPU:0' or '/device:CPU:1', got {name!r}")
    return f"{spec.device_type.upper()}:{spec.device_index}"


def keras_weights(model: object) -> list:
    """The weights of every ``nn.Linear`` in a PyTorch model, in the order Keras' Dense layers expect them:
    [kernel (inputs, outputs), bias, ...] as float numpy arrays (a bias only where the layer has one)."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    weights = []
    for layer in model.modules():
        if isinstance(layer, torch.nn.Linear):
            weights.append(layer.weight.detach().cpu().numpy().T)  # PyTorch (out, in) -> Keras (in, out)
            if layer.bias is not None:
                weights.append(layer.bias.detach().cpu().numpy())
    return weights


# --------------------------------------------------------------------------- hidden synchronisations

SYNC_OPS = ("aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::equal", "aten::is_nonzero",
            "aten::_unique", "aten::_unique2", "aten::unique_dim", "aten::unique_consecutive",
            "aten::unique_dim_consecutive", "aten::repeat_interleave")
"""PyTorch ops whose result the CPU must wait for (a number read on the host, or an output shape that depends on the
data: ``unique``, and ``repeat_interleave`` with a tensor of repeats): on a GPU each one stops the CPU until every
kernel queued before it has run."""

_SYNC_METHODS = ("tolist", "numpy", "cpu", "__repr__")

_HOST_DATA_FACTORIES = ("tensor", "as_tensor", "asarray")
"""torch functions that build a tensor from Python data on the host: with a GPU ``device=`` they copy it there with
``non_blocking=False`` (torch/csrc/utils/tensor_new.cpp), a blocking copy that :func:`count_host_syncs` counts (as it
counts ``Tensor.new_tensor(data)`` onto a device, which takes the same path)."""


_SIMULATED_PINNED: dict[int, object] = {}
"""Tensors that :func:`pin` marked as pinned on a machine without CUDA: address of their storage -> weak reference
(so a view or slice of one, which shares its storage, counts as pinned too, as on CUDA)."""


def pin(tensor: object) -> object:
    """``tensor`` in page-locked (pinned) host memory: ``tensor.pin_memory()`` where CUDA is available; without CUDA,
    a copy that :func:`count_host_syncs` treats as pinned (so a CPU learner can practise pinned, non-blocking copies),
    as it does views and slices of it while that copy lives.

    Taught in lesson 08_placement.
    """
    import weakref

    import torch

    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        raise ValueError(f"tensor must be on the CPU to be pinned, got {tensor.device}")
    if torch.cuda.is_available():
        return tensor.pin_memory()
    copy = tensor.clone()
    key = copy.untyped_storage().data_ptr()

    def forget(ref: object, key: int = key) -> None:
        if _SIMULATED_PINNED.get(key) is ref:
            del _SIMULATED_PINNED[key]

    _SIMULATED_PINNED[key] = weakref.ref(copy, forget)
    return copy


def is_pinned(tensor: object) -> bool:
    """Whether ``tensor`` is in pinned host memory (really, or as simulated by :func:`pin` without CUDA)."""
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise TypeError(f"tensor must be a torch.Tensor, got {type(tensor).__name__}")
    if tensor.device.type != "cpu":
        return False
    ref = _SIMULATED_PINNED.get(tensor.untyped_storage().data_ptr())
    if ref is not None and ref() is not None:
        return True
    return torch.cuda.is_available() and bool(tensor.is_pinned())


def _download(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether an op copies a tensor from a device back to the host (the CPU waits for it, and for all queued work)."""
    import torch

    if name == "aten::_to_copy" and args and isinstance(args[0], torch.Tensor):
        source, target = args[0].device, kwargs.get("device")
    elif name == "aten::copy_" and len(args) >= 2 and isinstance(args[1], torch.Tensor):
        source, target = args[1].device, args[0].device
    else:
        return False
    return target is not None and source.type != "cpu" and torch.device(target).type == "cpu"


def _blocking_upload(name: str, args: tuple, kwargs: dict) -> bool:
    """Whether an op is a host-to-device copy that blocks the CPU: ``non_blocking=False``, or from pageable memory."""
    import torch

    if name == "aten::_to_copy" and args and isinstance(args[0], torch.Tensor):
        source, target, non_blocking = args[0], kwargs.get("device"), bool(kwargs.get("non_blocking", False))
    elif name == "aten::copy_" and len(args) >= 2 and isinstance(args[1], torch.Tensor):
        source, target = args[1], args[0].device
        non_blocking = bool(args[2] if len(args) > 2 else kwargs.get("non_blocking", False))
    else:
        return False
    if target is None or source.device.type != "cpu" or torch.device(target).type == "cpu":
        return False
    return not (non_blocking and is_pinned(source))


@dataclass
class HostSyncs:
    """What :func:`count_host_syncs` saw: one (what, where) pair per host synchronisation."""

    events: list[tuple[str, str]]

    @property
    def count(self) -> int:
        """How many host synchronisations there were."""
        return len(self.events)

    def __str__(self) -> str:
        if not self.events:
            return "no host synchronisation"
        lines = [f"{self.count} host synchronisation(s):"] + [f"  {what} at {where}" for what, where in self.events[:10]]
        if self.count > 10:
            lines.append(f"  ... and {self.count - 10} more")
        return "\n".join(lines)


def _caller() -> str:
    """The innermost frame outside torch and this package, as 'file:line: code'."""
    import traceback

    here = os.path.dirname(os.path.abspath(__file__))
    for frame in reversed(traceback.extract_stack()[:-2]):
        name = os.path.abspath(frame.filename)
        if not name.startswith(here) and f"{os.sep}torch{os.sep}" not in name:
            return f"{os.path.basename(frame.filename)}:{frame.lineno}: {(frame.line or '').strip()}"
    return "?"


@contextlib.contextmanager
def count_host_syncs() -> Iterator[HostSyncs]:
    """Record every host synchronisation of PyTorch code run in the block, with the line that caused it.

    Counted: reading a tensor's value on the host (``.item()``, ``float(t)``, ``if t > 0``: ``aten::_local_scalar_dense``),
    ops whose output size depends on the data (``nonzero``, boolean masks, ``unique``, ``repeat_interleave`` with a
    tensor), ``.tolist()``, ``.numpy()``, ``.cpu()``, any other copy from a device to the host (``.to("cpu")``) and
    printing a tensor, ``torch.cuda.synchronize()``, and every **blocking host-to-device copy**: ``.to(device)`` with the default
    ``non_blocking=False`` (from pageable memory that is ``cudaMemcpyAsync`` followed by a stream synchronise), or
    ``non_blocking=True`` from pageable memory, and ``torch.tensor(python_data, device=...)`` or
    ``x.new_tensor(python_data)`` for an ``x`` on a device, which build the tensor on the host and copy it; only a
    ``non_blocking=True`` copy from pinned memory (:func:`pin`, ``DataLoader(pin_memory=True)``) is not counted. It
    works on any device (on the CPU nothing waits, but the same code on a GPU would), which is how lesson
    08_placement finds hidden synchronisations without a GPU. Not seen: code that runs only on a GPU (``if
    device.type == "cuda":``) and reads made by C++ code outside PyTorch's dispatcher.
    """
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    record = HostSyncs(events=[])

    class _Mode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            name = func._schema.name
            masked = name == "aten::index" and any(isinstance(i, torch.Tensor) and i.dtype == torch.bool
                                                   for i in (args[1] if len(args) > 1 else ()) if i is not None)
            if name in SYNC_OPS or masked:
                record.events.append((f"{name} (boolean mask)" if masked else name, _caller()))
            elif _blocking_upload(name, args, kwargs or {}):
                record.events.append((f"{name} (blocking host-to-device copy)", _caller()))
            elif not inside[0] and _download(name, args, kwargs or {}):  # .cpu() is counted once, as Tensor.cpu
                record.events.append((f"{name} (device-to-host copy)", _caller()))
            return func(*args, **(kwargs or {}))

    class _Factories(TorchFunctionMode):
        """torch.tensor(data, device=...) and x.new_tensor(data) from Python data: built on the host, then copied with
        non_blocking=False (the copy runs below the Python dispatch key, so the dispatch mode never sees it)."""

        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            if name in _HOST_DATA_FACTORIES and args and not isinstance(args[0], torch.Tensor):
                device = kwargs.get("device")
                if device is not None and torch.device(device).type != "cpu":
                    record.events.append((f"torch.{name} from host data (blocking host-to-device copy)", _caller()))
            elif (name == "new_tensor" and len(args) >= 2 and isinstance(args[0], torch.Tensor)
                  and not isinstance(args[1], torch.Tensor)):
                device = kwargs.get("device") or args[0].device  # x.new_tensor(data): on x's device unless told
                if torch.device(device).type != "cpu":
                    record.events.append(("Tensor.new_tensor from host data (blocking host-to-device copy)",
                                          _caller()))
            return func(*args, **kwargs)

    originals = {name: getattr(torch.Tensor, name) for name in _SYNC_METHODS}

    inside = [0]  # the torch-function mode calls a wrapped method again from inside it: count the outer call only

    def _wrap(name: str, original):  # noqa: ANN001, ANN202
        def method(self, *args, **kwargs):  # noqa: ANN001, ANN202
            if not inside[0]:
                record.events.append((f"Tensor.{name}", _caller()))
            inside[0] += 1
            try:
                return original(self, *args, **kwargs)
            finally:
                inside[0] -= 1
        return method

    synchronize = torch.cuda.synchronize

    def _synchronize(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        record.events.append(("torch.cuda.synchronize", _caller()))
        return synchronize(*args, **kwargs)

    for name, original in originals.items():
        setattr(torch.Tensor, name, _wrap(name, original))
    torch.cuda.synchronize = _synchronize
    try:
        with _Mode(), _Factories():
            yield record
    finally:
        for name, original in originals.items():
            setattr(torch.Tensor, name, original)
        torch.cuda.synchronize = synchronize


def train_epoch(model: object, batches: object, optimizer: object, device: object) -> object:
    """One epoch of cross-entropy training over ``batches`` of pinned (inputs, labels) on ``device``, without a host
    synchronisation: the mean loss comes back as a 0-dimensional tensor on ``device``, read when the caller wants.

    Taught in lesson 08_placement.
    """
    import torch
    import torch.nn.functional as F

    total = torch.zeros((), device=device)
    count = 0
    for inputs, labels in batches:
        inputs, labels = (t.to(device, non_blocking=True) for t in (inputs, labels))  # queued, if pinned
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
        count += 1
    if count == 0:
        raise ValueError("batches must hold at least one (inputs, labels) pair")
    return total / count


__all__ = ["PCIE_SPECS", "SYNC_OPS", "HostSyncs", "TensorFlowSetup", "TransferMeasurement",
           "configure_tensorflow", "count_host_syncs", "is_pinned", "pin", "keras_weights", "measure_transfer_bandwidth", "move_batch",
           "short_tf_device", "tf_device_name", "tf_placement_log", "train_epoch", "transfer_seconds"]
