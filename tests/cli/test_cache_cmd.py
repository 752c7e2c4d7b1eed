"""``envlock cache``: a cache filled by real index reads (a loopback index), then pruned
and cleaned. Prune must remove exactly what this envlock never reads again (a warm read
afterwards asks the index nothing), clean every envlock entry and nothing else, and
neither may follow a link out of the cache."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from envlock.index import IndexClient, IndexConfig
from support.cli import run_cli
from support.index_server import IndexServer, make_wheel


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    cache = tmp_path / "cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(cache))
    monkeypatch.delenv("ENVLOCK_NO_CACHE", raising=False)
    with IndexServer() as srv:
        idx = srv.add_index("pypi")
        idx.add(make_wheel(tmp_path / "w", "demo", "1.0"))
        yield srv, idx, cache, tmp_path


def _read_page(srv: IndexServer, cache: Path, refresh: bool = False) -> None:
    cfg = IndexConfig(index_url=srv.url("pypi"))
    with IndexClient(cfg, cache_dir=cache, refresh=refresh) as c:
        assert c.page(srv.url("pypi"), "demo") is not None


def _parsed_pages(cache: Path) -> set:
    return {p.name for p in (cache / "pages").glob("*.json")}


def test_prune_removes_the_parsed_form_of_a_page_fetched_again_and_keeps_the_live_one(
        world) -> None:
    srv, idx, cache, tmp = world
    _read_page(srv, cache)                # fetched, cached
    _read_page(srv, cache)                # read back from the cache: its parsed form stored
    first = _parsed_pages(cache)
    assert len(first) == 1
    idx.add(make_wheel(tmp / "w", "demo", "2.0"))  # the page's bytes change
    _read_page(srv, cache, refresh=True)  # fetched again
    _read_page(srv, cache)                # and its new parsed form stored
    both = _parsed_pages(cache)
    assert len(both) == 2 and first < both

    info = run_cli("cache", "info", "--json")
    assert info.code == 0, info.err
    pages = next(k for k in json.loads(info.out)["kinds"] if k["kind"] == "pages")
    assert pages["files"] == 2 and pages["stale_files"] == 1

    r = run_cli("cache", "prune")
    assert r.code == 0, r.err
    assert "removed 1 files" in r.out
    assert _parsed_pages(cache) == both - first
    # the live form is still read: the warm read asks the index nothing
    asked = len(srv.requests())
    _read_page(srv, cache)
    assert len(srv.requests()) == asked


def test_prune_removes_an_older_layout_and_interrupted_writes_only(world) -> None:
    srv, _idx, cache, _tmp = world
    _read_page(srv, cache)
    # what an envlock before the 16-directory layout left, and a write killed long ago
    (cache / "http" / "ab").mkdir(parents=True)
    (cache / "http" / "ab" / ("0" * 64 + ".body")).write_bytes(b"old page")
    (cache / "metadata" / "0f").mkdir(parents=True)
    (cache / "metadata" / "0f" / "x.metadata").write_bytes(b"Name: old\n")
    shard = next(p for p in (cache / "http").iterdir() if len(p.name) == 1)
    old_tmp = shard / ".k.body.abc1.tmp"
    old_tmp.write_bytes(b"half")
    an_hour_ago = time.time() - 7200
    os.utime(old_tmp, (an_hour_ago, an_hour_ago))
    young_tmp = shard / ".k.body.abc2.tmp"  # a write that may be in progress
    young_tmp.write_bytes(b"half")
    (cache / "matrix-0123456789abcdef01234567.json").write_bytes(b"{}")  # another version's
    kept = {p for p in cache.rglob("*") if p.is_file()} - {
        old_tmp, cache / "matrix-0123456789abcdef01234567.json",
        cache / "http" / "ab" / ("0" * 64 + ".body"), cache / "metadata" / "0f" / "x.metadata"}

    dry = run_cli("cache", "prune", "--dry-run")
    assert dry.code == 0 and "would remove 4 files" in dry.out
    assert (cache / "http" / "ab").exists()
    r = run_cli("cache", "prune")
    assert r.code == 0, r.err
    assert not (cache / "http" / "ab").exists() and not (cache / "metadata" / "0f").exists()
    assert not old_tmp.exists() and young_tmp.exists()
    assert {p for p in cache.rglob("*") if p.is_file()} == kept
    again = run_cli("cache", "prune")
    assert again.code == 0 and "nothing to remove" in again.out


def test_clean_removes_envlock_entries_and_nothing_else(world) -> None:
    srv, _idx, cache, tmp = world
    _read_page(srv, cache)
    _read_page(srv, cache)
    (cache / "notes.txt").write_text("mine")        # not envlock's: stays
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "precious").write_text("keep")
    (cache / "replay").symlink_to(outside, target_is_directory=True)  # a planted link
    (cache / "pages" / "link.json").symlink_to(outside / "precious")
    r = run_cli("cache", "clean", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["files"] > 0
    assert sorted(p.name for p in cache.iterdir()) == ["notes.txt"]
    assert (outside / "precious").read_text() == "keep"  # never followed
    # the next read fetches again and works
    asked = len(srv.requests())
    _read_page(srv, cache)
    assert len(srv.requests()) > asked


def test_cache_dir_and_a_cache_turned_off(world, monkeypatch: pytest.MonkeyPatch) -> None:
    _srv, _idx, cache, _tmp = world
    r = run_cli("cache", "dir")
    assert r.code == 0 and r.out.strip() == str(cache)
    assert json.loads(run_cli("cache", "dir", "--json").out) == {"directory": str(cache)}
    monkeypatch.setenv("ENVLOCK_NO_CACHE", "1")
    for sub in ("dir", "info", "prune", "clean"):
        r = run_cli("cache", sub)
        assert r.code == 2 and "caching is off" in r.err and r.out == ""
        j = run_cli("cache", sub, "--json")  # a script parsing stdout still gets JSON
        assert j.code == 2 and json.loads(j.out)["exit_code"] == 2
    assert run_cli("cache").code == 2  # no subcommand: usage


def test_info_of_a_cache_that_does_not_exist_yet(world) -> None:
    _srv, _idx, cache, _tmp = world
    assert not cache.exists()
    r = run_cli("cache", "info")
    assert r.code == 0 and "total" in r.out and "0 files" in r.out
    assert run_cli("cache", "clean").code == 0
    assert not cache.exists()  # nothing made
