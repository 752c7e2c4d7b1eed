"""Fleet mode with real processes: torchrun (gloo-free c10d store, CPU torch) and tasks
started the way srun starts them. Per-rank drift comes only through the public
``--snapshot`` option with a ``{RANK}``/``{GROUP_RANK}``/``{SLURMD_NODENAME}`` placeholder."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import pytest
from fleetkit import (HARNESS, LOCK, clean_env, finish, free_port, rank_codes, run, torchrun,
                      write_snapshots)

pytest.importorskip("torch.distributed")
pytestmark = pytest.mark.torch

HOST = socket.gethostname()


def _report(path: Path) -> dict:
    return json.loads(path.read_text())


def _show(p: "subprocess.CompletedProcess[str]") -> str:
    return f"rc={p.returncode}\n--- stdout\n{p.stdout[-4000:]}\n--- stderr\n{p.stderr[-4000:]}"


def test_all_ranks_agree(tmp_path: Path) -> None:
    """torchrun -m envlock fleet: three ranks, the same environment -> exit 0 everywhere
    (torchrun exits 0 only when every worker did), one group, the lock matches."""
    write_snapshots(tmp_path, ["match"] * 3)
    p = run(torchrun(3, "--per-rank", "--lock", LOCK, "--snapshot", "rank-{RANK}.json",
                     "--report", "fleet.json", "--timeout", "60"), cwd=tmp_path)
    assert p.returncode == 0, _show(p)
    report = _report(tmp_path / "fleet.json")
    assert report["ok"] is True and report["nodes"] == 3 and report["findings"] == []
    assert report["target"] == "h100-sxm"
    [group] = report["groups"]
    assert group["hosts"] == [f"{HOST}/rank{i}" for i in range(3)] and group["ranks"] == [0, 1, 2]
    traffic = report["protocol"]["traffic"]
    assert traffic["fingerprint_bytes"]["count"] == 3
    assert traffic["fingerprint_bytes"]["max"] < 1024
    assert traffic["snapshot_bytes"] == {}  # nobody differs: no snapshot crosses the wire
    assert "3 of 3 nodes answered, 1 group, ok" in p.stdout


def test_ranks_probing_the_same_machine_agree(tmp_path: Path) -> None:
    """No ``--snapshot``: each rank probes this machine itself, with torchrun's per-rank
    variables (RANK, LOCAL_RANK) in its environment. The ranks agree: one group, exit 0.
    (Run on a real H100, the probed RANK/LOCAL_RANK were called drift.)"""
    p = run(torchrun(2, "--per-rank", "--report", "fleet.json", "--timeout", "90"),
            cwd=tmp_path)
    assert p.returncode == 0, _show(p)
    report = _report(tmp_path / "fleet.json")
    assert report["ok"] is True and report["findings"] == [], report["findings"]
    [group] = report["groups"]
    assert group["ranks"] == [0, 1] and group["differences"] == []


DRIFTS = {
    "nccl": ("nccl", "libnccl 2.21.5 (wheel) on 2 nodes, 2.20.5 (wheel) on {h}/rank2",
             "library-version"),
    "driver": ("driver", "driver 550.54.15 on 2 nodes, 470.82.01 on {h}/rank2",
               "driver-too-old"),
    "gpu": ("gpu-arch", ("GPUs 8x NVIDIA H100 80GB HBM3 (9.0) on 2 nodes, 8x NVIDIA H20 (9.0) "
                         "on {h}/rank2"), "gpu-not-in-lock"),
}


@pytest.mark.parametrize("kind", sorted(DRIFTS))
def test_one_drifted_rank_fails_every_rank(tmp_path: Path, kind: str) -> None:
    """Rank 2 has another NCCL / driver / GPU: every rank exits 1 by itself (the harness
    records each exit code) and the report names rank 2, the fact and the lock finding."""
    category, difference, lock_id = DRIFTS[kind]
    write_snapshots(tmp_path, ["match", "match", kind])
    codes = tmp_path / "codes"
    codes.mkdir()
    p = run(torchrun(3, "--per-rank", "--lock", LOCK, "--snapshot", "rank-{RANK}.json",
                     "--report", "fleet.json", "--timeout", "60", script=HARNESS),
            cwd=tmp_path, env={"FLEET_TEST_CODES": str(codes)})
    assert rank_codes(codes) == {0: 1, 1: 1, 2: 1}, _show(p)
    report = _report(tmp_path / "fleet.json")
    assert report["ok"] is False and report["nodes"] == 3
    major, minor = report["groups"]
    assert major["majority"] and major["ranks"] == [0, 1]
    assert minor["ranks"] == [2] and minor["hosts"] == [f"{HOST}/rank2"]
    assert difference.format(h=HOST) in minor["differences"]
    drift = next(f for f in report["findings"] if f["id"] == "fleet-drift")
    assert drift["category"] == category and drift["hosts"] == [f"{HOST}/rank2"]
    assert drift["title"].startswith(f"{HOST}/rank2 differs from the majority (2 nodes)")
    lock = next(f for f in report["findings"] if f["id"] == lock_id)
    assert lock["hosts"] == [f"{HOST}/rank2"]  # verify's finding, placed on the node
    # only the drifted rank sent its snapshot
    assert list(report["protocol"]["traffic"]["snapshot_bytes"]) == [f"{HOST}/rank2"]
    # the other ranks say why they stop, in one line each
    assert p.stderr.count("envlock fleet: rank ") >= 2, _show(p)


def test_rank_that_exits_early_is_named_within_the_timeout(tmp_path: Path) -> None:
    """Rank 2 dies before answering (exit 0, so torchrun does not stop the job): ranks 0
    and 1 stop after --timeout, exit 1, and the report names rank 2 and its host."""
    write_snapshots(tmp_path, ["match"] * 3)
    codes = tmp_path / "codes"
    codes.mkdir()
    p = run(torchrun(3, "--per-rank", "--snapshot", "rank-{RANK}.json", "--report",
                     "fleet.json", "--timeout", "20", script=HARNESS), cwd=tmp_path,
            env={"FLEET_TEST_CODES": str(codes), "FLEET_TEST_DIE_RANKS": "2"})
    assert rank_codes(codes) == {0: 1, 1: 1}, _show(p)
    report = _report(tmp_path / "fleet.json")
    assert report["missing"] == [{"rank": 2, "node": 2, "host": HOST, "what": "did not arrive"}]
    missing = next(f for f in report["findings"] if f["id"] == "fleet-missing-rank")
    assert missing["title"] == f"1 rank did not answer within 20 s: rank 2 ({HOST})"
    assert [g["ranks"] for g in report["groups"]] == [[0, 1]]
    assert "did not answer within 20 s: rank 2" in p.stderr  # rank 1's one line
    # rank 0 waited its --timeout (from when it had the store), and stopped within the
    # documented total bound T + min(T, 10) + 30 (no tighter: CI machines are loaded)
    timing = report["protocol"]["timing_s"]
    assert timing["verdict"] >= 20 and timing["gather"] < 20 + 10 + 30, timing


def test_two_launches_probe_once_per_node(tmp_path: Path) -> None:
    """Real multi-node rendezvous on one machine: two torchrun launches (2 nodes x 2 local
    ranks, c10d rendezvous). Only local rank 0 of each node probes; node 1 (by torchrun's
    GROUP_RANK) has another NCCL, so both launches fail and the report names node 1."""
    write_snapshots(tmp_path, ["match", "nccl"], pattern="node-{}.json")
    endpoint = f"127.0.0.1:{free_port()}"
    launcher = ["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", endpoint,
                "--rdzv-id", "fleet-test"]
    cmd = torchrun(2, "--snapshot", "node-{GROUP_RANK}.json", "--report", "fleet.json",
                   "--timeout", "60", launcher=launcher)
    done = finish({i: subprocess.Popen(cmd, cwd=str(tmp_path), env=clean_env(), text=True,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                   for i in range(2)})
    assert [p.returncode for p in done.values()] == [1, 1], done
    report = _report(tmp_path / "fleet.json")
    assert report["nodes"] == 2 and report["protocol"]["world_size"] == 4
    assert report["protocol"]["traffic"]["fingerprint_bytes"]["count"] == 2  # one per node
    hosts = [g["hosts"] for g in report["groups"]]
    assert hosts == [[f"{HOST}/node0"], [f"{HOST}/node1"]]
    assert report["groups"][1]["differences"][0].startswith("libnccl 2.21.5 (wheel) on 1 node")


def _srun_like(tmp_path: Path, tasks: List[int], *args: str, timeout: str = "60"
               ) -> Dict[int, "subprocess.CompletedProcess[str]"]:
    """Start tasks the way ``srun --ntasks-per-node 1`` does (three nodes, Slurm's
    variables; rank 0 hosts the store), running the real CLI."""
    port = str(free_port())
    names = ["localhost", "127.0.0.1", "127.0.0.2"]
    procs = {}
    for i in tasks:
        env = clean_env({"SLURM_PROCID": str(i), "SLURM_NTASKS": "3", "SLURM_LOCALID": "0",
                         "SLURM_NODEID": str(i), "SLURM_NNODES": "3",
                         "SLURM_JOB_NODELIST": "localhost,127.0.0.[1-2]",
                         "SLURM_TASKS_PER_NODE": "1(x3)", "SLURMD_NODENAME": names[i],
                         "SLURM_JOB_ID": "4242", "MASTER_PORT": port})
        procs[i] = subprocess.Popen([sys.executable, "-m", "envlock", "fleet", *args,
                                     "--timeout", timeout], cwd=str(tmp_path), env=env,
                                    text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    return finish(procs)


def test_srun_tasks_name_the_drifted_host(tmp_path: Path) -> None:
    """Under Slurm the node is the host in SLURM_JOB_NODELIST: 127.0.0.2's driver differs,
    every task exits 1, and the report names that host."""
    write_snapshots(tmp_path, ["match", "match", "driver"], pattern="{}.json",
                    names=["localhost", "127.0.0.1", "127.0.0.2"])
    done = _srun_like(tmp_path, [0, 1, 2], "--lock", LOCK, "--snapshot",
                      "{SLURMD_NODENAME}.json", "--report", "fleet.json")
    assert {i: p.returncode for i, p in done.items()} == {0: 1, 1: 1, 2: 1}, done
    report = _report(tmp_path / "fleet.json")
    assert report["protocol"]["launcher"] == "slurm"
    assert [g["hosts"] for g in report["groups"]] == [["localhost", "127.0.0.1"], ["127.0.0.2"]]
    assert "driver 550.54.15 on 2 nodes, 470.82.01 on 127.0.0.2" in \
        report["groups"][1]["differences"]


def test_srun_task_that_never_starts_is_named_from_the_hostlist(tmp_path: Path) -> None:
    """Task 2 never starts: nobody on its node arrived, so its host comes from Slurm's node
    list; the two live tasks exit 1 after the timeout. Task 1 is present but may be slow
    to start on a loaded machine: rank 0 counts --timeout from when its store is up and
    the timeout is generous, so only task 2 is named (it once named task 1 as well)."""
    write_snapshots(tmp_path, ["match"] * 3, pattern="{}.json",
                    names=["localhost", "127.0.0.1", "127.0.0.2"])
    done = _srun_like(tmp_path, [0, 1], "--snapshot", "{SLURMD_NODENAME}.json", "--report",
                      "fleet.json", timeout="20")
    assert {i: p.returncode for i, p in done.items()} == {0: 1, 1: 1}, done
    report = _report(tmp_path / "fleet.json")
    assert report["missing"] == [{"rank": 2, "node": 2, "host": "127.0.0.2",
                                  "what": "did not arrive"}]
    assert "rank 2 (127.0.0.2)" in done[1].stderr
