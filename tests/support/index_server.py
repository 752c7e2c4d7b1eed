"""A real package index on 127.0.0.1 for tests: PEP 503 HTML, PEP 691 JSON, PEP 658
metadata files, HTTP range requests, and injected faults: 5xx answers, stalls, bodies that
drip a byte at a time, truncated bodies, redirect loops, endless bodies, exact raw answers
(hostile pages: traversal names, bad hashes), and files that claim another file's hash.

Wheels are real zip files with real METADATA, built by :func:`make_wheel`, so pip and uv
can install from the server too.

    with IndexServer() as srv:
        idx = srv.add_index("pypi")
        idx.add(make_wheel(tmp, "demo", "1.0", requires=["dep>=2"]))
        srv.url("pypi")   # -> http://127.0.0.1:PORT/pypi/simple
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import threading
import time
import zipfile
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote
from typing import Dict, List, Optional, Sequence

__all__ = ["make_wheel", "make_sdist", "IndexServer", "Index", "canonical"]


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def make_wheel(directory: Path, name: str, version: str, *, requires: Sequence[str] = (),
               requires_python: Optional[str] = None, tag: str = "py3-none-any",
               extras: Optional[Dict[str, Sequence[str]]] = None,
               files: Optional[Dict[str, bytes]] = None, build: str = "") -> Path:
    """Build a small, valid wheel and return its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    fn = f"{dist}-{version}{'-' + build if build else ''}-{tag}.whl"
    info = f"{dist}-{version}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    if requires_python:
        meta.append(f"Requires-Python: {requires_python}")
    for r in requires:
        meta.append(f"Requires-Dist: {r}")
    for extra, reqs in (extras or {}).items():
        meta.append(f"Provides-Extra: {extra}")
        for r in reqs:
            req, _, marker = r.partition(";")
            cond = f"({marker.strip()}) and " if marker.strip() else ""
            meta.append(f"Requires-Dist: {req.strip()}; {cond}extra == \"{extra}\"")
    metadata = ("\n".join(meta) + "\n\n").encode()
    wheel = (f"Wheel-Version: 1.0\nGenerator: envlock-tests\nRoot-Is-Purelib: true\n"
             f"Tag: {tag}\n").encode()
    payload = dict(files or {})
    payload.setdefault(f"{dist}/__init__.py", f"__version__ = {version!r}\n".encode())
    entries = list(payload.items()) + [(f"{info}/METADATA", metadata), (f"{info}/WHEEL", wheel)]
    record_lines = [f"{p},{_record_hash(d)},{len(d)}" for p, d in entries]
    record_lines.append(f"{info}/RECORD,,")
    entries.append((f"{info}/RECORD", ("\n".join(record_lines) + "\n").encode()))
    path = directory / fn
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for p, d in entries:
            zi = zipfile.ZipInfo(p, date_time=(2024, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(zi, d)
    return path


def make_sdist(directory: Path, name: str, version: str, *,
               files: Dict[str, str], pkg_info: Optional[str] = None) -> Path:
    """A ``.tar.gz`` source distribution with the given files (relative to its top
    directory) and, unless ``pkg_info`` is None, a PKG-INFO with that text."""
    import io
    import tarfile

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    top = f"{name.replace('-', '_')}-{version}"
    path = directory / f"{top}.tar.gz"
    entries = dict(files)
    if pkg_info is not None:
        entries["PKG-INFO"] = pkg_info
    with tarfile.open(path, "w:gz") as tf:
        for rel, text in sorted(entries.items()):
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size = len(data)
            info.mtime = 1704067200
            tf.addfile(info, io.BytesIO(data))
    return path


@dataclass
class Index:
    """One simple index, served under ``/<prefix>`` (default ``<name>/simple``)."""

    name: str
    prefix: str = ""
    files: Dict[str, List[Path]] = field(default_factory=dict)  # project -> wheel paths
    pep658: bool = True
    json_api: bool = True
    yanked: Dict[str, str] = field(default_factory=dict)  # filename -> reason
    requires_python: Dict[str, str] = field(default_factory=dict)  # filename -> spec
    #: filename -> the sha256 the pages advertise instead of the real one (a lying index)
    claims: Dict[str, str] = field(default_factory=dict)

    def add(self, path: Path, *, yanked: Optional[str] = None) -> Path:
        project = canonical(path.name.split("-")[0])
        self.files.setdefault(project, []).append(Path(path))
        if yanked is not None:
            self.yanked[path.name] = yanked
        if not path.name.endswith(".whl"):
            return path  # an sdist: no METADATA to read, no PEP 658 file
        with zipfile.ZipFile(path) as zf:
            for n in zf.namelist():
                if n.endswith(".dist-info/METADATA"):
                    for line in zf.read(n).decode().splitlines():
                        if line.startswith("Requires-Python:"):
                            self.requires_python[path.name] = line.split(":", 1)[1].strip()
        return path

    def find(self, filename: str) -> Optional[Path]:
        for paths in self.files.values():
            for p in paths:
                if p.name == filename:
                    return p
        return None


class _QuietServer(ThreadingHTTPServer):
    """Clients that hang up (a cancelled or interrupted read) are part of the tests."""

    def handle_error(self, request: object, client_address: object) -> None:
        import ssl
        import sys

        # (a client that refuses the certificate ends the handshake: part of the tests too)
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError, ssl.SSLError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


class IndexServer:
    """A threaded HTTP server with any number of indexes and fault injection."""

    def __init__(self, tls: Optional[tuple] = None) -> None:
        #: (certificate, key) files: serve HTTPS with them (see support.tls)
        self.tls = tls
        self.indexes: Dict[str, Index] = {}
        self.log: List[str] = []
        #: path substring -> number of failed answers still to give (``fail_status``)
        self.fail: Dict[str, int] = {}
        self.fail_status = 503
        #: path substring -> seconds to stall before answering
        self.stall: Dict[str, float] = {}
        #: path substring -> event the answer waits for (60 s at most): a test holds a
        #: request open while it checks what else the client does meanwhile
        self.gates: Dict[str, threading.Event] = {}
        self.ranges = True
        #: (path, Range header) of every range request answered
        self.range_log: List[tuple] = []
        #: exact path -> (status, body, content type[, extra headers]) answered verbatim
        self.raw: Dict[str, tuple] = {}
        #: path substring -> seconds between body bytes (headers go out at once)
        self.drip: Dict[str, float] = {}
        #: set when a dripping answer has sent its headers (tests wait on it)
        self.drip_started = threading.Event()
        #: path substring -> body bytes sent before the connection is cut (short of the
        #: announced Content-Length)
        self.truncate: Dict[str, int] = {}
        #: path substrings answered with a redirect to themselves
        self.redirect_loop: List[str] = []
        #: path substring -> bytes of filler sent without a Content-Length (a huge page)
        self.endless: Dict[str, int] = {}
        #: (user, password): every request must carry them as HTTP basic auth, else 401
        self.auth: Optional[tuple] = None
        #: (path, the Authorization header or None) of every request
        self.seen_auth: List[tuple] = []
        #: base URL of another server: file downloads are redirected there (302)
        self.redirect_files_to: Optional[str] = None
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._httpd: Optional[ThreadingHTTPServer] = None
        self._thread: Optional[threading.Thread] = None

    # -- setup ---------------------------------------------------------------------------
    def add_index(self, name: str, prefix: Optional[str] = None, **kwargs: object) -> Index:
        idx = Index(name, prefix=(prefix or f"{name}/simple").strip("/"), **kwargs)  # type: ignore[arg-type]
        self.indexes[name] = idx
        return idx

    @property
    def base(self) -> str:
        assert self._httpd is not None
        scheme = "https" if self.tls else "http"
        return f"{scheme}://127.0.0.1:{self._httpd.server_address[1]}"

    def url(self, index: str) -> str:
        return f"{self.base}/{self.indexes[index].prefix}"

    @property
    def port(self) -> int:
        assert self._httpd is not None
        return int(self._httpd.server_address[1])

    def requests(self, substring: str = "") -> List[str]:
        with self._lock:
            return [p for p in self.log if substring in p]

    # -- lifecycle -----------------------------------------------------------------------
    def __enter__(self) -> "IndexServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                server._handle(self)

            def do_HEAD(self) -> None:  # noqa: N802
                server._handle(self, head=True)

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        if self.tls:
            import ssl

            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(str(self.tls[0]), str(self.tls[1]))
            # the handshake happens on the handler's thread, at its first read: a client
            # that refuses the certificate cannot hold up the accepting loop
            self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True,
                                                 do_handshake_on_connect=False)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    # -- serving -------------------------------------------------------------------------
    def _handle(self, h: BaseHTTPRequestHandler, head: bool = False) -> None:
        path = unquote(h.path.split("?", 1)[0])
        given = h.headers.get("Authorization")
        with self._lock:
            self.log.append(path)
            self.seen_auth.append((path, given))
            if self.auth is not None:
                want = "Basic " + base64.b64encode(":".join(self.auth).encode()).decode()
                if given != want:
                    self._send(h, 401, b"authentication required", "text/plain", head,
                               headers={"WWW-Authenticate": 'Basic realm="index"'})
                    return
            if self.redirect_files_to and path.startswith("/files/"):
                h.send_response(302)
                h.send_header("Location", self.redirect_files_to + h.path)
                h.send_header("Content-Length", "0")
                h.end_headers()
                return
            for sub, n in list(self.fail.items()):
                if sub in path and n > 0:
                    self.fail[sub] = n - 1
                    self._send(h, self.fail_status, b"injected failure", "text/plain", head)
                    return
            stall = next((s for sub, s in self.stall.items() if sub in path), 0.0)
            gate = next((g for sub, g in self.gates.items() if sub in path), None)
            raw = self.raw.get(path)
            loop = any(sub in path for sub in self.redirect_loop)
            endless = next((n for sub, n in self.endless.items() if sub in path), None)
        if gate is not None:
            gate.wait(60)
        if stall:
            time.sleep(stall)
        if loop:
            h.send_response(302)
            h.send_header("Location", h.path)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        if endless is not None:
            self._send_endless(h, endless)
            return
        if raw is not None:
            status, body, ctype, *extra = raw
            self._send(h, status, body, ctype, head, headers=extra[0] if extra else None)
            return
        parts = [p for p in path.split("/") if p]
        if len(parts) == 3 and parts[0] == "files" and parts[1] in self.indexes:
            self._serve_file(h, self.indexes[parts[1]], parts[2], head)
            return
        idx = None
        rest: List[str] = []
        for cand in sorted(self.indexes.values(), key=lambda i: -len(i.prefix)):
            pre = cand.prefix.split("/")
            if parts[:len(pre)] == pre:
                idx, rest = cand, parts[len(pre):]
                break
        if idx is None:
            self._send(h, 404, b"not found", "text/plain", head)
            return
        if not rest:
            body = "".join(f'<a href="{p}/">{p}</a>\n' for p in sorted(idx.files))
            self._send(h, 200, body.encode(), "text/html", head)
            return
        project = canonical(rest[0])
        if project != rest[0]:
            h.send_response(301)
            h.send_header("Location", f"/{idx.prefix}/{project}/")
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        files = idx.files.get(project)
        if not files:
            self._send(h, 404, b"no such project", "text/plain", head)
            return
        accept = h.headers.get("Accept", "")
        if idx.json_api and "application/vnd.pypi.simple.v1+json" in accept:
            self._send(h, 200, self._json_page(idx, project, files),
                       "application/vnd.pypi.simple.v1+json", head)
        else:
            self._send(h, 200, self._html_page(idx, project, files), "text/html", head)

    def _serve_file(self, h: BaseHTTPRequestHandler, idx: Index, name: str,
                    head: bool) -> None:
        meta = name.endswith(".metadata")
        real = idx.find(name[: -len(".metadata")] if meta else name)
        if real is None or (meta and (not idx.pep658 or not real.name.endswith(".whl"))):
            self._send(h, 404, b"not found", "text/plain", head)
            return
        data = real.read_bytes()
        if meta:
            with zipfile.ZipFile(real) as zf:
                m = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
                self._send(h, 200, zf.read(m), "text/plain", head)
            return
        rng = h.headers.get("Range")
        if rng and self.ranges:
            with self._lock:
                self.range_log.append((h.path, rng))
            self._send_range(h, data, rng, head)
            return
        self._send(h, 200, data, "application/octet-stream", head)

    def _links(self, idx: Index, files: List[Path]) -> List[dict]:
        out = []
        for p in sorted(files, key=lambda p: p.name):
            data = p.read_bytes()
            d = {"filename": p.name, "url": f"/files/{idx.name}/{p.name}",
                 "sha256": idx.claims.get(p.name, hashlib.sha256(data).hexdigest()),
                 "size": len(data)}
            if idx.pep658 and p.name.endswith(".whl"):
                with zipfile.ZipFile(p) as zf:
                    m = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
                    d["meta_sha256"] = hashlib.sha256(zf.read(m)).hexdigest()
            out.append(d)
        return out

    def _html_page(self, idx: Index, project: str, files: List[Path]) -> bytes:
        rows = []
        for d in self._links(idx, files):
            attrs = [f'href="{d["url"]}#sha256={d["sha256"]}"']
            rp = idx.requires_python.get(d["filename"])
            if rp:
                attrs.append(f'data-requires-python="{html.escape(rp)}"')
            if d["filename"] in idx.yanked:
                attrs.append(f'data-yanked="{html.escape(idx.yanked[d["filename"]])}"')
            if "meta_sha256" in d:
                attrs.append(f'data-core-metadata="sha256={d["meta_sha256"]}"')
            rows.append(f'<a {" ".join(attrs)}>{d["filename"]}</a><br/>')
        return ("<!DOCTYPE html><html><body>\n" + "\n".join(rows) +
                "\n</body></html>\n").encode()

    def _json_page(self, idx: Index, project: str, files: List[Path]) -> bytes:
        out = []
        for d in self._links(idx, files):
            f = {"filename": d["filename"], "url": d["url"], "hashes": {"sha256": d["sha256"]},
                 "size": d["size"], "upload-time": "2024-01-01T00:00:00Z"}
            rp = idx.requires_python.get(d["filename"])
            if rp:
                f["requires-python"] = rp
            if d["filename"] in idx.yanked:
                f["yanked"] = idx.yanked[d["filename"]] or True
            if "meta_sha256" in d:
                f["core-metadata"] = {"sha256": d["meta_sha256"]}
            out.append(f)
        return json.dumps({"meta": {"api-version": "1.1"}, "name": project,
                           "files": out}).encode()

    def _send(self, h: BaseHTTPRequestHandler, status: int, body: bytes, ctype: str,
              head: bool, headers: Optional[Dict[str, str]] = None) -> None:
        path = unquote(h.path.split("?", 1)[0])
        with self._lock:
            drip = next((s for sub, s in self.drip.items() if sub in path), None)
            cut = next((n for sub, n in self.truncate.items() if sub in path), None)
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Accept-Ranges", "bytes" if self.ranges else "none")
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        if cut is not None:
            h.send_header("Connection", "close")
        h.end_headers()
        if head:
            return
        try:
            if drip is not None:
                h.wfile.flush()
                self.drip_started.set()
                for i in range(len(body)):
                    if self._stop.wait(drip):
                        break
                    h.wfile.write(body[i:i + 1])
                    h.wfile.flush()
                h.close_connection = True
            elif cut is not None:
                h.wfile.write(body[:cut])
                h.wfile.flush()
                h.close_connection = True
            else:
                h.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            h.close_connection = True

    def _send_endless(self, h: BaseHTTPRequestHandler, size: int) -> None:
        """``size`` bytes of HTML filler with no Content-Length: only a cap stops it."""
        h.send_response(200)
        h.send_header("Content-Type", "text/html")
        h.send_header("Connection", "close")
        h.end_headers()
        chunk = b"<!-- filler -->" * 4096
        sent = 0
        try:
            while sent < size and not self._stop.is_set():
                h.wfile.write(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        h.close_connection = True

    def _send_range(self, h: BaseHTTPRequestHandler, data: bytes, rng: str,
                    head: bool) -> None:
        m = re.match(r"bytes=(\d*)-(\d*)$", rng.strip())
        if not m:
            self._send(h, 416, b"", "text/plain", head)
            return
        size = len(data)
        if m.group(1) == "":
            n = int(m.group(2))
            start, end = max(0, size - n), size - 1
        else:
            start = int(m.group(1))
            end = int(m.group(2)) if m.group(2) else size - 1
        end = min(end, size - 1)
        body = data[start:end + 1]
        h.send_response(206)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head:
            h.wfile.write(body)


