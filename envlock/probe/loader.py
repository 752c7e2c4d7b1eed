"""glibc's search for a shared object, replayed over the real file system.

For each ``DT_NEEDED`` name the loader tries, in order: a soname already mapped (objects
named in ``LD_PRELOAD`` are mapped first), the ``DT_RPATH`` chain of the requesting object
and the objects above it (only when the requester has no ``DT_RUNPATH``),
``LD_LIBRARY_PATH``, the requester's ``DT_RUNPATH``, ``/etc/ld.so.cache``, and the default
directories; a file for another architecture is passed over. Each answer also says which
of those steps found it (:data:`VIA`): that step is what a fix has to change, so a copy
that arrives through ``/etc/ld.so.conf.d`` is never "fixed" by unsetting
``LD_LIBRARY_PATH``.
"""

from __future__ import annotations

import os
import platform
import re
import sysconfig
from collections import deque
from dataclasses import dataclass
from typing import Deque, Dict, Iterator, List, Literal, Mapping, Optional, Tuple

from envlock.probe.elf import ElfDynamic, read_dynamic

__all__ = ["VIA", "Via", "Found", "LoadedObject", "Loader", "default_dirs", "search_list",
           "own_rpath"]

#: How the loader reached a file: the step of its search that found it.
Via = Literal["LD_PRELOAD", "RPATH", "LD_LIBRARY_PATH", "RUNPATH", "ld.so.cache", "default",
              "path"]
VIA: Tuple[str, ...] = ("LD_PRELOAD", "RPATH", "LD_LIBRARY_PATH", "RUNPATH", "ld.so.cache",
                        "default", "path")

_MAX_CLOSURE = 512
_TRIPLETS = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu",
             "ppc64le": "powerpc64le-linux-gnu", "s390x": "s390x-linux-gnu"}


def default_dirs(elf_class: int) -> Tuple[str, ...]:
    """The loader's trusted directories on this system, most specific first."""
    triplet = sysconfig.get_config_var("MULTIARCH") or _TRIPLETS.get(platform.machine())
    dirs: List[str] = []
    if triplet:
        dirs += [f"/lib/{triplet}", f"/usr/lib/{triplet}"]
    if elf_class == 64:
        dirs += ["/lib64", "/usr/lib64"]
    return tuple(dirs + ["/lib", "/usr/lib"])


def search_list(value: str, origin: Optional[str], separators: str) -> Tuple[str, ...]:
    """Split a search path as glibc does: empty entries mean ``.``, ``$ORIGIN`` expands.

    Entries with other dynamic string tokens (``$LIB``, ``$PLATFORM``) are dropped: their
    expansion depends on how glibc was built, and a wrong guess would invent a directory.

    >>> search_list("$ORIGIN/../lib::/opt", "/x/bin", ":")
    ('/x/bin/../lib', '.', '/opt')
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


def own_rpath(info: Optional[ElfDynamic], origin: Optional[str]) -> Tuple[str, ...]:
    """An object's ``DT_RPATH`` dirs; none when it also has ``DT_RUNPATH`` (glibc drops it)."""
    if info is None or info.runpath is not None or not info.rpath:
        return ()
    return search_list(info.rpath, origin, ":")


@dataclass(frozen=True)
class LoadedObject:
    """One loaded object: the path it was opened by (``$ORIGIN`` is its directory), its
    dynamic section, and the ``DT_RPATH`` lists of it and of every object above it."""

    path: str
    info: ElfDynamic
    chain: Tuple[Tuple[str, ...], ...]


@dataclass(frozen=True)
class Found:
    """Where the loader found a name, and by which step (:data:`VIA`)."""

    path: str
    via: str


class Loader:
    """glibc's ``_dl_map_object`` search order, over the real file system."""

    def __init__(self, ld_library_path: Tuple[str, ...], cache: Mapping[str, Tuple[str, ...]],
                 default_dirs: Tuple[str, ...], arch: Optional[Tuple[int, bool, int]],
                 exe_chain: Tuple[str, ...], preload: Tuple[str, ...] = ()) -> None:
        self.ld_library_path = ld_library_path
        self.cache = cache
        self.default_dirs = default_dirs
        self.arch = arch
        self.exe_chain: Tuple[Tuple[str, ...], ...] = (exe_chain,) if exe_chain else ()
        self._elf: Dict[str, Optional[ElfDynamic]] = {}
        #: soname -> path of each LD_PRELOAD object (mapped before anything else)
        self.preloaded: Dict[str, str] = {}
        for item in preload:
            hit = self.find(item, None)
            if hit is None:
                continue
            info = self.elf(hit.path)
            for key in (item, os.path.basename(hit.path), info.soname if info else None):
                if key:
                    self.preloaded.setdefault(key, hit.path)

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

    def _attempts(self, name: str, loader: Optional[LoadedObject]) -> Iterator[Tuple[str, str]]:
        if "/" in name:
            yield name, "path"
            return
        if loader is None or loader.info.runpath is None:
            for dirs in (loader.chain if loader is not None else self.exe_chain):
                for d in dirs:
                    yield os.path.join(d, name), "RPATH"
        for d in self.ld_library_path:
            yield os.path.join(d, name), "LD_LIBRARY_PATH"
        if loader is not None and loader.info.runpath is not None:
            for d in search_list(loader.info.runpath, os.path.dirname(loader.path), ":"):
                yield os.path.join(d, name), "RUNPATH"
        if loader is not None and loader.info.nodeflib:
            return
        for p in self.cache.get(name, ()):
            yield p, "ld.so.cache"
        for d in self.default_dirs:
            yield os.path.join(d, name), "default"

    def find(self, name: str, loader: Optional[LoadedObject]) -> Optional[Found]:
        """Where the loader opens ``name`` requested by ``loader``, or ``None``."""
        if name in self.preloaded:
            return Found(self.preloaded[name], "LD_PRELOAD")
        return next((Found(p, via) for p, via in self._attempts(name, loader)
                     if self.usable(p)), None)

    def closure(self, root: LoadedObject) -> List[Tuple[str, Optional[Found]]]:
        """``(name, found)`` for each ``DT_NEEDED`` name in the order the loader maps them.

        Breadth first, as ``_dl_map_object_deps``; a name that matches an object already
        mapped (by requested name, soname or same file) is not searched again.
        """
        requests: List[Tuple[str, Optional[Found]]] = []
        known: Dict[str, Optional[Found]] = {}
        by_real: Dict[str, Found] = {os.path.realpath(root.path): Found(root.path, "path")}
        if root.info.soname:
            known[root.info.soname] = Found(root.path, "path")
        queue: Deque[LoadedObject] = deque([root])
        while queue:
            obj = queue.popleft()
            for name in obj.info.needed:
                if name in known:
                    continue
                found = self.find(name, obj)
                requests.append((name, found))
                known[name] = found
                if found is None:
                    continue
                real = os.path.realpath(found.path)
                if real in by_real:
                    known[name] = by_real[real]
                    continue
                by_real[real] = found
                info = self.elf(found.path)
                if info is None:
                    continue
                if info.soname:
                    known.setdefault(info.soname, found)
                if len(by_real) < _MAX_CLOSURE:
                    origin = os.path.dirname(found.path)
                    queue.append(LoadedObject(found.path, info,
                                              (own_rpath(info, origin),) + obj.chain))
        return requests
