"""The PEP 751 export: valid per ``packaging.pylock``, selects exactly the locked wheels for
the target, and uv installs exactly the lock from it."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.markers import Marker

from envlock import _toml
from envlock.lock.io import load_lock
from envlock.platforms import target_tags
from exportkit import World, export_text, locked_versions, make_venv, run_tool, uv_bin

pylock_module = pytest.importorskip("packaging.pylock", reason="needs packaging >= 25.1")
Pylock = pylock_module.Pylock
is_valid_pylock_path = pylock_module.is_valid_pylock_path

LOCKS = Path(__file__).resolve().parents[1] / "data" / "locks"


@pytest.mark.parametrize("lock,target", [("cu121-h100-h20.lock", "h20"),
                                         ("cu121-h100-h20.lock", "h100-sxm"),
                                         ("h100-pypi.lock", "h100-sxm")])
def test_pylock_is_valid_and_holds_the_lock(lock: str, target: str) -> None:
    text = export_text(LOCKS / lock, "pylock", target)
    pylock = Pylock.from_dict(_toml.loads(text))
    pylock.validate()
    t = load_lock(LOCKS / lock).target(target)
    assert t is not None
    assert is_valid_pylock_path(Path(f"pylock.{target}.toml"))
    assert pylock.created_by == "envlock"
    assert [str(m) for m in pylock.environments or ()] == [
        str(Marker("sys_platform == 'linux' and platform_machine == 'x86_64'"))]
    assert str(pylock.requires_python) == "==3.11.*"
    by_name = {p.name: p for p in pylock.packages}
    assert set(by_name) == {p.name for p in t.packages}
    for p in t.packages:
        got = by_name[p.name]
        assert str(got.version) == p.version and got.index == p.index
        hashes = sorted(w.hashes["sha256"] for w in got.wheels or ())
        if got.sdist is not None:
            hashes = sorted(hashes + [got.sdist.hashes["sha256"]])
        assert hashes == list(p.hashes)
    tool = (pylock.tool or {})["envlock"]
    assert tool["target"] == target and tool["lock"] == str(LOCKS / lock)
    assert tool["gpus"] == list(t.gpus)
    assert tool["compute-capabilities"] == list(t.compute_capabilities)
    assert tool["driver-min"] == t.driver_min
    assert tool["torch"]["variant"] == t.torch.variant  # type: ignore[union-attr]
    assert tool["libraries"] == dict(t.libraries)


def test_pylock_selects_the_locked_wheels_for_the_target() -> None:
    if not hasattr(Pylock, "select"):
        pytest.skip("Pylock.select needs packaging >= 26.1")
    text = export_text(LOCKS / "cu121-h100-h20.lock", "pylock", "h20")
    pylock = Pylock.from_dict(_toml.loads(text))
    env = {"sys_platform": "linux", "platform_machine": "x86_64", "python_version": "3.11",
           "python_full_version": "3.11.9", "implementation_name": "cpython",
           "platform_system": "Linux", "os_name": "posix",
           "platform_python_implementation": "CPython", "implementation_version": "3.11.9",
           "platform_release": "", "platform_version": "", "extra": ""}
    chosen = {p.name: a for p, a in pylock.select(environment=env,  # type: ignore[arg-type]
                                                  tags=target_tags("3.11", "linux_x86_64"))}
    assert chosen["torch"].filename == "torch-2.5.1+cu121-cp311-cp311-linux_x86_64.whl"
    assert len(chosen) == len(pylock.packages)


def test_uv_installs_exactly_the_lock_from_the_pylock(world: World, tmp_path: Path) -> None:
    uv = uv_bin()
    path = tmp_path / "pylock.h20.toml"
    path.write_text(export_text(world.multi_lock, "pylock", "h20", output=str(path)))
    python = make_venv(tmp_path / "venv")
    env = {"UV_CACHE_DIR": str(tmp_path / "uv-cache"), "UV_PYTHON_DOWNLOADS": "never"}
    dry = run_tool([uv, "pip", "install", "--dry-run", "--python", python, "-r", path], **env)
    assert dry.returncode == 0, dry.stderr
    would = {line[3:].split("==")[0]: line[3:].split("==")[1]
             for line in dry.stderr.splitlines() if line.startswith(" + ")}
    assert would == locked_versions(world.multi_lock, "h20")
    sync = run_tool([uv, "pip", "sync", "--python", python, path], **env)
    assert sync.returncode == 0, sync.stderr
    from envlock.probe.packages import installed_packages

    site = next((tmp_path / "venv" / "lib").glob("python*/site-packages"))
    assert installed_packages([str(site)]) == locked_versions(world.multi_lock, "h20")
