"""Whether a wheel's tags fit a run's targets, from the tags' text alone.

The page cut (:mod:`envlock.index.json_narrow`) keeps the files whose tag triple fits,
and it runs in two places: in the resolving process, and in the network helper
(:mod:`envlock.index.netproc`), which cuts a page before sending it over. Both must keep
exactly the same files, so both build the rule here, from the same data: the targets'
tags as ``interpreter-abi-platform`` strings (what ``str(Tag)`` gives). This module
imports only :mod:`envlock.index.pages` for the tag bound, so the helper can load it
without the resolver.
"""

from __future__ import annotations

from typing import Dict, FrozenSet, Iterable, Mapping, Optional, Tuple

from envlock.index.pages import MAX_TAGS

__all__ = ["TripleFit", "fast_rank"]


def fast_rank(filename: str, rank_of: Mapping[str, int],
              parts_ok: Tuple[FrozenSet[str], FrozenSet[str]]) -> Optional[int]:
    """The best rank of a wheel filename's compressed tag set, or None when no tag fits
    (a malformed name gives -1: the full parse judges it)."""
    parts = filename[:-4].lower().split("-")
    if len(parts) not in (5, 6):
        return -1
    pys, abis, plats = parts[-3:]
    ok_py, ok_plat = parts_ok
    # cheap rejections first: most files are for other platforms or Pythons
    plat_list = plats.split(".")
    if (pys.count(".") + 1) * (abis.count(".") + 1) * len(plat_list) > MAX_TAGS:
        return -1  # the full parse rejects it (a hostile name's millions of tags)
    if not any(p in ok_plat for p in plat_list):
        return None
    py_list = pys.split(".")
    if not any(p in ok_py for p in py_list):
        return None
    best: Optional[int] = None
    for py in py_list:
        for abi in abis.split("."):
            for plat in plat_list:
                r = rank_of.get(f"{py}-{abi}-{plat}")
                if r is not None and (best is None or r < best):
                    best = r
    return best


class TripleFit:
    """Whether a wheel's tag triple (:func:`~envlock.index.pages.triple_key`) fits any of
    ``tags`` (a malformed triple passes: the full parse judges it). Memoised per triple:
    a run sees a few hundred. ``tags`` is kept, in order, as the helper is sent it."""

    def __init__(self, tags: Iterable[str]) -> None:
        self.tags: Tuple[str, ...] = tuple(dict.fromkeys(tags))
        self._rank_of = dict.fromkeys(self.tags, 0)
        split = [t.split("-") for t in self.tags]
        self._parts = (frozenset(s[0] for s in split if len(s) == 3),
                       frozenset(s[2] for s in split if len(s) == 3))
        self._memo: Dict[str, bool] = {}

    def __call__(self, key: str) -> bool:
        hit = self._memo.get(key)
        if hit is None:
            hit = self._memo[key] = fast_rank("x-0" + key, self._rank_of,
                                              self._parts) is not None
        return hit
