"""A broken index: 5xx answers, truncated bodies, redirect loops, a body that drips a byte
a second, pages far too large, and URLs that cannot be requested. Each ends in one
:class:`IndexError_` (exit 4) or :class:`InputError` (exit 2) naming the URL, in bounded
time; nothing is cached from a failed answer."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from envlock.errors import IndexError_, InputError
from envlock.index import IndexClient, IndexConfig
from envlock.index.config import check_url, redact
from support.cli import run_cli
from support.index_server import IndexServer, make_wheel

PAGE = "/pypi/simple/demo/"
WHEEL = "demo-1.0-py3-none-any.whl"


@pytest.fixture
def server(tmp_path: Path):
    with IndexServer() as srv:
        idx = srv.add_index("pypi")
        idx.add(make_wheel(tmp_path / "w", "demo", "1.0", requires=["dep"]))
        yield srv


def _client(srv: IndexServer, tmp_path: Path, retries: int = 1) -> IndexClient:
    c = IndexClient(IndexConfig(index_url=srv.url("pypi"), retries=retries, timeout=10),
                    cache_dir=tmp_path / "cache")
    c.transport.backoff = 0.01
    return c


def test_an_index_that_always_answers_500(server: IndexServer, tmp_path: Path) -> None:
    server.fail_status = 500
    server.fail[PAGE] = 1000
    with _client(server, tmp_path, retries=2) as c:
        with pytest.raises(IndexError_, match=r"cannot reach http://127\.0\.0\.1:\d+/pypi/"
                                              r"simple/demo/ \(HTTP 500, after 3 attempts\)"):
            c.page(server.url("pypi"), "demo")
    assert len(server.requests(PAGE)) == 3


def test_a_truncated_page_is_retried_then_refused(server: IndexServer, tmp_path: Path) -> None:
    server.truncate[PAGE] = 20
    with _client(server, tmp_path, retries=1) as c:
        with pytest.raises(IndexError_, match=r"cannot reach .*/demo/ \(.*after 2 attempts\)"):
            c.page(server.url("pypi"), "demo")
    assert len(server.requests(PAGE)) == 2
    assert not list((tmp_path / "cache").rglob("*.body"))


def test_a_truncated_page_that_recovers_is_used(server: IndexServer, tmp_path: Path) -> None:
    server.truncate[PAGE] = 20
    with _client(server, tmp_path, retries=1) as c:
        with pytest.raises(IndexError_):
            c.page(server.url("pypi"), "demo")
    del server.truncate[PAGE]
    with _client(server, tmp_path, retries=0) as c:
        assert [d.filename for d in c.page(server.url("pypi"), "demo").dists] == [WHEEL]


def test_a_redirect_loop_is_an_index_error(server: IndexServer, tmp_path: Path) -> None:
    server.redirect_loop.append(PAGE)
    with _client(server, tmp_path) as c:
        with pytest.raises(IndexError_, match=r"/demo/: Exceeded \d+ redirects"):
            c.page(server.url("pypi"), "demo")


@pytest.mark.parametrize("location", ["file:///etc/passwd", "ftp://127.0.0.1/demo/"])
def test_a_redirect_off_http_is_refused_in_one_line(server: IndexServer, tmp_path: Path,
                                                   location: str) -> None:
    """An index that redirects a page to a local file or another protocol is refused at
    once, saying so, and the redirect is not followed."""
    server.raw[PAGE] = (302, b"", "text/plain", {"Location": location})
    with _client(server, tmp_path) as c:
        with pytest.raises(IndexError_, match=r"/demo/: redirected to a (file|ftp): URL; "
                                              r"only http\(s\) redirects are followed"):
            c.page(server.url("pypi"), "demo")
    assert len(server.requests(PAGE)) == 1  # not retried either


def test_a_dripping_index_fails_at_the_deadline(server: IndexServer, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """One byte a second never trips a read timeout; the total deadline ends it."""
    server.drip[PAGE] = 1.0
    monkeypatch.setenv("ENVLOCK_INDEX_DEADLINE", "2")
    with _client(server, tmp_path, retries=3) as c:
        start = time.monotonic()
        with pytest.raises(IndexError_) as info:
            c.page(server.url("pypi"), "demo")
        took = time.monotonic() - start
    assert str(info.value) == (f"{server.url('pypi')}/demo/ did not answer within the 2 s "
                               f"deadline (ENVLOCK_INDEX_DEADLINE)")
    assert server.drip_started.is_set()
    assert len(server.requests(PAGE)) == 1  # retries share the deadline
    assert took < 60  # the page would drip for several minutes


@pytest.mark.parametrize("with_length", [True, False])
def test_a_page_over_the_cap_is_refused(server: IndexServer, tmp_path: Path,
                                        monkeypatch: pytest.MonkeyPatch,
                                        with_length: bool) -> None:
    monkeypatch.setenv("ENVLOCK_INDEX_MAX_PAGE_BYTES", str(1024 * 1024))
    if with_length:
        server.raw[PAGE] = (200, b" " * (3 * 1024 * 1024), "text/html")
    else:
        server.endless[PAGE] = 300 * 1024 * 1024  # the 300 MB page of the issue
    with _client(server, tmp_path) as c:
        with pytest.raises(IndexError_, match=r"/demo/ is larger than 1048576 bytes; refusing "
                                              r"it \(raise ENVLOCK_INDEX_MAX_PAGE_BYTES"):
            c.page(server.url("pypi"), "demo")


def test_a_gzip_page_is_read_decoded(server: IndexServer, tmp_path: Path) -> None:
    """Indexes and CDNs compress pages when asked (``Accept-Encoding: gzip``)."""
    import gzip

    html = (b'<html><body><a href="/files/pypi/' + WHEEL.encode() + b'#sha256=' + b"a" * 64
            + b'">' + WHEEL.encode() + b"</a></body></html>")
    server.raw[PAGE] = (200, gzip.compress(html), "text/html", {"Content-Encoding": "gzip"})
    with _client(server, tmp_path) as c:
        assert [d.filename for d in c.page(server.url("pypi"), "demo").dists] == [WHEEL]


def test_a_gzip_bomb_is_refused_at_the_cap(server: IndexServer, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap counts decoded bytes: 64 KB on the wire that inflate to 64 MB are refused
    as soon as they pass it, not inflated whole."""
    import gzip

    monkeypatch.setenv("ENVLOCK_INDEX_MAX_PAGE_BYTES", str(1024 * 1024))
    bomb = gzip.compress(b" " * (64 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 128 * 1024
    server.raw[PAGE] = (200, bomb, "text/html", {"Content-Encoding": "gzip"})
    with _client(server, tmp_path) as c:
        with pytest.raises(IndexError_, match=r"/demo/ is larger than 1048576 bytes"):
            c.page(server.url("pypi"), "demo")


def test_the_page_cap_leaves_wheel_downloads_alone(server: IndexServer, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_INDEX_MAX_PAGE_BYTES", "600")
    server.indexes["pypi"].json_api = False
    with _client(server, tmp_path) as c:
        d = c.page(server.url("pypi"), "demo").dists[0]
        assert len(c.download(d)) > 600


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf", "nan"])
def test_bad_limits_in_the_environment_are_input_errors(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        value: str) -> None:
    monkeypatch.setenv("ENVLOCK_INDEX_DEADLINE", value)
    with pytest.raises(InputError, match=f"ENVLOCK_INDEX_DEADLINE={value!r} is not a "
                                         f"positive number"):
        IndexClient(IndexConfig(), cache_dir=tmp_path)


@pytest.mark.parametrize("url", [
    "http://user:S3CRETpw@127.0.0.1:99999/simple",
    "http://user:S3CRETpw@[::1/simple",
    "http://user:S3CRETpw@[zz::1]/simple",
    "http://user:S3CRETpw@127.0.0.1:port/simple",
    "ftp://user:S3CRETpw@127.0.0.1/simple",
    "http://user:S3CRETpw@/simple",
])
def test_a_url_that_cannot_be_requested_is_one_input_error_without_secrets(
        url: str, tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        IndexClient(IndexConfig(index_url=url), cache_dir=tmp_path)
    assert "S3CRETpw" not in str(info.value) and "user" not in str(info.value)
    r = run_cli("resolve", "--index-url", url, "--gpu", "H100 SXM", "--dry-run")
    assert r.code == 2, r.err
    assert len(r.err.strip().splitlines()) == 1 and "S3CRETpw" not in r.err + r.out, r.err


@pytest.mark.parametrize("url, shown", [
    ("http://u:p@host/simple", "http://host/simple"),
    ("http://u:p@host:99999999/simple", "http://host:99999999/simple"),
    ("https://u:p@[::1/simple", "https://[::1/simple"),
    ("http://u:p%40x@h/s?a=b@c#d@e", "http://h/s?a=b@c#d@e"),
    ("http://tok@h", "http://h"),
    ("http://h/simple", "http://h/simple"),
    ("not a url", "not a url"),
])
def test_redact_strips_userinfo_from_malformed_urls(url: str, shown: str) -> None:
    assert redact(url) == shown


def test_check_url_accepts_good_urls() -> None:
    for url in ("https://pypi.org/simple", "http://[::1]:8080/simple", "file:///tmp/x",
                "http://u:p@mirror.local:3141/root/pypi/+simple/"):
        check_url(url)


def _client_for(base: str, tmp_path: Path, retries: int,
                on_request: Any = None) -> IndexClient:
    """A client of ``base`` whose retries do not sleep."""
    c = IndexClient(IndexConfig(index_url=base, retries=retries, timeout=5),
                    cache_dir=tmp_path, on_request=on_request)
    c.transport.backoff = 0.0
    return c


def _refused_base() -> str:
    """An index URL on a loopback port nothing listens on: connections are refused."""
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return f"http://127.0.0.1:{port}/simple"


def _no_such_name(name: str) -> None:
    """Skip unless this machine's resolver answers that ``name`` does not exist (a
    resolver that cannot be reached answers 'try again' instead)."""
    import socket

    try:
        socket.getaddrinfo(name, 443)
    except socket.gaierror as exc:
        if exc.errno in (getattr(socket, "EAI_NONAME", None),
                         getattr(socket, "EAI_NODATA", None)):
            return
        pytest.skip(f"this machine's resolver gives no final answer for {name}: {exc}")
    pytest.skip(f"{name} resolves here")


def test_a_name_that_does_not_resolve_is_asked_once(tmp_path: Path) -> None:
    """The resolver's 'no such name' is its final answer: no retries (each slept through
    the backoff, 2 s a request by default), the name and the way out in the message, and
    the host refused at once for the rest of the run."""
    name = "envlock-no-such-host.invalid"  # RFC 6761: never resolves
    _no_such_name(name)
    base = f"http://{name}/simple"
    c = _client_for(base, tmp_path, retries=3)
    try:
        with pytest.raises(IndexError_) as first:
            c.page(base, "torch")
        assert c.transport.stats["requests"] == 1
        assert c.transport.stats["retries"] == 0
        assert first.value.message.startswith(f"cannot reach {base}/torch/ (the name {name} "
                                              f"does not resolve: ")
        assert "check the index URL" in (first.value.hint or "")
        with pytest.raises(IndexError_) as second:
            c.page(base, "numpy")
        assert c.transport.stats["requests"] == 1
        assert "unreachable earlier in this run" in second.value.message
    finally:
        c.close()


def test_a_proxy_whose_name_does_not_resolve_is_named(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Through a proxy the name looked up is the proxy's: the message names it and
    points at the proxy setting, not at the index URL."""
    proxy = "envlock-no-such-proxy.invalid"
    _no_such_name(proxy)
    for var in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy", "HTTPS_PROXY",
                "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HTTP_PROXY", f"http://{proxy}:3128")
    base = "http://index.example.org/simple"
    c = _client_for(base, tmp_path, retries=3)
    try:
        with pytest.raises(IndexError_) as err:
            c.page(base, "torch")
        assert c.transport.stats["requests"] == 1
        assert f"(the name {proxy} does not resolve: " in err.value.message
        assert "HTTPS_PROXY" in (err.value.hint or "") and "NO_PROXY" in (err.value.hint or "")
    finally:
        c.close()


def test_a_retry_stops_when_another_request_found_the_host_gone(tmp_path: Path) -> None:
    """Two requests to a host that refuses connections: while the second is between its
    attempts, the first gives up and marks the host; the second does not try again."""
    base = _refused_base()
    first_error: list = []
    asked: list = []

    def on_request(url: str) -> None:
        asked.append(url)
        if url.endswith("/numpy/") and not first_error:
            # the first attempt of the second request: the first request runs to its end
            try:
                c.transport.get(f"{base}/torch/")
            except IndexError_ as exc:
                first_error.append(exc)

    c = _client_for(base, tmp_path, retries=2, on_request=on_request)
    try:
        with pytest.raises(IndexError_) as second:
            c.transport.get(f"{base}/numpy/")
        assert first_error and "after 3 attempts" in first_error[0].message
        # numpy: one attempt (its own), torch: three; numpy's retry saw the mark
        assert [u.rsplit("/", 2)[1] for u in asked] == ["numpy", "torch", "torch", "torch"]
        assert "unreachable earlier in this run" in second.value.message
    finally:
        c.close()


def test_a_host_nothing_could_reach_is_not_retried_again_in_the_same_run(
        tmp_path: Path) -> None:
    """Every attempt at the first URL fails to connect; a second URL on that host fails at
    once, with the same cause, instead of sleeping through the retries again."""
    base = _refused_base()
    c = _client_for(base, tmp_path, retries=2)
    try:
        with pytest.raises(IndexError_) as first:
            c.page(base, "torch")
        assert c.transport.stats["requests"] == 3
        with pytest.raises(IndexError_) as second:
            c.page(base, "numpy")
        assert c.transport.stats["requests"] == 3  # no new attempt
        assert "unreachable earlier in this run" in second.value.message
        assert first.value.message.startswith("cannot reach ")
        assert second.value.message.startswith("cannot reach ")
    finally:
        c.close()
