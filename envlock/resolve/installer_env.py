"""What other installers are told about a target: wheel-variant properties, the NVIDIA
variant provider's forced values, conda's CUDA virtual-package overrides, pixi's
system requirements.

envlock already knows, for every torch build, the facts these tools encode:

- **Wheel variants** (PEP 825, provisional): NVIDIA's provider names a build by
  ``nvidia :: cuda_version_lower_bound :: X.Y`` (the CUDA line it was built with) and one
  ``nvidia :: sm_arch :: NN_real`` per SASS arch (``NN_virtual`` per PTX arch), the
  values CMake's ``CUDA_ARCHITECTURES`` uses (wheelnext/nvidia-variant-provider README).
- **The provider's forced values**, for a host without a GPU:
  ``NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION`` (a CUDA version the driver supports,
  ``12.8``) and ``NV_VARIANT_PROVIDER_FORCE_SM_ARCH`` (a compute capability, ``9.0``),
  as PyTorch's own CI sets them (pytorch/pytorch .ci wheel-variant test setup).
  The provider detects only the highest GPU of a host.
- **conda** (CEP 46): ``__cuda`` is the CUDA version the driver supports
  (``CONDA_OVERRIDE_CUDA``), ``__cuda_arch`` the *lowest* compute capability of the
  host's devices (``CONDA_OVERRIDE_CUDA_ARCH``); pixi writes the first as
  ``[system-requirements] cuda = "X.Y"``.

envlock requires every GPU of a target covered, so where a target spans architectures
no single forced arch says it all: the lowest is given (what conda reads), and the
lock's ``verify`` checks every device.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from envlock.versions import V

if TYPE_CHECKING:
    from envlock.matrix.matrix import Matrix
    from envlock.matrix.model import Gpu, TorchVariant

__all__ = [
    "NAMESPACE",
    "FORCE_SM_ARCH",
    "FORCE_CUDA",
    "CONDA_CUDA",
    "CONDA_CUDA_ARCH",
    "variant_properties",
    "properties_by_feature",
    "installer_env",
    "pixi_snippet",
    "parse_cuda_arch",
]

NAMESPACE = "nvidia"
FORCE_SM_ARCH = "NV_VARIANT_PROVIDER_FORCE_SM_ARCH"
FORCE_CUDA = "NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION"
CONDA_CUDA = "CONDA_OVERRIDE_CUDA"
CONDA_CUDA_ARCH = "CONDA_OVERRIDE_CUDA_ARCH"

_ARCH_RE = re.compile(r"^(?:sm|compute)_([0-9]{2,3}[a-z]?)\Z")
_CC_RE = re.compile(r"^([0-9]{1,2})\.([0-9])\Z")


def _arch_value(arch: str, kind: str) -> Optional[str]:
    """``sm_90`` -> ``90_real``; ``compute_120`` -> ``120_virtual``."""
    m = _ARCH_RE.match(arch)
    return f"{m.group(1)}_{kind}" if m else None


def variant_properties(variant: "TorchVariant") -> Optional[Tuple[str, ...]]:
    """The build's properties in the NVIDIA namespace, or ``None`` when its arch list is
    unknown (the CUDA bound alone would let an installer pick it for any GPU).

    A CPU build has none (the null variant's empty set).

    >>> from envlock.matrix import get_matrix
    >>> v = next(v for v in get_matrix().variants_for("2.8.0")
    ...          if v.tag == "cu129" and v.platform == "linux_x86_64")
    >>> "nvidia :: sm_arch :: 90_real" in variant_properties(v)
    True
    """
    if not variant.cuda:
        return ()
    if variant.sass is None:
        return None
    out = [f"{NAMESPACE} :: cuda_version_lower_bound :: {variant.cuda}"]
    for arch in variant.sass:
        val = _arch_value(arch, "real")
        if val:
            out.append(f"{NAMESPACE} :: sm_arch :: {val}")
    for arch in variant.ptx or ():
        val = _arch_value(arch, "virtual")
        if val:
            out.append(f"{NAMESPACE} :: sm_arch :: {val}")
    return tuple(out)


def properties_by_feature(props: Sequence[str]) -> Dict[str, Dict[str, List[str]]]:
    """``ns :: feature :: value`` strings as PEP 825's ``{namespace: {feature: [values]}}``."""
    out: Dict[str, Dict[str, List[str]]] = {}
    for p in props:
        ns, feature, value = (x.strip() for x in p.split("::"))
        values = out.setdefault(ns, {}).setdefault(feature, [])
        if value not in values:
            values.append(value)
    return out


def _cc_key(cc: str) -> Tuple[int, int]:
    major, minor = cc.split(".")
    return int(major), int(minor)


def installer_env(matrix: "Matrix", gpus: Sequence["Gpu"], cuda: Optional[str],
                  driver: Optional[str]) -> Tuple[Dict[str, str], Tuple[str, ...]]:
    """The variables that make a variant-aware installer, or a conda/pixi solve, on a
    host without the GPU pick what this target's lock holds; and why each value.

    ``cuda`` is the locked build's CUDA line; ``driver`` the driver the target was
    resolved for (or the lock's driver floor). Empty for a CPU target.
    """
    if not gpus or not cuda:
        return {}, ()
    ccs = sorted({g.compute_capability for g in gpus}, key=_cc_key)
    lowest = ccs[0]
    env: Dict[str, str] = {}
    notes: List[str] = []
    # the provider and conda both want the CUDA version the driver supports; the locked
    # build's line is what selects it (a newer 12.x build runs on an older 12.x driver
    # through minor-version compatibility, which the provider does not model)
    drv_cuda = matrix.driver_full_cuda(driver) if driver else None
    forced = cuda
    if drv_cuda and V(drv_cuda) >= V(cuda):
        forced = drv_cuda
    env[FORCE_CUDA] = forced
    # conda's __cuda is what the driver reports on the real host (what it would detect)
    env[CONDA_CUDA] = drv_cuda or cuda
    if drv_cuda and V(drv_cuda) < V(cuda):
        notes.append(f"driver {driver} reports CUDA {drv_cuda}; the locked build is CUDA "
                     f"{cuda} and runs on it through minor-version compatibility, so the "
                     f"variant provider is told {cuda} (conda, {drv_cuda}: what it detects)")
    env[FORCE_SM_ARCH] = lowest
    env[CONDA_CUDA_ARCH] = lowest
    if len(ccs) > 1:
        notes.append(f"the target spans compute capabilities {', '.join(ccs)}: the NVIDIA "
                     f"variant provider reads one arch (on a live host, the highest), conda's "
                     f"__cuda_arch the lowest; {lowest} is given, and the lock's build "
                     f"covers every one")
    return env, tuple(notes)


def pixi_snippet(env: Dict[str, str]) -> str:
    """A ``[system-requirements]`` table for pixi.toml from :func:`installer_env`."""
    cuda = env.get(CONDA_CUDA)
    if not cuda:
        return ""
    lines = ["[system-requirements]", f'cuda = "{cuda}"']
    arch = env.get(CONDA_CUDA_ARCH)
    if arch:
        lines.append(f"# and solve with {CONDA_CUDA_ARCH}={arch} (CEP 46 __cuda_arch) where "
                     f"no GPU is present")
    return "\n".join(lines) + "\n"


def parse_cuda_arch(text: str) -> Optional[str]:
    """A ``CONDA_OVERRIDE_CUDA_ARCH`` value as a compute capability (``8.6``); the build
    string after ``=`` is ignored; ``None`` when it is not one."""
    value = text.strip().split("=", 1)[0].strip()
    return value if _CC_RE.match(value) else None
