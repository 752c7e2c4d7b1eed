"""A rank of a fleet job that does not follow the protocol: it writes into the job's own
c10d store (torchrun's agent store) what a broken, hostile or other-version peer could,
by hand (``envlock-fleet/<attempt>/`` keys, zlib JSON envelopes of ``envlock.fleet/2``).
Then it stays alive until rank 0 has exited (its exit code file appears: an event), so
that torchrun does not end the job early; at most five minutes.
"""

from __future__ import annotations

import json
import os
import pickle
import socket
import time
import zlib
from datetime import timedelta

PROTOCOL = "envlock.fleet/2"


def envelope(data: object, protocol: str = PROTOCOL) -> bytes:
    text = json.dumps({"envlock": protocol, "version": "9.9", "data": data})
    return zlib.compress(text.encode())


def bomb(size: int) -> bytes:
    """``size`` bytes of zlib data that expand about 1000-fold (~1 GB per MB), made
    without ever holding the expanded data: one fully flushed deflate chunk of zeros,
    repeated (the checksum at the end is not what a reader gets to)."""
    raw = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = raw.compress(bytes(1 << 20)) + raw.flush(zlib.Z_FULL_FLUSH)
    return b"\x78\xda" + chunk * (size // len(chunk))


class Evil:
    def __reduce__(self):
        return (os.system, ("touch pwned",))


def act(case: str, codes: str) -> None:
    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    tcp = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), None,
                        False, timedelta(seconds=120))
    store = dist.PrefixStore(f"envlock-fleet/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}",
                             tcp)
    host = socket.gethostname()
    registration = envelope({"node": rank, "local": 0, "host": host})
    nested = ('{"envlock":"%s","data":' % PROTOCOL + "[" * 20000 + "]" * 20000 + "}").encode()
    values = {
        "garbage-registration": {"r": b"garbage"},
        "non-utf8": {"r": registration, "f": zlib.compress(b"\xff\xfe\xfd garbage")},
        "list": {"r": registration, "f": envelope([1, 2])},
        "nested": {"r": registration, "f": zlib.compress(nested)},
        "pickle": {"r": registration, "f": pickle.dumps(Evil())},
        "other-version": {"r": registration, "f": envelope({"node": rank}, "envlock.fleet/1")},
        # a fingerprint unlike rank 0's, so that rank 0 asks for (and reads) its snapshot
        "bomb": {"r": registration,
                 "f": envelope({"node": rank, "rank": rank, "host": host, "fp": "0" * 16}),
                 "s": bomb(3 << 20)},
        "stall": {"r": registration},
    }[case]
    for key, value in values.items():
        store.set(f"{key}/{rank}", value)
    deadline = time.monotonic() + 300
    while not os.path.exists(os.path.join(codes, "rank-0")) and time.monotonic() < deadline:
        time.sleep(0.05)
