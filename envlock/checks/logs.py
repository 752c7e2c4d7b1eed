"""Log triage: a pasted crash plus the machine's facts -> the advisories that explain it.

The API other code builds on is :func:`triage_logs` (and :func:`log_findings` for doctor).
Each advisory the logs point at gets an *evidence level*, then a verdict from its
condition judged on the machine (three-valued, :func:`envlock.knowledge.evaluate.judge`):

Evidence levels, strongest first (``envlock.checks.finding.EVIDENCE``):

* ``pattern``: one of the advisory's ``symptoms`` regular expressions matched a log line,
  and the matched text is more than a process death (a symptom that only matches
  ``exitcode: -8`` or "Floating point exception (core dumped)" counts as a signal);
* ``signal``: only a process death the log shows (``exitcode: -8``, ``Signal 11
  (SIGSEGV)``, "Bus error", a collective timeout, a backtrace stuck in a CUDA/NCCL wait)
  that the advisory lists in ``signals``;
* ``condition``: only routine ``context`` lines (an NCCL transport line, a "Running
  tokenizer" progress bar), reported only when the condition holds on the machine.

Logs are read by :mod:`envlock.checks.logread` first (prefixes, wrapped lines, per-rank
repeats, hang evidence) and patterns are matched per line and across one line break. The
facts a log states (GPU names and capability, driver, NCCL version, ``topo -m`` links, the
torch build's arch list) sit under the machine's facts: the machine wins where it knows.
An advisory is skipped when the log contains one of its ``absent`` patterns (the log names
another cause); its ``context`` lines count only when the log shows a failure at all.

Verdicts:

* condition **false** on this machine: never reported, whatever the log says; returned in
  :attr:`LogTriage.ruled_out` with the facts that rule it out (``doctor --verbose``);
* condition **unknown**: reported at ``pattern`` level, marked not confirmed with the
  unknown fact paths; a bare signal needs corroboration (a ``context`` line, or a condition
  leaf that a fact *the log states* makes true, e.g. the GPU model it names), otherwise a
  ``signal``-level match goes to :attr:`LogTriage.uncorroborated`;
* condition **true**: reported (a signal is corroborated by it).

Ordering: evidence level, then confirmed before not confirmed, then score. The score only
orders matches of the same level; it is simple so results are explainable:

* every symptom pattern that matches adds 1 + (pattern length/80, at most 1): exact error
  strings outweigh generic ones;
* each listed signal the log shows adds 0.75, each context line 0.5;
* each corroborating leaf adds 0.4 (at most three; a leaf ``in`` a list of n > 2 values
  counts 2/n of that: naming fewer values is stronger evidence);
* a condition that holds doubles the score.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Set, Tuple

from envlock.checks.advisories import advisory_finding
from envlock.knowledge.evaluate import Outcome, judge
from envlock.knowledge.facts import Facts
from envlock.checks.finding import EVIDENCE, Finding
from envlock.checks.logrank import corroboration
from envlock.checks.logread import SIGNAL_PATTERNS, ReadLog, find, log_facts_view, read_log
from envlock.matrix.matrix import Matrix

__all__ = ["SIGNAL_PATTERNS", "signals_in", "only_a_death", "rank_logs", "triage_logs",
           "log_findings", "match_finding", "LogMatch", "LogTriage", "RuledOut"]

_MAX_BYTES = 32 * 1024 * 1024  # then envlock.checks.logprep bounds what is matched
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
    #: the machine's facts over the logs' own (what the verdicts were judged on)
    facts: Optional[Facts] = None
    #: advisories an ``absent`` pattern of the log rules out: (id, the log line)
    excluded: Tuple[Tuple[str, str], ...] = ()
    #: one line per log that was cut or had binary lines skipped (envlock.checks.logprep)
    cut: Tuple[str, ...] = ()


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
    """(origin, text) pairs -> the advisories they point at, judged on the machine.

    The logs are read first (:func:`envlock.checks.logread.read_log`: rank/time/host
    prefixes stripped, wrapped lines re-joined, per-rank repeats folded, hang evidence);
    the facts they state (GPU names, driver, NCCL version, ``topo -m``) sit under the
    machine's own (:class:`~envlock.checks.logread.LayeredFacts`: the machine wins)."""
    from envlock.checks.logprep import prepare

    prepared = [(o, prepare(t[-_MAX_BYTES:] if isinstance(t, str) else
                            t[-_MAX_BYTES:].decode("utf-8", "replace"), o)) for o, t in logs]
    cut = tuple(n for _, (_, n) in prepared if n)
    read = [read_log(t, o) for o, (t, _) in prepared]
    view = log_facts_view(read, matrix, facts)
    sigs: Set[str] = set().union(*(lg.signals for lg in read)) if read else set()
    hang = next((h for lg in read for h in lg.hang), None)
    advisories = list(matrix.advisories.values())
    failure = _failure(read, advisories)
    kept: List[LogMatch] = []
    ruled: List[RuledOut] = []
    bare: List[LogMatch] = []
    excluded: List[Tuple[str, str]] = []
    for adv in advisories:
        gone = next((ln for p in adv.absent for lg in read
                     for ln in (find(lg, p),) if ln is not None), None)
        if gone is not None:
            excluded.append((adv.id, _short(gone)))
            continue  # the log names another cause (an ``absent`` pattern)
        score = 0.0
        specific = False
        evidence: List[str] = []
        matched = False
        for pat in adv.symptoms:
            for lg in read:
                line = find(lg, pat)
                if line is not None:
                    matched = True
                    score += 1.0 + min(len(pat), 80) / 80.0
                    evidence.append(f"{lg.origin}: {_short(line)}")
                    # a symptom whose matched text is only a process death ("exitcode: -8",
                    # "Floating point exception (core dumped)") is a signal, not a pattern
                    m = re.search(pat, line, re.IGNORECASE)
                    specific = specific or not only_a_death(m.group(0) if m else line)
                    break
        listed = sorted(set(adv.signals) & sigs)
        for s in listed:
            score += 0.75
            evidence.append(f"hang: {_short(hang)}" if s == "timeout" and hang
                            else f"process death: {s}")
        contexts = 0
        if failure:  # routine lines (NCCL INFO, warnings) count only next to a failure
            for pat in adv.context:
                for lg in read:
                    line = find(lg, pat)
                    if line is not None:
                        contexts += 1
                        score += 0.5
                        evidence.append(f"{lg.origin}: {_short(line)}")
                        break
        if score == 0:
            continue
        if specific:
            level = "pattern"
        elif listed or matched:
            level = "signal"
        else:
            level = "condition"  # only routine context lines
        lines = tuple(dict.fromkeys(evidence))
        outcome: Optional[Outcome] = None
        support: List[Tuple[str, float]] = []
        if adv.condition is not None:
            outcome = judge(adv.condition, view)
            if outcome.value is False:
                ruled.append(RuledOut(adv.id, outcome.because, lines))
                continue
            if outcome.value is True:
                score *= 2.0
                lines += ("this machine matches its condition",)
            else:
                support = corroboration(adv.condition, view)
                if support:
                    score += 0.4 * sum(sorted((w for _, w in support), reverse=True)[:3])
                    lines += ("the log shows " + "; ".join(k for k, _ in support[:3]),)
        match = LogMatch(adv.id, score, lines, level, outcome)
        confirmed = outcome is not None and outcome.value is True
        if level == "signal" and not (confirmed or support or contexts):
            bare.append(match)  # a bare signal: nothing backs it
            continue
        if level == "condition" and not confirmed:
            continue  # a routine line on a machine that does not match: nothing
        kept.append(match)
    kept.sort(key=_sort_key)
    bare.sort(key=_sort_key)
    ruled.sort(key=lambda r: r.advisory)
    return LogTriage(tuple(kept[:limit]), tuple(ruled), tuple(bare), view, tuple(excluded), cut)


_FAILURE = re.compile(r"\b(?:Error|Exception|Traceback|FAILED|fatal|Aborted|killed)\b")


def _failure(read: Sequence[ReadLog], advisories: Sequence[Any]) -> bool:
    """Whether the logs show a failure at all (routine lines only count next to one)."""
    if any(lg.signals or lg.hang for lg in read):
        return True
    if any(_FAILURE.search(ln) for lg in read for ln in lg.lines):
        return True
    return any(find(lg, p) is not None for a in advisories for p in a.symptoms for lg in read)


def _short(line: Optional[str]) -> str:
    line = (line or "").strip()
    return line if len(line) <= 200 else line[:197] + "..."


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
                   score=m.score, extra={**f.extra, "evidence": list(m.evidence)},
                   evidence=m.level,
                   not_confirmed=m.not_confirmed)
