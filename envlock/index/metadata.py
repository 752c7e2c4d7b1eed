"""Core metadata (the METADATA / PKG-INFO file) as a small value.

Parsing is lenient on purpose: real indexes carry metadata that a strict validator
rejects (odd Requires-Dist spellings from 2019); we keep what parses and record the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from email.parser import BytesHeaderParser
from functools import lru_cache
from typing import AbstractSet, List, Optional, Tuple

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

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

    @property
    def unparsed(self) -> Tuple[str, ...]:
        """The Requires-Dist lines that do not parse (left out of :meth:`requirements`)."""
        return tuple(t for t in self.requires_dist if _requirement(t) is None)

    def requirements(self) -> List[Requirement]:
        return [r for r in (_requirement(t) for t in self.requires_dist) if r is not None]

    def requirements_for(self, extras: AbstractSet[str]) -> List[Requirement]:
        """:meth:`requirements` less the lines that only ``extra == "x"`` markers for an
        ``x`` outside ``extras`` (canonical names) keep: those can apply to nothing asked
        for, and need not be parsed (packaging's parser is most of reading a closure's
        metadata, and a project such as transformers lists ~200 such lines)."""
        out = []
        for text in self.requires_dist:
            only = extra_only(text)
            if only is not None and only not in extras:
                continue
            r = _requirement(text)
            if r is not None:
                out.append(r)
        return out


#: ``name[extras] (specifier); extra == "x"``, with nothing else in the marker and no URL
_EXTRA_ONLY = re.compile(r"[^;@]+;\s*extra\s*==\s*(?:\"([A-Za-z0-9._-]+)\"|'([A-Za-z0-9._-]+)')"
                         r"\s*")


@lru_cache(maxsize=1 << 14)
def extra_only(text: str) -> Optional[str]:
    """The canonical extra when ``text``'s marker is exactly ``extra == "x"`` (then the
    line applies to extra ``x`` and to nothing else, base included), else None."""
    m = _EXTRA_ONLY.fullmatch(text)
    if m is None:
        return None
    return str(canonicalize_name(m.group(1) or m.group(2)))


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
    return Metadata(
        name=(msg.get("Name") or "").strip(),
        version=(msg.get("Version") or "").strip(),
        requires_dist=reqs,
        requires_python=(msg.get("Requires-Python") or "").strip() or None,
        provides_extra=tuple(v.strip() for v in (msg.get_all("Provides-Extra") or [])),
        dynamic=tuple(v.strip() for v in (msg.get_all("Dynamic") or [])),
        metadata_version=(msg.get("Metadata-Version") or "").strip(),
    )
