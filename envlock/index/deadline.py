"""A total deadline and a cancel switch for every socket read the index client makes, and
for the connect and TLS handshake before them.

A read timeout alone does not bound a request: an index that sends one byte a second never
trips it. ``requests`` has no total deadline, so the connections it opens get a socket
wrapper whose reads check the deadline of the request running on this thread, and wait in
short slices so that :meth:`RequestState.cancel` (Ctrl-C, ``IndexClient.close``) ends a
blocked read within a fraction of a second instead of when the server gives up.

Imported only when the network is used (it imports urllib3).
"""

from __future__ import annotations

import errno
import io
import os
import selectors
import socket
import sys
import threading
import time
from typing import Any, List, Optional, Tuple

from urllib3 import connection as _conn
from urllib3 import connectionpool as _pool
from urllib3 import exceptions as _exc
from urllib3.util import connection as _uconn

__all__ = ["RequestState", "DeadlineExceeded", "Cancelled", "bind", "current", "POOL_CLASSES"]

#: longest single wait inside a read, so a cancel is noticed quickly
_SLICE = 0.2

_local = threading.local()


class DeadlineExceeded(socket.timeout):
    """The request ran past its total deadline (a subclass of the timeout urllib3 expects,
    so it unwinds through requests like any read timeout)."""


class Cancelled(socket.timeout):
    """The request was cancelled from another thread."""


class RequestState:
    """The deadline of the request running on one thread, and the client's cancel switch."""

    def __init__(self, deadline: float, cancel: threading.Event) -> None:
        self.deadline = deadline
        self.cancel = cancel
        self.expired = False

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> float:
        """The seconds left, or :class:`Cancelled` / :class:`DeadlineExceeded` when the
        request was cancelled or its deadline has passed."""
        if self.cancel.is_set():
            raise Cancelled("cancelled")
        left = self.left()
        if left <= 0:
            self.expired = True
            raise DeadlineExceeded("total deadline passed")
        return left


def bind(state: Optional[RequestState]) -> None:
    """Make ``state`` govern socket reads on the calling thread (None: no deadline)."""
    _local.state = state


def current() -> Optional[RequestState]:
    return getattr(_local, "state", None)


class _DeadlineSocket:
    """A socket whose reads honour the calling thread's :class:`RequestState`."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._timeout: Optional[float] = sock.gettimeout()
        #: the timeout the socket has now: a read leaves its slice in place (setting a
        #: socket's timeout is a system call, and every system call hands the GIL to
        #: another thread: two per read were ~6,000 calls in a cold resolve); anything
        #: else that may block gets the caller's timeout back first
        self._applied: Optional[float] = self._timeout

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def settimeout(self, value: Optional[float]) -> None:
        self._timeout = value
        self._apply(value)

    def _apply(self, value: Optional[float]) -> None:
        if value != self._applied:
            self._sock.settimeout(value)
            self._applied = value

    def sendall(self, data: Any, *args: Any) -> Any:
        self._apply(self._timeout)
        return self._sock.sendall(data, *args)

    def send(self, data: Any, *args: Any) -> Any:
        self._apply(self._timeout)
        return self._sock.send(data, *args)

    def gettimeout(self) -> Optional[float]:
        return self._timeout

    def makefile(self, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        if mode == "rb":
            raw = socket.SocketIO(self, "rb")  # type: ignore[arg-type]
            self._sock._io_refs += 1
            return io.BufferedReader(raw, io.DEFAULT_BUFFER_SIZE)
        return self._sock.makefile(mode, *args, **kwargs)

    def _wait(self, op: Any, *args: Any) -> Any:
        state = current()
        if state is None:
            self._apply(self._timeout)
            return op(*args)
        patience = self._timeout
        waited = 0.0
        while True:
            left = state.check()
            step = min(_SLICE, left)
            if patience is not None:
                step = min(step, max(patience - waited, 0.0))
                if step <= 0:
                    raise socket.timeout("timed out")
            self._apply(step)
            try:
                return op(*args)
            except socket.timeout:
                waited += step

    def recv_into(self, buffer: Any, nbytes: int = 0, flags: int = 0) -> int:
        return int(self._wait(self._sock.recv_into, buffer, nbytes, flags))

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        return bytes(self._wait(self._sock.recv, bufsize, flags))


def _connect_within(conn: Any, connect: Any) -> None:
    """Run ``connect`` (TCP connect, and for HTTPS the TLS handshake) with its timeout cut
    to what is left of the calling thread's deadline.

    A server that drips the handshake a byte at a time resets every per-operation timeout;
    CPython bounds a whole ``connect()`` and a whole TLS handshake by the socket's timeout,
    so a timeout no longer than the time left makes the deadline hold here too. The
    original timeout comes back afterwards for the request's own reads.
    """
    state = current()
    if state is None:
        connect()
        return
    left = state.check()
    original = conn.timeout
    numeric = original is None or isinstance(original, (int, float))
    conn.timeout = left if not numeric or original is None else min(float(original), left)
    conn._envlock_cancel = state.cancel
    try:
        connect()
    except OSError:  # socket.timeout and the SSL errors are OSErrors
        if state.left() <= 0.05:  # the cut timeout fired: report the deadline, not a timeout
            state.expired = True
        raise
    finally:
        conn.timeout = original
        conn._envlock_cancel = None
    if numeric and conn.sock is not None:
        conn.sock.settimeout(original)


class _CancelWatch:
    """Shuts a connecting socket down when the request is cancelled, so a TLS handshake
    blocked inside the ssl module (which no socket wrapper can reach) ends at once: Ctrl-C
    must not wait out the connect timeout. The watch holds a duplicate of the socket,
    because wrapping it for TLS detaches the original object."""

    def __init__(self, sock: socket.socket, cancel: threading.Event) -> None:
        self._dup = sock.dup()
        self._cancel = cancel
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="envlock-connect-watch",
                                        daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(_SLICE):
            if self._cancel.is_set():
                try:
                    self._dup.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return

    def stop(self) -> None:
        self._done.set()
        self._thread.join()
        self._dup.close()


_IN_PROGRESS = {errno.EINPROGRESS, errno.EALREADY, errno.EWOULDBLOCK, errno.EINTR}


def _connect_polling(sock: socket.socket, address: Any, timeout: Optional[float],
                     cancel: threading.Event) -> None:
    """``sock.connect(address)`` in slices, ending at once when ``cancel`` is set.

    A blocking ``connect()`` cannot be woken from another thread: towards a host that
    drops SYNs (a firewall, a listen queue that is full) the worker sat in it for the whole
    connect timeout, and an interrupted process waited for that worker before exiting.
    """
    sock.setblocking(False)
    rc = sock.connect_ex(address)
    end = None if timeout is None else time.monotonic() + timeout
    with selectors.DefaultSelector() as sel:
        sel.register(sock, selectors.EVENT_WRITE)
        while rc in _IN_PROGRESS:
            if cancel.is_set():
                raise Cancelled("cancelled")
            wait = _SLICE if end is None else min(_SLICE, end - time.monotonic())
            if wait <= 0:
                raise socket.timeout("timed out")
            if sel.select(wait):
                rc = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    if rc != 0:
        raise OSError(rc, os.strerror(rc))


def _lookup(host: str, port: int, limit: Optional[float],
            cancel: threading.Event) -> List[Any]:
    """``socket.getaddrinfo`` for a connect, ended by a cancel, the request's total deadline
    or the connect timeout, whichever comes first.

    A name lookup blocks inside the C library, where no signal or other thread reaches it:
    behind a DNS server that does not answer, Ctrl-C waited for the lookup to give up (20 s
    measured with a resolver that took 20 s, for as long as it takes in general). So the
    lookup runs on a daemon thread of its own, which an exiting process does not wait for,
    and this thread waits for it in slices. A numeric address needs no lookup.
    """
    family = _uconn.allowed_gai_family()
    try:
        return socket.getaddrinfo(host, port, family, socket.SOCK_STREAM, 0,
                                  socket.AI_NUMERICHOST)
    except socket.gaierror:
        pass  # a name: look it up
    found: List[Any] = []
    failed: List[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            found.extend(socket.getaddrinfo(host, port, family, socket.SOCK_STREAM))
        except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, name="envlock-dns", daemon=True).start()
    state = current()
    end = None if limit is None else time.monotonic() + limit
    while not done.wait(_SLICE):
        if cancel.is_set():
            raise Cancelled("cancelled")
        if state is not None:
            state.check()  # the request's total deadline
        if end is not None and time.monotonic() >= end:
            raise socket.timeout(f"looking up {host} took longer than {limit:g} s")
    if failed:
        raise failed[0]
    return found


def _create_connection(address: Tuple[str, int], timeout: Any, source_address: Any,
                       socket_options: Any, cancel: threading.Event) -> socket.socket:
    """urllib3's ``create_connection`` (same address families, options and errors), with
    a connect that a cancel ends within :data:`_SLICE` seconds."""
    host, port = address
    if host.startswith("["):
        host = host.strip("[]")
    try:
        host.encode("idna")
    except UnicodeError:
        raise _exc.LocationParseError(f"'{host}', label empty or too long") from None
    numeric = timeout is None or isinstance(timeout, (int, float))
    limit = float(timeout) if numeric and timeout is not None else socket.getdefaulttimeout()
    err: Optional[OSError] = None
    for af, socktype, proto, _, sa in _lookup(host, port, limit, cancel):
        sock = socket.socket(af, socktype, proto)
        try:
            _uconn._set_socket_options(sock, socket_options)
            if source_address:
                sock.bind(source_address)
            _connect_polling(sock, sa, limit, cancel)
            sock.settimeout(timeout if numeric else socket.getdefaulttimeout())
            return sock
        except Cancelled:
            sock.close()
            raise
        except OSError as exc:
            err = exc
            sock.close()
    raise err if err is not None else OSError("getaddrinfo returns an empty list")


def _new_conn_cancellable(conn: Any) -> socket.socket:
    """urllib3's ``HTTPConnection._new_conn`` with :func:`_create_connection`, raising
    the same urllib3 errors, so requests reports a refused or timed-out connect as before."""
    cancel = conn._envlock_cancel
    try:
        sock = _create_connection((conn._dns_host, conn.port), conn.timeout,
                                  conn.source_address, conn.socket_options, cancel)
    except socket.gaierror as exc:
        if hasattr(_exc, "NameResolutionError"):  # urllib3 2
            raise _exc.NameResolutionError(conn.host, conn, exc) from exc
        raise _exc.NewConnectionError(
            conn, f"Failed to establish a new connection: {exc}") from exc
    except socket.timeout as exc:
        raise _exc.ConnectTimeoutError(
            conn, f"Connection to {conn.host} timed out. (connect timeout={conn.timeout})"
        ) from exc
    except OSError as exc:
        raise _exc.NewConnectionError(
            conn, f"Failed to establish a new connection: {exc}") from exc
    sys.audit("http.client.connect", conn, conn.host, conn.port)
    return sock


def _watched(conn: Any, new_conn: Any) -> Any:
    """The connection's socket, its connect and then its TLS handshake watched for a
    cancel until :func:`_connect_within` ends."""
    cancel = getattr(conn, "_envlock_cancel", None)
    if cancel is None:
        return new_conn()
    sock = _new_conn_cancellable(conn)
    conn._envlock_watch = _CancelWatch(sock, cancel)
    return sock


def _unwatch(conn: Any) -> None:
    watch = getattr(conn, "_envlock_watch", None)
    conn._envlock_watch = None
    if watch is not None:
        watch.stop()


# The classes keep urllib3's names: they appear in error messages users see.
class HTTPConnection(_conn.HTTPConnection):
    def _new_conn(self) -> socket.socket:
        return _watched(self, super()._new_conn)

    def connect(self) -> None:
        try:
            _connect_within(self, super().connect)
        finally:
            _unwatch(self)
        self.sock = _DeadlineSocket(self.sock)  # type: ignore[assignment,unused-ignore]


class HTTPSConnection(_conn.HTTPSConnection):
    def _new_conn(self) -> socket.socket:
        return _watched(self, super()._new_conn)

    def connect(self) -> None:
        try:
            _connect_within(self, super().connect)
        finally:
            _unwatch(self)
        self.sock = _DeadlineSocket(self.sock)  # type: ignore[assignment,unused-ignore]


class HTTPConnectionPool(_pool.HTTPConnectionPool):
    ConnectionCls = HTTPConnection


class HTTPSConnectionPool(_pool.HTTPSConnectionPool):
    ConnectionCls = HTTPSConnection


#: for ``PoolManager.pool_classes_by_scheme``
POOL_CLASSES = {"http": HTTPConnectionPool, "https": HTTPSConnectionPool}
