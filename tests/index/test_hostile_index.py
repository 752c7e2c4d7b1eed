"""A hostile index: lying hashes, traversal names, planted metadata, links elsewhere.

Every test runs the real client (or the real CLI) against a real HTTP server on
127.0.0.1 (``support.index_server``); the hostile pages are served verbatim.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import List

import pytest

from envlock import _toml
from envlock.errors import IndexError_
from envlock.index import IndexClient, IndexConfig
from envlock.index.pages import COLUMNS, ProjectPage
from support.cli import run_cli
from support.index_server import IndexServer, make_wheel
from support.torch_world import add_package, add_torch_release

PAGE = "/pypi/simple/demo/"
WHEEL = "demo-1.0-py3-none-any.whl"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _files(root: Path) -> List[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def server(tmp_path: Path):
    with IndexServer() as srv:
        srv.add_index("pypi").add(make_wheel(tmp_path / "w", "demo", "1.0", requires=["dep"]))
        yield srv


def _client(srv: IndexServer, cache: Path) -> IndexClient:
    c = IndexClient(IndexConfig(index_url=srv.url("pypi"), retries=0, timeout=10),
                    cache_dir=cache)
    c.transport.backoff = 0.01
    return c


def _with_parsed_form(server: IndexServer, cache: Path) -> ProjectPage:
    """The page read twice, as a cold run and a warm one: its parsed form is written when
    the page is read back from the cache, not on its first fetch. The tests that plant
    values in that form need it there (a glob over nothing would plant nothing)."""
    with _client(server, cache) as c:
        first = c.page(server.url("pypi"), "demo")
    assert not list((cache / "pages").glob("*.json"))
    with _client(server, cache) as c:
        c.page(server.url("pypi"), "demo")
    assert list((cache / "pages").glob("*.json")), "no parsed form was written"
    return first


def _html(*anchors: str) -> bytes:
    return ("<!DOCTYPE html><html><body>\n" + "\n".join(anchors) + "\n</body></html>").encode()


# -- cache poisoning ----------------------------------------------------------------------

def test_an_index_claiming_another_index_hash_cannot_plant_metadata(tmp_path: Path) -> None:
    """The bad index serves a wheel of the same name whose METADATA pulls in
    ``evil-payload`` and claims the good wheel's sha256; the good index's metadata must
    still be the good one, even from a shared cache and a fresh client."""
    with IndexServer() as srv:
        good_path = srv.add_index("good").add(make_wheel(tmp_path / "good", "demo", "1.0",
                                                         requires=["dep>=2"]))
        bad = srv.add_index("bad")
        bad.add(make_wheel(tmp_path / "bad", "demo", "1.0", requires=["evil-payload"]))
        bad.claims[WHEEL] = _sha(good_path)
        cache = tmp_path / "cache"
        cfg = IndexConfig(index_url=srv.url("bad"), extra_index_urls=(srv.url("good"),))
        with IndexClient(cfg, cache_dir=cache) as c:
            d_bad = c.page(srv.url("bad"), "demo").dists[0]
            assert d_bad.sha256 == _sha(good_path)  # the lie is on the page
            assert c.metadata(d_bad).requires_dist == ("evil-payload",)
        with IndexClient(cfg, cache_dir=cache) as c:
            d_good = c.page(srv.url("good"), "demo").dists[0]
            assert d_good.sha256 == d_bad.sha256
            assert c.metadata(d_good).requires_dist == ("dep>=2",)
        assert srv.requests(f"/files/good/{WHEEL}.metadata")


@pytest.fixture(scope="module")
def poisoned_world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("poison")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        good_torch = add_torch_release(pypi, tmp, "2.5.1")
        srv.add_index("pytorch-cu124", prefix="pytorch/cu124")
        evil = srv.add_index("evil")
        evil.add(make_wheel(tmp / "evil", "torch", "2.5.1", requires=["evil-payload"],
                            tag=good_torch.name.split("-", 2)[2][:-4]))
        evil.claims[good_torch.name] = _sha(good_torch)
        add_package(evil, tmp, "evil-payload", "1.0")
        yield srv


def test_resolve_after_a_lying_index_keeps_torch_dependencies(poisoned_world: IndexServer,
                                                              tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """The reproduction from the issue: resolve once against the lying index (its torch
    metadata lands in the cache), then against the good one with the lying one as an
    extra index. The lock must keep torch's real dependencies and gain no evil-payload."""
    srv = poisoned_world
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    common = ("--pytorch-index-url", f"{srv.base}/pytorch", "--gpu", "H100 SXM",
              "--torch", "==2.5.1")
    run_cli("resolve", "--index-url", srv.url("evil"), *common, "-o", str(tmp_path / "a.lock"))
    out = tmp_path / "b.lock"
    r = run_cli("resolve", "--index-url", srv.url("pypi"), "--extra-index-url", srv.url("evil"),
                *common, "-o", str(out))
    assert r.code == 0, r.err
    names = {p["name"] for p in _toml.loads(out.read_text())["target"][0]["package"]}
    assert "evil-payload" not in names
    assert {"torch", "nvidia-cublas-cu12", "filelock"} <= names


# -- traversal and malformed hashes ---------------------------------------------------------

@pytest.mark.parametrize("fragment", [
    "sha256=../../../../tmp/PWNED-torch",
    "sha256=../../PWNED",
    "sha256=" + "g" * 64,
    "sha256=" + "a" * 63,
    "sha256=/etc/passwd",
])
def test_a_bad_hash_fragment_is_refused_and_writes_nothing(server: IndexServer, tmp_path: Path,
                                                           fragment: str) -> None:
    server.raw[PAGE] = (200, _html(f'<a href="/files/pypi/{WHEEL}#{fragment}" '
                                   f'data-core-metadata="true">{WHEEL}</a>'), "text/html")
    before = set(Path("/tmp").glob("PWNED*"))
    cache = tmp_path / "cache"
    with _client(server, cache) as c:
        with pytest.raises(IndexError_, match=r"malformed project page: .*sha256 is not 64 hex"):
            c.page(server.url("pypi"), "demo")
    assert set(Path("/tmp").glob("PWNED*")) == before
    assert not [p for p in _files(tmp_path) if "PWNED" in p]


def test_traversal_hash_in_json_writes_nothing_outside_the_cache(server: IndexServer,
                                                                 tmp_path: Path) -> None:
    target = tmp_path / "outside" / "PWNED-torch"
    target.parent.mkdir()
    evil = "../" * 30 + str(target).lstrip("/")
    page = {"meta": {"api-version": "1.1"}, "name": "demo",
            "files": [{"filename": WHEEL, "url": f"/files/pypi/{WHEEL}",
                       "hashes": {"sha256": evil}, "core-metadata": True}]}
    server.raw[PAGE] = (200, json.dumps(page).encode(), "application/vnd.pypi.simple.v1+json")
    with _client(server, tmp_path / "cache") as c:
        with pytest.raises(IndexError_, match="sha256 is not 64 hex digits"):
            c.page(server.url("pypi"), "demo")
    assert list(target.parent.iterdir()) == []


@pytest.mark.parametrize("name", [
    "../../demo-1.0-py3-none-any.whl",
    "/tmp/demo-1.0-py3-none-any.whl",
    "sub/demo-1.0-py3-none-any.whl",
    "..\\demo-1.0-py3-none-any.whl",
    "demo-1.0-py3-none-any.whl\x00.txt",
    "demo-1.0-py3-none-any\n.whl",
    "..",
])
def test_a_file_name_that_is_a_path_is_refused(server: IndexServer, tmp_path: Path,
                                               name: str) -> None:
    page = {"meta": {"api-version": "1.1"}, "name": "demo",
            "files": [{"filename": name, "url": f"/files/pypi/{WHEEL}", "hashes": {}}]}
    server.raw[PAGE] = (200, json.dumps(page).encode(), "application/vnd.pypi.simple.v1+json")
    with _client(server, tmp_path / "cache") as c:
        with pytest.raises(IndexError_, match=r"^http://127\.0\.0\.1:\d+/pypi/simple/demo/: "
                                              r"malformed project page: file name .* is "):
            c.page(server.url("pypi"), "demo")


def test_files_of_other_projects_are_ignored(server: IndexServer, tmp_path: Path) -> None:
    h = "ab" * 32
    server.raw[PAGE] = (200, _html(
        f'<a href="/files/pypi/torch-99.0-py3-none-any.whl#sha256={h}">'
        f'torch-99.0-py3-none-any.whl</a>',
        f'<a href="/files/pypi/{WHEEL}#sha256={h}">{WHEEL}</a>',
        f'<a href="/files/pypi/demo-1.0.tar.bz2#sha256={h}">demo-1.0.tar.bz2</a>'), "text/html")
    with _client(server, tmp_path / "cache") as c:
        page = c.page(server.url("pypi"), "demo")
    assert [d.filename for d in page.dists] == [WHEEL]


def test_a_link_to_a_local_file_is_refused(server: IndexServer, tmp_path: Path) -> None:
    server.raw[PAGE] = (200, _html(f'<a href="file:///etc/passwd">{WHEEL}</a>'), "text/html")
    with _client(server, tmp_path / "cache") as c:
        with pytest.raises(IndexError_, match="link to a file: URL"):
            c.page(server.url("pypi"), "demo")


# -- malformed answers: exit 4, never an internal error ------------------------------------

@pytest.mark.parametrize("body, message", [
    (b'{"files": [{"filename": "demo-1.0-py3-none-any.whl", "url": "x", "hashes": ["a"]}]}',
     "hashes is a list, not an object"),
    (b'[{"filename": "demo-1.0-py3-none-any.whl"}]', "the page is a JSON list, not an object"),
    (b'{"files": {"a": 1}}', "'files' is not a list"),
    (b'{"files": [1]}', r"files\[0\] is not an object"),
    (b'{"files": [{"filename": 1, "url": "x"}]}', "filename and url must be strings"),
    (b'{"files": [', "not JSON"),
    (b'[' * 100000, "not JSON"),
])
def test_malformed_json_pages_are_index_errors(server: IndexServer, tmp_path: Path,
                                               body: bytes, message: str) -> None:
    server.raw[PAGE] = (200, body, "application/vnd.pypi.simple.v1+json")
    with _client(server, tmp_path / "cache") as c:
        with pytest.raises(IndexError_, match=message):
            c.page(server.url("pypi"), "demo")


def test_unknown_metadata_hash_algorithm_reads_the_wheel_instead(server: IndexServer,
                                                                 tmp_path: Path) -> None:
    wheel = tmp_path / "w" / WHEEL
    server.raw[PAGE] = (200, _html(
        f'<a href="/files/pypi/{WHEEL}#sha256={_sha(wheel)}" '
        f'data-core-metadata="md5=0123">{WHEEL}</a>'), "text/html")
    with _client(server, tmp_path / "cache") as c:
        d = c.page(server.url("pypi"), "demo").dists[0]
        assert d.metadata is None
        assert c.metadata(d).requires_dist == ("dep",)
    assert not server.requests(".metadata")


@pytest.mark.parametrize("content_range", ["bytes 0-10/abc", "garbage", "bytes 0-1/-5",
                                           "bytes 0-1/"])
def test_a_malformed_content_range_is_an_index_error(server: IndexServer, tmp_path: Path,
                                                     content_range: str) -> None:
    wheel = tmp_path / "w" / WHEEL
    server.indexes["pypi"].pep658 = False
    server.raw[f"/files/pypi/{WHEEL}"] = (206, wheel.read_bytes()[-100:],
                                          "application/octet-stream",
                                          {"Content-Range": content_range})
    with _client(server, tmp_path / "cache") as c:
        d = c.page(server.url("pypi"), "demo").dists[0]
        with pytest.raises(IndexError_, match="malformed Content-Range"):
            c.metadata(d)


def test_metadata_that_does_not_match_its_hash_is_refused(server: IndexServer,
                                                          tmp_path: Path) -> None:
    wheel = tmp_path / "w" / WHEEL
    server.raw[f"/files/pypi/{WHEEL}.metadata"] = (
        200, b"Metadata-Version: 2.1\nName: demo\nVersion: 1.0\nRequires-Dist: evil-payload\n\n",
        "text/plain")
    with _client(server, tmp_path / "cache") as c:
        d = c.page(server.url("pypi"), "demo").dists[0]
        assert d.sha256 == _sha(wheel)
        with pytest.raises(IndexError_, match=r"\.metadata does not match its sha256 hash"):
            c.metadata(d)


def test_a_planted_parsed_page_in_the_cache_is_not_trusted(server: IndexServer,
                                                           tmp_path: Path) -> None:
    """A parsed-page cache entry from another index (or written by someone else) must not
    stand in for this index's page."""
    cache = tmp_path / "cache"
    first = _with_parsed_form(server, cache)
    for p in (cache / "pages").glob("*.json"):
        data = _as_rows(json.loads(p.read_text()))
        data["files"][0][0] = "../../" + data["files"][0][0]
        p.write_text(json.dumps(_as_columns(data)))
    with _client(server, cache) as c:
        again = c.page(server.url("pypi"), "demo")
    assert [d.filename for d in again.dists] == [d.filename for d in first.dists] == [WHEEL]


@pytest.mark.parametrize("status, body, headers", [
    (200, b"not a zip at all", {}),                                  # no ranges: download
    (206, b"PK\x05\x06" + b"\x00" * 5, {"Content-Range": "bytes 0-8/9"}),  # cut EOCD
    (206, b"PK\x05\x06" + b"\x00" * 6 + b"\x01\x00" + b"\xff" * 8 + b"\x00\x00",
     {"Content-Range": "bytes 0-21/22"}),                            # directory past the end
])
def test_an_unreadable_wheel_is_an_index_error(server: IndexServer, tmp_path: Path,
                                               status: int, body: bytes, headers: dict) -> None:
    server.raw[PAGE] = (200, _html(f'<a href="/files/pypi/{WHEEL}">{WHEEL}</a>'), "text/html")
    server.raw[f"/files/pypi/{WHEEL}"] = (status, body, "application/octet-stream", headers)
    with _client(server, tmp_path / "cache") as c:
        d = c.page(server.url("pypi"), "demo").dists[0]
        with pytest.raises(IndexError_, match=f"^{WHEEL}: "):
            c.metadata(d)


def _as_rows(entry: dict) -> dict:
    """A parsed-page cache entry with its files as rows (``entry["files"]``), so a test
    can plant a value in one field of one file; :func:`_as_columns` writes it back."""
    cols = []
    for key in COLUMNS:
        col = entry["columns"][key]
        cols.append(col.split("\n") if isinstance(col, str) else col)
    files = [list(r) for r in zip(*cols)]
    for r in files:  # the metadata column's short form, as the long one
        if isinstance(r[5], str):
            r[5] = None if not r[5] else {} if r[5] == "-" else {"sha256": r[5]}
    rest = {k: v for k, v in entry.items() if k not in ("columns", "n")}
    return {**rest, "files": files}


def _as_columns(data: dict) -> dict:
    """The entry again (each column as a list, a form the cache also reads)."""
    files = data["files"]
    rest = {k: v for k, v in data.items() if k != "files"}
    columns = {key: [r[i] for r in files] for i, key in enumerate(COLUMNS)}
    return {**rest, "n": len(files), "columns": columns}


def _plant_wrong_sha(data: dict) -> None:
    data["files"][0][2] = "../../" + "a" * 58


def _plant_file_link(data: dict) -> None:
    data["files"][0][1] = "file:///etc/passwd"


def _plant_other_project(data: dict) -> None:
    data["name"] = "other"


def _plant_wrong_type(data: dict) -> None:
    data["files"][0][3] = {"requires": "python"}


def _plant_bad_metadata_hash(data: dict) -> None:
    data["files"][0][5] = {"sha256": "zz"}


def _plant_a_later_row(data: dict) -> None:
    good = list(data["files"][0])
    data["files"] = [good] * 50 + [[good[0] + "\x00", *good[1:]]]


@pytest.mark.parametrize("plant", [_plant_wrong_sha, _plant_file_link, _plant_other_project,
                                   _plant_wrong_type, _plant_bad_metadata_hash,
                                   _plant_a_later_row])
def test_a_planted_parsed_page_is_refused_whatever_it_breaks(server: IndexServer,
                                                             tmp_path: Path, plant) -> None:
    """The parsed form of a fresh page is read without its body; every row is still
    checked (any column, any row), and a page that fails is parsed again from the body."""
    cache = tmp_path / "cache"
    first = _with_parsed_form(server, cache)
    for p in (cache / "pages").glob("*.json"):
        data = _as_rows(json.loads(p.read_text()))
        plant(data)
        p.write_text(json.dumps(_as_columns(data)))
    with _client(server, cache) as c:
        again = c.page(server.url("pypi"), "demo")
    assert [(d.filename, d.url, d.sha256, d.requires_python, d.metadata)
            for d in again.dists] == \
        [(d.filename, d.url, d.sha256, d.requires_python, d.metadata) for d in first.dists]
    assert [d.filename for d in again.dists] == [WHEEL]


@pytest.mark.parametrize("key, value", [
    ("filename", "../../demo-1.0-py3-none-any.whl"),
    ("url", "file:///etc/passwd"),
    ("sha256", "A" * 64),
    ("metadata", "zz"),
    ("metadata", "a" * 63 + "-"),
    ("filename", "demo-1.0-py3-none-any.whl\ndemo-2.0-py3-none-any.whl"),  # one file more
])
def test_a_planted_value_in_the_short_form_is_refused(server: IndexServer, tmp_path: Path,
                                                      key: str, value: str) -> None:
    """The cache keeps file names, links and digests as single strings joined by line
    breaks: a value planted there is checked like any other, and a line break cannot
    smuggle in a file."""
    cache = tmp_path / "cache"
    first = _with_parsed_form(server, cache)
    planted = 0
    for p in (cache / "pages").glob("*.json"):
        data = json.loads(p.read_text())
        assert isinstance(data["columns"][key], str)  # the short form is what is written
        data["columns"][key] = value
        p.write_text(json.dumps(data))
        planted += 1
    assert planted
    asked: List[str] = []
    c = IndexClient(IndexConfig(index_url=server.url("pypi"), retries=0, timeout=10),
                    cache_dir=cache, on_request=asked.append)
    with c:
        again = c.page(server.url("pypi"), "demo")
    assert [(d.filename, d.url, d.sha256, d.metadata) for d in again.dists] == \
        [(d.filename, d.url, d.sha256, d.metadata) for d in first.dists]


def test_a_planted_row_of_another_project_is_left_out(server: IndexServer,
                                                     tmp_path: Path) -> None:
    """A well-formed row for another project's file is not this project's file."""
    cache = tmp_path / "cache"
    _with_parsed_form(server, cache)
    for p in (cache / "pages").glob("*.json"):
        data = _as_rows(json.loads(p.read_text()))
        evil = list(data["files"][0])
        evil[0] = "evil-9.0-py3-none-any.whl"
        data["files"].append(evil)
        p.write_text(json.dumps(_as_columns(data)))
    with _client(server, cache) as c:
        page = c.page(server.url("pypi"), "demo")
        assert [d.filename for d in page.dists] == [WHEEL]
        assert [d.filename for d in page.select(lambda fn: True)] == [WHEEL]


def test_a_fresh_page_is_served_from_its_parsed_form(server: IndexServer,
                                                    tmp_path: Path) -> None:
    """Within its freshness a page needs neither the network nor its raw body (reading
    and hashing megabytes of bodies was most of a warm resolve)."""
    cache = tmp_path / "cache"
    first = _with_parsed_form(server, cache)
    for body in (cache / "http").rglob("*.body"):
        body.write_bytes(b"not the page")
    asked: List[str] = []
    c = IndexClient(IndexConfig(index_url=server.url("pypi"), retries=0, timeout=10),
                    cache_dir=cache, on_request=asked.append)
    with c:
        again = c.page(server.url("pypi"), "demo")
    assert asked == []
    assert [(d.filename, d.sha256) for d in again.dists] == \
        [(d.filename, d.sha256) for d in first.dists]
