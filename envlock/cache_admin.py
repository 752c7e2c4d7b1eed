"""What envlock keeps in its cache directory, and removing it (``envlock cache``).

The cache only grows on its own: a page whose bytes change gets a new parsed form in
``pages/`` (keyed by the bytes, so the old one is never read again), every wheel ever
resolved keeps its metadata, and a change of layout leaves the old entries behind (before
this command existed, ``http/`` and ``metadata/`` moved from 256 two-digit directories to
16 one-digit ones: the old directories were never read again, nor removed). The replay
records and the matrix cache keep themselves bounded; nothing else did.

Two removals, as pip and uv offer them:

- :func:`prune` removes what this envlock never reads: directories of an older layout,
  parsed pages whose page is no longer the one cached, temporary files an interrupted
  write left (older than an hour: a younger one may be a write in progress), matrix caches
  of other envlock versions or data;
- :func:`clean` removes every kind of entry envlock writes, and nothing else: a cache
  directory pointed at the wrong place (``ENVLOCK_CACHE_DIR=$HOME``) loses no other file.

Nothing below the cache root is followed when it is a link: a link is removed as a link
(:func:`shutil.rmtree` removes a tree without following the links inside it). Values
only: :mod:`envlock.cli.cache_cmd` prints them.
"""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from envlock._cache_files import SHARD

__all__ = ["KINDS", "FILES", "Usage", "Removal", "usage", "prune", "clean"]

#: the directories envlock writes under the cache root, and what each holds
KINDS: Tuple[Tuple[str, str], ...] = (
    ("http", "index pages as the index sent them, with their HTTP validators"),
    ("pages", "index pages parsed, read instead of the bytes on a warm run"),
    ("metadata", "wheel metadata, by index and file hash"),
    ("built-metadata", "metadata built from sdists, by sdist hash"),
    ("replay", "records of resolves, answered again when nothing they read changed"),
)
#: the files envlock writes at the cache root (shell patterns)
FILES: Tuple[str, ...] = ("matrix-*.json", "matrix-*.pickle", "libversions.json",
                          "torch-arch.json")
#: the kinds whose entries sit in one-hex-digit directories (``_cache_files.SHARD``)
_SHARDED = ("http", "metadata")
#: a temporary file younger than this may be a write in progress
_TEMP_AGE = 3600.0


@dataclass(frozen=True)
class Usage:
    """One kind's entries: how many files and bytes; ``stale`` of them are not read by
    this envlock (what :func:`prune` would remove)."""

    kind: str
    files: int
    bytes: int
    stale_files: int = 0
    stale_bytes: int = 0


@dataclass(frozen=True)
class Removal:
    """What a removal did (or, with ``dry_run``, would do)."""

    files: int
    bytes: int
    #: "path: reason" for each path that could not be removed
    failed: Tuple[str, ...] = ()
    dry_run: bool = False


def usage(root: Path) -> List[Usage]:
    """Each kind of entry under ``root`` (``other`` for the files at the root)."""
    stale = set(_stale(root))
    top = str(root)
    out = []
    for kind, _ in KINDS:
        files = nbytes = sfiles = sbytes = 0
        for path, size in _files(root / kind):
            files += 1
            nbytes += size
            if _under(path, stale, top):
                sfiles += 1
                sbytes += size
        out.append(Usage(kind, files, nbytes, sfiles, sbytes))
    files = nbytes = sfiles = sbytes = 0
    for path in _root_files(root):
        size = _size(path)
        files += 1
        nbytes += size
        if path in stale:
            sfiles += 1
            sbytes += size
    out.append(Usage("other", files, nbytes, sfiles, sbytes))
    return out


def _under(path: str, marked: set, top: str) -> bool:
    """Whether ``path`` or one of its directories below ``top`` is in ``marked``."""
    while len(path) > len(top):
        if path in marked:
            return True
        path = os.path.dirname(path)
    return False


def prune(root: Path, dry_run: bool = False) -> Removal:
    """Remove the entries this envlock never reads (see the module docstring)."""
    return _remove(_stale(root), dry_run)


def clean(root: Path, dry_run: bool = False) -> Removal:
    """Remove every entry envlock writes under ``root``; other files stay."""
    paths = [str(root / kind) for kind, _ in KINDS if os.path.lexists(root / kind)]
    return _remove(paths + _root_files(root), dry_run)


# -- what is stale --------------------------------------------------------------------------

def _stale(root: Path) -> List[str]:
    out: List[str] = []
    for kind in _SHARDED:
        for entry in _scan(root / kind):
            if not _is_shard(entry.name):
                out.append(entry.path)  # an older layout's directory (or a stray file)
    live = _live_page_names(root)
    if live is not None:
        for entry in _walk(root / "pages"):
            if entry.name.endswith(".json") and entry.name not in live:
                out.append(entry.path)
    now = time.time()
    for kind, _ in KINDS:
        for entry in _walk(root / kind):
            if entry.name.startswith(".") and entry.name.endswith(".tmp") \
                    and now - _mtime(entry) > _TEMP_AGE:
                out.append(entry.path)
    current = _current_matrix()
    for path in _root_files(root):
        name = os.path.basename(path)
        if name.endswith(".pickle") or (name.startswith("matrix-") and current is not None
                                        and name != current):
            out.append(path)
    return sorted(set(out))


def _is_shard(name: str) -> bool:
    return len(name) == SHARD and all(c in "0123456789abcdef" for c in name)


def _live_page_names(root: Path) -> Optional[set]:
    """The ``pages/`` file names the cached index pages lead to, or None when that
    cannot be known (then no parsed page is called stale).

    A parsed page is named by its index, its URL and its bytes' sha256
    (:meth:`envlock.index.client.IndexClient._parsed_path`): a page fetched again with
    other bytes gets another name, and the old form is never read again. The HTTP entry
    of each page records its URL and the sha256 of its body; the index is the page URL's
    parent (``.../simple/<project>/`` belongs to ``.../simple/``)."""
    from envlock.index.client import parsed_page_name

    names = set()
    entries = [e for shard in _scan(root / "http") if _is_shard(shard.name)
               for e in _walk(Path(shard.path))]
    for entry in entries:
        if not entry.name.endswith(".json") or entry.is_symlink():
            continue
        try:
            fd = os.open(entry.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
            with os.fdopen(fd, "rb") as fh:
                meta = json.loads(fh.read(1024 * 1024))
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(meta, dict):
            continue
        url, sha = meta.get("url"), meta.get("sha256")
        if not isinstance(url, str) or not isinstance(sha, str):
            return None  # an entry of a form this cannot read: keep every parsed page
        for index in _index_candidates(url):
            names.add(parsed_page_name(index, url, sha))
    return names


def _index_candidates(url: str) -> List[str]:
    """The index URLs a page URL can belong to: its parent (a project page), itself (an
    index's root page), with and without the trailing slash."""
    base = url.rstrip("/")
    parent = base.rsplit("/", 1)[0]
    return [parent + "/", parent, base + "/", base]


def _current_matrix() -> Optional[str]:
    try:
        from envlock.matrix.cache import digest
        from envlock.matrix.files import data_files

        return f"matrix-{digest(data_files())}.json"
    except Exception:  # noqa: BLE001 - no key: no matrix cache is called stale
        return None


# -- walking and removing, never through a link ---------------------------------------------

def _scan(path: Path) -> List[os.DirEntry]:
    try:
        if not path.is_dir() or path.is_symlink():
            return []
        with os.scandir(path) as it:
            return list(it)
    except OSError:
        return []


def _walk(path: Path) -> List[os.DirEntry]:
    """Every file (or link) below ``path``, directories entered without following links."""
    out: List[os.DirEntry] = []
    todo = [path]
    while todo:
        for entry in _scan(Path(todo.pop())):
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append(entry.path)
                else:
                    out.append(entry)
            except OSError:
                continue
    return out


def _files(path: Path) -> List[Tuple[str, int]]:
    out = []
    for entry in _walk(path):
        try:
            out.append((entry.path, entry.stat(follow_symlinks=False).st_size))
        except OSError:
            continue
    return out


def _root_files(root: Path) -> List[str]:
    return sorted(e.path for e in _scan(root)
                  if any(fnmatch.fnmatchcase(e.name, p) for p in FILES)
                  and not e.is_dir(follow_symlinks=False))


def _size(path: str) -> int:
    try:
        return os.lstat(path).st_size
    except OSError:
        return 0


def _mtime(entry: os.DirEntry) -> float:
    try:
        return entry.stat(follow_symlinks=False).st_mtime
    except OSError:
        return time.time()


def _remove(paths: List[str], dry_run: bool) -> Removal:
    files = nbytes = 0
    failed: List[str] = []
    for path in paths:
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            failed.append(f"{path}: {exc.strerror or exc}")
            continue
        if stat.S_ISDIR(st.st_mode):
            inside = _files(Path(path))
            if not dry_run:
                errors: Dict[str, str] = {}

                def onerror(_fn: object, p: str, info: tuple, errors: Dict[str, str] = errors
                            ) -> None:
                    errors[p] = getattr(info[1], "strerror", None) or str(info[1])

                shutil.rmtree(path, onerror=onerror)
                if errors:
                    failed += [f"{p}: {why}" for p, why in sorted(errors.items())]
                    inside = [(p, s) for p, s in inside if not os.path.lexists(p)]
            files += len(inside)
            nbytes += sum(s for _, s in inside)
            continue
        if not dry_run:
            try:
                os.unlink(path)
            except OSError as exc:
                failed.append(f"{path}: {exc.strerror or exc}")
                continue
        files += 1
        nbytes += st.st_size
    return Removal(files, nbytes, tuple(failed), dry_run)
