"""Which index a package may come from.

This is envlock's defence against dependency confusion (the 2022 ``torchtriton``
attack, where a higher-versioned package planted on PyPI won over the PyTorch index):

* the torch family (torch, torchvision, torchaudio, triton, pytorch-triton) comes only
  from the chosen build's index, whatever other indexes offer;
* NVIDIA's CUDA wheels (``nvidia-*``, ``cuda-toolkit``, ``cuda-bindings``, ...) come from
  the build's index when it has them, else from the configured indexes;
* everything else comes from the configured indexes, and only from the *first* one that
  has the project at all (uv's "first-index" strategy): a higher version on a later
  ``--extra-index-url`` never wins over the primary index.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

from packaging.utils import canonicalize_name

from envlock.families import TORCH_FAMILY, is_cuda_wheel
from envlock.index.config import IndexConfig

__all__ = ["SourcePolicy", "TORCH_FAMILY", "is_cuda_wheel"]


@dataclass(frozen=True)
class SourcePolicy:
    config: IndexConfig
    #: simple-index URL of the chosen torch build (the configured default index for a
    #: PyPI build, ``https://download.pytorch.org/whl/cuXYZ`` otherwise)
    torch_index: str

    def indexes_for(self, name: str) -> Tuple[Tuple[str, ...], bool]:
        """(indexes in order, strict). Strict: only these indexes, never a fallback."""
        n = canonicalize_name(name)
        if n in TORCH_FAMILY:
            return (self.torch_index,), True
        configured = self.config.indexes
        if is_cuda_wheel(n) and self.torch_index not in configured:
            return (self.torch_index,) + configured, False
        return configured, False
