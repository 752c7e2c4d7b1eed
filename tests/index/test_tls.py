"""The index client over TLS, against a real HTTPS index on 127.0.0.1 whose certificate a
throwaway CA signed (``support.tls``): verification is on unless a host is trusted, and
the CA bundle comes from where pip and requests take it (``--cert``/``PIP_CERT``, else
``REQUESTS_CA_BUNDLE`` or ``CURL_CA_BUNDLE``)."""

from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest
from support.cli import run_cli
from support.index_server import IndexServer, make_wheel
from support.tls import Pki, make_pki

from envlock.errors import IndexError_, InputError
from envlock.index import IndexClient
from envlock.index.config import load_index_config

WHEEL = "demo-1.0-py3-none-any.whl"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki: Pki, tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("tlsworld")
    with IndexServer(tls=(pki.cert, pki.key)) as srv:
        srv.add_index("pypi").add(make_wheel(tmp, "demo", "1.0"))
        yield srv


def _page(server: IndexServer, tmp_path: Path, env: Dict[str, str]):
    config = load_index_config(env={"PIP_CONFIG_FILE": "/dev/null", "PIP_RETRIES": "0",
                                    **env}, index_url=server.url("pypi"))
    with IndexClient(config, cache_dir=tmp_path / "cache") as client:
        return client.page(server.url("pypi"), "demo")


@pytest.fixture(autouse=True)
def no_ca_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "SSL_CERT_FILE",
                "SSL_CERT_DIR"):
        monkeypatch.delenv(var, raising=False)


def test_an_unknown_ca_is_refused(server: IndexServer, tmp_path: Path) -> None:
    assert server.base.startswith("https://127.0.0.1:")
    with pytest.raises(IndexError_, match="TLS certificate could not be verified"):
        _page(server, tmp_path, {})


def test_a_ca_that_signed_something_else_is_refused(server: IndexServer, pki: Pki,
                                                   tmp_path: Path) -> None:
    with pytest.raises(IndexError_, match="TLS certificate could not be verified"):
        _page(server, tmp_path, {"PIP_CERT": str(pki.other_ca)})


def test_pip_cert_names_the_ca(server: IndexServer, pki: Pki, tmp_path: Path) -> None:
    page = _page(server, tmp_path, {"PIP_CERT": str(pki.ca)})
    assert [d.filename for d in page.dists] == [WHEEL]


@pytest.mark.parametrize("var", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_the_ca_bundle_variables_pip_honours_name_the_ca(
        server: IndexServer, pki: Pki, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        var: str) -> None:
    """pip (through requests) takes its CA bundle from these when no --cert is given; a
    machine set up for pip behind a private CA must work with envlock unchanged. (They were
    ignored: the shared TLS context always loaded the default bundle.)"""
    monkeypatch.setenv(var, str(pki.ca))
    page = _page(server, tmp_path, {})
    assert [d.filename for d in page.dists] == [WHEEL]


def test_pip_cert_wins_over_the_environment(server: IndexServer, pki: Pki, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(pki.ca))
    with pytest.raises(IndexError_, match="TLS certificate could not be verified"):
        _page(server, tmp_path, {"PIP_CERT": str(pki.other_ca)})


@pytest.mark.parametrize("trusted", ["127.0.0.1", "127.0.0.1:{port}", "x.example 127.0.0.1"])
def test_a_trusted_host_is_not_verified(server: IndexServer, tmp_path: Path,
                                        trusted: str) -> None:
    # as pip names it: the host (any port) or host:port
    page = _page(server, tmp_path, {"PIP_TRUSTED_HOST": trusted.format(port=server.port)})
    assert [d.filename for d in page.dists] == [WHEEL]


def test_a_trusted_host_on_another_port_is_still_verified(server: IndexServer,
                                                          tmp_path: Path) -> None:
    with pytest.raises(IndexError_, match="TLS certificate could not be verified"):
        _page(server, tmp_path, {"PIP_TRUSTED_HOST": f"127.0.0.1:{server.port + 1}"})


def test_a_refused_certificate_is_one_line_and_exit_4(server: IndexServer, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_RETRIES", "0")
    r = run_cli("resolve", "--gpu", "H100 SXM", "--torch", "==2.5.1", "--index-url",
                server.url("pypi"), "--pytorch-index-url", f"{server.base}/pytorch", "demo",
                "--dry-run")
    assert r.code == 4, (r.code, r.err)
    assert "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) <= 2  # the error and its hint
    assert "certificate" in r.err.lower()


def test_a_trusted_host_costs_no_warning_per_request(server: IndexServer, tmp_path: Path) -> None:
    """urllib3 warns on every unverified request; a host the user chose to trust (as pip's
    --trusted-host) must not fill the screen with that warning."""
    import subprocess
    import sys

    env = {"PIP_CONFIG_FILE": "/dev/null", "PIP_TRUSTED_HOST": "127.0.0.1",
           "ENVLOCK_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-m", "envlock", "resolve", "--gpu", "H100 SXM",
                        "--torch", "==2.5.1", "--index-url", server.url("pypi"),
                        "--pytorch-index-url", f"{server.base}/pytorch", "demo",
                        "--dry-run"], env=env, capture_output=True, text=True, timeout=300)
    assert "InsecureRequestWarning" not in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


# -- a CA bundle or client certificate that cannot be used ----------------------------------
# pip and requests refuse these settings; envlock dropped a missing bundle without a word and
# verified against the system's trust store instead of the one the user named.

def test_a_missing_ca_bundle_is_the_users_input_named_with_where_it_was_set(
        server: IndexServer, tmp_path: Path) -> None:
    missing = tmp_path / "no-such-ca.pem"
    with pytest.raises(InputError) as info:
        _page(server, tmp_path, {"PIP_CERT": str(missing)})
    assert str(info.value) == f"the CA bundle {missing} does not exist ($PIP_CERT)"


@pytest.mark.parametrize("var", ["REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"])
def test_a_missing_bundle_from_the_environment_names_its_variable(
        server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        var: str) -> None:
    monkeypatch.setenv(var, str(tmp_path / "gone.pem"))
    with pytest.raises(InputError, match=rf"gone\.pem does not exist \(\${var}\)"):
        _page(server, tmp_path, {})


def test_a_bundle_without_certificates_says_what_openssl_found(
        server: IndexServer, tmp_path: Path) -> None:
    bad = tmp_path / "not-a-bundle.pem"
    bad.write_text("this is not a certificate\n")
    with pytest.raises(InputError) as info:
        _page(server, tmp_path, {"PIP_CERT": str(bad)})
    assert str(info.value).startswith(f"the CA bundle {bad} cannot be used (")
    assert "$PIP_CERT" in str(info.value) and "_ssl.c" not in str(info.value)


def test_a_client_certificate_that_cannot_be_read_is_named(server: IndexServer, pki: Pki,
                                                           tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"the client certificate .*nope\.pem cannot be "
                                         r"used .*\$PIP_CLIENT_CERT"):
        _page(server, tmp_path, {"PIP_CERT": str(pki.ca),
                                 "PIP_CLIENT_CERT": str(tmp_path / "nope.pem")})


def test_a_missing_bundle_ends_resolve_with_exit_2_and_asks_nothing(
        server: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_CONFIG_FILE", "/dev/null")
    monkeypatch.setenv("PIP_CERT", str(tmp_path / "missing.pem"))
    before = len(server.log)
    r = run_cli("resolve", "--gpu", "H100 SXM", "--torch", "==2.5.1", "--index-url",
                server.url("pypi"), "--pytorch-index-url", f"{server.base}/pytorch", "demo",
                "-o", str(tmp_path / "o.lock"))
    assert r.code == 2, (r.code, r.err)
    lines = r.err.strip().splitlines()
    assert lines[0] == (f"envlock: error: the CA bundle {tmp_path / 'missing.pem'} does not "
                        f"exist ($PIP_CERT)"), r.err
    assert len(lines) == 2 and lines[1].startswith("hint: ")
    assert "Traceback" not in r.err and not (tmp_path / "o.lock").exists()
    assert len(server.log) == before  # no request reached the index


def test_no_warm_up_when_the_first_page_is_fresh_in_the_cache(
        server: IndexServer, pki: Pki, tmp_path: Path) -> None:
    """A resolve whose first pages are in the cache may open no connection: the warm-up
    (imports and the TLS context, ~0.1 s of CPU) is then not started."""
    from envlock.index.http import warm_up

    env = {"PIP_CONFIG_FILE": "/dev/null", "PIP_RETRIES": "0", "PIP_CERT": str(pki.ca)}
    config = load_index_config(env=env, index_url=server.url("pypi"))
    with IndexClient(config, cache_dir=tmp_path / "cache") as client:
        assert client.page(server.url("pypi"), "demo") is not None  # now in the cache

    def started(*first: str) -> bool:
        thread = warm_up(config, tmp_path / "cache", first)
        if thread is not None:
            thread.join()
        return thread is not None

    assert not started("torch", "demo")
    assert started("torch", "other")  # nothing of these in the cache: a cold start
    assert started()
