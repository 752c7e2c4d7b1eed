"""Package families the GPU stack cares about (shared by the resolver and the checks).

>>> is_cuda_wheel("nvidia-cublas-cu12"), is_cuda_wheel("nvidia-ml-py"), "triton" in TORCH_FAMILY
(True, False, True)
"""

from __future__ import annotations

import re
from typing import Optional

from packaging.utils import canonicalize_name

__all__ = ["TORCH_FAMILY", "is_cuda_wheel", "library_of_package"]

#: Packages that must come from the chosen torch build's index and nowhere else.
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "triton", "pytorch-triton"})
_CUDA_PREFIXES = ("nvidia-", "cuda-toolkit", "cuda-bindings", "cuda-pathfinder", "cuda-python")


def is_cuda_wheel(name: str) -> bool:
    """NVIDIA's CUDA wheels (``nvidia-*``, ``cuda-toolkit``, ...), not NVML's Python binding."""
    n = canonicalize_name(name)
    return n.startswith(_CUDA_PREFIXES) and n != "nvidia-ml-py"


_LIB_PACKAGES = {
    "nvidia-cublas": "cublas",
    "nvidia-cudnn": "cudnn",
    "nvidia-nccl": "nccl",
    "nvidia-cuda-runtime": "cudart",
    "nvidia-nvjitlink": "nvjitlink",
    "nvidia-cusparse": "cusparse",
    "nvidia-cuda-nvrtc": "nvrtc",
}


def library_of_package(name: str) -> Optional[str]:
    """The native library a CUDA wheel carries, in the lock's ``libraries`` keys.

    >>> library_of_package("nvidia-cublas-cu12"), library_of_package("nvidia-cublas")
    ('cublas', 'cublas')
    """
    base = re.sub(r"-cu\d+$", "", canonicalize_name(name))
    return _LIB_PACKAGES.get(base)
