"""Rendering a fleet verdict: the JSON report and the short table rank 0 prints.

The report (``--report``) is a contract like the snapshot: keys may be added, never
renamed. ``findings`` holds the same objects as ``envlock verify --json`` with one added
key, ``hosts`` (the nodes a finding is about).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Mapping, Optional, Sequence

from envlock.fleet.compare import FleetResult, Group, hosts_text
from envlock.render.text import report_text, summary

__all__ = ["SCHEMA", "report_dict", "fleet_text"]

SCHEMA = "envlock.fleet/1"


def report_dict(result: FleetResult, *, strict: bool = False,
                protocol: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """``{"ok", "nodes", "groups", "findings", ...}``; ``protocol`` holds the live
    exchange's timings and byte counts (absent offline)."""
    d: Dict[str, Any] = {
        "schema": SCHEMA,
        "ok": not result.failed(strict),
        "nodes": result.nodes,
        "target": result.target,
        "groups": [g.to_dict() for g in result.groups],
        "findings": [x.to_dict() for x in result.findings],
        "missing": [{"rank": m.rank, "node": m.node, "host": m.host, "what": m.what}
                    for m in result.missing],
    }
    if protocol is not None:
        d["protocol"] = dict(protocol)
    return d


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


def _table(groups: Sequence[Group]) -> List[str]:
    head = ["group", "nodes", "fingerprint", "driver", "GPUs", "torch", "NCCL", "hosts"]
    rows = [head]
    for g in groups:
        s = g.summary
        rows.append([g.label + (" *" if g.majority else ""), str(len(g.hosts)), g.fingerprint,
                     _clip(s.get("driver", "?"), 16), _clip(s.get("gpus", "?"), 32),
                     _clip(s.get("torch", "?"), 16), _clip(s.get("nccl", "?"), 12),
                     hosts_text(g.hosts, 3)])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head) - 1)]
    return ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1]
            for r in rows]


def fleet_text(result: FleetResult, *, header: str, verbose: bool = False) -> str:
    """Groups of nodes, what differs, the fixes: readable in five seconds."""
    seen = sum(len(g.hosts) for g in result.groups)
    n_groups = len(result.groups)
    # the answer: ok, or how many problems and how many block training (issue 17)
    # (a warning does not fail the check without --strict, and is still not "ok")
    state = summary([x.finding for x in result.findings])
    nodes = f"{result.nodes} node{'s' if result.nodes != 1 else ''}"
    groups = f"{n_groups} group{'s' if n_groups != 1 else ''}"
    lines = [f"{header}: {seen} of {nodes} answered, {groups}, {state}"]
    if result.groups:
        lines += _table(result.groups)
        lines.append("  (* the majority; every other group is compared with it)")
    major = next((g for g in result.groups if g.majority), None)
    for g in result.groups:
        for diff in g.differences:
            lines.append(f"  {g.label} vs {major.label if major else '?'}: {diff}")
    everyone = {h for g in result.groups for h in g.hosts}
    shown = []
    for x in result.findings:
        f = x.finding
        # fleet findings name their hosts already; verify's say where they apply
        if x.hosts and set(x.hosts) != everyone and not f.id.startswith("fleet-"):
            f = replace(f, title=f"{f.title} (on {hosts_text(x.hosts, 3)})")
        shown.append(f)
    if shown:  # one entry per cause, with its fix (the first line is the one above)
        lines += report_text(shown, subject="findings", verbose=verbose).splitlines()[1:]
    return "\n".join(lines)
