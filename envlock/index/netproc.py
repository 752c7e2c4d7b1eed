"""The index's network requests made in a helper process, beside the resolve.

A cold resolve is one Python process whose threads share one interpreter lock. The
resolver, the parsing of pages and the imports keep that lock busy, and a thread reading a
response must take it back for every TLS record (16 KB) it reads: while another thread
computed, a 4 MB page took 1.0-1.3 s to read instead of 11 ms (measured here with the
default switch interval of 5 ms). PyPI's pages reach 7 MB, and a resolve's critical path
runs through them (transformers -> typer -> pydantic -> pydantic-core, whose page is the
7 MB one). So the requests -- connections, TLS, reading the bodies and, for a project
page, cutting it to the files the run's targets can use -- run in a second process with
an interpreter lock of its own. The resolving process sends a URL and gets the answer
back, a project page already cut (kilobytes, not megabytes). Measured on torch +
transformers + accelerate + datasets against PyPI, cold, 2 cores, 10 rounds of three
alternating runs: 1.13 s in-process, 0.92 s with the helper, 1.01 s for ``uv pip
compile`` (envlock/uv per round: 1.10 median and 1.21 worst in-process, 0.92 and 0.99
with the helper). A prototype that cut the pages in the resolving process took 0.98 s
where the helper took 0.90.

What stays the same: the helper runs the same :class:`~envlock.index.http.Transport`
code (retries, the deadline, redirects, credentials, proxies, the size bound, the cache
entries it writes) with the same configuration and environment; what the resolving
process keeps per request (its statistics, the shortest round trip, the replay record's
notes) comes back with each answer, and an error comes back as the same exception with the
same message and hint. Downloads of whole files (a wheel hashed for the lock) stay
in-process: they would only be copied once more.

It is a best effort. If the helper cannot be started, dies, sends anything unexpected or
stays silent past the request deadline (plus a margin), the request is made in-process,
as without it, and the helper is not asked again. It is started only by ``envlock
resolve`` itself (:func:`start`, where the cold start begins), for requirements of the
user's own (a bare build's closure, torch's 20 small pages, does not pay for the second
interpreter, about 30 MB), on a POSIX system with two or more CPUs, for an index reached
over HTTPS, when the first pages are not fresh in the cache; ``ENVLOCK_NET_HELPER=0``
turns it off, ``=1`` starts it whatever the guess. Credentials never reach the helper's
command line: its configuration is sent over its standard input.

The frames both ways are a 4-byte little-endian length and a :mod:`marshal` payload
(loading one runs no code). The resolving process writes the first frame (the helper's
``sys.path``), then the configuration, then requests; the helper answers each request
with one frame, in the order it finishes them, and a last one with its peak RSS and CPU
time when its input closes.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import struct
import subprocess
import sys
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Tuple

from envlock import replay
from envlock.errors import EnvlockError, IndexError_, InputError, OfflineError
from envlock.index.config import IndexConfig

if TYPE_CHECKING:
    from envlock.index.fit import TripleFit
    from envlock.index.http import Response, Transport

__all__ = ["Helper", "HelperGone", "PageAnswer", "MARGIN", "start", "claim", "serve", "wanted"]

#: a frame larger than this is not ours (a page is at most ENVLOCK_INDEX_MAX_PAGE_BYTES)
_MAX_FRAME = 1 << 31
#: the errors that come back as themselves; anything else is an IndexError_ naming the URL
_ERRORS = {cls.__name__: cls for cls in (IndexError_, OfflineError, InputError)}
#: seconds past the transport's own deadline before a silent helper is given up on
MARGIN = 30.0
#: the bootstrap run by the helper's interpreter: the module path first, then this module
_BOOT = ("import sys,marshal,struct\n"
         "n=struct.unpack('<I',sys.stdin.buffer.read(4))[0]\n"
         "sys.path[:0]=marshal.loads(sys.stdin.buffer.read(n))\n"
         "from envlock.index.netproc import serve\n"
         "serve()\n")


class HelperGone(Exception):
    """The helper cannot answer (not started, dead, silent, closed): ask in-process."""


@dataclass(frozen=True)
class PageAnswer:
    """A project page as the helper read it: ``cut`` (the page cut to the target's files,
    and how many files the whole page listed) or ``body`` (the whole page: not JSON, or
    not in the shape the cut reads, or no targets known yet); ``cached`` when the answer
    came from the cache (the caller reads the entry itself, as it would have)."""

    cached: bool
    content_type: str = ""
    sha256: str = ""
    cut: Optional[Tuple[bytes, int]] = None
    body: bytes = b""


def _frame(obj: Any) -> bytes:
    data = marshal.dumps(obj)
    return struct.pack("<I", len(data)) + data


def _read_exact(stream: Any, n: int) -> Optional[bytes]:
    """``n`` bytes from a binary stream (a pipe's raw reads return what is there), or
    None when it ends first."""
    data = stream.read(n)
    if data is None or len(data) == n:
        return data
    parts = [data]
    got = len(data)
    while got < n:
        more = stream.read(n - got)
        if not more:
            return None
        parts.append(more)
        got += len(more)
    return b"".join(parts)


def _read_frame(stream: Any) -> Any:
    """The next frame's value from a binary stream; None at its end."""
    head = _read_exact(stream, 4)
    if head is None:
        return None
    (n,) = struct.unpack("<I", head)
    if n > _MAX_FRAME:
        raise ValueError("frame too large")
    data = _read_exact(stream, n)
    if data is None:
        return None
    return marshal.loads(data)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _widen(fd: int) -> None:
    """A pipe of 1 MB where the system allows it (Linux): a cut page or a range read
    crosses in one or two reads, not sixteen, each a hand-off of the interpreter lock."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError, ValueError):
        pass


# -- the resolving process's side ----------------------------------------------------------

class Helper:
    """The resolving process's handle on one helper process (see the module docstring).
    Thread-safe; every method raises :class:`HelperGone` once it cannot answer."""

    def __init__(self, proc: "subprocess.Popen[bytes]", key: Tuple[Any, ...]) -> None:
        self._proc = proc
        self.key = key
        self._wlock = threading.Lock()
        self._lock = threading.Lock()
        self._pending: Dict[int, "Future[Any]"] = {}
        self._next = 0
        self._gone: Optional[str] = None
        self._fits: Dict[Tuple[str, ...], int] = {}
        self._transport: Optional["Transport"] = None
        #: the helper's peak RSS (KiB) and CPU seconds, as it reported them on leaving
        self.usage: Optional[Tuple[int, float]] = None
        #: the helper's cumulative statistics as last reported (deltas are merged)
        self._seen: Dict[str, int] = {}
        self._reader = threading.Thread(target=self._read, name="envlock-net-helper",
                                        daemon=True)
        self._reader.start()

    # -- life --------------------------------------------------------------------------
    @classmethod
    def spawn(cls, config: IndexConfig, cache_dir: Optional[Path],
              refresh: bool = False) -> Optional["Helper"]:
        """A started helper, or None when one cannot be started."""
        debug = bool(os.environ.get("ENVLOCK_DEBUG"))
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _BOOT], stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=None if debug else subprocess.DEVNULL,
                bufsize=0, close_fds=True)
        except (OSError, ValueError):
            return None
        assert proc.stdin is not None and proc.stdout is not None
        _widen(proc.stdout.fileno())
        helper = cls(proc, _key(config, cache_dir, refresh))
        init = {"config": _plain_config(config),
                "cache_dir": None if cache_dir is None else str(cache_dir),
                "refresh": bool(refresh)}
        try:
            with helper._wlock:
                _write_all(proc.stdin.fileno(), _frame(list(_module_path())) + _frame(init))
        except (OSError, ValueError):
            helper._fail("could not be started")
            return None
        return helper

    def attach(self, transport: "Transport") -> None:
        """Merge what each answer reports (statistics, round trips) into ``transport``."""
        self._transport = transport

    @property
    def alive(self) -> bool:
        return self._gone is None

    def close(self, wait: float = 0.5) -> None:
        """No more requests: those waiting end at once (as a cancelled transport's do)
        and the helper is told to stop (it cancels what it has in flight, reports its
        resource use and exits). Waits up to ``wait`` seconds for that, so the helper is
        reaped here (its CPU time counts as this process's children's, as a benchmark
        reads it) and :attr:`usage` is known; never longer."""
        self._fail("closed")
        if threading.current_thread() is not self._reader:
            self._reader.join(wait)

    def _fail(self, why: str) -> None:
        """No more answers: every request waiting ends (a closed helper's as a cancelled
        transport's requests do, with KeyboardInterrupt; else with HelperGone, and its
        caller asks in-process), and the helper is told to stop, or killed."""
        with self._lock:
            if self._gone is None:
                self._gone = why
            first = self._gone
            pending, self._pending = self._pending, {}
        for fut in pending.values():
            if not fut.done():
                fut.set_exception(KeyboardInterrupt() if why == "closed" else HelperGone(why))
        # closed under the write lock: a descriptor closed while another thread writes to
        # it may be reused by a file opened meanwhile. A writer stuck on a full pipe (a
        # helper that stopped reading) is let be: the kill below ends its write
        stdin = self._proc.stdin
        if stdin is not None and self._wlock.acquire(timeout=1.0):
            try:
                stdin.close()
            except OSError:
                pass
            finally:
                self._wlock.release()
        if first != "closed" and self._proc.poll() is None:
            try:
                self._proc.kill()
            except OSError:
                pass

    # -- requests ----------------------------------------------------------------------
    def request(self, url: str, headers: Mapping[str, str], max_bytes: Optional[int],
                patience: float) -> "Response":
        """``Transport._request`` made by the helper."""
        from envlock.index.http import Response

        final, status, body, hdrs = self._call(("request", url, dict(headers), max_bytes),
                                               patience)
        return Response(final, status, body, hdrs)

    def page(self, url: str, headers: Mapping[str, str], fit: Optional["TripleFit"],
             patience: float) -> PageAnswer:
        """``Transport.get`` of a project page made by the helper, the page cut by ``fit``
        when it is given and the page has the shape the cut reads."""
        sid = None
        if fit is not None:
            with self._lock:  # (held while the rule is sent: no request may name it first)
                sid = self._fits.get(fit.tags)
                if sid is None:
                    sid = self._fits[fit.tags] = len(self._fits)
                    self._send(("fit", sid, list(fit.tags)))
        kind, *rest = self._call(("page", url, dict(headers), sid), patience)
        if kind == "cached":
            return PageAnswer(True)
        if kind == "cut":
            ctype, sha, mini, listed = rest
            return PageAnswer(False, ctype, sha, cut=(mini, listed))
        ctype, sha, body = rest
        return PageAnswer(False, ctype, sha, body=body)

    def _send(self, message: Tuple[Any, ...]) -> None:
        stdin = self._proc.stdin
        try:
            with self._wlock:
                if self._gone is not None or stdin is None:
                    raise HelperGone(self._gone or "not started")
                _write_all(stdin.fileno(), _frame(message))
        except (OSError, ValueError):
            threading.Thread(target=self._fail, args=("its input closed",),
                             daemon=True).start()  # (this thread may hold self._lock)
            raise HelperGone("its input closed") from None

    def _call(self, message: Tuple[Any, ...], patience: float) -> Any:
        fut: "Future[Any]" = Future()
        with self._lock:
            if self._gone is not None:
                raise HelperGone(self._gone)
            rid = self._next = self._next + 1
            self._pending[rid] = fut
        self._send((rid, *message))
        try:
            return fut.result(timeout=patience)
        except FutureTimeout:
            self._fail(f"no answer in {patience:.0f} s")
            raise HelperGone("silent") from None

    # -- answers -----------------------------------------------------------------------
    def _read(self) -> None:
        stdout = self._proc.stdout
        why = "ended"
        try:
            while True:
                msg = _read_frame(stdout)
                if msg is None:
                    break
                self._answer(msg)
        except Exception as exc:  # noqa: BLE001 - anything unexpected ends the helper
            why = f"sent something unexpected ({type(exc).__name__})"
        self._fail(why)
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()

    def _answer(self, msg: Any) -> None:
        rid, ok, payload, stats, trip, notes = msg
        if rid == 0:  # the last frame: what the helper used
            self.usage = (int(payload[0]), float(payload[1]))
        transport = self._transport
        if transport is not None:
            with self._lock:
                delta = {k: v - self._seen.get(k, 0) for k, v in stats.items()}
                self._seen = dict(stats)
            transport.absorb(delta, trip)
        for note in notes:
            _replay_note(note)
        with self._lock:
            fut = self._pending.pop(rid, None)
        if fut is None or fut.done():
            return
        if ok:
            fut.set_result(payload)
        else:
            fut.set_exception(_rebuilt(*payload))


def _rebuilt(kind: str, message: str, hint: Optional[str]) -> BaseException:
    if kind == "KeyboardInterrupt":
        return KeyboardInterrupt()
    cls = _ERRORS.get(kind)
    if cls is None:
        return IndexError_(message, hint=hint)
    return cls(message, hint=hint)


def _replay_note(note: Any) -> None:
    what = note[0]
    if what == "entry":
        replay.note_entry([Path(p) for p in note[1]], note[2])
    elif what == "failure":
        replay.note_failure(note[1])
    elif what == "live":
        replay.note_live(note[1])
    elif what == "file":
        replay.note_file(note[1])


def _module_path() -> List[str]:
    """Where the helper finds envlock and its libraries: this process's own path, with
    the directory envlock was imported from first (a checkout run with PYTHONPATH)."""
    here = str(Path(__file__).resolve().parents[2])
    return [here] + [p for p in sys.path if p and p != here]


def _plain_config(config: IndexConfig) -> Dict[str, Any]:
    """Every field of ``config`` as plain values (tuples as lists, mappings as dicts), for
    the helper to build the same configuration from."""
    import dataclasses

    out: Dict[str, Any] = {}
    for f in dataclasses.fields(config):
        v = getattr(config, f.name)
        if isinstance(v, tuple):
            v = list(v)
        elif isinstance(v, Mapping):
            v = {str(k): str(x) for k, x in v.items()}
        out[f.name] = v
    return out


def _config_from(plain: Mapping[str, Any]) -> IndexConfig:
    """The configuration :func:`_plain_config` made ``plain`` from."""
    return IndexConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in plain.items()})


def _key(config: IndexConfig, cache_dir: Optional[Path], refresh: bool) -> Tuple[Any, ...]:
    return (config.indexes, config.find_links, config.cert, config.client_cert,
            config.trusted_hosts, config.timeout, config.retries,
            None if cache_dir is None else str(cache_dir), refresh)


# -- started early, claimed by the index client ----------------------------------------------

_STARTED: List[Helper] = []
_STARTED_LOCK = threading.Lock()


def wanted(config: IndexConfig) -> bool:
    """Whether this run should start a helper (see the module docstring)."""
    forced = os.environ.get("ENVLOCK_NET_HELPER", "").strip()
    if forced == "0":
        return False
    if forced == "1":
        return True
    return (os.name == "posix" and _cpus() >= 2
            and any(u.startswith("https:") for u in config.indexes))


def _cpus() -> int:
    """The CPUs this process may run on (its affinity, as a job scheduler sets it)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def start(config: IndexConfig, cache_dir: Optional[Path], refresh: bool = False) -> bool:
    """Start a helper for the client this run makes next (:func:`claim`); whether one
    was started."""
    helper = Helper.spawn(config, cache_dir, refresh)
    if helper is None:
        return False
    with _STARTED_LOCK:
        _STARTED.append(helper)
    return True


def claim(config: IndexConfig, cache_dir: Optional[Path],
          refresh: bool = False) -> Optional[Helper]:
    """The helper :func:`start` made for this configuration and cache, taken (one client
    uses it); None when there is none. Helpers started for another configuration are
    closed."""
    key = _key(config, cache_dir, refresh)
    with _STARTED_LOCK:
        found = [h for h in _STARTED if h.key == key]
        others = [h for h in _STARTED if h.key != key]
        _STARTED.clear()
    for h in others + found[1:]:
        h.close()
    return found[0] if found else None


# -- the helper's side -----------------------------------------------------------------------

class _Notes:
    """Stands in for the replay recorder in the helper: what the transport notes is sent
    back with the next answer and noted again by the resolving process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: List[Tuple[Any, ...]] = []

    def file(self, path: str) -> None:
        with self._lock:
            self._items.append(("file", os.path.abspath(path)))

    def entry(self, paths: Any, expires: float) -> None:
        with self._lock:
            self._items.append(("entry", [str(p) for p in paths], float(expires)))

    def failure(self, expires: float) -> None:
        with self._lock:
            self._items.append(("failure", float(expires)))

    def no_replay(self, why: str) -> None:
        with self._lock:
            self._items.append(("live", str(why)))

    def drain(self) -> List[Tuple[Any, ...]]:
        with self._lock:
            items, self._items = self._items, []
        return items


def serve() -> None:
    """The helper's main loop (run by :data:`_BOOT`): read requests from standard input
    until it closes, answer each on standard output from a pool of threads."""
    from concurrent.futures import ThreadPoolExecutor

    from envlock.index.http import Transport

    import signal

    # Ctrl-C goes to the whole process group: the resolving process handles it and then
    # closes this helper's input, which is how it ends (never with requests left running)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    inp = sys.stdin.buffer
    # answers go to a descriptor of their own: a stray print cannot corrupt the frames
    out = os.dup(1)
    os.dup2(2, 1)
    init = _read_frame(inp)
    if not isinstance(init, dict):
        os._exit(0)
    config = _config_from(init["config"])
    cache_dir = Path(init["cache_dir"]) if init["cache_dir"] else None
    transport = Transport(config, cache_dir, refresh=init["refresh"])
    notes = _Notes()
    replay.record_into(notes)
    wlock = threading.Lock()
    fits: Dict[int, Any] = {}

    def answer(rid: int, ok: bool, payload: Any) -> None:
        with wlock:
            msg = (rid, ok, payload, dict(transport.stats),
                   (transport.round_trip, transport.round_trips), notes.drain())
            _write_all(out, _frame(msg))

    def job(rid: int, op: str, url: str, headers: Dict[str, str], extra: Any) -> None:
        try:
            if op == "request":
                r = transport._request(url, headers, max_bytes=extra)
                payload: Any = (r.url, r.status, r.body, dict(r.headers))
            else:
                payload = _page(transport, url, headers, fits.get(extra))
            ok = True
        except KeyboardInterrupt:
            ok, payload = False, ("KeyboardInterrupt", "", None)
        except EnvlockError as exc:
            ok, payload = False, (type(exc).__name__, exc.message, exc.hint)
        except Exception as exc:  # noqa: BLE001 - reported, as in-process it would be
            from envlock.index.config import redact

            ok, payload = False, ("", f"{redact(url)}: {type(exc).__name__}: {exc}", None)
        try:
            answer(rid, ok, payload)
        except OSError:
            os._exit(0)  # the resolving process is gone

    pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="envlock-helper")
    pool.submit(_prepare, config)
    while True:
        try:
            msg = _read_frame(inp)
        except (OSError, ValueError):
            msg = None
        if msg is None:
            break
        if msg[0] == "fit":
            from envlock.index.fit import TripleFit

            fits[msg[1]] = TripleFit(msg[2])
            continue
        pool.submit(job, *msg)
    # the resolving process is done (or gone): end what is in flight, say what this
    # process used, and leave
    transport.cancel()
    pool.shutdown(wait=True, cancel_futures=True)
    try:
        import resource

        ru = resource.getrusage(resource.RUSAGE_SELF)
        answer(0, True, (ru.ru_maxrss, ru.ru_utime + ru.ru_stime))
    except (ImportError, OSError):
        pass
    os._exit(0)


def _prepare(config: IndexConfig) -> None:
    """The imports and the TLS context the first request needs, made before it comes."""
    try:
        from envlock.index.http import _env_ca_bundle
        from envlock.index.pools import prepare

        prepare(config.cert or _env_ca_bundle(), config.client_cert)
        import envlock.index.json_narrow  # noqa: F401 - the first page's cut
    except Exception:  # noqa: BLE001 - the first request meets and reports any trouble
        pass


def _page(transport: "Transport", url: str, headers: Dict[str, str],
          fit: Optional[Any]) -> Tuple[Any, ...]:
    """A page's answer (see :meth:`Helper.page`): ``("cached",)``, ``("cut", content type,
    sha256, cut page, files listed)`` or ``("body", content type, sha256, page)``."""
    resp = transport.get(url, headers=headers)
    if resp.from_cache:
        return ("cached",)
    ctype = resp.headers.get("Content-Type") or resp.headers.get("content-type") or ""
    sha = resp.sha256 or hashlib.sha256(resp.body).hexdigest()
    if fit is not None:
        from envlock.index.json_narrow import looks_json, narrowed_json

        if looks_json(resp.body, ctype):
            cut = narrowed_json(resp.body, fit)
            if cut is not None:
                return ("cut", ctype, sha, cut[0], cut[1])
    return ("body", ctype, sha, resp.body)
