"""The ``Finding`` value that verify, doctor and fleet all produce."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["Finding", "SEVERITIES", "sort_findings", "CATEGORIES"]

SEVERITIES = ("error", "warning", "info")
CATEGORIES = ("gpu-arch", "driver", "library", "nccl", "topology", "host", "packages",
              "config", "training")
_ORDER = {s: i for i, s in enumerate(SEVERITIES)}


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

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"id": self.id, "severity": self.severity,
                             "category": self.category, "title": self.title,
                             "detail": self.detail, "fix": list(self.fix),
                             "sources": list(self.sources)}
        if self.subject is not None:
            d["subject"] = self.subject
        if self.score is not None:
            d["score"] = round(self.score, 3)
        return d


def sort_findings(findings: Sequence[Finding]) -> List[Finding]:
    """Most severe first, then by score (log matches), then by id for stable output."""
    return sorted(findings, key=lambda f: (_ORDER.get(f.severity, 9), -(f.score or 0.0),
                                           f.category, f.id, f.subject or ""))
