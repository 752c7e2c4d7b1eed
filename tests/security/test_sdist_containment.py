"""Hostile sdists on a loopback index: a build backend must not outlive its build, keep
envlock waiting, see credentials, reach the network, or leave its temporary directory
behind; pip must never carry index credentials on its command line (issue 32, items 2, 4
and 5). Each backend is in-tree (``backend-path``), so no build requirement is needed
unless the test wants pip to run.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Dict, Iterator, List, Optional

import pytest
from support.index_server import IndexServer, make_sdist
from support.torch_world import add_package, add_torch_release, resolve

from envlock.index import contain

SECRET = "s3cr3t-Planted-7f1c9a"
USER = "builder"
_PYPROJECT = ('[build-system]\nrequires = [{req}]\nbuild-backend = "backend"\n'
              'backend-path = ["."]\n')
_OLD_PKG_INFO = "Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n\n"


def _metadata_fn(name: str) -> str:
    return f'''
def _write(d):
    import os
    os.makedirs(os.path.join(d, "{name}-1.0.dist-info"), exist_ok=True)
    with open(os.path.join(d, "{name}-1.0.dist-info", "METADATA"), "w") as f:
        f.write("Metadata-Version: 2.1\\nName: {name}\\nVersion: 1.0\\n\\n")
    return "{name}-1.0.dist-info"
'''


def _backend(name: str, body: str) -> str:
    """A backend whose prepare_metadata runs ``body`` (with ``report``, a path in the
    test's directory, and ``started``) before writing plain metadata."""
    return _metadata_fn(name) + f'''
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    import os, sys, time, json, socket, subprocess
{_indent(body)}
    return _write(metadata_directory)
'''


def _indent(body: str) -> str:
    return "\n".join("    " + ln for ln in body.strip("\n").splitlines())


def _sdist(tmp: Path, name: str, backend: str, req: str = "") -> Path:
    return make_sdist(tmp / "sdists", name, "1.0",
                      files={"backend.py": backend, "pyproject.toml": _PYPROJECT.format(req=req)},
                      pkg_info=_OLD_PKG_INFO.format(name=name))


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[IndexServer]:
    tmp = tmp_path_factory.mktemp("hostile-sdists")
    shared = tmp / "shared"
    shared.mkdir()
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        add_torch_release(pypi, tmp, "2.5.1")
        add_package(pypi, tmp, "buildreq", "1.0")
        s = str(shared)
        hostile = {
            # a daemon that double-forks into its own session and keeps writing
            "daemon": f'''
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork() == 0:
        while True:
            with open({s!r} + "/daemon.log", "a") as f:
                f.write("x")
            time.sleep(0.05)
    os._exit(0)
os.waitpid(pid, 0)
''',
            # a grandchild that keeps the hook's stdout and stderr open
            "holder": "subprocess.Popen(['sleep', '120'])",
            # a hook that never returns
            "hang": f'''
open({s!r} + "/hang-started", "w").close()
while True:
    time.sleep(1)
''',
            # what can it see? environment, ~/.netrc, the network
            "snoop": f'''
seen = {{"env": dict(os.environ), "home": os.path.expanduser("~")}}
try:
    seen["netrc"] = open("/root/.netrc").read()
except OSError as exc:
    seen["netrc"] = None
port = int(open({s!r} + "/port").read())
try:
    socket.create_connection(("127.0.0.1", port), timeout=5).close()
    seen["net"] = True
except OSError:
    seen["net"] = False
with open({s!r} + "/snoop.json", "w") as f:
    json.dump(seen, f)
''',
        }
        for name, body in hostile.items():
            pypi.add(_sdist(tmp, name, _backend(name, body)))
        # the backend names a file of the user's as its METADATA
        pypi.add(_sdist(tmp, "pointer", _metadata_fn("pointer") + '''
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return "../../../../../../../../etc/passwd_is_not_metadata/../hostname_x"
'''))
        pypi.add(_sdist(tmp, "huge", _metadata_fn("huge") + '''
def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    import os
    d = os.path.join(metadata_directory, "huge-1.0.dist-info")
    os.makedirs(d)
    with open(os.path.join(d, "METADATA"), "wb") as f:
        f.truncate(40 * 1024 * 1024)
    return "huge-1.0.dist-info"
'''))
        # needs a build requirement: pip runs, with the index's credentials
        pypi.add(_sdist(tmp, "needsreq", _backend("needsreq", "import buildreq"),
                        req='"buildreq"'))
        (shared / "port").write_text(str(srv.port))
        srv.shared = shared  # type: ignore[attr-defined]
        yield srv


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The cache, and build directories under this test's tmp_path (see :func:`_marked`)."""
    d = tmp_path / "cache"
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(d))
    (tmp_path / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)  # the stdlib caches its first answer
    return d


def _marked(scope: Path) -> List[int]:
    """Processes of a build of this test, found by the marker in their environment and a
    hook HOME under ``scope`` (the test's temporary directory: builds of tests running
    beside this one, under pytest-xdist, are not this test's leftovers)."""
    home = f"HOME={scope}/".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            env = Path("/proc", entry, "environ").read_bytes()
        except OSError:
            continue
        values = env.split(b"\0")
        if (any(v.startswith(contain.MARKER.encode() + b"=") for v in values)
                and any(v.startswith(home) for v in values)):
            found.append(int(entry))
    return found


def _args(world: IndexServer, *names: str) -> List[str]:
    return ["--gpu", "H100 SXM", "--torch", "==2.5.1", *names]


@pytest.mark.parametrize("isolated", [True, False], ids=["namespaces", "fallback"])
def test_a_double_forked_daemon_does_not_outlive_the_build(
        world: IndexServer, tmp_path: Path, cache: Path, isolated: bool,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if isolated and contain.isolation() is None:
        pytest.skip("no unprivileged user namespaces here")
    if not isolated:
        monkeypatch.setenv("ENVLOCK_BUILD_NETWORK", "1")
    log = world.shared / "daemon.log"  # type: ignore[attr-defined]
    log.unlink(missing_ok=True)
    r = resolve(world, *_args(world, "daemon"), "-o", str(tmp_path / "l.lock"))
    assert r.code == 0, r.err
    assert _marked(tmp_path) == []  # nothing of the build is running once resolve returns
    size = log.stat().st_size if log.exists() else 0
    # no process is left to write: the size cannot change any more (checked after a
    # scan of every process found none, so no waiting on time is needed for the claim)
    assert (log.stat().st_size if log.exists() else 0) == size
    assert "envlock: note: running the build backend of daemon-1.0.tar.gz" in r.err


def test_a_grandchild_holding_the_output_does_not_stall_resolve(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    start = time.monotonic()
    r = resolve(world, *_args(world, "holder"), "-o", str(tmp_path / "l.lock"))
    assert r.code == 0, r.err
    assert time.monotonic() - start < 60  # it held stdout for 120 s
    assert _marked(tmp_path) == []


def test_the_build_deadline_kills_a_hanging_hook(world: IndexServer, tmp_path: Path,
                                                 cache: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_BUILD_DEADLINE", "3")
    r = resolve(world, *_args(world, "hang"), "-o", str(tmp_path / "l.lock"))
    assert r.code == 7, r.err
    assert "hang-1.0.tar.gz" in r.err and "ENVLOCK_BUILD_DEADLINE" in r.err
    assert _marked(tmp_path) == []


def test_envlock_no_build_forbids_running_a_backend(world: IndexServer, tmp_path: Path,
                                                    cache: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_NO_BUILD", "1")
    log = world.shared / "daemon.log"  # type: ignore[attr-defined]
    log.unlink(missing_ok=True)
    r = resolve(world, *_args(world, "daemon"), "-o", str(tmp_path / "l.lock"))
    assert r.code == 7 and "--no-build forbids" in r.err, r.err
    assert "running the build backend" not in r.err and not log.exists()


def test_the_backend_sees_no_secret_no_netrc_and_no_network(
        world: IndexServer, tmp_path: Path, cache: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PLANTED_VALUE", SECRET)          # an innocent name
    monkeypatch.setenv("MY_API_TOKEN", "tok-" + SECRET)  # a credential's name
    monkeypatch.setenv("HTTPS_PROXY", f"http://u:{SECRET}@127.0.0.1:9")
    monkeypatch.setenv("CFLAGS", "-O2")                   # a build knob: kept
    r = resolve(world, *_args(world, "snoop"), "-o", str(tmp_path / "l.lock"))
    assert r.code == 0, r.err
    seen = json.loads((world.shared / "snoop.json").read_text())  # type: ignore[attr-defined]
    assert SECRET not in json.dumps(seen["env"])
    assert seen["env"].get("CFLAGS") == "-O2"
    assert seen["home"] != os.path.expanduser("~") and "envlock-build-" in seen["home"]
    if contain.isolation() is not None:
        assert seen["net"] is False
    lock = (tmp_path / "l.lock").read_text()
    assert SECRET not in lock and SECRET not in r.err and SECRET not in r.out


def test_a_metadata_path_outside_the_output_directory_is_refused(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    r = resolve(world, *_args(world, "pointer"), "-o", str(tmp_path / "l.lock"))
    assert r.code == 7 and "outside its output directory" in r.err, r.err


def test_a_huge_metadata_is_refused_in_one_line(world: IndexServer, tmp_path: Path,
                                                cache: Path) -> None:
    r = resolve(world, *_args(world, "huge"), "-o", str(tmp_path / "l.lock"))
    assert r.code == 7 and "MiB envlock reads" in r.err, r.err


def _cmdlines() -> Dict[int, bytes]:
    out = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                out[int(entry)] = Path("/proc", entry, "cmdline").read_bytes()
            except OSError:
                pass
    return out


def test_index_credentials_never_reach_pips_command_line(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    import importlib.util

    if importlib.util.find_spec("pip") is None:
        pytest.skip("no pip in this Python")
    leaks: List[bytes] = []
    pips: List[bytes] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for cmd in _cmdlines().values():
                if SECRET.encode() in cmd:
                    leaks.append(cmd)
                if b"pip\0install" in cmd and b"--target" in cmd:
                    pips.append(cmd)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    url = world.url("pypi").replace("http://", f"http://{USER}:{SECRET}@")
    try:
        from support.cli import run_cli

        r = run_cli("resolve", "--index-url", url, "--pytorch-index-url",
                    f"{world.base}/pytorch", *_args(world, "needsreq"),
                    "-o", str(tmp_path / "l.lock"))
    finally:
        stop.set()
        t.join()
    assert r.code == 0, r.err
    assert pips, "pip was never seen running"  # the watch saw the step it guards
    assert leaks == []
    # and pip did get the credentials (through its environment)
    assert any(p.startswith("/pypi/simple/buildreq") and a for p, a in world.seen_auth)


# -- signals: envlock as a real process ---------------------------------------------------

def _start(world: IndexServer, tmp_path: Path, name: str) -> subprocess.Popen:
    env = dict(os.environ, TMPDIR=str(tmp_path / "tmp"),
               ENVLOCK_CACHE_DIR=str(tmp_path / "cache"))
    (tmp_path / "tmp").mkdir()
    started = world.shared / "hang-started"  # type: ignore[attr-defined]
    started.unlink(missing_ok=True)
    return subprocess.Popen(
        [sys.executable, "-m", "envlock", "resolve", "--index-url", world.url("pypi"),
         "--pytorch-index-url", f"{world.base}/pytorch", *_args(world, name),
         "-o", str(tmp_path / "l.lock")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(path: Path, proc: Optional[subprocess.Popen] = None, limit: float = 120) -> None:
    end = time.monotonic() + limit
    while not path.exists():
        assert proc is None or proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.05)


def _left_behind(tmp_path: Path) -> List[str]:
    return sorted(p.name for p in (tmp_path / "tmp").iterdir() if p.name.startswith("envlock-"))


@pytest.mark.parametrize("sig, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["ctrl-c", "sigterm"])
def test_a_signal_during_a_hanging_hook_ends_envlock_and_the_hook(
        world: IndexServer, tmp_path: Path, sig: int, code: int) -> None:
    proc = _start(world, tmp_path, "hang")
    _wait_for(world.shared / "hang-started", proc)  # type: ignore[attr-defined]
    assert _marked(tmp_path) != []  # the scan sees this test's hook while it runs
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)  # it hung for ever before
    assert proc.returncode == code, err
    assert "Traceback" not in err
    assert _marked(tmp_path) == []
    assert _left_behind(tmp_path) == []


def test_sigkill_of_envlock_leaves_no_hook_and_no_build_directory(
        world: IndexServer, tmp_path: Path) -> None:
    proc = _start(world, tmp_path, "hang")
    _wait_for(world.shared / "hang-started", proc)  # type: ignore[attr-defined]
    proc.kill()
    proc.communicate(timeout=60)
    # the reaper (and the parent-death signal) act when envlock's end closes their pipe:
    # wait for that event, bounded
    end = time.monotonic() + 60
    while (_marked(tmp_path) or _left_behind(tmp_path)) and time.monotonic() < end:
        time.sleep(0.1)
    assert _marked(tmp_path) == []
    assert _left_behind(tmp_path) == []
