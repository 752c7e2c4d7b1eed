"""Drawing a rank's first sample indices from its loader, without touching the dataset.

Behaviour, not class names: whatever the loader's batch sampler (or sampler, or the object
itself) yields is what the rank will train on, so that is what is drawn. Three shortcuts keep
this cheap and exact:

* torch's ``BatchSampler`` (when its ``__iter__`` is not overridden) yields its sampler's
  order in batches, so the sampler underneath is drawn instead;
* torch's ``RandomSampler`` without replacement permutes the whole dataset on every rank
  (not sharded by construction); only its length is taken;
* torch's ``DistributedSampler`` (``__iter__`` not overridden) is fully described by its
  attributes (replicas, rank, seed, epoch, length), so it is summarised, not iterated: its
  ``__iter__`` computes a permutation of the whole dataset (0.5-1.5 s for 10 million samples
  on a loaded CPU), which the summary avoids. Subclasses that override ``__iter__`` (coqui's
  wrapper) are drawn.

Drawing must not change the run: random number generator states (torch's global one,
Python's ``random``, and any ``torch.Generator`` the sampler holds) are restored afterwards.
"""

from __future__ import annotations

import operator
import random
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

__all__ = ["Draw", "draw", "LIMIT"]

#: how many indices a rank draws (and sends) at most
LIMIT = 1024


@dataclass(frozen=True)
class Draw:
    """What one rank's loader yields. ``kind``: ``indices`` (drawn), ``distributed`` (a
    plain DistributedSampler, summarised in ``summary``) or ``unknown`` (``reason``)."""

    kind: str
    indices: Tuple[int, ...] = ()
    #: samples one epoch yields on this rank, when the sampler has a length
    epoch_len: Optional[int] = None
    dataset_len: Optional[int] = None
    summary: Dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    #: the sampler declares (``shuffle``) or shows (unsorted order) that it shuffles
    shuffles: Optional[bool] = None
    source: str = ""

    def to_payload(self) -> Dict[str, Any]:
        return {"kind": self.kind, "indices": list(self.indices), "epoch_len": self.epoch_len,
                "dataset_len": self.dataset_len, "summary": dict(self.summary),
                "reason": self.reason, "shuffles": self.shuffles, "source": self.source}

    @staticmethod
    def from_payload(d: Dict[str, Any]) -> "Draw":
        return Draw(d["kind"], tuple(d["indices"]), d["epoch_len"], d["dataset_len"],
                    dict(d["summary"]), d["reason"], d["shuffles"], d["source"])


def _len(obj: Any) -> Optional[int]:
    try:
        return len(obj)
    except Exception:  # noqa: BLE001 - no length is an unknown, not an error
        return None


def resolve(source: Any) -> Tuple[Any, str]:
    """The object whose iteration decides this rank's samples, and how it was found."""
    from torch.utils.data import BatchSampler

    if getattr(source, "batch_sampler", None) is not None:
        obj, how = source.batch_sampler, "loader.batch_sampler"
    elif getattr(source, "sampler", None) is not None and hasattr(source, "dataset"):
        obj, how = source.sampler, "loader.sampler"
    else:
        obj, how = source, type(source).__name__
    while type(obj).__iter__ is BatchSampler.__iter__ and getattr(obj, "sampler", None):
        obj, how = obj.sampler, how + ".sampler"
    return obj, how


def _is_plain_distributed(obj: Any) -> bool:
    from torch.utils.data import DistributedSampler

    return isinstance(obj, DistributedSampler) and \
        type(obj).__iter__ is DistributedSampler.__iter__


def _generators(obj: Any, depth: int = 3) -> List[Any]:
    import torch

    out: List[Any] = []
    if depth == 0 or obj is None:
        return out
    for name in ("generator", "sampler", "batch_sampler"):
        val = getattr(obj, name, None)
        if isinstance(val, torch.Generator):
            out.append(val)
        elif name != "generator" and val is not None and val is not obj:
            out += _generators(val, depth - 1)
    return out


def _is_plain_random(obj: Any) -> bool:
    from torch.utils.data import RandomSampler

    if not (isinstance(obj, RandomSampler) and type(obj).__iter__ is RandomSampler.__iter__):
        return False
    n = _len(obj.data_source)
    return not obj.replacement and n is not None and obj.num_samples >= n


def draw(source: Any, limit: int = LIMIT) -> Draw:
    """Up to ``limit`` indices this rank's loader yields first (or a summary of them)."""
    import torch

    dataset = getattr(source, "dataset", None)
    dataset_len = _len(dataset) if dataset is not None else None
    obj, how = resolve(source)
    if _is_plain_distributed(obj):
        summary = {"num_replicas": int(obj.num_replicas), "rank": int(obj.rank),
                   "seed": int(obj.seed), "shuffle": bool(obj.shuffle),
                   "epoch": int(obj.epoch), "drop_last": bool(obj.drop_last),
                   "n": _len(obj.dataset)}
        return Draw("distributed", epoch_len=_len(obj), dataset_len=dataset_len,
                    summary=summary, shuffles=bool(obj.shuffle), source=how)
    if _is_plain_random(obj):
        # not sharded by construction: each epoch is num_samples draws over the whole
        # dataset; its __iter__ would permute (and list) the whole dataset to say so
        return Draw("indices", (), _len(obj), dataset_len, shuffles=True,
                    source=how + " (a RandomSampler, not drawn)")
    gens = _generators(obj) + _generators(source)
    saved_gens = [(g, g.get_state()) for g in gens]
    saved_torch = torch.get_rng_state()
    saved_py = random.getstate()
    indices: List[int] = []
    batch = None
    try:
        for item in obj:
            if isinstance(item, (list, tuple)) or (torch.is_tensor(item) and item.dim() > 0):
                if batch is None:
                    batch = len(item)
                values = list(item.tolist() if torch.is_tensor(item) else item)
            else:
                values = [item.item() if torch.is_tensor(item) else item]
            for v in values:
                try:  # ints, numpy and torch integer scalars; not bools, None or keys
                    if isinstance(v, bool):
                        raise TypeError
                    indices.append(operator.index(v))
                except TypeError:
                    return Draw("unknown", dataset_len=dataset_len, source=how,
                                reason=f"{how} yields {type(v).__name__} values, not sample "
                                       "indices (an IterableDataset shards itself)")
            if len(indices) >= limit:
                break
    except Exception as exc:  # noqa: BLE001 - a sampler we cannot draw is an unknown
        return Draw("unknown", dataset_len=dataset_len, source=how,
                    reason=f"drawing from {how} failed: {type(exc).__name__}: {exc}")
    finally:
        torch.set_rng_state(saved_torch)
        random.setstate(saved_py)
        for g, state in saved_gens:
            g.set_state(state)
    indices = indices[:limit]
    n = _len(obj)
    epoch_len = n * batch if (n is not None and batch) else n
    declared = getattr(obj, "shuffle", None)
    shuffles = bool(declared) if isinstance(declared, bool) else \
        (indices != sorted(indices) if len(indices) > 1 else None)
    return Draw("indices", tuple(indices), epoch_len, dataset_len, shuffles=shuffles,
                source=how)
