"""GPU families: a bare product name (``H100``, ``A100``, ``V100``) for all its form factors.

People say "H100" for a fleet of SXM, PCIe and NVL boards alike. A name is a family when it
is exactly the product word of two or more matrix rows (their name without the vendor and
brand words, up to the first space or dash) that share one compute capability, so the
kernels of a build are the same for all of them, and no row is that product itself (``H20``
is the NVIDIA H20, not H20 + H20-3e + H20 NVL16), and the name already denotes one of them
(an alias, like ``H100`` for the SXM board). ``V100S`` is a different product word and
not a member of ``V100``. One lock fits every member when each, chosen on its own, gets the
same packages (build and advisories); its driver floor is then the highest member's, and
the lock lists each member's floor (the H100 NVL needs a newer driver than the SXM and
PCIe boards for the same wheel). Only when the packages differ does the resolver ask for a
member, or a driver on which they agree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from envlock.matrix.lookup import normalize_name
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import Gpu

if TYPE_CHECKING:
    from envlock.resolve.hardware import Choice
    from envlock.resolve.target import TargetSpec

__all__ = ["family_members", "product_word", "MemberPlan", "member_plans", "same_packages",
           "member_floors", "member_label", "member_name", "MEMBER_FLOORS"]

_BRAND = re.compile(r"\b(nvidia|geforce|tesla)\b", re.IGNORECASE)


def product_word(gpu: Gpu) -> str:
    """``NVIDIA H100 PCIe`` -> ``h100``; ``NVIDIA A100-PG509-200`` -> ``a100``."""
    text = _BRAND.sub(" ", gpu.name).strip()
    return normalize_name(re.split(r"[\s\-]+", text, maxsplit=1)[0]) if text else ""


def family_members(matrix: Matrix, name: str) -> Tuple[Gpu, ...]:
    """The members of the family ``name`` denotes (matrix order), or () if it is none."""
    key = normalize_name(name)
    if not key:
        return ()
    members = tuple(g for g in matrix.gpus.values() if product_word(g) == key)
    if len(members) < 2 or len({g.compute_capability for g in members}) != 1:
        return ()
    if any(key in (normalize_name(g.id), normalize_name(_BRAND.sub(" ", g.name)))
           for g in members):
        return ()  # "H20" is one product (NVIDIA H20), not the H20 family
    if matrix.find_gpu(name) not in members:
        return ()  # only names people use for these boards ("H100"), not any shared word
    return members


# -- one lock for a family, or which member -------------------------------------------------

#: how the lock's driver-min-reasons line with each member's floor starts
MEMBER_FLOORS = "driver floor per member: "


@dataclass(frozen=True)
class MemberPlan:
    """What one member of a family gets on its own: its build and driver floor, or why
    none (``choice`` None)."""

    gpu: Gpu
    choice: Optional["Choice"]
    why: str = ""

    @property
    def floor(self) -> Optional[str]:
        return self.choice.need.minimum if self.choice is not None else None


def member_plans(matrix: Matrix, spec: "TargetSpec", torch: Any, cuda: Optional[str],
                 requirements: Tuple[str, ...], prefer: Any = None,
                 driver: Optional[str] = None) -> List[MemberPlan]:
    """Each member of a family target chosen on its own (with ``driver`` if given)."""
    from dataclasses import replace

    from envlock.errors import NoCandidateError
    from envlock.resolve.hardware import choose_variant

    out = []
    for g in spec.gpus:
        one = replace(spec, gpus=(g,), family=None, separate=False, driver=driver)
        try:
            kw = {"prefer": prefer} if prefer is not None else {}
            out.append(MemberPlan(g, choose_variant(matrix, one, torch, cuda, requirements,
                                                    **kw)))
        except NoCandidateError as exc:
            out.append(MemberPlan(g, None, exc.message))
    return out


def same_packages(plans: Sequence[MemberPlan]) -> bool:
    """Whether every member gets the same packages: the same build and the same
    advisories acting on it. Driver floors may differ: the lock takes the highest."""
    keys = {_packages_key(p) for p in plans}
    return len(keys) == 1 and None not in keys


def _packages_key(plan: MemberPlan) -> Optional[Tuple[object, ...]]:
    c = plan.choice
    if c is None:
        return None
    v = c.variant
    return (v.release, v.tag, v.index,
            tuple(sorted((a.id, a.action, a.override) for a in c.advisories)),
            tuple(sorted(str(r) for r in c.overrides)))


def member_floors(family: str, plans: Sequence[MemberPlan]) -> Optional[str]:
    """``H100 NVL needs >= 535.43.09; SXM/PCIe >= 525.60.13`` (highest first), or None
    when every member has the same floor."""
    from envlock.versions import V

    by_floor: Dict[str, List[str]] = {}
    for p in plans:
        if p.floor:
            by_floor.setdefault(p.floor, []).append(member_label(family, p.gpu))
    if len(by_floor) < 2:
        return None
    parts = []
    for i, floor in enumerate(sorted(by_floor, key=V, reverse=True)):
        names = "/".join(by_floor[floor])
        parts.append(f"{family} {names} needs >= {floor}" if i == 0 else f"{names} >= {floor}")
    return "; ".join(parts)


def member_label(family: str, gpu: Gpu) -> str:
    """``NVIDIA H100 NVL`` in the H100 family -> ``NVL``; the short name when the family
    word is not at its front (``A100-PG509-200`` -> ``PG509-200``)."""
    text = " ".join(_BRAND.sub(" ", gpu.name).split())
    rest = re.sub(rf"^{re.escape(family)}[\s\-]*", "", text, flags=re.IGNORECASE)
    return rest or text


def member_name(gpu: Gpu) -> str:
    """The name ``--gpu`` takes for one member (``H100 NVL``)."""
    return " ".join(_BRAND.sub(" ", gpu.name).split())
