"""Core metadata (the METADATA / PKG-INFO file) as a small value.

Parsing is lenient on purpose: real indexes carry metadata that a strict validator
rejects (odd Requires-Dist spellings from 2019); we keep what parses and record the rest.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import AbstractSet, Dict, List, Optional, Tuple

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
    fields = _plain_headers(blob)
    if fields is None:
        from email.parser import BytesHeaderParser

        msg = BytesHeaderParser().parsebytes(blob)
        fields = {k: [str(v) for v in (msg.get_all(k) or [])] for k in _FIELDS}

    def first(key: str) -> str:
        values = fields.get(key)
        return values[0].strip() if values else ""

    def every(key: str) -> Tuple[str, ...]:
        return tuple(v.strip() for v in fields.get(key) or [])

    return Metadata(
        name=first("name"),
        version=first("version"),
        requires_dist=every("requires-dist"),
        requires_python=first("requires-python") or None,
        provides_extra=every("provides-extra"),
        dynamic=every("dynamic"),
        metadata_version=first("metadata-version"),
    )


#: the fields :func:`parse_metadata` reads (lower case: header names are case-insensitive)
_FIELDS = ("name", "version", "requires-dist", "requires-python", "provides-extra",
           "dynamic", "metadata-version")
#: a header name as the email parser recognises one: printable ASCII, no space or colon
_HEADER_NAME = re.compile(r"[\x21-\x39\x3b-\x7e]+")
#: control bytes other than tab and line feed: line breaks to ``str.splitlines`` (which
#: the email parser uses), or plain oddities; either way the email parser decides
_ODD_BYTES = bytes(b for b in range(0x20) if b not in (0x09, 0x0A)) + b"\x7f"


def _plain_headers(blob: bytes) -> Optional[Dict[str, List[str]]]:
    """The values of :data:`_FIELDS`, read directly when the header block is plain:
    ``\\n`` line ends, no other control character, every line ``Name: value`` or the
    continuation of a field not read here, the fields read here in ASCII. None for
    anything else: the email parser (what this replaces; several times slower, and its
    import alone cost more than reading a closure's metadata) decides, so the answer is
    the same either way (a test compares the two)."""
    end = blob.find(b"\n\n")
    head = blob if end < 0 else blob[:end]
    if (not head or head.startswith((b"From ", b" ", b"\t", b"\n"))
            or len(head.translate(None, _ODD_BYTES)) != len(head)):
        return None
    out: Dict[str, List[str]] = {}
    ours = False
    # bytes past ASCII as the email parser reads them (surrogates: never a line break)
    for line in head.decode("ascii", "surrogateescape").split("\n"):
        if line[:1] in (" ", "\t"):
            if ours:
                return None  # a folded value of a field read here
            continue
        name, colon, value = line.partition(":")
        if not colon or _HEADER_NAME.fullmatch(name) is None:
            return None
        key = name.lower()
        ours = key in _FIELDS
        if ours:
            if not value.isascii():
                return None  # the email parser makes such a value a Header object
            out.setdefault(key, []).append(value)
    return out
