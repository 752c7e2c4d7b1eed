"""A cross-process cache of the validated matrix, in a format that cannot execute.

Parsing ~300 KB of TOML with a pure-Python parser and validating it costs a few hundred
milliseconds on a loaded machine, on every command. The cache keeps the *validated*
matrix under the user's cache directory as JSON, keyed by a hash of the data files' bytes
and the envlock version, so a change to any file (or to envlock) invalidates it.

It used to be a pickle, and a pickle planted in a shared cache directory (CI caches,
shared home directories) runs arbitrary code when loaded. JSON only ever yields plain
data; the objects are rebuilt from it by :func:`_decode`, which constructs nothing but
the frozen dataclasses of :mod:`envlock.matrix.model` (an allowlist by class name) from
plain values. Old ``matrix-*.pickle`` files are never opened, only deleted.

It is an optimisation only: any failure to read, decode or write it (a planted file,
garbage, a newer format) falls back to a normal load.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Dict, Optional

from envlock import __version__
from envlock._cache_files import cache_dir  # noqa: F401 - where it always was
from envlock.matrix import model
from envlock.matrix.files import data_files
from envlock.matrix.matrix import Matrix

__all__ = ["cache_dir", "load_cached", "digest", "encode_matrix", "decode_matrix",
           "PREBUILT", "encode_prebuilt", "load_prebuilt"]

#: the validated matrix generated when the wheel is built (setup.py's build_py), next to
#: this module: the first run after an install then parses no TOML either
PREBUILT = "prebuilt-matrix.json"

_FORMAT = 6  # 2: Matrix.companions; 3: JSON, not pickle; 4: Companions.triton; 5: symptoms; 6: stamp
#: the constructor arguments of :class:`Matrix`, which are what the cache holds
_FIELDS = ("version", "sources", "archs", "gpus", "cuda_majors", "cuda_lines",
           "cuda_releases", "drivers", "nccl", "cudnn", "torch_releases", "variants",
           "advisories", "companions", "symptoms")
#: the only classes the decoder will build: the matrix model's dataclasses, by name
_CLASSES: Dict[str, Any] = {
    name: obj for name, obj in vars(model).items()
    if isinstance(obj, type) and dataclasses.is_dataclass(obj)
    and obj.__module__ == model.__name__}
#: a cache file larger than this is not ours
_MAX_BYTES = 32 * 1024 * 1024


def digest(files: dict) -> str:
    h = hashlib.sha256(f"{_FORMAT}:{__version__}".encode())
    for name in sorted(files):
        h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
    return h.hexdigest()[:24]


def _encode(o: Any) -> Any:
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        # positional, in field order: a third of the size of named fields
        return {"$c": type(o).__name__,
                "a": [_encode(getattr(o, f.name)) for f in dataclasses.fields(o)]}
    if isinstance(o, tuple):
        return {"$t": [_encode(x) for x in o]}
    if isinstance(o, list):
        return [_encode(x) for x in o]
    if isinstance(o, dict):
        return {"$d": [[_encode(k), _encode(v)] for k, v in o.items()]}
    if o is None or isinstance(o, (str, int, float, bool)):
        return o
    raise TypeError(f"cannot cache a {type(o).__name__}")


def _hook(d: Dict[str, Any]) -> Any:
    """json object hook: rebuild tuples, dicts with any keys and allowlisted dataclasses."""
    if "$t" in d:
        return tuple(d["$t"])
    if "$d" in d:
        return {(tuple(k) if isinstance(k, list) else k): v for k, v in d["$d"]}
    if "$c" in d:
        cls = _CLASSES.get(d["$c"])
        args = d.get("a")
        if cls is None or not isinstance(args, list):
            raise ValueError(f"not a matrix class: {d['$c']!r}")
        return cls(*args)
    return d


def encode_matrix(matrix: Matrix) -> bytes:
    """The cache file's bytes for ``matrix`` (plain JSON)."""
    return json.dumps({"format": _FORMAT, **{k: _encode(getattr(matrix, k)) for k in _FIELDS}},
                      separators=(",", ":")).encode("utf-8")


def decode_matrix(data: bytes) -> Matrix:
    """A :class:`Matrix` from :func:`encode_matrix` bytes; ValueError/TypeError when the
    bytes are anything else."""
    obj = json.loads(data, object_hook=_hook)
    if not isinstance(obj, dict) or obj.get("format") != _FORMAT:
        raise ValueError("not a matrix cache of this format")
    return Matrix(**{k: obj[k] for k in _FIELDS})


def _read_cache(path: Path) -> Optional[Matrix]:
    try:
        from envlock._cache_files import read_entry

        return decode_matrix(read_entry(path.parent, path, _MAX_BYTES))
    except Exception:  # noqa: BLE001 - any cache trouble means "load normally"
        return None


def encode_prebuilt(files: Dict[str, bytes]) -> bytes:
    """The prebuilt matrix for these data files: their :func:`digest` and the validated
    matrix, in the cache's format. Raises :class:`~envlock.errors.MatrixError` on invalid
    data (a wheel is never built from a matrix that does not validate)."""
    from envlock.errors import MatrixError
    from envlock.matrix.load import build_matrix, read_raw
    from envlock.matrix.rows import Problems

    from envlock.matrix.stamp import content_digest

    problems = Problems()
    # with the content digest in its version, as load_cached builds it: without it the
    # wheel's locks recorded a bare meta.toml version and --check could not see a change
    matrix = build_matrix(read_raw(files, problems), problems, content_digest(files))
    if problems:
        raise MatrixError(problems.items)
    return b'{"key":"' + digest(files).encode() + b'","matrix":' + encode_matrix(matrix) + b"}"


def load_prebuilt(key: str, data: Optional[bytes] = None) -> Optional[Matrix]:
    """The prebuilt matrix shipped in the package when it was made from exactly these
    data files and this envlock (``key``, see :func:`digest`); None otherwise (a checkout,
    edited data, a damaged file)."""
    try:
        if data is None:
            data = Path(__file__).with_name(PREBUILT).read_bytes()
        # the key is the first field: a mismatch is found without decoding the rest
        head = b'{"key":"' + key.encode() + b'","matrix":'
        if not data.startswith(head) or not data.endswith(b"}"):
            return None
        return decode_matrix(data[len(head):-1])
    except Exception:  # noqa: BLE001 - any trouble means "load normally"
        return None


def load_cached() -> Matrix:
    from envlock.errors import MatrixError

    files = data_files()
    key = digest(files)
    base = cache_dir()
    path = base / f"matrix-{key}.json" if base else None
    if path is not None:
        cached = _read_cache(path)
        if cached is not None:
            return cached
    prebuilt = load_prebuilt(key)
    if prebuilt is not None:
        return prebuilt
    from envlock.matrix.load import build_matrix, read_raw
    from envlock.matrix.rows import Problems

    problems = Problems()
    from envlock.matrix.stamp import content_digest

    matrix = build_matrix(read_raw(files, problems), problems, content_digest(files))
    if problems:
        raise MatrixError(problems.items)
    if path is not None:
        _store(path, matrix)
    return matrix


def _store(path: Path, matrix: Matrix) -> None:
    try:
        data = encode_matrix(matrix)
    except (TypeError, ValueError):
        return
    # Not _files.atomic_write_bytes on purpose: that one follows a symlink to write its
    # target (right for a user's -o), while a cache entry planted as a symlink in a shared
    # cache directory must be replaced, never written through.
    from envlock._cache_files import write_entry

    try:
        write_entry(path.parent, path, data)  # the root made 0700; a link is replaced
        # stale caches, and pickles of older envlocks: deleted, never opened
        for pattern in ("matrix-*.json", "matrix-*.pickle"):
            for old in path.parent.glob(pattern):
                if old != path:
                    old.unlink(missing_ok=True)
    except OSError:
        pass
