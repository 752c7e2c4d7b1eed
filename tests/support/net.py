"""Loopback ports for tests: never fixed numbers (other tests and engineers share the
machine), always one the kernel just handed out."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on when this returns: bound to learn
    it, closed again at once. A test either listens on it next (a store, a rendezvous) or
    points a client at it to stand for an unreachable server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
