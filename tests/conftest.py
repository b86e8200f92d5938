"""Shared fixtures of the test suite (fixtures only: nothing here changes what is collected)."""

from __future__ import annotations

import pytest


@pytest.fixture
def no_gpu(monkeypatch):
    """Make torch see no CUDA GPU and no Apple MPS, so CPU-only paths are tested the same on any machine."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None:
        monkeypatch.setattr(mps, "is_available", lambda: False)
    return torch
