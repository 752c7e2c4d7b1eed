"""A host whose GPUs span architectures, with a torch build that covers only one end.

Installers that pick a build for "the GPU" read one compute capability: NVIDIA's wheel
variant provider the host's *highest* (nvidia-variant-provider), conda's ``__cuda_arch``
the *lowest* (CEP 46). On a box with, say, a V100 (7.0) and an H100 (9.0), either policy
can install a build that has kernels for one card and not the other. envlock requires
every GPU covered; this check names which policy the installed build looks like, so the
``gpu-no-kernels`` error that comes with it has its cause.
"""

from __future__ import annotations

from typing import List, Tuple

from envlock.checks.finding import Finding
from envlock.kernels import coverage
from envlock.snapshot import Snapshot

__all__ = ["arch_span_findings"]


def _key(cc: str) -> Tuple[int, int]:
    major, minor = cc.split(".")
    return int(major), int(minor)


def arch_span_findings(snap: Snapshot) -> List[Finding]:
    """One warning when the GPUs span compute capabilities and the installed torch covers
    only the newest or only the oldest; nothing when its arch list is unknown."""
    ccs = sorted({g.compute_capability for g in snap.visible_gpus() if g.compute_capability},
                 key=_key)
    if len(ccs) < 2 or snap.torch is None or snap.torch.arch_list is None:
        return []
    arch = tuple(snap.torch.arch_list)
    if not arch:
        return []  # a CPU build covers nothing: another check says so
    covered = [cc for cc in ccs if coverage(arch, cc).ok]
    lowest, highest = ccs[0], ccs[-1]
    if covered == [highest]:
        which, policy, force = ("newest", "what an installer that reads only the highest GPU "
                                "picks (NVIDIA's wheel-variant provider)", lowest)
    elif covered == [lowest]:
        which, policy, force = ("oldest", "what an installer that reads only the lowest GPU "
                                "picks (conda's __cuda_arch, CEP 46)", highest)
    else:
        return []
    names = ", ".join(f"{g.index}: {g.name} ({g.compute_capability})"
                      for g in snap.visible_gpus() if g.compute_capability)
    return [Finding(
        "gpu-arch-span-one-end", "warning", "gpu-arch",
        f"the GPUs span compute capabilities {', '.join(ccs)} and the installed torch covers "
        f"only the {which} ({covered[0]})",
        f"{names}; torch compiled for {' '.join(arch)}: {policy}",
        ("envlock resolve  # a build for every GPU of this host, then install that lock",
         f"NV_VARIANT_PROVIDER_FORCE_SM_ARCH={force} and CONDA_OVERRIDE_CUDA_ARCH={lowest} "
         f"on a build host, or run the job on identical GPUs (CUDA_VISIBLE_DEVICES)"),
        sources=("https://github.com/wheelnext/nvidia-variant-provider",
                 "https://conda-forge.org/blog/2026/10/19/cuda-arch/"),
        subject="gpus")]
