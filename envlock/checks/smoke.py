"""``doctor --smoke``: prove the stack on the hardware, each check in child processes.

A crash or a hang is observed, not suffered: every check runs in its own processes with
a timeout, and the way they end (exit status, signal, timeout, output) is classified and
mapped to advisories. Checks:

* ``gemm[i]``: a matrix multiply on GPU ``i`` in fp32, fp16 and bf16 (bf16 only on compute
  capability >= 8.0), including the shape that trips cuBLAS 12.1 on H20 (SIGFPE);
* ``nccl-allreduce``: an NCCL all-reduce across the local GPUs; on a hang it runs once more
  with ``NCCL_P2P_DISABLE=1`` and reports which setting works; a wrong sum is reported
  as silent data corruption;
* ``gloo-allreduce``: the same on CPU with gloo (the check a CPU-only machine gets).
"""

from __future__ import annotations

import os
import signal as _signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

__all__ = ["SmokeResult", "run_smoke", "classify", "run_allreduce", "run_gemm", "GEMM", "WORKER"]

GEMM = r"""
import sys, torch
dev = int(sys.argv[1])
dtypes = [d for d in sys.argv[2].split(",") if d]
torch.cuda.set_device(dev)
for name in dtypes:
    dt = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[name]
    a = torch.randn(1024, 1024, device="cuda", dtype=dt)
    b = torch.randn(1024, 1024, device="cuda", dtype=dt)
    c = a @ b
    torch.cuda.synchronize()
    x = torch.zeros(64, 14688, device="cuda", dtype=dt)
    y = torch.zeros(14688, 1536, device="cuda", dtype=dt)
    z = x @ y
    torch.cuda.synchronize()
    ref = a.float() @ b.float()
    err = ((c.float() - ref).abs().max() / ref.abs().max().clamp(min=1e-6)).item()
    bad = err > (1e-3 if name == "fp32" else 5e-2)
    print("%s %s relerr=%.3g" % (name, "WRONG" if bad else "ok", err), flush=True)
    if bad:
        sys.exit(3)
"""

WORKER = r"""
import datetime, os, sys
import torch
import torch.distributed as dist
backend = sys.argv[1]
rank = int(os.environ["RANK"]); world = int(os.environ["WORLD_SIZE"])
timeout = datetime.timedelta(seconds=float(os.environ.get("ENVLOCK_SMOKE_TIMEOUT", "60")))
if backend == "nccl":
    torch.cuda.set_device(rank)
dist.init_process_group(backend, timeout=timeout)
dev = "cuda:%d" % rank if backend == "nccl" else "cpu"
t = torch.full((1 << 20,), float(rank + 1), device=dev)
dist.all_reduce(t)
if backend == "nccl":
    torch.cuda.synchronize()
ok = bool((t == world * (world + 1) / 2).all())
dist.destroy_process_group()
print("rank %d all_reduce %s" % (rank, "ok" if ok else "WRONG"), flush=True)
sys.exit(0 if ok else 3)
"""


@dataclass(frozen=True)
class SmokeResult:
    name: str
    outcome: str  # ok | signal | timeout | error | wrong | skipped
    signal: Optional[str] = None
    detail: str = ""
    output: str = ""
    advisories: Tuple[str, ...] = ()
    #: for NCCL: the environment that made it work on the retry
    works_with: Optional[Mapping[str, str]] = None

    @property
    def ok(self) -> bool:
        return self.outcome in ("ok", "skipped")


def classify(returncode: Optional[int], output: str, timed_out: bool) -> Tuple[str, Optional[str]]:
    """(outcome, signal name) of a finished or killed child process."""
    if timed_out:
        return "timeout", "timeout"
    if returncode is None:
        return "error", None
    if returncode < 0:
        try:
            name = _signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return "signal", name
    if returncode == 3 or "WRONG" in output:
        return "wrong", None
    if returncode != 0:
        for sig, num in (("SIGFPE", 8), ("SIGSEGV", 11), ("SIGBUS", 7), ("SIGABRT", 6)):
            if returncode == 128 + num:
                return "signal", sig
        return "error", None
    return "ok", None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run_group(cmds: Sequence[Tuple[List[str], Dict[str, str]]], timeout: float
               ) -> Tuple[List[Optional[int]], str, bool]:
    """Start every command in its own session; wait; kill them all on timeout."""
    procs = []
    for argv, env in cmds:
        procs.append(subprocess.Popen(argv, env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True,
                                      start_new_session=True))
    deadline = time.monotonic() + timeout
    timed_out = False
    outputs: List[str] = []
    codes: List[Optional[int]] = []
    for p in procs:
        left = max(0.1, deadline - time.monotonic())
        try:
            out, _ = p.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            timed_out = True
            for q in procs:
                try:
                    os.killpg(q.pid, _signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            out, _ = p.communicate()
        outputs.append(out or "")
        codes.append(p.returncode)
    return codes, "\n".join(o.strip() for o in outputs if o.strip()), timed_out


def run_gemm(index: int, cc: Optional[str], *, python: str = sys.executable,
             env: Optional[Mapping[str, str]] = None, timeout: float = 180.0) -> SmokeResult:
    dtypes = ["fp32", "fp16"]
    skipped = ""
    if cc is None or tuple(int(x) for x in cc.split(".")) >= (8, 0):
        dtypes.append("bf16")
    else:
        skipped = f" (bf16 not run: compute capability {cc} < 8.0)"
    e = dict(os.environ if env is None else env)
    e["CUDA_VISIBLE_DEVICES"] = e.get("CUDA_VISIBLE_DEVICES", "")  # keep the user's mask
    if not e["CUDA_VISIBLE_DEVICES"]:
        del e["CUDA_VISIBLE_DEVICES"]
    codes, out, to = _run_group([([python, "-c", GEMM, str(index), ",".join(dtypes)], e)],
                                timeout)
    outcome, sig = classify(codes[0], out, to)
    detail = f"{'/'.join(dtypes)} GEMMs {outcome}{skipped}"
    return SmokeResult(f"gemm[{index}]", outcome, sig, detail, out[-2000:])


def run_allreduce(backend: str, world: int, *, python: str = sys.executable,
                  env: Optional[Mapping[str, str]] = None, timeout: float = 120.0,
                  extra_env: Optional[Mapping[str, str]] = None) -> Tuple[str, Optional[str], str]:
    base = dict(os.environ if env is None else env)
    base.update(extra_env or {})
    port = _free_port()
    base.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                 "WORLD_SIZE": str(world), "ENVLOCK_SMOKE_TIMEOUT": str(max(5.0, timeout - 5))})
    cmds = []
    for rank in range(world):
        e = dict(base, RANK=str(rank), LOCAL_RANK=str(rank))
        cmds.append(([python, "-c", WORKER, backend], e))
    codes, out, to = _run_group(cmds, timeout)
    worst: Tuple[str, Optional[str]] = ("ok", None)
    for c in codes:
        o, s = classify(c, out, to)
        if o != "ok":
            worst = (o, s)
            if o in ("signal", "timeout"):
                break
    return worst[0], worst[1], out[-3000:]


def run_smoke(gpus: Sequence[Tuple[int, Optional[str]]], *, python: str = sys.executable,
              env: Optional[Mapping[str, str]] = None, timeout: float = 120.0,
              cpu_world: int = 2) -> List[SmokeResult]:
    """Run the smoke checks for visible GPUs ``[(index, cc), ...]`` (none: gloo on CPU)."""
    results: List[SmokeResult] = []
    e = dict(os.environ if env is None else env)
    if not gpus:
        o, s, out = run_allreduce("gloo", cpu_world, python=python, env=e, timeout=timeout)
        results.append(SmokeResult("gloo-allreduce", o, s,
                                   f"gloo all-reduce over {cpu_world} CPU processes {o}", out))
        return results
    for i, (index, cc) in enumerate(gpus):
        results.append(run_gemm(i, cc, python=python, env=e, timeout=timeout))
    if len(gpus) >= 2:
        o, s, out = run_allreduce("nccl", len(gpus), python=python, env=e, timeout=timeout)
        if o == "timeout" and e.get("NCCL_P2P_DISABLE") != "1":
            o2, s2, out2 = run_allreduce("nccl", len(gpus), python=python, env=e,
                                         timeout=timeout, extra_env={"NCCL_P2P_DISABLE": "1"})
            if o2 == "ok":
                results.append(SmokeResult(
                    "nccl-allreduce", "timeout", "timeout",
                    f"NCCL all-reduce over {len(gpus)} GPUs hangs with P2P and works with "
                    f"NCCL_P2P_DISABLE=1", out, works_with={"NCCL_P2P_DISABLE": "1"}))
            else:
                results.append(SmokeResult(
                    "nccl-allreduce", "timeout", "timeout",
                    f"NCCL all-reduce over {len(gpus)} GPUs hangs, also with "
                    f"NCCL_P2P_DISABLE=1 ({o2})", out + "\n" + out2))
        else:
            results.append(SmokeResult("nccl-allreduce", o, s,
                                       f"NCCL all-reduce over {len(gpus)} GPUs {o}", out))
    return results
