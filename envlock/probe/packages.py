"""Installed Python distributions, read from metadata directories without importing them.

Parsing ``<name>-<version>.dist-info`` directory names is enough for almost every
distribution and avoids opening hundreds of METADATA files (this runs inside ``envlock
verify``, whose whole budget is ~150 ms); only unparseable names fall back to reading
METADATA.
"""

from __future__ import annotations

import os
import re
import sys
from email.parser import HeaderParser
from typing import Dict, Iterable, Optional, Sequence

from packaging.utils import canonicalize_name

__all__ = ["installed_packages", "site_dirs"]

_DIST_RE = re.compile(
    r"^(?P<name>.+?)-(?P<version>\d[^-]*?)(-py\d+(\.\d+)?)?\.(dist-info|egg-info)$")


def site_dirs(paths: Optional[Sequence[str]] = None) -> Sequence[str]:
    """Directories that hold installed distributions: ``sys.path`` entries that exist."""
    out = []
    for p in (paths if paths is not None else sys.path):
        p = p or os.getcwd()
        if os.path.isdir(p) and p not in out:
            out.append(p)
    return out


def _read_name_version(path: str) -> Optional[tuple]:
    for fn in ("METADATA", "PKG-INFO"):
        meta = os.path.join(path, fn)
        try:
            with open(meta, encoding="utf-8", errors="replace") as fh:
                msg = HeaderParser().parse(fh, headersonly=True)
        except OSError:
            continue
        name, version = msg.get("Name"), msg.get("Version")
        if name and version:
            return name, version
    return None


def installed_packages(paths: Optional[Iterable[str]] = None) -> Dict[str, str]:
    """PEP 503 name -> version, first occurrence on the path wins (as import does)."""
    found: Dict[str, str] = {}
    for d in site_dirs(list(paths) if paths is not None else None):
        try:
            entries = os.listdir(d)
        except OSError:
            continue
        for entry in sorted(entries):
            if not entry.endswith((".dist-info", ".egg-info")):
                continue
            m = _DIST_RE.match(entry)
            if m:
                name, version = m.group("name"), m.group("version")
            else:
                nv = _read_name_version(os.path.join(d, entry))
                if nv is None:
                    continue
                name, version = nv
            key = canonicalize_name(name)
            found.setdefault(key, version)
    return dict(sorted(found.items()))
