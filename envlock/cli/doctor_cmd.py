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
        epilog="Exit codes: 0 nothing blocks training (warnings allowed unless --strict), "
               "1 problems found, 2 usage or input error.")
    p.add_argument("--snapshot", metavar="FILE", help="a machine you are not on")
    p.add_argument("--lock", metavar="FILE",
                   help="the machine's lock: fixes install from it first (pinned, hashed) "
                        "instead of an unpinned torch")
    p.add_argument("--target", metavar="NAME",
                   help="lock target (default: the one matching this machine's GPUs)")
    p.add_argument("--strict", action="store_true", help="warnings fail too")
    from envlock.cli.snapshot_cmd import add_python_arg

    add_python_arg(p)
    p.add_argument("--log", action="append", default=[], metavar="FILE",
                   help="a log to triage (repeatable; '-' reads stdin)")
    p.add_argument("--smoke", action="store_true",
                   help="run live checks in child processes (needs envlock-gpu[torch])")
    p.add_argument("--timeout", type=seconds_arg, default=120.0,
                   help="per smoke check (seconds)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--junit", metavar="FILE",
                   help="also write JUnit XML (-: to standard output, the report then to "
                        "standard error)")
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

    if args.json and args.junit == "-":
        raise InputError("--json and --junit - both write to standard output; give --junit "
                         "a file name")
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
    result = doctor(snap, matrix, logs=logs, smoke=smoke, live=not args.snapshot)
    if args.lock:
        from dataclasses import replace

        from envlock.checks.fixes import FixContext, lock_first
        from envlock.checks.verify import choose_target
        from envlock.lock.io import load_lock

        lock = load_lock(args.lock)
        target = choose_target(lock, snap, matrix, args.target)
        ctx = FixContext(lock_path=args.lock, python=args.python)
        result = replace(result, findings=tuple(lock_first(result.findings, ctx, lock, target)))
    elif args.target:
        raise InputError("--target names a target of --lock; pass --lock FILE too")
    if args.junit:
        checks = ["advisories"] + [s.name for s in result.smoke]
        by = {f.id: (f.subject if f.id.startswith("smoke-") else "advisories")
              for f in result.findings}
        out.junit(args.junit, junit_xml("doctor", checks, result.findings,
                                        findings_check=by))
    if args.json:
        out.print(json.dumps(result.to_dict(), indent=2))
    else:
        from envlock.cli.render import doctor_lines, report_text
        from envlock.cli.style import style_for

        where = args.snapshot or ("the log's machine" if result.judged_from
                                  else "this machine")
        if result.judged_from:
            out.print(result.judged_from)
        diag = result.diagnosis
        style = style_for(out)
        # an advisory a symptom already lists (possible: decided by ...) is not listed
        # again as not checked
        listed = ({c.advisory for d in diag.diagnoses for c in d.causes} |
                  {c.advisory for c in diag.also}) if diag is not None else set()
        skipped = [(", ".join(left), why) for ids, why in result.not_checked
                   if (left := [i for i in ids.split(", ") if i not in listed])]
        n = sum(len(ids.split(", ")) for ids, _ in skipped)
        suffix = (f" ({n} advisor{'y' if n == 1 else 'ies'} not checked, below)" if n else "")
        if diag is not None and diag.diagnoses:
            from dataclasses import replace

            from envlock.cli.render_diagnosis import diagnosis_lines

            # the answer line first, then each symptom with its causes ranked (issue 28),
            # then what the differential does not already name (the machine's own problems)
            named = {c.advisory for d in diag.diagnoses for c in d.causes}
            first = report_text(result.findings, subject=f"doctor {where}",
                                ok_text="no cause confirmed" + suffix, style=style)
            rest = report_text([f for f in result.findings if f.id not in named],
                               subject=f"doctor {where}", verbose=args.verbose,
                               skipped=skipped, ok_text="", style=style)
            out.print(first.splitlines()[0])
            for line in diagnosis_lines(diag, verbose=args.verbose, style=style):
                out.print(line)
            if result.environment_matters:  # why a cause is only possible
                out.print(result.environment)
            for line in rest.splitlines()[1:]:
                out.print(line)
            result = replace(result, ruled_out=tuple(r for r in result.ruled_out
                                                     if r.advisory not in named))
        else:
            ok_text = ("no advisory explains the log" if args.log else "no known problem")
            out.print(report_text(result.findings, subject=f"doctor {where}",
                                  verbose=args.verbose, skipped=skipped,
                                  ok_text=ok_text + suffix, style=style))
            for note in diag.cut if diag is not None else ():
                out.print("log cut: " + note)
        for line in doctor_lines(result, verbose=args.verbose):
            out.print(line)
    return ExitCode.DRIFT if result.failed(args.strict) else ExitCode.OK
