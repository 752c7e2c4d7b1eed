"""Helpers for the fleet tests: per-node snapshot files and real torchrun launches."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from support.net import free_port  # noqa: F401  (the fleet tests import it from here)

DATA = Path(__file__).resolve().parents[1] / "data"
LOCK = str(DATA / "locks" / "h100-pypi.lock")
HARNESS = str(Path(__file__).resolve().parent / "fleet_rank.py")
#: the launcher variables a test must not inherit from whoever runs pytest
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
               "GROUP_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID",
               "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_RESTART_COUNT")


def _load(name: str) -> dict:
    return json.loads((DATA / "snapshots" / f"{name}.json").read_text())


def snapshot(kind: str = "match", host: str = "node01") -> dict:
    """h100-match, or one fact drifted: another NCCL, driver or GPU model."""
    snap = _load("h100-match")
    snap["host"]["hostname"] = host
    if kind == "nccl":
        snap["packages"]["nvidia-nccl-cu12"] = "2.20.5"
        for lib in snap["libraries"]:
            if lib["name"] == "nccl":
                lib["version"] = "2.20.5"
    elif kind == "driver":
        snap["driver"] = _load("h100-old-driver")["driver"]
    elif kind == "gpu":
        snap["gpus"] = copy.deepcopy(_load("h20-on-h100-lock")["gpus"])
    else:
        assert kind == "match", kind
    return snap


def write_snapshots(directory: Path, kinds: Sequence[str], pattern: str = "rank-{}.json",
                    names: Optional[Sequence[str]] = None) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for i, kind in enumerate(kinds):
        name = names[i] if names else str(i)
        (directory / pattern.format(name)).write_text(json.dumps(snapshot(kind, f"node{i}")))


def clean_env(extra: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in LAUNCH_VARS and not k.startswith("SLURM")}
    env.update(extra or {})
    return env


def torchrun(nproc: int, *args: str, script: Optional[str] = None,
             launcher: Sequence[str] = ("--standalone",)) -> List[str]:
    """``python -m torch.distributed.run ... -m envlock fleet ARGS`` (the venv's torch), or
    the test harness script instead of ``-m envlock``."""
    target = [script] if script else ["-m", "envlock"]
    return [sys.executable, "-m", "torch.distributed.run", *launcher,
            "--nproc-per-node", str(nproc), "--monitor-interval", "0.1", *target,
            "fleet", *args]


def run(cmd: Sequence[str], *, cwd: Path, env: Optional[Mapping[str, str]] = None,
        timeout: float = 150) -> "subprocess.CompletedProcess[str]":
    """Every launch has a hard timeout: no test can hang."""
    return subprocess.run(list(cmd), check=False, cwd=str(cwd), env=clean_env(env),
                          capture_output=True, text=True, timeout=timeout)


def finish(procs: Mapping[int, "subprocess.Popen[str]"], timeout: float = 150
           ) -> Dict[int, "subprocess.CompletedProcess[str]"]:
    """Wait for every started process, each with a hard timeout, and collect its exit code
    and output; whatever is still running when that fails is killed, so no test can leave
    a process behind or hang."""
    done = {}
    try:
        for key, proc in procs.items():
            out, err = proc.communicate(timeout=timeout)
            done[key] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
    return done


def rank_codes(directory: Path) -> Dict[int, int]:
    """Exit codes the harness recorded, by rank."""
    return {int(p.name.split("-")[1]): int(p.read_text())
            for p in directory.glob("rank-*") if p.is_file()}


def wait_for(what: str, ready: Callable[[], object], timeout: float = 120) -> object:
    """Poll ``ready()`` until it returns something truthy: tests wait on events, with a
    generous deadline (a loaded 2-core machine starts torch slowly)."""
    deadline = time.monotonic() + timeout
    while True:
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout:g} s")
        time.sleep(0.05)


def pids(codes: Path, rank: int) -> Optional[Tuple[int, int]]:
    """(envlock's pid, the harness's pid) of a rank, once the harness has started it."""
    path = codes / f"pid-{rank}"
    if not path.is_file():
        return None
    child, harness = path.read_text().split()
    return int(child), int(harness)


def process_env(pid: int) -> Dict[str, str]:
    """A running process's environment (Linux)."""
    raw = Path(f"/proc/{pid}/environ").read_bytes()
    return dict(item.split("=", 1) for item in raw.decode(errors="replace").split("\0")
                if "=" in item)


def store_has(addr: str, port: int, key: str) -> Callable[[], bool]:
    """A check that ``key`` is in the c10d store at ``addr:port`` (a real client)."""
    from datetime import timedelta

    import torch.distributed as dist

    client = dist.TCPStore(addr, port, None, False, timedelta(seconds=60))
    return lambda: bool(client.check([key]))
