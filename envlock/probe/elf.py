"""Read the dynamic section of an ELF file without loading it.

The library probe has to predict what the dynamic loader does (which ``DT_NEEDED`` names
an object asks for, whether its search path is ``DT_RPATH`` or ``DT_RUNPATH``), and it must
do so for files it would rather not ``dlopen``: a 600 MB cuBLAS, a copy built for another
architecture, a file that is not ELF at all. So this module reads just enough of the file:
the ELF header, the program headers, the ``PT_DYNAMIC`` segment and the few strings the
dynamic entries point at through ``DT_STRTAB`` (a virtual address, mapped to a file offset
through the ``PT_LOAD`` segments as the loader would). Section headers are not used: they
may be stripped, and the loader ignores them too.

Any of ELF32/ELF64, little or big endian. A file that is not ELF, or is too damaged to read
these parts from, gives ``None``; nothing here raises for a bad file.

>>> read_dynamic("/nonexistent") is None
True
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from typing import BinaryIO, Dict, List, Optional, Tuple

__all__ = ["ElfDynamic", "read_dynamic"]

_PT_LOAD = 1
_PT_DYNAMIC = 2
_PN_XNUM = 0xFFFF

_DT_NULL = 0
_DT_NEEDED = 1
_DT_STRTAB = 5
_DT_STRSZ = 10
_DT_SONAME = 14
_DT_RPATH = 15
_DT_RUNPATH = 29
_DT_FLAGS_1 = 0x6FFFFFFB

#: limits that keep a hostile file from making us read much
_MAX_PHNUM = 4096
_MAX_DYNAMIC_BYTES = 1 << 20
_MAX_STRING = 1 << 16
_CHUNK = 256


@dataclass(frozen=True)
class ElfDynamic:
    """What the loader reads from one ELF object before mapping its dependencies.

    ``rpath`` and ``runpath`` are the raw colon-separated strings (``None`` when the tag is
    absent, which matters: an object with any ``DT_RUNPATH`` has its ``DT_RPATH``
    ignored by glibc). ``machine`` is ``e_machine`` (62 is x86-64, 183 AArch64).
    """

    elf_class: int
    little_endian: bool
    machine: int
    needed: Tuple[str, ...] = ()
    soname: Optional[str] = None
    rpath: Optional[str] = None
    runpath: Optional[str] = None
    flags_1: int = 0

    @property
    def nodeflib(self) -> bool:
        """``DF_1_NODEFLIB``: the loader skips ld.so.cache and the default directories."""
        return bool(self.flags_1 & 0x800)


class _Bad(Exception):
    """The file is not readable as ELF; turned into ``None`` at the boundary."""


def read_dynamic(path: "str | os.PathLike[str]") -> Optional[ElfDynamic]:
    """The dynamic-section facts of ``path``, or ``None`` when it is not a readable ELF file."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a FIFO would block, a device never ends
            return None
        with open(path, "rb") as f:
            return _read(f)
    except (OSError, _Bad, struct.error, ValueError, OverflowError, MemoryError):
        return None


def _read_at(f: BinaryIO, offset: int, size: int) -> bytes:
    if offset < 0 or size < 0:
        raise _Bad("negative offset")
    f.seek(offset)
    data = f.read(size)
    if len(data) != size:
        raise _Bad("truncated")
    return data


def _read(f: BinaryIO) -> ElfDynamic:
    ident = f.read(16)
    if len(ident) < 16 or ident[:4] != b"\x7fELF":
        raise _Bad("not ELF")
    cls, data = ident[4], ident[5]
    if cls not in (1, 2) or data not in (1, 2):
        raise _Bad("unknown class or data encoding")
    is64 = cls == 2
    e = "<" if data == 1 else ">"

    if is64:
        hdr = struct.unpack(e + "HHIQQQIHHHHHH", _read_at(f, 16, 48))
    else:
        hdr = struct.unpack(e + "HHIIIIIHHHHHH", _read_at(f, 16, 36))
    (_e_type, machine, _version, _entry, phoff, shoff, _flags, _ehsize,
     phentsize, phnum, _shentsize, _shnum, _shstrndx) = hdr

    if phnum == _PN_XNUM:  # real count lives in section header 0's sh_info
        if is64:
            sh0 = struct.unpack(e + "IIQQQQIIQQ", _read_at(f, shoff, 64))
        else:
            sh0 = struct.unpack(e + "IIIIIIIIII", _read_at(f, shoff, 40))
        phnum = sh0[7]
    ph_fmt = e + ("IIQQQQQQ" if is64 else "IIIIIIII")
    ph_size = struct.calcsize(ph_fmt)
    if phnum > _MAX_PHNUM or (phnum and phentsize < ph_size):
        raise _Bad("bad program header table")

    loads: List[Tuple[int, int, int]] = []  # (vaddr, filesz, offset)
    dynamic: Optional[Tuple[int, int]] = None  # (offset, filesz)
    table = _read_at(f, phoff, phnum * phentsize) if phnum else b""
    for i in range(phnum):
        fields = struct.unpack_from(ph_fmt, table, i * phentsize)
        if is64:
            p_type, _pf, p_offset, p_vaddr, _pa, p_filesz, _pm, _al = fields
        else:
            p_type, p_offset, p_vaddr, _pa, p_filesz, _pm, _pf, _al = fields
        if p_type == _PT_LOAD:
            loads.append((p_vaddr, p_filesz, p_offset))
        elif p_type == _PT_DYNAMIC and dynamic is None:
            dynamic = (p_offset, p_filesz)

    info: Dict[str, object] = {"elf_class": 64 if is64 else 32,
                               "little_endian": data == 1, "machine": machine}
    if dynamic is None:  # static executable, object file: ELF, but nothing to load
        return ElfDynamic(**info)  # type: ignore[arg-type]

    dyn_fmt = e + ("qQ" if is64 else "iI")
    dyn_size = struct.calcsize(dyn_fmt)
    raw = _read_at(f, dynamic[0], min(dynamic[1], _MAX_DYNAMIC_BYTES))
    entries: List[Tuple[int, int]] = []
    for off in range(0, len(raw) - dyn_size + 1, dyn_size):
        tag, val = struct.unpack_from(dyn_fmt, raw, off)
        if tag == _DT_NULL:
            break
        entries.append((tag, val))

    strtab = next((v for t, v in entries if t == _DT_STRTAB), None)
    strsz = next((v for t, v in entries if t == _DT_STRSZ), None)
    wants_strings = any(t in (_DT_NEEDED, _DT_SONAME, _DT_RPATH, _DT_RUNPATH)
                        for t, _ in entries)
    str_offset: Optional[int] = None
    if strtab is not None:
        str_offset = _map_vaddr(strtab, loads)
    if wants_strings and str_offset is None:
        raise _Bad("DT_STRTAB outside every PT_LOAD segment")

    def string(index: int) -> str:
        assert str_offset is not None
        if strsz is not None and index >= strsz:
            raise _Bad("string index past DT_STRSZ")
        limit = _MAX_STRING if strsz is None else min(_MAX_STRING, strsz - index)
        return _cstring(f, str_offset + index, limit)

    needed: List[str] = []
    for tag, val in entries:
        if tag == _DT_NEEDED:
            needed.append(string(val))
        elif tag == _DT_SONAME:
            info.setdefault("soname", string(val))
        elif tag == _DT_RPATH:
            info.setdefault("rpath", string(val))
        elif tag == _DT_RUNPATH:
            info.setdefault("runpath", string(val))
        elif tag == _DT_FLAGS_1:
            info.setdefault("flags_1", val)
    return ElfDynamic(needed=tuple(needed), **info)  # type: ignore[arg-type]


def _map_vaddr(addr: int, loads: List[Tuple[int, int, int]]) -> Optional[int]:
    for vaddr, filesz, offset in loads:
        if vaddr <= addr < vaddr + filesz:
            return offset + (addr - vaddr)
    return None


def _cstring(f: BinaryIO, offset: int, limit: int) -> str:
    """The NUL-terminated string at ``offset``, read in small chunks.

    The string table of a big library (libtorch) holds every symbol name and runs to tens
    of megabytes; we need a handful of strings from it, so we never read it whole.
    """
    f.seek(offset)
    out = b""
    while len(out) < limit:
        chunk = f.read(min(_CHUNK, limit - len(out)))
        if not chunk:
            raise _Bad("unterminated string")
        nul = chunk.find(b"\0")
        if nul >= 0:
            return os.fsdecode(out + chunk[:nul])
        out += chunk
    raise _Bad("string too long")
