"""Derivation rules: facts that follow from other facts and the matrix, one pure function each.

Each rule reads only the matrix and its inputs and returns :class:`Derived` values that say
where they came from, so a verdict can name its chain
(``library.cublas.version in [12.6.0.22, 13) (derived from torch 2.14.1+cu126 via CUDA 12.6)``).

* :func:`find_build`: an installed torch version (``2.1.0+cu121``, ``2.5.1``) -> the matrix
  build it is;
* :func:`build_libraries_of`: a build -> its pinned (or bundled) library versions;
* :func:`line_library_bounds`: a CUDA line -> the range of each component library, from the
  components of that line's releases in cuda.toml (never from the tag's text: a cu118 build
  carries cuBLAS 11.11, a CUDA 13.1 toolkit cuBLAS 13.2);
* :func:`wheel_libraries`: installed ``nvidia-*`` wheels -> the versions of their libraries;
* :func:`driver_facts`: a driver version -> its branch and the newest CUDA line it runs.

Precedence (:data:`PRECEDENCE`, :func:`library_knowledge`): observed > derived from observed
(an installed wheel) > derived from a build's pins > bound from a CUDA line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Dict, Mapping, Optional, Tuple

from packaging.utils import canonicalize_name

from envlock.families import library_of_package
from envlock.knowledge.values import Bound
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import TorchVariant
from envlock.matrix.rules import build_libraries
from envlock.versions import driver_branch, local_label, parse_version

__all__ = ["Derived", "PRECEDENCE", "find_build", "build_libraries_of", "line_library_bounds",
           "wheel_libraries", "driver_facts", "library_knowledge"]

#: Where a value came from, strongest first.
PRECEDENCE: Tuple[str, ...] = ("observed", "from-observed", "build-pins", "line-bound")

#: cuda.toml component -> the library fact names it gives (cuBLASLt ships in the cuBLAS wheel)
_COMPONENT_LIBS: Mapping[str, Tuple[str, ...]] = {
    "cublas": ("cublas", "cublasLt"), "cudart": ("cudart",), "nvjitlink": ("nvjitlink",),
}


@dataclass(frozen=True)
class Derived:
    """A derived value (exact text or a :class:`Bound`), how it was reached, and its rank
    in :data:`PRECEDENCE`."""

    value: Any
    origin: str
    kind: str

    def beats(self, other: "Derived") -> bool:
        return PRECEDENCE.index(self.kind) < PRECEDENCE.index(other.kind)


def find_build(matrix: Matrix, torch_version: str,
               platform: Optional[str] = None) -> Optional[TorchVariant]:
    """The matrix build an installed torch version is: ``X+cuNNN``/``X+cpu`` is the PyTorch
    index build of that tag, a plain ``X`` the PyPI build. None when the matrix lacks it or
    the platform is not known and the builds of the platforms differ."""
    return _find_build(matrix, torch_version, platform)


@lru_cache(maxsize=256)
def _find_build(matrix: Matrix, torch_version: str,
                platform: Optional[str]) -> Optional[TorchVariant]:
    release = torch_version.split("+")[0]
    tag = local_label(torch_version)
    try:
        pool = matrix.variants_for(release=release)
    except Exception:  # noqa: BLE001 - a release the matrix does not know
        return None
    found = [v for v in pool if (v.tag == tag and not v.on_pypi) if tag] if tag else \
        [v for v in pool if v.on_pypi]
    if platform is not None:
        found = [v for v in found if v.platform == platform]
    elif len({(v.cuda_release, v.pins, tuple(sorted(v.libraries.items())))
              for v in found}) > 1:
        found = [v for v in found if v.platform == "linux_x86_64"] or found[:0]
    return found[0] if found else None


def build_libraries_of(matrix: Matrix, variant: TorchVariant) -> Dict[str, Derived]:
    """library -> version a build pins or bundles (the matrix's own derivation)."""
    libs = build_libraries(matrix, variant)
    out = {}
    for k, v in libs.versions.items():
        src = libs.source.get(k, "")
        how = "pinned" if ("row" in src or "PyPI" in src) else src
        out[k] = Derived(v, f"derived from torch {variant.version_string}: {how}",
                         "build-pins")
    return out


@lru_cache(maxsize=64)
def _line_bounds(matrix: Matrix, line: str) -> Tuple[Tuple[str, Bound], ...]:
    lows: Dict[str, Any] = {}
    highs: Dict[str, Any] = {}
    for rel in matrix.line_releases(line):
        for comp, version in rel.components.items():
            v = parse_version(version)
            if v is None or comp not in _COMPONENT_LIBS:
                continue
            if comp not in lows or v < lows[comp]:
                lows[comp] = v
            if comp not in highs or v > highs[comp]:
                highs[comp] = v
    out = []
    for comp, lo in lows.items():
        bound = Bound(str(lo), str(highs[comp].major + 1))
        out.extend((lib, bound) for lib in _COMPONENT_LIBS[comp])
    return tuple(out)


def line_library_bounds(matrix: Matrix, line: str) -> Dict[str, Bound]:
    """library -> the range its version lies in for a build of CUDA line ``line``: from the
    line's oldest release's component up to the next major of its newest (one soname).
    Empty when cuda.toml lists no components for the line."""
    return dict(_line_bounds(matrix, line))


def wheel_libraries(packages: Mapping[str, str]) -> Dict[str, Derived]:
    """library -> version of each installed ``nvidia-*`` wheel that carries one."""
    out: Dict[str, Derived] = {}
    for name, version in packages.items():
        lib = library_of_package(name)
        if lib is None or not version:
            continue
        base = str(version).split("+")[0]
        origin = f"from the installed wheel {canonicalize_name(name)}=={base}"
        out.setdefault(lib, Derived(base, origin, "from-observed"))
        if lib == "cublas":
            out.setdefault("cublasLt", Derived(base, origin, "from-observed"))
    return out


def driver_facts(matrix: Matrix, driver: str) -> Dict[str, Derived]:
    """``driver.branch`` and ``driver.cuda`` (the newest CUDA line it runs in full) of a
    driver version; a branch alone (``535``) gives no CUDA line."""
    return dict(_driver_facts(matrix, driver))


@lru_cache(maxsize=256)
def _driver_facts(matrix: Matrix, driver: str) -> Tuple[Tuple[str, Derived], ...]:
    out = [("driver.branch", Derived(driver_branch(driver), f"from driver {driver}",
                                     "from-observed"))]
    if "." in driver:
        line = matrix.driver_full_cuda(driver)
        if line is not None:
            out.append(("driver.cuda", Derived(line, f"the newest CUDA line driver {driver} "
                                                     f"runs (cuda.toml)", "from-observed")))
    return tuple(out)


def library_knowledge(matrix: Matrix, variant: Optional[TorchVariant],
                      packages: Optional[Mapping[str, str]] = None,
                      cuda_line: Optional[str] = None) -> Dict[str, Derived]:
    """Everything derivable about the libraries, strongest derivation per library: installed
    wheels (``packages``), then the build's pins, then the bound of its CUDA line (or of
    ``cuda_line`` when the build is not in the matrix)."""
    out: Dict[str, Derived] = dict(wheel_libraries(packages or {}))
    if variant is not None:
        for k, d in build_libraries_of(matrix, variant).items():
            out.setdefault(k, d)
        cuda_line = variant.cuda
    if cuda_line:
        who = f"torch {variant.version_string}" if variant is not None else "the torch build"
        for k, b in line_library_bounds(matrix, cuda_line).items():
            out.setdefault(k, Derived(b, f"derived from {who} via CUDA {cuda_line}",
                                      "line-bound"))
    return out
