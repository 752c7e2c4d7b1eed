"""Snapshots recorded on a real GPU host, judged offline.

``tests/data/snapshots/real-h100-sxm-deep.json`` and ``real-h100-sxm-files.json`` are the
unedited output of ``envlock snapshot --deep`` and ``envlock snapshot`` on a lent machine
(2026-11-24): one NVIDIA H100 80GB HBM3 (SXM5) passed through to a Firecracker VM, driver
580.159.04, Ubuntu 24.04 in a container, Python 3.12.3, torch 2.11.0+cu130 from wheels, and
the image's own CUDA 13.0 toolkit, cuDNN 9.14 and NCCL 2.28.3 beside the wheels' copies.
Nothing in them was written to fit a check; the tests say what envlock makes of them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, Tuple

import pytest

from envlock.snapshot import load_snapshot
from support.cli import run_cli

SNAPSHOTS = Path(__file__).resolve().parents[1] / "data" / "snapshots"
DEEP = SNAPSHOTS / "real-h100-sxm-deep.json"
FILES = SNAPSHOTS / "real-h100-sxm-files.json"


def _libraries(path: Path) -> Dict[Tuple[str, str], Tuple[bool, object]]:
    snap = load_snapshot(str(path))
    return {(x.name, str(x.path)): (bool(x.selected), x.loaded) for x in snap.libraries}


def test_the_loader_prediction_is_what_torch_really_loaded() -> None:
    """Without importing anything, envlock predicts which copy of each CUDA library the
    loader will pick (the wheels', through torch's RUNPATH, over the image's own
    /usr/local/cuda and /lib/x86_64-linux-gnu copies). ``--deep`` imported torch on the
    GPU and read what it mapped: the same six copies, every one."""
    predicted = _libraries(FILES)
    seen = _libraries(DEEP)
    assert set(predicted) == set(seen) and len(seen) == 12
    for key, (selected, loaded) in seen.items():
        assert predicted[key][0] is selected is loaded, key
    chosen = {name: path for (name, path), (sel, _) in seen.items() if sel}
    assert sorted(chosen) == ["cublas", "cublasLt", "cudart", "cudnn", "nccl", "nvjitlink"]
    assert all("/site-packages/" in path for path in chosen.values())


def test_the_gpu_is_the_matrix_h100_sxm() -> None:
    from envlock.matrix import get_matrix

    snap = load_snapshot(str(DEEP))
    (gpu,) = snap.gpus
    model = get_matrix().find_gpu(gpu.name or "", gpu.memory_mib)
    assert model is not None and model.id == "h100-sxm"
    assert gpu.compute_capability == model.compute_capability == "9.0"


def test_doctor_finds_no_known_problem_on_either_snapshot() -> None:
    for path in (DEEP, FILES):
        r = run_cli("doctor", "--snapshot", str(path))
        assert r.code == 0, r.out + r.err
        assert r.out.splitlines()[0] == f"doctor {path}: no known problem"


def test_a_snapshot_without_deep_is_not_said_to_differ_from_one_with_it() -> None:
    """The same machine, recorded with and without ``--deep``: the second does not know
    which cuDNN and NCCL torch was built with. That is unknown, not a difference and not
    agreement: a warning that names the facts, never a drift that blocks training."""
    r = run_cli("fleet", "--snapshots", str(SNAPSHOTS / "real-h100-sxm-*.json"), "--json")
    assert r.code == 0, r.out + r.err
    doc = json.loads(r.out)
    found = [(f["id"], f["severity"]) for f in doc["findings"]]
    assert found == [("fleet-unknown", "warning")]
    detail = doc["findings"][0]["detail"]
    assert "torch cuDNN 9.19.0 on 1 node, (not recorded) on real-h100-sxm-files.json" in detail
    assert "torch NCCL 2.28.9" in detail and "absent" not in detail
    strict = run_cli("fleet", "--snapshots", str(SNAPSHOTS / "real-h100-sxm-*.json"),
                     "--strict")
    assert strict.code == 1
    assert strict.out.splitlines()[0].endswith("2 groups, 1 problem, none blocks training")


def test_resolve_from_the_real_snapshot_takes_its_machine(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "empty-cache"))
    out = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--from-snapshot", str(DEEP), "--offline", "-o", str(out))
    assert r.code == 0, r.err
    from envlock.lock.io import load_lock

    (target,) = load_lock(str(out)).targets
    assert target.name == "h100-sxm" and target.gpu_models == ("h100-sxm",)
    assert (target.python, target.glibc, target.driver) == ("3.12", "2.39", "580.159.04")
    assert target.torch.variant.startswith("cu13")  # driver 580: CUDA 13 builds fit


def test_verify_against_the_lock_names_the_system_copies_beside_the_wheels(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "empty-cache"))
    lock = tmp_path / "envlock.lock"
    assert run_cli("resolve", "--from-snapshot", str(DEEP), "--offline", "-o",
                   str(lock)).code == 0
    r = run_cli("verify", "--lock", str(lock), "--snapshot", str(DEEP), "--json")
    doc = json.loads(r.out)
    dupes = {f["subject"]: f for f in doc["findings"] if f["id"] == "library-duplicate"}
    assert set(dupes) == {"cudnn", "nccl"}
    assert "/lib/x86_64-linux-gnu/libnccl.so.2 2.28.3" in dupes["nccl"]["detail"]
