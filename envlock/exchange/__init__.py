"""One exchange between the ranks of a job, used by the training guard and by ``envlock fleet``.

Values travel as JSON through the job's own c10d key-value store (torch.distributed's
default store, or the fleet's TCPStore): no pickle (a peer's bytes never run as code), no
numpy (``all_gather_object`` needs it to unpickle), no CUDA device (an NCCL group is
never used). A peer is not trusted: every value is size-capped before and after
decompression, depth-limited, checked against a schema and against the protocol it
claims; a value that fails is a :class:`~envlock.exchange.codec.BadValue` for that rank,
and a key that does not appear before the deadline is a missing rank, never an exception
out of the exchange.

* :mod:`~envlock.exchange.codec`: bytes <-> validated JSON, with caps;
* :mod:`~envlock.exchange.schema`: the small schema language peers' values are checked with;
* :mod:`~envlock.exchange.store`: a store wrapper whose every wait has a deadline;
* :mod:`~envlock.exchange.gather`: every rank's value, or why it has none.
"""

from __future__ import annotations

from envlock.exchange.codec import BadValue, Limits, OtherVersion, decode, encode
from envlock.exchange.gather import Peer, gather, read_peers
from envlock.exchange.store import Store

__all__ = ["BadValue", "OtherVersion", "Limits", "encode", "decode", "Store", "Peer",
           "gather", "read_peers"]
