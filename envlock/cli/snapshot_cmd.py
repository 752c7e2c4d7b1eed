"""``envlock snapshot``: record this machine as JSON (schema envlock.snapshot/1)."""

from __future__ import annotations

import argparse
from typing import Any

from envlock.errors import ExitCode

__all__ = ["register", "live_snapshot"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    p = sub.add_parser("snapshot", help="record this machine (GPUs, driver, libraries, packages)",
                       description="Record what this machine really has, as JSON "
                                   "(schema envlock.snapshot/1).")
    p.add_argument("-o", "--output", default="-", metavar="FILE",
                   help="write here (default: stdout; on a terminal, the readable view)")
    p.add_argument("--show", metavar="FILE", nargs="?", const="",
                   help="print a snapshot file (or, without FILE, this machine) for people")
    p.add_argument("-v", "--verbose", action="store_true", help="--show: every detail")
    p.add_argument("--json", action="store_true",
                   help="the JSON, even on a terminal (what -o and pipes get anyway)")
    p.add_argument("--deep", action="store_true",
                   help="also import torch in a child process: arch list, cuDNN/NCCL as torch "
                        "sees them, libraries actually loaded (needs torch)")
    add_hardware_args(p)
    add_python_arg(p)
    p.set_defaults(run=run)


def add_python_arg(p: argparse.ArgumentParser) -> None:
    """``--python PATH``: the environment to record when envlock lives in its own."""
    import os

    p.add_argument("--python", metavar="PATH", default=os.environ.get("ENVLOCK_PYTHON"),
                   help="the interpreter of the environment to check (default "
                        "$ENVLOCK_PYTHON, else the one running envlock); needed when envlock "
                        "lives in its own virtual environment, as in the exported image")


#: the most GPUs one node can state; a typo such as ``H20:999999999`` would otherwise build a
#: billion-GPU snapshot (and hang).
MAX_GPUS_PER_NODE = 1024


def gpu_arg(text: str) -> str:
    """argparse type for ``--gpu NAME[:COUNT]``: a count is ASCII digits, 1..1024."""
    name, sep, count = text.rpartition(":")
    if sep and count.strip() and not name.strip().endswith(":"):
        c = count.strip()
        if c.isdigit() and not (c.isascii() and 1 <= int(c) <= MAX_GPUS_PER_NODE):
            raise argparse.ArgumentTypeError(
                f"{text!r}: the GPU count must be a number from 1 to {MAX_GPUS_PER_NODE}")
    if "\n" in text or "\r" in text or "\0" in text:
        raise argparse.ArgumentTypeError(f"{text!r}: control characters in a GPU name")
    return text


def add_hardware_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", action="append", default=[], metavar="NAME[:COUNT]", type=gpu_arg,
                   help="state the GPUs instead of probing (GPU-less build hosts), e.g. H20:8")
    p.add_argument("--driver", metavar="VERSION",
                   help="state the driver version (also read from $UV_CUDA_DRIVER_VERSION)")


def live_snapshot(args: argparse.Namespace, *, probe_gpus: bool = True) -> Any:
    from envlock.probe.machine import take_snapshot

    return take_snapshot(deep=getattr(args, "deep", False), gpus=getattr(args, "gpu", []) or [],
                         driver=getattr(args, "driver", None), probe_gpus=probe_gpus,
                         python=getattr(args, "python", None))


def run(args: argparse.Namespace, out: Any) -> int:
    if args.show is not None and args.json:
        from envlock.snapshot import load_snapshot

        snap = load_snapshot(args.show) if args.show else live_snapshot(args)
        out.stdout.write(snap.to_json())
        return ExitCode.OK
    if args.show is not None or (args.output == "-" and not args.json
                                 and getattr(out, "stdout_is_tty", False)):
        return _show(args, out)
    snap = live_snapshot(args)
    text = snap.to_json()
    if args.output == "-":
        out.stdout.write(text)
    else:
        from envlock.lock.io import atomic_write_text

        atomic_write_text(args.output, text)
        out.error(f"wrote {args.output}")
    return ExitCode.OK


def _show(args: argparse.Namespace, out: Any) -> int:
    """The readable view: of a file (``--show FILE``), else of this machine."""
    from envlock.cli.show import snapshot_text
    from envlock.cli.style import style_for

    if args.show:
        from envlock.snapshot import load_snapshot

        snap = load_snapshot(args.show)
    else:
        snap = live_snapshot(args)
    out.print(snapshot_text(snap, source=args.show or "", verbose=args.verbose,
                            style=style_for(out)))
    if not args.show and args.output == "-":
        out.error("(the JSON: envlock snapshot -o FILE, or pipe it)")
    return ExitCode.OK
