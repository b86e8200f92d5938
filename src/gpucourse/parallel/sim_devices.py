"""Simulated devices for model parallelism: tensors and layers that live on a device, every copy logged.

Taught in 16_model_parallelism.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpucourse._validate import list_of, positive_int


class DeviceMismatch(RuntimeError):
    """A computation mixed tensors or layers that live on different (simulated) devices, as PyTorch refuses to."""


@dataclass(frozen=True)
class Transfer:
    """One copy of a tensor between the host and a simulated device, or between two devices."""

    source: str
    target: str
    nbytes: int
    shape: tuple[int, ...]


class DeviceLog:
    """What the simulated devices of one group saw: transfers, layers run (device, layer), placements, weights' homes."""

    def __init__(self) -> None:
        """An empty log."""
        self.transfers: list[Transfer] = []
        self.ran: list[tuple[str, object]] = []
        self.owner: dict[int, str] = {}  # id(parameter or buffer) -> device name
        self.placements: list[tuple[str, object]] = []  # (device name, module) for every place() call

    def clear(self) -> None:
        """Forget the transfers and layer runs seen so far (placements stay)."""
        self.transfers.clear()
        self.ran.clear()

    def device_transfers(self) -> list[Transfer]:
        """Transfers between two devices (not to or from the host)."""
        return [t for t in self.transfers if "host" not in (t.source, t.target)]


class DeviceTensor:
    """A tensor that lives on a simulated device: move it with ``.to(device)``, bring it home with ``.cpu()``."""

    def __init__(self, value, device: "SimulatedDevice") -> None:
        """Wrap ``value`` (a torch tensor) as living on ``device``; use ``device.put`` rather than this."""
        self._value, self.device = value, device

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape."""
        return tuple(self._value.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor's data."""
        return self._value.numel() * self._value.element_size()

    def to(self, device: "SimulatedDevice") -> "DeviceTensor":
        """This tensor on ``device`` (a logged copy if it lives elsewhere; itself if it is already there)."""
        if not isinstance(device, SimulatedDevice):
            raise TypeError(f"device must be a SimulatedDevice (one of parallel.simulated_devices()), "
                            f"got {type(device).__name__}")
        if device is self.device:
            return self
        if device.log is not self.device.log:
            raise ValueError("device belongs to another group of simulated devices")
        device.log.transfers.append(Transfer(self.device.name, device.name, self.nbytes, self.shape))
        return DeviceTensor(self._value.detach().clone().requires_grad_(self._value.requires_grad), device)

    def cpu(self):
        """A copy of this tensor on the host (a plain torch tensor); the copy is logged."""
        self.device.log.transfers.append(Transfer(self.device.name, "host", self.nbytes, self.shape))
        return self._value.detach().clone()

    def __repr__(self) -> str:
        return f"DeviceTensor(shape={self.shape}, device={self.device.name!r})"

    def _refuse(self, *_: object, **__: object):
        raise TypeError("a DeviceTensor supports only .to(device) and .cpu(): run layers on it through "
                        "device.place(layer)(tensor)")

    __add__ = __radd__ = __mul__ = __rmul__ = __sub__ = __matmul__ = __array__ = _refuse


class PlacedModule:
    """A module placed on a simulated device: call it on DeviceTensors that live on the same device."""

    def __init__(self, module, device: "SimulatedDevice") -> None:
        """Keep the module and its device; use ``device.place`` rather than this."""
        self.module, self.device = module, device

    def __call__(self, x: DeviceTensor) -> DeviceTensor:
        """Run the module on ``x`` (which must live on this device); log every layer that runs, and where."""
        import torch

        name = self.device.name
        if isinstance(x, torch.Tensor):
            raise DeviceMismatch(f"Expected all tensors to be on the same device, but found the input on the host "
                                 f"and the layer on {name}: move the input there first (device.put(x) or x.to(device))")
        if not isinstance(x, DeviceTensor):
            raise TypeError(f"x must be a DeviceTensor, got {type(x).__name__}")
        if x.device is not self.device:
            raise DeviceMismatch(f"Expected all tensors to be on the same device, but found at least two devices, "
                                 f"{x.device.name} and {name}: move the activations with .to(device) first")
        log = self.device.log
        for tensor in list(self.module.parameters()) + list(self.module.buffers()):
            if log.owner.get(id(tensor)) != name:
                raise DeviceMismatch(f"a layer's weights live on {log.owner.get(id(tensor), 'the host')}, not on "
                                     f"{name}: the module was placed elsewhere since")
        leaves = [m for m in self.module.modules() if not list(m.children())]
        hooks = [leaf.register_forward_hook(lambda layer, *_: log.ran.append((name, layer))) for leaf in leaves]
        try:
            out = self.module(x._value)
        finally:
            for hook in hooks:
                hook.remove()
        return DeviceTensor(out, self.device)

    def __repr__(self) -> str:
        return f"PlacedModule({type(self.module).__name__}, device={self.device.name!r})"


class SimulatedDevice:
    """One simulated device: ``put`` host tensors on it, ``place`` modules on it; everything is logged."""

    def __init__(self, name: str, log: DeviceLog) -> None:
        """A device called ``name`` that writes into ``log`` (shared by its group)."""
        self.name, self.log = name, log

    def put(self, tensor) -> DeviceTensor:
        """Copy a host tensor onto this device (logged)."""
        import torch

        if not isinstance(tensor, torch.Tensor):
            raise TypeError(f"tensor must be a torch.Tensor on the host, got {type(tensor).__name__}")
        moved = DeviceTensor(tensor.detach().clone(), self)
        self.log.transfers.append(Transfer("host", self.name, moved.nbytes, moved.shape))
        return moved

    def place(self, module) -> PlacedModule:
        """Move ``module``'s weights onto this device (from wherever they were) and return it callable here."""
        from torch import nn

        if not isinstance(module, nn.Module):
            raise TypeError(f"module must be a torch.nn.Module, got {type(module).__name__}")
        for tensor in list(module.parameters()) + list(module.buffers()):
            self.log.owner[id(tensor)] = self.name
        self.log.placements.append((self.name, module))
        return PlacedModule(module, self)

    def __repr__(self) -> str:
        return f"SimulatedDevice({self.name!r})"


def simulated_devices(count: int = 2) -> list[SimulatedDevice]:
    """``count`` simulated devices 'sim:0', 'sim:1', ... sharing one log (``devices[0].log``)."""
    count = positive_int("count", count)
    log = DeviceLog()
    return [SimulatedDevice(f"sim:{index}", log) for index in range(count)]


def split_sequential(model, devices: Sequence[SimulatedDevice], cuts: Sequence[int]) -> Callable:
    """Place the layers of ``model`` between ``cuts`` on successive devices; return forward(host x) -> host output."""
    from torch import nn

    if not isinstance(model, nn.Sequential):
        raise TypeError(f"model must be a torch.nn.Sequential, got {type(model).__name__}")
    devices = list_of("devices", devices, SimulatedDevice, non_empty=True)
    cuts = [positive_int("cuts", c) for c in cuts]
    if cuts != sorted(set(cuts)) or (cuts and cuts[-1] >= len(model)) or len(cuts) != len(devices) - 1:
        raise ValueError(f"cuts must be {len(devices) - 1} increasing layer indices between 1 and {len(model) - 1}, "
                         f"got {cuts}")
    bounds = [0, *cuts, len(model)]
    stages = [device.place(model[start:end]) for device, start, end in zip(devices, bounds, bounds[1:])]

    def forward(x):
        """Run the split model on a host tensor: each stage on its device, activations moved at every cut."""
        activation = devices[0].put(x)
        for device, stage in zip(devices, stages):
            activation = stage(activation.to(device))
        return activation.cpu()

    return forward
