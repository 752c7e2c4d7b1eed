"""Distribution files and project pages of the simple repository API.

Parses PEP 503 HTML (with the PEP 592/658/714 ``data-*`` attributes) and PEP 691 JSON
into :class:`Dist` values. A page parses once and is cached in a compact JSON form, so
warm runs skip HTML entirely.
"""

from __future__ import annotations

import html
import json
from dataclasses import MISSING, dataclass
from dataclasses import fields as dataclass_fields
from functools import lru_cache
from html.parser import HTMLParser
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Tuple
from urllib.parse import urldefrag, urljoin

from packaging.tags import Tag
from packaging.utils import (
    BuildTag,
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import InvalidVersion, Version

__all__ = ["Dist", "ProjectPage", "parse_html", "parse_json", "page_from_cache", "page_to_cache"]

_HASH_NAMES = ("sha256", "sha384", "sha512")


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
            name, version, build, tags = parse_wheel_filename(fn)
            return str(name), version, build, tags, "wheel"
        if fn.endswith((".tar.gz", ".zip")):
            name, version = parse_sdist_filename(fn)
            return str(name), version, (), frozenset(), "sdist"
    except (InvalidWheelFilename, InvalidSdistFilename, InvalidVersion):
        return None
    return None


@dataclass(frozen=True)
class ProjectPage:
    name: str
    index: str
    url: str
    dists: Tuple[Dist, ...]


def _hashes_from_fragment(url: str) -> Tuple[str, Dict[str, str]]:
    clean, frag = urldefrag(url)
    hashes: Dict[str, str] = {}
    if "=" in frag:
        algo, _, value = frag.partition("=")
        if algo in _HASH_NAMES:
            hashes[algo] = value
    return clean, hashes


def _metadata_attr(value: Optional[str]) -> Optional[Dict[str, str]]:
    if value is None:
        return None
    value = value.strip()
    if value.lower() in ("", "true"):
        return {}
    if value.lower() == "false":
        return None
    algo, _, digest = value.partition("=")
    return {algo: digest} if digest else {}


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


def parse_html(text: str, page_url: str, index: str, project: str) -> ProjectPage:
    """PEP 503 HTML page -> ProjectPage."""
    parser = _AnchorParser()
    parser.feed(text)
    base = urljoin(page_url, parser.base) if parser.base else page_url
    dists: List[Dist] = []
    for attrs, textparts in parser.anchors:
        href = attrs.get("href")
        if not href:
            continue
        url, hashes = _hashes_from_fragment(urljoin(base, href))
        filename = "".join(textparts).strip() or url.rsplit("/", 1)[-1]
        rp = attrs.get("data-requires-python")
        yanked = attrs.get("data-yanked")
        meta = attrs.get("data-core-metadata", attrs.get("data-dist-info-metadata"))
        dists.append(Dist(
            filename=filename,
            url=url,
            index=index,
            hashes=hashes,
            requires_python=html.unescape(rp) if rp else None,
            yanked=yanked if yanked is not None else None,
            metadata=_metadata_attr(meta),
        ))
    return ProjectPage(name=canonicalize_name(project), index=index, url=page_url,
                       dists=tuple(dists))


def parse_json(data: Mapping[str, Any], page_url: str, index: str, project: str) -> ProjectPage:
    """PEP 691 JSON page -> ProjectPage."""
    dists: List[Dist] = []
    for f in data.get("files", []):
        url = f["url"]
        if not url.startswith(("https://", "http://")) or "/../" in url or "/./" in url:
            url = urljoin(page_url, url)  # absolute URLs (PyPI's) need no joining
        url, frag_hashes = _hashes_from_fragment(url)
        hashes = {k: v for k, v in (f.get("hashes") or {}).items() if k in _HASH_NAMES}
        hashes = hashes or frag_hashes
        yanked = f.get("yanked", False)
        meta = f.get("core-metadata", f.get("dist-info-metadata"))
        if meta is True:
            metadata: Optional[Dict[str, str]] = {}
        elif isinstance(meta, dict):
            metadata = {k: v for k, v in meta.items() if k in _HASH_NAMES}
        else:
            metadata = None
        dists.append(Dist(
            filename=f["filename"],
            url=url,
            index=index,
            hashes=hashes,
            requires_python=f.get("requires-python") or None,
            yanked=(yanked if isinstance(yanked, str) else "") if yanked else None,
            metadata=metadata,
            size=f.get("size"),
            upload_time=f.get("upload-time"),
        ))
    return ProjectPage(name=canonicalize_name(project), index=index, url=page_url,
                       dists=tuple(dists))


def page_to_cache(page: ProjectPage) -> bytes:
    """Compact JSON of a parsed page. URLs are stored without credentials: the transport
    adds them back per host, and the cache must never hold secrets."""
    from envlock.index.config import redact

    rows = [[d.filename, redact(d.url), d.hashes.get("sha256", ""), d.requires_python, d.yanked,
             None if d.metadata is None else dict(d.metadata), d.size, d.upload_time]
            for d in page.dists]
    return json.dumps({"name": page.name, "index": redact(page.index),
                       "url": redact(page.url), "files": rows},
                      separators=(",", ":")).encode()


def _dist(**fields: Any) -> Dist:
    """A Dist from trusted cached fields, without the frozen dataclass's per-field
    ``object.__setattr__`` (a page of torch or numpy holds thousands of files)."""
    d = object.__new__(Dist)
    d.__dict__.update(_DIST_DEFAULTS)
    d.__dict__.update(fields)
    return d


_DIST_DEFAULTS = {f.name: f.default for f in dataclass_fields(Dist)
                  if f.default is not MISSING}


def page_from_cache(blob: bytes) -> ProjectPage:
    data = json.loads(blob)
    index = data["index"]
    dists = tuple(
        _dist(filename=f, url=u, index=index, hashes={"sha256": h} if h else {},
              requires_python=rp, yanked=y, metadata=m, size=s, upload_time=t)
        for f, u, h, rp, y, m, s, t in data["files"]
    )
    return ProjectPage(name=data["name"], index=index, url=data["url"], dists=dists)
