"""Typed values of the compatibility matrix.

Every class here is a frozen dataclass (constructed with keywords; ``kw_only`` needs
Python 3.10 and envlock supports 3.9) built by :mod:`envlock.matrix.load`
after validation, so code that holds a :class:`Matrix` can trust its fields: versions
parse, references resolve, arch lists are consistent with their CUDA line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Literal, Mapping, Optional, Tuple

__all__ = [
    "Confidence",
    "Provenance",
    "Source",
    "Arch",
    "Gpu",
    "CudaMajor",
    "CudaLine",
    "CudaRelease",
    "DriverBranch",
    "NcclRelease",
    "CudnnRelease",
    "PlatformBuild",
    "TorchRelease",
    "TorchVariant",
    "Companions",
    "Advisory",
    "Symptom",
    "PLATFORMS",
]

Confidence = Literal["primary", "measured", "secondary", "unverified"]
CONFIDENCES: Tuple[str, ...] = ("primary", "measured", "secondary", "unverified")

#: Platform keys used throughout envlock (the wheel platforms PyTorch publishes for).
PLATFORMS: Tuple[str, ...] = (
    "linux_x86_64",
    "linux_aarch64",
    "win_amd64",
    "macos_arm64",
    "macos_x86_64",
)

PYPI = "pypi"  #: index marker for "the configured default index" (PyPI or its mirror)


@dataclass(frozen=True)
class Source:
    id: str
    title: str
    url: str
    kind: Confidence


@dataclass(frozen=True)
class Provenance:
    """Where a row comes from and how sure we are of it."""

    sources: Tuple[str, ...]  # source ids or URLs, as written
    confidence: Confidence
    note: Optional[str] = None


@dataclass(frozen=True)
class Arch:
    id: str
    name: str
    compute_capabilities: Tuple[str, ...]
    first_cuda: Optional[str]
    last_cuda_major: Optional[int]
    last_driver_branch: Optional[str]
    provenance: Provenance


@dataclass(frozen=True)
class Gpu:
    id: str
    name: str
    aliases: Tuple[str, ...]
    nvml_names: Tuple[str, ...]
    cuda_names: Tuple[str, ...]
    compute_capability: str
    arch: str
    chip: Optional[str]
    memory_gb: Optional[float]
    segment: str
    form_factor: Optional[str]
    pci_ids: Tuple[str, ...]
    min_driver_branch: str
    min_driver: Optional[str]
    provenance: Provenance

    @property
    def sm(self) -> str:
        major, minor = self.compute_capability.split(".")
        return f"sm_{major}{minor}"


@dataclass(frozen=True)
class CudaMajor:
    major: int
    compat_min_driver_linux: str
    compat_min_driver_windows: Optional[str]
    compat_range_end: Optional[str]
    provenance: Provenance


@dataclass(frozen=True)
class CudaLine:
    version: str  # "12.4"
    sass: Tuple[str, ...]
    provenance: Provenance

    @property
    def major(self) -> int:
        return int(self.version.split(".")[0])


@dataclass(frozen=True)
class CudaRelease:
    version: str  # "12.4.1"
    line: str
    label: Optional[str]
    driver_linux: Optional[str]
    driver_windows: Optional[str]
    components: Mapping[str, str]
    provenance: Provenance


@dataclass(frozen=True)
class DriverBranch:
    id: str  # "R535"
    major: int
    type: str
    cuda: Optional[str]
    eol: Optional[str]
    provenance: Provenance


@dataclass(frozen=True)
class NcclRelease:
    version: str
    date: Optional[str]
    cuda_majors: Tuple[int, ...]
    provenance: Provenance


@dataclass(frozen=True)
class CudnnRelease:
    version: str
    cuda_majors: Tuple[int, ...]
    compute_capabilities: Tuple[str, ...]
    min_driver_linux: Optional[str]
    provenance: Provenance


@dataclass(frozen=True)
class PlatformBuild:
    """The PyPI wheel of one torch release for one platform (harvested)."""

    platform: str
    pythons: Tuple[str, ...]
    tag: str  # cu124 / cpu
    cuda: Optional[str]
    wheel_tags: Tuple[str, ...]
    sass: Optional[Tuple[str, ...]]
    requires: Tuple[str, ...]
    wheel: Optional[str] = None  # the wheel the facts were read from


@dataclass(frozen=True)
class TorchRelease:
    version: str
    date: Optional[str]
    requires_python: Optional[str]
    torchvision: Tuple[str, ...]
    torchaudio: Tuple[str, ...]
    builds: Mapping[str, PlatformBuild]
    provenance: Provenance


@dataclass(frozen=True)
class TorchVariant:
    """One build of one torch release for one platform, on one index.

    ``index`` is :data:`PYPI` for the build PyPI serves (reached through the configured
    default index, so mirrors work) or the PyTorch index URL for that tag.
    """

    release: str
    tag: str
    platform: str
    index: str
    cuda: Optional[str]
    cuda_release: Optional[str]
    sass: Optional[Tuple[str, ...]]
    ptx: Optional[Tuple[str, ...]]
    pins_status: str  # known | partial | unknown
    pins: Tuple[str, ...]
    libraries: Mapping[str, str]
    pythons: Tuple[str, ...]
    provenance: Provenance

    @property
    def on_pypi(self) -> bool:
        return self.index == PYPI

    @property
    def version_string(self) -> str:
        """The version as installed: ``2.5.1`` from PyPI, ``2.5.1+cu121`` from the index."""
        return self.release if self.on_pypi else f"{self.release}+{self.tag}"

    @property
    def targets(self) -> Tuple[str, ...]:
        return tuple(self.sass or ()) + tuple(self.ptx or ())

    @property
    def arch_known(self) -> bool:
        return self.sass is not None


@dataclass(frozen=True)
class Companions:
    """The torchvision, torchaudio and triton releases built for one torch release.

    The pairing is a matrix fact, not left to the wheels: torchaudio 2.11.0 declares no
    torch requirement at all, so a resolver left alone would pair it with any torch (and
    it fails to load with torch 2.5.1). An empty tuple means no release is known to work.
    """

    torch: str
    torchvision: Tuple[str, ...]
    torchaudio: Tuple[str, ...]
    provenance: Provenance
    #: the triton the torch wheel requires, as a PEP 440 specifier (``==3.1.0``, ``~=3.8.0``);
    #: None where the release has no triton dependency (1.13.x). Index release builds pin
    #: the same ``triton``; ``pytorch-triton`` is what nightly builds require.
    triton: Optional[str] = None
    #: the platforms whose wheel actually requires it (its marker is true there)
    triton_platforms: Tuple[str, ...] = ()

    def allowed(self, package: str) -> Optional[Tuple[str, ...]]:
        """The paired versions of ``package`` (``None`` for a package that is not paired)."""
        return {"torchvision": self.torchvision, "torchaudio": self.torchaudio}.get(package)


@dataclass(frozen=True)
class Advisory:
    id: str
    title: str
    severity: str
    category: str
    status: str
    summary: str
    symptoms: Tuple[str, ...]
    signals: Tuple[str, ...]
    condition: Optional[Mapping[str, Any]]
    log_only: bool
    fix: Tuple[str, ...]
    sources: Tuple[str, ...]
    resolve_action: Optional[str]
    resolve_override: Tuple[str, ...]
    provenance: Provenance
    extra: Dict[str, Any] = field(default_factory=dict, compare=False)
    #: log patterns that rule the advisory out when present (a log that names another cause)
    absent: Tuple[str, ...] = ()
    #: routine log lines (NCCL INFO, warnings) that count only next to a real failure
    context: Tuple[str, ...] = ()


@dataclass(frozen=True)
class Symptom:
    """One entry of a symptom table (``compat-matrix/symptoms-*.toml``): an error a log can
    show, what it means and the generic next step. ``causes`` are advisory ids that can
    explain it (the differential in ``doctor --log`` judges each on the machine)."""

    id: str
    table: str
    name: str
    kind: str  # error | death | hang
    patterns: Tuple[str, ...]
    meaning: str
    next: str
    causes: Tuple[str, ...]
    provenance: Provenance
    code: Optional[int] = None
    message: Optional[str] = None
    #: lines that match a pattern but are routine (NCCL's plugin search): they do not count
    routine: Tuple[str, ...] = ()
