"""What a GPU would refuse in a Triton launch that the interpreter runs anyway (lessons 06_triton and 11_attention).

The interpreter runs a kernel's Python with numpy, one program after another, so it accepts code that a GPU never
runs. :func:`~gpucourse.kernels.triton_launch.launch` asks two questions here before it interprets a kernel:

- :func:`front_end`: does Triton's real compiler accept the kernel? It runs the compiler's first stage (the
  kernel's Python to Triton IR, where types, shapes, constexprs and ``tl.dot``'s minimum sizes are checked) for an
  NVIDIA sm_80 (A100) target: no GPU and no CUDA needed, a few milliseconds per kernel, cached per kernel source,
  argument types and constexpr values. A refusal raises :class:`CompileError`, as ``kernel[grid](...)`` raises
  triton's ``CompilationError`` on a GPU. Typical catch: a loop-carried accumulator whose type changes
  (``acc = 0.0``, then ``acc += tl.dot(a, b)``), which numpy allows and the compiler does not. Where this triton
  lacks the NVIDIA front end or its API differs (:func:`front_end` says ``"not checked"``), nothing is refused.
- :func:`check_devices`: do all its tensors live on one device? A GPU cannot read a CPU tensor (triton's launcher:
  "Pointer argument cannot be accessed from Triton (cpu tensor?)"); the interpreter copies every tensor to the CPU
  and would not notice. Mixed devices, or a tensor on the ``meta`` device, raise :class:`MixedDevices`. Graders run
  a learner's function under :func:`default_device_meta` (``torch.device("meta")`` that still moves), so that an
  output made without ``device=`` lands there and is refused, while ``torch.empty(shape).to(x.device)`` works.

Both errors are :class:`LaunchRefused`, whose message ends with a hint.

Graders also run the learner's function under :func:`kernel_only`: a torch operation other than an allocation, a
view or a move to another device that the function runs around its launches (``out /= out.sum(1, keepdim=True)``,
``x.float()``, ``y.mul_(...)``) raises :class:`TorchOutsideKernel`, since each is one more pass over memory that the
kernel's traffic, counted by :func:`~gpucourse.kernels.triton_launch.count_traffic`, does not show. The launcher's
own torch work (copies to and from the interpreter) runs inside :func:`launcher_at_work` and is not counted.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass

TARGET = ("cuda", 80, 32)  # backend, compute capability, warp size: an A100, the oldest GPU with TF32 and bf16
TARGET_NAME = "an NVIDIA sm_80 GPU (A100)"


class LaunchRefused(RuntimeError):
    """A launch that a GPU would refuse (which the interpreter may run): the message says why, then a hint."""


class CompileError(LaunchRefused):
    """Triton's compiler (its front end, for an sm_80 target) refuses the kernel."""


class MixedDevices(LaunchRefused, ValueError):
    """A launch whose tensors live on different devices, or on the meta device (no memory at all)."""


class TorchOutsideKernel(RuntimeError):
    """Under :func:`kernel_only`: a torch operation that computes (not an allocation, a view or a device move)."""


@dataclass(frozen=True)
class FrontEnd:
    """The compiler's verdict on one kernel with one signature: ``status`` is "accepted", "refused" or
    "not checked" (no NVIDIA front end in this triton); ``message`` is the compiler's error or the reason."""

    status: str
    message: str = ""

    @property
    def refused(self) -> bool:
        """True if the compiler refused the kernel."""
        return self.status == "refused"


# --------------------------------------------------------------------------- devices

_HOST = "_gpucourse_host"   # the attribute of a meta tensor made under default_device_meta(): its values, on the CPU


@contextlib.contextmanager
def default_device_meta() -> Iterator[None]:
    """Within the block, a tensor made without ``device=`` lands on the meta device (no memory), as under
    ``with torch.device("meta"):``, so a launch that passes it is refused (:func:`check_devices`) as a GPU refuses a
    CPU tensor next to GPU ones. Unlike ``torch.device("meta")``, the tensor keeps its values on the CPU alongside,
    and moving it to a real device (``.to(x.device)``, ``.to(x)``, ``.cuda()``, ``.cpu()``) gives those values
    there: ``torch.empty(shape).to(x.device)`` is correct code on a GPU (it costs a copy) and works here too. Views
    and operations on such a tensor carry the values along. Any other use of its missing data (an error naming the
    meta device) is raised as :class:`MixedDevices` with the fix: allocate on the inputs' device directly.
    """
    import torch
    from torch.overrides import TorchFunctionMode
    from torch.utils._device import _device_constructors
    from torch.utils._pytree import tree_map

    constructors = _device_constructors()
    moves = {torch.Tensor.to, torch.Tensor.cuda, torch.Tensor.cpu}

    def host_of(value: object) -> object:
        return getattr(value, _HOST, value) if isinstance(value, torch.Tensor) else value

    def carrying(value: object) -> bool:
        return isinstance(value, torch.Tensor) and value.device.type == "meta" and hasattr(value, _HOST)

    class MetaDefault(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in constructors and kwargs.get("device") is None:
                host = func(*args, **kwargs)                       # on the real default device, values and all
                made = func(*args, **kwargs | {"device": "meta"})
                setattr(made, _HOST, host)
                return made
            if not any(carrying(value) for value in (*args, *kwargs.values())):
                return func(*args, **kwargs)
            if func in moves and carrying(args[0]):
                target = (torch._C._nn._parse_to(*args[1:], **kwargs)[0] if func is torch.Tensor.to
                          else torch.device("cpu") if func is torch.Tensor.cpu else torch.device("cuda"))
                if target is not None and target.type != "meta":   # to a real device: the values go there
                    return func(getattr(args[0], _HOST), *args[1:], **kwargs)
            result = func(*args, **kwargs)                         # on meta; the same on the values alongside
            if isinstance(result, torch.Tensor) and result.device.type == "meta" and not hasattr(result, _HOST):
                host = func(*tree_map(host_of, args), **tree_map(host_of, kwargs))
                if isinstance(host, torch.Tensor):
                    setattr(result, _HOST, host)
            return result

    try:
        with MetaDefault():
            yield
    except (NotImplementedError, RuntimeError) as error:
        if "meta" not in str(error) or isinstance(error, (LaunchRefused, TorchOutsideKernel)):
            raise
        raise MixedDevices(
            f"a tensor made without device= was used ({type(error).__name__}: {error}). The tests make the default "
            f"device one that holds no data, as a GPU's inputs are not on the default device (the CPU): allocate "
            f"on the inputs' device directly, torch.empty(shape, dtype=..., device=x.device) or "
            f"torch.empty_like(x)") from None


def check_devices(bound: dict[str, object]) -> None:
    """Raise :class:`MixedDevices` unless every tensor in ``bound`` (argument name -> value) is on one real device."""
    devices: dict[str, list[str]] = {}
    for name, value in bound.items():
        device = getattr(value, "device", None)
        if device is not None and hasattr(value, "data_ptr"):
            devices.setdefault(str(device), []).append(name)
    if "meta" in devices and len(devices) > 1:
        real = next(device for device in devices if device != "meta")
        raise MixedDevices(
            f"{', '.join(devices['meta'])} on the default device, {', '.join(devices[real])} on {real}: a kernel "
            f"reads all its tensors on one device. Allocate outputs on the inputs' device: torch.empty_like(x), or "
            f"torch.empty(shape, dtype=..., device=x.device). Without device= a tensor lands on the default device "
            f"(the CPU), and with inputs on a GPU the launch fails: \"Pointer argument cannot be accessed from "
            f"Triton (cpu tensor?)\".")
    if "meta" in devices:
        raise MixedDevices(f"{', '.join(devices['meta'])} on the meta device, which holds no data: pass tensors "
                           "with memory (on the CPU or a GPU)")
    if len(devices) > 1:
        where = "; ".join(f"{', '.join(names)} on {device}" for device, names in devices.items())
        raise MixedDevices(f"tensors on different devices ({where}): a kernel reads all its tensors on one device; "
                           "a GPU cannot read a CPU tensor (\"Pointer argument cannot be accessed from Triton (cpu "
                           "tensor?)\"). Allocate outputs with torch.empty_like(x) or device=x.device.")


# --------------------------------------------------------------------------- torch work around the kernel

_ALLOCATIONS = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
                          "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
                          "new_full", "zero_", "fill_", "lift_fresh", "lift_fresh_copy"})   # lift: torch.tensor(data)
_LAUNCHER = [0]   # > 0 while tb.launch runs: its own torch work is not the learner's


@contextlib.contextmanager
def launcher_at_work() -> Iterator[None]:
    """Within the block (the body of ``tb.launch``), :func:`kernel_only` lets every torch operation run."""
    _LAUNCHER[0] += 1
    try:
        yield
    finally:
        _LAUNCHER[0] -= 1


def _computes(func: object, args: tuple, kwargs: dict) -> bool:
    """True unless the aten operation ``func`` allocates, makes a view, or moves a tensor keeping its dtype."""
    name = func.overloadpacket.__name__
    if name in _ALLOCATIONS or func.is_view:
        return False
    if name == "_to_copy":   # .to(device) moves the values; .to(dtype), .float(), .half() convert them
        return kwargs.get("dtype") not in (None, args[0].dtype)
    return True


def _what(name: str) -> str:
    """The Python that usually runs the aten operation ``name``."""
    return {"_to_copy": "a dtype conversion (.to(dtype), .float(), .half())", "copy_": "a copy (.copy_(), "
            "out[...] = ...)", "clone": "a copy (.clone(), .contiguous() of a non-contiguous tensor)",
            "_local_scalar_dense": "a read of a value on the host (.item(), float(t))"}.get(name, "")


def _refusal(what: str) -> TorchOutsideKernel:
    """The error for torch work ``what`` done outside the kernel, naming the learner's line."""
    from gpucourse.placement import _caller   # the innermost line outside torch and the course

    return TorchOutsideKernel(
        f"torch ran {what} outside your Triton kernel, before or after tb.launch, at {_caller()}. All the "
        f"arithmetic, conversions included, must happen in the kernel: each torch operation is one more pass over "
        f"memory that the budget has no room for. Allocate the output in its final dtype (torch.empty_like(x)), "
        f"launch the kernel, and return the output it stored into")


_HOST_VIEWS = frozenset({"numpy", "tolist", "__array__"})   # the values handed to numpy or Python, past the dispatcher


def kernel_only():
    """Within ``with kernel_only():`` any torch operation that computes, outside ``tb.launch``, raises
    :class:`TorchOutsideKernel` naming it and the line: allocations (``torch.empty_like``, ``torch.empty``,
    ``torch.zeros``, ...), views (``view``, ``reshape``, slicing) and device moves that keep the dtype run. A
    ``TorchDispatchMode`` (the course's :class:`~gpucourse.memory.OpObserver`) sees every operation, on any device;
    a ``TorchFunctionMode`` also refuses ``.numpy()``, ``.tolist()`` and ``np.asarray(t)``, through which numpy could
    compute unseen. Lesson 06_triton's tests run a learner's kernel function under it, since torch work before or
    after the launch (a normalisation, a conversion) is a pass over memory that the kernel's counted traffic does
    not show."""
    from torch.overrides import TorchFunctionMode

    from gpucourse.memory import OpObserver

    class HostViews(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN202
            name = getattr(func, "__name__", "")
            if not _LAUNCHER[0] and name in _HOST_VIEWS:
                raise _refusal(f"Tensor.{name.strip('_')} (the values handed to numpy or Python)")
            return func(*args, **(kwargs or {}))

    class KernelOnly(OpObserver):
        def _observe(self, func, args, kwargs):  # noqa: ANN001, ANN202
            if not _LAUNCHER[0] and _computes(func, args, kwargs):
                name = func.overloadpacket.__name__
                usually = _what(name)
                raise _refusal(f"{name} ({usually})" if usually else name)
            return func(*args, **kwargs)

        def __enter__(self):  # noqa: ANN204
            self._host_views = HostViews()
            self._host_views.__enter__()
            return super().__enter__()

        def __exit__(self, *exc) -> None:
            super().__exit__(*exc)
            self._host_views.__exit__(*exc)

    return KernelOnly()


# --------------------------------------------------------------------------- the compiler's front end

@functools.lru_cache(maxsize=1)
def _backend() -> tuple:
    """(GPUTarget, CUDABackend, options, ASTSource, ir, CompilationError) for sm_80; raises where unavailable."""
    from triton.backends.compiler import GPUTarget
    from triton.backends.nvidia.compiler import CUDABackend
    from triton.compiler import ASTSource
    from triton.compiler.errors import CompilationError

    from triton._C.libtriton import ir

    target = GPUTarget(*TARGET)
    backend = CUDABackend(target)
    options = backend.parse_options({"enable_fp_fusion": True})  # as the default; stated, so triton 3.9 is silent
    return target, backend, options, ASTSource, ir, CompilationError


def _signature(kernel: object, bound: dict[str, object]) -> tuple[dict[str, str], dict[str, object]] | None:
    """Triton's signature ({name: "*fp32", "i32", ..., "constexpr"}) and constexprs of a launch; None if an
    argument is missing (the interpreter then says which)."""
    from triton.runtime.jit import mangle_type

    signature, constexprs = {}, {}
    for param in kernel.params:
        if param.name in bound:
            value = bound[param.name]
        elif param.has_default:
            value = param.default
        else:
            return None
        if param.is_constexpr:
            signature[param.name], constexprs[param.name] = "constexpr", value
        else:
            signature[param.name] = mangle_type(value)
    return signature, constexprs


_VERDICTS: dict[tuple, FrontEnd] = {}


def front_end(kernel: object, bound: dict[str, object]) -> FrontEnd:
    """Run Triton's compiler front end on ``kernel`` (a @triton.jit function) for an sm_80 target, with the types
    of ``bound`` (argument name -> value, constexprs included): "accepted", "refused" (with the compiler's error)
    or "not checked" (this triton has no NVIDIA front end, or one whose API the course does not know)."""
    try:
        target, backend, options, ast_source, ir, compilation_error = _backend()
        described = _signature(kernel, bound)
    except Exception as error:  # no NVIDIA backend, or another API: say so, refuse nothing
        return FrontEnd("not checked", f"{type(error).__name__}: {error}")
    if described is None:
        return FrontEnd("not checked", "an argument is missing")
    signature, constexprs = described
    try:
        key = (kernel.cache_key, tuple(signature.items()), tuple((name, repr(value))
                                                                  for name, value in constexprs.items()))
    except Exception:  # a source or global the cache key cannot describe: compile without caching
        key = None
    if key in _VERDICTS:
        return _VERDICTS[key]
    try:
        source = ast_source(fn=kernel, signature=signature, constexprs=constexprs)
        context = ir.context()
        ir.load_dialects(context)
        backend.load_dialects(context)
        module = source.make_ir(target, options, backend.get_codegen_implementation(options),
                                backend.get_module_map(), context)
        del module, context
        verdict = FrontEnd("accepted")
    except compilation_error as error:
        verdict = FrontEnd("refused", _compiler_message(error))
    except Exception as error:  # the course's call no longer fits this triton: not the learner's fault
        verdict = FrontEnd("not checked", f"{type(error).__name__}: {error}")
    if key is not None:
        _VERDICTS[key] = verdict
    return verdict


def _compiler_message(error: BaseException) -> str:
    """The compiler's error as it prints it (the source lines, a caret, the reason), without empty lines."""
    lines = [line for line in str(error).splitlines() if line.strip()]
    return "\n".join(lines[-8:])


def _hint(message: str) -> str:
    """What usually causes the compiler's ``message`` (its last line, the reason), in one sentence."""
    message = message.splitlines()[-1] if message else ""
    if "Loop-carried variable" in message:
        return ("a variable updated in a loop must keep one type and shape on a GPU: start an accumulator as "
                "tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32), what tl.dot returns, not 0.0 or float16 (the "
                "interpreter, running numpy, let it change)")
    if "Input shapes should have" in message:
        return ("tl.dot needs tiles at least as large as the message says: along K, 8 for float32 and 16 for "
                "16-bit types (16 for both in older triton, such as 3.6); use a larger BLOCK_K")
    if "constexpr" in message:
        return ("tl.arange's bounds and block shapes must be compile-time constants: declare the argument "
                "BLOCK: tl.constexpr and pass a power of two")
    if "Expected dtype" in message:
        return ("tl.exp, tl.log, tl.sqrt, tl.rsqrt and their kin take float32 or float64 only: convert a 16-bit "
                "block with .to(tl.float32) first")
    return "fix the line the caret (^) points at: a GPU's compiler refuses it"


def require_compiles(kernel: object, bound: dict[str, object]) -> FrontEnd:
    """Raise :class:`CompileError` if Triton's front end refuses ``kernel`` with these arguments; else its verdict."""
    verdict = front_end(kernel, bound)
    if verdict.refused:
        raise CompileError(f"Triton's compiler refuses {kernel.fn.__name__} for {TARGET_NAME}:\n"
                           f"{verdict.message}\nHint: {_hint(verdict.message)}")
    return verdict


__all__ = ["CompileError", "FrontEnd", "LaunchRefused", "MixedDevices", "TARGET", "TorchOutsideKernel",
           "check_devices", "default_device_meta", "front_end", "kernel_only", "launcher_at_work",
           "require_compiles"]
