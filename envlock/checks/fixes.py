"""Fix commands built from the lock itself, so a suggested command does exactly what the
lock says: the locked version, its hashes, its index, and the user's own ``--lock PATH``.

Why a module of its own: a fix that reinstalls "the package" without its version or hash
(``pip install --force-reinstall filelock``) can make a machine worse, and a fix that drops
``--lock`` reinstalls some other lock. Every package fix verify suggests is made here.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from envlock.lock.model import Lock, LockedPackage, LockTarget

__all__ = ["FixContext", "reinstall_packages", "reinstall_lock", "uninstall_packages"]

#: the scratch file a grouped fix writes its requirements to (in the current directory)
FIX_FILE = "envlock-fix.txt"


@dataclass(frozen=True)
class FixContext:
    """What a fix command needs to know about how the user called envlock."""

    lock_path: str = "envlock.lock"
    #: the interpreter of the checked environment (``--python``); None: plain ``pip``
    python: Optional[str] = None

    @property
    def pip(self) -> str:
        return f"{shlex.quote(self.python)} -m pip" if self.python else "pip"


def _export(ctx: FixContext, lock: Lock, target: LockTarget,
            only: Optional[Sequence[str]] = None) -> str:
    argv = ["envlock", "export", "--lock", ctx.lock_path]
    if len(lock.targets) > 1:
        argv += ["--target", target.name]
    argv += ["--format", "requirements"]
    if only:
        argv += ["--only", ",".join(only)]
    argv += ["-o", FIX_FILE]
    return " ".join(shlex.quote(a) for a in argv)


def _hashed(target: LockTarget, names: Sequence[str]) -> bool:
    by = {p.name: p for p in target.packages}
    return all(by[n].hashes for n in names if n in by)


def reinstall_packages(ctx: FixContext, lock: Lock, target: LockTarget,
                       names: Sequence[str], *, force: bool = False) -> str:
    """One command that (re)installs exactly ``names`` at their locked versions: hash-pinned
    through ``envlock export --only`` when the lock has hashes, else pinned by version
    from each package's locked index (a GPU-core lock made offline has no hashes)."""
    force_flag = " --force-reinstall" if force else ""
    if _hashed(target, names):
        return (f"{_export(ctx, lock, target, names)} && {ctx.pip} install --no-deps"
                f"{force_flag} --require-hashes -r {FIX_FILE}")
    by_index: Dict[Optional[str], List[LockedPackage]] = {}
    for p in target.packages:
        if p.name in names:
            by_index.setdefault(p.index, []).append(p)
    cmds = []
    for index, pkgs in by_index.items():
        pins = " ".join(shlex.quote(f"{p.name}=={p.version}" if p.version
                                    else f"{p.name}{p.specifier or ''}") for p in pkgs)
        cmd = f"{ctx.pip} install --no-deps{force_flag} {pins}"
        if index:
            cmd += f" --index-url {shlex.quote(index)}"
        cmds.append(cmd)
    return " && ".join(cmds)


def reinstall_lock(ctx: FixContext, lock: Lock, target: LockTarget) -> str:
    """Reinstall the whole lock target, hash-pinned, from the user's lock file."""
    if all(p.hashes for p in target.packages):
        return (f"{_export(ctx, lock, target)} && {ctx.pip} install --no-deps "
                f"--require-hashes -r {FIX_FILE}")
    return reinstall_packages(ctx, lock, target, [p.name for p in target.packages])


def uninstall_packages(ctx: FixContext, names: Sequence[str]) -> str:
    return f"{ctx.pip} uninstall -y " + " ".join(shlex.quote(n) for n in names)
