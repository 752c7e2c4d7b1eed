"""Where the matrix data lives, and reading its bytes (no parsing, cheap to import)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Dict, Optional, Tuple, Union

__all__ = ["DATA_FILES", "data_files"]

DATA_FILES: Tuple[str, ...] = (
    "meta.toml",
    "sources.toml",
    "gpus.toml",
    "cuda.toml",
    "drivers.toml",
    "libraries.toml",
    "torch-pypi.toml",
    "torch.toml",
    "companions.toml",
    "advisories.toml",
    # symptom tables (load_symptoms.py); the generated ones by scripts/harvest_symptoms.py
    "symptoms-cuda-runtime.toml",
    "symptoms-cuda-driver.toml",
    "symptoms-nccl.toml",
    "symptoms-cublas.toml",
    "symptoms-cudnn.toml",
    "symptoms-xid.toml",
    "symptoms-host.toml",
    "symptoms-torch.toml",
)


def data_files(directory: Optional[Union[str, Path]] = None) -> Dict[str, bytes]:
    """The bytes of every data file, from ``directory`` or from the installed package."""
    out: Dict[str, bytes] = {}
    if directory is not None:
        base = Path(directory)
        for name in DATA_FILES:
            p = base / name
            if p.is_file():
                out[name] = p.read_bytes()
        return out
    root = resources.files("envlock").joinpath("compat-matrix")
    for name in DATA_FILES:
        res = root.joinpath(name)
        if res.is_file():
            out[name] = res.read_bytes()
    return out
