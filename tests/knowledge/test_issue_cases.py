"""Issue 27's four cases, as a new user runs them (offline, the matrix in the package).

1. ``resolve --offline --gpu H20 --driver R535``: the cu126 build's cuBLAS is bounded by
   CUDA 12.6's components, so the H20 cuBLAS 12.1 advisory is known false: no may-apply,
   and the decision says how that was known.
2. ``resolve --offline --gpu H20 --torch ==2.9.1 --driver 575.51.03``: cu129, the newest
   CUDA line the driver runs (no advisory left unknown to push it down).
3. A stated H20 with driver 560.35.03 and the package torch 2.1.0+cu121 (no library list),
   with the one-line log ``Floating point exception (core dumped)``: the H20 advisory is
   the first finding, ``pip install nvidia-cublas-cu12==12.4.5.8`` its first fix.
4. A pasted H800 PCIe log (nvidia-smi table, ``topo -m`` with PXB, NCCL ``via P2P/IPC``,
   a watchdog timeout) on a host that is not that machine: the log's machine is judged
   from the log, the P2P-hang advisory (``NCCL_P2P_DISABLE=1``) comes first, and one line
   says so.
"""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import run_cli

from envlock import _toml

DATA = Path(__file__).resolve().parents[1] / "data"


def _lock(path: Path) -> dict:
    return _toml.loads(path.read_text())


def test_h20_r535_lock_has_no_may_apply(tmp_path: Path) -> None:
    out = tmp_path / "h20.lock"
    r = run_cli("resolve", "--offline", "--gpu", "H20", "--driver", "R535", "-o", str(out))
    assert r.code == 0, r.err
    lock = _lock(out)
    target = lock["target"][0]
    actions = {a["id"]: a["action"] for a in target.get("advisories", [])}
    assert "may-apply" not in actions.values(), actions
    assert any(line.startswith("h20-cublas121-sigfpe does not apply to torch 2.14.1+cu126")
               and "library.cublas.version in [12.6.0.22, 13) (derived from torch "
                   "2.14.1+cu126 via CUDA 12.6)" in line
               for line in target["decision"]), target["decision"]


def test_h20_torch_291_on_575_takes_cu129(tmp_path: Path) -> None:
    out = tmp_path / "h20.lock"
    r = run_cli("resolve", "--offline", "--gpu", "H20", "--torch", "==2.9.1", "--driver",
                "575.51.03", "-v", "-o", str(out))
    assert r.code == 0, r.err
    target = _lock(out)["target"][0]
    assert any(line.startswith("cu129 (CUDA 12.9)") and "newest CUDA line" in line
               for line in target["decision"]), target["decision"]
    assert not any("cannot rule out" in line for line in target["decision"])


def test_stated_h20_with_torch_210_and_a_bare_sigfpe_log() -> None:
    snap = DATA / "knowledge" / "h20-stated-torch210.json"
    r = run_cli("doctor", "--snapshot", str(snap), "--log", str(DATA / "knowledge" / "fpe-one-line.log"),
                "--json")
    doc = json.loads(r.out)
    first = doc["findings"][0]
    assert first["id"] == "h20-cublas121-sigfpe"
    assert first["fix"][0].startswith("pip install nvidia-cublas-cu12==12.4.5.8")
    assert ("library.cublasLt.version=12.1.3.1 (derived from torch 2.1.0+cu121: bundled in the "
            "wheel from CUDA 12.1.1)") in first["because"]
    r = run_cli("doctor", "--snapshot", str(snap), "--log",
                str(DATA / "knowledge" / "fpe-one-line.log"), "-v")
    assert "no advisory explains the log" not in r.out


def test_a_pasted_h800_log_is_judged_on_its_own_machine() -> None:
    log = DATA / "knowledge" / "h800-pcie-p2p-hang.log"
    r = run_cli("doctor", "--log", str(log), "--json")
    doc = json.loads(r.out)
    assert doc["judged_from"] == (
        "the log is from another machine (NVIDIA H800 PCIe x4); judged from the log; pass "
        "--snapshot from that machine for a full check")
    first = doc["findings"][0]
    assert first["id"] == "nccl-p2p-hang-pcie-virtualized"
    assert first["fix"][0].startswith("export NCCL_P2P_DISABLE=1")
    text = run_cli("doctor", "--log", str(log)).out
    assert text.splitlines()[0].startswith("the log is from another machine")
