"""``envlock verify`` as a function: (lock target, snapshot, matrix) -> findings.

Checks, each reported by name so CI systems see every check pass or fail:

* ``python``: the environment's Python is the lock's X.Y; when it is not, this one finding
  replaces the package and library checks (every locked wheel would be reported missing);
* ``packages``: locked packages missing or at another version; torch-family and CUDA
  wheels installed that the lock does not have;
* ``package-files`` (``--hashes``): installed files still match their RECORD hashes;
* ``libraries``: the copy of each CUDA library the loader picks has the locked version;
  system copies shadowing the wheel's; several versions of one library;
* ``cuda-majors``: nvidia-* wheels of more than one CUDA major in one environment;
* runtime only (skipped at ``--stage build``, where there is no GPU): ``driver`` (below the
  lock's minimum, or unusable), ``gpu-kernels`` (a visible GPU the installed torch has no
  kernels for), ``gpu-mix`` (different GPUs in one job), ``gpu-target`` (GPUs the lock
  target was not resolved for), ``env`` (locked variables);
* ``advisories``: known-bad combinations that apply to this machine.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.checks.advisories import advisory_findings
from envlock.knowledge.facts import cuda_majors_of, facts_from_snapshot
from envlock.checks.finding import Finding, sort_findings
from envlock.checks.libraries import library_findings, versions_agree
from envlock.checks.severity import settle_all
from envlock.checks.fixes import (FixContext, lock_first, reinstall_lock,
                                  reinstall_packages, uninstall_packages)
from envlock.errors import InputError
from envlock.kernels import coverage
from envlock.lock.model import Lock, LockTarget
from envlock.matrix.matrix import Matrix
from envlock.families import TORCH_FAMILY, is_cuda_wheel
from envlock.snapshot import Snapshot
from envlock.versions import V

__all__ = ["VerifyResult", "verify", "choose_target", "versions_agree", "CHECKS",
           "RUNTIME_CHECKS"]

CHECKS = ("python", "packages", "package-files", "libraries", "cuda-majors", "driver",
          "gpu-kernels", "gpu-mix", "gpu-target", "env", "advisories")
RUNTIME_CHECKS = ("driver", "gpu-kernels", "gpu-mix", "gpu-target", "env")

#: verify's own findings and the advisories that describe the same problem: verify keeps its
#: finding (it knows what the lock expects) and takes the advisory's sources.
SUBSUMES = {
    "cuda-major-mix": ("cuda-wheel-major-mix",),
    "driver-too-old": ("driver-too-old-for-torch-cuda",),
    "library-shadowed": ("system-cublas-shadows-wheel", "system-cudnn-shadows-wheel",
                         "system-nvjitlink-shadows-wheel"),
    "gpu-no-kernels": ("blackwell-torch-without-sm100-sm120",
                       "gpu-arch-dropped-from-torch-build",
                       "old-torch-without-ampere-hopper-kernels",
                       "cpu-only-torch-on-gpu-host"),
    "gpu-mixed-capability": ("multi-gpu-sigsegv-mixed-gpus",),
}


@dataclass(frozen=True)
class VerifyResult:
    target: str
    stage: str
    findings: Tuple[Finding, ...]
    checked: Tuple[str, ...]
    skipped: Tuple[Tuple[str, str], ...]  # (check, why)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def to_dict(self) -> Dict[str, object]:
        return {"ok": self.ok, "target": self.target, "stage": self.stage,
                "findings": [_finding_dict(f) for f in self.findings],
                "checked": list(self.checked),
                "skipped": [{"check": c, "reason": r} for c, r in self.skipped]}


def _finding_dict(f: Finding) -> Dict[str, object]:
    """A grouped finding carries its per-package details (``items``) in JSON too."""
    d: Dict[str, object] = dict(f.to_dict())
    if "items" in f.extra:
        d["items"] = list(f.extra["items"])
    return d


def names_title(names: Sequence[str], limit: int = 5) -> str:
    """``a, b, c, ...``: the first few names of a group, for a one-line title."""
    shown = ", ".join(names[:limit])
    return shown + (", ..." if len(names) > limit else "")


def choose_target(lock: Lock, snapshot: Snapshot, matrix: Matrix,
                  name: Optional[str] = None) -> LockTarget:
    """``--target``, or the one whose GPUs are this machine's, or the only one."""
    if name:
        t = lock.target(name)
        if t is None:
            raise InputError(f"the lock has no target {name!r} (it has: "
                             f"{', '.join(lock.target_names()) or 'none'})")
        return t
    if len(lock.targets) == 1:
        return lock.targets[0]
    if not lock.targets:
        raise InputError("the lock has no targets")
    models = []
    for g in snapshot.visible_gpus():
        m = matrix.find_gpu(g.name, g.memory_mib) if g.name else None
        if m is not None:
            models.append(m.id)
    if models:
        for t in lock.targets:
            if set(models) <= set(t.gpu_models):
                return t
    elif lock.target("cpu") is not None and not snapshot.gpus:
        return lock.target("cpu")  # type: ignore[return-value]
    raise InputError("cannot tell which lock target this machine is "
                     f"({', '.join(lock.target_names())}); pass --target")


def verify(lock: Lock, target: LockTarget, snapshot: Snapshot, matrix: Matrix, *,
           stage: str = "runtime", check_hashes: bool = False,
           paths: Optional[Sequence[str]] = None,
           fixes: Optional[FixContext] = None) -> VerifyResult:
    """``fixes`` says how the user called envlock (``--lock PATH``, ``--python``), so the
    suggested commands reinstall from their lock, into their environment."""
    findings: List[Finding] = []
    checked: List[str] = []
    skipped: List[Tuple[str, str]] = []
    ctx = fixes or FixContext()

    checked.append("python")
    first = _python(target, snapshot)
    if first:
        why = f"the environment's Python is not the lock's ({first[0].detail})"
        skipped += [("packages", why), ("package-files", why), ("libraries", why)]
    else:
        checked.append("packages")
        findings += _packages(lock, target, snapshot, ctx)
        if target.closure != "full":
            skipped.append(("packages-outside-lock",
                            f"the lock target holds only the {target.closure} (resolved "
                            f"offline), so packages it does not list are not judged"))
        if check_hashes:
            checked.append("package-files")
            findings += _package_files(lock, target, snapshot, paths, ctx)
        else:
            skipped.append(("package-files", "file hashes are checked only with --hashes"))
        checked.append("libraries")
        findings += library_findings(target, snapshot, lock, ctx)
    checked.append("cuda-majors")
    findings += _cuda_majors(lock, target, snapshot, ctx)
    if stage == "runtime":
        for name, fn in (("driver", _driver), ("gpu-kernels", None), ("gpu-mix", _mix),
                         ("gpu-target", _gpu_target), ("env", _env)):
            group = "driver" if name == "driver" else "gpus" if name != "env" else "env"
            if not snapshot.recorded(group):  # unknown is not "none": not judged, and said
                skipped.append((name, f"the snapshot did not record the {group} "
                                      f"({snapshot.hardware_source or 'not probed'})"))
                continue
            checked.append(name)
            if fn is None:
                findings = _torch_build(findings, _kernels(lock, target, snapshot, ctx),
                                        lock, target, ctx)
            else:
                findings += fn(target, snapshot, matrix)
        if snapshot.recorded("gpus"):
            from envlock.checks.arch_span import arch_span_findings

            checked.append("gpu-arch-span")
            findings += arch_span_findings(snapshot)
    else:
        for name in RUNTIME_CHECKS:
            skipped.append((name, "needs a GPU and its driver (--stage build)"))
    checked.append("advisories")
    judged = snapshot
    if stage != "runtime":
        # a build has no GPU and no driver, and its container's /dev/shm says nothing of
        # the one the job will run in: judge only what the image carries
        judged = replace(snapshot, driver=None, gpus=(), links=(),
                         host=replace(snapshot.host, shm_bytes=None),
                         provenance={**snapshot.provenance, "driver": "not-recorded",
                                     "gpus": "not-recorded", "links": "not-recorded"})
    facts = facts_from_snapshot(judged, matrix)
    advisories = {f.id: f for f in advisory_findings(matrix, facts)}
    merged: List[Finding] = []
    used: set = set()
    for f in findings:
        covered = [advisories[a] for a in SUBSUMES.get(f.id, ()) if a in advisories]
        if covered:
            used.update(a.id for a in covered)
            sources = tuple(dict.fromkeys(s for a in covered for s in a.sources))
            f = replace(f, sources=f.sources + sources,
                        detail=f"{f.detail} (advisory {', '.join(a.id for a in covered)})")
        merged.append(f)
    findings = lock_first(merged + [a for aid, a in advisories.items() if aid not in used],
                          ctx, lock, target)
    return VerifyResult(target=target.name, stage=stage,
                        findings=tuple(first + sort_findings(settle_all(findings))),
                        checked=tuple(checked), skipped=tuple(skipped))


# -- individual checks ---------------------------------------------------------------------


def _python(target: LockTarget, snap: Snapshot) -> List[Finding]:
    """The one finding a wrong interpreter deserves (its wheels cannot be the lock's)."""
    have = ".".join((snap.python.version or "").split(".")[:2])
    want = target.python.rstrip("t")
    if not have or not want or have == want:
        return []
    return [Finding("python-mismatch", "error", "python",
                    f"Python {have} runs here, the lock is for Python {target.python}",
                    f"installed {snap.python.version}, locked {target.python}",
                    (f"run in a Python {target.python} environment, or re-lock for this "
                     f"one: envlock resolve --python {have} ...",), subject="python")]


def _packages(lock: Lock, target: LockTarget, snap: Snapshot, ctx: FixContext) -> List[Finding]:
    """One finding per cause: all missing packages, all other versions, all unexpected
    wheels; each with one command that fixes exactly that group."""
    out: List[Finding] = []
    installed = {str(canonicalize_name(k)): v for k, v in snap.packages.items()}
    locked = {p.name for p in target.packages}
    missing: List[Dict[str, str]] = []
    differ: List[Dict[str, str]] = []
    for p in target.packages:
        have = installed.get(p.name)
        want = p.version or (p.specifier or "")
        if have is None:
            missing.append({"name": p.name, "locked": want})
            continue
        same = _same_version(have, p.version) if p.version else _in_spec(have, p.specifier or "")
        if not same:
            differ.append({"name": p.name, "installed": have, "locked": want})
    whole = "or reinstall the whole lock: " + reinstall_lock(ctx, lock, target)
    if missing:
        names = [m["name"] for m in missing]
        n = len(names)
        title = (f"{names[0]} is not installed" if n == 1 else
                 f"{n} locked packages are missing: {names_title(names)}")
        # nothing of the lock installed: installing the lock is the one fix
        fixes = ((reinstall_lock(ctx, lock, target),) if n == len(target.packages) else
                 (reinstall_packages(ctx, lock, target, names), whole))
        out.append(Finding("package-missing", "error", "packages", title,
                           "missing: " + ", ".join(f"{m['name']} {m['locked']}" for m in missing),
                           fixes,
                           subject=names[0] if n == 1 else None,
                           extra={"items": missing}))
    if differ:
        names = [d["name"] for d in differ]
        n = len(names)
        d0 = differ[0]
        title = (f"{d0['name']} {d0['installed']} is installed, the lock has {d0['locked']}"
                 if n == 1 else f"{n} packages differ from the lock: " + names_title(
                     [f"{d['name']} {d['installed']} (lock {d['locked']})" for d in differ], 3))
        out.append(Finding("package-version", "error", "packages", title,
                           "; ".join(f"{d['name']}: installed {d['installed']}, locked "
                                     f"{d['locked']}" for d in differ),
                           (reinstall_packages(ctx, lock, target, names), whole),
                           subject=names[0] if n == 1 else None,
                           extra={"items": differ}))
    if target.closure == "full":  # a partial lock cannot say what is unexpected
        extra_pkgs = [{"name": name, "installed": version}
                      for name, version in sorted(installed.items())
                      if name not in locked and (name in TORCH_FAMILY or is_cuda_wheel(name))]
        if extra_pkgs:
            names = [e["name"] for e in extra_pkgs]
            title = (f"{names[0]} {extra_pkgs[0]['installed']} is installed but not in the lock"
                     if len(names) == 1 else
                     f"{len(names)} torch/CUDA wheels are installed but not in the lock: "
                     f"{names_title(names)}")
            out.append(Finding("package-unexpected", "warning", "packages", title,
                               "torch-family and CUDA wheels outside the lock change which "
                               "libraries load",
                               (uninstall_packages(ctx, names),),
                               subject=names[0] if len(names) == 1 else None,
                               extra={"items": extra_pkgs}))
    return out


def _same_version(a: str, b: str) -> bool:
    try:
        return Version(a) == Version(b)
    except InvalidVersion:
        return a == b


def _in_spec(version: str, spec: str) -> bool:
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except (InvalidSpecifier, InvalidVersion):
        return False


def _package_files(lock: Lock, target: LockTarget, snap: Snapshot,
                   paths: Optional[Sequence[str]], ctx: FixContext) -> List[Finding]:
    """Installed files of locked packages against their RECORD hashes; one finding for all
    changed packages, fixed by reinstalling their locked versions, hash-pinned."""
    from importlib import metadata

    changed: List[Tuple[str, List[str]]] = []
    want = {p.name for p in target.packages}
    dists = metadata.distributions(path=list(paths)) if paths else metadata.distributions()
    for dist in dists:
        name = canonicalize_name(dist.metadata["Name"] or "")
        if name not in want:
            continue
        want.discard(name)
        bad = []
        for f in dist.files or ():
            if not f.hash or f.hash.mode != "sha256":
                continue
            p = f.locate()
            try:
                with open(p, "rb") as fh:
                    digest = hashlib.sha256()
                    for chunk in iter(lambda: fh.read(1 << 20), b""):
                        digest.update(chunk)
            except OSError:
                bad.append(f"{f} (missing)")
                continue
            b64 = base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()
            if b64 != f.hash.value:
                bad.append(str(f))
        if bad:
            changed.append((str(name), bad))
    if not changed:
        return []
    names = [n for n, _ in changed]
    title = (f"{names[0]}: {len(changed[0][1])} installed file(s) differ from its RECORD"
             if len(changed) == 1 else
             f"{len(changed)} packages have files that differ from their RECORD: "
             f"{names_title(names)}")
    detail = "; ".join(f"{n}: " + ", ".join(bad[:3]) + (" ..." if len(bad) > 3 else "")
                       for n, bad in changed)
    items = [{"name": n, "files": bad} for n, bad in changed]
    return [Finding("package-files", "error", "packages", title, detail,
                    (reinstall_packages(ctx, lock, target, names, force=True),),
                    subject=names[0] if len(names) == 1 else None, extra={"items": items})]


def _cuda_majors(lock: Lock, target: LockTarget, snap: Snapshot,
                 ctx: FixContext) -> List[Finding]:
    majors = cuda_majors_of(snap.packages)
    if len(majors) < 2:
        return []
    names = sorted(n for n in snap.packages if is_cuda_wheel(n))
    import re

    major = (target.torch.cuda or "").split(".")[0] if target.torch is not None else ""
    locked = {p.name for p in target.packages}
    # the wheels of the other CUDA major: by their -cuNN suffix when torch's is known
    stray = [n for n in names
             if (m := re.search(r"-cu(\d+)$", n)) and m.group(1) != major] if major else \
        [n for n in names if canonicalize_name(n) not in locked]
    fix = (f"{uninstall_packages(ctx, stray)} && {reinstall_lock(ctx, lock, target)}"
           if stray else
           "pip uninstall the wheels of the CUDA major torch does not use, then "
           "reinstall the lock: " + reinstall_lock(ctx, lock, target))
    return [Finding("cuda-major-mix", "error", "packages",
                    f"nvidia-* wheels of CUDA {', '.join(map(str, majors))} in one environment",
                    "installed: " + ", ".join(names[:8]) + (" ..." if len(names) > 8 else ""),
                    (fix,), subject="nvidia")]


def _driver(target: LockTarget, snap: Snapshot, matrix: Matrix) -> List[Finding]:
    d = snap.driver
    if d is None or not d.version:
        err = d.error if d is not None and d.error else "no NVIDIA driver found"
        if target.torch is not None and target.torch.variant == "cpu":
            return []
        return [Finding("driver-unavailable", "error", "driver",
                        "the NVIDIA driver cannot be used", f"NVML: {err}",
                        ("check `nvidia-smi`; reboot after a driver upgrade; in containers "
                         "run with --gpus all",), subject="driver")]
    out = []
    if target.driver_min and V(d.version) < V(target.driver_min):
        why = "; ".join(target.driver_min_reasons)
        out.append(Finding("driver-too-old", "error", "driver",
                           f"driver {d.version} is older than the lock's minimum "
                           f"{target.driver_min}", why,
                           (f"upgrade the NVIDIA driver to >= {target.driver_min}",
                            "or resolve for this driver: envlock resolve --driver "
                            f"{d.version} ..."), subject="driver"))
    return out


def _locked_torch(target: LockTarget) -> str:
    """``2.1.2+cu121``: the locked torch with its build, even when PyPI's name has none."""
    t = target.torch
    if t is None:
        return "?"
    v = t.installed_version or t.version
    return v if "+" in v or not t.variant else f"{v}+{t.variant}"


def _kernels(lock: Lock, target: LockTarget, snap: Snapshot,
             ctx: FixContext) -> List[Finding]:
    """One finding for every visible GPU the installed torch has no kernels for (one
    cause: the torch build), fixed from the lock when the lock's torch has them."""
    arch: Optional[Sequence[str]] = None
    if snap.torch is not None and snap.torch.arch_list is not None:
        arch = snap.torch.arch_list  # what is installed, even a CPU build's empty list
    elif target.torch is not None and target.torch.arch_list is not None:
        arch = tuple(target.torch.arch_list) + tuple(target.torch.ptx or ())
    if arch is None or (snap.torch is None and "torch" not in snap.packages):
        return []
    bare = [g for g in snap.visible_gpus()
            if g.compute_capability and not coverage(arch, g.compute_capability).ok]
    if not bare:
        return []
    sms = list(dict.fromkeys(f"{g.name} (sm_{(g.compute_capability or '').replace('.', '')})"
                             for g in bare))
    built = f"compiled for: {' '.join(arch)}" if arch else \
        "the installed torch is a CPU-only build"
    locked_arch = (tuple(target.torch.arch_list or ()) + tuple(target.torch.ptx or ())
                   if target.torch is not None and target.torch.arch_list is not None else None)
    lock_has_them = locked_arch is not None and all(
        coverage(locked_arch, g.compute_capability or "").ok for g in bare)
    if lock_has_them and target.package("torch") is not None:
        fix: Tuple[str, ...] = (reinstall_packages(ctx, lock, target, ["torch"], force=True),
                                "or reinstall the whole lock: " +
                                reinstall_lock(ctx, lock, target))
    else:
        names = " ".join(f"--gpu '{_short(n)}'" for n in
                         dict.fromkeys(g.name or "" for g in bare))
        fix = (f"envlock resolve {names} and install that lock",)
    if len(bare) == 1:
        title = f"the installed torch has no kernels for {sms[0]}"
    else:
        what = sms[0] if len(sms) == 1 else ", ".join(sms)
        title = f"the installed torch has no kernels for {len(bare)} GPUs: {what}"
    return [Finding("gpu-no-kernels", "error", "gpu-arch", title, built, fix,
                    subject=str(bare[0].index) if len(bare) == 1 else "gpus",
                    extra={"items": [{"gpu": g.index, "name": g.name,
                                      "compute_capability": g.compute_capability}
                                     for g in bare],
                           "lock_has_kernels": lock_has_them})]


def _torch_build(findings: List[Finding], kernels: List[Finding], lock: Lock,
                 target: LockTarget, ctx: FixContext) -> List[Finding]:
    """A torch at another version than the lock's and GPUs without kernels are one cause
    when the lock's torch has those kernels: one finding, the lock's install first."""
    if not kernels:
        return findings
    k = kernels[0]
    pv = next((f for f in findings if f.id == "package-version"
               and any(i["name"] == "torch" for i in f.extra.get("items", ()))), None)
    if pv is None or not k.extra.get("lock_has_kernels"):
        return findings + kernels
    item = next(i for i in pv.extra["items"] if i["name"] == "torch")
    n = len(k.extra.get("items", ()))
    title = (f"torch {item['installed']} installed, the lock has {_locked_torch(target)}; "
             f"{n} GPU{'s' if n != 1 else ''} without kernels")
    merged = replace(k, title=title,
                     detail=f"{k.detail}; the lock's torch {_locked_torch(target)} has "
                            f"kernels for {'it' if n == 1 else 'them'}",
                     extra={**k.extra, "torch": item})
    rest = [i for i in pv.extra["items"] if i["name"] != "torch"]
    out = [f for f in findings if f is not pv]
    if rest:  # the other packages are their own cause
        names = [i["name"] for i in rest]
        out.append(replace(pv, title=(f"{rest[0]['name']} {rest[0]['installed']} is installed, "
                                      f"the lock has {rest[0]['locked']}" if len(rest) == 1 else
                                      f"{len(rest)} packages differ from the lock: " +
                                      names_title([f"{i['name']} {i['installed']} (lock "
                                                   f"{i['locked']})" for i in rest], 3)),
                           detail="; ".join(f"{i['name']}: installed {i['installed']}, locked "
                                            f"{i['locked']}" for i in rest),
                           fix=(reinstall_packages(ctx, lock, target, names),) + pv.fix[1:],
                           subject=names[0] if len(names) == 1 else None,
                           extra={"items": rest}))
    return out + [merged]


def _mix(target: LockTarget, snap: Snapshot, matrix: Matrix) -> List[Finding]:
    gpus = snap.visible_gpus()
    ccs = {g.compute_capability for g in gpus if g.compute_capability}
    names = {g.name for g in gpus if g.name}
    if len(ccs) > 1:
        return [Finding("gpu-mixed-capability", "error", "gpu-arch",
                        f"GPUs of {len(ccs)} compute capabilities in one job",
                        ", ".join(f"{g.index}: {g.name} ({g.compute_capability})" for g in gpus),
                        ("restrict the job to identical GPUs: export CUDA_DEVICE_ORDER=PCI_BUS_ID "
                         "and CUDA_VISIBLE_DEVICES=<same-model indices>",), subject="gpus")]
    if len(names) > 1:
        return [Finding("gpu-mixed-model", "warning", "gpu-arch",
                        f"{len(names)} different GPU models in one job", ", ".join(sorted(names)),
                        ("export CUDA_DEVICE_ORDER=PCI_BUS_ID and select identical GPUs",),
                        subject="gpus")]
    return []


def _gpu_target(target: LockTarget, snap: Snapshot, matrix: Matrix) -> List[Finding]:
    """One finding naming every GPU model here that the lock target was not resolved for."""
    if not target.gpu_models:
        return []
    outside: Dict[str, List[int]] = {}
    short: Dict[str, str] = {}
    for g in snap.visible_gpus():
        m = matrix.find_gpu(g.name, g.memory_mib) if g.name else None
        if m is None or m.id in target.gpu_models:
            continue
        outside.setdefault(g.name or m.name, []).append(g.index)
        short[g.name or m.name] = _short(m.name)
    if not outside:
        return []
    names = list(outside)
    which = ", ".join(f"{n} (GPU{'s' if len(ix) > 1 else ''} {_indices(ix)})"
                      for n, ix in outside.items())
    verb = "is not a GPU" if len(names) == 1 else "are not GPUs"
    gpus = " ".join(f"--gpu '{short[n]}'" for n in names)
    return [Finding("gpu-not-in-lock", "warning", "gpu-arch",
                    f"{which} {verb} the lock target {target.name} was resolved for",
                    f"target {target.name}: {', '.join(target.gpus)}",
                    (f"envlock resolve {gpus} (or --together) to lock for "
                     f"{'it' if len(names) == 1 else 'them'}",),
                    subject=str(outside[names[0]][0]) if len(names) == 1 else "gpus")]


def _indices(ix: Sequence[int]) -> str:
    """``4-7`` for a run, ``0, 2`` otherwise."""
    if len(ix) > 2 and list(ix) == list(range(ix[0], ix[-1] + 1)):
        return f"{ix[0]}-{ix[-1]}"
    return ", ".join(map(str, ix))


def _short(name: str) -> str:
    return name[len("NVIDIA "):] if name.startswith("NVIDIA ") else name


def _env(target: LockTarget, snap: Snapshot, matrix: Matrix) -> List[Finding]:
    out = []
    for k, want in sorted(target.env.items()):
        have = snap.env.get(k)
        if have != want:
            out.append(Finding("env-mismatch", "error", "config",
                               f"{k} is {have!r}, the lock requires {want!r}",
                               "locked environment variables keep known hazards away",
                               (f"export {k}={want}",), subject=k))
    return out
