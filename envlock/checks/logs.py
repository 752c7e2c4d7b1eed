"""Log triage: a pasted crash plus the machine's facts -> the advisories that explain it.

The API other code builds on is :func:`triage_logs` (and :func:`log_findings` for doctor).
Each advisory the logs point at gets an *evidence level*, then a verdict from its
condition judged on the machine (three-valued, :func:`envlock.checks.conditions.judge`):

Evidence levels, strongest first (``envlock.checks.finding.EVIDENCE``):

* ``pattern``: one of the advisory's ``symptoms`` regular expressions matched a log line,
  and the matched text is more than a process death (a symptom that only matches
  ``exitcode: -8`` or "Floating point exception (core dumped)" counts as a signal);
* ``signal``: only a process death the log shows (``exitcode: -8``, ``Signal 11
  (SIGSEGV)``, "Bus error", a collective timeout) that the advisory lists in ``signals``.

Verdicts:

* condition **false** on this machine: never reported, whatever the log says; returned in
  :attr:`LogTriage.ruled_out` with the facts that rule it out (``doctor --verbose``);
* condition **unknown**: reported only at ``pattern`` level, marked not confirmed with the
  unknown fact paths; a bare signal needs a corroborating fact, so a ``signal``-level match
  with an unknown (or no) condition goes to :attr:`LogTriage.uncorroborated`;
* condition **true**: reported (a signal is corroborated by it).

Ordering: evidence level, then confirmed before not confirmed, then score. The score only
orders matches of the same level; it is simple so results are explainable:

* every symptom pattern that matches adds 1 + (pattern length/80, at most 1): exact error
  strings outweigh generic ones;
* each listed signal the log shows adds 0.75;
* a condition that holds doubles the score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Set, Tuple

from envlock.checks.advisories import advisory_finding
from envlock.checks.conditions import Outcome, judge
from envlock.checks.facts import Facts
from envlock.checks.finding import EVIDENCE, Finding
from envlock.matrix.matrix import Matrix

__all__ = ["SIGNAL_PATTERNS", "signals_in", "only_a_death", "rank_logs", "triage_logs",
           "log_findings", "match_finding", "LogMatch", "LogTriage", "RuledOut"]

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
    """An advisory the logs point at, with how (``level``) and its verdict on the machine."""

    advisory: str
    score: float
    evidence: Tuple[str, ...]  # the log lines (and process deaths) that matched
    level: str = "pattern"  # "pattern" | "signal" (see EVIDENCE)
    outcome: Optional[Outcome] = None  # the condition on this machine; None: not judged

    @property
    def not_confirmed(self) -> Tuple[str, ...]:
        """Unknown fact paths when the condition could not be decided."""
        if self.outcome is None or self.outcome.value is not None:
            return ()
        return self.outcome.unknown


@dataclass(frozen=True)
class RuledOut:
    """An advisory the logs point at whose condition is false on this machine."""

    advisory: str
    because: Tuple[str, ...]  # ``path=value`` facts that make the condition false
    evidence: Tuple[str, ...]


@dataclass(frozen=True)
class LogTriage:
    matches: Tuple[LogMatch, ...]  # reported, strongest evidence first
    ruled_out: Tuple[RuledOut, ...]  # condition false: never reported
    uncorroborated: Tuple[LogMatch, ...]  # a bare signal with no fact to back it


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


#: words that describe a process death around a signal marker ("Caught signal 8 (Floating
#: point exception: integer divide by zero)", "Signal 11 (SIGSEGV) received by PID 7")
_DEATH_WORDS = re.compile(r"caught|fatal python error|core dumped|received by pid|integer divide "
                          r"by zero|traceback|exit ?code|[\W\d_]", re.IGNORECASE)


def only_a_death(text: str) -> bool:
    """Whether a matched log text says no more than "the process died" (a signal or a
    timeout): such a symptom match is ``signal`` evidence, not ``pattern`` evidence."""
    rest = text
    for patterns in SIGNAL_PATTERNS.values():
        for p in patterns:
            rest = re.sub(p, " ", rest, flags=re.IGNORECASE)
    return len(_DEATH_WORDS.sub("", rest)) < 4


def _sort_key(m: LogMatch) -> Tuple[object, ...]:
    return (EVIDENCE.index(m.level), bool(m.not_confirmed), -m.score, m.advisory)


def triage_logs(logs: Sequence[Tuple[str, str]], matrix: Matrix,
                facts: Optional[Facts], limit: int = 10) -> LogTriage:
    """(origin, text) pairs -> the advisories they point at, judged on the machine."""
    # each line capped (4 KiB) before any pattern runs: bounds regex backtracking per line
    texts = [(o, "\n".join(line[:_MAX_LINE] for line in t[-_MAX_BYTES:].split("\n")))
             for o, t in logs]
    sigs: Set[str] = set()
    for _, t in texts:
        sigs |= signals_in(t)
    kept: List[LogMatch] = []
    ruled: List[RuledOut] = []
    bare: List[LogMatch] = []
    for adv in matrix.advisories.values():
        score = 0.0
        specific = False
        evidence: List[str] = []
        for pat in adv.symptoms:
            rx = re.compile(pat, re.IGNORECASE)
            for origin, text in texts:
                m = rx.search(text)
                if m:
                    score += 1.0 + min(len(pat), 80) / 80.0
                    evidence.append(f"{origin}: {_line_of(text, m.start())}")
                    # a symptom whose matched text is only a process death ("exitcode: -8",
                    # "Floating point exception (core dumped)") is a signal, not a pattern
                    specific = specific or not only_a_death(m.group(0))
                    break
        level = "pattern" if specific else "signal"
        for s in sorted(set(adv.signals) & sigs):
            score += 0.75
            evidence.append(f"process death: {s}")
        if score == 0:
            continue
        lines = tuple(dict.fromkeys(evidence))
        outcome: Optional[Outcome] = None
        if facts is not None and adv.condition is not None:
            outcome = judge(adv.condition, facts)
            if outcome.value is False:
                ruled.append(RuledOut(adv.id, outcome.because, lines))
                continue
            if outcome.value is True:
                score *= 2.0
                lines += ("this machine matches its condition",)
        match = LogMatch(adv.id, score, lines, level, outcome)
        if level == "signal" and (outcome is None or outcome.value is not True):
            bare.append(match)
            continue
        kept.append(match)
    kept.sort(key=_sort_key)
    bare.sort(key=_sort_key)
    ruled.sort(key=lambda r: r.advisory)
    return LogTriage(tuple(kept[:limit]), tuple(ruled), tuple(bare))


def rank_logs(logs: Sequence[Tuple[str, str]], matrix: Matrix,
              facts: Optional[Facts], limit: int = 10) -> List[LogMatch]:
    """The reported matches of :func:`triage_logs`, strongest evidence first."""
    return list(triage_logs(logs, matrix, facts, limit).matches)


def log_findings(logs: Sequence[Tuple[str, str]], matrix: Matrix,
                 facts: Optional[Facts], limit: int = 10) -> List[Finding]:
    """Findings for the reported matches, labelled with their evidence level."""
    return [match_finding(m, matrix, facts) for m in rank_logs(logs, matrix, facts, limit)]


def match_finding(m: LogMatch, matrix: Matrix, facts: Optional[Facts]) -> Finding:
    adv = matrix.advisories[m.advisory]
    f = advisory_finding(adv, score=m.score, facts=facts, not_confirmed=m.not_confirmed)
    detail = f"Log: {'; '.join(m.evidence[:3])}. {f.detail}"
    return Finding(f.id, f.severity, f.category, f.title, detail, f.fix, f.sources,
                   score=m.score, extra={"evidence": list(m.evidence)}, evidence=m.level,
                   not_confirmed=m.not_confirmed)
