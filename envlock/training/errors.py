"""The exception ``strict=True`` raises: it carries the findings that stopped the run."""

from __future__ import annotations

from typing import Sequence, Tuple

from envlock.checks.finding import Finding

__all__ = ["TrainingGuardError"]


class TrainingGuardError(RuntimeError):
    """Raised on every rank, so a misconfigured job stops everywhere, not on rank 0 only."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        self.findings: Tuple[Finding, ...] = tuple(findings)
        first = self.findings[0].title if self.findings else "no findings"
        more = f" (+{len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        super().__init__(f"envlock training guard: {first}{more}")
