"""The index client's worker threads: small requests before large ones.

A resolve asks for two kinds of work: project pages (some are megabytes: regex, numpy,
torch) and metadata (a few kilobytes, or a range read). Each metadata answer names the
next pages to ask for, so it is on the critical path; a page mostly is not. With one
first-in, first-out queue, a metadata request waited behind every page queued before it
(measured on torch + transformers + accelerate + datasets, cold: huggingface-hub's
metadata was asked for 250 ms after its page arrived, while 8 workers read other pages).
So the queue has levels: :data:`NEEDED` work (what a thread is blocked on now: the
walk's or the resolver's next page or metadata file) is taken first, then :data:`URGENT`
work (metadata asked ahead, and the quick guesses that lead to it), then :data:`BULK`
work (pages asked ahead), and :data:`AHEAD` work (a guess at the torch build's own
closure, made while the walk reads the requirements) only when nothing else waits;
within a level, first come, first served.

Threads are started as work arrives, up to the limit (and beyond it, up to a second
limit, while ``grow`` says so: on a slow network more requests in flight hide more round
trips, while on a fast one every extra thread only contends for the GIL), and are
daemons: :meth:`shutdown` drops queued work (its futures are cancelled) and the
transport's cancel ends reads in flight, so nothing waits for a slow index when a
resolve ends or fails.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from concurrent.futures import Future
from typing import Any, Callable, Deque, List, Optional, Tuple

__all__ = ["NEEDED", "URGENT", "BULK", "AHEAD", "Workers"]

#: taken before anything else: a fetch a thread is blocked on. (Measured, vllm 0.8.5 cold
#: through a proxy adding 30 ms of round trip: the walk's next page, moved up only to
#: URGENT, waited there behind metadata guessed ahead: 0.5-2 s from its ask to its fetch.)
NEEDED = -1
#: taken next: metadata asked ahead, and the guesses that lead to it
URGENT = 0
#: taken when nothing urgent waits: project pages
BULK = 1
#: taken when nothing else waits: guesses whose answers are needed only later
AHEAD = 2

_Job = Tuple[Future, Callable[..., Any], Tuple[Any, ...]]


class Workers:
    """At most ``size`` threads serving work by priority (see the module docstring).

    Each level is a deque; a C-level ``SimpleQueue`` carries one token per job, so an idle
    worker blocks without Python-level condition variables (a pure-Python priority queue
    cost measurably more lock hand-offs between threads) and, once woken, takes the most
    urgent job waiting, whichever level the token came with."""

    def __init__(self, size: int, name: str = "envlock", *, most: Optional[int] = None,
                 grow: Optional[Callable[[], bool]] = None) -> None:
        self._size = max(1, size)
        #: threads allowed while ``grow()`` is true (see the module docstring)
        self._most = max(self._size, most or self._size)
        self._grow = grow
        self._name = name
        self._levels: Tuple[Deque[_Job], ...] = (deque(), deque(), deque(), deque())
        self._tokens: "queue.SimpleQueue[Optional[int]]" = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: List[threading.Thread] = []
        #: threads waiting for a token: a new thread starts only when none waits (as
        #: ThreadPoolExecutor): every extra thread contends for the GIL on each read
        self._idle = 0
        self._closed = False

    def submit(self, fn: Callable[..., Any], *args: Any, priority: int = BULK) -> Future:
        """Queue ``fn(*args)``; its future. RuntimeError once shut down (as
        ThreadPoolExecutor: a callback that queues more work after the end learns so)."""
        fut: Future = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("cannot schedule new work after shutdown")
            self._levels[min(max(priority, NEEDED), AHEAD) - NEEDED].append((fut, fn, args))
            if self._idle > 0:
                self._idle -= 1  # that thread takes this job
            elif len(self._threads) < self._size or (
                    len(self._threads) < self._most and self._grow is not None
                    and self._grow()):
                t = threading.Thread(target=self._work, args=(True,), daemon=True,
                                     name=f"{self._name}_{len(self._threads)}")
                self._threads.append(t)
                t.start()
        self._tokens.put(1)
        return fut

    def shutdown(self) -> None:
        """Drop queued work (cancelling its futures) and let the threads end."""
        with self._lock:
            self._closed = True
            dropped: List[_Job] = []
            for level in self._levels:
                while level:
                    try:
                        dropped.append(level.popleft())
                    except IndexError:
                        break
            for _ in self._threads:
                self._tokens.put(None)
        for fut, _, _ in dropped:
            fut.cancel()

    def _next(self) -> Optional[_Job]:
        for level in self._levels:
            try:
                return level.popleft()
            except IndexError:
                continue
        return None

    def _work(self, assigned: bool) -> None:
        """``assigned``: started for a job already queued (not idle for the next one)."""
        while True:
            if not assigned:
                with self._lock:
                    self._idle += 1
            assigned = False
            if self._tokens.get() is None:
                return
            job = self._next()
            if job is None:
                continue  # (its job was dropped by shutdown)
            fut, fn, args = job
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args)
            except BaseException as exc:  # noqa: BLE001 - the future carries it to its reader
                fut.set_exception(exc)
            else:
                fut.set_result(result)
            del fut, fn, args, job  # no reference kept to a finished job's data while idle
