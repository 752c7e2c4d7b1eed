"""HTTP for the index client: connection reuse, retries, an on-disk cache, file:// URLs.

urllib3 (:mod:`envlock.index.pools`) is imported on first network use only, so commands
that never touch the network (``--offline``, ``verify``) do not pay for it. Responses to
plain GETs are cached with their validators (ETag / Last-Modified) and honour
``Cache-Control: max-age``; a stale entry is revalidated with a conditional request;
``offline=True`` serves whatever the cache holds and never opens a connection.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Mapping, Optional, Tuple
from urllib.parse import unquote, urlsplit

from envlock import replay
from envlock._cache_files import SHARD, read_entry, write_entry
from envlock.errors import InputError, IndexError_, OfflineError
from envlock.index.config import IndexConfig, check_url, redact

if TYPE_CHECKING:
    from envlock.index.fit import TripleFit
    from envlock.index.netproc import Helper, PageAnswer

__all__ = ["Response", "Transport", "RETRY_STATUSES"]

RETRY_STATUSES = frozenset({500, 502, 503, 504, 429})
#: a round trip at least this long makes the network "slow" (:meth:`Transport.slow_network`):
#: a resolve waits on round trips more than on CPU. (Measured, vllm 0.8.5 cold on 2 CPUs:
#: an index ~2 ms away resolves no faster with 16 workers than with 8; through a proxy
#: adding 30 ms of round trip, 16 took 6.72 s against 7.59 s for 8, medians of 4.)
SLOW_ROUND_TRIP = 0.010
#: answers the shortest round trip is taken from before it counts: the first few wait
#: behind a busy start (imports, the matrix) and would read a near index as a far one
_ROUND_TRIPS = 4


@dataclass
class Response:
    url: str
    status: int
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)
    from_cache: bool = False
    #: sha256 of ``body`` when the cache already computed it (hashing megabytes of pages
    #: twice showed in profiles), else None
    sha256: Optional[str] = None


class Transport:
    """GETs with retries and caching. Thread-safe for concurrent GETs."""

    def __init__(self, config: IndexConfig, cache_dir: Optional[Path] = None,
                 offline: bool = False, on_request: Optional[Callable[[str], None]] = None,
                 backoff: float = 0.25, default_ttl: Optional[float] = None,
                 refresh: bool = False) -> None:
        self.config = config
        #: freshness for responses that carry no caching headers at all (PyPI itself sends
        #: max-age=600; some mirrors and proxies send nothing): ENVLOCK_INDEX_TTL seconds
        self.default_ttl = default_ttl if default_ttl is not None else _env_ttl()
        #: revalidate everything (``--refresh``)
        self.refresh = refresh
        self.cache_dir = cache_dir / "http" if cache_dir else None
        #: the cache root (the user's choice, followed if a link); everything below it is
        #: reached without following links (envlock._cache_files)
        self._cache_root = cache_dir
        self.offline = offline
        self.on_request = on_request
        self.backoff = backoff
        self._pools: Any = None
        self._lock = threading.Lock()
        self._auth: Dict[Tuple[str, str, Optional[int]], Tuple[str, str]] = {}
        self._cancel = threading.Event()
        #: origins that no attempt could connect to in this run, with the last error:
        #: later requests to them fail at once (:meth:`_request`)
        self._unreachable: Dict[Tuple[str, str, Optional[int]], str] = {}
        #: total seconds one request may take, retries included (ENVLOCK_INDEX_DEADLINE)
        self.deadline = _env_number("ENVLOCK_INDEX_DEADLINE", 300.0)
        #: largest page or metadata file accepted (ENVLOCK_INDEX_MAX_PAGE_BYTES)
        self.max_page_bytes: Optional[int] = int(
            _env_number("ENVLOCK_INDEX_MAX_PAGE_BYTES", float(64 * 1024 * 1024)))
        self.stats = {"requests": 0, "cache_hits": 0, "revalidated": 0, "retries": 0,
                      "bytes": 0}
        #: the shortest wait seen for an answer's headers on an open connection: about
        #: one round trip to the index (None before the first; see :meth:`slow_network`)
        self.round_trip: Optional[float] = None
        self._round_trips = 0
        #: the network helper that makes this transport's requests (envlock.index.netproc),
        #: None when they are made in-process
        self.remote: Optional["Helper"] = None
        #: the helper's peak RSS (KiB) and CPU seconds, once it is closed (--debug says)
        self.helper_usage: Optional[Tuple[int, float]] = None
        for url in config.indexes:
            check_url(url)
        for url in (*config.indexes, *config.find_links):
            try:
                parts = urlsplit(url)
            except ValueError:
                continue
            if parts.username is not None:
                # keyed by origin: another port or scheme of the host never gets them
                self._auth[origin(parts)] = (unquote(parts.username),
                                             unquote(parts.password or ""))

    # -- connections -----------------------------------------------------------------
    def _get_pools(self) -> Any:
        with self._lock:
            if self._pools is None:
                from envlock.index.pools import Pools

                if self.config.trusted_hosts:
                    # verification is off only for hosts the user trusts (pip's
                    # --trusted-host): urllib3 would warn on every request to them
                    import warnings

                    from urllib3.exceptions import InsecureRequestWarning

                    warnings.filterwarnings("ignore", category=InsecureRequestWarning)
                trusted = self.config.trusted_hosts
                # pip's order: its own --cert / PIP_CERT, else the bundle requests takes
                # from the environment (pip honours it through requests), else certifi's
                self._pools = Pools(cafile=self.config.cert or _env_ca_bundle(),
                                    client_cert=self.config.client_cert,
                                    is_trusted=lambda parts: _trusted(parts, trusted),
                                    auth=self._auth, user_agent=_user_agent())
            return self._pools

    def close(self) -> None:
        if self._pools is not None:
            self._pools.clear()

    def slow_network(self) -> bool:
        """Whether the index is far enough (a round trip of :data:`SLOW_ROUND_TRIP` or
        more) that more requests in flight pay: the index client then lets its workers
        grow (:class:`~envlock.index.workers.Workers`)."""
        rt = self.round_trip
        return rt is not None and self._round_trips >= _ROUND_TRIPS and rt >= SLOW_ROUND_TRIP

    def _note_round_trip(self, seconds: float) -> None:
        with self._lock:
            self._round_trips += 1
            if self.round_trip is None or seconds < self.round_trip:
                self.round_trip = seconds

    @property
    def round_trips(self) -> int:
        """How many round trips :attr:`round_trip` was taken from."""
        return self._round_trips

    def absorb(self, stats: Mapping[str, int],
               trip: Tuple[Optional[float], int]) -> None:
        """What the network helper's transport counted since its last answer (``stats``)
        and its shortest round trip so far, out of how many (``trip``)."""
        with self._lock:
            for k, v in stats.items():
                if k in self.stats and isinstance(v, int):
                    self.stats[k] += v
            seconds, count = trip
            if seconds is not None and (self.round_trip is None or seconds < self.round_trip):
                self.round_trip = seconds
            self._round_trips = max(self._round_trips, count)

    # -- cache -----------------------------------------------------------------------
    def _paths(self, url: str) -> Optional[Tuple[Path, Path]]:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(redact(url).encode()).hexdigest()
        d = self.cache_dir / key[:SHARD]
        return d / f"{key}.body", d / f"{key}.json"

    def _cache_read(self, url: str) -> Optional[Tuple[bytes, Dict[str, Any]]]:
        paths = self._paths(url)
        if paths is None:
            return None
        try:
            meta = json.loads(read_entry(self._cache_root, paths[1], _MAX_META_BYTES))
            body = read_entry(self._cache_root, paths[0], self._max_entry_bytes())
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(meta, dict) or meta.get("sha256") != hashlib.sha256(body).hexdigest():
            return None  # torn or tampered entry
        return body, meta

    def fresh_digest(self, url: str) -> Optional[str]:
        """The sha256 of the cached body of ``url`` when :meth:`get` would serve it from
        the cache without asking the server (fresh, or ``offline``), else None. Reads the
        small entry only: a caller that keeps what it derived from the body under this
        digest need not read (and hash) the body again."""
        found = self._fresh_meta(url)
        if found is None:
            return None
        paths, meta = found
        digest = meta.get("sha256")
        if not (isinstance(digest, str) and len(digest) == 64):
            return None
        replay.note_entry((paths[1],), self._expires(meta, False))
        return digest

    def _fresh_meta(self, url: str) -> Optional[Tuple[Tuple[Path, Path], Dict[str, Any]]]:
        """The paths and the small entry of ``url`` when that entry is fresh (or
        ``offline``), else None; not noted for a replay (the caller decides)."""
        paths = self._paths(url)
        if paths is None or url.startswith("file:"):
            return None
        try:
            meta = json.loads(read_entry(self._cache_root, paths[1], _MAX_META_BYTES))
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(meta, dict) or not self._is_fresh(meta, False):
            return None
        return paths, meta

    def _expires(self, meta: Mapping[str, Any], immutable: bool) -> float:
        """When a cached entry stops being fresh: never for immutable entries and under
        ``--offline``, at once under ``--refresh``, else when its ``max-age`` (or, with no
        caching information at all, ``ENVLOCK_INDEX_TTL``) has passed since it was stored.
        :meth:`_is_fresh` asks it, and a replayed resolve (:mod:`envlock.replay`) relies on
        an entry until then."""
        if immutable or self.offline:
            return float("inf")
        if self.refresh:
            return 0.0
        max_age = meta.get("max_age")
        if max_age is None and not meta.get("etag") and not meta.get("last_modified"):
            max_age = self.default_ttl
        try:
            return float(meta.get("stored", 0)) + float(max_age)  # type: ignore[arg-type]
        except (TypeError, ValueError):
            return 0.0

    def _is_fresh(self, meta: Mapping[str, Any], immutable: bool) -> bool:
        return time.time() < self._expires(meta, immutable)

    def _cache_write(self, url: str, body: bytes, headers: Mapping[str, str]) -> Optional[str]:
        """Store the response; its body's sha256 (None without a cache)."""
        paths = self._paths(url)
        if paths is None:
            return None
        digest = hashlib.sha256(body).hexdigest()
        meta = {
            "url": redact(url),
            "stored": time.time(),
            "etag": headers.get("ETag") or headers.get("etag"),
            "last_modified": headers.get("Last-Modified") or headers.get("last-modified"),
            "max_age": _max_age(headers),
            "content_type": headers.get("Content-Type") or headers.get("content-type"),
            "sha256": digest,
        }
        try:
            # no fsync: entries are checked against their sha256 when read; written
            # without following a link planted in a shared cache (envlock._cache_files)
            assert self._cache_root is not None
            write_entry(self._cache_root, paths[0], body)
            write_entry(self._cache_root, paths[1], json.dumps(meta).encode())
        except (OSError, InputError):
            # the cache is an optimisation: a read-only cache directory is fine, but then
            # nothing records what this run read
            replay.note_live("an index answer could not be cached")
            return digest
        replay.note_entry(paths, self._expires(meta, False))
        return digest

    def _max_entry_bytes(self) -> Optional[int]:
        """Cached bodies are pages, never larger than a page may be."""
        return None if self.max_page_bytes is None else self.max_page_bytes + 1024

    # -- requests --------------------------------------------------------------------
    def get(self, url: str, *, headers: Optional[Mapping[str, str]] = None,
            cache: bool = True, immutable: bool = False, whole_file: bool = False) -> Response:
        """GET ``url``. ``immutable`` entries (content-addressed files) never revalidate.
        Bodies are capped at ``max_page_bytes`` unless ``whole_file`` (a wheel download)."""
        if url.startswith("file:"):
            return self._get_file(url)
        cached = self._cache_read(url) if cache else None
        if cached is not None:
            body, meta = cached
            if self._is_fresh(meta, immutable):
                paths = self._paths(url)
                if paths is not None:
                    replay.note_entry(paths, self._expires(meta, immutable))
                self.stats["cache_hits"] += 1
                return Response(url, 200, body, {"Content-Type": meta.get("content_type") or ""},
                                from_cache=True, sha256=meta["sha256"])
        if self.offline:
            paths = self._paths(url)
            if paths is not None:  # absent now: present later is another answer
                replay.note_entry(paths, float("inf"))
            else:
                replay.note_live("no cache")
            raise OfflineError(f"{redact(url)} is not in the cache and --offline forbids "
                               f"the network",
                               hint="run once without --offline to fill the cache")
        hdrs = dict(headers or {})
        if cached is not None:
            _, meta = cached
            if meta.get("etag"):
                hdrs["If-None-Match"] = meta["etag"]
            if meta.get("last_modified"):
                hdrs["If-Modified-Since"] = meta["last_modified"]
        try:
            resp = self._request(url, hdrs, max_bytes=0 if whole_file else None)
        except IndexError_:
            # a resolve may go on without this answer (an unreachable PyTorch index it
            # falls back from): believed as long as a fresh page is
            replay.note_failure(time.time() + self.default_ttl)
            raise
        if resp.status >= 400:
            replay.note_failure(time.time() + self.default_ttl)
        if resp.status == 304 and cached is not None:
            self.stats["revalidated"] += 1
            body, meta = cached
            if cache:
                self._cache_write(url, body, {**resp.headers,
                                              "Content-Type": meta.get("content_type") or ""})
            return Response(url, 200, body, {"Content-Type": meta.get("content_type") or ""},
                            from_cache=True, sha256=meta["sha256"])
        if resp.status >= 400:
            raise IndexError_(f"{redact(url)} answered HTTP {resp.status}")
        if cache:
            resp.sha256 = self._cache_write(url, resp.body, resp.headers)
        return resp

    def get_range(self, url: str, start: Optional[int], end: Optional[int]) -> Response:
        """A byte range (``start=None`` asks for the last ``end`` bytes). Not cached here."""
        if url.startswith("file:"):
            path = _file_path(url)
            replay.note_file(path)
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if start is None:
                    start = max(0, size - (end or 0))
                    stop = size
                else:
                    stop = min(size, (end if end is not None else size - 1) + 1)
                fh.seek(start)
                body = fh.read(stop - start)
            return Response(url, 206, body, {"Content-Range": f"bytes {start}-{stop-1}/{size}"})
        if self.offline:
            raise OfflineError(f"{redact(url)} is not in the cache and --offline forbids "
                               f"the network")
        rng = f"bytes=-{end}" if start is None else f"bytes={start}-{'' if end is None else end}"
        resp = self._request(url, {"Range": rng, "Accept-Encoding": "identity"})
        if resp.status >= 400:
            raise IndexError_(f"{redact(url)} answered HTTP {resp.status} to a range request")
        return resp

    def cancel(self) -> None:
        """End every request in flight (their reads fail within a fraction of a second)
        and refuse new ones: Ctrl-C and ``close`` must not wait for a slow index."""
        self._cancel.set()
        remote, self.remote = self.remote, None
        if remote is not None:
            remote.close()
            self.helper_usage = remote.usage

    def _request(self, url: str, headers: Mapping[str, str], *,
                 max_bytes: Optional[int] = None) -> Response:
        if self.remote is not None and max_bytes != 0:
            # (a whole file, max_bytes 0, is read here: it would only be copied once more)
            answer = self._remotely(lambda helper, patience: helper.request(
                url, headers, max_bytes, patience), url)
            if answer is not None:
                return answer
        from envlock.index import deadline as dl
        from envlock.index.pools import RETRYABLE, CaBundleError, TooManyRedirects

        check_url(url)
        host = origin(urlsplit(url))
        self._check_reachable(host, url)
        pools = self._get_pools()
        limit = self.max_page_bytes if max_bytes is None else (max_bytes or None)
        state = dl.RequestState(time.monotonic() + self.deadline, self._cancel)
        attempts = max(0, self.config.retries) + 1
        last_error = ""
        previous = dl.current()
        dl.bind(state)
        try:
            for attempt in range(attempts):
                if attempt:
                    self.stats["retries"] += 1
                    delay = self.backoff * (2 ** (attempt - 1)) * (1 + random.random() / 4)
                    delay = min(delay, 8.0, max(state.left(), 0.0))
                    if self._cancel.wait(delay):
                        raise KeyboardInterrupt
                    # another request may have learnt meanwhile that the host is gone
                    self._check_reachable(host, url)
                self._check_state(state, url)
                if self.on_request is not None:
                    self.on_request(url)
                self.stats["requests"] += 1
                try:
                    asked = time.perf_counter()
                    r = pools.get(url, headers, self.config.timeout)
                    if r.reused:
                        self._note_round_trip(time.perf_counter() - asked)
                    try:
                        body = self._read_body(r, url, limit)
                    finally:
                        r.close()
                    if r.status in RETRY_STATUSES:
                        last_error = f"HTTP {r.status}"
                        continue
                except (IndexError_, KeyboardInterrupt):
                    raise
                except CaBundleError as exc:
                    raise InputError(f"{exc} ({self._ca_origin()})",
                                     hint="name a file (or directory) of PEM CA certificates "
                                          "there, as pip takes it, or remove the setting to "
                                          "use the default bundle") from None
                except Exception as exc:  # noqa: BLE001 - urllib3's and ssl's errors are many
                    self._check_state(state, url)
                    refused = _unverified(exc)
                    if refused is not None:  # the same answer on every try: say so at once
                        raise IndexError_(
                            f"{redact(url)}: the server's TLS certificate could not be "
                            f"verified ({refused})",
                            hint="for an index behind a private CA, name its CA bundle as "
                                 "pip takes it: PIP_CERT or 'cert =' in pip.conf (or "
                                 "REQUESTS_CA_BUNDLE); PIP_TRUSTED_HOST turns verification "
                                 "off for one host") from None
                    missing = _no_such_name(exc)
                    if missing is not None:
                        # the resolver's final answer, not a timeout: asking again gives
                        # the same answer after the backoff (2 s a request, on every
                        # worker at once, for vllm's PyTorch-index builds behind a
                        # firewall whose DNS knows no outside names)
                        name, why = missing[0] or host[1], missing[1]
                        self._unreachable[host] = f"the name {name} does not resolve: {why}"
                        raise IndexError_(
                            f"cannot reach {redact(url)} (the name {name} does not "
                            f"resolve: {why})",
                            hint=("check the proxy setting (HTTPS_PROXY, HTTP_PROXY, "
                                  "ALL_PROXY; NO_PROXY)" if name != host[1] else
                                  "check the index URL (a name only a VPN or a proxy knows "
                                  "needs it: HTTPS_PROXY is honoured)")
                            + ", or use --offline with a filled cache") from None
                    if isinstance(exc, RETRYABLE) and not isinstance(exc, TooManyRedirects):
                        last_error = _short_error(exc)
                        continue
                    raise IndexError_(f"{redact(url)}: {_short_error(exc)}") from None
                self.stats["bytes"] += len(body)
                return Response(r.url, r.status, body, dict(r.headers))
        finally:
            dl.bind(previous)
        if not last_error.startswith("HTTP "):  # no connection at all, every attempt
            self._unreachable[host] = last_error
        raise IndexError_(f"cannot reach {redact(url)} ({last_error}, after {attempts} "
                          f"attempt{'s' if attempts > 1 else ''})",
                          hint="check the index URL and your network, or use --offline "
                               "with a filled cache")

    def remote_page(self, url: str, headers: Mapping[str, str],
                    fit: Optional["TripleFit"]) -> Optional["PageAnswer"]:
        """:meth:`get` of a project page by the network helper, the page cut by ``fit``
        there (:meth:`~envlock.index.netproc.Helper.page`); None when no helper answers
        (the caller then asks :meth:`get`)."""
        if self.remote is None or self.offline or url.startswith("file:"):
            return None
        return self._remotely(lambda helper, patience: helper.page(
            url, headers, fit, patience), url)

    def _remotely(self, ask: Callable[["Helper", float], Any], url: str) -> Any:
        """``ask(helper, patience)``, or None when the helper cannot answer: it is then
        dropped and every request is made in-process."""
        from envlock.index.netproc import MARGIN, HelperGone

        helper = self.remote
        if helper is None:
            return None
        if self._cancel.is_set():
            raise KeyboardInterrupt
        try:
            answer = ask(helper, self.deadline + MARGIN)
        except HelperGone:
            with self._lock:
                if self.remote is helper:
                    self.remote = None
            return None
        if self.on_request is not None and not getattr(answer, "cached", False):
            self.on_request(url)
        return answer

    def _ca_origin(self) -> str:
        """Where the CA bundle (and client certificate) in use was set, for messages."""
        origin = dict(self.config.origin or {})
        where = []
        if self.config.cert:
            where.append(origin.get("cert", "cert"))
        else:
            env = [v for v in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE") if os.environ.get(v)]
            where += [f"${env[0]}"] if env else []
        if self.config.client_cert:
            where.append(origin.get("client-cert", "client-cert"))
        return ", ".join(where) or "the default bundle"

    def _check_reachable(self, host: Tuple[str, str, Optional[int]], url: str) -> None:
        """Refuse at once a host this run already found unreachable: another URL on it
        would only sleep through the same retries (2 s a request, vllm's PyTorch-index
        builds behind a firewall)."""
        dead = self._unreachable.get(host)
        if dead is not None:
            raise IndexError_(f"cannot reach {redact(url)} ({dead}; {host[1]} was "
                              f"unreachable earlier in this run)",
                              hint="check the index URL and your network, or use --offline "
                                   "with a filled cache")

    def _check_state(self, state: Any, url: str) -> None:
        if self._cancel.is_set():
            raise KeyboardInterrupt
        if state.expired or state.left() <= 0:
            raise IndexError_(f"{redact(url)} did not answer within the {_secs(self.deadline)} "
                              f"deadline (ENVLOCK_INDEX_DEADLINE)")

    def _read_body(self, r: Any, url: str, limit: Optional[int]) -> bytes:
        """The body, refused as soon as it passes ``limit`` bytes (decoded)."""
        declared = r.headers.get("Content-Length")
        if limit is not None and declared and declared.strip().isdigit() \
                and int(declared) > limit:
            raise _too_big(url, limit)
        chunks = []
        total = 0
        # a megabyte at a time: a few MB page in a handful of steps through urllib3's
        # decoder (64 KB steps measured 15-20% more CPU reading PyPI's largest pages);
        # the limit is still checked after every step
        for chunk in r.chunks(1024 * 1024):
            total += len(chunk)
            if limit is not None and total > limit:
                raise _too_big(url, limit)
            chunks.append(chunk)
        return b"".join(chunks)

    def _get_file(self, url: str) -> Response:
        path = _file_path(url)
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        replay.note_file(path)
        try:
            with open(path, "rb") as fh:
                body = fh.read()
        except OSError:
            return_404 = Response(url, 404, b"")
            return return_404
        ctype = "application/vnd.pypi.simple.v1+json" if path.endswith(".json") else "text/html"
        return Response(url, 200, body, {"Content-Type": ctype})


def _trusted(parts: Any, trusted_hosts: Tuple[str, ...]) -> bool:
    """Whether the URL's host is one the user trusts, named as pip's ``--trusted-host``
    names it: the host alone (any port) or ``host:port``."""
    host = parts.hostname or ""
    if host in trusted_hosts:
        return True
    try:
        port = parts.port
    except ValueError:
        return False
    return port is not None and f"{host}:{port}" in trusted_hosts


def warm_up(config: IndexConfig, cache_dir: Optional[Path] = None,
            first: Tuple[str, ...] = (), *, helper: bool = False,
            refresh: bool = False) -> Optional[threading.Thread]:
    """Prepare, in a background thread, what a cold resolve's first request would
    otherwise do while the resolve waits for it: import urllib3 and this package's
    connection code, read the CA bundle into the TLS context, load the IDNA codec (about
    90 ms of CPU). Started before the matrix is read and the resolver imported, so the
    first request goes out as soon as it is asked for (measured, torch + transformers +
    accelerate + datasets, cold: the first connection 0.43-0.52 s after start, 0.32-0.46
    s with this, medians of 7 runs in seven alternating pairs). Opens no connection and
    asks nothing of the index; any failure is left for the first request to meet and
    report.

    Not when the page of one of ``first`` (project names the resolve asks for first: a
    requirement, torch) is fresh in the cache under ``cache_dir``: a resolve that reads
    its pages from the cache may never open a connection, and the warm-up would be 0.1 s
    of CPU spent against it (measured: torch alone, recomputed from a fresh cache, 0.35
    -> 0.46 s). The thread started, or None.

    With ``helper``, the requests are made by a network helper process instead
    (:mod:`envlock.index.netproc`) when it is wanted, under the same conditions, or
    ``ENVLOCK_NET_HELPER=1``: started now, its own imports and TLS context are ready by the
    first request, and this process need not import urllib3 at all."""
    forced = os.environ.get("ENVLOCK_NET_HELPER", "").strip() == "1"
    secure = any(u.startswith("https:") for u in config.indexes)
    if not forced and (not secure or (cache_dir is not None and first
                                      and _any_fresh(config, cache_dir, first))):
        return None
    if helper or forced:
        from envlock.index import netproc

        if netproc.wanted(config) and netproc.start(config, cache_dir, refresh):
            return None
    if not secure:
        return None

    def run() -> None:
        try:
            from envlock.index.pools import prepare

            prepare(config.cert or _env_ca_bundle(), config.client_cert)
        except Exception:  # noqa: BLE001 - best effort: the first request reports
            pass

    # not a daemon: an interpreter that exits while a daemon thread imports can find a
    # module half imported; waiting for this one costs at most its ~0.1 s of imports
    thread = threading.Thread(target=run, name="envlock-warm-up", daemon=False)
    thread.start()
    return thread


def _any_fresh(config: IndexConfig, cache_dir: Path, names: Tuple[str, ...]) -> bool:
    """Whether the first index's page of one of ``names`` is fresh in the cache (read
    without noting it for a replay: this is a guess, not part of the resolve)."""
    transport = Transport(config, cache_dir)
    base = config.indexes[0].rstrip("/")
    return any(transport._fresh_meta(f"{base}/{name}/") is not None for name in names)


def _env_ca_bundle() -> Optional[str]:
    """The CA bundle requests (and so pip) takes from the environment when no certificate
    option is given: ``REQUESTS_CA_BUNDLE``, else ``CURL_CA_BUNDLE``."""
    return os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or None


def _env_ttl() -> float:
    return _env_number("ENVLOCK_INDEX_TTL", 600.0)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(parts: Any) -> Tuple[str, str, Optional[int]]:
    """(scheme, host, port) of a split URL, the port made explicit (``https://h`` and
    ``https://h:443`` are one origin): what URL credentials are keyed by."""
    try:
        port = parts.port
    except ValueError:
        port = None
    scheme = parts.scheme.lower()
    return (scheme, (parts.hostname or "").lower(),
            port if port is not None else _DEFAULT_PORTS.get(scheme))


#: a cache entry's small JSON part is never larger than this
_MAX_META_BYTES = 1024 * 1024


def _env_number(name: str, default: float) -> float:
    """A positive finite number from the environment; ``default`` when unset."""
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not (0 < value < float("inf")):
        raise InputError(f"{name}={raw!r} is not a positive number")
    return value


def _secs(value: float) -> str:
    return f"{value:g} s"


def _too_big(url: str, limit: int) -> IndexError_:
    return IndexError_(f"{redact(url)} is larger than {limit} bytes; refusing it "
                       f"(raise ENVLOCK_INDEX_MAX_PAGE_BYTES if the index is right)")


def _file_path(url: str) -> str:
    parts = urlsplit(url)
    return unquote(parts.path)


def _max_age(headers: Mapping[str, str]) -> Optional[float]:
    cc = headers.get("Cache-Control") or headers.get("cache-control") or ""
    for part in cc.split(","):
        part = part.strip().lower()
        if part in ("no-cache", "no-store"):
            return 0.0
        if part.startswith("max-age="):
            try:
                return float(part.split("=", 1)[1])
            except ValueError:
                return None
    exp = headers.get("Expires")
    date = headers.get("Date")
    if exp and date:
        from email.utils import parsedate_to_datetime  # only for an answer from the network

        try:
            return (parsedate_to_datetime(exp) - parsedate_to_datetime(date)).total_seconds()
        except (TypeError, ValueError):
            return None
    return None


def _unverified(exc: BaseException) -> Optional[str]:
    """Why the certificate was refused, when ``exc`` (urllib3 wraps the ssl module) comes
    from a failed certificate verification; else None. Followed through ``reason``, the
    first argument and the exception chain, a few links deep."""
    import ssl

    cur: Optional[BaseException] = exc
    for _ in range(10):
        if cur is None:
            return None
        if isinstance(cur, ssl.SSLCertVerificationError):
            text = cur.verify_message or cur.reason or str(cur)
            return str(text).replace("\n", " ")[:200]
        reason = getattr(cur, "reason", None)
        if isinstance(reason, BaseException):
            cur = reason
        elif cur.args and isinstance(cur.args[0], BaseException):
            cur = cur.args[0]
        else:
            cur = cur.__cause__ or cur.__context__
    return None


#: getaddrinfo's answers that the name has no address (EAI_NONAME: no such name,
#: EAI_NODATA: a name without addresses), as opposed to EAI_AGAIN (the resolver did not
#: answer in time), which is worth another attempt
_NO_SUCH_NAME = frozenset(filter(None, (getattr(socket, "EAI_NONAME", None),
                                        getattr(socket, "EAI_NODATA", None))))


def _no_such_name(exc: BaseException) -> Optional[Tuple[str, str]]:
    """(the name, the resolver's text) when ``exc`` comes from a name lookup that found no
    such name, else None. urllib3 wraps the lookup's error (``__cause__``, ``reason``)
    in one that holds the connection, whose host is the name looked up: a proxy's, when
    the request goes through one."""
    seen = set()
    todo: List[BaseException] = [exc]
    name = ""
    while todo:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        name = getattr(getattr(e, "conn", None), "host", None) or name
        if isinstance(e, socket.gaierror) and e.errno in _NO_SUCH_NAME:
            return name, e.strerror or str(e)
        todo += [x for x in (e.__cause__, e.__context__, getattr(e, "reason", None))
                 if isinstance(x, BaseException)]
    return None


def _short_error(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    text = text.replace("\n", " ")
    return text if len(text) < 160 else text[:157] + "..."


def _user_agent() -> str:
    from envlock import __version__

    return f"envlock/{__version__}"
