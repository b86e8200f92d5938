"""Plausible wrong answers to lesson 08's exercises: each must lose exactly its own exercise's points."""

WRONG: dict[str, str] = {
    # Stops the clock without synchronising: on an asynchronous device it times how fast Python queues the steps.
    "ex1-solution": '''\
def training_throughput(step, batch_size: int, steps: int, sync, warmup: int = 3) -> float:
    """Images per second of step(): warm-up calls, then `steps` timed calls."""
    for _ in range(warmup):
        step()
    sync()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return steps * batch_size / (time.perf_counter() - start)
''',
    # Speed-ups the wrong way round: baseline / new for throughput and new / baseline for time-to-accuracy.
    "ex2-solution": '''\
def speedup_table(runs: list[dict]) -> list[dict]:
    """One row per run: technique, images/s, throughput and time-to-accuracy speed-ups against the first run."""
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
    # A configuration that cannot reach the target: plain SGD with a small step, no shuffling, two passes.
    "ex3-solution": '''\
def train_to_target(train_x: np.ndarray, train_y: np.ndarray, device) -> torch.nn.Module:
    """Train a fresh small_cnn on (train_x, train_y) on `device`, fast, and return it."""
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
    # Spreads the purchase over every hour of the lifetime, as if the hardware were never idle (ignores utilisation).
    "ex4-solution": '''\
def cost_per_run(run_hours: float, cloud_usd_per_hour: float, purchase_usd: float, lifetime_years: float,
                 utilisation: float, power_kw: float, usd_per_kwh: float) -> dict:
    """USD for one run of `run_hours` hours: renting ('cloud') and owning ('on_premise')."""
    hours_in_lifetime = lifetime_years * 365 * 24
    owned_per_hour = purchase_usd / hours_in_lifetime + power_kw * usd_per_kwh
    return {"cloud": run_hours * cloud_usd_per_hour, "on_premise": run_hours * owned_per_hour}
''',
    # Subtracts the wrong way round: electricity minus cloud price gives a negative break-even.
    "ex5-solution": '''\
def break_even(cloud_usd_per_hour: float, purchase_usd: float, power_kw: float, usd_per_kwh: float,
               run_hours: float) -> dict:
    """Hours of use and runs after which owning has cost less than renting (math.inf if it never does)."""
    if cloud_usd_per_hour <= power_kw * usd_per_kwh:
        return {"hours": math.inf, "runs": math.inf}
    hours = purchase_usd / (power_kw * usd_per_kwh - cloud_usd_per_hour)
    return {"hours": hours, "runs": hours / run_hours}
''',
}
