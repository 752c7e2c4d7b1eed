"""The index cache's layout: a bounded number of directories, whatever the entry count.

A cold resolve of vllm wrote 602 entries into 311 directories of two hex digits each:
every directory a new inode (about half a millisecond of kernel time each on a virtual
disk) and more directories than the cache keeps open, so most uses walked to their
directory again. Entries now go to one of 16 directories per kind (their key's first hex
digit)."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pytest
from support.index_server import IndexServer
from support.torch_world import add_package, add_torch_release, resolve

from envlock._cache_files import read_entry, write_entry


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("layout")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        for i in range(24):
            add_package(pypi, tmp, f"helper{i}", "1.0")
        yield srv


def test_a_cold_resolve_spreads_its_entries_over_at_most_16_directories_per_kind(
        world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(cache))
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1",
                *[f"helper{i}" for i in range(24)], "-o", str(tmp_path / "o.lock"))
    assert r.code == 0, r.err
    for kind, suffixes in (("http", (".body", ".json")), ("metadata", (".metadata",))):
        dirs = [d for d in (cache / kind).iterdir() if d.is_dir()]
        entries = [e for d in dirs for e in d.iterdir()]
        assert len(entries) >= 20, (kind, entries)  # enough entries to need many shards
        assert len(dirs) <= 16, (kind, sorted(d.name for d in dirs))
        for e in entries:  # each in the directory of its key's first hex digit
            assert e.name.endswith(suffixes) and e.parent.name == e.name[0], e
    # and a second run reads them back: nothing asked of the index again
    before = len(world.log)
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1",
                *[f"helper{i}" for i in range(24)], "-o", str(tmp_path / "again.lock"))
    assert r.code == 0, r.err
    assert len(world.log) == before
    assert (tmp_path / "again.lock").read_text().split("[[", 1)[1] == \
        (tmp_path / "o.lock").read_text().split("[[", 1)[1]


@pytest.mark.parametrize("size", [0, 1, 4095, 4096, 1 << 20, (1 << 20) + 3, 3 << 20])
def test_an_entry_reads_back_byte_for_byte_at_any_size_and_a_limit_holds(
        tmp_path: Path, size: int) -> None:
    data = bytes(i % 251 for i in range(size))
    path = tmp_path / "a" / "entry"
    write_entry(tmp_path, path, data)
    assert read_entry(tmp_path, path) == data
    assert read_entry(tmp_path, path, limit=size) == data
    if size:
        with pytest.raises(OSError, match="larger than"):
            read_entry(tmp_path, path, limit=size - 1)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["entry"]  # no temporary left
