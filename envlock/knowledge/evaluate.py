"""Evaluate advisory conditions against :class:`~envlock.knowledge.facts.Facts`.

Three-valued (Kleene) logic: each condition is True, False or None (unknown).

* ``all``: False if any part is False, else unknown if any part is unknown, else True;
* ``any``: True if any part is True, else unknown if any part is unknown, else False;
* ``not``: swaps True and False, keeps unknown;
* ``some``: ``any`` over the collection's elements; an unknown collection is unknown;
* a leaf on an unknown fact is unknown, except ``known`` (the one test about knowledge,
  always decided, for explicit fallbacks such as "no library probe: judge the wheel");
* a leaf on a bounded fact (:class:`~envlock.knowledge.values.Bound`, a version range) is
  decided when every version inside the bound gives the same answer, else unknown; a
  bounded fact is *known* (partially) for the ``known`` test.

:func:`judge` returns an :class:`Outcome` that also names the facts behind the verdict:
for unknown, the fact paths that were unknown (what a probe would have to tell us); for
True/False, the facts that decided it (what rules an advisory in or out), each with how it
was reached when it was not observed directly
(``library.cublas.version in [12.6.0.22, 13) (derived from torch 2.14.1+cu126 via CUDA 12.6)``). Callers
decide about unknown on purpose; nothing here treats it as False.

A fact whose value is ``None`` is known to be absent (a package that is not installed):
``present`` is False and every other test is False, because an absent thing satisfies no
version, equality or pattern.

>>> from envlock.knowledge.facts import Facts
>>> f = Facts({"gpu.cc": ["9.0", "8.0"], "gpu.count": 2}, {}, {}, {}, {})
>>> evaluate({"all": [{"fact": "gpu.cc", "version": "<8.5"}, {"fact": "gpu.count", "ge": 2}]}, f)
True
>>> evaluate({"fact": "env.NCCL_P2P_DISABLE", "present": False}, f)
True
>>> judge({"fact": "driver.version", "version": "<525"}, f)
Outcome(value=None, unknown=('driver.version',), because=())
>>> judge({"all": [{"fact": "gpu.count", "ge": 4}, {"fact": "driver.version", "lt": "525"}]}, f)
Outcome(value=False, unknown=(), because=('gpu.count=2',))
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from envlock.knowledge.facts import Facts
from envlock.knowledge.values import UNKNOWN, Bound, OneOf
from envlock.matrix.conditions import ELEMENT_FACTS, TESTS, fact_paths, fact_type

__all__ = ["evaluate", "judge", "Outcome", "Tri", "kleene_and", "kleene_or", "kleene_not"]

Tri = Optional[bool]


@dataclass(frozen=True)
class Outcome:
    """A three-valued verdict and the facts behind it.

    ``value``: True, False or None (unknown). ``unknown``: sorted fact paths whose values
    were unknown and could have changed the verdict (empty unless ``value`` is None).
    ``because``: ``path=value`` texts of the observed facts that decided a True/False
    verdict (empty for unknown). ``partial``: for an unknown verdict, the facts of the
    parts that were decided (the branches of an ``any`` they rule out, the terms of an
    ``all`` they meet): what is already known when only ``unknown`` is left to ask.
    """

    value: Tri
    unknown: Tuple[str, ...] = ()
    because: Tuple[str, ...] = ()
    partial: Tuple[str, ...] = ()

    @property
    def known(self) -> bool:
        return self.value is not None


def kleene_and(values: Iterable[Tri]) -> Tri:
    """Kleene conjunction: False wins, then unknown, else True (True for no values)."""
    unknown = False
    for v in values:
        if v is False:
            return False
        if v is None:
            unknown = True
    return None if unknown else True


def kleene_or(values: Iterable[Tri]) -> Tri:
    """Kleene disjunction: True wins, then unknown, else False (False for no values)."""
    unknown = False
    for v in values:
        if v is True:
            return True
        if v is None:
            unknown = True
    return None if unknown else False


def kleene_not(value: Tri) -> Tri:
    return None if value is None else not value


@lru_cache(maxsize=1024)
def _spec(text: str) -> SpecifierSet:
    return SpecifierSet(text)


@lru_cache(maxsize=4096)
def _ver(text: str) -> Optional[Version]:
    try:
        return Version(text)
    except InvalidVersion:
        return None


@lru_cache(maxsize=16384)
def _in_spec(value: str, spec: str) -> Tri:
    v = _ver(value)
    if v is None:
        return None
    return _spec(spec).contains(v, prereleases=True)


@lru_cache(maxsize=512)
def _rx(pattern: str) -> "re.Pattern[str]":
    return re.compile(pattern, re.IGNORECASE)


def evaluate(cond: Mapping[str, Any], facts: Facts) -> Tri:
    """True, False, or None when the facts cannot decide (see :func:`judge`)."""
    return judge(cond, facts).value


def judge(cond: Mapping[str, Any], facts: Facts) -> Outcome:
    """The verdict of a condition on these facts, with the facts behind it.

    A fact that is one of a few candidates (:class:`OneOf`) may decide a condition that
    names it twice (``unset or "0"``) although each leaf alone is unknown: the condition is
    then judged once per candidate, and decided when every candidate gives one verdict."""
    out = _eval(cond, facts.get, facts, None, facts.origin)
    if out.value is not None:
        return out
    multi = sorted({p for p in _top_paths(cond) if isinstance(facts.get(p), OneOf)})
    if not multi:
        return out
    combos = list(itertools.islice(itertools.product(*(facts.get(p).values for p in multi)),
                                   64))
    verdicts = []
    for combo in combos:
        fixed = dict(zip(multi, combo))
        verdicts.append(_eval(cond, lambda p: fixed[p] if p in fixed else facts.get(p),
                              facts, None, facts.origin))
    values = {v.value for v in verdicts}
    if len(values) != 1 or None in values:
        return out
    because = [b for v in verdicts for b in v.because
               if not any(b.startswith(p + "=") for p in multi)]
    because += [_said(p, facts.get(p), facts.origin(p)) for p in multi]
    return Outcome(verdicts[0].value, (), _uniq(because))


_PATHS: Dict[int, Tuple[Mapping[str, Any], Tuple[str, ...]]] = {}


def _top_paths(cond: Mapping[str, Any]) -> Tuple[str, ...]:
    """The fact paths a condition reads outside ``some`` (memoised per condition object:
    advisory conditions live as long as the matrix)."""
    hit = _PATHS.get(id(cond))
    if hit is not None and hit[0] is cond:
        return hit[1]
    paths = tuple(sorted({p for scope, p, _ in fact_paths(cond) if scope is None}))
    if len(_PATHS) > 4096:
        _PATHS.clear()
    _PATHS[id(cond)] = (cond, paths)
    return paths


def _uniq(items: Iterable[str]) -> Tuple[str, ...]:
    return tuple(sorted(set(items)))


def _combine(parts: Iterable[Outcome], conj: bool) -> Outcome:
    """``all`` (conj) or ``any``: the dominating value decides (and stops the evaluation:
    Kleene connectives short-circuit on False/True); its part explains it."""
    dominant = not conj  # False dominates all, True dominates any
    unknown: List[str] = []
    decided: List[str] = []
    seen_unknown = False
    for p in parts:
        if p.value is dominant:
            return Outcome(dominant, (), p.because)
        if p.value is None:
            seen_unknown = True
            unknown.extend(p.unknown)
            decided.extend(p.partial)
        else:
            decided.extend(p.because)
    if seen_unknown:
        return Outcome(None, _uniq(unknown), (), _uniq(decided))
    return Outcome(not dominant, (), _uniq(decided))


def _no_origin(path: str) -> Optional[str]:
    return None


def _eval(cond: Mapping[str, Any], get: Callable[[str], Any], facts: Facts,
          scope: Optional[str], origin: Callable[[str], Optional[str]] = _no_origin
          ) -> Outcome:
    if "all" in cond:
        return _combine((_eval(c, get, facts, scope, origin) for c in cond["all"]), conj=True)
    if "any" in cond:
        return _combine((_eval(c, get, facts, scope, origin) for c in cond["any"]),
                        conj=False)
    if "not" in cond:
        r = _eval(cond["not"], get, facts, scope, origin)
        return Outcome(kleene_not(r.value), r.unknown, r.because, r.partial)
    if "some" in cond:
        coll = cond["some"]
        elems = facts.elements(coll)
        if elems is UNKNOWN:
            return Outcome(None, (f"{coll}s",), ())
        where = cond["where"]
        if not elems:
            return Outcome(False, (), (f"{coll}s=none",))
        return _combine((_eval(where, _getter(e), facts, coll)
                         for e in elems), conj=False)
    return _leaf(cond, get, scope, origin)


def _show(value: Any) -> str:
    if isinstance(value, list):
        shown = sorted({str(v) for v in value if v is not UNKNOWN})
        return ",".join(shown[:6]) + (",..." if len(shown) > 6 else "") if shown else "[]"
    if value is None:
        return "absent"
    return str(value)


def _said(name: str, value: Any, origin: Optional[str]) -> str:
    """``path=value`` (or ``path in [lo, hi)``) and, when not observed, how it was reached."""
    text = f"{name} in {value}" if isinstance(value, (Bound, OneOf)) else f"{name}={_show(value)}"
    return f"{text} ({origin})" if origin else text


def _leaf(cond: Mapping[str, Any], get: Callable[[str], Any], scope: Optional[str],
          origin: Callable[[str], Optional[str]] = _no_origin) -> Outcome:
    path = cond["fact"]
    name = f"{scope}.{path}" if scope else path
    test = next(k for k in cond if k in TESTS)
    expected = cond[test]
    typ = ELEMENT_FACTS[scope].get(path, "str") if scope else (fact_type(path) or "str")
    value = get(path)
    if test == "known":  # a test about our knowledge: always decided
        if value is UNKNOWN:
            return Outcome(not expected, (), (f"{name}=unknown",))
        return Outcome(bool(expected), (), (_said(name, value, origin(path)),))
    if value is UNKNOWN:
        return Outcome(None, (name,), ())
    result: Tri
    if isinstance(value, _PARTIAL):
        if isinstance(value, OneOf):
            result = _agree(_exact(test, v, expected, typ) for v in value.values)
        else:
            result = bool(expected) if test == "present" else _bound_test(test, value,
                                                                            expected, typ)
        if result is None:  # a bound that does not decide the test
            return Outcome(None, (name,), ())
        return Outcome(result, (), (_said(name, value, origin(path)),))
    result = _exact(test, value, expected, typ)
    if result is None:  # the value is there but cannot be compared (an odd version string)
        return Outcome(None, (name,), ())
    how = origin(path)
    said = f"{name}={_show(value)}"
    return Outcome(result, (), (f"{said} ({how})" if how else said,))


_PARTIAL = (Bound, OneOf)


def _exact(test: str, value: Any, expected: Any, typ: str) -> Tri:
    """A test on an exact value (or known absent, None)."""
    if test == "present":
        empty = value is None or value == "" or (isinstance(value, list) and not value)
        return (not empty) if expected else empty
    if value is None:
        return False  # known absent: satisfies no test but "present = false"
    if isinstance(value, list):
        # an UNKNOWN item (one GPU whose model is unknown) is an unknown disjunct
        if test == "contains":
            return kleene_or(None if v is UNKNOWN else _eq(v, expected, typ) for v in value)
        return kleene_or(None if v is UNKNOWN else _test(test, v, expected, typ)
                         for v in value)
    return _test(test, value, expected, typ)


def _agree(values: Iterable[Tri]) -> Tri:
    """The common answer of every candidate, or unknown when they differ."""
    seen = set(values)
    return seen.pop() if len(seen) == 1 else None


# -- tests on a bounded version: decided when the whole range answers alike ------------------


def _clause(op: str, target: str, lo: Optional[Version], hi: Optional[Version]) -> Tri:
    """One specifier clause on every version in ``[lo, hi)``: True when all satisfy it,
    False when none does, None otherwise (or when the clause is beyond this reasoning)."""
    if op in ("==", "!=") and target.endswith(".*"):
        base = _ver(target[:-2])
        if base is None:
            return None
        nxt = Version(".".join(str(x) for x in base.release[:-1] + (base.release[-1] + 1,)))
        inside: Tri = None
        if lo is not None and hi is not None and lo >= base and hi <= nxt:
            inside = True
        elif (hi is not None and hi <= base) or (lo is not None and lo >= nxt):
            inside = False
        return inside if op == "==" or inside is None else not inside
    if op == "~=":
        base = _ver(target)
        if base is None or len(base.release) < 2:
            return None
        prefix = ".".join(str(x) for x in base.release[:-1]) + ".*"
        return kleene_and([_clause(">=", target, lo, hi), _clause("==", prefix, lo, hi)])
    v = _ver(target)
    if v is None:
        return None
    if op == "<":
        return True if hi is not None and hi <= v else (False if lo is not None and lo >= v
                                                         else None)
    if op == "<=":
        return True if hi is not None and hi <= v else (False if lo is not None and lo > v
                                                         else None)
    if op == ">":
        return True if lo is not None and lo > v else (False if hi is not None and hi <= v
                                                       else None)
    if op == ">=":
        return True if lo is not None and lo >= v else (False if hi is not None and hi <= v
                                                        else None)
    if op in ("==", "!="):
        outside = (lo is not None and v < lo) or (hi is not None and v >= hi)
        if not outside:
            return None
        return op == "!="
    return None  # ===: arbitrary equality is not reasoned about


_ORDER_OPS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _bound_test(test: str, bound: Bound, expected: Any, typ: str) -> Tri:
    lo, hi = bound.low, bound.high
    if test == "version":
        return kleene_and(_clause(s.operator, s.version, lo, hi) for s in _spec(str(expected)))
    if test in _ORDER_OPS:
        if isinstance(expected, bool):
            return None
        return _clause(_ORDER_OPS[test], str(expected), lo, hi)
    if test == "equals":
        return _clause("==", str(expected), lo, hi)
    if test == "in":
        return kleene_or(_clause("==", str(e), lo, hi) for e in expected)
    return None  # matches/contains on a range: not decided


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
        return _in_spec(str(value), str(expected))
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


def _getter(elem: Mapping[str, Any]) -> Callable[[str], Any]:
    """A fact getter over one element of a collection (a GPU, a library copy)."""
    return lambda path: elem.get(path, UNKNOWN)
