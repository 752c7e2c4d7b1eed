"""``envlock doctor`` as a function: known problems of a machine, from its snapshot, its
logs and (optionally) live smoke checks."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from envlock.checks.advisories import advisory_findings, contradiction_findings
from envlock.knowledge.facts import Facts, facts_from_snapshot
from envlock.checks.finding import Finding, sort_findings
from envlock.checks.logs import RuledOut, match_finding, rank_logs, triage_logs
from envlock.checks.smoke import SmokeResult
from envlock.matrix.matrix import Matrix
from envlock.snapshot import Snapshot

if TYPE_CHECKING:
    from envlock.checks.differential import Differential

__all__ = ["DoctorResult", "doctor", "smoke_findings"]


@dataclass(frozen=True)
class DoctorResult:
    findings: Tuple[Finding, ...]
    smoke: Tuple[SmokeResult, ...] = ()
    #: advisories the logs pointed at whose condition is false here (``--verbose``)
    ruled_out: Tuple[RuledOut, ...] = ()
    #: (advisory ids, why) not checked: their condition is unknown on this machine
    not_checked: Tuple[Tuple[str, str], ...] = ()
    #: set when the logs are evidently from another machine and were judged on their own
    #: facts: the one line that says so
    judged_from: Optional[str] = None
    #: the logs' differential: each recognised symptom, then its causes ranked (issue 28)
    diagnosis: Optional["Differential"] = None
    #: set when the machine's environment variables were not taken for the logs' process
    #: (the job's own were not recorded): the one line that says so
    environment: Optional[str] = None

    @property
    def ok(self) -> bool:
        """Nothing blocks training (warnings fail only ``--strict``, as in verify, fleet)."""
        return not any(f.severity == "error" for f in self.findings)

    @property
    def environment_matters(self) -> bool:
        """Whether a cause the logs point at was left possible for want of the job's
        environment variables (then :attr:`environment` is worth a line of the report)."""
        if not self.environment or self.diagnosis is None:
            return False
        causes = [c for d in self.diagnosis.diagnoses for c in d.causes]
        return any(c.verdict == "possible" and any(f.startswith("env.") for f in c.facts)
                   for c in (*causes, *self.diagnosis.also))

    def failed(self, strict: bool = False) -> bool:
        return not self.ok or (strict and any(f.severity == "warning" for f in self.findings))

    def to_dict(self) -> Dict[str, object]:
        d: Dict[str, object] = {"ok": self.ok, "findings": [f.to_dict() for f in self.findings]}
        if self.judged_from:
            d["judged_from"] = self.judged_from
        if self.environment:
            d["environment"] = self.environment
        if self.diagnosis is not None:
            d["diagnosis"] = self.diagnosis.to_dict()
        if self.ruled_out:
            d["ruled_out"] = [{"id": r.advisory, "because": list(r.because)}
                              for r in self.ruled_out]
        if self.not_checked:
            d["not_checked"] = [{"advisories": ids.split(", "), "reason": why}
                                for ids, why in self.not_checked]
        if self.smoke:
            d["smoke"] = [{"check": s.name, "outcome": s.outcome, "signal": s.signal,
                           "detail": s.detail, "advisories": list(s.advisories),
                           **({"works_with": dict(s.works_with)} if s.works_with else {})}
                          for s in self.smoke]
        return d


_SMOKE_FINDING = {
    "signal": "the check crashed",
    "timeout": "the check hung",
    "wrong": "the check computed a wrong result (silent data corruption)",
    "error": "the check failed",
}


def smoke_findings(results: Sequence[SmokeResult], matrix: Matrix,
                   facts: Optional[Facts]) -> Tuple[List[Finding], List[SmokeResult]]:
    """Failed smoke checks -> findings; each is tied to the advisories that explain it."""
    findings: List[Finding] = []
    annotated: List[SmokeResult] = []
    for r in results:
        if r.ok:
            annotated.append(r)
            continue
        marker = {"SIGFPE": "Signal 8 (SIGFPE)", "SIGSEGV": "Signal 11 (SIGSEGV)",
                  "SIGBUS": "Bus error", "SIGABRT": "Signal 6 (SIGABRT)",
                  "timeout": "Watchdog caught collective operation timeout"}.get(r.signal or "", "")
        text = f"{marker}\n{r.output}"
        if r.outcome == "wrong":
            text += "\nsilently wrong data device-to-device copies return zeros"
        ranked = [m for m in rank_logs([(r.name, text)], matrix, facts, limit=3)]
        ids = tuple(m.advisory for m in ranked)
        annotated.append(SmokeResult(r.name, r.outcome, r.signal, r.detail, r.output, ids,
                                     r.works_with))
        fix: List[str] = []
        if r.works_with:
            fix.append("export " + " ".join(f"{k}={v}" for k, v in r.works_with.items()))
        for aid in ids[:1]:
            fix.extend(matrix.advisories[aid].fix)
        sig = f" ({r.signal})" if r.signal and r.signal != "timeout" else ""
        findings.append(Finding(
            id=f"smoke-{r.name.split('[')[0]}", severity="error",
            category="nccl" if "allreduce" in r.name else "library",
            title=f"smoke check {r.name}: {_SMOKE_FINDING.get(r.outcome, r.outcome)}{sig}",
            detail=r.detail + (f"; likely: {', '.join(ids)}" if ids else ""),
            fix=tuple(fix), sources=tuple(s for aid in ids[:1]
                                          for s in matrix.advisories[aid].sources),
            subject=r.name))
    return findings, annotated


def _log_machine(snapshot: Snapshot, facts: Facts, matrix: Matrix,
                 logs: Sequence[Tuple[str, str]]) -> Tuple[Facts, Optional[str]]:
    """The logs' own facts and the line that says so, when this host is evidently not the
    machine the logs came from; else this host's facts and None."""
    from envlock.checks.logread import log_facts_view, read_log
    from envlock.knowledge.logfacts import other_machine

    view = log_facts_view([read_log(t[-_LOG_BYTES:], o) for o, t in logs], matrix, None)
    desc = other_machine(facts, view)
    if desc is None:
        return facts, None
    return view, (f"the log is from another machine ({desc}); judged from the log; pass "
                  f"--snapshot from that machine for a full check")


_LOG_BYTES = 8 * 1024 * 1024


def doctor(snapshot: Snapshot, matrix: Matrix, *, logs: Sequence[Tuple[str, str]] = (),
           smoke: Sequence[SmokeResult] = (), live: bool = False) -> DoctorResult:
    """Findings for a machine. ``live``: the snapshot is of this host, taken now (no
    ``--snapshot``); logs evidently from another machine are then judged on their own facts."""
    from envlock.checks.arch_span import arch_span_findings

    facts = facts_from_snapshot(snapshot, matrix)
    judged_from: Optional[str] = None
    environment: Optional[str] = None
    if live and logs and not smoke:
        facts, judged_from = _log_machine(snapshot, facts, matrix, logs)
        if judged_from is None:
            # the log's process ran with its own environment, not this shell's: an unset
            # CUDA_VISIBLE_DEVICES here rules nothing out about the job that crashed
            facts = facts.for_another_process()
            environment = ("this shell's environment variables are not the job's: causes "
                           "that depend on them stay possible")
    elif logs and not live and not snapshot.taken_in_a_job:
        # the same for a snapshot recorded from a shell (no launcher variables): the job's
        # launcher or batch script may have set or unset what that shell had
        facts = facts.for_another_process()
        environment = ("the snapshot was taken outside a job (no RANK, SLURM_PROCID or other "
                       "launcher variable): causes that depend on the job's environment "
                       "variables stay possible; a snapshot taken inside the job (`srun "
                       "envlock snapshot`, `envlock verify --stage runtime`) decides them")
    findings = advisory_findings(matrix, facts)
    if judged_from is None:
        # the GPUs and torch of this host: not the log's machine's
        findings += arch_span_findings(snapshot)
    findings += contradiction_findings(facts, findings)
    ruled: Tuple[RuledOut, ...] = ()
    diagnosis = None
    if logs:
        from envlock.checks.differential import differential

        triage = triage_logs(logs, matrix, facts)
        ruled = triage.ruled_out
        diagnosis = differential(logs, matrix, facts, triage)
        by_id = {f.id: f for f in findings}
        for m in triage.matches:
            lf = match_finding(m, matrix, facts)
            old = by_id.get(lf.id)
            if old is not None:  # true on the machine and seen in the log: log evidence
                by_id[lf.id] = replace(old, detail=lf.detail, score=lf.score,
                                       evidence=lf.evidence, extra=lf.extra)
            else:
                by_id[lf.id] = lf
        findings = list(by_id.values())
    annotated: List[SmokeResult] = list(smoke)
    if smoke:
        sf, annotated = smoke_findings(smoke, matrix, facts)
        findings.extend(sf)
    from envlock.knowledge.unchecked import undecided_advisories

    reported = {f.id for f in findings}
    skipped = []
    for ids, why in undecided_advisories(None if judged_from else snapshot, matrix, facts):
        left = [i for i in ids.split(", ") if i not in reported]  # a log may report them
        if left:
            skipped.append((", ".join(left), why))
    from envlock.checks.severity import settle_all

    return DoctorResult(findings=tuple(sort_findings(settle_all(findings))),
                        smoke=tuple(annotated),
                        ruled_out=ruled, not_checked=tuple(skipped), judged_from=judged_from,
                        diagnosis=diagnosis, environment=environment)
