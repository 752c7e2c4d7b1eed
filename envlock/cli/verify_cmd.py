"""``envlock verify``: diff this machine (or a snapshot) against the lock."""

from __future__ import annotations

import argparse
import json
from typing import Any

from envlock.errors import ExitCode, InputError

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    p = sub.add_parser(
        "verify", help="check this machine against the lock (packages, libraries, driver, GPUs)",
        description="Diff a machine against envlock.lock: installed packages, the CUDA "
                    "libraries the loader would pick, the driver, the GPUs, locked variables "
                    "and known advisories.",
        epilog="Exit codes: 0 matches (warnings allowed unless --strict), 1 drift found, "
               "2 usage or input error.")
    p.add_argument("--lock", default="envlock.lock", metavar="FILE")
    p.add_argument("--target", help="lock target (default: the one matching this machine's GPUs)")
    p.add_argument("--stage", choices=["build", "runtime"], default="runtime",
                   help="build: in `docker build`, no GPU and no driver (skips those checks)")
    from envlock.cli.snapshot_cmd import add_python_arg

    add_python_arg(p)
    p.add_argument("--snapshot", metavar="FILE", help="verify a snapshot instead of this machine")
    p.add_argument("--deep", action="store_true", help="import torch in a child process too")
    p.add_argument("--hashes", action="store_true",
                   help="also check installed files against their RECORD hashes (slow)")
    p.add_argument("--strict", action="store_true", help="warnings fail too")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--junit", metavar="FILE",
                   help="also write JUnit XML for CI systems (-: to standard output, the "
                        "report then to standard error)")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(run=run)


def run(args: argparse.Namespace, out: Any) -> int:
    from envlock.checks.verify import choose_target, verify
    from envlock.cli.render import junit_xml, report_text
    from envlock.cli.style import style_for
    from envlock.lock.io import load_lock
    from envlock.matrix import get_matrix

    if args.json and args.junit == "-":
        raise InputError("--json and --junit - both write to standard output; give --junit "
                         "a file name")
    lock = load_lock(args.lock)
    matrix = get_matrix()
    if args.snapshot:
        from envlock.snapshot import load_snapshot

        snap = load_snapshot(args.snapshot)
    else:
        from envlock.probe.machine import take_snapshot

        snap = take_snapshot(deep=args.deep, probe_gpus=args.stage == "runtime",
                             python=args.python)
    target = choose_target(lock, snap, matrix, args.target)
    from envlock.checks.fixes import FixContext

    paths = None
    if args.hashes and args.python and not args.snapshot:  # the files of that environment
        from envlock.probe.interpreter import describe_interpreter

        paths = describe_interpreter(args.python).path
    result = verify(lock, target, snap, matrix, stage=args.stage, check_hashes=args.hashes,
                    paths=paths, fixes=FixContext(lock_path=args.lock, python=args.python))
    if args.junit:
        out.junit(args.junit, junit_xml("verify", result.checked, result.findings,
                                        result.skipped))
    if args.json:
        out.print(json.dumps(result.to_dict(), indent=2))
    else:
        where = args.snapshot or "this machine"
        named = "" if args.lock == "envlock.lock" else f"{args.lock}, "
        subject = f"{target.name} lock ({named}{args.stage})"
        out.print(report_text(result.findings, subject=subject, verbose=args.verbose,
                              skipped=result.skipped, style=style_for(out),
                              ok_text=f"{where} matches"))
    failed = not result.ok or (args.strict and any(f.severity == "warning"
                                                   for f in result.findings))
    return ExitCode.DRIFT if failed else ExitCode.OK
