"""The uv fragment in a real project: uv resolves exactly the lock from it, takes the torch
family from the PyTorch index (explicit, routed by [tool.uv.sources]) and applies the
advisory override."""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock import _toml
from exportkit import World, export_text, locked_versions, make_venv, run_tool, uv_bin

LOCKS = Path(__file__).resolve().parents[1] / "data" / "locks"


def _project(world: World, d: Path, lock: Path, target: str, deps: list) -> Path:
    fragment = export_text(lock, "uv", target)
    d.mkdir()
    (d / "pyproject.toml").write_text(
        "[project]\nname = \"demo\"\nversion = \"0\"\nrequires-python = \">=3.11\"\n"
        f"dependencies = {deps!r}\n\n".replace("'", '"') + fragment)
    return d


def _env(tmp_path: Path) -> dict:
    return {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_PYTHON_DOWNLOADS": "never"}


def test_fragment_routes_only_the_torch_family_to_an_explicit_index() -> None:
    data = _toml.loads(export_text(LOCKS / "cu121-h100-h20.lock", "uv", "h20"))
    uv = data["tool"]["uv"]
    assert uv["index"][0] == {"name": "pytorch-cu121",
                              "url": "https://download.pytorch.org/whl/cu121",
                              "explicit": True}
    assert uv["index"][1] == {"name": "default", "default": True,
                              "url": "https://pypi-mirror.example.com/simple"}
    assert uv["sources"] == {n: {"index": "pytorch-cu121"}
                             for n in ("torch", "torchvision", "triton")}
    assert "torch==2.5.1+cu121" in uv["constraint-dependencies"]
    assert uv["override-dependencies"] == ["nvidia-cublas-cu12==12.4.5.8"]


def test_fragment_for_a_pypi_build_has_no_routing() -> None:
    data = _toml.loads(export_text(LOCKS / "h100-pypi.lock", "uv", "h100-sxm"))
    assert set(data["tool"]["uv"]) == {"constraint-dependencies"}


@pytest.mark.parametrize("which,target,deps", [("multi", "h20", ["torch", "torchvision"]),
                                               ("h100", "h100-sxm", ["torch"])])
def test_uv_pip_install_dry_run_resolves_exactly_the_lock(
        world: World, tmp_path: Path, which: str, target: str, deps: list) -> None:
    uv = uv_bin()
    lock = world.multi_lock if which == "multi" else world.h100_lock
    proj = _project(world, tmp_path / "proj", lock, target, deps)
    python = make_venv(tmp_path / "venv")
    proc = run_tool([uv, "pip", "install", "--dry-run", "--python", python, "-r",
                     "pyproject.toml"], cwd=proj, **_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    would = {line[3:].split("==")[0]: line[3:].split("==")[1]
             for line in proc.stderr.splitlines() if line.startswith(" + ")}
    assert would == locked_versions(lock, target)


def test_uv_lock_takes_the_torch_family_from_the_pytorch_index(world: World,
                                                               tmp_path: Path) -> None:
    uv = uv_bin()
    proj = _project(world, tmp_path / "proj", world.multi_lock, "h20",
                    ["torch", "torchvision"])
    python = make_venv(tmp_path / "venv")
    proc = run_tool([uv, "lock", "--python", python], cwd=proj, **_env(tmp_path))
    assert proc.returncode == 0, proc.stderr
    locked = {p["name"]: p for p in _toml.loads((proj / "uv.lock").read_text())["package"]
              if p["name"] != "demo"}
    assert {n: p["version"] for n, p in locked.items()} == locked_versions(world.multi_lock,
                                                                           "h20")
    for name, p in locked.items():
        index = world.torch.cu121_url if name in ("torch", "torchvision", "triton") \
            else world.torch.pypi_url
        assert p["source"] == {"registry": index}, name
