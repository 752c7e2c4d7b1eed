"""The package index client used by the resolver and the maintainer scripts.

* project pages from PEP 691 JSON or PEP 503 HTML (one request, JSON preferred);
* a wheel's METADATA from its PEP 658 file (hash-checked), else by HTTP range reads of the
  wheel, else (servers without ranges) by downloading it; an sdist's PKG-INFO by download;
* every result cached on disk: pages through HTTP validation, metadata by index URL and
  file hash (so it never goes stale, and one index cannot plant metadata for another);
  every cache path is a digest envlock computes, never text an index sent;
* an sdist's metadata from its PKG-INFO only when that is reliable (Metadata-Version >= 2.2,
  Requires-Dist not dynamic, PEP 643); otherwise built by its PEP 517 backend
  (:mod:`envlock.index.sdist_build`) and cached by the sdist's sha256;
* a hostile or broken index ends in one :class:`IndexError_` (exit 4): pages are checked
  at the boundary (see :mod:`envlock.index.pages`), requests have a total deadline and a
  size cap (:mod:`envlock.index.http`);
* bounded concurrency for prefetching, used by the resolver to overlap network waits.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from packaging.utils import canonicalize_name

from envlock import replay
from envlock._cache_files import SHARD, entry_exists, read_entry, write_entry
from envlock.errors import BuildError, EnvlockError, IndexError_, OfflineError
from envlock.index.config import IndexConfig, redact
from envlock.index.fit import TripleFit
from envlock.index.http import Transport
from envlock.index.json_narrow import looks_json
from envlock.index.metadata import Metadata, parse_metadata
from envlock.index.page_cache import page_from_cache, page_to_cache
from envlock.index.pages import (
    Dist,
    MalformedPage,
    ProjectPage,
    parse_html,
    parse_json,
    valid_digest,
)
from envlock.index.workers import BULK, NEEDED, URGENT, Workers
from envlock.index.zipread import RemoteZip

__all__ = ["IndexClient", "parse_page"]

_ACCEPT = ("application/vnd.pypi.simple.v1+json, "
           "application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1")


class IndexClient:
    def __init__(self, config: IndexConfig, *, cache_dir: Optional[Path] = None,
                 offline: bool = False, max_workers: Optional[int] = None,
                 on_request: Optional[Callable[[str], None]] = None,
                 refresh: bool = False, no_build: bool = False,
                 trust_pkg_info: Iterable[str] = (),
                 on_build: Optional[Callable[[str], None]] = None) -> None:
        self.config = config
        #: told the file name of each sdist whose build backend is about to run (the CLI
        #: names it on stderr: running an index's code should never go unsaid)
        self.on_build = on_build
        #: ``--no-build`` (or ``ENVLOCK_NO_BUILD=1``): an sdist whose metadata must be built
        #: is an error instead
        self.no_build = no_build or os.environ.get("ENVLOCK_NO_BUILD", "").strip().lower() \
            not in ("", "0", "false", "no")
        #: ``--trust-pkg-info``: projects whose sdists' PKG-INFO is read even where it marks
        #: Requires-Dist dynamic (Metadata-Version 2.2 or later only), instead of a build
        self.trust_pkg_info = frozenset(str(canonicalize_name(n)) for n in trust_pkg_info)
        #: (project, version) -> what the lock says of dependencies read that way
        self.trusted: Dict[Tuple[str, str], str] = {}
        self.cache_dir = cache_dir
        self.offline = offline
        #: the most project pages one client reads (ENVLOCK_MAX_PAGES): a bound on the
        #: total work of a resolve, whatever an index serves
        self.max_pages = _env_count("ENVLOCK_MAX_PAGES", DEFAULT_MAX_PAGES)
        self.transport = Transport(config, cache_dir, offline=offline, on_request=on_request,
                                   refresh=refresh)
        self._pool: Optional[Workers] = None
        # TLS handshakes are CPU-bound: many more parallel connections than cores slow
        # every request down (measured: 16 at once on 2 cores took 0.5 s each), yet with
        # batches of metadata asked ahead (closure.Finder._batch_prefetch) 4 workers left
        # requests queued: vllm 0.8.5 cold on 2 cores, 4 workers 8.0 s, 8 workers 7.1 s,
        # 12 workers 7.2 s
        self._max_workers = max_workers or min(16, max(8, 2 * (os.cpu_count() or 2)))
        # ... but on a slow network (a round trip of 10 ms or more) a request holds its
        # worker mostly waiting, and 16 hide more round trips whatever the cores: the pool
        # grows to that (Transport.slow_network; as many as the connection pools keep)
        self._most_workers = max_workers or max(self._max_workers, MOST_WORKERS)
        self._lock = threading.Lock()
        #: variants.json files read (see :meth:`variants_json`), by link
        self._variants_json: Dict[str, Tuple[Optional[dict], Optional[str]]] = {}
        self._pages: Dict[Tuple[str, str], "Future[Optional[ProjectPage]]"] = {}
        self._meta: Dict[Tuple[str, str, str], "Future[Metadata]"] = {}
        #: queued fetches by ("page", index, name) or ("meta", index, url, sha256), so a
        #: more urgent ask can move one up (:meth:`_promote`)
        self._jobs: Dict[Tuple[str, ...], "_Once"] = {}
        #: the tag-triple filter pages are narrowed with (:meth:`narrow_pages`)
        self._fits: Optional[Callable[[str], bool]] = None
        # builds are CPU- and disk-heavy: one at a time
        self._build_lock = threading.Lock()
        # No connection pool is made up front: importing urllib3 and building a TLS context cost
        # a few hundred ms of CPU, and a warm run (every page fresh in the cache) never
        # opens a connection. The first request makes it.
        if not offline and "envlock.index.netproc" in sys.modules:
            # the network helper the command started for this configuration, if any
            from envlock.index.netproc import claim

            helper = claim(config, cache_dir, refresh)
            if helper is not None:
                helper.attach(self.transport)
                self.transport.remote = helper

    # -- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> "IndexClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop: queued work is dropped and reads in flight end within a fraction of a
        second (so Ctrl-C or an error does not wait for a slow index; the worker threads
        must end before the interpreter can exit)."""
        self.transport.cancel()
        if self._pool is not None:
            self._pool.shutdown()
        if "envlock.index.contain" in sys.modules:
            # a build may be running: end it now, and let it remove its directory (the
            # workers are daemons: the process would not wait for them at exit)
            sys.modules["envlock.index.contain"].kill_all(settle=True)
        self.transport.close()

    def _queue(self, key: Tuple[str, ...], fn: Callable[[], None], priority: int) -> None:
        """Queue a fetch that a later, more urgent ask may move up (:meth:`_promote`)."""
        job = _Once(fn, priority)
        with self._lock:
            self._jobs[key] = job
        self._submit(job, priority=priority)

    def _promote(self, key: Tuple[str, ...], priority: int) -> None:
        """A fetch queued at a lower priority and not started yet is queued again at
        ``priority`` (it runs once, from whichever entry a worker takes first): work asked
        ahead of need must not hold back the same fetch once it is needed. Called with
        the lock held."""
        job = self._jobs.get(key)
        if job is None or priority >= job.priority or not job.pending:
            return
        job.priority = priority
        try:
            if self._pool is not None:
                self._pool.submit(job, priority=priority)
        except RuntimeError:
            pass  # shut down: the resolution is over

    def _submit(self, fn: Callable[..., object], *args: object,
                priority: int = BULK) -> Future:
        """Run ``fn(*args)`` on a worker at ``priority``: what a thread waits for first,
        then metadata, then pages (see :mod:`envlock.index.workers`)."""
        with self._lock:
            if self._pool is None:
                self._pool = Workers(self._max_workers, "envlock", most=self._most_workers,
                                     grow=self.transport.slow_network)
            return self._pool.submit(fn, *args, priority=priority)

    # -- pages -------------------------------------------------------------------------
    def page_url(self, index: str, name: str) -> str:
        return f"{index.rstrip('/')}/{canonicalize_name(name)}/"

    def prefetch_page(self, index: str, name: str,
                      priority: int = BULK) -> "Future[Optional[ProjectPage]]":
        """The page's future; its fetch queued at ``priority`` (see
        :mod:`envlock.index.workers`), or moved up to it when it waits lower."""
        key = (index, canonicalize_name(name))
        with self._lock:
            fut = self._pages.get(key)
            if fut is not None:
                self._promote(("page",) + key, priority)
                return fut
            fut = Future()
            self._pages[key] = fut
            over = len(self._pages) > self.max_pages
        if over:
            # a bound on a resolve's total work: a page that lists 20,000 dependencies
            # (each with its own page) would otherwise keep envlock fetching for hours
            fut.set_exception(IndexError_(
                f"this resolve needs more than {self.max_pages} project pages "
                f"(ENVLOCK_MAX_PAGES); real environments need a few hundred, so an index "
                f"is more likely serving a dependency tree that never ends",
                hint="raise ENVLOCK_MAX_PAGES if this requirement set is really that large"))
            return fut
        digest = None if self.offline else self.transport.fresh_digest(self.page_url(index, name))
        if self.offline or digest is not None:
            # nothing to wait for (the cache answers): done here, as offline. Handing CPU
            # work to a worker only adds lock hand-offs between threads (measured: a third
            # of a warm run's system time)
            _run_into(fut, self._fetch_page, index, key[1], digest)
        else:
            def job() -> None:
                _run_into(fut, self._fetch_page, index, key[1])
            self._queue(("page",) + key, job, priority)
        return fut

    def is_cached(self, index: str, name: str) -> bool:
        """Whether the cache holds the project page (what ``--offline`` can use)."""
        paths = self.transport._paths(self.page_url(index, name))
        return paths is not None and paths[1].exists()

    def page(self, index: str, name: str) -> Optional[ProjectPage]:
        """The project page, or None when the index does not have the project."""
        return self.prefetch_page(index, name, NEEDED).result()  # waited for: first

    def narrow_pages(self, fits: Callable[[str], bool]) -> None:
        """Keep pages read from now on narrowed to files whose tag triple passes
        ``fits`` (:meth:`ProjectPage.narrowed`): set once by a resolve that knows its
        targets. The parsed-page cache still gets every file."""
        self._fits = fits

    def _fetch_page(self, index: str, name: str,
                    digest: Optional[str] = None) -> Optional[ProjectPage]:
        page = self._fetch_full_page(index, name, digest)
        fits = self._fits
        return page if page is None or fits is None else page.narrowed(fits)

    def _fetch_full_page(self, index: str, name: str,
                         digest: Optional[str] = None) -> Optional[ProjectPage]:
        url = self.page_url(index, name)
        if digest is None:
            digest = self.transport.fresh_digest(url)
        if digest is not None:
            # a fresh page parsed before: neither its body nor its HTML/JSON is read again
            parsed = self._parsed_cache(url, index, digest, name)
            if parsed is not None:
                self.transport.stats["cache_hits"] += 1
                return parsed
        try:
            if self.transport.remote is not None:
                page = self._helper_page(url, index, name)
                if page is not None:
                    return page
            resp = self.transport.get(url, headers={"Accept": _ACCEPT})
        except OfflineError:
            raise
        except IndexError_ as exc:
            if "HTTP 404" in str(exc) or "HTTP 410" in str(exc):
                return None
            raise
        if resp.status == 404:
            return None
        return self._decoded(resp.body, resp.headers.get("Content-Type") or "",
                             resp.sha256 or hashlib.sha256(resp.body).hexdigest(),
                             resp.from_cache, url, index, name)

    def _helper_page(self, url: str, index: str, name: str) -> Optional[ProjectPage]:
        """The page as the network helper read it and cut it (:mod:`envlock.index.netproc`),
        decoded and checked here as a page read in-process is; None when the helper did
        not answer, or answered from the cache, or its cut does not check (the caller then
        reads the page as without a helper: from the cache the helper filled)."""
        fits = self._fits
        answer = self.transport.remote_page(url, {"Accept": _ACCEPT},
                                            fits if isinstance(fits, TripleFit) else None)
        if answer is None or answer.cached:
            return None
        if answer.cut is None:
            return self._decoded(answer.body, answer.content_type, answer.sha256, False,
                                 url, index, name)
        parsed = self._parsed_cache(url, index, answer.sha256, name)
        if parsed is not None:
            return parsed
        return _page_from_cut(answer.cut[0], answer.cut[1], url, index, name)

    def _decoded(self, body: bytes, ctype: str, body_sha: str, from_cache: bool, url: str,
                 index: str, name: str) -> ProjectPage:
        """A page's bytes as a page: the parsed form kept for these bytes, else decoded
        (only the files the targets can use, for a page not read back from the cache)."""
        parsed = self._parsed_cache(url, index, body_sha, name)
        if parsed is not None:
            return parsed
        page = None
        if not from_cache and self._fits is not None:
            # a page that will not be kept whole (see below) is decoded only for the files
            # the run's targets can use
            page = _narrowed_page(body, ctype, url, index, name, self._fits)
        if page is None:
            page = parse_page(body, ctype, url, index, name)
        if from_cache:
            # the parsed form is written when a page is read back from the cache, not when
            # it first arrives: a resolve with an empty cache (a CI job, a container build)
            # never reads it back, and writing it was a tenth of such a resolve's CPU
            self._store_parsed(url, index, body_sha, page)
        return page

    def _parsed_path(self, url: str, index: str, body_sha: str) -> Optional[Path]:
        """Parsed pages are keyed by where the page came from as well as by its bytes
        (their sha256): the same bytes from another index resolve to other URLs and belong
        to that index."""
        if self.cache_dir is None:
            return None
        return self.cache_dir / "pages" / parsed_page_name(index, url, body_sha)

    def _parsed_cache(self, url: str, index: str, body_sha: str,
                      name: str) -> Optional[ProjectPage]:
        """The parsed page kept for these bytes, or None. The entry is checked row by row
        (:func:`page_from_cache`) and must name this index, URL and project: anyone who
        can write the cache directory can compute the key."""
        p = self._parsed_path(url, index, body_sha)
        if p is None:
            return None
        try:
            page = page_from_cache(self._read(p))
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            return None
        if (page.index != redact(index) or page.url != redact(url)
                or page.name != canonicalize_name(name)):
            return None
        return page

    def _store_parsed(self, url: str, index: str, body_sha: str, page: ProjectPage) -> None:
        p = self._parsed_path(url, index, body_sha)
        if p is None:
            return
        try:
            write_entry(self.cache_dir or p.parent, p, page_to_cache(page))
        except (OSError, EnvlockError):
            pass

    # -- metadata ----------------------------------------------------------------------
    def prefetch_metadata(self, dist: Dist, priority: int = URGENT) -> "Future[Metadata]":
        key = (redact(dist.index), dist.url, dist.sha256 or "")
        with self._lock:
            fut = self._meta.get(key)
            if fut is not None:
                self._promote(("meta",) + key, priority)
                return fut
            fut = Future()
            self._meta[key] = fut
        if self.offline or self._meta_cached(dist):
            _run_into(fut, self._fetch_metadata, dist)  # the cache answers: no worker
        else:
            def job() -> None:
                _run_into(fut, self._fetch_metadata, dist)
            self._queue(("meta",) + key, job, priority)
        return fut

    def fetch_ahead(self, dist: Dist) -> None:
        """Start fetching a file's metadata in the background, a guess that it will be
        asked for; nothing happens when the cache holds it (it is read when asked)."""
        if self.offline or self._meta_cached(dist):
            return
        self.prefetch_metadata(dist)

    def _meta_cached(self, dist: Dist) -> bool:
        """Whether a wheel's metadata is in the cache (read without the network)."""
        if not dist.is_wheel:
            return False
        path = self._meta_path(dist)
        return path is not None and entry_exists(self.cache_dir or path.parent, path)

    def metadata(self, dist: Dist, priority: int = NEEDED) -> Metadata:
        """The file's metadata, waited for (so fetched before anything not waited for,
        unless ``priority`` says it is a guess's)."""
        return self.prefetch_metadata(dist, priority).result()

    def _meta_path(self, dist: Dist) -> Optional[Path]:
        """Where a file's metadata is cached: a name we compute from the index URL and the
        file's hash (both checked), never text from the index. Another index claiming the
        same hash gets another entry, so it cannot plant metadata for this one."""
        if self.cache_dir is None or not valid_digest("sha256", dist.sha256):
            return None
        ident = _digest("metadata-v3", redact(dist.index), str(dist.sha256))
        path = self.cache_dir / "metadata" / ident[:SHARD] / f"{ident}.metadata"
        return path

    def _fetch_metadata(self, dist: Dist) -> Metadata:
        if not dist.is_wheel:
            return self._sdist_metadata(dist)
        path = self._meta_path(dist)
        if path is not None:
            try:
                return parse_metadata(self._read_meta(path))
            except OSError:
                pass
        if self.offline:
            raise OfflineError(f"metadata of {dist.filename} is not in the cache and "
                               f"--offline forbids the network")
        blob = self._metadata_bytes(dist)
        if path is not None:
            self._store(path, blob, checked=True)
        return parse_metadata(blob)

    def _metadata_bytes(self, dist: Dist) -> bytes:
        if dist.metadata is not None:
            resp = self.transport.get(dist.url + ".metadata", cache=False)
            blob = resp.body
            for algo, digest in dist.metadata.items():
                if hashlib.new(algo, blob).hexdigest() != digest:
                    raise IndexError_(f"{redact(dist.url)}.metadata does not match its "
                                      f"{algo} hash")
            return blob
        if dist.is_wheel:
            import io  # (a network read: a warm run never comes here)
            import struct
            import zipfile
            import zlib

            cap = self.transport.max_page_bytes
            try:
                try:
                    z = self.remote_zip(dist)
                    entry = z.metadata_entry()
                    if entry is None:
                        raise IndexError_(f"{dist.filename}: no .dist-info/METADATA in the wheel")
                    if cap is not None and entry.size > cap:
                        raise IndexError_(f"{dist.filename}: METADATA of {entry.size} bytes is "
                                          f"larger than {cap} (ENVLOCK_INDEX_MAX_PAGE_BYTES)")
                    return z.read(entry, cap)
                except _NoRanges:
                    data = self.download(dist)
                    with zipfile.ZipFile(io.BytesIO(data)) as zf:
                        for info in zf.infolist():
                            name = info.filename
                            if name.count("/") == 1 and name.endswith(".dist-info/METADATA"):
                                if cap is not None and info.file_size > cap:
                                    raise IndexError_(f"{dist.filename}: METADATA is larger "
                                                      f"than {cap} bytes") from None
                                return zf.read(info)
                    raise IndexError_(f"{dist.filename}: no .dist-info/METADATA in the wheel")
            except (zipfile.BadZipFile, struct.error, zlib.error, ValueError, OverflowError,
                    EOFError, NotImplementedError) as exc:
                raise IndexError_(f"{dist.filename}: unreadable wheel "
                                  f"({_first_line(exc)})") from None
        raise IndexError_(f"{dist.filename}: not a wheel")

    # -- sdists ----------------------------------------------------------------------------
    def _built_path(self, sha256: Optional[str]) -> Optional[Path]:
        """Built metadata is a function of the sdist's bytes: keyed by their (checked)
        sha256, a name envlock computes."""
        if self.cache_dir is None or not valid_digest("sha256", sha256):
            return None
        ident = str(sha256).lower()  # 64 hex digits, checked above
        return self.cache_dir / "built-metadata" / ident[:2] / f"{ident}.metadata"

    def _sdist_metadata(self, dist: Dist) -> Metadata:
        """PKG-INFO when it is reliable (or trusted: ``--trust-pkg-info``), else the
        metadata its build backend produces."""
        from envlock.index.pyproject_meta import (
            failed_build,
            remember_failure,
            static_metadata,
        )
        from envlock.index.sdist_build import (
            BuildSettings,
            build_metadata,
            needs_build,
            pkg_info,
        )

        path = self._meta_path(dist)
        for p in (path, self._built_path(dist.sha256)):
            if p is None:
                continue
            try:
                blob = self._read_meta(p) if p == path else self._read(p)
            except OSError:
                continue
            if p != path or not needs_build(blob):
                return parse_metadata(blob)
            if self._trusts(dist, blob):
                return self._trusted_metadata(dist, blob)
        if self.offline:
            raise OfflineError(f"metadata of {dist.filename} is not in the cache and "
                               f"--offline forbids the network")
        if dist.metadata is not None:
            blob = self._metadata_bytes(dist)  # the PEP 658 file, hash-checked
            if not needs_build(blob):
                self._store(path, blob, checked=True)
                return parse_metadata(blob)
        data = self.download(dist)  # checked against the index's sha256
        sha = dist.sha256 or hashlib.sha256(data).hexdigest()
        info = pkg_info(data, dist.filename)
        if info is not None and not needs_build(info):
            self._store(path, info, checked=True)
            return parse_metadata(info)
        if info is not None and self._trusts(dist, info):
            self._store(path, info, checked=True)  # read back only under the same option (above)
            return self._trusted_metadata(dist, info)
        built_path = self._built_path(sha)
        if built_path is not None:
            try:
                return parse_metadata(self._read(built_path))
            except OSError:
                pass
        # PEP 621: dependencies declared statically in pyproject.toml are what a build
        # would give (numpy 1.26.4's meson build: 40 s, and it fails on Python 3.13)
        static = static_metadata(data, dist.filename, dist.name)
        if static is not None:
            self._store(built_path, static)
            return parse_metadata(static)
        failed = failed_build(built_path, refresh=self.transport.refresh)
        if failed is not None:
            raise BuildError(f"{failed} (a failed build of this sdist, sha256 {sha[:12]}..., "
                             f"remembered in the cache)",
                             hint=f"to build it again, run the same command with --refresh "
                                  f"(or remove {built_path.with_suffix('.failed')})"
                             if built_path is not None else None)
        from envlock.index.contain import build_deadline

        settings = BuildSettings(index_url=self.config.index_url,
                                 extra_index_urls=tuple(self.config.extra_index_urls),
                                 find_links=tuple(self.config.find_links),
                                 timeout=build_deadline())
        try:
            with self._build_lock:
                if self.on_build is not None and not self.no_build:
                    self.on_build(dist.filename)
                built = build_metadata(data, dist.filename, dist.name, settings,
                                       no_build=self.no_build,
                                       cancel=self.transport._cancel)
        except BuildError as exc:
            remember_failure(built_path, exc, self._store)
            hint = _trust_hint(dist, info)
            if hint is None or exc.hint:
                raise
            raise type(exc)(exc.message, hint=hint) from None
        self._store(built_path, built)
        return parse_metadata(built)

    def _trusts(self, dist: Dist, blob: bytes) -> bool:
        from envlock.index.sdist_build import declared_requires

        return dist.name in self.trust_pkg_info and declared_requires(blob) is not None

    def _trusted_metadata(self, dist: Dist, blob: bytes) -> Metadata:
        """PKG-INFO read although it marks its dependencies dynamic; the lock says so."""
        meta = parse_metadata(blob)
        version = dist.parsed[1] if dist.parsed else ""
        deps = ", ".join(meta.requires_dist) or "none"
        with self._lock:
            self.trusted[(dist.name, str(version))] = (
                f"{dist.name} {version}: dependencies ({deps}) read from its sdist's "
                f"PKG-INFO, which marks them dynamic, instead of a build "
                f"(--trust-pkg-info {dist.name})")
        return meta

    def _store(self, path: Optional[Path], blob: bytes, *, checked: bool = False) -> None:
        """Keep what was learned under a content-addressed name. What cannot be kept
        came from the network with nothing behind it: that run is not replayed
        (:mod:`envlock.replay`).

        ``checked`` (a file's metadata, :meth:`_read_meta` reads it): the entry carries its
        own sha256, so a torn one (a crash before the data reached the disk) is found when
        read and fetched again, and the write needs no fsync (one per metadata,
        milliseconds each, on the path of every answer the resolver waits for). Otherwise
        (built metadata, which costs a build to redo) it is written durably."""
        if path is None:
            replay.note_live("metadata without a file hash")
            return
        if checked:
            blob = _META_TAG + hashlib.sha256(blob).hexdigest().encode() + b"\n" + blob
        try:  # never through a planted link
            write_entry(self.cache_dir or path.parent, path, blob, durable=not checked)
        except (OSError, EnvlockError):
            replay.note_live("metadata could not be cached")

    def _read_meta(self, path: Path) -> bytes:
        """An entry written by ``_store(..., checked=True)``, checked against its sha256
        (OSError when it is torn or not one: the caller fetches again)."""
        data = self._read(path)
        head, sep, blob = data.partition(b"\n")
        if (not sep or not head.startswith(_META_TAG)
                or head[len(_META_TAG):] != hashlib.sha256(blob).hexdigest().encode()):
            raise OSError(f"cache entry {path} is torn or not envlock's")
        return blob

    def _read(self, path: Path) -> bytes:
        """A cache entry: a regular file of this user, reached without following links,
        no larger than a page may be (OSError otherwise: the caller fetches again)."""
        cap = self.transport.max_page_bytes
        return read_entry(self.cache_dir or path.parent, path,
                          None if cap is None else cap + 1024)

    # -- whole files and ranges ----------------------------------------------------------
    def remote_zip(self, dist: Dist) -> RemoteZip:
        def fetch(start: Optional[int], end: Optional[int]) -> Tuple[bytes, Optional[int]]:
            resp = self.transport.get_range(dist.url, start, end)
            if resp.status != 206:
                raise _NoRanges()
            cr = resp.headers.get("Content-Range") or resp.headers.get("content-range") or ""
            return resp.body, _range_total(cr, dist.filename)

        def beside(start: int, end: int) -> Callable[[], Tuple[bytes, Optional[int]]]:
            # a thread of its own, not a worker: every worker could be waiting in here
            box: List[Any] = []

            def run() -> None:
                try:
                    box.append((True, fetch(start, end)))
                except BaseException as exc:  # noqa: BLE001 - handed to the waiting reader
                    box.append((False, exc))

            thread = threading.Thread(target=run, name="envlock-zip-head")
            thread.start()

            def result() -> Tuple[bytes, Optional[int]]:
                thread.join()
                ok, value = box[0]
                if not ok:
                    raise value
                return value

            return result

        return RemoteZip(fetch, dist.filename, beside, dist.size)

    def download(self, dist: Dist) -> bytes:
        """The whole file, verified against its sha256 when the index gave one."""
        resp = self.transport.get(dist.url, cache=False, whole_file=True)
        if dist.sha256 and hashlib.sha256(resp.body).hexdigest() != dist.sha256:
            raise IndexError_(f"{redact(dist.url)} does not match its sha256 from the index")
        return resp.body

    def sha256(self, dist: Dist) -> str:
        """The file's sha256: from the index, else computed by downloading it."""
        if dist.sha256:
            return dist.sha256
        replay.note_live("a file hashed by downloading it")
        return hashlib.sha256(self.download(dist)).hexdigest()

    def variants_json(self, dist: Dist) -> Tuple[Optional[dict], Optional[str]]:
        """The PEP 825 variants.json an index links as ``dist`` (parsed), or None and one
        line saying why it cannot be used: too big, not the file the index's hash names,
        not JSON, not in the shape PEP 825 gives it. Remembered per link. Hostile or
        broken files are a warning for the lock's decision, never an error: the variant
        wheels they describe are then not chosen."""
        from envlock.wheelvariants import MAX_VARIANTS_JSON_BYTES, check_variants_json

        with self._lock:
            if dist.url in self._variants_json:
                return self._variants_json[dist.url]
        name = dist.filename
        try:
            if dist.size is not None and dist.size > MAX_VARIANTS_JSON_BYTES:
                raise ValueError(f"over {MAX_VARIANTS_JSON_BYTES} bytes")
            body = self.transport.get(dist.url).body
            if len(body) > MAX_VARIANTS_JSON_BYTES:
                raise ValueError(f"over {MAX_VARIANTS_JSON_BYTES} bytes")
            if dist.sha256 and hashlib.sha256(body).hexdigest() != dist.sha256:
                raise ValueError("does not match its sha256 from the index")
            try:
                doc = json.loads(body.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                raise ValueError("not JSON") from None
            errs = check_variants_json(doc)
            if errs:
                raise ValueError(f"not a PEP 825 variants.json ({errs[0]})")
            out: Tuple[Optional[dict], Optional[str]] = (doc, None)
        except ValueError as exc:
            out = (None, f"{name} from {redact(dist.url)}: {exc}; its variant wheels are "
                         f"not chosen")
        except OfflineError:
            raise
        except EnvlockError as exc:
            out = (None, f"{name} from {redact(dist.url)}: {exc.message}; its variant "
                         f"wheels are not chosen")
        with self._lock:
            self._variants_json[dist.url] = out
        return out

    # -- find-links ----------------------------------------------------------------------
    def find_links_dists(self, name: str) -> List[Dist]:
        """Files for ``name`` in local find-links directories (pip's ``--find-links``)."""
        out: List[Dist] = []
        want = canonicalize_name(name)
        for loc in self.config.find_links:
            path = loc[7:] if loc.startswith("file://") else loc
            if not os.path.isdir(path):
                continue
            for fn in sorted(os.listdir(path)):
                d = Dist(filename=fn, url="file://" + os.path.abspath(os.path.join(path, fn)),
                         index=loc, hashes={})
                if d.parsed and d.name == want:
                    out.append(d)
        return out


#: the first line of a metadata entry: ``sha256=<hex digest of the rest>``
_META_TAG = b"sha256="


class _NoRanges(Exception):
    """The server ignored a Range header (answered 200 with the whole file)."""


#: project pages one resolve may read; torch with transformers, accelerate, datasets and
#: vllm reads about 300 (two indexes)
DEFAULT_MAX_PAGES = 5000
#: the most worker threads (on a slow network; see IndexClient): one per connection the
#: pools keep to a host (envlock.index.pools.CONNECTIONS; not imported here: urllib3 is
#: imported only by a run that opens a connection)
MOST_WORKERS = 16


def _env_count(name: str, default: int) -> int:
    from envlock.errors import InputError

    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"{name}={raw!r} is not a positive whole number")
    return value


def _run_into(fut: Future, fn: Callable[..., object], *args: object) -> None:
    if not fut.set_running_or_notify_cancel():
        return
    try:
        fut.set_result(fn(*args))
    except BaseException as exc:  # noqa: BLE001 - delivered to the waiter
        fut.set_exception(exc)


def _trust_hint(dist: Dist, info: Optional[bytes]) -> Optional[str]:
    """For a build that failed or was forbidden: the dependencies its PKG-INFO lists (but
    marks dynamic), and the option that reads them instead; None when it lists none a
    tool could trust (an old PKG-INFO says nothing by leaving them out)."""
    from envlock.index.sdist_build import declared_requires

    declared = declared_requires(info)
    if not declared:
        return None
    shown = ", ".join(declared[:6]) + (", ..." if len(declared) > 6 else "")
    return (f"its PKG-INFO lists {shown} but marks them dynamic (the build may differ); "
            f"if they are right, --trust-pkg-info {dist.name} reads them instead of "
            f"building, and the lock records it")


def parsed_page_name(index: str, url: str, body_sha: str) -> str:
    """The file name, under the cache's ``pages/``, of the parsed form of the page ``url``
    of ``index`` whose bytes have this sha256 (``envlock cache prune`` finds the live ones
    from the HTTP entries)."""
    return _digest(redact(index), redact(url), body_sha)[:32] + ".json"


def _digest(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _range_total(content_range: str, label: str) -> Optional[int]:
    """The full size from ``Content-Range: bytes a-b/size`` (None for ``*``)."""
    unit, _, rest = content_range.strip().partition(" ")
    span, _, size = rest.partition("/")
    if unit.lower() != "bytes" or not span or not size:
        raise IndexError_(f"{label}: malformed Content-Range {content_range[:80]!r}")
    size = size.strip()
    if size == "*":
        return None
    if not size.isdigit() or not size.isascii():
        raise IndexError_(f"{label}: malformed Content-Range {content_range[:80]!r}")
    return int(size)


def parse_page(body: bytes, content_type: str, url: str, index: str,
               name: str) -> ProjectPage:
    """A project page from its bytes (JSON or HTML, by content type or first byte).
    Anything malformed is an :class:`IndexError_` naming the page."""
    try:
        if looks_json(body, content_type):
            try:
                data = json.loads(body)
            except (ValueError, RecursionError) as exc:
                raise MalformedPage(f"not JSON ({_first_line(exc)})") from None
            return parse_json(data, url, index, name)
        return parse_html(body.decode("utf-8", "replace"), url, index, name)
    except MalformedPage as exc:
        raise IndexError_(f"{redact(url)}: malformed project page: {_first_line(exc)}") \
            from None


def _narrowed_page(body: bytes, content_type: str, url: str, index: str, name: str,
                   fits: Callable[[str], bool]) -> Optional[ProjectPage]:
    """The page of the files whose tag triple passes ``fits``, decoded from a cut of the
    JSON page's bytes (:mod:`envlock.index.json_narrow`) and checked as a whole page is;
    None when the page is not JSON in the shape the cut reads, or anything about the cut
    page is off: the caller then parses the whole page (and reports what is wrong)."""
    from envlock.index.json_narrow import narrowed_json

    if not looks_json(body, content_type):
        return None
    cut = narrowed_json(body, fits)
    if cut is None:
        return None
    return _page_from_cut(cut[0], cut[1], url, index, name)


def _page_from_cut(mini: bytes, listed: int, url: str, index: str,
                   name: str) -> Optional[ProjectPage]:
    """The page decoded from a cut (:func:`~envlock.index.json_narrow.narrowed_json`, made
    here or by the network helper), checked as a whole page is; None when anything about
    it is off."""
    from envlock.index.json_narrow import kept_names_match

    try:
        page = parse_page(mini, "application/vnd.pypi.simple.v1+json", url, index, name)
    except IndexError_:
        return None
    if not kept_names_match(list(page.filenames), mini):
        return None
    page.listed = listed
    return page


def _first_line(exc: BaseException) -> str:
    text = str(exc).replace("\r", " ").replace("\n", " ")
    return text if len(text) <= 200 else text[:197] + "..."


class _Once:
    """A queued fetch that may be queued again at a higher priority: whichever queue
    entry a worker takes first runs it; the others find nothing to do."""

    __slots__ = ("_fn", "_lock", "priority")

    def __init__(self, fn: Callable[[], None], priority: int) -> None:
        self._fn: Optional[Callable[[], None]] = fn
        self._lock = threading.Lock()
        self.priority = priority

    @property
    def pending(self) -> bool:
        return self._fn is not None

    def __call__(self) -> None:
        with self._lock:
            fn, self._fn = self._fn, None
        if fn is not None:
            fn()
