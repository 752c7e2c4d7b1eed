"""PyTorch build facts, read from the installed files without importing torch.

* ``torch/version.py``: the version (with its ``+cu124`` label) and ``cuda``;
* ``torch/lib/libtorch_python.so``: the ``sm_XY`` list the build was compiled for (the
  string ``torch.cuda.get_arch_list()`` returns), found by a byte search; the result is
  cached by path, size and mtime because the file is tens of MB.
"""

from __future__ import annotations

import json
import mmap
import re
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

from envlock.snapshot import TorchInfo

__all__ = ["find_torch_dir", "torch_from_files", "arch_list_of"]

_VERSION_RE = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.M)
_CUDA_RE = re.compile(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*(?:['\"]([^'\"]+)['\"]|None)", re.M)
_ARCH_TOKEN = re.compile(rb"^(?:sm|compute)_\d{2,3}[af]?$")


def find_torch_dir(site_dirs: Sequence[str]) -> Optional[Path]:
    """The first ``torch`` package directory on the path (what ``import torch`` would use)."""
    for d in site_dirs:
        p = Path(d) / "torch"
        if (p / "__init__.py").is_file():
            return p
    return None


def _scan_arch(path: Path) -> Optional[List[str]]:
    try:
        with open(path, "rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            best: Optional[List[str]] = None
            pos = mm.find(b" sm_")
            while pos != -1:
                start = mm.rfind(b"\x00", max(0, pos - 512), pos) + 1
                end = mm.find(b"\x00", pos, pos + 512)
                if end != -1 and start > 0:
                    tokens = bytes(mm[start:end]).split(b" ")
                    if len(tokens) >= 2 and all(_ARCH_TOKEN.match(t) for t in tokens):
                        cand = [t.decode() for t in tokens]
                        if best is None or len(cand) > len(best):
                            best = cand
                    pos = mm.find(b" sm_", max(end, pos + 1))
                else:
                    pos = mm.find(b" sm_", pos + 1)
            return best
    except (OSError, ValueError):
        return None


def arch_list_of(lib: Path, cache_dir: Optional[Path] = None) -> Optional[List[str]]:
    """Compiled targets of a torch build, from ``libtorch_python.so`` (cached)."""
    try:
        st = lib.stat()
    except OSError:
        return None
    key = f"{lib.resolve()}|{st.st_size}|{st.st_mtime_ns}"
    from envlock._cache_files import read_entry, write_entry

    cache = cache_dir / "torch-arch.json" if cache_dir else None
    data = {}
    if cache is not None:
        try:
            data = json.loads(read_entry(cache.parent, cache, 16 * 1024 * 1024))
            if isinstance(data, dict) and key in data:
                return data[key]
            if not isinstance(data, dict):
                data = {}
        except (OSError, ValueError, RecursionError):
            data = {}
    found = _scan_arch(lib)
    if cache is not None:
        try:
            data[key] = found
            # never through a link planted in a shared cache directory
            write_entry(cache.parent, cache, json.dumps(data).encode())
        except OSError:
            pass
    return found


def parse_version_py(text: str) -> Tuple[Optional[str], Optional[str]]:
    m = _VERSION_RE.search(text)
    c = _CUDA_RE.search(text)
    return (m.group(1) if m else None), (c.group(1) if c and c.group(1) else None)


def torch_from_files(site_dirs: Sequence[str],
                     cache_dir: Optional[Path] = None) -> Optional[TorchInfo]:
    tdir = find_torch_dir(site_dirs)
    if tdir is None:
        return None
    try:
        text = (tdir / "version.py").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return TorchInfo(source="files")
    version, cuda = parse_version_py(text)
    arch: Optional[List[str]] = None
    lib = tdir / "lib" / "libtorch_python.so"
    if cuda and lib.is_file():
        arch = arch_list_of(lib, cache_dir)
    return TorchInfo(version=version, cuda=cuda, cudnn=None, nccl=None,
                     arch_list=tuple(arch) if arch is not None else (() if not cuda else None),
                     source="files")
