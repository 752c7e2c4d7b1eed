"""Host facts: OS, distro, kernel, glibc, container, virtualisation, IOMMU, /dev/shm.

Each fact is read by a small function taking its file paths as arguments (so tests can
point them at fixtures) and returning ``None`` when it cannot tell.
"""

from __future__ import annotations

import os
import platform
import re
import socket
from typing import Mapping, Optional

from envlock._redact import REDACTED, looks_secret, mask_userinfo, secret_name, strip_userinfo
from envlock.snapshot import LAUNCHER_VARIABLES, Host

__all__ = [
    "probe_host",
    "distro_name",
    "glibc_version",
    "container_kind",
    "virtualization",
    "iommu_translating",
    "shm_bytes",
    "relevant_env",
]

#: the families of variables that change how CUDA, NCCL, cuDNN, cuBLAS, Triton and torch
#: behave; anything else in the environment is never recorded (an allowlist, not a filter).
ENV_PREFIXES = ("CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "CUBLAS_", "CUBLASLT_", "CUDNN_",
                "TRITON_")
#: single variables that matter (container runtime switches, loader paths, launchers)
ENV_NAMES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "UV_CUDA_DRIVER_VERSION", "CONDA_OVERRIDE_CUDA",
             "OMP_NUM_THREADS", "LOCAL_WORLD_SIZE", "NVIDIA_VISIBLE_DEVICES",
             "NVIDIA_DRIVER_CAPABILITIES", "NVIDIA_REQUIRE_CUDA", "NVIDIA_DISABLE_REQUIRE",
             "NVIDIA_TF32_OVERRIDE", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES",
             *LAUNCHER_VARIABLES)  # the launchers' own (WORLD_SIZE too): was it taken in a job


def _read(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def distro_name(os_release: str = "/etc/os-release") -> Optional[str]:
    """``Ubuntu 22.04`` from os-release (NAME + VERSION_ID, else PRETTY_NAME)."""
    text = _read(os_release) or _read("/usr/lib/os-release")
    if not text:
        return None
    values = {}
    for line in text.splitlines():
        if "=" in line:
            k, v = line.split("=", 1)
            values[k.strip()] = v.strip().strip('"')
    name = values.get("NAME")
    version = values.get("VERSION_ID")
    if name and version:
        return f"{name.replace(' GNU/Linux', '')} {version}"
    return values.get("PRETTY_NAME") or name


def glibc_version() -> Optional[str]:
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")  # "glibc 2.36"
    except (AttributeError, ValueError, OSError):
        return None
    if text and text.startswith("glibc "):
        return text.split()[1]
    return None


def container_kind(env: Mapping[str, str], root: str = "/") -> Optional[str]:
    """docker / podman / kubernetes / containerd / lxc, or None on a plain host."""
    if env.get("KUBERNETES_SERVICE_HOST"):
        return "kubernetes"
    if os.path.exists(os.path.join(root, ".dockerenv")):
        return "docker"
    if os.path.exists(os.path.join(root, "run/.containerenv")):
        return "podman"
    cgroup = _read(os.path.join(root, "proc/1/cgroup")) or ""
    for marker, kind in (("kubepods", "kubernetes"), ("docker", "docker"),
                         ("containerd", "containerd"), ("lxc", "lxc"), ("libpod", "podman")):
        if marker in cgroup:
            return kind
    env1 = _read(os.path.join(root, "proc/1/environ")) or ""
    if "container=" in env1:
        m = re.search(r"container=([a-z]+)", env1)
        return m.group(1) if m else "container"
    return None


def virtualization(root: str = "/") -> Optional[str]:
    """The hypervisor, from DMI and the cpuinfo ``hypervisor`` flag; None on bare metal."""
    dmi = os.path.join(root, "sys/class/dmi/id")
    vendor = (_read(os.path.join(dmi, "sys_vendor")) or "").strip().lower()
    product = (_read(os.path.join(dmi, "product_name")) or "").strip().lower()
    both = f"{vendor} {product}"
    for needle, kind in (("qemu", "kvm"), ("kvm", "kvm"), ("vmware", "vmware"),
                         ("virtualbox", "virtualbox"), ("xen", "xen"),
                         ("microsoft corporation virtual", "hyperv"), ("amazon ec2", "kvm"),
                         ("google compute engine", "kvm"), ("openstack", "kvm")):
        if needle in both:
            return kind
    cpuinfo = _read(os.path.join(root, "proc/cpuinfo")) or ""
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and " hypervisor" in line:
            return "vm"
    return None


def iommu_translating(root: str = "/") -> Optional[bool]:
    """True when an IOMMU translates DMA (not ``iommu=pt``/identity): P2P goes through it."""
    cmdline = _read(os.path.join(root, "proc/cmdline")) or ""
    groups = os.path.join(root, "sys/kernel/iommu_groups")
    try:
        names = os.listdir(groups)
    except OSError:
        return None
    if not names:
        return False
    types = set()
    for g in names[:64]:
        t = _read(os.path.join(groups, g, "type"))
        if t:
            types.add(t.strip())
    if types:
        return any(t.startswith("DMA") for t in types)
    return "iommu=pt" not in cmdline


def shm_bytes(path: str = "/dev/shm") -> Optional[int]:
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return int(st.f_blocks * st.f_frsize)


def relevant_env(env: Mapping[str, str]) -> dict:
    """The variables that matter for CUDA/NCCL/torch (an allowlist).

    A variable whose name says it carries a credential (``NCCL_COLLNET_CREDS``,
    ``TORCH_HUB_PASS``) is dropped; a value that looks like a secret or holds a URL
    credential is recorded as ``<redacted>`` (URL credentials: only the ``user:pass`` part),
    whatever its name, so a snapshot can be shared.
    """
    out = {}
    for k, v in env.items():
        if not (k.startswith(ENV_PREFIXES) or k in ENV_NAMES) or secret_name(k):
            continue
        clean = REDACTED if looks_secret(strip_userinfo(v)) else mask_userinfo(v)
        out[k] = clean
    return dict(sorted(out.items()))


def probe_host(env: Mapping[str, str], root: str = "/") -> Host:
    return Host(
        hostname=socket.gethostname() or None,
        os=platform.system().lower() or None,
        distro=distro_name(os.path.join(root, "etc/os-release")),
        kernel=platform.release() or None,
        machine=platform.machine() or None,
        glibc=glibc_version(),
        container=container_kind(env, root),
        virtualization=virtualization(root),
        iommu=iommu_translating(root),
        shm_bytes=shm_bytes(os.path.join(root, "dev/shm")),
        cpu_count=os.cpu_count(),
    )
