"""Every copy of the CUDA user-space libraries on this machine, and which one PyTorch gets.

A GPU environment usually holds several copies of ``libcudart``, cuBLAS, cuDNN or NCCL:
the ``nvidia-*`` wheels under ``site-packages/nvidia/*/lib``, a toolkit under
``/usr/local/cuda*``, distribution packages registered in ``/etc/ld.so.cache``, and
whatever ``LD_LIBRARY_PATH`` adds. Which copy a process uses is decided by the dynamic
loader, not by pip, and the classic failure ("torch is cu124 but cuBLAS says 12.1") is a
system copy on ``LD_LIBRARY_PATH`` shadowing the wheel that torch reaches through its
``DT_RUNPATH``. This module reports each copy (deduplicated by real path) with:

* ``version``: what the library itself reports through its version function, called via
  ctypes in a short-lived child process (no GPU is needed for any of them, and a library
  whose constructor misbehaves cannot take the caller down), made more precise by the
  file name or the owning wheel's version when those agree with it;
* ``owner``: the ``nvidia-*`` distribution whose ``RECORD`` lists the file (``None`` for a
  system copy);
* ``selected``: the copy the loader picks for the consumer (by default torch's
  ``libtorch_cuda.so``), predicted by replaying glibc's search over the consumer's
  dependency graph in breadth-first order: ``DT_RPATH`` chain (only when the requesting
  object has no ``DT_RUNPATH``), ``LD_LIBRARY_PATH``, ``DT_RUNPATH``, ``ld.so.cache``,
  default directories; a file for another architecture is passed over, a soname already
  loaded is reused. Without torch the plain search (no RUNPATH) is used.

``loaded`` is left ``None``: only importing torch can tell, and that is another probe's job.
"""

from __future__ import annotations

import csv
import glob
import os
import re
import site
import sys
from dataclasses import dataclass, field
from importlib.metadata import PathDistribution
from pathlib import Path
from typing import Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from envlock.probe.elf import ElfDynamic, read_dynamic
from envlock.probe.ldcache import read_ld_cache
from envlock.probe.ldconf import LD_SO_CONF, conf_dirs, conf_file_for
from envlock.probe.libversions import api_versions, decode_version
from envlock.probe.loader import Found, LoadedObject, Loader, default_dirs as _default_dirs
from envlock.probe.loader import own_rpath, search_list
from envlock.snapshot import Library

__all__ = ["LIBRARY_NAMES", "decode_version", "library_name", "probe_libraries"]

LIBRARY_NAMES = ("cudart", "cublas", "cublasLt", "cudnn", "nccl", "nvjitlink")

_STEM_TO_NAME = {"libcudart": "cudart", "libcublas": "cublas", "libcublasLt": "cublasLt",
                 "libcudnn": "cudnn", "libnccl": "nccl", "libnvJitLink": "nvjitlink"}

#: ``libcudart.so.12``, ``libcublasLt.so.12.4.5.8``; also the hash-suffixed copies that
#: auditwheel vendors into old torch wheels (``libcudart-9335f6a2.so.11.0``)
_FILE_RE = re.compile(r"^(libcudart|libcublasLt|libcublas|libcudnn|libnccl|libnvJitLink)"
                      r"(?:-[0-9a-f]{8})?\.so\.(\d+(?:\.\d+)*)$")



def library_name(filename: str) -> Optional[str]:
    """Which of :data:`LIBRARY_NAMES` a file name (or soname) is, if any.

    >>> library_name("libcublasLt.so.12"), library_name("libcudnn_ops.so.9")
    ('cublasLt', None)
    """
    m = _FILE_RE.match(filename)
    return None if m is None else _STEM_TO_NAME[m.group(1)]


# -- the probe ---------------------------------------------------------------------------

def probe_libraries(*, env: Optional[Mapping[str, str]] = None,
                    site_dirs: Optional[Sequence[str]] = None,
                    ld_cache: str = "/etc/ld.so.cache",
                    cuda_roots: Optional[Sequence[str]] = None,
                    consumer: Optional[str] = None,
                    version_cache: Optional[Path] = None,
                    default_dirs: Optional[Sequence[str]] = None,
                    ld_so_conf: str = LD_SO_CONF) -> Tuple[Library, ...]:
    """Every copy of :data:`LIBRARY_NAMES` found, grouped by name in that order.

    ``env`` supplies ``LD_LIBRARY_PATH`` (default: this process's environment);
    ``site_dirs`` are searched for ``nvidia/*/lib`` and ``nvidia/*/*/lib`` and for torch
    (default: ``sys.path``, then the site and user-site directories); ``cuda_roots``
    default to ``/usr/local/cuda*``; ``consumer`` is the object whose loads are predicted
    (default: torch's ``libtorch_cuda.so``, else ``libtorch_global_deps.so``);
    ``version_cache`` is a JSON file remembering versions by real path, size and mtime;
    ``default_dirs`` are the loader's trusted directories (default: the system's, such as
    ``/lib/x86_64-linux-gnu``, where a GPU host's own cuDNN or NCCL often lives);
    ``ld_so_conf`` is read to name the file that put a cached copy's directory there.

    The selected copy also records how the loader reached it (``via``: ``LD_PRELOAD``,
    ``RPATH``, ``LD_LIBRARY_PATH``, ``RUNPATH``, ``ld.so.cache``, ``default``) and what
    to change (``via_source``: the ``ld.so.conf`` file or the object carrying the path).
    """
    environ = os.environ if env is None else env
    sites = _default_site_dirs() if site_dirs is None else [str(s) for s in site_dirs]
    roots = sorted(glob.glob("/usr/local/cuda*")) if cuda_roots is None else list(cuda_roots)
    exe = os.path.realpath(sys.executable) if sys.executable else None
    exe_info = read_dynamic(exe) if exe else None
    exe_dir = os.path.dirname(exe) if exe else None

    consumer_path = _default_consumer(sites) if consumer is None else os.path.abspath(consumer)
    consumer_info = read_dynamic(consumer_path) if consumer_path else None
    arch_ref = consumer_info or exe_info
    arch = None if arch_ref is None else (arch_ref.elf_class, arch_ref.little_endian,
                                          arch_ref.machine)

    ld_dirs = search_list(environ.get("LD_LIBRARY_PATH", ""), exe_dir, ":;")
    cache = read_ld_cache(ld_cache)
    trusted = (_default_dirs(arch[0] if arch else 64) if default_dirs is None
               else tuple(str(d) for d in default_dirs))
    preload = tuple(p for p in re.split(r"[ :]", environ.get("LD_PRELOAD", "")) if p)
    loader = Loader(ld_dirs, cache, trusted, arch,
                    exe_chain=own_rpath(exe_info, exe_dir), preload=preload)

    consumer_obj: Optional[LoadedObject] = None
    if consumer_path and consumer_info is not None:
        consumer_obj = LoadedObject(consumer_path, consumer_info,
                                    (own_rpath(consumer_info, os.path.dirname(consumer_path)),)
                                    + loader.exe_chain)

    copies = _Copies()
    wheel_dirs = [d for s in sites for d in _wheel_lib_dirs(s)]
    extra_dirs: List[str] = []
    if consumer_obj is not None:
        extra_dirs += [d for dirs in consumer_obj.chain for d in dirs]
        if consumer_obj.info.runpath is not None:
            extra_dirs += search_list(consumer_obj.info.runpath,
                                       os.path.dirname(consumer_obj.path), ":")
    cuda_dirs = [os.path.join(r, sub) for r in roots for sub in ("lib64", "lib")]
    cuda_dirs += [d for r in roots
                  for d in sorted(glob.glob(os.path.join(r, "targets", "*", "lib")))]
    for path in _scan(wheel_dirs + list(ld_dirs) + extra_dirs):
        copies.add(path)
    for path in loader.preloaded.values():
        copies.add(path)
    for soname, paths in cache.items():
        if library_name(soname):
            for p in paths:
                if os.path.isfile(p):
                    copies.add(p)
    for path in _scan(cuda_dirs + list(loader.default_dirs)):
        copies.add(path)

    selected = _select(loader, consumer_obj, copies)
    for chosen in selected.values():
        if chosen is not None:
            copies.add(chosen.path, front=True)

    owners = _owners(sites)
    apis = api_versions([(c.name, c.real) for c in copies], environ, version_cache)
    how = {os.path.realpath(f.path): f for f in selected.values() if f is not None}
    conf_table: Optional[Dict[str, str]] = None

    out: List[Library] = []
    for name in LIBRARY_NAMES:
        for copy in copies.of(name):
            owner = owners.get(copy.real)
            version = _most_precise(apis.get(copy.real),
                                    [_file_version(copy), owner[1] if owner else None])
            info = loader.elf(copy.real)
            found = how.get(copy.real)
            via_source = None
            if found is not None and found.via == "ld.so.cache":
                if conf_table is None:
                    conf_table = conf_dirs(ld_so_conf)
                via_source = conf_file_for(os.path.dirname(found.path), conf_table)
            elif found is not None and found.via in ("RPATH", "RUNPATH"):
                via_source = consumer_path
            out.append(Library(name=name, version=version,
                               path=_display_path(copy, info),
                               owner=owner[0] if owner else None,
                               selected=found is not None, loaded=None,
                               soname=info.soname if info is not None else None,
                               via=found.via if found is not None else None,
                               via_source=via_source))
    return tuple(out)


# -- where to look -----------------------------------------------------------------------

def _default_site_dirs() -> List[str]:
    """``sys.path`` first (import order decides which torch is used), then site dirs."""
    dirs: List[str] = [p for p in sys.path if p]
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # some embedded or old-virtualenv interpreters
        pass
    try:
        dirs.append(site.getusersitepackages())
    except AttributeError:
        pass
    seen, out = set(), []
    for d in dirs:
        if not os.path.isdir(d):
            continue
        real = os.path.realpath(d)
        if real not in seen:
            seen.add(real)
            out.append(d)
    return out


def _wheel_lib_dirs(site_dir: str) -> List[str]:
    base = os.path.join(site_dir, "nvidia")
    if not os.path.isdir(base):
        return []
    return (sorted(glob.glob(os.path.join(base, "*", "lib")))
            + sorted(glob.glob(os.path.join(base, "*", "*", "lib"))))


def _default_consumer(site_dirs: Sequence[str]) -> Optional[str]:
    for s in site_dirs:
        torch = os.path.join(s, "torch")
        if not os.path.isfile(os.path.join(torch, "__init__.py")):
            continue
        for lib in ("libtorch_cuda.so", "libtorch_global_deps.so"):
            path = os.path.join(torch, "lib", lib)
            if os.path.isfile(path):
                return path
        return None  # the torch that imports first has no CUDA library to follow
    return None


def _scan(dirs: Sequence[str]) -> Iterator[str]:
    seen = set()
    for d in dirs:
        if d in seen:
            continue
        seen.add(d)
        try:
            with os.scandir(d) as it:
                names = sorted(e.name for e in it if _FILE_RE.match(e.name))
        except OSError:
            continue
        for name in names:
            path = os.path.join(d, name)
            if os.path.isfile(path):
                yield path


# -- copies ------------------------------------------------------------------------------

@dataclass
class _Copy:
    name: str
    real: str
    paths: List[str] = field(default_factory=list)


class _Copies:
    """Copies keyed by real path, in discovery order; every path that reaches each."""

    def __init__(self) -> None:
        self._by_real: Dict[str, _Copy] = {}

    def add(self, path: str, *, front: bool = False) -> None:
        name = library_name(os.path.basename(path))
        if name is None:
            return
        real = os.path.realpath(path)
        copy = self._by_real.setdefault(real, _Copy(name, real))
        if path in copy.paths:
            if not front:
                return
            copy.paths.remove(path)
        if front:
            copy.paths.insert(0, path)
        else:
            copy.paths.append(path)

    def of(self, name: str) -> List[_Copy]:
        return [c for c in self._by_real.values() if c.name == name]

    def __iter__(self) -> Iterator[_Copy]:
        return iter(list(self._by_real.values()))


def _display_path(copy: _Copy, info: Optional[ElfDynamic]) -> str:
    """The path named like the soname (what the loader asks for), else the first found."""
    soname = info.soname if info is not None else None
    for p in copy.paths:
        if soname and os.path.basename(p) == soname:
            return p
    return copy.paths[0] if copy.paths else copy.real


def _file_version(copy: _Copy) -> Optional[str]:
    best: Optional[str] = None
    for p in copy.paths + [copy.real]:
        m = _FILE_RE.match(os.path.basename(p))
        if m and (best is None or len(m.group(2).split(".")) > len(best.split("."))):
            best = m.group(2)
    return best


def _most_precise(anchor: Optional[str], others: Sequence[Optional[str]]) -> Optional[str]:
    """``anchor`` (what the library says), or a longer version that starts with it.

    Without an anchor, the first of ``others`` is the anchor. A longer version that
    disagrees with the anchor (a wheel whose file was replaced) is not believed.
    """
    best = anchor
    for other in others:
        if not other:
            continue
        if best is None:
            best = other
            continue
        mine, theirs = best.split("."), other.split(".")
        if len(theirs) > len(mine) and theirs[:len(mine)] == mine:
            best = other
    return best


# -- the loader's choice -----------------------------------------------------------------

def _select(loader: Loader, consumer: Optional[LoadedObject],
            copies: _Copies) -> Dict[str, Optional[Found]]:
    """For each library name, where the loader opens it (``None``: no copy found).

    A name the consumer's dependency graph asks for is resolved there, and stays
    unresolved if the loader would fail. Any other library is resolved as if the consumer
    (or, without one, the interpreter) ``dlopen``-ed it by soname, trying the sonames the
    copies carry from the highest major down.
    """
    chosen: Dict[str, Optional[Found]] = {}
    if consumer is not None:
        for req, found in loader.closure(consumer):
            lib = library_name(req)
            if lib is not None and lib not in chosen:
                chosen[lib] = found
    for lib in LIBRARY_NAMES:
        if lib in chosen:
            continue
        chosen[lib] = None
        for soname in _sonames(loader, copies.of(lib)):
            found = loader.find(soname, consumer)
            if found is not None:
                chosen[lib] = found
                break
    return chosen


def _sonames(loader: Loader, copies: Sequence[_Copy]) -> List[str]:
    found: List[str] = []
    for copy in copies:
        info = loader.elf(copy.real)
        names = [info.soname] if info is not None and info.soname else []
        names += [os.path.basename(p) for p in copy.paths]
        for n in names:
            if library_name(n) and n not in found:
                found.append(n)
                break

    def major(soname: str) -> int:
        m = _FILE_RE.match(soname)
        return int(m.group(2).split(".")[0]) if m else -1

    return sorted(found, key=major, reverse=True)  # stable: discovery order among equals


# -- owners ------------------------------------------------------------------------------

def _owners(site_dirs: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """``real path -> (distribution, release version)`` from ``nvidia-*`` RECORD files."""
    from packaging.utils import canonicalize_name
    from packaging.version import InvalidVersion, Version

    out: Dict[str, Tuple[str, str]] = {}
    for s in site_dirs:
        try:
            with os.scandir(s) as it:
                infos = sorted(e.name for e in it if e.name.lower().startswith("nvidia")
                               and e.name.endswith(".dist-info"))
        except OSError:
            continue
        for info_dir in infos:
            try:
                dist = PathDistribution(Path(s, info_dir))
                name = dist.metadata["Name"]
                version = dist.version
                record = dist.read_text("RECORD") or ""
            except Exception:  # a broken dist-info must not stop the probe
                continue
            if not name or not version:
                continue
            try:
                release = ".".join(str(p) for p in Version(version).release)
            except InvalidVersion:
                release = version
            lines = [ln for ln in record.splitlines() if ".so." in ln]
            for row in csv.reader(lines):
                if not row or library_name(os.path.basename(row[0])) is None:
                    continue
                real = os.path.realpath(str(dist.locate_file(row[0])))
                out.setdefault(real, (str(canonicalize_name(name)), release))
    return out


