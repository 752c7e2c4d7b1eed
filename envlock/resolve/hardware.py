"""Choosing the PyTorch build for a hardware target.

A build (release x CUDA tag x index, for the target's platform) qualifies when:

1. its release satisfies the user's torch specifier, and it has wheels for the Python;
2. its compiled code runs on every target GPU, by CUDA's rule (:mod:`envlock.kernels`);
   a build whose arch list the matrix does not know is not assumed to work;
3. with a known driver: the driver runs its CUDA (toolkit minimum, or the minor-version
   compatibility floor of its major, except where PTX JIT is needed) and knows the GPUs;
4. no advisory with ``resolve.action = "exclude"`` fires for it.

Preference, documented and deterministic: the newest torch release allowed, then the
newest CUDA line (the driver runs), then fewest advisory overrides, then the PyPI build
over the same build on the PyTorch index.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from envlock.knowledge.evaluate import Outcome, judge
from envlock.knowledge.facts import Facts, facts_from_plan
from envlock.families import library_of_package
from envlock.errors import NoCandidateError
from envlock.lock.model import AppliedAdvisory
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import Advisory, Gpu, TorchVariant
from envlock.matrix.rules import (
    BuildLibraries,
    DriverNeed,
    build_libraries,
    driver_need,
    driver_verdict,
    gpu_coverage,
)
from envlock.resolve.target import TargetSpec
from envlock.versions import driver_label, V

__all__ = ["Choice", "choose_variant", "planned_packages", "advisories_for", "judge_build",
           "plan_facts", "Verdict", "floor_override"]


@dataclass(frozen=True)
class Choice:
    variant: TorchVariant
    decision: Tuple[str, ...]
    advisories: Tuple[AppliedAdvisory, ...]
    overrides: Tuple[Requirement, ...]
    need: DriverNeed
    driver_how: Optional[str]
    libraries: Optional[BuildLibraries] = None


_PLANNED: Dict[Tuple[str, str, str, str], Dict[str, str]] = {}


def planned_packages(variant: TorchVariant,
                     pins: Optional[Sequence[str]] = None) -> Dict[str, str]:
    """name -> exact version for every ``==`` pin of a build (and torch itself).

    ``pins`` replaces the build's own pins (a PyTorch-index build that is the same wheel as
    the PyPI build shares the PyPI pins, see :func:`build_libraries`).
    """
    key = (variant.release, variant.tag, variant.platform, variant.index)
    if pins is None and key in _PLANNED:
        return dict(_PLANNED[key])
    out = {"torch": variant.version_string}
    for text in (variant.pins if pins is None else pins):
        try:
            req = Requirement(text)
        except Exception:  # noqa: BLE001 - validated at load; be defensive
            continue
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if len(exact) == 1 and "*" not in exact[0]:
            out[req.name] = exact[0]
    if pins is None:
        _PLANNED[key] = dict(out)
    return out


@dataclass(frozen=True)
class Verdict:
    """One exclude/override/warn advisory judged on one build's planned facts."""

    advisory: Advisory
    outcome: Outcome

    @property
    def action(self) -> str:
        return self.advisory.resolve_action or "warn"


def plan_facts(matrix: Matrix, target: TargetSpec, variant: TorchVariant,
               libs: Optional[BuildLibraries] = None,
               packages: Optional[Dict[str, str]] = None,
               libraries: Optional[Dict[str, str]] = None,
               complete: Optional[bool] = None) -> Facts:
    """The facts of the environment a lock with this build would give.

    Without ``packages``, the packages are the build's planned pins; ``complete`` says
    whether nothing else is installed (False when the user adds requirements: the closure
    judges those later). CUDA wheels stay unknown when the build's pins are not known.
    Library versions are the derived ones unless ``libraries`` is given.
    """
    libs = libs if libs is not None else build_libraries(matrix, variant)
    unknown_prefixes: Tuple[str, ...] = ()
    if packages is None:
        packages = planned_packages(variant, libs.pins if libs.pins != variant.pins else None)
        if not libs.pins_known:
            unknown_prefixes = ("nvidia-", "cuda-")
    return facts_from_plan(
        matrix, gpus=target.gpus, driver=target.driver,
        torch_version=variant.version_string, torch_cuda=variant.cuda,
        arch_list=list(variant.targets) if variant.sass is not None else None,
        packages=packages,
        libraries=libraries if libraries is not None else dict(libs.versions),
        python=target.python, platform=target.platform, glibc=target.glibc,
        packages_complete=bool(complete), libraries_complete=not libs.unknown,
        unknown_prefixes=unknown_prefixes, separate_machines=target.separate)


def judge_build(matrix: Matrix, facts: Facts) -> List[Verdict]:
    """Every advisory with a condition and a resolver action, judged on ``facts``."""
    out = []
    for adv in matrix.advisories.values():
        if adv.condition is None:
            continue
        out.append(Verdict(adv, judge(adv.condition, facts)))
    return out


def advisories_for(matrix: Matrix, target: TargetSpec, variant: TorchVariant,
                   packages: Optional[Dict[str, str]] = None,
                   libraries: Optional[Dict[str, str]] = None) -> List[Tuple[str, str]]:
    """(advisory id, action) for every advisory that is *true* on this plan."""
    facts = plan_facts(matrix, target, variant, packages=packages, libraries=libraries,
                       complete=packages is not None)
    return [(v.advisory.id, v.action) for v in judge_build(matrix, facts)
            if v.outcome.value is True]


def bundled_conflict(adv: Advisory, libs: BuildLibraries) -> List[str]:
    """The libraries an advisory's override would replace that sit inside the torch wheel."""
    out = []
    for text in adv.resolve_override:
        lib = library_of_package(Requirement(text).name)
        if lib is not None and lib in libs.bundled:
            out.append(lib)
    return out


def floor_override(adv: Advisory, planned: Dict[str, str], libs: BuildLibraries) -> bool:
    """Whether an override only raises pins the build already has (same major): a floor
    that cannot hurt, so it is applied even when the advisory is only *may apply*."""
    if not adv.resolve_override or bundled_conflict(adv, libs):
        return False
    for text in adv.resolve_override:
        req = Requirement(text)
        have = planned.get(str(req.name)) or planned.get(req.name.lower())
        specs = list(req.specifier)
        if have is None or len(specs) != 1 or specs[0].operator not in ("==", ">="):
            return False
        want = V(specs[0].version)
        cur = V(have.split("+")[0])
        if want.release[:1] != cur.release[:1] or want < cur:
            return False
    return True


def _fmt_facts(outcome: Outcome) -> str:
    return ", ".join(outcome.because) if outcome.because else "its condition"


@dataclass
class _Candidate:
    variant: TorchVariant
    overrides: Tuple[Requirement, ...] = ()
    applied: Tuple[AppliedAdvisory, ...] = ()
    driver_how: Optional[str] = None
    need: Optional[DriverNeed] = None
    libs: Optional[BuildLibraries] = None
    #: exclude/override advisories whose condition is unknown for this build
    unknown: Tuple[Verdict, ...] = ()
    #: exclude/override advisories ruled out for this build by derived facts
    derived_false: Tuple[Verdict, ...] = ()
    notes: Tuple[str, ...] = ()

    def rank(self) -> Tuple[object, ...]:
        v = self.variant
        return (V(v.release), -len(self.unknown), V(v.cuda) if v.cuda else V("0"),
                -len(self.overrides), v.on_pypi, v.tag)

    def label(self) -> str:
        v = self.variant
        return f"torch {v.version_string} ({'PyPI' if v.on_pypi else v.index})"


def _with_index(matrix: Matrix, v: TorchVariant, base: str) -> str:
    default = "https://download.pytorch.org/whl"
    if v.on_pypi or not v.index.startswith(default) or base.rstrip("/") == default:
        return v.index
    return base.rstrip("/") + v.index[len(default):]


def choose_variant(matrix: Matrix, target: TargetSpec, spec: SpecifierSet,
                   cuda: Optional[str] = None,
                   target_requirements: Sequence[str] = (), *,
                   prefer: Optional[str] = None,
                   usable: Optional[Callable[[TorchVariant], bool]] = None) -> Choice:
    """The build for ``target``; ``target_requirements`` names what the user adds to torch
    (their packages are unknown to the hardware choice: the closure judges them later).

    ``prefer`` (``pypi`` or ``pytorch-index``) ranks the builds of that index first within
    the chosen release, before the CUDA line; ``usable`` drops builds whose index cannot
    serve them (an unreachable index, a mirror without that variant)."""
    pool = matrix.variants_for(platform=target.platform)
    releases = {v.release for v in pool}
    ok = {r for r in releases if spec.contains(V(r), prereleases=True)}
    allowed = [v for v in pool if v.release in ok]
    if target.cpu:
        base = [v for v in allowed if v.tag == "cpu"]
    else:
        base = [v for v in allowed if v.tag != "cpu"]
    base = [v for v in base if not v.pythons or target.python in v.pythons]
    if cuda:
        base = [v for v in base if v.cuda == cuda]
    if usable is not None:
        base = [v for v in base if usable(v)]
    if not base:
        raise NoCandidateError(_no_base(matrix, target, spec, cuda, allowed))

    kernel_ok: List[_Candidate] = []
    for v in base:
        if target.cpu:
            kernel_ok.append(_Candidate(v))
            continue
        covs = [gpu_coverage(v, g) for g in target.gpus]
        if all(c is not None and c.ok for c in covs):
            kernel_ok.append(_Candidate(v))

    runnable: List[_Candidate] = []
    for c in kernel_ok:
        need = driver_need(matrix, c.variant, target.gpus)
        c.need = need
        if target.driver:
            verdict = driver_verdict(matrix, c.variant, target.gpus, target.driver)
            if not verdict.ok:
                continue
            c.driver_how = verdict.how
        elif (need.ceiling_branch is not None and need.minimum is not None
              and int(need.minimum.split(".")[0]) > need.ceiling_branch):
            continue
        runnable.append(c)

    # Advisories are judged release by release, newest first: the first release with a
    # build no advisory rules out holds the answer; within it, builds are ranked (rank()).
    clean: List[_Candidate] = []
    excluded: Dict[str, List[TorchVariant]] = {}
    steps: List[str] = []
    complete = not target_requirements
    runnable.sort(key=lambda c: V(c.variant.release), reverse=True)
    for _, group in groupby(runnable, key=lambda c: V(c.variant.release)):
        steps = []
        for c in group:
            if not _judge_candidate(matrix, target, c, complete, excluded, steps):
                continue
            clean.append(c)
        if clean:
            steps.extend(_unknown_steps(clean))
            break

    if not clean:
        raise NoCandidateError(_explain(matrix, target, spec, cuda, base, kernel_ok,
                                        runnable, excluded))
    if prefer in ("pypi", "pytorch-index"):
        want_pypi = prefer == "pypi"
        clean.sort(key=lambda c: ((c.variant.on_pypi == want_pypi),) + c.rank(), reverse=True)
    else:
        clean.sort(key=lambda c: c.rank(), reverse=True)
    best = clean[0]
    applied = list(best.applied)
    overrides = list(best.overrides)
    assert best.libs is not None
    planned = planned_packages(best.variant,
                               best.libs.pins if best.libs.pins != best.variant.pins else None)
    for vd in best.unknown:
        adv = vd.advisory
        facts = ", ".join(vd.outcome.unknown)
        if vd.action == "override" and floor_override(adv, planned, best.libs):
            overrides.extend(Requirement(r) for r in adv.resolve_override)
            applied.append(AppliedAdvisory(adv.id, "override", adv.title,
                                           tuple(adv.resolve_override), vd.outcome.unknown))
            steps.append(f"{adv.id} may apply to the chosen build ({facts} unknown); its "
                         f"override {', '.join(adv.resolve_override)} only raises the build's "
                         f"own pin, so it is applied")
        else:
            applied.append(AppliedAdvisory(adv.id, "may-apply", adv.title, (),
                                           vd.outcome.unknown))
            steps.append(f"{adv.id} may apply to the chosen build ({facts} unknown) and no "
                         f"build known to be clear of it qualifies: recorded as may-apply")
    for vd in best.derived_false:
        steps.append(f"{vd.advisory.id} does not apply to {best.label()}: "
                     f"{'; '.join(vd.outcome.because)}")
    best_key = (V(best.variant.release), V(best.variant.cuda or "0"))
    for aid, variants in sorted(excluded.items()):
        shown = [v for v in variants if (V(v.release), V(v.cuda or "0")) >= best_key]
        if shown:
            adv = matrix.advisories[aid]
            builds = ", ".join(sorted({_short(v) for v in shown}))
            applied.append(AppliedAdvisory(aid, "excluded", f"{adv.title} (excluded {builds})"))
    decision = _decision(matrix, target, spec, cuda, best, runnable)
    if prefer and clean[0] is not max(clean, key=lambda c: c.rank()):
        why = (f"--prefer {prefer}: builds on "
               f"{'PyPI' if prefer == 'pypi' else 'the PyTorch index'} rank first among the "
               f"qualifying builds of {best.variant.release}")
        stale = "newer CUDA lines have advisories the matrix cannot rule out"
        if any(stale in d for d in decision):
            decision = [d.replace(stale, why) for d in decision]
        else:
            decision.append(why)
    decision[2:2] = steps
    if overrides:
        decision = [d for d in decision if not d.startswith("overrides: ")]
        decision.append("overrides: " + ", ".join(str(r) for r in overrides))
    assert best.need is not None
    return Choice(variant=best.variant, decision=tuple(decision), advisories=tuple(applied),
                  overrides=tuple(overrides), need=best.need, driver_how=best.driver_how,
                  libraries=best.libs)


def _unknown_steps(group: Sequence[_Candidate]) -> List[str]:
    """Decision lines for unknown advisories: one line when every build shares it."""
    lines = []
    ids = sorted({vd.advisory.id for c in group for vd in c.unknown})
    for aid in ids:
        having = [(c, vd) for c in group for vd in c.unknown if vd.advisory.id == aid]
        if len(having) == len(group) and len(group) > 1:
            facts = sorted({f for _, vd in having for f in vd.outcome.unknown})
            lines.append(f"{aid} is unknown for every qualifying build of torch "
                         f"{group[0].variant.release} ({', '.join(facts)} unknown)")
            continue
        for c, vd in having:
            assert c.libs is not None
            libs = c.libs
            why = "; ".join(sorted({libs.unknown[p.split(".")[1]] for p in vd.outcome.unknown
                                    if p.startswith("library.")
                                    and p.split(".")[1] in libs.unknown}))
            lines.append(f"{aid} is unknown for {c.label()}: {', '.join(vd.outcome.unknown)} "
                         f"unknown" + (f" ({why})" if why else "")
                         + "; ranked below builds where it is known false or fixable")
    return lines


def _short(v: TorchVariant) -> str:
    return f"{v.version_string}" + (" from PyPI" if v.on_pypi else "")


def _judge_candidate(matrix: Matrix, target: TargetSpec, c: _Candidate, complete: bool,
                     excluded: Dict[str, List[TorchVariant]], steps: List[str]) -> bool:
    """Judge every advisory on one build; False when one rules the build out."""
    libs = build_libraries(matrix, c.variant)
    c.libs = libs
    facts = plan_facts(matrix, target, c.variant, libs, complete=complete)
    overrides: List[Requirement] = []
    applied: List[AppliedAdvisory] = []
    unknown: List[Verdict] = []
    derived_false: List[Verdict] = []
    for vd in judge_build(matrix, facts):
        adv, action, value = vd.advisory, vd.action, vd.outcome.value
        if value is None:
            if action in ("exclude", "override"):
                unknown.append(vd)
            continue
        if value is False:
            if action in ("exclude", "override") and any(
                    "(derived from" in b for b in vd.outcome.because):
                derived_false.append(vd)
            continue
        if action == "exclude":
            excluded.setdefault(adv.id, []).append(c.variant)
            steps.append(f"{adv.id} excludes {c.label()} ({_fmt_facts(vd.outcome)})")
            return False
        if action == "override":
            inside = bundled_conflict(adv, libs)
            if inside:
                excluded.setdefault(adv.id, []).append(c.variant)
                srcs = "; ".join(f"{lib} {libs.versions.get(lib, '?')} "
                                 f"{libs.source.get(lib, '')}".strip() for lib in inside)
                steps.append(f"{adv.id} applies to {c.label()} ({_fmt_facts(vd.outcome)}) but "
                             f"its override cannot replace a library bundled inside the torch "
                             f"wheel ({srcs}): build disqualified")
                return False
            overrides.extend(Requirement(r) for r in adv.resolve_override)
            applied.append(AppliedAdvisory(adv.id, "override", adv.title,
                                           tuple(adv.resolve_override)))
            steps.append(f"{adv.id} applies to {c.label()} ({_fmt_facts(vd.outcome)}): "
                         f"override {', '.join(adv.resolve_override)}")
        else:
            applied.append(AppliedAdvisory(adv.id, "warning", adv.title))
    c.overrides = tuple(overrides)
    c.applied = tuple(applied)
    c.unknown = tuple(unknown)
    c.derived_false = tuple(derived_false)
    return True


def _decision(matrix: Matrix, target: TargetSpec, spec: SpecifierSet, cuda: Optional[str],
              best: _Candidate, clean: Sequence[_Candidate]) -> List[str]:
    v = best.variant
    where = "PyPI" if v.on_pypi else v.index
    lines = [f"target: {target.describe()}"]
    lines.append(f"torch {v.release} is the newest release allowed by "
                 f"{str(spec) or 'no torch constraint'} with a qualifying build")
    same = sorted({c.variant.tag for c in clean if c.variant.release == v.release})
    if target.cpu:
        lines.append(f"CPU build {v.tag} from {where}")
    else:
        runs = (f" that driver {driver_label(target.driver)} runs ({best.driver_how})"
                if target.driver else "")
        forced = f" (--cuda {cuda})" if cuda else ""
        newest = max((V(c.variant.cuda) for c in clean if c.variant.release == v.release
                      and c.variant.cuda), default=V(v.cuda or "0"))
        if V(v.cuda or "0") >= newest:
            lines.append(f"{v.tag} (CUDA {v.cuda}) from {where} is the newest CUDA line{runs}"
                         f"{forced}; qualifying builds of {v.release}: {', '.join(same)}")
        else:
            runs = f", which driver {driver_label(target.driver)} runs ({best.driver_how})," \
                if target.driver else ""
            lines.append(f"{v.tag} (CUDA {v.cuda}) from {where}{runs} ranks first{forced}: "
                         f"newer CUDA lines have advisories the matrix cannot rule out; "
                         f"qualifying builds of {v.release}: {', '.join(same)}")
        for g in target.gpus:
            cov = gpu_coverage(v, g)
            assert cov is not None
            how = "SASS" if cov.how == "sass" else "PTX JIT of"
            lines.append(f"{g.name} is {g.sm} ({matrix.archs[g.arch].name}); this build runs "
                         f"on it with {how} {cov.target}")
    return lines


def _no_base(matrix: Matrix, target: TargetSpec, spec: SpecifierSet, cuda: Optional[str],
             allowed: Sequence[TorchVariant]) -> str:
    what = "CPU" if target.cpu else "CUDA"
    parts = [f"no torch {what} build matches"]
    if str(spec):
        parts.append(f"torch{spec}")
    if cuda:
        parts.append(f"CUDA {cuda}")
    parts.append(f"for Python {target.python} on {target.platform}")
    msg = " ".join(parts)
    if not allowed:
        newest = list(matrix.torch_releases)[-1]
        return msg + f"; the matrix knows torch 1.13.0 to {newest}"
    pys = sorted({p for v in allowed for p in v.pythons},
                 key=lambda p: (int(p.rstrip("t").split(".")[1]), p))
    tags = sorted({v.tag for v in allowed if (v.tag == "cpu") == target.cpu})
    hint = []
    if pys and target.python not in pys:
        hint.append(f"those releases have wheels for Python {', '.join(pys)}")
    if cuda and tags:
        hint.append(f"builds available: {', '.join(tags)}")
    return msg + ("; " + "; ".join(hint) if hint else "")


def _arch_words(matrix: Matrix, gpu: Gpu) -> str:
    """'Kepler, last driver branch R470' for GPUs older than Volta, which NVIDIA has
    retired (their last branch is the newest driver they can use); the arch name else."""
    arch = matrix.archs[gpu.arch]
    major = int(gpu.compute_capability.split(".")[0])
    if arch.last_driver_branch and major < 7:
        return f"{arch.name}, last driver branch {arch.last_driver_branch}"
    return arch.name


def _explain(matrix: Matrix, target: TargetSpec, spec: SpecifierSet, cuda: Optional[str],
             base: Sequence[TorchVariant], kernel_ok: Sequence[_Candidate],
             runnable: Sequence[_Candidate], excluded: Dict[str, List[TorchVariant]]) -> str:
    gpus = target.gpus
    names = " + ".join(g.name for g in gpus)
    desc = "; ".join(f"{g.name} is {g.sm} ({_arch_words(matrix, g)})" for g in gpus)
    ranked = sorted(base, key=lambda v: _Candidate(v).rank(), reverse=True)
    if not kernel_ok:
        unknown = [v for v in base if any(gpu_coverage(v, g) is None for g in gpus)]
        newest = ranked[0]
        lacking = [g.sm for g in gpus if (c := gpu_coverage(newest, g)) is not None and not c.ok]
        msg = f"{desc}; "
        if lacking:
            msg += (f"the newest build allowed, torch {newest.release} {newest.tag}, has no "
                    f"{'/'.join(sorted(set(lacking)))} kernels")
        else:
            msg += f"the arch list of torch {newest.release} {newest.tag} is not known"
        anywhere = [v for v in matrix.variants_for(platform=target.platform)
                    if v.tag != "cpu" and all((c := gpu_coverage(v, g)) is not None and c.ok
                                              for g in gpus)]
        if anywhere:
            rels = sorted({V(v.release) for v in anywhere})
            tags = sorted({v.tag for v in anywhere if V(v.release) == rels[-1]})
            if all(r < V(newest.release) for r in rels):
                msg += (f"; builds with kernels for {names} end at torch {rels[-1]} "
                        f"({', '.join(tags)}): use torch<={rels[-1]}")
            else:
                # newest first, by the resolver's own preference among builds with kernels
                ranked_any = sorted(anywhere, key=lambda v: _Candidate(v).rank(), reverse=True)
                ways = list({(v.release, v.tag): v for v in ranked_any}.values())[:3]
                what = ", ".join(f"torch {v.release} {v.tag}" for v in ways)
                if str(spec) and not spec.contains(ways[0].release, prereleases=True):
                    first = rels[0]
                    ftags = sorted({v.tag for v in anywhere if V(v.release) == first})
                    msg += (f"; use torch>={first} with {', '.join(ftags)} (not allowed by "
                            f"torch{spec}); newest with kernels: {what}")
                else:
                    how = (f"use --cuda {ways[0].cuda} (or drop --cuda)" if cuda else
                           f"use torch=={ways[0].release}")
                    msg += f"; builds with kernels for {names}, newest first: {what}; {how}"
        else:
            msg += f"; no PyTorch build in the matrix has kernels for {names}"
        if unknown and not lacking:
            msg += " (the matrix does not know the arch lists of some builds)"
        return msg
    if not runnable:
        ceilings = [c.need.ceiling_branch for c in kernel_ok
                    if c.need is not None and c.need.ceiling_branch is not None]
        if target.driver and ceilings and int(target.driver.split(".")[0]) > max(ceilings):
            ceiling = max(ceilings)
            fits = [c for c in kernel_ok if c.need and c.need.minimum
                    and int(c.need.minimum.split(".")[0]) <= ceiling]
            best_fit = max(fits, key=lambda c: c.rank()) if fits else None
            archs = ", ".join(sorted({matrix.archs[g.arch].name for g in gpus}))
            msg = (f"{desc}; driver {driver_label(target.driver)} is too new for it: {archs} "
                   f"GPUs are supported only up to the R{ceiling} driver branch")
            if best_fit is not None and best_fit.need is not None:
                msg += (f"; use an R{ceiling} driver (>= {best_fit.need.minimum}) with torch "
                        f"{best_fit.variant.release} {best_fit.variant.tag}")
            return msg
        if target.driver:
            drv_ok = [v for v in ranked
                      if driver_verdict(matrix, v, [], target.driver).ok]
            msg = f"{desc}; "
            if drv_ok:
                b = drv_ok[0]
                lacking = [g.sm for g in gpus if (c := gpu_coverage(b, g)) is not None
                           and not c.ok]
                msg += (f"the newest build driver {driver_label(target.driver)} can run is torch "
                        f"{b.release} {b.tag}"
                        + (f", which has no {'/'.join(sorted(set(lacking)))} kernels"
                           if lacking else ""))
            else:
                msg += f"driver {driver_label(target.driver)} runs none of the builds allowed"
            best = min(kernel_ok, key=lambda c: (V(c.need.minimum) if c.need and
                                                 c.need.minimum else V("0"),
                                                 [-x for x in V(c.variant.release).release]))
            need = best.need.minimum if best.need else None
            oldest = min((V(c.variant.release) for c in kernel_ok
                          if c.variant.tag == best.variant.tag), default=None)
            why = ""
            if best.need and best.need.ceiling_branch and need and \
                    int(need.split(".")[0]) > best.need.ceiling_branch:
                why = (f" (but these GPUs are supported only up to driver "
                       f"R{best.need.ceiling_branch})")
            msg += (f"; upgrade the driver to >= {need} and use torch>={oldest} "
                    f"{best.variant.tag}{why}")
            return msg
        c0 = kernel_ok[0]
        assert c0.need is not None
        return (f"{desc}; every build with kernels for it needs driver >= {c0.need.minimum}, "
                f"but these GPUs are supported only up to driver R{c0.need.ceiling_branch}")
    ids = ", ".join(f"{aid} ({matrix.advisories[aid].title})" for aid in sorted(excluded))
    return (f"every torch build allowed for {names or 'this target'} is excluded by "
            f"advisory {ids}; relax --torch/--cuda or see 'envlock doctor'")
