"""Target platforms: wheel tags and marker environments for a machine we are not on.

The resolver evaluates markers and picks wheels for the *target* (say Linux x86_64,
CPython 3.11, glibc 2.28), never for the machine running envlock.

>>> platform_of_wheel_tag("manylinux_2_28_aarch64"), platform_of_wheel_tag("win_amd64")
('linux_aarch64', 'win_amd64')
>>> str(target_tags("3.11", "linux_x86_64", glibc="2.28")[0])
'cp311-cp311-manylinux_2_28_x86_64'
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Dict, List, Optional, Tuple

from packaging.tags import Tag, compatible_tags, cpython_tags

__all__ = [
    "PLATFORM_INFO",
    "platform_of_wheel_tag",
    "python_of_interpreter_tag",
    "target_tags",
    "marker_environment",
    "Target",
    "DEFAULT_GLIBC",
    "host_platform",
]

#: platform key -> (platform_system, sys_platform, platform_machine, os_name)
PLATFORM_INFO: Dict[str, Tuple[str, str, str, str]] = {
    "linux_x86_64": ("Linux", "linux", "x86_64", "posix"),
    "linux_aarch64": ("Linux", "linux", "aarch64", "posix"),
    "win_amd64": ("Windows", "win32", "AMD64", "nt"),
    "macos_arm64": ("Darwin", "darwin", "arm64", "posix"),
    "macos_x86_64": ("Darwin", "darwin", "x86_64", "posix"),
}

#: Default glibc assumed for Linux targets when nothing says otherwise. 2.28 is the
#: floor of every torch wheel since 2.7 (manylinux_2_28) and of RHEL 8 / Ubuntu 20.04+.
DEFAULT_GLIBC = "2.28"

_MANYLINUX_RE = re.compile(r"^manylinux_([0-9]+)_([0-9]+)_(\w+)\Z")
_LEGACY = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def platform_of_wheel_tag(tag: str) -> Optional[str]:
    """Map a wheel platform tag to envlock's platform key (None: not one we target)."""
    if tag.startswith(("manylinux", "musllinux", "linux_")):
        if tag.startswith("musllinux"):
            return None
        if tag.endswith("_x86_64"):
            return "linux_x86_64"
        if tag.endswith("_aarch64"):
            return "linux_aarch64"
        return None
    if tag == "win_amd64":
        return "win_amd64"
    if tag.startswith("macosx_"):
        if tag.endswith(("_arm64", "_universal2")):
            return "macos_arm64"
        if tag.endswith("_x86_64"):
            return "macos_x86_64"
    return None


def python_of_interpreter_tag(tag: str) -> Optional[str]:
    """``cp311`` -> ``3.11``; ``cp313t`` -> ``3.13t``; others None."""
    m = re.match(r"^cp3([0-9]{1,2})(t?)\Z", tag)
    return f"3.{m.group(1)}{m.group(2)}" if m else None


def _linux_platforms(arch: str, glibc: str) -> List[str]:
    major, minor = (int(x) for x in glibc.split(".")[:2])
    out = []
    for m in range(minor, 4, -1):
        out.append(f"manylinux_{major}_{m}_{arch}")
        for legacy, (lm, ln) in _LEGACY.items():
            if (lm, ln) == (major, m):
                out.append(f"{legacy}_{arch}")
    out.append(f"linux_{arch}")
    return out


@lru_cache(maxsize=64)
def target_tags(python: str, platform: str, glibc: str = DEFAULT_GLIBC,
                macos: str = "14.0") -> Tuple[Tag, ...]:
    """Supported tags for a target, most preferred first (like pip's, for that target)."""
    free_threaded = python.endswith("t")
    ver = tuple(int(x) for x in python.rstrip("t").split(".")[:2])
    abi = f"cp{ver[0]}{ver[1]}{'t' if free_threaded else ''}"
    if platform.startswith("linux_"):
        arch = platform.split("_", 1)[1]
        plats = _linux_platforms(arch, glibc)
    elif platform == "win_amd64":
        plats = ["win_amd64"]
    elif platform.startswith("macos_"):
        arch = platform.split("_", 1)[1]
        mj, mn = (int(x) for x in macos.split(".")[:2])
        plats = []
        for major in range(mj, 10, -1):
            top = mn if major == mj else 0
            for minor in range(top, -1, -1):
                plats += [f"macosx_{major}_{minor}_{arch}", f"macosx_{major}_{minor}_universal2"]
        for minor in range(16, 8, -1):
            plats += [f"macosx_10_{minor}_{arch}", f"macosx_10_{minor}_universal2"]
    else:
        raise ValueError(f"unknown platform {platform!r}")
    tags = list(cpython_tags(ver, [abi], plats))
    if free_threaded:
        tags = [t for t in tags if t.abi != "abi3"]
    tags += list(compatible_tags(ver, abi, plats))
    return tuple(tags)


def marker_environment(python: str, platform: str,
                       full_version: Optional[str] = None) -> Dict[str, str]:
    """PEP 508 marker variables for a target."""
    system, sys_platform, machine, os_name = PLATFORM_INFO[platform]
    base = python.rstrip("t")
    return {
        "implementation_name": "cpython",
        "implementation_version": full_version or f"{base}.0",
        "os_name": os_name,
        "platform_machine": machine,
        "platform_python_implementation": "CPython",
        "platform_release": "",
        "platform_system": system,
        "platform_version": "",
        "python_full_version": full_version or f"{base}.0",
        "python_version": base,
        "sys_platform": sys_platform,
    }


@dataclass(frozen=True)
class Target:
    """Python, platform and glibc of a machine we resolve for."""

    python: str = "3.11"
    platform: str = "linux_x86_64"
    glibc: str = DEFAULT_GLIBC

    @property
    def tags(self) -> Tuple[Tag, ...]:
        return target_tags(self.python, self.platform, self.glibc)

    @property
    def markers(self) -> Dict[str, str]:
        return marker_environment(self.python, self.platform)


def host_platform() -> Optional[str]:
    """This machine's platform key (None on anything envlock does not target)."""
    import platform as _p
    import sys

    machine = _p.machine().lower()
    if sys.platform.startswith("linux"):
        return {"x86_64": "linux_x86_64", "amd64": "linux_x86_64",
                "aarch64": "linux_aarch64", "arm64": "linux_aarch64"}.get(machine)
    if sys.platform == "win32":
        return "win_amd64"
    if sys.platform == "darwin":
        return "macos_arm64" if machine == "arm64" else "macos_x86_64"
    return None
