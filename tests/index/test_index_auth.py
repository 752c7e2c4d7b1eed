"""Credentials for a private index, against a real index on 127.0.0.1 that refuses requests
without them: in the index URL and in a netrc file, as pip takes them. They reach the index
(every page and file request), never a host the index redirects to, and never the disk or
a message."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.cli import run_cli
from support.index_server import IndexServer, make_wheel

from envlock.errors import IndexError_
from envlock.index import IndexClient, IndexConfig

USER, SECRET = "builder", "S3cretPw"
WHEEL = "demo-1.0-py3-none-any.whl"


@pytest.fixture
def server(tmp_path: Path):
    with IndexServer() as srv:
        srv.add_index("pypi", json_api=False, pep658=False).add(
            make_wheel(tmp_path / "w", "demo", "1.0", requires=["dep>=1"]))
        srv.auth = (USER, SECRET)
        yield srv


@pytest.fixture(autouse=True)
def no_netrc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))  # never the user's own


def _fetch(url: str, cache: Path):
    with IndexClient(IndexConfig(index_url=url, retries=0, timeout=10),
                     cache_dir=cache) as client:
        page = client.page(url, "demo")
        assert page is not None
        return [(d.filename, client.metadata(d).requires_dist) for d in page.dists]


def _assert_no_secret_on_disk(root: Path) -> None:
    for base, _, files in os.walk(root):
        for f in files:
            assert SECRET.encode() not in Path(base, f).read_bytes(), Path(base, f)


def _authorised(server: IndexServer) -> bool:
    return bool(server.seen_auth) and all(a is not None for _, a in server.seen_auth)


def test_credentials_in_the_url_reach_every_request(server: IndexServer,
                                                    tmp_path: Path) -> None:
    url = server.url("pypi").replace("http://", f"http://{USER}:{SECRET}@")
    got = _fetch(url, tmp_path / "cache")
    assert got[0][0] == WHEEL and [str(r) for r in got[0][1]] == ["dep>=1"]
    # the page and the wheel's range reads (this index has no PEP 658 files) all carried them
    assert any(p.startswith("/files/") for p, _ in server.seen_auth)
    assert _authorised(server)
    _assert_no_secret_on_disk(tmp_path / "cache")


def test_credentials_from_netrc_reach_every_request(server: IndexServer, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(f"machine 127.0.0.1 login {USER} password {SECRET}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    got = _fetch(server.url("pypi"), tmp_path / "cache")
    assert got[0][0] == WHEEL
    assert _authorised(server)
    _assert_no_secret_on_disk(tmp_path / "cache")


def test_without_credentials_the_refusal_is_one_line(server: IndexServer, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(IndexError_, match="HTTP 401"):
        _fetch(server.url("pypi"), tmp_path / "cache")
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache2"))
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    r = run_cli("resolve", "--gpu", "H100 SXM", "--torch", "==2.5.1", "--index-url",
                server.url("pypi").replace("http://", f"http://{USER}:wrong@"),
                "--pytorch-index-url", f"{server.base}/pytorch", "demo", "--dry-run")
    assert r.code == 4, (r.code, r.err)
    assert "Traceback" not in r.err and "wrong" not in r.err


def test_credentials_do_not_follow_a_redirect_to_another_host(server: IndexServer,
                                                              tmp_path: Path) -> None:
    """Files are often served from another host than the pages (PyPI's are). When the
    index redirects a download there, the index's credentials must not go along."""
    with IndexServer() as files:
        files.add_index("pypi", json_api=False, pep658=False).add(
            make_wheel(tmp_path / "w2", "demo", "1.0", requires=["dep>=1"]))
        server.redirect_files_to = files.base  # same address, another port: another origin
        url = server.url("pypi").replace("http://", f"http://{USER}:{SECRET}@")
        got = _fetch(url, tmp_path / "cache")
        assert got[0][0] == WHEEL
        assert files.seen_auth, "the download was not redirected"
        assert all(a is None for _, a in files.seen_auth), files.seen_auth


class _Proxy:
    """A forward HTTP proxy on 127.0.0.1: it answers absolute-URI requests by fetching them
    itself (no proxy of its own) and records what it relayed."""

    def __init__(self) -> None:
        self.relayed: list = []
        #: the Proxy-Authorization header of each request (None: none sent)
        self.proxy_auth: list = []

    def __enter__(self) -> "_Proxy":
        import threading
        import urllib.request
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        proxy = self
        direct = urllib.request.build_opener(urllib.request.ProxyHandler({}))

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                proxy.relayed.append(self.path)
                proxy.proxy_auth.append(self.headers.get("Proxy-Authorization"))
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("proxy-connection", "connection", "host",
                                                "proxy-authorization")}
                req = urllib.request.Request(self.path, headers=headers)
                try:
                    with direct.open(req, timeout=30) as resp:
                        status, body, rh = resp.status, resp.read(), resp.headers
                except urllib.error.HTTPError as exc:
                    status, body, rh = exc.code, exc.read(), exc.headers
                self.send_response(status)
                for k, v in rh.items():
                    if k.lower() not in ("transfer-encoding", "connection", "content-length"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        return self

    def __exit__(self, *exc: object) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def test_the_proxy_from_the_environment_carries_every_request(
        server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind a corporate proxy, HTTP_PROXY / HTTPS_PROXY (as pip honours them) carry the
    page and file requests, and NO_PROXY exempts a host."""
    for var in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    url = server.url("pypi").replace("http://", f"http://{USER}:{SECRET}@")
    with _Proxy() as proxy:
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.setenv("http_proxy", proxy.url)
        got = _fetch(url, tmp_path / "cache")
        assert got[0][0] == WHEEL
        assert any("/pypi/simple/demo/" in p for p in proxy.relayed), proxy.relayed
        assert any("/files/" in p for p in proxy.relayed), proxy.relayed
        assert _authorised(server)  # the index's credentials went through the proxy to it
        # ... in the Authorization header only: the request line a proxy logs has none
        assert not any(SECRET in p or USER in p for p in proxy.relayed), proxy.relayed
        assert proxy.proxy_auth and not any(proxy.proxy_auth)
        relayed = len(proxy.relayed)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        monkeypatch.setenv("no_proxy", "127.0.0.1")
        _fetch(url, tmp_path / "cache-2")
        assert len(proxy.relayed) == relayed  # exempt: straight to the index


def test_credentials_in_the_proxy_url_authenticate_to_the_proxy(
        server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``HTTP_PROXY=http://user:pass@proxy:port`` sends Proxy-Authorization to the proxy,
    and the index's own credentials stay the index's."""
    import base64

    for var in ("NO_PROXY", "no_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY",
                "all_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(var, raising=False)
    with _Proxy() as proxy:
        monkeypatch.setenv("http_proxy", proxy.url.replace("http://", "http://pu%40x:pp@"))
        _fetch(server.url("pypi").replace("http://", f"http://{USER}:{SECRET}@"),
               tmp_path / "cache")
        want = "Basic " + base64.b64encode(b"pu@x:pp").decode()
        assert proxy.proxy_auth and all(a == want for a in proxy.proxy_auth), proxy.proxy_auth
        assert _authorised(server)


@pytest.mark.parametrize("host, port, no_proxy, bypassed", [
    ("10.1.2.3", 80, "10.0.0.0/8", True),
    ("10.1.2.3", 80, "192.168.0.0/16", False),
    ("pypi.corp.example", 443, ".corp.example", True),
    ("pypi.corp.example", 443, "corp.example", True),
    ("notcorp.example", 443, "corp.example", False),
    ("pypi.corp.example", 8443, "pypi.corp.example:8443", True),
    ("pypi.corp.example", 443, "pypi.corp.example:8443", False),
    ("anything", 80, "*", True),
    ("::1", 80, "::1/128", True),
    ("pypi.org", 443, "", False),
])
def test_no_proxy_reads_as_requests_reads_it(host: str, port: int, no_proxy: str,
                                             bypassed: bool) -> None:
    """Names, domain suffixes with or without the dot, host:port, CIDR ranges, ``*``."""
    from envlock.index.pools import _bypassed, _no_proxy_from

    assert _bypassed(host, port, _no_proxy_from({"NO_PROXY": no_proxy})) is bypassed
