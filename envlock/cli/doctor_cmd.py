"""``envlock doctor``: known problems of this machine (or a snapshot), its logs, live checks."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any, List, Tuple

from envlock.errors import ExitCode, InputError

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    p = sub.add_parser(
        "doctor", help="find known problems: advisories, log triage, live smoke checks",
        description="Check a machine against envlock's advisories (known-bad combinations of "
                    "GPU, driver, CUDA libraries, NCCL and PyTorch), rank the advisories that "
                    "explain a crash log, and optionally run smoke checks on the hardware.",
        epilog="Exit codes: 0 no errors or warnings, 1 problems found, 2 usage or input error.")
    p.add_argument("--snapshot", metavar="FILE", help="a machine you are not on")
    from envlock.cli.snapshot_cmd import add_python_arg

    add_python_arg(p)
    p.add_argument("--log", action="append", default=[], metavar="FILE",
                   help="a log to triage (repeatable; '-' reads stdin)")
    p.add_argument("--smoke", action="store_true",
                   help="run live checks in child processes (needs envlock-gpu[torch])")
    p.add_argument("--timeout", type=seconds_arg, default=120.0,
                   help="per smoke check (seconds)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--junit", metavar="FILE", help="also write JUnit XML")
    p.add_argument("-v", "--verbose", action="store_true")
    p.set_defaults(run=run)


#: the longest a smoke check may be given (a day); inf or nan would wait for ever
MAX_TIMEOUT_S = 86400.0


def seconds_arg(text: str) -> float:
    """argparse type: a finite number of seconds, more than 0 and at most a day."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected seconds, more than 0 and at most {MAX_TIMEOUT_S:.0f}")
    return value


def _read_logs(paths: List[str], out: Any) -> List[Tuple[str, str]]:
    import sys

    from envlock._files import MAX_INPUT_BYTES, read_user_bytes

    logs = []
    for p in paths:
        if p == "-":  # bytes, so a log with stray non-UTF-8 bytes is still read
            stream = getattr(sys.stdin, "buffer", None)
            data = (stream.read(MAX_INPUT_BYTES + 1) if stream is not None
                    else sys.stdin.read(MAX_INPUT_BYTES + 1))
            if len(data) > MAX_INPUT_BYTES:
                raise InputError("the log on stdin is larger than 64 MiB; envlock does not "
                                 "read logs this large")
            logs.append(("stdin", data.decode("utf-8", "replace")
                         if isinstance(data, bytes) else data))
            continue
        data = read_user_bytes(p, "log file")  # capped: --log /dev/zero ends, with an error
        logs.append((p, data.decode("utf-8", errors="replace")))  # logs may hold any bytes
    return logs


def run(args: argparse.Namespace, out: Any) -> int:
    from envlock.checks.doctor import doctor
    from envlock.cli.render import junit_xml
    from envlock.matrix import get_matrix

    matrix = get_matrix()
    logs = _read_logs(args.log, out)
    if args.snapshot:
        from envlock.snapshot import load_snapshot

        snap = load_snapshot(args.snapshot)
    else:
        from envlock.probe.machine import take_snapshot

        snap = take_snapshot(python=args.python)
    smoke = []
    if args.smoke:
        if args.snapshot:
            raise InputError("--smoke runs on this machine; it cannot be combined with --snapshot")
        import importlib.util

        if importlib.util.find_spec("torch") is None:
            raise InputError("--smoke needs torch (pip install 'envlock-gpu[torch]')")
        from envlock.checks.smoke import run_smoke

        gpus = [(g.index, g.compute_capability) for g in snap.visible_gpus() if not g.lost]
        from envlock.cli.progress import Progress

        what = f"{len(gpus)} GPU" + ("s" if len(gpus) != 1 else "") if gpus else "gloo on CPU"
        with Progress(out, f"smoke checks ({what}, up to {args.timeout:.0f}s each)"):
            smoke = run_smoke(gpus, timeout=args.timeout)
    result = doctor(snap, matrix, logs=logs, smoke=smoke)
    if args.junit:
        from pathlib import Path

        from envlock.lock.io import atomic_write_text

        checks = ["advisories"] + [s.name for s in result.smoke]
        by = {f.id: (f.subject if f.id.startswith("smoke-") else "advisories")
              for f in result.findings}
        atomic_write_text(args.junit, junit_xml("doctor", checks, result.findings,
                                                      findings_check=by))
    if args.json:
        out.print(json.dumps(result.to_dict(), indent=2))
    else:
        from envlock.cli.render import doctor_lines, report_text
        from envlock.cli.style import style_for

        where = args.snapshot or "this machine"
        n = sum(len(ids.split(", ")) for ids, _ in result.not_checked)
        ok_text = ("no advisory explains the log" if args.log else "no known problem") + (
            f" ({n} advisor{'y' if n == 1 else 'ies'} not checked, below)" if n else "")
        out.print(report_text(result.findings, subject=f"doctor {where}", verbose=args.verbose,
                              skipped=result.not_checked, ok_text=ok_text,
                              style=style_for(out)))
        for line in doctor_lines(result, verbose=args.verbose):
            out.print(line)
    return ExitCode.OK if result.ok else ExitCode.DRIFT
