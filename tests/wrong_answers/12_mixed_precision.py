"""Plausible wrong answers to lesson 12's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed plausible value), 'helper' (the course's own helper, which off_limits blocks),
'visible_only' (right on the visible test's input only), 'typical' (the lesson's typical mistake), and others.
"""

from wrong_answers.tampering import with_tampering

_TRAIN = '''\
def train(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler, batches, loss_fn,
          device_type: str, dtype: torch.dtype, max_norm: float = 1.0) -> list[float]:
    """Train `model` on `batches` (pairs x, y) in mixed precision; return the loss of each step as a float."""
'''


def _loop(step: str, before: str = "") -> str:
    """A train() whose loop body is `step` (indented by 8), with `before` run once before the loop."""
    return _TRAIN + before + "    losses = []\n    for x, y in batches:\n" + step + "        losses.append(loss.item())\n    return losses\n"


_FORWARD = '''\
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
'''
_CLIP = "        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)\n"

_EX2_CLASS = '''\
class DelayedScaling:
    """Per-tensor FP8 scaling from an amax history, as in Transformer Engine's delayed scaling."""

    def __init__(self, dtype: torch.dtype, history_len: int = 16, margin: int = 0) -> None:
        self.dtype, self.history_len, self.margin = dtype, history_len, margin
        self.amax_history: list[float] = []

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
'''
_MATMUL = '''

def fp8_matmul(a, b, a_scaling, b_scaling):
    qa, scale_a = a_scaling.quantize(a)
    qb, scale_b = b_scaling.quantize(b)
    return (qa.float() @ qb.float()) / (scale_a * scale_b)
'''


def _quantize(body: str) -> str:
    """The exercise-2 cell with quantize's body replaced (indented by 8) and the right fp8_matmul."""
    return _EX2_CLASS + body + _MATMUL


_RIGHT_SCALE = '''\
        fmt_max = torch.finfo(self.dtype).max
        amax = float(x.detach().abs().max())
        known = max(self.amax_history) if self.amax_history else amax
        scale = fmt_max / known / 2.0**self.margin if known > 0 else 1.0
'''
_RETURN = '''\
        self.amax_history = (self.amax_history + [amax])[-self.history_len:]
        return q, torch.tensor(scale, dtype=torch.float32)
'''
_CAST = "        q = (x.float() * scale).clamp(-fmt_max, fmt_max).to(self.dtype)\n"


def _matmul(body: str) -> str:
    """The exercise-2 cell with the right quantize and fp8_matmul's body replaced (indented by 4)."""
    return (_EX2_CLASS + _RIGHT_SCALE + _CAST + _RETURN
            + "\n\ndef fp8_matmul(a, b, a_scaling, b_scaling):\n" + body)


WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        # Evaluates the model on every batch and trains nothing.
        "constant": _TRAIN + '''\
    with torch.autocast(device_type=device_type, dtype=dtype):
        return [float(loss_fn(model(x), y)) for x, y in batches]
''',
        # The course's op recorder runs the forward pass under autocast: off limits.
        "helper": _loop('''\
        from gpucourse import precision

        optimizer.zero_grad(set_to_none=True)
        found = []
        precision.autocast_op_dtypes(lambda: found.append(loss_fn(model(x), y)), device_type, dtype)
        loss = found[0]
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
''' + _CLIP + '''\
        scaler.step(optimizer)
        scaler.update()
'''),
        # Right where no scaler is needed (bfloat16), as in the visible tests: no scaler at all.
        "visible_only": _loop(_FORWARD + "        loss.backward()\n" + _CLIP + "        optimizer.step()\n"),
        # The most common AMP bug: clipping the scaled gradients, then unscaling them.
        "typical": _loop(_FORWARD + "        scaler.scale(loss).backward()\n" + _CLIP + '''\
        scaler.unscale_(optimizer)
        scaler.step(optimizer)
        scaler.update()
'''),
        "update_missing": _loop(_FORWARD + "        scaler.scale(loss).backward()\n        scaler.unscale_(optimizer)\n"
                                + _CLIP + "        scaler.step(optimizer)\n"),
        "update_before_unscale": _loop(_FORWARD + "        scaler.scale(loss).backward()\n        scaler.update()\n"
                                       "        scaler.unscale_(optimizer)\n" + _CLIP + "        scaler.step(optimizer)\n"),
        "update_before_step": _loop(_FORWARD + "        scaler.scale(loss).backward()\n        scaler.unscale_(optimizer)\n"
                                    + _CLIP + "        scaler.update()\n        scaler.step(optimizer)\n"),
        # Unscales and clips, but steps the optimizer directly: an overflowing step is applied.
        "no_skip_on_overflow": _loop(_FORWARD + "        scaler.scale(loss).backward()\n        scaler.unscale_(optimizer)\n"
                                     + _CLIP + "        optimizer.step()\n        scaler.update()\n"),
        "model_half": _loop(_FORWARD + "        scaler.scale(loss).backward()\n        scaler.unscale_(optimizer)\n" + _CLIP
                            + "        scaler.step(optimizer)\n        scaler.update()\n", before="    model.half()\n"),
        "loss_outside_autocast": _loop('''\
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device_type, dtype=dtype):
            logits = model(x)
        loss = loss_fn(logits, y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
''' + _CLIP + "        scaler.step(optimizer)\n        scaler.update()\n"),
        # zero_grad after backward: every step applies a zero gradient.
        "zero_grad_after_backward": _loop('''\
        with torch.autocast(device_type=device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        optimizer.zero_grad()
        scaler.unscale_(optimizer)
''' + _CLIP + "        scaler.step(optimizer)\n        scaler.update()\n"),
        "no_zero_grad": _loop('''\
        with torch.autocast(device_type=device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
''' + _CLIP + "        scaler.step(optimizer)\n        scaler.update()\n"),
        "backward_inside_autocast_scaled_loss_returned": _loop('''\
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device_type, dtype=dtype):
            loss = scaler.scale(loss_fn(model(x), y))
            loss.backward()
        scaler.unscale_(optimizer)
''' + _CLIP + "        scaler.step(optimizer)\n        scaler.update()\n"),
        "hardcoded_device": _loop('''\
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cpu", dtype=dtype):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
''' + _CLIP + "        scaler.step(optimizer)\n        scaler.update()\n"),
        # Review v3r1 (ex1_w10): skips a step by hand when the LOSS is not finite, otherwise steps the optimizer
        # directly. In float16 on a GPU the overflow comes in backward with a finite loss: inf gradients are applied.
        "r1_loss_check_only": _TRAIN + '''\
    losses = []
    for x, y in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
        losses.append(loss.item())
        if not torch.isfinite(loss):
            if scaler.is_enabled():
                scaler.update(scaler.get_scale() * scaler.get_backoff_factor())
            continue
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        optimizer.step()
        scaler.update()
    return losses
''',
        # Review v3r1 (h/ex1_w1): the right calls, but backward and the scaler's steps inside the autocast block.
        "r1_backward_inside_autocast": _loop('''\
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device_type, dtype=dtype):
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)
            torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(optimizer)
            scaler.update()
'''),
    },
    "ex2-solution": {
        # A plain cast: scale 1 (through a module-level function, the one the tampering kinds go into).
        "constant": "def plain_cast(x, dtype):\n    return x.float().to(dtype)\n\n\n" + _quantize('''\
        amax = float(x.detach().abs().max())
        scale = 1.0
        q = plain_cast(x, self.dtype)
''' + _RETURN),
        # The course's just-in-time scaled cast: off limits (and no history).
        "helper": _quantize('''\
        from gpucourse import precision

        q, scale = precision.scaled_fp8(x, self.dtype)
        self.amax_history = (self.amax_history + [float(x.abs().max())])[-self.history_len:]
        return q, scale
'''),
        # Review v3r2 (ex2_w2): the scale held in x's dtype: inf in float16 at gradient sizes (57344 / 1e-3).
        "r2_scale_in_x_dtype": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = x.abs().max()
        known = max(self.amax_history) if self.amax_history else float(amax)
        scale = fmt_max / known / 2.0**self.margin if known > 0 else 1.0
        q = (x * scale).clamp(-fmt_max, fmt_max).to(self.dtype)
        self.amax_history = (self.amax_history + [float(amax)])[-self.history_len:]
        return q, torch.tensor(scale, dtype=x.dtype)
'''),
        # Review v3r2, the learner's form of it: the first call's scale is a tensor op in x's dtype.
        "r2_first_scale_tensor_op": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = x.detach().abs().max()
        if self.amax_history:
            known = max(self.amax_history)
            scale = torch.tensor(fmt_max / known / 2.0**self.margin if known > 0 else 1.0)
        else:
            scale = fmt_max / amax / 2.0**self.margin if amax > 0 else torch.tensor(1.0)
        q = (x * scale).clamp(-fmt_max, fmt_max).to(self.dtype)
        self.amax_history = (self.amax_history + [float(amax)])[-self.history_len:]
        return q, scale.float()
'''),
        # The amax of the current tensor only: right on the visible first call, no delay, a spike never saturates.
        "visible_only": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = float(x.detach().abs().max())
        scale = fmt_max / amax / 2.0**self.margin if amax > 0 else 1.0
''' + _CAST + _RETURN),
        # E4M3's maximum for every format.
        "typical": _quantize('''\
        fmt_max = 448.0
        amax = float(x.detach().abs().max())
        known = max(self.amax_history) if self.amax_history else amax
        scale = fmt_max / known / 2.0**self.margin if known > 0 else 1.0
''' + _CAST + _RETURN),
        "one_scale_per_row": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = float(x.detach().abs().max())
        rows = x.detach().abs().amax(dim=-1, keepdim=True).float().clamp_min(1e-30)
        scale = fmt_max / rows
        q = (x.float() * scale).clamp(-fmt_max, fmt_max).to(self.dtype)
        self.amax_history = (self.amax_history + [amax])[-self.history_len:]
        return q, scale
'''),
        # No clamp: torch 2.13 saturates E4M3 itself, but E5M2 has inf.
        "no_saturation": _quantize(_RIGHT_SCALE + "        q = (x.float() * scale).to(self.dtype)\n" + _RETURN),
        # The history includes the current tensor before the scale is computed.
        "history_updated_first": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = float(x.detach().abs().max())
        self.amax_history = (self.amax_history + [amax])[-self.history_len:]
        known = max(self.amax_history)
        scale = fmt_max / known / 2.0**self.margin if known > 0 else 1.0
        q = (x.float() * scale).clamp(-fmt_max, fmt_max).to(self.dtype)
        return q, torch.tensor(scale, dtype=torch.float32)
'''),
        "history_never_trimmed": _quantize(_RIGHT_SCALE + _CAST + '''\
        self.amax_history = self.amax_history + [amax]
        return q, torch.tensor(scale, dtype=torch.float32)
'''),
        "margin_ignored": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = float(x.detach().abs().max())
        known = max(self.amax_history) if self.amax_history else amax
        scale = fmt_max / known if known > 0 else 1.0
''' + _CAST + _RETURN),
        # Review v3r1 (ex2_w1): quantizes only to feed the histories, returns the exact float32 product.
        "r1_exact_product": _matmul("    a_scaling.quantize(a)\n    b_scaling.quantize(b)\n    return a @ b\n"),
        # Review v3r1 (ex2_w2): just-in-time scaling inside the matmul, ignoring the delayed scale (no saturation).
        "r1_current_scaling": _matmul('''\
    a_scaling.quantize(a)
    b_scaling.quantize(b)
    fa = torch.finfo(a_scaling.dtype).max / a.abs().max()
    fb = torch.finfo(b_scaling.dtype).max / b.abs().max()
    qa, qb = (a * fa).to(a_scaling.dtype), (b * fb).to(b_scaling.dtype)
    return (qa.float() @ qb.float()) / (fa * fb)
'''),
        # Review v3r1 (ex2_w3): quantizes a twice per call; the history double-counts a, the second scale is current.
        "r1_quantize_twice": _matmul('''\
    a_scaling.quantize(a)
    qa, sa = a_scaling.quantize(a)
    qb, sb = b_scaling.quantize(b)
    return (qa.float() @ qb.float()) / (sa * sb)
'''),
        # Review v3r1 (ex2_w9): dequantizes first, then multiplies bfloat16-rounded values, not the FP8 values.
        "r1_bfloat16_dequantized": _matmul('''\
    qa, sa = a_scaling.quantize(a)
    qb, sb = b_scaling.quantize(b)
    return (qa.float() / sa).to(torch.bfloat16).float() @ (qb.float() / sb).to(torch.bfloat16).float()
'''),
        # Right for float32 inputs; with bfloat16 inputs it multiplies and returns bfloat16.
        "product_in_input_dtype": _matmul('''\
    qa, sa = a_scaling.quantize(a)
    qb, sb = b_scaling.quantize(b)
    return (qa.to(a.dtype) @ qb.to(b.dtype)) / (sa * sb)
'''),
        "zeros_give_nan": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = float(x.detach().abs().max())
        known = max(self.amax_history) if self.amax_history else amax
        scale = fmt_max / max(known, 1e-45) / 2.0**self.margin
''' + _CAST + _RETURN),
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
