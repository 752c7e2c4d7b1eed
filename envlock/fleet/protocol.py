"""The live exchange: every rank of a job talks to one c10d key-value store.

Why a store and not collectives: the store is the layer gloo (and torchrun's rendezvous)
itself stands on; it needs no NCCL, no GPU and no full mesh of connections, and unlike a
collective it lets rank 0 wait with a deadline and then *ask which keys are absent*, so a
rank that died or never started is named instead of hanging everyone. Under torchrun the
store is the one the elastic agent already hosts (``TORCHELASTIC_USE_AGENT_STORE``);
otherwise (srun, a hand-written ``env://``) rank 0 hosts it at ``MASTER_ADDR:MASTER_PORT``.
Keys live under ``envlock-fleet/<attempt>/`` so they never meet torchrun's own.

Every value is zlib-compressed JSON in an envelope naming the protocol
(:mod:`envlock.fleet.wire`, through :mod:`envlock.exchange`): rank 0 caps, depth-limits and
schema-checks each one, and a value it cannot read (garbage, another envlock version, a
zlib bomb) is a ``fleet-node-error`` finding for the rank that sent it.

Rounds (``T`` is ``--timeout``; every wait has a deadline):

1. every rank: ``r/<rank> = {node, local, host}`` (it is alive; the node is the
   physical one, used to name the host of a rank that never arrives); each prober
   (local rank 0, or every rank with ``--per-rank``) then probes once and writes
   ``f/<node>`` = its :class:`~envlock.fleet.fingerprint.NodeMessage` (< 1 KB);
2. rank 0 waits up to ``T`` for all of them, picks the majority fingerprint and writes
   ``want = {"m": digest, "rep": node}``; probers whose digest differs (and ``rep``, a
   majority node, when rank 0 itself is not in the majority) write ``s/<node>`` = their
   snapshot (about 1 KB compressed for a real machine). Rank 0 waits for those
   until ``T`` or at least ``min(T, 10 s)``: they are known to be alive;
3. rank 0 judges (:func:`~envlock.fleet.compare.compare_fleet`) and writes the verdict
   ``v = {"code": 0|1, "line": ...}``; every rank that arrived reads it, acknowledges with
   ``d/<rank> = <bytes it sent>`` and exits with that code. Ranks give up on the verdict
   after ``T + min(T, 10 s) + 30 s`` (:func:`total_bound`, counted from their start) and
   exit 1 naming rank 0 and what they waited for; a verdict that rank 0 failed (or was
   stopped) ends every wait at once;
4. rank 0 waits for the acknowledgements until its deadline or 2 s (:data:`ACK_S`) after
   the verdict, whichever is later (a rank that registered and then stalled costs no
   more), hands its result to the CLI to print and write, then writes ``bye``; the
   others leave after ``bye``. So rank 0's report is complete before any rank exits non-zero (torchrun kills the survivors of a failed
   worker), and under srun rank 0's store outlives every rank that still needs it.

Joining: rank 0 (when it hosts the store) listens on the port before it imports torch;
the others wait for a plain TCP connection until ``T`` after their start, so a rank 0
that never started is reported after ``--timeout`` and a slow one is not mistaken for it.
Rank 0 counts its ``T`` from when its store is up. Every c10d wait runs in slices of a
second, so SIGTERM (torchrun stopping the job) and Ctrl-C are handled at once.

Per rank this is 4-6 small requests plus one snapshot for nodes in a minority; rank 0 does
O(nodes) work, once. Byte counts (keys and values as sent, not TCP framing) are measured
by each rank and reported by rank 0.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from envlock.errors import EnvlockError
from envlock.exchange import BadValue, Store
from envlock.exchange.gather import decode_peer
from envlock.fleet import wire
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

__all__ = ["LiveOutcome", "FleetSession", "PREFIX", "Stopped", "verdict_line", "total_bound"]

PREFIX = "envlock-fleet"
#: how long ranks wait for rank 0 to judge after its own deadline
GRACE_S = 30.0
#: how long rank 0 waits for acknowledgements after its verdict (they only carry byte
#: counts): a rank that registered and then stalled must not keep rank 0 past --timeout
ACK_S = 2.0


class Stopped(BaseException):
    """A signal asked this rank to stop (the CLI raises it from its SIGTERM handler): a
    BaseException, so that no ``except Exception`` on the way swallows it."""


def total_bound(timeout: float) -> float:
    """Seconds after its start by which every rank has exited, whatever failed: rank 0's
    wait (``timeout``), its wait for snapshots (``min(timeout, 10)``) and ``GRACE_S`` for
    rank 0 starting late and judging. A rank that cannot reach the store gives up sooner,
    after ``timeout``."""
    return timeout + min(timeout, 10.0) + GRACE_S


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


def _import_dist() -> Any:
    """torch.distributed, quietly: the c10d socket layer logs every timed-out poll and, when
    a connection fails, the C++ stack of the error; a CPU-only torch warns about NumPy at
    import. None of that helps someone reading a verdict, and the exception still says
    what went wrong. The C++ log level is read once, when torch loads, so it is set only
    for the import and the environment is put back (a snapshot records it)."""
    import warnings

    saved = {k: os.environ.get(k) for k in ("TORCH_CPP_LOG_LEVEL", "TORCH_SHOW_CPP_STACKTRACES")}
    os.environ.update(TORCH_CPP_LOG_LEVEL="FATAL", TORCH_SHOW_CPP_STACKTRACES="0")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                import torch.distributed as dist
            except ImportError:
                raise EnvlockError("live fleet mode needs torch "
                                   "(pip install 'envlock-gpu[torch]'); "
                                   "--snapshots compares snapshot files without it") from None
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return dist


def _in_time(call: Callable[[], Any], deadline: float) -> Any:
    """``call()`` in a daemon thread; :class:`TimeoutError` when it has not returned by
    ``deadline``. For the calls with no deadline of their own that a bad network can stall:
    DNS look-ups, and c10d's connect, which retries past the timeout it is given."""
    box: Dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            box["error"] = exc

    thread = threading.Thread(target=target, name="envlock-fleet-connect", daemon=True)
    thread.start()
    thread.join(max(0.0, deadline - time.monotonic()))
    if thread.is_alive():
        raise TimeoutError("timed out")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _listen(port: int) -> int:
    """A listening socket on ``port`` (all addresses, IPv6 and IPv4 where the system has
    both), handed to c10d as a file descriptor that it then owns."""
    if socket.has_dualstack_ipv6():
        sock = socket.create_server(("", port), family=socket.AF_INET6, dualstack_ipv6=True,
                                    backlog=1024)
    else:
        sock = socket.create_server(("", port), backlog=1024)
    return sock.detach()


def _wait_reachable(host: str, port: int, deadline: float) -> None:
    """Return once a TCP connection to ``host:port`` opens; retry (rank 0 may not have
    started its store yet) until ``deadline``, then raise :class:`TimeoutError` with the
    last reason. A plain socket, so that ``--timeout`` bounds the wait exactly."""
    # one try at least, however late (importing torch may have used up the deadline)
    deadline = max(deadline, time.monotonic() + 1.0)
    try:
        addrs = _in_time(lambda: socket.getaddrinfo(host, port, type=socket.SOCK_STREAM),
                         deadline)
    except TimeoutError:
        raise TimeoutError(f"looking up {host!r} timed out") from None
    except OSError as exc:
        raise TimeoutError(f"cannot look up {host!r}: {exc.strerror or exc}") from None
    why = "no address"
    while True:
        for family, kind, proto, _, addr in addrs:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                with socket.socket(family, kind, proto) as sock:
                    sock.settimeout(min(remaining, 2.0))
                    sock.connect(addr)
                return
            except OSError as exc:
                why = exc.strerror or str(exc) or type(exc).__name__
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(why)
        time.sleep(min(0.2, remaining))


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
        #: the one deadline of the whole run: no rank waits past it, whatever fails
        self.give_up = self.started + total_bound(timeout)
        self.store: Optional[Store] = None
        self.node = launch.rank if per_rank else launch.node
        self.prober = per_rank or launch.local_rank == 0
        self.times: Dict[str, float] = {}
        self.ready = self.started
        #: rank 0's host as it announced itself (for naming it when it goes silent)
        self.rank0_host = ""

    # -- setup ----------------------------------------------------------------------------
    def _connect(self) -> Store:
        """Host or join the store by ``started + timeout``. Clients first wait for a plain
        TCP connection (rank 0 may start later), so the wait ends when ``--timeout`` says;
        then c10d connects, bounded by the same deadline."""
        L = self.launch
        hosting = not L.agent_store and L.rank == 0
        # Before importing torch, which alone can take seconds on a busy node: rank 0
        # listens on the port at once (c10d then serves on that socket), the others wait
        # until it does. So "cannot reach rank 0" is decided by --timeout, and a rank 0
        # that is up but slow to import is not mistaken for one that never started.
        listen_fd = _listen(L.master_port) if hosting else None
        if not hosting:
            _wait_reachable(L.master_addr, L.master_port, self.started + self.timeout)
        dist = _import_dist()
        # the store's own timeout is also its default per-request one
        by = max(self.give_up, time.monotonic() + 5.0)
        wait = timedelta(seconds=max(by - time.monotonic(), 1.0))
        if L.agent_store:
            tcp = _in_time(lambda: dist.TCPStore(L.master_addr, L.master_port, None, False,
                                                 wait), by)
        else:
            tcp = _in_time(lambda: dist.TCPStore(L.master_addr, L.master_port, None, hosting,
                                                 wait, wait_for_workers=False,
                                                 multi_tenant=True, master_listen_fd=listen_fd),
                           by)
        prefix = f"{PREFIX}/{L.attempt}"
        return Store(dist.PrefixStore(prefix, tcp), prefix)

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
        where = f"{L.master_addr}:{L.master_port}"
        try:
            self.store = self._connect()
        except (RuntimeError, OSError) as exc:  # TimeoutError is an OSError
            if L.rank == 0 and not L.agent_store:
                return LiveOutcome(1, f"rank 0 cannot host the fleet store at {where}: "
                                      f"{_first_line(exc)}")
            return LiveOutcome(1, f"no answer from rank 0: cannot reach the fleet store at "
                                  f"{where} ({'torchrun agent' if L.agent_store else 'rank 0'})"
                                  f" within {self.timeout:g} s: {_first_line(exc)}")
        self.ready = time.monotonic()
        self.times["connect"] = self.ready - t
        try:
            store = self.store
            if L.rank != 0:
                store.set(f"r/{L.rank}", wire.registration(L.node, L.local_rank, L.host))
                return self._follow(store, self._announce(store))
            # rank 0: from its first key on, whatever stops it (a signal while it probes,
            # as much as one while it judges) leaves a verdict, so no rank waits for one
            # that cannot come
            try:
                store.set(f"r/{L.rank}", wire.registration(L.node, L.local_rank, L.host))
                return self._lead(store, self._announce(store))
            except BaseException as exc:
                line = (f"rank 0 was {exc}" if isinstance(exc, Stopped) else
                        f"rank 0 failed: {type(exc).__name__}: {_first_line(exc)}")
                store.set("v", wire.pack({"code": 1, "line": line[:300]}))
                store.set("bye", b"1")
                raise
        except RuntimeError as exc:  # the store went away (its host died)
            host = f" ({self.rank0_host})" if self.rank0_host else ""
            owner = "torchrun agent" if L.agent_store else "rank 0"
            who = "rank 0" if L.rank == 0 else f"no answer from rank 0{host}"
            return LiveOutcome(1, f"{who}: lost the fleet store at {where} ({owner}) "
                                  f"before the verdict: {_first_line(exc)}")

    def _announce(self, store: Store) -> Optional[_Probed]:
        """Probe (probers only) and publish the fingerprint."""
        own = self._probe() if self.prober else None
        if own is not None:
            store.set(f"f/{self.node}", own.message.encode())
        return own

    def _follow(self, store: Store, own: Optional[_Probed]) -> LiveOutcome:
        deadline = self.give_up
        self._note_rank0(store)
        if own is not None and own.snapshot is not None:
            # a verdict instead of the majority: rank 0 failed early and said so
            if store.wait(["want"], deadline, unless="v"):
                try:
                    want = wire.unpack(store.get("want"), wire.WANT)
                except BadValue as exc:
                    return LiveOutcome(1, f"rank 0's request for snapshots is unreadable: {exc}")
                if own.message.digest != want["m"] or want["rep"] == self.node:
                    store.set(f"s/{self.node}", _pack(own.snapshot))
            elif not store.check(["v"]):
                return self._no_verdict(store, "the majority fingerprint")
        if not store.wait(["v"], deadline):
            return self._no_verdict(store, "the verdict")
        try:
            verdict = wire.unpack(store.get("v"), wire.VERDICT)
        except BadValue as exc:
            return LiveOutcome(1, f"rank 0's verdict is unreadable: {exc}")
        ack = f"d/{self.launch.rank}"
        sent = store.sent + store.k + len(ack)
        store.set(ack, wire.pack(sent + 40))  # about the ack's own size
        return LiveOutcome(1 if verdict["code"] else 0, verdict["line"][:300])

    def stopped(self, why: Stopped) -> LiveOutcome:
        """What a rank stopped by a signal before the verdict reports (rank 0 named)."""
        if self.launch.rank == 0:
            return LiveOutcome(1, f"{why} before the verdict")
        host = f" ({self.rank0_host})" if self.rank0_host else ""
        return LiveOutcome(1, f"no verdict from rank 0{host}: {why} before it came (a "
                              f"launcher stops every rank when one of them fails)")

    def _note_rank0(self, store: Store) -> None:
        try:
            if not self.rank0_host and store.check(["r/0"]):
                self.rank0_host = wire.read_registration(store.get("r/0"))[2]
        except (RuntimeError, BadValue):
            pass

    def _no_verdict(self, store: Store, what: str) -> LiveOutcome:
        self._note_rank0(store)
        host = self.rank0_host or "host unknown"
        waited = time.monotonic() - self.started
        return LiveOutcome(1, f"no answer from rank 0 ({host}): waited {waited:.0f} s for "
                              f"{what}")

    def _lead(self, store: Store, own: Optional[_Probed]) -> LiveOutcome:
        L = self.launch
        W = L.world_size
        # counted from when the store is up: ranks cannot arrive before that, and on a
        # loaded machine rank 0's own start-up must not eat into the others' time
        deadline = min(self.ready + self.timeout, self.give_up)
        t = time.monotonic()
        node_keys = {n: f"f/{n}" for n in (range(W) if self.per_rank else range(L.nodes))}
        rank_keys = [f"r/{r}" for r in range(W)]
        keys = rank_keys + list(node_keys.values())
        present = set(keys) if store.wait(keys, deadline) else set(store.present(keys))
        arrived = [r for r in range(W) if f"r/{r}" in present]
        where: Dict[int, Tuple[int, int, str]] = {}
        #: node -> (rank, why): a value that arrived and cannot be used, said per node
        unreadable: Dict[int, Tuple[int, str]] = {}
        for r, raw in zip(arrived, store.multi_get([f"r/{r}" for r in arrived])):
            peer = decode_peer(r, raw, wire.read_registration)
            if peer.ok:
                where[r] = peer.value
            else:
                n = r if self.per_rank else L.node_of_rank(r)
                unreadable.setdefault(r if n is None else n,
                                      (r, f"rank {r} sent an unreadable registration: "
                                          f"{peer.problem}"))
        host_of_node = {n: h for n, _, h in where.values()}
        messages: Dict[int, NodeMessage] = {}
        fp_bytes: List[int] = []
        have = [n for n, k in node_keys.items() if k in present]
        for n, raw in zip(have, store.multi_get([node_keys[n] for n in have])):
            fp_bytes.append(len(raw))
            peer = decode_peer(n, raw, NodeMessage.decode)
            if peer.ok and peer.value.node != n:
                peer = replace(peer, kind="bad", problem=f"it claims to be node "
                                                        f"{peer.value.node}")
            if peer.ok:
                messages[n] = peer.value
            else:
                rank = next((r for r, (rn, local, _) in where.items() if rn == n
                             and (self.per_rank or local == 0)),
                            n if self.per_rank else n * max(L.local_world_size, 1))
                unreadable[n] = (rank, f"sent an unreadable fingerprint: {peer.problem}")
        missing: List[Missing] = []
        for r in range(W):
            if r not in where and not any(r == rr for rr, _ in unreadable.values()):
                physical = L.node_of_rank(r)
                seen = host_of_node.get(physical) if physical is not None else None
                missing.append(Missing(r, r if self.per_rank else physical,
                                       seen or L.host_of_node(physical), "did not arrive"))
        for n in node_keys:
            if n in messages or n in unreadable:
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
        for n, (rank, why) in unreadable.items():
            host = host_of_node.get(n) or L.host_of_node(n) or f"rank {rank}"
            if n in messages:  # its node's fingerprint arrived (judged); the rank is named
                missing.append(Missing(rank, n, host, why))
                continue
            inputs[n] = NodeInput(node=n, rank=rank, name=host, alias=f"{host}/rank{rank}"
                                  if self.per_rank else f"{host}/node{n}", error=why,
                                  error_kind="value")
        major = choose_majority(list(inputs.values()))
        rep = None
        if major is not None and (own is None or own.message.digest != major):
            rep = min(n for n, m in messages.items() if m.digest == major and m.error is None)
        want = wire.pack({"m": major, "rep": rep})
        store.set("want", want)
        senders = [n for n, m in messages.items() if n != own_node and m.error is None
                   and (m.digest != major or n == rep)]
        snap_deadline = min(max(deadline, time.monotonic() + min(self.timeout, 10.0)),
                            self.give_up)
        skeys = [f"s/{n}" for n in senders]
        got = skeys if store.wait(skeys, snap_deadline) else store.present(skeys)
        snap_bytes: Dict[int, int] = {}
        for key, raw in zip(got, store.multi_get(got)):
            n = int(key[2:])
            snap_bytes[n] = len(raw)
            peer = decode_peer(n, raw, _unpack)
            if not peer.ok:
                inputs[n] = replace(inputs[n], error=f"sent an unreadable snapshot: "
                                                     f"{peer.problem}", error_kind="value")
                continue
            inputs[n] = _input(messages[n], self.per_rank, peer.value,
                               self.describe(peer.value).facts)
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
        verdict = wire.pack({"code": code, "line": line[:300]})
        store.set("v", verdict)
        self.times["compare"] = time.monotonic() - t
        self.times["verdict"] = time.monotonic() - self.started

        # acknowledgements carry each rank's byte count
        t = time.monotonic()
        others = [r for r in where if r != 0]
        akeys = [f"d/{r}" for r in others]
        ack_by = min(max(deadline, time.monotonic() + min(self.timeout, ACK_S)), self.give_up)
        acked = akeys if store.wait(akeys, ack_by) else store.present(akeys)
        sent = [p.value for p in (decode_peer(0, raw, _read_ack)
                                  for raw in store.multi_get(acked)) if p.ok]
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
                self.store.wait(["bye"], min(time.monotonic() + min(self.timeout, GRACE_S),
                                             self.give_up))
        except RuntimeError:
            pass  # rank 0 (and its store) already gone: nothing left to wait for


def _input(m: NodeMessage, per_rank: bool, snapshot: Optional[Snapshot] = None,
           facts: Optional[Mapping[str, Optional[str]]] = None) -> NodeInput:
    alias = f"{m.host}/rank{m.rank}" if per_rank else f"{m.host}/node{m.node}"
    return NodeInput(node=m.node, rank=m.rank, name=m.host, alias=alias, digest=m.digest,
                     summary=dict(m.summary), lock_errors=m.lock_errors, snapshot=snapshot,
                     facts=dict(facts) if facts is not None else None, error=m.error)


def _pack(snapshot: Snapshot) -> bytes:
    return wire.pack(snapshot.to_dict())


def _unpack(raw: bytes) -> Snapshot:
    """A peer's snapshot: capped (:data:`~envlock.fleet.wire.SNAPSHOT_LIMITS`), then read
    like a snapshot file (an :class:`EnvlockError` is a bad value too)."""
    data = wire.unpack(raw, dict, wire.SNAPSHOT_LIMITS)
    try:
        return Snapshot.from_dict(data, origin="its snapshot")
    except EnvlockError as exc:
        raise BadValue(exc.message) from None


def _read_ack(raw: bytes) -> int:
    value = wire.unpack(raw, int)
    if not 0 <= value < 1 << 40:
        raise BadValue("not a byte count")
    return int(value)


def _spread(values: Sequence[int]) -> Dict[str, float]:
    if not values:
        return {"count": 0, "min": 0, "max": 0, "mean": 0}
    return {"count": len(values), "min": min(values), "max": max(values),
            "mean": round(sum(values) / len(values), 1)}


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:200] if text else type(exc).__name__

