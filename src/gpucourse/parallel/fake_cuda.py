"""Simulated GPUs in the processes ``torchrun`` starts (lesson 14's Exercise 3 graded on a machine without enough GPUs).

:func:`gpucourse.parallel.run_script` with ``simulate_gpus=True`` copies this file as ``sitecustomize.py`` into a
temporary folder put first on the workers' ``PYTHONPATH`` and sets :data:`RECORD_ENV` to a folder. In a process that
torchrun started (``LOCAL_RANK`` is set; torchrun's own agent is left alone) it then pretends that the node has one
GPU per process, for the device choice only:

- ``torch.cuda.is_available()`` is True and ``torch.cuda.device_count()`` is ``LOCAL_WORLD_SIZE`` (the same for
  ``torch.accelerator``);
- ``torch.cuda.set_device``, the ``device_ids`` given to ``DistributedDataParallel``, the backend asked of
  ``dist.init_process_group`` and the CUDA devices tensors and modules are moved to (``.to``, ``.cuda``) are recorded;
  an index a real node would not have raises CUDA's "invalid device ordinal";
- ``nccl`` becomes ``gloo`` and ``cuda:k`` the CPU: the job trains on the CPU exactly as it would without GPUs.

Each rank appends what it did, one JSON object a line, to ``<RECORD_ENV folder>/rank<RANK>.jsonl`` as it happens (a
rank killed by torchrun keeps what it recorded). Only the standard library and torch are imported here: this file
runs before anything else in the worker.
"""

from __future__ import annotations

import json
import os

RECORD_ENV = "GPUCOURSE_SIMULATED_GPUS"


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

    count = int(os.environ["LOCAL_WORLD_SIZE"])
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

    torch.cuda.is_available = lambda: True
    torch.cuda.device_count = lambda: count
    torch.cuda.set_device = set_device
    torch.cuda.current_device = lambda: current[0]
    torch.cuda.synchronize = lambda device=None: None
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
