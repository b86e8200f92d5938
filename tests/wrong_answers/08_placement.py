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
_GOOD_MODEL = '''\
class SequenceClassifier(nn.Module):
    def __init__(self, features: int, classes: int, class_priors: list):
        super().__init__()
        self.head = nn.Linear(features, classes)
        self.register_buffer("log_prior", torch.log(torch.tensor(class_priors)))

    def forward(self, x, lengths):
        steps = torch.arange(x.shape[1], device=x.device)
        mask = (steps[None, :] < lengths[:, None]).float()
        pooled = (x * mask[:, :, None]).sum(dim=1) / lengths[:, None]
        return self.head(pooled) + self.log_prior

'''
_EX2 = _GOOD_MODEL + '''\
def train_step(model, optimizer, batch: dict, device):
'''
_EX3 = '''\
def train_epoch(model: nn.Module, batches: list, optimizer, device, class_weights: list) -> dict:
    """slow_epoch's training and results, as tensors on device, with at most one host synchronisation in all."""
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
        # Review v3r2: the flag is not passed down the recursion, so every nested copy blocks on a GPU.
        "flag_dropped": _EX1 + '''\
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(value, device) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value, device) for value in batch)
    return batch
''',
        # Review v3r2: non_blocking forced on: a copy the caller asked to be blocking is not.
        "always_non_blocking": _EX1 + '''\
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {key: to_device(value, device, non_blocking) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(value, device, non_blocking) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value, device, non_blocking) for value in batch)
    return batch
''',
        # Review v3r3: floating tensors cast to float32 on the way (doubles the bytes of fp16/bf16 batches).
        "r3_cast_float32": _EX1 + '''\
    if isinstance(batch, torch.Tensor):
        moved = batch.to(device, non_blocking=non_blocking)
        return moved.float() if moved.is_floating_point() else moved
    if isinstance(batch, dict):
        return {key: to_device(value, device, non_blocking) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(value, device, non_blocking) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value, device, non_blocking) for value in batch)
    return batch
''',
        # Review v3r3: every tensor detached on the way (drops requires_grad).
        "r3_detach": _EX1 + '''\
    if isinstance(batch, torch.Tensor):
        return batch.detach().to(device, non_blocking=non_blocking)
    if isinstance(batch, dict):
        return {key: to_device(value, device, non_blocking) for key, value in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(to_device(value, device, non_blocking) for value in batch))
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(value, device, non_blocking) for value in batch)
    return batch
''',
    },
    "ex2-solution": {
        # Plausible numbers, as tensors on the device: no model run, no training.
        "constant": _EX2 + """\
    return torch.tensor(1.1, device=device), torch.tensor(3, device=device)
""",
        # The course's move_batch carries the batch: off-limits here.
        "helper": _EX2 + """\
    moved = placement.move_batch(batch, device)
    logits = model(moved["x"], moved["lengths"])
    loss = F.cross_entropy(logits, moved["labels"])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == moved["labels"]).sum()
""",
        # The arange line deleted instead of fixed: a plain mean over every step, padding included. Only values show it.
        "visible_only": """\
class SequenceClassifier(nn.Module):
    def __init__(self, features: int, classes: int, class_priors: list):
        super().__init__()
        self.head = nn.Linear(features, classes)
        self.register_buffer("log_prior", torch.log(torch.tensor(class_priors)))

    def forward(self, x, lengths):
        return self.head(x.mean(dim=1)) + self.log_prior


def train_step(model, optimizer, batch: dict, device):
    x, lengths, labels = (batch[key].to(device) for key in ("x", "lengths", "labels"))
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == labels).sum()
""",
        # The error fixed where it shows: the plain attribute copied to the input's device in forward. model.to() still
        # leaves it behind, and every step copies it again.
        "typical": """\
class SequenceClassifier(nn.Module):
    def __init__(self, features: int, classes: int, class_priors: list):
        super().__init__()
        self.head = nn.Linear(features, classes)
        self.log_prior = torch.log(torch.tensor(class_priors))

    def forward(self, x, lengths):
        steps = torch.arange(x.shape[1], device=x.device)
        mask = (steps[None, :] < lengths[:, None]).float()
        pooled = (x * mask[:, :, None]).sum(dim=1) / lengths[:, None]
        return self.head(pooled) + self.log_prior.to(x.device)


def train_step(model, optimizer, batch: dict, device):
    x, lengths, labels = (batch[key].to(device) for key in ("x", "lengths", "labels"))
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == labels).sum()
""",
        # The mask built on the CPU and copied over: right everywhere, but one more blocking copy per step.
        "mask_copied": """\
class SequenceClassifier(nn.Module):
    def __init__(self, features: int, classes: int, class_priors: list):
        super().__init__()
        self.head = nn.Linear(features, classes)
        self.register_buffer("log_prior", torch.log(torch.tensor(class_priors)))

    def forward(self, x, lengths):
        steps = torch.arange(x.shape[1]).to(x.device)
        mask = (steps[None, :] < lengths[:, None]).float()
        pooled = (x * mask[:, :, None]).sum(dim=1) / lengths[:, None]
        return self.head(pooled) + self.log_prior


def train_step(model, optimizer, batch: dict, device):
    x, lengths, labels = (batch[key].to(device) for key in ("x", "lengths", "labels"))
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == labels).sum()
""",
        # The labels left on the CPU: the classic "moved the model, not (all) the data".
        "labels_left": _EX2 + """\
    x, lengths, labels = batch["x"].to(device), batch["lengths"].to(device), batch["labels"]
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == labels.to(device)).sum()
""",
        # The count started from torch.tensor(0, device=...): built on the host and copied, a blocking copy per step.
        "zero_from_host": _EX2 + """\
    x, lengths, labels = (batch[key].to(device) for key in ("x", "lengths", "labels"))
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    correct = torch.tensor(0, device=device)
    correct += (logits.argmax(dim=1) == labels).sum()
    return loss.detach(), correct
""",
        # The count read with .item() where it can be (it cannot on meta): a host synchronisation at every step.
        "item_where_possible": _EX2 + """\
    x, lengths, labels = (batch[key].to(device) for key in ("x", "lengths", "labels"))
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    correct = (logits.argmax(dim=1) == labels).sum()
    if correct.device.type != "meta":
        correct = torch.tensor(correct.item(), device=device)
    return loss.detach(), correct
""",
        # Moves the data by assigning into the caller's batch: right values, but the batch is changed.
        "mutates_batch": _EX2 + """\
    for key in ("x", "lengths", "labels"):
        batch[key] = batch[key].to(device)
    logits = model(batch["x"], batch["lengths"])
    loss = F.cross_entropy(logits, batch["labels"])
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == batch["labels"]).sum()
""",
        # The mask built on the CPU from lengths brought back: a .cpu() read (and it fails on meta).
        "mask_on_host": """\
class SequenceClassifier(nn.Module):
    def __init__(self, features: int, classes: int, class_priors: list):
        super().__init__()
        self.head = nn.Linear(features, classes)
        self.register_buffer("log_prior", torch.log(torch.tensor(class_priors)))

    def forward(self, x, lengths):
        mask = (torch.arange(x.shape[1])[None, :] < lengths.cpu()[:, None]).float().to(x.device)
        pooled = (x * mask[:, :, None]).sum(dim=1) / lengths[:, None]
        return self.head(pooled) + self.log_prior


def train_step(model, optimizer, batch: dict, device):
    x, lengths, labels = (batch[key].to(device) for key in ("x", "lengths", "labels"))
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == labels).sum()
""",
        # Review v3r3 (Major 1): the priors kept as a list and rebuilt from the data's device in every forward with
        # x.new_tensor(...): on a GPU a blocking host-to-device copy (pageable, non_blocking=False) at every step.
        "r3_prior_new_tensor": """\
class SequenceClassifier(nn.Module):
    def __init__(self, features, classes, class_priors):
        super().__init__()
        self.head = nn.Linear(features, classes)
        self.class_priors = list(class_priors)

    def forward(self, x, lengths):
        steps = torch.arange(x.shape[1], device=x.device)
        mask = (steps[None, :] < lengths[:, None]).float()
        pooled = (x * mask[:, :, None]).sum(dim=1) / lengths[:, None]
        return self.head(pooled) + torch.log(x.new_tensor(self.class_priors))


def train_step(model, optimizer, batch: dict, device):
    x = batch["x"].to(device, non_blocking=True)
    lengths = batch["lengths"].to(device, non_blocking=True)
    labels = batch["labels"].to(device, non_blocking=True)
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == labels).sum()
""",
        # Review v3r3: a to() override that moves a plain attribute: out of state_dict, .cuda(), .half() and apply.
        "r3_to_override": """\
class SequenceClassifier(nn.Module):
    def __init__(self, features, classes, class_priors):
        super().__init__()
        self.head = nn.Linear(features, classes)
        self.log_prior = torch.log(torch.tensor(class_priors))

    def to(self, *args, **kwargs):
        super().to(*args, **kwargs)
        self.log_prior = self.log_prior.to(*args, **kwargs)
        return self

    def forward(self, x, lengths):
        steps = torch.arange(x.shape[1], device=x.device)
        mask = (steps[None, :] < lengths[:, None]).float()
        pooled = (x * mask[:, :, None]).sum(dim=1) / lengths[:, None]
        return self.head(pooled) + self.log_prior


def train_step(model, optimizer, batch: dict, device):
    x = batch["x"].to(device, non_blocking=True)
    lengths = batch["lengths"].to(device, non_blocking=True)
    labels = batch["labels"].to(device, non_blocking=True)
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == labels).sum()
""",
        # Review v3r3: the priors a trainable nn.Parameter: they are trained with the head.
        "r3_trainable_prior": _GOOD_MODEL.replace(
            'self.register_buffer("log_prior", torch.log(torch.tensor(class_priors)))',
            'self.log_prior = nn.Parameter(torch.log(torch.tensor(class_priors)))') + """\
def train_step(model, optimizer, batch: dict, device):
    x = batch["x"].to(device, non_blocking=True)
    lengths = batch["lengths"].to(device, non_blocking=True)
    labels = batch["labels"].to(device, non_blocking=True)
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(dim=1) == labels).sum()
""",
    },
    "ex3-solution": {
        # Plausible results, as tensors on the device: no training at all.
        "constant": _EX3 + '''\
    return {"losses": torch.full((len(batches),), 1.1, device=device), "best": torch.tensor(1.0, device=device),
            "accuracy": torch.tensor(0.33, device=device)}
''',
        # The course's own epoch: off-limits here.
        "helper": _EX3 + '''\
    return placement.train_epoch(model, batches, optimizer, device, class_weights)
''',
        # The accuracy as the mean of each batch's accuracy: right for the visible test's equal batches only.
        "visible_only": _EX3 + '''\
    weight = torch.tensor(class_weights, device=device)
    losses, accuracies = [], []
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        accuracies.append((logits.argmax(dim=1) == labels).float().mean())
    losses = torch.stack(losses)
    return {"losses": losses, "best": losses.min(), "accuracy": torch.stack(accuracies).mean()}
''',
        # The habit this section is about: the per-step .item() kept for the log, turned into a tensor at the end.
        "typical": _EX3 + '''\
    weight = torch.tensor(class_weights, device=device)
    losses, correct, seen = [], torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
    losses = torch.tensor(losses, device=device)
    return {"losses": losses, "best": losses.min(), "accuracy": correct / seen}
''',
        # The int32 labels converted on the host: .long() makes a pageable copy, so non_blocking=True still blocks.
        "pageable": _EX3 + '''\
    weight = torch.tensor(class_weights, device=device)
    losses, correct, seen = [], torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.long().to(device, non_blocking=True)
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
    losses = torch.stack(losses)
    return {"losses": losses, "best": losses.min(), "accuracy": correct / seen}
''',
        # slow_epoch's blocking copies kept: .to(device) with the default non_blocking=False, a stream wait per tensor.
        "blocking_copy": _EX3 + '''\
    weight = torch.tensor(class_weights, device=device)
    losses, correct, seen = [], torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs, labels = inputs.to(device), labels.to(device).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
    losses = torch.stack(losses)
    return {"losses": losses, "best": losses.min(), "accuracy": correct / seen}
''',
        # The class weights still built from the Python list at every step: a blocking host-to-device copy per step.
        "weights_per_step": _EX3 + '''\
    losses, correct, seen = [], torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=torch.tensor(class_weights, device=device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
    losses = torch.stack(losses)
    return {"losses": losses, "best": losses.min(), "accuracy": correct / seen}
''',
        # The synchronisation moved into a logging helper: the counter sees through the call.
        "sync_in_helper": _EX3 + '''\
    def record(history, loss):
        history.append(round(float(loss), 6))

    weight = torch.tensor(class_weights, device=device)
    history, correct, seen = [], torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        record(history, loss)
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
    losses = torch.as_tensor(history, device=device)
    return {"losses": losses, "best": losses.min(), "accuracy": correct / seen}
''',
        # The log dropped: only the mean loss comes back in "losses", so the per-step history is lost.
        "drops_logging": _EX3 + '''\
    weight = torch.tensor(class_weights, device=device)
    total, best, correct, seen = torch.zeros((), device=device), None, torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
        best = loss.detach() if best is None else torch.minimum(best, loss.detach())
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
    return {"losses": total / len(batches), "best": best, "accuracy": correct / seen}
''',
        # The running best kept as in slow_epoch: an if on a tensor reads its value at every step.
        "best_if": _EX3 + '''\
    weight = torch.tensor(class_weights, device=device)
    losses, best, correct, seen = [], None, torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        if best is None or loss < best:
            best = loss.detach()
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
    return {"losses": torch.stack(losses), "best": best, "accuracy": correct / seen}
''',
        # The correct predictions counted with nonzero(): an output whose size depends on the data.
        "nonzero": _EX3 + '''\
    weight = torch.tensor(class_weights, device=device)
    losses, correct, seen = [], torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        correct += (logits.argmax(dim=1) == labels).nonzero().shape[0]
        seen += len(labels)
    losses = torch.stack(losses)
    return {"losses": losses, "best": losses.min(), "accuracy": correct / seen}
''',
        # Non-blocking copies from pinned memory and no synchronisation, but the losses keep their graphs.
        "not_detached": _EX3 + '''\
    weight = torch.tensor(class_weights, device=device)
    losses, correct, seen = [], torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss)
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
    losses = torch.stack(losses)
    return {"losses": losses, "best": losses.min(), "accuracy": correct / seen}
''',
        # The best loss taken as the last one (the loss usually falls): wrong when a later step is worse.
        "best_is_last": _EX3 + '''\
    weight = torch.tensor(class_weights, device=device)
    losses, correct, seen = [], torch.zeros((), device=device), 0
    for inputs, labels in batches:
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).long()
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.detach())
        correct += (logits.argmax(dim=1) == labels).sum()
        seen += len(labels)
    losses = torch.stack(losses)
    return {"losses": losses, "best": losses[-1], "accuracy": correct / seen}
''',
    },
}

WRONG = with_tampering(WRONG)  # every exercise also gets the tampering kinds (tampering/)

RIGHT: dict[str, dict[str, str]] = {
    # Correct answers that differ from the model answer: each must PASS its exercise's tests (visible and hidden),
    # run by tests/test_placement.py.
    "ex2-solution": {
        # The priors as a frozen parameter, tensors made with new_tensor/new_ones from the data, non_blocking copies,
        # the mask from torch.arange on lengths' device and a boolean mask summed with where().
        "frozen_parameter": """\
class SequenceClassifier(nn.Module):
    def __init__(self, features: int, classes: int, class_priors: list):
        super().__init__()
        self.head = nn.Linear(features, classes)
        self.log_prior = nn.Parameter(torch.tensor(class_priors).log(), requires_grad=False)

    def forward(self, x, lengths):
        real = torch.arange(x.shape[1], device=lengths.device)[None, :] < lengths[:, None]
        pooled = torch.where(real[:, :, None], x, x.new_zeros(())).sum(dim=1) / lengths[:, None]
        return self.head(pooled) + self.log_prior


def train_step(model, optimizer, batch: dict, device):
    x = batch["x"].to(device, non_blocking=True)
    lengths = batch["lengths"].to(device, non_blocking=True)
    labels = batch["labels"].to(device, non_blocking=True)
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), logits.argmax(dim=1).eq(labels).sum()
""",
        # A non-persistent buffer, the batch moved with one comprehension, the count as a float sum of matches.
        "non_persistent_buffer": """\
class SequenceClassifier(nn.Module):
    def __init__(self, features: int, classes: int, class_priors: list):
        super().__init__()
        self.head = nn.Linear(features, classes)
        self.register_buffer("log_prior", torch.log(torch.tensor(class_priors)), persistent=False)

    def forward(self, x, lengths):
        mask = torch.arange(x.shape[1], device=x.device).expand(len(x), -1) < lengths.unsqueeze(1)
        return self.head((x * mask.unsqueeze(2)).sum(1) / lengths.unsqueeze(1)) + self.log_prior


def train_step(model, optimizer, batch: dict, device):
    x, lengths, labels = (batch[key].to(device) for key in ("x", "lengths", "labels"))
    logits = model(x, lengths)
    loss = F.cross_entropy(logits, labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss.detach(), (logits.argmax(1) == labels).sum()
""",
    },
    "ex3-solution": {
        # No synchronisation at all: the class weights pinned and sent non_blocking, the labels as int64 on arrival
        # (.to(device, dtype) converts after the copy), a running best with torch.minimum, matches counted as floats.
        "zero_syncs": """\
def train_epoch(model, batches, optimizer, device, class_weights):
    weight = placement.pin(torch.as_tensor(class_weights, dtype=torch.float32)).to(device, non_blocking=True)
    history = torch.empty(len(batches), device=device)
    best = torch.full((), float("inf"), device=device)
    correct = torch.zeros((), device=device)
    seen = 0
    for step, (inputs, labels) in enumerate(batches):
        inputs = inputs.to(device, non_blocking=True)
        labels = labels.to(device, non_blocking=True).to(torch.int64)
        logits = model(inputs)
        loss = F.cross_entropy(logits, labels, weight=weight)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        history[step] = loss.detach()
        best = torch.minimum(best, loss.detach())
        correct = correct + logits.argmax(1).eq(labels).float().sum()
        seen += labels.shape[0]
    return {"losses": history, "best": best, "accuracy": correct / seen}
""",
    },
}
