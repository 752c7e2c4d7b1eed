"""Fixtures shared by the matrix tests."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envlock.matrix.files import DATA_FILES

SRC = Path(__file__).resolve().parents[2] / "compat-matrix"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A private copy of the shipped matrix data files, for a test to edit and load."""
    for name in DATA_FILES:
        shutil.copy(SRC / name, tmp_path / name)
    return tmp_path
