"""A resolve whose every input is unchanged replays the recorded result (envlock.replay).

Replayed or computed is told from the outside: the wheels' metadata is removed from the
cache before the second run, so a computed resolve must ask the loopback index for it
again while a replay asks nothing (the pages themselves stay fresh either way).
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path
from typing import Iterator

import pytest
from support.index_server import IndexServer
from support.torch_world import add_package, add_torch_release, resolve

from envlock.replay import Recorder


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("replay")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        add_package(pypi, tmp, "helper", "1.2")
        add_package(pypi, tmp, "helper", "1.3")
        yield srv


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(d))
    monkeypatch.delenv("ENVLOCK_NO_REPLAY", raising=False)
    monkeypatch.chdir(tmp_path)
    return d


def _run(world: IndexServer, *args: str):  # type: ignore[no-untyped-def]
    return resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", *args)


def _asks(world: IndexServer, cache: Path, *args: str):  # type: ignore[no-untyped-def]
    """Run again with the metadata gone from the cache: (result, requests it made)."""
    for sub in ("metadata", "pages"):
        shutil.rmtree(cache / sub, ignore_errors=True)
    before = len(world.requests())
    r = _run(world, *args)
    return r, len(world.requests()) - before


def _stored(cache: Path) -> list:
    return sorted((cache / "replay").rglob("*.json")) if (cache / "replay").exists() else []


def test_an_unchanged_resolve_is_replayed_byte_for_byte(world: IndexServer, cache: Path,
                                                        tmp_path: Path) -> None:
    first = _run(world, "helper", "-o", "a.lock")
    assert first.code == 0, first.err
    lock = (tmp_path / "a.lock").read_bytes()
    (tmp_path / "a.lock").write_text("edited by hand\n")
    again, asked = _asks(world, cache, "helper", "-o", "a.lock")
    assert asked == 0
    assert (again.code, again.out, again.err) == (first.code, first.out, first.err)
    assert (tmp_path / "a.lock").read_bytes() == lock
    assert len(_stored(cache)) == 1


def test_a_changed_requirements_file_is_read_again(world: IndexServer, cache: Path,
                                                   tmp_path: Path) -> None:
    req = tmp_path / "req.txt"
    req.write_text("helper==1.2\n")
    assert _run(world, "-r", "req.txt", "-o", "b.lock").code == 0
    assert 'version = "1.2"' in (tmp_path / "b.lock").read_text()
    req.write_text("helper==1.3\n")
    r, asked = _asks(world, cache, "-r", "req.txt", "-o", "b.lock")
    assert r.code == 0, r.err
    assert asked > 0
    assert 'version = "1.3"' in (tmp_path / "b.lock").read_text()


def test_another_environment_or_command_is_computed(world: IndexServer, cache: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(world, "helper", "-o", "c.lock").code == 0
    monkeypatch.setenv("SOME_TEAM_SETTING", "on")  # any variable is an input
    r, asked = _asks(world, cache, "helper", "-o", "c.lock")
    assert r.code == 0 and asked > 0
    r, asked = _asks(world, cache, "helper", "-o", "c2.lock")  # another command line
    assert r.code == 0 and asked > 0


def test_a_changed_cache_entry_or_a_stale_record_is_computed(world: IndexServer,
                                                            cache: Path) -> None:
    assert _run(world, "helper", "-o", "d.lock").code == 0
    entry = next((cache / "http").rglob("*.json"))
    os.utime(entry, ns=(1, 1))  # another run refreshed this page
    r, asked = _asks(world, cache, "helper", "-o", "d.lock")
    assert r.code == 0 and asked > 0
    # recorded again by that run; now the record goes stale (its pages' max-age passed)
    (path,) = _stored(cache)
    data = json.loads(path.read_text())
    data["valid_until"] = 1.0
    path.write_text(json.dumps(data))
    r, asked = _asks(world, cache, "helper", "-o", "d.lock")
    assert r.code == 0 and asked > 0


def test_no_replay_when_turned_off_refreshing_or_in_a_shared_cache(
        world: IndexServer, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run(world, "helper", "-o", "e.lock").code == 0
    monkeypatch.setenv("ENVLOCK_NO_REPLAY", "1")
    r, asked = _asks(world, cache, "helper", "-o", "e.lock")
    assert r.code == 0 and asked > 0
    monkeypatch.delenv("ENVLOCK_NO_REPLAY")
    r, asked = _asks(world, cache, "helper", "--refresh", "-o", "e.lock")
    assert r.code == 0 and asked > 0
    assert _run(world, "helper", "-o", "e.lock").code == 0  # recorded
    cache.chmod(0o777)  # others could plant a record: a planted record is a planted lock
    try:
        r, asked = _asks(world, cache, "helper", "-o", "e.lock")
        assert r.code == 0 and asked > 0
    finally:
        cache.chmod(0o700)


def test_a_failed_resolve_is_not_recorded(world: IndexServer, cache: Path) -> None:
    r = _run(world, "helper==9.9", "-o", "f.lock")
    assert r.code != 0
    assert _stored(cache) == []


def test_what_cannot_be_read_twice_is_never_replayed(tmp_path: Path) -> None:
    """A pipe (``-r /dev/stdin``) gives other lines on the next run."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    rec = Recorder()
    rec.file(str(fifo))
    assert rec.live is not None
    plain = Recorder()
    plain.file(str(tmp_path / "absent.txt"))  # absent counts: created later is a change
    assert plain.live is None and list(plain.files.values()) == [None]


def test_a_replay_imports_neither_the_resolver_nor_argparse(world: IndexServer, cache: Path,
                                                           tmp_path: Path) -> None:
    """The lookup runs before the command line is parsed (a real process, with Python's
    own import log on stderr)."""
    from support.cli import run_proc

    args = ["resolve", "--index-url", world.url("pypi"), "--pytorch-index-url",
            f"{world.base}/pytorch", "--gpu", "H100 SXM", "--torch", "==2.5.1", "helper",
            "-o", "p.lock"]
    env = {"PYTHONPROFILEIMPORTTIME": "1", "ENVLOCK_CACHE_DIR": str(cache)}
    first = run_proc(*args, env=env, cwd=str(tmp_path))
    assert first.code == 0, first.err
    assert "envlock.resolve" in first.err
    again = run_proc(*args, env=env, cwd=str(tmp_path))
    assert again.code == 0, again.err
    imported = {line.rsplit("|", 1)[-1].strip() for line in again.err.splitlines()
                if line.startswith("import time:")}
    assert "envlock.replay" in imported
    assert not {"envlock.resolve", "envlock.matrix", "argparse"} & imported
    assert again.out == first.out


def test_records_are_bounded_the_oldest_go_first(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Each distinct command and environment is a record of its own: past MAX_RECORDS the
    oldest are removed, so a CI job that names its run in the environment cannot fill the
    cache."""
    from envlock import replay

    monkeypatch.setattr(replay, "MAX_RECORDS", 5)  # the bound, not the code, made small
    root = tmp_path / "cache"
    root.mkdir(mode=0o700)
    paths = []
    for i in range(8):
        s = replay.begin(["resolve", "--gpu", "H100", f"pkg{i}"], root, True, {})
        assert s is not None
        s.store(None, None, f"out {i}\n", "")
        assert s.path.exists()
        os.utime(s.path, ns=(i + 1, i + 1))  # stored one after another
        paths.append(s.path)
    kept = [p for p in paths if p.exists()]
    assert kept == paths[-5:]


def test_a_lock_written_into_a_device_is_not_recorded(world: IndexServer, cache: Path) -> None:
    """``-o /dev/null`` (or /dev/stdout, a FIFO) is written into, not replaced: there is
    no file to read the lock back from, so nothing is recorded."""
    r = _run(world, "helper", "-o", os.devnull)
    assert r.code == 0, r.err
    assert _stored(cache) == []
