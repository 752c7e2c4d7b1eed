"""Against the real PyPI (skipped when it is unreachable)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from envlock.index import IndexClient, IndexConfig
from envlock.platforms import marker_environment
from support.cli import run_cli

pytestmark = pytest.mark.online


def _reachable() -> bool:
    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=8).read(64)
        return True
    except Exception:  # noqa: BLE001
        return False


ONLINE = _reachable()
skip_offline = pytest.mark.skipif(not ONLINE, reason="PyPI is unreachable")


@pytest.fixture
def pypi_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path_factory.getbasetemp() / "online-cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(d))
    return d


@skip_offline
def test_torch_2_5_1_closure_equals_the_wheels_own_pins(tmp_path: Path, pypi_cache: Path) -> None:
    out = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--gpu", "H100 SXM", "--torch", "==2.5.1", "--python", "3.11",
                "--platform", "linux_x86_64", "--index-url", "https://pypi.org/simple",
                "--json", "-o", str(out))
    assert r.code == 0, r.err
    (t,) = json.loads(r.out)["targets"]
    locked = {p["name"]: p for p in t["packages"]}
    # the wheel's own METADATA, read from PyPI independently of the resolver
    with IndexClient(IndexConfig(), cache_dir=pypi_cache) as c:
        page = c.page("https://pypi.org/simple", "torch")
        wheel = next(d for d in page.dists
                     if d.filename == "torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl")
        meta = c.metadata(wheel)
    env = dict(marker_environment("3.11", "linux_x86_64"), extra="")
    checked = 0
    for text in meta.requires_dist:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = req.name.lower()
        assert name in locked, name
        assert req.specifier.contains(locked[name]["version"], prereleases=True), text
        if any(s.operator == "==" for s in req.specifier):
            checked += 1
            assert locked[name]["version"] == next(iter(req.specifier)).version
        assert all(h.startswith("sha256:") for h in locked[name]["hashes"])
    assert checked >= 13  # every nvidia-* pin and triton
    assert locked["torch"]["version"] == "2.5.1"


@skip_offline
def test_newest_torch_plus_transformers_installs_with_hashes(tmp_path: Path,
                                                             pypi_cache: Path) -> None:
    lock = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--gpu", "H100 SXM", "transformers", "--python", "3.11",
                "--index-url", "https://pypi.org/simple", "-o", str(lock))
    assert r.code == 0, r.err
    req = tmp_path / "requirements.txt"
    r = run_cli("export", "--format", "requirements", "--lock", str(lock), "-o", str(req))
    assert r.code == 0, r.err
    target = tmp_path / "target"
    # every manylinux tag the target accepts (pip only expands manylinux2014 and older itself)
    plats = [f"manylinux_2_{m}_x86_64" for m in range(28, 16, -1)] + [
        "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--require-hashes",
           "--only-binary=:all:", "--python-version", "3.11", "--target", str(target),
           "--index-url", "https://pypi.org/simple", "-q",
           "-r", str(req)]
    for p in plats:
        cmd[-2:-2] = ["--platform", p]
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    assert p.returncode == 0, p.stderr[-3000:]
    text = req.read_text()
    assert "transformers==" in text and "torch==" in text


@skip_offline
def test_numpy_advisory_locks_a_pandas_that_imports(tmp_path: Path, pypi_cache: Path) -> None:
    """torch < 2.3 needs NumPy 1 (advisory numpy2-with-torch-before-2-3). The newest pandas
    needs NumPy >= 2.0.2 and fails at import with 1.26.4, so the lock must hold an older
    pandas; installing the locked numpy and pandas into a fresh venv proves it imports."""
    import shutil

    uv = shutil.which("uv") or str(Path(sys.executable).with_name("uv"))
    if not Path(uv).exists():
        pytest.skip("needs uv to build the venv")
    python = "{}.{}".format(*sys.version_info[:2])
    if python not in ("3.9", "3.10", "3.11", "3.12"):
        pytest.skip("torch 2.2.2 has wheels for Python 3.8-3.12 only")
    r = run_cli("resolve", "--gpu", "H100 SXM", "--torch", "==2.2.2", "--python", python,
                "--platform", "linux_x86_64", "--index-url", "https://pypi.org/simple",
                "--json", "--dry-run", "pandas")
    assert r.code == 0, r.err
    (t,) = json.loads(r.out)["targets"]
    locked = {p["name"]: p["version"] for p in t["packages"]}
    assert locked["numpy"] == "1.26.4"
    # pandas and what it needs at import, exactly as locked (no resolution by the installer)
    wanted = [f"{n}=={locked[n]}" for n in ("numpy", "pandas", "python-dateutil", "six",
                                            "tzdata", "pytz") if n in locked]
    venv = tmp_path / "venv"
    env = dict(os.environ, UV_NO_CONFIG="1")
    subprocess.run([uv, "venv", "--python", sys.executable, str(venv)], check=True,
                   capture_output=True, env=env, timeout=300)
    vpy = venv / "bin" / "python"
    p = subprocess.run([uv, "pip", "install", "--python", str(vpy), "--no-deps",
                        "--index-url", "https://pypi.org/simple", *wanted],
                       capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    p = subprocess.run([str(vpy), "-c", "import numpy, pandas; "
                        "print(numpy.__version__, pandas.__version__); "
                        "pandas.DataFrame({'a': numpy.arange(3)}).sum()"],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.split() == [locked["numpy"], locked["pandas"]]


@skip_offline
def test_numpy_below_2_on_python_3_13_needs_no_build(tmp_path: Path, pypi_cache: Path) -> None:
    """numpy 1.26.4 has no cp313 wheel; its sdist's PKG-INFO (Metadata-Version 2.1) says
    nothing reliable, but its pyproject.toml declares the dependencies statically (PEP 621):
    no meson build runs (--no-build would make one an error)."""
    r = run_cli("resolve", "--gpu", "H100 SXM", "--python", "3.13", "--platform",
                "linux_x86_64", "--index-url", "https://pypi.org/simple", "--no-build",
                "--json", "--dry-run", "numpy<2")
    assert r.code == 0, r.err
    (t,) = json.loads(r.out)["targets"]
    assert {p["name"]: p["version"] for p in t["packages"]}["numpy"].startswith("1.")
