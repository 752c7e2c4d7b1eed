"""The process's TLS contexts: made once per setting (reading a CA bundle is ~25 ms of CPU,
which the warm-up does ahead of the first request), made again when the bundle changes."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from support.tls import Pki, make_pki

from envlock.index.config import IndexConfig
from envlock.index.http import warm_up
from envlock.index.pools import shared_context


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _bundle(path: Path, ca: Path) -> Path:
    """A CA bundle of one CA, at ``path``."""
    shutil.copyfile(ca, path)
    return path


def test_one_context_per_bundle_and_a_rewritten_bundle_is_read_again(
        tmp_path: Path, pki: Pki) -> None:
    bundle = _bundle(tmp_path / "ca-one.pem", pki.ca)
    a = shared_context(str(bundle), None, True)
    assert shared_context(str(bundle), None, True) is a
    assert a.verify_mode == ssl.CERT_REQUIRED and a.check_hostname
    assert len(a.get_ca_certs()) == 1
    # the same path, other bytes (a CA rotated in place): not the old context
    two = _bundle(tmp_path / "ca-two.pem", pki.other_ca)
    os.replace(two, bundle)
    b = shared_context(str(bundle), None, True)
    assert b is not a
    assert b.get_ca_certs()[0]["subject"] != a.get_ca_certs()[0]["subject"]


def test_a_context_that_does_not_verify_is_its_own(tmp_path: Path, pki: Pki) -> None:
    bundle = _bundle(tmp_path / "ca.pem", pki.ca)
    off = shared_context(str(bundle), None, False)
    assert off.verify_mode == ssl.CERT_NONE and not off.check_hostname
    assert shared_context(str(bundle), None, True) is not off


def test_the_warm_up_makes_the_context_the_first_request_uses(tmp_path: Path,
                                                             pki: Pki) -> None:
    bundle = _bundle(tmp_path / "warm.pem", pki.ca)
    thread = warm_up(IndexConfig(index_url="https://index.invalid/simple", cert=str(bundle)))
    assert thread is not None and thread.name == "envlock-warm-up" and not thread.daemon
    thread.join()
    from envlock.index import pools

    made = [ctx for key, ctx in pools._CONTEXTS.items() if key[0] == str(bundle)]
    assert len(made) == 1  # made by the warm-up, before anything asked for it
    assert shared_context(str(bundle), None, True) is made[0]


def test_no_warm_up_without_an_https_index() -> None:
    assert warm_up(IndexConfig(index_url="http://127.0.0.1:1/simple")) is None
    assert warm_up(IndexConfig(index_url="https://pypi.org/simple", no_index=True)) is None


def test_a_warm_up_that_fails_says_nothing_and_the_request_reports(tmp_path: Path) -> None:
    """A CA bundle that is not one: the warm-up's failure is silent (and not kept); the
    resolve's own first request meets it and reports it as the user's input: exit 2, one
    line and its hint, no lock written."""
    bad = tmp_path / "not-a-bundle.pem"
    bad.write_text("not a certificate\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ENVLOCK_"))}
    env.update(PIP_CERT=str(bad), ENVLOCK_CACHE_DIR=str(tmp_path / "cache"),
               PIP_CONFIG_FILE=os.devnull)
    proc = subprocess.run([sys.executable, "-m", "envlock", "resolve", "--gpu", "H100 SXM",
                           "--torch", "==2.5.1", "--index-url", "https://127.0.0.1:9/simple",
                           "-o", str(tmp_path / "o.lock")],
                          env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert lines[0].startswith(f"envlock: error: the CA bundle {bad} cannot be used ("), lines
    assert lines[0].endswith("($PIP_CERT)") and len(lines) == 2, lines
    assert not (tmp_path / "o.lock").exists()
