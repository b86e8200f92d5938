"""Training memory: the bytes of weights, gradients and optimizer state, what autograd saves, peaks, accumulation, OOM messages.

Taught in lesson 13_bigger_models. PyTorch is imported lazily.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpucourse._validate import non_negative_number, positive_int
from gpucourse.mixed_precision import _device_type, _dtype_name

# --------------------------------------------------------------------------- memory

@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes a training run holds: weights, gradients, optimizer state, saved activations (0 where not measured)."""

    parameters: int
    weights: int
    gradients: int
    optimizer_state: int
    activations: int = 0

    @property
    def total(self) -> int:
        """Sum of the four parts, in bytes."""
        return self.weights + self.gradients + self.optimizer_state + self.activations

    def per_parameter(self) -> dict[str, float]:
        """Each part in bytes per model parameter."""
        if not self.parameters:
            raise ValueError("the model has no parameters")
        return {key: getattr(self, key) / self.parameters
                for key in ("weights", "gradients", "optimizer_state", "activations", "total")}


def _nbytes(tensor) -> int:
    """Bytes of a tensor's elements."""
    return tensor.numel() * tensor.element_size()


def tensor_memory(model: object, optimizer: object = None, activations: int = 0) -> MemoryBreakdown:
    """Measure the bytes of a model's weights, its gradients and the optimizer's state tensors as they are now."""
    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(f"optimizer must be a torch.optim.Optimizer or None, got {type(optimizer).__name__}")
    if isinstance(activations, bool) or not isinstance(activations, numbers.Integral) or activations < 0:
        raise ValueError(f"activations must be an int >= 0 (bytes), got {activations!r}")
    params = list(model.parameters())
    state = 0
    if optimizer is not None:
        for per_param in optimizer.state.values():
            state += sum(_nbytes(v) for v in per_param.values() if isinstance(v, torch.Tensor) and v.dim() > 0)
    return MemoryBreakdown(parameters=sum(p.numel() for p in params), weights=sum(_nbytes(p) for p in params),
                           gradients=sum(_nbytes(p.grad) for p in params if p.grad is not None),
                           optimizer_state=state, activations=int(activations))


def saved_tensor_bytes(fn: Callable[[], object], exclude: Iterable[object] = ()) -> dict[str, int]:
    """Bytes autograd saves for the backward pass while ``fn()`` runs, by dtype; tensors sharing ``exclude``'s storage are left out."""
    import torch

    if not callable(fn):
        raise TypeError(f"fn must be callable (e.g. lambda: loss_fn(model(x), y)), got {type(fn).__name__}")
    if isinstance(exclude, (str, bytes)) or not isinstance(exclude, Iterable):
        raise TypeError(f"exclude must be an iterable of tensors (e.g. model.parameters()), got {exclude!r}")
    skip = set()
    for tensor in exclude:
        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"exclude must hold tensors, got {type(tensor).__name__}")
        skip.add(tensor.untyped_storage().data_ptr())
    seen: dict[int, tuple[str, int]] = {}

    def pack(tensor):
        """Note the storage of each saved tensor once (views of one storage are one allocation)."""
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in skip and storage.data_ptr() != 0:
            seen[storage.data_ptr()] = (_dtype_name(tensor.dtype), storage.nbytes())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        result = fn()
    del result  # frees the graph, and with it the saved tensors
    by_dtype: dict[str, int] = {}
    for dtype, nbytes in seen.values():
        by_dtype[dtype] = by_dtype.get(dtype, 0) + nbytes
    return by_dtype


def peak_memory_bytes(fn: Callable[[], object], device: object) -> int:
    """Peak bytes the CUDA caching allocator holds for tensors while ``fn()`` runs (CUDA devices only)."""
    import torch

    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if _device_type(device) != "cuda":
        raise ValueError(f"device must be a CUDA device (peak memory is read from CUDA's allocator), got {device!r}; "
                         "on a CPU use tensor_memory() and saved_tensor_bytes()")
    if not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but no CUDA GPU is visible")
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = torch.cuda.memory_allocated(device)
    fn()
    torch.cuda.synchronize(device)
    return int(torch.cuda.max_memory_allocated(device) - start)


def accumulate_gradients(model: object, x: object, y: object, micro_batch_size: int,
                         loss_fn: Callable | None = None) -> float:
    """Add to the model's .grad the gradient of the mean loss over (x, y), computed micro-batch by micro-batch.

    Each micro-batch's mean loss is weighted by its share of the batch, so the gradients add up to those of one
    backward pass over the whole batch, while only one micro-batch's activations are alive at a time. Returns the
    batch's mean loss. The caller zeroes the gradients before and takes the optimizer step after.
    """
    import torch
    import torch.nn.functional as F

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(x, torch.Tensor) or not isinstance(y, torch.Tensor) or len(x) != len(y) or len(x) == 0:
        raise ValueError("x and y must be tensors with the same, non-zero number of examples")
    size = positive_int("micro_batch_size", micro_batch_size)
    loss_fn = F.cross_entropy if loss_fn is None else loss_fn
    if not callable(loss_fn):
        raise TypeError(f"loss_fn must be callable, got {type(loss_fn).__name__}")
    total = 0.0
    for start in range(0, len(x), size):
        share = len(x[start:start + size]) / len(x)
        loss = loss_fn(model(x[start:start + size]), y[start:start + size]) * share
        loss.backward()
        total += loss.item()
    return total


_OOM_FIELDS = {
    "tried_to_allocate": r"Tried to allocate ([\d.]+ [KMGT]?i?B)",
    "total_capacity": r"total capacity of ([\d.]+ [KMGT]?i?B)",
    "free": r"of which ([\d.]+ [KMGT]?i?B) is free",
    "allocated_by_pytorch": r"([\d.]+ [KMGT]?i?B) is allocated by PyTorch",
    "reserved_unallocated": r"([\d.]+ [KMGT]?i?B) is reserved by PyTorch but unallocated",
}
_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "KB": 10**3, "MB": 10**6, "GB": 10**9}


def parse_oom_message(message: str) -> dict[str, int]:
    """The byte counts in a PyTorch CUDA out-of-memory message (those it contains), keyed by what each one means."""
    import re

    if not isinstance(message, str):
        raise TypeError(f"message must be a str (str(error) of a torch.OutOfMemoryError), got {type(message).__name__}")
    found = {}
    for key, pattern in _OOM_FIELDS.items():
        match = re.search(pattern, message)
        if match:
            number, unit = match.group(1).split()
            found[key] = round(float(number) * _UNITS[unit])
    if not found:
        raise ValueError("message holds none of the numbers of a CUDA out-of-memory error ('Tried to allocate ...')")
    return found


# --------------------------------------------------------------------------- peak memory of torch code, on any device

def _format_bytes(n: float) -> str:
    """'1.50 MiB' in PyTorch's out-of-memory style."""
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.2f} {unit}"
    return f"{int(n)} B"


def _dispatch_mode_base():
    """torch's TorchDispatchMode (imported lazily)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    return TorchDispatchMode


def _tensors(tree: object) -> list:
    """The tensors in a nested structure of arguments or results."""
    import torch
    from torch.utils._pytree import tree_flatten

    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


class OpObserver:
    """Base of the course's instruments that watch every torch operation run inside ``with`` (any device): a
    ``TorchDispatchMode`` hands each operation to :meth:`_observe`, which runs it and notes what it wants."""

    _mode = None

    def _observe(self, func: Callable, args: tuple, kwargs: dict) -> object:
        """Run one operation and return its result (subclasses record something around the call)."""
        return func(*args, **kwargs)

    def __enter__(self):
        observer = self

        class _Mode(_dispatch_mode_base()):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                return observer._observe(func, args, kwargs or {})

        self._mode = _Mode()
        self._mode.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._mode.__exit__(*exc)
        self._mode = None


class PeakMemory(OpObserver):
    """Count the bytes of every tensor storage created inside ``with PeakMemory() as m:`` while it lives (lesson
    13_bigger_models): ``m.current`` now, ``m.peak`` the most at any moment. Tensors that existed before (weights,
    inputs) are not counted. Works on any device, the CPU included: a ``TorchDispatchMode`` sees every operation,
    backward passes and recomputations included, and a weak reference tells when each storage is freed.
    """

    def __init__(self) -> None:
        self.current = 0
        self.peak = 0
        self._live: dict[int, tuple[object, int]] = {}

    def _sweep(self) -> None:
        """Forget the storages that have been freed."""
        for key in [k for k, (ref, _) in self._live.items() if ref.expired()]:
            self.current -= self._live.pop(key)[1]

    def _allocated(self, tensors: list, inputs: set[int]) -> int:
        """Note the new storages among ``tensors`` (views and in-place results of ``inputs`` are not new)."""
        from torch.multiprocessing.reductions import StorageWeakRef

        added = 0
        for tensor in tensors:
            storage = tensor.untyped_storage()
            key = storage.data_ptr()
            if key and key not in self._live and key not in inputs:
                self._live[key] = (StorageWeakRef(storage), storage.nbytes())
                added += storage.nbytes()
        self.current += added
        self.peak = max(self.peak, self.current)
        return added

    def _check(self, added: int) -> None:
        """Hook for subclasses: called after each operation with the bytes it allocated."""

    def _observe(self, func: Callable, args: tuple, kwargs: dict) -> object:
        """Run one operation, then count the storages it created and forget the freed ones."""
        inputs = {t.untyped_storage().data_ptr() for t in _tensors((args, kwargs))}
        out = func(*args, **kwargs)
        self._sweep()
        self._check(self._allocated(_tensors(out), inputs))
        return out

    def __exit__(self, *exc) -> None:
        super().__exit__(*exc)
        self._sweep()

    def live_bytes(self, settle_s: float = 3.0, agree_s: float = 0.2) -> int:
        """Bytes of the counted storages still alive once transient holders let go: reference cycles are collected,
        and a finished collective's work handle, which a communication thread may hold for a moment (longer on a
        loaded machine), is waited for: re-read every 10 ms until the reads have agreed for ``agree_s``, or for at
        most ``settle_s``; the smallest read wins (kept bytes never shrink by themselves)."""
        import gc
        import time

        deadline = time.monotonic() + non_negative_number("settle_s", settle_s)
        agree_s = non_negative_number("agree_s", agree_s)
        reads: list[int] = []
        since = time.monotonic()
        while True:
            gc.collect()
            self._sweep()
            if reads and self.current != reads[-1]:
                since = time.monotonic()
            reads.append(self.current)
            now = time.monotonic()
            if (len(reads) >= 3 and now - since >= agree_s) or now >= deadline:
                return min(reads)
            time.sleep(0.01)


class MatmulFlops(OpObserver):
    """Count the FLOPs of the matrix multiplies (and convolutions, attention) run inside ``with MatmulFlops() as m:``,
    backward passes and checkpoint recomputations included, with the formulas of ``torch.utils.flop_counter``: a
    plain dispatch mode, so it nests with :class:`MemoryCap` and holds no tensor (``FlopCounterMode``'s module
    tracker keeps gradients alive longer, which moves a step's peak)."""

    def __init__(self) -> None:
        self.total = 0

    def _observe(self, func: Callable, args: tuple, kwargs: dict) -> object:
        """Run one operation; add its FLOPs if torch's flop counter has a formula for it."""
        from torch.utils.flop_counter import flop_registry

        out = func(*args, **kwargs)
        formula = flop_registry.get(func._overloadpacket)
        if formula is not None:
            self.total += int(formula(*args, **kwargs, out_val=out))
        return out


def peak_bytes(fn: Callable[[], object]) -> int:
    """Peak bytes of the tensors ``fn()`` creates while it runs (``PeakMemory``), on any device (lesson 13_bigger_models)."""
    if not callable(fn):
        raise TypeError(f"fn must be callable (e.g. lambda: loss_fn(model(x), y).backward()), got {type(fn).__name__}")
    with PeakMemory() as tracker:
        fn()
    return tracker.peak


def forward_memory(fn: Callable[[], object], device: object) -> tuple[int, int]:
    """(bytes kept, peak bytes) of the tensors ``fn()`` creates on ``device`` (lesson 13_bigger_models): kept is what is
    still alive once it has returned, its result included; peak the most at any moment while it ran. On a CUDA device
    from the caching allocator's own counters (``torch.cuda.memory_allocated``, ``reset_peak_memory_stats``,
    ``max_memory_allocated``: whole blocks, rounded up to 512 bytes); on any other device from :class:`PeakMemory`."""
    import torch

    if not callable(fn):
        raise TypeError(f"fn must be callable (e.g. lambda: layer(x)), got {type(fn).__name__}")
    if _device_type(device) == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(f"device={device!r} but no CUDA GPU is visible")
        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        start = torch.cuda.memory_allocated(device)
        result = fn()
        torch.cuda.synchronize(device)
        kept = torch.cuda.memory_allocated(device) - start
        peak = torch.cuda.max_memory_allocated(device) - start
        del result
        return int(kept), int(peak)
    with PeakMemory() as tracker:
        result = fn()
    kept, peak = tracker.current, tracker.peak
    del result
    return kept, peak


class MemoryCap(PeakMemory):
    """A simulated device with ``capacity`` bytes for new tensors (lesson 13_bigger_models): an operation that takes the
    live bytes past it raises ``torch.OutOfMemoryError``, with a message in PyTorch's format marked as simulated."""

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = positive_int("capacity", capacity)

    def _allocated(self, tensors: list, inputs: set[int]) -> int:
        """As in PeakMemory, but an allocation that does not fit leaves ``peak`` as it was: as on a GPU, it never
        held its bytes (``peak`` never exceeds ``capacity``)."""
        peak = self.peak
        added = super()._allocated(tensors, inputs)
        if self.current > self.capacity:
            self.peak = peak
        return added

    def _check(self, added: int) -> None:
        import torch

        if self.current > self.capacity:
            before = self.current - added
            raise torch.OutOfMemoryError(
                f"Simulated out of memory (gpucourse.memory.MemoryCap, not a real GPU). Tried to allocate "
                f"{_format_bytes(added)}. Simulated device has a total capacity of {_format_bytes(self.capacity)} "
                f"of which {_format_bytes(max(self.capacity - before, 0))} is free. Of the allocated memory "
                f"{_format_bytes(before)} is allocated by PyTorch, and 0 B is reserved by PyTorch but unallocated.")


def largest_micro_batch(try_step: Callable[[int], object], batch_size: int) -> int:
    """The largest micro-batch size in [1, batch_size] for which ``try_step(size)`` runs without
    ``torch.OutOfMemoryError`` (0 if none does), found by bisection (lesson 13_bigger_models); other errors propagate."""
    import torch

    if not callable(try_step):
        raise TypeError(f"try_step must be callable, got {type(try_step).__name__}")
    batch_size = positive_int("batch_size", batch_size)

    def fits(size: int) -> bool:
        try:
            try_step(size)
        except torch.OutOfMemoryError:
            return False
        return True

    low, high = 0, batch_size  # low fits (0 trivially); the answer lies in [low, high]
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low


def checkpointed_forward(blocks: Iterable[object], h: object, every: int = 1, residual: bool = False):
    """Run ``h`` through ``blocks``, each group of ``every`` consecutive blocks under one
    ``torch.utils.checkpoint.checkpoint`` (lesson 13_bigger_models); ``residual=True`` computes h = h + block(h)."""
    from torch.utils.checkpoint import checkpoint

    blocks = list(blocks)
    every = positive_int("every", every)

    def segment(group):
        def run(x):
            for block in group:
                x = x + block(x) if residual else block(x)
            return x
        return run

    for start in range(0, len(blocks), every):
        h = checkpoint(segment(blocks[start:start + every]), h, use_reentrant=False)
    return h


def layer_activation_bytes(s: int, b: int, h: int, a: int, bytes_per_value: int = 2, mask_bytes: int = 1,
                           dropout: bool = True) -> int:
    """Bytes one pre-norm transformer layer keeps for its backward pass (lesson 13_bigger_models), its input included,
    LayerNorm's per-token statistics not: the count of Korthikanti et al. (2022), section 4.1, for ``s`` tokens, ``b``
    sequences, hidden size ``h``, ``a`` heads, activations of ``bytes_per_value`` bytes and dropout masks of
    ``mask_bytes`` bytes; s*b*h*(34 + 5*a*s/h) with the defaults. ``dropout=False``: a layer with no dropout."""
    s, b, h, a = (positive_int(name, value) for name, value in (("s", s), ("b", b), ("h", h), ("a", a)))
    value, mask = positive_int("bytes_per_value", bytes_per_value), positive_int("mask_bytes", mask_bytes)
    per_token = 16 * value + (2 * mask if dropout else 0)        # LayerNorms, Q K V, projection, MLP (+ 2 masks)
    per_score = value + ((value + mask) if dropout else 0)       # softmax output (+ dropout's output and mask)
    return s * b * h * per_token + a * s * s * b * per_score


__all__ = ["MemoryBreakdown", "tensor_memory", "saved_tensor_bytes", "peak_memory_bytes", "accumulate_gradients",
           "parse_oom_message", "PeakMemory", "peak_bytes", "forward_memory", "MemoryCap", "largest_micro_batch",
           "checkpointed_forward", "layer_activation_bytes"]
