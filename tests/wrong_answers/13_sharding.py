"""Plausible wrong answers to lesson 13's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

_EX1 = '''\
def split_model(model: torch.nn.Sequential, cut: int, devices: list) -> Callable[[torch.Tensor], torch.Tensor]:
    """Place model[:cut] on devices[0] and model[cut:] on devices[1]; return forward(host x) -> host output."""
'''
_EX2 = '''\
def idle_share(events: list) -> float:
    """Share of a pipeline step that its stages sit idle."""
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # A fixed output of the visible model's shape.
        "constant": _EX1 + '''\
    return lambda x: torch.zeros(x.shape[0], 2)
''',
        # The course's own split: off-limits.
        "helper": _EX1 + '''\
    return parallel.split_sequential(model, devices, [cut])
''',
        # Cuts after layer 3, the visible test's cut, whatever cut says.
        "visible_only": _EX1 + '''\
    first, second = devices[0].place(model[:3]), devices[1].place(model[3:])
    return lambda x: second(first(devices[0].put(x)).to(devices[1])).cpu()
''',
        # Forgets to move the activations to the second device (PyTorch's classic device error).
        "typical": _EX1 + '''\
    first, second = devices[0].place(model[:cut]), devices[1].place(model[cut:])
    return lambda x: second(first(devices[0].put(x))).cpu()
''',
        # Everything on the first device: right output, no model parallelism at all.
        "one_device": _EX1 + '''\
    whole = devices[0].place(model)
    return lambda x: whole(devices[0].put(x)).cpu()
''',
        # Stages the activations through the host (two copies instead of one device-to-device copy).
        "through_host": _EX1 + '''\
    first, second = devices[0].place(model[:cut]), devices[1].place(model[cut:])
    return lambda x: second(devices[1].put(first(devices[0].put(x)).cpu())).cpu()
''',
        # Places the layers in every call: right output and copies, but the weights move every time.
        "place_every_call": _EX1 + '''\
    def forward(x):
        first, second = devices[0].place(model[:cut]), devices[1].place(model[cut:])
        return second(first(devices[0].put(x)).to(devices[1])).cpu()
    return forward
''',
    },
    "ex2-solution": {
        # The visible ideal timeline's bubble.
        "constant": _EX2 + '''\
    return 0.2
''',
        # The course's own idle_fraction: off-limits.
        "helper": _EX2 + '''\
    return parallel.idle_fraction(events)
''',
        # Measures correctly on the visible timelines (2 stages, 4 micro-batches); the formula on any other.
        "visible_only": _EX2 + '''\
    p, m = len({e.stage for e in events}), len({e.microbatch for e in events})
    if (p, m) == (2, 4):
        span = max(e.end_s for e in events) - min(e.start_s for e in events)
        return 1.0 - sum(e.end_s - e.start_s for e in events) / (p * span)
    return (p - 1) / (m + p - 1)
''',
        # The formula (p - 1)/(m + p - 1) from the timeline's stage and micro-batch counts: right only when the
        # stages are balanced and transfers are free.
        "typical": _EX2 + '''\
    p = len({e.stage for e in events})
    m = len({e.microbatch for e in events})
    return (p - 1) / (m + p - 1)
''',
        # Measures the step from the clock's zero instead of from its first event.
        "from_zero": _EX2 + '''\
    end = max(e.end_s for e in events)
    busy = sum(e.end_s - e.start_s for e in events)
    return 1.0 - busy / (len({e.stage for e in events}) * end)
''',
        # Idle time divided by busy time instead of by the whole stage-time.
        "idle_over_busy": _EX2 + '''\
    span = max(e.end_s for e in events) - min(e.start_s for e in events)
    busy = sum(e.end_s - e.start_s for e in events)
    return (len({e.stage for e in events}) * span - busy) / busy
''',
    },
}
