"""Anchor words of a symptom pattern: what lets the log matcher skip a pattern in O(1).

``doctor --log`` holds about 400 symptom patterns and must stay linear in the size of any
log (binary, non-ASCII, 30 MB). Running every regex over every line is 400 passes; instead
each pattern is indexed by a literal *word* it cannot match without (``cudaErrorNoDevice``,
``xid``, ``watchdog``), and a line is tried only against the patterns whose anchor is one of
its words (:mod:`envlock.checks.symptoms`). An anchor is either a whole word (bounded in the
pattern by a non-word literal, ``\\b``, or an end of the pattern) or a *prefix* (a literal
word followed by more word characters: ``ncclKernel\\w*``). A pattern with an alternation
at its top level is anchored by a set: one anchor per branch, any of them a candidate.

Patterns are matched case-insensitively on ASCII, so anchors are lower-case.

>>> anchors(r"\\bcudaErrorNoDevice\\b")
(('cudaerrornodevice', False),)
>>> anchors(r"(?:ncclKernel\\w*|cudaStreamQuery)\\b")
(('ncclkernel', True), ('cudastreamquery', False))
>>> anchors(r"[a-z]+ error")
(('error', False),)
>>> anchors(r"\\d+")
()
"""

from __future__ import annotations

import re
from typing import Any, List, Optional, Sequence, Tuple

try:  # Python 3.11+
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre  # type: ignore[no-redef,unused-ignore]

__all__ = ["anchors", "required_words", "Anchor", "MIN_ANCHOR"]

#: (word, is_prefix)
Anchor = Tuple[str, bool]
#: anchors shorter than this are too common to narrow anything
MIN_ANCHOR = 3


def _name(op: Any) -> str:
    return str(op).rsplit(".", 1)[-1]


def _is_word_char(c: str) -> bool:
    return c.isalnum() or c == "_"


def _edge(items: Sequence[Tuple[Any, Any]], k: int, side: int, outer: str = "sep") -> str:
    """What can sit next to a literal run, looking from item ``k`` towards ``side`` (-1: the
    text before the run, +1: after it): 'sep' (never a word char) or 'word' (may be)."""
    if k < 0 or k >= len(items):
        return outer
    op, av = _name(items[k][0]), items[k][1]
    if op == "LITERAL":
        return "word" if _is_word_char(chr(av)) else "sep"
    if op == "AT":
        return "sep"  # \b, ^, $
    if op == "IN":
        for sub_op, sub_av in av:
            n = _name(sub_op)
            if n == "LITERAL" and not _is_word_char(chr(sub_av)):
                continue
            if n == "CATEGORY" and _name(sub_av) in ("CATEGORY_SPACE", "CATEGORY_NOT_WORD"):
                continue
            return "word"
        return "sep"
    if op in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT"):
        body = list(av[2])
        inner = _edge(body, len(body) - 1 if side < 0 else 0, side, "sep") if body else "sep"
        if inner == "word":
            return "word"
        if av[0] == 0:  # optional: the text may come from beyond it
            return _edge(items, k + side, side, outer)
        return "sep"
    if op == "SUBPATTERN":
        body = list(av[-1])
        return _edge(body, len(body) - 1 if side < 0 else 0, side,
                     _edge(items, k + side, side, outer)) if body else \
            _edge(items, k + side, side, outer)
    return "word"


def _words(items: Sequence[Tuple[Any, Any]], before: str = "sep",
           after: str = "sep") -> List[Anchor]:
    """Anchor candidates among the literal runs of a parsed sequence."""
    out: List[Anchor] = []
    i = 0
    items = list(items)
    while i < len(items):
        if _name(items[i][0]) != "LITERAL":
            i += 1
            continue
        j = i
        while j < len(items) and _name(items[j][0]) == "LITERAL":
            j += 1
        run = "".join(chr(av) for _, av in items[i:j])
        b = _edge(items, i - 1, -1, before)
        a = _edge(items, j, +1, after)
        parts = re.split(r"(\W+)", run)
        for k, w in enumerate(parts):
            if not w or not re.match(r"\w", w):
                continue
            if k == 0 and b == "word":
                continue  # the text may run on before the word: not a whole word
            prefix = k == len(parts) - 1 and a == "word"
            if len(w) >= MIN_ANCHOR:
                out.append((w.lower(), prefix))
        i = j
    return out


#: words that appear on many lines of any log: a pattern is anchored elsewhere when it can be
COMMON = frozenset("""
error errors failed failure fail operation operations process processes cuda nccl version
device devices invalid found not the and for with from this that was were have been call
calls called system library libraries runtime driver memory file files available warning
info debug rank ranks module line time timeout exception value values type function
""".split())


def _best(cands: Sequence[Anchor]) -> Optional[Anchor]:
    """Whole words before prefixes, rare words before common ones, then the longest."""
    if not cands:
        return None
    return max(cands, key=lambda a: (not a[1], a[0] not in COMMON, len(a[0])))


def _anchor_set(seq: Sequence[Tuple[Any, Any]], before: str = "sep",
                after: str = "sep") -> Tuple[Anchor, ...]:
    seq = list(seq)
    best = _best(_words(seq, before, after))
    if best is not None:
        return (best,)
    for k, (op, av) in enumerate(seq):  # a required alternation: one anchor per branch
        b, a = _edge(seq, k - 1, -1, before), _edge(seq, k + 1, +1, after)
        if _name(op) == "SUBPATTERN":
            inner = list(av[-1])
            if len(inner) == 1 and _name(inner[0][0]) == "BRANCH":
                found: List[Anchor] = []
                for branch in inner[0][1][1]:
                    sub = _anchor_set(list(branch), b, a)
                    if not sub:
                        found = []
                        break
                    found.extend(sub)
                if found:
                    return tuple(dict.fromkeys(found))
            else:
                sub = _anchor_set(inner, b, a)
                if sub:
                    return sub
        elif _name(op) == "BRANCH":
            found = []
            for branch in av[1]:
                sub = _anchor_set(list(branch), b, a)
                if not sub:
                    return ()
                found.extend(sub)
            return tuple(dict.fromkeys(found))
    return ()


def anchors(pattern: str) -> Tuple[Anchor, ...]:
    """The anchors of ``pattern`` (empty when it has none: the loader refuses such a
    symptom pattern)."""
    try:
        parsed = _sre.parse(pattern, re.IGNORECASE)
    except (re.error, RecursionError, OverflowError):
        return ()
    return _anchor_set(list(parsed))


def required_words(pattern: str) -> Tuple[str, ...]:
    """Every whole word (3+ characters, lower-case) that any match of ``pattern`` contains:
    the literal words of its top level. The matcher tries the regex on a line only when the
    line holds all of them (a set test in C), which rejects most lines before any regex.

    >>> required_words(r"CUDA (?:error|failure)[^:\\n]{0,40}: out of memory")
    ('cuda', 'out', 'memory')
    """
    try:
        parsed = _sre.parse(pattern, re.IGNORECASE)
    except (re.error, RecursionError, OverflowError):
        return ()
    return tuple(dict.fromkeys(w for w, prefix in _words(list(parsed)) if not prefix))
