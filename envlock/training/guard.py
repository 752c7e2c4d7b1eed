"""``check`` and ``epoch``: gather each rank's facts, judge them, report, maybe raise."""

from __future__ import annotations

import os
import weakref
from typing import Any, Callable, Dict, List, MutableMapping, Optional, Tuple

from envlock.checks.finding import Finding, sort_findings
from envlock.training.draw import Draw, draw, resolve
from envlock.training.errors import TrainingGuardError
from envlock.training.model import judge_model, model_facts
from envlock.training.report import emit
from envlock.training.sharding import judge_sharding
from envlock.training.world import env_int, judge_alone, judge_world, local_facts

__all__ = ["check", "epoch"]

_GLOO: Dict[Tuple[int, int], Any] = {}


def _rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return env_int(os.environ, "RANK") or 0


def _group() -> Any:
    """A gloo group for the exchange: on nccl, ranks that share a GPU (the very mistake
    being checked) would fail inside the collective before the finding could be said."""
    import torch.distributed as dist

    if str(dist.get_backend()) == "gloo":
        return None
    key = (id(dist.group.WORLD), dist.get_world_size())
    if key not in _GLOO:
        # a collective itself: every rank creates it, in the same call of check()
        _GLOO[key] = dist.new_group(backend="gloo")
    return _GLOO[key]


def _finish(found: List[Finding], strict: bool, quiet: bool) -> List[Finding]:
    found = sort_findings(found)
    if not quiet:
        emit(found, _rank())
    if strict and any(f.severity in ("error", "warning") for f in found):
        raise TrainingGuardError(found)
    return found


def check(loader: Any = None, model: Any = None, *, strict: bool = False,
          quiet: bool = False) -> List[Finding]:
    """Check this run's process group, devices, data sharding and model; call it on every
    rank, once, before the first step (with a process group it is a collective).

    ``loader``: a DataLoader, a (batch) sampler, or any object yielding sample indices.
    Returns the findings, the same on every rank; rank 0 prints them unless ``quiet``;
    ``strict`` raises :class:`TrainingGuardError` on an error or warning.
    """
    import torch.distributed as dist

    failed: Dict[str, str] = {}
    mfacts = _safely("model", lambda: model_facts(model), {"present": False}, failed)
    facts = local_facts(mfacts.get("device"))
    if not facts["pg"]:
        return _finish(judge_alone(facts) + _failures([failed]), strict, quiet)
    payload = _safely("sampler", lambda: draw(loader).to_payload() if loader is not None
                      else None, None, failed)
    mine = {"world": facts, "model": mfacts, "draw": payload, "failed": failed}
    # every rank reaches this collective, whatever went wrong above: no rank may hang
    gathered: List[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, mine, group=_group())
    found = judge_world([g["world"] for g in gathered])
    if all(g["draw"] is not None for g in gathered):
        found += judge_sharding([Draw.from_payload(g["draw"]) for g in gathered])
    if all(g["model"].get("present") for g in gathered):
        found += judge_model([g["model"] for g in gathered])
    return _finish(found + _failures([g["failed"] for g in gathered]), strict, quiet)


def _safely(what: str, fn: Callable[[], Any], default: Any, failed: Dict[str, str]) -> Any:
    """A check that fails on one rank becomes an unknown, never an exception before the
    collective (the other ranks would wait in it forever)."""
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001
        failed[what] = f"{type(exc).__name__}: {exc}"
        return default


def _failures(per_rank: List[Dict[str, str]]) -> List[Finding]:
    out = []
    for what in sorted({w for f in per_rank for w in f}):
        ranks = [r for r, f in enumerate(per_rank) if what in f]
        first = per_rank[ranks[0]][what]
        out.append(Finding("training-unknown", "info", "training",
                           f"the {what} could not be inspected on {len(ranks)} rank(s)",
                           first[:300], subject=what))
    return out


#: per loader: (epoch, order fingerprint) of the last call, and whether it was reported
_EPOCHS: "MutableMapping[Any, Tuple[int, Any, bool]]" = weakref.WeakKeyDictionary()
_EPOCHS_BY_ID: Dict[int, Tuple[int, Any, bool]] = {}
_FINGERPRINT = 64


def _fingerprint(loader: Any) -> Tuple[Any, Optional[bool]]:
    d = draw(loader, limit=_FINGERPRINT)
    if d.kind == "distributed":
        s = d.summary
        return ("distributed", s["seed"], s["epoch"]), d.shuffles
    if d.kind == "indices" and d.indices:
        return d.indices, d.shuffles
    return None, None


def epoch(loader: Any, epoch: int, *, strict: bool = False,
          quiet: bool = False) -> List[Finding]:
    """Call at the start of every epoch, after ``sampler.set_epoch(epoch)``: a shuffling
    sampler that yields the same order as in the previous epoch is reported (once per
    loader). Local to the rank: no collective. Without a process group of two or more
    ranks it does nothing: a repeated order only matters when a distributed sampler is
    meant to reshuffle its shards."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return []
    fp, shuffles = _fingerprint(loader)
    try:
        store: MutableMapping[Any, Tuple[int, Any, bool]] = _EPOCHS
        store.get(loader)
        key: Any = loader
    except TypeError:  # not weak-referenceable
        store, key = _EPOCHS_BY_ID, id(loader)
    prev = store.get(key)
    found: List[Finding] = []
    reported = prev[2] if prev else False
    if prev and fp is not None and prev[0] != epoch and prev[1] == fp and shuffles \
            and not reported:
        sampler, _ = resolve(loader)
        found.append(Finding(
            "training-set-epoch", "warning", "training",
            f"epoch {epoch} repeats the sample order of epoch {prev[0]}: set_epoch is not "
            "called", f"{type(sampler).__name__} shuffles by its epoch; without "
            "sampler.set_epoch(epoch) (before guard.epoch) every epoch sees one order",
            ("for epoch in range(epochs): sampler.set_epoch(epoch)  # loader.sampler, "
             "before iterating the loader",), subject="sampler"))
        reported = True
    store[key] = (epoch, fp, reported)
    return _finish(found, strict, quiet)
