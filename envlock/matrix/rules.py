"""Hardware rules over the matrix: does a build have kernels for a GPU, and which driver
does it need.

These are the facts the resolver, ``envlock matrix`` and the checks share, so they live
next to the data rather than in any one front end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from envlock.kernels import Coverage, coverage
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import Gpu, TorchVariant
from envlock.versions import V

__all__ = ["gpu_coverage", "DriverNeed", "driver_need", "driver_verdict", "DriverVerdict",
           "BuildLibraries", "build_libraries"]


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


#: libraries whose versions the advisories ask about; a CUDA build that cannot tell them
#: leaves them unknown (with the reason) instead of absent
_CUDA_LIBRARIES = ("cublas", "cublasLt", "cudart", "cudnn", "nccl", "nvjitlink")
#: cuda.toml component name -> lock library key, for wheels that bundle the toolkit's copy
_BUNDLED_COMPONENTS = {"cublas": "cublas", "cudart": "cudart", "nvrtc": "nvrtc",
                       "cusparse": "cusparse", "nvjitlink": "nvjitlink"}
_GPU_PIN_RE = ("nvidia-", "cuda-toolkit", "cuda-bindings")


@dataclass(frozen=True)
class BuildLibraries:
    """The native CUDA libraries of one build, as far as the matrix can tell.

    ``versions``: library -> version, each with its ``source`` (a pin, the copy bundled from
    the build's CUDA release, or the PyPI wheel this build is the same as). ``bundled``:
    libraries inside the torch wheel itself, which no requirement override can replace.
    ``unknown``: library -> why the matrix cannot say. ``pins``/``pins_known``: the build's
    CUDA wheel requirements (its own, or the identical PyPI wheel's) and whether the list is
    complete.
    """

    versions: Mapping[str, str]
    source: Mapping[str, str]
    bundled: FrozenSet[str]
    unknown: Mapping[str, str]
    pins: Tuple[str, ...]
    pins_known: bool


def _gpu_pins(pins: Iterable[str]) -> List[str]:
    return [p for p in pins if p.strip().lower().startswith(_GPU_PIN_RE)]


def build_libraries(matrix: Matrix, variant: TorchVariant) -> BuildLibraries:
    """Derive a build's library versions (derived facts, never defaults).

    1. Pins and curated ``libraries`` of the row itself.
    2. A wheel that bundles its libraries (pins known and empty, a CUDA build): the
       versions of its ``cuda_release``'s components in cuda.toml; these are *bundled*.
    3. A PyTorch-index build whose pins the matrix does not know, of the same release,
       tag and platform as the PyPI build: the same wheel, so it shares the PyPI facts.
    4. Anything else stays unknown, with the reason.
    """
    versions: Dict[str, str] = dict(variant.libraries)
    source = {k: f"the matrix row of torch {variant.version_string}" for k in versions}
    if variant.tag == "cpu" or variant.cuda is None:
        return BuildLibraries(versions, source, frozenset(), {}, variant.pins, True)
    pins: Tuple[str, ...] = variant.pins
    pins_known = variant.pins_status == "known"
    bundled: Set[str] = set()
    unknown: Dict[str, str] = {}
    if pins_known and not _gpu_pins(pins):
        rel = matrix.cuda_releases.get(variant.cuda_release or "")
        bundled.update(versions)  # the curated copies (cuDNN) live in torch/lib too
        if rel is None:
            why = (f"torch {variant.version_string} bundles its CUDA libraries, but the CUDA "
                   f"release it was built with is not in the matrix")
            unknown.update({k: why for k in _CUDA_LIBRARIES if k not in versions})
        else:
            for comp, key in _BUNDLED_COMPONENTS.items():
                if comp in rel.components and key not in versions:
                    versions[key] = rel.components[comp]
                    source[key] = f"bundled in the wheel from CUDA {rel.version}"
                    bundled.add(key)
    elif not pins_known and not variant.on_pypi:
        twin = next((t for t in matrix.variants_for(release=variant.release,
                                                    platform=variant.platform)
                     if t.on_pypi and t.tag == variant.tag), None)
        if twin is not None:
            pins, pins_known = twin.pins, True
            for k, val in twin.libraries.items():
                if k not in versions:
                    versions[k] = val
                    source[k] = f"the PyPI wheel of torch {twin.release} (the same build)"
    if "cublas" in versions and "cublasLt" not in versions:
        versions["cublasLt"] = versions["cublas"]  # one wheel, one version
        source["cublasLt"] = source["cublas"]
        if "cublas" in bundled:
            bundled.add("cublasLt")
    if not pins_known:
        why = (f"the matrix does not know the CUDA wheel requirements of torch "
               f"{variant.version_string} ({variant.pins_status})")
        unknown.update({k: why for k in _CUDA_LIBRARIES if k not in versions})
    return BuildLibraries(versions, source, frozenset(bundled), unknown, pins, pins_known)
