"""Shared pytest setup: isolation from the developer's pip configuration and caches."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

#: Environment variables that would leak the developer's or CI machine's configuration
#: into tests (pip config, envlock caches, CUDA/NCCL settings).
_SCRUB = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS", "PIP_NO_INDEX",
          "PIP_TRUSTED_HOST", "ENVLOCK_PYTORCH_INDEX_URL", "ENVLOCK_NO_CACHE", "ENVLOCK_DEBUG",
          "UV_CUDA_DRIVER_VERSION", "CONDA_OVERRIDE_CUDA")


def pytest_collection_modifyitems(config: pytest.Config, items: list) -> None:
    """Tests marked ``torch`` skip where torch is not installed (CI installs the CPU
    build; a contributor's fresh virtual environment may not have it)."""
    import importlib.util

    if importlib.util.find_spec("torch") is not None:
        return
    skip = pytest.mark.skip(reason="torch is not installed")
    for item in items:
        if item.get_closest_marker("torch") is not None:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    for var in _SCRUB:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    # one envlock cache per test session (fast) unless a test sets its own
    cache = tmp_path_factory.getbasetemp() / "envlock-cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(cache))


@pytest.fixture
def data_dir() -> Path:
    return HERE / "data"
