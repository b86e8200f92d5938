"""Plausible wrong answers to lesson 03's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: "constant", "helper" (the
course's own helper where one computes the answer; for the kernel exercises, where none does, a library shortcut
that is not a kernel of one thread), "visible_only" (right on the visible test's input only), "typical" (the
lesson's typical mistake, used in the full nbgrader pipeline), and more.
"""

_EX1_HEAD = '''\
def launch_facts(n: int, threads_per_block: int, block: int, thread: int) -> dict:
    """Blocks needed, the thread's global index, whether it passes the guard, and the launch's idle threads."""
'''
_EX2_HEAD = '''\
def make_vector_add_kernel():
    """Return a CUDA kernel vector_add(a, b, out) that sets out[i] = a[i] + b[i], one element per thread."""
    @cuda.jit
    def vector_add(a, b, out):
'''
_EX2_TAIL = '''
    return vector_add
'''
_EX3_HEAD = '''\
def make_bias_relu_kernel():
    """Return a CUDA kernel bias_relu(x, bias, out): out[i, j] = max(x[i, j] + bias[j], 0), x along columns j."""
    @cuda.jit
    def bias_relu(x, bias, out):
'''
_EX3_TAIL = '''
    return bias_relu
'''
_EX4_HEAD = '''\
def make_tiled_matmul_kernel(tile: int):
    """Return a CUDA kernel matmul(A, B, C) computing C = A @ B with tile x tile blocks and shared-memory tiles."""
    @cuda.jit
    def matmul(A, B, C):
'''
_EX4_TAIL = '''
    return matmul
'''
_EX5_HEAD = '''\
def make_block_sum_kernel(threads: int):
    """Return a CUDA kernel block_sum(x, out) adding all of x into out[0]: a shared-memory tree, one atomic per block."""
    @cuda.jit
    def block_sum(x, out):
'''
_EX5_TAIL = '''
    return block_sum
'''
_EX6_HEAD = '''\
def cudnn_settings(goal: str) -> dict:
    """PyTorch/TensorFlow switches for a goal: 'fast', 'reproducible' or 'accurate'."""
    if goal not in ("fast", "reproducible", "accurate"):
        raise ValueError(f"goal must be 'fast', 'reproducible' or 'accurate', got {goal!r}")
'''


def _tiled(load_a: str, load_b: str, barrier_1: str = "cuda.syncthreads()", barrier_2: str = "cuda.syncthreads()") -> str:
    """A tiled matmul kernel with the given tile loads and barriers."""
    return _EX4_HEAD + f'''\
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
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = acc
''' + _EX4_TAIL


def _block_sum(load: str = "partial[t] = x[i] if i < x.size else 0.0", first_stride: str = "threads // 2",
               barrier: str = "cuda.syncthreads()") -> str:
    """A block-sum kernel with the given load, first stride and barrier."""
    return _EX5_HEAD + f'''\
        partial = cuda.shared.array(threads, float32)
        t = cuda.threadIdx.x
        i = cuda.grid(1)
        {load}
        {barrier}
        stride = {first_stride}
        while stride > 0:
            if t < stride:
                partial[t] += partial[t + stride]
            {barrier}
            stride //= 2
        if t == 0:
            cuda.atomic.add(out, 0, partial[0])
''' + _EX5_TAIL


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # Forgets the block offset (global index = threadIdx only) and rounds the block count down.
        "typical": _EX1_HEAD + '''\
    blocks = n // threads_per_block
    index = thread
    return {"blocks": blocks, "global_index": index, "in_range": index < n,
            "idle_threads": blocks * threads_per_block - n}
''',
        # The example in the question, whatever the launch.
        "constant": _EX1_HEAD + '''\
    return {"blocks": 3, "global_index": 19, "in_range": True, "idle_threads": 4}
''',
        "helper": _EX1_HEAD + '''\
    blocks = kernels.blocks_for(n, threads_per_block)
    index = block * threads_per_block + thread
    return {"blocks": blocks, "global_index": index, "in_range": index < n,
            "idle_threads": blocks * threads_per_block - n}
''',
        # Right for the two visible launches; rounds the block count down otherwise.
        "visible_only": _EX1_HEAD + '''\
    blocks = n // threads_per_block + (1 if (n, threads_per_block) in ((20, 8), (1000, 256)) else 0)
    index = block * threads_per_block + thread
    return {"blocks": blocks, "global_index": index, "in_range": index < n,
            "idle_threads": blocks * threads_per_block - n}
''',
        # Always adds a block, even when n is a multiple of the block size.
        "always_extra_block": _EX1_HEAD + '''\
    blocks = n // threads_per_block + 1
    index = block * threads_per_block + thread
    return {"blocks": blocks, "global_index": index, "in_range": index < n,
            "idle_threads": blocks * threads_per_block - n}
''',
    },
    "ex2-solution": {
        # No bounds guard: the spare threads of the last block index past the arrays' ends.
        "typical": _EX2_HEAD + '''\
        i = cuda.grid(1)
        out[i] = a[i] + b[i]
''' + _EX2_TAIL,
        "constant": _EX2_HEAD + '''\
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 0.0
''' + _EX2_TAIL,
        # numpy does the whole add in every thread: not one element per thread (the tracer counts every access).
        "helper": _EX2_HEAD + '''\
        i = cuda.grid(1)
        if i < out.size:
            for j in range(out.size):
                out[j] = a[j] + b[j]
''' + _EX2_TAIL,
        # The guard hard-codes the visible size.
        "visible_only": _EX2_HEAD + '''\
        i = cuda.grid(1)
        if i < 100:
            out[i] = a[i] + b[i]
''' + _EX2_TAIL,
        # threadIdx alone: every block writes the first elements.
        "thread_index_only": _EX2_HEAD + '''\
        i = cuda.threadIdx.x
        if i < out.size:
            out[i] = a[i] + b[i]
''' + _EX2_TAIL,
    },
    "ex3-solution": {
        # x and y swapped: global x taken as the row, so the grid (x along columns) misses part of the matrix.
        "typical": _EX3_HEAD + '''\
        i, j = cuda.grid(2)
        if i < out.shape[0] and j < out.shape[1]:
            out[i, j] = max(x[i, j] + bias[j], 0.0)
''' + _EX3_TAIL,
        "constant": _EX3_HEAD + '''\
        j, i = cuda.grid(2)
        if i < out.shape[0] and j < out.shape[1]:
            out[i, j] = 0.0
''' + _EX3_TAIL,
        # Every thread computes a whole row with a loop (the bias-add "library style"), not one element.
        "helper": _EX3_HEAD + '''\
        j, i = cuda.grid(2)
        if i < out.shape[0] and j < out.shape[1]:
            for jj in range(out.shape[1]):
                out[i, jj] = max(x[i, jj] + bias[jj], 0.0)
''' + _EX3_TAIL,
        # The guard hard-codes the visible 16 x 16 shape.
        "visible_only": _EX3_HEAD + '''\
        j, i = cuda.grid(2)
        if i < 16 and j < 16:
            out[i, j] = max(x[i, j] + bias[j], 0.0)
''' + _EX3_TAIL,
        # The bias per row instead of per column (right only where i == j would be enough: square inputs fail too).
        "bias_per_row": _EX3_HEAD + '''\
        j, i = cuda.grid(2)
        if i < out.shape[0] and j < out.shape[1] and i < bias.size:
            out[i, j] = max(x[i, j] + bias[i], 0.0)
''' + _EX3_TAIL,
    },
    "ex4-solution": {
        # Right numbers, but the inner loop reads global memory (2k reads per thread): over the tiled budget.
        "typical": _EX4_HEAD + '''\
        col = cuda.blockIdx.x * tile + cuda.threadIdx.x
        row = cuda.blockIdx.y * tile + cuda.threadIdx.y
        if row < C.shape[0] and col < C.shape[1]:
            acc = float32(0.0)
            for k in range(A.shape[1]):
                acc += A[row, k] * B[k, col]
            C[row, col] = acc
''' + _EX4_TAIL,
        "constant": _EX4_HEAD + '''\
        col = cuda.blockIdx.x * tile + cuda.threadIdx.x
        row = cuda.blockIdx.y * tile + cuda.threadIdx.y
        if row < C.shape[0] and col < C.shape[1]:
            C[row, col] = 0.0
''' + _EX4_TAIL,
        # Thread (0, 0) of block (0, 0) does the whole multiply, library style: right result, far over the budget.
        "helper": _EX4_HEAD + '''\
        if cuda.grid(2) == (0, 0):
            for r in range(C.shape[0]):
                for c in range(C.shape[1]):
                    acc = float32(0.0)
                    for k in range(A.shape[1]):
                        acc += A[r, k] * B[k, c]
                    C[r, c] = acc
''' + _EX4_TAIL,
        # No zero padding: right when every size is a multiple of the tile (the visible 16 x 16, tile 8).
        "visible_only": _tiled("tile_a[ty, tx] = A[row, k]", "tile_b[ty, tx] = B[k, col]"),
        # Both barriers left out: threads read tile elements that no thread has loaded yet.
        "no_barriers": _tiled("tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else 0.0",
                              "tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else 0.0",
                              "pass", "pass"),
    },
    "ex5-solution": {
        # One atomic per element: the right sum, n serialised updates of one word instead of one per block.
        "typical": _EX5_HEAD + '''\
        i = cuda.grid(1)
        if i < x.size:
            cuda.atomic.add(out, 0, x[i])
''' + _EX5_TAIL,
        # "The sum of standard-normal numbers is about 0."
        "constant": _EX5_HEAD + '''\
        if cuda.grid(1) == 0:
            out[0] = 0.0
''' + _EX5_TAIL,
        # Thread 0 of each block sums its block from global memory, serially: no shared memory, no tree.
        "helper": _EX5_HEAD + '''\
        if cuda.threadIdx.x == 0:
            total = float32(0.0)
            start = cuda.blockIdx.x * threads
            for j in range(start, min(start + threads, x.size)):
                total += x[j]
            cuda.atomic.add(out, 0, total)
''' + _EX5_TAIL,
        # The tree starts at stride 16: right for the visible blocks of 32 threads only.
        "visible_only": _block_sum(first_stride="16"),
        # No barriers: a thread adds a neighbour's value before it was loaded (NaN in the tracer).
        "no_barriers": _block_sum(barrier="pass"),
        # No 0.0 past the end: the spare threads of the last block read past x.
        "no_padding": _block_sum(load="partial[t] = x[i]"),
    },
    "ex6-solution": {
        # Leaves cudnn.benchmark on for reproducibility (its timing-based choice of algorithm can change between runs).
        "typical": _EX6_HEAD + '''\
    return {"cudnn.benchmark": goal != "accurate",
            "cudnn.deterministic": goal != "fast",
            "cudnn.allow_tf32": goal != "accurate",
            "float32_matmul_precision": "highest" if goal == "accurate" else "high",
            "tf_op_determinism": goal != "fast"}
''',
        # The 'reproducible' settings for every goal.
        "constant": _EX6_HEAD + '''\
    return {"cudnn.benchmark": False, "cudnn.deterministic": True, "cudnn.allow_tf32": True,
            "float32_matmul_precision": "high", "tf_op_determinism": True}
''',
        # No course helper computes these; this reads the session's current (default) torch settings for any goal.
        "helper": _EX6_HEAD + '''\
    return {"cudnn.benchmark": torch.backends.cudnn.benchmark,
            "cudnn.deterministic": torch.backends.cudnn.deterministic,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            "tf_op_determinism": torch.are_deterministic_algorithms_enabled()}
''',
        # Right on what the visible test shows (the keys, deterministic for 'reproducible'); TF32 off whenever
        # reproducible (mixing up "same numbers every run" with "full precision").
        "visible_only": _EX6_HEAD + '''\
    repeatable = goal != "fast"
    return {"cudnn.benchmark": not repeatable,
            "cudnn.deterministic": repeatable,
            "cudnn.allow_tf32": not repeatable,
            "float32_matmul_precision": "highest" if repeatable else "high",
            "tf_op_determinism": repeatable}
''',
        # Forgets TensorFlow: never asks for op determinism.
        "no_tensorflow": _EX6_HEAD + '''\
    repeatable = goal != "fast"
    full_precision = goal == "accurate"
    return {"cudnn.benchmark": not repeatable,
            "cudnn.deterministic": repeatable,
            "cudnn.allow_tf32": not full_precision,
            "float32_matmul_precision": "highest" if full_precision else "high",
            "tf_op_determinism": False}
''',
    },
}
