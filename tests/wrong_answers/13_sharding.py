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
def pipeline_schedule(stages: int, microbatches: int) -> list[list[tuple[str, int]]]:
    """Each stage's order of passes."""
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
        # The visible test's schedule (2 stages, 4 micro-batches), whatever the pipeline.
        "constant": _EX2 + '''\
    return [[("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)],
            [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)]]
''',
        # The course's own schedules: off-limits.
        "helper": _EX2 + '''\
    return parallel.pipeline_orders("1f1b", stages, microbatches)
''',
        # The bounded schedule for the visible pipeline only; GPipe for any other.
        "visible_only": _EX2 + '''\
    if (stages, microbatches) == (2, 4):
        return [[("F", 0), ("F", 1), ("B", 0), ("F", 2), ("B", 1), ("F", 3), ("B", 2), ("B", 3)],
                [("F", 0), ("B", 0), ("F", 1), ("B", 1), ("F", 2), ("B", 2), ("F", 3), ("B", 3)]]
    return [[("F", i) for i in range(microbatches)] + [("B", i) for i in reversed(range(microbatches))]
            for _ in range(stages)]
''',
        # GPipe: all forwards, then all backwards: every stage holds all m micro-batches.
        "typical": _EX2 + '''\
    return [[("F", i) for i in range(microbatches)] + [("B", i) for i in reversed(range(microbatches))]
            for _ in range(stages)]
''',
        # One micro-batch at a time, forward and backward, on every stage: little memory, no pipelining at all.
        "sequential": _EX2 + '''\
    return [[pass_ for i in range(microbatches) for pass_ in (("F", i), ("B", i))] for _ in range(stages)]
''',
        # One warm-up forward too many: stage s holds p - s + 1 micro-batches.
        "warmup_off_by_one": _EX2 + '''\
    orders = []
    for s in range(stages):
        w = min(stages - s, microbatches)
        steady = [pass_ for i in range(microbatches - w) for pass_ in (("F", w + i), ("B", i))]
        orders.append([("F", i) for i in range(w)] + steady + [("B", i) for i in range(microbatches - w, microbatches)])
    return orders
''',
        # Warm-up counted from the wrong end (s instead of p - s - 1): the first stage waits for a backward that the
        # last stage can only produce after a forward the first stage has not sent: a deadlock.
        "warmup_reversed": _EX2 + '''\
    orders = []
    for s in range(stages):
        w = min(s, microbatches)
        steady = [pass_ for i in range(microbatches - w) for pass_ in (("F", w + i), ("B", i))]
        orders.append([("F", i) for i in range(w)] + steady + [("B", i) for i in range(microbatches - w, microbatches)])
    return orders
''',
    },
}
