"""A small TOML emitter for the lock's ``[[target]]`` tables, byte-identical to tomlkit's.

Why: building a tomlkit document item by item (an object per key, per value, per file of
every package) was a tenth of a warm ``envlock resolve``; the target tables are a fixed,
flat shape (plain strings, booleans, lists of strings, inline tables of strings), so they
are written here directly, in the exact layout tomlkit gives them. Anything outside that
shape raises :class:`Unsupported`, and the caller renders the whole lock with tomlkit:
this module never guesses. Plain strings (no quote, backslash or control character) are
written as they are; any other string or key is escaped by tomlkit itself (public
``tomlkit.item`` / ``tomlkit.key``), so hostile text is escaped exactly as before.
Tests compare the output with tomlkit's byte for byte.
"""

from __future__ import annotations

import re
from typing import Any, Callable, List, Mapping, Sequence

__all__ = ["Unsupported", "string", "key", "value", "inline_array", "multiline_array",
           "inline_table"]

#: what a basic string must escape (tomlkit: the control characters, '"' and '\\')
_NEEDS_ESCAPE = re.compile(r'[\x00-\x1f\x7f"\\]')
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class Unsupported(Exception):
    """A value outside the emitter's shapes: render with tomlkit instead."""


def string(text: Any) -> str:
    """A TOML basic string, as tomlkit writes it."""
    if text.__class__ is not str:
        raise Unsupported(f"not a string: {type(text).__name__}")
    if _NEEDS_ESCAPE.search(text) is None:
        return f'"{text}"'
    import tomlkit

    return str(tomlkit.item(text).as_string())


def key(name: Any) -> str:
    """A key, bare when tomlkit writes it bare, else quoted by tomlkit."""
    if name.__class__ is not str:
        raise Unsupported(f"not a key: {type(name).__name__}")
    if _BARE_KEY.fullmatch(name):
        return name
    import tomlkit

    return str(tomlkit.key(name).as_string())


def value(v: Any) -> str:
    """A string, a boolean or a single-line list of strings."""
    if v.__class__ is str:
        return string(v)
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v.__class__ in (list, tuple):
        return inline_array(v)
    raise Unsupported(f"no TOML form here for a {type(v).__name__}")


def inline_array(items: Sequence[Any]) -> str:
    return "[" + ", ".join(map(string, items)) + "]"


def multiline_array(rendered: Sequence[str]) -> str:
    """tomlkit's multiline array of already rendered items ("[]" when empty)."""
    if not rendered:
        return "[]"
    return "[\n" + "".join(f"    {r},\n" for r in rendered) + "]"


def inline_table(pairs: Sequence[Any]) -> str:
    return "{" + ", ".join(f"{key(k)} = {value(v)}" for k, v in pairs) + "}"


def lines(pairs: Sequence[Any], render: Callable[[Any], str] = value) -> List[str]:
    """``key = value`` lines of a table."""
    return [f"{key(k)} = {render(v)}\n" for k, v in pairs]


def sorted_table(header: str, mapping: Mapping[str, Any]) -> str:
    """A ``[header]`` table of plain values in key order, after a blank line."""
    return f"\n[{header}]\n" + "".join(lines([(k, mapping[k]) for k in sorted(mapping)]))


def _scalar(v: Any) -> str:
    """A string, boolean or integer (tomlkit writes an int as Python does)."""
    if v.__class__ is int:
        return str(v)
    if v.__class__ in (list, tuple):
        if any(x.__class__ not in (str, bool, int) for x in v):
            raise Unsupported("a list of other than strings, booleans and integers")
        return "[" + ", ".join(map(_scalar, v)) + "]"
    return value(v)


def _is_table(v: Any) -> bool:
    return v.__class__ is dict


def _is_aot(v: Any) -> bool:
    return v.__class__ in (list, tuple) and bool(v) and all(map(_is_table, v))


def table(header: str, mapping: Mapping[str, Any], aot: bool = False) -> str:
    """``[header]`` (``[[header]]`` for an element of an array of tables) after a blank
    line, its plain values in order, then its sub-tables and arrays of tables in order,
    as tomlkit places them when a dict is assigned into a table. Shapes where tomlkit
    does something else (a table holding only tables is a super-table without a header of
    its own; tables inside an array's table; an empty table in an array of tables) raise
    :class:`Unsupported`."""
    plain = [(k, v) for k, v in mapping.items() if not (_is_table(v) or _is_aot(v))]
    nested = [(k, v) for k, v in mapping.items() if _is_table(v) or _is_aot(v)]
    if nested:
        first = next(iter(mapping.values()))
        if aot or _is_table(first) or _is_aot(first):
            # tomlkit writes no blank line before a table inserted first, and a table
            # holding only tables is a super-table without a header of its own
            raise Unsupported("a table first, or tables in an array of tables")
    out = [f"\n[[{header}]]\n" if aot else f"\n[{header}]\n", *lines(plain, _scalar)]
    for k, v in nested:
        name = f"{header}.{key(k)}"
        if _is_table(v):
            out.append(table(name, v))
        elif not all(v):
            raise Unsupported("an empty table in an array of tables (tomlkit drops the "
                              "blank line after it)")
        else:
            out.extend(table(name, item, aot=True) for item in v)
    return "".join(out)
