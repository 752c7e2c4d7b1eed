"""The resolution runs with fewer garbage collections and gives the thresholds back."""

from __future__ import annotations

import gc

import pytest

from envlock.resolve import _fewer_collections


def test_thresholds_are_raised_inside_and_restored_after_even_on_error() -> None:
    before = gc.get_threshold()
    with _fewer_collections():
        assert gc.get_threshold()[0] >= 50_000
        assert gc.get_threshold()[1:] == before[1:]
    assert gc.get_threshold() == before
    with pytest.raises(KeyError):
        with _fewer_collections():
            raise KeyError("x")
    assert gc.get_threshold() == before
