"""Finding a GPU from what a user types or what NVML prints.

Names are compared after normalisation: lower case, the words ``nvidia``, ``geforce``
and ``tesla`` dropped (older drivers omit the ``NVIDIA`` prefix; "rtx 4090" is what
people type for "NVIDIA GeForce RTX 4090"), and everything but letters and digits
removed.

>>> normalize_name("NVIDIA GeForce RTX 4090"), normalize_name("rtx-4090")
('rtx4090', 'rtx4090')
>>> normalize_name("Tesla V100-SXM2-32GB")
'v100sxm232gb'
"""

from __future__ import annotations

import difflib
import re
from typing import Dict, Iterable, List, Optional, Sequence

from envlock.matrix.model import Gpu

__all__ = ["normalize_name", "GpuIndex"]

_DROP_WORDS = re.compile(r"\b(nvidia|geforce|tesla)\b")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def normalize_name(name: str) -> str:
    text = _DROP_WORDS.sub(" ", name.lower())
    return _NON_ALNUM.sub("", text)


class GpuIndex:
    """Name -> GPU rows, built once per matrix."""

    def __init__(self, gpus: Iterable[Gpu]) -> None:
        self._by_key: Dict[str, List[Gpu]] = {}
        self._display: Dict[str, str] = {}
        for gpu in gpus:
            for value in (gpu.id, gpu.name, *gpu.aliases, *gpu.nvml_names, *gpu.cuda_names):
                key = normalize_name(value)
                if not key:
                    continue
                rows = self._by_key.setdefault(key, [])
                if gpu not in rows:
                    rows.append(gpu)
                self._display.setdefault(key, value)

    def find(self, name: str, memory_mib: Optional[int] = None) -> Optional[Gpu]:
        """The GPU a name denotes; ``memory_mib`` picks among memory variants."""
        rows = self._by_key.get(normalize_name(name))
        if not rows:
            return None
        if len(rows) == 1 or memory_mib is None:
            return rows[0]
        return min(rows, key=lambda g: abs((g.memory_gb or 0) - memory_mib / 1024.0))

    def candidates(self, name: str) -> Sequence[Gpu]:
        return tuple(self._by_key.get(normalize_name(name), ()))

    def suggest(self, name: str, n: int = 3) -> List[str]:
        """Close names for a "did you mean" message, as the matrix spells them."""
        key = normalize_name(name)
        keys = list(self._by_key)
        found = difflib.get_close_matches(key, keys, n=n, cutoff=0.6)
        if not found and key:
            found = [k for k in keys if key in k or k in key][:n]
        seen: List[str] = []
        for k in found:
            gpu = self._by_key[k][0]
            label = gpu.name
            if label not in seen:
                seen.append(label)
        return seen
