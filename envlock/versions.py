"""Small, strict parsers for the version strings of the GPU stack.

NVIDIA driver versions (``535.104.05``), CUDA versions (``12.4``, or NVML's integer
``12040``), PyTorch CUDA tags (``cu124``) and package versions all compare through
:class:`packaging.version.Version`, but each has its own spelling; these helpers keep
the spelling rules in one place.

>>> driver_branch("535.104.05"), cuda_from_int(12040), tag_for_cuda("12.4")
(535, '12.4', 'cu124')
>>> cuda_for_tag("cu118"), base_version("2.4.1+cu121")
('11.8', '2.4.1')
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Optional

from packaging.version import InvalidVersion, Version

__all__ = [
    "driver_label",
    "V",
    "parse_version",
    "is_version",
    "driver_branch",
    "cuda_from_int",
    "tag_for_cuda",
    "cuda_for_tag",
    "base_version",
    "local_label",
    "cuda_major",
]

_DRIVER_RE = re.compile(r"^[0-9]{2,3}(\.[0-9]{1,3}){1,2}\Z")  # ASCII digits, no trailing \n
_TAG_RE = re.compile(r"^cu([0-9]{2})([0-9])\Z")


@lru_cache(maxsize=4096)
def V(text: str) -> Version:
    """Parse a version (cached: the matrix compares the same strings many times)."""
    return Version(text)


def parse_version(text: str) -> Optional[Version]:
    """Version or None, never an exception."""
    try:
        return V(str(text).strip())
    except (InvalidVersion, TypeError):
        return None


def is_version(text: object) -> bool:
    return isinstance(text, str) and parse_version(text) is not None


def is_driver_version(text: object) -> bool:
    """NVIDIA driver versions: ``535.104.05``, ``570.26``, ``580.00``."""
    return isinstance(text, str) and bool(_DRIVER_RE.match(text))


def driver_branch(version: str) -> int:
    """``"535.104.05"`` -> 535."""
    return int(version.split(".", 1)[0])


def driver_label(version: str) -> str:
    """How to name a driver to a person: a branch's floor (``460.0``, what ``--driver 460``
    resolves against) is no release anyone installed, so it reads as the branch.

    >>> driver_label("460.0"), driver_label("535.104.05")
    ('R460', '535.104.05')
    """
    m = re.fullmatch(r"(\d{3})\.0", version or "")
    return f"R{m.group(1)}" if m else version


def cuda_from_int(value: int) -> str:
    """NVML/CUDA integer versions: 12040 -> ``"12.4"``, 11080 -> ``"11.8"``."""
    major, rest = divmod(int(value), 1000)
    return f"{major}.{rest // 10}"


def tag_for_cuda(cuda: str) -> str:
    """``"12.4"`` -> ``"cu124"``."""
    major, minor = cuda.split(".")[:2]
    return f"cu{major}{minor}"


def cuda_for_tag(tag: str) -> Optional[str]:
    """``"cu124"`` -> ``"12.4"``; ``"cpu"`` -> None."""
    m = _TAG_RE.match(tag)
    if not m:
        return None
    return f"{int(m.group(1))}.{m.group(2)}"


def base_version(version: str) -> str:
    """Strip a local label: ``"2.4.1+cu121"`` -> ``"2.4.1"``."""
    return version.split("+", 1)[0]


def local_label(version: str) -> Optional[str]:
    """``"2.4.1+cu121"`` -> ``"cu121"``; None without a label."""
    return version.split("+", 1)[1] if "+" in version else None


def cuda_major(cuda: str) -> int:
    return int(cuda.split(".", 1)[0])
