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
    monkeypatch.delenv("GPUCOURSE_DEVICE", raising=False)  # a maintainer's own choice must not change the tests
    return torch


@pytest.fixture
def one_torch_thread():
    """One torch thread, as the lessons use on a CPU: steadier timings on a shared machine."""
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def no_stray_processes():
    """Fail the test if it leaves a child process behind (the launcher's fork server excepted: it stays by design).

    Yields a function that lists this process's live children other than the launcher's servers.
    """
    import psutil

    from gpucourse.parallel.workers import service_pids

    def children() -> list:
        """This process's live children, the launcher's fork server and resource tracker left out."""
        services = service_pids()
        return [p for p in psutil.Process().children(recursive=True) if p.pid not in services]

    before = {p.pid for p in children()}
    yield children
    stray = [p for p in children() if p.pid not in before]
    assert not stray, f"stray child processes: {[(p.pid, p.name()) for p in stray]}"
