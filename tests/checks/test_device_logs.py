"""Crash logs made on a real GPU host, and what ``doctor`` makes of them.

``tests/data/device/h100-2026-11-27/`` holds the unedited output of
``scripts/device_check.sh`` on a lent host (2026-11-27): one NVIDIA H100 80GB HBM3, driver
580.159.04, Python 3.12.3, torch 2.11.0+cu130 (CUDA 13.0, cuDNN 9.19, NCCL 2.28.9). Each
``*.log`` is one child process of ``scripts/device_crashes.py`` (a few lines of ordinary
PyTorch or Triton failing on purpose: out of memory, a device index that does not exist, an
index out of range inside a kernel, a store to an address the kernel does not own, GPUs
hidden by CUDA_VISIBLE_DEVICES), or, for ``nccl-duplicate-gpu.log``, two torchrun ranks of
``tests/training/nccl_guard.py`` on one GPU wrapping their model in DDP. The causes are
known because they were made; the text is what CUDA, NCCL and PyTorch printed.
``snapshot-deep.json`` is ``envlock snapshot --deep`` on the same host, minutes earlier.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Tuple

import pytest

from support.cli import run_cli, run_proc

HOST = Path(__file__).resolve().parents[1] / "data" / "device" / "h100-2026-11-27"
SNAPSHOT = HOST / "snapshot-deep.json"


def _doctor(log: str, *extra: str, env: Any = None) -> Dict[str, Any]:
    args = ("doctor", "--log", str(HOST / log), "--json", *extra)
    r = run_proc(*args, env=env) if env is not None else run_cli(*args)
    assert r.code in (0, 1), r.err
    return json.loads(r.out)


def _symptoms(doc: Dict[str, Any]) -> List[str]:
    return [s["symptom"] for s in doc["diagnosis"]["symptoms"]]


def _causes(doc: Dict[str, Any]) -> Dict[str, str]:
    """advisory id -> its verdict, over every symptom (the first verdict seen)."""
    out: Dict[str, str] = {}
    for s in doc["diagnosis"]["symptoms"]:
        for c in s["causes"]:
            out.setdefault(c["id"], c["verdict"])
    return out


#: log -> (the symptom doctor must name first, the advisory it must rank first or None
#: where the cause is the program's own code and no advisory applies)
CASES: Dict[str, Tuple[str, Any]] = {
    "nccl-duplicate-gpu.log": ("nccl.ncclInvalidUsage", "nccl-duplicate-gpu"),
    "ordinal.log": ("cudart.cudaErrorInvalidDevice", "rank-device-mapping"),
    "oom.log": ("torch.cuda-oom", None),
    "assert.log": ("torch.device-side-assert", None),
    "assert-blocking.log": ("torch.device-side-assert", None),
    "illegal-address.log": ("cudart.cudaErrorIllegalAddress", None),
    # made with CUDA_VISIBLE_DEVICES='' and '7': the advisory that names the variable is
    # the cause; the snapshot was taken from a shell, so it can only be possible
    "no-visible-gpu.log": ("torch.no-gpus", "no-visible-gpu"),
    "bad-visible-gpu.log": ("torch.no-gpus", "no-visible-gpu"),
}


@pytest.mark.parametrize("log", sorted(CASES))
def test_each_real_failure_is_named_with_its_meaning_and_a_next_step(log: str) -> None:
    symptom, first = CASES[log]
    doc = _doctor(log, "--snapshot", str(SNAPSHOT))
    assert _symptoms(doc)[0] == symptom, _symptoms(doc)
    top = doc["diagnosis"]["symptoms"][0]
    assert top["meaning"] and top["next"] and top["log"]["line"]
    ids = [f["id"] for f in doc["findings"]]
    if first is None:
        # the program's own bug: no advisory may claim it, and nothing blocks the machine
        assert doc["ok"] is True and ids == [], ids
    else:
        assert ids[:1] == [first], ids


def test_the_duplicate_gpu_log_names_nccls_own_line_too() -> None:
    doc = _doctor("nccl-duplicate-gpu.log", "--snapshot", str(SNAPSHOT))
    assert "nccl-warn.duplicate-gpu" in _symptoms(doc)
    assert _causes(doc)["nccl-duplicate-gpu"] in ("confirmed", "possible")


def test_the_log_alone_on_a_gpu_less_laptop_still_names_the_failure() -> None:
    """Triage far from the machine: no snapshot, this GPU-less host's facts underneath."""
    doc = _doctor("nccl-duplicate-gpu.log")
    assert _symptoms(doc)[0] == "nccl.ncclInvalidUsage"
    assert [f["id"] for f in doc["findings"]][:1] == ["nccl-duplicate-gpu"]


def test_a_live_doctor_does_not_rule_out_the_jobs_environment_by_its_own(
        tmp_path: Path) -> None:
    """The job ran with CUDA_VISIBLE_DEVICES='' (no-visible-gpu.log) or '7' on a one-GPU
    machine (bad-visible-gpu.log); the user runs ``envlock doctor --log`` afterwards from a
    shell on the same machine, where the variable is unset. That shell's environment is
    not the job's: the advisory that names the variable stays a possible cause with the
    command that decides it. (It was "ruled out (env.CUDA_VISIBLE_DEVICES=absent)": a
    confident wrong answer, seen on the real host.) Facts of the machine still decide:
    a GPU is visible, so a CPU-only torch is not the cause."""
    from support.fakenvml import FakeNvmlUnavailable, build_fake_nvml, nvml_env, scenario_file

    try:
        libdir = build_fake_nvml(tmp_path / "nvml")
    except FakeNvmlUnavailable:
        pytest.skip("no C compiler for the fake libnvidia-ml.so.1")
    scen = scenario_file(tmp_path, """
        driver 580.159.04
        cuda 13000
        gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-0 cc=9.0 mem=81559 bus=00000000:3C:00.0 mig=0
    """)
    env = nvml_env(libdir, scen)
    for log in ("no-visible-gpu.log", "bad-visible-gpu.log"):
        doc = _doctor(log, env=env)
        causes = _causes(doc)
        assert causes["no-visible-gpu"] == "possible", causes
        assert causes["nvml-container-lost-devices"] == "ruled-out", causes  # NVML answered


def _snapshot_with(tmp_path: Path, **env: str) -> Path:
    """The host's snapshot as if taken in another process: its variables replaced by
    ``env`` (the same machine, GPUs and libraries)."""
    doc = json.loads(SNAPSHOT.read_text())
    doc["env"] = dict(env)
    out = tmp_path / "snapshot.json"
    out.write_text(json.dumps(doc))
    return out


def test_a_snapshot_from_a_shell_does_not_rule_out_the_jobs_environment(
        tmp_path: Path) -> None:
    """``snapshot-deep.json`` was taken from a shell where CUDA_VISIBLE_DEVICES was unset;
    the job that printed no-visible-gpu.log had it set to ''. Taken for the job's, that
    shell's environment ruled the real cause out ("env.CUDA_VISIBLE_DEVICES=absent"). A
    snapshot with no launcher variable is not the job's environment: the cause stays
    possible, with the command that decides it and one line saying why. Inside the job
    (a launcher's RANK present) the snapshot's variables decide, both ways."""
    assert "RANK" not in json.loads(SNAPSHOT.read_text())["env"]
    for log in ("no-visible-gpu.log", "bad-visible-gpu.log"):
        doc = _doctor(log, "--snapshot", str(SNAPSHOT))
        assert _causes(doc)["no-visible-gpu"] == "possible"
        assert _causes(doc)["cpu-only-torch-on-gpu-host"] == "ruled-out"  # the machine's
        assert "outside a job" in doc["environment"]
    r = run_cli("doctor", "--log", str(HOST / "no-visible-gpu.log"), "--snapshot",
                str(SNAPSHOT))
    assert r.code == 1 and "taken outside a job" in r.out, r.out
    in_job = _snapshot_with(tmp_path, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1",
                            CUDA_VISIBLE_DEVICES="")
    doc = _doctor("no-visible-gpu.log", "--snapshot", str(in_job))
    assert _causes(doc)["no-visible-gpu"] == "confirmed" and "environment" not in doc
    unset = _snapshot_with(tmp_path, SLURM_PROCID="0")
    doc = _doctor("no-visible-gpu.log", "--snapshot", str(unset))
    assert _causes(doc)["no-visible-gpu"] == "ruled-out"
    # a log that no environment variable explains gets no such line
    r = run_cli("doctor", "--log", str(HOST / "oom.log"), "--snapshot", str(SNAPSHOT))
    assert "outside a job" not in r.out


def test_a_snapshot_records_the_launchers_variables(tmp_path: Path) -> None:
    """What tells a job's snapshot from a shell's is recorded by ``envlock snapshot``."""
    import os

    env = dict(os.environ, RANK="3", LOCAL_RANK="1", SLURM_PROCID="3", SLURM_JOB_ID="77")
    r = run_proc("snapshot", "-o", str(tmp_path / "s.json"), env=env)
    assert r.code == 0, r.err
    recorded = json.loads((tmp_path / "s.json").read_text())["env"]
    assert {k: recorded.get(k) for k in ("RANK", "LOCAL_RANK", "SLURM_PROCID",
                                         "SLURM_JOB_ID")} == {
        "RANK": "3", "LOCAL_RANK": "1", "SLURM_PROCID": "3", "SLURM_JOB_ID": "77"}
