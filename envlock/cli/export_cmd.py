"""``envlock export``: render one target of a lock as requirements, constraints, pylock,
a uv fragment, a conda environment or a Dockerfile."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, List

from envlock.errors import ExitCode, UsageError

__all__ = ["register", "run", "DEFAULT_LOCK"]

DEFAULT_LOCK = "envlock.lock"


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    from envlock.export import FORMATS

    p = sub.add_parser(
        "export",
        help="write a lock target as requirements, pylock, uv, conda or a Dockerfile",
        description="Render one target of a lock in a format people install with. Every "
                    "output opens with a header naming the lock, the target and the "
                    "command that regenerates it.",
        epilog="Formats: requirements (pip install --no-deps --require-hashes -r), "
               "constraints (pip -c), pylock (PEP 751, uv pip sync), uv (pyproject.toml "
               "fragment), conda (environment.yml), dockerfile. Exit codes: 0 ok, "
               "2 usage/input error (no lock, unknown target, no hashes where needed).")
    p.add_argument("--format", "-f", required=True, choices=list(FORMATS), metavar="FORMAT",
                   help="one of: " + ", ".join(FORMATS))
    p.add_argument("--lock", default=DEFAULT_LOCK, metavar="FILE",
                   help=f"the lock to read (default {DEFAULT_LOCK})")
    p.add_argument("--target", metavar="NAME",
                   help="which target of the lock (needed when it has several)")
    p.add_argument("-o", "--output", default="-", metavar="FILE",
                   help="file to write (default '-': standard output); written atomically")
    p.add_argument("--base-image", metavar="IMAGE",
                   help="dockerfile: the base image (default python:<target python>-slim)")
    p.set_defaults(run=run)


def _command(args: argparse.Namespace, target: str) -> str:
    from envlock.export.common import command_line

    argv: List[str] = ["--format", args.format, "--lock", args.lock, "--target", target]
    if args.base_image:
        argv += ["--base-image", args.base_image]
    if args.output != "-":
        argv += ["-o", args.output]
    return command_line(argv)


def run(args: argparse.Namespace, out: Any) -> int:
    from envlock.export import export
    from envlock.export.common import select_target
    from envlock.lock.io import atomic_write_text, load_lock

    if args.base_image and args.format != "dockerfile":
        raise UsageError("--base-image applies only to --format dockerfile")
    lock = load_lock(args.lock)
    target = select_target(lock, args.target, args.lock)
    output = None if args.output == "-" else args.output
    options = {"base_image": args.base_image} if args.base_image else {}
    result = export(lock, args.format, lock_path=args.lock, target=target.name,
                    command=_command(args, target.name), output=output, options=options)
    for warning in result.warnings:
        out.error("envlock: warning: " + warning.split("WARNING: ", 1)[-1])
    if output is None:
        out.stdout.write(result.text)
        return ExitCode.OK
    atomic_write_text(Path(output), result.text)
    out.print(f"wrote {output} ({args.format}, target {target.name})")
    return ExitCode.OK
