"""Differential diagnosis of a log: each recognised symptom, then its causes ranked.

``doctor --log`` used to print only advisories whose condition could hold on the machine, so a
log whose symptom was recognised but whose catalogued causes were all ruled out got "no
advisory explains the log". A differential says instead, for each symptom the log shows
(:mod:`envlock.checks.symptoms`):

* the symptom, what it means (the symptom tables, ``compat-matrix/symptoms-*.toml``) and the
  generic next step;
* its causes, each advisory the symptom lists or the log points at, ranked:

  - **confirmed**: its condition holds on the machine (the log's own facts under the
    machine's, :func:`envlock.checks.logs.triage_logs`);
  - **possible**: its condition is unknown: the facts that would decide it, the command
    that gets them, and what is already known of it (the parts of the condition the
    machine settled); an advisory decided inside the job (``log_only``) is possible when its
    own pattern is in the log;
  - **ruled out**: its condition is false, with the deciding facts, or the log names another
    cause (an ``absent`` pattern).

Ordering keeps doctor's ranked answer first: the symptom whose causes hold the best-ranked
advisory of the triage comes first, and within a symptom confirmed, then possible causes the
log points at (in triage order), then the other possible causes, then ruled out. "No advisory
explains the log" is left for logs with no recognised symptom.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Dict, List, Literal, Optional, Sequence, Tuple, Union

from envlock.checks.conditions import judge
from envlock.checks.facts import Facts
from envlock.checks.logs import LogTriage
from envlock.checks.symptoms import WRAPPERS, SymptomHit, scan_logs

__all__ = ["Cause", "Diagnosis", "Differential", "differential", "VERDICTS"]

Verdict = Literal["confirmed", "possible", "ruled-out"]
VERDICTS: Tuple[str, ...] = ("confirmed", "possible", "ruled-out")
#: how many symptoms a differential keeps
MAX_SYMPTOMS = 6


@dataclass(frozen=True)
class Cause:
    advisory: str
    title: str
    verdict: str  # one of VERDICTS
    #: confirmed / ruled out: the deciding ``path=value`` facts; possible: the unknown paths
    facts: Tuple[str, ...] = ()
    #: possible: the command that gets the deciding facts
    decide: str = ""
    #: the advisory's own log line, when the log points at it
    evidence: str = ""
    #: possible: the facts already known of its condition (what they rule out or meet)
    known: Tuple[str, ...] = ()

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"id": self.advisory, "title": self.title, "verdict": self.verdict,
                             "facts": list(self.facts)}
        if self.decide:
            d["decide"] = self.decide
        if self.evidence:
            d["evidence"] = self.evidence
        if self.known:
            d["known"] = list(self.known)
        return d


@dataclass(frozen=True)
class Diagnosis:
    symptom: str  # symptom id
    name: str
    table: str
    kind: str
    meaning: str
    next: str
    hit: SymptomHit
    causes: Tuple[Cause, ...]

    def to_dict(self) -> Dict[str, Any]:
        return {"symptom": self.symptom, "name": self.name, "table": self.table,
                "kind": self.kind, "meaning": self.meaning, "next": self.next,
                "log": {"origin": self.hit.origin, "line": self.hit.line,
                        "lineno": self.hit.lineno, "count": self.hit.count},
                "causes": [c.to_dict() for c in self.causes]}


@dataclass(frozen=True)
class Differential:
    diagnoses: Tuple[Diagnosis, ...]
    #: advisories the log points at that no recognised symptom lists
    also: Tuple[Cause, ...] = ()
    #: one line per log that was longer than the matcher reads
    cut: Tuple[str, ...] = ()

    @property
    def first(self) -> Optional[Cause]:
        """The first answer: the first confirmed or possible cause, symptoms in order."""
        for d in self.diagnoses:
            for c in d.causes:
                if c.verdict != "ruled-out":
                    return c
        return next((c for c in self.also if c.verdict != "ruled-out"), None)

    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"symptoms": [x.to_dict() for x in self.diagnoses]}
        if self.also:
            d["also"] = [c.to_dict() for c in self.also]
        if self.cut:
            d["log_cut"] = list(self.cut)
        return d


def _decide(paths: Sequence[str], have_machine: bool) -> str:
    """The command that gets the facts deciding a possible cause."""
    if not have_machine:
        return ("run `envlock doctor --log FILE` on the machine that wrote the log, or add "
                "`--snapshot` taken there")
    envs = [p[4:] for p in paths if p.startswith("env.")]
    if envs and len(envs) == len(paths):
        return (f"echo {' '.join('$' + e for e in envs[:3])} in the job's environment (or take "
                f"the `--snapshot` inside the job)")
    return "run `envlock doctor` on that machine (a `--snapshot` from it decides the same)"


def _matches_line(adv: Any, line: str) -> Optional[str]:
    for p in adv.symptoms:
        if re.search(p, line, re.IGNORECASE):
            return line
    return None


def differential(logs: Sequence[Tuple[str, Union[str, bytes]]], matrix: Any,
                 facts: Optional[Facts], triage: LogTriage) -> Differential:
    """The differential of ``logs`` (see the module docstring); ``triage`` is
    :func:`~envlock.checks.logs.triage_logs` of the same logs on the same facts."""
    hits, cuts = scan_logs(logs, matrix)
    view = triage.facts if triage.facts is not None else facts
    ranked = [m.advisory for m in triage.matches]
    matched = {m.advisory: m for m in triage.matches}
    bare = {m.advisory: m for m in triage.uncorroborated}
    ruled = {r.advisory: r for r in triage.ruled_out}
    excluded = dict(triage.excluded)
    have_machine = facts is not None

    def cause(aid: str, line: str) -> Optional[Cause]:
        adv = matrix.advisories.get(aid)
        if adv is None:
            return None
        ev = ""
        m = matched.get(aid)  # a bare signal (uncorroborated) is not the advisory's own line
        if m is not None:
            ev = next((e.split(": ", 1)[-1] for e in m.evidence
                       if not e.startswith(("this machine", "the log shows"))), "")
        if aid in excluded:
            return Cause(aid, adv.title, "ruled-out", (f"the log says: {excluded[aid]}",))
        if aid in ruled:
            r = ruled[aid]
            ev = ev or next((e.split(": ", 1)[-1] for e in r.evidence
                             if not e.startswith("process death")), "")
            return Cause(aid, adv.title, "ruled-out", r.because, evidence=ev)
        if adv.condition is None:  # log_only: decided inside the job, by the log
            own = _matches_line(adv, line) or ev
            if aid in matched or own:
                return Cause(aid, adv.title, "possible", ("the log shows its error",),
                             evidence=own or ev)
            return Cause(aid, adv.title, "possible", (),
                         decide=("its error line is not in this log: the next step shows it"
                                 if adv.symptoms else
                                 "decided by what the job was doing, not by the machine"))
        out = judge(adv.condition, view) if view is not None else None
        if out is not None and out.value is True:
            return Cause(aid, adv.title, "confirmed", out.because, evidence=ev)
        if out is not None and out.value is False:
            return Cause(aid, adv.title, "ruled-out", out.because, evidence=ev)
        unknown = out.unknown if out is not None else ()
        return Cause(aid, adv.title, "possible", unknown, _decide(unknown, have_machine), ev,
                     known=out.partial if out is not None else ())

    listed: Dict[str, int] = {}

    def rank(c: Cause) -> Tuple[object, ...]:
        """Verdict, then doctor's own ranking, then the log pointing at it, then the order
        the symptom table lists its causes in (most common first)."""
        pos = ranked.index(c.advisory) if c.advisory in ranked else len(ranked)
        return (VERDICTS.index(c.verdict), pos, not c.evidence,
                listed.get(c.advisory, len(listed)), c.advisory)

    diagnoses: List[Diagnosis] = []
    placed: set = set()
    lines = {}
    for h in hits:
        if h.symptom not in WRAPPERS:
            lines.setdefault(h.line, h.symptom)
    for h in [h for h in hits if not (h.symptom in WRAPPERS and h.line in lines)][:MAX_SYMPTOMS]:
        # a wrapper (PyTorch's "NCCL error in:") on a line another symptom names says less
        sym = matrix.symptoms[h.symptom]
        ids = list(sym.causes)
        for aid in list(matched) + list(bare) + list(ruled):
            adv = matrix.advisories.get(aid)
            if adv is not None and aid not in ids and _matches_line(adv, h.line):
                ids.append(aid)
        causes = [c for c in (cause(a, h.line) for a in dict.fromkeys(ids)) if c is not None]
        listed.clear()
        listed.update({a: i for i, a in enumerate(sym.causes)})
        causes.sort(key=rank)
        placed.update(c.advisory for c in causes)
        diagnoses.append(Diagnosis(sym.id, sym.name, sym.table, sym.kind, sym.meaning,
                                   sym.next, h, tuple(causes)))
    if ranked and diagnoses:  # the symptom holding doctor's best answer comes first
        best = ranked[0]
        for i, d in enumerate(diagnoses):
            if any(c.advisory == best and c.verdict != "ruled-out" for c in d.causes):
                if i:
                    diagnoses.insert(0, diagnoses.pop(i))
                break
    listed.clear()
    also = tuple(sorted((c for c in (cause(a, "") for a in ranked if a not in placed)
                         if c is not None), key=rank))
    return Differential(tuple(diagnoses), also, tuple(cuts) + triage.cut)
