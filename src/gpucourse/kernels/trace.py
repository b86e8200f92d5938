"""What a traced launch did: every global-memory access by thread, and the questions asked of it.

Reads and writes per thread, who wrote each element, sectors per warp request (coalescing), a memory budget check,
and data races between blocks (lessons 04_cuda_model and 05_cuda_shared_memory). An atomic read-modify-write is
recorded once, as 'atomic', and counts as one read and one write of its thread.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import greenlet
import numpy as np

from gpucourse.checks import CheckFailed

from gpucourse._validate import non_negative_int, one_of, positive_int
from gpucourse.kernels.geometry import WARP_SIZE, Dim3, ThreadId


class DataRace(CheckFailed):
    """Two blocks of one launch wrote the same global element without an atomic (or one wrote what another read)."""


class Race(NamedTuple):
    """One global element that different blocks touched in an order-dependent way."""

    array: str
    index: tuple[int, ...]
    kind: str
    """'write-write' (two blocks wrote it, not all atomically) or 'read-write' (one block read what another wrote)."""
    writers: tuple[int, ...]
    """Blocks (numbered x fastest) that wrote the element without an atomic."""
    others: tuple[int, ...]
    """The other blocks involved: those that updated it atomically ('write-write') or read it ('read-write')."""


@dataclass
class KernelTrace:
    """Every global-memory read and write of one traced launch, by thread, with the barriers each thread passed.

    Taught in lessons 04_cuda_model and 05_cuda_shared_memory.
    """

    griddim: Dim3
    blockdim: Dim3
    arrays: dict[str, np.ndarray]
    accesses: list[tuple[int, str, str, int]] = field(default_factory=list)
    """(thread number, array name, 'read', 'write' or 'atomic', flat element index), in execution order."""
    barriers: np.ndarray | None = None
    """syncthreads() calls per thread."""
    shuffles: np.ndarray | None = None
    """Warp exchanges (shfl_*_sync, syncwarp) per thread."""
    shared: dict[int, np.ndarray] = field(default_factory=dict)
    """Shared arrays by declaration number (0 = the first the kernel declares): the last block's contents."""
    shared_accesses: list[tuple[int, int, str, int]] = field(default_factory=list)
    """(thread number, shared array number, 'read', 'write' or 'atomic', flat element index), in execution order."""
    block_races: list[str] = field(default_factory=list)
    """Races between the threads of one block (found only by ``trace_kernel(..., interleave=True)``), one sentence each."""

    @property
    def threads_per_block(self) -> int:
        """Threads in one block."""
        return self.blockdim.x * self.blockdim.y * self.blockdim.z

    @property
    def blocks(self) -> int:
        """Blocks in the grid."""
        return self.griddim.x * self.griddim.y * self.griddim.z

    @property
    def threads(self) -> int:
        """Threads launched (blocks x threads per block), including any that had no element to work on."""
        return self.blocks * self.threads_per_block

    def thread_id(self, number: int) -> ThreadId:
        """Block and thread index of thread ``number`` (numbered block by block, x fastest, as CUDA does)."""
        block, thread = divmod(number, self.threads_per_block)
        g, d = self.griddim, self.blockdim
        return ThreadId(Dim3(block % g.x, block // g.x % g.y, block // (g.x * g.y)),
                        Dim3(thread % d.x, thread // d.x % d.y, thread // (d.x * d.y)))

    def _record(self, name: str, kind: str, flat: int) -> None:
        self.accesses.append((greenlet.getcurrent().gid, name, kind, flat))

    def _record_shared(self, number: int, kind: str, flat: int) -> None:
        self.shared_accesses.append((greenlet.getcurrent().gid, number, kind, flat))

    def _declare_shared(self, number: int, memory: np.ndarray) -> None:
        self.shared[number] = memory

    def bank_conflict_ways(self, shared: int = 0, kind: str = "read", banks: int = 32, word_bytes: int = 4,
                           worst: bool = False) -> float:
        """Mean (or with ``worst``, the maximum), over warp-wide accesses to shared array ``shared``, of the most
        distinct words in one bank.

        Shared memory is cut into ``banks`` banks of ``word_bytes``-byte words (word w lies in bank w mod 32). A warp
        access that touches k distinct words of one bank takes k passes: 1 is conflict-free (several lanes reading
        one word is a broadcast), 32 is fully serialised.
        """
        if not isinstance(worst, bool):
            raise TypeError(f"worst must be True or False, got {worst!r}")
        if not isinstance(shared, int) or isinstance(shared, bool) or shared not in self.shared:
            raise ValueError(f"shared must be the number of a shared array the kernel declared "
                             f"{sorted(self.shared)}, got {shared!r}")
        one_of("kind", kind, ("read", "write"))
        banks, word_bytes = positive_int("banks", banks), positive_int("word_bytes", word_bytes)
        itemsize = self.shared[shared].itemsize
        sequence: dict[int, int] = {}
        requests: dict[tuple[tuple[int, int], int], set[int]] = {}
        for number, array, what, flat in self.shared_accesses:
            if array == shared and what in (kind, "atomic"):
                step = sequence.get(number, 0)
                sequence[number] = step + 1
                warp = (number // self.threads_per_block, number % self.threads_per_block // WARP_SIZE)
                requests.setdefault((warp, step), set()).add(flat * itemsize // word_bytes)
        if not requests:
            raise ValueError(f"no thread did a {kind} of shared array {shared}")
        ways = []
        for words in requests.values():
            per_bank: dict[int, int] = {}
            for word in words:
                per_bank[word % banks] = per_bank.get(word % banks, 0) + 1
            ways.append(max(per_bank.values()))
        return float(max(ways)) if worst else sum(ways) / len(ways)

    def _check_array(self, array: str | None) -> None:
        if array is not None and array not in self.arrays:
            raise ValueError(f"array must be one of the kernel's array arguments {list(self.arrays)}, got {array!r}")

    def _count(self, kind: str, array: str | None) -> np.ndarray:
        self._check_array(array)
        counts = np.zeros(self.threads, dtype=np.int64)
        for number, name, what, _ in self.accesses:
            if what in (kind, "atomic") and (array is None or name == array):
                counts[number] += 1
        return counts

    def reads_per_thread(self, array: str | None = None) -> np.ndarray:
        """Global-memory element reads of each thread (of one array, or of all), indexed by thread number."""
        return self._count("read", array)

    def writes_per_thread(self, array: str | None = None) -> np.ndarray:
        """Global-memory element writes of each thread (of one array, or of all), indexed by thread number."""
        return self._count("write", array)

    def atomics_per_thread(self, array: str | None = None) -> np.ndarray:
        """Atomic read-modify-writes of each thread (of one array, or of all), indexed by thread number."""
        return self._count("atomic", array)

    def block_accesses(self, array: str) -> dict[tuple[int, ...], dict[str, set[int]]]:
        """For each touched element of ``array``: the blocks that read it, wrote it, and updated it atomically."""
        self._check_array(array)
        if not isinstance(array, str):
            raise TypeError(f"array must be the name of one of the kernel's arrays, got {array!r}")
        shape = self.arrays[array].shape
        found: dict[tuple[int, ...], dict[str, set[int]]] = {}
        for number, name, kind, flat in self.accesses:
            if name == array:
                index = tuple(int(i) for i in np.unravel_index(flat, shape))
                entry = found.setdefault(index, {"read": set(), "write": set(), "atomic": set()})
                entry[kind].add(number // self.threads_per_block)
        return found

    def races(self) -> list[Race]:
        """Elements that two blocks wrote without an atomic, or that one block read and another wrote (no atomic)."""
        found = []
        for array in self.arrays:
            for index, blocks in self.block_accesses(array).items():
                plain, atomic, readers = blocks["write"], blocks["atomic"], blocks["read"]
                if plain and len(plain | atomic) > 1:
                    found.append(Race(array, index, "write-write", tuple(sorted(plain)), tuple(sorted(atomic - plain))))
                elif plain and readers - plain:
                    found.append(Race(array, index, "read-write", tuple(sorted(plain)), tuple(sorted(readers - plain))))
        return found

    def check_no_races(self) -> None:
        """Raise DataRace naming the first racy element and its blocks, if any element is raced on."""
        races = self.races()
        if not races:
            return
        first = races[0]
        label = f"{first.array}[{', '.join(map(str, first.index))}]"
        writer = f"block {self._block_label(first.writers[0])}"
        if first.kind == "write-write" and len(first.writers) > 1:
            what = f"{writer} and block {self._block_label(first.writers[1])} both write {label} without an atomic"
        elif first.kind == "write-write":
            what = (f"{writer} writes {label} without an atomic while block {self._block_label(first.others[0])} "
                    "updates it atomically")
        else:
            what = f"{writer} writes {label} and block {self._block_label(first.others[0])} reads it"
        fix = ("where blocks share an element, update it with an atomic (cuda.atomic.add(array, index, value)), or "
               "give each block its own element" if first.kind == "write-write" else
               "a block may read only what no other block writes during the launch (or use a second kernel launch)")
        more = f" ({len(races)} elements raced on in all)" if len(races) > 1 else ""
        raise DataRace(f"data race: {what}{more}. On a GPU blocks run in any order and at the same time, so the "
                       f"result depends on timing (the tracer runs blocks one after another, which hides it).\n"
                       f"  Hint: {fix}")

    def _block_label(self, number: int) -> str:
        """A block number as its blockIdx, e.g. (1, 0, 0)."""
        return str(tuple(self.thread_id(number * self.threads_per_block).block))

    def writer_map(self, array: str, what: str = "thread") -> np.ndarray:
        """For each element of ``array``: who wrote it last (-1 if nobody), or how often ('count')."""
        self._check_array(array)
        fields = ("thread", "block", "count", "thread_x", "thread_y", "thread_z", "block_x", "block_y", "block_z",
                  "global_x", "global_y", "global_z")
        one_of("what", what, fields)
        shape = self.arrays[array].shape
        writer = np.full(int(np.prod(shape)), -1, dtype=np.int64)
        count = np.zeros(writer.size, dtype=np.int64)
        for number, name, kind, flat in self.accesses:
            if kind in ("write", "atomic") and name == array:
                writer[flat], count[flat] = number, count[flat] + 1
        if what == "count":
            return count.reshape(shape)
        if what == "thread":
            return writer.reshape(shape)
        result = np.full(writer.size, -1, dtype=np.int64)
        for flat, number in enumerate(writer):
            if number < 0:
                continue
            who = self.thread_id(int(number))
            if what == "block":
                result[flat] = number // self.threads_per_block
                continue
            axis = "xyz".index(what[-1])
            if what.startswith("thread_"):
                result[flat] = who.thread[axis]
            elif what.startswith("block_"):
                result[flat] = who.block[axis]
            else:  # global_x/y/z: blockIdx * blockDim + threadIdx
                result[flat] = who.block[axis] * self.blockdim[axis] + who.thread[axis]
        return result.reshape(shape)

    def sectors_per_request(self, array: str, kind: str = "read", sector_bytes: int = 32) -> float:
        """Mean distinct memory sectors one warp touches per access instruction to ``array``: the coalescing gauge.

        Byte addresses follow the array's strides, so a transposed view (``x.T``) counts as the strided array it is.
        """
        self._check_array(array)
        one_of("kind", kind, ("read", "write"))
        sector_bytes = positive_int("sector_bytes", sector_bytes)
        shape, strides = self.arrays[array].shape, self.arrays[array].strides
        sequence: dict[int, int] = {}
        requests: dict[tuple[int, int], set[int]] = {}
        for number, name, what, flat in self.accesses:
            if name == array and what in (kind, "atomic"):
                step = sequence.get(number, 0)
                sequence[number] = step + 1
                warp = number // self.threads_per_block * self.threads_per_block + \
                    number % self.threads_per_block // WARP_SIZE
                address = sum(int(i) * s for i, s in zip(np.unravel_index(flat, shape), strides))
                requests.setdefault((warp, step), set()).add(address // sector_bytes)
        if not requests:
            raise ValueError(f"no thread did a {kind} of {array!r}")
        return sum(len(sectors) for sectors in requests.values()) / len(requests)

    def check_budget(self, reads: int, writes: int, *, array: str | None = None, name: str = "memory budget",
                     hint: str = "", quiet: bool = False) -> None:
        """Raise CheckFailed naming the worst thread unless every thread stays within ``reads`` and ``writes``."""
        from gpucourse.checks import CheckFailed

        budget = {"reads": non_negative_int("reads", reads), "writes": non_negative_int("writes", writes)}
        where = "global" if array is None else f"{array!r}"
        for kind, counts in (("reads", self.reads_per_thread(array)), ("writes", self.writes_per_thread(array))):
            worst = int(np.argmax(counts))
            if counts[worst] > budget[kind]:
                over = int((counts > budget[kind]).sum())
                noun = kind if counts[worst] != 1 else kind[:-1]
                raise CheckFailed(f"{name}: thread ({self.thread_id(worst)}) made {counts[worst]} {where} {noun}, "
                                  f"budget {budget[kind]} per thread ({over} of {self.threads} threads over)"
                                  + (f"\n  Hint: {hint}" if hint else ""))
        if not quiet:
            reads_text = f"{budget['reads']} {where} read" + ("" if budget["reads"] == 1 else "s")
            writes_text = f"{budget['writes']} write" + ("" if budget["writes"] == 1 else "s")
            print(f"\N{CHECK MARK} {name}: every thread within {reads_text} and {writes_text}")

    def check_barriers(self, *, name: str = "every thread of a block passes the same syncthreads()",
                       quiet: bool = False) -> None:
        """Raise CheckFailed naming two threads of one block that passed different numbers of syncthreads().

        CUDA allows ``__syncthreads()`` in conditional code "only if the conditional evaluates identically across the
        entire thread block" (CUDA C++ Programming Guide); a barrier that some threads skip (inside ``if i < n``,
        after an early ``return``) may hang a GPU or let threads run on too early. The tracer releases a barrier once
        no thread of the block can go on, so it does not hang: this check is what finds such a barrier.
        Taught in lesson 05_cuda_shared_memory.
        """
        if self.barriers is None:
            raise ValueError("this trace has no barrier counts: make it with kernels.trace_kernel")
        if not isinstance(quiet, bool):
            raise TypeError(f"quiet must be True or False, got {quiet!r}")
        per_block = self.barriers.reshape(self.blocks, self.threads_per_block)
        for block, counts in enumerate(per_block):
            if counts.min() != counts.max():
                low, high = int(np.argmin(counts)), int(np.argmax(counts))
                first = block * self.threads_per_block
                raise CheckFailed(
                    f"{name}: in block {self._block_label(block)}, thread {tuple(self.thread_id(first + high).thread)}"
                    f" passed {counts[high]} cuda.syncthreads() and thread {tuple(self.thread_id(first + low).thread)}"
                    f" only {counts[low]}. Every thread of a block must reach every barrier: on a GPU a barrier that "
                    "only some threads reach may hang the kernel or let the others run on too early.\n  Hint: no "
                    "cuda.syncthreads() inside an `if` that differs between threads (such as `if i < n`), and no early "
                    "`return` before one: guard the loads and the final write instead, and keep every barrier where "
                    "all the threads of the block pass it")
        if not quiet:
            print(f"\N{CHECK MARK} {name}")

    def summary(self) -> str:
        """A few lines: the launch, reads and writes per thread, barriers, and how each array was written."""
        reads, writes = self.reads_per_thread(), self.writes_per_thread()
        lines = [f"{self.blocks} block(s) x {self.threads_per_block} threads = {self.threads} threads "
                 f"(grid {tuple(self.griddim)}, block {tuple(self.blockdim)})",
                 f"global reads per thread: min {reads.min()}, max {reads.max()}, total {reads.sum()}",
                 f"global writes per thread: min {writes.min()}, max {writes.max()}, total {writes.sum()}",
                 f"idle threads (no global access): {int(((reads + writes) == 0).sum())}"]
        if self.barriers is not None and self.barriers.any():
            lines.append(f"syncthreads() per thread: max {self.barriers.max()}")
        atomics = self.atomics_per_thread()
        if atomics.any():
            lines.append(f"atomic updates: {atomics.sum()} (by {int((atomics > 0).sum())} threads)")
        races = self.races()
        if races:
            lines.append(f"data races between blocks: {len(races)} element(s), e.g. {races[0].array}"
                         f"[{', '.join(map(str, races[0].index))}] ({races[0].kind})")
        if self.block_races:
            lines.append(f"races between threads of one block (interleaved trace): {len(self.block_races)}")
        for name, array in self.arrays.items():
            count = self.writer_map(name, "count")
            if count.any():
                lines.append(f"{name}: {int((count > 0).sum())} of {count.size} elements written, "
                             f"{int((count > 1).sum())} more than once")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.summary()


__all__ = ["DataRace", "KernelTrace", "Race"]
