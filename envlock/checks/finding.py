"""The ``Finding`` value that verify, doctor and fleet all produce."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, get_args

__all__ = ["Finding", "Severity", "Category", "Evidence", "SEVERITIES", "sort_findings",
           "CATEGORIES", "EVIDENCE"]

#: the closed sets a finding is made of: a value outside them is a bug where it is made,
#: so :class:`Finding` refuses it there (not later, in a renderer or a JUnit file)
Severity = Literal["error", "warning", "info"]
Category = Literal["gpu-arch", "driver", "library", "nccl", "topology", "host", "packages",
                   "python", "config", "training"]
#: How a finding is known, strongest first: a symptom pattern matched in a log, a process
#: death (signal, timeout) corroborated by a fact, the machine's facts alone. A finding
#: without an ``evidence`` label (verify's own checks) counts as ``condition``.
Evidence = Literal["pattern", "signal", "condition"]

SEVERITIES: Tuple[str, ...] = get_args(Severity)
CATEGORIES: Tuple[str, ...] = get_args(Category)
EVIDENCE: Tuple[str, ...] = get_args(Evidence)
_ORDER = {s: i for i, s in enumerate(SEVERITIES)}
_EVIDENCE = {e: i for i, e in enumerate(EVIDENCE)}


@dataclass(frozen=True)
class Finding:
    """One problem (or note) about a machine, with the exact way to fix it."""

    id: str
    severity: Severity
    category: Category
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
    evidence: Optional[Evidence] = None
    #: fact paths that were unknown: the advisory is reported but "not confirmed"
    not_confirmed: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ValueError(f"finding {self.id}: severity {self.severity!r} is not one of "
                             f"{', '.join(SEVERITIES)}")
        if self.category not in CATEGORIES:
            raise ValueError(f"finding {self.id}: category {self.category!r} is not one of "
                             f"{', '.join(CATEGORIES)}")
        if self.evidence is not None and self.evidence not in EVIDENCE:
            raise ValueError(f"finding {self.id}: evidence {self.evidence!r} is not one of "
                             f"{', '.join(EVIDENCE)}")

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
