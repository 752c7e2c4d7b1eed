"""``envlock resolve`` with real requirement sets, against real HTTP indexes on 127.0.0.1:
sdists whose dependencies must be built (PEP 517), pre-releases, advisory overrides on
direct requirements, and torch chosen together with the requirements (issue 14).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Optional

import pytest
from support.cli import run_cli
from support.index_server import IndexServer, make_sdist
from support.torch_world import add_cpython_package, add_package, add_torch_release, resolve

from envlock import _toml
from envlock.index.sdist_build import needs_build

_SETUP_PY = ("from setuptools import setup\n"
             "setup(name='oldpkg', version='1.0', install_requires=['helper>=1.0'],\n"
             "      py_modules=[])\n")
#: PKG-INFO as setuptools wrote it before Metadata-Version 2.2: no Requires-Dist at all
_OLD_PKG_INFO = "Metadata-Version: 2.1\nName: oldpkg\nVersion: 1.0\nSummary: old\n\n"

#: A PEP 517 backend inside the sdist (backend-path): the metadata build runs with no
#: build requirement to install, so it needs nothing but this machine's Python.
_INTREE_BACKEND = '''
import os

def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    d = os.path.join(metadata_directory, "intree-2.0.dist-info")
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: intree\\nVersion: 2.0\\n"
                "Requires-Dist: helper>=1.1\\n"
                "Requires-Dist: numpy; python_version < '3'\\n\\n")
    return "intree-2.0.dist-info"
'''
_INTREE_PYPROJECT = ('[build-system]\nrequires = []\nbuild-backend = "backend"\n'
                     'backend-path = ["."]\n')


def _setuptools_wheel() -> Optional[Path]:
    """A setuptools wheel that needs no ``wheel`` package to prepare metadata (>= 70.1),
    from this machine's local package stores; the offline test plants it on the index."""
    import re

    for d in (Path("/opt/pypi/files"), Path("/opt/wheels")):
        for p in sorted(d.glob("setuptools-*-py3-none-any.whl"), reverse=True):
            m = re.match(r"setuptools-(\d+)\.(\d+)", p.name)
            if m and (int(m.group(1)), int(m.group(2))) >= (70, 1):
                return p
    return None


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("reqworld")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        done: dict = {}
        for release in ("2.5.1", "2.4.0", "2.1.2"):
            add_torch_release(pypi, tmp, release, done=done)
        add_package(pypi, tmp, "helper", "1.2")
        add_package(pypi, tmp, "numpy", "2.2.6")
        add_package(pypi, tmp, "numpy", "1.26.4")
        # pandas 3.1.1 needs NumPy 2; 3.0.6 still takes NumPy 1.26 (their real metadata)
        add_package(pypi, tmp, "pandas", "3.1.1", ["numpy>=2.0.2"])
        add_package(pypi, tmp, "pandas", "3.0.6", ["numpy>=1.26.0"])
        add_package(pypi, tmp, "nltk", "3.8.1")
        add_package(pypi, tmp, "nltk", "3.9b1")
        add_package(pypi, tmp, "betaonly", "1.0rc1")
        add_package(pypi, tmp, "vllm", "0.6.3", ["torch==2.4.0", "helper"])
        add_package(pypi, tmp, "tvpin", "1.0", ["torchvision==0.19.0"])
        add_package(pypi, tmp, "lightish", "1.0", ["torch>=2.0"])
        add_package(pypi, tmp, "lightish", "2.0", ["torch>=2.5"])
        add_cpython_package(pypi, tmp, "torchvision", "0.19.0", ["torch==2.4.0"])
        add_package(pypi, tmp, "uses-old", "1.0", ["oldpkg"])
        pypi.add(make_sdist(tmp / "sdists", "oldpkg", "1.0", files={"setup.py": _SETUP_PY},
                            pkg_info=_OLD_PKG_INFO))
        pypi.add(make_sdist(tmp / "sdists", "newpkg", "1.0", files={"setup.py": _SETUP_PY},
                            pkg_info="Metadata-Version: 2.2\nName: newpkg\nVersion: 1.0\n"
                                     "Requires-Dist: helper>=1.0\n\n"))
        pypi.add(make_sdist(tmp / "sdists", "intree", "2.0",
                            files={"backend.py": _INTREE_BACKEND,
                                   "pyproject.toml": _INTREE_PYPROJECT},
                            pkg_info="Metadata-Version: 2.2\nName: intree\nVersion: 2.0\n"
                                     "Dynamic: Requires-Dist\n\n"))
        st = _setuptools_wheel()
        if st is not None:
            pypi.add(st)
        srv.setuptools = st  # type: ignore[attr-defined]
        yield srv


def packages(path: Path) -> dict:
    lock = _toml.loads(path.read_text())
    return {p["name"]: p for p in lock["target"][0]["package"]}


def decision(path: Path) -> list:
    return list(_toml.loads(path.read_text())["target"][0]["decision"])


# -- sdists ---------------------------------------------------------------------------------

def test_pkg_info_reliability_follows_pep_643() -> None:
    assert needs_build(None)
    assert needs_build(b"Metadata-Version: 1.2\nName: a\nVersion: 1\n\n")
    assert needs_build(b"Metadata-Version: 2.1\nName: a\nVersion: 1\nRequires-Dist: b\n\n")
    assert not needs_build(b"Metadata-Version: 2.2\nName: a\nVersion: 1\n\n")
    assert not needs_build(b"Metadata-Version: 2.4\nName: a\nVersion: 1\nDynamic: Summary\n\n")
    assert needs_build(b"Metadata-Version: 2.3\nName: a\nVersion: 1\nDynamic: requires-dist\n")


def test_in_tree_backend_builds_the_metadata_and_caches_it_by_hash(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "intree", "-o", str(out))
    assert r.code == 0, r.err
    pk = packages(out)
    # Requires-Dist came from the backend (the PKG-INFO marks it dynamic): helper>=1.1,
    # and the marker-excluded numpy is not there
    assert pk["intree"]["version"] == "2.0" and pk["helper"]["version"] == "1.2"
    assert "numpy" not in pk
    sdist = world.indexes["pypi"].find("intree-2.0.tar.gz")
    sha = hashlib.sha256(sdist.read_bytes()).hexdigest()
    assert pk["intree"]["files"][0]["sha256"] == sha
    built = cache / "built-metadata" / sha[:2] / f"{sha}.metadata"
    assert b"Requires-Dist: helper>=1.1" in built.read_bytes()
    # the cached result serves later runs, even with --no-build
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "intree", "--no-build",
                "-o", str(out))
    assert r.code == 0, r.err
    assert "helper" in packages(out)


def test_no_build_makes_a_needed_build_an_error_naming_the_package(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "uses-old", "--no-build",
                "-o", str(out))
    assert r.code == 7, (r.code, r.err)
    assert "oldpkg (oldpkg-1.0.tar.gz)" in r.err and "--no-build" in r.err
    assert not out.exists()


def test_reliable_pkg_info_needs_no_build(world: IndexServer, tmp_path: Path,
                                          cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "newpkg", "--no-build",
                "-o", str(out))
    assert r.code == 0, r.err
    assert {"newpkg", "helper"} <= set(packages(out))
    assert not (cache / "built-metadata").exists()


def test_setup_py_sdist_gets_its_install_requires(world: IndexServer, tmp_path: Path,
                                                  cache: Path) -> None:
    if world.setuptools is None:  # type: ignore[attr-defined]
        pytest.skip("no setuptools>=70.1 wheel on this machine to plant on the test index")
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "uses-old", "-o", str(out))
    assert r.code == 0, r.err
    pk = packages(out)
    assert pk["oldpkg"]["version"] == "1.0" and pk["helper"]["version"] == "1.2"
    assert pk["oldpkg"]["files"][0]["name"] == "oldpkg-1.0.tar.gz"
    # setuptools came from the configured index (the test's), into the build environment
    assert world.requests("/pypi/simple/setuptools/")


def test_a_failing_backend_is_exit_7_and_writes_nothing(tmp_path: Path, cache: Path) -> None:
    tmp = tmp_path / "files"
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        pypi.add(make_sdist(tmp, "broken", "1.0", files={
            "pyproject.toml": _INTREE_PYPROJECT,
            "backend.py": "raise RuntimeError('backend exploded')\n"}, pkg_info=None))
        out = tmp_path / "l.lock"
        r = run_cli("resolve", "--index-url", srv.url("pypi"), "--pytorch-index-url",
                    f"{srv.base}/pytorch", "--gpu", "H100 SXM", "--torch", "==2.5.1", "broken",
                    "-o", str(out))
    assert r.code == 7, (r.code, r.err)
    assert "broken-1.0.tar.gz" in r.err and "backend exploded" in r.err
    assert not out.exists()


# -- pre-releases -----------------------------------------------------------------------------

@pytest.mark.parametrize("args, want", [
    (["nltk==3.9b1"], "3.9b1"),          # an exact pin names the pre-release (PEP 440)
    (["nltk"], "3.8.1"),                 # otherwise stable wins
    (["nltk>=3.9.0b1"], "3.9b1"),        # only a pre-release satisfies: if-necessary
    (["--prerelease", "allow", "nltk"], "3.9b1"),
    (["--prerelease", "explicit", "nltk>=3.9b1"], "3.9b1"),
    (["betaonly"], "1.0rc1"),            # only pre-releases exist
])
def test_prereleases(world: IndexServer, tmp_path: Path, cache: Path, args: list,
                     want: str) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", *args, "-o", str(out))
    assert r.code == 0, r.err
    name = "betaonly" if "betaonly" in args else "nltk"
    assert packages(out)[name]["version"] == want


def test_disallowed_prerelease_is_a_conflict_not_a_hardware_failure(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "--prerelease", "disallow",
                "nltk==3.9b1", "--dry-run")
    assert r.code == 6, (r.code, r.err)
    assert "nltk==3.9b1 (requested)" in r.err


def test_prerelease_mode_is_part_of_the_inputs(world: IndexServer, tmp_path: Path,
                                               cache: Path) -> None:
    out = tmp_path / "l.lock"
    assert resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "nltk", "-o",
                   str(out)).code == 0
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "nltk", "--prerelease",
                "allow", "-o", str(out), "--check")
    assert r.code == 1
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "nltk", "-o", str(out),
                "--check")
    assert r.code == 0, r.out


# -- overrides ---------------------------------------------------------------------------------

def test_override_applies_to_a_direct_requirement(world: IndexServer, tmp_path: Path,
                                                  cache: Path) -> None:
    out = tmp_path / "l.lock"
    # torch 2.1.2 has wheels for Python 3.8-3.11 only
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.1.2", "--python", "3.11", "numpy",
                "-o", str(out))
    assert r.code == 0, r.err
    assert packages(out)["numpy"]["version"] == "1.26.4"
    lock = _toml.loads(out.read_text())
    ids = {a["id"] for a in lock["target"][0].get("advisory", [])}
    assert "numpy2-with-torch-before-2-3" in ids


def test_override_against_a_user_pin_names_both(world: IndexServer, tmp_path: Path,
                                                cache: Path) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.1.2", "--python", "3.11",
                "numpy==2.2.6", "--dry-run")
    assert r.code == 6, (r.code, r.err)
    assert "numpy==2.2.6 (requested)" in r.err and "numpy==1.26.4" in r.err
    assert "numpy2-with-torch-before-2-3" in r.err


def test_advisory_is_a_constraint_that_backtracks_other_packages(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    # numpy 1.26.4 for torch < 2.3: the newest pandas needs NumPy 2, so the lock must take
    # the pandas that supports 1.26.4, not pair it with pandas 3.1.1 (which fails at import)
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.1.2", "--python", "3.11",
                "pandas", "-o", str(out))
    assert r.code == 0, r.err
    pk = packages(out)
    assert (pk["numpy"]["version"], pk["pandas"]["version"]) == ("1.26.4", "3.0.6")
    (adv,) = [a for a in _toml.loads(out.read_text())["target"][0]["advisory"]
              if a["id"] == "numpy2-with-torch-before-2-3"]
    assert adv["action"] == "constraint"  # torch 2.1.2 pins no numpy: nothing overridden
    assert any(line.startswith("constraint: numpy==1.26.4 (advisory numpy2-with-torch")
               for line in decision(out))
    # the exports name the advisory, and do not warn of a torch pin that does not exist
    for fmt in ("constraints", "conda", "requirements"):
        e = run_cli("export", "--lock", str(out), "--format", fmt)
        assert e.code == 0, e.err
        text = " ".join(line.lstrip("#").strip() for line in e.out.splitlines())
        assert "numpy==1.26.4 (numpy2-with-torch-before-2-3)" in text, fmt
        assert "torch pin" not in text and "exact pin of the torch" not in text, fmt


def test_advisory_constraint_that_nothing_fits_names_the_advisory(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.1.2", "--python", "3.11",
                "pandas>=3.1", "--dry-run")
    assert r.code == 6, (r.code, r.err)
    assert "numpy is held to numpy==1.26.4 by advisory numpy2-with-torch-before-2-3" in r.err


# -- torch together with the requirements -------------------------------------------------------

def test_a_requirement_pinning_torch_chooses_the_release(world: IndexServer, tmp_path: Path,
                                                         cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--cuda", "12.1", "vllm==0.6.3", "-o", str(out))
    assert r.code == 0, r.err
    pk = packages(out)
    assert pk["torch"]["version"] == "2.4.0" and pk["vllm"]["version"] == "0.6.3"
    assert any("vllm==0.6.3 requires torch==2.4.0" in line for line in decision(out))


def test_torchvision_pin_maps_to_its_torch_release(world: IndexServer, tmp_path: Path,
                                                   cache: Path) -> None:
    # torchvision 0.19.0 belongs to torch 2.4.0: that is the only release left
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--cuda", "12.1", "tvpin", "-o", str(out))
    assert r.code == 0, r.err
    pk = packages(out)
    assert pk["torch"]["version"] == "2.4.0" and pk["torchvision"]["version"] == "0.19.0"


def test_requirement_against_torch_option_is_a_conflict(world: IndexServer, tmp_path: Path,
                                                        cache: Path) -> None:
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "vllm==0.6.3", "--dry-run")
    assert r.code == 6, (r.code, r.err)
    assert "torch==2.5.1 (requested)" in r.err
    assert "vllm==0.6.3 requires torch==2.4.0" in r.err


def test_requirement_and_hardware_without_a_common_build_exit_3(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    # RTX 5090 (sm_120) needs torch >= 2.7; vllm 0.6.3 needs torch 2.4.0
    r = resolve(world, "--gpu", "RTX 5090", "vllm==0.6.3", "--dry-run")
    assert r.code == 3, (r.code, r.err)
    assert "vllm==0.6.3 requires torch==2.4.0" in r.err and "sm_120" in r.err


# -- resolve --check ------------------------------------------------------------------------------

def test_check_ignores_comments_and_the_working_directory(
        world: IndexServer, tmp_path: Path, cache: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    req = proj / "requirements.in"
    req.write_text("helper\n")
    monkeypatch.chdir(proj)
    assert resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "-r", "requirements.in",
                   "-o", "envlock.lock").code == 0
    lock = _toml.loads((proj / "envlock.lock").read_text())
    assert "requirements.in" in str(lock)
    # from another directory, by the lock's path
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    r = run_cli("resolve", "--check", "-o", str(proj / "envlock.lock"))
    assert r.code == 0, r.out
    # the same command's inputs, given from another directory, are the same inputs
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "-r", str(req),
                "-o", str(proj / "envlock.lock"), "--check")
    assert r.code == 0, r.out
    # a comment or a blank line changes nothing; a requirement does
    req.write_text("# pinned by the team\n\nhelper   # the helper\n")
    assert run_cli("resolve", "--check", "-o", str(proj / "envlock.lock")).code == 0
    req.write_text("helper>=1.1\n")
    r = run_cli("resolve", "--check", "-o", str(proj / "envlock.lock"))
    assert r.code == 1 and "stale: requirements.in changed" in r.out


def test_an_unpinned_requirement_whose_newest_needs_another_torch_backtracks(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    # newest "lightish" needs torch>=2.5; the user asks for 2.4.0: the older lightish
    # that accepts it is locked (as uv does), not an error
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--torch", "==2.4.0", "--cuda", "12.1", "lightish",
                "-o", str(out))
    assert r.code == 0, r.err
    pk = packages(out)
    assert pk["torch"]["version"] == "2.4.0" and pk["lightish"]["version"] == "1.0"


def test_a_direct_torchvision_pin_chooses_the_torch_release(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    out = tmp_path / "l.lock"
    r = resolve(world, "--gpu", "H100 SXM", "--cuda", "12.1", "torchvision==0.19.0", "-o", str(out))
    assert r.code == 0, r.err
    pk = packages(out)
    assert pk["torch"]["version"] == "2.4.0" and pk["torchvision"]["version"] == "0.19.0"
    assert any("torchvision==0.19.0 (requested)" in line for line in decision(out))


def test_page_keeps_only_the_projects_files_and_unparseable_wheels_stay_unused() -> None:
    from envlock.index.pages import parse_json

    files = [{"filename": n, "url": f"https://files.example/{n}",
              "hashes": {"sha256": "a" * 64}}
             for n in ("demo-1.0-py3-none-any.whl", "evil-9.0-py3-none-any.whl",
                       "demo-notaversion-py3-none-any.whl", "demo-1.0.tar.gz")]
    page = parse_json({"files": files}, "https://example/simple/demo/", "https://example/simple",
                      "demo")
    names = [d.filename for d in page.dists]
    assert "evil-9.0-py3-none-any.whl" not in names  # another project's file: never kept
    usable = [d.filename for d in page.dists if d.parsed is not None]
    assert usable == ["demo-1.0-py3-none-any.whl", "demo-1.0.tar.gz"]
    bad = next(d for d in page.dists if d.filename.startswith("demo-notaversion"))
    assert not bad.is_wheel
