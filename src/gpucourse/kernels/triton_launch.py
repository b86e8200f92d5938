"""Triton kernels on any machine, and what they read and wrote (lesson 06_triton; its notebook calls these
through :mod:`~gpucourse.kernels.triton_backend`).

- :func:`launch` runs a ``@triton.jit`` kernel compiled on a CUDA GPU (when its tensors live there) and in Triton's
  own interpreter otherwise, one kernel at a time: ``TRITON_INTERPRET=1`` is never set for the process, so the
  kernels that torch.compile generates still compile on a GPU.
- :func:`count_traffic` forces the interpreter and records, per launch, per program and per tensor argument, the
  elements and bytes every ``tl.load`` read and every ``tl.store`` wrote (masked-off lanes excluded), in a
  :class:`~gpucourse.kernels.triton_traffic.Traffic`. An access outside every tensor argument (a missing mask)
  raises :class:`OutOfBounds` before it touches memory. ``count_traffic(poison=True)`` also fills the masked-off
  lanes of every load without ``other=`` with NaN (integers: a large garbage value), as a GPU may: the interpreter
  fills them with zeros, but on a GPU their value is undefined. ``count_traffic(tf32=True)`` makes ``tl.dot`` on
  float32 tiles read TF32 operands, as it does by default on an NVIDIA GPU from Ampere on.
- Before a kernel runs interpreted, Triton's own compiler front end checks it for an sm_80 GPU, and a launch whose
  tensors live on different devices is refused (:mod:`~gpucourse.kernels.triton_checks`): what the interpreter
  would run and a GPU would not fails here too.

The counter wraps internal methods of the interpreter (``InterpreterBuilder.create_masked_load`` and
``create_masked_store``, through which every load and store goes in triton 3.6 and 3.9, and ``create_dot``) for the
duration of one launch, in :func:`_instrumented` only; it reads the pointer and the mask, the first two or three positional
arguments, whose order both versions share. For the same launch it also backports one upstream interpreter fix to
triton 3.6 (:func:`_squeezed_index`).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import numbers
import warnings
from collections.abc import Iterator

from gpucourse.kernels import triton_checks
from gpucourse.kernels.triton_checks import CompileError, LaunchRefused, MixedDevices
from gpucourse.kernels.triton_traffic import LaunchRecord, TensorTraffic, Traffic, _is_tensor


def require_triton():
    """Import and return the ``triton`` module, or raise :class:`gpucourse.platforms.NotAvailableHere` (an
    ImportError shown as one sentence) saying why it cannot run here and what to do (lesson 06 on Colab)."""
    from gpucourse import platforms

    platforms.available("triton").require()
    import triton

    return triton


class OutOfBounds(IndexError):
    """A kernel's load or store reached memory outside every tensor it was given (usually: a missing mask)."""


# --------------------------------------------------------------------------- argument checks

def is_power_of_two(value: int) -> bool:
    """True for 1, 2, 4, 8, ... (Triton's tl.arange and block shapes need powers of two)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return False
    return value > 0 and value & (value - 1) == 0


def _check_kernel(kernel: object) -> None:
    """Raise TypeError unless ``kernel`` is a @triton.jit function (or a triton.autotune of one)."""
    triton = require_triton()
    if not isinstance(kernel, (triton.runtime.jit.JITFunction, triton.runtime.autotuner.Autotuner)):
        raise TypeError(f"kernel must be a function decorated with @triton.jit, got {type(kernel).__name__} "
                        f"({kernel!r}); decorate it, and pass the kernel itself, not kernel[grid]")


def _check_grid(grid: object) -> tuple[int, ...]:
    """Return ``grid`` (a tuple or list, as Triton takes either) as a tuple of 1-3 positive ints, else raise naming
    ``grid``."""
    if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3:
        raise TypeError(f"grid must be a tuple of 1 to 3 positive ints such as (triton.cdiv(n, BLOCK),), "
                        f"got {type(grid).__name__} ({grid!r})")
    for size in grid:
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 1:
            raise ValueError(f"grid must hold positive ints (programs per axis), got {grid!r}")
    return tuple(int(size) for size in grid)


def _check_arguments(names: list[str], args: tuple, constexprs: dict) -> None:
    """Raise naming the argument: non-contiguous tensors, block sizes that are not powers of two."""
    if len(args) > len(names):
        raise TypeError(f"args: the kernel takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
    for name in constexprs:
        if name not in names:
            raise TypeError(f"{name}: the kernel has no argument of that name (it takes {', '.join(names)})")
    for name, value in list(zip(names, args)) + list(constexprs.items()):
        if hasattr(value, "data_ptr") and hasattr(value, "is_contiguous") and not value.is_contiguous():
            raise ValueError(f"{name} is a non-contiguous tensor (a transposed view or a slice): pass "
                             f"{name}.contiguous(), whose elements lie one after another as the kernel's "
                             "offsets assume")
        if name.upper().startswith("BLOCK") and not is_power_of_two(value):
            raise ValueError(f"{name} must be a power of two (Triton's tl.arange and block shapes need one), "
                             f"got {value!r}; triton.next_power_of_2(n) gives the next one")


LAUNCH_OPTIONS = ("num_warps", "num_stages", "num_ctas")  # Triton's own launch keywords, not kernel arguments


def _launch_options(constexprs: dict) -> dict[str, int]:
    """Take Triton's launch options (``num_warps``, ``num_stages``, ``num_ctas``) out of ``constexprs`` and return
    them, checked as a GPU's launcher checks them: positive ints, ``num_warps`` a power of two."""
    options = {name: constexprs.pop(name) for name in LAUNCH_OPTIONS if name in constexprs}
    for name, value in options.items():
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if "num_warps" in options and not is_power_of_two(options["num_warps"]):
        raise ValueError(f"num_warps must be a power of two (1, 2, 4, 8, 16, 32 warps of 32 threads), got "
                         f"{options['num_warps']!r}")
    return {name: int(value) for name, value in options.items()}


def runs_compiled(*args: object) -> bool:
    """True if a launch with these arguments compiles for the GPU: a tensor on a CUDA device, and no counting."""
    if _COUNTING:
        return False
    return any(_is_tensor(arg) and getattr(arg, "is_cuda", False) for arg in args)


_COUNTING: list[Traffic] = []  # the open count_traffic() blocks, innermost last
_POISONING: list[Traffic] = []  # the open count_traffic(poison=True) blocks
_TF32: list[Traffic] = []  # the open count_traffic(tf32=True) blocks


@contextlib.contextmanager
def count_traffic(poison: bool = False, tf32: bool = False) -> Iterator[Traffic]:
    """Within the block, every launch() runs in the interpreter and adds what it read and wrote to the Traffic.

    With ``poison=True``, a masked load without ``other=`` reads NaN (integers: garbage) in its masked-off lanes
    instead of the interpreter's zeros: on a GPU those lanes are undefined, so a kernel must not use them.
    With ``tf32=True``, a ``tl.dot`` of float32 tiles at its default ``input_precision="tf32"`` truncates both
    operands to TF32's 10 mantissa bits, as an NVIDIA GPU from Ampere on does (:func:`to_tf32`); the interpreter
    alone multiplies in full float32. ``"ieee"`` and ``"tf32x3"`` dots stay float32.
    """
    for name, value in (("poison", poison), ("tf32", tf32)):
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be True or False, got {type(value).__name__} ({value!r})")
    traffic = Traffic()
    _COUNTING.append(traffic)
    if poison:
        _POISONING.append(traffic)
    if tf32:
        _TF32.append(traffic)
    try:
        yield traffic
    finally:
        _COUNTING.remove(traffic)
        if poison:
            _POISONING.remove(traffic)
        if tf32:
            _TF32.remove(traffic)


def to_tf32(values: object) -> object:
    """float32 ``values`` (a numpy array) truncated to TF32: the low 13 of float32's 23 mantissa bits set to 0, as
    a Tensor Core reads them (relative error below 2**-10; infinities and NaNs stay what they are). Other dtypes
    are returned unchanged."""
    import numpy as np

    values = np.asarray(values)
    if values.dtype != np.float32:
        return values
    return (np.ascontiguousarray(values).view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)


@contextlib.contextmanager
def _tf32_dots(active: bool) -> Iterator[None]:
    """For one launch, make the interpreter's ``create_dot`` read float32 operands as TF32 when the dot's precision
    is TF32 (triton's default); restore it in finally. Installed outside :func:`_instrumented`, which wraps it."""
    if not active:
        yield
        return
    import re

    builder = _builder_class()
    original = builder.__dict__["create_dot"]

    def dot(self, a, b, d, input_precision, *args, **kwargs):
        if re.search(r"TF32(?![xX0-9])", repr(input_precision)):   # TF32, not TF32x3 (three TF32 products)
            a, b = (type(operand)(to_tf32(operand.data), operand.dtype) for operand in (a, b))
        return original(self, a, b, d, input_precision, *args, **kwargs)

    builder.create_dot = dot
    try:
        yield
    finally:
        builder.create_dot = original


def _poisoned(loaded: object, mask: object) -> object:
    """``loaded`` (an interpreter TensorHandle) with its masked-off lanes set to NaN, or garbage for integers."""
    import numpy as np

    data = np.array(loaded.data, copy=True)
    off = ~np.broadcast_to(np.asarray(mask.data, dtype=bool), data.shape)
    if not off.any():
        return loaded
    if np.issubdtype(data.dtype, np.floating):
        data[off] = np.nan
    elif data.dtype == np.bool_:
        data[off] = True
    else:
        data[off] = np.iinfo(data.dtype).max // 3  # an integer no kernel expects: 0x2AAA...
    return type(loaded)(data, loaded.dtype)


# --------------------------------------------------------------------------- the interpreter, instrumented

class _Spans:
    """The tensor arguments of a launch as sorted byte ranges, to find which tensor an address belongs to."""

    def __init__(self, record: LaunchRecord, host: dict[str, object]) -> None:
        import numpy as np

        items = sorted(((tensor.data_ptr(), tensor.data_ptr() + tensor.numel() * tensor.element_size(), name)
                        for name, tensor in host.items()), key=lambda item: item[0])
        self.starts = np.array([item[0] for item in items], dtype=np.uint64)
        self.ends = np.array([item[1] for item in items], dtype=np.uint64)
        self.names = [item[2] for item in items]
        self.record = record

    def account(self, pointers: object, mask: object, write: bool) -> None:
        """Count the masked-in addresses per tensor and program; raise OutOfBounds for any outside every tensor."""
        import numpy as np

        addresses = np.asarray(pointers.data).astype(np.uint64).ravel()
        if addresses.size:   # one load or store call, on the tensor its first lane points into (masked or not)
            first = int(np.searchsorted(self.starts, addresses[:1], side="right")[0]) - 1
            if first >= 0:
                entry = self.record.tensors[self.names[first]]
                if write:
                    entry.stores += 1
                else:
                    entry.loads += 1
        if mask is not None:
            addresses = addresses[np.broadcast_to(np.asarray(mask.data, dtype=bool), pointers.data.shape).ravel()]
        if addresses.size == 0:
            return
        itemsize = np.uint64(max(pointers.get_element_ty().primitive_bitwidth // 8, 1))
        slot = np.searchsorted(self.starts, addresses, side="right").astype(np.int64) - 1
        inside = (slot >= 0) & (addresses + itemsize <= self.ends[np.maximum(slot, 0)])
        program = _current_program()
        if not inside.all():
            self._out_of_bounds(addresses[~inside], write, program)
        counts = np.bincount(slot, minlength=len(self.names))
        per_program = self.record.programs.setdefault(program, [0, 0])
        for index, count in enumerate(counts):
            if count:
                entry = self.record.tensors[self.names[index]]
                if write:
                    entry.elements_written += int(count)
                else:
                    entry.elements_read += int(count)
        per_program[1 if write else 0] += int(addresses.size)

    def _out_of_bounds(self, outside: object, write: bool, program: tuple[int, int, int]) -> None:
        """Raise OutOfBounds naming the program, the access and the nearest tensor."""
        import numpy as np

        first = int(outside[0])
        nearest = int(np.argmin(np.minimum(np.abs(self.starts.astype(np.int64) - first),
                                           np.abs(self.ends.astype(np.int64) - first))))
        name, start, end = self.names[nearest], int(self.starts[nearest]), int(self.ends[nearest])
        where = (f"{first - end} bytes past the end of {name}" if first >= end else
                 f"{start - first} bytes before the start of {name}")
        action = "tl.store" if write else "tl.load"
        shown = program[:max([axis + 1 for axis, size in enumerate(self.record.grid) if size > 1] or [1])]
        raise OutOfBounds(f"program {shown} of {self.record.kernel}: a {action} reached "
                          f"{outside.size} address(es) outside every tensor argument (the first {where}). "
                          f"Give the {action} a mask that is False beyond the tensor's end, e.g. "
                          f"mask=offsets < n_elements.")


def _builder_class():
    """triton.runtime.interpreter.InterpreterBuilder (internal API, one place)."""
    from triton.runtime.interpreter import InterpreterBuilder

    return InterpreterBuilder


def _current_program() -> tuple[int, int, int]:
    """The program id the interpreter is running now (its builder's grid_idx)."""
    from triton.runtime import interpreter

    index = getattr(interpreter.interpreter_builder, "grid_idx", None) or (0, 0, 0)
    return tuple(int(i) for i in index)


def _squeezed_index(self) -> int:
    """tl.tensor.__index__ as upstream fixed it: int() of the scalar held in a 1-element array."""
    return int(self.handle.data.squeeze())


@functools.lru_cache(maxsize=None)
def _index_needs_squeeze(patch_lang_tensor: object) -> bool:
    """True if this interpreter's _patch_lang_tensor sets triton <= 3.6's ``__index__``, ``int(self.handle.data)``."""
    try:
        source = inspect.getsource(patch_lang_tensor)
    except (OSError, TypeError):
        return False
    return "int(self.handle.data)" in source


@contextlib.contextmanager
def _instrumented(spans: _Spans, poison: bool = False) -> Iterator[None]:
    """Patch the interpreter's load/store (and jit-function calls) for one launch; restore them in finally.

    With ``poison``, the masked-off lanes of a load without ``other=`` read NaN (see :func:`count_traffic`)."""
    from triton.runtime import interpreter
    from triton.runtime.jit import JITFunction

    # triton 3.6's interpreter turns each int argument into a 1-element array, and its tl.tensor.__index__ is
    # int(self.handle.data), which numpy >= 2.4 refuses (TypeError): `range(0, K, BLOCK_K)` over an int argument
    # fails. Upstream fixed it with int(self.handle.data.squeeze()) (triton-lang/triton PR #9172, in triton 3.9);
    # on an interpreter without that fix, set the fixed __index__ right after its own, for this launch only.
    original_patch_tensor = interpreter._patch_lang_tensor
    patch_tensor = original_patch_tensor
    if _index_needs_squeeze(original_patch_tensor):
        def patch_tensor(tensor, scope):
            original_patch_tensor(tensor, scope)
            scope.set_attr(tensor, "__index__", _squeezed_index)  # the scope restores the original with the rest

    builder = _builder_class()
    originals = {name: builder.__dict__[name] for name in ("create_masked_load", "create_masked_store",
                                                            "create_atomic_rmw", "create_atomic_cas", "create_dot")}
    original_call = JITFunction.__dict__["__call__"]

    def masked_load(self, ptrs, mask, *args, **kwargs):
        spans.account(ptrs, mask, write=False)
        loaded = originals["create_masked_load"](self, ptrs, mask, *args, **kwargs)
        other = args[0] if args else kwargs.get("other")
        if poison and other is None and mask is not None:  # no other=: undefined on a GPU, NaN here
            return _poisoned(loaded, mask)
        return loaded

    def masked_store(self, ptrs, value, mask, *args, **kwargs):
        spans.account(ptrs, mask, write=True)
        return originals["create_masked_store"](self, ptrs, value, mask, *args, **kwargs)

    def atomic_rmw(self, op, ptr, value, mask, *args, **kwargs):
        spans.account(ptr, mask, write=False)
        spans.account(ptr, mask, write=True)
        return originals["create_atomic_rmw"](self, op, ptr, value, mask, *args, **kwargs)

    def atomic_cas(self, ptr, *args, **kwargs):
        spans.account(ptr, None, write=False)
        spans.account(ptr, None, write=True)
        return originals["create_atomic_cas"](self, ptr, *args, **kwargs)

    def dot(self, *args, **kwargs):
        spans.record.dots += 1
        spans.record.dot_operands.update(str(getattr(operand, "dtype", "?")) for operand in args[:2])
        program = _current_program()
        spans.record.program_dots[program] = spans.record.program_dots.get(program, 0) + 1
        return originals["create_dot"](self, *args, **kwargs)

    def call_jit_function(self, *args, **kwargs):
        # A @triton.jit helper called from the kernel (tl.zeros, tl.max, a learner's own): run it interpreted too.
        scope = interpreter._patch_lang(self.fn)
        try:
            return interpreter.InterpretedFunction(self.fn).rewrite()(*args, **kwargs)
        finally:
            scope.restore()

    replacements = {"create_masked_load": masked_load, "create_masked_store": masked_store,
                    "create_atomic_rmw": atomic_rmw, "create_atomic_cas": atomic_cas, "create_dot": dot}
    try:
        for name, function in replacements.items():
            setattr(builder, name, function)
        JITFunction.__call__ = call_jit_function
        interpreter._patch_lang_tensor = patch_tensor
        yield
    finally:
        for name, function in originals.items():
            setattr(builder, name, function)
        JITFunction.__call__ = original_call
        interpreter._patch_lang_tensor = original_patch_tensor


def _arena_copies(tensors: dict[str, object]) -> dict[str, object]:
    """CPU copies of ``tensors`` in one buffer, each with a guard gap of its own size (+ 4 KiB) on both sides.

    An unmasked access that runs past a tensor then lands in a guard, never in a neighbouring tensor, and is
    reported as OutOfBounds. The same tensor passed twice (an in-place kernel) gets one copy.
    """
    import torch

    layout: dict[tuple, tuple[int, object]] = {}
    offset = 0
    for tensor in tensors.values():
        key = (str(tensor.device), tensor.data_ptr(), tensor.numel() * tensor.element_size(), tensor.dtype)
        if key not in layout:
            guard = -(-(key[2] + 4096) // 64) * 64
            offset += guard
            layout[key] = (offset, tensor)
            offset += -(-key[2] // 64) * 64
    arena = torch.zeros(offset + 4096, dtype=torch.uint8, device="cpu")   # the CPU whatever the default device
    copies: dict[tuple, object] = {}
    for key, (start, tensor) in layout.items():
        copy = arena[start:start + key[2]].view(tensor.dtype).view(tensor.shape)
        copy.copy_(tensor)
        copies[key] = copy
    return {name: copies[(str(t.device), t.data_ptr(), t.numel() * t.element_size(), t.dtype)]
            for name, t in tensors.items()}


def _constexpr_values(kernel: object, bound: dict[str, object]) -> dict[str, object]:
    """The values of the kernel's ``tl.constexpr`` parameters in this launch (a default where none was passed), by
    name, in the kernel's order; a ``tl.constexpr`` wrapper is unwrapped to its value."""
    from triton.language import constexpr

    values = {}
    for parameter in kernel.params:
        if not parameter.is_constexpr:
            continue
        value = bound.get(parameter.name, parameter.default)
        if value is inspect.Parameter.empty:
            continue
        values[parameter.name] = value.value if isinstance(value, constexpr) else value
    return values


def _interpret(kernel, grid: tuple[int, ...], names: list[str], args: tuple, constexprs: dict) -> LaunchRecord:
    """Run ``kernel`` in Triton's interpreter on guarded CPU copies of its tensors; copy results back; record it."""
    import numpy as np
    from triton.runtime.errors import InterpreterError
    from triton.runtime.interpreter import InterpretedFunction

    bound = dict(zip(names, args)) | constexprs
    originals = {name: value for name, value in bound.items() if _is_tensor(value)}
    copies = _arena_copies(originals)
    host = {name: copies.get(name, value) for name, value in bound.items()}
    record = LaunchRecord(kernel=kernel.fn.__name__, grid=tuple(grid) + (1,) * (3 - len(grid)),
                          constexprs=_constexpr_values(kernel, bound), tensors={
        name: TensorTraffic(name, tuple(tensor.shape), str(tensor.dtype).replace("torch.", ""),
                            tensor.element_size(),
                            span=(str(tensor.device), tensor.data_ptr(),
                                  tensor.data_ptr() + tensor.numel() * tensor.element_size()))
        for name, tensor in originals.items()})
    spans = _Spans(record, copies)
    try:
        # numpy's warnings on IEEE NaN or inf (0 / 0, max of an all-NaN slice) go to stderr, which zeroes a test
        # cell under nbgrader; a GPU computes the same values silently, and a kernel may discard them (tl.where)
        with _tf32_dots(bool(_TF32)), _instrumented(spans, poison=bool(_POISONING)), np.errstate(all="ignore"), \
                warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            InterpretedFunction(kernel.fn)[grid](**host)
    except InterpreterError as error:
        cause = error.__cause__
        while isinstance(cause, InterpreterError) and cause.__cause__ is not None:
            cause = cause.__cause__
        if isinstance(cause, OutOfBounds):
            raise OutOfBounds(str(cause)) from None
        raise
    for name, tensor in originals.items():
        tensor.copy_(copies[name])
    return record


_BUILT: dict[tuple, object] = {}   # (source, globals, name) -> the first @triton.jit object launched compiled


def _built_once(kernel: object) -> object:
    """The first @triton.jit object launched with this kernel's source, module globals and name.

    Triton keeps compiled binaries per JITFunction object, so a kernel defined inside a Python function (a new
    object at every call, as the lessons' exercises write it) would go through Triton's compile path, a disk-cache
    hit of milliseconds, at every launch, and a timing of the function would count it. Lesson: 11_attention.
    """
    src, fn = getattr(kernel, "src", None), getattr(kernel, "fn", None)
    if not isinstance(src, str) or fn is None:   # an autotuner, or not a JITFunction: as it is
        return kernel
    return _BUILT.setdefault((src, id(getattr(fn, "__globals__", None)), getattr(fn, "__qualname__", "")), kernel)


@functools.lru_cache(maxsize=256)
def _parameter_names(fn: object) -> tuple[str, ...]:
    """The kernel function's argument names, read once per function (inspect.signature costs tens of µs, which a
    timed launch on a GPU would count)."""
    return tuple(inspect.signature(fn).parameters)


def launch(kernel: object, grid: object, *args: object, **constexprs: object) -> None:
    """Run ``kernel[grid](*args, **constexprs)``: compiled on a CUDA GPU, else in Triton's interpreter.

    ``grid`` is a tuple (or list) of 1-3 positive ints (programs per axis), e.g. ``(triton.cdiv(n, BLOCK),)``, or a
    function of the kernel's arguments returning one (what a triton.autotune'd kernel needs). Triton's launch options
    ``num_warps`` (a power of two), ``num_stages`` and ``num_ctas`` (positive ints) are checked and passed to the
    compiled kernel; the interpreter, which has no warps or pipeline, ignores them (as Triton's own does). Inside
    ``count_traffic()`` the launch always runs interpreted and is counted. A launch a GPU would refuse raises
    :class:`LaunchRefused` on any machine: tensors on different devices (:class:`MixedDevices`), or, before the
    interpreter runs, a kernel that Triton's compiler refuses for an sm_80 GPU (:class:`CompileError`; see
    :mod:`~gpucourse.kernels.triton_checks`). Its own torch work is not refused by
    :func:`~gpucourse.kernels.triton_checks.kernel_only`. Lesson: 06_triton.
    """
    with triton_checks.launcher_at_work():
        _launch(kernel, grid, args, constexprs)


def _launch(kernel: object, grid: object, args: tuple, constexprs: dict) -> None:
    """The body of :func:`launch`."""
    triton = require_triton()
    _check_kernel(kernel)
    if not callable(grid):
        grid = _check_grid(grid)
    jit_function = kernel.fn if isinstance(kernel, triton.runtime.autotuner.Autotuner) else kernel
    names = list(_parameter_names(jit_function.fn))
    constexprs = dict(constexprs)
    options = _launch_options(constexprs)
    _check_arguments(names, args, constexprs)
    triton_checks.check_devices(dict(zip(names, args)) | constexprs)   # a GPU reads no CPU tensor
    if runs_compiled(*args, *constexprs.values()):
        _built_once(kernel)[grid](*args, **constexprs, **options)   # compiled once per source, not per object
        return
    if jit_function is not kernel:
        raise ValueError("kernel: the interpreter cannot autotune (it measures no speed); launch kernel.fn with "
                         "one of kernel.configs' block sizes instead")
    if callable(grid):
        grid = _check_grid(grid(dict(zip(names, args)) | constexprs))
    triton_checks.require_compiles(jit_function, dict(zip(names, args)) | constexprs)   # what a GPU compiles
    record = _interpret(jit_function, grid, names, args, constexprs)
    for traffic in _COUNTING:
        traffic.launches.append(record)


__all__ = ["LAUNCH_OPTIONS", "CompileError", "LaunchRefused", "MixedDevices", "OutOfBounds", "count_traffic", "is_power_of_two",
           "launch", "require_triton", "runs_compiled", "to_tf32"]
