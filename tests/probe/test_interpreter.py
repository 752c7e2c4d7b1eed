"""``--python PATH``: envlock in one virtual environment records another's packages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envlock.probe.machine import take_snapshot


def _venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   capture_output=True)
    site = next((path / "lib").glob("python*/site-packages"))
    info = site / "planted_pkg-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: planted-pkg\nVersion: 1.2.3\n")
    return path / "bin" / "python"


def test_snapshot_of_another_interpreter_sees_its_packages_only(tmp_path: Path) -> None:
    python = _venv(tmp_path / "locked")
    snap = take_snapshot(python=str(python), probe_gpus=False, env={})
    assert snap.packages.get("planted-pkg") == "1.2.3"
    # envlock's own dependencies (installed where envlock runs) are not the locked env's
    assert "resolvelib" not in snap.packages and "tomlkit" not in snap.packages
    assert snap.python.executable == str(python)
    own = take_snapshot(probe_gpus=False, env={})
    assert "planted-pkg" not in own.packages and "resolvelib" in own.packages


def test_the_other_interpreter_runs_in_the_recorded_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other interpreter sees the ``PYTHONPATH`` of the environment being recorded, not
    the one envlock itself runs with (on a GPU host envlock's dependencies sat on its own
    ``PYTHONPATH`` and turned up among the locked environment's packages)."""
    python = _venv(tmp_path / "locked")
    extra = tmp_path / "extra"
    info = extra / "leaked_pkg-9.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: leaked-pkg\nVersion: 9.9\n")
    monkeypatch.setenv("PYTHONPATH", str(extra))  # envlock's own environment
    apart = take_snapshot(python=str(python), probe_gpus=False, env={})
    assert "leaked-pkg" not in apart.packages and apart.packages.get("planted-pkg") == "1.2.3"
    told = take_snapshot(python=str(python), probe_gpus=False, env={"PYTHONPATH": str(extra)})
    assert told.packages.get("leaked-pkg") == "9.9"


def test_a_broken_python_is_a_one_line_input_error(tmp_path: Path) -> None:
    lock = Path(__file__).resolve().parents[1] / "data" / "locks" / "h100-pypi.lock"
    for bad in (tmp_path / "missing", Path("/bin/false")):
        proc = subprocess.run([sys.executable, "-m", "envlock", "verify", "--lock", str(lock),
                               "--stage", "build", "--python", str(bad)],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.startswith("envlock: error: ") and str(bad) in proc.stderr
        assert "Traceback" not in proc.stderr
