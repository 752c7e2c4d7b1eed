"""Ranking advisories against read logs: which known cause explains this crash?

The evidence an advisory can have in a log, strongest first:

1. **pattern**: one of its ``symptoms`` matches (an error string specific to the cause);
2. **signal**: a process death or hang it lists in ``signals`` (SIGFPE, a collective
   timeout, a backtrace stuck in a CUDA/NCCL wait), *corroborated* by a routine ``context``
   line of the log or by a fact that holds (the GPU model the log names, the topology it
   pastes); a bare signal is not reported;
3. **condition**: only its ``context`` lines, next to a real failure, on a machine whose facts
   make the condition true.

Advisories are sorted by that tier first and by score inside it. The score adds
``1 + len(pattern)/80`` (at most 2) per matched symptom, 0.75 per matching signal, 0.5 per
context line (counted only when the log shows a failure), 0.4 per condition leaf that a known
fact makes true (at most three), and doubles when the whole condition holds. An advisory is
never reported when its condition is known false, or when the log contains one of its
``absent`` patterns (the log names a different cause).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator, List, Mapping, Optional, Sequence, Tuple

from envlock.checks.conditions import evaluate
from envlock.checks.facts import UNKNOWN, Facts
from envlock.checks.logread import ReadLog, find
from envlock.matrix.model import Advisory

__all__ = ["Ranked", "rank", "TIERS", "corroboration"]

TIERS = {3: "pattern", 2: "signal", 1: "condition"}
_FAILURE = re.compile(r"\b(?:Error|Exception|Traceback|FAILED|fatal|Aborted|killed)\b")


@dataclass(frozen=True)
class Ranked:
    advisory: str
    score: float
    tier: int
    evidence: Tuple[str, ...]
    verdict: Optional[bool]


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

    Only the log's own facts corroborate a signal in it: a machine fact was already weighed
    by the condition's verdict (an unknown verdict on the machine stays unknown)."""
    stated = getattr(facts, "log_knows", None)
    out: dict = {}
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


def _failure(logs: Sequence[ReadLog], advisories: Sequence[Advisory]) -> bool:
    if any(lg.signals or lg.hang for lg in logs):
        return True
    if any(_FAILURE.search(ln) for lg in logs for ln in lg.lines):
        return True
    return any(find(lg, p) is not None for a in advisories for p in a.symptoms for lg in logs)


def rank(logs: Sequence[ReadLog], advisories: Sequence[Advisory], facts: Optional[Facts],
         limit: int = 10) -> List[Ranked]:
    """Advisories that explain the logs, best first (see the module docstring)."""
    failure = _failure(logs, advisories)
    signals = set().union(*(lg.signals for lg in logs)) if logs else set()
    hang = next((h for lg in logs for h in lg.hang), None)
    out: List[Ranked] = []
    for adv in advisories:
        if any(find(lg, p) is not None for p in adv.absent for lg in logs):
            continue
        score = 0.0
        evidence: List[str] = []
        patterns = 0
        for pat in adv.symptoms:
            for lg in logs:
                line = find(lg, pat)
                if line is not None:
                    patterns += 1
                    score += 1.0 + min(len(pat), 80) / 80.0
                    evidence.append(f"{lg.origin}: {_short(line)}")
                    break
        sigs = sorted(set(adv.signals) & signals)
        for s in sigs:
            score += 0.75
            evidence.append(f"hang: {_short(hang)}" if s == "timeout" and hang
                            else f"process death: {s}")
        contexts = 0
        if failure:
            for pat in adv.context:
                for lg in logs:
                    line = find(lg, pat)
                    if line is not None:
                        contexts += 1
                        score += 0.5
                        evidence.append(f"{lg.origin}: {_short(line)}")
                        break
        if not (patterns or sigs or contexts):
            continue
        verdict: Optional[bool] = None
        support: List[Tuple[str, float]] = []
        if facts is not None and adv.condition is not None:
            verdict = evaluate(adv.condition, facts)
            if verdict is False:
                continue  # the machine (or the log) rules it out
            support = corroboration(adv.condition, facts)
        if patterns:
            tier = 3
        elif sigs and (contexts or support or verdict is True):
            tier = 2
        elif contexts and verdict is True:
            tier = 1
        else:
            continue  # a bare signal or a routine line alone explains nothing
        score += 0.4 * sum(sorted((w for _, w in support), reverse=True)[:3])
        if support and verdict is not True:
            evidence.append("the log shows " + "; ".join(k for k, _ in support[:3]))
        if verdict is True:
            score *= 2.0
            evidence.append("this machine matches its condition")
        out.append(Ranked(adv.id, score, tier, tuple(dict.fromkeys(evidence)), verdict))
    out.sort(key=lambda r: (-r.tier, -r.score, r.advisory))
    return out[:limit]


def _short(line: Optional[str]) -> str:
    line = (line or "").strip()
    return line if len(line) <= 200 else line[:197] + "..."
