"""What the user's requirements need of torch, read before the torch build is chosen.

The torch build is chosen by hardware (:mod:`envlock.resolve.hardware`), but the
requirements may pin torch too: ``vllm==0.6.3`` requires ``torch==2.4.0``. Choosing the
newest build first and resolving afterwards fails on such inputs for no good reason. So
the direct requirements' own metadata is read first (their best candidate on the
configured index, the one the resolver will try first), and its Requires-Dist on torch,
torchvision, torchaudio and triton narrows the releases the hardware choice may pick.

torchvision and torchaudio constraints map to torch releases through the matrix's
companion lists; a triton constraint through each build's own triton pin. The narrowing
is expressed as a torch specifier, so :func:`~envlock.resolve.hardware.choose_variant`
and its explanations work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from envlock.errors import OfflineError
from envlock.matrix.matrix import Matrix
from envlock.versions import V

if TYPE_CHECKING:
    from envlock.resolve.closure import Finder

__all__ = ["TorchNeed", "torch_needs", "narrowed_spec"]

_FAMILY = ("torch", "torchvision", "torchaudio", "triton")


@dataclass(frozen=True)
class TorchNeed:
    """One requirement's constraint on a torch-family package."""

    origin: str  # "vllm==0.6.3"
    requirement: Requirement  # torch==2.4.0
    #: the user pinned the requiring package exactly: no older version can relax this
    pinned: bool = False

    def __str__(self) -> str:
        want = f"{self.requirement.name}{self.requirement.specifier}"
        return f"{want} (requested)" if not self.origin else f"{self.origin} requires {want}"


def torch_needs(finder: "Finder", requirements: Sequence[Requirement],
                env: Mapping[str, str]) -> List[TorchNeed]:
    """Torch-family constraints in the direct requirements' best candidates' metadata.

    Best effort where the cache cannot answer offline (the closure reports what is
    missing); every other index failure propagates.
    """
    wanted: List[Tuple[Requirement, str]] = []
    out: List[TorchNeed] = []
    for r in requirements:
        name = str(canonicalize_name(r.name))
        if r.marker is not None and not r.marker.evaluate(dict(env, extra="")):
            continue
        if name in _FAMILY or name == "pytorch-triton":
            if name in _FAMILY and str(r.specifier):
                out.append(TorchNeed("", r, pinned=True))  # e.g. torchvision==0.19.0
            continue
        wanted.append((r, name))
    from envlock.resolve.closure import Req

    for r, name in wanted:
        finder.prefetch(Req(name, r.specifier))
    for r, name in wanted:
        try:
            cands = finder.matching(r.specifier, name)
            if not cands:
                continue
            best = cands[0]
            meta = finder.client.metadata(best.best)
        except OfflineError:
            continue
        extras = {str(canonicalize_name(e)) for e in r.extras}
        for dep in meta.requirements():
            dn = canonicalize_name(dep.name)
            if dn not in _FAMILY:
                continue
            if dep.marker is not None and not any(
                    dep.marker.evaluate(dict(env, extra=e)) for e in (extras or {""})):
                continue
            if not str(dep.specifier):
                continue
            out.append(TorchNeed(f"{best.name}=={best.version}", dep, _pinned(r)))
    return out


def narrowed_spec(matrix: Matrix, spec: SpecifierSet,
                  needs: Iterable[TorchNeed]) -> Tuple[SpecifierSet, List[str]]:
    """``spec`` narrowed by the needs, and one line per need that narrowed it."""
    releases = list(matrix.torch_releases)
    allowed = {r for r in releases}
    lines: List[str] = []
    for need in needs:
        req = need.requirement
        name = canonicalize_name(req.name)
        if name == "torch":
            keep = {r for r in releases if req.specifier.contains(V(r), prereleases=True)}
        elif name in ("torchvision", "torchaudio"):
            keep = set()
            for r in releases:
                rel = matrix.torch_releases[r]
                companions = rel.torchvision if name == "torchvision" else rel.torchaudio
                if any(_contains(req.specifier, c) for c in companions):
                    keep.add(r)
        else:  # triton: the matrix pairing, else the build's own pin
            keep = {r for r in releases if _triton_admits(matrix, r, req.specifier)}
        if keep != set(releases):
            allowed &= keep
            lines.append(str(need))
    if allowed == set(releases):
        return spec, lines
    return spec & _as_spec(releases, allowed), lines


def _pinned(r: Requirement) -> bool:
    return any(s.operator in ("==", "===") and "*" not in s.version for s in r.specifier)


def _contains(spec: SpecifierSet, version: str) -> bool:
    try:
        return spec.contains(Version(version.split("+")[0]), prereleases=True)
    except Exception:  # noqa: BLE001 - an odd companion version never matches
        return False


def _triton_admits(matrix: Matrix, release: str, spec: SpecifierSet) -> bool:
    """Whether a triton requirement ``spec`` can hold with ``release``: some version both
    admit, tried at the bounds the two specifiers name (``~=3.8.0`` pairs with ``>=3.8.1``
    through 3.8.1). A release with no triton pairing or pin constrains nothing."""
    pair = matrix.companions.get(release)
    paired = getattr(pair, "triton", None)
    if not paired:
        pins = _triton_pins(matrix, release)
        return not pins or any(_contains(spec, p) for p in pins)
    try:
        pspec = SpecifierSet(paired)
    except Exception:  # noqa: BLE001 - validation rejects these; an odd one narrows nothing
        return True
    probes = [s.version for s in (*pspec, *spec) if "*" not in s.version]
    return any(_contains(pspec, v) and _contains(spec, v) for v in probes)


def _triton_pins(matrix: Matrix, release: str) -> List[str]:
    pins: List[str] = []
    for v in matrix.variants_for(release):
        for text in v.pins:
            try:
                req = Requirement(text)
            except Exception:  # noqa: BLE001
                continue
            if canonicalize_name(req.name) == "triton":
                pins += [s.version for s in req.specifier if s.operator == "=="]
    return pins


def _as_spec(releases: Sequence[str], allowed: Iterable[str]) -> SpecifierSet:
    """The smallest readable specifier that admits exactly ``allowed`` of ``releases``."""
    keep = set(allowed)
    if not keep:
        return SpecifierSet("<0")
    ordered = sorted(releases, key=V)
    idx = [i for i, r in enumerate(ordered) if r in keep]
    lo, hi = ordered[idx[0]], ordered[idx[-1]]
    if lo == hi:
        return SpecifierSet(f"=={lo}")
    parts = [f">={lo}", f"<={hi}"]
    parts += [f"!={r}" for r in ordered[idx[0]:idx[-1] + 1] if r not in keep]
    return SpecifierSet(",".join(parts))


def needs_by_name(needs: Iterable[TorchNeed]) -> Dict[str, List[TorchNeed]]:
    out: Dict[str, List[TorchNeed]] = {}
    for n in needs:
        out.setdefault(canonicalize_name(n.requirement.name), []).append(n)
    return out


def describe(needs: Sequence[TorchNeed], limit: int = 3) -> Optional[str]:
    if not needs:
        return None
    text = "; ".join(str(n) for n in needs[:limit])
    return text + (f" (and {len(needs) - limit} more)" if len(needs) > limit else "")
