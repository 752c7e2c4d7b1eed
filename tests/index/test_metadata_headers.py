"""Core metadata is read without the email parser when its header block is plain; the
values must be exactly what the email parser gives (the reference, and the fallback), for
any header block: folded lines, CRLF, odd control characters, non-ASCII bytes, lines that
are not headers, repeated and differently cased fields."""

from __future__ import annotations

from email.parser import BytesHeaderParser
from typing import Any, List, Optional

from hypothesis import given, settings
from hypothesis import strategies as st

from envlock.index.metadata import _plain_headers, parse_metadata

NAMES = ["Metadata-Version", "Name", "Version", "Requires-Dist", "requires-dist",
         "REQUIRES-PYTHON", "Requires-Python", "Provides-Extra", "Dynamic", "Summary",
         "Description", "Author", "License", "X Bad", "", "From", ":Colon"]
VALUES = ["2.1", "demo", "1.0", "numpy>=1.17", 'torch ; extra == "gpu"', ">=3.9",
          "  spaced  ", "", "Jos\u00e9", "a:b", "tab\there", "x\ry", "v\x0bw", "\u2028"]


def _line(name: str, value: str, sep: str) -> bytes:
    return f"{name}{sep}{value}".encode("utf-8")


lines = st.one_of(
    st.builds(_line, st.sampled_from(NAMES), st.sampled_from(VALUES),
              st.sampled_from([": ", ":", ":\t", " : "])),
    st.sampled_from([b"  continued", b"\tcontinued", b"not a header", b"From someone",
                     b"\xff\xfe bytes: x", b"Author: \xe9t\xe9", b"Requires-Dist: caf\xc3\xa9"]),
    st.binary(max_size=12),
)
blobs = st.builds(
    lambda ls, nl, body: nl.join(ls) + (nl + nl + body if body is not None else b""),
    st.lists(lines, max_size=8), st.sampled_from([b"\n", b"\r\n", b"\r"]),
    st.one_of(st.none(), st.binary(max_size=20)))

#: mostly well-formed blocks (the fast path's inputs), with one odd line now and then
plain_lines = st.one_of(
    st.builds(_line, st.sampled_from(NAMES[:10]), st.sampled_from(VALUES[:9]),
              st.sampled_from([": ", ":"])),
    st.sampled_from([b"  continued", b"Author: \xe9t\xe9", b"Requires-Dist: caf\xc3\xa9",
                     b"Summary: a\x0cb", b"Name:\tspaced\t"]))
plain_blobs = st.builds(lambda ls, body: b"\n".join(ls) + (b"\n\n" + body if body else b""),
                        st.lists(plain_lines, min_size=1, max_size=8),
                        st.one_of(st.none(), st.binary(max_size=20)))


def _reference(blob: bytes) -> Optional[Any]:
    """The fields as the email parser gives them (None where it gives a non-string)."""
    msg = BytesHeaderParser().parsebytes(blob)
    out = {}
    for key in ("Name", "Version", "Requires-Python", "Metadata-Version"):
        v = msg.get(key)
        if v is not None and not isinstance(v, str):
            return None
        out[key] = (v or "").strip()
    for key in ("Requires-Dist", "Provides-Extra", "Dynamic"):
        vs: List[Any] = msg.get_all(key) or []
        if not all(isinstance(v, str) for v in vs):
            return None
        out[key] = tuple(v.strip() for v in vs)
    return out


@settings(max_examples=600, deadline=None)
@given(st.one_of(plain_blobs, blobs))
def test_metadata_reads_as_the_email_parser_reads_it(blob: bytes) -> None:
    want = _reference(blob)
    if want is None:  # the email parser's own odd case: never taken by the fast path
        assert _plain_headers(blob) is None
        return
    m = parse_metadata(blob)
    got = {"Name": m.name, "Version": m.version, "Requires-Python": m.requires_python or "",
           "Metadata-Version": m.metadata_version, "Requires-Dist": m.requires_dist,
           "Provides-Extra": m.provides_extra, "Dynamic": m.dynamic}
    assert got == want


def test_plain_metadata_takes_the_fast_path() -> None:
    blob = (b"Metadata-Version: 2.4\nName: demo\nVersion: 1.0\nAuthor: Jos\xc3\xa9\n"
            b"Requires-Dist: numpy>=1.17\nRequires-Dist: torch ; extra == 'gpu'\n"
            b"Description: folded\n  more\n\nbody: x\n")
    fields = _plain_headers(blob)
    assert fields is not None
    assert fields["requires-dist"] == [" numpy>=1.17", " torch ; extra == 'gpu'"]
    assert parse_metadata(blob).requires_dist == ("numpy>=1.17", "torch ; extra == 'gpu'")
