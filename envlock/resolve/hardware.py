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
from typing import Dict, List, Optional, Sequence, Tuple

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from envlock.checks.conditions import evaluate
from envlock.checks.facts import facts_from_plan
from envlock.errors import NoCandidateError
from envlock.lock.model import AppliedAdvisory
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import TorchVariant
from envlock.matrix.rules import DriverNeed, driver_need, driver_verdict, gpu_coverage
from envlock.resolve.target import TargetSpec
from envlock.versions import V

__all__ = ["Choice", "choose_variant", "planned_packages", "advisories_for"]


@dataclass(frozen=True)
class Choice:
    variant: TorchVariant
    decision: Tuple[str, ...]
    advisories: Tuple[AppliedAdvisory, ...]
    overrides: Tuple[Requirement, ...]
    need: DriverNeed
    driver_how: Optional[str]


_PLANNED: Dict[Tuple[str, str, str, str], Dict[str, str]] = {}


def planned_packages(variant: TorchVariant) -> Dict[str, str]:
    """name -> exact version for every ``==`` pin of a build (and torch itself)."""
    key = (variant.release, variant.tag, variant.platform, variant.index)
    if key in _PLANNED:
        return dict(_PLANNED[key])
    out = {"torch": variant.version_string}
    for text in variant.pins:
        try:
            req = Requirement(text)
        except Exception:  # noqa: BLE001 - validated at load; be defensive
            continue
        exact = [s.version for s in req.specifier if s.operator == "=="]
        if len(exact) == 1 and "*" not in exact[0]:
            out[req.name] = exact[0]
    _PLANNED[key] = dict(out)
    return out


def advisories_for(matrix: Matrix, target: TargetSpec, variant: TorchVariant,
                   packages: Optional[Dict[str, str]] = None,
                   libraries: Optional[Dict[str, str]] = None) -> List[Tuple[str, str]]:
    """(advisory id, action) for every advisory that fires on this plan."""
    facts = facts_from_plan(
        matrix, gpus=target.gpus, driver=target.driver,
        torch_version=variant.version_string, torch_cuda=variant.cuda,
        arch_list=list(variant.targets) if variant.sass is not None else None,
        packages=packages if packages is not None else planned_packages(variant),
        libraries=libraries if libraries is not None else dict(variant.libraries),
        python=target.python)
    fired = []
    for adv in matrix.advisories.values():
        if adv.condition is None:
            continue
        if evaluate(adv.condition, facts) is True:
            fired.append((adv.id, adv.resolve_action or "warn"))
    return fired


@dataclass
class _Candidate:
    variant: TorchVariant
    overrides: Tuple[Requirement, ...] = ()
    applied: Tuple[AppliedAdvisory, ...] = ()
    driver_how: Optional[str] = None
    need: Optional[DriverNeed] = None

    def rank(self) -> Tuple[object, ...]:
        v = self.variant
        return (V(v.release), V(v.cuda) if v.cuda else V("0"), -len(self.overrides),
                v.on_pypi, v.tag)


def _with_index(matrix: Matrix, v: TorchVariant, base: str) -> str:
    default = "https://download.pytorch.org/whl"
    if v.on_pypi or not v.index.startswith(default) or base.rstrip("/") == default:
        return v.index
    return base.rstrip("/") + v.index[len(default):]


def choose_variant(matrix: Matrix, target: TargetSpec, spec: SpecifierSet,
                   cuda: Optional[str] = None) -> Choice:
    pool = matrix.variants_for(platform=target.platform)
    allowed = [v for v in pool if spec.contains(V(v.release), prereleases=True)]
    if target.cpu:
        base = [v for v in allowed if v.tag == "cpu"]
    else:
        base = [v for v in allowed if v.tag != "cpu"]
    base = [v for v in base if not v.pythons or target.python in v.pythons]
    if cuda:
        base = [v for v in base if v.cuda == cuda]
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

    # Advisories are judged group by group, in preference order (release, then CUDA line):
    # the first group with a candidate no advisory excludes holds the answer.
    clean: List[_Candidate] = []
    excluded: Dict[str, List[TorchVariant]] = {}
    runnable.sort(key=lambda c: c.rank()[:2], reverse=True)
    for _, group in groupby(runnable, key=lambda c: c.rank()[:2]):
        for c in group:
            overrides: List[Requirement] = []
            applied: List[AppliedAdvisory] = []
            drop = False
            for aid, action in advisories_for(matrix, target, c.variant):
                adv = matrix.advisories[aid]
                if action == "exclude":
                    excluded.setdefault(aid, []).append(c.variant)
                    drop = True
                elif action == "override":
                    overrides.extend(Requirement(r) for r in adv.resolve_override)
                    applied.append(AppliedAdvisory(aid, "override", adv.title,
                                                   tuple(adv.resolve_override)))
                else:
                    applied.append(AppliedAdvisory(aid, "warning", adv.title))
            if drop:
                continue
            c.overrides = tuple(overrides)
            c.applied = tuple(applied)
            clean.append(c)
        if clean:
            break

    if not clean:
        raise NoCandidateError(_explain(matrix, target, spec, cuda, base, kernel_ok,
                                        runnable, excluded))
    clean.sort(key=lambda c: c.rank(), reverse=True)
    best = clean[0]
    applied = list(best.applied)
    best_rank = best.rank()
    for aid, variants in sorted(excluded.items()):
        if any(_Candidate(v).rank()[:2] > best_rank[:2] for v in variants):
            adv = matrix.advisories[aid]
            builds = ", ".join(sorted({f"{v.release} {v.tag}" for v in variants}))
            applied.append(AppliedAdvisory(aid, "excluded", f"{adv.title} (excluded {builds})"))
    decision = _decision(matrix, target, spec, cuda, best, runnable)
    assert best.need is not None
    return Choice(variant=best.variant, decision=tuple(decision), advisories=tuple(applied),
                  overrides=best.overrides, need=best.need, driver_how=best.driver_how)


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
        runs = f" that driver {target.driver} runs ({best.driver_how})" if target.driver else ""
        forced = f" (--cuda {cuda})" if cuda else ""
        lines.append(f"{v.tag} (CUDA {v.cuda}) from {where} is the newest CUDA line{runs}"
                     f"{forced}; qualifying builds of {v.release}: {', '.join(same)}")
        for g in target.gpus:
            cov = gpu_coverage(v, g)
            assert cov is not None
            how = "SASS" if cov.how == "sass" else "PTX JIT of"
            lines.append(f"{g.name} is {g.sm} ({matrix.archs[g.arch].name}); this build runs "
                         f"on it with {how} {cov.target}")
    if best.overrides:
        lines.append("overrides: " + ", ".join(str(r) for r in best.overrides))
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


def _explain(matrix: Matrix, target: TargetSpec, spec: SpecifierSet, cuda: Optional[str],
             base: Sequence[TorchVariant], kernel_ok: Sequence[_Candidate],
             runnable: Sequence[_Candidate], excluded: Dict[str, List[TorchVariant]]) -> str:
    gpus = target.gpus
    names = " + ".join(g.name for g in gpus)
    desc = "; ".join(f"{g.name} is {g.sm} ({matrix.archs[g.arch].name})" for g in gpus)
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
                best = list({(v.release, v.tag): v for v in ranked_any}.values())[:3]
                what = ", ".join(f"torch {v.release} {v.tag}" for v in best)
                if str(spec) and not spec.contains(best[0].release, prereleases=True):
                    first = rels[0]
                    ftags = sorted({v.tag for v in anywhere if V(v.release) == first})
                    msg += (f"; use torch>={first} with {', '.join(ftags)} (not allowed by "
                            f"torch{spec}); newest with kernels: {what}")
                else:
                    how = (f"use --cuda {best[0].cuda} (or drop --cuda)" if cuda else
                           f"use torch=={best[0].release}")
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
            msg = (f"{desc}; driver {target.driver} is too new for it: {archs} GPUs are "
                   f"supported only up to the R{ceiling} driver branch")
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
                msg += (f"the newest build driver {target.driver} can run is torch "
                        f"{b.release} {b.tag}"
                        + (f", which has no {'/'.join(sorted(set(lacking)))} kernels"
                           if lacking else ""))
            else:
                msg += f"driver {target.driver} runs none of the builds allowed"
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
