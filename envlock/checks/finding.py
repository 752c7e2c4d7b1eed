"""The ``Finding`` value that verify, doctor and fleet all produce."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["Finding", "SEVERITIES", "sort_findings", "CATEGORIES", "EVIDENCE"]

SEVERITIES = ("error", "warning", "info")
CATEGORIES = ("gpu-arch", "driver", "library", "nccl", "topology", "host", "packages",
              "config", "training")
_ORDER = {s: i for i, s in enumerate(SEVERITIES)}
#: How a finding is known, strongest first: a symptom pattern matched in a log, a process
#: death (signal, timeout) corroborated by a fact, the machine's facts alone. A finding
#: without an ``evidence`` label (verify's own checks) counts as ``condition``.
EVIDENCE = ("pattern", "signal", "condition")
_EVIDENCE = {e: i for i, e in enumerate(EVIDENCE)}


@dataclass(frozen=True)
class Finding:
    """One problem (or note) about a machine, with the exact way to fix it."""

    id: str
    severity: str  # error | warning | info
    category: str
    title: str
    detail: str = ""
    fix: Tuple[str, ...] = ()
    sources: Tuple[str, ...] = ()
    #: what it is about (a package, a library, a GPU index), for grouping and JUnit names
    subject: Optional[str] = None
    #: ranking score for log matches (doctor --log), higher is more likely
    score: Optional[float] = None
    extra: Dict[str, Any] = field(default_factory=dict, compare=False)
    #: how it is known: one of :data:`EVIDENCE` (None: the machine's facts)
    evidence: Optional[str] = None
    #: fact paths that were unknown: the advisory is reported but "not confirmed"
    not_confirmed: Tuple[str, ...] = ()

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"id": self.id, "severity": self.severity,
                             "category": self.category, "title": self.title,
                             "detail": self.detail, "fix": list(self.fix),
                             "sources": list(self.sources)}
        if self.subject is not None:
            d["subject"] = self.subject
        if self.score is not None:
            d["score"] = round(self.score, 3)
        if self.evidence is not None:
            d["evidence"] = self.evidence
        if self.not_confirmed:
            d["not_confirmed"] = list(self.not_confirmed)
        because = self.extra.get("because") if isinstance(self.extra, dict) else None
        if because:
            d["because"] = list(because)  # how the verdict was reached (issue 27)
        return d


def sort_findings(findings: Sequence[Finding]) -> List[Finding]:
    """Strongest evidence first (:data:`EVIDENCE`), confirmed before "not confirmed", then
    by score (log matches), then severity, category and id for stable output.

    Severity is a label, not the sort key: a pattern-matched warning outranks an error
    known only from a bare signal.
    """
    return sorted(findings, key=lambda f: (_EVIDENCE.get(f.evidence or "condition", 9),
                                           bool(f.not_confirmed), -(f.score or 0.0),
                                           _ORDER.get(f.severity, 9), f.category, f.id,
                                           f.subject or ""))
