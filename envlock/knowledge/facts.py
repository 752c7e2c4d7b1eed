"""Facts: the flat view of a machine that advisory conditions are written against.

A :class:`Facts` answers ``get("driver.version")`` or ``get("library.cublasLt.version")``
with a value, a bound (:class:`~envlock.knowledge.values.Bound`) or :data:`UNKNOWN`, and
``origin(path)`` says how a value that was not observed was reached. It is built either
from a :class:`~envlock.snapshot.Snapshot` (doctor, verify, fleet) or from a resolution plan
(the GPUs, driver and pins a lock would give), so the resolver and the doctor judge the same
conditions the same way, with the same derivations (:mod:`envlock.knowledge.derive`). The
catalogue of fact paths is :data:`envlock.matrix.conditions.FACTS`.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from packaging.utils import canonicalize_name

from envlock.kernels import coverage, parse_capability
from envlock.matrix.conditions import LIBRARY_NAMES
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import Gpu
from envlock.knowledge.derive import (
    Derived,
    driver_facts,
    find_build,
    library_knowledge,
    line_library_bounds,
)
from envlock.knowledge.values import UNKNOWN, Bound
from envlock.versions import V, base_version, driver_branch, parse_version

if TYPE_CHECKING:  # annotations only: a resolve never reads a snapshot
    from envlock.snapshot import GpuInfo, Snapshot

__all__ = ["UNKNOWN", "Facts", "Contradiction", "facts_from_snapshot", "facts_from_plan",
           "cuda_majors_of"]


@dataclass(frozen=True)
class Contradiction:
    """A derived value that an observation contradicts (the build pins cuBLAS 12.6 but the
    process loads 12.1: something shadows it). It is a finding in itself."""

    path: str
    observed: str
    derived: str
    origin: str

    def __str__(self) -> str:
        return (f"{self.path}={self.observed} is loaded, but {self.derived} was expected "
                f"({self.origin}): another copy shadows it")




_SUFFIX_RE = re.compile(r"-cu(\d+)$")


def cuda_majors_of(packages: Mapping[str, str]) -> List[int]:
    """CUDA majors among installed nvidia-* wheels: -cu11 -> 11, -cu12 -> 12, -cu13 or an
    un-suffixed CUDA-13 wheel (nvidia-cublas 13.x) -> 13."""
    majors = set()
    for name, version in packages.items():
        n = canonicalize_name(name)
        if not n.startswith("nvidia-") or n in ("nvidia-ml-py", "nvidia-pyindex"):
            continue
        m = _SUFFIX_RE.search(n)
        if m:
            majors.add(int(m.group(1)))
        elif n.startswith(("nvidia-cublas", "nvidia-cuda-", "nvidia-cufft", "nvidia-curand",
                           "nvidia-cusolver", "nvidia-cusparse", "nvidia-nvjitlink",
                           "nvidia-nvtx", "nvidia-cufile")):
            v = parse_version(version)
            if v is not None and v.major >= 13:
                majors.add(13)
    return sorted(majors)


class Facts:
    """Values by fact path, plus the element collections ``some`` iterates over.

    ``get`` returns a value, ``None`` for a thing known to be absent (a package not in a
    complete package list, an unset environment variable), or :data:`UNKNOWN`. ``packages``
    None means the package list itself is unknown; ``libraries`` None means no library
    probe ran.
    """

    def __init__(self, values: Dict[str, Any], collections: Dict[str, Any],
                 packages: Optional[Mapping[str, str]], libraries: Optional[Dict[str, Any]],
                 env: Optional[Mapping[str, str]], *, packages_complete: bool = True,
                 unknown_prefixes: Tuple[str, ...] = (),
                 origins: Optional[Mapping[str, str]] = None,
                 contradictions: Tuple[Contradiction, ...] = ()) -> None:
        self._values = values
        #: fact path -> how a value that was not observed was reached
        self._origins: Dict[str, str] = dict(origins or {})
        #: derivations an observation contradicts
        self.contradictions = contradictions
        #: whether a package missing from ``packages`` is known absent (False: unknown)
        self._packages_complete = packages_complete
        #: names that stay unknown when missing, even from a complete list
        self._unknown_prefixes = unknown_prefixes
        self._collections = collections
        self._packages = None if packages is None else {canonicalize_name(k): v
                                                         for k, v in packages.items()}
        self._libraries = libraries
        self._env = env

    def get(self, path: str) -> Any:
        if path in self._values:
            return self._values[path]
        head, _, rest = path.partition(".")
        if head == "package":
            if self._packages is None:
                return UNKNOWN
            pkg = canonicalize_name(rest)
            if pkg in self._packages:
                return self._packages[pkg]
            # a complete package list that lacks it: known absent
            if self._packages_complete and not pkg.startswith(self._unknown_prefixes):
                return None
            return UNKNOWN
        if head == "env":
            if self._env is None:
                return UNKNOWN
            return self._env.get(rest)  # the probe records every relevant variable: None = unset
        if head == "library":
            name, _, attr = rest.partition(".")
            if self._libraries is None:
                return UNKNOWN
            info = self._libraries.get(name)
            if info is None:
                return UNKNOWN
            return info.get(attr, UNKNOWN)
        return UNKNOWN

    def elements(self, collection: str) -> Any:
        return self._collections.get(collection, UNKNOWN)

    def for_another_process(self) -> "Facts":
        """The same machine seen from another process on it: environment variables are
        per process, so they become unknown (a job's CUDA_VISIBLE_DEVICES or NCCL_*
        settings are not those of the shell that runs ``envlock doctor --log`` after it
        crashed); everything else stays."""
        other = copy.copy(self)
        other._env = None
        other._values = {k: v for k, v in self._values.items() if not k.startswith("env.")}
        other._origins = {k: v for k, v in self._origins.items() if not k.startswith("env.")}
        return other

    def origin(self, path: str) -> Optional[str]:
        """How the value of ``path`` was reached when it was not observed (None: observed,
        or unknown)."""
        return self._origins.get(path)

    def origins(self) -> Dict[str, str]:
        """Every derived fact and its origin (``--verbose``, JSON, the lock's decision)."""
        return dict(self._origins)

    def as_dict(self) -> Dict[str, Any]:
        """A debugging view (``envlock doctor --facts``)."""
        out = {k: ([x for x in v if x is not UNKNOWN] if isinstance(v, list) else v)
               for k, v in self._values.items() if v is not UNKNOWN}
        if self._packages:
            out.update({f"package.{k}": v for k, v in self._packages.items()})
        if self._libraries:
            for name, info in self._libraries.items():
                out.update({f"library.{name}.{a}": v for a, v in info.items()
                            if v is not UNKNOWN})
        if self._env:
            out.update({f"env.{k}": v for k, v in self._env.items()})
        return {k: (str(v) if isinstance(v, Bound) else v) for k, v in out.items()}


def _gpu_element(matrix: Optional[Matrix], g: GpuInfo) -> Dict[str, Any]:
    model: Optional[Gpu] = None
    if matrix is not None and g.name:
        model = matrix.find_gpu(g.name, g.memory_mib)
    cc = g.compute_capability or (model.compute_capability if model else None)
    return {
        "name": g.name if g.name else UNKNOWN,
        "model": model.id if model else UNKNOWN,
        "arch": model.arch if model else UNKNOWN,
        "segment": model.segment if model else UNKNOWN,
        "form_factor": (model.form_factor or UNKNOWN) if model else UNKNOWN,
        "cc": cc if cc else UNKNOWN,
        "memory_mib": g.memory_mib if g.memory_mib is not None else UNKNOWN,
        "mig": g.mig if g.mig is not None else UNKNOWN,
        "lost": bool(g.lost),
    }


def _gpu_facts(values: Dict[str, Any], elements: Sequence[Dict[str, Any]],
               arch_list: Optional[Sequence[str]]) -> None:
    values["gpu.count"] = len(elements)
    for key in ("name", "model", "arch", "segment", "form_factor", "cc", "mig", "lost"):
        # UNKNOWN stays in the list: "some GPU is an H20" is unknown, not false, while one
        # GPU's model is unknown (the evaluator reads list items three-valued).
        values[f"gpu.{key}"] = [e[key] for e in elements]
    values["gpu.distinct_models"] = len({e["model"] if e["model"] is not UNKNOWN else e["name"]
                                         for e in elements})
    values["gpu.distinct_cc"] = len({e["cc"] for e in elements if e["cc"] is not UNKNOWN})
    if arch_list is None:
        values["gpu.uncovered"] = UNKNOWN
    else:
        uncovered = []
        for e in elements:
            cc = e["cc"]
            if cc is UNKNOWN:
                continue
            try:
                parse_capability(cc)
            except ValueError:
                continue
            try:
                ok = coverage(arch_list, cc).ok
            except ValueError:
                ok = True
            if not ok:
                uncovered.append(e["name"] if e["name"] is not UNKNOWN else cc)
        values["gpu.uncovered"] = uncovered


def _library_facts(libs: Iterable[Any]) -> Dict[str, Dict[str, Any]]:
    by_name: Dict[str, List[Any]] = {}
    for lib in libs:
        by_name.setdefault(lib.name, []).append(lib)
    out: Dict[str, Dict[str, Any]] = {}
    for name, copies in by_name.items():
        sel = next((c for c in copies if c.selected), None)
        out[name] = {
            "version": (sel.version if sel and sel.version else UNKNOWN),
            "copies": len(copies),
            "versions": len({c.version for c in copies if c.version}),
            "system": UNKNOWN if sel is None else sel.owner is None,
        }
    return out


def _torch_too_old(matrix: Optional[Matrix], driver: Any, torch_cuda: Any) -> Any:
    if matrix is None or driver is UNKNOWN or torch_cuda is UNKNOWN:
        return UNKNOWN
    floor = matrix.compat_floor(str(torch_cuda))
    if floor is None:
        return UNKNOWN
    return V(str(driver)) < V(floor)


def facts_from_snapshot(snapshot: Snapshot, matrix: Optional[Matrix]) -> Facts:
    values: Dict[str, Any] = {}
    h = snapshot.host
    for key in ("os", "distro", "kernel", "machine", "glibc", "container", "virtualization",
                "iommu", "shm_bytes"):
        v = getattr(h, key)
        values[f"host.{key}"] = UNKNOWN if v in (None, "") else v
    values["python.version"] = snapshot.python.version or UNKNOWN

    d = snapshot.driver
    if d is None:
        for key in ("present", "version", "branch", "cuda", "fabric_manager", "error"):
            values[f"driver.{key}"] = UNKNOWN
    else:
        values["driver.present"] = bool(d.version)
        values["driver.version"] = d.version or UNKNOWN
        values["driver.branch"] = driver_branch(d.version) if d.version else UNKNOWN
        values["driver.cuda"] = d.cuda or UNKNOWN
        values["driver.fabric_manager"] = d.fabric_manager or UNKNOWN
        # a driver whose version was read answered: no error is a known "none" then
        values["driver.error"] = d.error or (None if d.version else UNKNOWN)

    torch = snapshot.torch
    tversion = torch.version if torch and torch.version else snapshot.packages.get("torch")
    arch_list = list(torch.arch_list) if torch and torch.arch_list is not None else None
    origins: Dict[str, str] = {}
    # the build an installed torch is (a stated package list, a wheel whose files were read)
    build = (find_build(matrix, tversion, _platform_of(h.machine))
             if matrix is not None and tversion else None)
    if (arch_list is None and build is not None and build.cuda and build.sass is not None
            and (torch is None or torch.cuda is not None)):
        arch_list = list(build.targets)
        origins["torch.arch_list"] = f"the arch list of torch {build.version_string} (matrix)"
        origins["gpu.uncovered"] = f"derived from {origins['torch.arch_list']}"
    hardware_known = d is not None or bool(snapshot.gpus)
    gpu_elems = [_gpu_element(matrix, g) for g in snapshot.visible_gpus()]
    if hardware_known:
        _gpu_facts(values, gpu_elems, arch_list)
        if tversion is None:
            values["gpu.uncovered"] = UNKNOWN
        elif torch is not None and torch.cuda is None and arch_list is None:
            values["gpu.uncovered"] = [e["name"] for e in gpu_elems]  # CPU-only torch
    else:
        for key in FACTS_GPU:
            values[key] = UNKNOWN
        gpu_elems = UNKNOWN

    visible = {g.index for g in snapshot.visible_gpus()}
    by_index = {g.index: g for g in snapshot.gpus}
    link_elems = []
    for link in snapshot.links:
        if link.a not in visible or link.b not in visible:
            continue
        ga, gb = by_index.get(link.a), by_index.get(link.b)
        ma = matrix.find_gpu(ga.name, ga.memory_mib) if matrix and ga and ga.name else None
        mb = matrix.find_gpu(gb.name, gb.memory_mib) if matrix and gb and gb.name else None
        link_elems.append({"kind": link.kind or UNKNOWN,
                           "p2p": UNKNOWN if link.p2p is None else link.p2p,
                           "a_model": ma.id if ma else UNKNOWN,
                           "b_model": mb.id if mb else UNKNOWN})
    links_known = hardware_known and snapshot.recorded("links")  # stated: no links probed
    if links_known:
        values["link.count"] = len(link_elems)
        values["link.kind"] = [e["kind"] for e in link_elems]
        values["link.p2p"] = [e["p2p"] for e in link_elems]
    else:
        values["link.count"] = values["link.kind"] = values["link.p2p"] = UNKNOWN

    # An empty package list means the snapshot did not list packages (a live Python always
    # has some): unknown, not "no CUDA wheels installed".
    pk: Optional[Mapping[str, str]] = snapshot.packages or None
    if pk is None:
        values["packages.cuda_majors"] = values["packages.cuda_major_count"] = UNKNOWN
    else:
        majors = cuda_majors_of(pk)
        values["packages.cuda_majors"] = majors
        values["packages.cuda_major_count"] = len(majors)

    tcuda: Any = UNKNOWN
    if tversion:
        values["torch.version"] = tversion
        tcuda = (torch.cuda if torch and torch.cuda else None) or _cuda_from_local(tversion)
        if tcuda is None and torch is not None and torch.source == "import":
            tcuda = None  # torch says: no CUDA
        elif tcuda is None and torch is None and build is not None and build.cuda:
            tcuda = build.cuda  # a stated plain version: the PyPI build's CUDA line
            origins["torch.cuda"] = f"the CUDA line of torch {build.version_string} (matrix)"
        values["torch.cuda"] = tcuda if tcuda else UNKNOWN
        values["torch.cuda_major"] = int(str(tcuda).split(".")[0]) if tcuda else UNKNOWN
        cpu_only = tversion.endswith("+cpu") or (torch is not None and torch.cuda is None
                                                 and torch.source in ("files", "import")
                                                 and not _cuda_from_local(tversion))
        values["torch.cpu_only"] = cpu_only
        values["torch.arch_list"] = arch_list if arch_list is not None else UNKNOWN
        values["torch.cudnn"] = (torch.cudnn if torch and torch.cudnn else UNKNOWN)
        values["torch.nccl"] = (torch.nccl if torch and torch.nccl else UNKNOWN)
        tcuda = values["torch.cuda"]
    else:
        for key in ("version", "cuda", "cuda_major", "cpu_only", "arch_list", "cudnn", "nccl"):
            values[f"torch.{key}"] = UNKNOWN
    values["torch.driver_too_old"] = _torch_too_old(matrix, values["driver.version"], tcuda)

    if d is not None and d.version and matrix is not None:
        for key, dv in driver_facts(matrix, d.version).items():
            if values.get(key, UNKNOWN) is UNKNOWN:  # observed wins
                values[key] = dv.value
                origins[key] = dv.origin

    # Library records are observations (the probe read the loaded copies). What the probe
    # did not see is derived: from the installed nvidia-* wheels, else the torch build's
    # pins, else the bound of its CUDA line. No derivation leaves the library unknown.
    libs = _library_facts(snapshot.libraries) if snapshot.libraries else None
    contradictions: List[Contradiction] = []
    if matrix is not None and tversion:
        line = tcuda if isinstance(tcuda, str) else None
        derived = library_knowledge(matrix, build, pk, cuda_line=line)
        libs = dict(libs or {})
        for name, dv in derived.items():
            if name not in LIBRARY_NAMES:  # not a fact the catalogue has
                continue
            have = libs.get(name)
            seen = have.get("version", UNKNOWN) if have else UNKNOWN
            if seen is UNKNOWN:
                entry = dict(have) if have else {"copies": UNKNOWN, "versions": UNKNOWN,
                                                 "system": UNKNOWN}
                entry["version"] = dv.value
                libs[name] = entry
                origins[f"library.{name}.version"] = dv.origin
            elif _contradicts(str(seen), dv):
                contradictions.append(Contradiction(f"library.{name}.version", str(seen),
                                                    str(dv.value), dv.origin))
        libs = libs or None
    lib_elems = [{"name": lib.name, "version": lib.version or UNKNOWN,
                  "owner": lib.owner or UNKNOWN, "selected": lib.selected,
                  "system": lib.owner is None} for lib in snapshot.libraries]
    collections = {"gpu": gpu_elems, "link": link_elems if links_known else UNKNOWN,
                   "library": lib_elems if snapshot.libraries else UNKNOWN}
    return Facts(values, collections, pk, libs, snapshot.env, origins=origins,
                 contradictions=tuple(contradictions))


def _platform_of(machine: Optional[str]) -> Optional[str]:
    return {"x86_64": "linux_x86_64", "aarch64": "linux_aarch64"}.get(machine or "")


def _contradicts(observed: str, derived: Derived) -> bool:
    """An exact derivation of another major.minor than what is loaded (a bound that excludes
    it). Only a wheel's or a pin's exact value, or a line's bound, can be contradicted."""
    if isinstance(derived.value, Bound):
        return not derived.value.contains(observed) and parse_version(observed) is not None
    a, b = parse_version(observed), parse_version(str(derived.value))
    if a is None or b is None:
        return False
    return a.release[:2] != b.release[:2]


FACTS_GPU = ("gpu.count", "gpu.name", "gpu.model", "gpu.arch", "gpu.segment",
             "gpu.form_factor", "gpu.cc", "gpu.mig", "gpu.lost", "gpu.distinct_models",
             "gpu.distinct_cc", "gpu.uncovered")


def _cuda_from_local(version: str) -> Optional[str]:
    from envlock.versions import cuda_for_tag, local_label

    label = local_label(version)
    return cuda_for_tag(label) if label else None


def facts_from_plan(matrix: Matrix, *, gpus: Sequence[Gpu], driver: Optional[str],
                    torch_version: Optional[str], torch_cuda: Optional[str],
                    arch_list: Optional[Sequence[str]], packages: Mapping[str, str],
                    libraries: Mapping[str, str], python: Optional[str] = None,
                    platform: Optional[str] = None, glibc: Optional[str] = None,
                    env: Optional[Mapping[str, str]] = None,
                    packages_complete: bool = False, libraries_complete: bool = True,
                    unknown_prefixes: Tuple[str, ...] = (),
                    separate_machines: bool = False) -> Facts:
    """Facts of the environment a lock *would* produce (for the resolver).

    Known: the target's GPUs, Python, platform (``host.machine``) and glibc, the planned
    pins and the libraries the matrix derives for the build. A library missing from
    ``libraries`` is unknown. A package missing from ``packages`` is known absent only when
    ``packages_complete`` (the build's pins are known and nothing else is requested);
    otherwise unknown. Links and environment variables the lock does not set are unknown
    (``env`` None). ``unknown_prefixes``: package names that stay unknown even in a
    complete list (the CUDA wheels of a build whose pins the matrix does not know; such a
    build's CUDA wheels, if any, are of its own CUDA major). Without a driver,
    ``torch.driver_too_old`` is False: the lock states
    the driver minimum the build needs, and verify holds the machine to it.
    ``separate_machines``: the GPUs are a fleet's, one model per machine, so no machine
    mixes them (``gpu.distinct_models`` and ``gpu.distinct_cc`` are 1).
    """
    values: Dict[str, Any] = {f"host.{k}": UNKNOWN for k in (
        "os", "distro", "kernel", "machine", "glibc", "container", "virtualization", "iommu",
        "shm_bytes")}
    if platform is not None:
        from envlock.platforms import PLATFORM_INFO

        info = PLATFORM_INFO.get(platform)
        if info is not None:
            values["host.machine"] = info[2]
            if info[0] == "Linux" and glibc:
                values["host.glibc"] = glibc
    values["python.version"] = python or UNKNOWN
    values["driver.present"] = True if driver else UNKNOWN
    values["driver.version"] = driver or UNKNOWN
    values["driver.branch"] = driver_branch(driver) if driver else UNKNOWN
    values["driver.cuda"] = UNKNOWN
    values["driver.fabric_manager"] = UNKNOWN
    values["driver.error"] = UNKNOWN
    elems = []
    for g in gpus:
        elems.append({"name": g.nvml_names[0] if g.nvml_names else g.name, "model": g.id,
                      "arch": g.arch, "segment": g.segment,
                      "form_factor": g.form_factor or UNKNOWN, "cc": g.compute_capability,
                      "memory_mib": UNKNOWN, "mig": UNKNOWN, "lost": False})
    _gpu_facts(values, elems, arch_list)
    if separate_machines and elems:
        # a fleet (--together, a GPU family): each machine has one of these GPUs, not all
        values["gpu.distinct_models"] = values["gpu.distinct_cc"] = 1
    values["link.count"] = values["link.kind"] = values["link.p2p"] = UNKNOWN
    majors = cuda_majors_of(packages)
    if unknown_prefixes and torch_cuda:
        majors = sorted(set(majors) | {int(torch_cuda.split(".")[0])})
    if packages_complete or len(majors) >= 2:
        values["packages.cuda_majors"] = majors
        values["packages.cuda_major_count"] = len(majors)
    else:
        values["packages.cuda_majors"] = values["packages.cuda_major_count"] = UNKNOWN
    values["torch.version"] = torch_version or UNKNOWN
    values["torch.cuda"] = torch_cuda or UNKNOWN
    values["torch.cuda_major"] = int(torch_cuda.split(".")[0]) if torch_cuda else UNKNOWN
    values["torch.cpu_only"] = (torch_cuda is None) if torch_version else UNKNOWN
    values["torch.arch_list"] = list(arch_list) if arch_list is not None else UNKNOWN
    values["torch.cudnn"] = libraries.get("cudnn", UNKNOWN)
    values["torch.nccl"] = libraries.get("nccl", UNKNOWN)
    values["torch.driver_too_old"] = (_torch_too_old(matrix, driver, values["torch.cuda"])
                                      if driver else (False if torch_version else UNKNOWN))
    origins: Dict[str, str] = {}
    if driver:
        for key, dv in driver_facts(matrix, driver).items():
            if values.get(key, UNKNOWN) is UNKNOWN:
                values[key] = dv.value
                origins[key] = dv.origin
    libs: Dict[str, Dict[str, Any]] = {}
    for name, version in libraries.items():
        libs[name] = {"version": version, "copies": 1, "versions": 1, "system": False}
    if "cublas" in libs and "cublasLt" not in libs:
        libs["cublasLt"] = dict(libs["cublas"])
    if torch_cuda:
        # in a plan the build's CUDA line is exact: what its pins leave open is bounded by
        # the components of that line's releases (cuda.toml)
        for name, bound in line_library_bounds(matrix, torch_cuda).items():
            if name not in libs:
                libs[name] = {"version": bound, "copies": 1, "versions": 1, "system": False}
                origins[f"library.{name}.version"] = (f"derived from torch {torch_version} "
                                                      f"via CUDA {torch_cuda}")
    lib_elems = [{"name": n, "version": i["version"], "owner": UNKNOWN, "selected": True,
                  "system": False} for n, i in libs.items()]
    pk = {str(canonicalize_name(k)): base_version(v) if k != "torch" else v
          for k, v in packages.items()}
    collections = {"gpu": elems, "link": UNKNOWN,
                   "library": lib_elems if libraries_complete else UNKNOWN}
    return Facts(values, collections, pk, libs, env, origins=origins,
                 packages_complete=packages_complete, unknown_prefixes=unknown_prefixes)
