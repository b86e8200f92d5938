"""Pytest set-up shared by tests/ and the nbval run over solutions/."""

import sys
from pathlib import Path

import pytest

import gpucourse

sys.path.insert(0, str(Path(__file__).resolve().parent / "tests"))
# nbval runs every solution notebook; tests/lesson_notebooks.py adds, in the same kernel, the wrong answers, the
# repeated test cells and the model answers' coverage (so no notebook is executed twice for the same purpose).
pytest_plugins = ["lesson_notebooks"]

# triton must load before TensorFlow in a process that may use both (torch.compile loads triton): see
# gpucourse.load_triton_before_tensorflow. Test modules import TensorFlow at collection, so do it first.
gpucourse.load_triton_before_tensorflow()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark nbval's notebook cells slow (`make test` keeps each notebook on one worker with --dist loadscope)."""
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.slow)
