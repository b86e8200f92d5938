"""Plausible wrong answers to lesson 04's exercises: each must lose exactly its own exercise's points."""

WRONG: dict[str, str] = {
    # Recurses correctly but rebuilds every sequence as a list: tuples and named tuples come back as lists.
    "ex1-solution": '''\
def to_device(batch, device, non_blocking: bool = False):
    """A copy of batch with every tensor moved to device; dicts, lists, tuples and named tuples keep their type."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {key: to_device(value, device, non_blocking) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [to_device(value, device, non_blocking) for value in batch]
    return batch
''',
    # Moves the model and the inputs, but not the data's labels: the classic "moved the model, not the data".
    "ex2-solution": '''\
def weighted_loss(model, batch, class_weights, device):
    """Mean class-weighted cross-entropy of model on batch {"inputs", "labels"}, computed on device."""
    model.to(device)
    logits = model(batch["inputs"].to(device))
    weights = torch.tensor(class_weights, device=device)
    return F.cross_entropy(logits, batch["labels"], weight=weights)
''',
    # Confuses GB with GiB: divides by 2**30 bytes per "GB" (every answer 7% too long).
    "ex3-solution": '''\
def predict_transfer_s(tensor: torch.Tensor, bandwidth_gb_s: float, latency_s: float = 0.0) -> float:
    """Seconds to copy tensor over a link of bandwidth_gb_s GB/s (1 GB = 10**9 bytes), plus latency_s."""
    nbytes = tensor.numel() * tensor.element_size()
    return float(latency_s + nbytes / (bandwidth_gb_s * 2**30))
''',
    # Reports the requested device as the actual one: blind to soft placement.
    "ex4-solution": '''\
def placement_report(requested: str, fn) -> dict:
    """Run fn() under tf.device(requested); report the requested and the actual device ("GPU:0") and if they differ."""
    with tf.device(requested):
        fn()
    spec = tf.DeviceSpec.from_string(requested)
    name = f"{spec.device_type.upper()}:{spec.device_index}"
    return {"requested": name, "actual": name, "soft_placed": False}
''',
    # Copies PyTorch's weights as they are: forgets that a Keras kernel is the transpose of nn.Linear's weight.
    "ex5-solution": '''\
def keras_weights_from_torch(model: nn.Module) -> list[np.ndarray]:
    """[kernel (in, out), bias, ...] of every nn.Linear in model, as numpy arrays, in Keras' layout."""
    weights = []
    for layer in model.modules():
        if isinstance(layer, nn.Linear):
            weights.append(layer.weight.detach().cpu().numpy())
            if layer.bias is not None:
                weights.append(layer.bias.detach().cpu().numpy())
    return weights
''',
}
