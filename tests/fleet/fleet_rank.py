"""Test harness that torchrun starts instead of ``-m envlock``, one per rank.

It runs the real ``python -m envlock`` as a child with the rank's environment untouched,
records the child's exit code in ``$FLEET_TEST_CODES/rank-<RANK>``, and exits 0 itself:
torchrun stops every worker as soon as one fails, which would hide whether each rank
exits 1 on its own. Ranks listed in ``$FLEET_TEST_DIE_RANKS`` exit at once without
running envlock: a node that dies before it answers. Nothing here reaches into envlock.
"""

import os
import subprocess
import sys

rank = os.environ["RANK"]
if rank in os.environ.get("FLEET_TEST_DIE_RANKS", "").split(","):
    sys.exit(0)
code = subprocess.call([sys.executable, "-m", "envlock", *sys.argv[1:]])
with open(os.path.join(os.environ["FLEET_TEST_CODES"], f"rank-{rank}"), "w") as fh:
    fh.write(str(code))
sys.exit(0)
