"""Where the matrix data lives, and reading its bytes (no parsing, cheap to import).

:data:`DATA_FILES` are the files the loader needs; :func:`data_files` returns every
``*.toml`` file at the top of the matrix directory (those and any other table there), so
the matrix stamp and the cache key cover each one."""

from __future__ import annotations

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
        if base.is_dir():
            for p in sorted(base.glob("*.toml")):
                if p.is_file():
                    out[p.name] = p.read_bytes()
        return out
    here = Path(__file__).parent.parent / "compat-matrix"
    if here.is_dir():  # installed as files (every run reads these: no importlib.resources)
        return data_files(here)
    from importlib import resources  # a zip import

    root = resources.files("envlock").joinpath("compat-matrix")
    for res in sorted(root.iterdir(), key=lambda r: r.name):
        if res.name.endswith(".toml") and res.is_file():
            out[res.name] = res.read_bytes()
    return out
