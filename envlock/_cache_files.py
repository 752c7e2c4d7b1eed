"""Reading and writing cache entries in a directory that may be shared, or planted.

A cache directory (``ENVLOCK_CACHE_DIR``) can be shared between users (a CI cache, a team
directory, a world-writable ``/tmp/cache``), and every entry's path is predictable (a
digest of a URL). :func:`envlock._files.atomic_write_bytes` follows a symlink to write its
target, which is right for ``-o`` (the user named the link) and wrong here: another user
who plants ``http/a/<key>.body -> /home/victim/.bashrc`` would have the victim's next
resolve replace that file with bytes an index chose. So, below the cache root:

- every directory is opened with ``O_NOFOLLOW | O_DIRECTORY`` from its parent's
  descriptor and must be owned by this user; a link or a file where a directory belongs is
  removed and the directory made again (mode 0700); a directory of another user is not
  used (nothing is read from it or written to it);
- an entry is written to a new temporary file in its own directory (``O_EXCL |
  O_NOFOLLOW``) and renamed over the entry's name: a link planted there is replaced, its
  target is never opened;
- an entry is read with ``O_NOFOLLOW`` and only when it is a regular file owned by this
  user: anything else is ignored (and the next write replaces it).

The cache root itself is the user's choice: a link there is followed. It is created 0700
(when it does not exist), and :func:`root_warning` says when others can write it.
"""

from __future__ import annotations

import os
import stat
import threading
from collections import OrderedDict
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional, Sequence, Tuple, Union

__all__ = ["cache_dir", "read_entry", "write_entry", "entry_exists", "root_warning"]

PathLike = Union[str, Path]

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_DIR_FLAGS = os.O_RDONLY | _DIRECTORY | _NOFOLLOW | _CLOEXEC


#: Entries are spread over 16 directories per kind (the first hex digit of their key), not
#: 256: a cold resolve of vllm made 311 directories for 602 entries (each a new inode,
#: ~0.5 ms of kernel time on a virtual disk), more than the 64 kept open
#: (:func:`_acquire`), so each use walked to its directory again (1,422 walks, ~3,500
#: system calls). Sixteen directories of a few thousand entries each are nothing to a
#: file system. (Entries of the old layout are simply not found: they are refetched.)
SHARD = 1


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


def _uid() -> int:
    return os.geteuid() if hasattr(os, "geteuid") else -1


def _parts(root: Path, path: Path) -> Sequence[str]:
    rel = Path(path).relative_to(root)
    parts = rel.parts
    if not parts or any(p in ("", ".", "..") for p in parts):
        raise OSError(f"not a cache entry: {path}")
    return parts


def _open_root(root: Path, create: bool) -> int:
    if create:
        try:
            os.makedirs(root, mode=0o700, exist_ok=True)
        except FileExistsError:
            pass
    return os.open(root, os.O_RDONLY | _DIRECTORY | _CLOEXEC)


def _open_sub(parent: int, name: str, create: bool) -> int:
    """The directory ``name`` under ``parent``, opened without following a link; made
    (0700) when ``create`` and absent, or when a link or a file stands in its place."""
    # at most: unlink what stands there, make the directory, open it
    for attempt in range(3):
        try:
            fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        except FileNotFoundError:
            if not create:
                raise
            try:
                os.mkdir(name, 0o700, dir_fd=parent)
            except FileExistsError:
                pass
            continue
        except OSError:
            # ELOOP (a link) or ENOTDIR (a file): not ours to follow; replace it (once)
            if not create or attempt:
                raise
            os.unlink(name, dir_fd=parent)
            continue
        st = os.fstat(fd)
        if st.st_uid != _uid() and _uid() != -1:
            os.close(fd)
            raise PermissionError(f"cache directory {name} belongs to another user")
        return fd
    raise OSError(f"cannot make cache directory {name}")


#: directories already walked to (and checked) in this process, kept open: a resolve reads
#: and writes hundreds of entries in a few dozen directories, and a fresh walk is ~8 system
#: calls, each of which hands the GIL to another thread. A kept descriptor is our own
#: checked directory whatever happens to its path later (a rename cannot redirect it); one
#: that was removed (no links left) is walked to again.
_OPEN: "OrderedDict[Tuple[str, Tuple[str, ...]], _Kept]" = OrderedDict()
_OPEN_LOCK = threading.Lock()
_OPEN_PID = [os.getpid()]


def _max_open() -> int:
    """At most 64 kept directories, and an eighth of the process's descriptor limit (the
    sockets and build steps need the rest)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 16
    return 64 if soft < 0 or soft == resource.RLIM_INFINITY else max(4, min(64, soft // 8))


#: the most directories kept open
_MAX_OPEN = _max_open()


class _Kept:
    """One kept descriptor, closed only when no thread is using it (a descriptor closed
    under a thread's feet could be reused by another open, and the entry written there).
    Its fields change with :data:`_OPEN_LOCK` held."""

    __slots__ = ("fd", "users", "dropped", "closed")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.users = 1
        self.dropped = False
        self.closed = False


def _acquire(root: Path, dirs: Tuple[str, ...], create: bool) -> _Kept:
    """The kept descriptor of ``root/dirs...`` (one more user), reached from its parent's
    kept descriptor (each level checked by :func:`_open_sub`): a cold run that looks for
    hundreds of absent entries opens the root once, not once per entry."""
    key = (str(root), dirs)
    with _OPEN_LOCK:
        if _OPEN_PID[0] != os.getpid():  # a forked child: its own list, its own checks
            _OPEN.clear()  # (the parent's descriptors stay open: the child may not own them)
            _OPEN_PID[0] = os.getpid()
        kept = _OPEN.get(key)
        if kept is not None:
            _OPEN.move_to_end(key)
            kept.users += 1
    if kept is not None:
        try:
            alive = os.fstat(kept.fd).st_nlink > 0
        except OSError:
            alive = False
        if alive:
            return kept
        with _OPEN_LOCK:  # removed since: walk to whatever is there now
            if _OPEN.get(key) is kept:
                del _OPEN[key]
            kept.dropped = True
        _release(kept)
    if dirs:
        parent = _acquire(root, dirs[:-1], create)
        try:
            fd = _open_sub(parent.fd, dirs[-1], create)
        finally:
            _release(parent)
    else:
        fd = _open_root(root, create)
    kept = _Kept(fd)
    evicted = []
    with _OPEN_LOCK:
        if key in _OPEN:  # another thread kept one first: this one is used once
            kept.dropped = True
        else:
            _OPEN[key] = kept
            while len(_OPEN) > _MAX_OPEN:
                old = _OPEN.popitem(last=False)[1]
                old.dropped = True
                if old.users == 0 and not old.closed:
                    old.closed = True
                    evicted.append(old.fd)
    for fd in evicted:
        os.close(fd)
    return kept


def _release(kept: _Kept) -> None:
    with _OPEN_LOCK:
        kept.users -= 1
        close = kept.dropped and kept.users == 0 and not kept.closed
        if close:
            kept.closed = True
    if close:
        os.close(kept.fd)


@contextmanager
def _directory(root: Path, dirs: Sequence[str], create: bool) -> Iterator[int]:
    """A descriptor of the directory ``root/dirs...`` for one use, kept open for the
    next."""
    kept = _acquire(root, tuple(dirs), create)
    try:
        yield kept.fd
    finally:
        _release(kept)


def read_entry(root: PathLike, path: PathLike, limit: Optional[int] = None) -> bytes:
    """The bytes of the cache entry ``path`` (under ``root``); OSError when it is absent,
    not a regular file, not owned by this user, reached through a link, or larger than
    ``limit``. One ``fstat`` and two ``read`` calls, the second seeing the end (a file
    object made four more system calls, each handing the GIL to another thread)."""
    root = Path(root)
    parts = _parts(root, Path(path))
    with _directory(root, parts[:-1], create=False) as dfd:
        fd = os.open(parts[-1], os.O_RDONLY | _NOFOLLOW | _CLOEXEC | getattr(os, "O_NONBLOCK", 0),
                     dir_fd=dfd)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or (st.st_uid != _uid() and _uid() != -1):
            raise PermissionError(f"cache entry {path} is not a regular file of this user")
        # the size it had, and one byte more to see the end (or a file over the limit)
        cap = None if limit is None else limit + 1
        want = st.st_size + 1 if cap is None else min(st.st_size + 1, cap)
        chunks = []
        got = 0
        while True:
            chunk = os.read(fd, want)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
            if cap is not None and got >= cap:
                break
            want = 1 << 20 if cap is None else min(1 << 20, cap - got)
    finally:
        os.close(fd)
    data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
    if limit is not None and len(data) > limit:
        raise OSError(f"cache entry {path} is larger than {limit} bytes")
    return data


def entry_exists(root: PathLike, path: PathLike) -> bool:
    """Whether :func:`read_entry` would find a regular file of this user there."""
    root = Path(root)
    try:
        parts = _parts(root, Path(path))
        with _directory(root, parts[:-1], create=False) as dfd:
            st = os.stat(parts[-1], dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode) and (st.st_uid == _uid() or _uid() == -1)


def write_entry(root: PathLike, path: PathLike, data: bytes, *, durable: bool = False) -> None:
    """Write the cache entry ``path`` (under ``root``) as the module docstring says: never
    through a link, never into a directory of another user. OSError on failure (callers
    treat the cache as an optimisation and go on).

    Plain descriptor calls, no file object: ``os.fdopen`` asks the new file for its size,
    whether it is a terminal and its position (three system calls, each handing the GIL to
    another thread, for each of the hundreds of entries a cold resolve writes)."""
    root = Path(root)
    parts = _parts(root, Path(path))
    with _directory(root, parts[:-1], create=True) as dfd:
        name = parts[-1]
        tmp = f".{name}.{_temp_suffix()}.tmp"
        # 0666 less the umask, applied by the kernel: the mode any new file gets (a
        # temporary name, renamed into place once written). Asking for the umask here
        # meant setting it, process-wide, from several threads at once
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666,
                     dir_fd=dfd)
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, name, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=dfd)
            except OSError:
                pass
            raise


def _temp_suffix() -> str:
    """A temporary name no other writer uses: random per process, then counted (a random
    name per entry was a ``getrandom`` call per entry). A forked child draws its own."""
    with _TEMP_LOCK:
        if _TEMP[0] != os.getpid():
            _TEMP[:] = [os.getpid(), os.urandom(6).hex(), 0]
        _TEMP[2] += 1
        return f"{_TEMP[1]}{_TEMP[2]:x}"


#: [pid, random prefix, counter] of :func:`_temp_suffix`
_TEMP: list = [None, "", 0]
_TEMP_LOCK = threading.Lock()


def iter_entries(root: PathLike, dirs: Sequence[str]) -> Iterator[str]:  # pragma: no cover
    """Names in a cache directory (for cleaning), reached without following links."""
    with _directory(Path(root), dirs, create=False) as dfd:
        yield from os.listdir(dfd)


def root_warning(root: Optional[PathLike]) -> Optional[str]:
    """One line when users other than this one can write the cache root (entries are
    still written safely, but others can plant or remove them), else None."""
    if root is None:
        return None
    try:
        st = os.stat(root)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode):
        return None
    others = bool(st.st_mode & stat.S_IWOTH)
    foreign = _uid() != -1 and st.st_uid != _uid()
    if not (others or foreign):
        return None
    who = "every user" if others else "another user (its owner)"
    return (f"the cache directory {root} can be written by {who}: entries planted there are "
            f"checked and never followed, but a private directory (ENVLOCK_CACHE_DIR, mode "
            f"0700) is safer")
