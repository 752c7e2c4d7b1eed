"""Fixtures shared by the resolver tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh, empty envlock cache for one test (the session's shared one would let an
    earlier test's pages or built metadata answer for this one)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(d))
    return d
