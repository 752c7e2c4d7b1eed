"""A small, fast TOML writer for the generated-lock property test.

tomlkit (a style-preserving editor) cost ~0.13 s per generated lock, five times the CLI run
it fed, and it cannot write a deep nest at all (RecursionError), so such a case used to
become a fixed stand-in document. This writer keeps the real file's shape at the top
(``[table]`` and ``[[array-of-tables]]`` headers) and writes everything deeper as inline
values, iteratively, so a 3,000-deep list reaches the CLI's TOML reader as generated.
The CLI parses the text back to the same tree; only the layout differs from tomlkit's.
"""

from __future__ import annotations

import math
from typing import Any

_ESCAPES = {ord('"'): '\\"', ord("\\"): "\\\\", ord("\b"): "\\b", ord("\t"): "\\t",
            ord("\n"): "\\n", ord("\f"): "\\f", ord("\r"): "\\r"}
for _c in [*range(0x20), 0x7F]:
    _ESCAPES.setdefault(_c, f"\\u{_c:04X}")


class _Tok(str):
    """Literal output, as opposed to a string value still to be quoted."""


def _string(text: str) -> str:
    return '"' + text.translate(_ESCAPES) + '"'


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        text = repr(value)
        return text if any(c in text for c in ".eE") else text + ".0"
    if isinstance(value, str):
        return _string(value)
    raise TypeError(f"no TOML form for {type(value).__name__}")


def inline(value: Any) -> str:
    """``value`` as one line of TOML (inline tables and arrays), without recursion."""
    out: list[str] = []
    todo: list[Any] = [value]
    while todo:
        v = todo.pop()
        if isinstance(v, _Tok):
            out.append(v)
        elif isinstance(v, dict):
            seq: list[Any] = [_Tok("{")]
            for i, (k, item) in enumerate(v.items()):
                seq += [_Tok(", " if i else " "), _Tok(_string(str(k)) + " = "), item]
            seq.append(_Tok(" }" if v else "}"))
            todo.extend(reversed(seq))
        elif isinstance(v, list):
            seq = [_Tok("[")]
            for i, item in enumerate(v):
                if i:
                    seq.append(_Tok(", "))
                seq.append(item)
            seq.append(_Tok("]"))
            todo.extend(reversed(seq))
        else:
            out.append(_scalar(v))
    return "".join(out)


def dumps(doc: dict[str, Any]) -> str:
    """A TOML document for the table ``doc``: plain keys first, then one ``[key]`` per
    table and ``[[key]]`` per array of tables at the top, inline values below that."""
    head: list[str] = []
    tail: list[str] = []
    for key, value in doc.items():
        name = _string(str(key))
        if isinstance(value, dict):
            tail.append(f"\n[{name}]")
            tail += [f"{_string(str(k))} = {inline(v)}" for k, v in value.items()]
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for table in value:
                tail.append(f"\n[[{name}]]")
                tail += [f"{_string(str(k))} = {inline(v)}" for k, v in table.items()]
        else:
            head.append(f"{name} = {inline(value)}")
    return "\n".join(head + tail) + "\n"
