"""What an sdist's dependencies are without building it: declared statically in
``pyproject.toml`` (PEP 621), or a build of the same bytes that already failed.

Many sdists carry a ``PKG-INFO`` that cannot be trusted for ``Requires-Dist`` (Metadata-Version
before 2.2, PEP 643) although their ``pyproject.toml`` states the dependencies as plain data:
numpy 1.26.4's meson-python sdist is one. PEP 621 makes a ``[project]`` key that is not
listed in ``dynamic`` *exact*: a backend must not change it, and a key that is absent and not
dynamic means empty. So when ``dependencies``, ``optional-dependencies`` and
``requires-python`` are all static, the core metadata a build would produce says exactly
what the table says, and running the backend (numpy's meson build: about 40 s, and it fails
outright on a Python it does not support) gains nothing. pip and uv read it the same way.

Anything unclear (no ``[project]`` table, a key listed in ``dynamic``, a value of the wrong
type, an unreadable file) returns None: the caller then builds, as before.
"""

from __future__ import annotations

import io
import tarfile
import zipfile
from pathlib import Path
from typing import Any, Callable, List, Optional

__all__ = ["static_metadata", "metadata_from_project", "remember_failure", "failed_build"]

#: The [project] keys that decide the fields a resolver reads.
_NEEDED = ("dependencies", "optional-dependencies", "requires-python")


def static_metadata(data: bytes, filename: str, project: str) -> Optional[bytes]:
    """Core metadata (``METADATA`` bytes) from the sdist's top-level ``pyproject.toml`` when
    its dependencies are static; None when they are not, or cannot be read for sure."""
    text = _pyproject_text(data, filename)
    if text is None:
        return None
    from envlock import _toml

    try:
        doc = _toml.loads(text)
    except Exception:  # noqa: BLE001 - a file we cannot read is the build's to judge
        return None
    return metadata_from_project(doc.get("project"), project)


def metadata_from_project(table: Any, project: str) -> Optional[bytes]:
    """``METADATA`` for a PEP 621 ``[project]`` table whose dependency keys are static.

    >>> print(metadata_from_project({"name": "a", "version": "1", "dependencies": ["b>=2"],
    ...       "optional-dependencies": {"x": ["c; os_name == 'nt'"]}}, "a").decode())
    Metadata-Version: 2.1
    Name: a
    Version: 1
    Requires-Dist: b>=2
    Provides-Extra: x
    Requires-Dist: c; (os_name == 'nt') and extra == "x"
    <BLANKLINE>
    <BLANKLINE>
    >>> metadata_from_project({"name": "a", "dynamic": ["dependencies"]}, "a") is None
    True
    """
    if not isinstance(table, dict) or not isinstance(table.get("name"), str):
        return None
    dynamic = table.get("dynamic", [])
    if not isinstance(dynamic, list) or not all(isinstance(d, str) for d in dynamic):
        return None
    if {d.strip().lower() for d in dynamic} & set(_NEEDED):
        return None
    deps = table.get("dependencies", [])
    extras = table.get("optional-dependencies", {})
    python = table.get("requires-python")
    if not _strings(deps) or not isinstance(extras, dict) or \
            not all(isinstance(k, str) and _strings(v) for k, v in extras.items()) or \
            (python is not None and not isinstance(python, str)):
        return None
    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.utils import canonicalize_name

    try:
        for r in [*deps, *(r for v in extras.values() for r in v)]:
            Requirement(r)
        if python:
            SpecifierSet(python)
    except (InvalidRequirement, InvalidSpecifier):
        return None  # the backend would refuse it too; let the build say how
    version = table.get("version")
    lines = ["Metadata-Version: 2.1", f"Name: {table['name'] or project}"]
    if isinstance(version, str):
        lines.append(f"Version: {version}")
    if python:
        lines.append(f"Requires-Python: {python}")
    lines += [f"Requires-Dist: {_one_line(r)}" for r in deps]
    for extra, reqs in extras.items():
        name = str(canonicalize_name(extra))
        lines.append(f"Provides-Extra: {name}")
        for r in reqs:
            lines.append(f"Requires-Dist: {_with_extra(r, name)}")
    return ("\n".join(lines) + "\n\n").encode("utf-8")


def _strings(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _with_extra(text: str, extra: str) -> str:
    """``req; marker`` -> ``req; (marker) and extra == "x"`` (as a backend writes it)."""
    req, sep, marker = _one_line(text).partition(";")
    if sep and marker.strip():
        return f"{req.strip()}; ({marker.strip()}) and extra == \"{extra}\""
    return f"{req.strip()}; extra == \"{extra}\""


def _pyproject_text(data: bytes, filename: str) -> Optional[str]:
    """The top-level ``pyproject.toml`` of an sdist archive (one directory deep), or None."""
    try:
        if filename.endswith(".zip"):
            with zipfile.ZipFile(io.BytesIO(data)) as zf:
                names: List[str] = [n for n in zf.namelist()
                                    if n.count("/") == 1 and n.endswith("/pyproject.toml")]
                return zf.read(names[0]).decode("utf-8") if len(names) == 1 else None
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
            found = [m for m in tf.getmembers() if m.isfile() and m.name.count("/") == 1
                     and m.name.endswith("/pyproject.toml")]
            if len(found) != 1:
                return None
            f = tf.extractfile(found[0])
            return f.read().decode("utf-8") if f is not None else None
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError, ValueError,
            UnicodeDecodeError):
        return None


# -- failed builds, remembered by the sdist's hash ---------------------------------------------

#: failures that say nothing of the sdist itself (the disk, the clock, the user's choice):
#: never remembered, so the next run tries again
_TRANSIENT = ("could not be prepared", "timed out", "deadline", "--no-build", "cancelled",
              "interrupted")


def remember_failure(built_path: Optional[Path], exc: BaseException,
                     store: Callable[[Optional[Path], bytes], None]) -> None:
    """Write the reason a build of this sdist failed next to where its metadata would be
    cached (``<sha256>.failed``), through the cache's own writer ``store`` (which never
    writes through a planted link): the same bytes fail the same way, and numpy's meson
    build takes 40 s to do it. Transient failures are not remembered."""
    from envlock.errors import NoBuildError

    message = str(getattr(exc, "message", exc))
    if built_path is None or isinstance(exc, NoBuildError) or \
            any(t in message for t in _TRANSIENT):
        return
    store(built_path.with_suffix(".failed"), message.encode("utf-8"))


def failed_build(built_path: Optional[Path], *, refresh: bool = False) -> Optional[str]:
    """The remembered reason a build of this sdist failed, or None (also under
    ``--refresh``, which tries every build again). A link is not followed."""
    if built_path is None or refresh:
        return None
    import os

    try:
        fd = os.open(built_path.with_suffix(".failed"),
                     os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as fh:
            return fh.read(2000).decode("utf-8", "replace")
    except OSError:
        return None
