"""An unreachable or partial PyTorch index: mirrors, fallback to an equivalent build, and
errors that name the way out. Loopback indexes only; the "blocked" PyTorch index is a
closed port on 127.0.0.1."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from envlock import _toml
from support.cli import run_cli
from support.index_server import IndexServer
from support.net import free_port
from support.torch_world import add_pytorch_index_build, add_torch_release


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("reach")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        done: dict = {}
        add_torch_release(pypi, tmp, "2.5.1", done=done)
        # a mirror with the PyTorch index's layout that has cu121 but not cu118 or cu124
        cu121 = srv.add_index("mirror-cu121", prefix="pytorch-wheels/cu121")
        add_pytorch_index_build(cu121, tmp, "2.5.1", local="cu121", deps_index=pypi, done=done)
        yield srv


@pytest.fixture
def blocked() -> str:
    return f"http://127.0.0.1:{free_port()}/whl"


@pytest.fixture(autouse=True)
def _fast_index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))


def _resolve(world: IndexServer, tmp_path: Path, *args: str):
    out = tmp_path / "l.lock"
    r = run_cli("resolve", "--index-url", world.url("pypi"), "--python", "3.11",
                "--gpu", "H100 SXM", "--torch", "==2.5.1", "-o", str(out), *args)
    return r, (_toml.loads(out.read_text()) if r.code == 0 else None)


def test_blocked_pytorch_index_falls_back_to_the_equivalent_pypi_build(
        world: IndexServer, tmp_path: Path, blocked: str) -> None:
    r, lock = _resolve(world, tmp_path, "--pytorch-index-url", blocked,
                       "--prefer", "pytorch-index")
    assert r.code == 0, r.err
    t = lock["target"][0]
    assert t["torch"]["on-pypi"] is True and t["torch"]["variant"] == "cu124"
    fell = [d for d in t["decision"] if d.startswith("index fallback: ")]
    assert len(fell) == 1 and "cannot reach" in fell[0] and "2.5.1" in fell[0]
    assert sum(1 for line in r.out.splitlines() if "index fallback" in line) == 1


def test_no_equivalent_build_names_every_way_out(world: IndexServer, tmp_path: Path,
                                                 blocked: str) -> None:
    r, _ = _resolve(world, tmp_path, "--pytorch-index-url", blocked, "--cuda", "12.1")
    assert r.code == 4
    lines = r.err.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("hint: ")
    assert "cannot reach" in lines[0] and "Traceback" not in r.err
    hint = lines[1]
    assert "ENVLOCK_PYTORCH_INDEX_URL" in hint and "file://" in hint
    assert "--cuda 12.4 selects torch 2.5.1 from PyPI" in hint
    assert "--offline" in hint


def test_mirror_through_the_environment_variable(world: IndexServer, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_PYTORCH_INDEX_URL", f"{world.base}/pytorch-wheels")
    r, lock = _resolve(world, tmp_path, "--cuda", "12.1")
    assert r.code == 0, r.err
    torch = next(p for p in lock["target"][0]["package"] if p["name"] == "torch")
    assert torch["version"] == "2.5.1+cu121"
    assert torch["index"] == world.url("mirror-cu121")


def test_mirror_lacking_a_variant_falls_back_within_the_mirror(
        world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_PYTORCH_INDEX_URL", f"{world.base}/pytorch-wheels")
    r, lock = _resolve(world, tmp_path, "--prefer", "pytorch-index")
    assert r.code == 0, r.err
    t = lock["target"][0]
    # cu124 is missing on the mirror: the cu121 build there is equivalent (H100 runs it)
    assert t["torch"]["variant"] == "cu121" and not t["torch"]["on-pypi"]
    assert any(d.startswith("index fallback: ") and "no torch project" in d
               for d in t["decision"])


def test_mirror_listed_in_pips_config_as_an_extra_index(world: IndexServer, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch
                                                        ) -> None:
    conf = tmp_path / "pip.conf"
    conf.write_text(f"[global]\nindex-url = {world.url('pypi')}\n"
                    f"extra-index-url = {world.url('mirror-cu121')}\n")
    monkeypatch.setenv("PIP_CONFIG_FILE", str(conf))
    out = tmp_path / "l.lock"
    r = run_cli("resolve", "--python", "3.11", "--gpu", "H100 SXM", "--torch", "==2.5.1",
                "--cuda", "12.1", "-o", str(out))
    assert r.code == 0, r.err
    torch = next(p for p in _toml.loads(out.read_text())["target"][0]["package"]
                 if p["name"] == "torch")
    assert torch["version"] == "2.5.1+cu121" and torch["index"] == world.url("mirror-cu121")


def test_file_mirror(world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                     ) -> None:
    root = tmp_path / "pytorch-wheels"
    idx = world.indexes["mirror-cu121"]
    names = {"torch": [], "pytorch-triton": []}  # type: dict
    for name in names:
        d = root / "cu121" / name
        d.mkdir(parents=True)
        for whl in sorted(_wheels(idx, name)):
            shutil.copy(whl, d / whl.name)
            digest = hashlib.sha256(whl.read_bytes()).hexdigest()
            names[name].append(f'<a href="{whl.name}#sha256={digest}">{whl.name}</a>')
        (d / "index.html").write_text("<html><body>" + "".join(names[name])
                                      + "</body></html>")
    monkeypatch.setenv("ENVLOCK_PYTORCH_INDEX_URL", root.as_uri())
    r, lock = _resolve(world, tmp_path, "--cuda", "12.1")
    assert r.code == 0, r.err
    torch = next(p for p in lock["target"][0]["package"] if p["name"] == "torch")
    assert torch["version"] == "2.5.1+cu121" and torch["index"].startswith("file://")


def _wheels(idx, name: str):
    from support.index_server import canonical

    return list(idx.files.get(canonical(name), []))


def test_prefer_sets_which_index_ranks_first(tmp_path: Path) -> None:
    def choose(*extra: str) -> dict:
        out = tmp_path / "p.lock"
        r = run_cli("resolve", "--offline", "--python", "3.11", "--gpu", "H100 SXM",
                    "--torch", "==2.5.1", "-o", str(out), *extra)
        assert r.code == 0, r.err
        return _toml.loads(out.read_text())

    default = choose()
    assert default["target"][0]["torch"]["on-pypi"] is True  # PyPI wins the tie
    assert "prefer" not in default["inputs"]
    lock = choose("--prefer", "pytorch-index")
    assert lock["target"][0]["torch"]["on-pypi"] is False
    assert lock["inputs"]["prefer"] == "pytorch-index"
    assert choose("--prefer", "pypi")["target"][0]["torch"]["on-pypi"] is True


def test_every_way_out_of_an_index_error_is_a_command_that_works(
        world: IndexServer, tmp_path: Path, blocked: str) -> None:
    # the hint's commands are the user's own with one option changed: --offline keeps
    # their --cuda 12.1, the other CUDA line replaces it; each printed command runs
    import shlex

    r, _ = _resolve(world, tmp_path, "--pytorch-index-url", blocked, "--cuda", "12.1")
    assert r.code == 4, r.err
    hint = r.err.strip().splitlines()[1]
    cmds = [part.split(": ", 1)[1] for part in hint.split("; ")
            if ": envlock resolve " in part]
    assert len(cmds) == 2, hint
    offline = next(c for c in cmds if "--offline" in c)
    assert "--cuda 12.1" in offline
    other = next(c for c in cmds if "--offline" not in c)
    assert "--cuda 12.4" in other and "12.1" not in other
    for cmd in cmds:
        again = run_cli(*shlex.split(cmd)[1:])
        assert again.code == 0, (cmd, again.err)
