"""Turn hardware targets and requirements into a :class:`~envlock.lock.Lock`.

Per target: choose the torch build (:mod:`envlock.resolve.hardware`), then resolve the
full closure against real indexes (:mod:`envlock.resolve.closure`). With ``--offline`` the
closure comes from the cache alone; with an empty cache the lock holds only the GPU core
known from the matrix (torch, its nvidia-* and triton pins, torchvision/torchaudio if
asked), without hashes, and says so (``closure = "gpu-core"``).
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Callable,
    Dict,
    Iterator,
    List,
    Mapping,
    Optional,
    Sequence,
    Tuple,
)

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envlock import __version__
from envlock.errors import ConflictError, IndexError_, NoCandidateError, OfflineError
from envlock.families import library_of_package
from envlock.index.config import IndexConfig, redact
from envlock.lock.model import (
    AppliedAdvisory,
    Lock,
    LockTarget,
    TorchChoice,
)
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import TorchVariant
from envlock.platforms import Target
from envlock.resolve.build_closure import (
    closure_of,
    constraints_kept,
    explicit_prereleases,
    gpu_core,
    override_origins,
    parse_all,
    read_ahead,
    torch_index_url,
    wanted_versions,
)
from envlock.resolve.family import MEMBER_FLOORS
from envlock.resolve.hardware import (
    Choice,
    bundled_conflict,
    choose_variant,
    judge_build,
    plan_facts,
)
from envlock.resolve.reach import torch_unavailable, way_out
from envlock.resolve.sources import SourcePolicy
from envlock.resolve.target import ResolveRequest, TargetSpec
from envlock.versions import V
from envlock.wheelvariants import VariantHost

if TYPE_CHECKING:
    from envlock.index.client import IndexClient
    from envlock.resolve.closure import Finder
    from envlock.resolve.target import FileOptions
    from envlock.resolve.torch_needs import TorchNeed, Walk

__all__ = ["resolve", "torch_index_url", "ResolveRequest", "TargetSpec"]



def libraries_of(packages: Dict[str, str], fallback: Dict[str, str]) -> Dict[str, str]:
    """Expected native library versions from resolved nvidia-* packages (matrix fallback)."""
    libs = dict(fallback)
    for name, version in packages.items():
        key = library_of_package(name)
        if key:
            libs[key] = version.split("+")[0]
    return libs


def resolve(request: ResolveRequest, matrix: Matrix, config: IndexConfig, *,
            client: Optional["IndexClient"] = None, command: str = "envlock resolve",
            on_event: Optional[Callable[[str], None]] = None) -> Lock:
    own = client is None
    if client is None:
        from envlock.index.client import IndexClient
        from envlock.matrix.cache import cache_dir

        client = IndexClient(config, cache_dir=cache_dir(), offline=request.offline)
    if client._fits is None and request.targets:
        # every page narrowed to the files some target can install (most of a big page
        # is wheels for other platforms and Pythons, kept for the whole run)
        from envlock.platforms import Target
        from envlock.resolve.closure import triple_filter

        client.narrow_pages(triple_filter(
            Target(python=t.python, platform=t.platform, glibc=t.glibc)
            for t in request.targets))
    try:
        with _fewer_collections():
            targets = [_resolve_target(request, matrix, config, client, t, on_event,
                                       command)
                       for t in request.targets]
    finally:
        if own:
            client.close()
    return Lock(
        envlock_version=__version__,
        matrix_version=matrix.version,
        inputs_hash=request.inputs_hash(matrix.version),
        inputs=request.inputs(matrix.version),
        command=command,
        targets=tuple(targets),
    )


@contextmanager
def _fewer_collections() -> Iterator[None]:
    """Run the resolution with the cyclic garbage collector's youngest generation at
    50,000 allocations instead of 700. Reading the parsed pages allocates hundreds of
    thousands of lists and strings that all live to the end, and nearly none form cycles;
    at the default threshold the collector kept walking them (measured about a tenth of a
    warm resolve). Reference counting still frees everything as usual; the previous
    thresholds come back afterwards."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], 50_000), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _held_companions(matrix: Matrix, variant: TorchVariant,
                     versions: Mapping[str, str]) -> List[str]:
    """The decision line for torchvision and torchaudio in the closure: the matrix pairing
    holds them to the chosen torch, where pip and uv take the newest (torchaudio 2.11.0
    declares no torch requirement, and with torch 2.5.1 fails at import), so a lock that
    differs from theirs says why."""
    paired = wanted_versions(matrix, variant, ())
    held = [f"{name} {versions[name]}" for name in ("torchvision", "torchaudio")
            if name in versions and name in paired]
    if not held:
        return []
    return [f"{', '.join(held)}: held to the release{'s' if len(held) > 1 else ''} paired "
            f"with torch {variant.version_string} in the matrix (pip and uv take the newest, "
            f"which may be built for another torch)"]


def _torch_from_requirements(request: ResolveRequest, matrix: Matrix, config: IndexConfig,
                             client: "IndexClient", target: Target,
                             started: Optional[Callable[[], None]] = None,
                             ) -> Tuple["Walk", Optional["Finder"]]:
    """What the requirements' closure says of torch, torchvision, torchaudio, triton, and
    the finder that walked it (the closure adopts its candidate lists)."""
    from envlock.resolve.torch_needs import Walk, torch_needs

    if not request.requirements:
        return Walk([]), None
    from envlock.resolve.closure import Finder

    finder = Finder(client, SourcePolicy(config, config.index_url), target,
                    prerelease=request.prerelease,
                    explicit_prereleases=explicit_prereleases(request.requirements))
    return torch_needs(finder, request.requirements, target.markers, started=started), finder


def _choose(matrix: Matrix, spec: TargetSpec, request: ResolveRequest,
            needs: Sequence["TorchNeed"]) -> Tuple[Choice, List[str], List[str]]:
    """The hardware choice among the builds the requirements allow, the needs that
    narrowed it, and the needs left out (so a later conflict can name them).

    First every need (found on the path of the requirements' newest versions, the path
    the resolver tries first). If that leaves nothing, only the forced needs (each link of
    their chain an exact pin or the only version there is): an unforced one can still give
    way to an older version that suits the build, which the closure's backtracking finds.
    When the forced needs contradict ``--torch`` (or each other) that is a requirements
    conflict (exit 6); when they leave no build the hardware runs, the error names the
    chains and the hardware reason (exit 3).
    """
    from envlock.resolve.torch_needs import narrowed_spec

    wants = tuple(str(r) for r in request.requirements)
    torch_all, lines_all = narrowed_spec(matrix, request.torch, needs)
    forced = [n for n in needs if n.forced]
    torch_forced, lines_forced = narrowed_spec(matrix, request.torch, forced)
    if lines_all:
        try:
            return choose_variant(matrix, spec, torch_all, request.cuda, wants,
                                  prefer=request.prefer), lines_all, []
        except NoCandidateError:
            pass  # below: only the forced needs, or none
    dropped = [line for line in lines_all if line not in lines_forced]
    if not lines_forced:
        return choose_variant(matrix, spec, request.torch, request.cuda, wants,
                              prefer=request.prefer), [], dropped
    if not any(torch_forced.contains(V(r), prereleases=True) for r in matrix.torch_releases):
        asked = f"torch{request.torch} (requested); " if str(request.torch) else ""
        raise ConflictError(f"the requirements' torch constraints cannot all hold: {asked}"
                            + "; ".join(lines_forced))
    try:
        return choose_variant(matrix, spec, torch_forced, request.cuda, wants,
                              prefer=request.prefer), lines_forced, dropped
    except NoCandidateError as exc:
        raise NoCandidateError(f"no torch build fits both the requirements "
                               f"({'; '.join(lines_forced)}) and the hardware: {exc.message}",
                               hint=exc.hint) from None


def _resolve_target(request: ResolveRequest, matrix: Matrix, config: IndexConfig,
                    client: "IndexClient", spec: TargetSpec,
                    on_event: Optional[Callable[[str], None]],
                    command: str = "") -> LockTarget:
    """The target's lock: the build chosen for the hardware among those the requirements
    allow, and its closure.

    The requirements' torch constraints are read off the path of their newest versions
    (the path a resolver tries first). A constraint that some link of its chain could
    relax (an older version that asks less) is not forced; when such a constraint chose
    the build and the closure then fails on that build, the build is chosen once more from
    the forced constraints only, and the closure tried on it: the resolver's backtracking
    can then reach the older versions. Only when that fails too is the first conflict the
    answer.
    """
    target = Target(python=spec.python, platform=spec.platform, glibc=spec.glibc)

    def ahead() -> None:  # once the walk's first pages are queued: they come first
        if not request.offline:
            read_ahead(request, matrix, config, client, spec, target)

    walk, walked = _torch_from_requirements(request, matrix, config, client, target, ahead)
    needs = walk.needs
    walk_notes = [walk.note] if walk.note else []
    try:
        picked = _choose(matrix, spec, request, needs)
    except NoCandidateError as exc:
        _family_way_out(matrix, request, spec, exc)
        raise
    try:
        return _target_for(request, matrix, config, client, spec, target, picked, walked,
                           on_event, walk_notes, command)
    except ConflictError as exc:
        forced = [n for n in needs if n.forced]
        unforced_chose = any(not n.forced and str(n) in picked[1] for n in needs)
        if not unforced_chose:
            raise
        try:
            again = _choose(matrix, spec, request, forced)
        except (NoCandidateError, ConflictError):
            raise exc from None
        if again[0].variant == picked[0].variant:
            raise
        note = (f"torch first narrowed by the requirements' newest versions "
                f"({'; '.join(picked[1])}) to {picked[0].variant.version_string} "
                f"({picked[0].variant.tag}), where the closure failed: {exc.message}; "
                f"chosen again from the constraints no older version can relax")
        try:
            return _target_for(request, matrix, config, client, spec, target, again, walked,
                               on_event, [note, *walk_notes], command)
        except ConflictError:
            raise exc from None


def _target_for(request: ResolveRequest, matrix: Matrix, config: IndexConfig,
                client: "IndexClient", spec: TargetSpec, target: Target,
                picked: Tuple[Choice, List[str], List[str]], walked: Optional["Finder"],
                on_event: Optional[Callable[[str], None]],
                notes: Sequence[str] = (), command: str = "") -> LockTarget:
    """The lock target for one choice of build (see :func:`_resolve_target`)."""
    choice, narrowed_by, dropped = picked
    family_note, member_floors = _check_family(matrix, request, spec, choice)
    fallback: List[str] = []
    if not request.offline:
        choice, fallback = _reachable_choice(request, matrix, config, client, spec, choice,
                                             command)
    v = choice.variant
    derived = dict(choice.libraries.versions) if choice.libraries else dict(v.libraries)
    tindex = torch_index_url(v, config, request.pytorch_index)
    if on_event:
        on_event(f"{spec.name}: torch {v.version_string} ({v.tag}) from {redact(tindex)}")
    decision = list(choice.decision)
    if narrowed_by:
        decision.insert(1, "torch narrowed by the requirements: " + "; ".join(narrowed_by))
    within = "the hardware" + (" and --torch" if str(request.torch) else "")
    if dropped:
        decision.insert(1, f"torch not narrowed by the requirements' newest versions (no "
                           f"build allowed for {within} satisfies them; older versions "
                           f"may): " + "; ".join(dropped))
    decision[1:1] = list(spec.notes) + ([family_note] if family_note else []) + fallback
    decision[1:1] = list(notes)
    advisories = list(choice.advisories)
    overrides = {str(canonicalize_name(r.name)): r for r in choice.overrides}
    closure = "full"
    host = _variant_host(matrix, spec)
    vnotes: List[str] = []
    try:
        if request.offline and not client.is_cached(tindex, "torch"):
            raise OfflineError(f"the index page of torch on {redact(tindex)} is not cached")
        packages, resolved_versions, replaced = closure_of(
            request, matrix, client, config, target, v, tindex, overrides, on_event,
            override_origins(advisories), walked, host, vnotes)
        # Re-judge advisories on the real pins (the index may pin what the matrix did not,
        # and the closure is the complete package list: may-apply ones get decided).
        libs = libraries_of(resolved_versions, derived)
        advisories, extra, notes = _rejudge(matrix, spec, choice, advisories, resolved_versions,
                                            libs)
        advisories = constraints_kept(advisories, replaced)
        decision.extend(notes)
        decision.extend(note for (name, version), note in sorted(client.trusted.items())
                        if resolved_versions.get(name) == version)
        decision.extend(_held_companions(matrix, v, resolved_versions))
        if extra:
            for aid in extra:
                adv = matrix.advisories[aid]
                for r in adv.resolve_override:
                    req = Requirement(r)
                    overrides[str(canonicalize_name(req.name))] = req
            decision.append("re-resolved with overrides after reading the index's pins: "
                            + ", ".join(extra))
            vnotes.clear()
            packages, resolved_versions, replaced = closure_of(
                request, matrix, client, config, target, v, tindex, overrides, on_event,
                override_origins(advisories), walked, host, vnotes)
        advisories = constraints_kept(advisories, replaced)
        decision.extend(vnotes)
    except OfflineError as exc:
        if not request.offline:
            raise
        closure = "gpu-core"
        decision.append(f"offline and not cached ({exc.message}); the lock holds only the "
                        f"GPU core from the matrix, without hashes or transitive closure")
        packages, resolved_versions = gpu_core(matrix, request, target, v, tindex, overrides)
        pinned = {str(canonicalize_name(r.name)) for r in parse_all(v.pins)}
        replaced = {n for n in overrides if n in pinned}
        advisories = constraints_kept(advisories, replaced)
    except ConflictError as exc:
        if not dropped:
            raise
        raise ConflictError(f"{exc.message}; the requirements' newest versions need "
                            f"{'; '.join(dropped)}, and no build allowed for {within} "
                            f"satisfies that", hint=exc.hint) from None
    except IndexError_ as exc:
        raise IndexError_(exc.message, hint=way_out(v, _other_builds(matrix, request, spec, v,
                                                                     config),
                                                    command)) from None
    libs = libraries_of(resolved_versions, derived)
    origins = override_origins(advisories)
    for name, req in overrides.items():
        by = origins.get(name, "advisory")
        if name in replaced:
            decision.append(f"override: {req} ({by}) instead of the build's own pin")
        else:
            decision.append(f"constraint: {req} ({by}); the other packages were resolved "
                            f"to versions compatible with it")
    need = choice.need
    ienv = _installer_env(matrix, spec, v, decision)
    return LockTarget(
        name=spec.name,
        gpus=tuple(g.nvml_names[0] if g.nvml_names else g.name for g in spec.gpus),
        gpu_models=tuple(g.id for g in spec.gpus),
        compute_capabilities=tuple(g.compute_capability for g in spec.gpus),
        python=spec.python,
        platform=spec.platform,
        glibc=spec.glibc,
        driver=spec.driver,
        driver_min=None if spec.cpu else need.minimum,
        driver_min_reasons=() if spec.cpu else need.reasons + (
            (MEMBER_FLOORS + member_floors,) if member_floors else ()),
        torch=TorchChoice(
            version=v.release, variant=v.tag, cuda=v.cuda, index=redact(tindex),
            installed_version=resolved_versions.get("torch", v.version_string),
            arch_list=tuple(v.sass) if v.sass is not None else None,
            ptx=tuple(v.ptx) if v.ptx is not None else None, on_pypi=v.on_pypi),
        libraries=libs,
        advisories=tuple(advisories),
        packages=tuple(packages),
        closure=closure,
        decision=tuple(decision),
        env=dict(request.env),
        machines="separate" if spec.separate else "one",
        family=spec.family,
        installer_env=ienv,
    )


def _installer_env(matrix: Matrix, spec: TargetSpec, v: TorchVariant,
                   decision: List[str]) -> Dict[str, str]:
    """The forced values other installers need on a host without this GPU (appends the
    reasons to ``decision``)."""
    from envlock.resolve.installer_env import installer_env

    if spec.cpu:
        return {}
    env, notes = installer_env(matrix, spec.gpus, v.cuda, spec.driver)
    decision.extend(notes)
    return env


def _reachable_choice(request: ResolveRequest, matrix: Matrix, config: IndexConfig,
                      client: "IndexClient", spec: TargetSpec,
                      choice: Choice, command: str = "") -> Tuple[Choice, List[str]]:
    """The chosen build if its index serves its torch; else an equivalent build (same
    release, a CUDA line that qualifies by the same rules) from an index that does, with a
    decision line saying so; else an index error naming the ways out."""
    from packaging.specifiers import SpecifierSet

    down: Dict[str, str] = {}
    first = choice.variant
    while True:
        v = choice.variant
        tindex = torch_index_url(v, config, request.pytorch_index)
        why = down.get(tindex) or torch_unavailable(client, tindex, v)
        if why is None:
            break
        down[tindex] = why
        try:
            choice = choose_variant(
                matrix, spec, SpecifierSet(f"=={first.release}"), request.cuda,
                tuple(str(r) for r in request.requirements), prefer=request.prefer,
                usable=lambda x: not _is_down(torch_index_url(x, config,
                                                              request.pytorch_index), down))
        except NoCandidateError:
            raise IndexError_(
                f"{spec.name}: torch {first.version_string} ({first.tag}) cannot be fetched: "
                + "; ".join(down.values())
                + f"; no equivalent build of torch {first.release} is on a reachable index",
                hint=way_out(first, _other_builds(matrix, request, spec, first, config,
                                                  down), command)) from None
    if choice.variant is first:
        return choice, []
    v = choice.variant
    where = "PyPI" if v.on_pypi else redact(torch_index_url(v, config, request.pytorch_index))
    line = (f"index fallback: {'; '.join(down.values())}; using torch {v.version_string} "
            f"({v.tag}) from {where} instead of {first.tag}: the same torch release, CUDA "
            f"{v.cuda} qualifies by the same rules")
    return choice, [line]


def _is_down(index: str, down: Dict[str, str]) -> bool:
    """Whether ``index`` failed, or sits on a host that could not be reached at all."""
    if index in down:
        return True
    host = _host(index)
    return any(why.startswith("cannot reach") and _host(url) == host
               for url, why in down.items())


def _host(url: str) -> str:
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def _other_builds(matrix: Matrix, request: ResolveRequest, spec: TargetSpec,
                  variant: TorchVariant, config: IndexConfig,
                  down: Optional[Dict[str, str]] = None) -> List[TorchVariant]:
    """Qualifying builds on other CUDA lines (any allowed release), best first, for the
    ``--cuda`` way out of an index error."""
    avoid = set(down or {}) | {torch_index_url(variant, config, request.pytorch_index)}
    try:
        c = choose_variant(matrix, spec, request.torch, None,
                           tuple(str(r) for r in request.requirements), prefer=request.prefer,
                           usable=lambda x: x.cuda != variant.cuda and not _is_down(
                               torch_index_url(x, config, request.pytorch_index),
                               {**{u: "" for u in avoid}, **(down or {})}))
    except NoCandidateError:
        return []
    return [c.variant]


def _check_family(matrix: Matrix, request: ResolveRequest, spec: TargetSpec,
                  choice: Choice) -> Tuple[Optional[str], Optional[str]]:
    """A family target (``--gpu H100``) covers every member when each member on its own
    gets the same packages (build and advisories); the lock then takes the highest member
    floor. Returns the decision note and the per-member floors (None when they agree).
    When the packages differ the user must name a member, or a driver on which they
    agree (exit 2); the error lists the choices that each work."""
    if not spec.family or len(spec.gpus) < 2:
        return None, None
    from envlock.errors import UsageError
    from envlock.resolve.family import (
        member_floors,
        member_name,
        member_plans,
        same_packages,
    )

    reqs = tuple(str(r) for r in request.requirements)
    plans = member_plans(matrix, spec, request.torch, request.cuda, reqs, request.prefer,
                         driver=spec.driver)
    if not same_packages(plans):
        listing = "; ".join(
            f"{member_name(p.gpu)}: " + (
                f"torch {p.choice.variant.version_string}, driver >= {p.choice.need.minimum}"
                + (", advisories " + ", ".join(sorted(a.id for a in p.choice.advisories))
                   if p.choice.advisories else "") if p.choice is not None else p.why)
            for p in plans)
        ways = [f"--gpu '{member_name(p.gpu)}'" for p in plans if p.choice is not None]
        agree = _agreeing_driver(matrix, request, spec, reqs)
        if agree:
            ways.append(f"--driver {agree} (every member gets one lock)")
        raise UsageError(f"--gpu {spec.family} is a family whose members need different locks "
                         f"({listing}); name the member, or a driver they agree on: "
                         + ", ".join(ways))
    names = ", ".join(g.name for g in spec.gpus)
    floors = member_floors(spec.family, plans)
    same = (f"and advisories, and driver {spec.driver} runs it on each" if spec.driver
            else "and advisories" + (f"; the driver floor is the highest member's ({floors})"
                                     if floors else " and driver floor"))
    return (f"{spec.family} is a family ({names}; compute capability "
            f"{spec.gpus[0].compute_capability}): each member gets this same build "
            f"{same}, so the lock covers all of them"), floors


def _family_way_out(matrix: Matrix, request: ResolveRequest, spec: TargetSpec,
                     exc: NoCandidateError) -> None:
    """No build runs on every member of a family with the given driver (the H100 NVL
    needs R535 where the SXM and PCIe boards run R525): when some members do run one,
    the error (still exit 3) lists the choices that each work: those members by name,
    and a driver every member runs."""
    if not spec.family or len(spec.gpus) < 2 or not spec.driver:
        return
    from envlock.resolve.family import member_name, member_plans

    reqs = tuple(str(r) for r in request.requirements)
    plans = member_plans(matrix, spec, request.torch, request.cuda, reqs, request.prefer,
                         driver=spec.driver)
    works = [p for p in plans if p.choice is not None]
    if not works or len(works) == len(plans):
        return
    ways = [f"--gpu '{member_name(p.gpu)}'" for p in works]
    agree = _agreeing_driver(matrix, request, spec, reqs)
    if agree:
        ways.append(f"--driver {agree} (one lock for every member)")
    failing = [p for p in plans if p.choice is None]
    fails = ", ".join(member_name(p.gpu) for p in failing)
    raise NoCandidateError(
        f"--gpu {spec.family}: driver {spec.driver} runs no allowed build on {fails} "
        f"({failing[0].why or exc.message}); it does on "
        f"{', '.join(member_name(p.gpu) for p in works)}",
        hint="name the member, or a driver every member runs: " + ", ".join(ways)) from None


def _agreeing_driver(matrix: Matrix, request: ResolveRequest, spec: TargetSpec,
                     reqs: Tuple[str, ...]) -> Optional[str]:
    """A driver on which every member of a family gets the same packages: the highest
    floor of the members chosen without a driver, if it makes them agree."""
    from envlock.resolve.family import member_plans, same_packages

    free = member_plans(matrix, spec, request.torch, request.cuda, reqs, request.prefer)
    floors = [p.floor for p in free if p.floor]
    if not floors:
        return None
    top = max(floors, key=V)
    if top == spec.driver:
        return None
    at = member_plans(matrix, spec, request.torch, request.cuda, reqs, request.prefer,
                      driver=top)
    return top if same_packages(at) else None


def _rejudge(matrix: Matrix, spec: TargetSpec, choice: Choice,
             advisories: List[AppliedAdvisory], versions: Dict[str, str],
             libs: Dict[str, str]) -> Tuple[List[AppliedAdvisory], List[str], List[str]]:
    """Judge the advisories again on a full closure (a complete package list).

    Returns the advisories to record, the ids whose overrides must be added (true now and
    fixable), and decision lines. A may-apply advisory now known false is dropped; one now
    true with an override becomes an override; one still unknown keeps its unknown facts.
    """
    facts = plan_facts(matrix, spec, choice.variant, choice.libraries, packages=versions,
                       libraries=libs, complete=True)
    verdicts = {vd.advisory.id: vd for vd in judge_build(matrix, facts)}
    out: List[AppliedAdvisory] = []
    notes: List[str] = []
    extra: List[str] = []
    have = {a.id for a in advisories if a.action != "may-apply"}
    for a in advisories:
        vd = verdicts.get(a.id)
        # a floor override already applied changed the packages it is judged on: keep it
        if not a.unknown or vd is None or a.action == "override":
            out.append(a)
            continue
        if vd.outcome.value is False:
            notes.append(f"{a.id} ruled out on the resolved packages "
                         f"({', '.join(vd.outcome.because)})")
            continue
        if vd.outcome.value is None:
            out.append(AppliedAdvisory(a.id, a.action, a.summary, a.override,
                                       vd.outcome.unknown))
            continue
        notes.append(f"{a.id} is true on the resolved packages "
                     f"({', '.join(vd.outcome.because)})")
        if vd.action != "override":  # an exclude the chosen build could not avoid
            out.append(AppliedAdvisory(a.id, "warning", a.summary))
    for aid, vd in verdicts.items():
        if vd.outcome.value is not True or vd.action != "override" or aid in have:
            continue
        if any(a.id == aid and a.action == "override" for a in out):
            continue
        out = [a for a in out if a.id != aid]
        adv = vd.advisory
        if choice.libraries is not None and bundled_conflict(adv, choice.libraries):
            out.append(AppliedAdvisory(aid, "warning", f"{adv.title} (its override cannot "
                                                       f"replace the library in the wheel)"))
            notes.append(f"{aid} applies on the resolved packages but its override cannot "
                         f"replace a library bundled in the torch wheel")
            continue
        out.append(AppliedAdvisory(aid, "override", adv.title, tuple(adv.resolve_override)))
        extra.append(aid)
    return out, extra, notes


def _variant_host(matrix: Matrix, spec: TargetSpec) -> VariantHost:
    """What PEP 825 variant wheels are judged against for ``spec``: its GPUs and the CUDA
    version its driver supports (unknown without a driver)."""
    drv_cuda: Optional[str] = None
    if spec.driver and not spec.cpu:
        try:
            drv_cuda = matrix.driver_full_cuda(spec.driver)
        except ValueError:
            drv_cuda = None
    ccs = () if spec.cpu else tuple(g.compute_capability for g in spec.gpus)
    return VariantHost(drv_cuda, ccs)


def requirement_lines_from_cli(args_reqs: Sequence[str], files: Sequence[str],
                               constraint_files: Sequence[str] = (),
                               options: Optional["FileOptions"] = None) -> Tuple[
        List[Tuple[str, str]], Dict[str, str]]:
    """The requirement lines of the command line and of ``-r`` files, and each file's
    digest; ``options`` (when given) collects the files' index options and the lines of
    every constraints file (``-c`` lines and ``constraint_files``)."""
    from envlock.resolve.target import FileOptions, read_requirement_file

    options = FileOptions() if options is None else options
    lines = [("command line", r) for r in args_reqs]
    digests: Dict[str, str] = {}
    for f in files:
        more, d = read_requirement_file(f, options=options)
        lines.extend(more)
        digests.update({str(Path(k)): val for k, val in d.items()})
    for f in constraint_files:
        more, d = read_requirement_file(f, options=options, constraint=True)
        options.constraints.extend(more)
        digests.update({str(Path(k)): val for k, val in d.items()})
    return lines, digests
