"""envlock's own distribution: its name on package indexes, and a wheel of the running copy.

The import package and the command are ``envlock``; the *distribution* is ``envlock-gpu``.
The name ``envlock`` on PyPI belongs to an unrelated project, so nothing envlock writes may
ever ask an index for ``envlock`` by name (a test scans every output for that).

:func:`build_wheel` packs the envlock that is running (a checkout or an installed,
non-editable copy alike: only the package's own files are read) into a wheel, with no
build backend and no network, so an exported Docker build context can install exactly
this envlock with ``pip install --no-index --require-hashes``. The wheel is reproducible:
entries sorted, every timestamp ``SOURCE_DATE_EPOCH`` (default 1980-01-01, the oldest a
zip can hold), every mode 0644, so the same source gives the same bytes and sha256.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Tuple

__all__ = ["DISTRIBUTION", "REQUIRES", "REQUIRES_PYTHON", "EXTRAS", "wheel_name",
           "build_wheel", "package_files"]

#: the distribution name (PEP 503 normalized); ``envlock`` on PyPI is someone else's
DISTRIBUTION = "envlock-gpu"
#: kept equal to ``[project] dependencies`` of pyproject.toml (a test compares them)
REQUIRES: Tuple[str, ...] = (
    "packaging>=24.2",
    "resolvelib>=1.1,<2",
    "urllib3>=1.26",
    "certifi",
    "tomlkit>=0.12",
    "nvidia-ml-py>=12.535",
    "tomli>=1.1; python_version < '3.11'",
)
REQUIRES_PYTHON = ">=3.9"
EXTRAS: Mapping[str, Tuple[str, ...]] = {"torch": ("torch",)}
_SUMMARY = ("Reproducible GPU deep-learning environments: a curated CUDA/driver/PyTorch "
            "compatibility matrix, a hardware-aware resolver, and a verifier for live "
            "machines")
_MIN_EPOCH = 315532800  # 1980-01-01T00:00:00Z: zip timestamps start there


def wheel_name(version: str) -> str:
    """``envlock_gpu-<version>-py3-none-any.whl``."""
    return f"{DISTRIBUTION.replace('-', '_')}-{version}-py3-none-any.whl"


def _is_package_file(rel: str) -> bool:
    """The files pyproject.toml ships: modules, ``py.typed``, the matrix and the schemas."""
    parts = rel.split("/")
    if "__pycache__" in parts:
        return False
    if rel.endswith(".py") or rel in ("py.typed", "matrix/prebuilt-matrix.json"):
        return True
    return (len(parts) == 2 and ((parts[0] == "compat-matrix" and rel.endswith(".toml"))
                                 or (parts[0] == "schemas" and rel.endswith(".json"))))


def package_files(root: Optional[Path] = None) -> Dict[str, bytes]:
    """``envlock/...`` archive name -> content for the running envlock package (symlinks
    followed: in a checkout ``envlock/compat-matrix`` points at the top-level matrix)."""
    if root is None:
        import envlock

        root = Path(envlock.__file__).resolve().parent
    out: Dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root, followlinks=True):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in filenames:
            full = Path(dirpath) / fn
            rel = full.relative_to(root).as_posix()
            if _is_package_file(rel):
                out[f"envlock/{rel}"] = full.read_bytes()
    return out


def _metadata(version: str) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {DISTRIBUTION}", f"Version: {version}",
             f"Summary: {_SUMMARY}", "License: Apache-2.0",
             f"Requires-Python: {REQUIRES_PYTHON}"]
    lines += [f"Requires-Dist: {r}" for r in REQUIRES]
    for extra, reqs in EXTRAS.items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {r}; extra == \"{extra}\"" for r in reqs]
    return "\n".join(lines) + "\n"


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def build_wheel(version: Optional[str] = None, *, source_date_epoch: Optional[int] = None,
                root: Optional[Path] = None) -> Tuple[str, bytes]:
    """(file name, bytes) of a wheel of the running envlock; the same input gives the same
    bytes. ``source_date_epoch`` defaults to ``$SOURCE_DATE_EPOCH``, else 1980-01-01."""
    if version is None:
        from envlock import __version__

        version = __version__
    if source_date_epoch is None:
        env = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
        source_date_epoch = int(env) if env.isdigit() else _MIN_EPOCH
    stamp = time.gmtime(max(source_date_epoch, _MIN_EPOCH))[:6]
    info = f"{DISTRIBUTION.replace('-', '_')}-{version}.dist-info"
    entries: List[Tuple[str, bytes]] = sorted(package_files(root).items())
    entries += [
        (f"{info}/METADATA", _metadata(version).encode()),
        (f"{info}/WHEEL", b"Wheel-Version: 1.0\nGenerator: envlock\nRoot-Is-Purelib: true\n"
                          b"Tag: py3-none-any\n"),
        (f"{info}/entry_points.txt", b"[console_scripts]\nenvlock = envlock.cli:main\n"),
        (f"{info}/top_level.txt", b"envlock\n"),
    ]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    entries.append((f"{info}/RECORD", (record + f"{info}/RECORD,,\n").encode()))
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, data in entries:
            zi = zipfile.ZipInfo(name, date_time=stamp)  # type: ignore[arg-type,unused-ignore]
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = (0o100644 << 16)
            zi.create_system = 3  # Unix, so the mode above is honoured everywhere
            zf.writestr(zi, data, compresslevel=9)
    return wheel_name(version), buf.getvalue()
