"""The matrix stamp that locks record: ``meta.toml``'s version plus a content digest.

A hand-bumped version alone let two different matrices claim the same name (data was
fixed without a bump), so a lock could not tell which facts it was made from. The stamp
adds a digest of every data file's bytes (every ``*.toml`` at the top of ``compat-matrix/``,
found by pattern, not from a fixed list, so a new table is covered the day it is added):
any change to any of them gives a new stamp, and ``envlock resolve --check`` reports a lock
made from other data.

>>> stamp("2026.11.27", {"gpus.toml": b"a"}) == stamp("2026.11.27", {"gpus.toml": b"a"})
True
>>> stamp("2026.11.27", {"gpus.toml": b"a"}) != stamp("2026.11.27", {"gpus.toml": b"b"})
True
>>> stamp("2026.11.27", {"gpus.toml": b"a"}).startswith("2026.11.27+")
True
"""

from __future__ import annotations

import hashlib
from typing import Mapping

__all__ = ["content_digest", "stamp"]

DIGEST_CHARS = 12  # 48 bits: enough to tell matrix editions apart, short enough to read


def content_digest(files: Mapping[str, bytes]) -> str:
    """A digest of file names and bytes, independent of the order they are given in."""
    h = hashlib.sha256()
    for name in sorted(files):
        h.update(name.encode("utf-8") + b"\0" + hashlib.sha256(files[name]).digest())
    return h.hexdigest()[:DIGEST_CHARS]


def stamp(version: str, files: Mapping[str, bytes]) -> str:
    """``<meta.toml version>+<content digest>``, e.g. ``2026.11.27+3f2a9c41d0be``."""
    return f"{version}+{content_digest(files)}"
