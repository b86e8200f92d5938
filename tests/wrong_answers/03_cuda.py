"""Plausible wrong answers to lesson 03's exercises: each must lose exactly its own exercise's points."""

WRONG: dict[str, str] = {
    # Forgets the block offset (global index = threadIdx only) and rounds the block count down.
    "ex1-solution": '''\
def launch_facts(n: int, threads_per_block: int, block: int, thread: int) -> dict:
    """Blocks needed, the thread's global index, whether it passes the guard, and the launch's idle threads."""
    blocks = n // threads_per_block
    index = thread
    return {"blocks": blocks, "global_index": index, "in_range": index < n,
            "idle_threads": blocks * threads_per_block - n}
''',
    # No bounds guard: the spare threads of the last block index past the arrays' ends.
    "ex2-solution": '''\
def make_vector_add_kernel():
    """Return a CUDA kernel vector_add(a, b, out) that sets out[i] = a[i] + b[i], one element per thread."""
    @cuda.jit
    def vector_add(a, b, out):
        i = cuda.grid(1)
        out[i] = a[i] + b[i]

    return vector_add
''',
    # x and y swapped: global x taken as the row, so the grid (x along columns) misses part of the matrix.
    "ex3-solution": '''\
def make_bias_relu_kernel():
    """Return a CUDA kernel bias_relu(x, bias, out): out[i, j] = max(x[i, j] + bias[j], 0), x along columns j."""
    @cuda.jit
    def bias_relu(x, bias, out):
        i, j = cuda.grid(2)
        if i < out.shape[0] and j < out.shape[1]:
            out[i, j] = max(x[i, j] + bias[j], 0.0)

    return bias_relu
''',
    # Right numbers, but the inner loop reads global memory (2k reads per thread): over the tiled budget.
    "ex4-solution": '''\
def make_tiled_matmul_kernel(tile: int):
    """Return a CUDA kernel matmul(A, B, C) computing C = A @ B with tile x tile blocks and shared-memory tiles."""
    @cuda.jit
    def matmul(A, B, C):
        col = cuda.blockIdx.x * tile + cuda.threadIdx.x
        row = cuda.blockIdx.y * tile + cuda.threadIdx.y
        if row < C.shape[0] and col < C.shape[1]:
            acc = float32(0.0)
            for k in range(A.shape[1]):
                acc += A[row, k] * B[k, col]
            C[row, col] = acc

    return matmul
''',
    # Leaves cudnn.benchmark on for reproducibility (its timing-based choice of algorithm can change between runs).
    "ex5-solution": '''\
def cudnn_settings(goal: str) -> dict:
    """PyTorch/TensorFlow switches for a goal: 'fast', 'reproducible' or 'accurate'."""
    if goal not in ("fast", "reproducible", "accurate"):
        raise ValueError(f"goal must be 'fast', 'reproducible' or 'accurate', got {goal!r}")
    return {"cudnn.benchmark": goal != "accurate",
            "cudnn.deterministic": goal != "fast",
            "cudnn.allow_tf32": goal != "accurate",
            "float32_matmul_precision": "highest" if goal == "accurate" else "high",
            "tf_op_determinism": goal != "fast"}
''',
}

# Also checked by hand (not in WRONG, which holds one answer per exercise): ex4 with both syncthreads() removed
# fails its traced result (threads read tile elements no thread has loaded yet: NaN in the tracer).
