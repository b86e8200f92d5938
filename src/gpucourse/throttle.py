"""Made-up training traces for diagnosing why throughput fell (lesson 09_feeding_and_watching, Exercise 3).

A trace is what an engineer collects while a training loop runs: the loop's own throughput and how long it waited
for its next batch, beside what NVML reports every interval (utilisation, SM clock, power, temperature, clock-event
reasons), as :class:`gpucourse.monitor.Snapshot` objects, so the package's readers (``monitor.reason_shares``,
``monitor.summarise``) work on them as on a real run. The traces are made up, not readings: each plays one cause on
a device shaped like a datasheet (clock and power limit), with noise::

    trace = make_trace("power_cap", device="T4", seed=0)
    trace.plot()
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from gpucourse._validate import one_of, positive_int, positive_number
from gpucourse.monitor import Metric, Snapshot, reason_words

CAUSES = ("power_cap", "thermal", "input_bound", "host_sync", "none")
"""Why a training loop's throughput fell: the software power cap, thermal slowdown, a loader that cannot keep up,
the host waiting on the GPU every step, or it did not fall at all."""

CHANGES = {
    "plan_with_sustained": "nothing to fix in the code: the card holds its power limit by design; time it for 30-60 s "
                           "after warm-up and plan with the sustained rate",
    "improve_cooling": "check the cooling (airflow, fans, a hot or crowded case): the GPU lowers its clock to protect "
                       "itself",
    "feed_faster": "feed the GPU faster: more DataLoader workers and prefetching, or preprocess once",
    "remove_syncs": "stop making the host wait for the GPU every step (.item(), .cpu(), printing the loss): read "
                    "values every N steps",
    "bigger_batch": "use a bigger batch per step",
    "lower_precision": "train in bfloat16 or float16 with autocast",
    "nothing": "nothing: the throughput held; a one-interval dip is noise",
}
"""What an engineer could change, by name; exactly one of them answers each cause."""


@dataclass(frozen=True)
class FakeDevice:
    """A made-up GPU with a datasheet's maximum SM clock and power limit, and a made-up slowdown temperature."""

    name: str
    max_sm_mhz: int
    power_limit_w: float
    memory_gib: float
    slowdown_c: float
    samples_per_s: float  # the made-up model's throughput at the full clock
    source: str


FAKE_DEVICES = {
    "T4": FakeDevice("Tesla T4", 1590, 70.0, 15.0, 85.0, 2000.0, "NVIDIA T4 datasheet: 1,590 MHz boost, 70 W"),
    "L4": FakeDevice("NVIDIA L4", 2040, 72.0, 22.5, 85.0, 3100.0, "NVIDIA L4 datasheet: 2,040 MHz boost, 72 W"),
    "A100": FakeDevice("NVIDIA A100-SXM4-40GB", 1410, 400.0, 40.0, 88.0, 9000.0,
                       "NVIDIA A100 datasheet (SXM4): 1,410 MHz boost, 400 W"),
}
"""Devices a trace can be made on; clock and power from the datasheets named, the rest made up."""

_IDLE, _POWER_CAP, _SW_THERMAL, _HW_THERMAL = 0x1, 0x4, 0x20, 0x40


@dataclass(frozen=True)
class TrainingTrace:
    """One training run, interval by interval: the loop's throughput (samples/s) and the share of each interval it
    waited for its next batch (``data_wait``, 0 to 1), beside NVML's readings of the GPU as monitor Snapshots."""

    device: str
    interval_s: float
    slowdown_c: float
    throughput: tuple[float, ...]
    data_wait: tuple[float, ...]
    samples: tuple[Snapshot, ...]
    label: str
    epoch_s: float | None = None  # seconds per epoch (runs made by make_run), None where the trace has no epochs

    def epoch_starts(self) -> list[float]:
        """Seconds from the start at which each epoch began ([0.0] where the trace has no epochs)."""
        if self.epoch_s is None:
            return [0.0]
        return [round(k * self.epoch_s, 6) for k in range(int(len(self) * self.interval_s / self.epoch_s + 1e-9))]

    def __len__(self) -> int:
        return len(self.samples)

    def times(self) -> list[float]:
        """Seconds from the start of the run, one per interval."""
        return [round(i * self.interval_s, 6) for i in range(len(self))]

    def series(self, key: str) -> list[float | None]:
        """One column over time: 'throughput', 'data_wait', or a Snapshot metric key ('gpu_sm_clock', ...)."""
        if key == "throughput":
            return list(self.throughput)
        if key == "data_wait":
            return list(self.data_wait)
        if not isinstance(key, str) or key not in self.samples[0]:
            known = ["throughput", "data_wait"] + [m.key for m in self.samples[0].metrics]
            raise ValueError(f"key must be one of {known}, got {key!r}")
        return [sample.value(key) for sample in self.samples]

    def reasons(self) -> list[list[str]]:
        """The clock-event reasons of each interval, in plain words ([] where nothing held the clock down)."""
        return [reason_words(int(mask)) for mask in self.series("gpu_throttle")]

    def table(self, every: int = 5) -> str:
        """Every ``every``-th interval as a text table: the numbers a learner reads off `nvidia-smi -l`."""
        every = positive_int("every", every)
        run = self.epoch_s is not None  # a long run: GPU memory and the host's page cache too
        head = (f"{'t (s)':>6} {'samples/s':>9} {'wait':>5} {'util %':>6} {'SM MHz':>6} {'W':>5} {'C':>3}"
                + (f" {'GPU GiB':>7} {'cache GiB':>9}" if run else "") + "  reasons")
        rows = [head]
        for i in range(0, len(self), every):
            sample = self.samples[i]
            rows.append(f"{self.times()[i]:6.1f} {self.throughput[i]:9.0f} {self.data_wait[i]:5.2f} "
                        f"{sample.value('gpu_util'):6.0f} {sample.value('gpu_sm_clock'):6.0f} "
                        f"{sample.value('gpu_power'):5.1f} {sample.value('gpu_temp'):3.0f}"
                        + (f" {sample.value('gpu_mem_used'):7.1f} {sample.value('host_page_cache'):9.1f}" if run else "")
                        + f"  {', '.join(reason_words(int(sample.value('gpu_throttle')))) or '-'}")
        return "\n".join(rows)

    def plot(self):
        """Throughput and loader wait, utilisation, SM clock, power and temperature over time, reasons marked."""
        import matplotlib.pyplot as plt

        times = self.times()
        first = self.samples[0]
        panels = [("throughput", "samples/s", None), ("gpu_util", "GPU util. %", None),
                  ("gpu_sm_clock", "SM clock (MHz)", first.value("gpu_sm_clock_max")),
                  ("gpu_power", "power (W)", first.value("gpu_power_limit")),
                  ("gpu_temp", "temperature (C)", self.slowdown_c)]
        if self.epoch_s is not None:  # a run: GPU memory and the host's page cache too
            panels += [("gpu_mem_used", "GPU memory (GiB)", first.value("gpu_mem_total")),
                       ("host_page_cache", "page cache (GiB)", first.value("host_page_cache_max"))]
        fig, axes = plt.subplots(len(panels), 1, figsize=(10, 1.7 * len(panels)), sharex=True)
        for ax, (key, ylabel, limit) in zip(axes, panels):
            ax.plot(times, self.series(key), color="tab:blue")
            if limit is not None:
                ax.axhline(limit, color="tab:red", linestyle="--", linewidth=1)
            ax.set_ylabel(ylabel)
            ax.grid(alpha=0.3)
            if key == "gpu_util":
                ax.set_ylim(0, 105)
        wait = axes[0].twinx()
        wait.plot(times, self.data_wait, color="tab:orange", linewidth=1)
        wait.set_ylabel("waiting for data", color="tab:orange")
        wait.set_ylim(0, 1)
        for i, words in enumerate(self.reasons()):
            if words:
                axes[2].axvspan(times[i] - self.interval_s / 2, times[i] + self.interval_s / 2,
                                color=_REASON_COLOURS.get(words[0], "grey"), alpha=0.15, linewidth=0)
        axes[2].set_title("shaded: clock held down (" + ", ".join(f"{word}: {colour}" for word, colour in
                                                                  _REASON_COLOURS.items()) + ")", fontsize=9)
        for start in self.epoch_starts()[1:]:
            for ax in axes:
                ax.axvline(start, color="grey", linestyle=":", linewidth=0.8)
        axes[-1].set_xlabel("seconds" + (" (dotted: a new epoch starts)" if self.epoch_s is not None else ""))
        fig.suptitle(f"{self.label}: {self.device}")
        fig.tight_layout()
        return fig


_REASON_COLOURS = {"power cap": "red", "thermal": "orange", "idle": "grey"}


def _gpu_metrics(device: FakeDevice, util: float, clock: float, power: float, temp: float, mask: int,
                 cpu: float, process_cpu: float) -> tuple[Metric, ...]:
    """One interval's readings, with the keys, labels and units of monitor's NVML and host metrics."""
    made_up = "made-up trace"
    return (
        Metric("gpu_util", "GPU utilisation (time a kernel ran)", round(util), "%", made_up),
        Metric("gpu_mem_used", "GPU memory used", round(0.4 * device.memory_gib, 2), "GiB", made_up),
        Metric("gpu_mem_total", "GPU memory total", device.memory_gib, "GiB", made_up),
        Metric("gpu_power", "power draw", round(power, 1), "W", made_up),
        Metric("gpu_power_limit", "power limit", device.power_limit_w, "W", made_up),
        Metric("gpu_temp", "temperature", round(temp), "C", made_up),
        Metric("gpu_sm_clock", "SM clock", float(round(clock / 15) * 15), "MHz", made_up),
        Metric("gpu_sm_clock_max", "SM clock, maximum", float(device.max_sm_mhz), "MHz", made_up),
        Metric("gpu_throttle", "clock held down by", mask, "reasons", made_up),
        Metric("cpu_util", "CPU utilisation (all 8 cores)", round(cpu), "%", made_up),
        Metric("process_cpu", "this process's CPU (100 % = one core)", round(process_cpu), "%", made_up),
    )


def make_trace(cause: str, *, device: str = "T4", seconds: float = 60.0, interval_s: float = 1.0,
               onset_s: float | None = None, drop: float = 0.3, hot: bool = False, dip_at: float | None = None,
               capped: bool = False, seed: int = 0) -> TrainingTrace:
    """A made-up run in which throughput falls by ``drop`` from ``onset_s`` on, for ``cause`` (one of CAUSES).

    ``hot`` runs a power-capped card close to (but below) its slowdown temperature; ``dip_at`` (seconds) adds a
    one-interval dip (a checkpoint save); ``cause='none'`` holds the throughput, with such a dip, and with
    ``capped`` on a card held at its power limit from the first interval (so its throughput never falls).
    """
    cause = one_of("cause", cause, CAUSES)
    spec = FAKE_DEVICES[one_of("device", device, tuple(FAKE_DEVICES))]
    interval_s = positive_number("interval_s", interval_s)
    count = round(positive_number("seconds", seconds) / interval_s)
    if count < 20:
        raise ValueError(f"seconds must cover at least 20 intervals of {interval_s} s, got {seconds}")
    onset_s = seconds * 0.3 if onset_s is None else positive_number("onset_s", onset_s)
    if not 0.1 * seconds <= onset_s <= 0.55 * seconds:
        raise ValueError(f"onset_s must lie between 10% and 55% of seconds ({seconds}), got {onset_s}")
    if not (isinstance(drop, (int, float)) and 0.1 <= drop <= 0.7):
        raise ValueError(f"drop must be a share between 0.1 and 0.7, got {drop!r}")
    if not isinstance(capped, bool) or (capped and cause != "none"):
        raise ValueError(f"capped=True plays a card capped from the start, so only with cause='none', got {capped!r}")
    rng = random.Random(seed)
    if cause == "none" and dip_at is None:
        dip_at = rng.uniform(onset_s, seconds - interval_s)
    dip = None if dip_at is None else min(count - 1, round(dip_at / interval_s))
    ramp_s = 6.0 if cause in ("power_cap", "thermal") else 2.0
    throughput, waits, samples = [], [], []
    temp = rng.uniform(44, 52)
    for i in range(count):
        t = i * interval_s
        f = 0.0 if cause == "none" else min(1.0, max(0.0, (t - onset_s) / ramp_s + (t >= onset_s) * 0.2))
        noise = rng.gauss(1.0, 0.015)
        util, clock, wait, mask = 99.0, float(spec.max_sm_mhz), rng.uniform(0.0, 0.02), 0
        power = spec.power_limit_w * rng.uniform(0.86, 0.92)
        cpu, process_cpu = rng.uniform(20, 30), rng.uniform(70, 90)
        speed = 1.0
        cool_target = spec.slowdown_c - (4 if hot else 14)
        if cause == "power_cap":
            power = spec.power_limit_w * (rng.uniform(0.985, 1.005) if f > 0 else rng.uniform(0.90, 0.97))
            speed = 1 - drop * f
            clock = spec.max_sm_mhz * speed
            mask = _POWER_CAP if f > 0 else 0
            temp += (cool_target - temp) * 0.12 + rng.gauss(0, 0.3)
        elif cause == "thermal":
            temp += (spec.slowdown_c + 1 - temp) * (0.25 if t >= onset_s - 4 else 0.02) + rng.gauss(0, 0.3)
            speed = 1 - drop * f
            clock = spec.max_sm_mhz * speed
            power = spec.power_limit_w * rng.uniform(0.84, 0.9) * (1 - 0.6 * drop * f)
            mask = rng.choice((_SW_THERMAL, _HW_THERMAL | _SW_THERMAL)) if f > 0 else 0
        else:
            temp += (spec.slowdown_c - 20 - temp) * 0.1 + rng.gauss(0, 0.3)
        if capped:
            speed, mask = 0.8, _POWER_CAP
            clock, power = spec.max_sm_mhz * speed, spec.power_limit_w * rng.uniform(0.985, 1.005)
        if cause == "input_bound":
            speed = 1 - drop * f
            wait = min(0.95, max(0.0, drop * f + rng.gauss(0, 0.03))) if f > 0 else wait
            util = 99.0 * (1 - (drop + 0.05) * f) + rng.gauss(0, 3)
            power *= 1 - 0.7 * drop * f
            cpu = rng.uniform(85, 99) if f > 0 else cpu
            if f > 0 and rng.random() < 0.5:
                mask, clock = _IDLE, spec.max_sm_mhz * rng.uniform(0.35, 0.6)
        elif cause == "host_sync":
            speed = 1 - drop * f
            util = 99.0 * (1 - (drop + 0.03) * f) + rng.gauss(0, 2)
            power *= 1 - 0.6 * drop * f
            process_cpu = rng.uniform(97, 100) if f > 0 else process_cpu
        rate = spec.samples_per_s * speed * noise
        if i == dip:
            rate, wait, util = rate * rng.uniform(0.3, 0.5), max(wait, 0.5), util * 0.5
        throughput.append(round(rate, 1))
        waits.append(round(wait, 3))
        samples.append(Snapshot("cuda:0", spec.name, round(t, 6), _gpu_metrics(
            spec, min(100.0, max(0.0, util)), clock, power, temp, mask, cpu, process_cpu),
            note=f"made-up trace on a device shaped like the {spec.source}: not a reading"))
    return TrainingTrace(spec.name, interval_s, spec.slowdown_c, tuple(throughput), tuple(waits), tuple(samples),
                         label=f"made-up trace #{seed}")



# --------------------------------------------------------------------------- long runs whose causes show over time

RUN_CAUSES = ("thermal", "power_cap", "page_cache", "worker_restart", "memory_thrash")
"""What slows a long run down only after a while: the card heats up until it slows its clock (thermal), draws more
power as it heats until it reaches its power cap, the loader keeps up until the host's page cache is full and reads
go to disk, the DataLoader's workers start afresh at every epoch (``persistent_workers=False``), or memory grows
until PyTorch's caching allocator frees and retries on every step."""

RUN_CHANGES = {
    "thermal": "improve_cooling",
    "power_cap": "plan_with_sustained",
    "page_cache": "feed_faster",
    "worker_restart": "persistent_workers",
    "memory_thrash": "find_the_leak",
}
"""The change in CHANGES that acts on each cause of RUN_CAUSES."""

CHANGES.update({
    "persistent_workers": "keep the DataLoader's workers alive between epochs (persistent_workers=True)",
    "find_the_leak": "find what keeps memory alive from step to step (a loss summed with its graph, a growing list of "
                     "tensors) and free it",
})


def _run_metrics(device: FakeDevice, util: float, clock: float, graphics: float, power: float, temp: float,
                 mask: int, memory: float, cache: float, cache_max: float, disk: float) -> tuple[Metric, ...]:
    """One interval's readings of a long run: NVML's, and the host's page cache and disk reads."""
    made_up = "made-up trace"
    return (
        Metric("gpu_util", "GPU utilisation (time a kernel ran)", round(util), "%", made_up),
        Metric("gpu_mem_used", "GPU memory used", round(memory, 2), "GiB", made_up),
        Metric("gpu_mem_total", "GPU memory total", device.memory_gib, "GiB", made_up),
        Metric("gpu_power", "power draw", round(power, 1), "W", made_up),
        Metric("gpu_power_limit", "power limit", device.power_limit_w, "W", made_up),
        Metric("gpu_temp", "temperature", round(temp), "C", made_up),
        Metric("gpu_sm_clock", "SM clock", float(round(clock / 15) * 15), "MHz", made_up),
        Metric("gpu_graphics_clock", "graphics clock", float(round(graphics / 15) * 15), "MHz", made_up),
        Metric("gpu_sm_clock_max", "SM clock, maximum", float(device.max_sm_mhz), "MHz", made_up),
        Metric("gpu_throttle", "clock held down by", mask, "reasons", made_up),
        Metric("host_page_cache", "host page cache", round(cache, 2), "GiB", made_up),
        Metric("host_page_cache_max", "host page cache, at most", cache_max, "GiB", made_up),
        Metric("disk_read", "disk reads", round(disk), "MB/s", made_up),
    )


def make_run(causes=(), *, device: str = "T4", seconds: float = 600.0, interval_s: float = 5.0,
             epoch_s: float = 60.0, drop: float = 0.3, capped: bool = False, reserved: bool = False,
             hot: bool = False, flicker: tuple | None = None, outliers: bool = True,
             checkpoint_every: int | None = None, seed: int = 0) -> TrainingTrace:
    """A made-up long training run on which each of ``causes`` starts at its own time and shows only over time.

    ``causes``: ``(cause, onset_s)`` pairs (or ``(cause, onset_s, drop)``, or ``(cause, onset_s, drop, end_s)``),
    cause one of RUN_CAUSES, each cause at most once. Before its onset a cause leaves no mark on the throughput; its
    precursor may show (the temperature or the GPU memory rising, the page cache filling). A cause's own ``drop`` may
    be as small as 0.02: below 0.1 its signature shows (a reason set, memory full, data waits) but the run does not
    slow down by more than 10 %. ``end_s`` clears the cause from then on (a fan ramp ends a thermal excursion, the
    page cache stops missing, the leak is freed): the run recovers. ``capped`` holds the card at its power limit from
    the first interval, ``reserved`` keeps the GPU memory nearly full from the start (TensorFlow reserves it), and
    ``hot`` holds the card at its slowdown temperature from the first interval, its clock held down and the reason
    thermal set in every interval (a crowded case, a warm host): none of them slows the run down. ``flicker``, a
    ``(reason, onset_s, share)`` triple with reason 'thermal' or 'power_cap' and share 0.05 to 0.3, sets that
    clock-event reason in that share of the intervals from ``onset_s`` on, spread evenly, without slowing the run: a
    card that touches its power limit or its slowdown point now and then. ``outliers`` adds noise a single reading
    would be fooled by: a checkpoint save in the middle of an epoch, a clock-event reason set for one interval, and a
    slow last interval (half of the seeds).
    ``checkpoint_every`` saves a checkpoint at the start of every n-th epoch from the second on: its first interval
    is slow and waits, the next one does not (one waiting interval is not a worker restart).
    """
    spec = FAKE_DEVICES[one_of("device", device, tuple(FAKE_DEVICES))]
    interval_s = positive_number("interval_s", interval_s)
    epoch_s = positive_number("epoch_s", epoch_s)
    count = round(positive_number("seconds", seconds) / interval_s)
    per_epoch = round(epoch_s / interval_s)
    if per_epoch < 8 or abs(per_epoch * interval_s - epoch_s) > 1e-6 * epoch_s:
        raise ValueError(f"epoch_s must be a whole number of at least 8 intervals of {interval_s} s, got {epoch_s}")
    if count < 4 * per_epoch:
        raise ValueError(f"seconds must cover at least 4 epochs of {epoch_s} s, got {seconds}")
    if not (isinstance(drop, (int, float)) and 0.15 <= drop <= 0.6):
        raise ValueError(f"drop must be a share between 0.15 and 0.6, got {drop!r}")
    if checkpoint_every is not None:
        checkpoint_every = positive_int("checkpoint_every", checkpoint_every)
    if not isinstance(hot, bool):
        raise ValueError(f"hot must be True or False, got {hot!r}")
    plan: dict[str, tuple[float, float, float]] = {}
    for entry in causes:
        if not isinstance(entry, (tuple, list)) or len(entry) not in (2, 3, 4):
            raise ValueError(f"causes must hold (cause, onset_s), (cause, onset_s, drop) or (cause, onset_s, drop, "
                             f"end_s), got {entry!r}")
        name = one_of("cause", entry[0], RUN_CAUSES)
        onset, share = float(entry[1]), float(entry[2]) if len(entry) >= 3 else drop
        end = float(entry[3]) if len(entry) == 4 else float("inf")
        if name in plan:
            raise ValueError(f"each cause at most once, got {name!r} twice")
        if not epoch_s <= onset <= seconds - 3 * epoch_s:
            raise ValueError(f"onset of {name!r} must lie between one epoch and three epochs before the end, got "
                             f"{onset}")
        if not 0.02 <= share <= 0.6:
            raise ValueError(f"drop of {name!r} must be a share between 0.02 and 0.6, got {share!r}")
        if end != float("inf") and not onset + interval_s <= end <= seconds:
            raise ValueError(f"end_s of {name!r} must lie after its onset and within the run, got {end}")
        plan[name] = (onset, share, end)
    if hot and "thermal" in plan:
        raise ValueError("hot=True plays a card at its slowdown point from the start: give it without a 'thermal' "
                         "cause")
    if flicker is not None:
        if not isinstance(flicker, (tuple, list)) or len(flicker) != 3:
            raise ValueError(f"flicker must be a (reason, onset_s, share) triple, got {flicker!r}")
        flicker_reason = one_of("flicker reason", flicker[0], ("thermal", "power_cap"))
        flicker_onset, flicker_share = float(flicker[1]), flicker[2]
        if flicker_reason in plan or (flicker_reason, True) in (("thermal", hot), ("power_cap", capped)):
            raise ValueError(f"a flicker of {flicker_reason!r} needs a run without that cause and not held there "
                             "from the start")
        if not epoch_s <= flicker_onset <= seconds - 2 * epoch_s:
            raise ValueError(f"flicker onset must lie between one epoch and two epochs before the end, got "
                             f"{flicker_onset}")
        if not (isinstance(flicker_share, (int, float)) and 0.05 <= flicker_share <= 0.3):
            raise ValueError(f"flicker share must lie between 0.05 and 0.3, got {flicker_share!r}")
    rng = random.Random(seed)
    cache_max = rng.choice((12.0, 24.0, 48.0))
    memory_start = spec.memory_gib * (rng.uniform(0.96, 0.975) if reserved else rng.uniform(0.35, 0.6))
    checkpoint = rng.randrange(1, count // per_epoch - 1) * per_epoch + per_epoch // 2 if outliers else None
    one_reason_at = rng.randrange(count // 4, count - 2) if outliers else None
    slow_end = outliers and rng.random() < 0.5
    base_power = rng.uniform(0.84, 0.9)
    plateau = spec.slowdown_c - rng.uniform(12, 18)  # where a well-cooled card settles
    temp, memory = rng.uniform(40, 48), memory_start
    if hot:
        temp = spec.slowdown_c + rng.uniform(0.0, 1.5)
    phase = rng.random() if flicker is not None else 0.0
    throughput, waits, samples = [], [], []

    def share_after(cause: str, t: float, ramp_s: float) -> float:
        """0 before the cause's onset and after its end, rising to 1 over ramp_s after the onset (a jump of 0.3)."""
        if cause not in plan or not plan[cause][0] <= t < plan[cause][2]:
            return 0.0
        return min(1.0, 0.3 + (t - plan[cause][0]) / ramp_s)

    for i in range(count):
        t = i * interval_s
        speed, util, wait, mask = 1.0, rng.uniform(96, 99.5), rng.uniform(0.0, 0.03), 0
        clock = spec.max_sm_mhz * rng.uniform(0.985, 1.0)
        power = spec.power_limit_w * base_power * rng.uniform(0.97, 1.03)
        target = plateau
        fill = min(1.0, t / plan["page_cache"][0]) if "page_cache" in plan else min(0.6, t / (3 * epoch_s)) * 0.5
        cache = cache_max * fill * rng.uniform(0.985, 1.0)
        disk = rng.uniform(150, 400) if t < 2 * epoch_s or "page_cache" in plan else rng.uniform(0, 20)
        if "thermal" in plan:
            onset, share, end = plan["thermal"]
            if onset - 2 * epoch_s <= t < end:  # the fan cannot keep up: the card heats to its slowdown point
                target = spec.slowdown_c + 1
            f = share_after("thermal", t, 2 * epoch_s)
            if f > 0:
                speed *= 1 - share * f
                clock = spec.max_sm_mhz * (1 - share * f) * rng.uniform(0.98, 1.02)
                power *= 1 - 0.5 * share * f
                mask |= _SW_THERMAL if rng.random() < 0.85 else (_HW_THERMAL | _SW_THERMAL)
        if "power_cap" in plan:
            onset, share, end = plan["power_cap"]
            f = share_after("power_cap", t, 2 * epoch_s)
            if t < end:
                target = max(target, spec.slowdown_c - rng.uniform(3, 7))  # hot, but below the slowdown point
                power = spec.power_limit_w * (base_power + (1 - base_power) * min(1.0, t / onset))
            if f > 0:
                speed *= 1 - share * f
                clock = min(clock, spec.max_sm_mhz * (1 - share * f) * rng.uniform(0.98, 1.02))
                power = spec.power_limit_w * rng.uniform(0.985, 1.005)
                mask |= _POWER_CAP if rng.random() < 0.95 else 0
        if hot:  # at the slowdown point from the start: the clock held down, the reason set, no change over the run
            target, mask = spec.slowdown_c + 1, mask | _SW_THERMAL
            clock = min(clock, spec.max_sm_mhz * rng.uniform(0.85, 0.89))
            power *= 1.0 if mask & _POWER_CAP else 0.93
        if capped:
            power, mask = spec.power_limit_w * rng.uniform(0.985, 1.005), mask | _POWER_CAP
            clock = min(clock, spec.max_sm_mhz * rng.uniform(0.78, 0.82))
        if flicker is not None and flicker_onset - 2 * epoch_s <= t:
            if flicker_reason == "thermal":  # close below the slowdown point, touching it now and then
                target = max(target, spec.slowdown_c - 2)
            j = (t - flicker_onset) / interval_s
            if j >= 0 and int((j + 1) * flicker_share + phase) > int(j * flicker_share + phase):
                if flicker_reason == "thermal":
                    mask |= _SW_THERMAL
                else:
                    mask, power = mask | _POWER_CAP, spec.power_limit_w * rng.uniform(0.985, 1.005)
        if "memory_thrash" in plan:
            onset, share, end = plan["memory_thrash"]
            full = spec.memory_gib * rng.uniform(0.975, 0.995)
            memory = memory_start + (full - memory_start) * min(1.0, t / onset) if t < onset else full
            if t >= end:  # the leak is freed
                memory = memory_start * rng.uniform(0.995, 1.005)
            f = share_after("memory_thrash", t, epoch_s)
            if f > 0:  # the allocator frees its cache and retries: every step waits for the GPU to drain
                speed *= 1 - share * f
                util *= 1 - 0.6 * share * f
                power *= 1 - 0.4 * share * f
        else:
            memory = memory_start * rng.uniform(0.995, 1.005)
        temp += (target - temp) * (interval_s / 40) + rng.gauss(0, 0.3)
        if "page_cache" in plan:
            onset, share, _ = plan["page_cache"]
            f = share_after("page_cache", t, epoch_s)
            if f > 0:  # the page cache is full: every read goes to disk, and the loop waits for its batches
                speed *= 1 - share * f
                wait = min(0.95, max(wait, share * f + rng.gauss(0, 0.04)))
                util *= 1 - share * f
                power *= 1 - 0.6 * share * f
                disk = rng.uniform(600, 900)
                if rng.random() < 0.5:
                    mask, clock = mask | _IDLE, spec.max_sm_mhz * rng.uniform(0.35, 0.6)
        if "worker_restart" in plan:
            onset, _, end = plan["worker_restart"]
            start = i % per_epoch
            if onset <= t < end and i >= per_epoch and start < 2:  # new workers start and import everything again
                speed *= rng.uniform(0.05, 0.2)
                wait, util = rng.uniform(0.85, 0.98), rng.uniform(2, 12)
                power *= 0.45
                mask, clock = mask | _IDLE, spec.max_sm_mhz * rng.uniform(0.3, 0.5)
        epoch, start = divmod(i, per_epoch)
        saving = bool(checkpoint_every) and epoch >= 1 and start == 0 and (epoch - 1) % checkpoint_every == 0
        if i == checkpoint or saving:
            speed *= rng.uniform(0.3, 0.5)
            wait, util = max(wait, rng.uniform(0.5, 0.7)), util * 0.5
        if i == one_reason_at:
            mask |= rng.choice((_SW_THERMAL, _POWER_CAP))
        if slow_end and i == count - 1:
            speed *= rng.uniform(0.3, 0.6)
            wait = max(wait, rng.uniform(0.4, 0.8))
        rate = spec.samples_per_s * speed * rng.gauss(1.0, 0.02)
        throughput.append(round(rate, 1))
        waits.append(round(wait, 3))
        graphics = clock * rng.uniform(0.965, 0.995)  # its own reading: close to the SM clock, not equal to it
        samples.append(Snapshot("cuda:0", spec.name, round(t, 6), _run_metrics(
            spec, min(100.0, max(0.0, util)), clock, graphics, power, temp, mask, memory, cache, cache_max, disk),
            note=f"made-up run on a device shaped like the {spec.source}: not a reading"))
    return TrainingTrace(spec.name, interval_s, spec.slowdown_c, tuple(throughput), tuple(waits), tuple(samples),
                         label=f"made-up run #{seed}", epoch_s=epoch_s)
