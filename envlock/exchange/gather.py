"""Every rank's value, or why there is none: the all-gather the guard needs, as store keys.

Each rank writes ``<key>/<rank>`` once and waits, until one deadline, for the others'; a
key still absent then is a *missing* peer (dead, late, or an envlock so old that it speaks
another protocol), a value that fails decoding a *bad* one. No rank waits past the
deadline and no peer's bytes can raise out of here: only the store itself failing (its
host died) raises, as the ``RuntimeError`` c10d gives.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Literal, Optional, Sequence

from envlock.exchange.codec import BadValue, OtherVersion
from envlock.exchange.store import Store

__all__ = ["Peer", "gather", "read_peers"]

Kind = Literal["ok", "missing", "bad", "other-version"]


@dataclass(frozen=True)
class Peer:
    """One rank's part: ``value`` when ``kind`` is ``ok``, else ``problem`` says why."""

    rank: int
    kind: Kind
    value: Any = None
    problem: str = ""

    @property
    def ok(self) -> bool:
        return self.kind == "ok"


def read_peers(store: Store, keys: Dict[int, str], read: Callable[[bytes], Any],
               deadline: float) -> Dict[int, Peer]:
    """Wait until ``deadline`` for the keys (rank -> key), then read and decode those that
    exist with ``read``; :class:`BadValue` from ``read`` is that rank's problem."""
    wanted = list(keys.values())
    present = set(wanted) if store.wait(wanted, deadline) else set(store.present(wanted))
    ranks = [r for r, k in keys.items() if k in present]
    raws = store.multi_get([keys[r] for r in ranks])
    out: Dict[int, Peer] = {}
    for r, raw in zip(ranks, raws):
        out[r] = decode_peer(r, raw, read)
    for r in keys:
        if r not in out:
            out[r] = Peer(r, "missing", problem="no value before the deadline")
    return dict(sorted(out.items()))


def decode_peer(rank: int, raw: bytes, read: Callable[[bytes], Any]) -> Peer:
    """``read(raw)`` as a :class:`Peer`; a bad value (however it fails) is a problem."""
    try:
        return Peer(rank, "ok", read(raw))
    except OtherVersion as exc:
        return Peer(rank, "other-version", problem=str(exc))
    except BadValue as exc:
        return Peer(rank, "bad", problem=str(exc))
    except (ValueError, TypeError, KeyError, RecursionError, MemoryError) as exc:
        return Peer(rank, "bad", problem=f"{type(exc).__name__}: {str(exc)[:200]}")


def gather(store: Store, key: str, rank: int, world: int, mine: bytes,
           read: Callable[[bytes], Any], deadline: float,
           ranks: Optional[Sequence[int]] = None) -> List[Peer]:
    """Write ``mine`` as this rank's value and collect every rank's (index = rank). This
    rank's own value is decoded like the others', so every rank judges the same data."""
    store.set(f"{key}/{rank}", mine)
    wanted = {r: f"{key}/{r}" for r in (ranks if ranks is not None else range(world))}
    got = read_peers(store, wanted, read, deadline)
    return [got[r] for r in sorted(got)]
