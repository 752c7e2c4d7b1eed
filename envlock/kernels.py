"""CUDA's rules for which compiled GPU code runs on which GPU.

A PyTorch build carries SASS (machine code, ``sm_XY``) for some architectures and
sometimes PTX (``compute_XY``, compiled by the driver at load time). NVIDIA's rules:

* SASS for ``sm_XY`` runs on compute capability ``X.y`` for every ``y >= Y`` of the same
  major ``X`` (never across majors);
* architecture-specific SASS (``sm_90a``) runs only on exactly ``X.Y``;
* family-specific SASS (``sm_100f``) runs on the family, i.e. like plain SASS;
* PTX for ``compute_XY`` is JIT-compiled for any capability ``>= X.Y`` and needs a driver at
  least as new as the toolkit that produced the PTX.

>>> runs_on("sm_80", "8.6"), runs_on("sm_80", "9.0"), runs_on("sm_90a", "9.0")
(True, False, True)
>>> coverage(["sm_75", "sm_80", "compute_80"], "12.0").how
'ptx'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Iterable, Literal, Optional, Tuple

__all__ = [
    "Capability",
    "parse_capability",
    "parse_target",
    "Target",
    "runs_on",
    "Coverage",
    "coverage",
    "sm_for",
]

Capability = Tuple[int, int]

_TARGET_RE = re.compile(r"^(sm|compute)_(\d{2,3})([af]?)$")
_CC_RE = re.compile(r"^(\d{1,2})\.(\d)$")


def parse_capability(cc: str) -> Capability:
    """``"9.0"`` -> ``(9, 0)``; raises ValueError for anything else."""
    m = _CC_RE.match(cc.strip())
    if not m:
        raise ValueError(f"not a compute capability: {cc!r}")
    return int(m.group(1)), int(m.group(2))


def sm_for(cc: str) -> str:
    """``"12.0"`` -> ``"sm_120"``."""
    major, minor = parse_capability(cc)
    return f"sm_{major}{minor}"


@dataclass(frozen=True)
class Target:
    """One compiled target of a build: ``sm_90a`` is Target("sm", (9, 0), "a")."""

    kind: Literal["sm", "compute"]
    capability: Capability
    suffix: str  # "", "a" or "f"

    def __str__(self) -> str:
        major, minor = self.capability
        return f"{self.kind}_{major}{minor}{self.suffix}"


def parse_target(text: str) -> Target:
    """Parse ``sm_86``, ``sm_100f``, ``compute_120``. Raises ValueError otherwise."""
    m = _TARGET_RE.match(text.strip())
    if not m:
        raise ValueError(f"not a GPU target: {text!r}")
    digits = m.group(2)
    cap = (int(digits[:-1]), int(digits[-1]))
    kind: Literal["sm", "compute"] = "sm" if m.group(1) == "sm" else "compute"
    return Target(kind, cap, m.group(3))


def runs_on(target: str | Target, cc: str | Capability) -> bool:
    """Whether code compiled for ``target`` can run on a GPU of capability ``cc``."""
    t = parse_target(target) if isinstance(target, str) else target
    gpu = parse_capability(cc) if isinstance(cc, str) else cc
    if t.kind == "compute":
        return gpu >= t.capability
    if t.suffix == "a":
        return gpu == t.capability
    return gpu[0] == t.capability[0] and gpu[1] >= t.capability[1]


@dataclass(frozen=True)
class Coverage:
    """How a build covers one GPU: with SASS, only through PTX JIT, or not at all."""

    how: Literal["sass", "ptx", "none"]
    target: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.how != "none"


def coverage(targets: Iterable[str], cc: str) -> Coverage:
    """Best way a list of compiled targets runs on ``cc``: SASS beats PTX beats nothing.

    Among SASS targets the closest architecture wins (the one the CUDA runtime picks).
    """
    gpu = parse_capability(cc)
    best_sass: Optional[Target] = None
    best_ptx: Optional[Target] = None
    for raw in targets:
        t = parse_target(raw)
        if not runs_on(t, gpu):
            continue
        if t.kind == "sm":
            if best_sass is None or t.capability > best_sass.capability:
                best_sass = t
        elif best_ptx is None or t.capability > best_ptx.capability:
            best_ptx = t
    if best_sass is not None:
        return Coverage("sass", str(best_sass))
    if best_ptx is not None:
        return Coverage("ptx", str(best_ptx))
    return Coverage("none")
