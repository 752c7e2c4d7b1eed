"""Advisory symptom patterns that cannot backtrack catastrophically.

``doctor --log`` runs every advisory's symptom regexes over a user's log. Python's ``re``
backtracks, so a pattern with a quantifier inside a quantified group (``(a+)+``,
``(\\w*\\s?)*``) takes exponential time on a crafted line. Such a pattern is a matrix
error: :func:`pattern_problem` names it and ``envlock matrix validate`` reports it (and an
invalid matrix is never used). The check walks the parsed pattern, so it judges structure,
not spelling.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional

try:  # Python 3.11+: the parser lives in re._parser (sre_parse is deprecated)
    from re import _parser as _sre  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python < 3.11
    import sre_parse as _sre  # type: ignore[no-redef,unused-ignore]

__all__ = ["pattern_problem"]

_REPEATS = {name for name in ("MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT")}


def _op_name(op: Any) -> str:
    return str(op).rsplit(".", 1)[-1]


def _unbounded(hi: int) -> bool:
    return hi > 1  # MAXREPEAT or any count above one repeats its body


def _children(op: str, av: Any) -> Iterable[Any]:
    """The sub-patterns under one node of the parse tree."""
    if op in _REPEATS:
        yield av[2]
    elif op == "SUBPATTERN":
        yield av[-1]
    elif op == "BRANCH":
        yield from av[1]
    elif op in ("ASSERT", "ASSERT_NOT"):
        yield av[1]
    elif op == "GROUPREF_EXISTS":
        yield from (x for x in av[1:] if x is not None)
    elif op == "ATOMIC_GROUP":
        yield av


def _has_repeat(sub: Any) -> bool:
    for op, av in sub:
        name = _op_name(op)
        if name in _REPEATS and _unbounded(av[1]):
            return True
        if any(_has_repeat(c) for c in _children(name, av)):
            return True
    return False


def _nested(sub: Any) -> bool:
    for op, av in sub:
        name = _op_name(op)
        if name in _REPEATS and _unbounded(av[1]) and name != "POSSESSIVE_REPEAT":
            if _has_repeat(av[2]):
                return True
        if any(_nested(c) for c in _children(name, av)):
            return True
    return False


def pattern_problem(pattern: str) -> Optional[str]:
    """Why ``pattern`` is unsafe to run over untrusted text, or None when it is fine.

    >>> pattern_problem(r"CUBLAS_STATUS_\\w+ when calling")
    >>> pattern_problem(r"(a+)+$")
    'a quantifier inside a repeated group (nested quantifiers backtrack exponentially)'
    """
    try:
        parsed = _sre.parse(pattern, re.IGNORECASE)
    except (re.error, RecursionError, OverflowError) as exc:
        return f"bad regular expression: {exc}"
    if _nested(parsed):
        return "a quantifier inside a repeated group (nested quantifiers backtrack " \
               "exponentially)"
    return None
