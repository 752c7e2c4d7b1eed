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
               "fragment), conda (environment.yml), dockerfile (a Docker build context "
               "directory, -o DIR: Dockerfile, the lock's requirements, a wheel of this "
               "envlock and a list of its dependencies, all sha256-pinned), kubernetes (a nodeAffinity "
               "block and an NFD NodeFeatureRule selecting the nodes the target is valid "
               "on, from GPU Feature Discovery labels). Exit codes: 0 ok, "
               "2 usage/input error (no lock, unknown target, no hashes where needed), "
               "4 the index failed (dockerfile: envlock's own dependencies).")
    p.add_argument("--format", "-f", required=True, choices=list(FORMATS), metavar="FORMAT",
                   help="one of: " + ", ".join(FORMATS))
    p.add_argument("--lock", default=DEFAULT_LOCK, metavar="FILE",
                   help=f"the lock to read (default {DEFAULT_LOCK})")
    p.add_argument("--target", metavar="NAME",
                   help="which target of the lock (needed when it has several)")
    p.add_argument("--json", action="store_true",
                   help="print what was exported as JSON (the text itself when -o is '-')")
    p.add_argument("--only", metavar="NAME[,NAME...]",
                   help="requirements/constraints: just these locked packages (what the "
                        "fixes of `envlock verify` reinstall)")
    p.add_argument("-o", "--output", default="-", metavar="FILE",
                   help="file to write (default '-': standard output); written atomically. "
                        "For dockerfile: the build context directory (required)")
    p.add_argument("--base", "--base-image", dest="base_image", metavar="IMAGE",
                   help="dockerfile: the base image, best pinned as IMAGE@sha256:<digest> "
                        "(default python:<target python>-slim, a tag)")
    p.add_argument("--envlock-from", metavar="PATH|URL",
                   help="dockerfile: install this envlock-gpu wheel instead of a wheel of "
                        "the running envlock (needs --envlock-sha256)")
    p.add_argument("--envlock-sha256", metavar="HASH",
                   help="dockerfile: the sha256 of the --envlock-from wheel")
    p.set_defaults(run=run)


def _command(args: argparse.Namespace, target: str) -> str:
    from envlock.export.common import command_line

    argv: List[str] = ["--format", args.format, "--lock", args.lock, "--target", target]
    if args.base_image:
        argv += ["--base", args.base_image]
    if args.envlock_from:
        argv += ["--envlock-from", args.envlock_from, "--envlock-sha256",
                 args.envlock_sha256 or ""]
    if getattr(args, "only", None):
        argv += ["--only", args.only]
    if args.output != "-":
        argv += ["-o", args.output]
    return command_line(argv)


def _only(args: argparse.Namespace, target: Any) -> Any:
    """The target narrowed to ``--only`` packages; an unknown name is an input error."""
    from dataclasses import replace

    from packaging.utils import canonicalize_name

    if not args.only:
        return target
    if args.format not in ("requirements", "constraints"):
        raise UsageError("--only applies to --format requirements and constraints")
    want = [str(canonicalize_name(n.strip())) for n in args.only.split(",") if n.strip()]
    have = {p.name for p in target.packages}
    unknown = [n for n in want if n not in have]
    if unknown or not want:
        raise UsageError(f"--only: target {target.name} does not lock "
                         f"{', '.join(unknown) or 'any package by that name'}")
    return replace(target, packages=tuple(p for p in target.packages if p.name in want))


def run(args: argparse.Namespace, out: Any) -> int:
    from envlock.export import export
    from envlock.export.common import select_target
    from envlock.lock.io import atomic_write_text, load_lock

    docker = args.format == "dockerfile"
    for flag, value in (("--base", args.base_image), ("--envlock-from", args.envlock_from),
                        ("--envlock-sha256", args.envlock_sha256)):
        if value and not docker:
            raise UsageError(f"{flag} applies only to --format dockerfile")
    if docker and args.output == "-":
        raise UsageError("--format dockerfile writes a build context directory (the "
                         "Dockerfile, the requirements, envlock's wheel): pass -o DIR")
    lock = load_lock(args.lock)
    target = select_target(lock, args.target, args.lock)
    if docker:
        return _dockerfile(args, lock, target, out)
    output = None if args.output == "-" else args.output
    if args.only:
        from dataclasses import replace

        narrowed = _only(args, target)
        lock = replace(lock, targets=tuple(narrowed if t.name == target.name else t
                                           for t in lock.targets))
    result = export(lock, args.format, lock_path=args.lock, target=target.name,
                    command=_command(args, target.name), output=output)
    for warning in result.warnings:
        out.error("envlock: warning: " + warning.split("WARNING: ", 1)[-1])
    if args.json:
        import json

        if output is not None:
            atomic_write_text(output, result.text)
        out.print(json.dumps({"format": args.format, "lock": args.lock, "target": target.name,
                              "output": output, "warnings": list(result.warnings),
                              **({"text": result.text} if output is None else {})}, indent=2))
        return ExitCode.OK
    if output is None:
        out.stdout.write(result.text)
        return ExitCode.OK
    atomic_write_text(output, result.text)
    out.print(f"wrote {output} ({args.format}, target {target.name})")
    return ExitCode.OK


def _dockerfile(args: argparse.Namespace, lock: Any, target: Any, out: Any) -> int:
    """Everything is computed (wheel, index pages) before the first file is written, so a
    failure leaves no half-made context; each file is written atomically."""
    from envlock import __version__
    from envlock._files import atomic_write_bytes
    from envlock.export import context as ctx
    from envlock.export import export
    from envlock.index.client import IndexClient
    from envlock.index.config import load_index_config
    from envlock.matrix.cache import cache_dir

    from envlock.export.common import ExportRequest, require_hashes

    # refused before anything else, naming the user's lock (not the copy in the context)
    require_hashes(ExportRequest(lock=lock, target=target, lock_path=args.lock, command=""),
                   "dockerfile")
    directory = Path(args.output)
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"-o {args.output}: --format dockerfile writes a directory, and "
                         f"this is a file")
    source = ctx.envlock_source(args.envlock_from, args.envlock_sha256)
    options = {"base_image": args.base_image} if args.base_image else {}
    if source.wheel is not None:
        options["envlock_wheel"] = source.wheel.name
    lock_path = str(directory / ctx.LOCK)
    command = _command(args, target.name)
    dockerfile = export(lock, "dockerfile", lock_path=lock_path, target=target.name,
                        command=command, output=str(directory / "Dockerfile"),
                        options=options)
    requirements = export(lock, "requirements", lock_path=lock_path, target=target.name,
                          command=command, output=str(directory / ctx.REQUIREMENTS))
    config = load_index_config()
    with IndexClient(config, cache_dir=cache_dir()) as client:
        pins = ctx.envlock_dependency_pins(target, client, config.indexes)
    files = [
        ctx.ContextFile("Dockerfile", dockerfile.text.encode()),
        ctx.ContextFile(ctx.REQUIREMENTS, requirements.text.encode()),
        ctx.ContextFile(ctx.LOCK, Path(args.lock).read_bytes()),
        ctx.ContextFile(ctx.ENVLOCK_REQUIREMENTS, ctx.render_envlock_requirements(
            target, pins, __version__).encode()),
        ctx.ContextFile(ctx.ENVLOCK_WHEEL_REQ,
                        ctx.render_envlock_wheel_requirement(source).encode()),
    ] + ([source.wheel] if source.wheel is not None else [])
    for warning in (*dockerfile.warnings, *requirements.warnings):
        out.error("envlock: warning: " + warning.split("WARNING: ", 1)[-1])
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create {directory}: {exc.strerror}") from None
    for f in files:
        atomic_write_bytes(directory / f.name, f.data)
    if getattr(args, "json", False):
        import json

        out.print(json.dumps({"format": "dockerfile", "lock": args.lock, "target": target.name,
                              "output": str(directory), "files": [f.name for f in files]},
                             indent=2))
        return ExitCode.OK
    out.print(f"wrote {directory}/ (Dockerfile build context, target {target.name}: "
              f"{', '.join(f.name for f in files)})")
    return ExitCode.OK
