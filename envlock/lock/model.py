"""The lock as values: one :class:`LockTarget` per hardware target, flat sorted packages.

Format version 1. ``version`` changes only for breaking changes (a reader refuses a
newer one); new keys may appear at any time and old readers ignore them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

__all__ = [
    "LOCK_VERSION",
    "LockedFile",
    "LockedPackage",
    "AppliedAdvisory",
    "TorchChoice",
    "LockTarget",
    "Lock",
]

LOCK_VERSION = 1


@dataclass(frozen=True)
class LockedFile:
    name: str
    url: str
    sha256: Optional[str] = None


@dataclass(frozen=True)
class LockedPackage:
    name: str  # PEP 503 canonical
    version: str  # exactly as installed ("2.4.1+cu121")
    index: Optional[str]  # simple-index URL it must come from (credentials removed)
    files: Tuple[LockedFile, ...] = ()
    direct: bool = False  # asked for by the user (or the torch core)
    #: the specifier when only a range is known (offline GPU core with `~=` pins)
    specifier: Optional[str] = None
    #: PEP 825's index-level ``{name}-{version}-variants.json`` (canonical JSON text), when a
    #: locked file is a variant wheel: an installer maps its label to properties with it
    variants_json: Optional[str] = None

    @property
    def hashes(self) -> Tuple[str, ...]:
        return tuple(sorted({f.sha256 for f in self.files if f.sha256}))


@dataclass(frozen=True)
class AppliedAdvisory:
    """An advisory the resolver acted on for a target.

    ``action``: ``excluded`` (builds it ruled out), ``override`` (pins of the torch build it
    replaced), ``constraint`` (requirements the resolution met, other packages fitted to it),
    ``warning`` (true, nothing to change), or ``may-apply`` (its condition is unknown for the
    chosen build and nothing better qualified). ``unknown`` names the facts that were
    unknown: non-empty means the advisory *may* apply (an ``override`` with unknown facts is
    a floor applied because it cannot hurt).
    """

    id: str
    action: str  # excluded | override | constraint | warning | may-apply
    summary: str
    override: Tuple[str, ...] = ()
    unknown: Tuple[str, ...] = ()

    @property
    def confirmed(self) -> bool:
        return not self.unknown


@dataclass(frozen=True)
class TorchChoice:
    version: str  # base release, "2.5.1"
    variant: str  # cu124 / cpu
    cuda: Optional[str]
    index: str  # simple-index URL
    installed_version: str  # "2.5.1" from PyPI, "2.5.1+cu121" from the PyTorch index
    arch_list: Optional[Tuple[str, ...]] = None
    ptx: Optional[Tuple[str, ...]] = None
    on_pypi: bool = False


@dataclass(frozen=True)
class LockTarget:
    name: str
    gpus: Tuple[str, ...]  # NVML names
    gpu_models: Tuple[str, ...]  # matrix ids
    compute_capabilities: Tuple[str, ...]
    python: str
    platform: str
    glibc: str
    driver: Optional[str]  # the driver resolved against, if one was given
    driver_min: Optional[str]
    driver_min_reasons: Tuple[str, ...]
    torch: Optional[TorchChoice]
    libraries: Mapping[str, str]  # expected native versions: cublas, cudnn, nccl, cudart
    advisories: Tuple[AppliedAdvisory, ...]
    packages: Tuple[LockedPackage, ...]
    closure: str  # full | gpu-core
    decision: Tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    #: "one": the GPUs share a machine; "separate": a fleet, one model per machine
    #: (``--together``, a GPU family), so verify and doctor never call it a mixed machine
    machines: str = "one"
    #: the family the GPUs are the members of (``--gpu H100``), if any
    family: Optional[str] = None
    #: what other installers are told on a host without this GPU: the NVIDIA wheel-variant
    #: provider's forced values and conda's overrides (:mod:`envlock.resolve.installer_env`);
    #: never checked by verify (``env`` is)
    installer_env: Mapping[str, str] = field(default_factory=dict)

    def package(self, name: str) -> Optional[LockedPackage]:
        from packaging.utils import canonicalize_name

        want = canonicalize_name(name)
        return next((p for p in self.packages if p.name == want), None)


@dataclass(frozen=True)
class Lock:
    envlock_version: str
    matrix_version: str
    inputs_hash: str
    inputs: Mapping[str, Any]
    command: str
    targets: Tuple[LockTarget, ...]
    version: int = LOCK_VERSION

    def target(self, name: str) -> Optional[LockTarget]:
        return next((t for t in self.targets if t.name == name), None)

    def target_names(self) -> Tuple[str, ...]:
        return tuple(t.name for t in self.targets)


def jsonable(obj: Any) -> Dict[str, Any]:
    """Plain data of a dataclass tree (tuples -> lists)."""
    from dataclasses import asdict

    def conv(x: Any) -> Any:
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        if isinstance(x, (list, tuple)):
            return [conv(v) for v in x]
        return x

    return conv(asdict(obj))
