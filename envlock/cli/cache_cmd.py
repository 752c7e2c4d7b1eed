"""``envlock cache dir|info|prune|clean``: where the cache is, what it holds, removing it.

The work is :mod:`envlock.cache_admin`'s; this module parses, prints and picks the exit
code: 0 done, 1 some entries could not be removed (each named), 2 caching is off
(``ENVLOCK_NO_CACHE``) or a usage error.
"""

from __future__ import annotations

import argparse
import json
from typing import Any, List

from envlock.cli.parser import needs_subcommand
from envlock.errors import ExitCode, UsageError

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    p = sub.add_parser("cache", help="show or remove what envlock keeps in its cache",
                       description="envlock's cache directory ($ENVLOCK_CACHE_DIR, else "
                                   "$XDG_CACHE_HOME/envlock, else ~/.cache/envlock): where "
                                   "it is, what it holds, and removing it.",
                       epilog="Exit codes: 0 done, 1 some entries could not be removed, "
                              "2 caching is off (ENVLOCK_NO_CACHE) or usage error.")
    csub = p.add_subparsers(dest="cache_command", metavar="SUBCOMMAND")
    d = csub.add_parser("dir", help="print the cache directory")
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.set_defaults(run=_dir)
    i = csub.add_parser("info", help="entries and size by kind, and what prune would remove")
    i.add_argument("--json", action="store_true", help="machine-readable output")
    i.set_defaults(run=_info)
    for name, helptext, run in (
            ("prune", "remove the entries this envlock never reads (older layouts, pages "
                      "fetched again since, interrupted writes, other versions' matrix)",
             _prune),
            ("clean", "remove every entry envlock writes (other files in the directory "
                      "stay)", _clean)):
        c = csub.add_parser(name, help=helptext)
        c.add_argument("--dry-run", action="store_true",
                       help="say what would be removed, remove nothing")
        c.add_argument("--json", action="store_true", help="machine-readable output")
        c.set_defaults(run=run)
    p.set_defaults(run=lambda args, out: needs_subcommand(p, out))



def _root() -> Any:
    from envlock._cache_files import cache_dir

    root = cache_dir()
    if root is None:
        raise UsageError("caching is off (ENVLOCK_NO_CACHE is set): there is no cache "
                         "directory", hint="unset ENVLOCK_NO_CACHE")
    return root


def _dir(args: argparse.Namespace, out: Any) -> int:
    root = str(_root())
    out.print(json.dumps({"directory": root}) if args.json else root)
    return ExitCode.OK


def _info(args: argparse.Namespace, out: Any) -> int:
    from envlock.cache_admin import KINDS, usage

    root = _root()
    rows = usage(root)
    if args.json:
        out.print(json.dumps({"directory": str(root), "kinds": [
            {"kind": u.kind, "files": u.files, "bytes": u.bytes,
             "stale_files": u.stale_files, "stale_bytes": u.stale_bytes} for u in rows]},
            indent=2))
        return ExitCode.OK
    what = dict(KINDS, other="the matrix cache and machine probes, at the top")
    out.print(f"cache: {root}")
    for u in rows:
        out.print(f"  {u.kind:<15} {u.files:>7} files {_size(u.bytes):>9}  {what[u.kind]}")
    stale_files = sum(u.stale_files for u in rows)
    total = sum(u.bytes for u in rows)
    out.print(f"  {'total':<15} {sum(u.files for u in rows):>7} files {_size(total):>9}")
    if stale_files:
        out.print(f"{stale_files} files ({_size(sum(u.stale_bytes for u in rows))}) are never "
                  f"read by this envlock: 'envlock cache prune' removes them")
    return ExitCode.OK


def _prune(args: argparse.Namespace, out: Any) -> int:
    from envlock.cache_admin import prune

    root = _root()
    return _report(out, args, root, prune(root, args.dry_run), "never read by this envlock")


def _clean(args: argparse.Namespace, out: Any) -> int:
    from envlock.cache_admin import clean

    root = _root()
    return _report(out, args, root, clean(root, args.dry_run), "")


def _report(out: Any, args: argparse.Namespace, root: Any, r: Any, why: str) -> int:
    if args.json:
        out.print(json.dumps({"directory": str(root), "dry_run": r.dry_run,
                              "files": r.files, "bytes": r.bytes,
                              "failed": list(r.failed)}, indent=2))
    else:
        verb = "would remove" if r.dry_run else "removed"
        if r.files:
            tail = f" ({why})" if why else ""
            out.print(f"{verb} {r.files} files, {_size(r.bytes)}, from {root}{tail}")
        elif not r.failed:
            out.print(f"nothing to remove in {root}")
        for line in _first(list(r.failed)):
            out.error(f"envlock: could not remove {line}")
    return ExitCode.DRIFT if r.failed else ExitCode.OK


def _first(lines: List[str], n: int = 10) -> List[str]:
    return lines[:n] + ([f"... and {len(lines) - n} more"] if len(lines) > n else [])


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return f"{n} B"
