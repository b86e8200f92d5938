"""Plausible wrong answers to lesson 08's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed plausible value), 'helper' (the course's own helper, which off_limits blocks),
'visible_only' (right on the visible test's input only), 'typical' (the lesson's typical mistake), and others.
"""

EX1_SIGNATURE = '''\
def training_throughput(step, batch_size: int, steps: int, sync, warmup: int = 3, clock=time.perf_counter) -> float:
    """Images per second of step(): warm-up calls, then `steps` timed calls, synchronised before and after."""
'''

EX2_SIGNATURE = '''\
def speedup_table(runs: list[dict]) -> list[dict]:
    """One row per run: technique, images/s, throughput and time-to-accuracy speed-ups against the first run."""
'''

EX3_SIGNATURE = '''\
def train_to_target(train_x: np.ndarray, train_y: np.ndarray, device) -> torch.nn.Module:
    """Train a fresh small_cnn on (train_x, train_y) on `device`, fast, and return it."""
'''

EX3_GOOD_LOOP = '''\
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
    for _ in range(max(2, math.ceil(30_000 / len(y)))):
        order = torch.randperm(len(y), device=device)
        for start in range(0, len(y), 128):
            index = order[start:start + 128]
            loss = F.cross_entropy(net(x[index]), y[index])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return net.eval()
'''

EX4_SIGNATURE = '''\
def cost_per_run(run_hours: float, cloud_usd_per_hour: float, purchase_usd: float, lifetime_years: float,
                 utilisation: float, power_kw: float, usd_per_kwh: float) -> dict:
    """USD for one run of `run_hours` hours: renting ('cloud') and owning ('on_premise')."""
'''

EX5_SIGNATURE = '''\
def break_even(cloud_usd_per_hour: float, purchase_usd: float, power_kw: float, usd_per_kwh: float,
               run_hours: float) -> dict:
    """Hours of use and runs after which owning has cost less than renting (math.inf if it never does)."""
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The visible test's answer, whatever the device does.
        "constant": EX1_SIGNATURE + '''\
    for _ in range(warmup + steps):
        step()
    sync()
    return 12_800.0
''',
        # The course's benchmark: the right figure, but exercise 1 asks for the loop itself.
        "helper": EX1_SIGNATURE + '''\
    from gpucourse.timing import benchmark

    return batch_size / benchmark(step, warmup=warmup, repeats=steps, sync=sync).median_s
''',
        # Right for the visible test's device (64 images, 5 ms steps), a hard-coded guess elsewhere.
        "visible_only": EX1_SIGNATURE + '''\
    for _ in range(warmup + steps):
        step()
    sync()
    if batch_size == 64 and steps == 40:
        return 64 / 0.005
    return batch_size / 0.01
''',
        # Stops the clock without synchronising: on an asynchronous device it times how fast Python queues the steps.
        "typical": EX1_SIGNATURE + '''\
    for _ in range(warmup):
        step()
    sync()
    start = clock()
    for _ in range(steps):
        step()
    return steps * batch_size / (clock() - start)
''',
        # Starts the clock while the warm-up's work is still queued.
        "no_sync_after_warmup": EX1_SIGNATURE + '''\
    for _ in range(warmup):
        step()
    start = clock()
    for _ in range(steps):
        step()
    sync()
    return steps * batch_size / (clock() - start)
''',
        # Counts batches per second instead of images per second.
        "batches_not_images": EX1_SIGNATURE + '''\
    for _ in range(warmup):
        step()
    sync()
    start = clock()
    for _ in range(steps):
        step()
    sync()
    return steps / (clock() - start)
''',
        # Reads the wall clock instead of the clock it was given.
        "ignores_clock": EX1_SIGNATURE + '''\
    for _ in range(warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    sync()
    return steps * batch_size / (time.perf_counter() - start)
''',
    },
    "ex2-solution": {
        # The visible test's rows, whatever the runs.
        "constant": EX2_SIGNATURE + '''\
    return [{"technique": "baseline", "images_per_s": 4000.0, "throughput_speedup": 1.0, "tta_speedup": 1.0},
            {"technique": "preloaded", "images_per_s": 12000.0, "throughput_speedup": 3.0, "tta_speedup": 4.0},
            {"technique": "tiny lr", "images_per_s": 8000.0, "throughput_speedup": 2.0, "tta_speedup": None}]
''',
        # The package's table, from TrainResult objects built out of the dicts.
        "helper": EX2_SIGNATURE + '''\
    from gpucourse import capstone

    results = [capstone.TrainResult(config=capstone.TrainConfig(label=r["technique"]), device="cpu", dataset="x",
                                    precision_used="float32", images_per_s=r["images"] / r["seconds"],
                                    time_to_accuracy_s=r["time_to_accuracy_s"]) for r in runs]
    return [{key: row[key] for key in ("technique", "images_per_s", "throughput_speedup", "tta_speedup")}
            for row in capstone.speedup_rows(results)]
''',
        # Right when the baseline comes first with 32,000 images; otherwise compares each row with the one above.
        "visible_only": EX2_SIGNATURE + '''\
    rows, previous = [], None
    for index, run_ in enumerate(runs):
        rate = run_["images"] / run_["seconds"]
        base = runs[0] if runs[0]["images"] == 32_000 or index == 0 else runs[index - 1]
        base_rate, base_tta, tta = base["images"] / base["seconds"], base["time_to_accuracy_s"], run_["time_to_accuracy_s"]
        rows.append({"technique": run_["technique"], "images_per_s": rate, "throughput_speedup": rate / base_rate,
                     "tta_speedup": base_tta / tta if tta is not None and base_tta is not None else None})
    return rows
''',
        # Speed-ups the wrong way round: baseline / new for throughput and new / baseline for time-to-accuracy.
        "typical": EX2_SIGNATURE + '''\
    base = runs[0]
    base_rate = base["images"] / base["seconds"]
    base_tta = base["time_to_accuracy_s"]
    rows = []
    for run_ in runs:
        rate = run_["images"] / run_["seconds"]
        tta = run_["time_to_accuracy_s"]
        rows.append({"technique": run_["technique"], "images_per_s": rate, "throughput_speedup": base_rate / rate,
                     "tta_speedup": tta / base_tta if tta is not None and base_tta is not None else None})
    return rows
''',
        # Forgets that the baseline may never have reached the target (crashes on None).
        "none_baseline": EX2_SIGNATURE + '''\
    base = runs[0]
    base_rate = base["images"] / base["seconds"]
    rows = []
    for run_ in runs:
        rate = run_["images"] / run_["seconds"]
        tta = run_["time_to_accuracy_s"]
        rows.append({"technique": run_["technique"], "images_per_s": rate, "throughput_speedup": rate / base_rate,
                     "tta_speedup": base["time_to_accuracy_s"] / tta if tta is not None else None})
    return rows
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
        optimizer = torch.optim.Adam(net.parameters(), lr=3e-3)
        for _ in range(max(2, math.ceil(30_000 / len(y)))):
            order = torch.randperm(len(y), device=device)
            for start in range(0, len(y), 128):
                index = order[start:start + 128]
                loss = F.cross_entropy(net(x[index]), y[index])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
        FIXED_MODEL = net.eval()
    return FIXED_MODEL
''',
        # The package's training loop on an ImageData built from the arguments: capstone.train is off-limits.
        "helper": EX3_SIGNATURE + '''\
    from dataclasses import replace as _replace

    data = _replace(DATA, raw_train=(train_x[:, 0] * 255).astype(np.uint8), train_y=np.asarray(train_y), scale=255.0)
    return capstone.train(data, capstone.TrainConfig(epochs=4, batch_size=128, device=str(device)), progress=False).model
''',
        # Trains on the notebook's DATA instead of its arguments: right on the visible test only.
        "visible_only": EX3_SIGNATURE + '''\
    torch.manual_seed(0)
    x = torch.as_tensor(DATA.train_x, device=device)
    y = torch.as_tensor(DATA.train_y, device=device)
    net = capstone.small_cnn(x.shape[-1]).to(device)
''' + EX3_GOOD_LOOP,
        # A configuration that cannot reach the target: plain SGD with a small step, no shuffling, two passes.
        "typical": EX3_SIGNATURE + '''\
    torch.manual_seed(0)
    x = torch.as_tensor(train_x, device=device)
    y = torch.as_tensor(train_y, device=device)
    net = capstone.small_cnn(x.shape[-1]).to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    for _ in range(2):
        for start in range(0, len(y), 128):
            loss = F.cross_entropy(net(x[start:start + 128]), y[start:start + 128])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
    return net.eval()
''',
        # Builds the network for the notebook's image size instead of the size of the images it is given.
        "fixed_size": EX3_SIGNATURE + '''\
    torch.manual_seed(0)
    x = torch.as_tensor(train_x, device=device)
    y = torch.as_tensor(train_y, device=device)
    net = capstone.small_cnn(DATA.image_size).to(device)
''' + EX3_GOOD_LOOP,
    },
    "ex4-solution": {
        # The visible test's figures, whatever the prices.
        "constant": EX4_SIGNATURE + '''\
    return {"cloud": 4.5, "on_premise": 6 * (3000 / (3 * 8760 * 0.3) + 0.35 * 0.25)}
''',
        # The package's calculator: exercise 4 asks for the arithmetic itself.
        "helper": EX4_SIGNATURE + '''\
    from gpucourse import capstone

    return {"cloud": capstone.cloud_cost_per_run(run_hours, cloud_usd_per_hour),
            "on_premise": capstone.on_prem_cost_per_run(run_hours, purchase_usd, lifetime_years, utilisation,
                                                        power_kw, usd_per_kwh)}
''',
        # Right for the visible prices only; elsewhere forgets the electricity.
        "visible_only": EX4_SIGNATURE + '''\
    hours_used = lifetime_years * 8760 * utilisation
    electricity = power_kw * usd_per_kwh if (cloud_usd_per_hour, purchase_usd) == (0.75, 3000) else 0.0
    return {"cloud": run_hours * cloud_usd_per_hour,
            "on_premise": run_hours * (purchase_usd / hours_used + electricity)}
''',
        # Spreads the purchase over every hour of the lifetime, as if the hardware were never idle (ignores utilisation).
        "typical": EX4_SIGNATURE + '''\
    hours_in_lifetime = lifetime_years * 365 * 24
    owned_per_hour = purchase_usd / hours_in_lifetime + power_kw * usd_per_kwh
    return {"cloud": run_hours * cloud_usd_per_hour, "on_premise": run_hours * owned_per_hour}
''',
    },
    "ex5-solution": {
        # The visible test's answer, whatever the prices.
        "constant": EX5_SIGNATURE + '''\
    hours = 3000 / (0.75 - 0.35 * 0.25)
    return {"hours": hours, "runs": hours / 6}
''',
        # The package's break-even: exercise 5 asks for the arithmetic itself.
        "helper": EX5_SIGNATURE + '''\
    from gpucourse import capstone

    hours = capstone.break_even_hours(cloud_usd_per_hour, purchase_usd, power_kw, usd_per_kwh)
    return {"hours": hours, "runs": hours / run_hours}
''',
        # Right for the visible prices; elsewhere divides by the cloud price alone (forgets the electricity).
        "visible_only": EX5_SIGNATURE + '''\
    if cloud_usd_per_hour <= power_kw * usd_per_kwh:
        return {"hours": math.inf, "runs": math.inf}
    saving = cloud_usd_per_hour - (power_kw * usd_per_kwh if purchase_usd == 3000 else 0.0)
    hours = purchase_usd / saving
    return {"hours": hours, "runs": hours / run_hours}
''',
        # Subtracts the wrong way round: electricity minus cloud price gives a negative break-even.
        "typical": EX5_SIGNATURE + '''\
    if cloud_usd_per_hour <= power_kw * usd_per_kwh:
        return {"hours": math.inf, "runs": math.inf}
    hours = purchase_usd / (power_kw * usd_per_kwh - cloud_usd_per_hour)
    return {"hours": hours, "runs": hours / run_hours}
''',
        # Never returns infinity: a negative saving gives a negative break-even.
        "no_infinity": EX5_SIGNATURE + '''\
    hours = purchase_usd / (cloud_usd_per_hour - power_kw * usd_per_kwh)
    return {"hours": hours, "runs": hours / run_hours}
''',
    },
}
