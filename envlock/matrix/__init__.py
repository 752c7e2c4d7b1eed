"""The compatibility matrix: typed, validated, indexed data about the GPU stack.

``get_matrix()`` is what the rest of envlock calls: it loads the data shipped in the
package once per process (and through a validated on-disk cache across processes).
"""

from __future__ import annotations

from functools import lru_cache

from envlock.matrix.matrix import Matrix

__all__ = ["Matrix", "get_matrix"]


@lru_cache(maxsize=1)
def get_matrix() -> Matrix:
    from envlock.matrix.cache import load_cached

    return load_cached()
