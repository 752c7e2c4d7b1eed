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


def test_members_with_the_same_packages_get_one_lock_with_the_highest_floor(
        tmp_path: Path) -> None:
    # the H100/H800 NVL needs R535 where the SXM and PCIe boards run R525, for the same
    # wheel: one lock, the NVL's floor, each member's floor listed (lock and text output)
    for gpu, torch in (("H100", "==2.4.1"), ("H800", "==2.1.2"), ("H100", "==2.1.2")):
        r, lock = _lock(tmp_path, "--gpu", gpu, "--torch", torch)
        assert r.code == 0, (gpu, torch, r.err)
        t = lock["target"][0]
        assert t["driver-min"] == "535.43.09"
        floors = f"{gpu} NVL needs >= 535.43.09; SXM/PCIe >= 525.60.13"
        assert any(floors in line for line in t["driver-min-reasons"]), t["driver-min-reasons"]
        assert floors in r.out
        assert any(f"{gpu} is a family" in d and "highest member's" in d
                   for d in t["decision"])


def _run_hint(args: list, choice: str) -> int:
    """Run ``args`` with one choice of a hint applied: ``--gpu 'X'`` replaces the family,
    ``--driver D`` the driver."""
    import shlex

    opt, value = shlex.split(choice.split(" (")[0])
    args = list(args)
    i = args.index(opt)
    args[i + 1] = value
    r = run_cli("resolve", "--offline", "--python", "3.11", "--dry-run", *args)
    return r.code


def test_a_driver_some_members_do_not_run_lists_choices_that_each_work(
        tmp_path: Path) -> None:
    args = ["--gpu", "H100", "--torch", "==2.4.1", "--driver", "530.30.02"]
    r = run_cli("resolve", "--offline", "--python", "3.11", "--dry-run", *args)
    assert r.code == 3, r.err
    assert "runs no allowed build on H100 NVL" in r.err
    hint = r.err.split("hint:", 1)[1].split(":", 1)[1].strip()
    choices = [c.strip() for c in hint.split(", --")]
    choices = [c if c.startswith("--") else "--" + c for c in choices]
    assert "--gpu 'H100 SXM'" in choices and "--driver 535.43.09 (one lock for every member)" \
        in choices
    for choice in choices:  # every way out the hint names works
        assert _run_hint(args, choice) == 0, choice


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
