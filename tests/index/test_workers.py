"""The index client's workers: urgent work first, guesses last, a needed guess moved up."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, List, Tuple

import pytest
from support.index_server import IndexServer
from support.torch_world import add_package

from envlock.index.client import IndexClient
from envlock.index.config import IndexConfig
from envlock.index.workers import AHEAD, BULK, NEEDED, URGENT, Workers


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


def test_needed_work_first_then_urgent_then_bulk_then_ahead_each_in_order() -> None:
    pool = Workers(1)
    gate = _gated(pool)
    done: List[str] = []
    futs = [pool.submit(done.append, name, priority=p) for name, p in
            [("page-a", BULK), ("guess", AHEAD), ("meta-a", URGENT), ("page-b", BULK),
             ("waited-a", NEEDED), ("meta-b", URGENT), ("waited-b", NEEDED)]]
    gate.set()
    for f in futs:
        f.result(60)
    assert done == ["waited-a", "waited-b", "meta-a", "meta-b", "page-a", "page-b", "guess"]
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


def test_a_page_a_thread_blocks_on_is_fetched_before_urgent_work(world: IndexServer,
                                                                 tmp_path: Path) -> None:
    """``page()`` blocks its caller (the walk, the resolver): that fetch is on the
    critical path, so it is taken before metadata and pages asked for ahead (URGENT), even
    those asked first."""
    with _held_client(world, tmp_path) as (client, ix, gate):
        before = len(world.requests())
        ahead = client.prefetch_page(ix, "plain", URGENT)
        got: List[Any] = []
        waiter = threading.Thread(target=lambda: got.append(client.page(ix, "guessed")))
        waiter.start()
        key = ("page", ix, "guessed")
        deadline = time.monotonic() + 60
        while (key not in client._jobs or client._jobs[key].priority != NEEDED) \
                and time.monotonic() < deadline:
            waiter.join(0.01)  # until the blocked call has queued its fetch
        gate.set()
        waiter.join(60)
        assert got and got[0] is not None and ahead.result(60) is not None
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


def _running_together(pool: Workers, jobs: int, gate: threading.Event) -> Tuple[Any, Any]:
    """Submit ``jobs`` jobs that each wait for ``gate``; (a counter of those started, the
    condition notified as each starts) and their futures."""
    lock = threading.Lock()
    started = threading.Condition(lock)
    count = [0]

    def hold() -> None:
        with lock:
            count[0] += 1
            started.notify_all()
        gate.wait(60)

    futs = [pool.submit(hold) for _ in range(jobs)]
    return (count, started), futs


def _wait_for(count_and_cond: Tuple[Any, Any], n: int) -> None:
    count, cond = count_and_cond
    with cond:
        assert cond.wait_for(lambda: count[0] >= n, 60), f"only {count[0]} of {n} started"


def test_the_pool_grows_past_its_size_only_while_grow_says_so() -> None:
    """Three jobs held by a pool of 2 (most 4): two run and the third waits for a thread
    while ``grow`` is false (a fast network); once it is true (a slow one), each job
    submitted starts a thread of its own up to the most, and no more."""
    slow = [False]
    pool = Workers(2, most=4, grow=lambda: slow[0])
    gate = threading.Event()
    try:
        counter, futs = _running_together(pool, 3, gate)
        _wait_for(counter, 2)
        assert len(pool._threads) == 2  # the third job waits for a thread
        slow[0] = True
        more = [pool.submit(gate.wait, 60) for _ in range(3)]
        assert len(pool._threads) == 4  # two more, not three
        gate.set()
        for f in futs + more:
            f.result(60)
    finally:
        gate.set()
        pool.shutdown()


def test_a_slow_index_is_known_by_answers_on_open_connections(tmp_path: Path) -> None:
    """The round trip is read only from answers on a connection that answered before
    (a new one adds its handshake), and counts once four such answers came: an index
    that takes 30 ms to answer is slow (>= 10 ms); the client's pool may then grow to
    16 threads, as many connections as it keeps."""
    from envlock.index.client import MOST_WORKERS
    from envlock.index.http import SLOW_ROUND_TRIP
    from envlock.index.pools import CONNECTIONS

    assert MOST_WORKERS == CONNECTIONS
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        names = [f"p{i}" for i in range(6)]
        for name in names:
            add_package(pypi, tmp_path / "w", name, "1.0")
        srv.stall["/simple/"] = 3 * SLOW_ROUND_TRIP
        client = IndexClient(IndexConfig(index_url=srv.url("pypi"), retries=0, timeout=10),
                             cache_dir=None, max_workers=1)
        try:
            t = client.transport
            assert client._most_workers == 1  # an explicit limit stays the limit
            assert client.page(srv.url("pypi"), names[0]) is not None
            assert t.round_trip is None  # its connection was new
            for name in names[1:4]:
                assert client.page(srv.url("pypi"), name) is not None
            assert t.round_trip is not None and t.round_trip >= 3 * SLOW_ROUND_TRIP
            assert not t.slow_network()  # three answers on an open connection: not yet
            assert client.page(srv.url("pypi"), names[4]) is not None
            assert t.slow_network()
        finally:
            client.close()
        default = IndexClient(IndexConfig(index_url=srv.url("pypi")), cache_dir=None)
        try:
            assert default._most_workers == MOST_WORKERS >= default._max_workers
        finally:
            default.close()


def test_on_a_slow_index_the_client_keeps_more_requests_in_flight(tmp_path: Path) -> None:
    """End to end: once the index is known to be slow, the client has as many page
    requests waiting on it at once as it keeps connections (16), more than its
    CPU-based number of workers (8 on a machine of 4 cores or fewer)."""
    from envlock.index.client import MOST_WORKERS
    from envlock.index.http import SLOW_ROUND_TRIP

    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        warm = [f"w{i}" for i in range(5)]
        held = [f"q{i}" for i in range(MOST_WORKERS)]
        for name in warm + held:
            add_package(pypi, tmp_path / "w", name, "1.0")
        srv.stall["/simple/w"] = 3 * SLOW_ROUND_TRIP
        gate = threading.Event()
        srv.gates["/simple/q"] = gate
        ix = srv.url("pypi")
        client = IndexClient(IndexConfig(index_url=ix, retries=0, timeout=30), cache_dir=None)
        try:
            if client._max_workers >= MOST_WORKERS:
                pytest.skip("this machine's cores already give the client its most workers")
            for name in warm:
                assert client.page(ix, name) is not None
            assert client.transport.slow_network()
            futs = [client.prefetch_page(ix, name) for name in held]
            deadline = time.monotonic() + 60
            while (sum("/simple/q" in p for p in srv.requests()) < len(held)
                   and time.monotonic() < deadline):
                time.sleep(0.01)
            assert sum("/simple/q" in p for p in srv.requests()) == len(held)
            gate.set()
            assert all(f.result(60) is not None for f in futs)
        finally:
            gate.set()
            client.close()
