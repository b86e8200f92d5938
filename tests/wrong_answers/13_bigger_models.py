"""Plausible wrong answers to lesson 13's exercises: each must lose exactly its own exercise's points.

Kinds: 'constant' (a fixed plausible value), 'helper' (the course's own helper, which off_limits blocks),
'visible_only' (right on the visible test's input only), 'typical' (the lesson's typical mistake), and others.
"""

from wrong_answers.tampering import with_tampering

WRONG: dict[str, dict[str, str]] = {
    "ex1-solution": {
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
    "ex2-solution": {
        "constant": '''\
def checkpointed_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a ResidualMLP with every residual block checkpointed (recomputed in the backward pass)."""
    return F.cross_entropy(model(x), y)   # no checkpointing
''',
        "helper": '''\
def checkpointed_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a ResidualMLP with every residual block checkpointed (recomputed in the backward pass)."""
    from gpucourse import memory

    h = memory.checkpointed_forward(model.blocks, model.embed(x), every=1, residual=True)
    return F.cross_entropy(model.head(h), y)
''',
        "visible_only": '''\
def checkpointed_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a ResidualMLP with every residual block checkpointed (recomputed in the backward pass)."""
    h = model.embed(x)
    for i, block in enumerate(model.blocks):
        h = h + (checkpoint(block, h, use_reentrant=False) if i < 6 else block(h))   # six blocks, as in the test
    return F.cross_entropy(model.head(h), y)
''',
        "typical": '''\
def checkpointed_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a ResidualMLP with every residual block checkpointed (recomputed in the backward pass)."""
    def stack(h):
        for block in model.blocks:
            h = h + block(h)
        return h

    h = checkpoint(stack, model.embed(x), use_reentrant=False)   # one segment around the whole stack
    return F.cross_entropy(model.head(h), y)
''',
        "no_residual": '''\
def checkpointed_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a ResidualMLP with every residual block checkpointed (recomputed in the backward pass)."""
    h = model.embed(x)
    for block in model.blocks:
        h = checkpoint(block, h, use_reentrant=False)   # the residual connection is lost
    return F.cross_entropy(model.head(h), y)
''',
        "every_two_blocks": '''\
def checkpointed_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of a ResidualMLP with every residual block checkpointed (recomputed in the backward pass)."""
    blocks = list(model.blocks)
    h = model.embed(x)

    def pair(h, group):
        for block in group:
            h = h + block(h)
        return h

    for start in range(0, len(blocks), 2):
        h = checkpoint(pair, h, blocks[start:start + 2], use_reentrant=False)
    return F.cross_entropy(model.head(h), y)
''',
    },
    "ex3-solution": {
        "constant": '''\
def largest_micro_batch(try_step, batch_size: int) -> int:
    """The largest m in [1, batch_size] for which try_step(m) raises no torch.OutOfMemoryError (0 if none)."""
    return batch_size // 2
''',
        "helper": '''\
def largest_micro_batch(try_step, batch_size: int) -> int:
    """The largest m in [1, batch_size] for which try_step(m) raises no torch.OutOfMemoryError (0 if none)."""
    from gpucourse import memory

    return memory.largest_micro_batch(try_step, batch_size)
''',
        "visible_only": '''\
def largest_micro_batch(try_step, batch_size: int) -> int:
    """The largest m in [1, batch_size] for which try_step(m) raises no torch.OutOfMemoryError (0 if none)."""
    low, high = 1, batch_size - 1          # assumes the answer lies strictly inside
    while low < high:
        middle = (low + high + 1) // 2
        try:
            try_step(middle)
        except torch.OutOfMemoryError:
            high = middle - 1
        else:
            low = middle
    return low
''',
        "typical": '''\
def largest_micro_batch(try_step, batch_size: int) -> int:
    """The largest m in [1, batch_size] for which try_step(m) raises no torch.OutOfMemoryError (0 if none)."""
    m = batch_size
    while m >= 1:                          # halve until it fits
        try:
            try_step(m)
            return m
        except torch.OutOfMemoryError:
            m //= 2
    return 0
''',
        "linear_scan": '''\
def largest_micro_batch(try_step, batch_size: int) -> int:
    """The largest m in [1, batch_size] for which try_step(m) raises no torch.OutOfMemoryError (0 if none)."""
    best = 0
    for m in range(1, batch_size + 1):      # one step per size: far too many steps
        try:
            try_step(m)
        except torch.OutOfMemoryError:
            break
        best = m
    return best
''',
        "catches_everything": '''\
def largest_micro_batch(try_step, batch_size: int) -> int:
    """The largest m in [1, batch_size] for which try_step(m) raises no torch.OutOfMemoryError (0 if none)."""
    low, high = 0, batch_size
    while low < high:
        middle = (low + high + 1) // 2
        try:
            try_step(middle)
        except Exception:                  # hides bugs as if they were out-of-memory errors
            high = middle - 1
        else:
            low = middle
    return low
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)
