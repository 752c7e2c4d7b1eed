"""Reading and writing the user's files: one-line errors on the way in, atomic writes on
the way out (a crash or Ctrl-C never leaves a half-written lock, report or export).

What ``-o PATH`` does, by what ``PATH`` is:

- nothing yet, or a regular file: a temporary file in the same directory is written,
  given the mode a new file gets from the umask (``0666 & ~umask``, usually 0644, as pip
  and uv do; an existing file keeps its mode) and renamed over ``PATH`` (atomic on POSIX);
- a symlink: it is followed (to the end of the chain) and its *target* is replaced
  atomically; the link itself stays a link;
- a FIFO or a character device (``/dev/stdout``, ``/dev/null``, a named pipe a consumer
  reads): written straight into, as a shell's ``>`` would; there is nothing to replace;
- a directory, a socket, a block device: refused with a one-line error. A path that is a
  mount point (rename fails with EBUSY) is refused too. Nothing that is not a regular file
  is ever replaced. A path written with a trailing ``/`` (``-o newdir/``) names a
  directory: refused, never written as a file named ``newdir``;
- a full disk (or a quota, or a file size limit) while writing: a one-line error (exit 2),
  the temporary file removed and the old file, if any, untouched.

Reading is capped (:data:`MAX_INPUT_BYTES`) so ``-r /dev/zero`` or ``--log /dev/zero``
ends with an error instead of reading forever.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
import threading
from pathlib import Path
from typing import Optional, Union

from envlock.errors import InputError

__all__ = ["read_user_text", "read_user_bytes", "atomic_write_bytes", "atomic_write_text",
           "MAX_INPUT_BYTES",
           "new_file_mode"]

PathLike = Union[str, Path]

#: the largest file envlock reads from the user (a lock, a requirement file, a log)
MAX_INPUT_BYTES = 64 * 1024 * 1024


def read_user_bytes(path: PathLike, what: str, hint: Optional[str] = None,
                    limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a file the user named (at most ``limit``), or an :class:`InputError`.

    A larger file (or an endless one such as ``/dev/zero``) is refused rather than read
    into memory for ever.
    """
    p = Path(path)
    from envlock import replay

    replay.note_file(p)  # a replayed resolve checks the file again
    try:
        with open(p, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise InputError(f"{what} {p} does not exist", hint=hint) from None
    except IsADirectoryError:
        raise InputError(f"{what} {p} is a directory, not a file") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{what} {p} is larger than {_size(limit)}; envlock does not read "
                         f"files this large")
    return data


def read_user_text(path: PathLike, what: str, hint: Optional[str] = None,
                   limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of a file the user named, or an :class:`InputError` saying why not."""
    data = read_user_bytes(path, what, hint, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{what} {path} is not UTF-8 text") from None


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n} bytes"


def new_file_mode() -> int:
    """The mode a newly created file gets here: ``0666`` less the process umask.

    The umask is read from ``/proc/self/status`` where Linux shows it: reading it with
    ``os.umask`` means setting it, and for that moment every other thread (the index
    client writes cache entries from eight) created its files and directories with the
    temporary mask instead of the user's (``0755`` where ``umask 077`` asked ``0700``).
    Elsewhere the set-and-restore runs under a lock, which keeps envlock's own threads
    out of each other's way."""
    try:
        with open("/proc/self/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return 0o666 & ~mask


_UMASK_LOCK = threading.Lock()


def atomic_write_bytes(path: PathLike, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` as the module docstring describes: atomically for a
    regular file (or a symlink's target), straight into a FIFO or character device, and
    never by replacing anything that is not a regular file.

    ``durable=False`` skips the fsync: for caches whose entries are verified on read, where
    a lost write after a crash only costs a refetch (and fsync costs milliseconds each)."""
    shown = Path(path)
    if isinstance(path, str) and path.endswith(("/", os.sep)):
        # "-o newdir/": the user means a directory; never a file named "newdir"
        if os.path.isdir(path):
            raise InputError(f"cannot write {path}: it is a directory")
        raise InputError(f"cannot write {path}: a path ending in '/' names a directory, "
                         f"and there is none")
    target = Path(os.path.realpath(shown)) if os.path.islink(shown) else shown
    try:
        st: Optional[os.stat_result] = os.stat(target)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise InputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"cannot write {shown}: it is a directory")
        if stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode):
            _write_through(shown, target, data)
            return
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"cannot write {shown}: it is not a regular file "
                             f"(envlock replaces only regular files)")
    mode = stat.S_IMODE(st.st_mode) if st is not None else new_file_mode()
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    try:
        try:
            with os.fdopen(fd, "wb") as fh:
                os.fchmod(fh.fileno(), mode)
                fh.write(data)
                fh.flush()
                if durable:
                    os.fsync(fh.fileno())
        except OSError as exc:  # a full disk, a quota, a file size limit: one line, exit 2
            raise InputError(f"cannot write {shown}: {exc.strerror or exc}; nothing was "
                             f"written") from None
        try:
            os.replace(tmp, target)
        except OSError as exc:
            if exc.errno in (errno.EBUSY, errno.EXDEV):
                raise InputError(f"cannot write {shown}: it is a mount point or busy "
                                 f"({exc.strerror})") from None
            if isinstance(exc, IsADirectoryError) or exc.errno == errno.EISDIR:
                raise InputError(f"cannot write {shown}: it is a directory") from None
            raise InputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _write_through(shown: Path, target: Path, data: bytes) -> None:
    """Write into a FIFO or character device in place (no temporary file, no rename)."""
    try:
        fd = os.open(target, os.O_WRONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    try:
        view = memoryview(data)
        while view:
            n = os.write(fd, view)
            view = view[n:]
    except OSError as exc:
        raise InputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def atomic_write_text(path: PathLike, text: str) -> None:
    """UTF-8; a lone surrogate (from a JSON ``"\\ud800"`` in some input) is written as
    its escape rather than failing the write."""
    atomic_write_bytes(path, text.encode("utf-8", "backslashreplace"))
