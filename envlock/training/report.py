"""Showing findings to the person running the job: once, on rank 0, on stderr.

The guard runs inside the user's training process, where no envlock command line exists to
render its findings; without this the findings would only reach users who inspect the
return value. Only rank 0 writes, so a 64-rank job prints one report, not 64.
"""

from __future__ import annotations

import sys
from typing import Optional, Sequence, TextIO

from envlock.checks.finding import Finding, sort_findings
from envlock.render.text import findings_text

__all__ = ["emit", "render"]


def render(findings: Sequence[Finding], header: str = "envlock training guard") -> str:
    return findings_text(sort_findings(findings), header=header)


def emit(findings: Sequence[Finding], rank: int, out: Optional[TextIO] = None) -> None:
    """Write the findings (nothing when there are none) on rank 0 only."""
    if not findings or rank != 0:
        return
    stream = out if out is not None else sys.stderr
    stream.write(render(findings) + "\n")
    stream.flush()
