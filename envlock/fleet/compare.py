"""Rank 0's judgement: group nodes by fingerprint, diff each minority group against the
majority, check every group against the lock, and name nodes that never answered.

This is pure: it takes what the nodes sent (or what the offline ``--snapshots`` files
hold) and returns a :class:`FleetResult`; the live exchange (:mod:`envlock.fleet.protocol`)
and the offline mode feed it the same values, so both give the same verdict.

The majority is the largest group; a tie goes to the group with fewer errors against the
lock, then to the group holding the lowest node, so the choice is deterministic. Nodes in
one group have identical facts, including their own verdict against the lock, so verifying
one representative per group checks every node against the lock.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from envlock.checks.finding import Finding, sort_findings
from envlock.errors import InputError
from envlock.fleet.fingerprint import UNKNOWN, Facts, fact_label, facts_diff
from envlock.snapshot import Snapshot

__all__ = ["NodeInput", "Missing", "Group", "Located", "FleetResult", "lock_check",
           "choose_majority", "compare_fleet", "hosts_text", "Described", "describe_node"]


@dataclass(frozen=True)
class NodeInput:
    """One node as rank 0 knows it: always the fingerprint, the snapshot when it was sent."""

    node: int
    rank: int
    #: the host name shown in tables and reports
    name: str
    #: shown instead of ``name`` when several nodes share it (one machine in tests,
    #: ``--per-rank``, snapshot files from one host): ``vm/rank2``, ``node3.json``
    alias: str
    digest: Optional[str] = None
    summary: Mapping[str, str] = field(default_factory=dict)
    lock_errors: Optional[int] = None
    snapshot: Optional[Snapshot] = None
    facts: Optional[Facts] = None
    error: Optional[str] = None
    #: what ``error`` is about: ``probe`` (the node could not check itself) or ``value``
    #: (what it sent cannot be read: garbage, another envlock version, too large)
    error_kind: str = "probe"


@dataclass(frozen=True)
class Missing:
    """A rank that did not answer in time: ``what`` says which step it missed."""

    rank: int
    node: Optional[int]
    host: Optional[str]
    what: str  # did not arrive | sent no fingerprint | sent no snapshot


@dataclass(frozen=True)
class Group:
    label: str
    fingerprint: str
    nodes: Tuple[int, ...]
    ranks: Tuple[int, ...]
    hosts: Tuple[str, ...]
    summary: Mapping[str, str]
    majority: bool
    #: one sentence per differing fact, against the majority ("libnccl 2.21.5 (wheel) on
    #: 7 nodes, 2.20.5 (wheel) on node3"); empty for the majority itself
    differences: Tuple[str, ...] = ()

    def to_dict(self) -> Dict[str, object]:
        return {"label": self.label, "hosts": list(self.hosts), "ranks": list(self.ranks),
                "nodes": list(self.nodes), "fingerprint": self.fingerprint,
                "majority": self.majority, "summary": dict(self.summary),
                "differences": list(self.differences)}


@dataclass(frozen=True)
class Located:
    """A finding and the hosts it is about (the finding itself is verify's value)."""

    finding: Finding
    hosts: Tuple[str, ...]

    def to_dict(self) -> Dict[str, object]:
        d = self.finding.to_dict()
        d["hosts"] = list(self.hosts)
        return d


@dataclass(frozen=True)
class FleetResult:
    nodes: int  # nodes expected
    groups: Tuple[Group, ...]
    findings: Tuple[Located, ...]
    missing: Tuple[Missing, ...] = ()
    target: Optional[str] = None

    @property
    def ok(self) -> bool:
        return not any(x.finding.severity == "error" for x in self.findings)

    def failed(self, strict: bool = False) -> bool:
        return not self.ok or (strict and any(x.finding.severity == "warning"
                                              for x in self.findings))


_SEVERITY = {"error": 0, "warning": 1, "info": 2}


def hosts_text(hosts: Sequence[str], limit: int = 4) -> str:
    """``a, b, c and 5 more``."""
    hosts = list(hosts)
    if len(hosts) <= limit:
        return ", ".join(hosts)
    return ", ".join(hosts[:limit]) + f" and {len(hosts) - limit} more"


def lock_check(snapshot: Snapshot, lock: object, matrix: object,
               target_name: Optional[str] = None) -> Tuple[str, int]:
    """A node's own verdict against the lock, as a fact: ``"ok"`` or the sorted
    ``id:subject`` of its errors and warnings, and how many are errors."""
    from envlock.checks.verify import choose_target, verify

    try:
        target = choose_target(lock, snapshot, matrix, target_name)  # type: ignore[arg-type]
    except InputError as exc:
        return f"target: {exc.message}", 1
    result = verify(lock, target, snapshot, matrix)  # type: ignore[arg-type]
    items = sorted(f"{f.id}:{f.subject or ''}" for f in result.findings
                   if f.severity in ("error", "warning"))
    errors = sum(1 for f in result.findings if f.severity == "error")
    return (",".join(items) or "ok"), errors


def choose_majority(nodes: Sequence[NodeInput]) -> Optional[str]:
    """The majority's digest: largest group, then fewer lock errors, then lowest node."""
    groups: Dict[str, List[NodeInput]] = {}
    for n in nodes:
        if n.error is None and n.digest:
            groups.setdefault(n.digest, []).append(n)
    if not groups:
        return None
    return min(groups, key=lambda d: (-len(groups[d]), groups[d][0].lock_errors or 0,
                                      min(n.node for n in groups[d])))


def _names(nodes: Sequence[NodeInput]) -> Dict[int, str]:
    counts: Dict[str, int] = {}
    for n in nodes:
        counts[n.name] = counts.get(n.name, 0) + 1
    return {n.node: (n.alias if counts[n.name] > 1 else n.name) for n in nodes}


def compare_fleet(nodes: Sequence[NodeInput], *, expected: int, lock: object = None,
                  matrix: object = None, target_name: Optional[str] = None,
                  missing: Sequence[Missing] = (), timeout: Optional[float] = None
                  ) -> FleetResult:
    """Judge a fleet. ``lock``/``matrix`` add the check against the lock; ``missing``
    lists ranks that did not answer (the live protocol's deadline)."""
    names = _names(nodes)
    located: List[Located] = []
    errored = [n for n in nodes if n.error is not None]
    by_error: Dict[Tuple[str, str], List[str]] = {}
    for n in errored:
        by_error.setdefault((n.error_kind, n.error or ""), []).append(names[n.node])
    for (kind, message), bad in by_error.items():
        if kind == "value":
            title = f"{hosts_text(bad)} sent what rank 0 cannot read"
            fix: Tuple[str, ...] = (
                "install the same envlock-gpu version on every node (another version "
                "speaks another protocol)", "check that node for a process that writes "
                "into the job's store")
        else:
            self_ = "itself" if len(bad) == 1 else "themselves"
            title = f"{hosts_text(bad)} could not check {self_}"
            fix = (("run `envlock snapshot` on that node to see the failure, fix it "
                    "and rerun"),)
        located.append(Located(Finding("fleet-node-error", "error", "host", title, message,
                                       fix, subject=bad[0]), tuple(bad)))

    major = choose_majority(nodes)
    members: Dict[str, List[NodeInput]] = {}
    for n in nodes:
        if n.error is None and n.digest:
            members.setdefault(n.digest, []).append(n)
    order = sorted(members, key=lambda d: (d != major, -len(members[d]),
                                           min(x.node for x in members[d])))
    groups: List[Group] = []
    target: Optional[str] = None
    lock_found: Dict[str, List[str]] = {}
    lock_values: Dict[str, Finding] = {}
    major_nodes = members.get(major or "", [])
    major_rep = _rep(major_nodes)
    for i, d in enumerate(order):
        group_nodes = sorted(members[d], key=lambda x: x.node)
        hosts = tuple(names[x.node] for x in group_nodes)
        rep = _rep(group_nodes)
        differences: Tuple[str, ...] = ()
        if d != major:
            keys, differences, unknown = _differences(
                major_rep or major_nodes[0], rep or group_nodes[0], len(major_nodes), hosts)
            if keys:
                located.append(Located(_drift_finding(
                    keys, differences, major_rep or major_nodes[0], len(major_nodes), hosts),
                    hosts))
            if unknown:
                located.append(Located(_unknown_finding(unknown, hosts), hosts))
                differences += unknown
        groups.append(Group(label=_label(i), fingerprint=d,
                            nodes=tuple(x.node for x in group_nodes),
                            ranks=tuple(x.rank for x in group_nodes), hosts=hosts,
                            summary=dict(group_nodes[0].summary), majority=d == major,
                            differences=differences))
        if lock is not None and rep is not None and rep.snapshot is not None:
            found, tname = _lock_findings(rep.snapshot, lock, matrix, target_name)
            if d == major:
                target = tname
            for f in found:
                key = repr(sorted(f.to_dict().items()))
                lock_values[key] = f
                lock_found.setdefault(key, []).extend(hosts)
        elif lock is None and rep is not None and rep.snapshot is not None:
            # issue 17: known-bad combinations are judged without a lock too (a fleet whose
            # every Fabric Manager is down agrees with itself, and is still broken)
            for f in _advisories(rep.snapshot, matrix):
                key = repr(sorted(f.to_dict().items()))
                lock_values[key] = f
                lock_found.setdefault(key, []).extend(hosts)
    for key, where in lock_found.items():
        located.append(Located(lock_values[key], tuple(where)))
    if missing:
        located.append(Located(_missing_finding(missing, timeout),
                               tuple(dict.fromkeys(m.host for m in missing if m.host))))
    # most severe first; at one severity, the fleet's own findings lead (they name nodes)
    order_of = {id(f): i for i, f in enumerate(sort_findings([x.finding for x in located]))}
    located.sort(key=lambda x: (_SEVERITY.get(x.finding.severity, 9),
                                not x.finding.id.startswith("fleet-"), order_of[id(x.finding)]))
    return FleetResult(nodes=expected, groups=tuple(groups), findings=tuple(located),
                       missing=tuple(missing), target=target)


def _rep(nodes: Sequence[NodeInput]) -> Optional[NodeInput]:
    """The group's representative: its first node whose snapshot rank 0 has."""
    return next((n for n in sorted(nodes, key=lambda x: x.node) if n.snapshot is not None
                 or n.facts is not None), None)


def _label(i: int) -> str:
    return chr(ord("A") + i) if i < 26 else f"G{i + 1}"


def _fmt(value: Optional[str]) -> str:
    return "absent" if value is None else value


def _differences(major: NodeInput, minor: NodeInput, n_major: int, hosts: Sequence[str]
                 ) -> Tuple[List[str], Tuple[str, ...], Tuple[str, ...]]:
    """Which facts differ, as keys and as sentences, and sentences for the facts one side
    does not record (compared with neither verdict); from the full facts when both sides
    have them, else from the summaries the fingerprints carried."""
    nodes = f"{n_major} node{'s' if n_major != 1 else ''}"
    unknown: Tuple[str, ...] = ()
    if major.facts is not None and minor.facts is not None:
        a, b = major.facts, minor.facts
        keys = facts_diff(a, b)
        if len(keys) > 1 and "lock" in keys:
            keys.remove("lock")  # the lock findings themselves say what the lock check found
        unread = [k for k in keys if UNKNOWN in (a.get(k), b.get(k))]
        keys = [k for k in keys if k not in unread]
        unknown = tuple(f"{_label_of(k)} {_fmt(a.get(k))} on {nodes}, {_fmt(b.get(k))} on "
                        f"{hosts_text(hosts)}" for k in unread)
    else:
        a = dict(major.summary)
        b = dict(minor.summary)
        keys = [k for k in ("driver", "gpus", "torch", "nccl") if a.get(k) != b.get(k)]
        if not keys:
            keys = ["fingerprint"]
            a, b = {"fingerprint": major.digest}, {"fingerprint": minor.digest}
    sentences = tuple(f"{_label_of(k)} {_fmt(a.get(k))} on {nodes}, {_fmt(b.get(k))} on "
                      f"{hosts_text(hosts)}" for k in keys)
    return keys, sentences, unknown


def _unknown_finding(unknown: Sequence[str], hosts: Sequence[str]) -> Finding:
    """Facts one side's snapshot does not record: not compared, said so (a snapshot taken
    without --deep does not know which cuDNN and NCCL torch was built with)."""
    where = hosts_text(hosts)
    return Finding("fleet-unknown", "warning", "config",
                   f"{where} could not be compared with the majority on "
                   f"{len(unknown)} fact{'s' if len(unknown) != 1 else ''}: a snapshot does "
                   f"not record {'it' if len(unknown) == 1 else 'them'}",
                   "; ".join(unknown),
                   ("take every node's snapshot the same way, with --deep "
                    "(envlock snapshot --deep -o FILE)",), subject=hosts[0])


def _label_of(key: str) -> str:
    return "NCCL" if key == "nccl" else fact_label(key)


def _category(key: str) -> str:
    if "nccl" in key:
        return "nccl"
    if key == "driver":
        return "driver"
    if key == "gpus":
        return "gpu-arch"
    kind = key.partition(".")[0]
    return {"lib": "library", "pkg": "packages", "env": "config", "lock": "config"}.get(
        kind, "packages")


def _fixes(keys: Sequence[str], major: NodeInput, where: str) -> Tuple[str, ...]:
    facts = major.facts if major.facts is not None else dict(major.summary)
    out: List[str] = []
    rank = {"driver": 0, "gpus": 1, "pkg": 2, "env": 3, "lib": 4}
    for k in sorted(keys, key=lambda k: rank.get(k if k in rank else k.partition(".")[0], 5)):
        v = facts.get(k)
        kind, _, name = k.partition(".")
        if k == "driver":
            out.append(f"install NVIDIA driver {_fmt(v)} on {where}, as on the majority")
        elif k == "gpus":
            out.append(f"run the job on nodes with {_fmt(v)} only: leave out {where} "
                       f"(srun --exclude=..., or drop them from the host file)")
        elif kind == "pkg":
            out.append(f"on {where}: pip uninstall -y {name}" if v is None
                       else f"on {where}: pip install --no-deps '{name}=={v}'")
        elif kind == "lib":
            out.append(f"on {where}: make lib{name} {(v or '').split(' ')[0]} load, as on the "
                       f"majority (check LD_LIBRARY_PATH and the nvidia-* wheels)")
        elif kind == "env":
            out.append(f"on {where}: unset {name}" if v is None
                       else f"on {where}: export {name}={v}")
    out.append(f"{'or rebuild' if out else 'rebuild'} {where} from the image the majority "
               f"runs")
    return tuple(dict.fromkeys(out))


def _drift_finding(keys: Sequence[str], differences: Sequence[str], major: NodeInput,
                   n_major: int, hosts: Sequence[str]) -> Finding:
    where = hosts_text(hosts)
    labels = [_label_of(k) for k in keys]
    shown = ", ".join(labels[:4]) + (f" and {len(labels) - 4} more" if len(labels) > 4 else "")
    verb = "differs" if len(hosts) == 1 else "differ"
    return Finding("fleet-drift", "error", _category(keys[0]) if keys else "config",
                   f"{where} {verb} from the majority ({n_major} node"
                   f"{'s' if n_major != 1 else ''}): {shown}",
                   "; ".join(differences), _fixes(keys, major, where), subject=hosts[0])


def _lock_findings(snapshot: Snapshot, lock: object, matrix: object,
                   target_name: Optional[str]) -> Tuple[List[Finding], Optional[str]]:
    """verify's findings for one representative, and the lock target it was judged by."""
    from envlock.checks.verify import choose_target, verify

    try:
        target = choose_target(lock, snapshot, matrix, target_name)  # type: ignore[arg-type]
    except InputError as exc:
        return [Finding("fleet-lock-target", "error", "config", exc.message,
                        "the lock has no target for these nodes' GPUs",
                        ("pass --target NAME, or resolve the lock for these GPUs too",),
                        subject="target")], None
    result = verify(lock, target, snapshot, matrix)  # type: ignore[arg-type]
    return list(result.findings), target.name


def _advisories(snapshot: Snapshot, matrix: object) -> List[Finding]:
    """The advisories that apply to one representative (what ``doctor`` reports)."""
    from envlock.checks.advisories import advisory_findings
    from envlock.knowledge.facts import facts_from_snapshot
    from envlock.matrix import get_matrix

    m = matrix if matrix is not None else get_matrix()
    return advisory_findings(m, facts_from_snapshot(snapshot, m))  # type: ignore[arg-type]


def _missing_finding(missing: Sequence[Missing], timeout: Optional[float]) -> Finding:
    def one(m: Missing) -> str:
        return f"rank {m.rank} ({m.host or 'host unknown'})"

    within = f" within {timeout:g} s" if timeout is not None else ""
    shown = ", ".join(one(m) for m in missing[:4])
    more = f" and {len(missing) - 4} more" if len(missing) > 4 else ""
    detail = "; ".join(f"{one(m)}: {m.what}" for m in missing[:50])
    n = len(missing)
    return Finding("fleet-missing-rank", "error", "host",
                   f"{n} rank{'s' if n != 1 else ''} did not answer{within}: {shown}{more}",
                   detail,
                   (("check those hosts and the job's log for those ranks: they died, hung "
                     "or never started"),
                    "rerun without them (srun --exclude=HOST) or after fixing them"),
                   subject="ranks")


@dataclass(frozen=True)
class Described:
    """One node's fingerprint, computed from its snapshot."""

    facts: Facts
    digest: str
    summary: Mapping[str, str]
    lock_errors: Optional[int]


def describe_node(snapshot: Snapshot, *, lock: object = None, matrix: object = None,
                  target_name: Optional[str] = None) -> Described:
    """Facts, digest and summary of a snapshot, with its own check against the lock."""
    from envlock.fleet.fingerprint import digest, fleet_facts, package_scope, summary_of

    scope = None
    check: Optional[str] = None
    errors: Optional[int] = None
    if lock is not None:
        scope = package_scope({p.name for t in lock.targets  # type: ignore[attr-defined]
                               for p in t.packages})
        check, errors = lock_check(snapshot, lock, matrix, target_name)
    facts = fleet_facts(snapshot, scope=scope, lock_check=check)
    return Described(facts=facts, digest=digest(facts), summary=summary_of(snapshot),
                     lock_errors=errors)
