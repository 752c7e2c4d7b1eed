"""GPU families: a bare product name (``H100``, ``A100``, ``V100``) for all its form factors.

People say "H100" for a fleet of SXM, PCIe and NVL boards alike. A name is a family when it
is exactly the product word of two or more matrix rows (their name without the vendor and
brand words, up to the first space or dash) that share one compute capability, so the
kernels of a build are the same for all of them, and no row is that product itself (``H20``
is the NVIDIA H20, not H20 + H20-3e + H20 NVL16), and the name already denotes one of them
(an alias, like ``H100`` for the SXM board). ``V100S`` is a different product word and
not a member of ``V100``. Whether one lock fits every member is decided by the resolver
(:func:`envlock.resolve.resolve`), which asks for a member when they need different locks.
"""

from __future__ import annotations

import re
from typing import Tuple

from envlock.matrix.lookup import normalize_name
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import Gpu

__all__ = ["family_members", "product_word"]

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
