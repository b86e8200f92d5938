"""Plausible wrong answers to lesson 04's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: "constant", "helper" (the
course's own helper where one computes the answer; for the kernel exercises, where none does, a library shortcut
that is not a kernel of one thread), "visible_only" (right on the visible test's input only), "typical" (the
lesson's typical mistake, used in the full nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1_HEAD = '''\
def make_vector_add_kernel():
    """Return a CUDA kernel vector_add(a, b, out) that sets out[i] = a[i] + b[i] for any n, under any launch."""
    @cuda.jit
    def vector_add(a, b, out):
'''
_EX1_TAIL = '''
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
_EX2_HEAD = '''\
import math


def prepare_norms(points: np.ndarray):
    """Return (p, norms): the float32 array the kernel reads (the numbers of points (n, 3), arranged for coalescing)
    and a CUDA kernel norms(p, out) that sets out[i] to the length of point i."""
'''
_SOA_KERNEL = '''
    @cuda.jit
    def norms(p, out):
        i = cuda.grid(1)
        if i < out.size:
            x, y, z = p[0, i], p[1, i], p[2, i]
            out[i] = math.sqrt(x * x + y * y + z * z)

    return p, norms
'''
_AOS_KERNEL = '''
    @cuda.jit
    def norms(p, out):
        i = cuda.grid(1)
        if i < out.size:
            x, y, z = p[i, 0], p[i, 1], p[i, 2]
            out[i] = math.sqrt(x * x + y * y + z * z)

    return p, norms
'''


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # One element per thread, as with blocks_for: with fewer threads than elements, the elements past the grid's
        # T threads are never written.
        "typical": _EX1_HEAD + '''\
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] + b[i]
''' + _EX1_TAIL,
        "constant": _EX1_HEAD + '''\
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = 0.0
''' + _EX1_TAIL,
        # Thread 0 does the whole add, like numpy's a + b: right result, one thread instead of the grid.
        "helper": _EX1_HEAD + '''\
        if cuda.grid(1) == 0:
            for i in range(out.size):
                out[i] = a[i] + b[i]
''' + _EX1_TAIL,
        # The stride hard-codes the visible grid of 2 x 32 threads.
        "visible_only": _EX1_HEAD + '''\
        for i in range(cuda.grid(1), out.size, 64):
            out[i] = a[i] + b[i]
''' + _EX1_TAIL,
        # Each thread takes a contiguous chunk: every element once, but neighbouring threads touch elements a chunk
        # apart (uncoalesced), and element i is not written by thread i mod T.
        "chunks": _EX1_HEAD + '''\
        total = cuda.gridsize(1)
        chunk = (out.size + total - 1) // total
        start = cuda.grid(1) * chunk
        for i in range(start, min(start + chunk, out.size)):
            out[i] = a[i] + b[i]
''' + _EX1_TAIL,
        # Steps by the block's size instead of the grid's: every block walks over the same elements (a data race).
        "block_stride": _EX1_HEAD + '''\
        for i in range(cuda.grid(1), out.size, cuda.blockDim.x):
            out[i] = a[i] + b[i]
''' + _EX1_TAIL,
        # The loop's guard written with <=: the thread that reaches i == n reads one element past the end.
        "off_by_one_guard": _EX1_HEAD + '''\
        i = cuda.grid(1)
        while i <= out.size:
            out[i] = a[i] + b[i]
            i += cuda.gridsize(1)
''' + _EX1_TAIL,
    },
    "ex2-solution": {
        # Keeps the rows as they came (array of structures): right numbers, but a warp's 32 reads of x lie 12 bytes
        # apart and touch 12 sectors instead of 4.
        "typical": _EX2_HEAD + '''\
    p = points.astype(np.float32)
''' + _AOS_KERNEL,
        # points.T has the (3, n) shape but is a view: the same memory, the same 12-byte stride between threads.
        "transposed_view": _EX2_HEAD + '''\
    p = points.T
''' + _SOA_KERNEL,
        "constant": _EX2_HEAD + '''\
    p = np.ascontiguousarray(points.T)

    @cuda.jit
    def norms(p, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 1.0

    return p, norms
''',
        # numpy computes the norms on the host; the "layout" carries them and the kernel copies.
        "helper": _EX2_HEAD + '''\
    lengths = np.linalg.norm(points, axis=1).astype(np.float32)
    p = np.stack([lengths, np.zeros_like(lengths), np.zeros_like(lengths)])

    @cuda.jit
    def norms(p, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = p[0, i]

    return p, norms
''',
        # The guard hard-codes the visible 100 points.
        "visible_only": _EX2_HEAD + '''\
    p = np.ascontiguousarray(points.T)

    @cuda.jit
    def norms(p, out):
        i = cuda.grid(1)
        if i < 100:
            x, y, z = p[0, i], p[1, i], p[2, i]
            out[i] = math.sqrt(x * x + y * y + z * z)

    return p, norms
''',
        # Reads each coordinate twice from global memory (x * x with x = p[0, i] written out twice): 6 reads.
        "double_reads": _EX2_HEAD + '''\
    p = np.ascontiguousarray(points.T)

    @cuda.jit
    def norms(p, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = math.sqrt(p[0, i] * p[0, i] + p[1, i] * p[1, i] + p[2, i] * p[2, i])

    return p, norms
''',
        # The guard compares with <=: thread n passes it and reads past the end.
        "off_by_one_guard": _EX2_HEAD + '''\
    p = np.ascontiguousarray(points.T)

    @cuda.jit
    def norms(p, out):
        i = cuda.grid(1)
        if i <= out.size:
            x, y, z = p[0, i], p[1, i], p[2, i]
            out[i] = math.sqrt(x * x + y * y + z * z)

    return p, norms
''',
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
        # Both bounds compared with <=: passes the visible 16 x 16 (a multiple of the block), not one row or column more.
        "off_by_one_guard": _EX3_HEAD + '''\
        j, i = cuda.grid(2)
        if i <= out.shape[0] and j <= out.shape[1]:
            out[i, j] = max(x[i, j] + bias[j], 0.0)
''' + _EX3_TAIL,
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
