"""A PEP 691 page cut to the files a target can use before it is decoded
(:mod:`envlock.index.json_narrow`): the page a cold resolve keeps must be exactly the one
decoding the whole page and narrowing it gives, whatever the JSON's formatting, and any
page not in the plain shape goes to the whole parse (the cut returns None, never raises).

The number of generated cases per test is ``ENVLOCK_PROPERTY_EXAMPLES`` (default 300).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from envlock.errors import IndexError_
from envlock.index import IndexClient, IndexConfig
from envlock.index.client import _narrowed_page, parse_page
from envlock.index.json_narrow import narrowed_json
from envlock.index.pages import triple_key, triple_tails
from envlock.platforms import Target
from envlock.resolve.closure import triple_filter
from support.index_server import IndexServer, make_wheel

EXAMPLES = int(os.environ.get("ENVLOCK_PROPERTY_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

URL = "https://index.example/simple/demo/"
INDEX = "https://index.example/simple"
JSON = "application/vnd.pypi.simple.v1+json"
FITS = triple_filter([Target(python="3.11", platform="linux_x86_64", glibc="2.28")])

# file names a real page mixes: wheels for the target and for everything else, pure
# wheels, sdists, build tags, PEP 825 variant labels, names with odd dashes
TRIPLES = ["-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
           "-cp311-cp311-manylinux_2_28_aarch64.whl", "-cp311-cp311-win_amd64.whl",
           "-cp310-cp310-manylinux_2_17_x86_64.whl", "-cp311-cp311-macosx_11_0_arm64.whl",
           "-py3-none-any.whl", "-cp311-abi3-manylinux_2_34_x86_64.whl",
           "-cp313-cp313t-musllinux_1_2_x86_64.whl", "-py2.py3-none-any.whl",
           "-cp311-cp311-linux_x86_64-cu129.whl", "-cp311-cp311-win_amd64-cu126.whl"]
names = st.one_of(
    st.builds(lambda v, t: f"demo-{v}{t}", st.sampled_from(["1.0", "2.0", "2.1.post1"]),
              st.sampled_from(TRIPLES)),
    st.builds(lambda v, b, t: f"demo-{v}-{b}{t}", st.sampled_from(["1.0", "3.0"]),
              st.sampled_from(["1", "2_x"]), st.sampled_from(TRIPLES)),
    st.sampled_from(["demo-1.0.tar.gz", "demo-2.0.zip", "demo-3.0.tar.gz",
                     "demo-1.0-py3-none-any.whl", "other-1.0-py3-none-any.whl",
                     "demo_x-1.0-py3-none-any.whl", "x-1-2-3.whl", "---.whl"]),
)
digest = st.text("0123456789abcdef", min_size=64, max_size=64)


@st.composite
def files(draw: Any) -> Dict[str, Any]:
    name = draw(names)
    f: Dict[str, Any] = {"filename": name, "url": f"https://files.example/p/{name}",
                         "hashes": {"sha256": draw(digest)}}
    if draw(st.booleans()):
        f["requires-python"] = draw(st.sampled_from([">=3.8", None, "<4,>=3.9"]))
    if draw(st.booleans()):
        f["core-metadata"] = draw(st.one_of(st.booleans(),
                                            st.builds(lambda d: {"sha256": d}, digest)))
    if draw(st.booleans()):
        f["yanked"] = draw(st.one_of(st.booleans(), st.sampled_from(["broken", ""])))
    if draw(st.booleans()):
        f["size"] = draw(st.integers(0, 10 ** 9))
        f["upload-time"] = "2024-10-29T16:57:11.123456Z"
    return f


FORMATS = [dict(separators=(",", ":")), dict(), dict(indent=2), dict(indent="\t"),
           dict(separators=(" , ", " : "))]


@st.composite
def pages(draw: Any) -> bytes:
    listed = draw(st.lists(files(), min_size=1, max_size=40))
    doc: Dict[str, Any] = {}
    if draw(st.booleans()):  # other members before the list, or after it
        doc["meta"] = {"api-version": "1.1", "_last-serial": 1}
    doc["files"] = listed
    doc["name"] = "demo"
    if draw(st.booleans()):
        doc["versions"] = ["1.0", "2.0"]
    fmt = draw(st.sampled_from(FORMATS))
    return json.dumps(doc, **fmt).encode()


def _whole(body: bytes) -> Any:
    return parse_page(body, JSON, URL, INDEX, "demo").narrowed(FITS)


def _same(a: Any, b: Any) -> bool:
    """The same files (every field of every usable one), the same count of files listed,
    the same page: what a resolve reads of it. How the page holds them may differ: a page
    in an odd shape is read file by file, which drops a file no resolve can use, and the
    few files of its cut may be read as columns, which keep that file's name."""
    return (a.dists, a.listed, a.name, a.index, a.url) == (b.dists, b.listed, b.name,
                                                           b.index, b.url)


@SETTINGS
@given(pages())
def test_the_cut_page_is_the_narrowed_whole_page(body: bytes) -> None:
    cut = _narrowed_page(body, JSON, URL, INDEX, "demo", FITS)
    assert cut is not None
    assert _same(cut, _whole(body))


@SETTINGS
@given(st.lists(files(), min_size=1, max_size=10), st.integers(0, 9),
       st.sampled_from(["\\u0041", "\\\"", "\\n"]))
def test_a_name_with_an_escape_sends_the_page_to_the_whole_parse(
        listed: List[Dict[str, Any]], at: int, escape: str) -> None:
    body = json.dumps({"files": listed}).encode()
    name = listed[at % len(listed)]["filename"]
    body = body.replace(f'"filename": "{name}"'.encode(),
                        f'"filename": "{name[:2]}{escape}{name[2:]}"'.encode(), 1)
    assert narrowed_json(body, FITS) is None


@SETTINGS
@given(st.lists(names | st.text(st.sampled_from("ab1.-_+"), max_size=12).map(
    lambda t: t + ".whl") | st.text(max_size=20), max_size=30))
@example(["demo-1.0-py3-none-any.tar.gz", "a-1-2-3-4", "demo-1.0-7-py3-none-any.whl",
          "demo-1.0-cp311-cp311-linux_x86_64-cu129.whl", "a-1.whl", "-.whl", ""])
def test_triple_keys_are_triple_key_without_the_dash(listed: List[str]) -> None:
    """The cut's triples, four-dash names found in bulk, equal triple_key's (the whole
    parse's grouping) for any names: variant labels, build tags, too few dashes, none."""
    keys = triple_tails(listed)
    assert ["-" + k if k else "" for k in keys] == list(map(triple_key, listed))


def _page(files_text: str, before: str = "", after: str = ',"name":"demo"}') -> bytes:
    return ("{" + before + '"files":[' + files_text + "]" + after).encode()


ONE = ('{"filename":"demo-1.0-py3-none-any.whl","url":"https://f.example/a.whl",'
       '"hashes":{"sha256":"' + "a" * 64 + '"}}')
WIN = ('{"filename":"demo-1.0-cp311-cp311-win_amd64.whl","url":"https://f.example/w.whl",'
       '"hashes":{"sha256":"' + "b" * 64 + '"}}')


@pytest.mark.parametrize("body, why", [
    (b'{"name":"demo","files":[]}', "an empty list"),
    (b'[1, 2]', "not an object"),
    (b'{"meta":{}}', "no file list"),
    (_page(ONE, before='"x":{"files":[' + ONE + "]},"), "two file lists"),
    (('{"x":{"files":[' + ONE + "," + WIN + ']},"files":[]}').encode(),
     "the list inside another member"),
    (_page(ONE + "," + WIN, after=',"files":[]}'), "a later files key overrides the list"),
    (_page(ONE + "," + WIN.replace('"filename"', '"name"')), "a file without a name"),
    (_page(ONE + "," + WIN, after="]"), "a list not followed by the page's end"),
    (_page(ONE + "," + WIN, after=',"name":"demo"'), "a page cut short after the list"),
    (_page(ONE + "," + WIN, after="}}"), "garbage after the page"),
    (_page(ONE + "," + WIN[:-1]), "a last file cut short"),
    (_page(ONE + "," + WIN).replace(b"win_amd64", b"win_\xff\xfe"), "not UTF-8"),
    (_page(ONE + "," + WIN.replace('"url"', '"filename":"x.whl","url"')),
     "two names in one file"),
])
def test_pages_not_in_the_plain_shape_are_parsed_whole(body: bytes, why: str) -> None:
    assert narrowed_json(body, FITS) is None, why
    assert _narrowed_page(body, JSON, URL, INDEX, "demo", FITS) is None, why


def test_a_damaged_file_no_target_can_use_is_left_out_unread() -> None:
    """What a cut page does not decode it does not check: a Windows wheel's broken hash
    cannot fail a Linux resolve (the whole parse refuses the page)."""
    body = _page(ONE + "," + WIN.replace("b" * 64, "not a digest"))
    with pytest.raises(IndexError_, match="malformed project page"):
        parse_page(body, JSON, URL, INDEX, "demo")
    cut = _narrowed_page(body, JSON, URL, INDEX, "demo", FITS)
    assert cut is not None
    assert list(cut.filenames) == ["demo-1.0-py3-none-any.whl"] and cut.listed == 2


def test_a_damaged_file_the_target_can_use_fails_the_page_as_before() -> None:
    body = _page(ONE.replace("a" * 64, "not a digest") + "," + WIN)
    assert _narrowed_page(body, JSON, URL, INDEX, "demo", FITS) is None
    with pytest.raises(IndexError_, match="malformed project page"):
        parse_page(body, JSON, URL, INDEX, "demo")


@SETTINGS
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode)
       | pages().map(lambda b: b[:len(b) // 2] + b"}, {" + b[len(b) // 2:]))
# found by this test: a page read file by file (its one link is empty), whose one file
# no resolve can use, counted no file listed; its cut counted one
@example(b'{"files":[{"filename":"---.whl","url":"","":{"":"' + b"." * 64 + b'"}}],"":""}')
def test_the_cut_never_raises(body: bytes) -> None:
    """Any bytes: a page (equal to the whole parse's, when that parses) or None."""
    got: Optional[Any] = _narrowed_page(body, JSON, URL, INDEX, "demo", FITS)
    if got is None:
        return
    try:
        whole = _whole(body)
    except IndexError_:
        return  # (a damaged file the cut left out: see above)
    assert _same(got, whole)


def test_a_cold_client_keeps_the_cut_page_and_counts_every_file(tmp_path: Path) -> None:
    """Through a loopback index: the page a narrowing client returns holds the target's
    files, ``listed`` counts all of them, and the cache still gets the whole page (a warm
    run for another target reads it back complete)."""
    with IndexServer() as srv:
        idx = srv.add_index("pypi")
        for tag in ("py3-none-any", "cp311-cp311-win_amd64", "cp311-cp311-manylinux_2_17_x86_64",
                    "cp310-cp310-macosx_11_0_arm64"):
            idx.add(make_wheel(tmp_path / "w", "demo", "1.0", tag=tag))
        cfg = IndexConfig(index_url=srv.url("pypi"))
        with IndexClient(cfg, cache_dir=tmp_path / "cache") as c:
            c.narrow_pages(FITS)
            page = c.page(srv.url("pypi"), "demo")
            assert page is not None and page.listed == 4
            assert sorted(page.filenames) == [
                "demo-1.0-cp311-cp311-manylinux_2_17_x86_64.whl", "demo-1.0-py3-none-any.whl"]
        with IndexClient(cfg, cache_dir=tmp_path / "cache") as c:  # warm, not narrowed
            page = c.page(srv.url("pypi"), "demo")
            assert page is not None and len(page.filenames) == page.listed == 4
