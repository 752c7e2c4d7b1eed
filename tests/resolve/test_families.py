"""GPU families (``--gpu H100``) and fleets (``--together``): one lock, separate machines."""

from __future__ import annotations

import json
from pathlib import Path

from envlock import _toml
from envlock.matrix import get_matrix
from envlock.resolve.family import family_members
from support.cli import run_cli

DATA = Path(__file__).resolve().parents[1] / "data"
MIXED = "multi-gpu-sigsegv-mixed-gpus"


def _lock(tmp_path: Path, *args: str):
    out = tmp_path / "l.lock"
    r = run_cli("resolve", "--offline", "--python", "3.11", "-o", str(out), *args)
    return r, (_toml.loads(out.read_text()) if r.code == 0 else None)


def test_family_members_share_the_product_word_and_capability() -> None:
    m = get_matrix()
    assert {g.id for g in family_members(m, "H100")} == {"h100-sxm", "h100-pcie", "h100-nvl"}
    assert {g.form_factor for g in family_members(m, "A100")} >= {"sxm", "pcie"}
    v100 = {g.id for g in family_members(m, "V100")}
    assert "v100-pcie-32gb" in v100 and not any(i.startswith("v100s") for i in v100)
    assert family_members(m, "H20") == ()  # NVIDIA H20 is a product of its own
    assert family_members(m, "H100 PCIe") == ()
    assert family_members(m, "GT") == ()  # a shared word is not a name people use


def test_a_bare_family_name_locks_every_member(tmp_path: Path) -> None:
    r, lock = _lock(tmp_path, "--gpu", "H100")
    assert r.code == 0, r.err
    t = lock["target"][0]
    assert t["name"] == "h100" and t["family"] == "H100" and t["machines"] == "separate"
    assert set(t["gpu-models"]) == {"h100-sxm", "h100-pcie", "h100-nvl"}
    assert all(a["id"] != MIXED for a in t.get("advisory", []))
    assert any("H100 is a family" in d for d in t["decision"])
    assert "H100 family" in r.out


def test_members_that_need_different_locks_are_asked_for(tmp_path: Path) -> None:
    # torch 2.1.2 cu121: the H100 NVL needs a newer driver (R535) than the SXM and PCIe
    r, _ = _lock(tmp_path, "--gpu", "H100", "--torch", "==2.1.2")
    assert r.code == 2
    assert "H100 is a family" in r.err and "--gpu 'H100 NVL'" in r.err
    assert "--gpu 'H100 PCIe'" in r.err
    # with a driver every member runs the same build on, the family is one lock again
    r, lock = _lock(tmp_path, "--gpu", "H100", "--torch", "==2.1.2", "--driver", "535.104.05")
    assert r.code == 0, r.err
    assert lock["target"][0]["driver-min"] == "535.43.09"  # covers the NVL too


def test_together_records_separate_machines_and_no_mixed_machine_advisory(
        tmp_path: Path) -> None:
    r, lock = _lock(tmp_path, "--gpu", "H20", "--gpu", "A100 SXM", "--together")
    assert r.code == 0, r.err
    t = lock["target"][0]
    assert t["machines"] == "separate"
    assert all(a["id"] != MIXED for a in t.get("advisory", []))
    # one machine's own GPUs are still judged as one machine
    r, lock = _lock(tmp_path, "--gpu", "H20")
    assert "machines" not in lock["target"][0]


def _family_lock(tmp_path: Path) -> Path:
    text = (DATA / "locks" / "h100-pypi.lock").read_text()
    text = text.replace('gpu-models = ["h100-sxm"]',
                        'gpu-models = ["h100-sxm", "h100-pcie", "h100-nvl"]\n'
                        'family = "H100"\nmachines = "separate"', 1)
    path = tmp_path / "family.lock"
    path.write_text(text)
    return path


def test_verify_accepts_any_member_of_a_locked_family(tmp_path: Path) -> None:
    snap = json.loads((DATA / "snapshots" / "h100-match.json").read_text())
    for g in snap["gpus"]:
        g["name"] = "NVIDIA H100 PCIe"
    path = tmp_path / "pcie.json"
    path.write_text(json.dumps(snap))
    lock = _family_lock(tmp_path)
    r = run_cli("verify", "--lock", str(lock), "--snapshot", str(path), "--json", "--strict")
    data = json.loads(r.out)
    assert r.code == 0, r.out
    assert "gpu-not-in-lock" not in {f["id"] for f in data["findings"]}
    # the same PCIe board against a lock for the SXM model alone is still reported
    r = run_cli("verify", "--lock", str(DATA / "locks" / "h100-pypi.lock"), "--snapshot",
                str(path), "--json", "--strict")
    assert r.code == 1
    assert "gpu-not-in-lock" in {f["id"] for f in json.loads(r.out)["findings"]}
