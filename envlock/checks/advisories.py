"""Advisories that apply to a machine, as findings (used by doctor and verify)."""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from envlock.knowledge.evaluate import evaluate, judge
from envlock.knowledge.facts import UNKNOWN, Facts
from envlock.knowledge.values import is_partial
from envlock.checks.finding import Finding
from envlock.matrix.conditions import fact_paths
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import Advisory

__all__ = ["advisory_findings", "advisory_finding", "seen", "ruled_out_by",
           "contradiction_findings"]


def seen(adv: Advisory, facts: Facts) -> str:
    """What was observed: the facts the advisory's condition looks at, with their values."""
    if adv.condition is None:
        return ""
    parts: List[str] = []
    done = set()
    for scope, fact, _ in sorted(fact_paths(adv.condition), key=lambda x: (str(x[0]), x[1])):
        if scope is not None:
            key = f"{scope}.{fact}"
            if key in done:
                continue
            done.add(key)
            elems = facts.elements(scope)
            if elems is UNKNOWN:
                continue
            vals = sorted({str(e.get(fact)) for e in elems
                           if e.get(fact) is not UNKNOWN and e.get(fact) is not None})
            if vals:
                parts.append(f"{scope} {fact}: {', '.join(vals[:6])}")
            continue
        if fact in done:
            continue
        done.add(fact)
        value = facts.get(fact)
        if value is UNKNOWN or value is None:
            continue
        if isinstance(value, list):
            shown = sorted({str(v) for v in value if v is not UNKNOWN})
            if not shown:
                continue
            value = ", ".join(shown[:6]) + (" ..." if len(shown) > 6 else "")
        said = f"{fact} in {value}" if is_partial(value) else f"{fact}={value}"
        how = facts.origin(fact)
        parts.append(f"{said} ({how})" if how else said)
    return "; ".join(parts)


def advisory_finding(adv: Advisory, detail_prefix: str = "", score: Optional[float] = None,
                     facts: Optional[Facts] = None,
                     not_confirmed: Sequence[str] = ()) -> Finding:
    """The finding for an advisory; ``not_confirmed`` names the unknown facts of an
    advisory reported on other evidence (a log line) while its condition is unknown."""
    observed = seen(adv, facts) if facts is not None else ""
    detail = adv.summary
    if observed:
        detail += f" Seen: {observed}."
    if not_confirmed:
        detail += f" Not confirmed: {', '.join(not_confirmed)} unknown."
    if detail_prefix:
        detail = f"{detail_prefix} {detail}"
    from envlock.checks.severity import KIND_SEVERITY

    extra: dict = {"status": adv.status}
    if facts is not None and adv.condition is not None:
        outcome = judge(adv.condition, facts)
        if outcome.because:  # how the verdict was reached (JSON, --verbose)
            extra["because"] = list(outcome.because)
    return Finding(id=adv.id, severity=KIND_SEVERITY.get(adv.id, adv.severity),
                   category=adv.category, title=adv.title,
                   detail=detail.strip(), fix=adv.fix, sources=adv.sources, score=score,
                   extra=extra, not_confirmed=tuple(not_confirmed))


def advisory_findings(matrix: Matrix, facts: Facts,
                      only: Optional[Sequence[str]] = None) -> List[Finding]:
    """Advisories whose condition is *true* on these facts (evidence: the condition).

    The condition alone is evidence only when it holds: an unknown condition is not
    reported from facts alone (a log line can still report it, see ``checks.logs``).
    """
    out: List[Finding] = []
    for adv in matrix.advisories.values():
        if adv.condition is None or (only is not None and adv.id not in only):
            continue
        if evaluate(adv.condition, facts) is True:
            out.append(advisory_finding(adv, facts=facts))
    return out


def contradiction_findings(facts: Facts, reported: Sequence[Finding] = ()) -> List[Finding]:
    """A derived library version that the loaded copy contradicts: something shadows the
    copy the installed wheels (or the torch build's pins) provide (issue 27). Libraries a
    reported finding already names (``system-cublas-shadows-wheel``) are left to it; cuBLASLt
    goes with cuBLAS."""
    out = []
    named = " ".join(f.id for f in reported)
    for c in getattr(facts, "contradictions", ()):
        lib = c.path.split(".")[1]
        family = "cublas" if lib == "cublasLt" else lib
        if f"-{family}-" in named or f"{family} " in " ".join(f.title for f in out):
            continue
        out.append(Finding(
            id="derived-contradiction", severity="info", category="library",
            title=f"{lib} {c.observed} is loaded where {c.derived} was expected",
            detail=str(c), subject=lib,
            fix=(f"grep -m1 lib{lib} /proc/<pid>/maps  # which copy the process mapped; "
                 f"drop other CUDA library directories from LD_LIBRARY_PATH",),
            extra={"because": [str(c)]}))
    return out


def ruled_out_by(adv: Advisory, facts: Facts) -> Tuple[str, ...]:
    """The facts that make an advisory's condition false here (empty when it is not)."""
    if adv.condition is None:
        return ()
    outcome = judge(adv.condition, facts)
    return outcome.because if outcome.value is False else ()
