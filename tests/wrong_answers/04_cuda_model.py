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
                total = np.float32(0.0)
                for a in range(3):
                    for b in range(3):
                        r, c = i + a - 1, j + b - 1
                        if r >= 0 and r < rows and c >= 0 and c < cols:
                            total += weights[a, b] * image[r, c]
                out[i, j] = total
'''
_EX1_GUARDED_ADD = ("if r >= 0 and r < rows and c >= 0 and c < cols:\n"
                    "                            total += weights[a, b] * image[r, c]")
_EX2_HEAD = '''\
import math


def prepare_lengths(records: np.ndarray, fields: tuple):
    """Return (p, lengths): the float32 array the kernel reads (numbers of records (n, k), laid out as you choose)
    and a CUDA kernel lengths(p, out) that sets out[i] to the length of particle i over the given fields."""
'''
_SOA = '''\
    p = np.ascontiguousarray(records[:, list(fields)].T, dtype=np.float32)
'''
_SOA_KERNEL = '''
    @cuda.jit
    def lengths(p, out):
        i = cuda.grid(1)
        if i < out.size:
            total = np.float32(0.0)
            for f in range(p.shape[0]):
                value = p[f, i]
                total += value * value
            out[i] = math.sqrt(total)

    return p, lengths
'''
_FIELDS_KERNEL = '''
    @cuda.jit
    def lengths(p, out):
        i = cuda.grid(1)
        if i < out.size:
            total = np.float32(0.0)
            for f in fields:
                value = p[f, i]
                total += value * value
            out[i] = math.sqrt(total)

    return p, lengths
'''
_AOS_KERNEL = '''
    @cuda.jit
    def lengths(p, out):
        i = cuda.grid(1)
        if i < out.size:
            total = np.float32(0.0)
            for f in range(p.shape[1]):
                value = p[i, f]
                total += value * value
            out[i] = math.sqrt(total)

    return p, lengths
'''


_EX3_HEAD = '''\
def plan_bias_grad(batch: int, features: int):
    """Return a list of launches (kernel, grid, block), each run as kernel[grid, block](dy, partial, db), that leave
    db[j] = the sum of dy[:, j]; partial is a scratch array of shape (ceil(batch / 32), features)."""
'''
_EX3_CHUNKS = '''
    @cuda.jit
    def chunk_sums(dy, partial, db):
        j, c = cuda.grid(2)
        if j < dy.shape[1] and c < partial.shape[0]:
            total = np.float32(0.0)
            for i in range(32 * c, min(32 * c + 32, dy.shape[0])):
                total += dy[i, j]
            partial[c, j] = total
'''
_EX3_COLUMNS = '''
    @cuda.jit
    def column_sums(dy, partial, db):
        j = cuda.grid(1)
        if j < db.size:
            total = np.float32(0.0)
            for c in range(partial.shape[0]):
                total += partial[c, j]
            db[j] = total
'''
_EX3_TWO_LAUNCHES = '''
    block = (32, 4)
    chunks = kernels.blocks_for(batch, 32)
    return [(chunk_sums, kernels.grid_2d((chunks, features), block), block),
            (column_sums, kernels.blocks_for(features, 32), 32)]
'''
_EX3_MODEL = '''\
    @cuda.jit
    def chunk_sums(dy, partial, db):
        j, c = cuda.grid(2)  # x on the features: a warp reads 32 neighbours dy[i, j..j+31] of one row
        if j < dy.shape[1] and c < partial.shape[0]:
            total = np.float32(0.0)
            for i in range(32 * c, min(32 * c + 32, dy.shape[0])):  # chunk c: rows 32c .. 32c + 31
                total += dy[i, j]
            partial[c, j] = total  # one writer per element: no race

    def combine(stride: int, last: bool):
        """A kernel whose thread (j, c) adds the 32 sums of partial[:, j] stride rows apart from row 32 * stride * c."""
        @cuda.jit
        def add_32(dy, partial, db):
            j, c = cuda.grid(2)
            first = 32 * stride * c
            if j < db.size and first < partial.shape[0]:
                total = np.float32(0.0)
                for r in range(first, min(first + 32 * stride, partial.shape[0]), stride):
                    total += partial[r, j]  # a launch starts after the one before has finished
                if last:
                    db[j] = total
                else:
                    partial[first, j] = total  # a row only this thread reads: no race

        return add_32

    block = (32, 4)
    chunks = kernels.blocks_for(batch, 32)
    launches = [(chunk_sums, kernels.grid_2d((chunks, features), block), block)]
    stride = 1
    while True:  # each launch leaves 32 times fewer sums: 2,048 -> 64 -> 2 -> 1 at a batch of 65,536
        groups = -(-chunks // (32 * stride))  # ceil
        launches.append((combine(stride, groups == 1), kernels.grid_2d((groups, features), block), block))
        if groups == 1:
            return launches
        stride *= 32
'''
_EX3_ONE_LAUNCH = '''
    return [(bias_grad, kernels.blocks_for(features, 32), 32)]
'''


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # Review 5: the sum starts at a bare 0.0, so Numba makes it float64 (the same numbers here).
        "r5_float64_total": _ex1(_EX1_SUM.replace("total = np.float32(0.0)", "total = 0.0")),
        # The guard checks the upper bounds only: at the top row and the left column it reads image[-1, ...], which
        # Python and Numba (on a GPU too) wrap round to the last row: the far edge pads silently instead of zeros.
        # Review 6: float64 through a local. Numba gives a variable one type over all its assignments: float32 with
        # a bare 0.0 (or with an int 0) is float64, so v, and the float32-started total it enters, are float64.
        "r6_ifexp_zero_pad": _ex1(_EX1_SUM.replace(
            _EX1_GUARDED_ADD,
            "inside = r >= 0 and r < rows and c >= 0 and c < cols\n"
            "                        v = image[r, c] if inside else 0.0\n"
            "                        total += weights[a, b] * v")),
        "r6_ifexp_int_zero_pad": _ex1(_EX1_SUM.replace(
            _EX1_GUARDED_ADD,
            "inside = r >= 0 and r < rows and c >= 0 and c < cols\n"
            "                        v = image[r, c] if inside else 0\n"
            "                        total += weights[a, b] * v")),
        "r6_zero_then_assign": _ex1(_EX1_SUM.replace(
            _EX1_GUARDED_ADD,
            "v = 0.0\n"
            "                        if r >= 0 and r < rows and c >= 0 and c < cols:\n"
            "                            v = image[r, c]\n"
            "                        total += weights[a, b] * v")),
        # Review 7: the branchless mask idiom, clamped index times an int 0/1: float32 * int64 is float64 in Numba.
        "r7_int_mask_clamp": _ex1(_EX1_SUM.replace(
            _EX1_GUARDED_ADD,
            "inside = r >= 0 and r < rows and c >= 0 and c < cols\n"
            "                        m = 1 if inside else 0\n"
            "                        rr, cc = min(max(r, 0), rows - 1), min(max(c, 0), cols - 1)\n"
            "                        total += weights[a, b] * image[rr, cc] * m")),
        # Review 7: the same with a product of comparisons (bool * bool is int64 in Numba).
        "r7_bool_product_mask": _ex1(_EX1_SUM.replace(
            _EX1_GUARDED_ADD,
            "inside = (r >= 0) * (r < rows) * (c >= 0) * (c < cols)\n"
            "                        rr, cc = min(max(r, 0), rows - 1), min(max(c, 0), cols - 1)\n"
            "                        total += weights[a, b] * image[rr, cc] * inside")),
        # Review r8: the same mask typed to be safe: float32 * int32 is float64 too.
        "r8_np_int32_mask": _ex1(_EX1_SUM.replace(
            _EX1_GUARDED_ADD,
            "inside = r >= 0 and r < rows and c >= 0 and c < cols\n"
            "                        m = np.int32(1) if inside else np.int32(0)\n"
            "                        rr, cc = min(max(r, 0), rows - 1), min(max(c, 0), cols - 1)\n"
            "                        total += weights[a, b] * image[rr, cc] * m")),
        # Review 9: float64 from outside the kernel's source. A device function that pads with a bare 0.0 (Numba
        # unifies its float32 and float64 returns to float64), and a global PAD = 0.0 (a Python float, frozen as a
        # float64 constant): both make the sum float64; the test cell types the kernel with Numba to see them.
        "r9_device_pad_float64": '''\
def make_conv3x3_kernel():
    """Return a CUDA kernel conv3x3(image, weights, out)."""
    @cuda.jit(device=True)
    def pixel(image, r, c):
        if r >= 0 and r < image.shape[0] and c >= 0 and c < image.shape[1]:
            return image[r, c]
        return 0.0

    @cuda.jit
    def conv3x3(image, weights, out):
        x, y = cuda.grid(2)
        step_x, step_y = cuda.gridsize(2)
        rows, cols = out.shape
        for i in range(y, rows, step_y):
            for j in range(x, cols, step_x):
                total = np.float32(0.0)
                for a in range(3):
                    for b in range(3):
                        total += weights[a, b] * pixel(image, i + a - 1, j + b - 1)
                out[i, j] = total
    return conv3x3
''',
        "r9_global_pad_constant": "PAD = 0.0\n\n\n" + _ex1(_EX1_SUM.replace(
            _EX1_GUARDED_ADD,
            "inside = r >= 0 and r < rows and c >= 0 and c < cols\n"
            "                        v = image[r, c] if inside else PAD\n"
            "                        total += weights[a, b] * v")),
        # Review r10: a generator inside sum(): the simulator runs it, Numba's CUDA target refuses it.
        "r10_generator_sum": _ex1("""\
                out[i, j] = sum(weights[a, b] * image[i + a - 1, j + b - 1] for a in range(3) for b in range(3)
                                if 0 <= i + a - 1 < rows and 0 <= j + b - 1 < cols)
"""),
        # Review r11: a list comprehension inside sum(): njit on a CPU accepts it, Numba's CUDA target refuses it.
        "r11_list_comprehension_sum": _ex1("""\
                out[i, j] = sum([weights[a, b] * image[i + a - 1, j + b - 1] for a in range(3) for b in range(3)
                                 if 0 <= i + a - 1 < rows and 0 <= j + b - 1 < cols])
"""),
        # Review r11: each product in float64, cast back before the float32 sum: a float64 multiply per tap.
        "r11_f64_product": _ex1(_EX1_SUM.replace(
            "total += weights[a, b] * image[r, c]",
            "prod = weights[a, b] * image[r, c] * 1.0\n"
            "                            total += np.float32(prod)")),
        # Review r10: the sum kept in a float64 local array: every multiply-add runs in float64.
        "r10_local_float64": _ex1(_EX1_SUM.replace(
            "                total = np.float32(0.0)\n",
            "                acc = cuda.local.array(1, np.float64)\n                acc[0] = 0\n").replace(
            "total += weights[a, b] * image[r, c]", "acc[0] += weights[a, b] * image[r, c]").replace(
            "out[i, j] = total", "out[i, j] = acc[0]")),
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
            "                total = np.float32(0.0)", "                    total = np.float32(0.0)", 1) + _EX1_TAIL,
        # Hard-codes the visible 4 x 5 image: the loops end at 4 rows and 5 columns.
        "visible_only": _ex1(_EX1_SUM, _EX1_LOOPS.replace("rows, cols = out.shape", "rows, cols = 4, 5")),
        # One pixel per thread, as with a rounded-up grid: under a grid smaller than the image, pixels stay unwritten.
        "one_pixel_per_thread": _EX1_HEAD + """\
        j, i = cuda.grid(2)
        rows, cols = out.shape
        if i < rows and j < cols:
            total = np.float32(0.0)
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
        # The stride is the number of blocks (gridDim), not the number of threads (gridsize). (Review 2.)
        "stride_griddim": _ex1(_EX1_SUM, _EX1_LOOPS.replace("step_x, step_y = cuda.gridsize(2)",
                                                           "step_x, step_y = cuda.gridDim.x, cuda.gridDim.y")),
        # A 'valid' convolution: the border written as 0 instead of its zero-padded sum. (Review 2.)
        "valid_border_zero": _ex1("""\
                total = np.float32(0.0)
                if i >= 1 and i < rows - 1 and j >= 1 and j < cols - 1:
                    for a in range(3):
                        for b in range(3):
                            total += weights[a, b] * image[i + a - 1, j + b - 1]
                out[i, j] = total
"""),
        # Review 4: rows and columns swapped when reading the image's shape (right only on square images).
        "shape_swapped": _ex1(_EX1_SUM, _EX1_LOOPS.replace("rows, cols = out.shape", "cols, rows = out.shape")),
        "flipped_filter": _ex1(_EX1_SUM.replace("weights[a, b]", "weights[2 - a, 2 - b]")),
        # Review 3: '>' for '>=' (the first row and column count as outside), gridsize unpacked in the wrong order,
        # the filter transposed, and threadIdx in place of the global index (blocks repeat each other's pixels).
        "gt_not_ge": _ex1(_EX1_SUM.replace("r >= 0 and r < rows and c >= 0", "r > 0 and r < rows and c > 0")),
        "swapped_gridsize": _ex1(_EX1_SUM, _EX1_LOOPS.replace("step_x, step_y = cuda.gridsize(2)",
                                                             "step_y, step_x = cuda.gridsize(2)")),
        "weights_transposed": _ex1(_EX1_SUM.replace("weights[a, b]", "weights[b, a]")),
        "thread_not_grid": _ex1(_EX1_SUM, _EX1_LOOPS.replace("x, y = cuda.grid(2)",
                                                            "x, y = cuda.threadIdx.x, cuda.threadIdx.y")),
        # Edge pixels repeated instead of zeros (replicate padding): right inside the image only.
        "replicate_padding": _ex1("""\
                total = np.float32(0.0)
                for a in range(3):
                    for b in range(3):
                        r = min(max(i + a - 1, 0), rows - 1)
                        c = min(max(j + b - 1, 0), cols - 1)
                        total += weights[a, b] * image[r, c]
                out[i, j] = total
"""),
    },
    "ex2-solution": {
        # Keeps the records' rows (array of structures), only the needed columns: right numbers, but a warp's 32 reads
        # of one field lie len(fields) * 4 bytes apart and touch 12 sectors instead of 4 for three fields.
        "typical": _EX2_HEAD + '''\
    p = np.ascontiguousarray(records[:, list(fields)], dtype=np.float32)
''' + _AOS_KERNEL,
        # records.T has one row per field but is a view: the same memory, 4k bytes between neighbouring threads.
        "transposed_view": _EX2_HEAD + '''\
    p = records.T
''' + _FIELDS_KERNEL,
        # Review 4: a transposed view of a row-major copy of the fields: still laid out by particle in memory.
        "aos_copy_transposed": _EX2_HEAD + '''\
    p = np.ascontiguousarray(records[:, list(fields)], dtype=np.float32).T
''' + _SOA_KERNEL,
        # np.array of the transposed view keeps its (Fortran) memory order: the bytes are still laid out by particle.
        "fortran_copy": _EX2_HEAD + '''\
    p = np.array(records.T)
''' + _FIELDS_KERNEL,
        # reshape is not a transpose: the right shape, the numbers scrambled.
        "reshape_not_transpose": _EX2_HEAD + '''\
    p = np.ascontiguousarray(records[:, list(fields)]).reshape(len(fields), -1)
''' + _SOA_KERNEL,
        "constant": _EX2_HEAD + _SOA + '''
    @cuda.jit
    def lengths(p, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = 1.0

    return p, lengths
''',
        # numpy computes the lengths on the host; the "layout" carries them and the kernel copies.
        "helper": _EX2_HEAD + '''\
    p = np.linalg.norm(records[:, list(fields)], axis=1).astype(np.float32)[None, :]

    @cuda.jit
    def lengths(p, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = p[0, i]

    return p, lengths
''',
        # The visible example's fields: x, y, z, whatever fields asks for.
        "visible_only": _EX2_HEAD + '''\
    p = np.ascontiguousarray(records[:, :3].T, dtype=np.float32)
''' + _SOA_KERNEL,
        # Every field as its own row, but the kernel sums all k rows, not the fields asked for.
        "all_fields": _EX2_HEAD + '''\
    p = np.ascontiguousarray(records.T, dtype=np.float32)
''' + _SOA_KERNEL,
        # Reads each field twice from global memory (value * value with p[f, i] written out twice).
        "double_reads": _EX2_HEAD + _SOA + _SOA_KERNEL.replace(
            "value = p[f, i]\n                total += value * value", "total += p[f, i] * p[f, i]"),
        # The guard compares with <=: thread n passes it and reads past the end.
        "off_by_one_guard": _EX2_HEAD + _SOA + _SOA_KERNEL.replace("if i < out.size", "if i <= out.size"),
        # Review 3: the guard on the layout's first axis (the fields), or one short of the last particle.
        "guard_wrong_axis": _EX2_HEAD + _SOA + _SOA_KERNEL.replace("if i < out.size", "if i < p.shape[0]"),
        "guard_minus_one": _EX2_HEAD + _SOA + _SOA_KERNEL.replace("if i < out.size", "if i < out.size - 1"),
        # Review 4: the sum starts at a bare 0.0, so Numba makes it float64 (same numbers on the CPU; 1/32 to 1/64 of
        # the float32 rate on a T4 or an L4). And the same with float(0), also a float64.
        "float64_sum": _EX2_HEAD + _SOA + _SOA_KERNEL.replace("total = np.float32(0.0)", "total = 0.0"),
        "float64_sum_float_call": _EX2_HEAD + _SOA + _SOA_KERNEL.replace("total = np.float32(0.0)",
                                                                         "total = float(0)"),
        # The sum started at an int 0: int64 plus float32 is float64 in Numba.
        "float64_sum_int_start": _EX2_HEAD + _SOA + _SOA_KERNEL.replace("total = np.float32(0.0)", "total = 0"),
        # Review 6: value = p[f, i] * 1.0 is float64, and so the float32-started total it enters.
        "r6_float64_local": _EX2_HEAD + _SOA + _SOA_KERNEL.replace("value = p[f, i]", "value = p[f, i] * 1.0"),
        # Review 5: math.pow(v, 2) with an int exponent is float64 in Numba, and so the float32-started sum.
        "r5_math_pow": _EX2_HEAD + _SOA + _SOA_KERNEL.replace("total += value * value", "total += math.pow(value, 2)"),
        # Three fields hard-coded in the kernel: right for (0, 1, 2) and (3, 4, 5), wrong for one field or four.
        "three_fields": _EX2_HEAD + _SOA + '''
    @cuda.jit
    def lengths(p, out):
        i = cuda.grid(1)
        if i < out.size:
            x, y, z = p[0, i], p[1, i], p[2, i]
            out[i] = math.sqrt(x * x + y * y + z * z)

    return p, lengths
''',
    },
    "ex3-solution": {
        # One thread per feature summing the whole batch (v2's answer): right and coalesced, but at a large batch with
        # few features a handful of threads do all the work (each reads batch elements).
        "typical": _EX3_HEAD + '''
    @cuda.jit
    def bias_grad(dy, partial, db):
        j = cuda.grid(1)
        if j < db.size:
            total = np.float32(0.0)
            for i in range(dy.shape[0]):
                total += dy[i, j]
            db[j] = total
''' + _EX3_ONE_LAUNCH,
        "constant": _EX3_HEAD + '''
    @cuda.jit
    def bias_grad(dy, partial, db):
        j = cuda.grid(1)
        if j < db.size:
            db[j] = 0.0
''' + _EX3_ONE_LAUNCH,
        # Thread 0 sums everything, as numpy's dy.sum(axis=0) would on the host: right, one thread.
        "helper": _EX3_HEAD + '''
    @cuda.jit
    def bias_grad(dy, partial, db):
        if cuda.grid(1) == 0:
            for j in range(db.size):
                total = np.float32(0.0)
                for i in range(dy.shape[0]):
                    total += dy[i, j]
                db[j] = total
''' + _EX3_ONE_LAUNCH,
        # The second launch sums the visible input's 4 chunks (100 rows) only.
        "visible_only": _EX3_HEAD + _EX3_CHUNKS + _EX3_COLUMNS.replace("range(partial.shape[0])", "range(4)")
        + _EX3_TWO_LAUNCHES,
        # The second launch counts batch // 32 chunks: the last, partial chunk is dropped unless 32 divides the batch.
        "floor_chunks": _EX3_HEAD + _EX3_CHUNKS + _EX3_COLUMNS.replace(
            "range(partial.shape[0])", "range(dy.shape[0] // 32)") + _EX3_TWO_LAUNCHES,
        # Each chunk's thread adds its sum into db[j] after a launch that zeroes db: threads and blocks of one
        # feature read and write db[j] at once and lose updates (a race).
        "racy_add": _EX3_HEAD + '''
    @cuda.jit
    def zero(dy, partial, db):
        j = cuda.grid(1)
        if j < db.size:
            db[j] = 0.0

    @cuda.jit
    def chunk_add(dy, partial, db):
        j, c = cuda.grid(2)
        if j < dy.shape[1] and c < partial.shape[0]:
            total = np.float32(0.0)
            for i in range(32 * c, min(32 * c + 32, dy.shape[0])):
                total += dy[i, j]
            db[j] = db[j] + total

    block = (32, 4)
    chunks = kernels.blocks_for(batch, 32)
    return [(zero, kernels.blocks_for(features, 32), 32),
            (chunk_add, kernels.grid_2d((chunks, features), block), block)]
''',
        # The same with an atomic add: correct, but atomics the budget forbids, and db[j] written many times.
        "atomics": _EX3_HEAD + '''
    @cuda.jit
    def zero(dy, partial, db):
        j = cuda.grid(1)
        if j < db.size:
            db[j] = 0.0

    @cuda.jit
    def chunk_add(dy, partial, db):
        j, c = cuda.grid(2)
        if j < dy.shape[1] and c < partial.shape[0]:
            total = np.float32(0.0)
            for i in range(32 * c, min(32 * c + 32, dy.shape[0])):
                total += dy[i, j]
            cuda.atomic.add(db, j, total)

    block = (32, 4)
    chunks = kernels.blocks_for(batch, 32)
    return [(zero, kernels.blocks_for(features, 32), 32),
            (chunk_add, kernels.grid_2d((chunks, features), block), block)]
''',
        # x on the chunks, y on the features: a warp's 32 threads read 32 rows apart, one sector each.
        "x_on_chunks": _EX3_HEAD + _EX3_CHUNKS.replace("j, c = cuda.grid(2)", "c, j = cuda.grid(2)") + _EX3_COLUMNS
        + _EX3_TWO_LAUNCHES.replace("kernels.grid_2d((chunks, features), block)",
                                    "kernels.grid_2d((features, chunks), block)"),
        # The second launch accumulates into db, which holds garbage at first.
        "accumulate_in_db": _EX3_HEAD + _EX3_CHUNKS + _EX3_COLUMNS.replace(
            "            total = np.float32(0.0)\n", "").replace("total += partial[c, j]",
                                                        "db[j] += partial[c, j]").replace(
            "            db[j] = total\n", "") + _EX3_TWO_LAUNCHES,
        # One block as wide as the layer: right up to 1024 features, a launch CUDA refuses beyond. (Review 2.)
        "block_of_features": _EX3_HEAD + _EX3_CHUNKS + _EX3_COLUMNS + '''
    chunks = kernels.blocks_for(batch, 32)
    return [(chunk_sums, (1, chunks), (features, 1)), (column_sums, 1, features)]
''',
        # One launch: the block of the last chunk sums the others' partials, with no grid-wide barrier. (Review 2.)
        "last_block_finishes": _EX3_HEAD + '''
    @cuda.jit
    def bias_grad(dy, partial, db):
        j, c = cuda.grid(2)
        chunks = partial.shape[0]
        if j < dy.shape[1] and c < chunks:
            total = np.float32(0.0)
            for i in range(32 * c, min(32 * c + 32, dy.shape[0])):
                total += dy[i, j]
            if c < chunks - 1:
                partial[c, j] = total
            else:
                for k in range(chunks - 1):
                    total += partial[k, j]
                db[j] = total

    block = (32, 4)
    chunks = kernels.blocks_for(batch, 32)
    return [(bias_grad, kernels.grid_2d((chunks, features), block), block)]
''',
        # v3's first model answer: one second launch sums all ceil(batch / 32) chunk sums of a feature. Right, and
        # within the budget up to a batch of 1024; beyond, each thread reads more than 32 sums (2,048 at a batch of
        # 65,536: 4,096 threads, the one-thread-per-feature design again). (Review 3.)
        "single_second_launch": _EX3_HEAD + _EX3_CHUNKS + _EX3_COLUMNS + _EX3_TWO_LAUNCHES,
        # Review 5: chunk sums, then sums of 32 of them, then one launch that reads every group sum: within the budget
        # up to a batch of 32,768 only (64 reads per thread at 65,536; 1,024 at 2**20).
        "r5_fixed_three_levels": _EX3_HEAD + _EX3_CHUNKS + '''
    @cuda.jit
    def group_sums(dy, partial, db):
        j, g = cuda.grid(2)
        if j < db.size and 32 * g < partial.shape[0]:
            total = np.float32(0.0)
            for c in range(32 * g, min(32 * g + 32, partial.shape[0])):
                total += partial[c, j]
            partial[32 * g, j] = total

    @cuda.jit
    def final_sums(dy, partial, db):
        j = cuda.grid(1)
        if j < db.size:
            total = np.float32(0.0)
            for c in range(0, partial.shape[0], 32):
                total += partial[c, j]
            db[j] = total

    block = (32, 4)
    chunks = kernels.blocks_for(batch, 32)
    groups = kernels.blocks_for(chunks, 32)
    return [(chunk_sums, kernels.grid_2d((chunks, features), block), block),
            (group_sums, kernels.grid_2d((groups, features), block), block),
            (final_sums, kernels.blocks_for(features, 32), 32)]
''',
        # Review 5: the model answer with its sums started at a bare 0.0 (float64 in Numba).
        "r5_float64_total": _EX3_HEAD + _EX3_MODEL.replace("total = np.float32(0.0)", "total = 0.0"),
        # Review 6: the combine takes 32 fixed steps and pads with a bare 0.0: v, and so total, are float64.
        "r6_ifexp_zero_combine": _EX3_HEAD + _EX3_MODEL.replace(
            "for r in range(first, min(first + 32 * stride, partial.shape[0]), stride):\n"
            "                    total += partial[r, j]",
            "for k in range(32):\n"
            "                    r = first + k * stride\n"
            "                    v = partial[r, j] if r < partial.shape[0] else 0.0\n"
            "                    total += v"),
        # Review 7: the combine takes 32 fixed steps, clamps the row and multiplies by an int 0/1 (float64 in Numba).
        "r7_int_zero_mask_combine": _EX3_HEAD + _EX3_MODEL.replace(
            "for r in range(first, min(first + 32 * stride, partial.shape[0]), stride):\n"
            "                    total += partial[r, j]",
            "for k in range(32):\n"
            "                    r = first + k * stride\n"
            "                    ok = 1 if r < partial.shape[0] else 0\n"
            "                    total += partial[min(r, partial.shape[0] - 1), j] * ok"),
        # Review r8: the same with an np.int32 mask.
        "r8_np_int32_mask_combine": _EX3_HEAD + _EX3_MODEL.replace(
            "for r in range(first, min(first + 32 * stride, partial.shape[0]), stride):\n"
            "                    total += partial[r, j]",
            "for k in range(32):\n"
            "                    r = first + k * stride\n"
            "                    ok = np.int32(1) if r < partial.shape[0] else np.int32(0)\n"
            "                    total += partial[min(r, partial.shape[0] - 1), j] * ok"),
        # Review 3: the chunk loop without min(..., batch) (reads past dy's last row), and chunks guarded with <=.
        "no_min_chunk_end": _EX3_HEAD + _EX3_CHUNKS.replace("range(32 * c, min(32 * c + 32, dy.shape[0]))",
                                                            "range(32 * c, 32 * c + 32)") + _EX3_COLUMNS
        + _EX3_TWO_LAUNCHES,
        "guard_le_chunks": _EX3_HEAD + _EX3_CHUNKS.replace("c < partial.shape[0]", "c <= partial.shape[0]")
        + _EX3_COLUMNS + _EX3_TWO_LAUNCHES,
        # Review 3: a (32, 32) block stages one chunk in shared memory, but reads it with no cuda.syncthreads().
        "shared_no_sync": _EX3_HEAD + '''
    @cuda.jit
    def chunk_sums(dy, partial, db):
        staged = cuda.shared.array((32, 32), dtype=np.float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        j, c = cuda.blockIdx.x * 32 + tx, cuda.blockIdx.y
        i = 32 * c + ty
        value = np.float32(0.0)
        if j < dy.shape[1] and i < dy.shape[0]:
            value = dy[i, j]
        staged[ty, tx] = value
        if ty == 0 and j < dy.shape[1]:
            total = np.float32(0.0)
            for k in range(32):
                total += staged[k, tx]
            partial[c, j] = total
''' + _EX3_COLUMNS + '''
    chunks = kernels.blocks_for(batch, 32)
    return [(chunk_sums, (kernels.blocks_for(features, 32), chunks), (32, 32)),
            (column_sums, kernels.blocks_for(features, 32), 32)]
''',
        # The second launch's guard compares with <=: the thread just past the last feature reads partial[c, features].
        "off_by_one_guard": _EX3_HEAD + _EX3_CHUNKS + _EX3_COLUMNS.replace("if j < db.size", "if j <= db.size")
        + _EX3_TWO_LAUNCHES,
    },
}

# Review r12: what Numba's CUDA compiler refuses (a local list, np.zeros) or computes in float64 (math.pow cast back
# to float32 in the loop, ** 0.5 after it); the njit typing and the source rules let all four through.
WRONG["ex1-solution"]["r12_offsets_list"] = _ex1(
    _EX1_SUM.replace("r, c = i + a - 1, j + b - 1", "r, c = i + offsets[a], j + offsets[b]"),
    loops=_EX1_LOOPS.replace("        rows, cols = out.shape\n", "        rows, cols = out.shape\n"
                                                                 "        offsets = [-1, 0, 1]\n"))
WRONG["ex1-solution"]["r12_np_zeros_window"] = _ex1('''\
                window = np.zeros((3, 3), np.float32)
                for a in range(3):
                    for b in range(3):
                        r, c = i + a - 1, j + b - 1
                        if r >= 0 and r < rows and c >= 0 and c < cols:
                            window[a, b] = image[r, c]
                total = np.float32(0.0)
                for a in range(3):
                    for b in range(3):
                        total += weights[a, b] * window[a, b]
                out[i, j] = total
''')
WRONG["ex2-solution"]["r12_pow_cast_in_loop"] = _EX2_HEAD + _SOA + _SOA_KERNEL.replace(
    "total += value * value", "total += np.float32(math.pow(value, 2))")
WRONG["ex2-solution"]["r12_pow_half_after_loop"] = _EX2_HEAD + _SOA + _SOA_KERNEL.replace(
    "out[i] = math.sqrt(total)", "out[i] = total ** 0.5")
# Review r12 (major 3): the earlier model answer, chunks on the grid's y axis: gridDim.y of 131,072 at (2**24, 2).
WRONG["ex3-solution"]["r12_chunks_on_grid_y"] = _EX3_HEAD + _EX3_MODEL
for _exercise, _name in (("ex1-solution", "r12_offsets_list"), ("ex1-solution", "r12_np_zeros_window"),
                         ("ex2-solution", "r12_pow_cast_in_loop"), ("ex2-solution", "r12_pow_half_after_loop")):
    assert "offsets = [-1" in WRONG[_exercise][_name] or "np.zeros((3" in WRONG[_exercise][_name] \
        or "math.pow" in WRONG[_exercise][_name] or "** 0.5" in WRONG[_exercise][_name]

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)

# Correct answers other than the model answer: each must pass its exercise's tests, visible and hidden (run by
# tests/test_kernels.py). Review 7 found a correct Ex1 answer failing the read budget.
RIGHT: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # Review 7: the 3 x 3 filter loaded into a local array once per thread (a thread with no pixel reads it too).
        "r7ok_local_weights": _ex1(_EX1_SUM.replace("weights[a, b] * image[r, c]", "w[a, b] * image[r, c]"),
                                   loops=_EX1_LOOPS.replace(
                                       "        rows, cols = out.shape\n",
                                       "        rows, cols = out.shape\n"
                                       "        w = cuda.local.array((3, 3), np.float32)\n"
                                       "        for a in range(3):\n"
                                       "            for b in range(3):\n"
                                       "                w[a, b] = weights[a, b]\n")),
        # Review 9: a device function that pads with np.float32(0.0): float32 all through (Numba types it so).
        "r9ok_device_pad_float32": WRONG["ex1-solution"]["r9_device_pad_float64"].replace(
            "return 0.0", "return np.float32(0.0)"),
    },
    "ex3-solution": {
        # Review 9: the combining launches as a tree in shared memory, (32, 32) blocks of one partial per thread (the
        # design the written answer's rubric names); its test cell took 224 s when the later launches were traced
        # at 1,024 threads a block.
        "r9ok_shared_tree_combine": _EX3_HEAD + '''\
    @cuda.jit
    def chunk_sums(dy, partial, db):
        bands = (db.size + 31) // 32  # one row of blocks (r12): CUDA caps gridDim.y and z at 65,535
        j = cuda.blockIdx.x % bands * 32 + cuda.threadIdx.x
        c = cuda.blockIdx.x // bands * 4 + cuda.threadIdx.y
        if j < dy.shape[1] and c < partial.shape[0]:
            total = np.float32(0.0)
            end = 32 * c + 32 if 32 * c + 32 < dy.shape[0] else dy.shape[0]  # r13: no min() in a kernel
            for i in range(32 * c, end):
                total += dy[i, j]
            partial[c, j] = total

    def combine(stride: int, last: bool):
        @cuda.jit
        def tree(dy, partial, db):
            s = cuda.shared.array((32, 32), np.float32)
            tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
            bands = (db.size + 31) // 32
            j = cuda.blockIdx.x % bands * 32 + tx
            first = 32 * stride * (cuda.blockIdx.x // bands)
            r = first + ty * stride
            v = np.float32(0.0)
            if j < db.size and r < partial.shape[0]:
                v = partial[r, j]
            s[ty, tx] = v
            cuda.syncthreads()
            half = 16
            while half > 0:
                if ty < half:
                    s[ty, tx] += s[ty + half, tx]
                cuda.syncthreads()
                half //= 2
            if ty == 0 and j < db.size:
                if last:
                    db[j] = s[0, tx]
                else:
                    partial[first, j] = s[0, tx]
        return tree

    chunks = kernels.blocks_for(batch, 32)
    bands = kernels.blocks_for(features, 32)
    launches = [(chunk_sums, bands * kernels.blocks_for(chunks, 4), (32, 4))]
    stride = 1
    while True:
        groups = -(-chunks // (32 * stride))
        launches.append((combine(stride, groups == 1), bands * groups, (32, 32)))
        if groups == 1:
            return launches
        stride *= 32
''',
    },
}

# Review r10: the right shared-memory tree, in a float64 shared array (twice the shared memory, float64 adds).
WRONG["ex3-solution"]["r10_shared_float64_tree"] = RIGHT["ex3-solution"]["r9ok_shared_tree_combine"].replace(
    "cuda.shared.array((32, 32), np.float32)", "cuda.shared.array((32, 32), np.float64)")
assert WRONG["ex3-solution"]["r10_shared_float64_tree"] != RIGHT["ex3-solution"]["r9ok_shared_tree_combine"]

# Review r13 (major): kernels that read a tuple from their closure or module (Ex2's fields, Ex1's OFFSETS, Ex3's
# block) were not compiled, and the source check let float64 and np.zeros through.
WRONG["ex1-solution"]["r13_offsets_tuple_np_zeros"] = '''\
OFFSETS = (-1, 0, 1)


def make_conv3x3_kernel():
    @cuda.jit
    def conv3x3(image, weights, out):
        x, y = cuda.grid(2)
        tx, ty = cuda.gridsize(2)
        rows, cols = out.shape
        for i in range(y, rows, ty):
            for j in range(x, cols, tx):
                window = np.zeros((3, 3), np.float32)
                for a in range(3):
                    for b in range(3):
                        r, c = i + OFFSETS[a], j + OFFSETS[b]
                        if r >= 0 and r < rows and c >= 0 and c < cols:
                            window[a, b] = image[r, c]
                total = np.float32(0.0)
                for a in range(3):
                    for b in range(3):
                        total += weights[a, b] * window[a, b]
                out[i, j] = total
    return conv3x3
'''
_EX2_TUPLE = _EX2_HEAD + '''\
    p = np.ascontiguousarray(records.T, dtype=np.float32)   # (k, n): every field, one row each
    fields = tuple(int(f) for f in fields)

    @cuda.jit
    def lengths(p, out):
        i = cuda.grid(1)
        if i < out.size:
            total = np.float32(0.0)
            for f in fields:
                value = p[f, i]
                total += value * value
            out[i] = math.sqrt(total)
    return p, lengths
'''
WRONG["ex2-solution"]["r13_tuple_closure_pow_half"] = _EX2_TUPLE.replace("out[i] = math.sqrt(total)",
                                                                         "out[i] = total ** 0.5")
WRONG["ex2-solution"]["r13_tuple_closure_pow_cast"] = _EX2_TUPLE.replace("total += value * value",
                                                                         "total += np.float32(math.pow(value, 2))")
# Review r13 (critical): the r12 model answer, which calls the built-in min in both kernels: numba 0.66 to 0.68
# cannot compile it for a GPU (numba issue #10753), and the check used to patch it in.
_EX3_R13_MODEL = _EX3_HEAD + '''\
    block = (32, 4)
    feature_blocks = kernels.blocks_for(features, 32)  # a block: 32 features (a warp) by 4 chunks or sums

    # Grid: one row of blocks, feature_blocks per band of 4 chunks. CUDA caps gridDim.y at 65,535 (and x at
    # 2**31 - 1): chunks on y would fail above 8.4 M rows.
    @cuda.jit
    def chunk_sums(dy, partial, db):
        j = cuda.blockIdx.x % feature_blocks * 32 + cuda.threadIdx.x  # a warp reads 32 neighbours dy[i, j..j+31]
        c = cuda.blockIdx.x // feature_blocks * 4 + cuda.threadIdx.y
        if j < dy.shape[1] and c < partial.shape[0]:
            total = np.float32(0.0)
            end = 32 * c + 32  # chunk c: rows 32c .. 32c + 31 (an if, not min(): numba 0.66-0.68 cannot
            if end > dy.shape[0]:  # compile the built-in min or max in a kernel, numba issue #10753)
                end = dy.shape[0]
            for i in range(32 * c, end):
                total += dy[i, j]
            partial[c, j] = total  # one writer per element: no race

    def combine(stride: int, last: bool):
        """A kernel whose thread (j, c) adds the 32 sums of partial[:, j] stride rows apart from row 32 * stride * c."""
        @cuda.jit
        def add_32(dy, partial, db):
            j = cuda.blockIdx.x % feature_blocks * 32 + cuda.threadIdx.x
            c = cuda.blockIdx.x // feature_blocks * 4 + cuda.threadIdx.y
            first = 32 * stride * c
            if j < db.size and first < partial.shape[0]:
                total = np.float32(0.0)
                end = first + 32 * stride
                if end > partial.shape[0]:
                    end = partial.shape[0]
                for r in range(first, end, stride):
                    total += partial[r, j]  # a launch starts after the one before has finished
                if last:
                    db[j] = total
                else:
                    partial[first, j] = total  # a row only this thread reads: no race

        return add_32

    chunks = kernels.blocks_for(batch, 32)
    launches = [(chunk_sums, feature_blocks * kernels.blocks_for(chunks, 4), block)]
    stride = 1
    while True:  # each launch leaves 32 times fewer sums: 2,048 -> 64 -> 2 -> 1 at a batch of 65,536
        groups = -(-chunks // (32 * stride))  # ceil
        launches.append((combine(stride, groups == 1), feature_blocks * kernels.blocks_for(groups, 4), block))
        if groups == 1:
            return launches
        stride *= 32
'''
_EX3_CHUNK_END = ("            end = 32 * c + 32  # chunk c: rows 32c .. 32c + 31 (an if, not min(): numba 0.66-0.68 "
                  "cannot\n"
                  "            if end > dy.shape[0]:  # compile the built-in min or max in a kernel, numba issue "
                  "#10753)\n"
                  "                end = dy.shape[0]\n"
                  "            for i in range(32 * c, end):")
_EX3_COMBINE_END = ("                end = first + 32 * stride\n"
                    "                if end > partial.shape[0]:\n"
                    "                    end = partial.shape[0]\n"
                    "                for r in range(first, end, stride):")
assert _EX3_CHUNK_END in _EX3_R13_MODEL and _EX3_COMBINE_END in _EX3_R13_MODEL
WRONG["ex3-solution"]["r13_builtin_min"] = _EX3_R13_MODEL.replace(
    _EX3_CHUNK_END, "            for i in range(32 * c, min(32 * c + 32, dy.shape[0])):").replace(
    _EX3_COMBINE_END, "                for r in range(first, min(first + 32 * stride, partial.shape[0]), stride):")
# Review r13 (major): Ex3 with the block's width read from the closure tuple block, and a float64 pow cast back.
_EX3_BLOCK_TUPLE = _EX3_R13_MODEL.replace("feature_blocks * 32 + cuda.threadIdx.x", "feature_blocks * block[0] + "
                                          "cuda.threadIdx.x")
assert _EX3_BLOCK_TUPLE.count("block[0]") == 2
WRONG["ex3-solution"]["r13_block_tuple_pow_cast"] = "import math\n\n\n" + _EX3_BLOCK_TUPLE.replace(
    "total += dy[i, j]", "total += np.float32(math.pow(dy[i, j], 1))")
RIGHT["ex3-solution"]["r13ok_block_tuple"] = _EX3_BLOCK_TUPLE
for _exercise, _name in (("ex1-solution", "r13_offsets_tuple_np_zeros"),
                         ("ex2-solution", "r13_tuple_closure_pow_half"),
                         ("ex2-solution", "r13_tuple_closure_pow_cast"), ("ex3-solution", "r13_builtin_min"),
                         ("ex3-solution", "r13_block_tuple_pow_cast")):
    assert "OFFSETS[a]" in WRONG[_exercise][_name] or "for f in fields" in WRONG[_exercise][_name] \
        or "min(" in WRONG[_exercise][_name] or "block[0]" in WRONG[_exercise][_name]
# Review r13 (minor, from r12): a right Ex2 answer that accumulates with cuda.fma (the tracer lacked it).
RIGHT.setdefault("ex2-solution", {})["r13ok_cuda_fma"] = _EX2_HEAD + _SOA + _SOA_KERNEL.replace(
    "total += value * value", "total = cuda.fma(value, value, total)")
assert "cuda.fma" in RIGHT["ex2-solution"]["r13ok_cuda_fma"]

# Review r14 (major): a kernel defined once at module level (compiled once, "as a library would cache it") that reads
# a global the learner's function reassigns on every call. Numba freezes a global's value at the kernel's first
# compile: on a GPU every later call keeps the first fields (Ex2) or the first number of feature blocks (Ex3). The
# simulator and the tracer read the global afresh, so both passed on a CPU; the tracer now fails a kernel traced
# again after such a value changed (gpucourse.kernels.frozen).
WRONG["ex2-solution"]["r14_global_fields_frozen"] = '''\
import math

FIELDS = (0, 1, 2)


@cuda.jit
def _lengths(p, out):
    i = cuda.grid(1)
    if i < out.size:
        total = np.float32(0.0)
        for f in FIELDS:
            v = p[f, i]
            total += v * v
        out[i] = math.sqrt(total)


def prepare_lengths(records, fields):
    global FIELDS
    FIELDS = tuple(int(f) for f in fields)
    p = np.ascontiguousarray(records.T, dtype=np.float32)
    return p, _lengths
'''
_EX3_R14_AT_MODULE = '''\
FB = 1


@cuda.jit
def chunk_sums(dy, partial, db):
    j = cuda.blockIdx.x % FB * 32 + cuda.threadIdx.x
    c = cuda.blockIdx.x // FB * 4 + cuda.threadIdx.y
    if j < dy.shape[1] and c < partial.shape[0]:
        total = np.float32(0.0)
        end = 32 * c + 32
        if end > dy.shape[0]:
            end = dy.shape[0]
        for i in range(32 * c, end):
            total += dy[i, j]
        partial[c, j] = total


'''
_EX3_R14_BODY = _EX3_R13_MODEL.split("    @cuda.jit\n    def chunk_sums", 1)[0] + "    def combine" + \
    _EX3_R13_MODEL.split("    def combine", 1)[1]
WRONG["ex3-solution"]["r14_global_frozen"] = _EX3_R14_AT_MODULE + _EX3_R14_BODY.replace(
    "    feature_blocks = kernels.blocks_for(features, 32)",
    "    global FB\n    FB = feature_blocks = kernels.blocks_for(features, 32)")
assert "global FB" in WRONG["ex3-solution"]["r14_global_frozen"] \
    and "def chunk_sums" in WRONG["ex3-solution"]["r14_global_frozen"]
# Review r14 (minor): a right Ex1 kernel whose parameters are named (img, weights, result) scored 0: the test read the
# output array by the name `out`.
RIGHT["ex1-solution"]["r14ok_renamed_params"] = _ex1(
    _EX1_SUM.replace("image[r, c]", "img[r, c]").replace("out[i, j] = total", "result[i, j] = total"),
    loops=_EX1_LOOPS.replace("out.shape", "result.shape")).replace(
    "def conv3x3(image, weights, out):", "def conv3x3(img, weights, result):")
assert "out" not in RIGHT["ex1-solution"]["r14ok_renamed_params"].split("def conv3x3", 1)[1].replace("return", "")

# Review r15 (major): a cuda.syncthreads() that only some threads of a block reach (the barrier under the bounds
# guard) passed: the tracer releases a barrier once no thread can go on, so it did not hang. It computes the right
# db here and is undefined behaviour on a GPU (CUDA C++ Programming Guide, Synchronization Functions).
_R9_TREE = RIGHT["ex3-solution"]["r9ok_shared_tree_combine"]
_R9_TREE_BODY = '''\
            v = np.float32(0.0)
            if j < db.size and r < partial.shape[0]:
                v = partial[r, j]
            s[ty, tx] = v
            cuda.syncthreads()
            half = 16
            while half > 0:
                if ty < half:
                    s[ty, tx] += s[ty + half, tx]
                cuda.syncthreads()
                half //= 2
'''
assert _R9_TREE_BODY in _R9_TREE
WRONG["ex3-solution"]["r15_tree_barrier_under_guard"] = _R9_TREE.replace(_R9_TREE_BODY, '''\
            if j < db.size:  # lanes past the last feature skip every barrier below
                v = np.float32(0.0)
                if r < partial.shape[0]:
                    v = partial[r, j]
                s[ty, tx] = v
                cuda.syncthreads()
                half = 16
                while half > 0:
                    if ty < half:
                        s[ty, tx] += s[ty + half, tx]
                    cuda.syncthreads()
                    half //= 2
''')
_MODEL_GUARDED_LOOP = '''\
                for r in range(first, min(first + 32 * stride, partial.shape[0]), stride):
                    total += partial[r, j]  # a launch starts after the one before has finished
'''
assert _MODEL_GUARDED_LOOP in _EX3_MODEL
WRONG["ex3-solution"]["r15_divergent_barrier"] = _EX3_HEAD + _EX3_MODEL.replace(
    _MODEL_GUARDED_LOOP, _MODEL_GUARDED_LOOP + "                cuda.syncthreads()  # under `if j < db.size ...`\n")
