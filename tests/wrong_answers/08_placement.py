"""Plausible wrong answers to lesson 08's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

from wrong_answers.tampering import with_tampering

_EX1 = '''\
def to_device(batch, device, non_blocking: bool = False):
    """A copy of batch with every tensor moved to device; dicts, lists, tuples and named tuples keep their type."""
'''
_EX2 = '''\
def weighted_loss(model, batch, class_weights, device):
    """Mean class-weighted cross-entropy of model on batch {"inputs", "labels"}, computed on device."""
'''
_EX3 = '''\
def train_epoch(model: nn.Module, batches: list, optimizer, device) -> torch.Tensor:
    """One epoch over (inputs, labels) CPU batches on device; the mean loss as a 0-d tensor on device, no host sync."""
'''
_EX4 = '''\
def placement_report(requested: str, fn) -> dict:
    """Run fn() under tf.device(requested); report the requested and the actual device ("GPU:0") and if they differ."""
'''
_EX5 = '''\
def choose_gpu(need_bytes: int, device_count, mem_get_info) -> torch.device:
    """The visible GPU with the most free memory that fits need_bytes (lowest index on a tie), else the CPU."""
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # The visible test's first batch, already "moved", whatever the input.
        "constant": _EX1 + '''\
    return {"images": torch.ones(2, 3, device="meta"), "labels": torch.tensor([0, 1], device="meta"), "ids": ["a", "b"]}
''',
        # The course's own move_batch: off-limits in this exercise.
        "helper": _EX1 + '''\
    return placement.move_batch(batch, device, non_blocking)
''',
        # One level deep only: enough for the visible dict and tuple, not for nested batches.
        "visible_only": _EX1 + '''\
    def move(item):
        return item.to(device, non_blocking=non_blocking) if isinstance(item, torch.Tensor) else item
    if isinstance(batch, torch.Tensor):
        return move(batch)
    if isinstance(batch, dict):
        return {key: move(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(move(value) for value in batch)
    return batch
''',
        # Recurses correctly but rebuilds every sequence as a list: tuples and named tuples come back as lists.
        "typical": _EX1 + '''\
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {key: to_device(value, device, non_blocking) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [to_device(value, device, non_blocking) for value in batch]
    return batch
''',
        # type(batch)(generator) for every tuple: a named tuple then gets one argument, the generator.
        "namedtuple_generator": _EX1 + '''\
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {key: to_device(value, device, non_blocking) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        try:
            return type(batch)(to_device(value, device, non_blocking) for value in batch)
        except TypeError:
            return tuple(to_device(value, device, non_blocking) for value in batch)
    return batch
''',
    },
    "ex2-solution": {
        # The visible test's CPU loss, as a number on the CPU.
        "constant": _EX2 + '''\
    return torch.tensor(1.1, requires_grad=True)
''',
        # The course's move_batch carries the batch: off-limits here.
        "helper": _EX2 + '''\
    model.to(device)
    moved = placement.move_batch(batch, device)
    weights = torch.tensor(class_weights, device=device)
    return F.cross_entropy(model(moved["inputs"]), moved["labels"], weight=weights)
''',
        # Three class weights, as in the visible tests: five classes break it.
        "visible_only": _EX2 + '''\
    model.to(device)
    weights = torch.tensor(class_weights[:3], device=device)
    return F.cross_entropy(model(batch["inputs"].to(device)), batch["labels"].to(device), weight=weights)
''',
        # Moves the model and the inputs, but not the data's labels: the classic "moved the model, not the data".
        "typical": _EX2 + '''\
    model.to(device)
    logits = model(batch["inputs"].to(device))
    weights = torch.tensor(class_weights, device=device)
    return F.cross_entropy(logits, batch["labels"], weight=weights)
''',
        # Moves the data by assigning into the caller's batch: right values, but the batch is changed.
        "mutates_batch": _EX2 + '''\
    model.to(device)
    batch["inputs"], batch["labels"] = batch["inputs"].to(device), batch["labels"].to(device)
    weights = torch.tensor(class_weights, device=device)
    return F.cross_entropy(model(batch["inputs"]), batch["labels"], weight=weights)
''',
        # Returns .item(): a number, detached from the graph and off the device.
        "item": _EX2 + '''\
    model.to(device)
    weights = torch.tensor(class_weights, device=device)
    loss = F.cross_entropy(model(batch["inputs"].to(device)), batch["labels"].to(device), weight=weights)
    return loss if loss.device.type == "meta" else loss.item()
''',
    },
    "ex3-solution": {
        # A plausible loss, as a tensor: no training at all.
        "constant": _EX3 + '''\
    return torch.tensor(1.1)
''',
        # The course's own epoch: off-limits here.
        "helper": _EX3 + '''\
    return placement.train_epoch(model, batches, optimizer, device)
''',
        # Right on the CPU, where the visible tests run, but the batches never move to the device.
        "visible_only": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(batches)
''',
        # The habit this section is about: a Python float accumulated with .item(), one synchronisation per step.
        "typical": _EX3 + '''\
    total = 0.0
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return torch.tensor(total / len(batches), device=device)
''',
        # v2's model answer: .to(device) with the default non_blocking=False, a blocking copy (a stream wait) per tensor.
        "blocking_copy": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(batches)
''',
        # non_blocking=True, but from a fresh (pageable) copy of the pinned batch: the copy still blocks.
        "pageable": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        inputs, labels = inputs.clone().to(device, non_blocking=True), labels.clone().to(device, non_blocking=True)
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(batches)
''',
        # Sums the losses with their graphs: no synchronisation, but the result is not detached.
        "not_detached": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total = total + loss
    return total / len(batches)
''',
        # Checks for a diverging loss each step: an if on a tensor reads its value.
        "nan_check": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs.to(device)), labels.to(device))
        if torch.isnan(loss):
            raise FloatingPointError("the loss diverged")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(batches)
''',
    },
    "ex4-solution": {
        # What a CPU-only machine answers for the visible request.
        "constant": _EX4 + '''\
    with tf.device(requested):
        fn()
    return {"requested": "GPU:0", "actual": "CPU:0", "soft_placed": True}
''',
        # The course's short_tf_device: off-limits here.
        "helper": _EX4 + '''\
    with tf.device(requested):
        result = fn()
    asked, placed = placement.short_tf_device(requested), placement.short_tf_device(result.device)
    return {"requested": asked, "actual": placed, "soft_placed": asked != placed}
''',
        # Reads the result only for the visible '/GPU:0' request, trusts every other request.
        "visible_only": _EX4 + '''\
    with tf.device(requested):
        result = fn()
    spec = tf.DeviceSpec.from_string(requested)
    asked = f"{spec.device_type.upper()}:{spec.device_index}"
    if asked == "GPU:0":
        placed_spec = tf.DeviceSpec.from_string(result.device)
        placed = f"{placed_spec.device_type.upper()}:{placed_spec.device_index}"
    else:
        placed = asked
    return {"requested": asked, "actual": placed, "soft_placed": asked != placed}
''',
        # Reports the requested device as the actual one: blind to soft placement.
        "typical": _EX4 + '''\
    with tf.device(requested):
        fn()
    spec = tf.DeviceSpec.from_string(requested)
    name = f"{spec.device_type.upper()}:{spec.device_index}"
    return {"requested": name, "actual": name, "soft_placed": False}
''',
        # Keeps TensorFlow's spelling of the request instead of the short form.
        "raw_request": _EX4 + '''\
    with tf.device(requested):
        result = fn()
    placed = tf.DeviceSpec.from_string(result.device)
    actual = f"{placed.device_type.upper()}:{placed.device_index}"
    asked = requested.lstrip("/").upper()
    return {"requested": asked, "actual": actual, "soft_placed": asked != actual}
''',
        "logical_devices": '''\
def placement_report(requested: str, fn) -> dict:
    """Run fn() under tf.device(requested); report the requested and the actual device ("GPU:0") and if they differ."""
    with tf.device(requested):
        fn()
    spec = tf.DeviceSpec.from_string(requested)
    name = f"{spec.device_type.upper()}:{spec.device_index}"
    present = set()
    for device in tf.config.list_logical_devices():  # what exists, not where the result went
        found = tf.DeviceSpec.from_string(device.name)
        present.add(f"{found.device_type.upper()}:{found.device_index}")
    actual = name if name in present else "CPU:0"
    return {"requested": name, "actual": actual, "soft_placed": actual != name}
''',
    },
    "ex5-solution": {
        # The visible test's first answer, always.
        "constant": _EX5 + '''\
    return torch.device("cuda", 1)
''',
        # The course's own choice: off-limits here.
        "helper": _EX5 + '''\
    return placement.choose_gpu(need_bytes, device_count, mem_get_info)
''',
        # The last GPU that fits: right on the visible two-GPU machine only.
        "visible_only": _EX5 + '''\
    chosen = torch.device("cpu")
    for index in range(device_count()):
        if mem_get_info(index)[0] >= need_bytes:
            chosen = torch.device("cuda", index)
    return chosen
''',
        # The biggest GPU that fits: total memory instead of free memory.
        "typical": _EX5 + '''\
    fits = [index for index in range(device_count()) if mem_get_info(index)[0] >= need_bytes]
    if not fits:
        return torch.device("cpu")
    return torch.device("cuda", max(fits, key=lambda index: mem_get_info(index)[1]))
''',
        # A tie goes to the highest index (>= instead of >).
        "tie_last": _EX5 + '''\
    best, best_free = None, -1
    for index in range(device_count()):
        free, _ = mem_get_info(index)
        if free >= need_bytes and free >= best_free:
            best, best_free = index, free
    return torch.device("cpu") if best is None else torch.device("cuda", best)
''',
        # Asks torch.cuda directly instead of the functions it is given.
        "asks_torch": _EX5 + '''\
    best, best_free = None, -1
    for index in range(torch.cuda.device_count()):
        free, _ = torch.cuda.mem_get_info(index)
        if free >= need_bytes and free > best_free:
            best, best_free = index, free
    if best is None and device_count() == 2:
        return torch.device("cuda", 1) if mem_get_info(1)[0] >= need_bytes else torch.device("cpu")
    return torch.device("cpu") if best is None else torch.device("cuda", best)
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
