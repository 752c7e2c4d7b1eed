"""Do the ranks train on different samples? Judged from every rank's :class:`Draw`.

Two signals, either is enough: the ranks' first indices overlap (every rank sees the same
samples), or every rank's epoch covers the whole dataset (each rank shuffles the whole
dataset with its own seed, so the first indices barely overlap but the work is repeated).
"""

from __future__ import annotations

from collections import Counter
from typing import List, Optional, Sequence

from envlock.checks.finding import Finding
from envlock.training.draw import Draw

__all__ = ["judge_sharding", "FIX_SHARDING"]

FIX_SHARDING = (
    "DataLoader(ds, sampler=DistributedSampler(ds), ...) and sampler.set_epoch(epoch) "
    "every epoch",
    "a custom sampler (coqui): wrap it, DistributedSamplerWrapper(sampler); accelerate: "
    "loader = accelerator.prepare(loader)",
)
#: share of drawn indices seen by two or more ranks above which the ranks share samples
OVERLAP = 0.25
#: an epoch this close to the dataset's size on every rank is an unsharded epoch
WHOLE = 0.9


def _finding(title: str, detail: str, **extra: object) -> Finding:
    return Finding("training-data-sharding", "error", "training", title, detail,
                   FIX_SHARDING, subject="sampler", extra=dict(extra))


def _ranks(ranks: Sequence[int]) -> str:
    shown = ", ".join(str(r) for r in ranks[:8])
    return shown + (" ..." if len(ranks) > 8 else "")


def _distributed(draws: Sequence[Draw]) -> Optional[Finding]:
    """Every rank has a plain DistributedSampler: judge its attributes."""
    world = len(draws)
    s = [d.summary for d in draws]
    wrong = [r for r, x in enumerate(s) if x["num_replicas"] != world]
    if wrong:
        k = s[wrong[0]]["num_replicas"]
        return _finding(f"DistributedSampler has num_replicas={k} but the world has {world} "
                        f"ranks", f"rank(s) {_ranks(wrong)}: the sampler was built before "
                        "init_process_group or with explicit num_replicas; ranks overlap",
                        overlap=1.0)
    by_rank = Counter(x["rank"] for x in s)
    dup = sorted(r for r, x in enumerate(s) if by_rank[x["rank"]] > 1)
    if dup:
        return _finding("every rank sees the same samples (overlap 100%): DistributedSampler "
                        "ranks repeat", f"ranks {_ranks(dup)} build their DistributedSampler "
                        "with the same rank=", overlap=1.0)
    if any(x["shuffle"] for x in s) and len({(x["seed"], x["epoch"]) for x in s}) > 1:
        return _finding("ranks shuffle with different seeds: their DistributedSampler shards "
                        "overlap", "DistributedSampler(seed=...) must be the same on every "
                        "rank (and set_epoch the same epoch)", overlap=None)
    if len({x["n"] for x in s}) > 1:
        return _finding("ranks shard datasets of different lengths",
                        "lengths: " + ", ".join(str(x["n"]) for x in s), overlap=None)
    return None


def judge_sharding(draws: Sequence[Draw]) -> List[Finding]:
    """Findings about data sharding across ``draws`` (index = rank; world = len)."""
    world = len(draws)
    if world < 2:
        return []
    unknown = [d for d in draws if d.kind == "unknown"]
    if unknown:
        return [Finding("training-data-unknown", "info", "training",
                        "data sharding not checked", unknown[0].reason, subject="sampler")]
    if all(d.kind == "distributed" for d in draws):
        found = _distributed(draws)
        return [found] if found else []
    if any(d.kind == "distributed" for d in draws):
        kinds = ", ".join(f"{r}:{d.source}" for r, d in enumerate(draws[:8]))
        return [Finding("training-data-unknown", "warning", "training",
                        "ranks draw their samples from different kinds of sampler", kinds,
                        FIX_SHARDING, subject="sampler")]
    seen: Counter = Counter()
    for d in draws:
        seen.update(set(d.indices))
    total = sum(len(set(d.indices)) for d in draws)
    per_rank = [sum(1 for i in set(d.indices) if seen[i] > 1) for d in draws]
    shared = sum(per_rank)
    repeated = sum(1 for n in seen.values() if n > 1)
    # DistributedSampler pads a short last round with repeats: at most world-1 indices
    if total and shared / total >= OVERLAP and repeated > world - 1:
        pct = round(100 * shared / total)
        ranks = [r for r, n in enumerate(per_rank) if n]
        who = "every rank sees" if len(ranks) == world else f"ranks {_ranks(ranks)} see"
        return [_finding(f"{who} the same samples (overlap {pct}%)",
                         f"the first {max(len(d.indices) for d in draws)} indices of "
                         f"{draws[0].source} repeat across ranks: no DistributedSampler, "
                         "each rank trains on the whole dataset", overlap=shared / total)]
    lens = [d.epoch_len for d in draws]
    n = draws[0].dataset_len
    if n and n >= world and all(x is not None and x >= WHOLE * n for x in lens):
        return [_finding(f"every rank iterates the whole dataset ({lens[0]} samples per epoch "
                         f"of {n})", f"{draws[0].source} is not sharded: the ranks shuffle "
                         "differently but each does all the work", overlap=None)]
    return []
