"""Simulated GPUs in the processes ``torchrun`` starts (lesson 14's Exercise 3 graded on a machine without enough GPUs).

:func:`gpucourse.parallel.run_script` with ``simulate_gpus`` copies this file as ``sitecustomize.py`` into a
temporary folder put first on the workers' ``PYTHONPATH``, sets :data:`RECORD_ENV` to a folder and :data:`COUNT_ENV`
to the GPUs each node has (default: one per process, ``LOCAL_WORLD_SIZE``). In a process that torchrun started
(``LOCAL_RANK`` is set; torchrun's own agent is left alone) it then pretends that the node has that many GPUs, for
the device choice only; whatever a script asks of them runs on the CPU:

- ``torch.cuda.is_available()`` is True and ``torch.cuda.device_count()`` the node's count (the same for
  ``torch.accelerator``); ``set_device``, ``current_device``, ``torch.cuda.device(k)``, ``synchronize``,
  ``get_device_name``/``_properties``/``_capability`` (a nominal device: its name says it is simulated, 16 GiB),
  the memory queries (0 bytes used: nothing is on a GPU) and ``pin_memory`` answer as a real node's would;
- the CUDA devices a script uses are recorded and replaced by the CPU: ``torch.cuda.set_device``, ``.to``/``.cuda``
  of tensors and modules, any ``device=`` of a torch function (factories, ``as_tensor``, ``*_like``; a
  ``TorchFunctionMode``), ``torch.set_default_device``, ``torch.load``'s ``map_location``, DDP's ``device_ids`` and
  ``init_process_group``'s ``device_id``; the backend asked of ``init_process_group`` is recorded, and ``nccl``
  becomes ``gloo``: the job trains on the CPU exactly as it would without GPUs;
- an index the node does not have raises CUDA's "invalid device ordinal" (recorded first).

CUDA streams, events and ``torch.cuda.amp`` are not simulated. Each rank appends what it did, one JSON object a line,
to ``<RECORD_ENV folder>/rank<RANK>.jsonl`` as it happens (a rank killed by torchrun keeps what it recorded). Only
the standard library and torch are imported here: this file runs before anything else in the worker.
"""

from __future__ import annotations

import json
import os
import threading
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


def install() -> None:
    """Fake the node's GPUs in this process (see the module's docstring)."""
    import torch
    import torch.distributed as dist
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

    def moved(kind: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Record the CUDA device of a ``.to`` call's arguments and put the CPU in its place."""
        args, kwargs = list(args), dict(kwargs)
        if "device" in kwargs and index_of(kwargs["device"]) is not None:
            _record(kind, index=index_of(kwargs["device"]))
            kwargs["device"] = "cpu"
        if args and not isinstance(args[0], (torch.Tensor, torch.dtype)) and index_of(args[0]) is not None:
            _record(kind, index=index_of(args[0]))
            args[0] = "cpu"
        return tuple(args), kwargs

    tensor_to, module_to = torch.Tensor.to, torch.nn.Module.to

    def tensor_to_cpu(self, *args, **kwargs):
        args, kwargs = moved("tensor_to", args, kwargs)
        return tensor_to(self, *args, **kwargs)

    def module_to_cpu(self, *args, **kwargs):
        args, kwargs = moved("module_to", args, kwargs)
        return module_to(self, *args, **kwargs)

    def tensor_cuda(self, device=None, non_blocking=False, **kwargs):
        _record("tensor_to", index=current[0] if device is None else index_of(torch.device("cuda", device)
                                                                           if isinstance(device, int) else device))
        return self

    def module_cuda(self, device=None):
        _record("module_to", index=current[0] if device is None else index_of(torch.device("cuda", device)
                                                                           if isinstance(device, int) else device))
        return self

    init_process_group, ddp_init = dist.init_process_group, DistributedDataParallel.__init__

    def init_on_gloo(backend=None, *args, **kwargs):
        device_id = kwargs.pop("device_id", None)
        _record("init_process_group", backend=backend,
                device_id=None if device_id is None else index_of(device_id))
        return init_process_group("gloo", *args, **kwargs)

    def ddp_on_cpu(self, module, device_ids=None, output_device=None, *args, **kwargs):
        indices = None if device_ids is None else [index_of(device) for device in device_ids]
        _record("ddp", device_ids=indices)
        ddp_init(self, module, None, None, *args, **kwargs)

    class CudaToCpu(TorchFunctionMode):
        """Every torch function's ``device=`` naming a CUDA device (factories, as_tensor, *_like, new_*): the CPU."""

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if index_of(kwargs.get("device")) is not None:
                _record("created", index=index_of(kwargs["device"]))
                kwargs = {**kwargs, "device": "cpu"}
            return func(*args, **kwargs)

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
        if args:
            args = (on_cpu(args[0]),) + args[1:]
        if "map_location" in kwargs:
            kwargs["map_location"] = on_cpu(kwargs["map_location"])
        return load(f, *args, **kwargs)

    def default_on_cpu(self, device) -> None:  # torch.set_default_device and `with torch.device(...)`
        if index_of(device) is not None:
            _record("default_device", index=index_of(device))
            device = "cpu"
        default_device(self, device)

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
    dist.init_process_group = init_on_gloo
    DistributedDataParallel.__init__ = ddp_on_cpu
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
