"""Fix commands built from the lock itself, so a suggested command does exactly what the
lock says: the locked version, its hashes, its index, and the user's own ``--lock PATH``.

Why a module of its own: a fix that reinstalls "the package" without its version or hash
(``pip install --force-reinstall filelock``) can make a machine worse, and a fix that drops
``--lock`` reinstalls some other lock. Every package fix verify suggests is made here.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Mapping, Optional, Sequence

from envlock.lock.model import Lock, LockedPackage, LockTarget

if TYPE_CHECKING:
    from envlock.checks.finding import Finding
    from envlock.snapshot import Library

__all__ = ["FixContext", "reinstall_packages", "reinstall_lock", "uninstall_packages",
           "loader_path_fix", "lock_first"]

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


#: more pins than this go through a file the lock writes, not onto one long command line
_MAX_PINS = 6


def _export(ctx: FixContext, lock: Lock, target: LockTarget,
            only: Optional[Sequence[str]] = None, fmt: str = "requirements") -> str:
    argv = ["envlock", "export", "--lock", ctx.lock_path]
    if len(lock.targets) > 1:
        argv += ["--target", target.name]
    argv += ["--format", fmt]
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
    pinned = [p for pkgs in by_index.values() for p in pkgs]
    if len(pinned) > _MAX_PINS and len(by_index) == 1 and all(p.version for p in pinned):
        # one index, many pins: the lock writes them (name==version) instead of a command
        # line of hundreds of characters
        (index,) = by_index
        whole = len(pinned) == len(target.packages)
        cmd = (f"{_export(ctx, lock, target, None if whole else names, fmt='constraints')} "
               f"&& {ctx.pip} install --no-deps{force_flag} -r {FIX_FILE}")
        return cmd + (f" --index-url {shlex.quote(index)}" if index else "")
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


def loader_path_fix(lib: "Library", env: Mapping[str, str]) -> str:
    """The change that stops the loader from reaching ``lib``, named by what put it on the
    loader's path: an ``LD_LIBRARY_PATH`` entry, an ``/etc/ld.so.conf.d`` file (then
    ``ldconfig``), ``LD_PRELOAD``, an ``RPATH``. "unset LD_LIBRARY_PATH" fixes only the first.

    Snapshots that did not record ``via`` are read from their environment: the directory
    on ``LD_LIBRARY_PATH``, the file in ``LD_PRELOAD``, else the two usual places."""
    path = lib.path or ""
    d = os.path.dirname(path)
    via = lib.via
    if via is None:
        ld = [x for x in env.get("LD_LIBRARY_PATH", "").replace(";", ":").split(":") if x]
        pre = [x for x in env.get("LD_PRELOAD", "").replace(":", " ").split() if x]
        if any(os.path.normpath(x) == os.path.normpath(d) for x in ld):
            via = "LD_LIBRARY_PATH"
        elif any(x == path or os.path.basename(x) == os.path.basename(path) for x in pre):
            via = "LD_PRELOAD"
    if via == "LD_LIBRARY_PATH":
        return f"unset LD_LIBRARY_PATH or drop {d} from it"
    if via == "LD_PRELOAD":
        return f"drop {path} from LD_PRELOAD"
    if via == "ld.so.cache":
        conf = lib.via_source or "the /etc/ld.so.conf.d file that lists it"
        return f"remove {d} from {conf}, then run: sudo ldconfig"
    if via == "RPATH":
        who = lib.via_source or "the library that loads it"
        return (f"{who} has {d} in its RPATH: rebuild it with RUNPATH or without that "
                f"directory (patchelf --remove-rpath)")
    if via == "default":
        return f"{d} is a default loader directory: remove the package that installed {path}"
    return (f"drop {d} from LD_LIBRARY_PATH, or remove it from the /etc/ld.so.conf.d file "
            f"that lists it and run: sudo ldconfig")


#: advisories fixed by installing the lock's torch build (their own fix names an unpinned
#: ``torch==<version>``): with a lock at hand its pinned, hashed command comes first
TORCH_BUILD_ADVISORIES = ("cpu-only-torch-on-gpu-host", "gpu-arch-dropped-from-torch-build",
                          "blackwell-torch-without-sm100-sm120",
                          "old-torch-without-ampere-hopper-kernels")
#: advisories fixed by reinstalling the whole lock
WHOLE_LOCK_ADVISORIES = ("cuda-wheel-major-mix",)


def lock_first(findings: Sequence["Finding"], ctx: FixContext, lock: Lock,
               target: LockTarget) -> List["Finding"]:
    """Findings whose first fix installs from the lock where the lock can fix them; the
    advisory's generic fix stays after it, for a machine without the lock."""
    from dataclasses import replace

    out = []
    for f in findings:
        first: Optional[str] = None
        if f.id in TORCH_BUILD_ADVISORIES and target.package("torch") is not None:
            first = reinstall_packages(ctx, lock, target, ["torch"], force=True)
        elif f.id in WHOLE_LOCK_ADVISORIES:
            first = reinstall_lock(ctx, lock, target)
        if first is not None and (not f.fix or f.fix[0] != first):
            f = replace(f, fix=(first,) + tuple(f.fix))
        out.append(f)
    return out
