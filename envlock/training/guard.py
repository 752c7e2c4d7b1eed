"""``check`` and ``epoch``: gather each rank's facts, judge them, report, maybe raise."""

from __future__ import annotations

import itertools
import os
import time
import weakref
from typing import Any, Callable, Dict, List, MutableMapping, Optional, Tuple

from envlock.checks.finding import Finding, sort_findings
from envlock.exchange import Peer, Store, gather
from envlock.training import wire
from envlock.training.draw import Draw, draw, resolve
from envlock.training.errors import TrainingGuardError
from envlock.training.model import judge_model, model_facts
from envlock.training.report import emit
from envlock.training.sharding import judge_sharding
from envlock.training.world import env_int, judge_alone, judge_world, local_facts

__all__ = ["check", "epoch"]

#: how long :func:`check` waits for the other ranks by default (seconds)
TIMEOUT_S = 60.0
#: one number per call of :func:`check` in this process: every rank calls it in the same
#: order, so call ``n`` of every rank meets under the same keys
_CALLS = itertools.count()


def _rank() -> int:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return env_int(os.environ, "RANK") or 0


def _exchange(mine: Dict[str, Any], timeout: float) -> List[Peer]:
    """Every rank's payload through the job's own c10d store (the process group's default
    store): JSON, no pickle, no numpy, no collective, so no CUDA device either (on NCCL,
    ranks that share a GPU, the very mistake being checked, would fail inside one)."""
    import torch.distributed as dist
    from torch.distributed import distributed_c10d

    deadline = time.monotonic() + timeout
    store = Store(distributed_c10d._get_default_store())
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    key = f"envlock-guard/{attempt}/{next(_CALLS)}"
    try:
        raw = wire.pack(mine)
    except (TypeError, ValueError) as exc:  # still write: the others must not wait for us
        failed = {**mine["failed"], "facts": f"{type(exc).__name__}: {str(exc)[:200]}"}
        raw = wire.pack({**mine, "model": {"present": False}, "draw": None, "failed": failed})
    return gather(store, key, dist.get_rank(), dist.get_world_size(), raw, wire.read,
                  deadline)


def _finish(found: List[Finding], strict: bool, quiet: bool) -> List[Finding]:
    found = sort_findings(found)
    if not quiet:
        try:
            emit(found, _rank())
        except Exception:  # noqa: BLE001 - a closed stderr must not stop training
            pass
    if strict and any(f.severity in ("error", "warning") for f in found):
        raise TrainingGuardError(found)
    return found


def check(loader: Any = None, model: Any = None, *, strict: bool = False,
          quiet: bool = False, timeout: float = TIMEOUT_S) -> List[Finding]:
    """Check this run's process group, devices, data sharding and model; call it on every
    rank, once, before the first step (with a process group the ranks exchange facts).

    ``loader``: a DataLoader, a (batch) sampler, or any object yielding sample indices.
    Returns the findings, the same on every rank that saw the same peers; rank 0 prints
    them unless ``quiet``; ``strict`` raises :class:`TrainingGuardError` on an error or
    warning. ``timeout``: how long to wait for the other ranks (seconds); a rank that is
    dead, late or sends a value that cannot be read is a ``training-unknown`` note naming
    it, and the checks across ranks are not made. Nothing else ever raises from here:
    whatever fails inside the guard becomes a note, never an exception in training.
    """
    try:
        found = _check(loader, model, timeout)
    except Exception as exc:  # noqa: BLE001 - the guard must never break the job it guards
        found = [Finding("training-unknown", "info", "training",
                         "the training guard could not run its checks",
                         f"{type(exc).__name__}: {str(exc)[:300]}", subject="guard")]
    return _finish(found, strict, quiet)


def _check(loader: Any, model: Any, timeout: float) -> List[Finding]:
    failed: Dict[str, str] = {}
    mfacts = _safely("model", lambda: model_facts(model), {"present": False}, failed)
    facts = local_facts(mfacts.get("device"))
    if not facts["pg"]:
        return judge_alone(facts) + _failures([failed])
    payload = _safely("sampler", lambda: draw(loader).to_payload() if loader is not None
                      else None, None, failed)
    mine = {"world": facts, "model": mfacts, "draw": payload, "failed": failed}
    try:
        peers = _exchange(mine, timeout)
    except RuntimeError as exc:  # the store itself failed (its host is gone)
        return [Finding("training-unknown", "info", "training",
                        "the ranks could not exchange their facts: the job's store failed",
                        str(exc).strip().splitlines()[0][:300] if str(exc).strip() else
                        type(exc).__name__, subject="store")] + _failures([failed])
    if any(not p.ok for p in peers):
        return _peer_findings(peers, timeout) + _failures([failed])
    gathered = [p.value for p in peers]
    found = judge_world([g["world"] for g in gathered])
    if all(g["draw"] is not None for g in gathered):
        found += judge_sharding([Draw.from_payload(g["draw"]) for g in gathered])
    if all(g["model"].get("present") for g in gathered):
        found += judge_model([g["model"] for g in gathered])
    return found + _failures([g["failed"] for g in gathered])


_NOT_CHECKED = "the checks across ranks (world, data sharding, model) need every rank"


def _peer_findings(peers: List[Peer], timeout: float) -> List[Finding]:
    """One note per kind of problem, naming its ranks: a rank that never wrote (dead,
    late, or an envlock that speaks no store protocol), one whose value cannot be read,
    one of another envlock version."""
    out: List[Finding] = []
    by: Dict[Tuple[str, str], List[int]] = {}
    for p in peers:
        if not p.ok:
            by.setdefault((p.kind, p.problem if p.kind != "missing" else ""), []).append(p.rank)
    for (kind, problem), ranks in sorted(by.items(), key=lambda kv: kv[1][0]):
        who = f"rank {ranks[0]}" if len(ranks) == 1 else "ranks " + _ranks_text(ranks)
        if kind == "missing":
            title = f"{who} did not reach check() within {timeout:g} s"
            detail = (f"dead, late, or running an envlock without this exchange; "
                      f"{_NOT_CHECKED}")
            fix = ("call envlock.training.check() on every rank at the same point, before "
                   "the first step (check(..., timeout=SECONDS) waits longer)",)
        elif kind == "other-version":
            title = f"{who} runs another envlock version"
            detail = f"{problem}; {_NOT_CHECKED}"
            fix = ("install the same envlock-gpu version on every node",)
        else:
            title = f"{who} sent facts that cannot be read"
            detail = f"{problem}; {_NOT_CHECKED}"
            fix = ("install the same envlock-gpu version on every node",)
        out.append(Finding("training-unknown", "info", "training", title, detail, fix,
                           subject=f"rank {ranks[0]}", extra={"ranks": ranks, "kind": kind}))
    return out


def _ranks_text(ranks: List[int]) -> str:
    return ", ".join(map(str, ranks[:8])) + (" ..." if len(ranks) > 8 else "")


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
    meant to reshuffle its shards. Like :func:`check`, it never raises into training
    except :class:`TrainingGuardError` under ``strict``."""
    try:
        found = _epoch(loader, epoch)
    except Exception as exc:  # noqa: BLE001 - the guard must never break the job it guards
        found = [Finding("training-unknown", "info", "training",
                         "the training guard could not compare this epoch's order",
                         f"{type(exc).__name__}: {str(exc)[:300]}", subject="sampler")]
    return _finish(found, strict, quiet) if found else found


def _epoch(loader: Any, epoch: int) -> List[Finding]:
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
    return found
