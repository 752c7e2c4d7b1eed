"""Test harness that torchrun starts instead of ``-m envlock``, one per rank.

It runs the real ``python -m envlock`` as a child with the rank's environment untouched,
records the child's exit code in ``$FLEET_TEST_CODES/rank-<RANK>``, and exits 0 itself:
torchrun stops every worker as soon as one fails, which would hide whether each rank
exits 1 on its own. Ranks listed in ``$FLEET_TEST_DIE_RANKS`` exit at once without
running envlock: a node that dies before it answers. The child's process id and the
harness's go to ``$FLEET_TEST_CODES/pid-<RANK>`` (written once complete), so that a test
can kill a rank (the harness itself, or the child). A SIGTERM from torchrun reaches the
child (torchrun signals the worker's process group); the harness outlives it to record
the child's code, and the child's peak memory in ``$FLEET_TEST_CODES/maxrss-<RANK>`` (KiB).
Ranks named in ``$FLEET_TEST_HOSTILE`` (``1=garbage-registration,2=bomb``) do not run
envlock: they write what a broken or hostile peer could (:mod:`hostile_rank`).
Nothing here reaches into envlock.
"""

import os
import resource
import signal
import subprocess
import sys

rank = os.environ["RANK"]
codes = os.environ["FLEET_TEST_CODES"]
if rank in os.environ.get("FLEET_TEST_DIE_RANKS", "").split(","):
    sys.exit(0)
hostile = dict(item.split("=", 1) for item in os.environ.get("FLEET_TEST_HOSTILE", "").split(",")
               if item)
if rank in hostile:
    import hostile_rank

    hostile_rank.act(hostile[rank], codes)
    sys.exit(0)
signal.signal(signal.SIGTERM, lambda signum, frame: None)  # a handler: the child resets it
child = subprocess.Popen([sys.executable, "-m", "envlock", *sys.argv[1:]])
with open(os.path.join(codes, f".pid-{rank}"), "w") as fh:
    fh.write(f"{child.pid} {os.getpid()}")
os.replace(os.path.join(codes, f".pid-{rank}"), os.path.join(codes, f"pid-{rank}"))
code = child.wait()
with open(os.path.join(codes, f"maxrss-{rank}"), "w") as fh:
    fh.write(str(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss))
with open(os.path.join(codes, f"rank-{rank}"), "w") as fh:
    fh.write(str(code))
sys.exit(0)
