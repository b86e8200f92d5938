"""What Triton kernels read and wrote (lesson 06_triton): per launch, per program and per tensor argument.

:func:`gpucourse.kernels.triton_launch.count_traffic` fills a :class:`Traffic`; tests ask it questions such as
``traffic.bytes_read(x)`` with the tensors they passed in.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _is_tensor(value: object) -> bool:
    """True for a torch tensor (anything with data_ptr, numel and element_size)."""
    return all(hasattr(value, attribute) for attribute in ("data_ptr", "numel", "element_size"))


@dataclass
class TensorTraffic:
    """One tensor argument of one launch: what the kernel read from it and wrote to it."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    itemsize: int
    elements_read: int = 0
    elements_written: int = 0
    loads: int = 0   # tl.load calls on this tensor (one per call, however many lanes; a fully masked one counts)
    stores: int = 0  # tl.store calls on this tensor
    span: tuple[str, int, int] = ("cpu", 0, 0)  # (device, first byte, end byte) of the caller's tensor

    @property
    def bytes_read(self) -> int:
        """Bytes loaded from this tensor."""
        return self.elements_read * self.itemsize

    @property
    def bytes_written(self) -> int:
        """Bytes stored to this tensor."""
        return self.elements_written * self.itemsize


@dataclass
class LaunchRecord:
    """One interpreted launch: the kernel, its grid, its tensors, the values of its ``tl.constexpr`` arguments
    (positional, keyword or default; e.g. ``{"BLOCK": 128}``), and per program (elements read, written)."""

    kernel: str
    grid: tuple[int, int, int]
    tensors: dict[str, TensorTraffic]
    constexprs: dict[str, object] = field(default_factory=dict)
    programs: dict[tuple[int, int, int], list[int]] = field(default_factory=dict)
    dots: int = 0  # tl.dot calls, over all programs
    program_dots: dict[tuple[int, int, int], int] = field(default_factory=dict)
    dot_operands: set[str] = field(default_factory=set)  # the element types tl.dot multiplied: "fp32", "bf16", ...

    @property
    def num_programs(self) -> int:
        """How many programs the grid ran."""
        return self.grid[0] * self.grid[1] * self.grid[2]


def _matches(entry: TensorTraffic, tensor: object) -> bool:
    """True if ``entry`` is the argument ``tensor`` (or a view of the same memory) of its launch."""
    if isinstance(tensor, str):
        return entry.name == tensor
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    device, first, last = entry.span
    return device == str(tensor.device) and first < max(end, start + 1) and start < max(last, first + 1)


class Traffic:
    """What the launches inside one ``count_traffic()`` block read and wrote, per launch, program and tensor."""

    def __init__(self) -> None:
        self.launches: list[LaunchRecord] = []

    def _entries(self, of: object) -> list[TensorTraffic]:
        """The tensor entries of every launch that ``of`` names (a tensor, an argument name, or None for all)."""
        if of is not None and not isinstance(of, str) and not _is_tensor(of):
            raise TypeError(f"of must be a tensor, a kernel argument's name or None, got {type(of).__name__}")
        return [entry for launch in self.launches for entry in launch.tensors.values()
                if of is None or _matches(entry, of)]

    def elements_read(self, of: object = None) -> int:
        """Elements loaded from ``of`` (a tensor or argument name; None: from every tensor) over all launches."""
        return sum(entry.elements_read for entry in self._entries(of))

    def elements_written(self, of: object = None) -> int:
        """Elements stored to ``of`` (a tensor or argument name; None: to every tensor) over all launches."""
        return sum(entry.elements_written for entry in self._entries(of))

    def bytes_read(self, of: object = None) -> int:
        """Bytes loaded from ``of`` (None: from every tensor) over all launches."""
        return sum(entry.bytes_read for entry in self._entries(of))

    def bytes_written(self, of: object = None) -> int:
        """Bytes stored to ``of`` (None: to every tensor) over all launches."""
        return sum(entry.bytes_written for entry in self._entries(of))

    def loads(self, of: object = None) -> int:
        """``tl.load`` calls that read ``of`` (None: any tensor), one per call however many lanes it reads.

        A load whose mask is all False still counts (it was issued): skipping a block means not loading it."""
        return sum(entry.loads for entry in self._entries(of))

    def stores(self, of: object = None) -> int:
        """``tl.store`` calls that wrote ``of`` (None: any tensor), one per call."""
        return sum(entry.stores for entry in self._entries(of))

    def dots(self, program: tuple[int, ...] | None = None) -> int:
        """``tl.dot`` calls over all launches, or those of one program id (a tuple such as ``(2, 0)``)."""
        if program is None:
            return sum(launch.dots for launch in self.launches)
        key = tuple(program) + (0,) * (3 - len(program))
        return sum(launch.program_dots.get(key, 0) for launch in self.launches)

    def dot_operand_types(self) -> list[str]:
        """The element types of the tiles that ``tl.dot`` multiplied over all launches ("fp32", "fp16", "bf16", ...),
        sorted: what a GPU's Tensor Cores would read (float32 tiles as TF32 by default)."""
        return sorted(set().union(*(launch.dot_operands for launch in self.launches)))

    def rows(self) -> tuple[list[str], list[list[object]]]:
        """A header and one row per launch and tensor, for plots.show_table."""
        header = ["launch", "kernel", "grid", "tensor", "elements read", "bytes read", "elements written",
                  "bytes written"]
        rows = [[index, launch.kernel, launch.grid, entry.name,
                 entry.elements_read, entry.bytes_read, entry.elements_written, entry.bytes_written]
                for index, launch in enumerate(self.launches) for entry in launch.tensors.values()]
        return header, rows

    def show(self) -> None:
        """Display the table of rows() and the totals."""
        from gpucourse.plots import show_table

        show_table(*self.rows())
        print(f"{len(self.launches)} launch(es): {self.bytes_read():,} bytes read, {self.bytes_written():,} written")

    def __repr__(self) -> str:
        return (f"Traffic({len(self.launches)} launches, {self.bytes_read()} bytes read, "
                f"{self.bytes_written()} bytes written)")


__all__ = ["LaunchRecord", "TensorTraffic", "Traffic"]
