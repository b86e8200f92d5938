"""Plausible wrong answers to lesson 12's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed plausible value), 'helper' (the course's own helper, which off_limits blocks),
'visible_only' (right on the visible test's input only), 'typical' (the lesson's typical mistake), and others.
"""

from wrong_answers.tampering import with_tampering

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
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
    "ex2-solution": {
        "constant": '''\
def to_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast x to the FP8 format dtype with one scale for the whole tensor; return (fp8 tensor, float32 scale)."""
    return x.to(dtype), torch.tensor(1.0)   # no scaling at all

def from_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float32 values an FP8 tensor q with scale `scale` stands for."""
    return q.float() / scale
''',
        "helper": '''\
def to_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast x to the FP8 format dtype with one scale for the whole tensor; return (fp8 tensor, float32 scale)."""
    from gpucourse import precision

    return precision.scaled_fp8(x, dtype)


def from_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float32 values an FP8 tensor q with scale `scale` stands for."""
    from gpucourse import precision

    return precision.unscale_fp8(q, scale)
''',
        "visible_only": '''\
def to_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast x to the FP8 format dtype with one scale for the whole tensor; return (fp8 tensor, float32 scale)."""
    scale = 448.0 / x.abs().max()                  # E4M3's largest value, whatever dtype asks for
    return (x * scale).to(torch.float8_e4m3fn), scale

def from_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float32 values an FP8 tensor q with scale `scale` stands for."""
    return q.float() / scale
''',
        "typical": '''\
def to_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast x to the FP8 format dtype with one scale for the whole tensor; return (fp8 tensor, float32 scale)."""
    amax = x.max()                                 # the largest value, not the largest magnitude
    scale = torch.finfo(dtype).max / amax
    return (x * scale).to(dtype), scale

def from_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float32 values an FP8 tensor q with scale `scale` stands for."""
    return q.float() / scale
''',
        "inverted_scale": '''\
def to_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast x to the FP8 format dtype with one scale for the whole tensor; return (fp8 tensor, float32 scale)."""
    scale = x.abs().max() / torch.finfo(dtype).max  # upside down
    return (x * scale).to(dtype), scale

def from_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float32 values an FP8 tensor q with scale `scale` stands for."""
    return q.float() / scale
''',
        "zeros_give_nan": '''\
def to_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Cast x to the FP8 format dtype with one scale for the whole tensor; return (fp8 tensor, float32 scale)."""
    scale = torch.finfo(dtype).max / x.abs().max()  # infinite for a tensor of zeros
    return (x * scale).to(dtype), scale

def from_fp8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    """The float32 values an FP8 tensor q with scale `scale` stands for."""
    return q.float() / scale
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
        "hardcoded_device": '''\
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
        with torch.autocast(device_type=x.device.type, dtype=dtype):  # the data's device, not the one given
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
        "hardcoded_device": '''\
from torch import autocast


def mixed_precision_step(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                         x: torch.Tensor, y: torch.Tensor, device_type: str, dtype: torch.dtype) -> float:
    """One training step with autocast and loss scaling; returns the loss as a float."""
    optimizer.zero_grad(set_to_none=True)
    with autocast("cpu", dtype=dtype):  # right on a CPU grader only
        loss = F.cross_entropy(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()
    return loss.item()
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
