"""Plausible wrong answers to lesson 09's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''\
from torch.utils.data import BatchSampler, RandomSampler, SequentialSampler, TensorDataset


def make_fast_loader(dataset, batch_size: int):
    """A loader over `dataset` that keeps the model fed: at least a third of the compute-only throughput."""
'''
_EX2 = '''\
def augmented_pipeline(images, labels, decode, augment, batch_size: int):
    """tf.data: decode once (in parallel, cached), then every epoch: reshuffle, batch, augment, prefetch."""
'''
_EX3 = '''\
def choose_settings(sim, target_sps: float) -> dict:
    """The smallest batch size, then the fewest workers, whose epoch reaches target_sps; probes first, few epochs."""
'''
_EX4 = '''\
def diagnose_trace(trace: throttle.TrainingTrace) -> dict:
    """Why the throughput of `trace` fell, or that it did not ("none"), and the change that addresses it."""
'''
_EX4_WINDOWS = '''\
    count = len(trace)
    last = slice(count - max(3, count // 3), count)
    burst = np.median(trace.throughput[:max(3, count // 10)])
    fell = np.median(trace.throughput[last]) < 0.9 * burst
    reasons = monitor.reason_shares(trace.samples[last])
'''
_DECODE_ONCE = '''\
    items = [dataset[i] for i in range(len(dataset))]
    x = torch.stack([item[0] for item in items])
    y = torch.tensor([item[1] for item in items])
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The notebook's own batches (of DATA, section 2), whatever the dataset.
        "constant": _EX1 + '''\
    return COMPUTE_BATCHES
''',
        # The course's preprocess_once and batched_loader: off-limits here.
        "helper": _EX1 + '''\
    return batched_loader(preprocess_once(dataset), batch_size)
''',
        # drop_last=True: right when the batch size divides the dataset (384 = 6 x 64), loses items otherwise.
        "visible_only": _EX1 + _DECODE_ONCE + '''\
    tensors = TensorDataset(x, y)
    return DataLoader(tensors, sampler=BatchSampler(RandomSampler(tensors), batch_size, drop_last=True), batch_size=None)
''',
        # "Just add workers": two processes and a deeper prefetch queue, but every image is still decoded every epoch.
        "typical": _EX1 + '''\
    return DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=2, prefetch_factor=4)
''',
        # Borrows the lesson's instant twin instead of decoding: no item is read through dataset[i].
        "instant_twin": _EX1 + '''\
    twin = dataset.instant()
    return DataLoader(TensorDataset(torch.stack([twin[i][0] for i in range(len(twin))]),
                                    torch.tensor([twin[i][1] for i in range(len(twin))])),
                      batch_size=batch_size, shuffle=True)
''',
        # Decoded once, but served in the stored order every epoch.
        "no_shuffle": _EX1 + _DECODE_ONCE + '''\
    tensors = TensorDataset(x, y)
    return DataLoader(tensors, sampler=BatchSampler(SequentialSampler(tensors), batch_size, drop_last=False),
                      batch_size=None)
''',
        # Shuffled once, at preprocessing: the same permutation every epoch.
        "fixed_permutation": _EX1 + _DECODE_ONCE + '''\
    order = torch.randperm(len(y))
    return [(x[order[i:i + batch_size]], y[order[i:i + batch_size]]) for i in range(0, len(y), batch_size)]
''',
        # Rotates the order by one batch each epoch: the order changes, but it is the same permutation shifted.
        "rotating": _EX1 + _DECODE_ONCE + '''\
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
    "ex2-solution": {
        # A fixed little dataset, whatever the images.
        "constant": _EX2 + '''\
    import numpy as np
    return tf.data.Dataset.from_tensor_slices((np.zeros((4, 1, 2, 2), np.float32), np.zeros(4, np.int64))).batch(2)
''',
        # The course's own pipeline, then the augmentation: off-limits here.
        "helper": _EX2 + '''\
    dataset = pipeline.tf_pipeline(images, labels, decode, batch_size, cache=True, shuffle=True)
    return dataset.map(augment).prefetch(tf.data.AUTOTUNE)
''',
        # The visible test's batch size, whatever batch_size says.
        "visible_only": _EX2 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()
    dataset = dataset.shuffle(len(images), reshuffle_each_iteration=True).batch(32)
    return dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
''',
        # The cache at the end, "to make everything fast": the first epoch's order and flips are replayed forever.
        "typical": _EX2 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.shuffle(len(images)).batch(batch_size).map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.cache().prefetch(tf.data.AUTOTUNE)
''',
        # The augmentation on single images, before batching: one call per image instead of one per batch.
        "augment_per_image": _EX2 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()
    dataset = dataset.shuffle(len(images)).map(augment, num_parallel_calls=tf.data.AUTOTUNE)
    return dataset.batch(batch_size).prefetch(tf.data.AUTOTUNE)
''',
        # The cache before the decode: it stores undecoded images and every epoch decodes them again.
        "cache_before_decode": _EX2 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).cache()
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).shuffle(len(images)).batch(batch_size)
    return dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
''',
        # Everything right but the last step: nothing is prepared while the model trains.
        "no_prefetch": _EX2 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels))
    dataset = dataset.map(decode, num_parallel_calls=tf.data.AUTOTUNE).cache()
    dataset = dataset.shuffle(len(images)).batch(batch_size)
    return dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE)
''',
        # Decodes one image at a time (a sequential map).
        "sequential_decode": _EX2 + '''\
    dataset = tf.data.Dataset.from_tensor_slices((images, labels)).map(decode).cache()
    dataset = dataset.shuffle(len(images)).batch(batch_size)
    return dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE)
''',
    },
    "ex3-solution": {
        # The visible test's answer.
        "constant": _EX3 + '''\
    return {"batch_size": 64, "num_workers": 3}
''',
        # The course's own search: off-limits here.
        "helper": _EX3 + '''\
    return loader_sim.cheapest_settings(sim, target_sps)
''',
        # Right for the visible target; otherwise the largest batch that fits and a worker per core.
        "visible_only": _EX3 + '''\
    if target_sps == 9000:
        return {"batch_size": 64, "num_workers": 3}
    fits = [b for b in sim.batch_sizes if sim.memory_bytes(b) <= sim.memory_limit]
    return {"batch_size": fits[-1], "num_workers": min(sim.cores, sim.max_workers)}
''',
        # Trusts the prediction from the probes and never confirms it with an epoch: start-up and filling the
        # pipeline make some predicted settings miss the target.
        "typical": _EX3 + '''\
    for batch_size in sim.batch_sizes:
        if sim.memory_bytes(batch_size) > sim.memory_limit:
            continue
        compute = sim.compute_alone(batch_size)
        for workers in range(sim.max_workers + 1):
            loader = sim.loader_alone(batch_size, workers)
            bound = 1 / (1 / loader + 1 / compute) if workers == 0 else min(loader, compute)
            if bound >= target_sps:
                return {"batch_size": batch_size, "num_workers": workers}
    raise ValueError("out of reach")
''',
        # Tries every setting with a full epoch: right, but dozens of epochs.
        "brute_force": _EX3 + '''\
    for batch_size in sim.batch_sizes:
        if sim.memory_bytes(batch_size) > sim.memory_limit:
            continue
        for workers in range(sim.max_workers + 1):
            if sim.run(batch_size, workers).samples_per_s >= target_sps:
                return {"batch_size": batch_size, "num_workers": workers}
    raise ValueError("out of reach")
''',
        # Never looks at the memory: probes a batch that does not fit and stops with OutOfMemory.
        "ignores_memory": _EX3 + '''\
    for batch_size in sim.batch_sizes:
        compute = sim.compute_alone(batch_size)
        if compute < target_sps:
            continue
        for workers in range(sim.max_workers + 1):
            loader = sim.loader_alone(batch_size, workers)
            bound = 1 / (1 / loader + 1 / compute) if workers == 0 else min(loader, compute)
            if bound >= target_sps and sim.run(batch_size, workers).samples_per_s >= target_sps:
                return {"batch_size": batch_size, "num_workers": workers}
    raise ValueError("out of reach")
''',
    },
    "ex4-solution": {
        # The T4 folklore: every slowdown is the power cap.
        "constant": _EX4 + '''\
    return {"cause": "power_cap", "change": "plan_with_sustained"}
''',
        # The course's own sustained-load diagnosis, read for its first word: off-limits here.
        "helper": _EX4 + '''\
    from gpucourse import sustained
    burst, late = max(trace.throughput[:5]), float(np.median(trace.throughput[-20:]))
    words = sustained.diagnose(list(trace.samples), burst, late)
    cause = "power_cap" if "power cap" in words else "thermal" if "thermal" in words else "none" if not words else "input_bound"
    return {"cause": cause, "change": {"power_cap": "plan_with_sustained", "thermal": "improve_cooling",
                                       "input_bound": "feed_faster", "none": "nothing"}[cause]}
''',
        # Right on the two visible traces by their device; a guess elsewhere.
        "visible_only": _EX4 + '''\
    if trace.device == "Tesla T4":
        return {"cause": "power_cap", "change": "plan_with_sustained"}
    return {"cause": "input_bound", "change": "feed_faster"}
''',
        # "A starved GPU is a slow loader": low utilisation always means input-bound, whether or not the loop waited.
        "typical": _EX4 + _EX4_WINDOWS + '''\
    if not fell:
        return {"cause": "none", "change": "nothing"}
    if reasons.get("power cap", 0) >= 0.5:
        return {"cause": "power_cap", "change": "plan_with_sustained"}
    if reasons.get("thermal", 0) >= 0.5:
        return {"cause": "thermal", "change": "improve_cooling"}
    return {"cause": "input_bound", "change": "feed_faster"}
''',
        # Reads the temperature instead of the reasons: a hot card is "thermal", even at its power cap.
        "temperature_not_reasons": _EX4 + _EX4_WINDOWS + '''\
    if not fell:
        return {"cause": "none", "change": "nothing"}
    temps = [s.value("gpu_temp") for s in trace.samples[last]]
    if np.median(temps) >= trace.slowdown_c - 6:
        return {"cause": "thermal", "change": "improve_cooling"}
    if reasons.get("power cap", 0) >= 0.5:
        return {"cause": "power_cap", "change": "plan_with_sustained"}
    if np.median(trace.data_wait[last]) >= 0.1:
        return {"cause": "input_bound", "change": "feed_faster"}
    return {"cause": "host_sync", "change": "remove_syncs"}
''',
        # Reads the reasons before asking whether the throughput fell: a card capped from the start is "power_cap".
        "reasons_first": _EX4 + _EX4_WINDOWS + '''\
    if reasons.get("power cap", 0) >= 0.5:
        return {"cause": "power_cap", "change": "plan_with_sustained"}
    if not fell:
        return {"cause": "none", "change": "nothing"}
    if reasons.get("thermal", 0) >= 0.5:
        return {"cause": "thermal", "change": "improve_cooling"}
    if np.median(trace.data_wait[last]) >= 0.1:
        return {"cause": "input_bound", "change": "feed_faster"}
    return {"cause": "host_sync", "change": "remove_syncs"}
''',
        # Compares the first and the last interval instead of medians of windows: a dip at either end decides.
        "single_readings": _EX4 + '''\
    if trace.throughput[-1] >= 0.9 * trace.throughput[0]:
        return {"cause": "none", "change": "nothing"}
    words = monitor.reason_words(int(trace.samples[-1].value("gpu_throttle")))
    if "power cap" in words:
        return {"cause": "power_cap", "change": "plan_with_sustained"}
    if "thermal" in words:
        return {"cause": "thermal", "change": "improve_cooling"}
    if trace.data_wait[-1] >= 0.1:
        return {"cause": "input_bound", "change": "feed_faster"}
    return {"cause": "host_sync", "change": "remove_syncs"}
''',
        # The right causes, but "bigger batches" for a starved loop: the loader costs the same per image.
        "wrong_change": _EX4 + _EX4_WINDOWS + '''\
    if not fell:
        return {"cause": "none", "change": "nothing"}
    if reasons.get("power cap", 0) >= 0.5:
        return {"cause": "power_cap", "change": "plan_with_sustained"}
    if reasons.get("thermal", 0) >= 0.5:
        return {"cause": "thermal", "change": "improve_cooling"}
    if np.median(trace.data_wait[last]) >= 0.1:
        return {"cause": "input_bound", "change": "bigger_batch"}
    return {"cause": "host_sync", "change": "remove_syncs"}
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
