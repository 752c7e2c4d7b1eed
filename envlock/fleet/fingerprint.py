"""The fingerprint: a short digest of the facts every node of a job must agree on.

Nodes first exchange only this (a message under 1 KB), so a 1,000-node check moves about a
megabyte to rank 0 however large the snapshots are; only nodes whose digest differs from
the majority's send their full snapshot afterwards.

The facts are a flat ``{name: value}`` mapping, so two nodes can be diffed key by key and a
difference can be named ("lib.nccl: 2.21.5 (wheel) vs 2.20.5 (wheel)"):

* ``python``, ``driver``, ``gpus`` (visible GPUs as "8x NVIDIA H100 80GB HBM3 (9.0)", lost
  and MIG GPUs marked), ``torch``, ``torch.cuda``, ``torch.cudnn``, ``torch.nccl``;
* ``lib.<name>``: the version of each CUDA library the loader would pick (cuBLAS, cuDNN,
  NCCL, ...) and whether it is a wheel's or a system copy;
* ``pkg.<name>``: installed versions of the locked packages plus every torch-family and
  CUDA wheel (all packages when there is no lock, so two nodes without a lock still agree
  on everything installed);
* ``env.<NAME>``: CUDA/NCCL/torch variables, except those that differ per rank or node by
  design (``CUDA_VISIBLE_DEVICES``, ``LD_LIBRARY_PATH`` whose effect is in ``lib.*``, ...);
* ``lock``: the node's own verdict against the lock (finding ids), so nodes that fail the
  lock differently never share a group.

The digest is the first 16 hex digits of SHA-256 over the canonical JSON of the facts:
64 bits make an accidental collision among even a million nodes vanishingly unlikely.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Collection, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from envlock.fleet import wire
from envlock.snapshot import LAUNCHER_VARIABLES, GpuInfo, Snapshot

__all__ = ["Facts", "UNKNOWN", "MESSAGE_LIMIT", "NodeMessage", "package_scope", "fleet_facts",
           "digest", "summary_of", "describe_gpus", "fact_label", "facts_diff"]

Facts = Dict[str, Optional[str]]

#: the value of a fact the node's snapshot does not record (not the same as absent: two
#: nodes are never said to differ on it, and it is never said to agree)
UNKNOWN = "(not recorded)"

#: the fingerprint message of one node must stay below this many bytes
MESSAGE_LIMIT = 1024

#: variables that differ per rank or per node by design (the launcher's RANK, LOCAL_RANK,
#: SLURM_PROCID, ... recorded to tell a job's snapshot from a shell's), or whose effect other
#: facts carry
ENV_IGNORED = frozenset({"CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "LD_LIBRARY_PATH",
                         "WORLD_SIZE", "LOCAL_WORLD_SIZE", "OMP_NUM_THREADS", "NCCL_COMM_ID",
                         "NCCL_HOSTID", *LAUNCHER_VARIABLES})


def package_scope(locked: Optional[Collection[str]]) -> Optional[FrozenSet[str]]:
    """The package names whose versions must agree: the lock's (None = all)."""
    return None if locked is None else frozenset(locked)


def _in_scope(name: str, scope: Optional[FrozenSet[str]]) -> bool:
    if scope is None or name in scope:
        return True
    from envlock.resolve.sources import TORCH_FAMILY, is_cuda_wheel

    return name in TORCH_FAMILY or is_cuda_wheel(name)


def describe_gpus(gpus: Sequence[GpuInfo], *, short: bool = False) -> str:
    """``8x NVIDIA H100 80GB HBM3 (9.0)``; several models joined with `` + ``."""
    counts: Dict[Tuple[str, str, str], int] = {}
    for g in gpus:
        name = g.name or "unknown GPU"
        if short and name.startswith("NVIDIA "):
            name = name[len("NVIDIA "):]
        flags = "".join((" lost" if g.lost else "", " MIG" if g.mig else ""))
        key = (name, g.compute_capability or "?", flags)
        counts[key] = counts.get(key, 0) + 1
    if not counts:
        return "none"
    return " + ".join(f"{n}x {name} ({cc}){flags}" for (name, cc, flags), n in counts.items())


def fleet_facts(snapshot: Snapshot, *, scope: Optional[FrozenSet[str]] = None,
                lock_check: Optional[str] = None) -> Facts:
    """The facts of one node that must agree across the job (see the module docstring)."""
    from packaging.utils import canonicalize_name

    t = snapshot.torch
    # torch read from its files (a snapshot without --deep) does not say which cuDNN and
    # NCCL it was built with: unknown, never "absent"
    unread = UNKNOWN if t is not None and t.source != "import" else None
    facts: Facts = {
        "python": snapshot.python.version,
        # what a snapshot did not record (a build host stating only its GPUs) is unknown
        "driver": (snapshot.driver.version if snapshot.driver is not None else None)
        if snapshot.recorded("driver") else UNKNOWN,
        "gpus": describe_gpus(snapshot.visible_gpus()) if snapshot.recorded("gpus")
        else UNKNOWN,
        "torch": t.version if t else None,
        "torch.cuda": t.cuda if t else None,
        "torch.cudnn": (t.cudnn or unread) if t else None,
        "torch.nccl": (t.nccl or unread) if t else None,
    }
    for lib in sorted(snapshot.libraries, key=lambda x: x.name):
        if lib.selected:
            facts[f"lib.{lib.name}"] = (f"{lib.version or '?'} "
                                        f"({'wheel' if lib.owner else 'system'})")
    for name, version in sorted(snapshot.packages.items()):
        cname = canonicalize_name(name)
        if _in_scope(cname, scope):
            facts[f"pkg.{cname}"] = version
    for key, value in sorted(snapshot.env.items()):
        if key not in ENV_IGNORED:
            facts[f"env.{key}"] = value
    if lock_check is not None:
        facts["lock"] = lock_check
    return facts


def digest(facts: Mapping[str, Optional[str]]) -> str:
    """16 hex digits of SHA-256 over the canonical JSON of the facts."""
    text = json.dumps(dict(facts), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def summary_of(snapshot: Snapshot) -> Dict[str, str]:
    """The few facts a person reads in the table, sent along with the digest."""
    lib = {x.name: x.version for x in snapshot.libraries if x.selected and x.version}
    t = snapshot.torch
    nccl = lib.get("nccl") or (t.nccl if t else None) or next(
        (v for k, v in snapshot.packages.items() if k.startswith("nvidia-nccl")), None)
    return {"driver": (snapshot.driver.version if snapshot.driver else None) or
            ("none" if snapshot.recorded("driver") else "unknown"),
            "gpus": describe_gpus(snapshot.visible_gpus(), short=True)
            if snapshot.recorded("gpus") else "unknown",
            "torch": (t.version if t else None) or snapshot.packages.get("torch") or "none",
            "nccl": nccl or "none"}


_LABELS = {"python": "Python", "driver": "driver", "gpus": "GPUs", "torch": "torch",
           "torch.cuda": "torch CUDA", "torch.cudnn": "torch cuDNN", "torch.nccl": "torch NCCL",
           "lock": "lock check"}


def fact_label(key: str) -> str:
    """``lib.nccl`` -> ``libnccl``; ``pkg.torch`` -> ``package torch``."""
    if key in _LABELS:
        return _LABELS[key]
    kind, _, name = key.partition(".")
    return {"lib": f"lib{name}", "pkg": f"package {name}", "env": f"${name}"}.get(kind, key)


def _clip(text: str, n: int) -> str:
    return text if len(text) <= n else text[: max(1, n - 3)] + "..."


@dataclass(frozen=True)
class NodeMessage:
    """What one node sends in the first round. ``error`` replaces the digest when the node
    could not probe itself (it still arrives, so rank 0 names it instead of timing out)."""

    node: int
    rank: int
    host: str
    digest: Optional[str] = None
    summary: Mapping[str, str] = field(default_factory=dict)
    #: error findings of the node's own check against the lock (None: no lock)
    lock_errors: Optional[int] = None
    error: Optional[str] = None

    def encode(self, limit: int = MESSAGE_LIMIT) -> bytes:
        """The wire value (:mod:`envlock.fleet.wire`): compact JSON, clipped field by field
        until it fits in ``limit`` bytes, then compressed."""
        width = 64
        while True:
            data: Dict[str, Any] = {"node": self.node, "rank": self.rank,
                                    "host": _clip(self.host, width), "fp": self.digest}
            if self.summary:
                data["sum"] = {k: _clip(v, width) for k, v in sorted(self.summary.items())[:6]}
            if self.lock_errors is not None:
                data["lock"] = self.lock_errors
            if self.error is not None:
                data["err"] = _clip(self.error, width * 6)
            raw = json.dumps(data, separators=(",", ":")).encode("utf-8")
            if len(raw) < limit or width <= 4:
                return wire.pack(data)
            width //= 2

    @classmethod
    def decode(cls, raw: bytes) -> "NodeMessage":
        """A peer's message, checked (:class:`~envlock.exchange.BadValue` when it is not
        one: garbage, another envlock version, the wrong shape)."""
        data = wire.unpack(raw, wire.MESSAGE)
        return cls(node=data["node"], rank=data["rank"], host=data["host"][:253],
                   digest=data.get("fp"), summary=dict(data.get("sum") or {}),
                   lock_errors=data.get("lock"), error=data.get("err"))


def facts_diff(a: Mapping[str, Optional[str]], b: Mapping[str, Optional[str]]) -> List[str]:
    """Keys whose values differ (present on one side only counts), in a stable order."""
    keys = sorted(set(a) | set(b), key=_key_order)
    return [k for k in keys if a.get(k) != b.get(k)]


_ORDER = ("driver", "gpus", "python", "torch", "torch.cuda", "torch.cudnn", "torch.nccl")


def _key_order(key: str) -> Tuple[int, str]:
    if key in _ORDER:
        return (_ORDER.index(key), key)
    kind = key.partition(".")[0]
    return ({"lib": 10, "pkg": 20, "env": 30, "lock": 40}.get(kind, 50), key)
