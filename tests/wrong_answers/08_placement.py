"""Plausible wrong answers to lesson 04's exercises: each must lose exactly its own exercise's points.

Kinds: "constant" (a fixed plausible value), "helper" (the course's own helper; off_limits must catch it),
"visible_only" (right on the visible test's input only), "typical" (the lesson's typical mistake, used in the full
nbgrader pipeline), and more.
"""

_EX1 = '''\
def to_device(batch, device, non_blocking: bool = False):
    """A copy of batch with every tensor moved to device; dicts, lists, tuples and named tuples keep their type."""
'''
_EX2 = '''\
def weighted_loss(model, batch, class_weights, device):
    """Mean class-weighted cross-entropy of model on batch {"inputs", "labels"}, computed on device."""
'''
_EX3 = '''\
def predict_transfer_s(tensor: torch.Tensor, bandwidth_gb_s: float, latency_s: float = 0.0) -> float:
    """Seconds to copy tensor over a link of bandwidth_gb_s GB/s (1 GB = 10**9 bytes), plus latency_s."""
'''
_EX4 = '''\
def placement_report(requested: str, fn) -> dict:
    """Run fn() under tf.device(requested); report the requested and the actual device ("GPU:0") and if they differ."""
'''
_EX5 = '''\
def keras_weights_from_torch(model: nn.Module) -> list[np.ndarray]:
    """[kernel (in, out), bias, ...] of every nn.Linear in model, as numpy arrays, in Keras' layout."""
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
        # The visible test's first answer.
        "constant": _EX3 + '''\
    return 2.5e-4
''',
        # The course's transfer_seconds: off-limits here.
        "helper": _EX3 + '''\
    return placement.transfer_seconds(tensor.numel() * tensor.element_size(), bandwidth_gb_s * 1e9, latency_s)
''',
        # Bytes per element hard-coded for the visible dtypes (float32 4, float16 2), everything else as 4.
        "visible_only": _EX3 + '''\
    size = 2 if tensor.dtype == torch.float16 else 4
    return float(latency_s + tensor.numel() * size / (bandwidth_gb_s * 1e9))
''',
        # Confuses GB with GiB: divides by 2**30 bytes per "GB" (every answer 7% too long).
        "typical": _EX3 + '''\
    nbytes = tensor.numel() * tensor.element_size()
    return float(latency_s + nbytes / (bandwidth_gb_s * 2**30))
''',
        # Counts the underlying storage instead of the tensor's own elements (wrong for views).
        "storage": _EX3 + '''\
    nbytes = tensor.untyped_storage().nbytes() if tensor.device.type != "meta" else tensor.numel() * tensor.element_size()
    return float(latency_s + nbytes / (bandwidth_gb_s * 1e9))
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
    },
    "ex5-solution": {
        # Zeros of the visible model's shapes.
        "constant": _EX5 + '''\
    return [np.zeros((3, 5), np.float32), np.zeros(5, np.float32), np.zeros((5, 2), np.float32), np.zeros(2, np.float32)]
''',
        # The course's keras_weights: off-limits here.
        "helper": _EX5 + '''\
    return placement.keras_weights(model)
''',
        # Only the model's direct children: right for the visible flat Sequential, blind to nested ones.
        "visible_only": _EX5 + '''\
    weights = []
    for layer in model.children():
        if isinstance(layer, nn.Linear):
            weights.append(layer.weight.detach().cpu().numpy().T)
            if layer.bias is not None:
                weights.append(layer.bias.detach().cpu().numpy())
    return weights
''',
        # Copies PyTorch's weights as they are: forgets that a Keras kernel is the transpose of nn.Linear's weight.
        "typical": _EX5 + '''\
    weights = []
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            weights.append(layer.weight.detach().cpu().numpy())
            if layer.bias is not None:
                weights.append(layer.bias.detach().cpu().numpy())
    return weights
''',
        # Reshapes instead of transposing: the right shape, scrambled values.
        "reshape": _EX5 + '''\
    weights = []
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            weight = layer.weight.detach().cpu().numpy()
            weights.append(weight.reshape(weight.shape[1], weight.shape[0]))
            if layer.bias is not None:
                weights.append(layer.bias.detach().cpu().numpy())
    return weights
''',
    },
}
