"""Limits and output hygiene (issue 32, item 6): each seen case, run.

- a resolve's total work is bounded (ENVLOCK_MAX_PAGES), one line, exit 4;
- ``--python`` printing JSON nested 100,000 deep: one line, exit 2 (was 70);
- a full disk on ``-o``: one line, exit 2, the old file untouched (was 70);
- ``-o newdir/``: refused, no file named ``newdir`` (was written, exit 0);
- ``snapshot --show`` and ``fleet --snapshots`` print no terminal control sequence from a
  snapshot, and a lone surrogate in its hostname is no exit 70;
- a URL's ``?token=`` is redacted in a snapshot's environment values.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import run_cli, run_proc
from support.index_server import IndexServer
from support.torch_world import add_package, add_torch_release, resolve

from envlock.probe.host import relevant_env

DATA = Path(__file__).resolve().parents[1] / "data"
LOCK = DATA / "locks" / "cu121-h100-h20.lock"
HOSTILE_HOST = "bad\ud800host\x1b]0;pwned\x07\x1b[2J\x9b31m"


def _hostile_snapshot(tmp_path: Path) -> Path:
    d = json.loads((DATA / "snapshots" / "h100-match.json").read_text())
    d["host"]["hostname"] = HOSTILE_HOST
    p = tmp_path / "hostile.json"
    p.write_text(json.dumps(d))  # ensure_ascii: the surrogate as \ud800, as an attacker writes it
    return p


def _no_controls(text: str) -> None:
    assert "\x1b]" not in text and "\x1b[2J" not in text and "\x07" not in text
    assert "\x9b" not in text and "\ud800" not in text


def test_snapshot_show_escapes_control_sequences_and_surrogates(tmp_path: Path) -> None:
    r = run_proc("snapshot", "--show", str(_hostile_snapshot(tmp_path)))
    assert r.code == 0, r.err
    _no_controls(r.out)
    assert "\\x1b]0;pwned\\x07" in r.out and "\\ud800" in r.out


@pytest.mark.parametrize("extra", [[], ["--json"], ["--report", "REPORT"]],
                         ids=["text", "json", "report"])
def test_fleet_snapshots_with_a_surrogate_hostname_is_no_internal_error(
        tmp_path: Path, extra: list) -> None:
    extra = [str(tmp_path / "r.json") if a == "REPORT" else a for a in extra]
    r = run_proc("fleet", "--snapshots", str(_hostile_snapshot(tmp_path)), "--lock", str(LOCK),
                 *extra)
    assert r.code in (0, 1), r.err
    assert "Traceback" not in r.err and "internal error" not in r.err
    _no_controls(r.out + r.err)
    if "--report" in extra:
        _no_controls((tmp_path / "r.json").read_text())


def test_query_secrets_are_redacted_in_snapshot_environment_values() -> None:
    env = relevant_env({"TORCH_HOME_URL": "https://hub.example/api?x=1&token=Tk3n-planted",
                        "TRITON_URL": "https://s3.example/o?X-Amz-Signature=ab12&y=2",
                        "CUDA_VISIBLE_DEVICES": "0,1"})
    text = json.dumps(env)
    assert "Tk3n-planted" not in text and "ab12" not in text
    assert env["TORCH_HOME_URL"] == "https://hub.example/api?x=1&token=<redacted>"
    assert env["CUDA_VISIBLE_DEVICES"] == "0,1"


def test_a_python_printing_deeply_nested_json_is_one_line_exit_2(tmp_path: Path) -> None:
    script = tmp_path / "python"
    script.write_text(f"#!{sys.executable}\nprint('[' * 100000 + ']' * 100000)\n")
    script.chmod(0o755)
    r = run_proc("snapshot", "--python", str(script), "-o", str(tmp_path / "s.json"))
    assert r.code == 2, r.err
    assert "not a working Python interpreter" in r.err and "Traceback" not in r.err
    assert not (tmp_path / "s.json").exists()


def test_o_newdir_slash_is_refused_and_writes_no_file(tmp_path: Path) -> None:
    target = tmp_path / "newdir"
    r = run_cli("snapshot", "-o", str(target) + "/")
    assert r.code == 2 and "names a directory" in r.err, r.err
    assert not target.exists()
    target.mkdir()
    r = run_cli("snapshot", "-o", str(target) + "/")
    assert r.code == 2 and "is a directory" in r.err, r.err


def _can_mount_tmpfs() -> bool:
    if shutil.which("unshare") is None:
        return False
    p = subprocess.run(["unshare", "-Urm", "sh", "-c", "mount -t tmpfs -o size=16k t /mnt"],
                       capture_output=True, timeout=30)
    return p.returncode == 0


@pytest.mark.skipif(not sys.platform.startswith("linux") or not _can_mount_tmpfs(),
                    reason="needs an unprivileged mount namespace for a small tmpfs")
def test_a_full_disk_on_o_is_one_line_and_keeps_the_old_file(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    root = Path(__file__).resolve().parents[2]
    script = (f"mount -t tmpfs -o size=16k t {mnt} && echo old > {mnt}/s.json && "
              f"(dd if=/dev/zero of={mnt}/fill bs=1k count=64 2>/dev/null; true) && "
              f"{sys.executable} -m envlock snapshot -o {mnt}/s.json; echo rc=$?; "
              f"cat {mnt}/s.json; ls -a {mnt}")
    p = subprocess.run(["unshare", "-Urm", "sh", "-c", script], capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=str(root)))
    assert "rc=2" in p.stdout, (p.stdout, p.stderr)
    assert "No space left on device" in p.stderr and "Traceback" not in p.stderr
    lines = p.stdout.split()
    assert "old" in lines  # the file as it was
    assert not [n for n in lines if n.endswith(".tmp")]  # no temporary file left


@pytest.fixture(scope="module")
def fanout(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("fanout")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        deps = [f"dep{i}" for i in range(120)]
        add_package(pypi, tmp, "fan", "1.0", deps)
        for d in deps:
            add_package(pypi, tmp, d, "1.0")
        yield srv


def test_a_resolve_needing_too_many_pages_stops_in_one_line(
        fanout: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("ENVLOCK_MAX_PAGES", "60")
    r = resolve(fanout, "--gpu", "H100 SXM", "--torch", "==2.5.1", "fan",
                "-o", str(tmp_path / "l.lock"))
    assert r.code == 4, r.err
    assert "ENVLOCK_MAX_PAGES" in r.err and "Traceback" not in r.err
    assert len(fanout.requests("/pypi/simple/")) <= 60
    monkeypatch.setenv("ENVLOCK_MAX_PAGES", "1000")
    r = resolve(fanout, "--gpu", "H100 SXM", "--torch", "==2.5.1", "fan",
                "-o", str(tmp_path / "l.lock"))
    assert r.code == 0, r.err
