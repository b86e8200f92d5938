"""Pytest set-up shared by tests/ and the nbval run over solutions/."""

import pytest


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark nbval's notebook cells slow (`make test` keeps each notebook on one worker with --dist loadscope)."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
