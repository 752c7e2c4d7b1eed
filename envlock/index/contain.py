"""Running an sdist's build backend, and pip for its build requirements, contained.

A lock command runs code from the index only to learn an sdist's dependencies, so that
code gets as little as it needs, and nothing it starts outlives the build:

- **its own session and process group**, killed (SIGKILL, the whole group) when the step
  ends, when the build's total deadline passes, when the client is closed (Ctrl-C, an
  error elsewhere, SIGTERM through the CLI's handler) and at exit;
- **a PID namespace where the platform allows it without root** (``unshare --user
  --map-root-user --pid --net --fork --kill-child``, probed once): when the hook exits
  the kernel ends every process it left behind, including a daemon that double-forked
  into a session of its own, and the hook has **no network** (only a loopback interface
  that is down). Where ``unshare`` is missing or user namespaces are off, processes that
  left the group are found by a marker in their environment (Linux ``/proc``) and killed,
  and the hook keeps the network: the README says so;
- **a parent-death signal** (``setpriv --pdeathsig KILL``): when envlock itself is killed
  with SIGKILL, the step is killed too;
- **a reaper**: one small process per envlock process that holds the read end of a pipe;
  when envlock ends in any way (SIGKILL included) the pipe closes and the reaper kills the
  build groups still listed and removes the build directories still listed;
- **output in a file, not a pipe**: a grandchild that keeps the hook's stdout open cannot
  keep envlock waiting; the file is read once the step has exited.

The environment a hook sees is made by :func:`hook_environment`: an allowlist, with
``HOME``, ``TMPDIR`` and the XDG directories inside the build's temporary directory.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Set

from envlock.errors import BuildError

__all__ = ["Step", "run_step", "hook_environment", "kill_all", "isolation", "Reaper",
           "build_directory", "MARKER", "DEFAULT_DEADLINE"]

#: the variable that marks every process of a build (found again through /proc)
MARKER = "ENVLOCK_BUILD_MARK"
#: seconds one sdist's build may take in all, pip installs included (ENVLOCK_BUILD_DEADLINE)
DEFAULT_DEADLINE = 600.0
#: the most of a step's output kept for its error message
_TAIL_BYTES = 64 * 1024
#: how often a waiting step checks its deadline and the cancel switch
_SLICE = 0.1

#: variables a build backend may see (besides ``LC_*``): what compilers and the common
#: backends read; nothing that holds a credential. ``ENVLOCK_BUILD_ENV=A,B`` adds names.
_ALLOWED = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "SOURCE_DATE_EPOCH", "CC", "CXX", "CPP",
    "CFLAGS", "CXXFLAGS", "CPPFLAGS", "LDFLAGS", "LD_LIBRARY_PATH", "LIBRARY_PATH",
    "CPATH", "PKG_CONFIG_PATH", "CUDA_HOME", "CUDA_PATH", "CUDA_ROOT", "CUDACXX",
    "ROCM_PATH", "ROCM_HOME", "HIP_PATH", "TORCH_CUDA_ARCH_LIST", "MAX_JOBS", "MAKEFLAGS",
    "CMAKE_ARGS", "CMAKE_PREFIX_PATH", "NVCC_FLAGS", "NVCC_APPEND_FLAGS",
    "SETUPTOOLS_SCM_PRETEND_VERSION", "SETUPTOOLS_USE_DISTUTILS", "ARCHFLAGS",
    "MACOSX_DEPLOYMENT_TARGET", "SYSTEMROOT", "COMSPEC", "PATHEXT", "WINDIR",
})


def hook_environment(home: Path, environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The environment of a build hook: allowed names only (see :data:`_ALLOWED`), none
    whose value holds a URL credential or looks like a token, ``HOME`` / ``TMPDIR`` /
    XDG directories under ``home`` (so ``~/.netrc``, ``~/.pypirc`` and tool configs are not
    where the hook looks), and no ``PYTHONPATH``/``PYTHONHOME`` or user site."""
    from envlock._redact import looks_secret, secret_name

    src = os.environ if environ is None else environ
    extra = {n.strip() for n in src.get("ENVLOCK_BUILD_ENV", "").split(",") if n.strip()}
    env: Dict[str, str] = {}
    for name, value in src.items():
        if not (name in _ALLOWED or name.startswith("LC_") or name in extra):
            continue
        if name not in extra and (secret_name(name) or looks_secret(value)):
            continue
        if "@" in value and "://" in value:  # a URL with credentials, whatever the name
            continue
        env[name] = value
    env.setdefault("PATH", os.defpath)
    for sub in ("tmp", "config", "cache", "data"):
        (home / sub).mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), USERPROFILE=str(home), TMPDIR=str(home / "tmp"),
               TEMP=str(home / "tmp"), TMP=str(home / "tmp"),
               XDG_CONFIG_HOME=str(home / "config"), XDG_CACHE_HOME=str(home / "cache"),
               XDG_DATA_HOME=str(home / "data"), PYTHONNOUSERSITE="1",
               PYTHONDONTWRITEBYTECODE="1", PIP_NO_INPUT="1", PIP_CONFIG_FILE=os.devnull)
    return env


# -- isolation ------------------------------------------------------------------------------

_ISOLATION: List[Optional[List[str]]] = []
_ISOLATION_LOCK = threading.Lock()


def isolation() -> Optional[List[str]]:
    """The command prefix that puts a hook in its own user, PID and network namespaces,
    or None where that cannot be done without root (probed once per process).
    ``ENVLOCK_BUILD_NETWORK=1`` leaves the hook on the network (and in envlock's PID
    namespace) for the rare backend that must download during ``prepare_metadata``."""
    if os.environ.get("ENVLOCK_BUILD_NETWORK", "").strip() not in ("", "0"):
        return None
    with _ISOLATION_LOCK:
        if not _ISOLATION:
            _ISOLATION.append(_probe_isolation())
        return _ISOLATION[0]


def _probe_isolation() -> Optional[List[str]]:
    if not sys.platform.startswith("linux"):
        return None
    tool = shutil.which("unshare")
    if tool is None:
        return None
    prefix = [tool, "--user", "--map-root-user", "--net", "--pid", "--fork", "--kill-child",
              "--"]
    try:
        p = subprocess.run([*prefix, sys.executable, "-I", "-c", "pass"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL, timeout=30, start_new_session=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return prefix if p.returncode == 0 else None


def _pdeathsig() -> List[str]:
    """``setpriv --pdeathsig KILL --`` where util-linux has it: the step dies with us."""
    if not sys.platform.startswith("linux"):
        return []
    tool = shutil.which("setpriv")
    return [tool, "--pdeathsig", "KILL", "--"] if tool else []


# -- the reaper -----------------------------------------------------------------------------

_REAPER_SCRIPT = r"""
import os, shutil, signal, sys
groups, dirs = set(), set()
for line in sys.stdin:
    op, _, arg = line.rstrip("\n").partition(" ")
    if op == "+pg": groups.add(int(arg))
    elif op == "-pg": groups.discard(int(arg))
    elif op == "+dir": dirs.add(arg)
    elif op == "-dir": dirs.discard(arg)
for g in groups:
    try: os.killpg(g, signal.SIGKILL)
    except OSError: pass
for d in dirs:
    shutil.rmtree(d, ignore_errors=True)
"""


class Reaper:
    """The process that cleans up after envlock however it ends (see the module
    docstring). One per envlock process, started on the first build."""

    _lock = threading.Lock()
    _proc: Optional[subprocess.Popen] = None
    _pid: int = 0

    @classmethod
    def tell(cls, line: str) -> None:
        with cls._lock:
            proc = cls._proc
            if proc is None or cls._pid != os.getpid():
                try:
                    proc = subprocess.Popen([sys.executable, "-I", "-c", _REAPER_SCRIPT],
                                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                            stderr=subprocess.DEVNULL, start_new_session=True,
                                            text=True)
                except OSError:
                    return
                cls._proc, cls._pid = proc, os.getpid()
            try:
                assert proc.stdin is not None
                proc.stdin.write(line + "\n")
                proc.stdin.flush()
            except (OSError, ValueError):
                pass


# -- steps ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Step:
    """How one step ended: its exit status and the end of its output."""

    returncode: int
    output: str


_LIVE: Set[int] = set()
_LIVE_LOCK = threading.Lock()


#: build directories in use: :func:`kill_all` waits (bounded) until their builds have
#: removed them, because the worker threads are daemons that an exiting process does not
#: wait for (SIGTERM during a build left ``envlock-build-*`` behind)
_DIRS: Dict[str, int] = {}  # path -> the thread building there
_DIRS_GONE = threading.Condition(_LIVE_LOCK)
#: the most :func:`kill_all` waits for builds to remove their directories (the reaper
#: removes what is left after envlock has ended)
_SETTLE_SECONDS = 15.0


@contextmanager
def build_directory(prefix: str) -> Iterator[Path]:
    """A temporary directory for one build, removed when the block ends and only then
    struck from the reaper's list (a process that ends mid-removal still has it
    removed by the reaper)."""
    tmp = tempfile.mkdtemp(prefix=prefix)
    with _LIVE_LOCK:
        _DIRS[tmp] = threading.get_ident()
    Reaper.tell(f"+dir {tmp}")
    try:
        yield Path(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        Reaper.tell(f"-dir {tmp}")
        with _LIVE_LOCK:
            _DIRS.pop(tmp, None)
            _DIRS_GONE.notify_all()


def kill_all(settle: bool = False) -> None:
    """Kill every build step running in this process (the client's close, Ctrl-C,
    SIGTERM, exit): their waits return at once. ``settle``: then wait, at most
    :data:`_SETTLE_SECONDS`, until every other thread's build has removed its
    directory."""
    with _LIVE_LOCK:
        groups = list(_LIVE)
    for pgid in groups:
        _kill_group(pgid)
    if settle:
        end = time.monotonic() + _SETTLE_SECONDS
        with _LIVE_LOCK:
            me = threading.get_ident()
            while any(owner != me for owner in _DIRS.values()):
                left = end - time.monotonic()
                if left <= 0:
                    break
                _DIRS_GONE.wait(left)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _kill_marked(token: str) -> None:
    """Kill every process of ours whose environment carries this build's marker: those
    that left the process group (``setsid`` after a double fork). Linux only."""
    needle = f"{MARKER}={token}".encode()
    proc = Path("/proc")
    if not proc.is_dir():
        return
    me = os.getpid()
    for _ in range(3):  # a process may fork while we look: look again
        found = False
        for entry in os.listdir(proc):
            if not entry.isdigit() or int(entry) == me:
                continue
            try:
                with open(proc / entry / "environ", "rb") as fh:
                    env = fh.read(1 << 20)
            except OSError:
                continue
            if needle in env.split(b"\0"):
                found = True
                try:
                    os.kill(int(entry), signal.SIGKILL)
                except OSError:
                    pass
        if not found:
            return


def run_step(cmd: Sequence[str], *, cwd: Path, env: Mapping[str, str], log: Path,
             deadline: float, what: str, cancel: Optional[threading.Event] = None,
             isolate: bool = False) -> Step:
    """Run one step contained (see the module docstring) and wait for it, at most until
    ``deadline`` (``time.monotonic()``). A BuildError (exit 7) when the deadline passes or
    ``cancel`` is set; the step's group is killed either way."""
    token = secrets.token_hex(8)
    full_env = dict(env)
    full_env[MARKER] = token
    prefix = _pdeathsig() + ((isolation() or []) if isolate else [])
    contained = isolate and bool(isolation())
    if contained:
        # the first process of a PID namespace is its init: the kernel ignores the signals
        # it sends itself (a backend's os.kill(os.getpid(), SIGKILL) would not end it), so
        # a small init runs the step as its child and passes on how it ended
        prefix = prefix + [sys.executable, "-I", "-S", "-c", _INIT]
    with open(log, "wb") as out:
        try:
            proc = subprocess.Popen([*prefix, *cmd], cwd=str(cwd), env=full_env,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        except OSError as exc:
            raise BuildError(f"{what} could not start ({exc.strerror or exc})") from None
    pgid = proc.pid
    with _LIVE_LOCK:
        _LIVE.add(pgid)
    Reaper.tell(f"+pg {pgid}")
    try:
        while True:
            if cancel is not None and cancel.is_set():
                _kill_group(pgid)
                proc.wait()
                raise BuildError(f"{what} was stopped (envlock is ending)")
            left = deadline - time.monotonic()
            if left <= 0:
                _kill_group(pgid)
                proc.wait()
                raise BuildError(f"{what} did not finish within the build deadline "
                                 f"(ENVLOCK_BUILD_DEADLINE seconds per sdist)")
            try:
                rc = proc.wait(timeout=min(_SLICE, left))
                break
            except subprocess.TimeoutExpired:
                continue
    finally:
        # whatever the step left behind in its group, or (without a PID namespace)
        # anywhere with its marker, ends with it
        _kill_group(pgid)
        if not contained:
            _kill_marked(token)
        with _LIVE_LOCK:
            _LIVE.discard(pgid)
        Reaper.tell(f"-pg {pgid}")
        if proc.returncode is None:
            proc.kill()
            proc.wait()
    if contained and rc > 128 and _signal_name(rc - 128):
        rc = -(rc - 128)  # the init's 128+N: the step was killed by signal N
    return Step(rc, _tail(log))


#: PID 1 of the step's namespace: runs the step as its child, exits 128+N when the step was
#: killed by signal N (an init cannot die of a signal it sends itself)
_INIT = ("import os, subprocess, sys\n"
         "try:\n"
         "    rc = subprocess.Popen(sys.argv[1:]).wait()\n"
         "except OSError:\n"
         "    rc = 127\n"
         "os._exit(128 - rc if rc < 0 else rc)\n")


def _signal_name(n: int) -> Optional[str]:
    try:
        return signal.Signals(n).name
    except ValueError:
        return None


def _tail(log: Path) -> str:
    try:
        with open(log, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - _TAIL_BYTES))
            data = fh.read(_TAIL_BYTES)
    except OSError:
        return ""
    return data.decode("utf-8", "replace")


def build_deadline(default: float = DEFAULT_DEADLINE) -> float:
    """Seconds one sdist's build may take in all (``ENVLOCK_BUILD_DEADLINE``)."""
    raw = os.environ.get("ENVLOCK_BUILD_DEADLINE", "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        from envlock.errors import InputError

        raise InputError(f"ENVLOCK_BUILD_DEADLINE={raw!r} is not a positive number of "
                         f"seconds")
    return value


def _register_exit() -> None:
    """Kill running steps before the interpreter joins its threads at exit (a worker
    waiting on a hook would otherwise keep the process alive)."""
    register = getattr(threading, "_register_atexit", None)
    try:
        if register is not None:
            register(kill_all)
    except RuntimeError:  # already shutting down
        pass
    import atexit

    atexit.register(kill_all)


_register_exit()
