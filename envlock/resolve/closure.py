"""The full dependency closure, resolved with resolvelib against real indexes.

The provider is thin (resolvelib's five questions); the candidate data comes from
:class:`Finder`, which reads project pages and metadata through the index client and
evaluates markers and wheel tags for the *target* machine. To hide network latency it
prefetches speculatively: when a candidate's dependencies are known, the pages of the
dependencies and the metadata of their likely picks are fetched in parallel.
"""

from __future__ import annotations

import threading
from functools import lru_cache, partial
from dataclasses import dataclass, field
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterable,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Set,
    Tuple,
    Union,
)

from packaging.requirements import Requirement
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.tags import Tag
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version
from resolvelib import AbstractProvider, BaseReporter, ResolutionImpossible, Resolver
from resolvelib.resolvers import ResolutionTooDeep

from envlock.errors import ConflictError, InputError
from envlock.index.client import IndexClient
from envlock.index.config import redact
from envlock.index.fit import TripleFit
from envlock.index.fit import fast_rank as _fast_rank
from envlock.index.pages import (
    Dist,
    ProjectPage,
    parse_filename,
    triple_key,
    variants_json_version,
)
from envlock.index.workers import AHEAD, BULK, NEEDED, URGENT
from envlock.platforms import Target
from envlock.resolve.sources import TORCH_FAMILY, SourcePolicy
from envlock.wheelvariants import Fit, VariantHost, judge_variant, variant_label

__all__ = ["Finder", "resolve_closure", "Resolved", "PYTHON", "companion_versions", "PairedSpec",
           "PRERELEASE_MODES", "opts_into_prereleases", "apply_overrides_to_direct"]

PYTHON = "<python>"

#: ``--prerelease`` modes, as uv names them. ``if-necessary`` (the default): stable versions
#: only, unless no stable version satisfies the constraints, then pre-releases (so
#: ``nltk==3.9b1`` or ``pkg>=2.0rc1`` with no stable 2.x resolve, as PEP 440 allows);
#: ``allow``: pre-releases compete with stable ones; ``disallow``: never; ``explicit``:
#: the if-necessary fallback only for direct requirements whose specifier names a
#: pre-release, never for anything else.
PRERELEASE_MODES = ("if-necessary", "allow", "disallow", "explicit")


def opts_into_prereleases(spec: SpecifierSet) -> bool:
    """Whether a specifier names a pre-release (``!=`` excluding one does not count)."""
    for s in spec:
        if s.operator == "!=":
            continue
        try:
            if Version(s.version.rstrip(".*").rstrip(".")).is_prerelease:
                return True
        except Exception:  # noqa: BLE001 - '===' arbitrary strings
            continue
    return False


@dataclass(frozen=True)
class Req:
    name: str
    specifier: SpecifierSet
    extras: FrozenSet[str] = frozenset()
    parent: str = ""

    @property
    def identifier(self) -> str:
        return self.name if not self.extras else f"{self.name}[{','.join(sorted(self.extras))}]"

    def __str__(self) -> str:
        ex = f"[{','.join(sorted(self.extras))}]" if self.extras else ""
        return f"{self.name}{ex}{self.specifier}"


#: the first batch of metadata asked for when the resolver walks back through a project's
#: versions, and the largest (each batch doubles the last)
BATCH_FIRST = 8
BATCH_MOST = 32


class Cand:
    """One version of a project for a target, with its usable files, best first.

    The files may be given as a function that makes them (see :meth:`Finder.candidates`):
    a page lists hundreds of versions and a resolve looks at a few of each project, so a
    version's file objects are made when first asked for (vllm 0.8.5: 14,249 versions
    with 24,753 files, all made before, about 0.45 s of a cold resolve's CPU). Immutable,
    equal and hashed by name, version, files, index and extras, as the frozen dataclass
    it replaces."""

    __slots__ = ("name", "version", "index", "extras", "_dists", "_any_yanked")

    def __init__(self, name: str, version: Version,
                 dists: Union[Tuple[Dist, ...], Callable[[], Tuple[Dist, ...]]], index: str,
                 extras: FrozenSet[str] = frozenset(), *,
                 any_yanked: Optional[bool] = None) -> None:
        """``any_yanked``: whether any of the files is yanked, when known without them
        (None: ask the files)."""
        init = object.__setattr__
        init(self, "name", name)
        init(self, "version", version)
        init(self, "index", index)
        init(self, "extras", extras)
        init(self, "_dists", dists)
        init(self, "_any_yanked", any_yanked)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r}: a Cand is immutable")

    @property
    def dists(self) -> Tuple[Dist, ...]:
        """The compatible files, best first (made on first use)."""
        d = self._dists
        if d.__class__ is not tuple:
            d = tuple(d())
            object.__setattr__(self, "_dists", d)  # (two threads make equal tuples)
        return d

    def with_extras(self, extras: FrozenSet[str]) -> "Cand":
        """The same version with ``extras``, its files made once for both."""
        d = self._dists
        return Cand(self.name, self.version, d if d.__class__ is tuple else (lambda: self.dists),
                    self.index, extras, any_yanked=self._any_yanked)

    @property
    def identifier(self) -> str:
        return self.name if not self.extras else f"{self.name}[{','.join(sorted(self.extras))}]"

    @property
    def best(self) -> Dist:
        return self.dists[0]

    @property
    def yanked(self) -> Optional[str]:
        """The best file's yank reason (None: not yanked), answered without making the
        files when none of them is yanked."""
        return None if self._any_yanked is False else self.best.yanked

    def _key(self) -> Tuple[Any, ...]:
        return (self.name, self.version, self.dists, self.index, self.extras)

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Cand:
            return NotImplemented
        return self._key() == other._key()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"Cand(name={self.name!r}, version={self.version!r}, dists={self.dists!r}, "
                f"index={self.index!r}, extras={self.extras!r})")

    def __str__(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass
class Resolved:
    packages: Dict[str, Cand] = field(default_factory=dict)
    parents: Dict[str, Set[str]] = field(default_factory=dict)
    #: packages whose requirement from the torch build an advisory replaced (the build's
    #: own pin excluded what the advisory asks); every other advisory requirement was met
    #: as a constraint
    replaced: Set[str] = field(default_factory=set)


class Finder:
    """Candidates per project for one target, with caching and prefetch."""

    def __init__(self, client: IndexClient, policy: SourcePolicy, target: Target,
                 allowed_versions: Optional[Mapping[str, Union[Set[str], "PairedSpec"]]] = None,
                 allowed_for: str = "",
                 prerelease: str = "if-necessary",
                 explicit_prereleases: Iterable[str] = (),
                 variant_host: Optional[VariantHost] = None) -> None:
        self.client = client
        #: the GPUs and driver CUDA PEP 825 variant wheels are judged against (None: a
        #: variant wheel is never chosen, its fit being unknown)
        self.variant_host = variant_host
        #: per (project, version): the variants.json read, and the decision line saying
        #: which variant wheel (or the non-variant one) was kept and why
        self.variant_docs: Dict[Tuple[str, str], dict] = {}
        self.variant_notes: Dict[Tuple[str, str], str] = {}
        self.prerelease = prerelease
        self.explicit = {canonicalize_name(n) for n in explicit_prereleases}
        self.policy = policy
        self.target = target
        self.tag_rank: Dict[Tag, int] = {t: i for i, t in enumerate(target.tags)}
        self.tag_rank_str: Dict[str, int] = {str(t): i for t, i in self.tag_rank.items()}
        self._tag_parts = (frozenset(t.interpreter for t in self.tag_rank),
                           frozenset(t.platform for t in self.tag_rank))
        self._matching: Dict[Tuple[str, str], List[Cand]] = {}
        self._fits: Dict[str, Optional[int]] = {}
        self.python = Version(f"{target.python.rstrip('t')}.0")
        self.env = target.markers
        self.allowed = {canonicalize_name(k): v for k, v in (allowed_versions or {}).items()}
        self.allowed_for = allowed_for  # the torch version the restriction is for (messages)
        self._cands: Dict[str, List[Cand]] = {}
        self._lock = threading.Lock()
        self._prefetched: Set[Tuple[str, str]] = set()
        #: per project, every specifier asked of it so far (roots first): prefetch guesses
        #: inside it; None until :meth:`add_roots` (the torch walk reads each hop's own
        #: specifier, and its guesses must be the same)
        self._known: Optional[Dict[str, SpecifierSet]] = None
        self._applies_memo: Dict[Tuple[int, str], Tuple[Requirement, bool]] = {}
        #: projects with a variant wheel among their usable files: their candidate lists
        #: depend on the GPUs the variants were judged against (see :meth:`adopt`)
        self._variant_projects: Set[str] = set()
        #: per project, the versions whose dependencies were asked, and how far down its
        #: candidate list a batch prefetch reached (:meth:`_batch_prefetch`)
        self._tried: Dict[str, Set[Version]] = {}
        self._batched: Dict[str, Tuple[int, int]] = {}
        #: projects whose dependencies are not fetched ahead (:meth:`_run_ahead`): the
        #: torch walk's, which never walks into the torch family (a bare torch>=2.0 would
        #: range-read the newest torch wheel's 15,000-member zip for nothing)
        self.no_run_ahead: FrozenSet[str] = frozenset()
        #: a guess made ahead of need (the likely torch build's closure, read while the
        #: torch walk runs): every fetch it asks for waits behind everyone else's
        self.ahead = False

    @property
    def _urgency(self) -> int:
        """The priority of this finder's most urgent fetches: a guess's wait behind all."""
        return AHEAD if self.ahead else URGENT

    @property
    def _waiting(self) -> int:
        """The priority of a fetch this finder is blocked on: before everything else,
        unless the finder is making a guess."""
        return AHEAD if self.ahead else NEEDED

    # -- pages ---------------------------------------------------------------------------
    def _pages(self, name: str, block: bool = True,
               on_pending: Optional[Any] = None
               ) -> Optional[Tuple[str, ProjectPage, Sequence[int]]]:
        """(index, page, positions of the files that may fit the target) from the first
        index that has the project ("first index"); an empty page when none has it.

        Later indexes are asked only when the earlier ones lack the project, so a private
        package name is not sent to every extra index. With ``block=False`` (inside a pool
        worker, where waiting could starve the pool) it returns None as soon as it would
        have to wait, after attaching ``on_pending`` to the page it waits for.
        """
        indexes, strict = self.policy.indexes_for(name)
        priority = self._waiting if block else AHEAD if self.ahead else BULK
        for ix in indexes:
            fut = self.client.prefetch_page(ix, name, priority)
            if not block and not fut.done():
                if on_pending is not None:
                    fut.add_done_callback(on_pending)
                return None
            page = fut.result()
            if page is not None and page.listed:  # (every file listed, narrowed or not)
                # wheels for other platforms or Pythons are left out by their file name
                # before anything else is made of them (most of a big page)
                return ix, page, page.positions(self._triple_fits)
        if not strict:
            fl = self.client.find_links_dists(name)
            if fl:
                return fl[0].index, ProjectPage(name, fl[0].index, "", fl), range(len(fl))
        index = indexes[0] if indexes else ""
        return index, ProjectPage(name, index, ""), ()

    def _triple_fits(self, key: str) -> bool:
        """False for a wheel tag triple (``"-py-abi-platform.whl"``, see
        :func:`~envlock.index.pages.triple_key`) that no target tag matches."""
        return self._triple_rank(key) is not None

    def _triple_rank(self, key: str) -> Optional[int]:
        """:func:`_fast_rank` of a wheel's tag triple, memoised by the triple: a page
        repeats a few dozen of them over thousands of files."""
        try:
            return self._fits[key]
        except KeyError:
            rank = self._fits[key] = _fast_rank("x-0" + key, self.tag_rank_str,
                                                self._tag_parts)
            return rank

    def candidates(self, name: str, block: bool = True,
                   on_pending: Optional[Any] = None) -> Optional[List[Cand]]:
        """Every usable version of ``name`` for the target, newest first.

        Which files are usable is decided here, file by file, from their names and
        Requires-Python; each version's files are made into objects and ordered only when
        a candidate's files are first asked for (:class:`Cand`). A version with a variant
        wheel is made at once: its decision line is written now."""
        name = canonicalize_name(name)
        with self._lock:
            if name in self._cands:
                return self._cands[name]
        found = self._pages(name, block, on_pending)
        if found is None:
            return None
        index, page, positions = found
        filenames = page.filenames
        by_version: Dict[Version, List[int]] = {}
        #: per variant wheel kept, its sort key part (the fit's CUDA bound first)
        vkeys: Dict[int, Tuple[int, ...]] = {}
        rank_of = self.tag_rank_str
        tag_rank = self.tag_rank
        vjson_links: Dict[str, Dist] = {}
        judged: Dict[Version, Dict[str, Fit]] = {}
        for i in positions:
            vj = variants_json_version(filenames[i])
            if vj is not None:
                d = page.dist(i)
                if d is not None:
                    vjson_links.setdefault(_version_key(vj), d)
        for i in positions:
            fn = filenames[i]
            if fn.endswith(".whl"):
                # Most wheels on a page are for other platforms or Pythons: reject them by
                # their filename's tag triple, before any parsing (the expensive part).
                triple = triple_key(fn)
                best = (self._triple_rank(triple) if triple
                        else _fast_rank(fn, rank_of, self._tag_parts))
                if best is None:
                    continue
            p = parse_filename(fn)
            if p is None or p[0] != name:
                continue
            rp = page.requires_python_at(i)
            if rp and not _python_ok(rp, self.python):
                continue
            if p[4] == "wheel":
                if not any(t in tag_rank for t in p[3]):
                    continue
                # a variant wheel that fits the target first (the newest CUDA bound
                # first), then the non-variant wheels; one that does not fit, or whose fit
                # is unknown, is left out (PEP 825: without its properties it is not
                # installable); then the most specific tag, then the highest build number
                label = variant_label(fn)
                if label is not None:
                    fit = judged.setdefault(p[1], {}).get(label)
                    if fit is None:
                        fit = judged[p[1]][label] = self._variant_fit(
                            name, p[1], label, vjson_links)
                    if fit.verdict != "fits":
                        continue
                    vkeys[i] = (0, -fit.cuda_bound[0], -fit.cuda_bound[1])
            by_version.setdefault(p[1], []).append(i)
        allowed = self.allowed.get(name)
        yanked_at = page.yanked_at
        out = CandList()
        for version, at in by_version.items():
            if allowed is not None and str(version).split("+")[0] not in allowed:
                continue
            any_yanked = any(yanked_at(i) is not None for i in at)
            files = partial(self._files, page, at, vkeys)
            if version in judged:
                # one variant, or only the non-variant files: what an installer given the
                # lock's variants.json would pick for this target
                made = files()
                made = tuple(f for f in made if f.variant == made[0].variant)
                self._note_variants(name, version, made[0].variant, judged[version])
                out.append(Cand(name, version, made, index))
            else:
                out.append(Cand(name, version, files, index, any_yanked=any_yanked))
        out.sort(key=lambda c: c.version, reverse=True)
        with self._lock:
            self._cands[name] = out
            if judged:
                self._variant_projects.add(name)
        return out

    def _files(self, page: ProjectPage, at: Sequence[int],
               vkeys: Mapping[int, Tuple[int, ...]]) -> Tuple[Dist, ...]:
        """The files of one version (``at``: their positions on ``page``, each judged
        usable by :meth:`candidates`), best first."""
        tag_rank = self.tag_rank
        items = []
        for i in at:
            d = page.dist(i)
            if d is None:  # (not the project's: candidates left it out already)
                continue
            p = parse_filename(d.filename)
            if p is not None and p[4] == "wheel":
                ranks = [tag_rank[t] for t in p[3] if t in tag_rank]
                key = (0, *vkeys.get(i, (1, 0, 0)), min(ranks),
                       *[-x for x in _build_key(p[2])])
            else:
                key = (1, 0)
            items.append((key, d))
        items.sort(key=lambda kd: (kd[0], kd[1].filename))
        return tuple(d for _, d in items)

    def _variant_fit(self, name: str, version: Version, label: str,
                     links: Mapping[str, Dist]) -> Fit:
        """How variant ``label`` of ``name`` ``version`` suits the target, from the
        index's variants.json for that version (read only now: a variant wheel is a
        candidate)."""
        link = links.get(str(version))
        if link is None:
            return Fit("unknown", "the index links no variants.json for this version")
        doc, warning = self.client.variants_json(link)
        if doc is None:
            return Fit("unknown", warning or "its variants.json is unusable")
        with self._lock:
            self.variant_docs[(name, str(version))] = doc
        props = doc["variants"].get(label)
        if props is None:
            return Fit("unknown", f"label {label!r} is not in {link.filename}")
        return judge_variant(props, self.variant_host)

    def _note_variants(self, name: str, version: Version, chosen: Optional[str],
                       fits: Mapping[str, Fit]) -> None:
        """The decision line for one version with variant wheels (see variant_notes)."""
        others = "; ".join(f"variant {lb}: {f.verdict}, {f.why}"
                           for lb, f in sorted(fits.items()) if lb != chosen)
        if chosen is not None:
            line = (f"{name} {version}: wheel variant {chosen} (PEP 825) chosen for the "
                    f"target: {fits[chosen].why}")
            line += f"; also on the index: {others}" if others else ""
        else:
            line = (f"{name} {version}: the non-variant wheel, no wheel variant fits the "
                    f"target ({others})")
        with self._lock:
            self.variant_notes[(name, str(version))] = line

    def matching(self, req_spec: SpecifierSet, name: str, block: bool = True,
                 on_pending: Optional[Any] = None) -> Optional[List[Cand]]:
        """Candidates inside ``req_spec``, best first, under the pre-release mode.

        Yanked files count only for an exact pin (PEP 592).
        """
        key = (canonicalize_name(name), str(req_spec))
        with self._lock:
            hit = self._matching.get(key)
        if hit is not None:
            return list(hit)
        cands = self.candidates(name, block, on_pending)
        if cands is None:
            return None
        out = self._select(req_spec, name, cands)
        with self._lock:
            self._matching[key] = out
        return list(out)

    def first_match(self, req_spec: SpecifierSet, name: str,
                    on_pending: Optional[Any] = None) -> Optional[Cand]:
        """The first of :meth:`matching` (what the resolver will try first), found without
        building the whole list; None when there is none or the page is still on its way.
        Prefetch asks this for every dependency the resolver meets, with a specifier that
        is new on each backtrack: checking every version of fastapi against each was 40%
        of a cold vllm resolve's CPU."""
        key = (canonicalize_name(name), str(req_spec))
        with self._lock:
            hit = self._matching.get(key)
        if hit is not None:
            return hit[0] if hit else None
        cands = self.candidates(name, False, on_pending)
        if not cands:
            return None
        exact = any(s.operator in ("==", "===") for s in req_spec)
        first = None
        mode = self.prerelease
        for c in _inside(req_spec, cands):
            if not (exact or c.yanked is None):
                continue
            if mode == "allow" or not c.version.is_prerelease:
                return c
            if first is None:
                first = c
        # only pre-releases inside: as _select decides
        if first is None or mode == "disallow":
            return None
        if mode == "explicit" and canonicalize_name(name) not in self.explicit:
            return None
        return first

    def _select(self, req_spec: SpecifierSet, name: str, cands: List[Cand]) -> List[Cand]:
        exact = any(s.operator in ("==", "===") for s in req_spec)
        inside = [c for c in _inside(req_spec, cands) if exact or c.yanked is None]
        mode = self.prerelease
        if mode == "allow":
            return inside
        stable = [c for c in inside if not c.version.is_prerelease]
        if stable or mode == "disallow":
            return stable
        if mode == "explicit" and canonicalize_name(name) not in self.explicit:
            return []
        return inside

    def adopt(self, other: "Finder") -> None:
        """Take over ``other``'s candidate lists where they would be the same here: same
        target, same indexes for the project, no companion restriction. The torch-needs
        walk reads most of the closure before the build (so its index) is known; this
        spares parsing those pages a second time."""
        if other.target != self.target:
            return
        with other._lock:
            theirs = dict(other._cands)
            if other.variant_host != self.variant_host:
                # a list with variant wheels was judged for other GPUs (or none): not the
                # same here; every other list is (most pages carry no variant wheel)
                for name in other._variant_projects:
                    theirs.pop(name, None)
        with self._lock:
            for name, cands in theirs.items():
                if (name in self._cands or name in self.allowed or name in other.allowed
                        or self.policy.indexes_for(name) != other.policy.indexes_for(name)):
                    continue
                self._cands[name] = cands

    # -- prefetch ------------------------------------------------------------------------
    def add_roots(self, requirements: Iterable[Req]) -> None:
        """Let speculation start from the root requirements (see :meth:`prefetch`)."""
        with self._lock:
            if self._known is None:
                self._known = {}
            for r in requirements:
                self._narrow(r)

    def _narrow(self, req: Req) -> Optional[SpecifierSet]:
        """What was asked of ``req``'s project before (None: nothing); ``req`` joins it.
        Called with the lock held."""
        if self._known is None:
            return None
        known = self._known.get(req.name)
        self._known[req.name] = req.specifier if known is None else known & req.specifier
        return known

    def prefetch(self, req: Req) -> None:
        """Fetch the page of ``req`` and the metadata of its likely pick, in the background.

        The guess is made inside everything asked of the project so far, the roots first:
        a dependency's bare ``nvidia-cublas-cu12`` or ``torch>=2.0`` alone names the newest
        release, whose metadata is wasted (for torch a range read of a 15,000-member zip)
        when torch==2.5.1 and its pin ==12.4.5.8 were asked before. When what was asked
        before rules out every version (a candidate given up while backtracking), the
        requirement alone decides, as it did before.
        """
        if req.name == PYTHON:
            return
        with self._lock:
            known = self._narrow(req)
        narrowed = req
        if known is not None and str(known) and str(known) != str(req.specifier):
            narrowed = Req(req.name, req.specifier & known, req.extras, req.parent)
        key = (req.name, str(narrowed.specifier))
        with self._lock:
            if key in self._prefetched:
                return
            self._prefetched.add(key)
        self._try_prefetch_meta(narrowed, req)

    def _try_prefetch_meta(self, req: Req, alone: Optional[Req] = None) -> None:
        # Never blocks: if a page is still on its way, try again when it arrives.
        def again(_fut: Any) -> None:
            try:
                self.client._submit(self._try_prefetch_meta, req, alone,
                                    priority=self._urgency)
            except RuntimeError:
                pass  # the pool is shut down: the resolution is over

        try:
            first = self.first_match(req.specifier, req.name, on_pending=again)
            if first is None and alone is not None and alone is not req:
                with self._lock:
                    listed = req.name in self._cands  # (not: its page is on its way)
                if listed:
                    first = self.first_match(alone.specifier, req.name)
            if first is not None and first.best.is_wheel:
                fut = self.client.prefetch_metadata(first.best, self._urgency)
                if not fut.done():  # (answered from the cache: nothing to run ahead of)
                    fut.add_done_callback(lambda f: self._run_ahead(f, req))
        except Exception:  # noqa: BLE001 - prefetch is best effort; the real call reports
            pass

    def _run_ahead(self, fut: Any, req: Req) -> None:
        """The metadata of a likely pick arrived from the network: prefetch its
        dependencies now, in the worker that read it. Waiting until the walk or the
        resolver reaches the project queues them behind every project listed before it,
        a slow page among them (measured on torch + transformers + accelerate + datasets:
        huggingface-hub's dependencies were asked for 380 ms after its metadata came,
        while the walk waited for regex's 6 MB page)."""
        try:
            meta = fut.result()
            extras = ("",) + tuple(sorted(req.extras))
            for r in meta.requirements_for(req.extras):
                name = _canon(r.name)
                if name in self.no_run_ahead:
                    continue
                if any(self._applies(r, e) for e in extras):
                    self.prefetch(Req(name, r.specifier, frozenset(_canon(e) for e in r.extras),
                                      parent=f"{req.name} (ahead)"))
        except Exception:  # noqa: BLE001 - best effort, as prefetch
            pass

    # -- dependencies --------------------------------------------------------------------
    def _batch_prefetch(self, cand: Cand) -> None:
        """When the resolver asks for the dependencies of a second (third, ...) version of
        a project, it is backtracking through that project's versions, newest first, one
        metadata file at a time: ask for the next versions' metadata together, a batch
        that doubles while the backtracking goes on (:data:`BATCH_FIRST` up to
        :data:`BATCH_MOST`). Measured on vllm 0.8.5: fastapi was walked back through 20
        versions, 0.2 s each, 4 s of a 10.8 s cold resolve spent waiting for them one by
        one."""
        with self._lock:
            tried = self._tried.setdefault(cand.name, set())
            if cand.version in tried:
                return
            tried.add(cand.version)
            if len(tried) < 2:
                return
            cands = self._cands.get(cand.name)
            if not cands:
                return
            at = next((i for i, c in enumerate(cands) if c.version == cand.version), None)
            reached, last = self._batched.get(cand.name, (0, 0))
            if at is None or at + 1 + BATCH_FIRST // 2 <= reached:
                return  # the last batch still runs well ahead of this version
            size = min(BATCH_MOST, 2 * last) if last else BATCH_FIRST
            end = at + 1 + size
            batch = [c for c in cands[max(at + 1, reached):end] if c.best.is_wheel]
            self._batched[cand.name] = (end, size)
        for c in batch:
            self.client.fetch_ahead(c.best)

    def dependencies(self, cand: Cand) -> Tuple[List[Req], Optional[str]]:
        self._batch_prefetch(cand)
        meta = self.client.metadata(cand.best, self._waiting)
        reqs: List[Req] = []
        parent = str(cand)
        for r in meta.requirements_for(frozenset(map(_canon, cand.extras))):
            for extra in (cand.extras or ("",)):
                if not self._applies(r, extra):
                    continue
                reqs.append(Req(_canon(r.name), r.specifier,
                                frozenset(_canon(e) for e in r.extras), parent=parent))
                break
        return reqs, meta.requires_python

    def _applies(self, r: Requirement, extra: str) -> bool:
        """Whether ``r`` belongs to the base candidate (``extra`` "") or to ``extra``, on
        the target. Memoised by the requirement's identity (parsed requirements are shared,
        see :mod:`envlock.index.metadata`): packaging's ``Marker.evaluate`` rebuilds the
        running interpreter's whole environment on every call. The value keeps the
        requirement alive, so its id cannot be reused while the entry exists."""
        key = (id(r), extra)
        hit = self._applies_memo.get(key)
        if hit is not None and hit[0] is r:
            return hit[1]
        if r.marker is not None and not r.marker.evaluate(dict(self.env, extra=extra)):
            ok = False
        else:
            # base requirements belong to the base candidate
            ok = not extra or (r.marker is not None and "extra" in str(r.marker))
        self._applies_memo[key] = (r, ok)
        return ok


class CandList(list):  # of Cand
    """A finder's candidate list, newest first, never changed once made; its versions are
    indexed for :func:`_inside` when first filtered, and the index lives as long as the
    list (a module-wide cache by list identity kept every list, and the pages its
    candidates read their files from, after the resolve that made them)."""

    __slots__ = ("_index",)


def _inside(spec: SpecifierSet, cands: List[Cand]) -> Iterator[Cand]:
    """The candidates whose version ``spec`` admits, pre-releases included, in order.

    One ``SpecifierSet.filter`` over the list's versions rather than a containment test
    per candidate: the resolver asks a new specifier of a long list on every backtrack
    (fastapi's 371 versions, 56 times in a vllm resolve), and packaging's filter checks a
    version against the set's ranges at about a tenth of the cost of ``contains``."""
    if not len(spec):  # no specifier admits every version
        return iter(cands)
    index = getattr(cands, "_index", None)
    if index is None:
        # the versions, and the candidate of each version by identity (filter gives back
        # the objects it was given); two threads may both make it: equal values
        index = ([c.version for c in cands], {id(c.version): c for c in cands})
        if isinstance(cands, CandList):
            cands._index = index
    versions, by_id = index
    return map(by_id.__getitem__, map(id, spec.filter(versions, prereleases=True)))


_SAT: Dict[Tuple[int, int], Tuple[SpecifierSet, Version, bool]] = {}
_SAT_LOCK = threading.Lock()


def _contains(spec: SpecifierSet, version: Version) -> bool:
    """``spec.contains`` memoised by the identity of the specifier and of the version:
    resolvelib asks the same question many times, and hashing a SpecifierSet or a Version
    (packaging's ``__hash__`` is Python code) costs more than the answer. The value keeps
    both alive, so neither id can be reused while the entry exists."""
    key = (id(spec), id(version))
    hit = _SAT.get(key)
    if hit is not None and hit[0] is spec and hit[1] is version:
        return hit[2]
    ok = spec.contains(version, prereleases=True)
    with _SAT_LOCK:
        if len(_SAT) > 200_000:
            _SAT.clear()
        _SAT[key] = (spec, version, ok)
    return ok


class PairedSpec:
    """Versions admitted by a paired specifier (triton ``~=3.8.0``), usable where the
    closure expects a set of paired versions: membership and, for messages, iteration."""

    def __init__(self, spec: str) -> None:
        self.text = spec
        self._spec = SpecifierSet(spec)

    def __contains__(self, version: object) -> bool:
        try:
            return self._spec.contains(Version(str(version)), prereleases=True)
        except InvalidVersion:
            return False

    def __iter__(self) -> Iterator[str]:
        return iter((self.text,))


def companion_versions(companions: Mapping[str, Any],
                       torch_release: str) -> Dict[str, Union[Set[str], PairedSpec]]:
    """The torchvision/torchaudio versions and the triton specifier paired with
    ``torch_release`` in the matrix.

    Applied to every candidate of those projects, whether the user asked for them or a
    dependency pulls them in: a companion wheel's own torch requirement is not enough
    (torchaudio 2.11.0 declares none), and torch's own triton pin holds only where its
    marker does (x86_64 until 2.10.0; torch 2.5.1 names none for Python 3.13), so a
    dependency asking for ``triton`` would otherwise get the newest, built for another
    torch. A torch release without a pairing row restricts nothing; the matrix validation
    makes sure every release has one. A release with no triton dependency (1.13.x) leaves
    triton alone.
    """
    pair = companions.get(torch_release)
    if pair is None:
        return {}
    out: Dict[str, Union[Set[str], PairedSpec]] = {
        "torchvision": set(pair.torchvision), "torchaudio": set(pair.torchaudio)}
    if getattr(pair, "triton", None):
        out["triton"] = PairedSpec(pair.triton)
    return out


@lru_cache(maxsize=2048)
def _python_ok(requires_python: str, python: Version) -> bool:
    try:
        return SpecifierSet(requires_python).contains(python, prereleases=True)
    except InvalidSpecifier:
        return True  # an unreadable Requires-Python does not exclude (pip does the same)


def triple_filter(targets: Iterable[Target]) -> TripleFit:
    """Whether a wheel's tag triple (:func:`~envlock.index.pages.triple_key`) fits any
    of ``targets``: what the index client narrows pages to (a malformed triple passes,
    the full parse judges it). Built from the tags' text (:class:`TripleFit`), so the
    network helper can apply the same rule to a page before sending it."""
    return TripleFit(str(t) for target in targets for t in target.tags)


@lru_cache(maxsize=8192)
def _canon(name: str) -> str:
    return str(canonicalize_name(name))


def _build_key(build: Tuple[Any, ...]) -> Tuple[int, ...]:
    return tuple(x for x in build if isinstance(x, int)) or (0,)


class _Provider(AbstractProvider):
    """resolvelib's view of the finder. An advisory's requirements (``overrides``) are
    *constraints*: they narrow the candidates of their package wherever it appears, so the
    resolver backtracks other packages to versions compatible with them (numpy 1.26.4 for
    torch < 2.3 leads to a pandas that supports it). Only the torch build's own requirement
    on such a package is replaced (an advisory asking for a newer cuBLAS than torch's exact
    pin); ``replaced`` records where that happened."""

    def __init__(self, finder: Finder, overrides: Mapping[str, Requirement],
                 python: Version,
                 constraints: Optional[Mapping[str, SpecifierSet]] = None) -> None:
        self.finder = finder
        self.overrides = {str(canonicalize_name(k)): v for k, v in overrides.items()}
        self.python = python
        self.replaced: Set[str] = set()
        #: the user's constraints (``-c``): narrow a package's candidates where it appears
        self.constraints = dict(constraints or {})

    def identify(self, requirement_or_candidate: Any) -> str:
        return requirement_or_candidate.identifier

    def get_preference(self, identifier: str, resolutions: Mapping[str, Any],
                       candidates: Mapping[str, Iterator[Any]],
                       information: Mapping[str, Iterator[Any]],
                       backtrack_causes: Sequence[Any]) -> Any:
        name = identifier.split("[")[0]
        infos = list(information[identifier])
        pinned = any(any(s.operator in ("==", "===") for s in i.requirement.specifier)
                     for i in infos)
        causes = {c.requirement.name for c in backtrack_causes}
        return (name != PYTHON, name not in TORCH_FAMILY, name not in causes, not pinned,
                identifier)

    def find_matches(self, identifier: str, requirements: Mapping[str, Iterator[Req]],
                     incompatibilities: Mapping[str, Iterator[Cand]]) -> List[Cand]:
        reqs = list(requirements[identifier])
        bad = {c.version for c in incompatibilities[identifier]}
        name = identifier.split("[")[0]
        if name == PYTHON:
            c = Cand(PYTHON, self.python, (), "")
            return [c] if all(r.specifier.contains(self.python, prereleases=True)
                              for r in reqs) and c.version not in bad else []
        spec = SpecifierSet()
        for r in reqs:
            spec &= r.specifier
        ov = self.overrides.get(name)
        if ov is not None:
            spec &= ov.specifier
        if name in self.constraints:
            spec &= self.constraints[name]
        extras: FrozenSet[str] = frozenset().union(*(r.extras for r in reqs))
        out = []
        for c in self.finder.matching(spec, name) or []:
            if c.version in bad:
                continue
            out.append(c if not extras else c.with_extras(extras))
        if out and out[0].best.is_wheel:
            self.finder.client.prefetch_metadata(out[0].best)
        return out

    def is_satisfied_by(self, requirement: Req, candidate: Cand) -> bool:
        return _contains(requirement.specifier, candidate.version)

    def get_dependencies(self, candidate: Cand) -> List[Req]:
        if candidate.name == PYTHON:
            return []
        if candidate.extras:
            base = Req(candidate.name, SpecifierSet(f"=={candidate.version}"),
                       parent=str(candidate))
            deps, _ = self.finder.dependencies(candidate)
            out = [base] + deps
        else:
            deps, rp = self.finder.dependencies(candidate)
            out = list(deps)
            if rp:
                try:
                    out.append(Req(PYTHON, SpecifierSet(rp), parent=str(candidate)))
                except InvalidSpecifier:
                    pass
        final = []
        for r in out:
            ov = self.overrides.get(r.name)
            if ov is not None and candidate.name == "torch" and r.name != candidate.name:
                if _excludes(r.specifier, _pins(ov.specifier)):
                    self.replaced.add(r.name)
                r = Req(r.name, ov.specifier, r.extras, parent=f"{r.parent} (override)")
            final.append(r)
            self.finder.prefetch(r)
        return final


class _Reporter(BaseReporter):
    def __init__(self, on_pin: Optional[Any] = None) -> None:
        self.on_pin = on_pin

    def pinning(self, candidate: Any) -> None:
        if self.on_pin is not None:
            self.on_pin(candidate)


def apply_overrides_to_direct(requirements: Sequence[Req],
                              overrides: Mapping[str, Requirement],
                              why: Mapping[str, str]) -> List[Req]:
    """Overrides replace direct requirements too (as in uv), narrowed by the user's own
    specifier; a user pin the override excludes is a conflict that names both."""
    out = []
    for r in requirements:
        ov = overrides.get(r.name)
        if ov is None or r.parent == "hardware choice":
            out.append(r)
            continue
        combined = r.specifier & ov.specifier
        pins = _pins(ov.specifier)
        user_pins = _pins(r.specifier)
        if _excludes(r.specifier, pins) or _excludes(ov.specifier, user_pins):
            raise ConflictError(
                f"{r} (requested) conflicts with the advisory override {ov} "
                f"({why.get(r.name, 'advisory')}): relax the requirement, or choose "
                f"another torch build with --torch/--cuda")
        out.append(Req(r.name, combined if str(r.specifier) else ov.specifier, r.extras,
                       parent=f"{r.parent} (override)"))
    return out


def _pins(spec: SpecifierSet) -> List[str]:
    return [s.version for s in spec if s.operator in ("==", "===") and "*" not in s.version]


def _excludes(spec: SpecifierSet, pins: Sequence[str]) -> bool:
    if not pins or not str(spec):
        return False
    try:
        return not spec.contains(Version(pins[0]), prereleases=True)
    except Exception:  # noqa: BLE001 - an arbitrary '===' string
        return False


def resolve_closure(finder: Finder, requirements: Sequence[Req],
                    overrides: Mapping[str, Requirement],
                    on_pin: Optional[Any] = None,
                    why: Optional[Mapping[str, str]] = None,
                    constraints: Optional[Mapping[str, SpecifierSet]] = None) -> Resolved:
    """The closure of ``requirements``; ``overrides`` are the advisories' requirements (see
    :class:`_Provider`), ``why`` names the advisory of each for conflict messages;
    ``constraints`` the user's (``-c``), by canonical name."""
    provider = _Provider(finder, overrides, finder.python, constraints)
    finder.add_roots(requirements)
    for r in requirements:
        finder.prefetch(r)
    resolver = Resolver(provider, _Reporter(on_pin))
    try:
        result = resolver.resolve(list(requirements), max_rounds=5000)
    except ResolutionImpossible as exc:
        held = dict(provider.overrides)
        why = dict(why or {})
        for name, spec in provider.constraints.items():
            if name not in held:
                held[name] = Requirement(f"{name}{spec}")
                why[name] = "your constraints (-c)"
        raise ConflictError(_impossible(exc, finder, held, why)) from None
    except ResolutionTooDeep:
        raise ConflictError("the dependency resolution did not converge (too much "
                               "backtracking); pin some of your requirements more tightly")
    out = Resolved(replaced=set(provider.replaced))
    for ident, cand in result.mapping.items():
        if cand.name == PYTHON or cand.extras:
            continue
        out.packages[cand.name] = cand
    for ident in result.mapping:
        parents = {p for p in result.graph.iter_parents(ident) if p is not None}
        out.parents[ident.split("[")[0]] = {p.split("[")[0] for p in parents}
    return out


def _impossible(exc: Any, finder: Finder, constraints: Mapping[str, Requirement],
                why: Mapping[str, str]) -> str:
    parts = []
    held = {}
    for cause in exc.causes[:4]:
        req = cause.requirement
        if cause.parent:
            parent = f" (required by {cause.parent})"
        elif req.parent == "hardware choice":  # never "requested": the user did not ask
            parent = " (the build chosen for the hardware)"
        else:
            parent = " (requested)"
        if req.name == PYTHON:
            parts.append(f"{cause.parent} requires Python {req.specifier}, but the target is "
                         f"Python {finder.target.python}")
            continue
        cands = finder.candidates(req.name) or []
        if req.name in constraints:
            held[req.name] = (f"{req.name} is held to {constraints[req.name]} by "
                              f"{why.get(req.name, 'an advisory')}")
        paired = finder.allowed.get(req.name)
        if not cands and paired is not None:
            torch = finder.allowed_for or "the chosen torch"
            known = ", ".join(sorted(paired)) or "none"
            parts.append(f"{req}{parent}: the matrix pairs {req.name} {known} with torch "
                         f"{torch}, and no such version fits {finder.target.platform}/"
                         f"Python {finder.target.python}")
        elif not cands:
            indexes, _ = finder.policy.indexes_for(req.name)
            where = ", ".join(redact(i) for i in indexes) or "the configured indexes"
            parts.append(f"{req}{parent}: no files for {req.name} on {where} for "
                         f"{finder.target.platform}/Python {finder.target.python}")
        else:
            near = ", ".join(str(c.version) for c in cands[:5])
            parts.append(f"{req}{parent}: available {near}{' ...' if len(cands) > 5 else ''}")
    return "cannot resolve the requirements: " + "; ".join(parts + list(held.values()))


def reqs_from(requirements: Iterable[Requirement], target_env: Mapping[str, str],
              parent: str = "user") -> List[Req]:
    out = []
    for r in requirements:
        if r.marker is not None and not r.marker.evaluate(dict(target_env, extra="")):
            continue
        out.append(Req(canonicalize_name(r.name), r.specifier,
                       frozenset(canonicalize_name(e) for e in r.extras), parent=parent))
    return out


def ensure_sha256(client: IndexClient, dists: Sequence[Dist]) -> List[Tuple[Dist, str]]:
    out = []
    for d in dists:
        try:
            out.append((d, client.sha256(d)))
        except Exception as exc:  # noqa: BLE001
            raise InputError(f"cannot hash {d.filename}: {exc}") from None
    return out


def _version_key(text: str) -> str:
    """A version string as :class:`Version` prints it (the key variants.json links are
    found by); the text itself when it is not a version."""
    try:
        return str(Version(text))
    except InvalidVersion:
        return text
