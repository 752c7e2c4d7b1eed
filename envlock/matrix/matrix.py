"""The assembled, indexed matrix. Built by :func:`envlock.matrix.load.build_matrix`."""

from __future__ import annotations

import re

from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from envlock.errors import UnknownGpuError, UnknownVersionError
from envlock.matrix.lookup import GpuIndex
from envlock.matrix.model import (  # noqa: I001
    Symptom,
    Advisory,
    Arch,
    Companions,
    CudaLine,
    CudaMajor,
    CudaRelease,
    CudnnRelease,
    DriverBranch,
    Gpu,
    NcclRelease,
    Source,
    TorchRelease,
    TorchVariant,
)
from envlock.versions import V, base_version, driver_branch

__all__ = ["Matrix"]


#: names of other vendors' accelerators (AMD Instinct/Radeon, Intel, Habana)
_OTHER_VENDOR = re.compile(r"(?i)\b(amd|radeon|instinct|mi\s?[1-9]\d{1,2}[a-z]?|intel|gaudi|"
                           r"arc\s?[ab]\d{3}|ponte|habana)\b")


class Matrix:
    """Every table of the compatibility matrix, with the lookups envlock needs."""

    def __init__(
        self,
        *,
        version: str,
        sources: Mapping[str, Source],
        archs: Mapping[str, Arch],
        gpus: Mapping[str, Gpu],
        cuda_majors: Mapping[int, CudaMajor],
        cuda_lines: Mapping[str, CudaLine],
        cuda_releases: Mapping[str, CudaRelease],
        drivers: Mapping[str, DriverBranch],
        nccl: Mapping[str, NcclRelease],
        cudnn: Mapping[str, CudnnRelease],
        torch_releases: Mapping[str, TorchRelease],
        variants: Sequence[TorchVariant],
        advisories: Mapping[str, Advisory],
        companions: Optional[Mapping[str, Companions]] = None,
        symptoms: Optional[Mapping[str, "Symptom"]] = None,
    ) -> None:
        self.version = version
        self.sources = dict(sources)
        self.archs = dict(archs)
        self.gpus = dict(gpus)
        self.cuda_majors = dict(cuda_majors)
        self.cuda_lines = dict(sorted(cuda_lines.items(), key=lambda kv: V(kv[0])))
        self.cuda_releases = dict(sorted(cuda_releases.items(), key=lambda kv: V(kv[0])))
        self.drivers = dict(sorted(drivers.items(), key=lambda kv: kv[1].major))
        self.nccl = dict(nccl)
        self.cudnn = dict(cudnn)
        self.torch_releases = dict(sorted(torch_releases.items(), key=lambda kv: V(kv[0])))
        self.variants: Tuple[TorchVariant, ...] = tuple(variants)
        self.advisories = dict(advisories)
        #: torch release -> its torchvision/torchaudio releases (companions.toml)
        self.companions: Dict[str, Companions] = dict(companions or {})
        #: symptom id -> what a log line means (compat-matrix/symptoms-*.toml)
        self.symptoms: Dict[str, "Symptom"] = dict(symptoms or {})
        self._gpu_index = GpuIndex(self.gpus.values())
        self._variants_by_release: Dict[str, List[TorchVariant]] = {}
        for v in self.variants:
            self._variants_by_release.setdefault(v.release, []).append(v)
        self._drivers_by_major = {b.major: b for b in self.drivers.values()}

    def __repr__(self) -> str:
        return (f"<Matrix {self.version}: {len(self.gpus)} GPUs, {len(self.cuda_releases)} CUDA "
                f"releases, {len(self.torch_releases)} torch releases, "
                f"{len(self.variants)} builds, {len(self.advisories)} advisories>")

    # -- GPUs --------------------------------------------------------------------------
    def find_gpu(self, name: str, memory_mib: Optional[int] = None) -> Optional[Gpu]:
        return self._gpu_index.find(name, memory_mib)

    def gpu(self, name: str, memory_mib: Optional[int] = None) -> Gpu:
        """The GPU a user or NVML names; UnknownGpuError with suggestions otherwise."""
        found = self._gpu_index.find(name, memory_mib)
        if found is None:
            if _OTHER_VENDOR.search(name):  # no NVIDIA look-alike is what they meant
                raise UnknownGpuError(name, [], note="not an NVIDIA GPU; envlock's matrix "
                                                    "covers NVIDIA GPUs only")
            raise UnknownGpuError(name, self._gpu_index.suggest(name))
        return found

    def gpu_candidates(self, name: str) -> Sequence[Gpu]:
        return self._gpu_index.candidates(name)

    def arch(self, gpu: Gpu) -> Arch:
        return self.archs[gpu.arch]

    # -- CUDA and drivers --------------------------------------------------------------
    def line_releases(self, line: str) -> List[CudaRelease]:
        return [r for r in self.cuda_releases.values() if r.line == line]

    def toolkit_driver(self, line: str, release: Optional[str] = None) -> Optional[str]:
        """The full-feature Linux driver minimum of a toolkit release (or of the line's GA)."""
        if release and release in self.cuda_releases:
            d = self.cuda_releases[release].driver_linux
            if d:
                return d
        for r in self.line_releases(line):
            if r.driver_linux:
                return r.driver_linux
        return None

    def compat_floor(self, cuda: str) -> Optional[str]:
        """Minor-version-compatibility floor of the CUDA major of ``cuda``."""
        major = self.cuda_majors.get(int(cuda.split(".")[0]))
        return major.compat_min_driver_linux if major else None

    def driver_branch(self, driver: str) -> Optional[DriverBranch]:
        return self._drivers_by_major.get(driver_branch(driver))

    def driver_full_cuda(self, driver: str) -> Optional[str]:
        """Newest CUDA line whose toolkit driver minimum this driver meets."""
        best: Optional[str] = None
        dv = V(driver)
        for line in self.cuda_lines:
            need = self.toolkit_driver(line)
            if need is not None and dv >= V(need):
                best = line
        return best

    # -- PyTorch -----------------------------------------------------------------------
    def release(self, version: str) -> TorchRelease:
        key = base_version(version)
        if key in self.torch_releases:
            return self.torch_releases[key]
        import difflib

        near = difflib.get_close_matches(key, list(self.torch_releases), n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise UnknownVersionError(f"torch {version} is not a release the matrix knows{hint}")

    def variants_for(self, release: Optional[str] = None,
                     platform: Optional[str] = None) -> List[TorchVariant]:
        pool: Sequence[TorchVariant] = (
            self._variants_by_release.get(base_version(release), [])
            if release is not None else self.variants
        )
        return [v for v in pool if platform is None or v.platform == platform]
