"""The Docker build context of ``envlock export --format dockerfile -o DIR``.

The image installs envlock without asking any index for it by name: the context carries a
wheel of the running envlock (:func:`envlock.distribution.build_wheel`), a one-line
requirements file that pins that wheel by sha256, and ``envlock-requirements.txt``, which
pins envlock's own dependencies by version and by the sha256 of every wheel the configured
index offers for that version. The locked environment's requirements are the ordinary
``requirements`` export of the lock.

This is the one exporter step that reads the network (the index pages for envlock's
dependencies) and the running installation; :mod:`envlock.cli.export_cmd` calls it and
writes the files, the Dockerfile itself stays a pure rendering.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as md
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from envlock.errors import IndexError_, InputError, UsageError
from envlock.lock.model import LockTarget

__all__ = ["ContextFile", "EnvlockSource", "ENVLOCK_REQUIREMENTS", "ENVLOCK_WHEEL_REQ",
           "REQUIREMENTS", "LOCK", "target_markers", "envlock_dependency_pins",
           "render_envlock_requirements", "envlock_source", "check_sha256"]

#: file names inside the build context
ENVLOCK_REQUIREMENTS = "envlock-requirements.txt"
ENVLOCK_WHEEL_REQ = "envlock-wheel.txt"
REQUIREMENTS = "requirements.txt"
LOCK = "envlock.lock"

_SHA256 = re.compile(r"^[0-9a-f]{64}$")


@dataclass(frozen=True)
class ContextFile:
    name: str
    data: bytes


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    #: sha256 of every wheel of this version on ``index``
    hashes: Tuple[str, ...]
    index: str


@dataclass(frozen=True)
class EnvlockSource:
    """Where the image gets envlock: a wheel in the context, or a URL, pinned by sha256."""

    #: the requirement line of ``envlock-wheel.txt`` (without the hash)
    requirement: str
    sha256: str
    #: the wheel file to put in the context, or None for a URL
    wheel: Optional[ContextFile]


def check_sha256(value: str, what: str) -> str:
    v = value.strip().lower()
    if v.startswith("sha256:"):
        v = v[len("sha256:"):]
    if not _SHA256.match(v):
        raise UsageError(f"{what} {value!r} is not a sha256 (64 hexadecimal digits)")
    return v


def envlock_source(envlock_from: Optional[str], envlock_sha256: Optional[str],
                   source_date_epoch: Optional[int] = None) -> EnvlockSource:
    """The wheel of the running envlock, or the user's ``--envlock-from`` checked against
    ``--envlock-sha256`` (a local file is read and must match; a URL is checked by pip)."""
    from envlock.distribution import DISTRIBUTION, build_wheel

    if envlock_from is None:
        if envlock_sha256 is not None:
            raise UsageError("--envlock-sha256 needs --envlock-from")
        name, data = build_wheel(source_date_epoch=source_date_epoch)
        return EnvlockSource(f"./{name}", hashlib.sha256(data).hexdigest(),
                             ContextFile(name, data))
    if envlock_sha256 is None:
        raise UsageError("--envlock-from needs --envlock-sha256 (the wheel's sha256): "
                         "nothing unpinned goes into the image")
    want = check_sha256(envlock_sha256, "--envlock-sha256")
    if re.match(r"^https?://", envlock_from):
        if envlock_from.startswith("http://"):
            raise UsageError(f"--envlock-from {envlock_from}: use https (the hash still "
                             f"protects the content, but not who can see the download)")
        return EnvlockSource(f"{DISTRIBUTION} @ {envlock_from}", want, None)
    from pathlib import Path

    path = Path(envlock_from)
    basename = path.name
    if not (basename.startswith(DISTRIBUTION.replace("-", "_") + "-")
            and basename.endswith(".whl")):
        raise UsageError(f"--envlock-from {envlock_from}: not a wheel of {DISTRIBUTION} "
                         f"(expected {DISTRIBUTION.replace('-', '_')}-<version>-*.whl)")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read --envlock-from {envlock_from}: {exc.strerror}") from None
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise InputError(f"--envlock-from {envlock_from} has sha256 {got}, not the "
                         f"--envlock-sha256 {want}")
    return EnvlockSource(f"./{basename}", want, ContextFile(basename, data))


def target_markers(t: LockTarget) -> Dict[str, str]:
    """PEP 508 marker values of the image the target runs in (CPython on Linux)."""
    py = t.python.rstrip("t")
    machine = "aarch64" if t.platform == "linux_aarch64" else "x86_64"
    return {"python_version": ".".join(py.split(".")[:2]),
            "python_full_version": py if py.count(".") >= 2 else py + ".0",
            "implementation_name": "cpython", "platform_python_implementation": "CPython",
            "os_name": "posix", "sys_platform": "linux", "platform_system": "Linux",
            "platform_machine": machine, "extra": ""}


def _applies(req: Requirement, markers: Dict[str, str]) -> bool:
    return req.marker is None or Marker(str(req.marker)).evaluate(markers)


def _installed(name: str) -> Optional[md.Distribution]:
    try:
        return md.distribution(name)
    except md.PackageNotFoundError:
        return None


def envlock_dependency_pins(t: LockTarget, client: object, indexes: Sequence[str]
                            ) -> List[Pin]:
    """envlock's dependency closure for the target's Python, pinned.

    A dependency takes the version installed next to the running envlock (what the tests
    and the user ran), else the newest matching version on the index; every pin carries
    the hashes of all wheels of that version on the first index that has it (pip chooses
    the wheel for the image and must find its hash). No sdists: building one would fetch
    unpinned build tools.
    """
    from envlock.distribution import REQUIRES

    markers = target_markers(t)
    queue: List[Requirement] = [Requirement(r) for r in REQUIRES]
    pins: Dict[str, Pin] = {}
    while queue:
        req = queue.pop(0)
        if not _applies(req, markers):
            continue
        name = canonicalize_name(req.name)
        if name in pins:
            if not req.specifier.contains(pins[name].version, prereleases=True):
                raise UsageError(f"envlock's dependencies disagree on {name}: "
                                 f"{pins[name].version} does not satisfy {req}")
            continue
        dist = _installed(name)
        version = dist.version if dist is not None else None
        if version is not None and not req.specifier.contains(version, prereleases=True):
            version = None
        pin, requires = _pin_from_index(client, indexes, name, req, version)
        pins[name] = pin
        if dist is not None and version is not None:
            requires = list(dist.requires or [])
        queue.extend(Requirement(r) for r in requires)
    return [pins[n] for n in sorted(pins)]


def _pin_from_index(client: object, indexes: Sequence[str], name: str, req: Requirement,
                    version: Optional[str]) -> Tuple[Pin, List[str]]:
    from envlock.index.client import IndexClient

    assert isinstance(client, IndexClient)
    for index in indexes:
        page = client.page(index, name)
        if page is None:
            continue
        # PEP 825 variant wheels are judged against a target only by the resolver
        wheels = [d for d in page.dists if d.is_wheel and d.yanked is None and d.sha256
                  and d.variant is None]
        if version is None:
            versions = sorted({d.version for d in wheels
                               if req.specifier.contains(d.version, prereleases=False)})
            if not versions:
                continue
            chosen = versions[-1]
        else:
            try:
                chosen = Version(version)
            except InvalidVersion:
                continue
        files = sorted((d for d in wheels if d.version == chosen), key=lambda d: d.filename)
        if not files:
            continue
        requires: List[str] = []
        if version is None:
            requires = list(client.metadata(files[0]).requires_dist)
        hashes = tuple(sorted({d.sha256 for d in files if d.sha256}))
        return Pin(name, str(chosen), hashes, index), requires
    where = ", ".join(indexes) or "no index configured"
    want = f"{name}=={version}" if version else str(req)
    raise IndexError_(f"envlock's own dependency {want} has no wheel with a sha256 on "
                      f"{where}; the image could not install it hash-pinned")


def render_envlock_requirements(t: LockTarget, pins: Sequence[Pin], envlock_version: str
                                ) -> str:
    """``envlock-requirements.txt``: envlock's dependencies, version- and hash-pinned."""
    from envlock.index.config import redact

    indexes: List[str] = []
    for p in pins:
        if p.index not in indexes:
            indexes.append(p.index)
    lines = [
        f"# envlock's own dependencies (envlock-gpu {envlock_version}, Python {t.python}, "
        f"{t.platform}), generated by envlock {envlock_version}. Do not edit it by hand.",
        "# Installed into envlock's own virtual environment, never into the locked one:",
        f"#   pip install --no-deps --require-hashes --only-binary :all: -r "
        f"{ENVLOCK_REQUIREMENTS}",
        "--only-binary :all:",
    ]
    for i, ix in enumerate(indexes):
        lines.append(f"{'--index-url' if i == 0 else '--extra-index-url'} {redact(ix)}")
    for p in pins:
        lines.append(f"{p.name}=={p.version} \\")
        lines += [f"    --hash=sha256:{h}" + (" \\" if j < len(p.hashes) - 1 else "")
                  for j, h in enumerate(p.hashes)]
    return "\n".join(lines) + "\n"


def render_envlock_wheel_requirement(source: EnvlockSource) -> str:
    """``envlock-wheel.txt``: envlock itself, pinned by sha256 (installed with
    ``--no-index``, so its name is never looked up)."""
    return (f"# envlock itself, pinned by sha256; installed with pip --no-index from the "
            f"build context\n{source.requirement} --hash=sha256:{source.sha256}\n")
