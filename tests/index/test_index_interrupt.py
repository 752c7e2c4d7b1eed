"""The real ``envlock`` process against a dripping index: the total deadline ends it with
one exit-4 line, and Ctrl-C (SIGINT) ends it at once with exit 130 and no files left.

Waits on events (the server reports when it started dripping) with generous limits; the
time each case took is printed for the record (``pytest -s``)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.index_server import IndexServer

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def dripping():
    with IndexServer() as srv:
        srv.add_index("pypi")
        srv.raw["/pypi/simple/torch/"] = (200, b"<html><body>" + b" " * 4096, "text/html")
        srv.drip["/pypi/simple/torch/"] = 1.0
        yield srv


def _start(srv: IndexServer, tmp_path: Path, **env: str) -> subprocess.Popen:
    e = dict(os.environ, ENVLOCK_CACHE_DIR=str(tmp_path / "cache"),
             PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **env)
    return subprocess.Popen(
        [sys.executable, "-m", "envlock", "resolve", "--index-url", srv.url("pypi"),
         "--pytorch-index-url", f"{srv.base}/pytorch", "--gpu", "H100 SXM", "--torch", "==2.5.1",
         "-o", str(tmp_path / "out" / "envlock.lock")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e, cwd=str(tmp_path))


def _leftovers(tmp_path: Path) -> list:
    return [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp") or p.suffix == ".lock"]


def test_a_dripping_index_ends_at_the_deadline_with_one_line(dripping: IndexServer,
                                                             tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    proc = _start(dripping, tmp_path, ENVLOCK_INDEX_DEADLINE="3")
    start = time.monotonic()
    out, err = proc.communicate(timeout=180)
    took = time.monotonic() - start
    print(f"\ndrip with a 3 s deadline: exit {proc.returncode} after {took:.2f} s")
    assert proc.returncode == 4, err
    assert err.splitlines() == [f"envlock: error: {dripping.url('pypi')}/torch/ did not answer "
                                f"within the 3 s deadline (ENVLOCK_INDEX_DEADLINE)"]
    assert dripping.drip_started.is_set()
    assert _leftovers(tmp_path) == []


def test_ctrl_c_during_a_slow_index_read_ends_the_process_at_once(dripping: IndexServer,
                                                                  tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    proc = _start(dripping, tmp_path)  # the default deadline (minutes) is not what ends it
    try:
        assert dripping.drip_started.wait(120), "envlock never reached the index"
        time.sleep(0.5)  # let the read block; more waiting only makes the case harder
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    print(f"\nSIGINT during a dripping read: exit {proc.returncode} {took:.2f} s after the "
          f"signal")
    assert proc.returncode == 130, err
    assert err.splitlines() == ["envlock: interrupted"]
    assert took < 10  # generous for a loaded machine; measured well under a second
    assert _leftovers(tmp_path) == []
