"""Hardware rules over the matrix: does a build have kernels for a GPU, and which driver
does it need.

These are the facts the resolver, ``envlock matrix`` and the checks share, so they live
next to the data rather than in any one front end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, List, Optional, Sequence, Tuple

from envlock.kernels import Coverage, coverage
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import Gpu, TorchVariant
from envlock.versions import V

__all__ = ["gpu_coverage", "DriverNeed", "driver_need", "driver_verdict", "DriverVerdict"]


def gpu_coverage(variant: TorchVariant, gpu: Gpu) -> Optional[Coverage]:
    """How ``variant`` runs on ``gpu``; None when the variant's arch list is unknown."""
    if variant.tag == "cpu":
        return Coverage("none")
    if variant.sass is None:
        return None
    return coverage(variant.targets, gpu.compute_capability)


@dataclass(frozen=True)
class DriverNeed:
    """The lowest Linux driver a build needs on some GPUs, and why."""

    minimum: Optional[str]
    reasons: Tuple[str, ...]
    ptx_jit: bool
    #: Highest driver branch the GPUs are supported by (Kepler: 470), if any ends.
    ceiling_branch: Optional[int] = None


def driver_need(matrix: Matrix, variant: TorchVariant, gpus: Sequence[Gpu]) -> DriverNeed:
    """Minimum driver for ``variant`` on ``gpus``.

    The CUDA major's minor-version-compatibility floor is enough for wheels that carry SASS
    for every GPU; PTX JIT needs the toolkit's own driver; every GPU needs a driver that
    knows it.
    """
    reasons: List[str] = []
    candidates: List[Tuple[str, str]] = []
    ptx = False
    if variant.cuda is not None:
        floor = matrix.compat_floor(variant.cuda)
        if floor:
            candidates.append((floor, f"CUDA {variant.cuda.split('.')[0]}.x minor-version "
                                      f"compatibility floor {floor}"))
        needs_jit = [g for g in gpus if (c := gpu_coverage(variant, g)) is not None
                     and c.how == "ptx"]
        if needs_jit:
            ptx = True
            full = matrix.toolkit_driver(variant.cuda, variant.cuda_release)
            if full:
                names = ", ".join(sorted({g.name for g in needs_jit}))
                candidates.append((full, f"{names} runs this build through PTX JIT, which "
                                         f"needs the CUDA {variant.cuda} toolkit driver {full}"))
    for g in gpus:
        gmin = g.min_driver or (g.min_driver_branch[1:] + ".0" if g.min_driver_branch else None)
        if gmin:
            candidates.append((gmin, f"{g.name} is supported from driver {gmin}"))
    minimum: Optional[str] = None
    for value, why in candidates:
        if minimum is None or V(value) > V(minimum):
            minimum = value
    if minimum is not None:
        reasons = [why for value, why in candidates if value == minimum]
    ceiling: Optional[int] = None
    for g in gpus:
        arch = matrix.archs.get(g.arch)
        if arch and arch.last_driver_branch:
            b = int(arch.last_driver_branch.lstrip("R"))
            ceiling = b if ceiling is None else min(ceiling, b)
    return DriverNeed(minimum=minimum, reasons=tuple(reasons), ptx_jit=ptx,
                      ceiling_branch=ceiling)


@dataclass(frozen=True)
class DriverVerdict:
    ok: bool
    how: str  # "full", "minor-version compatibility", or the reason it fails


def driver_verdict(matrix: Matrix, variant: TorchVariant, gpus: Iterable[Gpu],
                   driver: str) -> DriverVerdict:
    """Can ``driver`` run ``variant`` on ``gpus``?"""
    gpus = list(gpus)
    need = driver_need(matrix, variant, gpus)
    dv = V(driver)
    if need.ceiling_branch is not None and int(driver.split(".")[0]) > need.ceiling_branch:
        return DriverVerdict(False, f"driver {driver} no longer supports these GPUs (their "
                                    f"last driver branch is R{need.ceiling_branch})")
    if need.ceiling_branch is not None and need.minimum is not None and \
            int(need.minimum.split(".")[0]) > need.ceiling_branch:
        return DriverVerdict(False, f"needs driver >= {need.minimum} but these GPUs are "
                                    f"supported only up to R{need.ceiling_branch}")
    if need.minimum is not None and dv < V(need.minimum):
        return DriverVerdict(False, "; ".join(need.reasons) or f"needs >= {need.minimum}")
    if variant.cuda is None:
        return DriverVerdict(True, "full")
    full = matrix.toolkit_driver(variant.cuda, variant.cuda_release)
    if full is None or dv >= V(full):
        return DriverVerdict(True, "full")
    return DriverVerdict(True, "minor-version compatibility")
