"""The parsed-page cache: a project page in a compact form, and read back checked.

A warm resolve reads every project page from here, and a cold one writes them all (about
55,000 files for torch with transformers, accelerate and datasets), so the form is chosen
for reading. The files are kept by column (:data:`~envlock.index.pages.COLUMNS`), and the
columns whose values cannot hold a line break (file names, links and digests, as checked
pages have them) are single strings joined by line breaks, which JSON reads in one piece;
any column that does not fit that form is a JSON list. No list per file is made, read or
collected. Measured against the former form (a list per file): reading those pages back
0.15-0.20 s -> 0.12-0.14 s, writing unchanged (about 0.11 s).

The cache directory may be shared or planted, so :func:`page_from_cache` checks every file
as a page from the network is checked, column by column, and refuses the whole entry when
any file fails (the caller then parses the page again from its body). The entry is also
refused when it is another version of this form, or names another project, index or URL
(the caller checks those).
"""

from __future__ import annotations

import json
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, Dict, List, Mapping, Optional, Sequence

from envlock.index.pages import (
    _HEX_BYTES,
    _INT_OR_NONE,
    _STR,
    _STR_OR_NONE,
    COLUMNS,
    ProjectPage,
    _bare_names,
    _dist_from_row,
    _metadata_hashes,
    _sha256_digests,
    group_by_triple,
    triple_key,
)

__all__ = ["FORM", "page_from_cache", "page_to_cache"]

#: the version of the cached form; an entry of another version is parsed again
FORM = 2

#: the most files a cached page may say its index listed (a count no real page nears)
_MOST_LISTED = 10_000_000

#: columns that may be kept as one string joined by line breaks
_JOINABLE = frozenset({"filename", "url", "sha256", "metadata"})


def page_to_cache(page: ProjectPage) -> bytes:
    """The compact form of a parsed page. Links are kept without credentials: the
    transport adds them back per host, and the cache must never hold secrets."""
    from envlock.index.config import redact

    if page._cols is not None:
        # already checked and in this shape (from the JSON fast path, whose links cannot
        # carry credentials, or from this cache, written redacted)
        cols: Sequence[List[Any]] = page._cols
    else:
        dists = page.dists
        cols = [[d.filename for d in dists], [redact(d.url) for d in dists],
                [d.hashes.get("sha256", "") for d in dists],
                [d.requires_python for d in dists], [d.yanked for d in dists],
                [None if d.metadata is None else dict(d.metadata) for d in dists],
                [d.size for d in dists], [d.upload_time for d in dists]]
    groups = page.groups() if page._cols is not None else group_by_triple(cols[0])
    columns: Dict[str, Any] = {}
    for key, col in zip(COLUMNS, cols):
        if key == "metadata":
            col = _short_metadata(col)
        columns[key] = _joined(col) if key in _JOINABLE else col
    entry = {"form": FORM, "name": page.name, "index": redact(page.index),
             "url": redact(page.url), "n": len(cols[0]), "columns": columns, "groups": groups}
    if page.listed != len(cols[0]):
        # a JSON page read file by file keeps only the files a resolve can use, yet lists
        # more (see ProjectPage.listed): the count comes back with it, so a warm run
        # judges whether the index lists the project as the cold run did
        entry["listed"] = page.listed
    return json.dumps(entry, separators=(",", ":")).encode()


def _short_metadata(col: List[Any]) -> List[Any]:
    """The metadata column in its short form ("" none, "-" no hash, else the sha256)
    when every value has one of those shapes, else as it is."""
    kinds = set(map(type, col))
    if kinds == {str}:
        return col  # already short (read from this cache)
    if not kinds <= {dict, type(None)}:
        return col
    given = list(filter(None, col))
    if given and (set(map(len, given)) != {1} or set(map(next, map(iter, given))) != {"sha256"}):
        return col
    return ["" if m is None else m["sha256"] if m else "-" for m in col]


def _joined(col: List[Any]) -> Any:
    """One string joined by line breaks when every value is a string without one (and
    the column is not empty: "" would read back as one empty value), else the list."""
    if not col or set(map(type, col)) != {str}:
        return col
    text = "\n".join(col)
    return text if text.count("\n") == len(col) - 1 else col


def page_from_cache(blob: bytes) -> ProjectPage:
    """A page from :func:`page_to_cache`, checked like a page from the network: every
    file's name, link scheme, digests and field types, column by column; any file that
    fails rejects the whole entry. Raises ValueError, KeyError or TypeError."""
    data = json.loads(blob)
    if data.__class__ is not dict or data.get("form") != FORM:
        raise ValueError("another form of cached page")
    index, name, url, n = data["index"], data["name"], data["url"], data["n"]
    if not (isinstance(index, str) and isinstance(name, str) and isinstance(url, str)
            and n.__class__ is int and n >= 0):
        raise TypeError("not a cached page")
    columns = data["columns"]
    if columns.__class__ is not dict:
        raise TypeError("not a cached page")
    cols = [_column(columns[key], n, key in _JOINABLE) for key in COLUMNS]
    f, u, h, rp, y, m, s, t = cols
    for col, allowed in ((f, _STR), (u, _STR), (h, _STR), (rp, _STR_OR_NONE),
                         (y, _STR_OR_NONE), (s, _INT_OR_NONE), (t, _STR_OR_NONE)):
        if n and not set(map(type, col)) <= allowed:
            raise TypeError(f"a cached file of {name!r} has a field of the wrong type")
    _check_metadata(m, name)
    # file:// pages (local mirrors) may link file:// URLs: their files take the
    # file-by-file rules of the network path, which know that
    local = url.split(":", 1)[0].lower() == "file"
    if n and not local and not all(map(str.startswith, u, repeat(("https://", "http://")))):
        for link in u:  # the rule itself, one link at a time (another spelling, or not)
            if link.split(":", 1)[0].lower() not in ("http", "https"):
                raise ValueError(f"a cached link of {name!r} is not http(s)")
    if n and not _bare_names(f):
        raise ValueError(f"a cached file name of {name!r} is not a bare file name")
    if n and not _sha256_digests(h, empty_ok=True):
        raise ValueError(f"a cached sha256 of {name!r} is not 64 hex digits")
    listed = data.get("listed", n)
    if listed.__class__ is not int or not n <= listed <= _MOST_LISTED:
        raise TypeError("not a cached page")
    if local:
        rows = zip(*cols)
        dists = [_dist_from_row(_long_metadata(r), index, name, url) for r in rows]
        page = ProjectPage(name, index, url, [d for d in dists if d is not None])
    else:
        page = ProjectPage(name, index, url, columns=cols, groups=_cached_groups(data, f))
    page.listed = listed
    return page


def _column(value: Any, n: int, joinable: bool) -> List[Any]:
    """A column of ``n`` values, from a list or (``joinable``) a joined string."""
    if joinable and value.__class__ is str:
        col: List[Any] = value.split("\n")
    elif value.__class__ is list:
        col = value
    else:
        raise TypeError("a cached column is neither a list nor a string")
    if len(col) != n:
        raise ValueError("a cached column does not have one value per file")
    return col


def _check_metadata(col: List[Any], name: str) -> None:
    """The metadata column: the short form (each "", "-" or 64 lower-case hex digits,
    checked in C over the whole column), or None / hash mappings, each held to the
    network path's rule."""
    if not col:
        return
    kinds = set(map(type, col))
    if kinds == _STR:
        dashes = col.count("-")
        text = "".join(col)
        lengths = list(map(len, col))
        try:
            raw = text.replace("-", "").encode("ascii")
        except UnicodeEncodeError:
            raw = b"x"
        # every value "", "-" or 64 digits; the only dashes are the values "-"
        if (not set(lengths) <= {0, 1, 64} or lengths.count(1) != dashes
                or text.count("-") != dashes or raw.translate(None, _HEX_BYTES)):
            raise ValueError(f"a cached metadata hash of {name!r} is not 64 hex digits")
        return
    if not kinds <= {dict, type(None)}:
        raise TypeError(f"a cached metadata field of {name!r} has the wrong type")
    given = list(filter(None, col))
    if given and set(map(len, given)) == {1} and set(map(next, map(iter, given))) == {"sha256"} \
            and _sha256_digests(list(map(itemgetter("sha256"), given)), empty_ok=False):
        return
    for hashes in given:
        _metadata_hashes(hashes, name)  # MalformedPage (a ValueError): a bad digest


def _long_metadata(row: Sequence[Any]) -> List[Any]:
    """A row with its metadata field in the long form (None, {} or hashes)."""
    out = list(row)
    m = out[5]
    if m.__class__ is str:
        out[5] = None if not m else {} if m == "-" else {"sha256": m}
    return out


def _cached_groups(data: Mapping[str, Any],
                   filenames: Sequence[str]) -> Optional[Dict[str, List[int]]]:
    """The cached page's grouping by tag triple, when it is exactly what
    :func:`group_by_triple` makes of its file names (else None: it is computed again).
    Checked in C calls per group, not Python per file: every position once, and every
    name of a group ends with the group's triple (a triple holds exactly three dashes, so
    a name that ends with it has it as its :func:`triple_key`; a group of variant wheels,
    whose labels follow the triple, is checked name by name)."""
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
                    or not (all(map(str.endswith, names, repeat(key)))
                            # PEP 825 variant wheels: the label follows the triple
                            or all(triple_key(n) == key for n in names))):
                return None
        elif any(map(triple_key, names)):
            return None
    return groups
