"""Plausible wrong answers to lesson 09's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

_EX2 = '''\
def loop_samples_per_s(loader_sps: float, compute_sps: float, overlap: bool) -> float:
    """Samples/s of a training loop from the loader's and the compute's rates, with or without overlap."""
'''
_EX3 = '''\
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler, TensorDataset


def make_fast_loader(dataset, batch_size: int):
    """A loader over `dataset` that keeps the model fed: at least half of the compute-only throughput."""
'''
_EX4 = '''\
def cached_pipeline(images, labels, decode, batch_size: int):
    """tf.data: decode in parallel, cache the decoded elements, reshuffle each epoch, batch, prefetch."""
'''
_EX5 = '''\
def saturation_batch_size(batch_sizes, samples_per_s, fraction: float = 0.9) -> int:
    """Smallest batch size whose throughput is within `fraction` of the best measured."""
'''
_DECODE_ONCE = '''\
    items = [dataset[i] for i in range(len(dataset))]
    x = torch.stack([item[0] for item in items])
    y = torch.tensor([item[1] for item in items])
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The visible test's first answer.
        "constant": _EX2 + '''\
    return 909.090909090909
''',
        # The course's loop_rate: off-limits here.
        "helper": _EX2 + '''\
    return pipeline.loop_rate(loader_sps, compute_sps, overlap)
''',
        # Right for the visible rates only; the slower side otherwise.
        "visible_only": _EX2 + '''\
    if (loader_sps, compute_sps) == (1000.0, 10000.0) and not overlap:
        return 1 / (1 / 1000 + 1 / 10000)
    return float(min(loader_sps, compute_sps))
''',
        # Assumes the loop always runs at the pace of its slower side, as if loading and computing always overlapped.
        "typical": _EX2 + '''\
    return float(min(loader_sps, compute_sps))
''',
        # The harmonic mean instead of the sum of the times: twice the right rate without overlap.
        "harmonic_mean": _EX2 + '''\
    if overlap:
        return float(min(loader_sps, compute_sps))
    return 2.0 / (1.0 / loader_sps + 1.0 / compute_sps)
''',
    },
    "ex2-solution": {
        # The notebook's own batches (of DATA, section 2), whatever the dataset.
        "constant": _EX3 + '''\
    return COMPUTE_BATCHES
''',
        # The course's preprocess_once and batched_loader: off-limits here.
        "helper": _EX3 + '''\
    return batched_loader(preprocess_once(dataset), batch_size)
''',
        # drop_last=True: right when the batch size divides the dataset (384 = 6 x 64), loses items otherwise.
        "visible_only": _EX3 + _DECODE_ONCE + '''\
    tensors = TensorDataset(x, y)
    return DataLoader(tensors, sampler=BatchSampler(RandomSampler(tensors), batch_size, drop_last=True), batch_size=None)
''',
        # "Just add workers": two processes and a deeper prefetch queue, but every image is still decoded every epoch.
        "typical": _EX3 + '''\
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=2, prefetch_factor=4)
''',
        # Borrows the lesson's instant twin instead of decoding: no item is read through dataset[i].
        "instant_twin": _EX3 + '''\
    twin = dataset.instant()
    return DataLoader(TensorDataset(torch.stack([twin[i][0] for i in range(len(twin))]),
                                    torch.tensor([twin[i][1] for i in range(len(twin))])),
                      batch_size=batch_size, shuffle=True)
''',
        # Decoded once, but served in the stored order every epoch.
        "no_shuffle": _EX3 + _DECODE_ONCE + '''\
    tensors = TensorDataset(x, y)
    return DataLoader(tensors, sampler=BatchSampler(SequentialSampler(tensors), batch_size, drop_last=False),
                      batch_size=None)
''',
        # Shuffled once, at preprocessing: the same permutation every epoch.
        "fixed_permutation": _EX3 + _DECODE_ONCE + '''\
    order = torch.randperm(len(y))
    return [(x[order[i:i + batch_size]], y[order[i:i + batch_size]]) for i in range(0, len(y), batch_size)]
''',
        # Rotates the order by one batch each epoch: the order changes, but it is the same permutation shifted.
        "rotating": _EX3 + _DECODE_ONCE + '''\
    class Rotating:
        def __init__(self):
            self.epoch = 0
            self.order = torch.randperm(len(y))

        def __iter__(self):
            order = torch.roll(self.order, self.epoch * batch_size)
            self.epoch += 1
            return iter([(x[order[i:i + batch_size]], y[order[i:i + batch_size]]) for i in range(0, len(y), batch_size)])

    return Rotating()
''',
    },
    "ex3-solution": {
        # The notebook's own cached pipeline (of RAW, section 7), whatever the images.
        "constant": _EX4 + '''\
    return cached
''',
        # The course's tf_pipeline: off-limits here.
        "helper": _EX4 + '''\
    return pipeline.tf_pipeline(images, labels, decode, batch_size, cache=True, shuffle=True)
''',
        # The visible batch size, 32, hard-coded.
        "visible_only": _EX4 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()
    return dataset.shuffle(len(images)).batch(32).prefetch(tf.data.AUTOTUNE)
''',
        # cache() before the expensive map: the cache holds undecoded images, so every epoch decodes them again.
        "typical": _EX4 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).cache()
    dataset = dataset.shuffle(len(images)).map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
''',
        # shuffle() before cache(): the first epoch's order is cached and replayed every epoch.
        "shuffle_before_cache": _EX4 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).shuffle(len(images))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
''',
        # A shuffle buffer of one batch: the order changes, but only locally.
        "small_buffer": _EX4 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()
    return dataset.shuffle(batch_size).batch(batch_size).prefetch(tf.data.AUTOTUNE)
''',
        # reshuffle_each_iteration=False: one random order, replayed every epoch.
        "no_reshuffle": _EX4 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()
    dataset = dataset.shuffle(len(images), reshuffle_each_iteration=False)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
''',
    },
    "ex4-solution": {
        # The visible test's first answer.
        "constant": _EX5 + '''\
    return 64
''',
        # The course's saturation_batch: off-limits here.
        "helper": _EX5 + '''\
    return pipeline.saturation_batch(batch_sizes, samples_per_s, fraction)
''',
        # Right for the visible sweeps only; the best batch size otherwise.
        "visible_only": _EX5 + '''\
    if list(batch_sizes) == [8, 16, 32, 64, 128, 256]:
        return 64
    if list(batch_sizes) == [256, 512, 1024, 2048, 4096, 8192]:
        return 2048
    best = max(range(len(batch_sizes)), key=lambda i: samples_per_s[i])
    return int(batch_sizes[best])
''',
        # Takes the batch size with the highest measured throughput, not the smallest one that gets close to it.
        "typical": _EX5 + '''\
    if len(batch_sizes) == 0 or len(batch_sizes) != len(samples_per_s):
        raise ValueError("batch_sizes and samples_per_s must be non-empty and of the same length")
    best = max(range(len(batch_sizes)), key=lambda i: samples_per_s[i])
    return int(batch_sizes[best])
''',
        # Assumes a sorted sweep: the first qualifying size in the order given.
        "first_in_order": _EX5 + '''\
    if len(batch_sizes) == 0 or len(batch_sizes) != len(samples_per_s):
        raise ValueError("batch_sizes and samples_per_s must be non-empty and of the same length")
    best = max(samples_per_s)
    return int(next(size for size, rate in zip(batch_sizes, samples_per_s) if rate >= fraction * best))
''',
        # Strictly above the threshold: misses a size exactly at it.
        "strict": _EX5 + '''\
    if len(batch_sizes) == 0 or len(batch_sizes) != len(samples_per_s):
        raise ValueError("batch_sizes and samples_per_s must be non-empty and of the same length")
    best = max(samples_per_s)
    above = [size for size, rate in zip(batch_sizes, samples_per_s) if rate > fraction * best]
    return int(min(above)) if above else int(batch_sizes[list(samples_per_s).index(best)])
''',
    },
}
