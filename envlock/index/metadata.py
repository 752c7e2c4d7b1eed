"""Core metadata (the METADATA / PKG-INFO file) as a small value.

Parsing is lenient on purpose: real indexes carry metadata that a strict validator
rejects (odd Requires-Dist spellings from 2019); we keep what parses and record the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from email.parser import BytesHeaderParser
from functools import lru_cache
from typing import List, Optional, Tuple

from packaging.requirements import InvalidRequirement, Requirement

__all__ = ["Metadata", "parse_metadata"]


@dataclass(frozen=True)
class Metadata:
    name: str
    version: str
    requires_dist: Tuple[str, ...]
    requires_python: Optional[str]
    provides_extra: Tuple[str, ...]
    dynamic: Tuple[str, ...]
    metadata_version: str
    unparsed: Tuple[str, ...] = ()

    def requirements(self) -> List[Requirement]:
        return [r for r in (_requirement(t) for t in self.requires_dist) if r is not None]


@lru_cache(maxsize=1 << 14)
def _requirement(text: str) -> Optional[Requirement]:
    """One parse per distinct Requires-Dist string (they repeat across versions); the
    result is shared, so callers must not mutate it."""
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def parse_metadata(blob: bytes) -> Metadata:
    msg = BytesHeaderParser().parsebytes(blob)
    reqs = tuple(v.strip() for v in (msg.get_all("Requires-Dist") or []))
    bad = [r for r in reqs if _requirement(r) is None]
    return Metadata(
        name=(msg.get("Name") or "").strip(),
        version=(msg.get("Version") or "").strip(),
        requires_dist=reqs,
        requires_python=(msg.get("Requires-Python") or "").strip() or None,
        provides_extra=tuple(v.strip() for v in (msg.get_all("Provides-Extra") or [])),
        dynamic=tuple(v.strip() for v in (msg.get_all("Dynamic") or [])),
        metadata_version=(msg.get("Metadata-Version") or "").strip(),
        unparsed=tuple(bad),
    )
