"""envlock's own distribution: the name ``envlock-gpu`` everywhere (``envlock`` on PyPI is
an unrelated project), the metadata kept in step with pyproject.toml, and a reproducible
wheel of the running envlock that pip installs."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Tuple

import pytest

from envlock.distribution import DISTRIBUTION, REQUIRES, REQUIRES_PYTHON, build_wheel
from support.names import bare_envlock

ROOT = Path(__file__).resolve().parents[1]

@pytest.mark.parametrize("text, bad", [
    ("pip install 'envlock[torch]'", True), ("pip install envlock==0.1.0", True),
    ("pip install -U envlock", True), ("ARG R=envlock==0.1.0", True),
    ("envlock @ https://x/y.whl", True), ("pip install 'envlock-gpu[torch]'", False),
    ("pip install envlock-gpu==0.1.0", False), ("envlock verify --stage build", False),
    ("pip install . && envlock resolve", False), ("usage: envlock [-h] [--version]", False),
    ("./envlock_gpu-0.1.0-py3-none-any.whl", False),
])
def test_the_scanner_finds_bare_requirements(text: str, bad: bool) -> None:
    assert bool(list(bare_envlock(text))) is bad


def _tomllib():  # type: ignore[no-untyped-def]
    try:
        import tomllib
    except ImportError:  # Python < 3.11
        import tomli as tomllib  # type: ignore[no-redef]
    return tomllib


def test_pyproject_names_the_distribution_and_its_requirements() -> None:
    project = _tomllib().loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["name"] == DISTRIBUTION == "envlock-gpu"
    assert tuple(project["dependencies"]) == REQUIRES
    assert project["requires-python"] == REQUIRES_PYTHON
    assert project["scripts"] == {"envlock": "envlock.cli:main"}


def test_no_source_message_or_doc_names_bare_envlock() -> None:
    """Every hint and error message is a literal in the sources; README and the docs are
    what users copy from."""
    files = sorted(ROOT.glob("envlock/**/*.py")) + [ROOT / "README.md", ROOT / "pyproject.toml"]
    files += sorted(ROOT.glob("docs/**/*.md"))
    found = {str(f.relative_to(ROOT)): hits for f in files
             if (hits := list(bare_envlock(f.read_text(encoding="utf-8"))))}
    assert found == {}


def test_help_of_every_command_names_no_bare_envlock() -> None:
    from envlock.cli import COMMANDS

    for cmd in [None, *COMMANDS]:
        argv = [sys.executable, "-m", "envlock", *([cmd] if cmd else []), "--help"]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
        assert proc.returncode == 0, proc.stderr
        assert list(bare_envlock(proc.stdout)) == [], cmd


def _wheel(**kw: object) -> Tuple[str, bytes]:
    return build_wheel(**kw)  # type: ignore[arg-type]


def test_the_wheel_is_reproducible_and_complete() -> None:
    name, data = _wheel(source_date_epoch=1700000000)
    again = _wheel(source_date_epoch=1700000000)[1]
    assert name == "envlock_gpu-0.1.0-py3-none-any.whl"
    assert hashlib.sha256(data).digest() == hashlib.sha256(again).digest()
    assert _wheel(source_date_epoch=1700003600)[1] != data  # (zip time: 2 s steps)
    zf = zipfile.ZipFile(io.BytesIO(data))
    names = zf.namelist()
    assert names[:-5] == sorted(names[:-5]) and names[-1].endswith(".dist-info/RECORD")
    for toml in sorted((ROOT / "compat-matrix").glob("*.toml")):
        assert f"envlock/compat-matrix/{toml.name}" in names
    assert "envlock/schemas/snapshot-1.json" in names and "envlock/py.typed" in names
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]
    for info in zf.infolist():
        assert info.date_time == (2023, 11, 14, 22, 13, 20)
        assert info.external_attr >> 16 == 0o100644
    meta = zf.read("envlock_gpu-0.1.0.dist-info/METADATA").decode()
    assert "Name: envlock-gpu\n" in meta
    assert [line[len("Requires-Dist: "):] for line in meta.splitlines()
            if line.startswith("Requires-Dist: ") and "extra ==" not in line] == list(REQUIRES)
    entry = zf.read("envlock_gpu-0.1.0.dist-info/entry_points.txt")
    assert b"envlock = envlock.cli:main" in entry


def test_the_wheel_installs_and_runs_without_this_checkout(tmp_path: Path) -> None:
    """pip accepts it (RECORD, names, tags) and the installed copy runs on its own files:
    a wheel of that installed (non-editable) copy is the same wheel again."""
    name, data = _wheel(source_date_epoch=1700000000)
    (tmp_path / name).write_bytes(data)
    target = tmp_path / "site"
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-index",
                           "--no-cache-dir", "--target", str(target), str(tmp_path / name)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    code = ("import sys, envlock, hashlib\n"
            "from envlock.distribution import build_wheel\n"
            "assert envlock.__file__.startswith(sys.argv[1]), envlock.__file__\n"
            "print(hashlib.sha256(build_wheel(source_date_epoch=1700000000)[1]).hexdigest())")
    run = subprocess.run([sys.executable, "-c", code, str(target)], capture_output=True,
                         text=True, timeout=60, env={"PYTHONPATH": str(target),
                                                     "PATH": "/usr/bin:/bin"}, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == hashlib.sha256(data).hexdigest()
