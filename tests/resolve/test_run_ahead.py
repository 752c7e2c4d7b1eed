"""Fetching ahead: a guess's dependencies as soon as its metadata arrives, and the likely
torch build's own closure while the torch walk reads the requirements'.

Against a real index on 127.0.0.1, one worker thread, so the order of requests is the
order of the queue. Each test waits for the request that only the behaviour under test
would make (bounded), and checks what must not have been asked.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Iterator, List

import pytest
from packaging.specifiers import SpecifierSet
from support.index_server import IndexServer
from support.torch_world import add_package, add_torch_release

from envlock.index.client import IndexClient
from envlock.index.config import IndexConfig
from envlock.platforms import Target
from envlock.resolve.closure import Finder, Req
from envlock.resolve.sources import SourcePolicy


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("ahead")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_package(pypi, tmp, "app", "1.0", ["lib", "torch==2.5.1"])
        add_package(pypi, tmp, "lib", "1.0", ["leaf"])
        add_package(pypi, tmp, "leaf", "1.0")
        add_torch_release(pypi, tmp, "2.5.1")
        yield srv


def _until(world: IndexServer, before: int, *wanted: str) -> List[str]:
    """The requests made since ``before``, once each of ``wanted`` is a substring of one
    of them (60 s at most)."""
    done = threading.Event()
    for _ in range(600):
        asked = world.requests()[before:]
        if all(any(w in p for p in asked) for w in wanted):
            return asked
        done.wait(0.1)
    raise AssertionError(f"{wanted} were not all asked for: {asked}")


def _pages(asked: List[str]) -> List[str]:
    return [p for p in asked if p.endswith("/")]


def _client(world: IndexServer, tmp_path: Path) -> IndexClient:
    return IndexClient(IndexConfig(index_url=world.url("pypi"), retries=0, timeout=10),
                       cache_dir=tmp_path / "cache", max_workers=1)


def test_a_guess_fetches_its_dependencies_as_its_metadata_arrives(
        world: IndexServer, tmp_path: Path) -> None:
    """Only app is asked for, and nothing waits for it: its dependency's dependency is
    still fetched, from the worker that read each metadata file. The torch walk's finder
    does not run ahead into the torch family (its own closure is the build's business)."""
    client = _client(world, tmp_path)
    try:
        finder = Finder(client, SourcePolicy(client.config, world.url("pypi")),
                        Target(python="3.11", platform="linux_x86_64"))
        finder.no_run_ahead = frozenset({"torch"})
        before = len(world.requests())
        finder.prefetch(Req("app", SpecifierSet()))
        pages = _pages(_until(world, before, "/pypi/simple/leaf/"))
        assert pages == ["/pypi/simple/app/", "/pypi/simple/lib/", "/pypi/simple/leaf/"]
    finally:
        client.close()


def test_the_closure_finder_runs_ahead_into_torch(world: IndexServer, tmp_path: Path) -> None:
    """The other half: without the walk's exclusion, app's torch==2.5.1 is fetched ahead too."""
    client = _client(world, tmp_path)
    try:
        finder = Finder(client, SourcePolicy(client.config, world.url("pypi")),
                        Target(python="3.11", platform="linux_x86_64"))
        before = len(world.requests())
        finder.prefetch(Req("app", SpecifierSet()))
        pages = _pages(_until(world, before, "/pypi/simple/leaf/", "/pypi/simple/torch/"))
        assert "/pypi/simple/torch/" in pages
    finally:
        client.close()


def _resolve_held(world: IndexServer, tmp_path: Path, wanted: str,
                  *args: str) -> "tuple[List[str], str]":
    """``envlock resolve ... app`` as a process, with the walk held at its last page (leaf)
    until ``wanted``, a part of the likely build's closure, has been asked for: (the
    requests made while the walk waited, the lock). A resolve that reads the build's closure only after the walk would
    never ask while it is held: the wait runs out (60 s) and the test fails."""
    import subprocess
    import sys

    from support.torch_world import clean_env

    gate = threading.Event()
    world.gates["/pypi/simple/leaf/"] = gate
    before = len(world.requests())
    env = clean_env({"ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "ENVLOCK_NO_REPLAY": "1"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "envlock", "resolve", "--index-url", world.url("pypi"),
         "--pytorch-index-url", f"{world.base}/pytorch", "--gpu", "H100 SXM", *args, "app",
         "-o", str(tmp_path / "o.lock")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        held = _until(world, before, "/pypi/simple/leaf/", wanted)
    finally:
        gate.set()
        del world.gates["/pypi/simple/leaf/"]
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return held, (tmp_path / "o.lock").read_text()


def test_a_pinned_torch_builds_closure_is_read_while_the_walk_waits(
        world: IndexServer, tmp_path: Path) -> None:
    held, lock = _resolve_held(world, tmp_path, "/torch-2.5.1-", "--torch", "==2.5.1")
    assert "/pypi/simple/leaf/" in held  # the walk is still waiting for it
    assert "/pypi/simple/torch/" in held
    assert any("/torch-2.5.1-" in p for p in held)  # its metadata, for its pins
    assert 'name = "leaf"' in lock and 'name = "torch"\nversion = "2.5.1"' in lock


def test_an_unpinned_guess_reads_pages_but_no_torch_metadata(
        world: IndexServer, tmp_path: Path) -> None:
    """Without --torch the walk may still change the build: only the pages its pins name
    (the same for any release) are read ahead, no torch page or metadata."""
    held, lock = _resolve_held(world, tmp_path, "/pypi/simple/triton/")
    assert "/pypi/simple/leaf/" in held
    assert not any("/torch" in p for p in held), held
