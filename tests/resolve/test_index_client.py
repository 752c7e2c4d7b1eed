"""The index client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from envlock.errors import IndexError_, OfflineError
from envlock.index import IndexClient, IndexConfig, load_index_config
from envlock.index.config import redact
from support.index_server import IndexServer, make_wheel


@pytest.fixture
def server(tmp_path: Path):
    with IndexServer() as srv:
        idx = srv.add_index("pypi")
        idx.add(make_wheel(tmp_path / "w", "demo", "1.0", requires=["dep>=2"]))
        idx.add(make_wheel(tmp_path / "w", "demo", "2.0", requires=["dep>=2", "extra-only; extra == 'x'"],
                           requires_python=">=3.8"))
        idx.add(make_wheel(tmp_path / "w", "dep", "2.1"))
        yield srv


def client(srv: IndexServer, tmp_path: Path, **kw) -> IndexClient:
    cfg = IndexConfig(index_url=srv.url("pypi"), retries=kw.pop("retries", 3),
                      timeout=kw.pop("timeout", 5.0))
    c = IndexClient(cfg, cache_dir=tmp_path / "cache", **kw)
    c.transport.backoff = 0.01
    return c


@pytest.mark.parametrize("json_api", [True, False])
def test_pages_in_json_and_html(server: IndexServer, tmp_path: Path, json_api: bool) -> None:
    server.indexes["pypi"].json_api = json_api
    with client(server, tmp_path) as c:
        page = c.page(server.url("pypi"), "Demo")  # names are canonicalised
    assert page is not None
    names = sorted(d.filename for d in page.dists)
    assert names == ["demo-1.0-py3-none-any.whl", "demo-2.0-py3-none-any.whl"]
    d = [d for d in page.dists if "2.0" in d.filename][0]
    assert d.requires_python == ">=3.8"
    assert d.sha256 == hashlib.sha256(Path(tmp_path / "w" / d.filename).read_bytes()).hexdigest()
    assert d.metadata is not None  # PEP 658 advertised


def test_missing_project_is_none(server: IndexServer, tmp_path: Path) -> None:
    with client(server, tmp_path) as c:
        assert c.page(server.url("pypi"), "nope") is None


def test_metadata_from_pep658_file_without_touching_the_wheel(server: IndexServer,
                                                               tmp_path: Path) -> None:
    with client(server, tmp_path) as c:
        d = [d for d in c.page(server.url("pypi"), "demo").dists if "2.0" in d.filename][0]
        md = c.metadata(d)
    assert md.requires_dist == ("dep>=2", "extra-only; extra == 'x'")
    assert any(p.endswith(".whl.metadata") for p in server.requests())
    assert not any(p.endswith("demo-2.0-py3-none-any.whl") for p in server.requests())


def test_metadata_by_range_reads_when_there_is_no_pep658(server: IndexServer,
                                                          tmp_path: Path) -> None:
    server.indexes["pypi"].pep658 = False
    with client(server, tmp_path) as c:
        d = [d for d in c.page(server.url("pypi"), "demo").dists if "1.0" in d.filename][0]
        assert d.metadata is None
        md = c.metadata(d)
    assert md.name == "demo" and md.requires_dist == ("dep>=2",)
    assert server.requests("demo-1.0-py3-none-any.whl")  # read with ranges


def test_metadata_by_download_when_ranges_are_ignored(server: IndexServer, tmp_path: Path) -> None:
    server.indexes["pypi"].pep658 = False
    server.ranges = False
    with client(server, tmp_path) as c:
        d = [d for d in c.page(server.url("pypi"), "demo").dists if "1.0" in d.filename][0]
        assert c.metadata(d).version == "1.0"


def test_tampered_pep658_metadata_is_refused(server: IndexServer, tmp_path: Path) -> None:
    with client(server, tmp_path) as c:
        d = [d for d in c.page(server.url("pypi"), "demo").dists if "2.0" in d.filename][0]
        from dataclasses import replace

        bad = replace(d, metadata={"sha256": "0" * 64})
        with pytest.raises(IndexError_, match="does not match its sha256 hash"):
            c.metadata(bad)


@pytest.mark.parametrize("status", [500, 502, 503])
def test_retries_after_injected_5xx(server: IndexServer, tmp_path: Path, status: int) -> None:
    server.fail_status = status
    server.fail["/pypi/simple/demo/"] = 2
    with client(server, tmp_path, retries=3) as c:
        page = c.page(server.url("pypi"), "demo")
        assert page is not None
        assert c.transport.stats["retries"] == 2
    assert len(server.requests("/pypi/simple/demo/")) == 3


def test_a_404_is_not_retried(server: IndexServer, tmp_path: Path) -> None:
    with client(server, tmp_path, retries=3) as c:
        assert c.page(server.url("pypi"), "absent") is None
        assert c.transport.stats["retries"] == 0


def test_gives_up_with_a_clear_message(server: IndexServer, tmp_path: Path) -> None:
    server.fail["/pypi/simple/demo/"] = 10
    with client(server, tmp_path, retries=2) as c:
        with pytest.raises(IndexError_) as exc:
            c.page(server.url("pypi"), "demo")
    assert f"cannot reach {server.url('pypi')}/demo/ (HTTP 503, after 3 attempts)" in str(exc.value)
    assert "--offline" in (exc.value.hint or "")


def test_retries_after_a_timeout(server: IndexServer, tmp_path: Path) -> None:
    server.stall["/pypi/simple/dep/"] = 1.5
    with client(server, tmp_path, retries=1, timeout=0.5) as c:
        with pytest.raises(IndexError_, match="after 2 attempts"):
            c.page(server.url("pypi"), "dep")
    assert len(server.requests("/pypi/simple/dep/")) == 2


def test_unreachable_index_names_the_url(tmp_path: Path) -> None:
    cfg = IndexConfig(index_url="http://127.0.0.1:9/simple", retries=0, timeout=2)
    with IndexClient(cfg, cache_dir=tmp_path) as c:
        with pytest.raises(IndexError_, match=r"cannot reach http://127\.0\.0\.1:9/simple/x/"):
            c.page(cfg.index_url, "x")


def test_cache_serves_warm_runs_and_offline(server: IndexServer, tmp_path: Path) -> None:
    with client(server, tmp_path) as c:
        d = [d for d in c.page(server.url("pypi"), "demo").dists if "2.0" in d.filename][0]
        c.metadata(d)
    before = len(server.requests())
    with client(server, tmp_path) as c:  # fresh within ENVLOCK_INDEX_TTL: no request at all
        page = c.page(server.url("pypi"), "demo")
        c.metadata([d for d in page.dists if "2.0" in d.filename][0])
    assert len(server.requests()) == before
    with client(server, tmp_path, offline=True) as c:
        assert c.page(server.url("pypi"), "demo") is not None
        with pytest.raises(OfflineError, match="not in the cache"):
            c.page(server.url("pypi"), "never-fetched")
    assert len(server.requests()) == before


def test_refresh_revalidates(server: IndexServer, tmp_path: Path) -> None:
    with client(server, tmp_path) as c:
        c.page(server.url("pypi"), "demo")
    n = len(server.requests("/pypi/simple/demo/"))
    with client(server, tmp_path, refresh=True) as c:
        c.page(server.url("pypi"), "demo")
    assert len(server.requests("/pypi/simple/demo/")) == n + 1


def test_corrupt_cache_entries_are_ignored(server: IndexServer, tmp_path: Path) -> None:
    with client(server, tmp_path) as c:
        c.page(server.url("pypi"), "demo")
    for root, _, files in os.walk(tmp_path / "cache" / "http"):
        for f in files:
            if f.endswith(".body"):
                Path(root, f).write_bytes(b"garbage")
    with client(server, tmp_path) as c:
        page = c.page(server.url("pypi"), "demo")
    assert page is not None and len(page.dists) == 2


def test_pip_configuration_precedence(tmp_path: Path) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text("[global]\nindex-url = https://files.example/simple\n"
                    "extra-index-url = https://a.example/simple https://b.example/simple\n"
                    "timeout = 7\n[install]\nindex-url = https://install.example/simple\n")
    env = {"PIP_CONFIG_FILE": str(conf), "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)}
    cfg = load_index_config(env)
    assert cfg.index_url == "https://install.example/simple"  # [install] beats [global]
    assert cfg.extra_index_urls == ("https://a.example/simple", "https://b.example/simple")
    assert cfg.timeout == 7.0
    env["PIP_INDEX_URL"] = "https://env.example/simple"
    assert load_index_config(env).index_url == "https://env.example/simple"  # env beats files
    assert load_index_config(env, index_url="https://cli.example/simple").index_url == \
        "https://cli.example/simple"  # command line beats env
    assert load_index_config({"PIP_CONFIG_FILE": os.devnull,
                              "HOME": str(tmp_path)}).index_url == "https://pypi.org/simple"


def test_credentials_are_used_but_never_shown(server: IndexServer, tmp_path: Path) -> None:
    url = server.url("pypi").replace("http://", "http://user:s3cret@")
    assert redact(url) == server.url("pypi")
    cfg = IndexConfig(index_url=url)
    with IndexClient(cfg, cache_dir=tmp_path) as c:
        assert c.page(url, "demo") is not None
        assert ("http", "127.0.0.1", server.port) in c.transport._auth
    for root, _, files in os.walk(tmp_path):
        for f in files:
            assert b"s3cret" not in Path(root, f).read_bytes()


def test_a_warm_cache_is_read_without_worker_threads_or_requests(server: IndexServer,
                                                                  tmp_path: Path) -> None:
    """Pages fresh in the cache and cached metadata are read in the caller's thread: a warm
    run has nothing to wait for, and handing CPU work to workers only costs lock hand-offs.
    The answers are the same as from the network."""
    with client(server, tmp_path) as c:
        page = c.page(server.url("pypi"), "demo")
        cold = [(d.filename, d.sha256, c.metadata(d).requires_dist) for d in page.dists]
    asked = len(server.requests())
    with client(server, tmp_path) as c:
        page = c.page(server.url("pypi"), "demo")
        warm = [(d.filename, d.sha256, c.metadata(d).requires_dist) for d in page.dists]
        assert c._pool is None  # no worker thread was started
    assert warm == cold
    assert len(server.requests()) == asked


def test_a_torn_metadata_entry_is_fetched_again_not_believed(server: IndexServer,
                                                              tmp_path: Path) -> None:
    """Metadata entries are written without an fsync (one per answer, milliseconds each)
    and carry their own sha256: an entry cut short (a crash before the data reached the
    disk) must not lock a package with fewer dependencies than it has."""
    with client(server, tmp_path) as c:
        d = [d for d in c.page(server.url("pypi"), "demo").dists if "2.0" in d.filename][0]
        assert c.metadata(d).requires_dist == ("dep>=2", "extra-only; extra == 'x'")
    entries = list((tmp_path / "cache" / "metadata").rglob("*.metadata"))
    assert len(entries) == 1
    whole = entries[0].read_bytes()
    asked = len(server.requests(".whl.metadata"))
    with client(server, tmp_path) as c:  # served from the cache
        c.metadata([d for d in c.page(server.url("pypi"), "demo").dists
                    if "2.0" in d.filename][0])
    assert len(server.requests(".whl.metadata")) == asked
    # cut after the first Requires-Dist: what is left still parses as metadata
    entries[0].write_bytes(whole[: whole.index(b"Requires-Dist: dep>=2") + 22])
    with client(server, tmp_path) as c:
        md = c.metadata([d for d in c.page(server.url("pypi"), "demo").dists
                         if "2.0" in d.filename][0])
    assert md.requires_dist == ("dep>=2", "extra-only; extra == 'x'")
    assert len(server.requests(".whl.metadata")) == asked + 1
    assert entries[0].read_bytes() == whole  # and written again whole


def test_a_wheel_of_thousands_of_files_is_read_in_two_ranges(tmp_path: Path) -> None:
    """Without PEP 658 files (many mirrors), a wheel's METADATA comes from range reads.
    When its central directory is longer than the first read of the file's tail, the
    directory and the dist-info files just before it are read together: two requests, not
    three (each one a round trip on the path of every answer the resolver waits for)."""
    files = {f"big_pkg/sub{i // 100}/module_with_a_long_name_{i:05d}.py": b"x = 1\n"
             for i in range(2500)}
    with IndexServer() as srv:
        srv.add_index("pypi").add(make_wheel(tmp_path / "w", "big-pkg", "1.0",
                                             requires=["dep>=2"], files=files))
        srv.indexes["pypi"].pep658 = False
        with client(srv, tmp_path) as c:
            d = c.page(srv.url("pypi"), "big-pkg").dists[0]
            md = c.metadata(d)
        assert md.name == "big-pkg" and md.requires_dist == ("dep>=2",)
        assert len(srv.requests("big_pkg-1.0-py3-none-any.whl")) == 2


def test_a_long_wheel_with_its_dist_info_first_gives_metadata_in_two_rounds(
        server: IndexServer, tmp_path: Path) -> None:
    """torch <= 2.6 puts its dist-info first and lists ~12,000 members: the head is read
    (in a thread of its own, over HTTP) beside the central directory, so METADATA needs
    no third range request."""
    import zipfile

    path = tmp_path / "w" / "big-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("big-1.0.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: big\nVersion: 1.0\nRequires-Dist: dep>=2\n")
        for i in range(5000):
            zf.writestr(f"big/{'d' * 180}/m{i:05d}.py", b"")
    server.indexes["pypi"].add(path)
    server.indexes["pypi"].pep658 = False
    with client(server, tmp_path) as c:
        d = c.page(server.url("pypi"), "big").dists[0]
        md = c.metadata(d)
    assert md.name == "big" and md.requires_dist == ("dep>=2",)
    asked = [rng for p, rng in server.range_log if p.endswith(path.name)]
    assert len(asked) == 3 and "bytes=0-262143" in asked, asked


@pytest.mark.parametrize("json_api, reads", [(True, 1), (False, 2)])
def test_a_small_wheel_with_its_dist_info_first_is_read_whole_when_the_page_gives_its_size(
        server: IndexServer, tmp_path: Path, json_api: bool, reads: int) -> None:
    """pdm-backend writes dist-info first: after a 64 KB tail, METADATA needed a read of
    its own. A JSON page gives the file's size, and a wheel of <= 256 KB is read whole in
    one request; an HTML page gives none (the tail, then the head, as before)."""
    import zipfile

    path = tmp_path / "w" / "front-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr("front-1.0.dist-info/METADATA",
                    "Metadata-Version: 2.1\nName: front\nVersion: 1.0\nRequires-Dist: dep>=2\n")
        zf.writestr("front/blob.bin", os.urandom(150 * 1024))
    server.indexes["pypi"].add(path)
    server.indexes["pypi"].pep658 = False
    server.indexes["pypi"].json_api = json_api
    with client(server, tmp_path) as c:
        d = c.page(server.url("pypi"), "front").dists[0]
        assert (d.size is not None) == json_api
        md = c.metadata(d)
    assert md.name == "front" and md.requires_dist == ("dep>=2",)
    asked = [rng for p, rng in server.range_log if p.endswith(path.name)]
    assert len(asked) == reads, asked
