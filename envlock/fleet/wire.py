"""The fleet's values on the wire: one protocol name, one schema per key, through
:mod:`envlock.exchange` (zlib JSON with size caps, a depth limit and schema checks).

Rank 0 reads what every other rank wrote, so nothing here trusts a value: a registration,
fingerprint or snapshot that does not decode is a finding for the rank that sent it
(``fleet-node-error``), never an exception in rank 0.
"""

from __future__ import annotations

from typing import Any, Dict, Tuple

from envlock.exchange import BadValue, Limits, decode, encode
from envlock.exchange.schema import MapOf, OneOf, Record

__all__ = ["PROTOCOL", "MESSAGE", "SNAPSHOT_LIMITS", "pack", "unpack", "registration",
           "read_registration"]

PROTOCOL = "envlock.fleet/2"

#: a fingerprint message (see :class:`envlock.fleet.fingerprint.NodeMessage`)
MESSAGE = Record({"node": int, "rank": int, "host": str},
                 {"fp": OneOf(str, None), "sum": MapOf(str, most=16), "lock": OneOf(int, None),
                  "err": OneOf(str, None)})
REGISTRATION = Record({"node": int, "local": int, "host": str})
WANT = Record({"m": OneOf(str, None), "rep": OneOf(int, None)})
VERDICT = Record({"code": int, "line": str})
#: a snapshot is about 1 KB compressed and 30 KB of JSON on a real machine
SNAPSHOT_LIMITS = Limits(compressed=1024 * 1024, decompressed=4 * 1024 * 1024, depth=16)
#: everything else is small
SMALL = Limits(compressed=16 * 1024, decompressed=64 * 1024, depth=6)


def pack(data: Any) -> bytes:
    return encode(PROTOCOL, data, level=6)


def unpack(raw: bytes, spec: Any = None, limits: Limits = SMALL) -> Any:
    """The data of a value under this protocol; :class:`BadValue` when it is not one."""
    return decode(raw, PROTOCOL, spec, limits)


def registration(node: int, local: int, host: str) -> bytes:
    return pack({"node": node, "local": local, "host": host})


def read_registration(raw: bytes) -> Tuple[int, int, str]:
    d: Dict[str, Any] = unpack(raw, REGISTRATION)
    if d["node"] < 0 or d["local"] < 0:
        raise BadValue("a negative node or local rank")
    return d["node"], d["local"], d["host"][:253]
