"""Package index access: pip-style configuration, the simple API, metadata, caching.

Submodules load on first use (``envlock resolve --offline`` and the CLI parser should not
pay for the HTTP and parsing code they do not run).
"""

from __future__ import annotations

from typing import Any

__all__ = ["IndexClient", "IndexConfig", "load_index_config", "redact", "Dist", "ProjectPage",
           "PYPI_SIMPLE"]

_WHERE = {
    "IndexClient": "envlock.index.client",
    "IndexConfig": "envlock.index.config",
    "load_index_config": "envlock.index.config",
    "redact": "envlock.index.config",
    "PYPI_SIMPLE": "envlock.index.config",
    "Dist": "envlock.index.pages",
    "ProjectPage": "envlock.index.pages",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(name)
    import importlib

    return getattr(importlib.import_module(module), name)
