"""Distribution files and project pages of the simple repository API.

Parses PEP 503 HTML (with the PEP 592/658/714 ``data-*`` attributes) and PEP 691 JSON
into :class:`Dist` values. This is the boundary where index text becomes data, so it is
checked here: a digest is exactly the right number of hex digits, a file name is a bare
name (no path, no control characters) and a file of another project is dropped, links go
to http(s) only, and anything else malformed raises :class:`MalformedPage`. A page parses once and is cached in a compact JSON form, so
warm runs skip HTML entirely.
"""

from __future__ import annotations

import html
import json
import re
import threading
from itertools import chain, repeat
from operator import itemgetter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple
from urllib.parse import urldefrag, urljoin

from packaging.tags import Tag, parse_tag
from packaging.utils import (
    BuildTag,
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
)
from packaging.version import InvalidVersion, Version

__all__ = ["Dist", "ProjectPage", "MalformedPage", "parse_html", "parse_json", "page_from_cache",
           "page_to_cache", "valid_digest"]



@dataclass(frozen=True)
class Dist:
    """One file on an index: a wheel or an sdist."""

    filename: str
    url: str
    index: str
    hashes: Mapping[str, str]
    requires_python: Optional[str] = None
    yanked: Optional[str] = None  # None: not yanked; "" or a reason: yanked
    #: PEP 658: None (no metadata file), {} (available, no hash) or its hashes
    metadata: Optional[Mapping[str, str]] = None
    size: Optional[int] = None
    upload_time: Optional[str] = None  # PEP 700, JSON pages only

    @property
    def parsed(self) -> Optional[Tuple[str, Version, BuildTag, FrozenSet[Tag], str]]:
        """(name, version, build, tags, kind) or None for a file we cannot use."""
        # A module-level LRU, not functools.cached_property: that takes one lock per
        # class in Python < 3.12, and the resolver's threads queued on it (measured).
        return _parse_filename(self.filename)

    @property
    def name(self) -> str:
        return self.parsed[0] if self.parsed else canonicalize_name(self.filename)

    @property
    def version(self) -> Version:
        assert self.parsed is not None
        return self.parsed[1]

    @property
    def is_wheel(self) -> bool:
        return bool(self.parsed) and self.parsed[4] == "wheel"  # type: ignore[index]

    @property
    def sha256(self) -> Optional[str]:
        return self.hashes.get("sha256")


@lru_cache(maxsize=1 << 16)
def _parse_filename(fn: str) -> Optional[Tuple[str, Version, BuildTag, FrozenSet[Tag], str]]:
    try:
        if fn.endswith(".whl"):
            name, version, build, tags = _parse_wheel_filename(fn)
            return str(name), version, build, tags, "wheel"
        if fn.endswith((".tar.gz", ".zip")):
            stem = fn[:-7] if fn.endswith(".tar.gz") else fn[:-4]
            name_part, sep, version_part = stem.rpartition("-")
            if not sep:
                return None
            return _canon(name_part), _version(version_part), (), frozenset(), "sdist"
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None


def _parse_wheel_filename(fn: str) -> Tuple[str, Version, BuildTag, FrozenSet[Tag]]:
    """``packaging.utils.parse_wheel_filename`` (same rules, same answers: a test holds
    them equal), with its version and tag parses shared: a release's wheels for many
    platforms repeat one version string, and a page repeats a few dozen tag strings."""
    stem = fn[:-4]
    dashes = stem.count("-")
    if dashes not in (4, 5):
        raise InvalidWheelFilename(f"Invalid wheel filename (wrong number of parts): {stem!r}")
    parts = stem.split("-", dashes - 2)
    name_part = parts[0]
    if "__" in name_part or _WHEEL_NAME.match(name_part) is None:
        raise InvalidWheelFilename(f"Invalid project name: {stem!r}")
    version = _version(parts[1])
    build: BuildTag = ()
    if dashes == 5:
        m = _BUILD_TAG.match(parts[2])
        if m is None:
            raise InvalidWheelFilename(f"Invalid build number: {parts[2]} in {stem!r}")
        build = (int(m.group(1)), m.group(2))
    return _canon(name_part), version, build, _tags(parts[-1])


_WHEEL_NAME = re.compile(r"^[\w\d._]*$", re.UNICODE)
_BUILD_TAG = re.compile(r"(\d+)(.*)", re.ASCII)  # as packaging: ASCII digits only


@lru_cache(maxsize=1 << 14)
def _version(text: str) -> Version:
    """A parsed version, shared (Version is immutable). Raises InvalidVersion."""
    return Version(text)


@lru_cache(maxsize=4096)
def _tags(text: str) -> FrozenSet[Tag]:
    return parse_tag(text)


class ProjectPage:
    """A project's files on one index, in page order.

    A page from the parsed-page cache keeps its rows as plain data and makes a
    :class:`Dist` of a row only when asked (:meth:`select`): a page such as
    pydantic-core's lists ~15,000 files, and a target can use a few dozen of them, so
    building every one was most of a warm resolve. Every row is checked when the page is
    loaded (:func:`page_from_cache`); what waits is only the object.
    """

    __slots__ = ("name", "index", "url", "filenames", "_rows", "_made", "_selected", "_lock",
                 "_groups")

    def __init__(self, name: str, index: str, url: str, dists: Sequence[Dist] = (),
                 *, rows: Optional[Sequence[Sequence[Any]]] = None,
                 groups: Optional[Dict[str, List[int]]] = None) -> None:
        self.name = name
        self.index = index
        self.url = url
        #: the rows of a cached page (checked), made into Dists on first use
        self._rows = rows
        #: file positions by :func:`triple_key` (computed on first use when not given)
        self._groups = groups
        if rows is None:
            self._made: List[Any] = list(dists)
            self.filenames: Tuple[str, ...] = tuple(d.filename for d in dists)
        else:
            self._made = [_UNMADE] * len(rows)
            self.filenames = tuple(r[0] for r in rows)
        self._selected: Dict[Callable[[str], bool], Tuple[Dist, ...]] = {}
        self._lock = threading.Lock()

    def _dist(self, i: int) -> Optional[Dist]:
        d = self._made[i]
        if d is _UNMADE:
            assert self._rows is not None
            d = self._made[i] = _dist_from_checked_row(self._rows[i], self.index, self.name)
        return d

    def select(self, keep: Callable[[str], bool]) -> List[Dist]:
        """The files whose name passes ``keep``, without making the others. Remembered
        per ``keep`` (a resolver's worker threads and its main thread ask for the same
        page at the same moment); the lock is held for CPU work only, never a wait."""
        with self._lock:
            hit = self._selected.get(keep)
            if hit is None:
                hit = self._selected[keep] = tuple(self._select(keep))
        return list(hit)

    def _select(self, keep: Callable[[str], bool]) -> List[Dist]:
        out = []
        for i, fn in enumerate(self.filenames):
            if keep(fn):
                d = self._dist(i)
                if d is not None:
                    out.append(d)
        return out

    def select_triples(self, fits: Callable[[str], bool]) -> List[Dist]:
        """The files whose :func:`triple_key` passes ``fits`` (files with no triple, such
        as sdists, always pass), in page order. ``fits`` is asked once per distinct triple,
        not once per file: a page such as pydantic-core's repeats ~100 triples over
        ~15,000 files. Remembered per ``fits``, like :meth:`select`."""
        with self._lock:
            hit = self._selected.get(fits)
            if hit is None:
                groups = self.groups()
                idx: List[int] = []
                for key, ids in groups.items():
                    if not key or fits(key):
                        idx.extend(ids)
                idx.sort()
                made = map(self._dist, idx)
                hit = self._selected[fits] = tuple(d for d in made if d is not None)
        return list(hit)

    def groups(self) -> Dict[str, List[int]]:
        """File positions by tag triple (see :func:`triple_key`), the form the cache keeps."""
        if self._groups is None:
            self._groups = group_by_triple(self.filenames)
        return self._groups

    @property
    def dists(self) -> Tuple[Dist, ...]:
        """Every usable file (files of other projects are left out)."""
        return tuple(self.select(_everything))

    def __repr__(self) -> str:
        return f"ProjectPage({self.name!r}, {self.index!r}, {len(self.filenames)} files)"


_UNMADE = object()


def triple_key(filename: str) -> str:
    """A wheel file name's ``"-python-abi-platform.whl"`` ending, the part that says which
    machines it fits; "" for anything else (an sdist, a malformed name: judged later)."""
    if not filename.endswith(".whl"):
        return ""
    end = filename.rfind("-")
    end = filename.rfind("-", 0, end)
    start = filename.rfind("-", 0, end)
    return filename[start:] if start >= 0 else ""


def group_by_triple(filenames: Sequence[str]) -> Dict[str, List[int]]:
    """Positions of ``filenames`` by :func:`triple_key`, each list ascending."""
    groups: Dict[str, List[int]] = {}
    for i, fn in enumerate(filenames):
        key = triple_key(fn)
        ids = groups.get(key)
        if ids is None:
            groups[key] = [i]
        else:
            ids.append(i)
    return groups


def _everything(_filename: str) -> bool:
    return True


#: hex digits per algorithm: a digest of any other shape is not a digest
_HEX_LEN = {"sha256": 64, "sha384": 96, "sha512": 128}
_HEX = frozenset("0123456789abcdef")
#: the same checks as regular expressions (one C call instead of a Python loop per
#: character: pages hold thousands of files, and every cached page is checked again)
_HEX_RE = re.compile(r"[0-9a-fA-F]+")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PLAIN_URL = re.compile(r"https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?/[A-Za-z0-9._~/%+=,@-]*"
                        r"(#[A-Za-z0-9=]+)?")


class MalformedPage(ValueError):
    """A project page that a well-behaved index would never send."""


def valid_digest(algo: str, value: object) -> bool:
    """Whether ``value`` is a ``algo`` digest: exactly the right number of hex digits."""
    return (isinstance(value, str) and len(value) == _HEX_LEN.get(algo, -1)
            and _HEX_RE.fullmatch(value) is not None)


def _clean_hashes(raw: Mapping[str, object], where: str) -> Dict[str, str]:
    """Known algorithms only, each a well-formed digest (lower case); anything else that
    claims to be one of them is refused, since a lock and cache paths depend on it."""
    out: Dict[str, str] = {}
    for algo, value in raw.items():
        if algo not in _HEX_LEN:
            continue
        if not valid_digest(algo, value):
            raise MalformedPage(f"{where}: {algo} is not {_HEX_LEN[algo]} hex digits")
        out[algo] = str(value).lower()
    return out


def _bad_filename(filename: str) -> Optional[str]:
    """Why ``filename`` cannot be a file name on an index (None when it can)."""
    if not filename:
        return "an empty file name"
    if "/" in filename or "\\" in filename:
        return "a path, not a file name"
    if filename in (".", "..") or filename.startswith(".."):
        return "a relative path"
    if _CONTROL.search(filename):
        return "control characters"
    if len(filename) > 255:
        return "a name over 255 characters"
    return None


def _hashes_from_fragment(url: str, where: str) -> Tuple[str, Dict[str, str]]:
    clean, frag = urldefrag(url)
    hashes: Dict[str, str] = {}
    if "=" in frag:
        algo, _, value = frag.partition("=")
        hashes = _clean_hashes({algo: value}, where)
    return clean, hashes


def _metadata_attr(value: Optional[str], where: str) -> Optional[Dict[str, str]]:
    if value is None:
        return None
    value = value.strip()
    if value.lower() in ("", "true"):
        return {}
    if value.lower() == "false":
        return None
    algo, _, digest = value.partition("=")
    if not digest:
        return {}
    return _metadata_hashes({algo: digest}, where)


def _metadata_hashes(raw: Mapping[str, object], where: str) -> Optional[Dict[str, str]]:
    """PEP 658 hashes we can check. Only algorithms we do not know: treat the metadata
    file as absent (read the wheel instead), since it could not be verified."""
    known = _clean_hashes(raw, where + " metadata")
    if raw and not known:
        return None
    return known


def _join(base: str, href: str, where: str) -> str:
    if _PLAIN_URL.fullmatch(href) and "/." not in href:
        return href  # absolute, plain ASCII, no dot segments (PyPI's links): urljoin's answer
    try:
        return urljoin(base, href)
    except ValueError as exc:
        raise MalformedPage(f"{where}: unusable link {href[:80]!r} ({exc})") from None


def _make_dist(filename: str, url: str, index: str, project: str, page_url: str,
               **kw: Any) -> Optional[Dist]:
    """A validated :class:`Dist`, or None for a file that is not ``project``'s wheel or
    sdist (pip ignores those too). Raises :class:`MalformedPage` for hostile entries."""
    why = _bad_filename(filename)
    if why is not None:
        raise MalformedPage(f"file name {filename[:80]!r} is {why}")
    scheme = url.split(":", 1)[0].lower()
    page_scheme = page_url.split(":", 1)[0].lower()
    allowed = ("http", "https", "file") if page_scheme == "file" else ("http", "https")
    if scheme not in allowed:
        raise MalformedPage(f"{filename}: link to a {scheme}: URL")
    d = Dist(filename=filename, url=url, index=index, **kw)
    if filename.endswith(".whl"):
        # A wheel's project is its first dash-separated field: that check is cheap, and the
        # full parse (version, tags) waits until a resolver looks at the file. A file that
        # does not parse then is ignored there (``parsed`` is None, ``is_wheel`` False).
        if _canon(filename.split("-", 1)[0]) != _canon(project):
            return None
        return d
    if d.parsed is None or d.parsed[0] != _canon(project):
        return None
    return d


@lru_cache(maxsize=4096)
def _canon(name: str) -> str:
    return str(canonicalize_name(name))


@lru_cache(maxsize=None)
def _anchor_parser_class() -> Any:
    """The class of an HTML parser that collects anchors (html.parser is imported only
    for an HTML page: warm runs read parsed pages from the cache)."""
    from html.parser import HTMLParser

    class _AnchorParser(HTMLParser):
        def __init__(self) -> None:
            super().__init__(convert_charrefs=True)
            self.base: Optional[str] = None
            self.anchors: List[Tuple[Dict[str, Optional[str]], List[str]]] = []
            self._current: Optional[Tuple[Dict[str, Optional[str]], List[str]]] = None

        def handle_starttag(self, tag: str, attrs: List[Tuple[str, Optional[str]]]) -> None:
            if tag == "base" and self.base is None:
                self.base = dict(attrs).get("href")
            elif tag == "a":
                self._current = (dict(attrs), [])
                self.anchors.append(self._current)

        def handle_endtag(self, tag: str) -> None:
            if tag == "a":
                self._current = None

        def handle_data(self, data: str) -> None:
            if self._current is not None:
                self._current[1].append(data)

    return _AnchorParser


def parse_html(text: str, page_url: str, index: str, project: str) -> ProjectPage:
    """PEP 503 HTML page -> ProjectPage. Raises :class:`MalformedPage`."""
    parser = _anchor_parser_class()()
    parser.feed(text)
    parser.close()
    base = _join(page_url, parser.base, page_url) if parser.base else page_url
    dists: List[Dist] = []
    for attrs, textparts in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        url, hashes = _hashes_from_fragment(_join(base, href, page_url), page_url)
        filename = "".join(textparts).strip() or url.rsplit("/", 1)[-1]
        rp = attrs.get("data-requires-python")
        yanked = attrs.get("data-yanked")
        meta = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
        d = _make_dist(
            filename, url, index, project, page_url,
            hashes=hashes,
            requires_python=html.unescape(rp) if rp else None,
            yanked=yanked if yanked is not None else None,
            metadata=_metadata_attr(meta, filename),
        )
        if d is not None:
            dists.append(d)
    return ProjectPage(name=canonicalize_name(project), index=index, url=page_url,
                       dists=tuple(dists))


def _opt_str(f: Mapping[str, Any], key: str, where: str) -> Optional[str]:
    value = f.get(key)
    if value is None or isinstance(value, str):
        return value
    raise MalformedPage(f"{where}: {key} is a {type(value).__name__}, not a string")


def parse_json(data: Any, page_url: str, index: str, project: str) -> ProjectPage:
    """PEP 691 JSON page -> ProjectPage. Raises :class:`MalformedPage`."""
    if not isinstance(data, dict):
        raise MalformedPage(f"the page is a JSON {type(data).__name__}, not an object")
    files = data.get("files", [])
    if not isinstance(files, list):
        raise MalformedPage("'files' is not a list")
    fast = _json_rows(files)
    if fast is not None:
        return ProjectPage(canonicalize_name(project), index, page_url, rows=fast)
    return _parse_json_rows(files, page_url, index, project)


#: absolute plain http(s) links without a fragment or dot segment, one per line
_PLAIN_URL_LINES = re.compile(r"(?:https?://[A-Za-z0-9.-]+(?::[0-9]{1,5})?/"
                              r"[A-Za-z0-9._~/%+=,@-]*\n)*")


def _json_rows(files: List[Any]) -> Optional[List[List[Any]]]:
    """The rows of a PEP 691 file list in the common shape (PyPI's), checked column by
    column in a few C calls, or None when any file is in another shape: then the
    file-by-file path (:func:`_parse_json_rows`) decides, and names what is wrong.

    What passes here is exactly what that path would accept unchanged: a bare file name,
    an absolute plain http(s) link (no fragment, no dot segment, so ``urljoin`` would
    return it as it is), a ``sha256`` of 64 lower-case hex digits as the only hash, and
    plain values for the other fields. A :class:`Dist` is made of a row only when it is
    used (:class:`ProjectPage`), through the same checks again.
    """
    rows: List[List[Any]] = []
    add = rows.append
    digests: List[str] = []
    str_ = str
    for f in files:
        if f.__class__ is not dict:
            return None
        filename = f.get("filename")
        href = f.get("url")
        hashes = f.get("hashes")
        if filename.__class__ is not str_ or href.__class__ is not str_ \
                or hashes.__class__ is not dict or len(hashes) != 1:
            return None
        sha = hashes.get("sha256")
        if sha.__class__ is not str_:
            return None
        yanked = f.get("yanked", False)
        if yanked is False:
            y = None
        elif yanked is True:
            y = ""
        elif yanked.__class__ is str_:
            y = yanked or None
        else:
            return None
        meta = f.get("core-metadata", f.get("dist-info-metadata"))
        if meta is None or meta is False:
            m = None
        elif meta is True:
            m = {}
        elif meta.__class__ is dict and len(meta) == 1 and \
                meta.get("sha256").__class__ is str_:
            m = meta
            digests.append(meta["sha256"])
        else:
            return None
        rp = f.get("requires-python")
        size = f.get("size")
        upload = f.get("upload-time")
        if not ((rp is None or rp.__class__ is str_) and (upload is None or upload.__class__ is str_)
                and (size is None or (size.__class__ is int and size >= 0))):
            return None
        digests.append(sha)
        add([filename, href, sha, rp or None, y, m, size, upload])
    n = len(rows)
    if not n:
        return rows
    if not _bare_names([r[0] for r in rows]):
        return None
    links = "\n".join([r[1] for r in rows]) + "\n"
    if links.count("\n") != n or "/." in links or _PLAIN_URL_LINES.fullmatch(links) is None:
        return None  # (a link with a line break in it: urljoin would drop the break)
    if not _sha256_digests(digests, empty_ok=False):
        return None
    return rows


def _parse_json_rows(files: List[Any], page_url: str, index: str,
                     project: str) -> ProjectPage:
    dists: List[Dist] = []
    for i, f in enumerate(files):
        where = f"files[{i}]"
        if not isinstance(f, dict):
            raise MalformedPage(f"{where} is not an object")
        filename = f.get("filename")
        href = f.get("url")
        if not isinstance(filename, str) or not isinstance(href, str):
            raise MalformedPage(f"{where}: filename and url must be strings")
        where = filename[:80] if _bad_filename(filename) is None else where
        url, frag_hashes = _hashes_from_fragment(_join(page_url, href, where), where)
        raw_hashes = f.get("hashes") or {}
        if not isinstance(raw_hashes, dict):
            raise MalformedPage(f"{where}: hashes is a {type(raw_hashes).__name__}, "
                                f"not an object")
        hashes = _clean_hashes(raw_hashes, where) or frag_hashes
        yanked = f.get("yanked", False)
        if not isinstance(yanked, (bool, str)):
            raise MalformedPage(f"{where}: yanked is neither a boolean nor a string")
        meta = f.get("core-metadata", f.get("dist-info-metadata"))
        if meta is True:
            metadata: Optional[Dict[str, str]] = {}
        elif isinstance(meta, dict):
            metadata = _metadata_hashes(meta, where)
        elif meta is None or meta is False:
            metadata = None
        else:
            raise MalformedPage(f"{where}: core-metadata is neither a boolean nor an object")
        size = f.get("size")
        if size is not None and (isinstance(size, bool) or not isinstance(size, int)
                                 or size < 0):
            raise MalformedPage(f"{where}: size is not a non-negative integer")
        d = _make_dist(
            filename, url, index, project, page_url,
            hashes=hashes,
            requires_python=_opt_str(f, "requires-python", where) or None,
            yanked=(yanked if isinstance(yanked, str) else "") if yanked else None,
            metadata=metadata,
            size=size,
            upload_time=_opt_str(f, "upload-time", where),
        )
        if d is not None:
            dists.append(d)
    return ProjectPage(name=canonicalize_name(project), index=index, url=page_url,
                       dists=tuple(dists))


def page_to_cache(page: ProjectPage) -> bytes:
    """Compact JSON of a parsed page. URLs are stored without credentials: the transport
    adds them back per host, and the cache must never hold secrets."""
    from envlock.index.config import redact

    if page._rows is not None:
        # rows already checked and in this shape (from :func:`_json_rows`, whose links
        # cannot carry credentials, or from this cache, written redacted)
        rows: List[Any] = list(page._rows)
    else:
        rows = [[d.filename, redact(d.url), d.hashes.get("sha256", ""), d.requires_python,
                 d.yanked, None if d.metadata is None else dict(d.metadata), d.size,
                 d.upload_time]
                for d in page.dists]
    groups = page.groups() if page._rows is not None else group_by_triple([r[0] for r in rows])
    return json.dumps({"name": page.name, "index": redact(page.index),
                       "url": redact(page.url), "files": rows, "groups": groups},
                      separators=(",", ":")).encode()


_HEX_BYTES = b"0123456789abcdef"


def _bare_names(names: Sequence[str]) -> bool:
    """:func:`_bad_filename`'s rules for a whole column at once, in C: joined by "/"
    (which no bare name holds), the count of "/" shows whether any name held one."""
    joined = "/".join(names)
    return (joined.count("/") == len(names) - 1 and "\\" not in joined
            and _no_controls(joined)
            and min(map(len, names)) >= 1 and max(map(len, names)) <= 255
            and "/.." not in "/" + joined and "/./" not in "/" + joined + "/")


_CONTROL_BYTES = bytes(range(0x20)) + b"\x7f"


def _no_controls(text: str) -> bool:
    """``_CONTROL.search(text) is None``; for ASCII text (every PyPI file name) by deleting
    the control bytes in one pass, several times faster than the regex on megabytes."""
    if text.isascii():
        raw = text.encode("ascii")
        return len(raw.translate(None, _CONTROL_BYTES)) == len(raw)
    return _CONTROL.search(text) is None


def _sha256_digests(digests: Sequence[str], empty_ok: bool) -> bool:
    """Every value 64 lower-case hex digits (or empty, when ``empty_ok``), in C."""
    if not set(map(len, digests)) <= ({0, 64} if empty_ok else {64}):
        return False
    try:
        raw = "".join(digests).encode("ascii")
    except UnicodeEncodeError:
        return False
    return not raw.translate(None, _HEX_BYTES)
_STR = frozenset({str})
_STR_OR_NONE = frozenset({str, type(None)})
_INT_OR_NONE = frozenset({int, type(None)})
_DICT_OR_NONE = frozenset({dict, type(None)})


def page_from_cache(blob: bytes) -> ProjectPage:
    """A page from :func:`page_to_cache`, checked like a page from the network (the cache
    directory may be shared or planted): every row's file name, link scheme, digests and
    field types are checked here, column by column, and any row that fails rejects the
    whole entry (the caller parses the page again). Making each file's :class:`Dist`
    waits until it is used. Raises ValueError, KeyError or TypeError."""
    data = json.loads(blob)
    index, name, url = data["index"], data["name"], data["url"]
    files = data["files"]
    if not (isinstance(index, str) and isinstance(name, str) and isinstance(url, str)
            and isinstance(files, list)):
        raise TypeError("not a cached page")
    # file:// pages (local mirrors) may link file:// URLs: their rows take the row-by-row
    # rules of the network path, which know that
    local = url.split(":", 1)[0].lower() == "file"
    n = len(files)
    if n and (set(map(type, files)) != {list} or set(map(len, files)) != {8}):
        raise TypeError(f"a cached row of {name!r} is not a row")
    # one column at a time, in C (zip, map, join, one regex): pages hold ~50,000 rows
    f, u, h, rp, y, m, s, t = zip(*files) if n else ((),) * 8
    for col, allowed in ((f, _STR), (u, _STR), (h, _STR), (rp, _STR_OR_NONE),
                         (y, _STR_OR_NONE), (s, _INT_OR_NONE), (t, _STR_OR_NONE),
                         (m, _DICT_OR_NONE)):
        if not set(map(type, col)) <= allowed:
            raise TypeError(f"a cached row of {name!r} has a field of the wrong type")
    if n and not local and not all(map(str.startswith, u, repeat(("https://", "http://")))):
        for link in u:  # the rule itself, one link at a time (another spelling, or not)
            if link.split(":", 1)[0].lower() not in ("http", "https"):
                raise ValueError(f"a cached link of {name!r} is not http(s)")
    if not _one_sha256_each(m):
        for hashes in m:
            if hashes is not None:
                _metadata_hashes(hashes, name)  # MalformedPage (a ValueError): a bad digest
    if n and not _bare_names(f):
        raise ValueError(f"a cached file name of {name!r} is not a bare file name")
    if n and not _sha256_digests(h, empty_ok=True):
        raise ValueError(f"a cached sha256 of {name!r} is not 64 hex digits")
    if local:
        dists = [_dist_from_row(r, index, name, url) for r in files]
        return ProjectPage(name, index, url, [d for d in dists if d is not None])
    return ProjectPage(name, index, url, rows=files, groups=_cached_groups(data, f))


def _one_sha256_each(hashes: Sequence[Optional[Mapping[str, Any]]]) -> bool:
    """Whether every metadata hash mapping in the column is None, empty or exactly one
    well-formed sha256 (PyPI's shape), checked in C; False sends the caller to the
    row-by-row rule."""
    given = list(filter(None, hashes))
    if not given:
        return True
    if set(map(len, given)) != {1} or set(map(next, map(iter, given))) != {"sha256"}:
        return False
    return _sha256_digests(list(map(itemgetter("sha256"), given)), empty_ok=False)


def _cached_groups(data: Mapping[str, Any],
                   filenames: Sequence[str]) -> Optional[Dict[str, List[int]]]:
    """The cached page's grouping by tag triple, when it is exactly what
    :func:`group_by_triple` makes of its file names (else None: it is computed again).
    Checked in C calls per group, not Python per file: every position once, and every
    name of a group ends with the group's triple (a triple holds exactly three dashes, so
    a name that ends with it has it as its :func:`triple_key`)."""
    groups = data.get("groups")
    if groups is None or groups.__class__ is not dict:
        return None
    n = len(filenames)
    ids_lists = list(groups.values())
    if not set(map(type, groups)) <= _STR or not set(map(type, ids_lists)) <= {list}:
        return None
    every = list(chain.from_iterable(ids_lists))
    # n ints, all different, from 0 to n - 1: every position exactly once
    if len(every) != n or not set(map(type, every)) <= {int} or (
            n and (len(set(every)) != n or min(every) != 0 or max(every) != n - 1)):
        return None
    for key, ids in groups.items():
        if not ids:
            return None
        names = [filenames[ids[0]]] if len(ids) == 1 else list(itemgetter(*ids)(filenames))
        if key:
            if (key.count("-") != 3 or not key.startswith("-") or not key.endswith(".whl")
                    or not all(map(str.endswith, names, repeat(key)))):
                return None
        elif any(map(triple_key, names)):
            return None
    return groups


def _dist_from_checked_row(row: Sequence[Any], index: str, project: str) -> Optional[Dist]:
    """A row that passed the column checks (:func:`page_from_cache`, :func:`_json_rows`)
    as a :class:`Dist`, or None for a file that is not ``project``'s wheel or sdist: the
    same answer as :func:`_dist_from_row` without checking each field a second time."""
    f, u, h, rp, y, m, s, t = row
    if m is not None:
        sha = m.get("sha256") if len(m) == 1 else None
        m = {"sha256": sha.lower()} if sha is not None else _metadata_hashes(m, f)
    d = Dist(f, u, index, {"sha256": h} if h else {}, rp, y, m, s, t)
    if f.endswith(".whl"):
        return d if _canon(f.split("-", 1)[0]) == _canon(project) else None
    p = d.parsed
    return d if p is not None and p[0] == _canon(project) else None


def _dist_from_row(row: Sequence[Any], index: str, project: str,
                   page_url: str) -> Optional[Dist]:
    """A cached row as a :class:`Dist` (None: not ``project``'s wheel or sdist), through
    the same checks as a file from the network."""
    f, u, h, rp, y, m, s, t = row
    return _make_dist(f, u, index, project, page_url,
                      hashes=_clean_hashes({"sha256": h}, f) if h else {},
                      requires_python=rp, yanked=y,
                      metadata=None if m is None else _metadata_hashes(m, f),
                      size=s, upload_time=t)
