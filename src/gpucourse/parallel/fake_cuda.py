"""Simulated GPUs in the processes ``torchrun`` starts (lesson 14's Exercise 3 graded on a machine without enough GPUs).

:func:`gpucourse.parallel.run_script` with ``simulate_gpus`` copies this file as ``sitecustomize.py`` into a
temporary folder put first on the workers' ``PYTHONPATH``, sets :data:`RECORD_ENV` to a folder and :data:`COUNT_ENV`
to the GPUs each node has (default: one per process, ``LOCAL_WORLD_SIZE``). In a process that torchrun started
(``LOCAL_RANK`` is set; torchrun's own agent is left alone) it then pretends that the node has that many GPUs, for
the device choice and tensor placement only; whatever a script asks of them runs on the CPU:

- ``torch.cuda.is_available()`` is True and ``torch.cuda.device_count()`` the node's count (the same for
  ``torch.accelerator``); ``set_device``, ``current_device``, ``torch.cuda.device(k)``, ``synchronize``,
  ``get_device_name``/``_properties``/``_capability`` (a nominal device: its name says it is simulated, 16 GiB),
  the memory queries (0 bytes used: nothing is on a GPU) and ``pin_memory`` answer as a real node's would;
- the CUDA devices a script uses are recorded and replaced by the CPU: ``torch.cuda.set_device``, ``.to``/``.cuda``
  of tensors and modules, any ``device=`` of a torch function (factories, ``as_tensor``, ``*_like``; a
  ``TorchFunctionMode``), ``torch.set_default_device``, ``torch.load``'s ``map_location``, DDP's ``device_ids`` and
  ``init_process_group``'s ``device_id``; the backend asked of ``init_process_group`` is recorded, and ``nccl``
  becomes ``gloo``: the job trains on the CPU exactly as it would without GPUs;
- an index the node does not have raises CUDA's "invalid device ordinal" (recorded first);
- tensors remember where they would live: a tensor moved to or made on ``cuda:k`` (under a default device too; a
  module's parameters and buffers, a ``Parameter`` of a tagged tensor, ``to_empty``) is tagged ``k``, every torch function's output takes its inputs' device, and ``.device``, ``.is_cuda`` and
  ``get_device()`` report it. An operation mixing ``cuda:k`` with another GPU or with a CPU tensor (not a 0-dim one)
  raises PyTorch's "Expected all tensors to be on the same device"; ``.numpy()`` of a GPU tensor is refused; DDP's
  own ``device_ids`` check runs against these devices (and DDP moves its inputs to ``device_ids[0]``); with NCCL
  asked for, a CPU module or a collective on a CPU tensor is refused as NCCL would (``dist.is_nccl_available()`` is
  True, as on a GPU node).

CUDA streams, events and ``torch.cuda.amp`` are not simulated. Each rank appends what it did, one JSON object a line,
to ``<RECORD_ENV folder>/rank<RANK>.jsonl`` as it happens (a rank killed by torchrun keeps what it recorded). Only
the standard library and torch are imported here: this file runs before anything else in the worker.
"""

from __future__ import annotations

import json
import os
import threading
import weakref
from types import SimpleNamespace

RECORD_ENV = "GPUCOURSE_SIMULATED_GPUS"
COUNT_ENV = "GPUCOURSE_SIMULATED_GPU_COUNT"
MEMORY = 16 * 2**30  # the nominal memory of a simulated GPU (nothing is allocated on it)


_SEEN: set[str] = set()


def _record(event: str, **fields) -> None:
    """Append one event to this rank's record file (once: a training loop moves every batch to its device)."""
    line = json.dumps({"event": event, **fields})
    if line in _SEEN:
        return
    _SEEN.add(line)
    path = os.path.join(os.environ[RECORD_ENV], f"rank{os.environ.get('RANK', '0')}.jsonl")
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


_TAGS: dict[int, tuple[weakref.ref, int]] = {}  # id(tensor): (a weak reference to it, its simulated GPU)


def tag_of(tensor) -> int | None:
    """The simulated GPU a tensor lives on (None: the CPU)."""
    entry = _TAGS.get(id(tensor))
    return entry[1] if entry is not None and entry[0]() is tensor else None


def set_tag(tensor, index: int | None) -> None:
    """Put a tensor on simulated GPU ``index`` (None: the CPU)."""
    key = id(tensor)
    if index is None:
        if tag_of(tensor) is not None:
            del _TAGS[key]
        return

    def forget(ref: weakref.ref) -> None:
        if _TAGS.get(key, (None,))[0] is ref:
            del _TAGS[key]

    _TAGS[key] = (weakref.ref(tensor, forget), index)


def install() -> None:
    """Fake the node's GPUs in this process (see the module's docstring)."""
    import torch
    import torch.distributed as dist
    from torch.distributed import distributed_c10d
    from torch.nn.parallel import DistributedDataParallel
    from torch.overrides import TorchFunctionMode
    from torch.utils._device import DeviceContext

    count = int(os.environ.get(COUNT_ENV) or os.environ["LOCAL_WORLD_SIZE"])
    current = [0]

    def index_of(device) -> int | None:
        """The CUDA index a device argument names (None: not CUDA), checked against the node's count."""
        if isinstance(device, int) and not isinstance(device, bool):
            index = device
        elif isinstance(device, (str, torch.device)):
            device = torch.device(device)
            if device.type != "cuda":
                return None
            index = current[0] if device.index is None else device.index
        else:
            return None
        if not 0 <= index < count:
            _record("invalid_device", index=index)  # before raising: what a real node refuses is graded too
            raise RuntimeError(f"CUDA error: invalid device ordinal (cuda:{index}; this node has {count} GPUs, "
                               f"cuda:0 to cuda:{count - 1})")
        return index

    def set_device(device) -> None:
        index = index_of(device)
        if threading.current_thread() is threading.main_thread():  # not a DataLoader's pin_memory thread's own call
            _record("set_device", index=index)
        if index is not None:
            current[0] = index

    def destination(kind: str, args: tuple, kwargs: dict) -> tuple[bool, int | None, tuple, dict]:
        """A ``.to`` call's device (recorded if CUDA, the CPU put in its place): whether it names one, its GPU."""
        args, kwargs = list(args), dict(kwargs)
        if kwargs.get("device") is not None:
            index = index_of(kwargs["device"])
            if index is not None:
                _record(kind, index=index)
                kwargs["device"] = "cpu"
            return True, index, tuple(args), kwargs
        if args and isinstance(args[0], torch.Tensor):  # .to(other): other's device and dtype
            return True, tag_of(args[0]), tuple(args), kwargs
        if args and args[0] is not None and not isinstance(args[0], torch.dtype):
            index = index_of(args[0])
            if index is not None:
                _record(kind, index=index)
                args[0] = "cpu"
            return True, index, tuple(args), kwargs
        return False, None, tuple(args), kwargs

    tensor_to, module_to, tensor_cpu, module_cpu = torch.Tensor.to, torch.nn.Module.to, torch.Tensor.cpu, \
        torch.nn.Module.cpu

    def placed(tensor, out, index: int | None):
        """``out`` (what the CPU op gave for ``tensor``) on simulated device ``index``: a copy when the device
        changes, as a real move makes one."""
        if index != tag_of(tensor) and out is tensor:
            with torch._C.DisableTorchFunction():
                out = out.clone()
        set_tag(out, index)
        return out

    def tensor_to_cpu(self, *args, **kwargs):
        named, index, args, kwargs = destination("tensor_to", args, kwargs)
        with torch._C.DisableTorchFunction():  # not through CudaToCpu: the device is set here
            out = tensor_to(self, *args, **kwargs)
        return placed(self, out, index if named else tag_of(self))

    def place_module(module, index: int | None) -> None:
        for tensor in [*module.parameters(), *module.buffers()]:
            set_tag(tensor, index)

    def module_to_cpu(self, *args, **kwargs):
        named, index, args, kwargs = destination("module_to", args, kwargs)
        with torch._C.DisableTorchFunction():  # its tensors' moves are tagged below; nothing of it is mixed
            out = module_to(self, *args, **kwargs)
        if named:
            place_module(self, index)
        return out

    def cuda_index(device) -> int:
        return current[0] if device is None else index_of(torch.device("cuda", device) if isinstance(device, int)
                                                          else device)

    def tensor_cuda(self, device=None, non_blocking=False, **kwargs):
        index = cuda_index(device)
        _record("tensor_to", index=index)
        return placed(self, self, index)

    def module_cuda(self, device=None):
        index = cuda_index(device)
        _record("module_to", index=index)
        place_module(self, index)
        return self

    def tensor_to_host(self, *args, **kwargs):
        with torch._C.DisableTorchFunction():
            out = tensor_cpu(self, *args, **kwargs)
        return placed(self, out, None)

    to_empty = torch.nn.Module.to_empty

    def module_to_empty(self, *, device, recurse: bool = True):
        index = index_of(device) if device is not None else None
        if index is not None:
            _record("module_to", index=index)
        with torch._C.DisableTorchFunction():
            out = to_empty(self, device="cpu" if index is not None else device, recurse=recurse)
        for tensor in [*self.parameters(recurse=recurse), *self.buffers(recurse=recurse)]:
            set_tag(tensor, index)
        return out

    parameter_new = torch.nn.Parameter.__new__

    def new_parameter(cls, data=None, requires_grad=True):  # a new tensor object: it keeps its data's device
        if data is None:
            data = torch.empty(0)  # (under a simulated default device: on its GPU)
        out = parameter_new(cls, data, requires_grad)
        set_tag(out, tag_of(data))
        return out

    def module_to_host(self):
        with torch._C.DisableTorchFunction():
            out = module_cpu(self)
        place_module(self, None)
        return out

    init_process_group, ddp_init = dist.init_process_group, DistributedDataParallel.__init__

    asked = [""]  # the backend init_process_group was asked for

    def init_on_gloo(backend=None, *args, **kwargs):
        device_id = kwargs.pop("device_id", None)
        _record("init_process_group", backend=backend,
                device_id=None if device_id is None else index_of(device_id))
        asked[0] = str(backend or "").lower()
        return init_process_group("gloo", *args, **kwargs)

    def refuse_cpu(tensors) -> None:
        """NCCL alone (no gloo for the CPU) refuses CPU tensors, as a real NCCL group does."""
        if asked[0] == "nccl" and any(isinstance(t, torch.Tensor) and tag_of(t) is None for t in tensors):
            raise RuntimeError("No backend type associated with device type cpu")

    def ddp_on_cpu(self, module, device_ids=None, output_device=None, *args, **kwargs):
        indices = None if device_ids is None else [index_of(device) for device in device_ids]
        _record("ddp", device_ids=indices)
        if not device_ids:  # (with device_ids, DDP's own check below refuses a CPU module first)
            refuse_cpu(list(module.parameters()))
        # DDP's own checks see the simulated devices (.device below): device_ids with a CPU module is refused
        ddp_init(self, module, indices, None if output_device is None else index_of(output_device), *args, **kwargs)
        self.use_side_stream_for_tensor_copies = False  # no CUDA streams: inputs move with .to(device_ids[0])

    def collective(function):
        def checked(tensor, *args, **kwargs):
            refuse_cpu(tensor if isinstance(tensor, (list, tuple)) else [tensor])
            return function(tensor, *args, **kwargs)
        return checked

    from torch.utils._device import _device_constructors
    from torch.utils._pytree import tree_leaves

    any_device = {torch.Tensor.copy_, torch.Tensor.__getitem__, torch.Tensor.__setitem__, torch.Tensor.set_}
    default = [None]  # the simulated GPU of torch.set_default_device / `with torch.device(...)`

    class CudaToCpu(TorchFunctionMode):
        """Every torch function's ``device=`` naming a CUDA device (factories, as_tensor, *_like, new_*): the CPU,
        the output tagged with that GPU; otherwise outputs take their inputs' device, and mixed devices raise."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            named = kwargs.get("device") is not None
            index = index_of(kwargs["device"]) if named else None
            if index is not None:
                _record("created", index=index)
                kwargs = {**kwargs, "device": "cpu"}
            if not named and default[0] is not None and func in _device_constructors():
                # torch.set_default_device's DeviceContext sits below this mode: the CPU given in its place here
                named, index = True, index_of(default[0])
                kwargs = {**kwargs, "device": "cpu"}
            devices = set()
            for value in tree_leaves((args, kwargs)):
                if isinstance(value, torch.Tensor):
                    tag = tag_of(value)
                    if tag is not None or value.dim() > 0:  # a 0-dim CPU tensor goes with any device
                        devices.add(tag)
            name = getattr(func, "__name__", "")
            if len(devices) > 1 and func not in any_device and name not in ("__get__", "__set__", "__delete__"):
                found = ["cpu" if d is None else f"cuda:{d}" for d in sorted(devices, key=lambda d: (d is None, d))]
                raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                                   f"{found[0]} and {found[1]}!")
            if name == "numpy" and devices - {None}:
                raise TypeError(f"can't convert cuda:{min(devices - {None})} device type tensor to numpy. Use "
                                f"Tensor.cpu() to copy the tensor to host memory first.")
            out = func(*args, **kwargs)
            if not named and func in any_device:  # indexing, copy_: the tensor indexed or written keeps its device
                index = tag_of(args[0]) if args else None
            elif not named:
                index = next(iter(devices)) if len(devices) == 1 else None
                if index is None:
                    return out
            for value in tree_leaves(out):
                if isinstance(value, torch.Tensor):
                    set_tag(value, index)
            return out

    def on_cpu(location):
        """torch.load's map_location (a device or a dict of them) with each CUDA device recorded and made the CPU."""
        if isinstance(location, dict):
            return {key: on_cpu(value) for key, value in location.items()}
        if isinstance(location, (str, torch.device)) and index_of(location) is not None:
            _record("load", index=index_of(location))
            return "cpu"
        return location

    load, default_device = torch.load, DeviceContext.__init__

    def load_on_cpu(f, *args, **kwargs):
        location = args[0] if args else kwargs.get("map_location")
        index = index_of(location) if isinstance(location, (str, torch.device, int)) else None
        if args:
            args = (on_cpu(args[0]),) + args[1:]
        if "map_location" in kwargs:
            kwargs["map_location"] = on_cpu(kwargs["map_location"])
        loaded = load(f, *args, **kwargs)
        if index is not None:
            for value in tree_leaves(loaded):
                if isinstance(value, torch.Tensor):
                    set_tag(value, index)
        return loaded

    def default_on_cpu(self, device) -> None:  # torch.set_default_device and `with torch.device(...)`
        # The CUDA device is kept: `with torch.device(...)` pushes this mode above CudaToCpu, whose device= branch
        # then sees it; set_default_device puts it below, and CudaToCpu fills in the default (enter_default) first.
        index = index_of(device)
        self.simulated = None if index is None else torch.device(device)  # a bare "cuda": the current GPU at use
        if index is not None:
            _record("default_device", index=index)
        default_device(self, device)

    default_enter, default_exit = DeviceContext.__enter__, DeviceContext.__exit__

    def enter_default(self):
        self.previous_simulated, default[0] = default[0], getattr(self, "simulated", None)
        return default_enter(self)

    def exit_default(self, *exc):
        default[0] = getattr(self, "previous_simulated", None)
        return default_exit(self, *exc)

    def which(device=None) -> int | None:
        """The index a torch.cuda query names (the current GPU by default)."""
        return current[0] if device is None else index_of(device)

    def nothing(device=None) -> None:  # synchronize, empty_cache, reset_peak_memory_stats: nothing to wait for
        which(device)

    def no_bytes(device=None) -> int:  # memory_allocated, memory_reserved and their peaks: nothing is on a GPU
        which(device)
        return 0

    def properties(device=None):
        which(device)
        return SimpleNamespace(name="simulated GPU (runs on the CPU)", major=8, minor=0, total_memory=MEMORY,
                               multi_processor_count=1, is_integrated=False)

    def exchange(device) -> int:  # torch.cuda.device(k) as a context: set k, return the previous GPU
        previous = current[0]
        if device is not None and device >= 0:
            current[0] = index_of(device)
        return previous

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: count
    torch.cuda.set_device = set_device
    torch.cuda.current_device = lambda: current[0]
    torch.cuda._exchange_device = torch.cuda._maybe_exchange_device = exchange
    torch.cuda.synchronize = torch.cuda.reset_peak_memory_stats = torch.cuda.empty_cache = nothing
    torch.cuda.get_device_properties = properties
    torch.cuda.get_device_name = lambda device=None: properties(device).name
    torch.cuda.get_device_capability = lambda device=None: (properties(device).major, properties(device).minor)
    torch.cuda.mem_get_info = lambda device=None: (properties(device).total_memory,) * 2
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved"):
        setattr(torch.cuda, name, no_bytes)
    torch.Tensor.pin_memory = lambda self, device=None: self  # no page-locked memory without a real GPU
    torch.load, DeviceContext.__init__ = load_on_cpu, default_on_cpu
    CudaToCpu().__enter__()  # for the rest of the process (its main thread: where a script makes its tensors)
    torch.accelerator.is_available = lambda: True
    torch.accelerator.device_count = lambda: count
    torch.accelerator.current_accelerator = lambda check_available=False: torch.device("cuda")
    torch.accelerator.set_device_index = torch.accelerator.set_device_idx = set_device
    torch.accelerator.current_device_index = torch.accelerator.current_device_idx = lambda: current[0]
    torch.Tensor.to, torch.nn.Module.to = tensor_to_cpu, module_to_cpu
    torch.Tensor.cuda, torch.nn.Module.cuda = tensor_cuda, module_cuda
    torch.Tensor.cpu, torch.nn.Module.cpu = tensor_to_host, module_to_host
    torch.nn.Module.to_empty, torch.nn.Parameter.__new__ = module_to_empty, staticmethod(new_parameter)
    DeviceContext.__enter__, DeviceContext.__exit__ = enter_default, exit_default
    real_device = torch._C.TensorBase.device.__get__

    def device_of(self) -> torch.device:
        index = tag_of(self)
        return real_device(self) if index is None else torch.device("cuda", index)

    torch.Tensor.device = property(device_of)
    torch.Tensor.is_cuda = property(lambda self: tag_of(self) is not None)
    torch.Tensor.get_device = lambda self: -1 if tag_of(self) is None else tag_of(self)
    dist.init_process_group = init_on_gloo
    os.environ["PYTORCH_DDP_USE_SIDE_STREAM"] = "0"
    DistributedDataParallel.__init__ = ddp_on_cpu
    for name in ("all_reduce", "broadcast", "reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter_tensor",
                 "gather", "scatter", "send", "recv", "isend", "irecv"):
        setattr(dist, name, collective(getattr(dist, name)))
    backend_available = dist.is_backend_available
    dist.is_nccl_available = distributed_c10d.is_nccl_available = lambda: True  # a GPU node's torch has NCCL
    dist.is_backend_available = distributed_c10d.is_backend_available = \
        lambda backend: str(backend).lower() == "nccl" or backend_available(backend)
    _record("start", rank=int(os.environ["RANK"]), local_rank=int(os.environ["LOCAL_RANK"]), gpus=count)


def read_records(folder: str | os.PathLike) -> dict[int, list[dict]]:
    """Each rank's recorded events (by RANK), in the order they happened."""
    from pathlib import Path

    records = {}
    for path in sorted(Path(folder).glob("rank*.jsonl")):
        records[int(path.stem.removeprefix("rank"))] = [json.loads(line) for line in
                                                        path.read_text(encoding="utf-8").splitlines() if line]
    return records


if __name__ == "sitecustomize" and os.environ.get(RECORD_ENV) and "LOCAL_RANK" in os.environ:
    install()
