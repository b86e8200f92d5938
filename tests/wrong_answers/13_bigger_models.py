"""Plausible wrong answers to lesson 13's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed plausible value), 'helper' (the course's own helper, which off_limits blocks),
'visible_only' (right on the visible test's input only), 'typical' (the lesson's typical mistake), and others.
"""

from notebook_utils import cell_by_grade_id, load, solution_path, source
from wrong_answers.tampering import with_tampering

_EX1 = '''\
def activation_bytes(s: int, b: int, h: int, a: int, bytes_per_value: int = 2, mask_bytes: int = 1,
                     dropout: bool = True, ffn: int = 4) -> int:
    """Bytes one TransformerLayer keeps for its backward pass, its input included, LayerNorm's statistics not."""
'''
_EX2 = '''\
def fit_under_cap(model: nn.Module, x: torch.Tensor, cap: int) -> torch.Tensor:
    """The stack's output, with checkpointing chosen so that a training step's peak fits in `cap` at the least recomputation."""
'''
_EX3 = '''\
def largest_micro_batch(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> int:
    """The largest m in [1, len(x)] whose training step on x[:m], y[:m] raises no torch.OutOfMemoryError (0 if none)."""
'''

# Ex2: the model answer's search (each plan's training step tried under the cap, cheapest first), with `{run}` (how a
# layer runs in a mode) and `{order}` (the plans, as (n_full, n_selective, n_plain) -> the modes in layer order)
_EX2_SEARCH = '''\
    b, s, h = x.shape
    layers, parameters = list(model.layers), list(model.parameters())

{run}
    def forward(plan):
        out = x
        for layer, mode in zip(layers, plan):
            out = run(layer, out, mode)
        return out

    def fits(plan):
        try:
            with memory.MemoryCap(cap):
                out = forward(plan)
                torch.autograd.grad(out.pow(2).mean(), parameters)
            return True
        except torch.OutOfMemoryError:
            return False

    flops = {{"plain": 0, "selective": 4 * b * s * s * h, "full": 24 * b * s * h * h + 4 * b * s * s * h}}
    depth = len(layers)
    plans = [{order} for n_full in range(depth + 1) for n_selective in range(depth + 1 - n_full)
             for n_plain in [depth - n_full - n_selective]]
    for plan in sorted(plans, key=lambda plan: sum(flops[mode] for mode in plan)):
        if fits(plan):
            return forward(plan)
    raise torch.OutOfMemoryError("no plan fits")
'''
_FULL_FIRST = '["full"] * n_full + ["selective"] * n_selective + ["plain"] * n_plain'
_FULL_LAST = '["plain"] * n_plain + ["selective"] * n_selective + ["full"] * n_full'
_RUN = '''\
    def run(layer, inputs, mode):
        if mode == "full":
            return checkpoint(layer, inputs, use_reentrant={reentrant})
        if mode == "selective":
            return layer(inputs, core=lambda q, k, v: checkpoint(layer.core, q, k, v, use_reentrant={reentrant}))
        return layer(inputs)
'''

# Ex2, v3r0's answer: the plan chosen by the bytes the forward pass keeps (`{kept}`: per layer and mode), not by the
# step's peak: it fits the kept bytes, then the backward pass runs out of memory
_EX2_KEPT_SEARCH = '''\
    b, s, h = x.shape
    layers = list(model.layers)

{run}
{kept}
    flops = {{"plain": 0, "selective": 4 * b * s * s * h, "full": 24 * b * s * h * h + 4 * b * s * s * h}}
    output_bytes = x.numel() * x.element_size()
    best = None
    for n_full in range(len(layers) + 1):
        for n_selective in range(len(layers) + 1 - n_full):
            plan = ["full"] * n_full + ["selective"] * n_selective + ["plain"] * (len(layers) - n_full - n_selective)
            total = len(layers) * output_bytes + sum(kept[mode] for mode in plan)
            cost = sum(flops[mode] for mode in plan)
            if total <= cap and (best is None or cost < best[0]):
                best = (cost, plan)
    if best is None:
        raise torch.OutOfMemoryError(f"even full checkpointing keeps more than {{cap:,}} bytes")
    for layer, mode in zip(layers, best[1]):
        x = run(layer, x, mode)
    return x
'''
_MEASURED = '''\
    kept = {}
    for mode in ("plain", "selective", "full"):
        with memory.PeakMemory() as tracker:
            out = run(layers[0], x, mode)
        kept[mode] = tracker.current - out.numel() * out.element_size()
        del out
'''
_FORMULA = '''\
    size = x.element_size()   # the paper's counts (no dropout), not what PyTorch keeps; the input is the previous output
    plain = memory.layer_activation_bytes(s, b, h, layers[0].a, size, size, dropout=False)
    kept = {"plain": plain - s * b * h * size, "selective": 15 * s * b * h * size, "full": 0}
'''

# Ex3: the model answer's bisection, with `{fits}` (one try)
_EX3_BISECT = '''\
{fits}
    low, high = 0, len(x)
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
'''

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
        "constant": _EX1 + '''\
    return 2_868_903_936   # the paper's GPT-3 layer, whatever the shape
''',
        "helper": _EX1 + '''\
    from gpucourse import memory

    return memory.layer_activation_bytes(s, b, h, a, bytes_per_value, mask_bytes, dropout)
''',
        "visible_only": _EX1 + '''\
    # right with dropout; without it, still counts the dropout output and the masks
    return s * b * h * (16 * bytes_per_value + 2 * mask_bytes) + a * s * s * b * (2 * bytes_per_value + mask_bytes)
''',
        "typical": _EX1 + '''\
    # no quadratic term: the attention scores are forgotten
    return s * b * h * (16 * bytes_per_value + (2 * mask_bytes if dropout else 0))
''',
        "per_head_scores": _EX1 + '''\
    per_score = bytes_per_value + ((bytes_per_value + mask_bytes) if dropout else 0)
    return s * b * h * (16 * bytes_per_value + (2 * mask_bytes if dropout else 0)) + s * s * b * per_score   # one head
''',
        "masks_as_values": _EX1 + '''\
    masks = bytes_per_value   # masks counted at the activations' size, whatever mask_bytes says
    return (s * b * h * (16 * bytes_per_value + (2 * masks if dropout else 0))
            + a * s * s * b * (bytes_per_value + ((bytes_per_value + masks) if dropout else 0)))
''',
        "two_bytes_always": _EX1 + '''\
    e = 2   # 16-bit activations assumed
    return (s * b * h * (16 * e + (2 * mask_bytes if dropout else 0))
            + a * s * s * b * (e + ((e + mask_bytes) if dropout else 0)))
''',
        "mlp_width_fixed": _EX1 + '''\
    per_token = 16 * bytes_per_value   # the listing's 4h MLP, whatever ffn says
    per_score = bytes_per_value
    if dropout:
        per_token += 2 * mask_bytes
        per_score += bytes_per_value + mask_bytes
    return s * b * h * per_token + a * s * s * b * per_score
''',
        "mlp_width_once": _EX1 + '''\
    per_token = (12 + ffn) * bytes_per_value   # only GELU's output scales with ffn (fc1's output forgotten)
    per_score = bytes_per_value
    if dropout:
        per_token += 2 * mask_bytes
        per_score += bytes_per_value + mask_bytes
    return s * b * h * per_token + a * s * s * b * per_score
''',
        "r2_masks_special_cased": _EX1 + '''\
    # 1-byte masks only at the paper's defaults; otherwise masks counted at the activations' size
    masks = mask_bytes if (bytes_per_value, mask_bytes) == (2, 1) else bytes_per_value
    return (s * b * h * ((8 + 2 * ffn) * bytes_per_value + (2 * masks if dropout else 0))
            + a * s * s * b * (bytes_per_value + ((bytes_per_value + masks) if dropout else 0)))
''',
        "scores_twice_without_dropout": _EX1 + '''\
    extra = (bytes_per_value + mask_bytes) if dropout else bytes_per_value   # the softmax output counted twice
    return (s * b * h * (16 * bytes_per_value + (2 * mask_bytes if dropout else 0))
            + a * s * s * b * (bytes_per_value + extra))
''',
    },
    "ex2-solution": {
        "constant": _EX2 + '''\
    return model(x)   # no checkpointing, whatever the cap
''',
        "helper": _EX2 + '''\
    from gpucourse import memory

    return memory.checkpointed_forward(model.layers, x, every=1)
''',
        "visible_only": _EX2 + '''\
    parameters = list(model.parameters())
    try:   # plain if its step fits, else every layer fully checkpointed
        with memory.MemoryCap(cap):
            out = model(x)
            torch.autograd.grad(out.pow(2).mean(), parameters)
        return model(x)
    except torch.OutOfMemoryError:
        pass
    for layer in model.layers:
        x = checkpoint(layer, x, use_reentrant=False)
    return x
''',
        "typical": _EX2 + _EX2_KEPT_SEARCH.format(run=_RUN.format(reentrant=False), kept=_MEASURED),
        "full_everywhere": _EX2 + '''\
    for layer in model.layers:   # full checkpointing everywhere: always fits, recomputes too much
        x = checkpoint(layer, x, use_reentrant=False)
    return x
''',
        "reentrant": _EX2 + _EX2_SEARCH.format(run=_RUN.format(reentrant=True), order=_FULL_FIRST),
        "checkpointed_layers_last": _EX2 + _EX2_SEARCH.format(run=_RUN.format(reentrant=False), order=_FULL_LAST),
        "formula_not_measured": _EX2 + _EX2_KEPT_SEARCH.format(run=_RUN.format(reentrant=False), kept=_FORMULA),
        "selective_everywhere": _EX2 + '''\
    for layer in model.layers:
        x = layer(x, core=lambda q, k, v, core=layer.core: checkpoint(core, q, k, v, use_reentrant=False))
    return x
''',
    },
    "ex3-solution": {
        "constant": _EX3 + '''\
    return len(x) // 2
''',
        "helper": _EX3 + '''\
    from gpucourse import memory

    def try_step(m):
        model.zero_grad(set_to_none=True)
        try:
            F.cross_entropy(model(x[:m]), y[:m]).backward()
        finally:
            model.zero_grad(set_to_none=True)

    return memory.largest_micro_batch(try_step, len(x))
''',
        "visible_only": _EX3 + _EX3_BISECT.format(fits='''\
    def fits(m):
        model.zero_grad(set_to_none=True)
        try:
            F.cross_entropy(model(x[:m]), y[:m]).backward()
            return True
        except torch.OutOfMemoryError:
            return False
        finally:
            model.zero_grad(set_to_none=True)
''').replace("low, high = 0, len(x)", "low, high = 1, len(x) - 1   # assumes the answer lies strictly inside"),
        "typical": _EX3 + _EX3_BISECT.format(fits='''\
    errors = []

    def fits(m):
        model.zero_grad(set_to_none=True)
        try:
            F.cross_entropy(model(x[:m]), y[:m]).backward()
            return True
        except torch.OutOfMemoryError as error:
            errors.append(error)   # kept for a report: its traceback keeps the failed try's tensors alive
            return False
        finally:
            model.zero_grad(set_to_none=True)
'''),
        "retry_inside_except": _EX3 + '''\
    def search(low, high):
        if low >= high:
            return low
        middle = (low + high + 1) // 2
        model.zero_grad(set_to_none=True)
        try:
            F.cross_entropy(model(x[:middle]), y[:middle]).backward()
        except torch.OutOfMemoryError:
            model.zero_grad(set_to_none=True)
            return search(low, middle - 1)   # retried while the failed try's traceback is alive
        model.zero_grad(set_to_none=True)
        return search(middle, high)

    return search(0, len(x))
''',
        "catches_runtime_error": _EX3 + _EX3_BISECT.format(fits='''\
    def fits(m):
        model.zero_grad(set_to_none=True)
        try:
            F.cross_entropy(model(x[:m]), y[:m]).backward()
            return True
        except RuntimeError:   # OutOfMemoryError is one, but so is a shape error: the bug is hidden
            return False
        finally:
            model.zero_grad(set_to_none=True)
'''),
        "except_exception": _EX3 + _EX3_BISECT.format(fits='''\
    def fits(m):
        model.zero_grad(set_to_none=True)
        try:
            F.cross_entropy(model(x[:m]), y[:m]).backward()
            return True
        except Exception:
            return False
        finally:
            model.zero_grad(set_to_none=True)
'''),
        "gradients_kept": _EX3 + _EX3_BISECT.format(fits='''\
    def fits(m):
        try:   # gradients of earlier tries stay in .grad, on the device
            F.cross_entropy(model(x[:m]), y[:m]).backward()
            return True
        except torch.OutOfMemoryError:
            return False
'''),
        "linear_scan": _EX3 + '''\
    best = 0
    for m in range(1, len(x) + 1):   # one step per size: far too many steps
        model.zero_grad(set_to_none=True)
        try:
            F.cross_entropy(model(x[:m]), y[:m]).backward()
        except torch.OutOfMemoryError:
            break
        finally:
            model.zero_grad(set_to_none=True)
        best = m
    return best
''',
        "r2_halve_then_bisect": _EX3 + '''\
    def fits(m):
        model.zero_grad(set_to_none=True)
        try:
            F.cross_entropy(model(x[:m]), y[:m]).backward()
            return True
        except torch.OutOfMemoryError:
            return False
        finally:
            model.zero_grad(set_to_none=True)

    m = len(x)
    while m >= 1 and not fits(m):   # halve from the top: from 129 the next try is 64, so 128 is never tried
        m //= 2
    if m == 0:
        return 0
    low, high = m, min(2 * m - 1, len(x))
    while low < high:
        middle = (low + high + 1) // 2
        if fits(middle):
            low = middle
        else:
            high = middle - 1
    return low
''',
    },
}

# Review v3r3 (majors 1 and 2): s and h swapped in the FLOP formula (wrong only at caps between the edge plans'
# peaks), and a "selective" mode that checkpoints the whole attention sub-layer (its Linears recomputed too).
_EX2_MODEL = source(cell_by_grade_id(load(solution_path("13_bigger_models")), "ex2-solution"))
WRONG["ex2-solution"]["r3_swapped_s_and_h"] = _EX2_MODEL.replace(
    '"selective": 4 * b * s * s * h, "full": 24 * b * s * h * h + 4 * b * s * s * h',
    '"selective": 4 * b * s * h * h, "full": 24 * b * s * s * h + 4 * b * s * h * h')
WRONG["ex2-solution"]["r3_attention_sublayer_checkpointed"] = _EX2_MODEL.replace(
    "            return layer(inputs, core=lambda q, k, v: checkpoint(layer.core, q, k, v, use_reentrant=False))",
    """            def attention(x):
                b, s, h = x.shape
                q, k, v = layer.qkv(layer.ln1(x)).view(b, s, 3, layer.a, h // layer.a).permute(2, 0, 3, 1, 4)
                return x + layer.proj(layer.core(q, k, v).transpose(1, 2).reshape(b, s, h))

            x = checkpoint(attention, inputs, use_reentrant=False)
            return x + layer.fc2(torch.nn.functional.gelu(layer.fc1(layer.ln2(x))))""")
assert _EX2_MODEL not in (WRONG["ex2-solution"]["r3_swapped_s_and_h"],
                          WRONG["ex2-solution"]["r3_attention_sublayer_checkpointed"])

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
