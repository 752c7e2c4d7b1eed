"""Read and check ``advisories.toml``: conditions are validated as data (no code), GPU ids
they name must exist, and resolver overrides must pin exact versions."""

from __future__ import annotations

from typing import Any, Dict, Mapping, Optional, Tuple

from packaging.requirements import InvalidRequirement, Requirement

from envlock.matrix import conditions
from envlock.matrix.load_common import (
    _ID_RE, CATEGORIES, RESOLVE_ACTIONS, SEVERITIES, SIGNALS, STATUSES, Ctx, top_rows,
)
from envlock.matrix.model import Advisory, Gpu, Provenance
from envlock.matrix.patterns import pattern_problem

__all__ = ["advisories"]


def advisories(raw: Mapping[str, Dict[str, Any]], ctx: Ctx,
                gpus: Mapping[str, Gpu]) -> Dict[str, Advisory]:
    out: Dict[str, Advisory] = {}
    for row in top_rows(raw, "advisories.toml", "advisory", ctx.problems):
        aid = row.text("id", check=_ID_RE.match, what="a kebab-case id")  # type: ignore[arg-type]
        symptoms = row.str_list("symptoms") or ()
        for j, pat in enumerate(symptoms):
            why = pattern_problem(pat)  # also refuses nested quantifiers (backtracking)
            if why:
                row.problem(f"symptoms[{j}]", why)
        absent = row.str_list("absent") or ()
        context = row.str_list("context") or ()
        for key, pats in (("absent", absent), ("context", context)):
            for j, pat in enumerate(pats):
                why = pattern_problem(pat)
                if why:
                    row.problem(f"{key}[{j}]", why)
        signals = row.str_list("signals") or ()
        for j, s in enumerate(signals):
            if s not in SIGNALS:
                row.problem(f"signals[{j}]", f"{s!r} is not one of {', '.join(SIGNALS)}")
        log_only = row.flag("log_only")
        cond = row.raw("condition")
        if log_only and cond is not None:
            row.problem("condition", "a log_only advisory has no condition")
        if not log_only:
            if cond is None:
                row.problem("condition", "missing (or set log_only = true)")
            else:
                for msg in conditions.validate_condition(cond, "condition"):
                    row.problems.add(row.file, f"{row.path}.{msg.split(': ', 1)[0]}",
                                     msg.split(": ", 1)[1])
                for scope, fact, (test, value) in conditions.fact_paths(cond):
                    if (fact in ("gpu.model", "model")) and test in ("in", "equals"):
                        values = value if isinstance(value, tuple) else (value,)
                        for gid in values:
                            if gid not in gpus:
                                row.problem("condition", f"unknown gpu model id {gid!r}")
        resolve = row.raw("resolve")
        action: Optional[str] = None
        override: Tuple[str, ...] = ()
        if resolve is not None:
            r = row.child("resolve", resolve)
            action = r.choice("action", RESOLVE_ACTIONS)
            override = r.str_list("override") or ()
            for j, text in enumerate(override):
                try:
                    req = Requirement(text)
                    if not any(s.operator == "==" for s in req.specifier):
                        r.problem(f"override[{j}]", "an override must pin '=='")
                except InvalidRequirement as exc:
                    r.problem(f"override[{j}]", f"not a PEP 508 requirement: {exc}")
            if action == "override" and not override:
                r.problem("override", "action 'override' needs override requirements")
            r.finish()
        sources = row.str_list("sources", required=True) or ()
        adv = Advisory(
            id=aid,
            title=row.text("title"),
            severity=row.choice("severity", SEVERITIES, default="warning") or "warning",
            category=row.choice("category", CATEGORIES, default="config") or "config",
            status=row.choice("status", STATUSES, default="unverified") or "unverified",
            summary=row.text("summary"),
            symptoms=symptoms,
            signals=signals,
            condition=cond,
            log_only=log_only,
            fix=row.str_list("fix", required=True) or (),
            sources=sources,
            resolve_action=action,
            resolve_override=override,
            provenance=Provenance(
                sources=sources,
                confidence={"verified": "primary", "partial": "secondary"}.get(
                    str(row.data.get("status")), "unverified"),  # type: ignore[arg-type]
                note=row.opt_text("note"),
            ),
            absent=absent,
            context=context,
        )
        row.finish()
        if not sources:
            row.problem("sources", "an advisory needs at least one source")
        if aid in out:
            row.problem("id", f"duplicate advisory id {aid!r}")
        out[aid] = adv
    return out
