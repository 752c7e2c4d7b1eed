"""Finding a GPU from what a user types or what NVML prints.

Names are compared after normalisation: lower case, the words ``nvidia``, ``geforce``
and ``tesla`` dropped (older drivers omit the ``NVIDIA`` prefix; "rtx 4090" is what
people type for "NVIDIA GeForce RTX 4090"), and everything but letters and digits
removed.

>>> normalize_name("NVIDIA GeForce RTX 4090"), normalize_name("rtx-4090")
('rtx4090', 'rtx4090')
>>> normalize_name("Tesla V100-SXM2-32GB")
'v100sxm232gb'

A PCI device id also finds a GPU, when no name matches: ``1BB1``, ``0x1bb1`` or
``10de:1bb1`` (what ``lspci -n`` prints).

>>> pci_device_id("10de:1bb1"), pci_device_id("0x1BB1"), pci_device_id("RTX 4090")
('1BB1', '1BB1', None)
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional, Sequence

from envlock.matrix.model import Gpu

__all__ = ["normalize_name", "pci_device_id", "GpuIndex"]

_DROP_WORDS = re.compile(r"\b(nvidia|geforce|tesla)\b")
_NON_ALNUM = re.compile(r"[^a-z0-9]+")
_MEMORY_SUFFIX = re.compile(r"[\s_-]+\d+\s*gb$", re.IGNORECASE)  # " 6GB", "-32GB"
_PCI_ID = re.compile(r"^\s*(?:10de:|0x)?([0-9a-f]{4})\s*$", re.IGNORECASE)


def normalize_name(name: str) -> str:
    text = _DROP_WORDS.sub(" ", name.lower())
    return _NON_ALNUM.sub("", text)


def pci_device_id(text: str) -> Optional[str]:
    """The NVIDIA PCI device id ``text`` spells, upper case, or None."""
    m = _PCI_ID.match(text)
    return m.group(1).upper() if m else None


class GpuIndex:
    """Name -> GPU rows, built once per matrix."""

    def __init__(self, gpus: Iterable[Gpu]) -> None:
        self._by_key: Dict[str, List[Gpu]] = {}
        self._by_base: Dict[str, List[Gpu]] = {}  # names without their memory suffix
        self._display: Dict[str, str] = {}
        self._by_pci: Dict[str, List[Gpu]] = {}
        # built on every run that loads the matrix (~3,000 names): rows are compared by
        # identity (a dataclass's == compares every field), and a name is normalised a
        # second time only when it has a memory suffix to drop
        for gpu in gpus:
            for pci in gpu.pci_ids:
                self._by_pci.setdefault(pci, []).append(gpu)
            for value in (gpu.id, gpu.name, *gpu.aliases, *gpu.nvml_names, *gpu.cuda_names):
                key = normalize_name(value)
                if not key:
                    continue
                rows = self._by_key.setdefault(key, [])
                if not any(row is gpu for row in rows):
                    rows.append(gpu)
                self._display.setdefault(key, value)
                bare = _MEMORY_SUFFIX.sub("", value)
                base = normalize_name(bare) if bare != value else key
                if base != key and base:
                    more = self._by_base.setdefault(base, [])
                    if not any(row is gpu for row in more):
                        more.append(gpu)

    def _rows(self, name: str) -> List[Gpu]:
        """Rows for a name; a name without its memory size ("GTX 1060") stands for its
        memory variants ("GTX 1060 3GB", "GTX 1060 6GB") when they share one compute
        capability, since that is what a target needs. A PCI device id, when no name
        matches, stands for the rows that list it (one chip, so one capability)."""
        key = normalize_name(name)
        rows = self._by_key.get(key)
        if rows:
            return rows
        variants = self._by_base.get(key, [])
        if variants and len({g.compute_capability for g in variants}) == 1:
            return variants
        pci = pci_device_id(name)
        if pci is not None:
            return self._by_pci.get(pci, [])
        return []

    def find(self, name: str, memory_mib: Optional[int] = None) -> Optional[Gpu]:
        """The GPU a name denotes; ``memory_mib`` picks among memory variants."""
        rows = self._rows(name)
        if not rows:
            return None
        if len(rows) == 1 or memory_mib is None:
            return rows[0]
        return min(rows, key=lambda g: abs((g.memory_gb or 0) - memory_mib / 1024.0))

    def candidates(self, name: str) -> Sequence[Gpu]:
        return tuple(self._rows(name))

    def suggest(self, name: str, n: int = 3) -> List[str]:
        """Close names for a "did you mean" message, as the matrix spells them."""
        import difflib  # (only for an error message)

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
