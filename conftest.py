"""Pytest set-up shared by tests/ and the nbval run over solutions/."""

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark nbval's notebook cells slow, and keep each notebook's cells on one xdist worker (one kernel)."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.xdist_group(f"nbval-{item.path.stem}"))
