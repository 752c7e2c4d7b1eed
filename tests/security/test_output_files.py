"""Issue 18 items 6, 7, 12: what ``-o`` does to what is already there, input size caps,
and the mode of written files. All on real files, FIFOs, links and devices."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from envlock._files import atomic_write_text, read_user_text
from envlock.errors import InputError
from tests.security.cli_run import run_cli
from tests.security.documents import DATA, LOCK

EXPORT = ["export", "--lock", str(LOCK), "--format", "constraints", "--target", "h100-sxm"]


def test_symlink_target_is_replaced_and_the_link_stays(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "link.txt"
    link.symlink_to(real.name)
    r = run_cli([*EXPORT, "-o", str(link)])
    assert r.code == 0, r.stderr
    assert link.is_symlink() and os.readlink(link) == real.name
    assert real.read_text().startswith("# pip constraints file")
    assert stat.S_IMODE(real.stat().st_mode) == 0o640  # an existing file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.txt", "real.txt"]


def test_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.txt"
    link.symlink_to("made.txt")
    atomic_write_text(link, "x\n")
    assert link.is_symlink() and (tmp_path / "made.txt").read_text() == "x\n"


def test_fifo_is_written_into_not_replaced(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    r = run_cli([*EXPORT, "-o", str(fifo)])
    reader.join(timeout=120)
    assert r.code == 0, r.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got and got[0].startswith(b"# pip constraints file")


def test_character_device_is_written_into_not_replaced() -> None:
    before = os.stat("/dev/null")
    r = run_cli([*EXPORT, "-o", "/dev/null"])
    assert r.code == 0, r.stderr
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev
    assert after.st_ino == before.st_ino


def test_a_directory_is_a_one_line_error(tmp_path: Path) -> None:
    r = run_cli([*EXPORT, "-o", str(tmp_path)])
    assert r.code == 2
    assert r.stderr == f"envlock: error: cannot write {tmp_path}: it is a directory\n"
    link = tmp_path / "to-dir"
    link.symlink_to(tmp_path)
    r = run_cli([*EXPORT, "-o", str(link)])
    assert r.code == 2 and "it is a directory" in r.stderr
    assert link.is_symlink()


def test_a_socket_is_refused(tmp_path: Path) -> None:
    import socket

    path = tmp_path / "sock"
    s = socket.socket(socket.AF_UNIX)
    try:
        s.bind(str(path))
        r = run_cli([*EXPORT, "-o", str(path)])
    finally:
        s.close()
    assert r.code == 2 and "not a regular file" in r.stderr
    assert stat.S_ISSOCK(path.stat().st_mode)


def test_a_mount_point_is_a_one_line_error(tmp_path: Path) -> None:
    """A bind-mounted file (as Docker mounts /etc/hosts) cannot be renamed over: EBUSY.
    Run in a private mount namespace (unshare -m), so nothing outside sees the mount."""
    import shutil
    import subprocess
    import sys

    if not shutil.which("unshare") or os.geteuid() != 0:
        pytest.skip("needs root and unshare(1) for a private bind mount")
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_text("source\n")
    dst.write_text("mounted over\n")
    script = (f"mount --bind {src} {dst} || exit 99; "
              f"exec {sys.executable} -m envlock {' '.join(EXPORT)} -o {dst}")
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
    p = subprocess.run(["unshare", "-m", "sh", "-c", script], capture_output=True, text=True,
                       env=env, timeout=300)
    if p.returncode == 99 or "unshare failed" in p.stderr:
        pytest.skip(f"cannot bind-mount here: {p.stderr.strip()}")
    assert p.returncode == 2, p.stderr
    assert p.stderr.splitlines()[-1] == (f"envlock: error: cannot write {dst}: it is a mount "
                                         f"point or busy (Device or resource busy)")
    assert src.read_text() == "source\n" and dst.read_text() == "mounted over\n"
    assert sorted(x.name for x in tmp_path.iterdir()) == ["dst", "src"]  # no temp left


def test_new_files_honour_the_umask(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "a.lock", "x")
        os.umask(0o077)
        atomic_write_text(tmp_path / "b.lock", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a.lock").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "b.lock").stat().st_mode) == 0o600


def test_endless_inputs_are_capped() -> None:
    with pytest.raises(InputError, match="larger than"):
        read_user_text("/dev/zero", "log file", limit=1024 * 1024)
    r = run_cli(["doctor", "--snapshot", str(DATA / "snapshots" / "h100-match.json"),
                 "--log", "/dev/zero"])
    assert r.code == 2 and "larger than 64 MiB" in r.stderr
    r = run_cli(["resolve", "--gpu", "H100 SXM", "--offline", "--dry-run", "-r", "/dev/zero"])
    assert r.code == 2 and "larger than 64 MiB" in r.stderr
