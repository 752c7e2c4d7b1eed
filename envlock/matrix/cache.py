"""A cross-process cache of the validated matrix.

Parsing ~300 KB of TOML with a pure-Python parser costs tens of milliseconds on every
command. The cache keeps the *validated* :class:`Matrix` pickled under the user's cache
directory, keyed by a hash of the data files' bytes and the envlock version, so a change
to any file (or to envlock) invalidates it. It is an optimisation only: any failure to
read or write it falls back to a normal load.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path
from typing import Optional

from envlock import __version__
from envlock.matrix.files import data_files
from envlock.matrix.matrix import Matrix

__all__ = ["cache_dir", "load_cached", "digest"]

_FORMAT = 2  # 2: Matrix.companions


def cache_dir() -> Optional[Path]:
    """``$ENVLOCK_CACHE_DIR``, else ``$XDG_CACHE_HOME/envlock``, else ``~/.cache/envlock``.

    ``ENVLOCK_NO_CACHE=1`` turns every cache off (returns None).
    """
    if os.environ.get("ENVLOCK_NO_CACHE"):
        return None
    explicit = os.environ.get("ENVLOCK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "envlock"


def digest(files: dict) -> str:
    h = hashlib.sha256(f"{_FORMAT}:{__version__}".encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return h.hexdigest()[:24]


def load_cached() -> Matrix:
    from envlock.errors import MatrixError

    files = data_files()
    key = digest(files)
    base = cache_dir()
    path = base / f"matrix-{key}.pickle" if base else None
    if path is not None:
        try:
            with open(path, "rb") as fh:
                obj = pickle.load(fh)
            if isinstance(obj, Matrix):
                return obj
        except Exception:  # noqa: BLE001 - any cache trouble means "load normally"
            pass
    from envlock.matrix.load import build_matrix, read_raw
    from envlock.matrix.rows import Problems

    problems = Problems()
    matrix = build_matrix(read_raw(files, problems), problems)
    if problems:
        raise MatrixError(problems.items)
    if path is not None:
        _store(path, matrix)
    return matrix


def _store(path: Path, matrix: Matrix) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".matrix-", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(matrix, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, path)
        for old in path.parent.glob("matrix-*.pickle"):
            if old != path:
                old.unlink(missing_ok=True)
    except OSError:
        pass
