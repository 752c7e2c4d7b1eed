"""Read single members of a remote zip (a wheel) with HTTP range requests.

A wheel's METADATA is a few KB inside a file that can be 2 GB. When an index has no
PEP 658 metadata file, we read the zip's end-of-central-directory record and central
directory from the tail of the file, then fetch only the member we need.
"""

from __future__ import annotations

import re
import struct
import zlib
from typing import Callable, Dict, NamedTuple, Optional, Tuple

from envlock.errors import IndexError_

__all__ = ["RemoteZip", "ZipEntry"]

_EOCD = b"PK\x05\x06"
_EOCD64_LOC = b"PK\x06\x07"
_EOCD64 = b"PK\x06\x06"
_CDH = b"PK\x01\x02"
_LFH = b"PK\x03\x04"
_TAIL = 64 * 1024 + 22
#: the longest central directory fetched together with the files before it (larger ones,
#: torch's 1.1-1.3 MB, tensorflow's 2.9 MB, are read on their own: the guess would double
#: a large read, and a large read is slow while other threads hold the GIL)
_SPECULATE_CD = 1024 * 1024
#: how much of the head: torch <= 2.6 puts its dist-info first, METADATA at ~64 KB
_HEAD = 256 * 1024
#: a wheel this small (its size known from the index page) is read whole in the first
#: request: wherever its METADATA sits, no second one follows (pdm-backend and others
#: write dist-info first: 83 of the 134 wheels of 64-256 KB in a cold vllm 0.8.5 resolve
#: needed a second read for the head after the tail)
_WHOLE = 256 * 1024

#: fetch(start, end_inclusive) -> bytes; fetch(None, n) -> (last n bytes); returns
#: (data, total_size or None)
Fetch = Callable[[Optional[int], Optional[int]], Tuple[bytes, Optional[int]]]
#: beside(start, end_inclusive): the same read as fetch, started in the background; the
#: returned callable waits for it and gives fetch's answer (or raises its error)
Beside = Callable[[int, int], Callable[[], Tuple[bytes, Optional[int]]]]


class ZipEntry(NamedTuple):
    """One member of the central directory (a named tuple: a wheel such as torch's lists
    ~15,000 members, and a frozen dataclass per member cost more than the read)."""

    name: str
    method: int
    compressed_size: int
    size: int
    header_offset: int


class RemoteZip:
    """The central directory of a remote zip, and on-demand member reads."""

    def __init__(self, fetch: Fetch, label: str, beside: Optional[Beside] = None,
                 size: Optional[int] = None) -> None:
        """``size``: the file's size as the index page gives it, if it does (a small wheel
        is then read whole, see :data:`_WHOLE`)."""
        self._fetch = fetch
        self.label = label
        self._head = b""
        first = size if size is not None and _TAIL < size <= _WHOLE else _TAIL
        tail, total = fetch(None, first)
        if total is None:
            raise IndexError_(f"{label}: server did not report the file size for a range read")
        self.size = total
        tail_start = total - len(tail)
        pos = tail.rfind(_EOCD)
        if pos < 0:
            raise IndexError_(f"{label}: not a zip file (no end-of-central-directory record)")
        (_, _, _, _, n_total, cd_size, cd_offset, _) = struct.unpack(
            "<4sHHHHIIH", tail[pos:pos + 22])
        if cd_offset == 0xFFFFFFFF or n_total == 0xFFFF:
            loc = tail.rfind(_EOCD64_LOC, 0, pos)
            if loc < 0:
                raise IndexError_(f"{label}: zip64 file without a zip64 locator")
            (eocd64_off,) = struct.unpack("<Q", tail[loc + 8:loc + 16])
            rec = self._slice(tail, tail_start, eocd64_off, 56)
            if rec[:4] != _EOCD64:
                raise IndexError_(f"{label}: bad zip64 end-of-central-directory record")
            n_total, cd_size, cd_offset = struct.unpack("<QQQ", rec[32:56])
        head = None
        if (beside is not None and cd_offset < tail_start and cd_size > _SPECULATE_CD
                and cd_offset > 2 * _HEAD):
            # a directory read on its own: some of these wheels put their dist-info first
            # (torch <= 2.6, tensorflow), so the head is read at the same time and their
            # METADATA is in hand when the directory arrives (the third round trip it
            # spares was ~4% of a cold torch-alone resolve)
            head = beside(0, _HEAD - 1)
        try:
            if cd_offset < tail_start and cd_size <= _SPECULATE_CD:
                # a central directory longer than the tail (a wheel of thousands of
                # files): the dist-info files mostly sit just before it (RECORD last,
                # about as long as the directory, METADATA a little before), so one
                # request for both spares the round trip that would follow for METADATA
                start = max(0, cd_offset - cd_size - _TAIL)
                data, _ = fetch(start, tail_start - 1)
                if len(data) == tail_start - start:
                    tail, tail_start = data + tail, start
            cd = self._slice(tail, tail_start, cd_offset, cd_size)
        finally:
            if head is not None:
                self._head = _speculated(head, total)
        if not cd.startswith(_CDH):
            raise IndexError_(f"{label}: empty or unreadable central directory")
        self._cd = cd
        self._n_total = n_total
        self._entries: Optional[Dict[str, ZipEntry]] = None
        # dist-info files are written last, so METADATA usually sits in this tail already
        self._tail = tail
        self._tail_start = tail_start

    @property
    def entries(self) -> Dict[str, ZipEntry]:
        """Every member, parsed on first use (:meth:`metadata_entry` mostly needs none)."""
        if self._entries is None:
            self._entries = _parse_cd(self._cd, self.label)
        return self._entries

    def metadata_entry(self) -> Optional[ZipEntry]:
        """The wheel's top-level ``*.dist-info/METADATA``, as :meth:`find` finds it.

        Found in the directory's bytes when the answer is certain without parsing every
        member (torch lists ~15,000; parsing them all was ~0.1 s of CPU in a cold vllm
        resolve): the name occurs once, and the member signature occurs exactly as often
        as the directory says it has members, so no signature sits inside a name or a
        comment and the record found before the name is the member's own. Anything else
        parses the whole directory."""
        cd = self._cd
        at = cd.find(_METADATA)
        if at >= 0 and cd.find(_METADATA, at + 1) < 0 and cd.count(_CDH) == self._n_total:
            end = at + len(_METADATA)
            start = cd.rfind(_CDH, 0, at)
            found = _record(cd, start) if start >= 0 else None
            if found is not None:
                entry = found[0]
                if (start + 46 + len(entry.name.encode("utf-8")) == end
                        and _TOP_METADATA.search(entry.name)):
                    return entry
        return self.find(_TOP_METADATA.pattern)

    def _slice(self, tail: bytes, tail_start: int, offset: int, length: int) -> bytes:
        if offset >= tail_start:
            return tail[offset - tail_start: offset - tail_start + length]
        data, _ = self._fetch(offset, offset + length - 1)
        return data

    def find(self, pattern: str) -> Optional[ZipEntry]:
        """First entry whose name matches the regular expression ``pattern``."""
        rx = re.compile(pattern)
        for name, entry in self.entries.items():
            if rx.search(name):
                return entry
        return None

    def _span(self, offset: int, length: int) -> bytes:
        """Bytes [offset, offset+length): from the tail or head read already when one
        holds them."""
        if offset >= self._tail_start and offset + length <= self._tail_start + len(self._tail):
            i = offset - self._tail_start
            return self._tail[i:i + length]
        if offset + length <= len(self._head):
            return self._head[offset:offset + length]
        data, _ = self._fetch(offset, offset + length - 1)
        return data

    def read(self, entry: ZipEntry, limit: Optional[int] = None) -> bytes:
        """The member's bytes (decompressed); ``limit`` caps the uncompressed size.

        One request at most: the local header's extra field is guessed generously and the
        rest is fetched only if the guess was short.
        """
        guess = 30 + len(entry.name.encode()) + 256
        blob = self._span(entry.header_offset, guess + entry.compressed_size)
        if blob[:4] != _LFH:
            raise IndexError_(f"{self.label}: bad local header for {entry.name}")
        n_len, x_len = struct.unpack("<HH", blob[26:30])
        start = 30 + n_len + x_len
        if entry.compressed_size == 0:
            return b""
        data = blob[start:start + entry.compressed_size]
        if len(data) < entry.compressed_size:
            more = self._span(entry.header_offset + start + len(data),
                              entry.compressed_size - len(data))
            data += more
        if entry.method == 0:
            return data[:limit] if limit else data
        if entry.method == 8:
            d = zlib.decompressobj(-15)
            out = d.decompress(data, limit or 0)
            return out
        raise IndexError_(f"{self.label}: unsupported compression {entry.method} for "
                          f"{entry.name}")


def _speculated(head: Callable[[], Tuple[bytes, Optional[int]]], total: int) -> bytes:
    """The head read beside the directory, or nothing: it is a guess, so a failed read or
    a file that changed size meanwhile only means METADATA is fetched on its own."""
    try:
        data, size = head()
    except Exception:  # noqa: BLE001 - a guess: the read it would have spared happens
        return b""
    return data if size == total and len(data) == _HEAD else b""


_CD_RECORD = struct.Struct("<6xH8xIIHHH8xI")
_METADATA = b".dist-info/METADATA"
_TOP_METADATA = re.compile(r"^[^/]+\.dist-info/METADATA$")


def _record(cd: bytes, pos: int) -> Optional[Tuple[ZipEntry, int]]:
    """The central directory record at ``pos`` and where the next one starts (None when
    no record starts there)."""
    if pos + 46 > len(cd) or not cd.startswith(_CDH, pos):
        return None
    (method, csize, usize, n_len, x_len, c_len, offset) = _CD_RECORD.unpack_from(cd, pos + 4)
    name = cd[pos + 46:pos + 46 + n_len].decode("utf-8", "replace")
    if csize == 0xFFFFFFFF or usize == 0xFFFFFFFF or offset == 0xFFFFFFFF:
        extra = cd[pos + 46 + n_len:pos + 46 + n_len + x_len]
        usize, csize, offset = _zip64_extra(extra, usize, csize, offset)
    return ZipEntry(name, method, csize, usize, offset), pos + 46 + n_len + x_len + c_len


def _parse_cd(cd: bytes, label: str) -> Dict[str, ZipEntry]:
    entries: Dict[str, ZipEntry] = {}
    found = _record(cd, 0)
    while found is not None:
        entry, pos = found
        entries[entry.name] = entry
        found = _record(cd, pos)
    if not entries:
        raise IndexError_(f"{label}: empty or unreadable central directory")
    return entries


def _zip64_extra(extra: bytes, usize: int, csize: int, offset: int) -> Tuple[int, int, int]:
    i = 0
    while i + 4 <= len(extra):
        hid, size = struct.unpack("<HH", extra[i:i + 4])
        if hid == 1:
            body = extra[i + 4:i + 4 + size]
            vals = list(struct.unpack(f"<{len(body) // 8}Q", body[: len(body) // 8 * 8]))
            if usize == 0xFFFFFFFF and vals:
                usize = vals.pop(0)
            if csize == 0xFFFFFFFF and vals:
                csize = vals.pop(0)
            if offset == 0xFFFFFFFF and vals:
                offset = vals.pop(0)
            break
        i += 4 + size
    return usize, csize, offset
