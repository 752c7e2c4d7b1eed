"""Evaluate advisory conditions against :class:`~envlock.checks.facts.Facts`.

Three-valued: each condition is True, False or None (unknown). An advisory fires only on
True, so a machine that did not tell us something is never accused of it. The grammar
(and its validation) is :mod:`envlock.matrix.conditions`.

>>> from envlock.checks.facts import Facts
>>> f = Facts({"gpu.cc": ["9.0", "8.0"], "gpu.count": 2}, {}, {}, {}, {})
>>> evaluate({"all": [{"fact": "gpu.cc", "version": "<8.5"}, {"fact": "gpu.count", "ge": 2}]}, f)
True
>>> evaluate({"fact": "env.NCCL_P2P_DISABLE", "present": False}, f)
True
>>> evaluate({"fact": "driver.version", "version": "<525"}, f) is None
True
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Mapping, Optional

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envlock.checks.facts import UNKNOWN, Facts
from envlock.matrix.conditions import ELEMENT_FACTS, TESTS, fact_type

__all__ = ["evaluate", "Tri"]

Tri = Optional[bool]


@lru_cache(maxsize=1024)
def _spec(text: str) -> SpecifierSet:
    return SpecifierSet(text)


@lru_cache(maxsize=4096)
def _ver(text: str) -> Optional[Version]:
    try:
        return Version(text)
    except InvalidVersion:
        return None


@lru_cache(maxsize=512)
def _rx(pattern: str) -> "re.Pattern[str]":
    return re.compile(pattern, re.IGNORECASE)


def _and(values: Any) -> Tri:
    unknown = False
    for v in values:
        if v is False:
            return False
        if v is None:
            unknown = True
    return None if unknown else True


def _or(values: Any) -> Tri:
    unknown = False
    for v in values:
        if v is True:
            return True
        if v is None:
            unknown = True
    return None if unknown else False


def evaluate(cond: Mapping[str, Any], facts: Facts) -> Tri:
    """True, False, or None when the facts cannot decide."""
    return _eval(cond, lambda path: facts.get(path), facts, None)


def _eval(cond: Mapping[str, Any], get: Any, facts: Facts, scope: Optional[str]) -> Tri:
    if "all" in cond:
        return _and(_eval(c, get, facts, scope) for c in cond["all"])
    if "any" in cond:
        return _or(_eval(c, get, facts, scope) for c in cond["any"])
    if "not" in cond:
        r = _eval(cond["not"], get, facts, scope)
        return None if r is None else not r
    if "some" in cond:
        coll = cond["some"]
        elems = facts.elements(coll)
        if elems is UNKNOWN:
            return None
        where = cond["where"]
        return _or(_eval(where, lambda p, e=e: e.get(p, UNKNOWN), facts, coll) for e in elems)
    return _leaf(cond, get, scope)


def _leaf(cond: Mapping[str, Any], get: Any, scope: Optional[str]) -> Tri:
    path = cond["fact"]
    test = next(k for k in cond if k in TESTS)
    expected = cond[test]
    typ = ELEMENT_FACTS[scope].get(path, "str") if scope else (fact_type(path) or "str")
    value = get(path)
    if test == "present":
        if value is UNKNOWN:
            return None if expected else True
        empty = value is None or value == "" or (isinstance(value, list) and not value)
        return (not empty) if expected else empty
    if value is UNKNOWN or value is None:
        return None
    if isinstance(value, list):
        if test == "contains":
            return any(_eq(v, expected, typ) for v in value)
        return any(_test(test, v, expected, typ) for v in value)
    return _test(test, value, expected, typ)


def _eq(value: Any, expected: Any, typ: str) -> bool:
    if "version" in typ:
        a, b = _ver(str(value)), _ver(str(expected))
        if a is not None and b is not None:
            return a == b
    if isinstance(value, bool) or isinstance(expected, bool):
        return value is expected
    return str(value) == str(expected) if not isinstance(value, (int, float)) else value == expected


def _test(test: str, value: Any, expected: Any, typ: str) -> Tri:
    if test == "equals":
        return _eq(value, expected, typ)
    if test == "in":
        return any(_eq(value, e, typ) for e in expected)
    if test == "contains":
        return str(expected) in str(value)
    if test == "matches":
        return bool(_rx(str(expected)).search(str(value)))
    if test == "version":
        v = _ver(str(value))
        if v is None:
            return None
        return _spec(str(expected)).contains(v, prereleases=True)
    # ordering tests
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)) and isinstance(expected, (int, float)):
        a, b = value, expected
    else:
        va, vb = _ver(str(value)), _ver(str(expected))
        if va is None or vb is None:
            return None
        a, b = va, vb  # type: ignore[assignment]
    if test == "lt":
        return a < b
    if test == "le":
        return a <= b
    if test == "gt":
        return a > b
    if test == "ge":
        return a >= b
    return None
