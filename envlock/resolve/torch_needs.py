"""What the requirements need of torch, read from their whole closure before the build is chosen.

The torch build is chosen by hardware (:mod:`envlock.resolve.hardware`), but the
requirements may pin torch too, at any depth: ``vllm==0.6.3`` requires ``torch==2.4.0``,
and so does every package that requires ``vllm==0.6.3``. Choosing the newest build first
and resolving afterwards fails on such inputs for no good reason. So before a build is
chosen, :func:`torch_needs` walks the closure the resolver will try first: from each direct
requirement, the best candidate (newest allowed, as the resolver picks), its Requires-Dist,
their best candidates, and so on, breadth first. Every constraint on torch, torchvision,
torchaudio or triton met on the way is a :class:`TorchNeed`, with the chain of packages that
led to it, so an error can name it (``app==1.0 -> vllm==0.6.3 requires torch==2.4.0``).

Why a pre-pass rather than resolving with a build and retrying on conflict: the pre-pass
follows the same newest-first path as the resolver (and as uv, which has no build to fix
first), so it picks the torch those versions ask for, where a retry would first let the
resolver backtrack to older versions that suit the wrong build; it knows the whole chain
to each constraint (a resolver conflict names only the last parent); and it costs no
failed resolution: the metadata it reads is what the resolver reads next, kept by the
index client. Its limit is that backtracking may later leave that path; so a need also
says whether it is *forced*: every link of its chain is an exact pin or the only version
the index offers for the target, so no older version can relax it. The caller narrows by
every need first and, when that leaves no build for the hardware, by the forced ones only.

torchvision and torchaudio constraints map to torch releases through the matrix's
companion lists; a triton constraint through each build's own triton pin. The narrowing
is expressed as a torch specifier, so :func:`~envlock.resolve.hardware.choose_variant`
and its explanations work unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import (TYPE_CHECKING, Callable, Dict, Iterable, List, Mapping, Optional, Sequence,
                    Set, Tuple)

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

from envlock.errors import BuildError, OfflineError
from envlock.matrix.matrix import Matrix
from envlock.versions import V

if TYPE_CHECKING:
    from envlock.resolve.closure import Cand, Finder, Req

__all__ = ["TorchNeed", "Walk", "torch_needs", "narrowed_spec"]

_FAMILY = ("torch", "torchvision", "torchaudio", "triton")
#: never walked into: the torch family's own dependencies are the build's business
_SKIP = frozenset(_FAMILY + ("pytorch-triton",))
#: a bound on the walk (real closures have a few hundred packages at most)
MAX_VISITS = 3000


@dataclass(frozen=True)
class TorchNeed:
    """One requirement's constraint on a torch-family package, and how it was reached."""

    #: the packages from the direct requirement down to the one that states the
    #: constraint, as ``name==version``; empty when the user requested it directly
    chain: Tuple[str, ...]
    requirement: Requirement  # torch==2.4.0
    #: every link of the chain is an exact pin or the only version available for the
    #: target: no older version can relax this constraint
    forced: bool = False

    @property
    def origin(self) -> str:
        """The package that states the constraint ("" for the user)."""
        return self.chain[-1] if self.chain else ""

    def __str__(self) -> str:
        want = f"{self.requirement.name}{self.requirement.specifier}"
        if not self.chain:
            return f"{want} (requested)"
        return f"{' -> '.join(self.chain)} requires {want}"


@dataclass(frozen=True)
class _Hop:
    """A requirement met during the walk, with the chain that led to it."""

    req: "Req"
    chain: Tuple[str, ...]
    forced: bool


@dataclass(frozen=True)
class Walk:
    """What the walk found, and whether it read the whole closure."""

    needs: List[TorchNeed]
    #: projects visited when the walk stopped at its bound with projects still to read;
    #: None when it read everything. Constraints below that point are unknown: the build
    #: is chosen without them, and the closure (which reads everything) still holds
    #: every one of them.
    stopped_after: Optional[int] = None

    @property
    def note(self) -> Optional[str]:
        """The decision line a stopped walk owes the user, or None."""
        if self.stopped_after is None:
            return None
        return (f"the requirements' torch constraints were read from the first "
                f"{self.stopped_after} projects of their closure only (the walk's bound): "
                f"deeper ones were not known when the build was chosen; the closure itself "
                f"still holds every constraint")


def torch_needs(finder: "Finder", requirements: Sequence[Requirement],
                env: Mapping[str, str], limit: int = MAX_VISITS,
                started: Optional[Callable[[], None]] = None) -> Walk:
    """Torch-family constraints anywhere in the closure of the requirements' best candidates.

    Best effort where the cache cannot answer offline or an sdist's metadata cannot be
    built (the closure reports either when it needs that package); every other index
    failure propagates. The walk goes level by level and starts no new level after
    ``limit`` projects; it says so when that left projects unread (:attr:`Walk.note`).
    ``started`` is called once the first level's fetches are queued (work that may wait
    behind them goes there).
    """
    from envlock.resolve.closure import Req

    out: List[TorchNeed] = []
    level: List[_Hop] = []
    for r in requirements:
        name = str(canonicalize_name(r.name))
        if r.marker is not None and not r.marker.evaluate(dict(env, extra="")):
            continue
        if name in _SKIP:
            if name in _FAMILY and str(r.specifier):
                out.append(TorchNeed((), r, forced=True))  # e.g. torchvision==0.19.0
            continue
        extras = frozenset(str(canonicalize_name(e)) for e in r.extras)
        level.append(_Hop(Req(name, r.specifier, extras, parent="user"), (), True))
    seen: Set[str] = set()
    visits = 0
    finder.no_run_ahead = _SKIP
    while level and visits < limit:
        hops = _merge(level, seen)
        for hop in hops:
            finder.prefetch(hop.req)
        if started is not None:
            started()
            started = None
        level = []
        for hop in hops:
            visits += 1
            found = _visit(finder, hop)
            if found is None:
                continue
            best, forced, deps = found
            chain = hop.chain + (str(best),)
            for dep in deps:
                if dep.name in _SKIP:
                    if dep.name in _FAMILY and str(dep.specifier):
                        out.append(TorchNeed(chain, Requirement(f"{dep.name}{dep.specifier}"),
                                             forced))
                    continue
                level.append(_Hop(dep, chain, forced))
    unread = bool(_merge(level, set(seen))) if level else False
    return Walk(_unique(out), visits if unread else None)


def _unique(needs: Sequence[TorchNeed]) -> List[TorchNeed]:
    """Each need once (a project reached again with extras restates its base needs)."""
    out: Dict[str, TorchNeed] = {}
    for n in needs:
        have = out.get(str(n))
        if have is None or (n.forced and not have.forced):
            out[str(n)] = n
    return list(out.values())


def _merge(level: Sequence[_Hop], seen: Set[str]) -> List[_Hop]:
    """One hop per project not walked yet: the first chain that reached it, every
    specifier that asks for it (as the resolver combines them), every extra."""
    from envlock.resolve.closure import Req

    merged: Dict[str, _Hop] = {}
    for hop in level:
        r = hop.req
        key = r.identifier
        if key in seen:
            continue
        have = merged.get(r.name)
        if have is None:
            merged[r.name] = hop
            continue
        h = have.req
        merged[r.name] = _Hop(Req(h.name, h.specifier & r.specifier, h.extras | r.extras,
                                  h.parent), have.chain, have.forced and hop.forced)
    for hop in merged.values():
        seen.add(hop.req.identifier)
        seen.add(hop.req.name)
    return list(merged.values())


def _visit(finder: "Finder", hop: _Hop) -> Optional[Tuple["Cand", bool, List["Req"]]]:
    """The best candidate for a hop, whether the chain stays forced, its dependencies."""
    r = hop.req
    try:
        cands = finder.matching(r.specifier, r.name)
        if not cands:
            return None
        best = cands[0]
        deps, _ = finder.dependencies(best)
        if r.extras:
            more, _ = finder.dependencies(best.with_extras(r.extras))
            deps = deps + [d for d in more if d.name != best.name]
    except (OfflineError, BuildError):
        return None
    forced = hop.forced and (_pinned(r.specifier) or len(cands) == 1)
    return best, forced, deps


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


def _pinned(spec: SpecifierSet) -> bool:
    return any(s.operator in ("==", "===") and "*" not in s.version for s in spec)


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
