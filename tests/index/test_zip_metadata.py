"""A wheel's METADATA found in its central directory's bytes
(:meth:`~envlock.index.zipread.RemoteZip.metadata_entry`) must be the member a full parse
of the directory finds, for any wheel: signatures inside names and comments, several
METADATA files, none at all. Real zips (``zipfile``), read through range reads of their
bytes."""

from __future__ import annotations

import io
import os
import struct
import zipfile
from typing import List, Optional, Tuple

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envlock.errors import IndexError_
from envlock.index.zipread import RemoteZip

EXAMPLES = int(os.environ.get("ENVLOCK_PROPERTY_EXAMPLES", "300"))
TOP = r"^[^/]+\.dist-info/METADATA$"


#: a central directory record for a METADATA member that is not in the zip (its offset
#: points at the first member), to plant in a comment
_FAKE = (b"PK\x01\x02" + struct.pack("<6xH8xIIHHH8xI", 0, 1, 1,
                                        len(b"demo-1.0.dist-info/METADATA"), 0, 0, 0)
         + b"demo-1.0.dist-info/METADATA")


def _zip(members: List[Tuple[str, bytes]], comments: Optional[List[bytes]] = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for i, (name, data) in enumerate(members):
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            if comments and i < len(comments):
                info.comment = comments[i]
            zf.writestr(info, data)
    return buf.getvalue()


def _remote(blob: bytes, size: Optional[int] = None
            ) -> Tuple[RemoteZip, List[Tuple[Optional[int], Optional[int]]]]:
    """``blob`` read through range requests (recorded); ``size`` as an index page says."""
    asked: List[Tuple[Optional[int], Optional[int]]] = []

    def fetch(start: Optional[int], end: Optional[int]) -> Tuple[bytes, Optional[int]]:
        asked.append((start, end))
        if start is None:
            return blob[-(end or 0):], len(blob)
        return blob[start:(end + 1) if end is not None else None], len(blob)

    return RemoteZip(fetch, "demo.whl", size=size), asked


def _found(blob: bytes) -> Tuple[Optional[str], Optional[bytes], Optional[str]]:
    z, _ = _remote(blob)
    fast = z.metadata_entry()
    whole, _ = _remote(blob)
    slow = whole.find(TOP)
    return (fast.name if fast else None, z.read(fast) if fast else None,
            slow.name if slow else None)


def test_a_big_wheel_gives_its_metadata_without_parsing_every_member() -> None:
    members = [(f"demo/m{i}.py", b"x = 1\n") for i in range(3000)]
    members += [("demo-1.0.dist-info/METADATA", b"Name: demo\nVersion: 1.0\n"),
                ("demo-1.0.dist-info/RECORD", b"")]
    z, _ = _remote(_zip(members))
    entry = z.metadata_entry()
    assert entry is not None and entry.name == "demo-1.0.dist-info/METADATA"
    assert z.read(entry) == b"Name: demo\nVersion: 1.0\n"
    assert z._entries is None  # (the directory was not parsed)


@pytest.mark.parametrize("members, comments", [
    # a member signature inside a name: the bytes cannot be trusted to start records
    ([("demo/PK\x01\x02.py", b"1"), ("demo-1.0.dist-info/METADATA", b"Name: demo\n")], None),
    # ... or inside a member's comment
    ([("a.py", b"1"), ("demo-1.0.dist-info/METADATA", b"Name: demo\n")],
     [b"PK\x01\x02" + b"\0" * 60]),
    # a METADATA deeper down first, the top-level one after it
    ([("vendored/x-1.0.dist-info/METADATA", b"Name: x\n"),
      ("demo-1.0.dist-info/METADATA", b"Name: demo\n")], None),
    # only one deeper down: none at the top
    ([("vendored/x-1.0.dist-info/METADATA", b"Name: x\n"), ("a.py", b"1")], None),
    # none
    ([("a.py", b"1")], None),
    # the name as a comment, not a member
    ([("a.py", b"1"), ("demo-1.0.dist-info/RECORD", b"")], [b"demo-1.0.dist-info/METADATA"]),
    # a whole record planted in a comment: no member has that name
    ([("a.py", b"1"), ("demo-1.0.dist-info/RECORD", b"")], [_FAKE]),
])
def test_unusual_directories_give_what_a_full_parse_gives(members: List[Tuple[str, bytes]],
                                                          comments: Optional[List[bytes]]) -> None:
    fast, data, slow = _found(_zip(members, comments))
    assert fast == slow
    if fast is not None:
        assert data == dict(members)[fast]


names = st.one_of(
    st.sampled_from(["demo-1.0.dist-info/METADATA", "demo-1.0.dist-info/RECORD",
                     "x/y-1.0.dist-info/METADATA", "demo/__init__.py", "PK\x01\x02",
                     "a.dist-info/METADATA/b", ".dist-info/METADATA", "b-2.dist-info/METADATA"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
            min_size=1, max_size=20))


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(names, st.binary(max_size=40)), min_size=1, max_size=12),
       st.lists(st.sampled_from([b"", b"PK\x01\x02", b"demo-1.0.dist-info/METADATA"]),
                max_size=12))
def test_any_wheel_gives_the_member_a_full_parse_finds(members: List[Tuple[str, bytes]],
                                                        comments: List[bytes]) -> None:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # zipfile warns of duplicate names: wanted here
        blob = _zip(members, comments)
    fast, _, slow = _found(blob)
    assert fast == slow


# -- a long central directory: the head read beside it ----------------------------------

def _long_wheel(dist_info_first: bool) -> bytes:
    """A wheel of 5,000 members with long names (a central directory of ~1.2 MB, as
    torch's), its dist-info first (torch <= 2.6, tensorflow) or last (most wheels)."""
    meta = [("demo-1.0.dist-info/METADATA", b"Name: demo\nVersion: 1.0\nRequires-Dist: dep\n")]
    body = [(f"demo/{'d' * 180}/m{i:05d}.py", b"") for i in range(5000)]
    return _zip(meta + body if dist_info_first else body + meta)


def _remote_beside(blob: bytes, head_fails: bool = False, head_size: Optional[int] = None):
    asked: List[Tuple[str, Optional[int], Optional[int]]] = []

    def fetch(start: Optional[int], end: Optional[int]) -> Tuple[bytes, Optional[int]]:
        asked.append(("fetch", start, end))
        if start is None:
            return blob[-(end or 0):], len(blob)
        return blob[start:(end + 1) if end is not None else None], len(blob)

    def beside(start: int, end: int):
        asked.append(("beside", start, end))

        def result() -> Tuple[bytes, Optional[int]]:
            if head_fails:
                raise IndexError_("demo.whl: connection reset")
            return blob[start:end + 1], head_size or len(blob)

        return result

    return RemoteZip(fetch, "demo.whl", beside), asked


def test_a_long_directory_has_the_head_read_beside_it_so_front_metadata_costs_no_third_read() -> None:
    blob = _long_wheel(dist_info_first=True)
    z, asked = _remote_beside(blob)
    entry = z.metadata_entry()
    assert entry is not None and entry.header_offset == 0
    assert z.read(entry) == b"Name: demo\nVersion: 1.0\nRequires-Dist: dep\n"
    # the tail, the head beside the directory, the directory: nothing after it
    assert [kind for kind, _, _ in asked] == ["fetch", "beside", "fetch"]
    assert asked[1][1:] == (0, 256 * 1024 - 1)


def test_metadata_at_the_end_of_a_long_directory_wheel_is_still_read() -> None:
    blob = _long_wheel(dist_info_first=False)
    z, asked = _remote_beside(blob)
    entry = z.metadata_entry()
    assert entry is not None
    assert z.read(entry) == b"Name: demo\nVersion: 1.0\nRequires-Dist: dep\n"


@pytest.mark.parametrize("head_fails, head_size", [(True, None), (False, 12345)])
def test_a_failed_or_stale_head_read_only_costs_the_read_it_would_have_spared(
        head_fails: bool, head_size: Optional[int]) -> None:
    blob = _long_wheel(dist_info_first=True)
    z, asked = _remote_beside(blob, head_fails=head_fails, head_size=head_size)
    entry = z.metadata_entry()
    assert entry is not None
    assert z.read(entry) == b"Name: demo\nVersion: 1.0\nRequires-Dist: dep\n"
    assert [kind for kind, _, _ in asked] == ["fetch", "beside", "fetch", "fetch"]
    assert asked[-1][1] == 0  # METADATA read on its own, from the wheel itself


def test_a_short_directory_reads_no_head() -> None:
    members = [(f"demo/m{i}.py", b"x = 1\n") for i in range(3000)]
    members += [("demo-1.0.dist-info/METADATA", b"Name: demo\n")]
    z, asked = _remote_beside(_zip(members))
    assert z.read(z.metadata_entry()) == b"Name: demo\n"
    assert "beside" not in [kind for kind, _, _ in asked]


# -- a small wheel: read whole -------------------------------------------------------------

def _small_front_wheel() -> bytes:
    """~150 KB, its dist-info first (as pdm-backend writes it: fastapi, typer)."""
    meta = [("demo-1.0.dist-info/METADATA", b"Name: demo\nVersion: 1.0\n")]
    return _zip(meta + [("demo/data.bin", os.urandom(150 * 1024))])


def test_a_small_wheel_of_known_size_is_read_whole_in_one_request() -> None:
    blob = _small_front_wheel()
    z, asked = _remote(blob, size=len(blob))
    assert z.read(z.metadata_entry()) == b"Name: demo\nVersion: 1.0\n"
    assert asked == [(None, len(blob))]
    # without the size (an HTML page gives none): the tail, then the head
    z, asked2 = _remote(blob)
    assert z.read(z.metadata_entry()) == b"Name: demo\nVersion: 1.0\n"
    assert len(asked2) == 2


@pytest.mark.parametrize("claimed", [100, 100 * 1024, 10 ** 12, -5])
def test_a_size_the_page_gets_wrong_still_gives_the_metadata(claimed: int) -> None:
    z, asked = _remote(_small_front_wheel(), size=claimed)
    assert z.read(z.metadata_entry()) == b"Name: demo\nVersion: 1.0\n"
    assert asked[0][1] <= 256 * 1024  # never more than a small wheel's worth up front
