"""Plausible wrong answers to lesson 05's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: "constant", "helper" (for these
kernel exercises, where no course helper computes the answer, a shortcut that is not a kernel of cooperating
threads), "visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in
the full nbgrader pipeline), and more: "no_atomic" (a plain += where blocks share an element: the data race the
tracer reports), "off_by_one_guard" (a guard written with <=) and the races that only a tracer interleaving the
threads of a block catches (a plain += on a shared histogram, a missing barrier).
"""

from wrong_answers.tampering import with_tampering

_EX1_HEAD = '''\
def make_tiled_matmul_kernel(tile: int):
    """Return a CUDA kernel matmul(A, B, C) computing C = A @ B with tile x tile blocks and shared-memory tiles."""
    @cuda.jit
    def matmul(A, B, C):
'''
_EX1_TAIL = '''
    return matmul
'''
_EX2_HEAD = '''\
def make_histogram_kernel(bins: int, threads: int):
    """Return a CUDA kernel histogram(labels, counts): counts[b] += how many labels equal b, privatised per block."""
    @cuda.jit
    def histogram(labels, counts):
'''
_EX2_TAIL = '''
    return histogram
'''


def _histogram(size: str = "bins", zero: str = "for b in range(t, bins, threads):", barrier: str = "cuda.syncthreads()",
               merge_loop: str = "for b in range(t, bins, threads):",
               merge: str = "cuda.atomic.add(counts, b, private[b])", barrier_2: str | None = None,
               count: str = "cuda.atomic.add(private, labels[i], 1)") -> str:
    """A privatised histogram kernel with the given private size, zeroing loop, barriers, count and merge."""
    barrier_2 = barrier if barrier_2 is None else barrier_2
    return _EX2_HEAD + f'''\
        private = cuda.shared.array({size}, int32)
        t = cuda.threadIdx.x
        {zero}
            private[b] = 0
        {barrier}
        i = cuda.grid(1)
        if i < labels.size:
            {count}
        {barrier_2}
        {merge_loop}
            if private[b] > 0:
                {merge}
''' + _EX2_TAIL


_EX3_HEAD = '''\
def make_transpose_kernel():
    """Return a CUDA kernel transpose(x, out): out[j, i] = x[i, j], one 32 x 32 tile per block of 32 x 4 threads."""
    @cuda.jit
    def transpose(x, out):
'''
_EX3_TAIL = '''
    return transpose
'''


def _transpose(columns: str = "33", read_guard: str = "row < x.shape[0] and col < x.shape[1]",
               write_guard: str = "out_row < out.shape[0] and out_col < out.shape[1]",
               barrier: str = "cuda.syncthreads()", read_tile: str = "tile[tx, r]") -> str:
    """A tiled transpose with the given tile width, guards, barrier and tile read."""
    return _EX3_HEAD + f'''\
        tile = cuda.shared.array((32, {columns}), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * 32 + tx
        for r in range(ty, 32, 4):
            row = cuda.blockIdx.y * 32 + r
            if {read_guard}:
                tile[r, tx] = x[row, col]
        {barrier}
        out_col = cuda.blockIdx.y * 32 + tx
        for r in range(ty, 32, 4):
            out_row = cuda.blockIdx.x * 32 + r
            if {write_guard}:
                out[out_row, out_col] = {read_tile}
''' + _EX3_TAIL


def _tiled(load_a: str, load_b: str, barrier_1: str = "cuda.syncthreads()", barrier_2: str = "cuda.syncthreads()",
           guard: str = "row < C.shape[0] and col < C.shape[1]") -> str:
    """A tiled matmul kernel with the given tile loads and barriers."""
    return _EX1_HEAD + f'''\
        tile_a = cuda.shared.array((tile, tile), float32)
        tile_b = cuda.shared.array((tile, tile), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        acc = float32(0.0)
        for step in range((A.shape[1] + tile - 1) // tile):
            k = step * tile + tx
            {load_a}
            k = step * tile + ty
            {load_b}
            {barrier_1}
            for kk in range(tile):
                acc += tile_a[ty, kk] * tile_b[kk, tx]
            {barrier_2}
        if {guard}:
            C[row, col] = acc
''' + _EX1_TAIL


def _tiled_body(body: str) -> str:
    """A tiled matmul kernel with the given body."""
    return _EX1_HEAD + body + _EX1_TAIL


_STD_HEAD = '''\
        tile_a = cuda.shared.array((tile, tile), float32)
        tile_b = cuda.shared.array((tile, tile), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
'''


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # Right numbers, but the inner loop reads global memory (2k reads per thread): over the tiled budget.
        "typical": _EX1_HEAD + '''\
        col = cuda.blockIdx.x * tile + cuda.threadIdx.x
        row = cuda.blockIdx.y * tile + cuda.threadIdx.y
        if row < C.shape[0] and col < C.shape[1]:
            acc = float32(0.0)
            for k in range(A.shape[1]):
                acc += A[row, k] * B[k, col]
            C[row, col] = acc
''' + _EX1_TAIL,
        "constant": _EX1_HEAD + '''\
        col = cuda.blockIdx.x * tile + cuda.threadIdx.x
        row = cuda.blockIdx.y * tile + cuda.threadIdx.y
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = 0.0
''' + _EX1_TAIL,
        # Thread (0, 0) of block (0, 0) does the whole multiply, library style: right result, far over the budget.
        "helper": _EX1_HEAD + '''\
        if cuda.grid(2) == (0, 0):
            for r in range(C.shape[0]):
                for c in range(C.shape[1]):
                    acc = float32(0.0)
                    for k in range(A.shape[1]):
                        acc += A[r, k] * B[k, c]
                    C[r, c] = acc
''' + _EX1_TAIL,
        # No zero padding: right when every size is a multiple of the tile (the visible 16 x 16, tile 8).
        "visible_only": _tiled("tile_a[ty, tx] = A[row, k]", "tile_b[ty, tx] = B[k, col]"),
        # Both barriers left out: threads read tile elements that no thread has loaded yet.
        "no_barriers": _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else 0.0",
                              "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else 0.0",
                              "pass", "pass"),
        # Only the barrier after loading: a fast thread overwrites the tiles with the next step's data while others
        # still read them. Threads one at a time hide it; interleaved, it is a race on the tiles.
        "no_second_barrier": _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else 0.0",
                                    "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else 0.0",
                                    barrier_2="pass"),
        # Only the barrier after computing: threads read tile elements their neighbours have not loaded yet.
        "no_first_barrier": _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else 0.0",
                                   "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else 0.0",
                                   barrier_1="pass"),
        # The whole loop inside `if row < n and col < m`: threads outside C load nothing, so edge blocks multiply
        # tiles with holes (garbage, NaN in the tracer). Right when the tile divides n and m (the visible case).
        "loads_inside_guard": _EX1_HEAD + '''\
        tile_a = cuda.shared.array((tile, tile), float32)
        tile_b = cuda.shared.array((tile, tile), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        if row < C.shape[0] and col < C.shape[1]:
            acc = float32(0.0)
            for step in range((A.shape[1] + tile - 1) // tile):
                k = step * tile + tx
                tile_a[ty, tx] = A[row, k] if k < A.shape[1] else 0.0
                k = step * tile + ty
                tile_b[ty, tx] = B[k, col] if k < B.shape[0] else 0.0
                cuda.syncthreads()
                for kk in range(tile):
                    acc += tile_a[ty, kk] * tile_b[kk, tx]
                cuda.syncthreads()
            C[row, col] = acc
''' + _EX1_TAIL,
        # The final guard compares with <=: right when n and m are multiples of the tile (the visible 16 x 16), but
        # with one row or column more the thread at row n writes past C.
        "off_by_one_guard": _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else 0.0",
                                   "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else 0.0",
                                   guard="row <= C.shape[0] and col <= C.shape[1]"),
        # ---- from review 2 (a fresh reviewer) ----
        # Shared tiles sized for the visible tile 8: right for every tile <= 8 (all the tests use 2, 4, 8), but tile 16
        # (the timing cell) or 32 (the written answer) indexes past the shared arrays.
        "rev_fixed_tile8": _EX1_HEAD + """\
        tile_a = cuda.shared.array((8, 8), float32)
        tile_b = cuda.shared.array((8, 8), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        acc = float32(0.0)
        for step in range((A.shape[1] + tile - 1) // tile):
            k = step * tile + tx
            tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)
            k = step * tile + ty
            tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)
            cuda.syncthreads()
            for kk in range(tile):
                acc += tile_a[ty, kk] * tile_b[kk, tx]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
""" + _EX1_TAIL,
        # Loads guarded on k only: rows of A past n and columns of B past m are read (out of bounds on a GPU);
        # the values only feed elements of C that are never written.
        "rev_no_row_guard": _tiled("tile_a[ty, tx] = A[row, k] if k < A.shape[1] else float32(0.0)",
                                   "tile_b[ty, tx] = B[k, col] if k < B.shape[0] else float32(0.0)"),
        # Threads outside C return before the first barrier (the CUDA C habit).
        "rev_early_return": _tiled_body(_STD_HEAD + '''\
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        if row >= C.shape[0] or col >= C.shape[1]:
            return
        acc = float32(0.0)
        for step in range((A.shape[1] + tile - 1) // tile):
            k = step * tile + tx
            tile_a[ty, tx] = A[row, k] if k < A.shape[1] else float32(0.0)
            k = step * tile + ty
            tile_b[ty, tx] = B[k, col] if k < B.shape[0] else float32(0.0)
            cuda.syncthreads()
            for kk in range(tile):
                acc += tile_a[ty, kk] * tile_b[kk, tx]
            cuda.syncthreads()
        C[row, col] = acc
'''),
        # Floor division for the number of k steps: the last partial tile along k is dropped.
        "rev_floor_steps": _tiled_body(_STD_HEAD + '''\
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        acc = float32(0.0)
        for step in range(A.shape[1] // tile):
            k = step * tile + tx
            tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)
            k = step * tile + ty
            tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)
            cuda.syncthreads()
            for kk in range(tile):
                acc += tile_a[ty, kk] * tile_b[kk, tx]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
'''),
        # Right values and read count, but the tiles are loaded with tx walking DOWN a column of A and of B:
        # every warp-wide tile load is strided (lesson 04), up to 8x the sectors at tile 32 on a GPU.
        "rev_uncoalesced_loads": _tiled_body(_STD_HEAD + '''\
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        acc = float32(0.0)
        for step in range((A.shape[1] + tile - 1) // tile):
            a_row = cuda.blockIdx.y * tile + tx
            a_k = step * tile + ty
            tile_a[tx, ty] = A[a_row, a_k] if a_row < A.shape[0] and a_k < A.shape[1] else float32(0.0)
            b_k = step * tile + tx
            b_col = cuda.blockIdx.x * tile + ty
            tile_b[tx, ty] = B[b_k, b_col] if b_k < B.shape[0] and b_col < B.shape[1] else float32(0.0)
            cuda.syncthreads()
            for kk in range(tile):
                acc += tile_a[ty, kk] * tile_b[kk, tx]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
'''),
        # x along the rows of C (row from blockIdx.x): right on the visible square case only.
        "rev_swapped_xy": _tiled_body(_STD_HEAD + '''\
        row = cuda.blockIdx.x * tile + tx
        col = cuda.blockIdx.y * tile + ty
        acc = float32(0.0)
        for step in range((A.shape[1] + tile - 1) // tile):
            k = step * tile + ty
            tile_a[tx, ty] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)
            k = step * tile + tx
            tile_b[tx, ty] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)
            cuda.syncthreads()
            for kk in range(tile):
                acc += tile_a[tx, kk] * tile_b[kk, ty]
            cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
'''),
        # ---- from review 4 ----
        # The sum started at a bare 0.0: Numba types acc as float64, so every multiply-add of the loop runs in float64
        # (1/32 of the float32 rate on a T4). The simulator's numbers are the same: only the source shows it.
        "r4_acc_float64": _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)",
                                 "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)"
                                 ).replace("acc = float32(0.0)", "acc = 0.0"),
        # The same with float(0): a Python float, float64 in Numba too.
        "acc_float_call": _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)",
                                 "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)"
                                 ).replace("acc = float32(0.0)", "acc = float(0)"),
        # The sum started at an int 0: int64 plus float32 is float64 in Numba, so the loop runs in float64 too.
        "acc_int_start": _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)",
                                "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)"
                                ).replace("acc = float32(0.0)", "acc = 0"),
        # The barriers inside `if row < n and col < m`: threads outside C skip them (a divergent barrier: it may
        # hang a GPU). Right when the tile divides n and m (the visible 16 x 16).
        "r4_barrier_in_guard": _tiled_body(_STD_HEAD + '''\
        col = cuda.blockIdx.x * tile + tx
        row = cuda.blockIdx.y * tile + ty
        acc = float32(0.0)
        for step in range((A.shape[1] + tile - 1) // tile):
            k = step * tile + tx
            tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)
            k = step * tile + ty
            tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)
            if row < C.shape[0] and col < C.shape[1]:
                cuda.syncthreads()
                for kk in range(tile):
                    acc += tile_a[ty, kk] * tile_b[kk, tx]
                cuda.syncthreads()
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
'''),
        # ---- from review 5 ----
        # Tiles sized from cuda.blockDim: the simulator runs it, but a GPU does not compile a shared array whose
        # shape is not a compile-time constant.
        "r5_shape_block_dim": _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)",
                                    "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)").replace(
            "(tile, tile)", "(cuda.blockDim.y, cuda.blockDim.x)"),
        # Tiles hard-coded 16 x 16 from a module constant: a constant shape, right for tiles up to 16, but at tile 32
        # the threads index past the tiles (silent corruption on a GPU, which checks no bounds).
        "r5_tile_hard_coded": "TILE = 16\n\n\n" + _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0.0)",
                                    "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0.0)").replace(
            "(tile, tile)", "(TILE, TILE)"),
    },
    "ex2-solution": {
        # A plain += on the shared histogram (the answer that passed v2): right when the threads of a block run one
        # at a time, as the default tracer runs them; interleaved, two threads read the same count and one update
        # is lost, as on a GPU.
        "typical": _histogram(count="private[labels[i]] += 1"),
        # One global atomic per element: the right counts, but up to `threads` updates of counts per block, queued
        # on a few words, instead of at most one per bin.
        "global_atomics": _EX2_HEAD + '''\
        i = cuda.grid(1)
        if i < labels.size:
            cuda.atomic.add(counts, labels[i], 1)
''' + _EX2_TAIL,
        "constant": _EX2_HEAD + '''\
        i = cuda.grid(1)
        if i < counts.size:
            counts[i] = 0
''' + _EX2_TAIL,
        # Thread 0 of block 0 counts everything from global memory, like np.bincount: right counts, far over the
        # read budget.
        "helper": _EX2_HEAD + '''\
        if cuda.grid(1) == 0:
            for j in range(labels.size):
                counts[labels[j]] += 1
''' + _EX2_TAIL,
        # The private histogram hard-codes the visible 8 bins.
        "visible_only": _histogram(size="8", zero="for b in range(t, 8, threads):",
                                   merge_loop="for b in range(t, 8, threads):"),
        # Merges with a plain +=: blocks run one after another in the simulator, so the counts come out right; on a
        # GPU two blocks can add to one bin at the same time (the tracer reports the data race).
        "no_atomic": _histogram(merge="counts[b] += private[b]"),
        # One bin per thread: with more bins than threads, the last bins are never zeroed or merged.
        "bins_per_thread": _histogram(zero="for b in range(t, min(t + 1, bins)):",
                                      merge_loop="for b in range(t, min(t + 1, bins)):"),
        # No barriers: thread 0 merges the private counts before the other threads of its block have counted.
        "no_barriers": _histogram(barrier="pass"),
        # No barrier after zeroing: a thread counts into a bin another thread has not zeroed yet (or zeroes a count).
        "no_zero_barrier": _histogram(barrier="pass", barrier_2="cuda.syncthreads()"),
        # No barrier before the merge: a thread merges its bins while others of its block are still counting.
        "no_merge_barrier": _histogram(barrier_2="pass"),
        # The guard compares with <=: the thread with i == n reads one label past the end.
        "off_by_one_guard": _EX2_HEAD + '''\
        private = cuda.shared.array(bins, int32)
        t = cuda.threadIdx.x
        for b in range(t, bins, threads):
            private[b] = 0
        cuda.syncthreads()
        i = cuda.grid(1)
        if i <= labels.size:
            cuda.atomic.add(private, labels[i], 1)
        cuda.syncthreads()
        for b in range(t, bins, threads):
            if private[b] > 0:
                cuda.atomic.add(counts, b, private[b])
''' + _EX2_TAIL,
        # ---- from review 2 ----
        # The private histogram sized by the block, not the bins.
        "rev_private_threads": _histogram(size="threads"),
        # Every thread merges every bin: threads x bins global atomics per block.
        "rev_merge_everything": _histogram(merge_loop="for b in range(bins):"),
        # ---- from review 4 ----
        # The count and both barriers inside `if i < labels.size`: threads past the end skip the barriers (a
        # divergent barrier: it may hang a GPU) and zero or merge while the others count.
        "r4_barrier_in_guard": _EX2_HEAD + '''\
        private = cuda.shared.array(bins, int32)
        t = cuda.threadIdx.x
        for b in range(t, bins, threads):
            private[b] = 0
        i = cuda.grid(1)
        if i < labels.size:
            cuda.syncthreads()
            cuda.atomic.add(private, labels[i], 1)
            cuda.syncthreads()
        for b in range(t, bins, threads):
            if private[b] > 0:
                cuda.atomic.add(counts, b, private[b])
''' + _EX2_TAIL,
        # ---- from review 5 ----
        # The private histogram sized from the argument: runs in the simulator, does not compile on a GPU.
        "r5_shape_counts_size": _histogram(size="counts.size"),
    },
    "ex3-solution": {
        # No shared memory: each thread copies x[i, j] to out[j, i] directly. The reads walk along rows of x, but a
        # warp's writes go down a column of out: 32 sectors per warp-wide write instead of 4 or 5.
        "typical": _EX3_HEAD + '''\
        col = cuda.blockIdx.x * 32 + cuda.threadIdx.x
        for r in range(cuda.threadIdx.y, 32, 4):
            row = cuda.blockIdx.y * 32 + r
            if row < x.shape[0] and col < x.shape[1]:
                out[col, row] = x[row, col]
''' + _EX3_TAIL,
        # The tile without its padding column: reading it down a column is a 32-way bank conflict.
        "no_padding": _transpose(columns="32"),
        "constant": _EX3_HEAD + '''\
        col = cuda.blockIdx.x * 32 + cuda.threadIdx.x
        for r in range(cuda.threadIdx.y, 32, 4):
            row = cuda.blockIdx.y * 32 + r
            if row < out.shape[0] and col < out.shape[1]:
                out[row, col] = 0.0
''' + _EX3_TAIL,
        # Thread 0 of block 0 transposes everything, like x.T.copy(): right result, far over the budget.
        "helper": _EX3_HEAD + '''\
        if cuda.grid(2) == (0, 0):
            for i in range(x.shape[0]):
                for j in range(x.shape[1]):
                    out[j, i] = x[i, j]
''' + _EX3_TAIL,
        # The guards hard-code the visible 33 x 40 matrix.
        "visible_only": _transpose(read_guard="row < 33 and col < 40", write_guard="out_row < 40 and out_col < 33"),
        # No barrier between loading the tile and reading it: lanes read elements other warps have not loaded yet.
        "no_barrier": _transpose(barrier="pass"),
        # The tile read with the same indices as it was written: a copy of x's tile into out's, not a transpose.
        "tile_not_transposed": _transpose(read_tile="tile[r, tx]"),
        # Guards written with <=: a thread at row == rows reads past the end of x.
        "off_by_one_guard": _transpose(read_guard="row <= x.shape[0] and col <= x.shape[1]",
                                       write_guard="out_row <= out.shape[0] and out_col <= out.shape[1]"),
        # ---- from review 2 ----
        # Padding of 2 words: tile[tx, r] lands in bank (2 tx + r) mod 32, a 2-way conflict.
        "rev_pad34": _transpose(columns="34"),
        # The padding on the wrong axis: (33, 32) rows, still 32-way down a column.
        "rev_pad_rows": _EX3_HEAD + '''\
        tile = cuda.shared.array((33, 32), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * 32 + tx
        for r in range(ty, 32, 4):
            row = cuda.blockIdx.y * 32 + r
            if row < x.shape[0] and col < x.shape[1]:
                tile[r, tx] = x[row, col]
        cuda.syncthreads()
        out_col = cuda.blockIdx.y * 32 + tx
        for r in range(ty, 32, 4):
            out_row = cuda.blockIdx.x * 32 + r
            if out_row < out.shape[0] and out_col < out.shape[1]:
                out[out_row, out_col] = tile[tx, r]
''' + _EX3_TAIL,
        # Reads x down columns into the tile (tile[tx, r] = x[by*32 + tx, bx*32 + r]) and writes rows of out: the
        # writes are coalesced, the reads strided.
        "rev_strided_reads": _EX3_HEAD + '''\
        tile = cuda.shared.array((32, 33), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        for r in range(ty, 32, 4):
            row = cuda.blockIdx.y * 32 + tx
            col = cuda.blockIdx.x * 32 + r
            if row < x.shape[0] and col < x.shape[1]:
                tile[tx, r] = x[row, col]
        cuda.syncthreads()
        out_col = cuda.blockIdx.y * 32 + tx
        for r in range(ty, 32, 4):
            out_row = cuda.blockIdx.x * 32 + r
            if out_row < out.shape[0] and out_col < out.shape[1]:
                out[out_row, out_col] = tile[tx, r]
''' + _EX3_TAIL,
        # ---- from review 4 ----
        # The barrier inside the read guard, in the load loop: threads of edge blocks outside x pass fewer barriers
        # (a divergent barrier: it may hang a GPU).
        "r4_barrier_in_guard": _EX3_HEAD + '''\
        tile = cuda.shared.array((32, 33), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col = cuda.blockIdx.x * 32 + tx
        for r in range(ty, 32, 4):
            row = cuda.blockIdx.y * 32 + r
            if row < x.shape[0] and col < x.shape[1]:
                tile[r, tx] = x[row, col]
                cuda.syncthreads()
        out_col = cuda.blockIdx.y * 32 + tx
        for r in range(ty, 32, 4):
            out_row = cuda.blockIdx.x * 32 + r
            if out_row < out.shape[0] and out_col < out.shape[1]:
                out[out_row, out_col] = tile[tx, r]
''' + _EX3_TAIL,
        # ---- from review 5 ----
        # The padded width from cuda.blockDim: runs in the simulator, does not compile on a GPU.
        "r5_shape_block_dim": _transpose(columns="cuda.blockDim.x + 1"),
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
