"""Issue 18: the total request deadline covers the TLS handshake, not only what follows it.

A server that accepts the connection and then drips a TLS handshake (a valid record header
announcing 16 KB, then a byte at a time) never trips a connect or read timeout: every byte
resets them. ``resolve`` must still end at ENVLOCK_INDEX_DEADLINE with exit 4 in one line.
No certificate is needed: the handshake never gets far enough to look at one.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.signals import default_sigint, press_ctrl_c

from tests.security.cli_run import assert_contract, run_cli

ROOT = Path(__file__).resolve().parents[2]

# a TLS record: type 22 (handshake), version 3.3, length 16384; the body never comes in full
_RECORD_HEADER = b"\x16\x03\x03\x40\x00"


class DripTLS:
    """A loopback TCP server that answers every connection with a TLS record header and
    then one byte every ``interval`` seconds until the client goes away."""

    def __init__(self, interval: float = 0.5) -> None:
        self.interval = interval
        self.accepted = threading.Event()
        self.dripped = threading.Event()  # at least one byte of the record body went out
        self.connections = 0
        self._stop = threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._threads: list[threading.Thread] = []

    def __enter__(self) -> DripTLS:  # noqa: PYI034 - typing.Self needs 3.11
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._listener.close()
        for t in self._threads:
            t.join(timeout=30)

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except (socket.timeout, OSError):
                continue
            self.connections += 1
            self.accepted.set()
            t = threading.Thread(target=self._drip, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _drip(self, conn: socket.socket) -> None:
        with conn:
            try:
                conn.sendall(_RECORD_HEADER)
                while not self._stop.wait(self.interval):
                    conn.sendall(b"\x00")
                    self.dripped.set()
            except OSError:  # the client gave up: that is the point
                return


@pytest.fixture
def drip() -> Iterator[DripTLS]:
    with DripTLS() as srv:
        yield srv


def test_a_dripped_tls_handshake_ends_at_the_total_deadline(
        drip: DripTLS, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_INDEX_DEADLINE", "2")
    monkeypatch.setenv("PIP_TIMEOUT", "120")  # a connect/read timeout the drip never trips
    monkeypatch.setenv("PIP_RETRIES", "3")
    index = f"https://127.0.0.1:{drip.port}/simple"
    argv = ["resolve", "--gpu", "H100 SXM", "--index-url", index, "--dry-run", "numpy"]
    start = time.monotonic()
    r = run_cli(argv)
    took = time.monotonic() - start
    assert_contract(r, argv)
    assert r.code == 4, r.stderr
    assert drip.accepted.is_set() and drip.dripped.is_set()
    error = [ln for ln in r.stderr.splitlines() if ln.strip() and not ln.startswith("hint:")]
    assert len(error) == 1 and "did not answer within the 2 s deadline" in error[0], r.stderr
    # 2 s plus slack for a loaded machine; without the fix the handshake alone took the
    # 120 s timeout for each of the four attempts
    assert took < 45, took


def test_ctrl_c_during_a_dripped_tls_handshake_ends_the_process_at_once(
        drip: DripTLS, tmp_path: Path) -> None:
    """The handshake runs on a worker thread; Ctrl-C cancels it instead of waiting out the
    connect timeout (here 120 s) before the process can exit."""
    env = dict(os.environ, ENVLOCK_CACHE_DIR=str(tmp_path / "cache"), PIP_TIMEOUT="120",
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "envlock", "resolve", "--gpu", "H100 SXM", "--index-url",
         f"https://127.0.0.1:{drip.port}/simple", "--pytorch-index-url",
         f"https://127.0.0.1:{drip.port}/whl", "--torch", "==2.5.1",
         "-o", str(tmp_path / "envlock.lock")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=str(tmp_path),
            preexec_fn=default_sigint)
    if not drip.dripped.wait(120):
        proc.kill()
        raise AssertionError("envlock never reached the handshake")
    _, err, took = press_ctrl_c(proc, timeout=100)
    assert proc.returncode == 130, err
    assert err.splitlines() == ["envlock: interrupted"]
    assert took < 10, took  # generous for a loaded machine
    assert not (tmp_path / "envlock.lock").exists()
