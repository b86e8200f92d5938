"""Lesson 14's own-DDP grader: the out-of-order model, what it records about a class that raises or keeps state."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from gpucourse import parallel
from gpucourse.parallel.own_ddp import OwnDDPCase, case_model, expected_buckets, held_bytes


def _wrong_answers():
    path = Path(__file__).parent / "wrong_answers" / "14_data_parallelism.py"
    spec = importlib.util.spec_from_file_location("wrong_answers_14", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _class(text: str):
    import torch
    import torch.distributed as dist

    namespace = {"torch": torch, "dist": dist}
    exec(text, namespace)
    return namespace["MyDDP"]


def test_a_reverse_registered_model_runs_its_layers_in_forward_order():
    import torch

    forward, reverse = OwnDDPCase(seed=3, widths=(5, 8, 6, 3)), OwnDDPCase(seed=3, widths=(5, 8, 6, 3),
                                                                             registered="reverse")
    a, b = case_model(forward), case_model(reverse)
    assert [n for n, _ in b.named_parameters()][:2] == ["layers.0.weight", "layers.0.bias"]
    assert tuple(b.layers[0].weight.shape) == (3, 6)  # the output layer registered first
    with torch.no_grad():
        for mine, theirs in zip(b.layers, reversed([m for m in a if isinstance(m, torch.nn.Linear)])):
            mine.weight.copy_(theirs.weight)
            mine.bias.copy_(theirs.bias)
    x = torch.randn(4, 5)
    assert torch.allclose(a(x), b(x))
    assert expected_buckets(OwnDDPCase(widths=(5, 8, 6, 3), bucket_cap_bytes=408, registered="reverse")) == (408, 84)
    with pytest.raises(ValueError, match="registered"):
        OwnDDPCase(registered="backwards")
    with pytest.raises(ValueError, match="frozen"):
        OwnDDPCase(frozen=("0.bias",), registered="reverse")
    assert OwnDDPCase(frozen=("layers.1.bias",), registered="reverse").frozen == ("layers.1.bias",)


def test_held_bytes_counts_tensors_not_parameters():
    import torch

    class Holder:
        def __init__(self) -> None:
            self.weight = torch.nn.Parameter(torch.zeros(10))
            flat = torch.zeros(4)
            self.pending = [(0, flat, None), (1, flat, None)]  # one tensor, counted once
            self.other = {"x": torch.zeros(2, dtype=torch.float64)}

    assert held_bytes(Holder()) == 4 * 4 + 2 * 8


def test_order_assuming_and_leaking_classes_are_reported_not_crashed():
    wrong = _wrong_answers()
    case = OwnDDPCase(seed=14, widths=(5, 8, 6, 3), bucket_cap_bytes=408, steps=3, registered="reverse")
    right, order, leak = (parallel.run_own_ddp(_class(text), [case], world_size=2, timeout_s=60)[0]
                          for text in (wrong._DDP, wrong.WRONG["ex2-solution"]["r1_assume_order"],
                                       wrong.WRONG["ex2-solution"]["r1_pending_leak"]))
    assert right.errors == ("", "") and right.waits == ((2, 2, 2),) * 2 and right.held == ((0, 0, 0),) * 2
    assert all(parallel.max_difference(w, e) < 1e-5 for w, e in zip(right.weights, right.expected))
    assert all("AttributeError" in error and "step 0" in error for error in order.errors), order.errors
    assert leak.errors == ("", "") and leak.waits[0] == (2, 4, 6) and leak.held[0][2] > leak.held[0][0] > 0


def test_a_tensor_hook_left_after_remove_is_seen_by_one_more_backward():
    # Review v3r3 major 4: p.register_hook leaves no post-accumulate hook; one more backward() still all-reduces
    wrong = _wrong_answers()
    kept = wrong.WRONG["ex2-solution"]["r3_register_hook_kept"]
    removed = kept.replace("        pass\n", "        for handle in self.hooks:\n            handle.remove()\n")
    case = OwnDDPCase(seed=5, widths=(4, 10, 6, 2), bucket_cap_bytes=200, steps=2)
    runs = {name: parallel.run_own_ddp(_class(text), [case], world_size=2, timeout_s=60)[0]
            for name, text in [("model", wrong._DDP), ("kept", kept), ("removed", removed)]}
    assert runs["model"].after_remove == runs["removed"].after_remove == (0, 0)
    assert runs["kept"].hooks_left == (0, 0) and runs["kept"].after_remove == (len(expected_buckets(case)),) * 2
    assert all(parallel.max_difference(w, e) < 1e-5 for w, e in zip(runs["removed"].weights, runs["removed"].expected))
