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
import json
import os
import platform
import re
import site
import subprocess
import sys
import sysconfig
import time
from collections import deque
from dataclasses import dataclass, field
from importlib.metadata import PathDistribution
from pathlib import Path
from typing import Deque, Dict, Iterator, List, Mapping, Optional, Sequence, Tuple

from envlock.probe.elf import ElfDynamic, read_dynamic
from envlock.probe.ldcache import read_ld_cache
from envlock.snapshot import Library

__all__ = ["LIBRARY_NAMES", "decode_version", "library_name", "probe_libraries"]

LIBRARY_NAMES = ("cudart", "cublas", "cublasLt", "cudnn", "nccl", "nvjitlink")

_STEM_TO_NAME = {"libcudart": "cudart", "libcublas": "cublas", "libcublasLt": "cublasLt",
                 "libcudnn": "cudnn", "libnccl": "nccl", "libnvJitLink": "nvjitlink"}

#: ``libcudart.so.12``, ``libcublasLt.so.12.4.5.8``; also the hash-suffixed copies that
#: auditwheel vendors into old torch wheels (``libcudart-9335f6a2.so.11.0``)
_FILE_RE = re.compile(r"^(libcudart|libcublasLt|libcublas|libcudnn|libnccl|libnvJitLink)"
                      r"(?:-[0-9a-f]{8})?\.so\.(\d+(?:\.\d+)*)$")

_VERSION_CACHE_SCHEMA = "envlock.library-versions/1"
_CHILD_TIMEOUT_S = 60.0
_MAX_CLOSURE = 512
_TRIPLETS = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
             "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu"}


def library_name(filename: str) -> Optional[str]:
    """Which of :data:`LIBRARY_NAMES` a file name (or soname) is, if any.

    >>> library_name("libcublasLt.so.12"), library_name("libcudnn_ops.so.9")
    ('cublasLt', None)
    """
    m = _FILE_RE.match(filename)
    return None if m is None else _STEM_TO_NAME[m.group(1)]


def decode_version(name: str, raw: Sequence[int]) -> Optional[str]:
    """Turn what a library's version function returned into a dotted version.

    >>> decode_version("cudart", [12040]), decode_version("nccl", [22105])
    ('12.4', '2.21.5')
    >>> decode_version("cudnn", [90100]), decode_version("cudnn", [8902])
    ('9.1.0', '8.9.2')
    """
    if not raw or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0
                          for v in raw):
        return None
    if name == "cudart" and len(raw) == 1 and raw[0] > 0:
        v = raw[0]  # CUDART_VERSION: major*1000 + minor*10
        return f"{v // 1000}.{v % 1000 // 10}"
    if name in ("cublas", "cublasLt"):
        if len(raw) == 3:  # libraryPropertyType MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
            return ".".join(str(v) for v in raw)
        if len(raw) == 1 and raw[0] > 0:  # CUBLAS_VERSION: major*10000 + minor*100 + patch
            v = raw[0]
            return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
    if name in ("cudnn", "nccl") and len(raw) == 1 and raw[0] > 0:
        v = raw[0]
        if v >= 10000:  # cuDNN 9+, NCCL 2.9+: major*10000 + minor*100 + patch
            return f"{v // 10000}.{v % 10000 // 100}.{v % 100}"
        return f"{v // 1000}.{v % 1000 // 100}.{v % 100}"  # major*1000 + minor*100 + patch
    if name == "nvjitlink" and len(raw) == 2:
        return f"{raw[0]}.{raw[1]}"
    return None


# -- the probe ---------------------------------------------------------------------------

def probe_libraries(*, env: Optional[Mapping[str, str]] = None,
                    site_dirs: Optional[Sequence[str]] = None,
                    ld_cache: str = "/etc/ld.so.cache",
                    cuda_roots: Optional[Sequence[str]] = None,
                    consumer: Optional[str] = None,
                    version_cache: Optional[Path] = None,
                    default_dirs: Optional[Sequence[str]] = None) -> Tuple[Library, ...]:
    """Every copy of :data:`LIBRARY_NAMES` found, grouped by name in that order.

    ``env`` supplies ``LD_LIBRARY_PATH`` (default: this process's environment);
    ``site_dirs`` are searched for ``nvidia/*/lib`` and ``nvidia/*/*/lib`` and for torch
    (default: ``sys.path``, then the site and user-site directories); ``cuda_roots``
    default to ``/usr/local/cuda*``; ``consumer`` is the object whose loads are predicted
    (default: torch's ``libtorch_cuda.so``, else ``libtorch_global_deps.so``);
    ``version_cache`` is a JSON file remembering versions by real path, size and mtime;
    ``default_dirs`` are the loader's trusted directories (default: the system's, such as
    ``/lib/x86_64-linux-gnu``, where a GPU host's own cuDNN or NCCL often lives).
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

    ld_dirs = _search_list(environ.get("LD_LIBRARY_PATH", ""), exe_dir, ":;")
    cache = read_ld_cache(ld_cache)
    trusted = (_default_dirs(arch[0] if arch else 64) if default_dirs is None
               else tuple(str(d) for d in default_dirs))
    loader = _Loader(ld_dirs, cache, trusted, arch,
                     exe_chain=_own_rpath(exe_info, exe_dir))

    consumer_obj: Optional[_Obj] = None
    if consumer_path and consumer_info is not None:
        consumer_obj = _Obj(consumer_path, consumer_info,
                            (_own_rpath(consumer_info, os.path.dirname(consumer_path)),)
                            + loader.exe_chain)

    copies = _Copies()
    wheel_dirs = [d for s in sites for d in _wheel_lib_dirs(s)]
    extra_dirs: List[str] = []
    if consumer_obj is not None:
        extra_dirs += [d for dirs in consumer_obj.chain for d in dirs]
        if consumer_obj.info.runpath is not None:
            extra_dirs += _search_list(consumer_obj.info.runpath,
                                       os.path.dirname(consumer_obj.path), ":")
    cuda_dirs = [os.path.join(r, sub) for r in roots for sub in ("lib64", "lib")]
    cuda_dirs += [d for r in roots
                  for d in sorted(glob.glob(os.path.join(r, "targets", "*", "lib")))]
    for path in _scan(wheel_dirs + list(ld_dirs) + extra_dirs):
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
            copies.add(chosen, front=True)

    owners = _owners(sites)
    apis = _api_versions(copies, environ, version_cache)
    selected_real = {os.path.realpath(p) for p in selected.values() if p is not None}

    out: List[Library] = []
    for name in LIBRARY_NAMES:
        for copy in copies.of(name):
            owner = owners.get(copy.real)
            version = _most_precise(apis.get(copy.real),
                                    [_file_version(copy), owner[1] if owner else None])
            out.append(Library(name=name, version=version,
                               path=_display_path(copy, loader.elf(copy.real)),
                               owner=owner[0] if owner else None,
                               selected=copy.real in selected_real, loaded=None))
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


def _default_dirs(elf_class: int) -> Tuple[str, ...]:
    triplet = sysconfig.get_config_var("MULTIARCH") or _TRIPLETS.get(platform.machine())
    dirs: List[str] = []
    if triplet:
        dirs += [f"/lib/{triplet}", f"/usr/lib/{triplet}"]
    if elf_class == 64:
        dirs += ["/lib64", "/usr/lib64"]
    return tuple(dirs + ["/lib", "/usr/lib"])


def _search_list(value: str, origin: Optional[str], separators: str) -> Tuple[str, ...]:
    """Split a search path as glibc does: empty entries mean ``.``, ``$ORIGIN`` expands.

    Entries with other dynamic string tokens (``$LIB``, ``$PLATFORM``) are dropped: their
    expansion depends on how glibc was built, and a wrong guess would invent a directory.
    """
    if not value:
        return ()
    out: List[str] = []
    for part in re.split("[" + re.escape(separators) + "]", value):
        part = part or "."
        if origin is not None:
            part = part.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
        if "$" in part:
            continue
        out.append(part)
    return tuple(out)


def _own_rpath(info: Optional[ElfDynamic], origin: Optional[str]) -> Tuple[str, ...]:
    """An object's ``DT_RPATH`` dirs; none when it also has ``DT_RUNPATH`` (glibc drops it)."""
    if info is None or info.runpath is not None or not info.rpath:
        return ()
    return _search_list(info.rpath, origin, ":")


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

@dataclass(frozen=True)
class _Obj:
    """One loaded object: the path it was opened by (``$ORIGIN`` is its directory), its
    dynamic section, and the ``DT_RPATH`` lists of it and of every object above it."""

    path: str
    info: ElfDynamic
    chain: Tuple[Tuple[str, ...], ...]


class _Loader:
    """glibc's ``_dl_map_object`` search order, over the real file system."""

    def __init__(self, ld_library_path: Tuple[str, ...], cache: Mapping[str, Tuple[str, ...]],
                 default_dirs: Tuple[str, ...], arch: Optional[Tuple[int, bool, int]],
                 exe_chain: Tuple[str, ...]) -> None:
        self.ld_library_path = ld_library_path
        self.cache = cache
        self.default_dirs = default_dirs
        self.arch = arch
        self.exe_chain: Tuple[Tuple[str, ...], ...] = (exe_chain,) if exe_chain else ()
        self._elf: Dict[str, Optional[ElfDynamic]] = {}

    def elf(self, path: str) -> Optional[ElfDynamic]:
        real = os.path.realpath(path)
        if real not in self._elf:
            self._elf[real] = read_dynamic(real)
        return self._elf[real]

    def usable(self, path: str) -> bool:
        """An ELF file for our architecture (the loader skips others and searches on)."""
        if not os.path.isfile(path):
            return False
        info = self.elf(path)
        if info is None:
            return False
        return self.arch is None or (info.elf_class, info.little_endian, info.machine) == self.arch

    def _attempts(self, name: str, loader: Optional[_Obj]) -> Iterator[str]:
        if "/" in name:
            yield name
            return
        if loader is None or loader.info.runpath is None:
            for dirs in (loader.chain if loader is not None else self.exe_chain):
                for d in dirs:
                    yield os.path.join(d, name)
        for d in self.ld_library_path:
            yield os.path.join(d, name)
        if loader is not None and loader.info.runpath is not None:
            for d in _search_list(loader.info.runpath, os.path.dirname(loader.path), ":"):
                yield os.path.join(d, name)
        if loader is not None and loader.info.nodeflib:
            return
        yield from self.cache.get(name, ())
        for d in self.default_dirs:
            yield os.path.join(d, name)

    def find(self, name: str, loader: Optional[_Obj]) -> Optional[str]:
        """The path the loader opens for ``name`` requested by ``loader``, or ``None``."""
        return next((p for p in self._attempts(name, loader) if self.usable(p)), None)

    def closure(self, root: _Obj) -> List[Tuple[str, Optional[str]]]:
        """``(name, path)`` for each ``DT_NEEDED`` name in the order the loader maps them.

        Breadth first, as ``_dl_map_object_deps``; a name that matches an object already
        mapped (by requested name, soname or same file) is not searched again.
        """
        requests: List[Tuple[str, Optional[str]]] = []
        known: Dict[str, Optional[str]] = {}
        by_real: Dict[str, str] = {os.path.realpath(root.path): root.path}
        if root.info.soname:
            known[root.info.soname] = root.path
        queue: Deque[_Obj] = deque([root])
        while queue:
            obj = queue.popleft()
            for name in obj.info.needed:
                if name in known:
                    continue
                path = self.find(name, obj)
                requests.append((name, path))
                known[name] = path
                if path is None:
                    continue
                real = os.path.realpath(path)
                if real in by_real:
                    known[name] = by_real[real]
                    continue
                by_real[real] = path
                info = self.elf(path)
                if info is None:
                    continue
                if info.soname:
                    known.setdefault(info.soname, path)
                if len(by_real) < _MAX_CLOSURE:
                    origin = os.path.dirname(path)
                    queue.append(_Obj(path, info, (_own_rpath(info, origin),) + obj.chain))
        return requests


def _select(loader: _Loader, consumer: Optional[_Obj],
            copies: _Copies) -> Dict[str, Optional[str]]:
    """For each library name, the path the loader opens for it (``None``: no copy found).

    A name the consumer's dependency graph asks for is resolved there, and stays
    unresolved if the loader would fail. Any other library is resolved as if the consumer
    (or, without one, the interpreter) ``dlopen``-ed it by soname, trying the sonames the
    copies carry from the highest major down.
    """
    chosen: Dict[str, Optional[str]] = {}
    if consumer is not None:
        for req, path in loader.closure(consumer):
            lib = library_name(req)
            if lib is not None and lib not in chosen:
                chosen[lib] = path
    for lib in LIBRARY_NAMES:
        if lib in chosen:
            continue
        chosen[lib] = None
        for soname in _sonames(loader, copies.of(lib)):
            path = loader.find(soname, consumer)
            if path is not None:
                chosen[lib] = path
                break
    return chosen


def _sonames(loader: _Loader, copies: Sequence[_Copy]) -> List[str]:
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


# -- versions ----------------------------------------------------------------------------

#: Run with ``python -I -S``: reads ``[[name, path], ...]`` on stdin, writes one JSON
#: ``[index, raw]`` line per library as soon as it is read, so a crash loses one answer.
#: The library's own writes to stdout are sent to stderr (discarded) first.
_CHILD = r"""
import ctypes, json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)
C = ctypes
def ints(lib, fn):
    f = getattr(lib, fn); f.restype = C.c_int; f.argtypes = [C.POINTER(C.c_int)]
    v = C.c_int(0)
    return [v.value] if f(C.byref(v)) == 0 else None
def props(lib, fn):
    f = getattr(lib, fn); f.restype = C.c_int; f.argtypes = [C.c_int, C.POINTER(C.c_int)]
    got = []
    for t in (0, 1, 2):
        v = C.c_int(0)
        if f(t, C.byref(v)) != 0:
            return None
        got.append(v.value)
    return got
def size_t(lib, fn):
    f = getattr(lib, fn); f.restype = C.c_size_t; f.argtypes = []
    return [int(f())]
def cublaslt(lib):
    try:
        return props(lib, "cublasLtGetProperty")
    except AttributeError:
        return size_t(lib, "cublasLtGetVersion")
def nvjitlink(lib):
    f = lib.nvJitLinkVersion; f.restype = C.c_int; f.argtypes = [C.POINTER(C.c_uint)] * 2
    a, b = C.c_uint(0), C.c_uint(0)
    return [a.value, b.value] if f(C.byref(a), C.byref(b)) == 0 else None
READ = {"cudart": lambda l: ints(l, "cudaRuntimeGetVersion"),
        "cublas": lambda l: props(l, "cublasGetProperty"),
        "cublasLt": cublaslt,
        "cudnn": lambda l: size_t(l, "cudnnGetVersion"),
        "nccl": lambda l: ints(l, "ncclGetVersion"),
        "nvjitlink": nvjitlink}
for i, (name, path) in enumerate(json.loads(sys.stdin.read())):
    raw = None
    try:
        raw = READ[name](C.CDLL(path, mode=os.RTLD_LOCAL))
    except Exception:
        pass
    out.write(json.dumps([i, raw]) + "\n")
    out.flush()
"""


def _api_versions(copies: _Copies, environ: Mapping[str, str],
                  cache_path: Optional[Path]) -> Dict[str, Optional[str]]:
    """``real path -> version the library reports`` (``None``: it could not be asked)."""
    cache = _load_version_cache(cache_path)
    result: Dict[str, Optional[str]] = {}
    todo: List[Tuple[_Copy, Tuple[int, int]]] = []
    for copy in copies:
        try:
            st = os.stat(copy.real)
        except OSError:
            result[copy.real] = None
            continue
        stamp = (st.st_size, st.st_mtime_ns)
        hit = cache.get(copy.real)
        if hit is not None and (hit.get("size"), hit.get("mtime_ns")) == stamp:
            v = hit.get("version")
            result[copy.real] = v if isinstance(v, str) else None
        else:
            todo.append((copy, stamp))
    if not todo:
        return result
    answers = _ask_child([(c.name, c.real) for c, _ in todo], environ)
    changed = False
    for i, (copy, stamp) in enumerate(todo):
        known, raw = answers.get(i, (False, None))
        version = decode_version(copy.name, raw) if raw is not None else None
        result[copy.real] = version
        if known:
            cache[copy.real] = {"size": stamp[0], "mtime_ns": stamp[1], "version": version}
            changed = True
    if changed and cache_path is not None:
        _save_version_cache(cache_path, cache)
    return result


def _ask_child(jobs: List[Tuple[str, str]],
               environ: Mapping[str, str]) -> Dict[int, Tuple[bool, Optional[List[int]]]]:
    """``index -> (settled, raw)``; unsettled answers (a crash, a timeout) are not cached.

    A child that dies part-way (a library crashed it) is restarted after the library it was
    on, which answers nothing this time.
    """
    answers: Dict[int, Tuple[bool, Optional[List[int]]]] = {}
    if not sys.executable:
        return answers
    child_env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    if environ.get("LD_LIBRARY_PATH"):
        child_env["LD_LIBRARY_PATH"] = environ["LD_LIBRARY_PATH"]
    deadline = time.monotonic() + _CHILD_TIMEOUT_S
    start = 0
    while start < len(jobs):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        batch = jobs[start:]
        try:
            proc = subprocess.run([sys.executable, "-I", "-S", "-c", _CHILD],
                                  input=json.dumps(batch), capture_output=True, text=True,
                                  env=child_env, timeout=left, check=False)
            stdout, finished = proc.stdout, True
        except subprocess.TimeoutExpired as exc:
            stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            finished = False
        except (OSError, subprocess.SubprocessError):
            break
        got = 0
        for line in stdout.splitlines():
            try:
                i, raw = json.loads(line)
            except (ValueError, TypeError):
                continue
            if isinstance(i, int) and 0 <= i < len(batch) and isinstance(raw, (list, type(None))):
                answers[start + i] = (True, raw)
                got = max(got, i + 1)
        if got == len(batch) or not finished:
            break
        answers[start + got] = (False, None)  # took the child down: not cached, not retried now
        start += got + 1
    return answers


def _load_version_cache(path: Optional[Path]) -> Dict[str, Dict[str, object]]:
    if path is None:
        return {}
    try:
        from envlock._cache_files import read_entry

        data = json.loads(read_entry(Path(path).parent, path, 16 * 1024 * 1024))
    except (OSError, ValueError, RecursionError):
        return {}
    if not isinstance(data, dict) or data.get("schema") != _VERSION_CACHE_SCHEMA:
        return {}
    entries = data.get("entries")
    if not isinstance(entries, dict):
        return {}
    return {k: v for k, v in entries.items() if isinstance(k, str) and isinstance(v, dict)}


def _save_version_cache(path: Path, entries: Mapping[str, Mapping[str, object]]) -> None:
    """Write atomically; a cache we cannot write only costs speed next time."""
    path = Path(path)
    doc = {"schema": _VERSION_CACHE_SCHEMA, "entries": dict(sorted(entries.items()))}
    from envlock._cache_files import write_entry

    try:  # never through a link planted in a shared cache directory
        write_entry(path.parent, path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))
    except OSError:
        pass
