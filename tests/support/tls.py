"""A throwaway certificate authority and a server certificate for 127.0.0.1, made with the
``openssl`` command (tests that need them skip where it is missing), so the index client's
TLS paths run against a real HTTPS index on the loopback interface."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

__all__ = ["Pki", "make_pki"]


@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA certificate (what a client trusts)
    cert: Path  # the server certificate, for IP 127.0.0.1, signed by the CA
    key: Path  # the server's private key
    other_ca: Path  # a CA that signed nothing the server holds


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, timeout=120)


def _ca(directory: Path, name: str) -> None:
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2",
             "-subj", f"/CN=envlock test {name}",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=directory)


def make_pki(directory: Path) -> Pki:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed here: no test certificates")
    directory.mkdir(parents=True, exist_ok=True)
    _ca(directory, "ca")
    _ca(directory, "other")
    _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1",
             cwd=directory)
    (directory / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\n"
                                       "basicConstraints=critical,CA:FALSE\n"
                                       "keyUsage=critical,digitalSignature\n"
                                       "extendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf",
             cwd=directory)
    return Pki(directory / "ca.pem", directory / "server.pem", directory / "server.key",
               directory / "other.pem")
