"""Editing a copied data file in a test: one exact replacement that must match."""

from __future__ import annotations

from pathlib import Path

__all__ = ["edit_once"]


def edit_once(path: Path, old: str, new: str) -> None:
    """Replace the first ``old`` in ``path`` by ``new``. ``old`` must be there: an edit that
    silently matched nothing would leave the file valid and the test proving nothing."""
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))
