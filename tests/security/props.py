"""Shared settings for the property tests: ENVLOCK_PROPERTY_EXAMPLES sets how many cases
each property runs (200 by default; the issue's acceptance run used 10,000)."""

from __future__ import annotations

import os


def examples(default: int = 200) -> int:
    try:
        return max(1, int(os.environ.get("ENVLOCK_PROPERTY_EXAMPLES", default)))
    except ValueError:
        return default
