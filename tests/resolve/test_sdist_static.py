"""sdists whose dependencies need no build (issue 30): PEP 621 static ``[project]``
dependencies are read from ``pyproject.toml`` (a build would give the same answer, and
numpy's meson build takes 40 s and fails on a Python it does not support); a build that
fails is remembered by the sdist's sha256 with its reason, and says how it ended.
Real sdists on a loopback index; the backends are real PEP 517 backends in the sdist."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.index_server import IndexServer, make_sdist
from support.torch_world import add_package, add_torch_release, resolve

from envlock import _toml
from envlock.index.pyproject_meta import metadata_from_project

#: PKG-INFO as meson-python and old setuptools write it: Metadata-Version 2.1, so its
#: (missing) Requires-Dist says nothing (PEP 643)
_OLD = "Metadata-Version: 2.1\nName: {n}\nVersion: 1.0\n\n"

#: a backend that must never run: it fails loudly
_NEVER = ('[build-system]\nrequires = []\nbuild-backend = "nobackend"\nbackend-path = ["."]\n'
          '[project]\nname = "staticpkg"\nversion = "1.0"\nrequires-python = ">=3.8"\n'
          'dependencies = ["helper>=1.0"]\n'
          '[project.optional-dependencies]\nextra1 = ["extradep; python_version >= \'3\'"]\n')
_NEVER_BACKEND = "raise SystemExit('the build backend ran')\n"

#: dependencies dynamic: the backend must run, and this one dies without a word
_DYNAMIC = ('[build-system]\nrequires = []\nbuild-backend = "quiet"\nbackend-path = ["."]\n'
            '[project]\nname = "dynpkg"\nversion = "1.0"\ndynamic = ["dependencies"]\n')
_QUIET_BACKEND = "import os\nos._exit(3)\n"

#: dies of a signal, after pointing at a log in its (soon deleted) build directory
_SIGNAL_BACKEND = ("import os, signal, sys\n"
                   "print('meson: compiler check failed', file=sys.stderr)\n"
                   "print('A full log can be found at ' + os.path.join(os.getcwd(), "
                   "'build', 'meson-log.txt'), file=sys.stderr)\n"
                   "sys.stderr.flush()\n"
                   "os.kill(os.getpid(), signal.SIGKILL)\n")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("sdistworld")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        add_package(pypi, tmp, "helper", "1.2")
        add_package(pypi, tmp, "extradep", "2.0")
        pypi.add(make_sdist(tmp / "sd", "staticpkg", "1.0",
                            files={"pyproject.toml": _NEVER, "nobackend.py": _NEVER_BACKEND},
                            pkg_info=_OLD.format(n="staticpkg")))
        pypi.add(make_sdist(tmp / "sd", "dynpkg", "1.0",
                            files={"pyproject.toml": _DYNAMIC, "quiet.py": _QUIET_BACKEND},
                            pkg_info=_OLD.format(n="dynpkg")))
        pypi.add(make_sdist(tmp / "sd", "sigpkg", "1.0",
                            files={"pyproject.toml": _DYNAMIC.replace("dynpkg", "sigpkg"),
                                   "quiet.py": _SIGNAL_BACKEND},
                            pkg_info=_OLD.format(n="sigpkg")))
        yield srv


def _packages(path: Path) -> dict:
    return {p["name"]: p["version"]
            for p in _toml.loads(path.read_text())["target"][0]["package"]}


def test_static_dependencies_are_read_without_a_build(world: IndexServer, tmp_path: Path,
                                                      cache: Path) -> None:
    out = tmp_path / "l.lock"
    # --no-build: had the backend been needed, this would be exit 7
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "staticpkg[extra1]",
                "--no-build", "-o", str(out))
    assert r.code == 0, r.err
    pk = _packages(out)
    assert pk["staticpkg"] == "1.0" and pk["helper"] == "1.2" and pk["extradep"] == "2.0"


def test_project_table_to_metadata() -> None:
    assert metadata_from_project({"name": "a", "dynamic": ["optional-dependencies"]},
                                 "a") is None
    assert metadata_from_project({"name": "a", "dependencies": "b"}, "a") is None
    assert metadata_from_project({"name": "a", "dependencies": ["not a req !"]}, "a") is None
    assert metadata_from_project({"version": "1"}, "a") is None  # no name: not PEP 621
    # absent and not dynamic means empty (PEP 621)
    assert b"Requires-Dist" not in metadata_from_project({"name": "a"}, "a")


def test_a_failed_build_says_how_it_ended_and_is_remembered(world: IndexServer,
                                                            tmp_path: Path,
                                                            cache: Path) -> None:
    args = ("--gpu", "H100 SXM", "--torch", "==2.5.1", "dynpkg", "--dry-run")
    r = resolve(world, *args)
    assert r.code == 7, (r.code, r.err)
    assert "no output (exit status 3)" in r.err
    assert "remembered" not in r.err
    failed = list(cache.rglob("*.failed"))
    assert len(failed) == 1 and "exit status 3" in failed[0].read_text()
    again = resolve(world, *args)
    assert again.code == 7
    assert "no output (exit status 3)" in again.err and "remembered in the cache" in again.err
    assert "--refresh" in again.err
    # the way out the hint names: the same command with --refresh builds again
    fresh = resolve(world, *args, "--refresh")
    assert fresh.code == 7 and "remembered" not in fresh.err, fresh.err


def test_a_backend_killed_by_a_signal_shows_the_tail_not_a_deleted_log(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "sigpkg", "--dry-run")
    assert r.code == 7, (r.code, r.err)
    assert "killed by signal SIGKILL" in r.err
    assert "meson: compiler check failed" in r.err
    assert "meson-log.txt" not in r.err
