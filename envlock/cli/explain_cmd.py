"""``envlock explain ID``: one advisory in full, so a finding's id leads to its reasons.

Doctor and verify print an advisory's id and title; ``explain`` shows everything behind it:
the summary, when it applies (the condition in words), what a log shows (patterns, process
deaths, routine lines it needs next to a failure, lines that rule it out), the fixes in
order, the sources and how well they are established.
"""

from __future__ import annotations

import argparse
import difflib
import json
from typing import Any, Dict, List, Mapping, Optional

from envlock.errors import ExitCode, UsageError

__all__ = ["register", "condition_words"]

_TESTS = {"equals": "is", "in": "is one of", "version": "is", "lt": "<", "le": "<=",
          "gt": ">", "ge": ">=", "matches": "matches", "contains": "contains"}


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    p = sub.add_parser("explain", help="show one advisory: why, when it applies, fixes, sources",
                       description="Print one advisory of the compatibility matrix: summary, "
                                   "its condition in words, what a log shows, fixes, sources "
                                   "and status.",
                       epilog="Exit codes: 0 shown, 2 unknown advisory id.")
    p.add_argument("id", help="an advisory id, as doctor and verify print it")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=run)


def _value(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return ", ".join(str(x) for x in v)
    return str(v).lower() if isinstance(v, bool) else str(v)


def condition_words(cond: Optional[Mapping[str, Any]], indent: int = 0) -> List[str]:
    """A condition as indented lines of plain words.

    >>> condition_words({"all": [{"fact": "gpu.count", "ge": 2},
    ...                          {"fact": "env.NCCL_P2P_DISABLE", "present": False}]})
    ['all of:', '  gpu.count >= 2', '  env.NCCL_P2P_DISABLE is not set']
    """
    pad = "  " * indent
    if cond is None:
        return [pad + "no machine condition: recognised from a log only"]
    if "all" in cond or "any" in cond:
        key = "all" if "all" in cond else "any"
        out = [pad + ("all of:" if key == "all" else "any of:")]
        for c in cond[key]:
            out.extend(condition_words(c, indent + 1))
        return out
    if "not" in cond:
        inner = condition_words(cond["not"], indent + 1)
        return [pad + "not:"] + inner
    if "some" in cond:
        return [pad + f"some {cond['some']} where:"] + condition_words(cond["where"], indent + 1)
    fact = cond["fact"]
    test = next(k for k in cond if k != "fact")
    value = cond[test]
    if test == "present":
        return [pad + f"{fact} {'is set' if value else 'is not set'}"]
    if test == "version":
        return [pad + f"{fact} in {value}"]
    return [pad + f"{fact} {_TESTS.get(test, test)} {_value(value)}"]


def _describe(adv: Any) -> Dict[str, Any]:
    return {
        "id": adv.id, "title": adv.title, "severity": adv.severity, "category": adv.category,
        "status": adv.status, "summary": adv.summary,
        "applies_when": condition_words(adv.condition),
        "condition": adv.condition, "log_only": adv.log_only,
        "log": {"patterns": list(adv.symptoms), "signals": list(adv.signals),
                "context": list(adv.context), "ruled_out_by": list(adv.absent)},
        "fix": list(adv.fix), "sources": list(adv.sources),
        "resolve": adv.resolve_action,
        "note": adv.provenance.note,
    }


def run(args: argparse.Namespace, out: Any) -> int:
    from envlock.matrix import get_matrix

    matrix = get_matrix()
    adv = matrix.advisories.get(args.id)
    if adv is None:
        close = difflib.get_close_matches(args.id, list(matrix.advisories), n=3, cutoff=0.5)
        close += [a for a in sorted(matrix.advisories)
                  if args.id.lower() in a and a not in close][: 3 - len(close)]
        hint = ("; did you mean " + ", ".join(repr(c) for c in close) + "?") if close else \
            "; `envlock doctor` prints the ids of the advisories it finds"
        raise UsageError(f"unknown advisory {args.id!r}{hint}")
    d = _describe(adv)
    if args.json:
        out.print(json.dumps(d, indent=2, default=str))
        return ExitCode.OK
    out.print(f"{adv.id}: {adv.title}")
    out.print(f"  severity {adv.severity} · category {adv.category} · status {adv.status}")
    out.print("")
    out.print("  " + " ".join(adv.summary.split()))
    out.print("")
    out.print("Applies when:")
    for line in d["applies_when"]:
        out.print("  " + line)
    if adv.symptoms or adv.signals or adv.context or adv.absent:
        out.print("In a log:")
        for p in adv.symptoms:
            out.print(f"  pattern      {p}")
        for s in adv.signals:
            out.print(f"  death/hang   {s}")
        for p in adv.context:
            out.print(f"  next to a failure  {p}")
        for p in adv.absent:
            out.print(f"  ruled out by {p}")
    out.print("Fix (best first):")
    for i, f in enumerate(adv.fix, 1):
        out.print(f"  {i}. {f}")
    out.print("Sources:")
    for s in adv.sources:
        out.print(f"  {s}")
    if d["note"]:
        out.print("Note:")
        out.print("  " + " ".join(str(d["note"]).split()))
    return ExitCode.OK
