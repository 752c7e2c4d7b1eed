"""A status line on stderr for work that takes more than a second, only on a terminal.

Why a delay: a status that flashes for 50 ms is noise, and a pipe or a CI log must never
see carriage returns. :class:`Progress` prints nothing until ``delay`` seconds have passed
(a timer thread), then one line it rewrites in place, and erases it when done.

    with Progress(out, "smoke checks") as p:
        for check in checks:
            p.update(f"smoke: {check}")
            ...
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any, Optional, Type

__all__ = ["Progress"]


class Progress:
    def __init__(self, out: Any, text: str, *, delay: float = 1.0,
                 enabled: Optional[bool] = None) -> None:
        self.out = out
        self.text = text
        self.delay = delay
        self.enabled = bool(getattr(out, "stderr_is_tty", False)) if enabled is None \
            else enabled
        self._shown = ""
        self._lock = threading.Lock()
        self._start = time.monotonic()
        self._timer: Optional[threading.Timer] = None
        self._closed = False

    def __enter__(self) -> "Progress":
        if self.enabled:
            self._timer = threading.Timer(self.delay, self._show)
            self._timer.daemon = True
            self._timer.start()
        return self

    def update(self, text: str) -> None:
        self.text = text
        if self.enabled and time.monotonic() - self._start >= self.delay:
            self._show()

    def _show(self) -> None:
        with self._lock:
            if self._closed:  # the timer fired after the work ended: nothing to show
                return
            line = f"{self.text} ({time.monotonic() - self._start:.0f}s)"[:78]
            self.out.stderr.write("\r" + line.ljust(len(self._shown)))
            self.out.stderr.flush()
            self._shown = line

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            self._closed = True
            if self._shown:
                self.out.stderr.write("\r" + " " * len(self._shown) + "\r")
                self.out.stderr.flush()
                self._shown = ""
