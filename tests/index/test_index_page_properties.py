"""Property tests: whatever an index sends as a project page (PEP 503 HTML or PEP 691
JSON), parsing it gives a page of validated files or one :class:`IndexError_`; never
another exception (the CLI would report it as an internal error, exit 70).

The number of generated cases per test is ``ENVLOCK_PROPERTY_EXAMPLES`` (default 300);
the issue's acceptance run used 10,000.
"""

from __future__ import annotations

import json
import os
import string
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envlock.errors import IndexError_, InputError
from envlock.index.client import _range_total, parse_page
from envlock.index.config import check_url, redact
from envlock.index.page_cache import page_from_cache, page_to_cache
from envlock.index.pages import ProjectPage, valid_digest

EXAMPLES = int(os.environ.get("ENVLOCK_PROPERTY_EXAMPLES", "300"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=False,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])

PAGE_URL = "https://index.example/simple/demo/"
INDEX = "https://index.example/simple"

hexes = st.text("0123456789abcdefABCDEF", min_size=60, max_size=130)
nasty = st.sampled_from([
    "demo-1.0-py3-none-any.whl", "demo-1.0.tar.gz", "demo-2.0.zip", "Demo_X-1.0-py3-none-any.whl",
    "../../demo-1.0-py3-none-any.whl", "/etc/demo-1.0.tar.gz", "demo-1.0-py3-none-any.whl\x00",
    "..", ".", "", "demo-1.0-py3-none-any.whl/..", "C:\\demo-1.0.tar.gz", "demo-1.0.tar.bz2",
    "demo-1.0-0-py3-none-any.whl", "demo-1.0-x-py3-none-any.whl", "demo-1!0-py3-none-any.whl",
    "torch-2.5.1-cp311-cp311-linux_x86_64.whl", "demo-\u0661.0.tar.gz", "a" * 300 + ".whl",
    "demo-1.0-py3-none-any.whl\n", "demo-1.0-py3-none-any.whl\u202e",
])
filenames = st.one_of(nasty, st.text(max_size=40))
hash_values = st.one_of(hexes, st.text(max_size=70), st.sampled_from(
    ["../../../../tmp/PWNED-torch", "a" * 64, "A" * 64, "0" * 96, "f" * 128, "", "=" * 64]))
algos = st.sampled_from(["sha256", "sha384", "sha512", "md5", "sha1", "blake2b", "SHA256",
                         "", "sha256 "])
urls = st.one_of(
    st.sampled_from(["/files/demo-1.0-py3-none-any.whl", "demo-1.0.tar.gz",
                     "https://files.example/demo-1.0.tar.gz#sha256=" + "a" * 64,
                     "file:///etc/passwd", "javascript:alert(1)", "http://[::1/x",
                     "http://[zz]/x", "http://h:99999/x", "//other.example/x", "#sha256=zz",
                     "https://u:p@h/x", "data:text/plain,x", "\\\\server\\share\\x"]),
    st.text(max_size=40),
    st.builds(lambda a, v: f"/f/demo-1.0.tar.gz#{a}={v}", algos, hash_values),
)
json_leaf = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                      st.text(max_size=20))
json_any = st.recursive(json_leaf, lambda c: st.one_of(st.lists(c, max_size=4),
                                                       st.dictionaries(st.text(max_size=8), c,
                                                                       max_size=4)),
                        max_leaves=12)


def _maybe(value: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(value, json_any)


file_entries = st.fixed_dictionaries(
    {"filename": _maybe(filenames), "url": _maybe(urls)},
    optional={
        "hashes": st.one_of(st.dictionaries(algos, _maybe(hash_values), max_size=3), json_any),
        "core-metadata": st.one_of(st.booleans(),
                                   st.dictionaries(algos, _maybe(hash_values), max_size=2),
                                   json_any),
        "dist-info-metadata": json_any,
        "yanked": st.one_of(st.booleans(), st.text(max_size=10), json_any),
        "requires-python": st.one_of(st.sampled_from([">=3.8", "~=3", "garbage", ""]),
                                     json_any),
        "size": st.one_of(st.integers(), json_any),
        "upload-time": json_any,
    })
json_pages = st.one_of(
    st.fixed_dictionaries({"files": st.lists(file_entries, max_size=5)},
                          optional={"meta": json_any, "name": json_any}),
    st.fixed_dictionaries({"files": json_any}),
    json_any,
)


def _attr(name: str, value: str) -> str:
    return f'{name}="{value}"' if '"' not in value else f"{name}='{value}'"


anchor = st.builds(
    lambda href, text, attrs: (f"<a {_attr('href', href)} {' '.join(attrs)}>{text}</a>"),
    urls.filter(lambda u: '"' not in u or "'" not in u), filenames.map(
        lambda t: t.replace("<", "&lt;")),
    st.lists(st.one_of(
        st.builds(lambda a, v: _attr("data-core-metadata", f"{a}={v}"), algos, hash_values),
        st.builds(lambda v: _attr("data-dist-info-metadata", v), st.sampled_from(
            ["true", "false", "", "md5=12", "sha256=zz"])),
        st.builds(lambda v: _attr("data-requires-python", v), st.sampled_from(
            ["&gt;=3.8", "garbage", "&#x110000;", "&#0;"])),
        st.builds(lambda v: _attr("data-yanked", v), st.text(max_size=10).filter(
            lambda t: '"' not in t or "'" not in t)),
        st.just("data-yanked"),
    ), max_size=3))
html_pages = st.one_of(
    st.builds(lambda base, rows: "<html><body>" + base + "\n".join(rows) + "</body></html>",
              st.sampled_from(["", '<base href="https://mirror.example/x/">',
                               '<base href="http://[::1/">', '<base href="file:///">',
                               "<base>"]),
              st.lists(anchor, max_size=5)),
    st.text(max_size=300),
    st.text(alphabet=string.printable + "<>&#;", max_size=300),
)


def _check(page: Any) -> None:
    """Every file on a parsed page passed the boundary checks, and survives the cache."""
    assert isinstance(page, ProjectPage)
    for d in page.dists:
        assert d.filename and "/" not in d.filename and "\\" not in d.filename
        assert not d.filename.startswith("..")
        assert all(ord(c) >= 0x20 and ord(c) != 0x7F for c in d.filename)
        # a wheel name is parsed in full only when a resolver looks at it; one that does not
        # parse is then ignored (not a wheel), never taken for another project
        assert (d.parsed is None and not d.is_wheel) or d.parsed[0] == "demo"  # type: ignore[index]
        assert d.url.split(":", 1)[0].lower() in ("http", "https")
        for algo, digest in d.hashes.items():
            assert valid_digest(algo, digest)
        for algo, digest in (d.metadata or {}).items():
            assert valid_digest(algo, digest)
    again = page_from_cache(page_to_cache(page))
    assert [(d.filename, d.sha256) for d in again.dists] == \
        [(d.filename, d.sha256) for d in page.dists]
    assert again.listed == page.listed


def _parse(body: bytes, ctype: str) -> None:
    try:
        page = parse_page(body, ctype, PAGE_URL, INDEX, "demo")
    except IndexError_ as exc:
        assert "\n" not in str(exc)
        return
    _check(page)


@SETTINGS
@given(json_pages)
def test_any_json_page_parses_or_is_an_index_error(data: Any) -> None:
    try:
        body = json.dumps(data).encode()
    except ValueError:
        return
    _parse(body, "application/vnd.pypi.simple.v1+json")


@SETTINGS
@given(st.binary(max_size=200))
def test_any_bytes_as_json_parse_or_are_an_index_error(body: bytes) -> None:
    _parse(body, "application/vnd.pypi.simple.v1+json")


@SETTINGS
@given(html_pages)
def test_any_html_page_parses_or_is_an_index_error(text: str) -> None:
    _parse(text.encode("utf-8", "surrogatepass"), "text/html")


@SETTINGS
@given(st.one_of(st.text(max_size=40),
                 st.builds(lambda a, b, c: f"bytes {a}-{b}/{c}", st.text(max_size=5),
                           st.text(max_size=5), st.text(max_size=8))))
def test_any_content_range_gives_a_size_or_an_index_error(value: str) -> None:
    try:
        total = _range_total(value, "demo.whl")
    except IndexError_:
        return
    assert total is None or total >= 0


userinfo = st.text(alphabet=string.ascii_letters + string.digits + ":%!$&'()*+,;=@",
                   max_size=20)


@SETTINGS
@given(st.sampled_from(["http", "https", "ftp", "HTTP"]), userinfo,
       st.text(max_size=30).filter(lambda t: "S3CRET" not in t))
def test_redact_and_check_url_never_leak_credentials(scheme: str, user: str,
                                                     rest: str) -> None:
    """Whatever follows the credentials (a bad port, a broken IPv6 literal, spaces), they
    never reach a message."""
    url = f"{scheme}://{user}S3CRET@{rest}"
    assert "S3CRET" not in redact(url)
    try:
        check_url(url)
    except InputError as exc:
        assert "S3CRET" not in str(exc) and "\n" not in str(exc)


def _packaging_parse(fn: str) -> Any:
    """The reference: what packaging itself makes of a file name (None: not usable), by
    packaging 26.3's rules on any packaging version. 26.3 rejects an empty or
    newline-ended project name and a tag with an empty part or an interpreter that is not
    an identifier; older releases accepted them, and envlock rejects them on every version
    (26.3 raised InvalidTag from inside its own parse, which escaped as an internal error)."""
    from packaging.utils import (InvalidSdistFilename, InvalidWheelFilename,
                                 parse_sdist_filename, parse_wheel_filename)
    from packaging.version import InvalidVersion

    from envlock.wheelvariants import variant_label

    try:
        if fn.endswith(".whl"):
            if variant_label(fn) is not None:
                # PEP 825: a variant wheel is the same name plus ``-LABEL`` before ".whl"
                fn = fn[:-4].rsplit("-", 1)[0] + ".whl"
            name, version, build, tags = parse_wheel_filename(fn)
            name_part = fn[:-4].split("-")[0]
            tag_parts = [c.split(".") for c in fn[:-4].split("-")[-3:]]
            if (not name_part or name_part.endswith("\n")
                    or any("" in c for c in tag_parts)
                    or not all(i.isidentifier() for i in tag_parts[0])):
                return None  # what packaging < 26.3 let through
            return str(name), version, build, tags, "wheel"
        if fn.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(fn)
            if not name:
                return None  # packaging < 26.3 let an empty name through
            return str(name), version, (), frozenset(), "sdist"
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None


name_parts = st.one_of(st.sampled_from(["demo", "Demo_X", "a.b", "a__b", "x-y", "", "ü", "1"]),
                       st.text(max_size=8))
version_parts = st.one_of(st.sampled_from(["1.0", "2.5.1+cu124", "1!0", "3.9b1", "1.0.post1",
                                           "v1", "1_0", "x", "", "\u0661.0"]),
                          st.text(max_size=8))
build_parts = st.sampled_from(["", "-1", "-0x", "-x", "-12abc", "-", "-\u0661"])
tag_parts = st.one_of(st.sampled_from(["py3-none-any",
                                       "cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64",
                                       "py2.py3-none-any", "a-b",
                                       "cp39.cp311-abi3-win_amd64", "--", "x-y-z-w",
                                       "cp311-cp311-linux_x86_64-cu129",
                                       "py3-none-any-Bad", "py3-none-any-a_label_over_16_chars"]),
                      st.text(max_size=12))
file_names = st.one_of(
    nasty,
    st.text(max_size=40),
    st.builds(lambda n, v, b, t: f"{n}-{v}{b}-{t}.whl", name_parts, version_parts, build_parts,
              tag_parts),
    st.builds(lambda n, v, ext: f"{n}-{v}{ext}", name_parts, version_parts,
              st.sampled_from([".tar.gz", ".zip", ".tar.bz2", ""])),
)


@SETTINGS
@given(file_names)
def test_file_names_parse_as_packaging_parses_them(fn: str) -> None:
    """envlock parses wheel and sdist names itself (sharing version and tag parses across
    a page's files, for speed): the answer must be packaging's, for any name."""
    from envlock.index.pages import parse_filename

    assert parse_filename(fn) == _packaging_parse(fn)


@pytest.mark.parametrize("fn,label", [
    ("torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64-cu129.whl", "cu129"),
    ("torch-2.8.0-1-cp311-cp311-manylinux_2_28_x86_64-cu12.9_x.whl", "cu12.9_x"),
    ("torch-2.8.0-1-cp311-cp311-manylinux_2_28_x86_64.whl", None),
    ("torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64.whl", None),
])
def test_a_variant_wheel_name_parses_and_keeps_its_label(fn: str, label: str) -> None:
    """PEP 825's file name: the label after the platform tag; the rest parses as before."""
    from envlock.index.pages import Dist, parse_filename

    p = parse_filename(fn)
    assert p is not None and p[0] == "torch" and str(p[1]) == "2.8.0"
    assert {str(t) for t in p[3]} == {"cp311-cp311-manylinux_2_28_x86_64"}
    assert Dist(fn, "https://x/" + fn, "https://x/", {}).variant == label


@pytest.mark.parametrize("fn", ["torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64-CU129.whl",
                                "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64-a_label_over_16ch.whl",
                                "torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64-.whl",
                                "torch-2.8.0-1-x-cp311-cp311-manylinux_2_28_x86_64-cu129.whl"])
def test_a_malformed_variant_label_is_not_a_usable_file(fn: str) -> None:
    from envlock.index.pages import parse_filename

    assert parse_filename(fn) is None


def test_a_page_keeps_the_variants_json_link() -> None:
    """PEP 825: the index links ``{name}-{version}-variants.json`` next to the wheels; a
    page keeps it (another project's is dropped, as other projects' files are)."""
    from envlock.index.pages import parse_html

    html = ('<a href="vkern-1.0-cp311-cp311-linux_x86_64-cu129.whl">'
            'vkern-1.0-cp311-cp311-linux_x86_64-cu129.whl</a>'
            '<a href="vkern-1.0-variants.json">vkern-1.0-variants.json</a>'
            '<a href="other-1.0-variants.json">other-1.0-variants.json</a>')
    page = parse_html(html, "https://idx/simple/vkern/", "https://idx/simple/", "vkern")
    names = {d.filename: d for d in page.dists}
    assert set(names) == {"vkern-1.0-cp311-cp311-linux_x86_64-cu129.whl",
                          "vkern-1.0-variants.json"}
    assert names["vkern-1.0-variants.json"].variants_json_of == "1.0"
    assert names["vkern-1.0-variants.json"].parsed is None


def test_a_compressed_tag_set_that_explodes_is_not_a_usable_file() -> None:
    """A hostile index can name a wheel whose compressed tag set stands for millions of
    tags (60 x 60 x 60 here): it is not a file anyone can install, and expanding it would
    cost seconds and hundreds of megabytes per name. Real wheels stand for a handful."""
    from envlock.index.pages import MAX_TAGS, parse_filename

    many = ".".join(f"x{i}" for i in range(60))
    assert parse_filename(f"demo-1.0-{many}-{many}-{many}.whl") is None
    fine = ".".join(f"cp3{i}" for i in range(MAX_TAGS))
    assert len(parse_filename(f"demo-1.0-{fine}-none-any.whl")[3]) == MAX_TAGS


@pytest.mark.parametrize("fn", ["-0-A-0-0.whl", "-0-0-0-0.whl", "demo-1.0-0-none-any.whl",
                                "demo-1.0-py3..py2-none-any.whl", "demo\n-1.0-py3-none-any.whl",
                                "-1.0.tar.gz"])
def test_names_that_new_packaging_rejects_are_rejected_on_every_version(fn: str) -> None:
    """The names packaging 26.3 raises for (the first two from a hypothesis run on a
    machine that had it: InvalidTag escaped the parse there) are unusable files whatever
    packaging is installed, not an internal error."""
    from envlock.index.pages import parse_filename

    assert parse_filename(fn) is None


good_names = st.sampled_from(["demo-1.0-py3-none-any.whl", "demo-1.0.tar.gz", "Demo_X-2.0.zip",
                              "demo-1.0-1-cp311-cp311-manylinux_2_17_x86_64.whl",
                              "other-1.0-py3-none-any.whl", "demo-notaversion-py3-none-any.whl",
                              "demo-1.0.tar.bz2"])
good_files = st.builds(
    lambda fn, h, rp, y, m, size: {
        "filename": fn, "url": "https://files.example/packages/ab/cd/" + fn,
        "hashes": {"sha256": h}, "requires-python": rp, "yanked": y, "core-metadata": m,
        "size": size, "upload-time": "2024-01-01T00:00:00Z"},
    good_names, st.sampled_from(["a" * 64, "0123456789abcdef" * 4]),
    st.sampled_from([None, ">=3.8", ""]), st.sampled_from([False, True, "", "broken"]),
    st.sampled_from([None, False, True, {"sha256": "b" * 64}]),
    st.sampled_from([None, 0, 123]))
#: one field of a good entry replaced by anything a hostile index might send
pypi_files = st.one_of(
    good_files,
    st.builds(lambda f, key, value: {**f, key: value}, good_files,
              st.sampled_from(["filename", "url", "hashes", "requires-python", "yanked",
                               "core-metadata", "dist-info-metadata", "size", "upload-time"]),
              st.one_of(filenames, urls, hash_values,
                        st.sampled_from(["https://files.example/a\nhttps://files.example/b",
                                         "https://files.example/a\tb", "HTTPS://files.example/a",
                                         "https://files.example/./a"]),
                        st.dictionaries(algos, hash_values, max_size=2), json_any)),
    st.builds(lambda f, key: {k: v for k, v in f.items() if k != key}, good_files,
              st.sampled_from(["filename", "url", "hashes", "yanked", "core-metadata"])),
)


@SETTINGS
@given(st.lists(pypi_files, max_size=6))
def test_the_column_checks_accept_only_what_the_file_by_file_path_accepts(files: Any) -> None:
    """PEP 691 pages in PyPI's shape are checked column by column (fast); whenever that
    path accepts a page, the file-by-file path accepts it too and gives the same files."""
    from envlock.index.pages import MalformedPage, _json_columns, _parse_json_rows

    columns = _json_columns(files)
    if columns is None:
        return
    fast = ProjectPage("demo", INDEX, PAGE_URL, columns=columns)
    try:
        slow = _parse_json_rows(files, PAGE_URL, INDEX, "demo")
    except MalformedPage as exc:  # pragma: no cover - the property's failure
        raise AssertionError(f"the column checks accepted a page the file-by-file path "
                             f"refuses: {exc}") from None
    assert fast.dists == slow.dists
    _check(fast)


@SETTINGS
@given(st.lists(good_files, max_size=6))
def test_pages_in_pypis_shape_take_the_column_path(files: Any) -> None:
    """Pages as PyPI sends them are read column by column (the fast path), and their
    cached form reads back to the same files."""
    from envlock.index.pages import _json_columns

    columns = _json_columns(files)
    assert columns is not None
    page = ProjectPage("demo", INDEX, PAGE_URL, columns=columns)
    again = page_from_cache(page_to_cache(page))
    assert again.dists == page.dists


@SETTINGS
@given(st.lists(st.one_of(filenames, st.sampled_from([".", "..", "a/b", "..x", "x..", "a\\b",
                                                     "./x", "x/.", "\x7f", "é" * 256])),
                min_size=1, max_size=6),
       st.lists(st.one_of(hash_values, st.sampled_from(["", "a" * 64, "A" * 64, "é" * 64])),
                min_size=1, max_size=6))
def test_column_checks_are_the_row_checks(names: Any, digests: Any) -> None:
    """The checks that run on a whole column at once answer as the per-file rules do."""
    from envlock.index.pages import _bad_filename, _bare_names, _sha256_digests

    assert _bare_names(names) == all(_bad_filename(n) is None for n in names)
    assert _sha256_digests(digests, empty_ok=False) == \
        all(valid_digest("sha256", d) and d == d.lower() for d in digests)
    assert _sha256_digests(digests, empty_ok=True) == \
        all(d == "" or (valid_digest("sha256", d) and d == d.lower()) for d in digests)


def test_a_link_with_a_line_break_is_read_as_urljoin_reads_it() -> None:
    """Links are checked joined by line breaks: one holding a break must not pass as two
    good lines (urljoin drops the break; the page must say what urljoin says)."""
    from envlock.index.pages import parse_json

    entry = {"filename": "demo-1.0-py3-none-any.whl",
             "url": "https://files.example/a\nhttps://files.example/b",
             "hashes": {"sha256": "a" * 64}}
    page = parse_json({"files": [entry]}, PAGE_URL, INDEX, "demo")
    assert [d.url for d in page.dists] == ["https://files.example/ahttps://files.example/b"]


def _rows_for(names: Any) -> Any:
    return [[n, "https://files.example/packages/" + str(i), "a" * 64, None, None,
             {"sha256": "b" * 64}, None, None] for i, n in enumerate(names)]


wheel_triples = st.sampled_from(["-py3-none-any.whl", "-cp311-cp311-manylinux_2_17_x86_64.whl",
                                 "-cp311-cp311-win_amd64.whl", "-py2.py3-none-any.whl"])
page_names = st.lists(st.one_of(
    st.builds(lambda v, t: f"demo-{v}{t}", st.sampled_from(["1.0", "2.0", "1.0-1"]),
              wheel_triples),
    st.sampled_from(["demo-1.0.tar.gz", "demo-1.0-any.whl", "demo.whl", "other-1.0.zip",
                     "demo-1.0-py3-none-any.whl.asc", "demo-1-2-3-4-5-6.whl"]),
    st.text("ab-.whl", max_size=20).filter(lambda t: t not in ("", ".", "..")
                                           and not t.startswith(".."))), max_size=12)


@SETTINGS
@given(page_names, st.sets(wheel_triples))
def test_selecting_by_triple_is_selecting_by_file_name(names: Any, fitting: Any) -> None:
    """``select_triples`` asks once per tag triple what asking per file name would answer,
    in page order, from a fresh page and from its cached form (which keeps the grouping)."""
    from envlock.index.pages import triple_key

    def fits(key: str) -> bool:
        return key in fitting

    page = ProjectPage("demo", INDEX, PAGE_URL, rows=_rows_for(names))
    want = page.select(lambda fn: not triple_key(fn) or fits(triple_key(fn)))
    assert page.select_triples(fits) == want
    blob = page_to_cache(page)
    again = page_from_cache(blob)
    assert again._groups == page.groups()  # the cached grouping was accepted
    assert again.select_triples(fits) == want


def test_a_tampered_grouping_in_the_cache_is_not_used() -> None:
    """The cached grouping by tag triple decides which files a resolver sees: one that is
    not exactly what the file names give (a file moved to another triple, left out, listed
    twice, a position that is not an int) is dropped and computed again, so a planted entry
    cannot hide a file that way."""
    names = ["demo-1.0-py3-none-any.whl", "demo-1.0-cp311-cp311-win_amd64.whl",
             "demo-1.0.tar.gz", "demo-2.0-py3-none-any.whl"]
    page = ProjectPage("demo", INDEX, PAGE_URL, rows=_rows_for(names))
    data = json.loads(page_to_cache(page))
    assert data["groups"] == {"-py3-none-any.whl": [0, 3], "-cp311-cp311-win_amd64.whl": [1],
                              "": [2]}
    tampered = [
        {"-py3-none-any.whl": [0], "-cp311-cp311-win_amd64.whl": [1, 3], "": [2]},
        {"-py3-none-any.whl": [0, 3], "-cp311-cp311-win_amd64.whl": [1]},
        {"-py3-none-any.whl": [0, 3, 3], "-cp311-cp311-win_amd64.whl": [1], "": [2]},
        {"-py3-none-any.whl": [0, True], "-cp311-cp311-win_amd64.whl": [1], "": [2, 3]},
        {"-py3-none-any.whl": [0, 3], "": [1, 2]},
        {"-none-any.whl": [0, 3], "-cp311-cp311-win_amd64.whl": [1], "": [2]},
        {"-py3-none-any.whl": [0, 3], "-cp311-cp311-win_amd64.whl": [1], "": [2], "x": []},
        [[0, 1, 2, 3]],
    ]
    keep_all_but_win = lambda key: "win" not in key  # noqa: E731
    for groups in tampered:
        again = page_from_cache(json.dumps({**data, "groups": groups}).encode())
        assert again._groups is None, groups
        assert [d.filename for d in again.select_triples(keep_all_but_win)] == \
            ["demo-1.0-py3-none-any.whl", "demo-1.0.tar.gz", "demo-2.0-py3-none-any.whl"]


@SETTINGS
@given(st.lists(st.one_of(st.none(), st.just({}),
                          st.dictionaries(algos, hash_values, min_size=1, max_size=2),
                          st.builds(lambda h: {"sha256": h}, hash_values)), max_size=5))
def test_the_metadata_hash_column_check_is_the_row_check(column: Any) -> None:
    """The fast check of a cached page's metadata hashes accepts only columns that the
    row-by-row rule accepts, and then gives each row the same hashes."""
    from envlock.index.page_cache import _check_metadata
    from envlock.index.pages import MalformedPage, _dist_from_checked_row, _metadata_hashes

    try:
        _check_metadata(column, "demo")
    except (ValueError, TypeError):
        return
    for m in column:
        if m is None:
            continue
        try:
            slow = _metadata_hashes(m, "demo")
        except MalformedPage:  # pragma: no cover - the property's failure
            raise AssertionError(f"the column check accepted {m!r}") from None
        row = ["demo-1.0.tar.gz", "https://files.example/x", "", None, None, m, None, None]
        d = _dist_from_checked_row(row, INDEX, "demo")
        assert d is not None and d.metadata == slow


@SETTINGS
@given(st.lists(st.one_of(st.just(""), st.just("-"), hash_values,
                          st.sampled_from(["a" * 63 + "-", "-" * 64, "--", "a" * 64 + "\n",
                                           "é" * 64, "A" * 64])), max_size=6))
def test_the_short_metadata_column_is_read_as_its_values_say(column: Any) -> None:
    """The cache keeps the metadata column short ("" none, "-" a file with no hash, else
    its sha256). The check over the whole column accepts exactly the columns whose every
    value is one of those, and each value then reads back as the long form."""
    from envlock.index.page_cache import _check_metadata
    from envlock.index.pages import _dist_from_checked_row

    each_ok = all(v in ("", "-") or (valid_digest("sha256", v) and v == v.lower())
                  for v in column)
    try:
        _check_metadata(column, "demo")
        accepted = True
    except ValueError:
        accepted = False
    assert accepted == each_ok
    if not accepted:
        return
    for v in column:
        row = ["demo-1.0.tar.gz", "https://files.example/x", "", None, None, v, None, None]
        d = _dist_from_checked_row(row, INDEX, "demo")
        assert d is not None
        assert d.metadata == (None if v == "" else {} if v == "-" else {"sha256": v})


def test_a_page_read_file_by_file_counts_every_file_it_lists() -> None:
    """A JSON page not in PyPI's shape (a relative link) is read file by file, which drops
    a file no resolve can use; it still counts as listed, as on a page read by columns
    (whether an index lists a project decides which index a resolve reads), and the
    count survives the parsed-page cache, so a warm run judges as the cold one did."""
    ctype = "application/vnd.pypi.simple.v1+json"
    body = json.dumps({"files": [
        {"filename": "other-1.0-py3-none-any.whl", "url": "other-1.0-py3-none-any.whl",
         "hashes": {"sha256": "a" * 64}}]}).encode()
    page = parse_page(body, ctype, PAGE_URL, INDEX, "demo")
    assert page.dists == () and page.listed == 1
    data = json.loads(page_to_cache(page))
    assert data["listed"] == 1 and page_from_cache(page_to_cache(page)).listed == 1
    for bad in (-1, "1", 1.0, True, 10 ** 9):  # not a count, or none a page nears
        with pytest.raises(TypeError):
            page_from_cache(json.dumps({**data, "listed": bad}).encode())
    usable = json.dumps({"files": [
        {"filename": "demo-1.0-py3-none-any.whl", "url": "demo-1.0-py3-none-any.whl",
         "hashes": {"sha256": "b" * 64}}]}).encode()
    data = json.loads(page_to_cache(parse_page(usable, ctype, PAGE_URL, INDEX, "demo")))
    assert "listed" not in data  # (as many as it holds: the entry has no count)
    with pytest.raises(TypeError):  # fewer listed than the entry holds
        page_from_cache(json.dumps({**data, "listed": 0}).encode())
