"""Corroboration: which parts of an advisory's condition the log's own facts make true.

A bare signal in a log (a SIGFPE, a collective timeout, a backtrace stuck in an NCCL wait)
names no cause by itself. It points at an advisory when something *in the log* backs it: a
routine ``context`` line of that advisory, or a leaf of its condition that a fact the log
states makes true (the GPU model it names, the ``topo -m`` link kinds it pastes). A machine
fact does not count here: the condition's verdict on the machine already weighed it.

Used by :func:`envlock.checks.logs.triage_logs`.
"""

from __future__ import annotations

from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from envlock.knowledge.evaluate import evaluate
from envlock.knowledge.facts import UNKNOWN, Facts

__all__ = ["corroboration"]


def _leaves(cond: Mapping[str, Any], scope: Optional[str] = None
            ) -> Iterator[Tuple[Optional[str], Mapping[str, Any]]]:
    if "all" in cond or "any" in cond:
        for c in cond.get("all", cond.get("any", ())):
            yield from _leaves(c, scope)
    elif "not" in cond:
        return  # a negated leaf that holds says nothing for the cause
    elif "some" in cond:
        yield from _leaves(cond["where"], cond["some"])
    else:
        yield scope, cond


def _weight(leaf: Mapping[str, Any]) -> float:
    """A leaf that admits fewer values is stronger evidence when it holds."""
    values = leaf.get("in")
    if isinstance(values, (list, tuple)) and len(values) > 2:
        return 2.0 / len(values)
    return 1.0


def corroboration(cond: Mapping[str, Any], facts: Facts) -> List[Tuple[str, float]]:
    """Leaves of the condition that a fact *the log states* makes true, with their weight.

    ``facts`` is a :class:`~envlock.checks.logread.LayeredFacts`; with plain facts every
    known fact counts.

    >>> from envlock.checks.logread import LayeredFacts
    >>> f = LayeredFacts(None, {"gpu.count": 4, "gpu.model": ["rtx-4090"]}, {})
    >>> corroboration({"all": [{"fact": "gpu.count", "ge": 2},
    ...                        {"fact": "gpu.model", "in": ["rtx-4090", "rtx-3090", "l40"]},
    ...                        {"fact": "host.iommu", "equals": True}]}, f)
    [('gpu.count=4', 1.0), ("gpu.model=['rtx-4090']", 0.6666666666666666)]
    """
    stated = getattr(facts, "log_knows", None)
    out: Dict[str, float] = {}
    for scope, leaf in _leaves(cond):
        test = next(k for k in leaf if k != "fact")
        if stated is not None and not stated(scope or leaf["fact"]):
            continue
        if scope is None:
            value = facts.get(leaf["fact"])
            if value is UNKNOWN or value == [] or value is None:
                continue
            if evaluate(leaf, facts) is True:
                out.setdefault(f"{leaf['fact']}={value}", _weight(leaf))
        else:
            elems = facts.elements(scope)
            if elems is UNKNOWN or not elems:
                continue
            if not any(e.get(leaf["fact"], UNKNOWN) is not UNKNOWN for e in elems):
                continue
            if evaluate({"some": scope, "where": leaf}, facts) is True:
                out.setdefault(f"{scope} {leaf['fact']} {test} {leaf[test]}", _weight(leaf))
    return list(out.items())
