"""Plausible wrong answers to lesson 07's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed plausible value), 'helper' (the course's own helper, which off_limits blocks),
'visible_only' (right on the visible test's input only), 'typical' (the lesson's typical mistake), and others.
"""

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        "constant": '''\
def format_range(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Largest finite value, smallest normal and subnormal values, and machine epsilon of an IEEE-style format."""
    return {"max": 65504.0, "smallest_normal": 2.0**-14, "smallest_subnormal": 2.0**-24, "eps": 2.0**-10}
''',
        "helper": '''\
def format_range(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Largest finite value, smallest normal and subnormal values, and machine epsilon of an IEEE-style format."""
    from gpucourse import precision

    for facts in precision.format_table(precision.FORMATS):
        if (facts.exponent_bits, facts.mantissa_bits) == (exponent_bits, mantissa_bits):
            return {"max": facts.max, "smallest_normal": facts.smallest_normal,
                    "smallest_subnormal": facts.smallest_subnormal, "eps": facts.eps}
    raise ValueError("unknown format")
''',
        "visible_only": '''\
def format_range(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Largest finite value, smallest normal and subnormal values, and machine epsilon of an IEEE-style format."""
    import torch

    known = {(5, 10): torch.float16, (8, 7): torch.bfloat16}
    if (exponent_bits, mantissa_bits) in known:
        info = torch.finfo(known[exponent_bits, mantissa_bits])
        return {"max": info.max, "smallest_normal": info.smallest_normal,
                "smallest_subnormal": info.smallest_normal * info.eps, "eps": info.eps}
    bias = 2 ** (exponent_bits - 1)   # a guess for the rest
    return {"max": 2.0**bias, "smallest_normal": 2.0**-bias, "smallest_subnormal": 2.0**(-bias - mantissa_bits),
            "eps": 2.0**-mantissa_bits}
''',
        "typical": '''\
def format_range(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Largest finite value, smallest normal and subnormal values, and machine epsilon of an IEEE-style format."""
    bias = 2 ** (exponent_bits - 1) - 1
    eps = 2.0**-mantissa_bits
    smallest_normal = 2.0 ** (1 - bias)
    largest_exponent = 2**exponent_bits - 1 - bias  # the all-ones exponent field, as if it held numbers
    return {"max": (2.0 - eps) * 2.0**largest_exponent, "smallest_normal": smallest_normal,
            "smallest_subnormal": smallest_normal * eps, "eps": eps}
''',
        "no_subnormals": '''\
def format_range(exponent_bits: int, mantissa_bits: int) -> dict[str, float]:
    """Largest finite value, smallest normal and subnormal values, and machine epsilon of an IEEE-style format."""
    bias = 2 ** (exponent_bits - 1) - 1
    eps = 2.0**-mantissa_bits
    smallest_normal = 2.0 ** (1 - bias)
    return {"max": (2.0 - eps) * 2.0**bias, "smallest_normal": smallest_normal,
            "smallest_subnormal": smallest_normal, "eps": eps}
''',
    },
    "ex2-solution": {
        "constant": '''\
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
        for grad in grads:
            if grad is not None:
                grad.div_(self.scale)
        return True
''',
        "helper": '''\
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
        from gpucourse import precision

        present = [grad for grad in grads if grad is not None]
        for grad in present:
            grad.div_(self.scale)
        report = precision.gradient_cast_report(present, "float16")   # "does anything overflow?"
        if report.fraction("overflow") > 0:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
            self.skipped_steps += 1
            return False
        self.clean_steps += 1
        if self.clean_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_steps = 0
        return True
''',
        "visible_only": '''\
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
            if torch.isinf(grad).any():   # the visible test only ever uses inf
                found_inf = True
        if found_inf:
            self.scale *= self.backoff_factor
            self.skipped_steps += 1
            return False
        self.clean_steps += 1
        if self.clean_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_steps = 0
        return True
''',
        "typical": '''\
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
        "not_in_place": '''\
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
            grad = grad / self.scale
            if not torch.isfinite(grad).all():
                found_inf = True
        if found_inf:
            self.scale *= self.backoff_factor
            self.clean_steps = 0
            self.skipped_steps += 1
            return False
        self.clean_steps += 1
        if self.clean_steps == self.growth_interval:
            self.scale *= self.growth_factor
            self.clean_steps = 0
        return True
''',
    },
    "ex3-solution": {
        "constant": '''\
def autocast_dtypes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device_type: str,
                    dtype: torch.dtype) -> dict[str, torch.dtype]:
    """Output dtype of every leaf module, and of the cross-entropy loss ('loss'), when the model runs under autocast."""
    names = [name for name, module in model.named_modules() if next(module.children(), None) is None]
    low = torch.bfloat16 if device_type == "cpu" else torch.float16
    return {**{name: low for name in names}, "loss": torch.float32}
''',
        "helper": '''\
def autocast_dtypes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device_type: str,
                    dtype: torch.dtype) -> dict[str, torch.dtype]:
    """Output dtype of every leaf module, and of the cross-entropy loss ('loss'), when the model runs under autocast."""
    from gpucourse import precision

    found = {}
    names = {module: name for name, module in model.named_modules() if next(module.children(), None) is None}
    handles = [module.register_forward_hook(lambda m, i, o: found.__setitem__(names[m], o.dtype)) for module in names]
    try:
        precision.autocast_op_dtypes(lambda: found.__setitem__("loss", F.cross_entropy(model(x), y).dtype),
                                     device_type, dtype)
    finally:
        for handle in handles:
            handle.remove()
    return found
''',
        "visible_only": '''\
def autocast_dtypes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device_type: str,
                    dtype: torch.dtype) -> dict[str, torch.dtype]:
    """Output dtype of every leaf module, and of the cross-entropy loss ('loss'), when the model runs under autocast."""
    found: dict[str, torch.dtype] = {}
    for name, module in model.named_modules():
        if next(module.children(), None) is None:
            found[name] = dtype if isinstance(module, (nn.Linear, nn.ReLU)) else torch.float32
    found["loss"] = torch.float32
    return found
''',
        "typical": '''\
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
        "hooks_left": '''\
def autocast_dtypes(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device_type: str,
                    dtype: torch.dtype) -> dict[str, torch.dtype]:
    """Output dtype of every leaf module, and of the cross-entropy loss ('loss'), when the model runs under autocast."""
    found: dict[str, torch.dtype] = {}
    for name, module in model.named_modules():
        if next(module.children(), None) is None:
            def record(module, inputs, output, name=name):
                found[name] = output.dtype
            module.register_forward_hook(record)
    with torch.autocast(device_type=device_type, dtype=dtype):
        logits = model(x)
        found["loss"] = F.cross_entropy(logits, y).dtype
    return found
''',
        "fixed_dtype": '''\
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
    try:
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16 if device_type == "cpu" else torch.float16):
            logits = model(x)
            found["loss"] = F.cross_entropy(logits, y).dtype
    finally:
        for handle in handles:
            handle.remove()
    return found
''',
    },
    "ex4-solution": {
        "constant": '''\
def training_memory_bytes(params: int, activation_values: int, optimizer: str, mixed: bool) -> dict[str, int]:
    """Bytes of weights, gradients, optimizer state and saved activations for float32 or mixed-precision training."""
    if optimizer not in ("sgd", "momentum", "adam"):
        raise ValueError(f"unknown optimizer {optimizer!r}")
    if mixed:
        return {"weights": 6 * 10**6, "gradients": 2 * 10**6, "optimizer_state": 8 * 10**6, "activations": 2 * 10**7,
                "total": 36 * 10**6}
    return {"weights": 4 * 10**6, "gradients": 4 * 10**6, "optimizer_state": 8 * 10**6, "activations": 4 * 10**7,
            "total": 56 * 10**6}
''',
        "helper": '''\
def training_memory_bytes(params: int, activation_values: int, optimizer: str, mixed: bool) -> dict[str, int]:
    """Bytes of weights, gradients, optimizer state and saved activations for float32 or mixed-precision training."""
    import torch
    from gpucourse import precision

    if optimizer not in ("sgd", "momentum", "adam"):
        raise ValueError(f"unknown optimizer {optimizer!r}")
    weight = torch.nn.Linear(params, 1, bias=False)   # a model with the right number of parameters, measured
    mem = precision.tensor_memory(weight, None, activations=activation_values * (2 if mixed else 4))
    per = 2 if mixed else 4
    budget = {"weights": mem.weights + (2 * params if mixed else 0), "gradients": params * per,
              "optimizer_state": params * 4 * {"sgd": 0, "momentum": 1, "adam": 2}[optimizer],
              "activations": mem.activations}
    budget["total"] = sum(budget.values())
    return budget
''',
        "visible_only": '''\
def training_memory_bytes(params: int, activation_values: int, optimizer: str, mixed: bool) -> dict[str, int]:
    """Bytes of weights, gradients, optimizer state and saved activations for float32 or mixed-precision training."""
    if optimizer not in ("sgd", "momentum", "adam"):
        raise ValueError(f"unknown optimizer {optimizer!r}")
    half, full = 2, 4
    budget = {"weights": params * (half + full if mixed else full), "gradients": params * (half if mixed else full),
              "optimizer_state": params * full * 2,   # Adam's two moments, as in the visible test
              "activations": activation_values * (half if mixed else full)}
    budget["total"] = sum(budget.values())
    return budget
''',
        "typical": '''\
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
    },
    "ex5-solution": {
        "constant": '''\
def mixed_precision_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                         x: torch.Tensor, y: torch.Tensor, device_type: str, dtype: torch.dtype) -> float:
    """One training step with autocast and loss scaling; returns the loss as a float."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return 0.5
''',
        "helper": '''\
def mixed_precision_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                         x: torch.Tensor, y: torch.Tensor, device_type: str, dtype: torch.dtype) -> float:
    """One training step with autocast and loss scaling; returns the loss as a float."""
    from gpucourse import precision

    optimizer.zero_grad(set_to_none=True)
    losses = []
    precision.autocast_op_dtypes(lambda: losses.append(F.cross_entropy(model(x), y)), device_type, dtype)
    scaler.scale(losses[0]).backward()
    scaler.step(optimizer)
    scaler.update()
    return losses[0].item()
''',
        "visible_only": '''\
def mixed_precision_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                         x: torch.Tensor, y: torch.Tensor, device_type: str, dtype: torch.dtype) -> float:
    """One training step with autocast and loss scaling; returns the loss as a float."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    optimizer.step()   # fine while the scaler is disabled (bfloat16 on a CPU), wrong once it scales
    scaler.update()
    return loss.item()
''',
        "typical": '''\
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
        "returns_scaled_loss": '''\
def mixed_precision_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                         x: torch.Tensor, y: torch.Tensor, device_type: str, dtype: torch.dtype) -> float:
    """One training step with autocast and loss scaling; returns the loss as a float."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device_type, dtype=dtype):
        loss = F.cross_entropy(model(x), y)
    scaled = scaler.scale(loss)
    scaled.backward()
    scaler.step(optimizer)
    scaler.update()
    return scaled.item()
''',
        "fixed_dtype": '''\
def mixed_precision_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                         x: torch.Tensor, y: torch.Tensor, device_type: str, dtype: torch.dtype) -> float:
    """One training step with autocast and loss scaling; returns the loss as a float."""
    optimizer.zero_grad(set_to_none=True)
    with torch.autocast(device_type=device_type, dtype=torch.bfloat16 if device_type == "cpu" else torch.float16):
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
    },
    "ex6-solution": {
        "constant": '''\
def accumulated_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                     micro_batch_size: int) -> float:
    """One optimizer step on (x, y), with gradients accumulated over micro-batches; returns the batch's mean loss."""
    optimizer.zero_grad(set_to_none=True)
    optimizer.step()
    return 1.0
''',
        "helper": '''\
def accumulated_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                     micro_batch_size: int) -> float:
    """One optimizer step on (x, y), with gradients accumulated over micro-batches; returns the batch's mean loss."""
    from gpucourse import precision

    optimizer.zero_grad(set_to_none=True)
    loss = precision.accumulate_gradients(model, x, y, micro_batch_size)
    optimizer.step()
    return loss
''',
        "visible_only": '''\
def accumulated_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                     micro_batch_size: int) -> float:
    """One optimizer step on (x, y), with gradients accumulated over micro-batches; returns the batch's mean loss."""
    optimizer.zero_grad(set_to_none=True)
    starts = range(0, len(x), micro_batch_size)
    total = 0.0
    for start in starts:   # every micro-batch weighted 1/k: right only when they all have the same size
        loss = F.cross_entropy(model(x[start:start + micro_batch_size]), y[start:start + micro_batch_size]) / len(starts)
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total
''',
        "typical": '''\
def accumulated_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                     micro_batch_size: int) -> float:
    """One optimizer step on (x, y), with gradients accumulated over micro-batches; returns the batch's mean loss."""
    optimizer.zero_grad(set_to_none=True)
    total = 0.0
    for start in range(0, len(x), micro_batch_size):   # forgets to weight: the gradient is k times too large
        loss = F.cross_entropy(model(x[start:start + micro_batch_size]), y[start:start + micro_batch_size])
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total
''',
        "step_per_micro_batch": '''\
def accumulated_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                     micro_batch_size: int) -> float:
    """One optimizer step on (x, y), with gradients accumulated over micro-batches; returns the batch's mean loss."""
    total = 0.0
    for start in range(0, len(x), micro_batch_size):
        optimizer.zero_grad(set_to_none=True)
        xb, yb = x[start:start + micro_batch_size], y[start:start + micro_batch_size]
        loss = F.cross_entropy(model(xb), yb) * (len(xb) / len(x))
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total
''',
        "stale_gradients": '''\
def accumulated_step(model: nn.Module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor,
                     micro_batch_size: int) -> float:
    """One optimizer step on (x, y), with gradients accumulated over micro-batches; returns the batch's mean loss."""
    total = 0.0
    for start in range(0, len(x), micro_batch_size):
        xb, yb = x[start:start + micro_batch_size], y[start:start + micro_batch_size]
        loss = F.cross_entropy(model(xb), yb) * (len(xb) / len(x))
        loss.backward()
        total += loss.item()
    optimizer.step()
    return total
''',
    },
}
