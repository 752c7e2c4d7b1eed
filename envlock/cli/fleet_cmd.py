"""``envlock fleet``: check that every node of a distributed job has the same environment.

Live, once per rank under a launcher::

    torchrun --nnodes 64 --nproc-per-node 8 ... -m envlock fleet --lock envlock.lock
    srun --ntasks-per-node 1 envlock fleet --lock envlock.lock

or offline, over snapshot files gathered any other way::

    envlock fleet --snapshots 'collected/*.json'

The protocol is in :mod:`envlock.fleet.protocol`; this module wires the command line to it
and is the only place that prints (rank 0 the table and the report; other ranks one line
on stderr when the verdict is drift).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any, List, Mapping, Optional

from envlock.errors import ExitCode, InputError, UsageError

__all__ = ["register", "run"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    from envlock.cli.snapshot_cmd import add_hardware_args

    p = sub.add_parser(
        "fleet", help="check that every node of a distributed job has the same environment",
        description="Run once per rank under torchrun or srun: each node probes itself once, "
                    "nodes exchange a short fingerprint over the launcher's c10d store (no "
                    "NCCL, no GPU needed), only nodes that differ from the majority send "
                    "their snapshot, and rank 0 judges for everyone. With --snapshots, "
                    "compare snapshot files offline instead.",
        epilog="Exit codes (the same on every rank): 0 all nodes agree (and match the lock), "
               "1 drift, a node failed to probe, or a rank did not answer within --timeout, "
               "2 usage or input error.")
    p.add_argument("--lock", metavar="FILE", help="also check every node against this lock")
    p.add_argument("--target", help="lock target (default: the one matching the nodes' GPUs)")
    p.add_argument("--snapshots", action="append", metavar="GLOB",
                   help="offline: compare these snapshot files (from Ansible, a Slurm array, "
                        "Kubernetes jobs...) instead of running under a launcher; repeatable")
    p.add_argument("--snapshot", metavar="FILE",
                   help="live: use this snapshot instead of probing; {RANK}, {LOCAL_RANK}, "
                        "{NODE}, {HOSTNAME} and any {VARIABLE} of the rank's environment "
                        "(e.g. {GROUP_RANK}, {SLURM_PROCID}) are filled in per rank, e.g. "
                        "'snaps/{HOSTNAME}.json'")
    p.add_argument("--per-rank", action="store_true",
                   help="probe on every rank instead of once per node (local rank 0), e.g. "
                        "one rank per node under srun, or for tests on one machine")
    p.add_argument("--timeout", type=float, default=120.0, metavar="SECONDS",
                   help="how long rank 0 waits for every rank (default 120); ranks that "
                        "have not answered by then are named and the verdict is drift. A "
                        "rank that cannot reach the store gives up after SECONDS; every "
                        "rank has exited SECONDS + min(SECONDS, 10) + 30 s after it started, "
                        "whatever failed")
    p.add_argument("--endpoint", metavar="HOST:PORT",
                   help="where rank 0 hosts the store (default: $MASTER_ADDR:$MASTER_PORT, "
                        "or torchrun's own store; under srun the first node of the job)")
    p.add_argument("--report", metavar="FILE", help="rank 0 writes the JSON report here")
    p.add_argument("--deep", action="store_true", help="import torch in a child process too "
                                                       "(cuDNN/NCCL versions as torch sees them)")
    add_hardware_args(p)
    p.add_argument("--strict", action="store_true", help="warnings fail too")
    p.add_argument("--json", action="store_true", help="print the report as JSON (rank 0)")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: Any) -> int:
    started = time.monotonic()
    if not args.timeout > 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.snapshots:
        for flag, value in (("--snapshot", args.snapshot), ("--per-rank", args.per_rank),
                            ("--endpoint", args.endpoint), ("--gpu", args.gpu),
                            ("--driver", args.driver), ("--deep", args.deep)):
            if value:
                raise UsageError(f"{flag} is for live runs; --snapshots compares files offline")
        return _offline(args, out)
    return _live(args, out, started)


def _lock_and_matrix(args: argparse.Namespace) -> Any:
    from envlock.lock.io import load_lock
    from envlock.matrix import get_matrix

    if not args.lock:
        return None, None
    return load_lock(args.lock), get_matrix()


def _offline(args: argparse.Namespace, out: Any) -> int:
    import glob

    from envlock.fleet.compare import NodeInput, compare_fleet, describe_node
    from envlock.snapshot import load_snapshot

    lock, matrix = _lock_and_matrix(args)
    paths: List[str] = []
    for pattern in args.snapshots:
        found = sorted(glob.glob(pattern, recursive=True))
        if not found:
            raise UsageError(f"--snapshots {pattern!r} matches no file")
        paths += [p for p in found if p not in paths]
    nodes = []
    for i, path in enumerate(paths):
        name = Path(path).name
        try:
            snap = load_snapshot(path)
            d = describe_node(snap, lock=lock, matrix=matrix, target_name=args.target)
        except InputError as exc:
            nodes.append(NodeInput(node=i, rank=i, name=Path(path).stem, alias=name,
                                   error=exc.message))
            continue
        nodes.append(NodeInput(node=i, rank=i, name=snap.host.hostname or Path(path).stem,
                               alias=name, digest=d.digest, summary=d.summary,
                               lock_errors=d.lock_errors, snapshot=snap, facts=d.facts))
    result = compare_fleet(nodes, expected=len(nodes), lock=lock, matrix=matrix,
                           target_name=args.target)
    header = f"envlock fleet: {len(paths)} snapshot file{'s' if len(paths) != 1 else ''}"
    return _emit(args, out, result, header, None)


def _live(args: argparse.Namespace, out: Any, started: float) -> int:
    from envlock.fleet.compare import compare_fleet, describe_node
    from envlock.fleet.launch import expand_placeholders, launch_from_env, placeholder_values
    from envlock.fleet.protocol import FleetSession, Stopped
    from envlock.snapshot import Snapshot

    launch = launch_from_env(os.environ, endpoint=args.endpoint)
    lock: Any = None
    matrix: Any = None
    lock_error: Optional[str] = None
    try:
        lock, matrix = _lock_and_matrix(args)
    except InputError as exc:  # this node's problem: reported to rank 0, not a lone exit 2
        lock_error = exc.message
    values = placeholder_values(launch, os.environ)

    def probe() -> Snapshot:
        if lock_error:
            raise InputError(lock_error)
        if args.snapshot:
            from envlock.snapshot import load_snapshot

            return load_snapshot(expand_placeholders(args.snapshot, values))
        from envlock.probe.machine import take_snapshot

        return take_snapshot(deep=args.deep, gpus=args.gpu or [], driver=args.driver)

    expected = launch.world_size if args.per_rank else launch.nodes
    session = FleetSession(
        launch, per_rank=args.per_rank, timeout=args.timeout, strict=args.strict, probe=probe,
        describe=lambda snap: describe_node(snap, lock=lock, matrix=matrix,
                                            target_name=args.target),
        judge=lambda nodes, missing: compare_fleet(nodes, expected=expected, lock=lock,
                                                   matrix=matrix, target_name=args.target,
                                                   missing=missing, timeout=args.timeout),
        started=started)
    stop = _StopOnSignal()
    stopped = False
    try:
        from envlock.cli.progress import Progress

        # rank 0 waits for everyone: a status line on its terminal (never on other ranks)
        with stop, Progress(out, f"fleet: waiting for {expected} node(s), up to "
                                 f"{args.timeout:.0f}s",
                            enabled=launch.rank == 0 and out.stderr_is_tty):
            try:
                outcome = session.run()
            except Stopped as why:
                outcome, stopped = session.stopped(why), True
        if outcome.result is not None:
            header = (f"envlock fleet ({launch.launcher}, {launch.world_size} rank"
                      f"{'s' if launch.world_size != 1 else ''})")
            _emit(args, out, outcome.result, header, outcome.stats)
        elif outcome.code != ExitCode.OK:
            out.error(f"envlock fleet: rank {launch.rank}: {outcome.line}")
    finally:
        if not stopped:
            session.release()
    return outcome.code


class _StopOnSignal:
    """Within the block, SIGTERM raises :class:`Stopped`: torchrun sends it to every worker
    when one fails (rank 0 killed, say), and a rank must then still say, in one line and
    with exit 1, that the check never reached a verdict. Outside the main thread (where
    Python allows no handler) it does nothing."""

    def __enter__(self) -> None:
        import signal
        import threading

        from envlock.fleet.protocol import Stopped

        self.previous: Any = None
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, frame: Any) -> None:
            raise Stopped(f"stopped by {signal.Signals(signum).name}")

        self.previous = signal.signal(signal.SIGTERM, handler)

    def __exit__(self, *exc: object) -> None:
        import signal

        if self.previous is not None:
            signal.signal(signal.SIGTERM, self.previous)


def _emit(args: argparse.Namespace, out: Any, result: Any, header: str,
          protocol: Optional[Mapping[str, Any]]) -> int:
    from envlock.fleet.report import fleet_text, report_dict
    from envlock.lock.io import atomic_write_text

    report = report_dict(result, strict=args.strict, protocol=protocol)
    if args.report:
        atomic_write_text(args.report, json.dumps(report, indent=2) + "\n")
    if args.lock and result.target:
        header += f" against {args.lock} target {result.target}"
    if args.json:
        out.print(json.dumps(report, indent=2))
    else:
        out.print(fleet_text(result, header=header, verbose=args.verbose))
    return ExitCode.DRIFT if result.failed(args.strict) else ExitCode.OK
