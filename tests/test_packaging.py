"""The built wheel carries the matrix and the schema, and the README stays true."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_wheel_ships_the_matrix_and_the_schema(tmp_path: Path) -> None:
    # the build runs in a child; importing setuptools here would trip its distutils hack
    # when an earlier test already imported the stdlib distutils in this process
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not installed")
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                        "-q", "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {p.stderr.strip()[-200:]}")
    (whl,) = tmp_path.glob("envlock_gpu-*.whl")
    names = set(zipfile.ZipFile(whl).namelist())
    for data in sorted((ROOT / "compat-matrix").glob("*.toml")):
        assert f"envlock/compat-matrix/{data.name}" in names
    assert "envlock/schemas/snapshot-1.json" in names
    assert "envlock/py.typed" in names
    entry = zipfile.ZipFile(whl).read(next(n for n in names if n.endswith("entry_points.txt")))
    assert b"envlock = envlock.cli:main" in entry


def test_ci_runs_exactly_the_readme_test_command() -> None:
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```\n(.*?)```", readme, re.S)
    test_cmd = next(b.strip() for b in blocks if "pytest" in b and "pip install" in b)
    ci = (ROOT / ".ci" / "run").read_text()
    # .ci/run reads the command from the README (the block after its marker) and runs it
    # as written in a fresh venv: the block it reads must be the README's test command
    marker = re.search(r"^marker='([^']+)'$", ci, re.M)
    assert marker, ".ci/run names no README marker"
    after = readme.split(marker.group(1) + "\n", 1)[1]
    assert re.match(r"\s*```\n(.*?)\n```", after, re.S).group(1).strip() == test_cmd
    assert "python3 -m venv" in ci and "--system-site-packages" not in ci


def test_readme_quickstart_runs_the_main_job() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "pip install . && envlock resolve --gpu H20" in readme


def test_every_documented_command_exists() -> None:
    from support.cli import run_cli

    readme = (ROOT / "README.md").read_text()
    code = "\n".join(re.findall(r"```\n(.*?)```", readme, re.S))
    used = set(re.findall(r"^envlock (\w+)", code, re.M))
    assert {"resolve", "snapshot", "verify", "doctor", "export", "matrix"} <= used
    for cmd in used:
        r = run_cli(cmd, "--help") if cmd != "matrix" else run_cli("matrix", "gpu", "--help")
        assert r.code == 0, cmd


def test_readme_counts_match_the_matrix() -> None:
    from envlock.matrix import get_matrix

    m = get_matrix()
    readme = (ROOT / "README.md").read_text()
    assert f"{len(m.gpus)} GPU models" in readme
    assert f"{len(m.advisories)} advisories" in readme
    assert f"PyTorch release {list(m.torch_releases)[0]} to {list(m.torch_releases)[-1]}" in readme
