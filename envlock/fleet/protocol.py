"""The live exchange: every rank of a job talks to one c10d key-value store.

Why a store and not collectives: the store is the layer gloo (and torchrun's rendezvous)
itself stands on; it needs no NCCL, no GPU and no full mesh of connections, and unlike a
collective it lets rank 0 wait with a deadline and then *ask which keys are absent*, so a
rank that died or never started is named instead of hanging everyone. Under torchrun the
store is the one the elastic agent already hosts (``TORCHELASTIC_USE_AGENT_STORE``);
otherwise (srun, a hand-written ``env://``) rank 0 hosts it at ``MASTER_ADDR:MASTER_PORT``.
Keys live under ``envlock-fleet/<attempt>/`` so they never meet torchrun's own.

Rounds (``T`` is ``--timeout``; every wait has a deadline):

1. every rank: ``r/<rank> = "<node>|<local rank>|<host>"`` (it is alive; the node is the
   physical one, used to name the host of a rank that never arrives); each prober
   (local rank 0, or every rank with ``--per-rank``) then probes once and writes
   ``f/<node>`` = its :class:`~envlock.fleet.fingerprint.NodeMessage` (< 1 KB);
2. rank 0 waits up to ``T`` for all of them, picks the majority fingerprint and writes
   ``want = {"m": digest, "rep": node}``; probers whose digest differs (and ``rep``, a
   majority node, when rank 0 itself is not in the majority) write ``s/<node>`` = their
   snapshot, zlib-compressed JSON (about 1 KB for a real machine). Rank 0 waits for those
   until ``T`` or at least ``min(T, 10 s)``: they are known to be alive;
3. rank 0 judges (:func:`~envlock.fleet.compare.compare_fleet`) and writes the verdict
   ``v = {"code": 0|1, "line": ...}``; every rank that arrived reads it, acknowledges with
   ``d/<rank> = <bytes it sent>`` and exits with that code. Ranks give up on the verdict
   after ``T + min(T, 10 s) + 30 s`` and exit 1 naming what they waited for;
4. rank 0 waits (briefly) for the acknowledgements, hands its result to the CLI to print
   and write, then writes ``bye``; the others leave after ``bye``. So rank 0's report is
   complete before any rank exits non-zero (torchrun kills the survivors of a failed
   worker), and under srun rank 0's store outlives every rank that still needs it.

Per rank this is 4-6 small requests plus one snapshot for nodes in a minority; rank 0 does
O(nodes) work, once. Byte counts (keys and values as sent, not TCP framing) are measured
by each rank and reported by rank 0.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from envlock.errors import EnvlockError
from envlock.fleet.compare import (
    Described,
    FleetResult,
    Missing,
    NodeInput,
    choose_majority,
)
from envlock.fleet.fingerprint import NodeMessage
from envlock.fleet.launch import Launch
from envlock.snapshot import Snapshot

__all__ = ["LiveOutcome", "FleetSession", "PREFIX", "verdict_line"]

PREFIX = "envlock-fleet"
#: how long ranks wait for rank 0 to judge after its own deadline
GRACE_S = 30.0


@dataclass(frozen=True)
class LiveOutcome:
    """What one rank takes away: the shared exit code and a one-line reason; rank 0 also
    has the full result and the protocol's timings and byte counts."""

    code: int
    line: str
    result: Optional[FleetResult] = None
    stats: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class _Probed:
    message: NodeMessage
    snapshot: Optional[Snapshot] = None
    described: Optional[Described] = None


class _Meter:
    """Wraps a c10d store and counts the bytes of keys and values this rank sends and
    receives (payload only; the store's framing adds a few bytes per request)."""

    def __init__(self, store: Any, prefix: str) -> None:
        self.store = store
        self.k = len(prefix) + 1
        self.sent = 0
        self.received = 0

    def _keys(self, keys: Sequence[str]) -> None:
        self.sent += sum(self.k + len(k) for k in keys)

    def set(self, key: str, value: bytes) -> None:
        self._keys([key])
        self.sent += len(value)
        self.store.set(key, value)

    def get(self, key: str) -> bytes:
        self._keys([key])
        value = bytes(self.store.get(key))
        self.received += len(value)
        return value

    def multi_get(self, keys: Sequence[str]) -> List[bytes]:
        if not keys:
            return []
        self._keys(keys)
        values = [bytes(v) for v in self.store.multi_get(list(keys))]
        self.received += sum(len(v) for v in values)
        return values

    def check(self, keys: Sequence[str]) -> bool:
        self._keys(keys)
        return bool(self.store.check(list(keys)))

    def wait(self, keys: Sequence[str], deadline: float) -> bool:
        """True when every key exists before ``deadline`` (monotonic seconds)."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return self.check(keys)
        self._keys(keys)
        try:
            self.store.wait(list(keys), timedelta(seconds=remaining))
            return True
        except RuntimeError as exc:  # DistStoreError: the deadline passed
            if "timeout" not in str(exc).lower():
                raise
            return False

    def present(self, keys: Sequence[str]) -> List[str]:
        """The keys that exist (after a wait ran out): one check per key."""
        return [k for k in keys if self.check([k])]


def _import_dist() -> Any:
    """torch.distributed, quietly: the c10d socket layer logs every timed-out poll, and a
    CPU-only torch warns about NumPy at import; neither helps someone reading a verdict."""
    import warnings

    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            import torch.distributed as dist
        except ImportError:
            raise EnvlockError("live fleet mode needs torch (pip install 'envlock-gpu[torch]'); "
                               "--snapshots compares snapshot files without it") from None
    return dist


def verdict_line(result: FleetResult) -> str:
    """One sentence for every rank's log: the first error, or that all agree."""
    errors = [x.finding for x in result.findings if x.finding.severity == "error"]
    if not errors:
        seen = sum(len(g.hosts) for g in result.groups)
        return f"ok: {seen} node{'s' if seen != 1 else ''} agree" + (
            f" and match lock target {result.target}" if result.target else "")
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"drift: {errors[0].title}{more}"


class FleetSession:
    """One rank's part in the exchange. ``run()`` returns the shared verdict; the CLI
    prints, then calls ``release()`` (rank 0: lets the others go; others: wait for that).

    ``probe`` returns this node's snapshot (it may raise: the error is sent instead of a
    fingerprint); ``describe`` turns a snapshot into its fingerprint; ``judge`` is rank 0's
    comparison over what arrived.
    """

    def __init__(self, launch: Launch, *, per_rank: bool, timeout: float, strict: bool,
                 probe: Callable[[], Snapshot], describe: Callable[[Snapshot], Described],
                 judge: Callable[[Sequence[NodeInput], Sequence[Missing]], FleetResult],
                 started: Optional[float] = None) -> None:
        self.launch = launch
        self.per_rank = per_rank
        self.timeout = timeout
        self.strict = strict
        self.probe = probe
        self.describe = describe
        self.judge = judge
        self.started = time.monotonic() if started is None else started
        self.store: Optional[_Meter] = None
        self.node = launch.rank if per_rank else launch.node
        self.prober = per_rank or launch.local_rank == 0
        self.times: Dict[str, float] = {}

    # -- setup ----------------------------------------------------------------------------
    def _connect(self) -> _Meter:
        dist = _import_dist()
        L = self.launch
        wait = timedelta(seconds=self.timeout + GRACE_S)
        if L.agent_store:
            tcp = dist.TCPStore(L.master_addr, L.master_port, None, False, wait)
        else:
            tcp = dist.TCPStore(L.master_addr, L.master_port, None, L.rank == 0, wait,
                                wait_for_workers=False, multi_tenant=True)
        prefix = f"{PREFIX}/{L.attempt}"
        return _Meter(dist.PrefixStore(prefix, tcp), prefix)

    def _probe(self) -> _Probed:
        L = self.launch
        t = time.monotonic()
        try:
            snap = self.probe()
            d = self.describe(snap)
        except EnvlockError as exc:
            return _Probed(NodeMessage(node=self.node, rank=L.rank, host=L.host,
                                       error=exc.message))
        except Exception as exc:  # noqa: BLE001 - reported to rank 0, not a crash
            return _Probed(NodeMessage(node=self.node, rank=L.rank, host=L.host,
                                       error=f"{type(exc).__name__}: {exc}"))
        finally:
            self.times["probe"] = time.monotonic() - t
        return _Probed(NodeMessage(node=self.node, rank=L.rank, host=L.host, digest=d.digest,
                                   summary=d.summary, lock_errors=d.lock_errors), snap, d)

    # -- the exchange ---------------------------------------------------------------------
    def run(self) -> LiveOutcome:
        L = self.launch
        t = time.monotonic()
        try:
            self.store = self._connect()
        except RuntimeError as exc:
            where = f"{L.master_addr}:{L.master_port}"
            return LiveOutcome(1, f"cannot reach the fleet store at {where} "
                                  f"({'torchrun agent' if L.agent_store else 'rank 0'}) "
                                  f"within {self.timeout:g} s: {_first_line(exc)}")
        self.times["connect"] = time.monotonic() - t
        try:
            store = self.store
            store.set(f"r/{L.rank}", f"{L.node}|{L.local_rank}|{L.host}".encode())
            own = self._probe() if self.prober else None
            if own is not None:
                store.set(f"f/{self.node}", own.message.encode())
            if L.rank == 0:
                try:
                    return self._lead(store, own)
                except BaseException as exc:
                    # never leave the others waiting for a verdict that cannot come
                    line = f"rank 0 failed: {type(exc).__name__}: {_first_line(exc)}"
                    store.set("v", json.dumps({"code": 1, "line": line[:300]}).encode())
                    store.set("bye", b"1")
                    raise
            return self._follow(store, own)
        except RuntimeError as exc:  # the store went away (its host died)
            return LiveOutcome(1, f"lost the fleet store at {L.master_addr}:{L.master_port}: "
                                  f"{_first_line(exc)}")

    def _follow(self, store: _Meter, own: Optional[_Probed]) -> LiveOutcome:
        L = self.launch
        deadline = self.started + self.timeout + min(self.timeout, 10.0) + GRACE_S
        if own is not None and own.snapshot is not None:
            if not store.wait(["want"], deadline):
                return self._no_verdict(store, "the majority fingerprint")
            want = json.loads(store.get("want"))
            if own.message.digest != want.get("m") or want.get("rep") == self.node:
                store.set(f"s/{self.node}", _pack(own.snapshot))
        if not store.wait(["v"], deadline):
            return self._no_verdict(store, "the verdict")
        verdict = json.loads(store.get("v"))
        ack = f"d/{L.rank}"
        sent = store.sent + store.k + len(ack)
        store.set(ack, str(sent + len(str(sent))).encode())
        return LiveOutcome(int(verdict["code"]), str(verdict.get("line", "")))

    def _no_verdict(self, store: _Meter, what: str) -> LiveOutcome:
        host = "host unknown"
        try:
            if store.check(["r/0"]):
                host = store.get("r/0").decode().split("|", 2)[2]
        except RuntimeError:
            pass
        waited = time.monotonic() - self.started
        return LiveOutcome(1, f"no answer from rank 0 ({host}): waited {waited:.0f} s for "
                              f"{what}")

    def _lead(self, store: _Meter, own: Optional[_Probed]) -> LiveOutcome:
        L = self.launch
        W = L.world_size
        deadline = self.started + self.timeout
        t = time.monotonic()
        node_keys = {n: f"f/{n}" for n in (range(W) if self.per_rank else range(L.nodes))}
        rank_keys = [f"r/{r}" for r in range(W)]
        keys = rank_keys + list(node_keys.values())
        present = set(keys) if store.wait(keys, deadline) else set(store.present(keys))
        arrived = [r for r in range(W) if f"r/{r}" in present]
        where: Dict[int, Tuple[int, int, str]] = {}
        for r, raw in zip(arrived, store.multi_get([f"r/{r}" for r in arrived])):
            node, local, host = raw.decode().split("|", 2)
            where[r] = (int(node), int(local), host)
        host_of_node = {n: h for n, _, h in where.values()}
        messages: Dict[int, NodeMessage] = {}
        fp_bytes: List[int] = []
        have = [n for n, k in node_keys.items() if k in present]
        for n, raw in zip(have, store.multi_get([node_keys[n] for n in have])):
            fp_bytes.append(len(raw))
            messages[n] = NodeMessage.decode(raw)
        missing: List[Missing] = []
        for r in range(W):
            if r not in where:
                physical = L.node_of_rank(r)
                seen = host_of_node.get(physical) if physical is not None else None
                missing.append(Missing(r, r if self.per_rank else physical,
                                       seen or L.host_of_node(physical), "did not arrive"))
        for n in node_keys:
            if n in messages:
                continue
            if self.per_rank:
                prober: Optional[int] = n if n in where else None
            else:
                prober = next((r for r, (rn, local, _) in where.items()
                               if rn == n and local == 0), None)
            if prober is not None:
                missing.append(Missing(prober, n, where[prober][2], "sent no fingerprint"))
        self.times["gather"] = time.monotonic() - t

        # round 2: only the minority sends its snapshot
        t = time.monotonic()
        own_node = self.node
        inputs = {n: _input(m, self.per_rank) for n, m in messages.items()}
        major = choose_majority(list(inputs.values()))
        rep = None
        if major is not None and (own is None or own.message.digest != major):
            rep = min(n for n, m in messages.items() if m.digest == major and m.error is None)
        want = json.dumps({"m": major, "rep": rep}).encode()
        store.set("want", want)
        senders = [n for n, m in messages.items() if n != own_node and m.error is None
                   and (m.digest != major or n == rep)]
        snap_deadline = max(deadline, time.monotonic() + min(self.timeout, 10.0))
        skeys = [f"s/{n}" for n in senders]
        got = skeys if store.wait(skeys, snap_deadline) else store.present(skeys)
        snap_bytes: Dict[int, int] = {}
        for key, raw in zip(got, store.multi_get(got)):
            n = int(key[2:])
            snap_bytes[n] = len(raw)
            try:
                snap = Snapshot.from_dict(json.loads(zlib.decompress(raw)), origin=f"node {n}")
            except (EnvlockError, ValueError, zlib.error) as exc:
                inputs[n] = replace(inputs[n], error=f"its snapshot is unreadable: {exc}")
                continue
            inputs[n] = _input(messages[n], self.per_rank, snap, self.describe(snap).facts)
        for n in senders:
            if n not in snap_bytes:
                missing.append(Missing(messages[n].rank, n, messages[n].host, "sent no snapshot"))
        if own is not None and own.snapshot is not None and own.described is not None:
            inputs[own_node] = _input(own.message, self.per_rank, own.snapshot,
                                      own.described.facts)
        self.times["snapshots"] = time.monotonic() - t

        t = time.monotonic()
        result = self.judge([inputs[n] for n in sorted(inputs)],
                            sorted(missing, key=lambda m: m.rank))
        code = 1 if result.failed(self.strict) else 0
        line = verdict_line(result)
        verdict = json.dumps({"code": code, "line": line[:300]}).encode()
        store.set("v", verdict)
        self.times["compare"] = time.monotonic() - t
        self.times["verdict"] = time.monotonic() - self.started

        # acknowledgements carry each rank's byte count
        t = time.monotonic()
        others = [r for r in arrived if r != 0]
        akeys = [f"d/{r}" for r in others]
        acked = akeys if store.wait(akeys, time.monotonic() + min(self.timeout, 10.0)) \
            else store.present(akeys)
        sent = [int(v) for v in store.multi_get(acked)]
        self.times["acks"] = time.monotonic() - t
        stats = {
            "launcher": L.launcher, "world_size": W, "nodes": len(node_keys),
            "per_rank": self.per_rank, "timeout_s": self.timeout,
            "timing_s": {k: round(v, 4) for k, v in self.times.items()},
            "traffic": {
                "fingerprint_bytes": _spread(fp_bytes),
                "snapshot_bytes": {inputs[n].alias: b for n, b in sorted(snap_bytes.items())},
                "want_bytes": len(want), "verdict_bytes": len(verdict),
                "sent_bytes_rank0": store.sent,
                "received_bytes_rank0": store.received,
                "sent_bytes_other_ranks": _spread(sent),
            },
        }
        return LiveOutcome(code, line, result, stats)

    def release(self) -> None:
        """Rank 0: let the others go. Others: leave once rank 0 has (bounded)."""
        if self.store is None:
            return
        try:
            if self.launch.rank == 0:
                self.store.set("bye", b"1")
            else:
                self.store.wait(["bye"], time.monotonic() + min(self.timeout, GRACE_S))
        except RuntimeError:
            pass  # rank 0 (and its store) already gone: nothing left to wait for


def _input(m: NodeMessage, per_rank: bool, snapshot: Optional[Snapshot] = None,
           facts: Optional[Mapping[str, Optional[str]]] = None) -> NodeInput:
    alias = f"{m.host}/rank{m.rank}" if per_rank else f"{m.host}/node{m.node}"
    return NodeInput(node=m.node, rank=m.rank, name=m.host, alias=alias, digest=m.digest,
                     summary=dict(m.summary), lock_errors=m.lock_errors, snapshot=snapshot,
                     facts=dict(facts) if facts is not None else None, error=m.error)


def _pack(snapshot: Snapshot) -> bytes:
    return zlib.compress(json.dumps(snapshot.to_dict(), separators=(",", ":")).encode(), 6)


def _spread(values: Sequence[int]) -> Dict[str, float]:
    if not values:
        return {"count": 0, "min": 0, "max": 0, "mean": 0}
    return {"count": len(values), "min": min(values), "max": max(values),
            "mean": round(sum(values) / len(values), 1)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__

