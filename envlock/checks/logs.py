"""Log triage: a pasted crash plus the machine's facts -> the most likely advisories.

Scoring is simple and documented so results are explainable:

* every symptom pattern of an advisory that matches the log adds 1 + (pattern length/80,
  at most 1): exact error strings outweigh generic ones;
* a process death the log shows (``exitcode: -8``, ``Signal 11 (SIGSEGV)``, "Bus error",
  a collective timeout) adds 0.75 for each advisory that lists that signal;
* the advisory's condition judged on the machine multiplies the score: 2 when it holds,
  0.25 when it cannot hold, 1 when the machine's facts are unknown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

from envlock.checks.advisories import advisory_finding
from envlock.checks.conditions import evaluate
from envlock.checks.facts import Facts
from envlock.checks.finding import Finding
from envlock.matrix.matrix import Matrix

__all__ = ["SIGNAL_PATTERNS", "signals_in", "rank_logs", "LogMatch"]

SIGNAL_PATTERNS: Dict[str, Tuple[str, ...]] = {
    "SIGFPE": (r"\bsignal 8\b", r"\bSIGFPE\b", r"exit ?code\s*:?\s*-8\b",
               r"Floating point exception"),
    "SIGSEGV": (r"\bsignal 11\b", r"\bSIGSEGV\b", r"exit ?code\s*:?\s*-11\b",
                r"Segmentation fault"),
    "SIGBUS": (r"\bsignal 7\b", r"\bSIGBUS\b", r"exit ?code\s*:?\s*-7\b", r"\bBus error\b"),
    "SIGABRT": (r"\bsignal 6\b", r"\bSIGABRT\b", r"exit ?code\s*:?\s*-6\b",
                r"\bAborted \(core dumped\)"),
    "SIGKILL": (r"\bsignal 9\b", r"\bSIGKILL\b", r"exit ?code\s*:?\s*-9\b"),
    "SIGILL": (r"\bsignal 4\b", r"\bSIGILL\b", r"Illegal instruction"),
    "timeout": (r"Watchdog caught collective operation timeout", r"\btimed out\b",
                r"\bDeadline exceeded\b", r"\bhangs?\b"),
}
_MAX_BYTES = 8 * 1024 * 1024
_MAX_LINE = 4096


@dataclass(frozen=True)
class LogMatch:
    advisory: str
    score: float
    evidence: Tuple[str, ...]


def _line_of(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    line = text[start: end if end != -1 else len(text)].strip()
    return line if len(line) <= 200 else line[:197] + "..."


def signals_in(text: str) -> Set[str]:
    found = set()
    for sig, patterns in SIGNAL_PATTERNS.items():
        if any(re.search(p, text, re.IGNORECASE) for p in patterns):
            found.add(sig)
    return found


def rank_logs(logs: Sequence[Tuple[str, str]], matrix: Matrix,
              facts: Optional[Facts], limit: int = 10) -> List[LogMatch]:
    """(origin, text) pairs -> advisories ranked by how well they explain the logs."""
    # each line capped (4 KiB) before any pattern runs: bounds regex backtracking per line
    texts = [(o, "\n".join(line[:_MAX_LINE] for line in t[-_MAX_BYTES:].split("\n")))
             for o, t in logs]
    sigs: Set[str] = set()
    for _, t in texts:
        sigs |= signals_in(t)
    out: List[LogMatch] = []
    for adv in matrix.advisories.values():
        score = 0.0
        evidence: List[str] = []
        for pat in adv.symptoms:
            rx = re.compile(pat, re.IGNORECASE)
            for origin, text in texts:
                m = rx.search(text)
                if m:
                    score += 1.0 + min(len(pat), 80) / 80.0
                    evidence.append(f"{origin}: {_line_of(text, m.start())}")
                    break
        for s in set(adv.signals) & sigs:
            score += 0.75
            evidence.append(f"process death: {s}")
        if score == 0:
            continue
        if facts is not None and adv.condition is not None:
            verdict = evaluate(adv.condition, facts)
            if verdict is True:
                score = score * 2.0
                evidence.append("this machine matches its condition")
            elif verdict is False:
                score *= 0.25
        out.append(LogMatch(adv.id, score, tuple(dict.fromkeys(evidence))))
    out.sort(key=lambda m: (-m.score, m.advisory))
    return out[:limit]


def log_findings(logs: Sequence[Tuple[str, str]], matrix: Matrix,
                 facts: Optional[Facts], limit: int = 10) -> List[Finding]:
    findings = []
    for m in rank_logs(logs, matrix, facts, limit):
        adv = matrix.advisories[m.advisory]
        f = advisory_finding(adv, score=m.score, facts=facts)
        detail = f"Log: {'; '.join(m.evidence[:3])}. {f.detail}"
        findings.append(Finding(f.id, f.severity, f.category, f.title, detail, f.fix,
                                f.sources, score=m.score, extra={"evidence": list(m.evidence)}))
    return findings
