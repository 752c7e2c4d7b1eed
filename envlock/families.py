"""Package families the GPU stack cares about (shared by the resolver and the checks).

>>> is_cuda_wheel("nvidia-cublas-cu12"), is_cuda_wheel("nvidia-ml-py"), "triton" in TORCH_FAMILY
(True, False, True)
"""

from __future__ import annotations

from packaging.utils import canonicalize_name

__all__ = ["TORCH_FAMILY", "is_cuda_wheel"]

#: Packages that must come from the chosen torch build's index and nowhere else.
TORCH_FAMILY = frozenset({"torch", "torchvision", "torchaudio", "triton", "pytorch-triton"})
_CUDA_PREFIXES = ("nvidia-", "cuda-toolkit", "cuda-bindings", "cuda-pathfinder", "cuda-python")


def is_cuda_wheel(name: str) -> bool:
    """NVIDIA's CUDA wheels (``nvidia-*``, ``cuda-toolkit``, ...), not NVML's Python binding."""
    n = canonicalize_name(name)
    return n.startswith(_CUDA_PREFIXES) and n != "nvidia-ml-py"
