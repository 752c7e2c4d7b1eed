"""TOML reading across Python versions (tomllib from 3.11, tomli before)."""

from __future__ import annotations

import sys

if sys.version_info >= (3, 11):
    import tomllib as _tomllib
else:  # pragma: no cover - exercised on Python < 3.11 only
    import tomli as _tomllib

loads = _tomllib.loads
TOMLDecodeError = _tomllib.TOMLDecodeError

__all__ = ["loads", "TOMLDecodeError"]
