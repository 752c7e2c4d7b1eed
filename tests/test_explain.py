"""`envlock explain ID` and `envlock doctor` reading several logs, stdin included."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import run_cli, run_proc


def test_explain_prints_summary_condition_fixes_sources_and_status() -> None:
    r = run_cli("explain", "nccl-p2p-hang-pcie-virtualized")
    assert r.code == 0, r.err
    out = r.out
    assert out.startswith("nccl-p2p-hang-pcie-virtualized: ")
    assert "status partial" in out
    assert "Applies when:" in out and "gpu.count >= 2" in out
    assert "env.NCCL_P2P_DISABLE is not set" in out
    assert "next to a failure  via P2P/(IPC|CUMEM)" in out
    assert "Fix (best first):\n  1. " in out
    assert "Sources:\n  https://" in out


def test_explain_json() -> None:
    r = run_cli("explain", "ddp-unused-parameters", "--json")
    d = json.loads(r.out)
    assert d["id"] == "ddp-unused-parameters" and d["log_only"] is True
    assert d["applies_when"] == ["no machine condition: recognised from a log only"]
    assert any("find_unused_parameters=True" in f for f in d["fix"])
    assert d["sources"] and d["status"] == "verified"


def test_unknown_id_is_a_usage_error_with_suggestions() -> None:
    r = run_cli("explain", "ddp-unused")
    assert r.code == 2 and r.out == ""
    assert "unknown advisory 'ddp-unused'" in r.err and "'ddp-unused-parameters'" in r.err
    assert len(r.err.strip().splitlines()) == 1


def test_doctor_reads_several_logs_and_stdin(tmp_path: Path) -> None:
    snap = tmp_path / "node.json"
    r = run_proc("snapshot", "--gpu", "H100:2", "--driver", "570.133.20", "-o", str(snap))
    assert r.code == 0, r.err
    a = tmp_path / "rank0.err"
    a.write_text("Running tokenizer on dataset:   9%|#  | 280000/2969526\n")
    stdin = ("[rank1]:[E1123 00:52:57.6 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught "
             "collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE) ran for "
             "1800572 milliseconds before timing out.\n\xff\n")
    r = run_proc("doctor", "--snapshot", str(snap), "--log", str(a), "--log", "-", "--json",
                 input=stdin)
    assert r.code in (0, 1), r.err
    ids = [f["id"] for f in json.loads(r.out)["findings"]]
    # the cause needs both logs: the timeout is on stdin, the work on rank 0's log
    assert "collective-timeout-uneven-work" in ids, ids
