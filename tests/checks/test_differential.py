"""Differential diagnosis (issue 28): every recognised symptom is named with its meaning,
then its causes ranked confirmed / possible / ruled out, then the next step."""

from __future__ import annotations

import json
from pathlib import Path

from envlock.checks.differential import differential
from envlock.checks.facts import facts_from_snapshot
from envlock.checks.logprep import MAX_TRIAGE_BYTES, prepare
from envlock.checks.logs import triage_logs
from envlock.checks.symptoms import MAX_BYTES, scan
from envlock.matrix import get_matrix
from envlock.snapshot import load_snapshot
from support.cli import run_cli

M = get_matrix()
DATA = Path(__file__).resolve().parents[1] / "data"
SPEAKER = DATA / "snapshots" / "3dspeaker-4xv100.json"
# the 3D-Speaker seed log of the issue (4x V100, torch 1.12.1+cu113, NCCL 2.10.3)
SEED = """Stage3: Training the speaker model...
INFO: Use GPU: 3 for training.
Traceback (most recent call last):
  File "speakerlab/bin/train.py", line 172, in <module>
RuntimeError: NCCL error in: /opt/conda/conda-bld/pytorch_1659484810403/work/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1191, unhandled system error, NCCL version 2.10.3
ncclSystemError: System call (socket, malloc, munmap, etc) failed.
"""


def _diff(log: str, snapshot: Path | None = None):  # type: ignore[no-untyped-def]
    facts = facts_from_snapshot(load_snapshot(str(snapshot)), M) if snapshot else None
    logs = [("train.log", log)]
    return differential(logs, M, facts, triage_logs(logs, M, facts))


def test_seed_log_with_its_machine_names_the_symptom_what_is_ruled_out_and_the_next_step(
        tmp_path: Path) -> None:
    d = _diff(SEED, SPEAKER)
    first = d.diagnoses[0]
    assert first.symptom == "nccl.ncclSystemError"
    assert "operating-system call" in first.meaning
    assert "NCCL_DEBUG=INFO" in first.next
    ruled = {c.advisory: c.facts for c in first.causes if c.verdict == "ruled-out"}
    assert "host.shm_bytes=34359738368" in ruled["nccl-unhandled-system-error"]
    assert "library.nccl.versions=1" in ruled["nccl-unhandled-system-error"]
    assert "dev-shm-too-small-container" in ruled
    log = tmp_path / "train.log"
    log.write_text(SEED)
    # the screen, with the snapshot taken inside the job (a launcher's RANK recorded): the
    # answer line, the symptom, its ruled-out causes, the next step
    doc = json.loads(SPEAKER.read_text())
    doc["env"] = {**doc.get("env", {}), "RANK": "0"}
    in_job = tmp_path / "in-job.json"
    in_job.write_text(json.dumps(doc))
    r = run_cli("doctor", "--snapshot", str(in_job), "--log", str(log))
    lines = r.out.splitlines()
    assert r.code == 0 and "no advisory explains the log" not in r.out
    assert lines[0].startswith(f"doctor {in_job}: ")
    assert lines[1].startswith("symptom: ncclSystemError")
    assert any(ln.strip().startswith("ruled out: nccl-unhandled-system-error (")
               and "host.shm_bytes=32 GiB" in ln for ln in lines)
    assert any(ln.strip().startswith("next:") and "NCCL_DEBUG=INFO" in ln for ln in lines)
    assert len(lines) <= 40
    # JSON and -v carry the same structure
    data = json.loads(run_cli("doctor", "--snapshot", str(in_job), "--log", str(log),
                              "--json").out)
    sym = data["diagnosis"]["symptoms"][0]
    assert sym["symptom"] == "nccl.ncclSystemError" and "NCCL_DEBUG=INFO" in sym["next"]
    verdicts = {c["id"]: c["verdict"] for c in sym["causes"]}
    assert verdicts["nccl-unhandled-system-error"] == "ruled-out"
    verbose = run_cli("doctor", "--snapshot", str(in_job), "--log", str(log), "-v").out
    assert all(f"ruled out: {c}" in verbose for c, v in verdicts.items() if v == "ruled-out")
    # the field report's own snapshot has no launcher variable: whether the job set
    # NCCL_SOCKET_IFNAME=docker0 is not known from it, so that cause stays possible, with
    # what the machine already rules out of it and the command that decides the rest
    r = run_cli("doctor", "--snapshot", str(SPEAKER), "--log", str(log))
    lines = r.out.splitlines()
    assert lines[0].startswith(f"doctor {SPEAKER}: ") and "no advisory" not in r.out
    at = next(i for i, ln in enumerate(lines)
              if ln.strip().startswith("possible:  nccl-unhandled-system-error"))
    assert lines[at + 1].strip() == "decided by env.NCCL_SOCKET_IFNAME"
    assert lines[at + 2].strip() == "known: host.shm_bytes=32 GiB, library.nccl.versions=1"
    assert "echo $NCCL_SOCKET_IFNAME" in lines[at + 3]
    assert any("taken outside a job" in ln for ln in lines)
    # an advisory the symptom lists as possible is not listed again as not checked
    assert not any(ln.startswith("not checked:") and "nccl-unhandled-system-error" in ln
                   for ln in lines)
    data = json.loads(run_cli("doctor", "--snapshot", str(SPEAKER), "--log", str(log),
                              "--json").out)
    cause = next(c for c in data["diagnosis"]["symptoms"][0]["causes"]
                 if c["id"] == "nccl-unhandled-system-error")
    assert cause["verdict"] == "possible" and cause["facts"] == ["env.NCCL_SOCKET_IFNAME"]
    assert cause["known"] == ["host.shm_bytes=34359738368", "library.nccl.versions=1"]


def test_without_a_machine_the_causes_are_possible_with_the_command_that_decides_them() -> None:
    d = _diff(SEED)
    causes = d.diagnoses[0].causes
    assert causes[0].advisory == "nccl-unhandled-system-error"
    assert causes[0].verdict == "possible" and "host.shm_bytes" in causes[0].facts
    assert "--snapshot" in causes[0].decide
    assert d.first is not None and d.first.advisory == "nccl-unhandled-system-error"


def test_no_symptom_is_the_only_case_for_no_advisory_explains_the_log(tmp_path: Path) -> None:
    healthy = tmp_path / "ok.log"
    healthy.write_text("epoch 1 step 100 loss 2.31\nepoch 1 step 200 loss 2.05\nsaved ckpt\n")
    r = run_cli("doctor", "--snapshot", str(SPEAKER), "--log", str(healthy))
    assert "no advisory explains the log" in r.out.splitlines()[0]
    assert "symptom:" not in r.out


def test_a_bare_invalid_device_ordinal_is_not_blamed_on_mig_without_mig_facts() -> None:
    log = "RuntimeError: CUDA error: invalid device ordinal\n"
    d = _diff(log)
    assert d.first is not None and d.first.advisory == "rank-device-mapping"
    assert d.diagnoses[0].symptom in ("cudart.cudaErrorInvalidDevice", "torch.invalid-ordinal")


def test_a_gdb_backtrace_spinning_in_cudastreamquery_is_hang_evidence() -> None:
    log = ("Thread 1 (Thread 0x7f0 (LWP 4100)):\n"
           "#0  0x00007f07 in ?? () from /lib/x86_64-linux-gnu/libcuda.so.1\n"
           "#5  0x00007f07200082c8 in cudaStreamQuery () from /usr/local/cuda/lib64/libcudart.so.12\n"
           "#6  0x000055 in testStreamSynchronize(int, CUstream_st**, ncclComm**) ()\n"
           "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
           "  GPU 0: NVIDIA GeForce RTX 4090\n  GPU 1: NVIDIA GeForce RTX 4090\n")
    d = _diff(log)
    hang = next(x for x in d.diagnoses if x.symptom == "hang.gdb-cuda-wait")
    assert hang.kind == "hang"
    assert "geforce-multi-gpu-p2p-hang-corruption" in [c.advisory for c in hang.causes]


def test_the_matcher_reads_any_bytes_and_says_when_a_log_is_cut() -> None:
    # binary garbage with an error inside, NULs, invalid UTF-8: found, nothing raised
    blob = bytes(range(256)) * 64 + b"\nCUDA error: an illegal memory access was encountered\n"
    s = scan(b"\xff\xfe\x00" + blob + "训练 ✓\n".encode(), M)
    assert "cudart.cudaErrorIllegalAddress" in [h.symptom for h in s.hits] and s.cut is None
    big = b"x" * (MAX_BYTES + 10) + b"\nSegmentation fault (core dumped)\n"
    s = scan(big, M)
    assert s.cut is not None and "read the last 32 MiB" in s.cut
    assert "signal.SIGSEGV" in [h.symptom for h in s.hits]
    text, note = prepare("\n".join(f"warning {i} " + "w" * 90 for i in range(12000)))
    assert note is not None and f"{MAX_TRIAGE_BYTES // 1024} KiB" in note
    assert len(text) <= MAX_TRIAGE_BYTES + 200


def test_binary_lines_are_skipped_but_text_in_any_script_is_kept() -> None:
    text, note = prepare("\x00\x01\x02\ufffd\ufffd\x03\x04\n训练进度 50%\nRuntimeError: boom\n")
    assert "RuntimeError: boom" in text and "50%" in text
    assert note is not None and "1 binary line skipped" in note


def test_healthy_corpus_logs_recognise_no_symptom() -> None:
    from envlock import _toml

    entries = _toml.loads((DATA / "logs" / "corpus.toml").read_text())["log"]
    for e in entries:
        if e["expect"] == "none":
            hits = scan((DATA / "logs" / e["file"]).read_bytes(), M).hits
            assert not hits, (e["file"], [h.symptom for h in hits])


def test_progress_lines_are_read_once_but_numbered_errors_are_kept() -> None:
    lines = [f"step {i} loss 0.{i}" for i in range(5000)]
    lines += ["NVRM: Xid (PCI:0000:01:00): 79, pid=1", "NVRM: Xid (PCI:0000:01:00): 13, pid=2"]
    text, _ = prepare("\n".join(lines))
    assert text.count("step ") == 1
    assert "): 79," in text and "): 13," in text
