"""What a fact's value can be: exact, bounded, known absent, or unknown.

* an exact value is a plain Python value (``"12.1.3.1"``, ``2``, ``["h20"]``);
* ``None`` is a thing known to be absent (a package not installed, an unset variable);
* :data:`UNKNOWN` is a thing nobody told us;
* a :class:`Bound` is a version known to lie in a half-open range ``[lo, hi)`` (cuBLAS of a
  CUDA 12.6 build: ``[12.6.0.22, 13)``); a :class:`OneOf` is one of a few candidates.

A comparison on a bounded value is decided when every value inside the bound gives the
same answer, and is unknown otherwise (see :mod:`envlock.knowledge.evaluate`). Where a value
came from (probe, snapshot, log line, a derivation and from what) is kept beside it by
:class:`~envlock.knowledge.facts.Facts`, not inside it, so exact values stay plain.

>>> b = Bound("12.6.0.22", "13")
>>> str(b), b.contains("12.6.4.1"), b.contains("12.1.3.1"), b.contains("13.0")
('[12.6.0.22, 13)', True, False, False)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Optional, Tuple

from packaging.version import InvalidVersion, Version

__all__ = ["UNKNOWN", "Bound", "OneOf", "is_partial"]


class _Unknown:
    """The machine did not tell us (a missing probe, a stated build host, no torch)."""

    _instance: Optional["_Unknown"] = None

    def __new__(cls) -> "_Unknown":
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Any = _Unknown()


@lru_cache(maxsize=4096)
def _v(text: str) -> Optional[Version]:
    try:
        return Version(text)
    except InvalidVersion:
        return None


@dataclass(frozen=True)
class Bound:
    """A version known to lie in ``[lo, hi)``; either end may be open (None).

    Built by derivation rules (a CUDA line's component range), never from a tag's text.
    Only release versions are meant to lie inside (the libraries bounded are released ones),
    so a pre-release at ``hi`` is not taken to be inside.
    """

    lo: Optional[str]
    hi: Optional[str]

    def __post_init__(self) -> None:
        for end in (self.lo, self.hi):
            if end is not None and _v(end) is None:
                raise ValueError(f"not a version: {end!r}")

    @property
    def low(self) -> Optional[Version]:
        return _v(self.lo) if self.lo is not None else None

    @property
    def high(self) -> Optional[Version]:
        return _v(self.hi) if self.hi is not None else None

    def contains(self, version: str) -> bool:
        v = _v(version)
        if v is None:
            return False
        lo, hi = self.low, self.high
        return (lo is None or v >= lo) and (hi is None or v < hi)

    def __str__(self) -> str:
        return f"[{self.lo or '-inf'}, {self.hi or 'inf'})"


@dataclass(frozen=True)
class OneOf:
    """One of a few candidate values (a GPU name that matches two matrix rows)."""

    values: Tuple[Any, ...]

    def __str__(self) -> str:
        return "{" + ", ".join("absent" if v is None else str(v) for v in self.values) + "}"


def is_partial(value: Any) -> bool:
    """Whether a value is bounded rather than exact (a :class:`Bound` or :class:`OneOf`)."""
    return isinstance(value, (Bound, OneOf))
