"""``doctor --smoke``: real child processes, real process deaths, real gloo all-reduces."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from envlock.checks.doctor import smoke_findings
from envlock.knowledge.facts import facts_from_snapshot
from envlock.checks.smoke import SmokeResult, _run_group, classify, run_allreduce, run_smoke
from envlock.matrix import get_matrix
from envlock.snapshot import load_snapshot
from support.cli import run_proc

M = get_matrix()
DATA = Path(__file__).resolve().parents[1] / "data"


def _die(sig: int) -> tuple:
    code = f"import os, signal, sys; print('working', flush=True); os.kill(os.getpid(), {sig})"
    codes, out, timed_out = _run_group([([sys.executable, "-c", code], dict(os.environ))], 30)
    return classify(codes[0], out, timed_out)


@pytest.mark.parametrize("sig,name", [(signal.SIGFPE, "SIGFPE"), (signal.SIGSEGV, "SIGSEGV"),
                                      (signal.SIGBUS, "SIGBUS"), (signal.SIGABRT, "SIGABRT")])
def test_real_process_deaths_are_classified(sig: int, name: str) -> None:
    assert _die(sig) == ("signal", name)


def test_a_hang_is_killed_at_the_timeout() -> None:
    code = "import time; time.sleep(60)"
    codes, out, timed_out = _run_group([([sys.executable, "-c", code], dict(os.environ)),
                                        ([sys.executable, "-c", code], dict(os.environ))], 1.0)
    assert timed_out and classify(codes[0], out, timed_out) == ("timeout", "timeout")


def test_exit_codes_and_wrong_results() -> None:
    assert classify(0, "ok", False) == ("ok", None)
    assert classify(3, "rank 1 all_reduce WRONG", False) == ("wrong", None)
    assert classify(1, "Traceback", False) == ("error", None)
    assert classify(136, "", False) == ("signal", "SIGFPE")  # a shell reports 128+8


@pytest.mark.torch
def test_gloo_allreduce_for_real_on_cpu() -> None:
    pytest.importorskip("torch")
    outcome, sig, out = run_allreduce("gloo", 2, timeout=120)
    assert (outcome, sig) == ("ok", None), out
    assert "rank 0 all_reduce ok" in out and "rank 1 all_reduce ok" in out


@pytest.mark.torch
def test_cpu_only_machine_gets_the_gloo_check() -> None:
    pytest.importorskip("torch")
    (r,) = run_smoke([], timeout=120)
    assert r.name == "gloo-allreduce" and r.ok, r.output


def test_a_sigfpe_on_an_h20_box_points_at_the_cublas_advisory() -> None:
    snap = load_snapshot(str(DATA / "snapshots" / "h20-cublas121.json"))
    facts = facts_from_snapshot(snap, M)
    died = SmokeResult("gemm[0]", "signal", "SIGFPE", "fp32/fp16/bf16 GEMMs signal",
                       "fp32 ok relerr=1e-07\n")
    findings, annotated = smoke_findings([died], M, facts)
    assert annotated[0].advisories[0] == "h20-cublas121-sigfpe"
    (f,) = findings
    assert f.severity == "error" and f.id == "smoke-gemm"
    assert f.fix[0].startswith("pip install nvidia-cublas-cu12==12.4.5.8")


def test_an_nccl_hang_that_p2p_disable_cures_is_reported_with_the_setting() -> None:
    snap = load_snapshot(str(DATA / "snapshots" / "h100-match.json"))
    hang = SmokeResult("nccl-allreduce", "timeout", "timeout",
                       "hangs with P2P and works with NCCL_P2P_DISABLE=1", "",
                       works_with={"NCCL_P2P_DISABLE": "1"})
    findings, _ = smoke_findings([hang], M, facts_from_snapshot(snap, M))
    assert findings[0].fix[0] == "export NCCL_P2P_DISABLE=1"
    assert findings[0].category == "nccl"


@pytest.mark.torch
def test_doctor_smoke_cli_on_this_machine() -> None:
    pytest.importorskip("torch")
    r = run_proc("doctor", "--smoke", "--json", timeout=300)
    data = json.loads(r.out)
    smoke = {s["check"]: s for s in data["smoke"]}
    if "gloo-allreduce" in smoke:  # a CPU-only machine (CI)
        assert smoke["gloo-allreduce"]["outcome"] == "ok"
    else:  # a GPU machine: GEMMs per GPU
        assert any(k.startswith("gemm[") for k in smoke)


def test_smoke_needs_torch_or_says_so(tmp_path: Path) -> None:
    env = dict(os.environ, PYTHONPATH="", PYTHONNOUSERSITE="1")
    code = ("import sys, importlib.util\n"
            "sys.modules['torch'] = None\n"
            "orig = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda n, *a: None if n == 'torch' else orig(n, *a)\n"
            "from envlock.cli import main\n"
            "sys.exit(main(['doctor', '--smoke']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode == 2 and "--smoke needs torch" in p.stderr
