"""``envlock fleet --snapshots``: the same comparison over files, without torch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fleetkit import LAUNCH_VARS, LOCK, write_snapshots
from support.cli import run_cli


def fleet(tmp_path: Path, *args: str):
    r = run_cli("fleet", "--snapshots", str(tmp_path / "*.json"), "--json", *args)
    return r, (json.loads(r.out) if r.out.strip() else None)


def test_agreeing_snapshots(tmp_path: Path) -> None:
    write_snapshots(tmp_path, ["match"] * 3)
    r, report = fleet(tmp_path, "--lock", LOCK)
    assert r.code == 0, r.err
    assert report["ok"] is True and report["nodes"] == 3 and report["findings"] == []
    [group] = report["groups"]
    assert group["hosts"] == ["node0", "node1", "node2"] and group["majority"] is True
    assert len(group["fingerprint"]) == 16


def test_nccl_drift_names_node_fact_and_fix(tmp_path: Path) -> None:
    write_snapshots(tmp_path, ["match", "nccl", "match"])
    r, report = fleet(tmp_path, "--lock", LOCK)
    assert r.code == 1
    major, minor = report["groups"]
    assert major["hosts"] == ["node0", "node2"] and minor["hosts"] == ["node1"]
    assert minor["differences"] == [
        "libnccl 2.21.5 (wheel) on 2 nodes, 2.20.5 (wheel) on node1",
        "package nvidia-nccl-cu12 2.21.5 on 2 nodes, 2.20.5 on node1",
    ]
    first = report["findings"][0]
    assert first["id"] == "fleet-drift" and first["category"] == "nccl"
    assert first["title"] == ("node1 differs from the majority (2 nodes): libnccl, "
                              "package nvidia-nccl-cu12")
    assert first["fix"][0] == "on node1: pip install --no-deps 'nvidia-nccl-cu12==2.21.5'"
    # node against the lock: verify's own findings, placed on the node
    ids = {(f["id"], f.get("subject")): f["hosts"] for f in report["findings"][1:]}
    assert ids == {("library-version", "nccl"): ["node1"],
                   ("package-version", "nvidia-nccl-cu12"): ["node1"]}


def test_lock_findings_shared_by_every_node(tmp_path: Path) -> None:
    """All nodes agree with each other but not with the lock: one group, exit 1, the
    finding lists every host."""
    write_snapshots(tmp_path, ["driver"] * 2)
    r, report = fleet(tmp_path, "--lock", LOCK)
    assert r.code == 1 and len(report["groups"]) == 1
    [f] = report["findings"]
    assert f["id"] == "driver-too-old" and f["hosts"] == ["node0", "node1"]


def test_without_a_lock_nodes_are_compared_and_advisories_judged(tmp_path: Path) -> None:
    write_snapshots(tmp_path, ["match"] * 2)
    assert fleet(tmp_path)[0].code == 0
    # the nodes agree, but an R470 driver runs no cu12x torch: not "ok" (issue 17)
    write_snapshots(tmp_path, ["driver"] * 2)
    r, data = fleet(tmp_path)
    assert r.code == 1
    assert [f["id"] for f in data["findings"]] == ["driver-too-old-for-torch-cuda"]


def test_text_table(tmp_path: Path) -> None:
    write_snapshots(tmp_path, ["match", "match", "gpu"])
    r = run_cli("fleet", "--snapshots", str(tmp_path / "*.json"))
    assert r.code == 1
    lines = r.out.splitlines()
    assert lines[0] == ("envlock fleet: 3 snapshot files: 3 of 3 nodes answered, 2 groups, "
                        "1 problem, 1 blocks training")
    assert lines[1].split() == ["group", "nodes", "fingerprint", "driver", "GPUs", "torch",
                                "NCCL", "hosts"]
    assert lines[2].startswith("  A *    2") and lines[2].endswith("node0, node1")
    assert lines[5] == ("  B vs A: GPUs 8x NVIDIA H100 80GB HBM3 (9.0) on 2 nodes, "
                        "8x NVIDIA H20 (9.0) on node2")
    assert any("fix: run the job on nodes with 8x NVIDIA H100 80GB HBM3 (9.0) only" in x
               for x in lines)


def test_same_hostname_is_told_apart_by_file(tmp_path: Path) -> None:
    write_snapshots(tmp_path, ["match", "nccl"])
    for p in tmp_path.glob("*.json"):
        data = json.loads(p.read_text())
        data["host"]["hostname"] = "gpu"
        p.write_text(json.dumps(data))
    _, report = fleet(tmp_path)
    assert [g["hosts"] for g in report["groups"]] == [["rank-0.json"], ["rank-1.json"]]


def test_unreadable_snapshot_is_a_node_error(tmp_path: Path) -> None:
    write_snapshots(tmp_path, ["match"] * 2)
    (tmp_path / "rank-2.json").write_text("{not json")
    r, report = fleet(tmp_path)
    assert r.code == 1
    [f] = report["findings"]
    assert f["id"] == "fleet-node-error" and f["hosts"] == ["rank-2"]
    assert "is not valid JSON" in f["detail"]


def test_usage_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = run_cli("fleet", "--snapshots", str(tmp_path / "none-*.json"))
    assert r.code == 2 and "matches no file" in r.err
    write_snapshots(tmp_path, ["match"])
    r = run_cli("fleet", "--snapshots", str(tmp_path / "*.json"), "--per-rank")
    assert r.code == 2 and "--per-rank is for live runs" in r.err
    for var in LAUNCH_VARS + ("SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(var, raising=False)
    r = run_cli("fleet", "--lock", LOCK)
    assert r.code == 2 and "found no launcher" in r.err and "--snapshots" in r.err


def test_offline_mode_does_not_import_torch(tmp_path: Path) -> None:
    write_snapshots(tmp_path, ["match", "nccl"])
    code = ("import sys; from envlock.cli import main; "
            f"rc = main(['fleet', '--snapshots', {str(tmp_path / '*.json')!r}, '--lock', "
            f"{LOCK!r}]); sys.exit(100 + rc if 'torch' in sys.modules else rc)")
    p = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 1, p.stderr


def test_advisories_run_without_a_lock(tmp_path: Path) -> None:
    """issue 17: every node's Fabric Manager down is not "ok, the nodes agree"."""
    import json

    data = Path(__file__).resolve().parents[1] / "data"
    base = json.loads((data / "snapshots" / "h100-match.json").read_text())
    for i in range(3):
        doc = dict(base, host=dict(base["host"], hostname=f"node{i}"),
                   driver=dict(base["driver"], fabric_manager="not-running"))
        (tmp_path / f"n{i}.json").write_text(json.dumps(doc))
    r = run_cli("fleet", "--snapshots", str(tmp_path / "*.json"), "--json")
    assert r.code == 1
    ids = [f["id"] for f in json.loads(r.out)["findings"]]
    assert ids == ["nvswitch-fabric-manager-not-running"]
