"""Fleet rank 0 against peers it must not trust, in one real torchrun job: each hostile
rank (tests/fleet/hostile_rank.py) writes one bad value into torchrun's store, by hand.
Every one becomes a finding naming that rank, rank 0 exits 1 (drift, never 70), stays
far below 200 MB above a bare torch import with a 3 MB zlib bomb in the store (it took
2.9 GB), and a rank that registers and then stalls costs no more than --timeout."""

from __future__ import annotations

import json
import socket
import subprocess
import sys

import pytest
from fleetkit import HARNESS, rank_codes, run, torchrun, write_snapshots

from envlock.fleet.protocol import ACK_S

pytest.importorskip("torch.distributed")
pytestmark = pytest.mark.torch

HOST = socket.gethostname()
TIMEOUT = 30
CASES = {  # rank: (what it writes, what rank 0 says about it)
    1: ("garbage-registration", "rank 1 sent an unreadable registration: not an envlock value "
                                "(not zlib data"),
    2: ("non-utf8", "sent an unreadable fingerprint: not UTF-8 text"),
    3: ("list", "sent an unreadable fingerprint: the value: expected an object, got list"),
    4: ("nested", "sent an unreadable fingerprint: JSON nested deeper than"),
    5: ("pickle", "sent an unreadable fingerprint: not an envlock value (not zlib data"),
    6: ("other-version", "sent an unreadable fingerprint: speaks 'envlock.fleet/1', not "
                         "'envlock.fleet/2': another envlock version (9.9;"),
    7: ("bomb", "sent an unreadable snapshot: 3,1"),
}
STALL = 8


def _bare_torch_kib() -> int:
    code = ("import resource, torch.distributed; "
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
    return int(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True).stdout.split()[-1])


@pytest.fixture(scope="module")
def job(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("hostile")
    write_snapshots(tmp, ["match"] * (STALL + 1))
    codes = tmp / "codes"
    codes.mkdir()
    hostile = ",".join([f"{r}={case}" for r, (case, _) in CASES.items()] + [f"{STALL}=stall"])
    p = run(torchrun(STALL + 1, "--per-rank", "--snapshot", "rank-{RANK}.json", "--report",
                     "fleet.json", "--timeout", str(TIMEOUT), script=HARNESS), cwd=tmp,
            env={"FLEET_TEST_CODES": str(codes), "FLEET_TEST_HOSTILE": hostile}, timeout=300)
    report = json.loads((tmp / "fleet.json").read_text()) if (tmp / "fleet.json").exists() \
        else None
    return p, report, codes, tmp


def test_rank0_reports_drift_not_a_crash(job) -> None:
    p, report, codes, tmp = job
    assert rank_codes(codes) == {0: 1}, p.stderr[-4000:]
    assert report is not None and report["ok"] is False, p.stderr[-4000:]
    assert "Traceback" not in p.stdout and "internal error" not in p.stderr
    assert not (tmp / "pwned").exists()  # the pickle's __reduce__ never ran


@pytest.mark.parametrize("rank", sorted(CASES))
def test_each_bad_value_is_a_finding_for_its_rank(job, rank) -> None:
    _, report, _, _ = job
    want = CASES[rank][1]
    errors = [f for f in report["findings"] if f["id"] == "fleet-node-error"]
    mine = [f for f in errors if want in f["detail"]]
    assert len(mine) == 1, json.dumps(errors, indent=1)
    name = "rank 1" if rank == 1 else f"{HOST}/rank{rank}"  # rank 1 never said its host
    assert mine[0]["hosts"] == [name]
    assert mine[0]["title"] == f"{name} sent what rank 0 cannot read"


def test_a_rank_that_registers_then_stalls_costs_only_the_timeout(job) -> None:
    _, report, _, _ = job
    assert {"rank": STALL, "node": STALL, "host": HOST, "what": "sent no fingerprint"} \
        in report["missing"]
    timing = report["protocol"]["timing_s"]
    # rank 0 waited its --timeout for the missing fingerprints, then at most ACK_S for
    # acknowledgements (it waited min(T, 10) more before, 32.7 s at --timeout 15)
    assert timing["acks"] <= ACK_S + 1, timing
    assert timing["gather"] <= TIMEOUT + 5, timing


def test_a_zlib_bomb_costs_rank0_little_memory(job) -> None:
    _, _, codes, _ = job
    used, bare = int((codes / "maxrss-0").read_text()), _bare_torch_kib()
    print(f"rank 0 peak {used // 1024} MB, a bare torch import {bare // 1024} MB")
    assert used - bare < 200 * 1024, (used, bare)
