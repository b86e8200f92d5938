"""Plausible wrong answers to lesson 17's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed plausible value), 'helper' (the course's own helper, which off_limits blocks),
'visible_only' (right on the visible test's input only), 'typical' (the lesson's typical mistake), and others.
"""

from wrong_answers.tampering import with_tampering

EX1_SIGNATURE = '''\
def profile_loop(next_batch, step, sync, batch_size: int, steps: int = 20, warmup: int = 3,
                 clock=time.perf_counter) -> dict:
    """Throughput of the loop as it runs, and where a step's time goes: images_per_s, data_s, compute_s, bound."""
'''

EX1_SPLIT = '''\
    data, compute = [], []
    for _ in range(steps):
        t0 = clock()
        batch = next_batch()
        t1 = clock()
        step(batch)
        sync()
        t2 = clock()
        data.append(t1 - t0)
        compute.append(t2 - t1)
    data_s, compute_s = statistics.median(data), statistics.median(compute)
    return {"images_per_s": images_per_s, "data_s": data_s, "compute_s": compute_s,
            "bound": "input" if data_s > compute_s else "compute"}
'''

EX1_THROUGHPUT = '''\
    for _ in range(warmup):
        step(next_batch())
    sync()
    start = clock()
    for _ in range(steps):
        step(next_batch())
    sync()
    images_per_s = steps * batch_size / (clock() - start)
'''

EX2_SIGNATURE = '''\
def choose_techniques(candidates: list[str], run, repeats: int = 3) -> set[str]:
    """The candidate techniques worth keeping, decided from measured runs (at most repeats x (len + 1) of them)."""
'''

EX2_GREEDY = '''\
    kept = set()
    best = time_to_target(frozenset(kept))
    for technique in candidates:
        trial = time_to_target(frozenset(kept | {technique}))
        if trial < best:
            kept.add(technique)
            best = trial
    return kept
'''

EX3_SIGNATURE = '''\
def train_to_target(train_x: np.ndarray, train_y: np.ndarray, device) -> torch.nn.Module:
    """Train a fresh small_cnn on (train_x, train_y) on `device`, faster than the first attempt; return it."""
'''

EX3_GOOD_LOOP = '''\
    optimizer = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(max(2, math.ceil(15_000 / len(y)))):
        order = torch.randperm(len(y), device=device)
        for start in range(0, len(y), 256):
            index = order[start:start + 256]
            loss = F.cross_entropy(net(x[index]), y[index])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return net.eval()
'''

EX3_ON_THE_DEVICE = '''\
    torch.manual_seed(0)
    x = torch.as_tensor(train_x, device=device)
    y = torch.as_tensor(train_y, device=device)
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The visible test's figures, whatever the loop does.
        "constant": EX1_SIGNATURE + '''\
    for _ in range(warmup + steps):
        step(next_batch())
    sync()
    return {"images_per_s": 64 / 0.01, "data_s": 0.004, "compute_s": 0.01002, "bound": "compute"}
''',
        # The course's benchmark times the step: exercise 1 asks for the harness itself.
        "helper": EX1_SIGNATURE + '''\
    from gpucourse.timing import benchmark

    seconds = benchmark(lambda: step(next_batch()), warmup=warmup, repeats=steps, sync=sync).median_s
    return {"images_per_s": batch_size / seconds, "data_s": 0.0, "compute_s": seconds, "bound": "compute"}
''',
        # Right on the visible device's numbers only.
        "visible_only": EX1_SIGNATURE + EX1_THROUGHPUT + '''\
    if batch_size == 64 and steps == 20:
        data_s, compute_s = 0.004, 0.01002
    else:
        data_s, compute_s = 0.005, 0.005
    return {"images_per_s": images_per_s, "data_s": data_s, "compute_s": compute_s,
            "bound": "input" if data_s > compute_s else "compute"}
''',
        # Times the step without synchronising: the split says every loop waits for data.
        "typical": EX1_SIGNATURE + EX1_THROUGHPUT + EX1_SPLIT.replace("        sync()\n        t2", "        t2"),
        # Throughput from the taken-apart loop: loading and computing no longer overlap.
        "throughput_from_split": EX1_SIGNATURE + EX1_THROUGHPUT + EX1_SPLIT.replace(
            '    return {"images_per_s": images_per_s,',
            '    images_per_s = batch_size / statistics.median(d + c for d, c in zip(data, compute))\n'
            '    return {"images_per_s": images_per_s,'),
        # One batch loaded once and trained on over and over: the loader vanishes from the measurement.
        "one_batch": EX1_SIGNATURE + '''\
    batch = next_batch()
    for _ in range(warmup):
        step(batch)
    sync()
    start = clock()
    for _ in range(steps):
        step(batch)
    sync()
    images_per_s = steps * batch_size / (clock() - start)
''' + EX1_SPLIT.replace("        batch = next_batch()\n", "        batch = batch\n"),
        # No warm-up: the first batch's worker start-up and the first step's lazy initialisation are timed.
        "no_warmup": EX1_SIGNATURE + EX1_THROUGHPUT.replace("    for _ in range(warmup):\n        step(next_batch())\n", "") + EX1_SPLIT,
        # No sync() before the final clock read: times how fast Python queues the steps.
        "no_final_sync": EX1_SIGNATURE + EX1_THROUGHPUT.replace("        step(next_batch())\n    sync()\n    images", "        step(next_batch())\n    images") + EX1_SPLIT,
        # Review v3r1 M4: the mean per step; a few slow steps pull it away from the typical step.
        "r1_mean_not_median": EX1_SIGNATURE + EX1_THROUGHPUT + EX1_SPLIT.replace(
            "statistics.median(data), statistics.median(compute)", "statistics.mean(data), statistics.mean(compute)"),
        # Review v3r1 M4: the fastest step, not the typical one.
        "r1_min_not_median": EX1_SIGNATURE + EX1_THROUGHPUT + EX1_SPLIT.replace(
            "statistics.median(data), statistics.median(compute)", "min(data), min(compute)"),
        # Review v3r1 M4: one timed step, no repeats: whatever that step happened to take.
        "r1_single_sample": EX1_SIGNATURE + EX1_THROUGHPUT + EX1_SPLIT.replace(
            "statistics.median(data), statistics.median(compute)", "data[0], compute[0]"),
    },
    "ex2-solution": {
        # Keep everything: the usual first reflex.
        "constant": EX2_SIGNATURE + '''\
    run(frozenset(candidates))
    return set(candidates)
''',
        # The package's speed-up rows: blocked, and they rank throughput anyway.
        "helper": EX2_SIGNATURE + '''\
    from gpucourse import capstone

    rows = capstone.speedup_rows([run(frozenset()), run(frozenset(candidates))])
    return set(candidates) if rows[1]["tta_speedup"] and rows[1]["tta_speedup"] > 1 else set()
''',
        # Right for the visible lab only.
        "visible_only": EX2_SIGNATURE + '''\
    for _ in range(repeats):
        run(frozenset())
    return {"preloaded", "channels-last"} & set(candidates) or set(candidates[:1])
''',
        # Judges by images/s: keeps the huge batch that needs more epochs.
        "typical": EX2_SIGNATURE + '''\
    def time_to_target(techniques):
        results = [run(techniques) for _ in range(repeats)]
        if any(r.time_to_accuracy_s is None for r in results):
            return math.inf
        return 1 / statistics.median(r.images_per_s for r in results)

''' + EX2_GREEDY,
        # One run per configuration: a busy machine decides.
        "single_run": EX2_SIGNATURE + '''\
    def time_to_target(techniques):
        t = run(techniques).time_to_accuracy_s
        return math.inf if t is None else t

''' + EX2_GREEDY,
        # The mean of the repeats: one slow run outweighs a real gain.
        "mean": EX2_SIGNATURE + '''\
    def time_to_target(techniques):
        times = [run(techniques).time_to_accuracy_s for _ in range(repeats)]
        return statistics.mean(math.inf if t is None else t for t in times)

''' + EX2_GREEDY,
        # A run that never reached the target counted as taking no time.
        "none_is_zero": EX2_SIGNATURE + '''\
    def time_to_target(techniques):
        times = [run(techniques).time_to_accuracy_s for _ in range(repeats)]
        return statistics.median(0.0 if t is None else t for t in times)

''' + EX2_GREEDY,
        # Review v3r1 M5: the baseline timed once (each candidate `repeats` times): one busy run of the baseline
        # makes a candidate that hurts look like a gain.
        "r1_single_baseline": EX2_SIGNATURE + '''\
    def time_to_target(techniques, runs=repeats):
        times = [run(techniques).time_to_accuracy_s for _ in range(runs)]
        return statistics.median(math.inf if t is None else t for t in times)

''' + EX2_GREEDY.replace("best = time_to_target(frozenset(kept))", "best = time_to_target(frozenset(kept), 1)"),
        # Review v3r1 minor 5: each technique judged alone against the baseline, never in combination: misses a
        # technique that pays only together with another.
        "r1_each_alone": EX2_SIGNATURE + '''\
    def time_to_target(techniques):
        times = [run(techniques).time_to_accuracy_s for _ in range(repeats)]
        return statistics.median(math.inf if t is None else t for t in times)

    baseline = time_to_target(frozenset())
    return {technique for technique in candidates if time_to_target(frozenset({technique})) < baseline}
''',
    },
    "ex3-solution": {
        # One fixed model, trained once on the notebook's DATA, returned whatever the arguments.
        "constant": EX3_SIGNATURE + '''\
    global FIXED_MODEL
    if "FIXED_MODEL" not in globals():
        torch.manual_seed(0)
        x = torch.as_tensor(DATA.train_x, device=device)
        y = torch.as_tensor(DATA.train_y, device=device)
        net = capstone.small_cnn(DATA.image_size).to(device)
''' + "\n".join("    " + line if line else line for line in EX3_GOOD_LOOP.replace(
            "    return net.eval()\n", "    FIXED_MODEL = net.eval()\n").splitlines()) + '''
    return FIXED_MODEL
''',
        # The package's training loop on an ImageData built from the arguments: capstone.train is off-limits.
        "helper": EX3_SIGNATURE + '''\
    from dataclasses import replace as _replace

    data = _replace(DATA, raw_train=(train_x[:, 0] * 255).astype(np.uint8), train_y=np.asarray(train_y), scale=255.0)
    return capstone.train(data, capstone.TrainConfig(epochs=4, batch_size=256, device=str(device)), progress=False).model
''',
        # Trains on the notebook's DATA instead of its arguments: right on the visible test only.
        "visible_only": EX3_SIGNATURE + '''\
    torch.manual_seed(0)
    x = torch.as_tensor(DATA.train_x, device=device)
    y = torch.as_tensor(DATA.train_y, device=device)
    net = capstone.small_cnn(x.shape[-1], in_channels=x.shape[1]).to(device)
''' + EX3_GOOD_LOOP,
        # Fast only on the visible data: the epochs and batch that suit its 1,438 images, hard-coded. On a set of
        # 360 images ten passes are too few to reach the target.
        "fast_on_visible_data_only": EX3_SIGNATURE + EX3_ON_THE_DEVICE + '''\
    net = capstone.small_cnn(x.shape[-1], in_channels=x.shape[1]).to(device)
''' + EX3_GOOD_LOOP.replace("range(max(2, math.ceil(15_000 / len(y))))", "range(10)"),
        # A configuration that cannot reach the target: plain SGD with a small step, no shuffling, two passes.
        "typical": EX3_SIGNATURE + EX3_ON_THE_DEVICE + '''\
    net = capstone.small_cnn(x.shape[-1], in_channels=x.shape[1]).to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    for _ in range(2):
        for start in range(0, len(y), 128):
            loss = F.cross_entropy(net(x[start:start + 128]), y[start:start + 128])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return net.eval()
''',
        # Fast, but never shuffled: a set delivered sorted by class trains on one class at a time.
        "no_shuffle": EX3_SIGNATURE + EX3_ON_THE_DEVICE + '''\
    net = capstone.small_cnn(x.shape[-1], in_channels=x.shape[1]).to(device)
''' + EX3_GOOD_LOOP.replace("torch.randperm(len(y), device=device)", "torch.arange(len(y), device=device)"),
        # Builds the network for the notebook's image size instead of the size of the images it is given.
        "fixed_size": EX3_SIGNATURE + EX3_ON_THE_DEVICE + '''\
    net = capstone.small_cnn(DATA.image_size).to(device)
''' + EX3_GOOD_LOOP,
        # Grey images only: the network's first layer takes one channel, whatever train_x holds.
        "grey_only": EX3_SIGNATURE + EX3_ON_THE_DEVICE + '''\
    net = capstone.small_cnn(x.shape[-1]).to(device)
''' + EX3_GOOD_LOOP,
        # The first attempt's own loop, submitted unchanged: it reaches the target (1 point), no faster (no more).
        "first_attempt_loop": EX3_SIGNATURE + '''\
    torch.manual_seed(0)
    dataset = torch.utils.data.TensorDataset(torch.from_numpy(train_x), torch.from_numpy(train_y))
    loader = torch.utils.data.DataLoader(dataset, batch_size=32, shuffle=True)
    net = capstone.small_cnn(train_x.shape[-1], in_channels=train_x.shape[1]).to(device)
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    net.train()
    for _ in range(max(4, math.ceil(20_000 / len(train_y)))):
        for xb, yb in loader:
            loss = F.cross_entropy(net(xb.to(device)), yb.to(device))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
    return net.eval()
''',
        # Review v3r1 M2: the model cached under the data's shape and returned again by every later call, so the
        # race times training once and a dictionary look-up after that.
        "r1_cache_by_shape": EX3_SIGNATURE + '''\
    global R1_CACHE
    R1_CACHE = globals().get("R1_CACHE", {})
    key = (train_x.shape, str(device))
    if key in R1_CACHE:
        return R1_CACHE[key]
''' + EX3_ON_THE_DEVICE + '''\
    net = capstone.small_cnn(x.shape[-1], in_channels=x.shape[1]).to(device)
''' + EX3_GOOD_LOOP.replace("    return net.eval()\n", "    R1_CACHE[key] = net.eval()\n    return R1_CACHE[key]\n"),
        # Review v3r1 M2: the model answer, plus a thread left spinning (holding the GIL) for 6 s after it returns:
        # it slows the first attempt's run that follows, and so doubles any speed-up.
        "r1_spinning_thread": EX3_SIGNATURE + EX3_ON_THE_DEVICE + '''\
    net = capstone.small_cnn(x.shape[-1], in_channels=x.shape[1]).to(device)
''' + EX3_GOOD_LOOP.replace("    return net.eval()\n", '''\
    import threading

    def spin(until=time.perf_counter() + 6.0):
        while time.perf_counter() < until:
            sum(range(1000))

    threading.Thread(target=spin, daemon=True).start()
    return net.eval()
'''),
        # Review v3r1 M1 (issue 31): fast only on the visible device: bfloat16 autocast on a CPU too. Where the CPU
        # has native bfloat16 (AVX-512-BF16) it is faster than float32; on one without it (AVX2, most laptops) a
        # run takes several times longer and the speed-up falls to about 1.
        "r1_bf16_everywhere": EX3_SIGNATURE + EX3_ON_THE_DEVICE + '''\
    net = capstone.small_cnn(x.shape[-1], in_channels=x.shape[1]).to(device)
''' + EX3_GOOD_LOOP.replace("            loss = F.cross_entropy(net(x[index]), y[index])\n", '''\
            with torch.autocast(device.type, dtype=torch.bfloat16):
                loss = F.cross_entropy(net(x[index]), y[index])
'''),
        # A bigger, faster-learning network: the race compares training, not networks.
        "other_network": EX3_SIGNATURE + EX3_ON_THE_DEVICE + '''\
    net = capstone.small_cnn(x.shape[-1], channels=(32, 64), in_channels=x.shape[1]).to(device)
''' + EX3_GOOD_LOOP.replace("math.ceil(15_000 / len(y))", "math.ceil(8_000 / len(y))"),
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
