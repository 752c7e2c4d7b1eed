"""Differential test: envlock's closure against ``uv pip compile``, both on PyPI.

Each case is a requirement set resolved twice for the same target (Python 3.11,
linux x86_64, glibc 2.28, torch from PyPI): by ``envlock resolve`` for an H100 and by
``uv pip compile`` with the same torch release added as a requirement. The pins must be
identical, except for packages an advisory override in the lock names (envlock then
pins what the advisory says, on purpose).

Online (skipped when PyPI is unreachable) and needs the ``uv`` command. Both tools keep
their caches between cases, so each case costs the requirement set's new pages only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request
from pathlib import Path
from typing import Dict, List, Sequence, Set, Tuple

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from support.cli import run_cli

pytestmark = pytest.mark.online

PYPI = "https://pypi.org/simple"


def _reachable() -> bool:
    try:
        urllib.request.urlopen(f"{PYPI}/pip/", timeout=8).read(64)
        return True
    except Exception:  # noqa: BLE001
        return False


UV = shutil.which("uv")
ONLINE = _reachable()
needs = pytest.mark.skipif(not ONLINE or UV is None,
                           reason="PyPI is unreachable or uv is not installed")

#: (case id, torch release, requirements, extra envlock options)
CASES: List[Tuple[str, str, Sequence[str], Sequence[str]]] = [
    ("torch-alone", "2.5.1", [], []),
    ("sdist-rouge-score", "2.5.1", ["rouge-score"], []),
    ("sdist-seqeval", "2.5.1", ["seqeval"], []),
    ("sdist-langdetect", "2.5.1", ["langdetect"], []),
    ("prerelease-exact", "2.5.1", ["nltk==3.9b1"], []),
    ("prerelease-range-stable-wins", "2.5.1", ["nltk>=3.9b1"], []),
    ("extras-requests-socks", "2.5.1", ["requests[socks]"], []),
    ("extras-transformers-torch", "2.5.1", ["transformers[torch]<4.50"], []),
    ("markers", "2.5.1", ["pywin32; sys_platform == 'win32'",
                          "uvloop; sys_platform == 'linux'",
                          "colorama; os_name == 'nt'"], []),
    ("torch-transformers-stack", "2.5.1",
     ["transformers", "accelerate", "datasets"], []),
    ("torchvision-pair", "2.5.1", ["torchvision"], []),
    ("numpy1-pandas", "2.5.1", ["numpy<2", "pandas"], []),
    ("sklearn-scipy", "2.5.1", ["scikit-learn", "scipy<1.14"], []),
    ("old-torch", "2.1.2", ["sympy"], []),
    ("older-python-torch", "2.3.1", ["einops", "tqdm"], []),
    ("vllm-pins-torch", "2.4.0", ["vllm==0.6.3"], ["--cuda", "12.1"]),
    # flash-attn's build imports torch without declaring it; its PKG-INFO marks
    # Requires-Dist dynamic in lower case, which uv reads as static (see
    # test_trust_pkg_info.py): envlock reads it only when told to
    ("sdist-dynamic-flash-attn", "2.5.1", ["flash-attn"], ["--trust-pkg-info", "flash-attn"]),
]


def _uv_pins(tmp: Path, torch: str, reqs: Sequence[str]) -> Dict[str, str]:
    req = tmp / "uv.in"
    req.write_text("\n".join([f"torch=={torch}", *reqs]) + "\n")
    env = dict(os.environ, UV_NO_CONFIG="1")
    for var in ("UV_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX", "UV_DEFAULT_INDEX"):
        env.pop(var, None)
    p = subprocess.run(
        [str(UV), "pip", "compile", str(req), "--python-version", "3.11",
         "--python-platform", "x86_64-manylinux_2_28", "--index-url", PYPI,
         "--no-header", "--no-annotate", "--quiet"],
        capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    out = {}
    for line in p.stdout.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            r = Requirement(line)
            out[canonicalize_name(r.name)] = next(iter(r.specifier)).version
    return out


def _envlock_pins(tmp: Path, torch: str, reqs: Sequence[str],
                  opts: Sequence[str]) -> Tuple[Dict[str, str], Set[str]]:
    args = ["resolve", "--gpu", "H100 SXM", "--python", "3.11", "--platform", "linux_x86_64",
            "--index-url", PYPI, "--json", "--dry-run", *opts, *reqs]
    if "vllm" not in " ".join(reqs):
        args[3:3] = ["--torch", f"=={torch}"]  # vllm: envlock must find 2.4.0 by itself
    r = run_cli(*args)
    assert r.code == 0, r.err
    (t,) = json.loads(r.out)["targets"]
    pins = {p["name"]: p["version"].split("+")[0] for p in t["packages"]}
    overridden = {str(canonicalize_name(Requirement(o).name))
                  for a in t["advisories"] for o in a.get("override", [])}
    return pins, overridden


@pytest.fixture
def shared_cache(tmp_path_factory: pytest.TempPathFactory,
                 monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path_factory.getbasetemp() / "uv-parity-cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(d))
    return d


@needs
@pytest.mark.parametrize("case, torch, reqs, opts", CASES, ids=[c[0] for c in CASES])
def test_same_pins_as_uv(case: str, torch: str, reqs: Sequence[str], opts: Sequence[str],
                         tmp_path: Path, shared_cache: Path) -> None:
    mine, overridden = _envlock_pins(tmp_path, torch, reqs, opts)
    theirs = _uv_pins(tmp_path, torch, reqs)
    assert mine["torch"] == torch
    differ = {n: (mine.get(n), theirs.get(n)) for n in set(mine) | set(theirs)
              if mine.get(n) != theirs.get(n) and n not in overridden}
    assert not differ, f"{case}: envlock vs uv: {differ}"


@needs
def test_advisory_override_is_the_only_difference(tmp_path: Path, shared_cache: Path) -> None:
    # torch 2.1.2 was built against NumPy 1: uv picks NumPy 2, envlock the override
    mine, overridden = _envlock_pins(tmp_path, "2.1.2", ["numpy"], [])
    theirs = _uv_pins(tmp_path, "2.1.2", ["numpy"])
    assert "numpy" in overridden and mine["numpy"] == "1.26.4"
    assert theirs["numpy"].startswith("2.")
    assert {n: v for n, v in mine.items() if n != "numpy"} == \
        {n: v for n, v in theirs.items() if n != "numpy"}


@needs
def test_advisory_pin_resolves_like_a_uv_constraint(tmp_path: Path, shared_cache: Path) -> None:
    # the numpy advisory for torch < 2.3 takes part in the resolution as a constraint:
    # envlock's pins equal uv's given the same pin as a constraint (pandas backtracks to a
    # release that supports NumPy 1.26), not the newest pandas paired with numpy 1.26.4
    mine, _ = _envlock_pins(tmp_path, "2.1.2", ["pandas"], [])
    (tmp_path / "c.txt").write_text("numpy==1.26.4\n")
    req = tmp_path / "uv.in"
    req.write_text("torch==2.1.2\npandas\n")
    env = dict(os.environ, UV_NO_CONFIG="1")
    p = subprocess.run(
        [str(UV), "pip", "compile", str(req), "-c", str(tmp_path / "c.txt"),
         "--python-version", "3.11", "--python-platform", "x86_64-manylinux_2_28",
         "--index-url", PYPI, "--no-header", "--no-annotate", "--quiet"],
        capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    theirs = {}
    for line in p.stdout.splitlines():
        if line.strip() and not line.startswith("#"):
            r = Requirement(line.strip())
            theirs[canonicalize_name(r.name)] = next(iter(r.specifier)).version
    assert mine["numpy"] == "1.26.4"
    assert mine == theirs
