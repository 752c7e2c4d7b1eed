"""The real documents the security tests start from, and the export formats they run."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

__all__ = ["DATA", "LOCK", "SNAPSHOT", "FORMATS", "tomllib"]

DATA = Path(__file__).resolve().parents[1] / "data"
#: a two-target lock (H100 SXM and H20, cu121) the tests edit
LOCK = DATA / "locks" / "cu121-h100-h20.lock"
#: a snapshot of a machine that matches it
SNAPSHOT = DATA / "snapshots" / "h100-match.json"
#: every ``envlock export --format``
FORMATS = ["requirements", "constraints", "pylock", "uv", "conda", "dockerfile"]
