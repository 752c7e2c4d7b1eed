"""What a check could not decide, and why: the other half of a silent "ok".

An advisory whose condition is *unknown* on a machine's facts is not reported (unknown is
not evidence), but it was not checked either. :func:`undecided_advisories` names those
advisories grouped by the reason, in words a user can act on: "no NVIDIA driver (NVML:
driver-not-loaded)", "GPU 'X' is not in the matrix", "unknown: links".
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from envlock.knowledge.evaluate import judge
from envlock.knowledge.facts import Facts
from envlock.matrix.matrix import Matrix

if TYPE_CHECKING:  # annotations only
    from envlock.snapshot import Snapshot

__all__ = ["undecided_advisories"]

_DRIVERISH = ("driver.", "gpu", "link", "torch.driver_too_old")


def _no_driver(snapshot: Optional[Snapshot]) -> str:
    if snapshot is None:  # judged from a log's facts: no machine to speak of
        return ""
    d = snapshot.driver
    if d is not None and d.version:
        return ""
    err = d.error if d is not None and d.error else "none found"
    return f"no NVIDIA driver ({err}): GPU, driver and link checks skipped"


def undecided_advisories(snapshot: Optional[Snapshot], matrix: Matrix, facts: Facts,
                         only: Sequence[str] = ()) -> Tuple[Tuple[str, str], ...]:
    """``(advisory ids, why)`` for every advisory whose condition is unknown here, one
    entry per reason; ``only`` limits it to those ids (verify: the ones it judges).
    ``snapshot`` None: the facts are a log's (its machine is not this one)."""
    no_driver = _no_driver(snapshot)
    unknown_gpus = sorted({g.name for g in (snapshot.gpus if snapshot is not None else ())
                           if g.name and matrix.find_gpu(g.name, g.memory_mib) is None})
    groups: Dict[str, List[str]] = {}
    for adv in matrix.advisories.values():
        if adv.condition is None or (only and adv.id not in only):
            continue
        outcome = judge(adv.condition, facts)
        if outcome.value is not None:
            continue
        unknown = outcome.unknown
        if no_driver and any(u.startswith(_DRIVERISH) for u in unknown):
            why = no_driver
        elif (snapshot is not None and not snapshot.recorded("links")
              and any(u.startswith("link") for u in unknown)):
            why = ("the snapshot did not record the GPU links (" +
                   ("stated hardware" if snapshot.hardware_source == "stated" else "no probe") +
                   "): these could apply; take the snapshot on the machine to check them")
        elif unknown_gpus and "gpu.model" in unknown:
            names = ", ".join(repr(n) for n in unknown_gpus)
            why = (f"GPU {names} is not in the matrix: its model is unknown, so these could "
                   f"apply; look it up with: envlock matrix gpu {unknown_gpus[0]!r}")
        else:
            why = "unknown here: " + ", ".join(unknown)
        groups.setdefault(why, []).append(adv.id)
    return tuple((", ".join(ids), why) for why, ids in groups.items())
