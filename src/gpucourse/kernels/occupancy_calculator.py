"""Occupancy: how many warps of a kernel one SM keeps resident, from the per-SM limits of three GPUs.

A simplified occupancy calculator with the limits of the CUDA C++ Programming Guide (lesson
05_cuda_shared_memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gpucourse._validate import non_negative_int, one_of, positive_int
from gpucourse.kernels.geometry import MAX_THREADS_PER_BLOCK, WARP_SIZE

_CC_TABLE = ("NVIDIA, CUDA C++ Programming Guide, 'Compute Capabilities': table 'Technical Specifications per "
             "Compute Capability' (compute capability {cc})")


@dataclass(frozen=True)
class SmLimits:
    """Per-SM limits that decide how many warps can be resident at once (from the CUDA compute-capability table)."""

    gpu: str
    compute_capability: str
    max_warps: int
    max_blocks: int
    registers: int
    max_registers_per_thread: int
    shared_bytes: int
    max_shared_bytes_per_block: int
    reserved_shared_bytes_per_block: int
    source: str


SM_LIMITS: dict[str, SmLimits] = {
    "T4": SmLimits("T4", "7.5", max_warps=32, max_blocks=16, registers=65536, max_registers_per_thread=255,
                   shared_bytes=64 * 1024, max_shared_bytes_per_block=64 * 1024, reserved_shared_bytes_per_block=0,
                   source=_CC_TABLE.format(cc="7.5")),
    "A100": SmLimits("A100", "8.0", max_warps=64, max_blocks=32, registers=65536, max_registers_per_thread=255,
                     shared_bytes=164 * 1024, max_shared_bytes_per_block=163 * 1024,
                     reserved_shared_bytes_per_block=1024, source=_CC_TABLE.format(cc="8.0")),
    "H100": SmLimits("H100", "9.0", max_warps=64, max_blocks=32, registers=65536, max_registers_per_thread=255,
                     shared_bytes=228 * 1024, max_shared_bytes_per_block=227 * 1024,
                     reserved_shared_bytes_per_block=1024, source=_CC_TABLE.format(cc="9.0")),
}
"""SM limits of three GPUs. Shared memory is the most a kernel can opt in to; 1 KB per block is reserved from 8.0 on."""

REGISTER_ALLOCATION_UNIT = 256
"""Registers are given to a warp in units of 256 (NVIDIA's occupancy calculator, compute capability 7.x-9.0)."""


@dataclass(frozen=True)
class Occupancy:
    """How many blocks and warps of a kernel fit on one SM at once, and which resource runs out first."""

    gpu: str
    blocks_per_sm: int
    warps_per_sm: int
    max_warps: int
    limits: dict = field(default_factory=dict)

    @property
    def fraction(self) -> float:
        """Resident warps / the SM's maximum: the occupancy."""
        return self.warps_per_sm / self.max_warps

    @property
    def limited_by(self) -> str:
        """The resource that allows the fewest blocks ('warps', 'blocks', 'registers' or 'shared memory')."""
        return min(self.limits, key=self.limits.get)

    def __str__(self) -> str:
        return (f"{self.gpu}: {self.blocks_per_sm} blocks = {self.warps_per_sm} of {self.max_warps} warps per SM "
                f"({self.fraction:.0%}), limited by {self.limited_by}")


def occupancy(threads_per_block: int, registers_per_thread: int = 32, shared_bytes_per_block: int = 0,
              gpu: str = "T4") -> Occupancy:
    """Resident blocks and warps per SM for a launch configuration (a simplified occupancy calculator).

    Each block needs ceil(threads / 32) warps; each warp needs its registers rounded up to 256; each block needs its
    shared memory plus the reserved 1 KB (8.0 and later). The SM holds as many blocks as the scarcest resource
    allows. NVIDIA's calculator also rounds shared memory to its allocation unit; this one does not. Taught in
    lesson 05_cuda_shared_memory.
    """
    one_of("gpu", gpu, SM_LIMITS)
    sm = SM_LIMITS[gpu]
    threads_per_block = positive_int("threads_per_block", threads_per_block)
    if threads_per_block > MAX_THREADS_PER_BLOCK:
        raise ValueError(f"threads_per_block must be <= {MAX_THREADS_PER_BLOCK} (CUDA's limit), got {threads_per_block}")
    registers_per_thread = positive_int("registers_per_thread", registers_per_thread)
    if registers_per_thread > sm.max_registers_per_thread:
        raise ValueError(f"registers_per_thread must be <= {sm.max_registers_per_thread}, got {registers_per_thread}")
    shared_bytes_per_block = non_negative_int("shared_bytes_per_block", shared_bytes_per_block)
    if shared_bytes_per_block > sm.max_shared_bytes_per_block:
        raise ValueError(f"shared_bytes_per_block must be <= {sm.max_shared_bytes_per_block} on a {gpu}, "
                         f"got {shared_bytes_per_block}")
    warps_per_block = -(-threads_per_block // WARP_SIZE)
    registers_per_warp = -(-registers_per_thread * WARP_SIZE // REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    limits = {"warps": sm.max_warps // warps_per_block,
              "blocks": sm.max_blocks,
              "registers": sm.registers // (registers_per_warp * warps_per_block),
              "shared memory": sm.shared_bytes // (shared_bytes_per_block + sm.reserved_shared_bytes_per_block)
              if shared_bytes_per_block + sm.reserved_shared_bytes_per_block else sm.max_blocks}
    blocks = min(limits.values())
    return Occupancy(gpu=gpu, blocks_per_sm=blocks, warps_per_sm=blocks * warps_per_block, max_warps=sm.max_warps,
                     limits=limits)


def occupancy_rows(configs: list[tuple[int, int, int]], gpus: tuple[str, ...] = ("T4", "A100", "H100")
                   ) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of resident warps for (threads, registers per thread, shared bytes) configurations on ``gpus``.

    Shown with ``gpucourse.plots.show_table(*occupancy_rows(configs))`` (lesson 05_cuda_shared_memory).
    """
    if not isinstance(configs, list) or not configs:
        raise TypeError("configs must be a non-empty list of (threads, registers, shared bytes) tuples")
    if not isinstance(gpus, tuple) or not gpus:
        raise TypeError(f"gpus must be a non-empty tuple of GPU names such as ('T4', 'A100'), got {gpus!r}")
    header = ["threads / block", "registers / thread", "shared memory / block"] + \
        [f"{gpu}: warps per SM (limit)" for gpu in gpus]
    rows = []
    for threads, registers, shared in configs:
        cells = []
        for gpu in gpus:
            result = occupancy(threads, registers, shared, gpu)
            cells.append(f"{result.warps_per_sm} / {result.max_warps} ({result.limited_by})")
        rows.append([str(threads), str(registers), f"{shared // 1024} KB"] + cells)
    return header, rows


def occupancy_table(configs: list[tuple[int, int, int]], gpus: tuple[str, ...] = ("T4", "A100", "H100")) -> str:
    """The same as :func:`occupancy_rows`, as Markdown text (lesson 05_cuda_shared_memory)."""
    from gpucourse.plots import markdown_table

    return markdown_table(*occupancy_rows(configs, gpus))


__all__ = ["Occupancy", "REGISTER_ALLOCATION_UNIT", "SM_LIMITS", "SmLimits", "occupancy", "occupancy_rows",
           "occupancy_table"]
