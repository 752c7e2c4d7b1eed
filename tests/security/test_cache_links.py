"""A shared cache directory cannot be turned against its users (issue 32, item 1).

Every cache path is predictable (a digest of a URL), so another user who can write the
cache directory plants links there. The victim's next resolve must neither write through
them (replacing a file of the victim's with bytes an index chose) nor read through them;
it ignores them, replaces them where it may, and resolves as before. The two-user case
runs the attacker as ``nobody`` (root can become it); it is skipped elsewhere.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator, List

import pytest
from support.index_server import IndexServer
from support.torch_world import add_package, add_torch_release, resolve

from envlock._cache_files import read_entry, root_warning, write_entry

PRECIOUS = b"root's own file: must never change\n"


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("cachelinks")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        add_package(pypi, tmp, "helper", "1.2")
        yield srv


def _entries(root: Path) -> List[str]:
    """Relative paths of every file a resolve left in a cache."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def _victim(tmp_path: Path, name: str = "victim") -> Path:
    v = tmp_path / name
    v.write_bytes(PRECIOUS)
    v.chmod(0o600)
    return v


def _resolve(world: IndexServer, out: Path) -> object:
    return resolve(world, "--gpu", "H100 SXM", "--torch", "==2.5.1", "helper", "-o", str(out))


def _learn(world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> List[str]:
    learn = tmp_path / "learn-cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(learn))
    r = _resolve(world, tmp_path / "learn.lock")
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    return [e for e in _entries(learn) if not e.startswith("matrix-")]


def test_links_planted_in_ones_own_cache_are_replaced_not_followed(
        world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = _learn(world, tmp_path, monkeypatch)
    assert len(names) >= 5, names
    cache = tmp_path / "cache"
    victims = []
    for i, rel in enumerate(names):
        entry = cache / rel
        entry.parent.mkdir(parents=True, exist_ok=True)
        victims.append(_victim(tmp_path, f"victim{i}"))
        entry.symlink_to(victims[-1])
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(cache))
    r = _resolve(world, tmp_path / "l.lock")
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    assert all(v.read_bytes() == PRECIOUS for v in victims)
    replaced = [rel for rel in names if not (cache / rel).is_symlink()]
    assert replaced, "no planted link was replaced"
    for rel in replaced:
        assert stat.S_ISREG(os.lstat(cache / rel).st_mode)


def test_a_link_in_place_of_a_cache_directory_is_not_entered(
        world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = _learn(world, tmp_path, monkeypatch)
    cache = tmp_path / "cache"
    cache.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for top in {rel.split("/")[0] for rel in names}:
        (cache / top).symlink_to(elsewhere, target_is_directory=True)
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(cache))
    r = _resolve(world, tmp_path / "l.lock")
    assert r.code == 0, r.err  # type: ignore[attr-defined]
    assert list(elsewhere.iterdir()) == []
    # every directory the run wrote to was made again; "replay" is written only by a run
    # that could cache every answer (two threads replacing the planted "http" link at
    # once leave one answer uncached), so its link may stay: never entered (above)
    assert all(not (cache / rel.split("/")[0]).is_symlink() for rel in names
               if not rel.startswith("replay/"))


def test_entries_that_are_not_regular_files_of_this_user_are_not_read(tmp_path: Path) -> None:
    root = tmp_path / "c"
    write_entry(root, root / "a" / "b.json", b"{}")
    assert read_entry(root, root / "a" / "b.json") == b"{}"
    assert stat.S_IMODE(os.stat(root / "a").st_mode) == 0o700
    os.mkfifo(root / "a" / "fifo")
    with pytest.raises(OSError):
        read_entry(root, root / "a" / "fifo")  # and it did not block
    (root / "a" / "link").symlink_to(root / "a" / "b.json")
    with pytest.raises(OSError):
        read_entry(root, root / "a" / "link")
    write_entry(root, root / "a" / "link", b"new")
    assert not (root / "a" / "link").is_symlink() and (root / "a" / "b.json").read_bytes() == b"{}"


def test_a_cache_root_others_can_write_is_named_in_a_warning(tmp_path: Path) -> None:
    d = tmp_path / "shared"
    d.mkdir()
    assert root_warning(d) is None
    d.chmod(0o777)
    assert "can be written by every user" in (root_warning(d) or "")


_PLANT = r"""
import os, sys
shared, victim = sys.argv[1], sys.argv[2]
for i, rel in enumerate(sys.argv[3:]):
    path = os.path.join(shared, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.symlink(victim, path)
print(os.getuid())
"""


def _as_nobody() -> None:
    os.setgid(65534)
    os.setgroups([])
    os.setuid(65534)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                    reason="needs root to run the attacker as another user")
def test_another_user_cannot_make_roots_resolve_overwrite_roots_files(
        world: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    try:
        pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no user 'nobody' here")
    names = _learn(world, tmp_path, monkeypatch)
    shared = Path(tempfile.mkdtemp(prefix="envlock-shared-cache-", dir="/tmp"))
    try:
        shared.chmod(0o777)  # a shared, world-writable cache directory
        victim = _victim(tmp_path)
        # the attacker: plants a link at every path root's resolve will write
        p = subprocess.run(["/usr/bin/python3", "-c", _PLANT, str(shared), str(victim), *names],
                           preexec_fn=_as_nobody, capture_output=True, text=True, timeout=60)
        if p.returncode != 0:
            pytest.skip(f"could not run as nobody: {p.stderr.strip()[-200:]}")
        assert p.stdout.strip() == "65534"
        monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(shared))
        r = _resolve(world, tmp_path / "l.lock")
        assert r.code == 0, r.err  # type: ignore[attr-defined]
        assert victim.read_bytes() == PRECIOUS
        assert stat.S_IMODE(victim.stat().st_mode) == 0o600
        assert "can be written by every user" in r.err  # type: ignore[attr-defined]
        # and a second run (whatever the first could cache) still writes nothing there
        r = _resolve(world, tmp_path / "l2.lock")
        assert r.code == 0 and victim.read_bytes() == PRECIOUS
    finally:
        subprocess.run(["rm", "-rf", str(shared)], check=False)


# -- directories kept open between entries ---------------------------------------------------
# A run keeps the directories it has walked to open (a fresh walk per entry was ~8 system
# calls). What happens to a path after its directory was first used must not redirect a
# later write, and must not lose it either.

def test_a_cache_directory_removed_after_use_is_made_again(tmp_path: Path) -> None:
    root = tmp_path / "c"
    write_entry(root, root / "pages" / "ab" / "one", b"1")
    subprocess.run(["rm", "-rf", str(root)], check=True)  # `envlock cache clean`, or a user
    write_entry(root, root / "pages" / "ab" / "two", b"2")
    assert (root / "pages" / "ab" / "two").read_bytes() == b"2"
    assert read_entry(root, root / "pages" / "ab" / "two") == b"2"


def test_a_link_planted_where_a_used_cache_directory_was_is_not_entered(tmp_path: Path) -> None:
    root = tmp_path / "c"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    write_entry(root, root / "http" / "ab" / "one", b"1")
    # removed and replaced by a link...
    subprocess.run(["rm", "-rf", str(root / "http" / "ab")], check=True)
    (root / "http" / "ab").symlink_to(elsewhere, target_is_directory=True)
    write_entry(root, root / "http" / "ab" / "two", b"2")
    assert list(elsewhere.iterdir()) == []
    assert not (root / "http" / "ab").is_symlink()
    assert read_entry(root, root / "http" / "ab" / "two") == b"2"
    # ...or moved away and replaced by a link: the write stays in the user's own directory
    os.rename(root / "http", tmp_path / "moved")
    (root / "http").symlink_to(elsewhere, target_is_directory=True)
    write_entry(root, root / "http" / "ab" / "three", b"3")
    write_entry(root, root / "http" / "cd" / "four", b"4")
    assert list(elsewhere.iterdir()) == []


def test_threads_writing_to_more_directories_than_are_kept_open_lose_nothing(
        tmp_path: Path) -> None:
    """Directories are dropped from the kept list while other threads write in them: a
    descriptor closed under a writer could be reused by another open, and the entry land
    in the wrong directory."""
    import threading

    from envlock import _cache_files

    root = tmp_path / "c"
    dirs = [f"{i:03x}" for i in range(_cache_files._MAX_OPEN * 3)]
    errors: List[BaseException] = []
    go = threading.Event()

    def writer(n: int) -> None:
        go.wait()
        try:
            for k in range(4):
                for j, d in enumerate(dirs):
                    if (j + n) % 3 == 0:
                        write_entry(root, root / d / f"w{n}-{k}", f"{d}/{n}/{k}".encode())
                        assert read_entry(root, root / d / f"w{n}-{k}") == f"{d}/{n}/{k}".encode()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(6)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads interleave between any two bytecodes
    try:
        for t in threads:
            t.start()
        go.set()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    assert errors == []
    for j, d in enumerate(dirs):
        for n in range(6):
            for k in range(4):
                f = root / d / f"w{n}-{k}"
                if (j + n) % 3 == 0:
                    assert f.read_bytes() == f"{d}/{n}/{k}".encode()
                else:
                    assert not f.exists()
    assert len(_cache_files._OPEN) <= _cache_files._MAX_OPEN


def test_a_kept_directory_in_use_is_not_closed_when_another_use_finds_it_removed(
        tmp_path: Path) -> None:
    """One thread writes in a directory while another finds it removed (and walks to a new
    one): the first one's descriptor must stay open until it is done with it."""
    from envlock import _cache_files

    root = tmp_path / "c"
    write_entry(root, root / "a" / "one", b"1")
    with _cache_files._directory(root, ("a",), create=True) as held:
        subprocess.run(["rm", "-rf", str(root / "a")], check=True)
        write_entry(root, root / "a" / "two", b"2")  # finds the kept one removed
        os.fstat(held)  # still this use's descriptor (EBADF if it had been closed)
        assert os.fstat(held).st_nlink == 0
    assert read_entry(root, root / "a" / "two") == b"2"


def test_cache_entries_honour_the_umask(tmp_path: Path) -> None:
    """An entry gets the mode any new file gets (0666 less the umask), as before, now
    from the kernel at creation instead of a umask read that set it process-wide."""
    from envlock._cache_files import write_entry

    old = os.umask(0o022)
    try:
        write_entry(tmp_path, tmp_path / "ab" / "a.body", b"x")
        os.umask(0o077)
        write_entry(tmp_path, tmp_path / "ab" / "b.body", b"x")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "ab" / "a.body").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "ab" / "b.body").stat().st_mode) == 0o600
