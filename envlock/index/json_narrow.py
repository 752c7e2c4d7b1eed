"""A PEP 691 page's bytes cut down to the files a run's targets can use, before parsing.

A cold resolve reads every project page from the network once and keeps only the files
some target can install (:meth:`~envlock.index.pages.ProjectPage.narrowed`). Most of a
big page is wheels for other platforms and Pythons: pydantic-core's page is about 7 MB
and 15,000 files, of which a Linux x86_64 / Python 3.11 target can use a few hundred.
Decoding all of it (``json.loads``), checking it column by column and grouping it by tag
triple was the largest piece of CPU a cold resolve spends on pages, held under the GIL.

Here the page's file list is cut at the boundaries between its file objects (a ``}``,
``,``, ``{`` with only white space between them occurs in JSON text only between two
objects of an array, or inside a string), each file's name is found by one regular
expression over the whole list, and only the files whose tag triple the targets accept
(and every file without one, such as an sdist) are decoded, as a page of their own, by
the same parser and checks as a whole page (:func:`~envlock.index.pages.parse_json`).

Anything not in the plain shape this expects (no ``"files"`` list, two of them, one that
is not the page's own, a file name with an escape, a name count that does not match the
file count, a kept file that decodes to another name than the one found for it, a list
that does not end where its last object does, a page around the list that is not JSON)
returns None, and the caller parses the whole page as before. A file left out is one
whose own name says no target can install it, and it is not checked further (a damaged
file entry that no target could use does not fail the page); a page built to mislead this
cut could only hide files from this run, which its index could do anyway.
"""

from __future__ import annotations

import json
import os
import re
from itertools import compress
from typing import Callable, List, Optional, Tuple

from envlock.index.pages import triple_tails

__all__ = ["narrowed_json", "kept_names_match", "looks_json"]

#: the file list's opening (its key, the bracket, the first object's brace)
_FILES_AT = re.compile(rb'"files"\s*:\s*\[\s*\{')
#: between two objects of an array (see the module docstring)
_BETWEEN = re.compile(rb"\}\s*,\s*\{")
#: a file name without escapes (one with an escape matches nothing: the count check
#: sends the page to the whole parse)
_FILENAME = re.compile(rb'"filename"\s*:\s*"([^"\\]*)"')
_DECODER = json.JSONDecoder()


def looks_json(body: bytes, content_type: str) -> bool:
    """A JSON page (PEP 691), by its content type or its first byte; else HTML."""
    ctype = content_type.split(";")[0].strip().lower()
    return ctype.endswith("json") or body.lstrip()[:1] in (b"{", b"[")


def narrowed_json(body: bytes, fits: Callable[[str], bool]) -> Optional[Tuple[bytes, int]]:
    """``(page, listed)``: a PEP 691 page (bytes) holding only the files of ``body`` whose
    :func:`~envlock.index.pages.triple_key` passes ``fits`` (files with no triple always
    stay), in page order, and how many files ``body`` lists; None when ``body`` is not in
    the shape this reads (the caller then parses all of it). The caller decodes the page
    as any other and checks it with :func:`kept_names_match`."""
    at = _FILES_AT.search(body)
    if at is None or _FILES_AT.search(body, at.end()) is not None:
        return None
    start = at.end() - 1  # the first object's "{"
    # split whole, not a copy of the page from the list's opening on (megabytes, at the
    # peak of the cut's memory): so no boundary may come before the list
    if _BETWEEN.search(body, 0, start) is not None:
        return None
    parts = _BETWEEN.split(body)
    parts[0] = parts[0][start + 1:]
    names = _FILENAME.findall(body, start)
    if len(names) != len(parts):
        return None
    # the last object ends where the decoder says; the list must end right after it
    try:
        tail = "{" + parts[-1].decode("utf-8")
        _, end = _DECODER.raw_decode(tail)
    except (ValueError, RecursionError):
        return None
    after = tail[end:].lstrip()
    if not after.startswith("]"):
        return None
    # the page around the list must be JSON too (a page cut short after the list is
    # refused by the whole parse: not taken here), the list must be the page's own
    # "files" (not one inside another member, nor one a later "files" key overrides:
    # the list is replaced by a mark only this call knows, which must come back as the
    # page's files), and all of it UTF-8, as json.loads would have it
    mark = os.urandom(8).hex()
    try:
        skeleton = json.loads(body[:at.start()].decode("utf-8") + f'"files":["{mark}"'
                              + after)
        if not body.isascii():
            body.decode("utf-8")
    except (ValueError, RecursionError):
        return None
    if not isinstance(skeleton, dict) or skeleton.get("files") != [mark]:
        return None
    parts[-1] = tail[1:end - 1].encode("utf-8")
    # the names decoded together; fits is asked once per distinct triple (a page repeats
    # a few dozen over thousands of files)
    try:
        text = b"\n".join(names).decode("utf-8").split("\n")
    except UnicodeDecodeError:
        return None
    if len(text) != len(parts):
        return None  # (a name with a line break)
    keys = triple_tails(text)
    ok = {key: not key or fits("-" + key) for key in set(keys)}
    kept = list(compress(parts, map(ok.__getitem__, keys)))
    page = b'{"files":[{' + b"},{".join(kept) + b"}]}" if kept else b'{"files":[]}'
    return page, len(parts)


def kept_names_match(page_filenames: List[str], page: bytes) -> bool:
    """Whether the files decoded from a :func:`narrowed_json` page carry the names found
    for them in the bytes (a cut in the wrong place decodes to other names)."""
    return [n.decode("utf-8") for n in _FILENAME.findall(page)] == list(page_filenames)
