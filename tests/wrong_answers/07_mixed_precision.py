"""Plausible wrong answers to lesson 07's exercises: each must lose exactly its own exercise's points."""

WRONG: dict[str, str] = {
    # Forgets that the all-ones exponent is reserved for inf and NaN: float16's "max" comes out as 131008.
    "ex1-solution": '''\
def format_range(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Largest finite value, smallest normal and subnormal values, and machine epsilon of an IEEE-style format."""
    bias = 2 ** (exponent_bits - 1) - 1
    eps = 2.0**-mantissa_bits
    smallest_normal = 2.0 ** (1 - bias)
    largest_exponent = 2**exponent_bits - 1 - bias  # the all-ones exponent field, as if it held numbers
    return {"max": (2.0 - eps) * 2.0**largest_exponent, "smallest_normal": smallest_normal,
            "smallest_subnormal": smallest_normal * eps, "eps": eps}
''',
    # Does not restart the count of clean steps after an overflow, so the scale grows too early after a back-off.
    "ex2-solution": '''\
class DynamicLossScaler:
    """Dynamic loss scaling: scale the loss up; skip the step and back off on inf/NaN; grow after clean steps."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000) -> None:
        if not (init_scale > 0 and growth_factor > 1 and 0 < backoff_factor < 1 and growth_interval >= 1):
            raise ValueError("need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1, growth_interval >= 1")
        self.scale = float(init_scale)
        self.growth_factor, self.backoff_factor = float(growth_factor), float(backoff_factor)
        self.growth_interval = int(growth_interval)
        self.clean_steps = 0    # steps without inf/NaN since the scale last changed
        self.skipped_steps = 0  # optimizer steps skipped because of an overflow

    def scale_loss(self, loss: torch.Tensor) -> torch.Tensor:
        """The loss multiplied by the current scale: call .backward() on this."""
        return loss * self.scale

    def unscale_and_update(self, grads: list) -> bool:
        """Divide the gradients by the scale in place; update the scale; return True if the step may be taken."""
        found_inf = False
        for grad in grads:
            if grad is None:
                continue
            grad.div_(self.scale)
            if not torch.isfinite(grad).all():
                found_inf = True
        if found_inf:
            self.scale *= self.backoff_factor
            self.skipped_steps += 1
            return False
        self.clean_steps += 1
        if self.clean_steps >= self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_steps = 0
        return True
''',
    # "Mixed precision" as model.half(): casts the model and input to 16 bits instead of using autocast, so it
    # reports the loss (and on a GPU softmax and layer norm) in 16 bits.
    "ex3-solution": '''\
def autocast_dtypes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device_type: str,
                    dtype: torch.dtype) -> dict[str, torch.dtype]:
    """Output dtype of every leaf module, and of the cross-entropy loss ('loss'), when the model runs under autocast."""
    found: dict[str, torch.dtype] = {}
    handles = []
    for name, module in model.named_modules():
        if next(module.children(), None) is None:
            def record(module, inputs, output, name=name):
                found[name] = output.dtype
            handles.append(module.register_forward_hook(record))
    model.to(dtype)
    try:
        logits = model(x.to(dtype))
        found["loss"] = F.cross_entropy(logits, y).dtype
    finally:
        model.to(torch.float32)
        for handle in handles:
            handle.remove()
    return found
''',
    # Leaves the float32 master weights out of the mixed-precision budget (2 bytes per weight instead of 2 + 4).
    "ex4-solution": '''\
def training_memory_bytes(params: int, activation_values: int, optimizer: str, mixed: bool) -> dict[str, int]:
    """Bytes of weights, gradients, optimizer state and saved activations for float32 or mixed-precision training."""
    state_tensors = {"sgd": 0, "momentum": 1, "adam": 2}
    if optimizer not in state_tensors:
        raise ValueError(f"optimizer must be one of {sorted(state_tensors)}, got {optimizer!r}")
    per_value = 2 if mixed else 4
    budget = {
        "weights": params * per_value,
        "gradients": params * per_value,
        "optimizer_state": params * 4 * state_tensors[optimizer],
        "activations": activation_values * per_value,
    }
    budget["total"] = sum(budget.values())
    return budget
''',
    # Scales the loss and steps through the scaler, but never enables autocast: this is float32 training.
    "ex5-solution": '''\
def mixed_precision_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                         x: torch.Tensor, y: torch.Tensor, device_type: str, dtype: torch.dtype) -> float:
    """One training step with autocast and loss scaling; returns the loss as a float."""
    optimizer.zero_grad(set_to_none=True)
    loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
}
