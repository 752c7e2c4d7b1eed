"""The socket wrapper that holds every index read to the request's deadline.

Each read waits in short slices (so a cancel is seen quickly); setting a socket's timeout
is a system call, and every system call lets another thread take the GIL, so the slice is
set once and left in place between reads (two calls per read were ~6,000 in one cold
resolve). A send, which the slices are not for, gets the caller's own timeout back first.
"""

from __future__ import annotations

import socket
import threading
from typing import Any, Iterator, List, Optional, Tuple

import pytest

from envlock.index.deadline import Cancelled, RequestState, _DeadlineSocket, bind


class _Recording:
    """A real socket that records the timeouts set on it."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.set: List[Optional[float]] = []
        self.changed = threading.Event()

    def settimeout(self, value: Optional[float]) -> None:
        self.set.append(value)
        self.sock.settimeout(value)
        self.changed.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


@pytest.fixture
def pair() -> Iterator[Tuple[_Recording, socket.socket]]:
    a, b = socket.socketpair()
    a.settimeout(30.0)  # what urllib3 gives a connection: the read timeout
    try:
        yield _Recording(a), b
    finally:
        bind(None)
        a.close()
        b.close()


def test_reads_set_the_slice_once_not_twice_per_read(pair: Tuple[_Recording, socket.socket]
                                                     ) -> None:
    raw, peer = pair
    wrapped = _DeadlineSocket(raw)
    bind(RequestState(float("inf"), threading.Event()))
    peer.sendall(b"x" * 200)
    got = b"".join(wrapped.recv(1) for _ in range(200))
    assert got == b"x" * 200
    assert len(raw.set) == 1, raw.set  # was 400
    assert wrapped.gettimeout() == 30.0  # what the caller set, whatever the slice


def test_a_send_after_reads_has_the_callers_timeout_not_the_slice(
        pair: Tuple[_Recording, socket.socket]) -> None:
    raw, peer = pair
    wrapped = _DeadlineSocket(raw)
    bind(RequestState(float("inf"), threading.Event()))
    peer.sendall(b"y")
    assert wrapped.recv(1) == b"y"
    assert raw.sock.gettimeout() < 1.0  # reading: the slice
    wrapped.sendall(b"request")
    assert raw.sock.gettimeout() == 30.0
    assert peer.recv(100) == b"request"
    bind(None)  # a read with no request state: the caller's timeout too
    peer.sendall(b"z")
    assert wrapped.recv(1) == b"z" and raw.sock.gettimeout() == 30.0


def test_a_blocked_read_still_ends_on_cancel(pair: Tuple[_Recording, socket.socket]) -> None:
    raw, _peer = pair
    wrapped = _DeadlineSocket(raw)
    cancel = threading.Event()
    errors: List[BaseException] = []

    def reader() -> None:
        bind(RequestState(float("inf"), cancel))
        try:
            wrapped.recv(1)  # nothing will come
        except BaseException as exc:  # noqa: BLE001 - checked below
            errors.append(exc)

    t = threading.Thread(target=reader)
    t.start()
    assert raw.changed.wait(30)  # the read has set its slice: it is waiting
    cancel.set()
    t.join(30)
    assert not t.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], Cancelled)
