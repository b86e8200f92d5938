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
def train_epoch(model: nn.Module, batches: list, optimizer, device) -> torch.Tensor:
    """One epoch over (inputs, labels) CPU batches on device; the mean loss as a 0-d tensor on device, no host sync."""
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
    },
    "ex3-solution": {
        # A plausible loss, as a tensor: no training at all.
        "constant": _EX3 + '''\
    return torch.tensor(1.1)
''',
        # The course's own epoch: off-limits here.
        "helper": _EX3 + '''\
    return placement.train_epoch(model, batches, optimizer, device)
''',
        # Right on the CPU, where the visible tests run, but the batches never move to the device.
        "visible_only": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(batches)
''',
        # The habit this section is about: a Python float accumulated with .item(), one synchronisation per step.
        "typical": _EX3 + '''\
    total = 0.0
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.item()
    return torch.tensor(total / len(batches), device=device)
''',
        # v2's model answer: .to(device) with the default non_blocking=False, a blocking copy (a stream wait) per tensor.
        "blocking_copy": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(batches)
''',
        # non_blocking=True, but from a fresh (pageable) copy of the pinned batch: the copy still blocks.
        "pageable": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        inputs, labels = inputs.clone().to(device, non_blocking=True), labels.clone().to(device, non_blocking=True)
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(batches)
''',
        # Sums the losses with their graphs: no synchronisation, but the result is not detached.
        "not_detached": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs.to(device)), labels.to(device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total = total + loss
    return total / len(batches)
''',
        # The running total from torch.tensor(0.0, device=...): built on the host and copied with non_blocking=False,
        # a blocking copy (on a GPU, a wait for everything queued before the epoch).
        "total_from_host": _EX3 + '''\
    total = torch.tensor(0.0, device=device)
    for inputs, labels in batches:
        inputs, labels = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(batches)
''',
        # Checks for a diverging loss each step: an if on a tensor reads its value.
        "nan_check": _EX3 + '''\
    total = torch.zeros((), device=device)
    for inputs, labels in batches:
        loss = F.cross_entropy(model(inputs.to(device)), labels.to(device))
        if torch.isnan(loss):
            raise FloatingPointError("the loss diverged")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total += loss.detach()
    return total / len(batches)
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
}
