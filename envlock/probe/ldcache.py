"""Read ``/etc/ld.so.cache``: which file the loader's cache step gives for a soname.

The cache is how the dynamic loader finds a library that no ``RPATH``, ``LD_LIBRARY_PATH``
or ``RUNPATH`` directory holds: a CUDA toolkit registered through ``/etc/ld.so.conf.d``
shows up only here. Running ``ldconfig -p`` would give the same answer, but it is not on
every ``PATH`` (it lives in ``/sbin``), its output format is not a contract, and it cannot
read a cache file other than the system's; the format itself is small and stable.

Format (glibc ``elf/cache.c``): a ``"glibc-ld.so.cache1.1"`` header with the entry count,
the string-table length, an endianness byte and an extension offset, then 24-byte entries
``(flags, key, value, osversion, hwcap)`` whose ``key``/``value`` are offsets, from the
start of that header, of the soname and the path. Old caches put an ``"ld.so-1.7.0"``
table (12-byte entries, offsets from the end of that table) before the new one; when
both are present glibc reads only the new one, and so do we. Entries for another ABI
(32-bit libraries on a 64-bit system) are skipped by their flags, as the loader does.

A cache that is damaged anywhere (truncated, offsets out of range) is read as empty: the
loader would distrust it, and a partial answer would look like a real one.
"""

from __future__ import annotations

import platform
import struct
import sys
from typing import Dict, List, Optional, Tuple

__all__ = ["cache_flags_for", "read_ld_cache"]

_OLD_MAGIC = b"ld.so-1.7.0"
_NEW_MAGIC = b"glibc-ld.so.cache1.1"
_NEW_HEADER = 48
_NEW_ENTRY = 24
_OLD_HEADER = 16
_OLD_ENTRY = 12
_EXTENSION_MAGIC = 0xEAA42174

_FLAG_ELF = 0x0001
_FLAG_ELF_LIBC6 = 0x0003

#: ``_DL_CACHE_DEFAULT_ID`` per machine: the one flags value whose entries the loader uses
_DEFAULT_ID = {
    "x86_64": 0x0303, "amd64": 0x0303,
    "aarch64": 0x0A03, "arm64": 0x0A03,
    "ppc64le": 0x0503, "ppc64": 0x0503,
    "s390x": 0x0403,
    "riscv64": 0x1003,
    "loongarch64": 0x1203,
    "armv7l": 0x0903, "armv8l": 0x0903,
    "i386": 0x0003, "i486": 0x0003, "i586": 0x0003, "i686": 0x0003,
}


def cache_flags_for(machine: Optional[str] = None) -> Optional[Tuple[int, ...]]:
    """The entry flags the loader accepts on ``machine`` (default: this one); ``None`` = any.

    >>> cache_flags_for("x86_64")
    (771, 1)
    """
    m = (machine or platform.machine()).lower()
    default = _DEFAULT_ID.get(m)
    return None if default is None else (default, _FLAG_ELF)


def read_ld_cache(path: str = "/etc/ld.so.cache", *,
                  machine: Optional[str] = None) -> Dict[str, Tuple[str, ...]]:
    """``soname -> paths`` for ``machine``'s ABI, both in cache order; ``{}`` if unreadable."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return {}
    try:
        entries = _parse(data)
    except (struct.error, ValueError, IndexError):
        return {}
    accepted = cache_flags_for(machine)
    out: Dict[str, List[str]] = {}
    for flags, key, value in entries:
        if accepted is not None and flags not in accepted:
            continue
        if accepted is None and flags & 0xFF not in (_FLAG_ELF, _FLAG_ELF_LIBC6):
            continue
        out.setdefault(key, []).append(value)
    return {k: tuple(v) for k, v in out.items()}


def _parse(data: bytes) -> List[Tuple[int, str, str]]:
    base = 0
    if data.startswith(_OLD_MAGIC):
        if len(data) < _OLD_HEADER:
            raise ValueError("truncated old header")
        (nlibs,) = struct.unpack_from("=I", data, 12)
        end_old = _OLD_HEADER + nlibs * _OLD_ENTRY
        base = (end_old + 7) & ~7
        if not data.startswith(_NEW_MAGIC, base):
            return _parse_old(data, nlibs, end_old)
    elif not data.startswith(_NEW_MAGIC):
        raise ValueError("not an ld.so.cache")
    return _parse_new(data, base)


def _parse_new(data: bytes, base: int) -> List[Tuple[int, str, str]]:
    if len(data) < base + _NEW_HEADER:
        raise ValueError("truncated header")
    endian_flag = data[base + 28]
    if endian_flag == 2:
        e = "<"
    elif endian_flag == 3:
        e = ">"
    elif endian_flag == 0:
        e = "<" if sys.byteorder == "little" else ">"
    else:
        raise ValueError("bad endianness flag")
    nlibs, len_strings = struct.unpack_from(e + "II", data, base + 20)
    (ext_offset,) = struct.unpack_from(e + "I", data, base + 32)
    strings_start = base + _NEW_HEADER + nlibs * _NEW_ENTRY
    if strings_start + len_strings > len(data):
        raise ValueError("truncated string table")
    if ext_offset:
        _check_extension(data, base + ext_offset, e)
    out: List[Tuple[int, str, str]] = []
    for i in range(nlibs):
        flags, key, value = struct.unpack_from(e + "iII", data, base + _NEW_HEADER + i * _NEW_ENTRY)
        out.append((flags, _string(data, base + key), _string(data, base + value)))
    return out


def _check_extension(data: bytes, at: int, e: str) -> None:
    magic, count = struct.unpack_from(e + "II", data, at)
    if magic != _EXTENSION_MAGIC:
        raise ValueError("bad extension magic")
    for i in range(count):
        _tag, _flags, offset, size = struct.unpack_from(e + "IIII", data, at + 8 + 16 * i)
        if offset + size > len(data):
            raise ValueError("truncated extension section")


def _parse_old(data: bytes, nlibs: int, end_old: int) -> List[Tuple[int, str, str]]:
    if end_old > len(data):
        raise ValueError("truncated old table")
    out: List[Tuple[int, str, str]] = []
    for i in range(nlibs):
        flags, key, value = struct.unpack_from("=iII", data, _OLD_HEADER + i * _OLD_ENTRY)
        out.append((flags, _string(data, end_old + key), _string(data, end_old + value)))
    return out


def _string(data: bytes, at: int) -> str:
    end = data.index(b"\0", at)  # ValueError past the end: damaged cache
    if at >= len(data):
        raise ValueError("string offset out of range")
    return data[at:end].decode("utf-8", "surrogateescape")
