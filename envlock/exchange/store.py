"""A c10d store as the exchange uses it: byte counts, and no wait without a deadline.

c10d's own ``wait`` holds the thread in C++ until its timeout (the store's default is the
process group's: 30 minutes), where Python's signal handlers cannot run. Here every wait
ends at a monotonic deadline, in slices of at most a second, so a late or dead peer costs
the deadline and no more, and SIGTERM or Ctrl-C is handled at once.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any, List, Optional, Sequence

__all__ = ["Store", "WAIT_SLICE_S"]

#: the longest single c10d wait (signals are handled between two)
WAIT_SLICE_S = 1.0


class Store:
    """Wraps a c10d store (``TCPStore``, ``PrefixStore``, torch.distributed's default
    store); counts the bytes of keys and values this rank sends and receives (payload
    only; the store's framing adds a few bytes per request). ``prefix`` is only counted:
    wrap the store in a ``PrefixStore`` to apply it."""

    def __init__(self, store: Any, prefix: str = "") -> None:
        self.store = store
        self.k = len(prefix) + 1 if prefix else 0
        self.sent = 0
        self.received = 0

    def _keys(self, keys: Sequence[str]) -> None:
        self.sent += sum(self.k + len(k) for k in keys)

    def set(self, key: str, value: bytes) -> None:
        self._keys([key])
        self.sent += len(value)
        self.store.set(key, value)

    def get(self, key: str) -> bytes:
        """The value of a key known to exist (c10d's get waits for a missing one)."""
        self._keys([key])
        value = bytes(self.store.get(key))
        self.received += len(value)
        return value

    def multi_get(self, keys: Sequence[str]) -> List[bytes]:
        if not keys:
            return []
        self._keys(keys)
        getter = getattr(self.store, "multi_get", None)
        if getter is not None:
            values = [bytes(v) for v in getter(list(keys))]
        else:  # stores without multi_get (older torch, some wrappers)
            values = [bytes(self.store.get(k)) for k in keys]
        self.received += sum(len(v) for v in values)
        return values

    def check(self, keys: Sequence[str]) -> bool:
        self._keys(keys)
        return bool(self.store.check(list(keys)))

    def wait(self, keys: Sequence[str], deadline: float, unless: Optional[str] = None) -> bool:
        """True when every key exists before ``deadline`` (monotonic seconds); False at
        the deadline, or as soon as the key ``unless`` exists."""
        if not keys:
            return True
        if deadline - time.monotonic() <= 0:
            return self.check(keys)
        self._keys(keys)
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                self.store.wait(list(keys), timedelta(seconds=min(remaining, WAIT_SLICE_S)))
                return True
            except RuntimeError as exc:  # DistStoreError: this slice ran out
                if "timeout" not in str(exc).lower():
                    raise
            if unless is not None and self.store.check([unless]):
                return False

    def present(self, keys: Sequence[str]) -> List[str]:
        """The keys that exist (after a wait ran out): one check per key."""
        return [k for k in keys if self.check([k])]
