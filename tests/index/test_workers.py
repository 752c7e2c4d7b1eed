"""The index client's workers: urgent work first, guesses last, a needed guess moved up."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest
from support.index_server import IndexServer
from support.torch_world import add_package

from envlock.index.client import IndexClient
from envlock.index.config import IndexConfig
from envlock.index.workers import AHEAD, BULK, URGENT, Workers


def _gated(pool: Workers) -> threading.Event:
    """Occupy the pool's only thread until the returned event is set."""
    gate = threading.Event()
    running = threading.Event()

    def hold() -> None:
        running.set()
        gate.wait(60)

    pool.submit(hold)
    assert running.wait(60)
    return gate


def test_urgent_work_first_then_bulk_then_ahead_each_in_order() -> None:
    pool = Workers(1)
    gate = _gated(pool)
    done: List[str] = []
    futs = [pool.submit(done.append, name, priority=p) for name, p in
            [("page-a", BULK), ("guess", AHEAD), ("meta-a", URGENT), ("page-b", BULK),
             ("meta-b", URGENT)]]
    gate.set()
    for f in futs:
        f.result(60)
    assert done == ["meta-a", "meta-b", "page-a", "page-b", "guess"]
    pool.shutdown()


def test_shutdown_cancels_what_waits_and_refuses_more() -> None:
    pool = Workers(1)
    gate = _gated(pool)
    waiting = pool.submit(lambda: "never")
    pool.shutdown()
    gate.set()
    assert waiting.cancelled()
    with pytest.raises(RuntimeError):
        pool.submit(lambda: None)


def test_an_exception_reaches_the_future() -> None:
    pool = Workers(2)

    def boom() -> None:
        raise ValueError("index said no")

    with pytest.raises(ValueError, match="index said no"):
        pool.submit(boom).result(60)
    pool.shutdown()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("workers")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        for name in ("guessed", "plain"):
            add_package(pypi, tmp, name, "1.0")
        yield srv


@contextmanager
def _held_client(world: IndexServer, tmp_path: Path) -> Iterator[Tuple[IndexClient, str,
                                                                      threading.Event]]:
    """A client with one worker, held busy until the event is set: what is asked for
    meanwhile queues, and runs in the queue's order once it is set."""
    ix = world.url("pypi")
    client = IndexClient(IndexConfig(index_url=ix, retries=0, timeout=10),
                         cache_dir=tmp_path / "cache", max_workers=1)
    gate = threading.Event()
    try:
        job = _gated_job(gate)
        client._submit(job)
        assert job.running.wait(60)
        yield client, ix, gate
    finally:
        gate.set()
        client.close()


def _gated_job(gate: threading.Event) -> Any:
    running = threading.Event()

    def hold() -> None:
        running.set()
        gate.wait(60)

    hold.running = running  # type: ignore[attr-defined]
    return hold


def _pages_fetched(world: IndexServer, before: int) -> List[str]:
    return [p for p in world.requests()[before:] if p.endswith("/")]


def test_a_guess_that_becomes_needed_is_fetched_before_bulk_work(world: IndexServer,
                                                                 tmp_path: Path) -> None:
    """A page asked for as a guess (AHEAD) waits behind every other page; once a thread
    waits for it, it moves up: fetched before a page asked for in between."""
    with _held_client(world, tmp_path) as (client, ix, gate):
        before = len(world.requests())
        guessed = client.prefetch_page(ix, "guessed", AHEAD)
        plain = client.prefetch_page(ix, "plain", BULK)
        client.prefetch_page(ix, "guessed", URGENT)  # now needed
        gate.set()
        assert guessed.result(60) is not None and plain.result(60) is not None
        assert _pages_fetched(world, before) == ["/pypi/simple/guessed/", "/pypi/simple/plain/"]


def test_without_the_need_the_guess_waits_behind_bulk_work(world: IndexServer,
                                                           tmp_path: Path) -> None:
    """The other half of the test above: the order it checks is not the order of asking."""
    with _held_client(world, tmp_path) as (client, ix, gate):
        before = len(world.requests())
        guessed = client.prefetch_page(ix, "guessed", AHEAD)
        plain = client.prefetch_page(ix, "plain", BULK)
        gate.set()
        assert guessed.result(60) is not None and plain.result(60) is not None
        assert _pages_fetched(world, before) == ["/pypi/simple/plain/", "/pypi/simple/guessed/"]
