"""``--trust-pkg-info``: an sdist whose build imports what it does not declare.

flash-attn's sdist is the case met on PyPI: its ``setup.py`` imports torch, which its build
requirements do not name, so the PEP 517 metadata build fails in an isolated environment
("No module named 'torch'", exit 7). Its PKG-INFO (Metadata-Version 2.4) lists ``torch`` and
``einops`` but marks Requires-Dist dynamic, so PEP 643 says it cannot be trusted. uv 0.x
resolves it anyway, because it matches ``Dynamic: requires-dist`` case-sensitively against
``Requires-Dist`` and takes the lower-case field as static. envlock keeps the rule, names
the way out in the error, and reads PKG-INFO only when told to, recording it in the lock.

Against a real PEP 503 index on 127.0.0.1; the failing build is a real backend run.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.index_server import IndexServer, make_sdist
from support.torch_world import add_package, add_torch_release, resolve

from envlock import _toml

#: an in-tree backend whose import fails as flash-attn's setup.py does without torch
_BACKEND = "import torch_that_is_not_here  # noqa\n"
_PYPROJECT = ('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
              'backend-path = ["."]\n')


def _pkg_info(name: str, version: str, metadata_version: str) -> str:
    return (f"Metadata-Version: {metadata_version}\nName: {name}\nVersion: {version}\n"
            "Requires-Dist: helper>=1.0\nRequires-Dist: einopsish\n"
            "Dynamic: requires-dist\n\n")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("trustworld")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        add_package(pypi, tmp, "helper", "1.2")
        add_package(pypi, tmp, "einopsish", "0.8")
        files = {"backend.py": _BACKEND, "pyproject.toml": _PYPROJECT}
        pypi.add(make_sdist(tmp / "sdists", "flashy", "2.8",
                            files=files, pkg_info=_pkg_info("flashy", "2.8", "2.4")))
        # Metadata-Version 2.1: written before Dynamic existed; never trusted
        pypi.add(make_sdist(tmp / "sdists", "oldflashy", "1.0",
                            files=files, pkg_info=_pkg_info("oldflashy", "1.0", "2.1")))
        yield srv


def _lock(path: Path) -> dict:
    return _toml.loads(path.read_text())


def test_a_build_that_imports_an_undeclared_module_names_the_way_out(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "flashy", "-o", str(out))
    assert r.code == 7, (r.code, r.err)
    error, hint = [ln for ln in r.err.splitlines()
                   if ln.strip() and not ln.startswith("envlock: note: running the build")]
    assert "flashy-2.8.tar.gz" in error and "torch_that_is_not_here" in error
    assert hint.startswith("hint: its PKG-INFO lists helper>=1.0, einopsish")
    assert "--trust-pkg-info flashy" in hint
    assert not out.exists()


def test_trusted_pkg_info_is_read_and_recorded(world: IndexServer, tmp_path: Path,
                                               cache: Path) -> None:
    out = tmp_path / "l.lock"
    args = ["--gpu", "H100 SXM", "--torch", "==2.5.1", "flashy", "-o", str(out)]
    r = resolve(world, *args, "--trust-pkg-info", "Flashy")
    assert r.code == 0, r.err
    lock = _lock(out)
    target = lock["target"][0]
    versions = {p["name"]: p["version"] for p in target["package"]}
    assert (versions["flashy"], versions["helper"], versions["einopsish"]) == \
        ("2.8", "1.2", "0.8")
    assert lock["inputs"]["trust-pkg-info"] == ["flashy"]
    assert any(line.startswith("flashy 2.8: dependencies (helper>=1.0, einopsish) read "
                               "from its sdist's PKG-INFO, which marks them dynamic")
               for line in target["decision"]), target["decision"]
    # the same inputs are fresh; without the option they are not
    assert resolve(world, *args, "--trust-pkg-info", "flashy", "--check").code == 0
    assert resolve(world, *args, "--check").code == 1
    # the cache now holds that PKG-INFO: without the option it is still not trusted
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "flashy", "--dry-run")
    assert r.code == 7 and "--trust-pkg-info flashy" in r.err, (r.code, r.err)
    # with it, the cache answers (offline)
    r = resolve(world, *args, "--trust-pkg-info", "flashy", "--offline")
    assert r.code == 0, r.err
    assert "einopsish" in {p["name"] for p in _lock(out)["target"][0]["package"]}


def test_a_pkg_info_older_than_2_2_is_never_trusted(world: IndexServer, tmp_path: Path,
                                                    cache: Path) -> None:
    # before Metadata-Version 2.2 a missing Requires-Dist says nothing: no hint, no trust
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "oldflashy",
                "--trust-pkg-info", "oldflashy", "-o", str(out))
    assert r.code == 7, (r.code, r.err)
    assert "oldflashy-1.0.tar.gz" in r.err and "--trust-pkg-info" not in r.err
    assert not out.exists()


def test_no_build_gets_the_same_way_out(world: IndexServer, tmp_path: Path,
                                        cache: Path) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "flashy", "--no-build",
                "--dry-run")
    assert r.code == 7, (r.code, r.err)
    assert "--no-build" in r.err and "--trust-pkg-info flashy" in r.err


@pytest.mark.parametrize("bad", ["", "not a name", "flashy!"])
def test_a_bad_name_is_a_usage_error(world: IndexServer, cache: Path, bad: str) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "flashy",
                "--trust-pkg-info", bad, "--dry-run")
    assert r.code == 2, (r.code, r.err)
    assert len([ln for ln in r.err.splitlines() if ln.strip()]) == 1, r.err
    assert "--trust-pkg-info" in r.err and "not a project name" in r.err
