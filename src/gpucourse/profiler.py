"""Reading a real profile: a small training step with one bottleneck planted in a named stage, profiled with
``torch.profiler``, and the reading that names the bottleneck (lesson ``10_compilers``).

A :class:`PlantedStep` runs one SGD step of a small MLP on the CPU, each stage inside
``torch.profiler.record_function`` under the names it is given, and adds one or more *plants*: work of a known kind
inside a named stage. The plants are the three shapes a slow stage takes in a profile:

- ``"sleep"`` and ``"python"``: time inside the stage but outside every profiled operation (waiting on a file or
  the network; pure-Python work). The stage's *self* time is most of its total.
- ``"mm"``, ``"linear"``, ``"bmm"``, ``"sort"``, ``"cumsum"``: one heavy operation (milliseconds per call).
- ``"add"``, ``"mul"``, ``"sin"``: thousands of tiny operations (microseconds each): overhead-bound, the CPU-side
  picture of a launch-bound GPU step.

Every plant is real work on real tensors, so the profile is a real one; only its place is chosen.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

from gpucourse._validate import non_negative_int, positive_int, positive_number

ROLES = ("data", "forward", "backward", "optimizer")
"""What the stages of a :class:`PlantedStep` do, in order; the names they carry in a profile are free."""

WAIT_PLANTS = ("sleep", "python")
HEAVY_PLANTS = {"mm": "aten::mm", "linear": "aten::addmm", "bmm": "aten::bmm", "sort": "aten::sort",
                "cumsum": "aten::cumsum"}
TINY_PLANTS = {"add": "aten::add", "mul": "aten::mul", "sin": "aten::sin"}
KINDS = ("waiting", "launch-bound", "op-bound")
"""The three kinds of bottleneck a diagnosis names."""

TINY_OP_US = 50.0
"""Mean self CPU time per call (microseconds) of a stage's ``aten::`` operations below which they count as tiny..."""
TINY_OP_CALLS = 100
"""... when they also made at least this many calls per run of the stage (overhead-bound)."""


def _plant(kind: str, amount: float, generator: torch.Generator) -> Callable[[], None]:
    """One plant as a function; ``amount`` scales its work (1.0: roughly 10-30 ms on one CPU core)."""
    if kind == "sleep":
        return lambda: time.sleep(0.02 * amount)
    if kind == "python":
        count = int(150_000 * amount)
        return lambda: sum(i * i for i in range(count))
    if kind == "mm":
        a = torch.randn(max(8, int(192 * amount)), 1024, generator=generator)
        b = torch.randn(1024, 1024, generator=generator)
        return lambda: torch.mm(a, b)
    if kind == "linear":
        a = torch.randn(max(8, int(192 * amount)), 1024, generator=generator)
        weight, bias = torch.randn(1024, 1024, generator=generator), torch.randn(1024, generator=generator)
        return lambda: torch.nn.functional.linear(a, weight, bias)
    if kind == "bmm":
        a = torch.randn(8, max(8, int(128 * amount)), 512, generator=generator)
        b = torch.randn(8, 512, 512, generator=generator)
        return lambda: torch.bmm(a, b)
    if kind == "sort":
        values = torch.randn(max(1000, int(100_000 * amount)), generator=generator)
        return lambda: torch.sort(values)
    if kind == "cumsum":
        values = torch.randn(max(1000, int(3_000_000 * amount)), generator=generator)
        return lambda: torch.cumsum(values, 0)
    if kind in TINY_PLANTS:
        count = max(1, int(4000 * amount))
        x, y = torch.randn(64, generator=generator), torch.randn(64, generator=generator)
        op = {"add": torch.add, "mul": torch.mul, "sin": lambda a, _b: torch.sin(a)}[kind]

        def chain() -> None:
            for _ in range(count):
                op(x, y)
        return chain
    raise ValueError(f"plant must be one of {WAIT_PLANTS + tuple(HEAVY_PLANTS) + tuple(TINY_PLANTS)}, got {kind!r}")


class PlantedStep:
    """One training step on the CPU with named stages and planted work; call it to run one step (lesson
    ``10_compilers``).

    - ``stages``: four names, for the data, forward, backward and optimizer stages (``ROLES``), in that order.
    - ``plants``: stage name -> (plant, amount) or a list of them; see the module docstring for the plants.
    - ``calls``: stage name -> how many times that stage runs per step (e.g. 2 forward/backward passes of gradient
      accumulation); default once.
    """

    def __init__(self, stages: Sequence[str] = ROLES, plants: Mapping[str, object] | None = None, *,
                 calls: Mapping[str, int] | None = None, batch: int = 32, width: int = 128, seed: int = 0) -> None:
        if isinstance(stages, (str, bytes)) or not isinstance(stages, Sequence) or len(stages) != len(ROLES) \
                or not all(isinstance(name, str) and name for name in stages) or len(set(stages)) != len(stages):
            raise ValueError(f"stages must be {len(ROLES)} different names (data, forward, backward, optimizer), "
                             f"got {stages!r}")
        self.stages = tuple(stages)
        generator = torch.Generator().manual_seed(non_negative_int("seed", seed))
        self.plants: dict[str, list[Callable[[], None]]] = {name: [] for name in self.stages}
        for name, spec in (plants or {}).items():
            if name not in self.plants:
                raise ValueError(f"plants: {name!r} is not one of the stages {self.stages}")
            specs = spec if isinstance(spec, list) else [spec]
            for kind, amount in specs:
                self.plants[name].append(_plant(kind, positive_number("amount", amount), generator))
        self.calls = {name: 1 for name in self.stages}
        for name, count in (calls or {}).items():
            if name not in self.calls:
                raise ValueError(f"calls: {name!r} is not one of the stages {self.stages}")
            self.calls[name] = positive_int(f"calls[{name!r}]", count)
        batch, width = positive_int("batch", batch), positive_int("width", width)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self.model = torch.nn.Sequential(torch.nn.Linear(width, width), torch.nn.ReLU(), torch.nn.Linear(width, 10))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.01)
        self.x = torch.randn(batch, width, generator=generator)
        self.y = torch.randint(0, 10, (batch,), generator=generator)

    def _stage(self, name: str, work: Callable[[], object]) -> object:
        """Run ``work`` and the stage's plants inside one ``record_function`` range named ``name``."""
        with record_function(name):
            result = work()
            with torch.no_grad():
                for plant in self.plants[name]:
                    plant()
        return result

    def __call__(self) -> None:
        data, forward, backward, update = self.stages
        for _ in range(self.calls[data]):
            x = self._stage(data, self.x.clone)
        self.optimizer.zero_grad(set_to_none=True)
        for _ in range(max(self.calls[forward], self.calls[backward])):
            loss = self._stage(forward, lambda: torch.nn.functional.cross_entropy(self.model(x), self.y))
            self._stage(backward, loss.backward)
        for _ in range(self.calls[update]):
            self._stage(update, self.optimizer.step)


def profile_steps(step: Callable[[], object], *, steps: int = 3, warmup: int = 1):
    """A finished ``torch.profiler.profile`` of ``steps`` calls of ``step`` on the CPU, after ``warmup`` calls
    (lesson ``10_compilers``)."""
    if not callable(step):
        raise TypeError(f"step must be callable with no arguments, got {type(step).__name__}")
    from gpucourse.monitor import quiet_profiler_warning

    for _ in range(non_negative_int("warmup", warmup)):
        step()
    with quiet_profiler_warning(), profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(positive_int("steps", steps)):
            step()
    return prof


def _other_threads_inside(event, events) -> list:
    """Top-level CPU events of other threads that ran inside ``event``'s time: on a GPU autograd runs backward on its
    own thread, so a ``backward`` range has no children and its operations appear there."""
    if getattr(event, "time_range", None) is None:
        return []
    start, end = event.time_range.start, event.time_range.end
    return [other for other in events if getattr(other, "thread", event.thread) != event.thread
            and getattr(other, "cpu_parent", None) is None
            and getattr(other, "device_type", DeviceType.CPU) == DeviceType.CPU
            and getattr(other, "time_range", None) is not None
            and start <= other.time_range.start and other.time_range.end <= end]


def bottleneck(prof, stages: Sequence[str]) -> dict:
    """The diagnosis of a profile (lesson ``10_compilers``, exercise 1): the stage with the most total CPU time
    (summed over its calls), the ``aten::`` operation with the most self CPU time inside it (any depth) and the kind
    of bottleneck: ``launch-bound`` when, per run of the stage (so that the verdict does not depend on how many steps
    were profiled), its ``aten::`` operations made at least ``TINY_OP_CALLS`` calls at under ``TINY_OP_US`` each on
    average and take at least a fifth of it (tiny calls inside a stage that mostly waits do not make it
    launch-bound), else ``op-bound`` when ``aten::`` operations hold at least half the stage's time, else
    ``waiting`` (op None: I/O, sleeps, pure Python). ValueError names a stage the profile lacks."""
    if not callable(getattr(prof, "events", None)):
        raise TypeError(f"prof must be a finished torch.profiler.profile, got {type(prof).__name__}")
    totals = dict.fromkeys(stages, 0.0)
    in_ops = dict.fromkeys(stages, 0.0)
    ops: dict[str, dict[str, list[float]]] = {name: {} for name in stages}
    runs = dict.fromkeys(stages, 0)
    events = list(prof.events())
    for event in events:
        if event.name not in totals or getattr(event, "device_type", DeviceType.CPU) != DeviceType.CPU:
            continue                      # not a stage, or the device-side copy of a range (CUDA profiling)
        totals[event.name] += event.cpu_time_total
        runs[event.name] += 1
        stack = list(event.cpu_children) + _other_threads_inside(event, events)
        while stack:
            child = stack.pop()
            stack.extend(child.cpu_children)
            if child.name.startswith("aten::"):
                in_ops[event.name] += child.self_cpu_time_total
                entry = ops[event.name].setdefault(child.name, [0.0, 0])
                entry[0] += child.self_cpu_time_total
                entry[1] += 1
    missing = [name for name in stages if not totals[name]]
    if missing:
        raise ValueError(f"stages: no event in the profile for {missing}")
    stage = max(stages, key=totals.get)
    if ops[stage]:
        op = max(ops[stage], key=lambda name: ops[stage][name][0])
        calls = sum(count for _, count in ops[stage].values())          # every aten:: call of the stage
        if calls / runs[stage] >= TINY_OP_CALLS and in_ops[stage] / calls < TINY_OP_US \
                and in_ops[stage] >= totals[stage] / 5:
            return {"stage": stage, "op": op, "kind": "launch-bound"}
        if in_ops[stage] >= 0.5 * totals[stage]:
            return {"stage": stage, "op": op, "kind": "op-bound"}
    return {"stage": stage, "op": None, "kind": "waiting"}


def _synthetic_event(name, cpu_self, device_self=0.0, children=(), on=DeviceType.CPU, thread=1):
    """One event with the fields of ``prof.events()`` that a reading uses: its totals include its children's (its
    ``time_range`` is set when it is placed)."""
    from types import SimpleNamespace

    children = list(children)
    node = SimpleNamespace(name=name, self_cpu_time_total=float(cpu_self), self_device_time_total=float(device_self),
                           cpu_time_total=cpu_self + sum(child.cpu_time_total for child in children),
                           device_time_total=device_self + sum(child.device_time_total for child in children),
                           cpu_children=children, device_type=on, is_user_annotation=False, thread=thread,
                           cpu_parent=None, time_range=None)
    for child in children:
        child.cpu_parent = node
    return node


def synthetic_gpu_profile(steps: int, stages: Mapping[str, tuple], gaps: float = 1.1,
                          autograd: Sequence[str] = (), repeat: Mapping[str, int] | None = None):
    """A profile built event by event, shaped like a CUDA profile, for checking a reading of ``prof.events()`` without
    a GPU (lesson ``10_compilers``, exercise 1's tests).

    ``stages`` maps each stage to ``(its own CPU µs, [(op, calls, CPU µs per call, device µs per call, wrapper)])``,
    in the order a step runs them; ``repeat`` runs a stage that many times per step (gradient accumulation). An
    operation with a ``wrapper`` (``"aten::linear"``) sits below an event of that name. As with CUDA profiling, each
    stage's range also appears as a device-side event of the same name (``device_type`` CUDA), its span on the GPU
    (``gaps`` times its kernels' time). A stage in ``autograd`` runs as backward does on a GPU: its range (on the main
    thread) has no children and lasts until the engine is done; its operations are top-level events of autograd's
    thread (``evaluate_function`` -> wrapper -> op) inside the range's ``time_range``. Device times of 0 everywhere
    make it a CPU profile. Returns an object with ``events()``, like a finished ``torch.profiler.profile``."""
    from types import SimpleNamespace

    event = _synthetic_event
    flat, clock = [], 0.0

    def place(node, start):
        node.time_range = SimpleNamespace(start=start, end=start + node.cpu_time_total)
        flat.append(node)
        start += node.self_cpu_time_total / 2
        for child in node.cpu_children:
            place(child, start)
            start += child.cpu_time_total

    for _ in range(positive_int("steps", steps)):
        for stage, (own_us, op_rows) in stages.items():
            for _ in range((repeat or {}).get(stage, 1)):
                children, thread = [], 2 if stage in autograd else 1
                for op, calls, cpu_us, device_us, wrapper in op_rows:
                    for _ in range(calls):
                        inner = event(op, cpu_us, device_us, thread=thread)
                        if stage in autograd:
                            inner = event(f"autograd::engine::evaluate_function: {wrapper}", 3.0, 0.0,
                                          [event(wrapper, 2.0, 0.0, [inner], thread=2)], thread=2)
                        children.append(event(wrapper, 2.0, 0.0, [inner]) if wrapper and thread == 1 else inner)
                start = clock
                if stage in autograd:
                    stage_event = event(stage, own_us + sum(child.cpu_time_total for child in children))
                    place(stage_event, start)
                    for child in children:
                        start += own_us / len(children) / 2
                        place(child, start)
                        start += child.cpu_time_total
                else:
                    stage_event = event(stage, own_us, 0.0, children)
                    place(stage_event, start)
                stage_event.is_user_annotation = True       # a record_function range
                clock = stage_event.time_range.end + 5.0
                span = gaps * sum(calls * device_us for _, calls, _, device_us, _ in op_rows)
                if span:
                    device_range = event(stage, 0.0, span, on=DeviceType.CUDA, thread=7)
                    device_range.is_user_annotation = True
                    place(device_range, start)
    place(event("void gemm_kernel<...>", 0.0, on=DeviceType.CUDA, thread=7), clock)
    return SimpleNamespace(events=lambda: list(flat))

__all__ = ["HEAVY_PLANTS", "KINDS", "PlantedStep", "ROLES", "TINY_OP_CALLS", "TINY_OP_US", "TINY_PLANTS", "WAIT_PLANTS",
           "bottleneck", "profile_steps", "synthetic_gpu_profile"]
