"""A chosen torch build's closure: the finder that reads it, reading it ahead of the torch
walk, resolving it into locked packages, and the GPU core a lock holds when offline.

:mod:`envlock.resolve` chooses the build (hardware, requirements, reachable indexes) and
assembles the lock target; this module turns a build into packages. Split from it by
concept: everything here works on one :class:`~envlock.matrix.model.TorchVariant` and the
index it comes from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, Tuple

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name

from envlock.index.config import IndexConfig, redact
from envlock.lock.model import AppliedAdvisory, LockedFile, LockedPackage
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import TorchVariant
from envlock.platforms import Target
from envlock.resolve.hardware import choose_variant
from envlock.resolve.sources import SourcePolicy
from envlock.resolve.target import ResolveRequest, TargetSpec
from envlock.wheelvariants import VariantHost, canonical

if TYPE_CHECKING:
    from envlock.index.client import IndexClient
    from envlock.resolve.closure import Finder, Req

__all__ = ["torch_index_url", "wanted_versions", "explicit_prereleases", "read_ahead",
           "closure_finder", "start_build", "closure_of", "constraints_kept", "override_origins",
           "parse_all", "overrides_req", "gpu_core"]

_PYTORCH_DEFAULT = "https://download.pytorch.org/whl"


def torch_index_url(variant: TorchVariant, config: IndexConfig, pytorch_base: str) -> str:
    """The simple index a build comes from: the configured default index for a PyPI build
    (so mirrors work), the PyTorch index (or its mirror base) otherwise."""
    if variant.on_pypi:
        return config.index_url
    base = pytorch_base.rstrip("/")
    if variant.index.startswith(_PYTORCH_DEFAULT) and base != _PYTORCH_DEFAULT:
        return base + variant.index[len(_PYTORCH_DEFAULT):]
    return variant.index


def wanted_versions(matrix: Matrix, variant: TorchVariant,
                     requirements: Sequence[Requirement]) -> Dict[str, Any]:
    """Companion versions the closure may use: the matrix pairing for the chosen torch,
    applied whether torchvision/torchaudio/triton are requested or pulled in by a
    dependency."""
    from envlock.resolve.closure import companion_versions

    return companion_versions(matrix.companions, variant.release)


def explicit_prereleases(requirements: Sequence[Requirement]) -> List[str]:
    from envlock.resolve.closure import opts_into_prereleases

    return [r.name for r in requirements if opts_into_prereleases(r.specifier)]


def read_ahead(request: ResolveRequest, matrix: Matrix, config: IndexConfig,
                      client: "IndexClient", spec: TargetSpec, target: Target) -> None:
    """Start on the likely build's own closure while the walk reads the requirements'.

    The build is chosen after the walk (the requirements may constrain torch), and its
    closure was read only then: torch's page and metadata, then the pages of its pins,
    one round trip after another (measured: 350 ms of a 2.2 s cold resolve of torch +
    transformers + accelerate + datasets, after everything else). The build the hardware
    and ``--torch`` alone pick is the likely one. When ``--torch`` pins one release, its
    torch page and metadata and its pins' are fetched now, in the background; otherwise
    only the pages of the projects the build pins (the same for any release: nvidia-*,
    triton, ...), so a wrong guess costs no metadata. Best effort: nothing is raised;
    the closure reads whatever it needs, from memory where this fetched it."""
    from envlock.index.workers import AHEAD

    try:
        choice = choose_variant(matrix, spec, request.torch, request.cuda,
                                tuple(str(r) for r in request.requirements),
                                prefer=request.prefer)
        v = choice.variant
        tindex = torch_index_url(v, config, request.pytorch_index)
        overrides = {str(canonicalize_name(r.name)): r for r in choice.overrides}
        finder = closure_finder(request, matrix, client, config, target, v, tindex, None)
        finder.ahead = True
        if pins_one_release(request):
            start_build(finder, matrix, target, v, overrides, [_torch_root(v)])
        else:
            for hint in _hints(matrix, target, v):
                indexes, _ = finder.policy.indexes_for(hint.name)
                if indexes:
                    client.prefetch_page(indexes[0], hint.name, AHEAD)
    except Exception:  # noqa: BLE001 - a guess: the real choice and closure report
        pass


def pins_one_release(request: ResolveRequest) -> bool:
    specs = list(request.torch)
    return len(specs) == 1 and specs[0].operator in ("==", "===") and "*" not in specs[0].version


def build_hints(matrix: Matrix, v: TorchVariant) -> List[str]:
    """What the matrix knows the build requires: its pins, and on PyPI its Requires-Dist."""
    build = matrix.torch_releases[v.release].builds.get(v.platform)
    return list(v.pins) + (list(build.requires) if build is not None and v.on_pypi else [])


def closure_finder(request: ResolveRequest, matrix: Matrix, client: "IndexClient",
                   config: IndexConfig, target: Target, v: TorchVariant, tindex: str,
                   host: Optional[VariantHost]) -> "Finder":
    from envlock.resolve.closure import Finder

    return Finder(client, SourcePolicy(config, tindex), target,
                  wanted_versions(matrix, v, request.requirements),
                  allowed_for=v.version_string, prerelease=request.prerelease,
                  explicit_prereleases=explicit_prereleases(request.requirements),
                  variant_host=host)


def _torch_root(v: TorchVariant) -> "Req":
    from envlock.resolve.closure import Req

    return Req("torch", SpecifierSet(f"=={v.version_string}"), parent="hardware choice")


def _hints(matrix: Matrix, target: Target, v: TorchVariant) -> List["Req"]:
    from envlock.resolve.closure import reqs_from

    return reqs_from(parse_all(build_hints(matrix, v)), target.markers, parent="matrix hint")


def start_build(finder: "Finder", matrix: Matrix, target: Target, v: TorchVariant,
                overrides: Dict[str, Requirement], roots: List["Req"]) -> None:
    """Start fetching a build's closure: torch's page and metadata first (the critical
    path, often a slow range read), then, in parallel, what the matrix already knows
    torch requires (its pins and Requires-Dist), each as an advisory override makes it.
    Guesses stay inside ``roots`` (see ``Finder.prefetch``); ``roots[0]`` is torch."""
    finder.add_roots(roots)
    finder.prefetch(roots[0])
    for hint in _hints(matrix, target, v):
        finder.prefetch(overrides_req(hint, overrides))


def closure_of(request: ResolveRequest, matrix: Matrix, client: "IndexClient",
               config: IndexConfig, target: Target, v: TorchVariant, tindex: str,
               overrides: Dict[str, Requirement],
               on_event: Optional[Callable[[str], None]],
               why: Optional[Dict[str, str]] = None,
               walked: Optional["Finder"] = None,
               host: Optional[VariantHost] = None,
               notes: Optional[List[str]] = None) -> Tuple[List[LockedPackage],
                                                           Dict[str, str], set]:
    """The closure's packages, their versions, and the packages whose requirement from the
    torch build an advisory replaced (the others' advisory requirements were constraints).
    PEP 825 variant wheels are judged against ``host``; the decision lines saying which
    variant was locked, and why, are appended to ``notes``."""
    from envlock.resolve.closure import apply_overrides_to_direct, reqs_from, resolve_closure

    finder = closure_finder(request, matrix, client, config, target, v, tindex, host)
    if walked is not None:
        finder.adopt(walked)
    reqs = [_torch_root(v)]
    reqs += apply_overrides_to_direct(reqs_from(request.requirements, target.markers),
                                      overrides, why or {})
    start_build(finder, matrix, target, v, overrides, reqs)
    constraints: Dict[str, SpecifierSet] = {}
    for c in reqs_from(request.constraints, target.markers, parent="constraint"):
        constraints[c.name] = constraints.get(c.name, SpecifierSet()) & c.specifier
    resolved = resolve_closure(finder, reqs, overrides, why=why, constraints=constraints)
    direct = {r.name for r in reqs}
    packages: List[LockedPackage] = []
    versions: Dict[str, str] = {}
    for name, cand in sorted(resolved.packages.items()):
        files = []
        for d in cand.dists:
            files.append(LockedFile(name=d.filename, url=redact(d.url),
                                    sha256=client.sha256(d)))
        key = (name, str(cand.version))
        vdoc = finder.variant_docs.get(key) if cand.best.variant else None
        packages.append(LockedPackage(name=name, version=str(cand.version),
                                      index=redact(cand.index), files=tuple(files),
                                      direct=name in direct,
                                      variants_json=canonical(vdoc) if vdoc else None))
        if notes is not None and key in finder.variant_notes:
            notes.append(finder.variant_notes[key])
        versions[name] = str(cand.version)
    if on_event:
        on_event(f"resolved {len(packages)} package{'' if len(packages) == 1 else 's'}")
    return packages, versions, set(resolved.replaced)


def constraints_kept(advisories: Sequence[AppliedAdvisory],
                      replaced: set) -> List[AppliedAdvisory]:
    """An ``override`` advisory that replaced none of the torch build's pins took part in
    the resolution as a constraint: it is recorded as ``constraint``, so that exports do
    not warn of a contradicted torch pin that does not exist (torch 2.2.2 pins no numpy)."""
    out = []
    for a in advisories:
        if a.action in ("override", "constraint") and a.override:
            names = {str(canonicalize_name(Requirement(t).name)) for t in a.override}
            a = AppliedAdvisory(a.id, "override" if names & replaced else "constraint",
                                a.summary, a.override, a.unknown)
        out.append(a)
    return out


def override_origins(advisories: Sequence[AppliedAdvisory]) -> Dict[str, str]:
    """package name -> the advisory whose override pins it (for conflict messages)."""
    out: Dict[str, str] = {}
    for a in advisories:
        for text in a.override:
            try:
                out[str(canonicalize_name(Requirement(text).name))] = f"advisory {a.id}"
            except Exception:  # noqa: BLE001
                continue
    return out


def parse_all(texts: Sequence[str]) -> List[Requirement]:
    out = []
    for t in texts:
        try:
            out.append(Requirement(t))
        except Exception:  # noqa: BLE001 - hints only
            continue
    return out


def overrides_req(req: "Req", overrides: Dict[str, Requirement]) -> "Req":
    from envlock.resolve.closure import Req

    ov = overrides.get(req.name)
    return req if ov is None else Req(req.name, ov.specifier, req.extras, req.parent)


def gpu_core(matrix: Matrix, request: ResolveRequest, target: Target, v: TorchVariant,
              tindex: str, overrides: Dict[str, Requirement]) -> Tuple[List[LockedPackage],
                                                                       Dict[str, str]]:
    env = dict(target.markers, extra="")
    out: Dict[str, LockedPackage] = {}
    versions: Dict[str, str] = {}
    out["torch"] = LockedPackage("torch", v.version_string, redact(tindex), direct=True)
    versions["torch"] = v.version_string
    for text in v.pins:
        req = Requirement(text)
        if req.marker is not None and not req.marker.evaluate(env):
            continue
        name = canonicalize_name(req.name)
        if name in overrides:
            req = overrides[name]
        exact = [s.version for s in req.specifier if s.operator == "=="]
        index = redact(tindex)
        if len(exact) == 1 and "*" not in exact[0]:
            out[name] = LockedPackage(name, exact[0], index)
            versions[name] = exact[0]
        else:
            out[name] = LockedPackage(name, "", index, specifier=str(req.specifier))
    rel = matrix.torch_releases[v.release]
    wanted = {canonicalize_name(r.name) for r in request.requirements}
    pair = matrix.companions.get(v.release)
    paired = ((pair.torchvision, pair.torchaudio) if pair is not None
              else (rel.torchvision, rel.torchaudio))
    for pkg, choices in zip(("torchvision", "torchaudio"), paired):
        if pkg in wanted and choices:
            ver = choices[-1] if v.on_pypi else f"{choices[-1]}+{v.tag}"
            out[pkg] = LockedPackage(pkg, ver, redact(tindex), direct=True)
            versions[pkg] = ver
    return list(out.values()), versions
