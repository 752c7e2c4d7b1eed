"""Replaying a resolution when nothing it read has changed.

A warm ``envlock resolve`` with the same command reads the same pages and metadata from
the cache and computes the same lock again: about 0.5 s for torch alone and 2.5 s for
vllm, while ``uv pip compile --offline`` answers from its cache in 50-130 ms (issue 30's
benchmark). Most of those seconds are the resolution itself, which is a pure function of
what it read. So a resolve records what it read, and a later run whose every input is
unchanged writes the recorded result instead of computing it again.

What a resolution reads, and how each is checked before a replay:

* the command line, the working directory, the environment (all of it but a few shell
  variables that cannot matter, :data:`_VOLATILE_ENV`), the Python running envlock,
  envlock's own files (the matrix included: a stat digest of the installed package, so
  an edited checkout or another release never replays an old answer) and the libraries
  whose behaviour shapes the answer (:data:`_LIBRARIES`): the entry's key;
* files the user named (requirement and constraint files, nested ones included) and
  pip's configuration files, present or absent: their inode, size and modification time
  must be the same (:func:`note_file`);
* HTTP cache entries that answered without the network: unchanged (inode, size, mtime)
  and still fresh by the rule the transport itself applies (``max-age``, else
  ``ENVLOCK_INDEX_TTL``); the entry is valid until the first of them goes stale;
* a request that failed (an unreachable PyTorch index the resolve fell back from) is
  believed for ``ENVLOCK_INDEX_TTL`` too, as a fresh page is;
* anything else that came from the network without a cache entry behind it (a byte-range
  read, a wheel downloaded to hash it) makes the run unreplayable (:func:`note_live`).

Content-addressed caches (metadata by file hash, parsed pages by body digest, builds by
sdist hash) need no check: what they hold cannot change under their key.

Only a run that exits 0 is recorded; a replay writes the same lock, the same stdout and
stderr, and exits 0. It is never used with ``--refresh``, ``--check``, a target read from
a machine (``--from-snapshot``, ``--from-node``, no target at all), a progress display,
``ENVLOCK_NO_REPLAY=1``, or a cache directory that others can write (a planted entry
would be a planted lock). This module imports only the standard library: the check runs
before the resolver is imported.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import sys
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

__all__ = ["Recorder", "Session", "begin", "note_entry", "note_failure", "note_file",
           "note_live", "recording", "record_into"]

#: the version of the stored form
FORM = 1
#: shell state that cannot change a resolution (everything else in the environment is
#: part of the key: an unknown variable costs a replay, never a wrong one)
_VOLATILE_ENV = frozenset({
    "PWD", "OLDPWD", "SHLVL", "_", "PS1", "PS2", "PS4", "PROMPT_COMMAND", "HISTFILE",
    "HISTSIZE", "HISTFILESIZE", "HISTCONTROL", "COLUMNS", "LINES", "TERM_SESSION_ID",
    "WINDOWID", "SSH_AUTH_SOCK", "SSH_AGENT_PID", "SSH_CLIENT", "SSH_CONNECTION", "SSH_TTY",
    "TMUX", "TMUX_PANE", "STY", "LS_COLORS", "LSCOLORS", "DISPLAY", "XAUTHORITY",
    "XDG_SESSION_ID", "XDG_SESSION_TYPE", "XDG_SESSION_CLASS", "XDG_VTNR", "XDG_SEAT",
    "MAIL", "MAILCHECK", "DBUS_SESSION_BUS_ADDRESS", "TERM_PROGRAM_VERSION",
})
#: the most records kept; the oldest beyond it are removed when a new one is stored
MAX_RECORDS = 256
#: a stored entry larger than this is not ours
_MAX_ENTRY_BYTES = 64 * 1024 * 1024

_Stat = Optional[Tuple[int, int, int]]


def _stat(path: str) -> _Stat:
    """(inode, size, mtime in ns) of ``path`` itself (a link is not followed), None when
    absent."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except (OSError, ValueError):
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


class Recorder:
    """What one resolve read, collected from the threads that read it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.files: Dict[str, _Stat] = {}
        self.entries: Dict[str, _Stat] = {}
        self.valid_until = float("inf")
        self.live: Optional[str] = None

    def file(self, path: str) -> None:
        path = os.path.abspath(path)
        try:
            regular = stat.S_ISREG(os.stat(path).st_mode)
        except (OSError, ValueError):
            regular = True  # absent: recorded as absent
        if not regular:  # a pipe, a device, /dev/stdin: its next read may differ
            self.no_replay(f"{path} is not a regular file")
            return
        with self._lock:
            self.files.setdefault(path, _stat(path))
            # a link named by the user: what it points to is read, so that counts too
            real = os.path.realpath(path)
            if real != path:
                self.files.setdefault(real, _stat(real))

    def entry(self, paths: Sequence[Path], expires: float) -> None:
        with self._lock:
            for p in paths:
                self.entries[str(p)] = _stat(str(p))
            self.valid_until = min(self.valid_until, expires)

    def failure(self, expires: float) -> None:
        with self._lock:
            self.valid_until = min(self.valid_until, expires)

    def no_replay(self, why: str) -> None:
        with self._lock:
            if self.live is None:
                self.live = why


_current: Optional[Recorder] = None


def recording() -> Optional[Recorder]:
    """The recorder of the resolve in progress in this process, if any."""
    return _current


def record_into(recorder: Optional[Any]) -> None:
    """Send this process's notes to ``recorder`` (anything with :class:`Recorder`'s
    ``file``, ``entry``, ``failure`` and ``no_replay``): the network helper collects
    its transport's notes this way and sends them to the resolving process."""
    global _current
    _current = recorder


def note_file(path: "str | os.PathLike[str]") -> None:
    """An input file was read (or looked for): it must be unchanged for a replay."""
    rec = _current
    if rec is not None:
        rec.file(os.fspath(path))


def note_entry(paths: Sequence[Path], expires: float) -> None:
    """A cache entry answered without the network, and stays fresh until ``expires``."""
    rec = _current
    if rec is not None:
        rec.entry(paths, expires)


def note_failure(expires: float) -> None:
    """A request failed and the resolve went on without it: believed until ``expires``."""
    rec = _current
    if rec is not None:
        rec.failure(expires)


def note_live(why: str) -> None:
    """Something came from the network with no cache entry behind it: no replay."""
    rec = _current
    if rec is not None:
        rec.no_replay(why)


# -- the key ------------------------------------------------------------------------------

def _package_digest() -> str:
    """A digest of envlock's installed files (name, size, mtime), matrix included."""
    root = os.path.dirname(os.path.abspath(__file__))
    h = hashlib.sha256()
    todo = [root]
    seen = set()
    while todo:
        top = todo.pop()
        try:
            entries = sorted(os.scandir(top), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name == "__pycache__" or e.name.endswith((".pyc", ".pyo")):
                continue
            try:
                st = e.stat()  # a link (compat-matrix in a checkout) is followed
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode):
                if (st.st_dev, st.st_ino) not in seen:  # a link loop ends here
                    seen.add((st.st_dev, st.st_ino))
                    todo.append(e.path)
            else:
                h.update(f"{e.path}\0{st.st_size}\0{st.st_mtime_ns}\n"
                         .encode("utf-8", "surrogateescape"))
    return h.hexdigest()


#: the libraries whose behaviour is part of a resolution's answer (markers, specifiers,
#: the resolver, lock rendering): an upgrade of one is another key
_LIBRARIES = ("packaging", "resolvelib", "tomlkit")


def _libraries() -> List[Any]:
    """(name, file, size, mtime) of each library in :data:`_LIBRARIES`, found without
    importing it; an upgrade writes new files."""
    import importlib.util

    out: List[Any] = []
    for name in _LIBRARIES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        origin = getattr(spec, "origin", None)
        st = _stat(origin) if origin else None
        out.append([name, origin, st])
    return out


def _key(argv: Sequence[str], extra: Dict[str, Any]) -> str:
    from envlock import __version__

    env = {k: v for k, v in os.environ.items() if k not in _VOLATILE_ENV}
    blob = json.dumps({
        "form": FORM, "envlock": __version__, "package": _package_digest(),
        "python": [sys.version, os.path.realpath(sys.executable), sys.prefix],
        "libraries": _libraries(),
        "cwd": os.getcwd(),
        "argv": list(argv), "env": sorted(env.items()), "extra": extra,
    }, sort_keys=True, ensure_ascii=True, default=str)
    return hashlib.sha256(blob.encode("utf-8", "surrogateescape")).hexdigest()


def _private_root(root: Path) -> bool:
    """The cache root is this user's and nobody else can write it."""
    try:
        st = os.stat(root)
    except OSError:
        return False
    uid = os.geteuid() if hasattr(os, "geteuid") else -1
    return (stat.S_ISDIR(st.st_mode) and (uid == -1 or st.st_uid == uid)
            and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH))


# -- a session -----------------------------------------------------------------------------

class Session:
    """One resolve's part in replaying: look up, or record and store."""

    def __init__(self, root: Path, key: str) -> None:
        self.root = root
        self.key = key
        self.path = root / "replay" / key[:2] / f"{key}.json"
        self.recorder = Recorder()

    # looking up
    def stored(self) -> Optional[Dict[str, Any]]:
        """The stored result when every input it recorded is unchanged, else None."""
        from envlock._cache_files import read_entry

        if not _private_root(self.root):
            return None
        try:
            data = json.loads(read_entry(self.root, self.path, _MAX_ENTRY_BYTES))
        except (OSError, ValueError, RecursionError):
            return None
        try:
            if data["form"] != FORM or data["key"] != self.key:
                return None
            if time.time() >= float(data["valid_until"]):
                return None
            for group in ("files", "entries"):
                for path, was in data[group].items():
                    now = _stat(path)
                    if (None if was is None else tuple(was)) != now:
                        return None
            if not (isinstance(data["stdout"], str) and isinstance(data["stderr"], str)
                    and (data["output"] is None or (isinstance(data["output"], str)
                                                   and isinstance(data["lock"], str)))):
                return None
        except (KeyError, TypeError, ValueError, AttributeError):
            return None
        return data

    # recording
    def start(self) -> None:
        global _current
        _current = self.recorder

    def stop(self) -> None:
        global _current
        if _current is self.recorder:
            _current = None

    def store(self, output: Optional[str], lock: Optional[str], stdout: str,
              stderr: str) -> None:
        """Keep this run's result, unless something it read cannot be checked later."""
        rec = self.recorder
        self.stop()
        if rec.live is not None or rec.valid_until <= time.time() \
                or not _private_root(self.root):
            return
        from envlock._cache_files import write_entry

        data = {"form": FORM, "key": self.key, "valid_until": rec.valid_until
                if rec.valid_until != float("inf") else 1e18,
                "files": rec.files, "entries": rec.entries, "output": output,
                "lock": lock, "stdout": stdout, "stderr": stderr}
        try:
            write_entry(self.root, self.path, json.dumps(data).encode())
            _trim(self.root / "replay", MAX_RECORDS)
        except Exception:  # noqa: BLE001 - the store is an optimisation, never a failure
            pass


def _trim(top: Path, keep: int) -> None:
    """Remove the oldest records past the newest ``keep``: every distinct command and
    environment makes its own record (a CI job whose environment names its run makes one
    per run, never replayed), so the directory must not grow without end."""
    records = []
    for sub in os.scandir(top):
        if not sub.is_dir(follow_symlinks=False):
            continue
        for e in os.scandir(sub.path):
            if e.name.endswith(".json") and e.is_file(follow_symlinks=False):
                records.append((e.stat(follow_symlinks=False).st_mtime_ns, e.path))
    if len(records) <= keep:
        return
    records.sort()
    for _, path in records[:len(records) - keep]:
        try:
            os.unlink(path)
        except OSError:
            pass


def begin(argv: Sequence[str], root: Optional[Path], eligible: bool,
          extra: Dict[str, Any]) -> Optional[Session]:
    """A session for this resolve, or None when replaying does not apply to it."""
    if not eligible or root is None or os.environ.get("ENVLOCK_NO_REPLAY", "").strip() not in (
            "", "0"):
        return None
    return Session(root, _key(argv, extra))


def streams_of(out: Any) -> Dict[str, Any]:
    """What of the output streams is part of the key: whether each is a terminal, and
    colour (a run showing progress on a terminal is never recorded)."""
    def tty(stream: Any) -> bool:
        try:
            return bool(stream.isatty())
        except (AttributeError, ValueError):
            return False

    return {"stdout_tty": tty(out.stdout), "stderr_tty": tty(out.stderr),
            "color": bool(getattr(out, "color", False))}


def replayed(argv: Sequence[str], out: Any) -> bool:
    """Replay ``envlock ARGV`` when a run with this very key was recorded and nothing it
    read has changed: write its lock and its output, and say True. Called before the
    command line is parsed: only an eligible run (``resolve``, with the conditions in the
    module docstring) is ever recorded, and the key holds the whole command line, so an
    entry under this key was made by the same command, parsed the same way."""
    if not argv or argv[0] != "resolve":
        return False
    from envlock._cache_files import cache_dir

    session = begin(argv, cache_dir(), True, streams_of(out))
    stored = session.stored() if session is not None else None
    if stored is None:
        return False
    if stored["output"] is not None and not _holds(stored["output"], stored["lock"]):
        from envlock._files import atomic_write_text

        atomic_write_text(stored["output"], stored["lock"])
    out.stdout.write(stored["stdout"])
    out.stderr.write(stored["stderr"])
    return True


def _holds(path: str, text: str) -> bool:
    """Whether the regular file ``path`` already holds exactly ``text`` (then a replay
    leaves it as it is: rewriting the same bytes durably cost 20 ms, a third of a replay)."""
    data = text.encode("utf-8")
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode) or st.st_size != len(data):
            return False
        with open(path, "rb") as fh:
            return fh.read(len(data) + 1) == data
    except OSError:
        return False


class Tee:
    """A text stream that keeps a copy of what is written to it."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self.parts: List[str] = []

    def write(self, text: str) -> int:
        self.parts.append(text)
        return self._stream.write(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)

    def text(self) -> str:
        return "".join(self.parts)
