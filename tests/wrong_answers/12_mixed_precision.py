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
    def __init__(self, dtype: torch.dtype, history_len: int = 16, margin: int = 0) -> None:
        self.dtype, self.history_len, self.margin = dtype, history_len, margin
        self.amax_history: list[float] = []

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
'''
_LAYER_HEAD = '''

class FP8Linear(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, scalings):
'''
_FORWARD_RIGHT = '''\
        x_scaling, w_scaling, grad_scaling = scalings
        qx, sx = x_scaling.quantize(x)
        qw, sw = w_scaling.quantize(weight)
        ctx.save_for_backward(qx, sx, qw, sw)
        ctx.grad_scaling = grad_scaling
        y = qx.float().reshape(-1, qx.shape[-1]) @ qw.float().T / (sx * sw)
        return y.reshape(*x.shape[:-1], weight.shape[0])
'''
_BACKWARD_HEAD = '''
    @staticmethod
    def backward(ctx, grad_y):
'''
_BACKWARD_RIGHT = '''\
        qx, sx, qw, sw = ctx.saved_tensors
        qg, sg = ctx.grad_scaling.quantize(grad_y)
        g = qg.float().reshape(-1, qg.shape[-1])
        grad_x = (g @ qw.float() / (sg * sw)).reshape(qx.shape)
        grad_w = g.T @ qx.float().reshape(-1, qx.shape[-1]) / (sg * sx)
        return grad_x, grad_w, None
'''


def _quantize(body: str) -> str:
    """The exercise-2 cell with quantize's body replaced (indented by 8) and the right FP8Linear."""
    return _EX2_CLASS + body + _LAYER_HEAD + _FORWARD_RIGHT + _BACKWARD_HEAD + _BACKWARD_RIGHT


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
_CAST = "        q = (x.detach().float() * scale).clamp(-fmt_max, fmt_max).to(self.dtype)\n"


def _layer(forward: str = _FORWARD_RIGHT, backward: str = _BACKWARD_RIGHT) -> str:
    """The exercise-2 cell with the right quantize and FP8Linear's forward or backward body replaced (indented by 8)."""
    return _EX2_CLASS + _RIGHT_SCALE + _CAST + _RETURN + _LAYER_HEAD + forward + _BACKWARD_HEAD + backward


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
        # Review v3r1 (ex2_w1), in the layer: quantizes only to feed the histories, multiplies the exact inputs.
        "r1_exact_product": _layer(forward='''\
        x_scaling, w_scaling, grad_scaling = scalings
        x_scaling.quantize(x)
        w_scaling.quantize(weight)
        ctx.save_for_backward(x, weight)
        ctx.grad_scaling = grad_scaling
        return x.float() @ weight.float().T
''', backward='''\
        x, weight = ctx.saved_tensors
        ctx.grad_scaling.quantize(grad_y)
        return grad_y @ weight.float(), grad_y.reshape(-1, grad_y.shape[-1]).T @ x.float().reshape(-1, x.shape[-1]), None
'''),
        # Review v3r1 (ex2_w2): just-in-time scaling of x inside the layer, ignoring the delayed scale (no saturation).
        "r1_current_scaling": _layer(forward='''\
        x_scaling, w_scaling, grad_scaling = scalings
        x_scaling.quantize(x)
        fmt_max = torch.finfo(x_scaling.dtype).max
        sx = torch.tensor(fmt_max / float(x.abs().max()), dtype=torch.float32)
        qx = (x.detach().float() * sx).clamp(-fmt_max, fmt_max).to(x_scaling.dtype)
        qw, sw = w_scaling.quantize(weight)
        ctx.save_for_backward(qx, sx, qw, sw)
        ctx.grad_scaling = grad_scaling
        y = qx.float().reshape(-1, qx.shape[-1]) @ qw.float().T / (sx * sw)
        return y.reshape(*x.shape[:-1], weight.shape[0])
'''),
        # Review v3r1 (ex2_w3): quantizes x twice per call; the history double-counts x, the second scale is current.
        "r1_quantize_twice": _layer(forward='''\
        x_scaling, w_scaling, grad_scaling = scalings
        x_scaling.quantize(x)
        qx, sx = x_scaling.quantize(x)
        qw, sw = w_scaling.quantize(weight)
        ctx.save_for_backward(qx, sx, qw, sw)
        ctx.grad_scaling = grad_scaling
        y = qx.float().reshape(-1, qx.shape[-1]) @ qw.float().T / (sx * sw)
        return y.reshape(*x.shape[:-1], weight.shape[0])
'''),
        # Review v3r1 (ex2_w9): dequantizes first, then multiplies bfloat16-rounded values, not the FP8 values.
        "r1_bfloat16_dequantized": _layer(forward='''\
        x_scaling, w_scaling, grad_scaling = scalings
        qx, sx = x_scaling.quantize(x)
        qw, sw = w_scaling.quantize(weight)
        ctx.save_for_backward(qx, sx, qw, sw)
        ctx.grad_scaling = grad_scaling
        dx = (qx.float() / sx).to(torch.bfloat16).float().reshape(-1, qx.shape[-1])
        y = dx @ (qw.float() / sw).to(torch.bfloat16).float().T
        return y.reshape(*x.shape[:-1], weight.shape[0])
'''),
        # Right for float32 inputs; with bfloat16 inputs it multiplies and returns bfloat16.
        "product_in_input_dtype": _layer(forward='''\
        x_scaling, w_scaling, grad_scaling = scalings
        qx, sx = x_scaling.quantize(x)
        qw, sw = w_scaling.quantize(weight)
        ctx.save_for_backward(qx, sx, qw, sw)
        ctx.grad_scaling = grad_scaling
        y = qx.to(x.dtype).reshape(-1, qx.shape[-1]) @ qw.to(x.dtype).T / (sx * sw).to(x.dtype)
        return y.reshape(*x.shape[:-1], weight.shape[0])
'''),
        # Review v3r3 (e2_m2x): 2 * margin for 2**margin (the same at margins 1 and 2), margin 0 guarded.
        "r3_margin_2x": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = float(x.detach().abs().max())
        known = max(self.amax_history) if self.amax_history else amax
        scale = fmt_max / known if known > 0 else 1.0
        if self.margin:
            scale = scale / (2 * self.margin)
''' + _CAST + _RETURN),
        # Review v3r3 (e2_msq): margin ** 2 for 2**margin (the same at margin 2).
        "r3_margin_squared": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = float(x.detach().abs().max())
        known = max(self.amax_history) if self.amax_history else amax
        scale = fmt_max / known / max(1, self.margin**2) if known > 0 else 1.0
''' + _CAST + _RETURN),
        # Review v3r3 (e2_mm2d): torch.mm, right for 2-D activations only; a transformer's (B, T, K) fails.
        "r3_2d_only": _layer(forward='''\
        x_scaling, w_scaling, grad_scaling = scalings
        qx, sx = x_scaling.quantize(x)
        qw, sw = w_scaling.quantize(weight)
        ctx.save_for_backward(qx, sx, qw, sw)
        ctx.grad_scaling = grad_scaling
        return torch.mm(qx.float(), qw.float().T) / (sx * sw)
'''),
        # The backward multiplies the incoming gradient in float32: only the forward pass is FP8.
        "gradient_not_quantized": _layer(backward='''\
        qx, sx, qw, sw = ctx.saved_tensors
        g = grad_y.float().reshape(-1, grad_y.shape[-1])
        grad_x = (g @ qw.float() / sw).reshape(qx.shape)
        grad_w = g.T @ qx.float().reshape(-1, qx.shape[-1]) / sx
        return grad_x, grad_w, None
'''),
        # The gradient's history is fed, but its scale comes from its own amax: a gradient spike never saturates.
        "gradient_current_scaling": _layer(backward='''\
        qx, sx, qw, sw = ctx.saved_tensors
        ctx.grad_scaling.quantize(grad_y)
        fmt_max = torch.finfo(ctx.grad_scaling.dtype).max
        sg = fmt_max / float(grad_y.abs().max())
        qg = (grad_y.float() * sg).clamp(-fmt_max, fmt_max).to(ctx.grad_scaling.dtype)
        g = qg.float().reshape(-1, qg.shape[-1])
        grad_x = (g @ qw.float() / (sg * sw)).reshape(qx.shape)
        grad_w = g.T @ qx.float().reshape(-1, qx.shape[-1]) / (sg * sx)
        return grad_x, grad_w, None
'''),
        # Keeps the original x for the weight gradient: not an FP8 matmul, and 4x the saved bytes.
        "original_x_in_backward": _layer(forward='''\
        x_scaling, w_scaling, grad_scaling = scalings
        qx, sx = x_scaling.quantize(x)
        qw, sw = w_scaling.quantize(weight)
        ctx.save_for_backward(x, qw, sw)
        ctx.grad_scaling = grad_scaling
        y = qx.float().reshape(-1, qx.shape[-1]) @ qw.float().T / (sx * sw)
        return y.reshape(*x.shape[:-1], weight.shape[0])
''', backward='''\
        x, qw, sw = ctx.saved_tensors
        qg, sg = ctx.grad_scaling.quantize(grad_y)
        g = qg.float().reshape(-1, qg.shape[-1])
        grad_x = (g @ qw.float() / (sg * sw)).reshape(x.shape)
        grad_w = g.T @ x.float().reshape(-1, x.shape[-1]) / sg
        return grad_x, grad_w, None
'''),
        # The gradient quantized with x's scaling (E4M3, x's history), the third scaling never used.
        "gradient_with_x_scaling": _layer(forward='''\
        x_scaling, w_scaling, grad_scaling = scalings
        qx, sx = x_scaling.quantize(x)
        qw, sw = w_scaling.quantize(weight)
        ctx.save_for_backward(qx, sx, qw, sw)
        ctx.grad_scaling = x_scaling
        y = qx.float().reshape(-1, qx.shape[-1]) @ qw.float().T / (sx * sw)
        return y.reshape(*x.shape[:-1], weight.shape[0])
'''),
        "zeros_give_nan": _quantize('''\
        fmt_max = torch.finfo(self.dtype).max
        amax = float(x.detach().abs().max())
        known = max(self.amax_history) if self.amax_history else amax
        scale = fmt_max / max(known, 1e-45) / 2.0**self.margin
''' + _CAST + _RETURN),
        # Review v3r5 (minor 2): x x scale computed in x's dtype, so a bfloat16 product is rounded before the FP8 cast.
        "r5_product_in_x_dtype": _quantize(_RIGHT_SCALE + _CAST.replace("x.detach().float() * scale",
                                                                        "x.detach() * scale") + _RETURN),
        # Review v3r5 (minor 3): the x and weight scalings swapped (each tensor's history and margin are another's).
        "r5_swapped_scalings": _layer(forward=_FORWARD_RIGHT.replace("x_scaling, w_scaling, grad_scaling = scalings",
                                                                     "w_scaling, x_scaling, grad_scaling = scalings")),
    },
}
assert "x.detach() * scale" in WRONG["ex2-solution"]["r5_product_in_x_dtype"]
assert "w_scaling, x_scaling, grad_scaling" in WRONG["ex2-solution"]["r5_swapped_scalings"]

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
