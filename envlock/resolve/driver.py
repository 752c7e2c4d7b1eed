"""Which NVIDIA driver a resolution is for: what the user states, hints, or this host.

Users name drivers the way clusters are described: ``535.104.05`` (a release), ``535.104``
(a release without its patch number), ``535`` or ``R535`` (a branch). A branch stands for
the *oldest* release of that branch that knows every target GPU, so the lock runs on every
release of the branch; a two-part release stands for itself (``535.104`` sorts below
``535.104.05``, the cautious reading).

Hints, in the order uv and conda read them: ``UV_CUDA_DRIVER_VERSION`` (a driver version)
and ``CONDA_OVERRIDE_CUDA`` (a CUDA version the driver supports: its driver floor is the
Linux driver of that CUDA line's first toolkit release, from ``cuda.toml``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, List, Mapping, Optional, Sequence, Tuple

from envlock.errors import UsageError
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import Gpu
from envlock.versions import V, is_driver_version

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

    from envlock.resolve.target import TargetSpec

__all__ = ["StatedDriver", "parse_driver", "driver_from_env", "deployed_branches",
           "branch_floor", "DriverHint", "driver_hint"]

_BRANCH_RE = re.compile(r"^[Rr]?(\d{3})$")


@dataclass(frozen=True)
class StatedDriver:
    """A driver version to resolve against, and how it was arrived at (for ``decision``)."""

    version: str
    note: Optional[str] = None


def branch_floor(major: int, gpus: Sequence[Gpu]) -> str:
    """The oldest release of branch ``major`` that knows every GPU in ``gpus``.

    The matrix records the first release that lists each GPU; within a branch nothing older
    is assumed to exist, so the branch's own floor is ``<major>.0``.
    """
    floor = f"{major}.0"
    for g in gpus:
        if g.min_driver and int(g.min_driver.split(".")[0]) == major \
                and V(g.min_driver) > V(floor):
            floor = g.min_driver
    return floor


def parse_driver(text: str, gpus: Sequence[Gpu], *, what: str = "--driver") -> StatedDriver:
    """``535.104.05`` / ``535.104`` as is; ``535`` / ``R535`` -> the branch's oldest release
    that knows ``gpus``."""
    value = text.strip()
    m = _BRANCH_RE.match(value)
    if m:
        major = int(m.group(1))
        floor = branch_floor(major, gpus)
        names = " + ".join(g.name for g in gpus)
        known = f" that knows {names}" if floor != f"{major}.0" else ""
        oldest = f"its oldest release{known} ({floor})" if known else "its oldest release"
        return StatedDriver(floor, f"{what} {value} is driver branch R{major}: resolved for "
                                   f"{oldest}, so the lock runs on every R{major} release")
    if not is_driver_version(value):
        raise UsageError(f"{what} {text!r} is not an NVIDIA driver version: give a release "
                         f"(535.104.05), or a branch (535 or R535)")
    return StatedDriver(value)


def driver_from_env(env: Mapping[str, str], matrix: Matrix,
                    gpus: Sequence[Gpu]) -> Optional[StatedDriver]:
    """The driver a GPU-less build host states through uv's or conda's variable."""
    uv = (env.get("UV_CUDA_DRIVER_VERSION") or "").strip()
    if uv:
        got = parse_driver(uv, gpus, what="UV_CUDA_DRIVER_VERSION")
        return StatedDriver(got.version, got.note or f"driver {got.version} from "
                                                     f"UV_CUDA_DRIVER_VERSION")
    conda = (env.get("CONDA_OVERRIDE_CUDA") or "").strip()
    if conda:
        line = ".".join(conda.split(".")[:2])
        floor = matrix.toolkit_driver(line) if line in matrix.cuda_lines else None
        if floor is None:
            raise UsageError(f"CONDA_OVERRIDE_CUDA={conda!r}: not a CUDA line the matrix "
                             f"knows ({', '.join(matrix.cuda_lines)})")
        return StatedDriver(floor, f"CONDA_OVERRIDE_CUDA={conda}: a driver that supports "
                                   f"CUDA {line}, i.e. at least its toolkit driver {floor}")
    return None


def deployed_branches(matrix: Matrix, gpus: Sequence[Gpu]) -> List[Tuple[int, str]]:
    """(major, designation) of the production and long-term-support branches from the
    first branch that knows every GPU on: the branches clusters of these GPUs commonly run.
    """
    if not gpus:
        return []
    first = max(int(g.min_driver_branch.lstrip("R")) for g in gpus if g.min_driver_branch) \
        if any(g.min_driver_branch for g in gpus) else 0
    ceiling: Optional[int] = None
    for g in gpus:
        arch = matrix.archs.get(g.arch)
        if arch and arch.last_driver_branch:
            b = int(arch.last_driver_branch.lstrip("R"))
            ceiling = b if ceiling is None else min(ceiling, b)
    out = []
    for branch in sorted(matrix.drivers.values(), key=lambda x: x.major):
        if branch.major < first or (ceiling is not None and branch.major > ceiling):
            continue
        if branch.type in ("production", "ltsb"):
            out.append((branch.major, branch.type))
    return out


@dataclass(frozen=True)
class DriverHint:
    """For a lock made without a driver: the branches its floor leaves out, and the oldest of
    them that some build runs on (``oldest``), with the newest such build (``build``); both
    ``None`` when no build qualifies on any of them."""

    floor: str
    floor_branch: int
    deployed: Tuple[Tuple[int, str], ...]
    left_out: Tuple[int, ...]
    oldest: Optional[int] = None
    build: Optional[str] = None  # "torch 2.14.1 cu126"


def driver_hint(matrix: Matrix, spec: "TargetSpec", torch_spec: "SpecifierSet",
                cuda: Optional[str], requirements: Sequence[str],
                floor: Optional[str]) -> Optional[DriverHint]:
    """What to tell a user who gave no driver about the lock's driver floor."""
    if spec.cpu or spec.driver or not floor:
        return None
    from dataclasses import replace

    from envlock.errors import NoCandidateError
    from envlock.resolve.hardware import choose_variant

    major = int(floor.split(".")[0])
    deployed = tuple(deployed_branches(matrix, spec.gpus))
    left_out = tuple(b for b, _ in deployed if b < major)
    hint = DriverHint(floor, major, deployed, left_out)
    if not left_out:
        return hint
    for branch in left_out:  # the oldest branch on which some build qualifies
        at = replace(spec, driver=branch_floor(branch, spec.gpus), notes=())
        try:
            choice = choose_variant(matrix, at, torch_spec, cuda, tuple(requirements))
        except NoCandidateError:
            continue
        v = choice.variant
        return replace(hint, oldest=branch, build=f"torch {v.release} {v.tag}")
    return hint
