"""verify's ``libraries`` check: which copy of each CUDA library the loader picks, against
the lock.

Sonames decide what can stand in for what (``libcudart.so.13`` never answers a request for
``libcudart.so.12``), so only a copy with the wheel's soname can shadow it; a shadow is
fixed where it comes from (see :func:`envlock.checks.fixes.loader_path_fix`). Findings are
one per cause: every shadowed library in one finding, libraries with one fix in one.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Tuple

from envlock.checks.finding import Finding
from envlock.checks.fixes import FixContext, loader_path_fix, reinstall_packages
from envlock.lock.model import Lock, LockTarget
from envlock.snapshot import Snapshot

__all__ = ["library_findings", "versions_agree", "LOCK_TO_LIBS"]

#: the lock's library keys and the library names each covers
LOCK_TO_LIBS = {"cublas": ("cublas", "cublasLt"), "cudnn": ("cudnn",), "nccl": ("nccl",),
                "cudart": ("cudart",), "nvjitlink": ("nvjitlink",)}


def versions_agree(a: str, b: str) -> bool:
    """Equal on every component both spell out: ``9.1.0`` agrees with ``9.1.0.70``.

    >>> versions_agree("9.1.0", "9.1.0.70"), versions_agree("12.1", "12.4.5")
    (True, False)
    """
    pa = a.split("+")[0].split(".")
    pb = b.split("+")[0].split(".")
    n = min(len(pa), len(pb))
    if n == 0:
        return False
    try:
        return [int(x) for x in pa[:n]] == [int(x) for x in pb[:n]]
    except ValueError:
        return pa[:n] == pb[:n]


def _major(soname: Optional[str]) -> Optional[str]:
    return soname.rsplit(".so.", 1)[1].split(".")[0] if soname and ".so." in soname else None


def library_findings(target: LockTarget, snap: Snapshot, lock: Optional[Lock] = None,
                     ctx: Optional[FixContext] = None) -> List[Finding]:
    """Per cause: system copies loading instead of the wheels' (one finding, whatever the
    number of libraries, since one search-path entry is the cause), other versions
    loading, several versions of one soname on the search path.

    Sonames decide what can stand in for what: a ``libcudart.so.13`` never satisfies a
    request for ``libcudart.so.12``, so a system copy with another soname than the wheel's
    (or than the lock's major) is no shadow and no version drift, only a note."""
    out: List[Finding] = []
    by_name: Dict[str, list] = {}
    for lib in snap.libraries:
        by_name.setdefault(lib.name, []).append(lib)
    shadowed: List[Tuple[str, object, object, Optional[str]]] = []  # (lib, system, wheel, want)
    bystanders: List[Tuple[str, object, Optional[str]]] = []  # (lib, system copy, the soname used)
    for key, names in LOCK_TO_LIBS.items():
        want = target.libraries.get(key)
        for lname in names:
            copies = by_name.get(lname, [])
            sel = next((c for c in copies if c.selected), None)
            wheel = [c for c in copies if c.owner]
            wheel_sonames = {c.soname_key for c in wheel if c.soname_key}
            want_major = want.split(".")[0] if want else None
            other_soname = sel is not None and sel.owner is None and (
                (wheel_sonames and sel.soname_key not in wheel_sonames) or
                (not wheel_sonames and want_major and _major(sel.soname_key)
                 and _major(sel.soname_key) != want_major))
            if other_soname:
                used = sorted(wheel_sonames)[0] if wheel_sonames else None
                bystanders.append((lname, sel, used))
            elif sel is not None and sel.owner is None and wheel:
                shadowed.append((lname, sel, wheel[0], want))
            elif want and sel is not None and sel.version and not versions_agree(sel.version,
                                                                                 want):
                where = sel.owner or "a system copy"
                fix: Tuple[str, ...] = ()
                if sel.owner is None:
                    fix = (loader_path_fix(sel, snap.env) + " so the wheel's copy loads",)
                elif lock is not None and target.package(sel.owner) is not None:
                    fix = (reinstall_packages(ctx or FixContext(), lock, target, [sel.owner],
                                              force=True),)  # the lock's pin and hashes
                else:
                    fix = (f"pip install --no-deps '{sel.owner}=={want}'",)
                out.append(Finding("library-version", "error", "library",
                                   f"lib{lname} {sel.version} would load, the lock expects {want}",
                                   f"the loader picks {sel.path} ({where})", fix,
                                   subject=lname))
            if sel is not None and sel.owner is None and wheel and not other_soname:
                continue  # the shadow finding says it
            by_soname: Dict[Optional[str], list] = {}
            for c in copies:
                by_soname.setdefault(c.soname_key, []).append(c)
            for same in by_soname.values():
                versions = {c.version for c in same if c.version}
                if len(versions) > 1:
                    out.append(Finding("library-duplicate", "warning", "library",
                                       f"{len(same)} copies of lib{lname} with "
                                       f"{len(versions)} versions on the search path",
                                       "; ".join(f"{c.path} {c.version or '?'}"
                                                 for c in same[:4]),
                                       ("keep one copy: remove stale CUDA installs from "
                                        "LD_LIBRARY_PATH and uninstall unused nvidia-* wheels",),
                                       subject=lname))
                    break
    out = _one_per_fix(out)
    if shadowed:
        libs = ", ".join(f"lib{n}" for n, *_ in shadowed)
        have = {getattr(s, "version", None) or "unknown version" for _, s, _, _ in shadowed}
        wants = {w for *_, w in shadowed if w}
        lock_says = f", the lock has {', '.join(sorted(wants))}" if wants else ""
        title = (f"system {libs} {', '.join(sorted(have))} load"
                 f"{'s' if len(shadowed) == 1 else ''} instead of the wheel's{lock_says}")
        detail = "; ".join(f"{getattr(s, 'path', '')} ({getattr(s, 'version', None) or '?'}) "
                           f"loads before {getattr(w, 'path', '')} ({getattr(w, 'owner', '')} "
                           f"{getattr(w, 'version', None) or ''}".rstrip() + ")"
                           for _, s, w, _ in shadowed)
        items = [{"name": f"lib{n}", "loads": getattr(s, "path", ""),
                  "version": getattr(s, "version", None) or "unknown",
                  "instead_of": getattr(w, "path", ""), "locked": want or "unknown",
                  "via": getattr(s, "via", None) or "unknown"}
                 for n, s, w, want in shadowed]
        fixes = tuple(dict.fromkeys(loader_path_fix(s, snap.env)  # type: ignore[arg-type]
                                    for _, s, _, _ in shadowed))
        out.append(Finding("library-shadowed", "error", "library", title, detail, fixes,
                           subject=shadowed[0][0] if len(shadowed) == 1 else None,
                           extra={"items": items}))
    if bystanders:
        libs = ", ".join(f"{getattr(s, 'soname_key', None) or 'lib' + n}"
                         f" {getattr(s, 'version', None) or ''}".rstrip()
                         for n, s, _ in bystanders)
        detail = "; ".join(f"{getattr(s, 'path', '')} is another soname than "
                           f"{used or 'the lock asks for'}: the loader never gives it for "
                           f"{used or 'that'}" for _, s, used in bystanders)
        out.append(Finding("library-other-soname", "info", "library",
                           f"system {libs} on the loader's path: another soname than the "
                           f"lock's, so it cannot stand in for it", detail, (),
                           subject=bystanders[0][0] if len(bystanders) == 1 else None))
    return out


def _one_per_fix(findings: List[Finding]) -> List[Finding]:
    """``library-version`` findings with the same fix (cuBLAS and cuBLASLt of one wheel,
    two libraries from one directory) are one cause: one finding naming them all."""
    groups: Dict[Tuple[str, ...], List[Finding]] = {}
    for f in findings:
        if f.id == "library-version":
            groups.setdefault(f.fix, []).append(f)
    out: List[Finding] = []
    for f in findings:
        group = groups.get(f.fix) if f.id == "library-version" else None
        if group is None or len(group) == 1:
            out.append(f)
            continue
        if f is not group[0]:
            continue
        libs = ", ".join(f"lib{g.subject}" for g in group)
        have = ", ".join(sorted({g.title.split(" ")[1] for g in group}))
        want = sorted({g.title.rsplit(" ", 1)[-1] for g in group})
        out.append(replace(f, title=f"{libs} {have} would load, the lock expects "
                                    f"{', '.join(want)}",
                           detail="; ".join(g.detail for g in group), subject=None,
                           extra={"items": [{"name": f"lib{g.subject}"} for g in group]}))
    return out
