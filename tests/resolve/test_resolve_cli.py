"""``envlock resolve`` end to end, against real HTTP indexes on 127.0.0.1:

* ``pypi``: torch 2.5.1 and 2.3.1 with their real PyPI pins, every dependency, and a
  ``pytorch-triton`` 99.0 planted by an attacker;
* ``pytorch/cu121``: the PyTorch index's torch 2.5.1+cu121 (depends on pytorch-triton);
* ``evil``: an extra index with a planted higher ``torch`` and ``triton``, and one package
  that lives only there.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Dict, Optional, Tuple

import pytest
from packaging.version import Version

from envlock import _toml
from envlock.matrix import get_matrix
from support.cli import run_cli
from support.index_server import IndexServer
from support.torch_world import (add_cpython_package, add_package, add_pytorch_index_build,
                                 add_torch_release, resolve)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("world")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        done: dict = {}
        add_torch_release(pypi, tmp, "2.5.1", done=done)
        add_torch_release(pypi, tmp, "2.3.1", done=done)
        add_package(pypi, tmp, "nvidia-cublas-cu12", "12.4.5.8")  # the H20 override target
        add_cpython_package(pypi, tmp, "torchvision", "0.20.1", ["torch==2.5.1", "numpy"])
        add_package(pypi, tmp, "numpy", "2.1.0")
        add_package(pypi, tmp, "app", "1.0", ["helper>=1.0", "private-lib>=1"])
        add_package(pypi, tmp, "helper", "1.2")
        add_package(pypi, tmp, "pytorch-triton", "99.0")  # planted on the configured index
        cu121 = srv.add_index("pytorch-cu121", prefix="pytorch/cu121")
        add_pytorch_index_build(cu121, tmp, "2.5.1", local="cu121", deps_index=pypi, done=done)
        evil = srv.add_index("evil")
        add_package(evil, tmp, "torch", "99.0")
        add_package(evil, tmp, "triton", "99.0")
        add_package(evil, tmp, "private-lib", "1.5")
        add_package(evil, tmp, "helper", "9.9")
        yield srv


def load(path: Path) -> dict:
    return _toml.loads(path.read_text())


def packages(lock: dict, target: int = 0) -> dict:
    return {p["name"]: p for p in lock["target"][target]["package"]}


def test_full_closure_with_hashes(world: IndexServer, tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "envlock.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "-o", str(out))
    assert r.code == 0, r.err
    lock = load(out)
    t = lock["target"][0]
    assert t["torch"] == {**t["torch"], "version": "2.5.1", "variant": "cu124", "on-pypi": True}
    pk = packages(lock)
    assert pk["torch"]["version"] == "2.5.1" and pk["torch"]["index"] == world.url("pypi")
    assert pk["nvidia-cublas-cu12"]["version"] == "12.4.5.8"
    assert pk["triton"]["version"] == "3.1.0"
    assert {"sympy", "mpmath", "jinja2", "markupsafe", "filelock", "fsspec"} <= set(pk)
    # the same closure uv and pip compute for torch 2.5.1: 22 packages, and setuptools where
    # the target (the running interpreter) is Python 3.12 or newer
    py312 = sys.version_info >= (3, 12)
    assert len(pk) == 22 + py312 and ("setuptools" in pk) == py312
    for p in pk.values():
        for f in p["files"]:
            local = world.indexes["pypi"].find(f["name"])
            assert hashlib.sha256(local.read_bytes()).hexdigest() == f["sha256"]
    assert t["libraries"]["cublas"] == "12.4.5.8" and t["libraries"]["nccl"] == "2.21.5"
    assert t["driver-min"] == "525.60.13" and t["closure"] == "full"


def test_planted_packages_on_an_extra_index_never_win(world: IndexServer, tmp_path: Path,
                                                     cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "app",
                "--extra-index-url", world.url("evil"), "-o", str(out))
    assert r.code == 0, r.err
    pk = packages(load(out))
    assert pk["torch"]["version"] == "2.5.1" and pk["torch"]["index"] == world.url("pypi")
    assert pk["triton"]["version"] == "3.1.0" and pk["triton"]["index"] == world.url("pypi")
    # helper exists on the primary index: the higher 9.9 on the extra index does not win
    assert pk["helper"]["version"] == "1.2"
    # a package only the extra index has comes from there
    assert pk["private-lib"]["index"] == world.url("evil")
    assert not world.requests("/evil/simple/torch/")  # never even asked


def test_pytorch_index_build_routes_the_torch_family(world: IndexServer, tmp_path: Path,
                                                     cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "--cuda", "12.1", "-o", str(out))
    assert r.code == 0, r.err
    lock = load(out)
    pk = packages(lock)
    cu121 = world.url("pytorch-cu121")
    assert pk["torch"]["version"] == "2.5.1+cu121" and pk["torch"]["index"] == cu121
    # torchtriton-style attack: pytorch-triton 99.0 sits on the configured index and loses
    assert pk["pytorch-triton"]["version"] == "3.1.0" and pk["pytorch-triton"]["index"] == cu121
    # CUDA wheels the PyTorch index lacks come from the configured index
    assert pk["nvidia-cublas-cu12"]["index"] == world.url("pypi")
    assert lock["target"][0]["torch"]["installed-version"] == "2.5.1+cu121"


def test_h20_with_cu121_torch_gets_the_cublas_override(world: IndexServer, tmp_path: Path,
                                                       cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H20", "--torch", "==2.3.1", "-o", str(out), "-v")
    assert r.code == 0, r.err
    lock = load(out)
    pk = packages(lock)
    assert pk["torch"]["version"] == "2.3.1"
    assert pk["nvidia-cublas-cu12"]["version"] == "12.4.5.8"  # not torch's 12.1.3.1
    (adv,) = lock["target"][0]["advisory"]
    assert adv["id"] == "h20-cublas121-sigfpe" and adv["action"] == "override"
    assert adv["override"] == ["nvidia-cublas-cu12==12.4.5.8"]
    assert lock["target"][0]["libraries"]["cublas"] == "12.4.5.8"
    assert "advisory h20-cublas121-sigfpe [override]" in r.out


def test_rerun_is_byte_identical(world: IndexServer, tmp_path: Path, cache: Path) -> None:
    a, b = tmp_path / "a.lock", tmp_path / "b.lock"
    assert resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "-o", str(a)).code == 0
    assert resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "-o", str(b)).code == 0
    ta, tb = a.read_text(), b.read_text()
    assert ta.replace("a.lock", "x") == tb.replace("b.lock", "x")
    assert ta.startswith("# This file is generated by envlock")
    assert "# Regenerate it with:\n#   envlock resolve --index-url" in ta


def test_offline_reuses_the_cache_and_without_it_locks_the_gpu_core(
        world: IndexServer, tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    online, offline = tmp_path / "on.lock", tmp_path / "off.lock"
    assert resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "-o", str(online)).code == 0
    n = len(world.requests())
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "--offline", "-o", str(offline))
    assert r.code == 0, r.err
    assert len(world.requests()) == n  # not one request
    assert packages(load(offline)) == packages(load(online))
    # an empty cache: the GPU core from the matrix, no hashes, and the lock says so
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "empty"))
    core = tmp_path / "core.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "--offline", "-o", str(core))
    assert r.code == 0, r.err
    assert len(world.requests()) == n
    lock = load(core)
    t = lock["target"][0]
    assert t["closure"] == "gpu-core"
    pk = packages(lock)
    assert pk["torch"]["version"] == "2.5.1"
    assert pk["nvidia-cudnn-cu12"]["version"] == "9.1.0.70"
    assert pk["nvidia-cudnn-cu12"]["files"] == []
    assert "sympy" not in pk
    assert any("without hashes or transitive closure" in d for d in t["decision"])
    assert "GPU core only" in r.out


def test_check_tells_fresh_from_stale(world: IndexServer, tmp_path: Path, cache: Path) -> None:
    req = tmp_path / "requirements.in"
    req.write_text("helper\n")
    out = tmp_path / "envlock.lock"
    args = ["--gpu", "H100 SXM", "--torch", "==2.5.1", "-r", str(req), "-o", str(out)]
    assert resolve(world, *args).code == 0
    r = run_cli("resolve", "--check", "-o", str(out))
    assert r.code == 0 and "up to date" in r.out
    req.write_text("helper>=1.1\n")
    r = run_cli("resolve", "--check", "-o", str(out))
    assert r.code == 1
    # the lock records the file relative to itself
    assert "stale: requirements.in changed" in r.out
    assert "regenerate it with: envlock resolve" in r.out
    # with explicit inputs: a different --torch is stale
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.3.1", "-r", str(req), "-o", str(out),
                "--check")
    assert r.code == 1


def test_failed_resolution_leaves_the_old_lock_alone(world: IndexServer, tmp_path: Path,
                                                     cache: Path) -> None:
    out = tmp_path / "envlock.lock"
    out.write_text("precious\n")
    world.fail["/pypi/simple/"] = 100
    try:
        r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "-o", str(out))
    finally:
        world.fail.clear()
    assert r.code == 4
    assert out.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_file()) == ["envlock.lock"]
    assert "cannot reach" in r.err and r.err.count("\n") == 2  # the error and its hint
    assert "hint:" in r.err and "--offline" in r.err


def test_unknown_gpu_and_malformed_requirements_exit_2(world: IndexServer, tmp_path: Path,
                                                       cache: Path) -> None:
    r = resolve(world, "--gpu", "H2O")
    assert r.code == 2 and "did you mean 'NVIDIA H20'" in r.err
    req = tmp_path / "requirements.in"
    req.write_text("helper\n# fine\ntorchvision >>= 1\n")
    r = resolve(world, "--gpu", "H100 SXM", "-r", str(req))
    assert r.code == 2
    assert f"{req}:3: invalid requirement 'torchvision >>= 1'" in r.err


def test_no_build_fits_exits_3(world: IndexServer, tmp_path: Path, cache: Path) -> None:
    r = resolve(world, "--gpu", "RTX 5090", "--driver", "550.54.15")
    assert r.code == 3
    assert "sm_120" in r.err and "upgrade the driver to >= 570" in r.err


def test_json_contract(world: IndexServer, tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "envlock.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "torchvision", "--json",
                "-o", str(out))
    assert r.code == 0, r.err
    data = json.loads(r.out)
    assert data["lock"] == str(out)
    (t,) = data["targets"]
    assert {"name", "gpus", "compute_capabilities", "python", "platform", "torch",
            "driver_min", "packages", "advisories"} <= set(t)
    assert t["gpus"] == ["NVIDIA H100 80GB HBM3"] and t["compute_capabilities"] == ["9.0"]
    assert t["torch"]["version"] == "2.5.1" and t["torch"]["variant"] == "cu124"
    assert t["torch"]["cuda"] == "12.4" and t["platform"] == "linux_x86_64"
    names = {p["name"]: p for p in t["packages"]}
    assert names["torchvision"]["version"] == "0.20.1"
    assert names["torch"]["index"] == world.url("pypi")
    assert all(h.startswith("sha256:") for h in names["torch"]["hashes"])


def test_several_targets_in_one_lock(world: IndexServer, tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "envlock.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--gpu", "A100 SXM", "--torch", "==2.5.1",
                "-o", str(out))
    assert r.code == 0, r.err
    lock = load(out)
    assert [t["name"] for t in lock["target"]] == ["a100-sxm4-80gb", "h100-sxm"]


@pytest.fixture(scope="module")
def newest_world(tmp_path_factory: pytest.TempPathFactory):
    """The matrix's newest torch and 2.3.1, for Python 3.12, on one index."""
    tmp = tmp_path_factory.mktemp("newest")
    newest = max(get_matrix().torch_releases, key=Version)
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        done: dict = {}
        add_torch_release(pypi, tmp, newest, python="3.12", done=done)
        add_torch_release(pypi, tmp, "2.3.1", python="3.12", done=done)
        srv.newest = newest  # type: ignore[attr-defined]
        yield srv


def test_from_snapshot_says_when_the_lock_is_not_the_installed_torch(
        newest_world: IndexServer, tmp_path: Path, cache: Path) -> None:
    """A snapshot of a machine that runs torch 2.3.1 (cu121), resolved with no torch asked
    for: the lock takes the newest torch the index has for its GPUs, and a line says so
    with the command that locks the installed release instead; that command works."""
    import shlex

    world, newest = newest_world, newest_world.newest  # type: ignore[attr-defined]
    path = _h100_node(tmp_path, python="3.12.3", driver=("580.159.04", "13.0"),
                      packages={"torch": "2.3.1"},
                      torch={"version": "2.3.1+cu121", "cuda": "12.1"})
    out = tmp_path / "envlock.lock"
    r = resolve(world, "--from-snapshot", str(path), "-o", str(out))
    assert r.code == 0, r.err
    assert load(out)["target"][0]["torch"]["version"] == newest
    line = next(ln for ln in r.out.splitlines() if "the snapshot's machine has torch" in ln)
    assert f"this lock picks {newest}" in line
    command = shlex.split(line.split("To lock the installed release: ", 1)[1])
    assert command[:2] == ["envlock", "resolve"] and "==2.3.1" in command
    assert command[command.index("--cuda") + 1] == "12.1"
    again = run_cli(*command[1:])
    assert again.code == 0, again.err
    t = load(out)["target"][0]
    assert t["torch"]["version"] == "2.3.1" and t["torch"]["cuda"] == "12.1"
    assert "the snapshot's machine has torch" not in again.out
    # a torch the user asked for is not second-guessed
    r = resolve(world, "--from-snapshot", str(path), "--torch", f"=={newest}", "-o", str(out))
    assert r.code == 0 and "the snapshot's machine has torch" not in r.out


def _h100_node(tmp_path: Path, *, python: str = "3.11.9",
               driver: Tuple[str, str] = ("550.54.15", "12.4"),
               packages: Optional[Dict[str, str]] = None,
               torch: Optional[Dict[str, str]] = None) -> Path:
    """A snapshot file of an 8x H100 SXM node."""
    snap = {"schema": "envlock.snapshot/1", "taken_at": None,
            "host": {"machine": "x86_64", "glibc": "2.35"},
            "python": {"version": python},
            "driver": {"version": driver[0], "cuda": driver[1], "fabric_manager": "running"},
            "gpus": [{"index": i, "name": "NVIDIA H100 80GB HBM3", "compute_capability": "9.0",
                      "memory_mib": 81559} for i in range(8)],
            "links": [], "packages": packages or {}, "libraries": [], "torch": torch,
            "env": {}}
    path = tmp_path / "node.json"
    path.write_text(json.dumps(snap))
    return path


def test_from_snapshot(world: IndexServer, tmp_path: Path, cache: Path) -> None:
    path = _h100_node(tmp_path)
    out = tmp_path / "envlock.lock"
    r = resolve(world, "--from-snapshot", str(path), "--torch", "==2.5.1", "-o", str(out))
    assert r.code == 0, r.err
    t = load(out)["target"][0]
    assert t["name"] == "h100-sxm" and t["driver"] == "550.54.15" and t["glibc"] == "2.35"


def test_a_requirements_page_asked_early_is_asked_once(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    """The command line's requirements have their pages asked before the matrix is read
    (the resolution asks for them first anyway): the resolution gets that answer, the
    index is not asked twice, and the lock is the same as without the early ask (a name
    of the torch family is left to the resolution, which picks its index)."""
    out = tmp_path / "envlock.lock"
    before = len(world.requests("/pypi/simple/helper/"))
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "helper", "torch", "-o",
                str(out))
    assert r.code == 0, r.err
    assert len(world.requests("/pypi/simple/helper/")) == before + 1
    assert packages(load(out))["helper"]["version"] == "1.2"
