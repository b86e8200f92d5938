"""Plausible wrong answers to lesson 04's exercises: each must lose exactly its own exercise's points.

grade_id of the solution cell -> {kind: full source of a wrong solution cell}. Kinds: "constant", "helper" (the
course's own helper where one computes the answer; for the kernel exercises, where none does, a library shortcut
that is not a kernel of one thread), "visible_only" (right on the visible test's input only), "typical" (the
lesson's typical mistake, used in the full nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1_HEAD = '''\
def make_conv3x3_kernel():
    """Return a CUDA kernel conv3x3(image, weights, out): a 3 x 3 zero-padded convolution on any 2-D grid."""
    @cuda.jit
    def conv3x3(image, weights, out):
'''
_EX1_TAIL = '''
    return conv3x3
'''
_EX1_LOOPS = '''\
        x, y = cuda.grid(2)
        step_x, step_y = cuda.gridsize(2)
        rows, cols = out.shape
        for i in range(y, rows, step_y):
            for j in range(x, cols, step_x):
'''


def _ex1(inner: str, loops: str = _EX1_LOOPS) -> str:
    """A wrong conv3x3 answer: the head, the loops over the thread's pixels, ``inner`` (indented for them), the
    tail."""
    return _EX1_HEAD + loops + inner + _EX1_TAIL


_EX1_SUM = '''\
                total = 0.0
                for a in range(3):
                    for b in range(3):
                        r, c = i + a - 1, j + b - 1
                        if r >= 0 and r < rows and c >= 0 and c < cols:
                            total += weights[a, b] * image[r, c]
                out[i, j] = total
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


_EX3_HEAD = '''\
def plan_bias_grad(batch: int, features: int):
    """Return (kernel, grid, block): a kernel bias_grad(dy, db) with db[j] = the sum of dy[:, j], and its launch."""
'''
_EX3_PER_FEATURE = '''
    threads = 32
    return bias_grad, kernels.blocks_for(features, threads), threads
'''


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The guard checks the upper bounds only: at the top row and the left column it reads image[-1, ...], which
        # Python and Numba (on a GPU too) wrap round to the last row: the far edge pads silently instead of zeros.
        "typical": _ex1(_EX1_SUM.replace("r >= 0 and r < rows and c >= 0 and c < cols", "r < rows and c < cols")),
        "constant": _ex1("""\
                out[i, j] = 0.0
"""),
        # Thread (0, 0) does the whole convolution, as a host loop would: right numbers, one thread for the image.
        "helper": _EX1_HEAD + """\
        x, y = cuda.grid(2)
        if x == 0 and y == 0:
            rows, cols = out.shape
            for i in range(rows):
                for j in range(cols):
""" + _EX1_SUM.replace("\n                ", "\n                    ").replace(
            "                total = 0.0", "                    total = 0.0", 1) + _EX1_TAIL,
        # Hard-codes the visible 4 x 5 image: the loops end at 4 rows and 5 columns.
        "visible_only": _ex1(_EX1_SUM, _EX1_LOOPS.replace("rows, cols = out.shape", "rows, cols = 4, 5")),
        # One pixel per thread, as with a rounded-up grid: under a grid smaller than the image, pixels stay unwritten.
        "one_pixel_per_thread": _EX1_HEAD + """\
        j, i = cuda.grid(2)
        rows, cols = out.shape
        if i < rows and j < cols:
            total = 0.0
            for a in range(3):
                for b in range(3):
                    r, c = i + a - 1, j + b - 1
                    if r >= 0 and r < rows and c >= 0 and c < cols:
                        total += weights[a, b] * image[r, c]
            out[i, j] = total
""" + _EX1_TAIL,
        # x taken as the row: every pixel is still covered by the grid-stride loops, but a warp walks down a column.
        "x_on_rows": _ex1(_EX1_SUM, _EX1_LOOPS.replace("x, y = cuda.grid(2)", "y, x = cuda.grid(2)").replace(
            "step_x, step_y = cuda.gridsize(2)", "step_y, step_x = cuda.gridsize(2)")),
        # Upper bounds compared with <=: the thread at the last row or column reads one past the end.
        "off_by_one_guard": _ex1(_EX1_SUM.replace("r < rows and c >= 0 and c < cols",
                                                  "r <= rows and c >= 0 and c <= cols")),
        # Accumulates straight into out, which fresh GPU memory does not zero: right only on zeroed output.
        "accumulate_in_out": _ex1("""\
                for a in range(3):
                    for b in range(3):
                        r, c = i + a - 1, j + b - 1
                        if r >= 0 and r < rows and c >= 0 and c < cols:
                            out[i, j] += weights[a, b] * image[r, c]
"""),
        # Zeroes out first, then accumulates into it: right numbers, but up to 10 writes and 9 reads of out per pixel.
        "zero_then_accumulate": _ex1("""\
                out[i, j] = 0.0
                for a in range(3):
                    for b in range(3):
                        r, c = i + a - 1, j + b - 1
                        if r >= 0 and r < rows and c >= 0 and c < cols:
                            out[i, j] += weights[a, b] * image[r, c]
"""),
        # Steps by the block's size instead of the grid's: blocks write the same pixels (a race between blocks).
        "block_stride": _ex1(_EX1_SUM, _EX1_LOOPS.replace("step_x, step_y = cuda.gridsize(2)",
                                                          "step_x, step_y = cuda.blockDim.x, cuda.blockDim.y")),
        # A true convolution (the filter flipped): right for the symmetric visible filters only.
        "flipped_filter": _ex1(_EX1_SUM.replace("weights[a, b]", "weights[2 - a, 2 - b]")),
        # Edge pixels repeated instead of zeros (replicate padding): right inside the image only.
        "replicate_padding": _ex1("""\
                total = 0.0
                for a in range(3):
                    for b in range(3):
                        r = min(max(i + a - 1, 0), rows - 1)
                        c = min(max(j + b - 1, 0), cols - 1)
                        total += weights[a, b] * image[r, c]
                out[i, j] = total
"""),
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
        # One thread per element adding into db[j]: the threads of a column interleave between reading db[j] and
        # writing it back, and lose updates (a block-by-block tracer that runs one thread at a time hides it).
        "typical": _EX3_HEAD + '''\
    @cuda.jit
    def bias_grad(dy, db):
        j, i = cuda.grid(2)
        if i < dy.shape[0] and j < dy.shape[1]:
            if i == 0:
                db[j] = dy[0, j]
            else:
                db[j] = db[j] + dy[i, j]

    block = (8, 8)
    return bias_grad, kernels.grid_2d((batch, features), block), block
''',
        "constant": _EX3_HEAD + '''\
    @cuda.jit
    def bias_grad(dy, db):
        j = cuda.grid(1)
        if j < db.size:
            db[j] = 0.0
''' + _EX3_PER_FEATURE,
        # Thread 0 sums everything, as numpy's dy.sum(axis=0) would on the host: right, one thread, uncoalesced.
        "helper": _EX3_HEAD + '''\
    @cuda.jit
    def bias_grad(dy, db):
        if cuda.grid(1) == 0:
            for j in range(db.size):
                total = 0.0
                for i in range(dy.shape[0]):
                    total += dy[i, j]
                db[j] = total
''' + _EX3_PER_FEATURE,
        # Sums the visible 6 rows only.
        "visible_only": _EX3_HEAD + '''\
    @cuda.jit
    def bias_grad(dy, db):
        j = cuda.grid(1)
        if j < db.size:
            total = 0.0
            for i in range(6):
                total += dy[i, j]
            db[j] = total
''' + _EX3_PER_FEATURE,
        # Accumulates straight into db, which fresh GPU memory does not zero.
        "accumulate_in_db": _EX3_HEAD + '''\
    @cuda.jit
    def bias_grad(dy, db):
        j = cuda.grid(1)
        if j < db.size:
            for i in range(dy.shape[0]):
                db[j] += dy[i, j]
''' + _EX3_PER_FEATURE,
        # Correct with atomics, one thread per element: atomics the budget forbids, and 2-D blocks of (8, 8) whose
        # warps read 4 rows of 8: more sectors than a warp reading 32 neighbours.
        "atomics": _EX3_HEAD + '''\
    @cuda.jit
    def bias_grad(dy, db):
        j, i = cuda.grid(2)
        if i == 0 and j < db.size:
            db[j] = 0.0
        if i < dy.shape[0] and j < dy.shape[1]:
            cuda.atomic.add(db, j, dy[i, j])

    block = (8, 8)
    return bias_grad, kernels.grid_2d((batch, features), block), block
''',
        # One block of 32 threads, each summing a chunk of neighbouring features: race-free and right, but the
        # 32 threads of a warp read features a chunk apart, so a warp-wide read of dy touches many sectors.
        "chunks": _EX3_HEAD + '''\
    @cuda.jit
    def bias_grad(dy, db):
        chunk = (db.size + 31) // 32
        start = cuda.grid(1) * chunk
        for j in range(start, min(start + chunk, db.size)):
            total = 0.0
            for i in range(dy.shape[0]):
                total += dy[i, j]
            db[j] = total

    return bias_grad, 1, 32
''',
        # The guard compares with <=: the thread just past the last feature reads dy[i, features].
        "off_by_one_guard": _EX3_HEAD + '''\
    @cuda.jit
    def bias_grad(dy, db):
        j = cuda.grid(1)
        if j <= db.size:
            total = 0.0
            for i in range(dy.shape[0]):
                total += dy[i, j]
            db[j] = total
''' + _EX3_PER_FEATURE,
        # Exactly one block of 32 threads whatever the number of features: features past 32 are never summed.
        "one_block": _EX3_HEAD + '''\
    @cuda.jit
    def bias_grad(dy, db):
        j = cuda.grid(1)
        if j < db.size:
            total = 0.0
            for i in range(dy.shape[0]):
                total += dy[i, j]
            db[j] = total

    return bias_grad, 1, 32
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
