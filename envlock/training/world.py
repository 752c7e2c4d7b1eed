"""Process group, world size and device binding: the launcher's variables against torch.

Facts are collected per rank (:func:`local_facts`, cheap, no collective) and judged either
alone (no process group: :func:`judge_alone`) or together (:func:`judge_world`).
"""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, List, Mapping, Optional, Sequence

from envlock.checks.finding import Finding

__all__ = ["local_facts", "judge_alone", "judge_world", "env_int"]

LAUNCH = "torchrun --nproc-per-node {n} train.py"


def env_int(env: Mapping[str, str], name: str) -> Optional[int]:
    try:
        return int(env[name])
    except (KeyError, ValueError):
        return None


def local_facts(model_device: Optional[str] = None) -> Dict[str, Any]:
    """This rank's launcher variables, process group and CUDA device."""
    import torch

    env = os.environ
    facts: Dict[str, Any] = {
        "host": socket.gethostname(), "env_world": env_int(env, "WORLD_SIZE"),
        "env_rank": env_int(env, "RANK"), "local_rank": env_int(env, "LOCAL_RANK"),
        "pg": False, "pg_world": None, "pg_rank": None, "backend": None,
        "cuda": False, "gpus": 0, "device": None}
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        facts.update(pg=True, pg_world=dist.get_world_size(), pg_rank=dist.get_rank(),
                     backend=str(dist.get_backend()))
    # device_count does not create a CUDA context; is_available is False on CPU builds
    try:
        if torch.cuda.is_available():
            facts["cuda"] = True
            facts["gpus"] = torch.cuda.device_count()
            if model_device and model_device.startswith("cuda:"):
                facts["device"] = int(model_device.split(":")[1])
            elif torch.cuda.is_initialized() or facts["local_rank"] is not None:
                facts["device"] = torch.cuda.current_device()
    except Exception:  # noqa: BLE001 - a broken CUDA is verify's subject; binding stays unknown
        facts["device"] = None
    return facts


def judge_alone(f: Mapping[str, Any]) -> List[Finding]:
    """No process group: several processes launched, or several GPUs idle."""
    if f["pg"]:
        return []
    if f["env_world"] is not None and f["env_world"] > 1:
        return [Finding(
            "training-no-process-group", "error", "training",
            f"WORLD_SIZE is {f['env_world']} but no process group is initialised",
            "every rank trains alone on the whole dataset: the launcher started the "
            "processes, the script never joined them",
            ("torch.distributed.init_process_group(backend='nccl')  # 'gloo' on CPU, "
             "before building the sampler and the model",), subject="process-group")]
    if f["cuda"] and f["gpus"] > 1:
        return [Finding(
            "training-one-gpu", "warning", "training",
            f"{f['gpus']} GPUs are visible but only one works: no process group",
            "a single process uses one GPU; the others sit idle",
            (LAUNCH.format(n=f["gpus"]) + "  # and init_process_group in the script",),
            subject="process-group")]
    return []


def judge_world(facts: Sequence[Mapping[str, Any]]) -> List[Finding]:
    """With a process group: world size against WORLD_SIZE, ranks against their GPUs."""
    out: List[Finding] = []
    world = len(facts)
    bad = [(r, f["env_world"]) for r, f in enumerate(facts)
           if f["env_world"] is not None and f["env_world"] != world]
    if bad:
        out.append(Finding(
            "training-world-size", "error", "training",
            f"WORLD_SIZE is {bad[0][1]} but the process group has {world} ranks",
            "the launcher and init_process_group(world_size=...) disagree",
            ("let the launcher decide: init_process_group() without world_size/rank",),
            subject="process-group"))
    out += _binding(facts)
    return out


def _binding(facts: Sequence[Mapping[str, Any]]) -> List[Finding]:
    out: List[Finding] = []
    wrong = []
    seen: Dict[Any, List[int]] = {}
    for r, f in enumerate(facts):
        if not f["cuda"] or f["device"] is None:
            continue
        seen.setdefault((f["host"], f["device"]), []).append(r)
        lr = f["local_rank"]
        if lr is not None and lr < f["gpus"] and f["device"] != lr:
            wrong.append((r, lr, f["device"]))
    shared = {k: v for k, v in seen.items() if len(v) > 1}
    fix = ("torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) before init_process_group "
           "and before moving the model",)
    if shared:
        (host, dev), ranks = min(shared.items(), key=lambda kv: kv[1])
        out.append(Finding(
            "training-device-binding", "error", "training",
            f"ranks {', '.join(map(str, ranks))} share cuda:{dev} on {host}",
            "two ranks on one GPU: NCCL fails with 'Duplicate GPU detected' or the job runs "
            "at a fraction of its speed", fix, subject="device"))
    elif wrong:
        r, lr, dev = wrong[0]
        out.append(Finding(
            "training-device-binding", "warning", "training",
            f"rank {r} has LOCAL_RANK {lr} but works on cuda:{dev}",
            "ranks are not bound to the GPU their launcher gave them", fix, subject="device"))
    return out
