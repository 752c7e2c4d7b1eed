"""A peer's value on the wire: ``zlib(JSON {"envlock": PROTOCOL, "version": V, "data": ...})``.

Decoding is where a peer's bytes stop being trusted. In order, and each failure is a
:class:`BadValue` with one line saying why:

1. the compressed size is capped (``Limits.compressed``) before anything is decompressed;
2. decompression stops at ``Limits.decompressed`` bytes (``zlib.decompressobj`` with
   ``max_length``): a 3 MB zlib bomb that would expand to gigabytes costs a few MB;
3. UTF-8, then JSON without ``NaN``/``Infinity``; a ``RecursionError`` or ``MemoryError``
   while parsing is a bad value, not a failure of the exchange;
4. nesting deeper than ``Limits.depth`` is refused (walked without recursion);
5. the envelope names the protocol: another one is :class:`OtherVersion`, the likeliest
   cause of a malformed value in a real job (two envlock versions on its nodes);
6. the caller's schema (:mod:`envlock.exchange.schema`) checks ``data``.

>>> decode(encode("demo/1", {"a": [1, 2]}), "demo/1")
{'a': [1, 2]}
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any, Optional

from envlock import __version__
from envlock.exchange.schema import SchemaError, Spec, validate

__all__ = ["BadValue", "OtherVersion", "Limits", "encode", "decode", "depth"]


class BadValue(ValueError):
    """A peer's value that cannot be used; ``str()`` is one line for a finding."""


class OtherVersion(BadValue):
    """A well-formed value of another protocol: the peer runs another envlock version."""


@dataclass(frozen=True)
class Limits:
    """Caps on one value. The defaults fit the guard's largest value (1024 sample indices
    and a few facts, about 10 KB of JSON) many times over."""

    compressed: int = 256 * 1024
    decompressed: int = 1024 * 1024
    depth: int = 12


DEFAULT = Limits()


def encode(protocol: str, data: Any, level: int = 1) -> bytes:
    """Compact JSON in an envelope naming ``protocol`` and this envlock's version."""
    text = json.dumps({"envlock": protocol, "version": __version__, "data": data},
                      separators=(",", ":"), allow_nan=False)
    return zlib.compress(text.encode("utf-8"), level)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def depth(value: Any, limit: int) -> int:
    """Nesting depth of a JSON value, counted without recursion; stops past ``limit``."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, (dict, list)):
            deepest = max(deepest, level)
            if deepest > limit:
                return deepest
            children = item.values() if isinstance(item, dict) else item
            stack.extend((c, level + 1) for c in children if isinstance(c, (dict, list)))
    return deepest


def _inflate(raw: bytes, limits: Limits) -> bytes:
    if len(raw) > limits.compressed:
        raise BadValue(f"{len(raw):,} bytes, more than the {limits.compressed:,} allowed")
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(raw, limits.decompressed + 1)
    except zlib.error as exc:
        raise BadValue(f"not an envlock value (not zlib data: {exc})") from None
    if len(text) > limits.decompressed or inflater.unconsumed_tail:
        raise BadValue(f"expands past the {limits.decompressed:,} bytes allowed")
    if not inflater.eof:
        raise BadValue("not an envlock value (truncated zlib data)")
    if inflater.unused_data:
        raise BadValue("not an envlock value (bytes after the zlib data)")
    return text


def decode(raw: bytes, protocol: str, spec: Optional[Spec] = None,
           limits: Limits = DEFAULT) -> Any:
    """The ``data`` a peer sent under ``protocol``, checked against ``spec``; raises
    :class:`BadValue` (or :class:`OtherVersion`) and nothing else."""
    try:
        text = _inflate(bytes(raw), limits)
        try:
            obj = json.loads(text.decode("utf-8"), parse_constant=_no_constant)
        except UnicodeDecodeError:
            raise BadValue("not UTF-8 text") from None
        except RecursionError:
            raise BadValue(f"JSON nested deeper than {limits.depth} levels") from None
        except ValueError as exc:
            raise BadValue(f"not JSON: {str(exc)[:120]}") from None
        if depth(obj, limits.depth) > limits.depth:
            raise BadValue(f"JSON nested deeper than {limits.depth} levels")
        if not isinstance(obj, dict) or "envlock" not in obj or "data" not in obj:
            raise BadValue("not an envlock value (no envelope)")
        if obj["envlock"] != protocol:
            theirs = str(obj["envlock"])[:40]
            version = str(obj.get("version", "unknown"))[:40]
            raise OtherVersion(f"speaks {theirs!r}, not {protocol!r}: another envlock "
                               f"version ({version}; this is {__version__})")
        data = obj["data"]
        if spec is not None:
            try:
                validate(data, spec)
            except SchemaError as exc:
                raise BadValue(str(exc)[:300]) from None
        return data
    except MemoryError:
        raise BadValue("too large to read") from None
    except RecursionError:
        raise BadValue(f"JSON nested deeper than {limits.depth} levels") from None
