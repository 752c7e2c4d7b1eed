"""Which ``/etc/ld.so.conf`` file puts a directory into the loader's cache.

A library reached through ``/etc/ld.so.cache`` got there because a line of
``/etc/ld.so.conf`` (or of a file it ``include``-s, usually ``/etc/ld.so.conf.d/*.conf``)
names its directory and ``ldconfig`` ran. When such a copy is the wrong one, the fix is to
edit that file and run ``ldconfig`` again; "unset LD_LIBRARY_PATH" would change nothing.
This module answers "which file names this directory", reading the files the way
``ldconfig`` does: ``include`` takes globs (relative to the including file's directory),
``hwcap`` lines are ignored, ``#`` starts a comment, and entries may be separated by
spaces, tabs, commas or colons.
"""

from __future__ import annotations

import glob
import os
from typing import Dict, List, Optional, Set

__all__ = ["LD_SO_CONF", "conf_dirs", "conf_file_for"]

LD_SO_CONF = "/etc/ld.so.conf"
_MAX_FILES = 256


def conf_dirs(conf: str = LD_SO_CONF) -> Dict[str, str]:
    """``directory -> the file that names it`` (the first file wins, as in ldconfig).

    >>> conf_dirs("/nonexistent/ld.so.conf")
    {}
    """
    out: Dict[str, str] = {}
    seen: Set[str] = set()
    _read(conf, out, seen)
    return out


def _read(path: str, out: Dict[str, str], seen: Set[str]) -> None:
    real = os.path.realpath(path)
    if real in seen or len(seen) >= _MAX_FILES:
        return
    seen.add(real)
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            lines = fh.read(1 << 20).splitlines()
    except OSError:
        return
    base = os.path.dirname(path)
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        words = line.split()
        if words[0] == "include":
            for pattern in words[1:]:
                pattern = pattern if os.path.isabs(pattern) else os.path.join(base, pattern)
                for inc in sorted(glob.glob(pattern)):
                    _read(inc, out, seen)
            continue
        if words[0] == "hwcap":
            continue
        for entry in line.replace(",", " ").replace(":", " ").replace("\t", " ").split():
            entry = entry.split("=", 1)[0]  # the old "dir=TYPE" form
            out.setdefault(os.path.normpath(entry), path)


def conf_file_for(directory: str, dirs: Optional[Dict[str, str]] = None,
                  conf: str = LD_SO_CONF) -> Optional[str]:
    """The file naming ``directory`` (or the directory it resolves to), or ``None``."""
    table = conf_dirs(conf) if dirs is None else dirs
    candidates: List[str] = [os.path.normpath(directory), os.path.realpath(directory)]
    for d in candidates:
        if d in table:
            return table[d]
    real = {os.path.realpath(k): v for k, v in table.items()}
    return real.get(os.path.realpath(directory))
