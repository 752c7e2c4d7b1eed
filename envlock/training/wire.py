"""What one rank sends in :func:`envlock.training.check`, and how a peer's value is read.

The schema is the contract between ranks (and between envlock versions in one job): a peer
whose value does not fit it is named, not trusted. ``PROTOCOL`` changes when a field's
meaning does; fields may be added without changing it (readers ignore unknown keys).
"""

from __future__ import annotations

from typing import Any, Dict

from envlock.exchange import BadValue, decode, encode
from envlock.exchange.schema import Choice, ListOf, MapOf, OneOf, Record, SchemaError, validate
from envlock.training.draw import LIMIT

__all__ = ["PROTOCOL", "PAYLOAD", "pack", "read"]

PROTOCOL = "envlock.guard/2"

_INT = OneOf(int, None)
WORLD = Record({
    "host": str, "env_world": _INT, "env_rank": _INT, "local_rank": _INT, "pg": bool,
    "pg_world": _INT, "pg_rank": _INT, "backend": OneOf(str, None), "cuda": bool,
    "gpus": int, "device": _INT})
MODEL = Record({"present": bool}, {"wrapped": bool, "sharded": bool,
                                   "digests": MapOf(str, most=16), "device": OneOf(str, None)})
DRAW = Record({
    "kind": Choice(("indices", "distributed", "unknown")), "indices": ListOf(int, LIMIT),
    "epoch_len": _INT, "dataset_len": _INT, "summary": MapOf(OneOf(int, bool, None), most=16),
    "reason": str, "shuffles": OneOf(bool, None), "source": str})
SUMMARY = Record({"num_replicas": int, "rank": int, "seed": int, "shuffle": bool,
                  "epoch": int, "drop_last": bool, "n": _INT})
PAYLOAD = Record({"world": WORLD, "model": MODEL, "draw": OneOf(DRAW, None),
                  "failed": MapOf(str, most=8)})


def pack(payload: Dict[str, Any]) -> bytes:
    return encode(PROTOCOL, payload)


def read(raw: bytes) -> Dict[str, Any]:
    """A peer's payload, checked; :class:`~envlock.exchange.BadValue` when it does not fit
    (a model present without its facts, a DistributedSampler without its summary)."""
    value = decode(raw, PROTOCOL, PAYLOAD)
    try:
        if value["model"]["present"]:
            validate(value["model"], Record({"wrapped": bool, "sharded": bool,
                                             "digests": MapOf(str, most=16)}), "model")
        if value["draw"] is not None and value["draw"]["kind"] == "distributed":
            validate(value["draw"]["summary"], SUMMARY, "draw.summary")
    except SchemaError as exc:
        raise BadValue(str(exc)) from None
    return value
