"""Reading and writing the user's files: one-line errors on the way in, atomic writes on
the way out (a crash or Ctrl-C never leaves a half-written lock, report or export)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional, Union

from envlock.errors import InputError

__all__ = ["read_user_text", "atomic_write_bytes", "atomic_write_text"]

PathLike = Union[str, Path]


def read_user_text(path: PathLike, what: str, hint: Optional[str] = None) -> str:
    """The text of a file the user named, or an :class:`InputError` saying why not."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(f"{what} {p} does not exist", hint=hint) from None
    except IsADirectoryError:
        raise InputError(f"{what} {p} is a directory, not a file") from None
    except UnicodeDecodeError:
        raise InputError(f"{what} {p} is not UTF-8 text") from None
    except OSError as exc:
        raise InputError(f"cannot read {p}: {exc.strerror}") from None


def atomic_write_bytes(path: PathLike, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory, renamed
    into place (atomic on POSIX); the temporary file never survives a failure.

    ``durable=False`` skips the fsync: for caches whose entries are verified on read, where
    a lost write after a crash only costs a refetch (and fsync costs milliseconds each)."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def atomic_write_text(path: PathLike, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))
