"""The matrix pairs torchvision/torchaudio with their torch, and resolution applies it.

torchaudio 2.11.0 declares no torch requirement, so a resolver left to the wheels picks it
(the newest) for any torch; with torch 2.5.1 it fails to load (``undefined symbol:
aoti_torch_abi_version``). A real index on 127.0.0.1 serves torch 2.5.1 with its real pins,
torchaudio 2.5.1 (requires torch==2.5.1) and the planted torchaudio 2.11.0.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock import _toml
from envlock.matrix.load import load_matrix
from support.index_server import IndexServer
from support.torch_world import (add_cpython_package, add_package, add_torch_release, resolve,
                                 torch_requires)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("companions")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1", done={})
        add_cpython_package(pypi, tmp, "torchaudio", "2.5.1", ["torch==2.5.1"])
        add_cpython_package(pypi, tmp, "torchaudio", "2.11.0", [])  # no torch pin
        add_package(pypi, tmp, "speech-app", "1.0", ["torchaudio"])  # pulls it in
        only_new = srv.add_index("only-new")
        add_torch_release(only_new, tmp, "2.5.1", done={})
        add_cpython_package(only_new, tmp, "torchaudio", "2.11.0", [])
        yield srv


def _locked(world: IndexServer, index: str, tmp_path: Path, *args: str):
    out = tmp_path / "envlock.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", *args, "-o", str(out),
                index=index)
    pkgs = {}
    if r.code == 0:
        lock = _toml.loads(out.read_text())
        pkgs = {p["name"]: p["version"] for p in lock["target"][0]["package"]}
    return r, pkgs


def test_matrix_pairs_every_torch_release_with_companions() -> None:
    m = load_matrix()
    assert set(m.companions) == set(m.torch_releases)
    assert m.companions["2.5.1"].torchaudio == ("2.5.1",)
    assert "2.11.0" not in m.companions["2.5.1"].torchaudio
    assert m.companions["2.11.0"].torchaudio == ("2.11.0",)
    assert m.companions["2.5.1"].torchvision == ("0.20.1",)


def test_requested_torchaudio_is_the_paired_one(world: IndexServer, tmp_path: Path,
                                               cache: Path) -> None:
    r, pkgs = _locked(world, "pypi", tmp_path, "torchaudio")
    assert r.code == 0, r.err
    assert pkgs["torch"] == "2.5.1" and pkgs["torchaudio"] == "2.5.1"
    # the lock says why it differs from what pip or uv would pick (the newest, 2.11.0)
    lines = _toml.loads((tmp_path / "envlock.lock").read_text())["target"][0]["decision"]
    assert "torchaudio 2.5.1: held to the release paired with torch 2.5.1 in the matrix " \
           "(pip and uv take the newest, which may be built for another torch)" in lines, lines


def test_a_lock_without_companions_says_nothing_of_them(world: IndexServer, tmp_path: Path,
                                                        cache: Path) -> None:
    r, pkgs = _locked(world, "pypi", tmp_path)
    assert r.code == 0, r.err
    lines = _toml.loads((tmp_path / "envlock.lock").read_text())["target"][0]["decision"]
    assert not [ln for ln in lines if "held to the release" in ln], lines


def test_torchaudio_pulled_in_by_a_dependency_is_the_paired_one(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    r, pkgs = _locked(world, "pypi", tmp_path, "speech-app")
    assert r.code == 0, r.err
    assert pkgs["speech-app"] == "1.0"
    assert pkgs["torchaudio"] == "2.5.1"  # not the newer 2.11.0 that names no torch


def test_only_an_unpaired_torchaudio_is_a_clear_error(world: IndexServer, tmp_path: Path,
                                                     cache: Path) -> None:
    r, _ = _locked(world, "only-new", tmp_path, "torchaudio")
    assert r.code != 0
    assert "pairs torchaudio 2.5.1 with torch 2.5.1" in r.err
    assert "Traceback" not in r.err


# -- triton ---------------------------------------------------------------------------------
# torch 2.5.1's wheel requires triton==3.1.0 only where python_version < "3.13". On Python
# 3.13 the wheel is silent, so a dependency asking for ``triton`` would get the newest, built
# for another torch; the matrix pairing (triton ==3.1.0 with torch 2.5.1) still applies.
PY313 = "cp313-cp313-manylinux1_x86_64"


@pytest.fixture(scope="module")
def triton_world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("triton")
    with IndexServer() as srv:
        for name, newest in (("paired", "3.1.0"), ("unpaired", None)):
            idx = srv.add_index(name)
            add_torch_release(idx, tmp, "2.5.1", python="3.13", done={})  # a cp313 torch
            if newest:
                add_package(idx, tmp, "triton", newest, tag=PY313)
            add_package(idx, tmp, "triton", "3.2.0", tag=PY313)  # built for torch 2.6.0
            add_package(idx, tmp, "compile-app", "1.0", ["triton"])  # pulls it in, unpinned
        yield srv


def _locked313(world: IndexServer, index: str, tmp_path: Path, *reqs: str):
    return _locked(world, index, tmp_path, "--python", "3.13", *reqs)


def test_the_torch_wheel_is_silent_on_triton_for_python_313() -> None:
    from packaging.requirements import Requirement

    env = {"python_version": "3.13", "platform_system": "Linux",
           "platform_machine": "x86_64", "extra": ""}
    reqs = [Requirement(t) for t in torch_requires("2.5.1")]
    tritons = [r for r in reqs if r.name == "triton"]
    assert tritons and not any(r.marker is None or r.marker.evaluate(env) for r in tritons)


def test_triton_pulled_in_by_a_dependency_is_the_paired_one(
        triton_world: IndexServer, tmp_path: Path, cache: Path) -> None:
    r, pkgs = _locked313(triton_world, "paired", tmp_path, "compile-app")
    assert r.code == 0, r.err
    assert pkgs["torch"] == "2.5.1"
    assert pkgs["triton"] == "3.1.0"  # not 3.2.0, the newest


def test_only_an_unpaired_triton_is_a_clear_error(triton_world: IndexServer, tmp_path: Path,
                                                 cache: Path) -> None:
    r, _ = _locked313(triton_world, "unpaired", tmp_path, "compile-app")
    assert r.code != 0
    assert "pairs triton ==3.1.0 with torch 2.5.1" in r.err
    assert "Traceback" not in r.err


@pytest.mark.parametrize("triton, admitted, excluded", [
    ("triton==3.1.0", {"2.5.0", "2.5.1"}, {"2.4.1", "2.6.0", "2.14.0"}),
    # a compatible-release pairing (torch 2.14.x: ~=3.8.0) admits 3.8.2; 2.15.0's ~=3.9.0 does not
    ("triton==3.8.2", {"2.14.0", "2.14.1"}, {"2.13.0", "2.15.0"}),
    ("triton>=3.8.1", {"2.14.0", "2.14.1", "2.15.0"}, {"2.13.0"}),
])
def test_a_triton_requirement_narrows_torch_through_the_pairing(
        triton: str, admitted: set, excluded: set) -> None:
    from packaging.requirements import Requirement
    from packaging.specifiers import SpecifierSet

    from envlock.resolve.torch_needs import TorchNeed, narrowed_spec

    m = load_matrix()
    spec, lines = narrowed_spec(m, SpecifierSet(), [TorchNeed(("app==1.0",), Requirement(triton))])
    assert lines == [f"app==1.0 requires {triton}"]
    assert all(spec.contains(v) for v in admitted), spec
    assert not any(spec.contains(v) for v in excluded), spec
    assert spec.contains("1.13.1")  # no triton dependency: the requirement says nothing of it
