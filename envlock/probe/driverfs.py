"""What the kernel says about the NVIDIA driver when NVML cannot be asked.

NVML lives in ``libnvidia-ml.so.1``, a user-space library that can be missing (a container
started without the NVIDIA runtime hooks), out of step with the kernel module (a driver
upgraded without a reboot) or refused (no permission). The kernel module still publishes
its version in ``/proc`` and ``/sys``, and the PCI bus lists the GPUs, so a snapshot can say
"driver 535.104.05, two GPUs at these addresses" even then. Each function here is one
method of a fallback chain: it returns ``None`` (or nothing) when its file is missing or
unreadable, never raises, and takes its path as an argument so tests can point it at
temporary files.

>>> normalize_bus_id("00000000:1B:00.0")
'0000:1b:00.0'
"""

from __future__ import annotations

import os
import re
from typing import List, Optional, Tuple

from envlock.snapshot import GpuInfo
from envlock.versions import is_driver_version

__all__ = [
    "PROC_VERSION",
    "SYSFS_VERSION",
    "PCI_DEVICES",
    "driver_from_proc",
    "driver_from_sysfs",
    "gpus_from_sysfs",
    "normalize_bus_id",
]

PROC_VERSION = "/proc/driver/nvidia/version"
SYSFS_VERSION = "/sys/module/nvidia/version"
PCI_DEVICES = "/sys/bus/pci/devices"

_NVIDIA_VENDOR = 0x10DE
_DISPLAY_CLASS = 0x03  # PCI base class "display controller": VGA (0x0300) and 3D (0x0302)

# "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (...)"
# The version is the first dotted number after "Kernel Module"; the architecture words
# in between ("for x86_64", "for aarch64") have no dots.
_PROC_RE = re.compile(r"^NVRM version:.*?Kernel Module\b.*?(?<!\S)(\d+\.\d+(?:\.\d+)?)(?!\S)")
_BUS_RE = re.compile(r"^([0-9a-fA-F]{1,8}):([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])$")


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def driver_from_proc(path: str = PROC_VERSION) -> Optional[str]:
    """The kernel module's version from ``/proc/driver/nvidia/version``, or None.

    Both the proprietary ("NVIDIA UNIX x86_64 Kernel Module") and the open ("NVIDIA UNIX
    Open Kernel Module for x86_64") spellings are read.
    """
    text = _read(path)
    if text is None:
        return None
    for line in text.splitlines():
        m = _PROC_RE.match(line.strip())
        if m and is_driver_version(m.group(1)):
            return m.group(1)
    return None


def driver_from_sysfs(path: str = SYSFS_VERSION) -> Optional[str]:
    """The kernel module's version from ``/sys/module/nvidia/version``, or None."""
    text = _read(path)
    if text is None:
        return None
    version = text.strip()
    return version if is_driver_version(version) else None


def normalize_bus_id(text: Optional[str]) -> Optional[str]:
    """A PCI address in the 12-character sysfs form (``0000:18:00.0``), or None.

    NVML writes an 8-digit domain in upper case (``00000000:1B:00.0``); sysfs and
    ``CUDA_VISIBLE_DEVICES``-style tools use 4 digits in lower case. One spelling lets the
    two be compared.
    """
    if not text:
        return None
    m = _BUS_RE.match(text.strip())
    if m is None:
        return None
    domain, bus, device, function = m.groups()
    if int(domain, 16) > 0xFFFF:
        return None
    return f"{int(domain, 16):04x}:{int(bus, 16):02x}:{int(device, 16):02x}.{function}"


def _hex_file(path: str) -> Optional[int]:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text.strip(), 16)
    except ValueError:
        return None


def gpus_from_sysfs(root: str = PCI_DEVICES) -> Tuple[GpuInfo, ...]:
    """NVIDIA display controllers on the PCI bus, each with only ``pci_bus_id`` known.

    Indices follow PCI bus order, which is the order NVML and ``nvidia-smi`` use by
    default. NVIDIA's other PCI functions (the HDMI audio device, NVSwitches) are left
    out by their class. An unreadable root gives no GPUs.
    """
    try:
        names = os.listdir(root)
    except OSError:
        return ()
    found: List[str] = []
    for name in names:
        bus_id = normalize_bus_id(name)
        if bus_id is None:
            continue
        if _hex_file(os.path.join(root, name, "vendor")) != _NVIDIA_VENDOR:
            continue
        pci_class = _hex_file(os.path.join(root, name, "class"))
        if pci_class is None or pci_class >> 16 != _DISPLAY_CLASS:
            continue
        found.append(bus_id)
    return tuple(GpuInfo(index=i, pci_bus_id=bus) for i, bus in enumerate(sorted(found)))
