"""Issue 18 item 4: the matrix cache is JSON; a planted pickle or garbage never runs."""

from __future__ import annotations

import json
import os
import pickle
from pathlib import Path

import pytest

from envlock.matrix.cache import decode_matrix, digest, encode_matrix, load_cached
from envlock.matrix.files import data_files


class _Boom:
    """Unpickling this runs ``os.system`` (touches a marker file)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):  # type: ignore[no-untyped-def]
        return (os.system, (f"touch {self.marker}",))


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    d.mkdir()
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(d))
    monkeypatch.delenv("ENVLOCK_NO_CACHE", raising=False)
    return d


def _key() -> str:
    return digest(data_files())


def test_cache_round_trips_the_matrix(cache: Path) -> None:
    first = load_cached()
    files = list(cache.glob("matrix-*.json"))
    assert [f.name for f in files] == [f"matrix-{_key()}.json"]
    json.loads(files[0].read_bytes())  # plain JSON
    again = load_cached()
    assert again.version == first.version
    assert again.gpus == first.gpus and again.variants == first.variants
    assert again.advisories == first.advisories


@pytest.mark.parametrize("suffix", ["json", "pickle"])
def test_a_planted_pickle_never_executes(cache: Path, tmp_path: Path, suffix: str) -> None:
    marker = tmp_path / "PWNED"
    (cache / f"matrix-{_key()}.{suffix}").write_bytes(pickle.dumps(_Boom(marker)))
    m = load_cached()
    assert not marker.exists()
    assert m.gpus
    # the planted file is replaced by (or sits beside, then is removed in favour of) JSON
    assert not (cache / f"matrix-{_key()}.pickle").exists()
    json.loads((cache / f"matrix-{_key()}.json").read_bytes())


@pytest.mark.parametrize("planted", [
    b"", b"\x00\xff garbage", b"[]", b'{"format": 2}', b"9" * 5000,
    b'{"format": 2, "version": {"$c": "Popen", "a": ["touch /tmp/x"]}}',
    b"[" * 100000,
])
def test_planted_garbage_is_ignored(cache: Path, planted: bytes) -> None:
    (cache / f"matrix-{_key()}.json").write_bytes(planted)
    assert load_cached().gpus


def test_decoder_builds_only_matrix_classes() -> None:
    with pytest.raises(ValueError):
        decode_matrix(b'{"format": 2, "x": {"$c": "Path", "a": ["/"]}}')
    with pytest.raises((ValueError, TypeError)):
        decode_matrix(encode_matrix(load_cached()).replace(b'"Gpu"', b'"Popen"'))
