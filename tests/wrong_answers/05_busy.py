"""Plausible wrong answers to lesson 05's exercises: each must lose exactly its own exercise's points."""

WRONG: dict[str, str] = {
    # Reads the table by "Self CPU": names the row with the largest self time (the DataLoader's row or aten::mm),
    # not the stage with the largest total.
    "ex1-solution": '''\
def find_bottleneck(rows: list[dict], stages) -> str:
    """Name of the stage whose time (larger of CPU total and device total) is the largest."""
    return max(rows, key=lambda row: row["self_cpu_us"])["name"]
''',
    # Assumes the loop always runs at the pace of its slower side, as if loading and computing always overlapped.
    "ex2-solution": '''\
def loop_samples_per_s(loader_sps: float, compute_sps: float, overlap: bool) -> float:
    """Samples/s of a training loop from the loader's and the compute's rates, with or without overlap."""
    return float(min(loader_sps, compute_sps))
''',
    # "Just add workers": two processes and a deeper prefetch queue, but every image is still decoded every epoch.
    "ex3-solution": '''\
def make_fast_loader(dataset, batch_size: int):
    """A loader over `dataset` that keeps the model fed: at least half of the compute-only throughput."""
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=2, prefetch_factor=4)
''',
    # cache() before the expensive map: the cache holds undecoded images, so every epoch decodes them again.
    "ex4-solution": '''\
def cached_pipeline(images, labels, decode, batch_size: int):
    """tf.data: decode in parallel, cache the decoded elements, reshuffle each epoch, batch, prefetch."""
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).cache()
    dataset = dataset.shuffle(len(images)).map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
''',
    # Takes the batch size with the highest measured throughput, not the smallest one that gets close to it.
    "ex5-solution": '''\
def saturation_batch_size(batch_sizes, samples_per_s, fraction: float = 0.9) -> int:
    """Smallest batch size whose throughput is within `fraction` of the best measured."""
    if len(batch_sizes) == 0 or len(batch_sizes) != len(samples_per_s):
        raise ValueError("batch_sizes and samples_per_s must be non-empty and of the same length")
    best = max(range(len(batch_sizes)), key=lambda i: samples_per_s[i])
    return int(batch_sizes[best])
''',
}
