"""Is the model data-parallel, and do the ranks start from the same weights?

Wrapping is judged by behaviour: DDP has ``require_backward_grad_sync``; FSDP (1 and 2) and
tensor parallelism leave ``FullyShardedDataParallel``/``FSDPModule`` modules or DTensor
parameters; other engines keep the user's model as ``.module`` next to a process group.
"""

from __future__ import annotations

import hashlib
from typing import Any, Dict, List, Optional, Sequence

from envlock.checks.finding import Finding

__all__ = ["model_facts", "judge_model"]

#: how many parameters are digested (first, middle, last) and how many elements of each
_PARAMS = 3
_ELEMENTS = 4096


def _sharded(model: Any) -> bool:
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP
    except Exception:  # noqa: BLE001
        FSDP = None  # type: ignore[assignment,misc]  # noqa: N806
    try:
        from torch.distributed.fsdp import FSDPModule
    except Exception:  # noqa: BLE001
        FSDPModule = None  # type: ignore[assignment,misc]  # noqa: N806
    kinds = tuple(k for k in (FSDP, FSDPModule) if k is not None)
    modules = model.modules() if hasattr(model, "modules") else [model]
    if kinds and any(isinstance(m, kinds) for m in modules):
        return True
    try:
        from torch.distributed.tensor import DTensor
    except Exception:  # noqa: BLE001
        return False
    params = model.parameters() if hasattr(model, "parameters") else []
    return any(isinstance(p, DTensor) for p in params)


def _wrapped(model: Any) -> bool:
    if hasattr(model, "require_backward_grad_sync"):
        return True
    if hasattr(model, "module") and any(hasattr(model, a) for a in
                                        ("process_group", "data_parallel_group",
                                         "dp_process_group")):
        return True
    return _sharded(model)


def _digests(model: Any) -> Dict[str, str]:
    import torch

    named = [(n, p) for n, p in model.named_parameters() if p.device.type != "meta"]
    if not named:
        return {}
    picks = sorted({0, len(named) // 2, len(named) - 1})[:_PARAMS]
    out = {}
    with torch.no_grad():
        for i in picks:
            name, p = named[i]
            flat = p.detach().reshape(-1)[:_ELEMENTS].contiguous().cpu()
            raw = bytes(flat.view(torch.uint8).tolist())
            out[name] = hashlib.sha256(raw + str(tuple(p.shape)).encode()).hexdigest()[:16]
    return out


def model_facts(model: Any) -> Dict[str, Any]:
    """What one rank sends about its model (small: a flag and three short digests)."""
    if model is None:
        return {"present": False}
    sharded = _sharded(model)
    facts: Dict[str, Any] = {"present": True, "wrapped": _wrapped(model), "sharded": sharded,
                             "digests": {}}
    if not sharded and hasattr(model, "named_parameters"):
        facts["digests"] = _digests(model)
    dev = _device(model)
    facts["device"] = dev
    return facts


def _device(model: Any) -> Optional[str]:
    try:
        p = next(iter(model.parameters()))
    except Exception:  # noqa: BLE001 - no parameters: no device to judge
        return None
    return str(p.device)


def judge_model(facts: Sequence[Dict[str, Any]]) -> List[Finding]:
    world = len(facts)
    if world < 2 or not all(f.get("present") for f in facts):
        return []
    out = []
    bare = [r for r, f in enumerate(facts) if not f["wrapped"]]
    if bare:
        out.append(Finding(
            "training-model-unwrapped", "warning", "training",
            f"the model is not wrapped in DDP or FSDP on {len(bare)} of {world} ranks",
            "gradients are not averaged across ranks: each rank trains its own copy",
            ("model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank])",
             "or FSDP: torch.distributed.fsdp.fully_shard(model)"), subject="model"))
    common = set(facts[0]["digests"])
    for f in facts[1:]:
        common &= set(f["digests"])
    differ = sorted(n for n in common if len({f["digests"][n] for f in facts}) > 1)
    if differ:
        out.append(Finding(
            "training-model-params", "error", "training",
            "model parameters differ between ranks", "differ: " + ", ".join(differ),
            ("seed every rank the same before building the model (torch.manual_seed(seed)), "
             "or wrap it in DDP, which broadcasts rank 0's weights",), subject="model"))
    return out
