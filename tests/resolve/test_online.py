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
