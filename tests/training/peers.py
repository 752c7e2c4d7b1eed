"""Run under torchrun with 2 ranks: rank 1 is a dead, late or hostile peer, rank 0 calls
``check()`` and records what it got, how long it took and whether anything was raised.

Rank 1 speaks the guard's wire protocol by hand (``envlock-guard/<attempt>/<call>/<rank>``
keys in the job's default c10d store, zlib JSON envelopes), as a peer running another
envlock version, or something hostile, could. Every case ends on an event: rank 0's short
deadline (``timeout=``) for the late and dead ones, a file for rank 1 to wait on.
"""

from __future__ import annotations

import json
import os
import pickle
import sys
import time
import zlib

import torch.distributed as dist
from torch.distributed import distributed_c10d

import envlock.training as guard

out_dir = sys.argv[1]
SHORT = 2.0  # rank 0's deadline for the late and the dead peer
dist.init_process_group("gloo")
rank = dist.get_rank()
store = distributed_c10d._get_default_store()
attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")


def envelope(data, protocol="envlock.guard/2"):
    text = json.dumps({"envlock": protocol, "version": "9.9", "data": data})
    return zlib.compress(text.encode())


class Evil:
    def __reduce__(self):
        return (os.system, (f"touch {os.path.join(out_dir, 'pwned')}",))


NESTED = ('{"envlock":"envlock.guard/2","data":' + "[" * 50000 + "]" * 50000 + "}").encode()
HOSTILE = [
    ("world-5", envelope({"world": 5})),
    ("empty", envelope({})),
    ("pickle", pickle.dumps(Evil())),
    ("other-version", envelope({"facts": []}, "envlock.guard/1")),
    ("nested", zlib.compress(NESTED)),
    ("not-utf8", zlib.compress(b"\xff\xfe\xfd")),
]
out = {}


def record(name, call):
    start = time.monotonic()
    try:
        found = call()
        raised = None
    except BaseException as exc:  # noqa: BLE001 - what escapes is what is tested
        found, raised = [], f"{type(exc).__name__}: {exc}"
    out[name] = {"ids": sorted({f.id for f in found}), "titles": [f.title for f in found],
                 "details": [f.detail for f in found], "raised": raised,
                 "seconds": time.monotonic() - start}


def marker(name):
    return os.path.join(out_dir, name)


def wait_file(name):
    deadline = time.monotonic() + 240
    while not os.path.exists(marker(name)):
        if time.monotonic() > deadline:
            raise SystemExit(f"gave up waiting for {name}")
        time.sleep(0.05)


# call 0: rank 1 is late; it calls check() only once rank 0 has given up on it
if rank == 0:
    record("late", lambda: guard.check(list(range(8)), strict=True, quiet=True,
                                       timeout=SHORT))
    open(marker("late-done"), "w").close()
else:
    wait_file("late-done")
    record("late-itself", lambda: guard.check(list(range(8)), quiet=True, timeout=60))

# calls 1..: rank 1 writes a hostile value instead of calling check()
for i, (name, raw) in enumerate(HOSTILE, start=1):
    if rank == 1:
        store.set(f"envlock-guard/{attempt}/{i}/1", raw)
    else:
        record(name, lambda: guard.check(list(range(8)), strict=True, quiet=True,
                                         timeout=120))

# the last call: rank 1 has exited before it
if rank == 1:
    with open(os.path.join(out_dir, "rank-1.json"), "w") as fh:
        json.dump(out, fh)
    os._exit(0)
record("dead", lambda: guard.check(list(range(8)), strict=True, quiet=True, timeout=SHORT))
with open(os.path.join(out_dir, "rank-0.json"), "w") as fh:
    json.dump(out, fh)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)  # no process-group teardown with a peer gone (see scenarios.py)
