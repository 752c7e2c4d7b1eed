"""Index credentials stay with their origin (issue 32, items 3 and 6): URL credentials go
to the index's scheme, host and port only (pip's rule), never to another port of the same
host nor in clear text to its ``http://`` side; netrc's ``default`` entry never follows a
redirect to another host."""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from support.index_server import IndexServer, make_wheel

from envlock.index import IndexClient, IndexConfig

USER, SECRET = "builder", "0riginS3cret"


@pytest.fixture(autouse=True)
def no_netrc(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))


def _page(url: str, name: str) -> bytes:
    return (f'<html><body><a href="{url}">{name}</a></body></html>').encode()


def test_url_credentials_do_not_go_to_another_port_of_the_same_host(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w", "demo", "1.0", requires=["dep>=1"])
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with IndexServer() as files, IndexServer() as index:
        files.add_index("pypi", json_api=False, pep658=False).add(wheel)
        index.add_index("pypi", json_api=False, pep658=False)
        index.auth = (USER, SECRET)
        link = f"{files.base}/files/pypi/{wheel.name}#sha256={digest}"
        # the index's page links the file on another port of 127.0.0.1
        index.raw["/pypi/simple/demo/"] = (200, _page(link, wheel.name), "text/html")
        url = index.url("pypi").replace("http://", f"http://{USER}:{SECRET}@")
        with IndexClient(IndexConfig(index_url=url, retries=0, timeout=10),
                         cache_dir=tmp_path / "cache") as client:
            page = client.page(url, "demo")
            assert page is not None and page.dists
            assert [str(r) for r in client.metadata(page.dists[0]).requires_dist] == ["dep>=1"]
        assert index.seen_auth and all(a for _, a in index.seen_auth)  # the index got them
        assert files.seen_auth, "the file was not fetched from the other port"
        assert all(a is None for _, a in files.seen_auth), files.seen_auth


def test_https_credentials_are_not_sent_to_the_http_side_of_the_host() -> None:
    from envlock.index.pools import Pools

    pools = Pools(cafile=None, client_cert=None, is_trusted=lambda parts: False,
                  auth={("https", "idx.example", 443): (USER, SECRET)}, user_agent="t")
    https = pools._authorization(urlsplit("https://idx.example/simple/x/"), from_url=True)
    same = pools._authorization(urlsplit("https://IDX.example:443/files/x.whl"), from_url=True)
    clear = pools._authorization(urlsplit("http://idx.example/files/x.whl"), from_url=True)
    other_port = pools._authorization(urlsplit("https://idx.example:8443/x"), from_url=True)
    assert https and https == same
    assert clear is None and other_port is None


def test_netrc_default_does_not_follow_a_redirect_to_another_host(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text(f"default login {USER} password {SECRET}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    with IndexServer() as files, IndexServer() as index:
        files.add_index("pypi", json_api=False, pep658=False).add(
            make_wheel(tmp_path / "w2", "demo", "1.0", requires=["dep>=1"]))
        index.add_index("pypi", json_api=False, pep658=False).add(
            make_wheel(tmp_path / "w", "demo", "1.0", requires=["dep>=1"]))
        index.auth = (USER, SECRET)  # the index needs netrc's default entry
        index.redirect_files_to = files.base.replace("127.0.0.1", "localhost")
        with IndexClient(IndexConfig(index_url=index.url("pypi"), retries=0, timeout=10),
                         cache_dir=tmp_path / "cache") as client:
            page = client.page(index.url("pypi"), "demo")
            assert page is not None
            client.metadata(page.dists[0])
        assert index.seen_auth and all(a for _, a in index.seen_auth)
        assert files.seen_auth, "the download was not redirected"
        assert all(a is None for _, a in files.seen_auth), files.seen_auth
