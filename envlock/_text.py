"""Control characters in text that ends up in a rendered file or a one-line message.

A newline in a lock's ``command`` would otherwise start a new, active line in an exported
requirements file or Dockerfile; an escape sequence would rewrite a terminal. Everything
envlock renders from data passes through :func:`escape_controls`; everything it reads
from a lock is checked with :func:`first_control`.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Callable, Dict, Optional, Tuple

__all__ = ["CONTROL", "escape_controls", "first_control", "map_strings", "clean_for_output",
           "terminal_safe"]

#: C0 and C1 control characters, DEL, the Unicode line and paragraph separators (which
#: some editors and YAML parsers treat as line breaks), and lone surrogates (a JSON
#: ``"\ud800"`` decodes to one; no UTF-8 stream can write it)
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
#: what :func:`terminal_safe` escapes: CONTROL less line breaks and tabs
_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
#: a colour sequence (SGR) as envlock's own styles write them: kept by terminal_safe
_SGR = re.compile("\x1b\\[[0-9;]{0,32}m")


def escape_controls(text: str) -> str:
    r"""``text`` with every control character written as a visible escape.

    >>> escape_controls("a\nb\x1b")
    'a\\nb\\x1b'
    """
    if not CONTROL.search(text):
        return text
    return CONTROL.sub(_escape, text)


def _escape(m: "re.Match[str]") -> str:
    c = m.group(0)
    return {"\n": "\\n", "\r": "\\r", "\t": "\\t"}.get(c, f"\\x{ord(c):02x}" if ord(c) < 256
                                                      else f"\\u{ord(c):04x}")


def terminal_safe(text: str) -> str:
    r"""``text`` as it may be written to a terminal: every control character but line
    breaks, tabs and colour sequences (SGR, which only colour) written as a visible
    escape, so a snapshot's hostname or an index's file name cannot move the cursor, set
    the window title or clear the screen; lone surrogates escaped too (writing one would
    fail).

    >>> terminal_safe("ok\x1b[1mbold\x1b[0m \x1b]0;title\x07")
    'ok\x1b[1mbold\x1b[0m \\x1b]0;title\\x07'
    """
    if not _TERMINAL.search(text):
        return text
    if "\x1b" not in text:
        return _TERMINAL.sub(_escape, text)
    out = []
    pos = 0
    for m in _SGR.finditer(text):
        out.append(_TERMINAL.sub(_escape, text[pos:m.start()]))
        out.append(m.group(0))
        pos = m.end()
    out.append(_TERMINAL.sub(_escape, text[pos:]))
    return "".join(out)


def first_control(text: str) -> Optional[str]:
    """The first control character in ``text`` (as an escape), or None."""
    m = CONTROL.search(text)
    return None if m is None else _escape(m)


def map_strings(obj: Any, fn: Callable[[str], str]) -> Any:
    """``obj`` (frozen dataclasses, tuples, lists, dicts, strings) with ``fn`` applied to
    every string in it, keys included; other values are kept. New fields of a dataclass
    are covered without naming them.

    What ``fn`` leaves unchanged is returned as the same object, not a copy: a lock holds
    tens of thousands of strings and nearly none has anything to escape, and rebuilding
    every dataclass with ``dataclasses.replace`` was a fifth of a cold resolve's CPU
    (measured on torch + transformers + accelerate + datasets)."""
    if obj.__class__ is str:
        new = fn(obj)
        return obj if new == obj else new
    if isinstance(obj, str):
        return fn(obj)
    if isinstance(obj, tuple):
        items = [map_strings(x, fn) for x in obj]
        if all(map(_same, items, obj)) and not hasattr(obj, "_fields"):
            return obj
        return obj.__class__(*items) if hasattr(obj, "_fields") else tuple(items)
    if isinstance(obj, list):
        items = [map_strings(x, fn) for x in obj]
        return obj if all(map(_same, items, obj)) else items
    if isinstance(obj, dict):
        pairs = [(map_strings(k, fn), map_strings(v, fn)) for k, v in obj.items()]
        if all(nk is k and nv is v for (nk, nv), (k, v) in zip(pairs, obj.items())):
            return obj
        return dict(pairs)
    names = _init_fields(obj.__class__)
    if names is not None:
        changes = {}
        for name in names:
            value = getattr(obj, name)
            new = map_strings(value, fn)
            if new is not value:
                changes[name] = new
        return dataclasses.replace(obj, **changes) if changes else obj
    return obj


def _same(a: Any, b: Any) -> bool:
    return a is b


#: per class: the names of its dataclass init fields, or None for a class that is not a
#: dataclass (asked once per class, not once per object)
_FIELDS: Dict[type, Optional[Tuple[str, ...]]] = {}


def _init_fields(cls: type) -> Optional[Tuple[str, ...]]:
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    names = (tuple(f.name for f in dataclasses.fields(cls) if f.init)
             if dataclasses.is_dataclass(cls) else None)
    _FIELDS[cls] = names
    return names


def clean_for_output(obj: Any) -> Any:
    """``obj`` with URL credentials stripped and control characters escaped in every
    string: what exporters and the lock writer render from."""
    from envlock._redact import strip_userinfo

    return map_strings(obj, lambda s: escape_controls(strip_userinfo(s)))
