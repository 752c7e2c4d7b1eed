"""The advisory condition language: its facts, its tests, and its validation.

Conditions are data (TOML tables) so that curators never write code; this module says
which shapes are legal. Evaluation lives in :mod:`envlock.knowledge.evaluate`, which
imports the catalogue from here so the two can never disagree.

A condition is ``{all = [...]}``, ``{any = [...]}``, ``{not = c}``,
``{some = "<collection>", where = c}`` or a leaf ``{fact = "<path>", <test> = <value>}``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from packaging.specifiers import InvalidSpecifier, SpecifierSet

__all__ = [
    "FACTS",
    "ELEMENT_FACTS",
    "TESTS",
    "fact_type",
    "validate_condition",
    "fact_paths",
]

#: fact path -> type. ``*`` matches one path segment (a package, library or variable name).
FACTS: Dict[str, str] = {
    "host.os": "str",
    "host.distro": "str",
    "host.kernel": "str",
    "host.machine": "str",
    "host.glibc": "version",
    "host.container": "str",
    "host.virtualization": "str",
    "host.iommu": "bool",
    "host.shm_bytes": "int",
    "python.version": "version",
    "driver.present": "bool",
    "driver.version": "version",
    "driver.branch": "int",
    "driver.cuda": "version",
    "driver.fabric_manager": "str",
    "driver.error": "str",
    "gpu.count": "int",
    "gpu.name": "list[str]",
    "gpu.model": "list[str]",
    "gpu.arch": "list[str]",
    "gpu.segment": "list[str]",
    "gpu.form_factor": "list[str]",
    "gpu.cc": "list[version]",
    "gpu.mig": "list[bool]",
    "gpu.lost": "list[bool]",
    "gpu.distinct_models": "int",
    "gpu.distinct_cc": "int",
    "gpu.uncovered": "list[str]",
    "link.count": "int",
    "link.kind": "list[str]",
    "link.p2p": "list[bool]",
    "package.*": "version",
    "packages.cuda_majors": "list[int]",
    "packages.cuda_major_count": "int",
    "torch.version": "version",
    "torch.cuda": "version",
    "torch.cuda_major": "int",
    "torch.cpu_only": "bool",
    "torch.arch_list": "list[str]",
    "torch.cudnn": "version",
    "torch.nccl": "version",
    "torch.driver_too_old": "bool",
    "library.*.version": "version",
    "library.*.copies": "int",
    "library.*.versions": "int",
    "library.*.system": "bool",
    "env.*": "str",
}

#: Fields of collection elements, usable inside ``{some = ..., where = ...}``.
ELEMENT_FACTS: Dict[str, Dict[str, str]] = {
    "gpu": {
        "name": "str",
        "model": "str",
        "arch": "str",
        "segment": "str",
        "form_factor": "str",
        "cc": "version",
        "memory_mib": "int",
        "mig": "bool",
        "lost": "bool",
    },
    "link": {"kind": "str", "p2p": "bool", "a_model": "str", "b_model": "str"},
    "library": {
        "name": "str",
        "version": "version",
        "owner": "str",
        "selected": "bool",
        "system": "bool",
    },
}

TESTS: Tuple[str, ...] = (
    "equals", "in", "version", "lt", "le", "gt", "ge", "matches", "contains", "present",
    "known",
)

LIBRARY_NAMES: Tuple[str, ...] = ("cublas", "cublasLt", "cudart", "cudnn", "nccl", "nvjitlink")


@lru_cache(maxsize=1024)
def fact_type(path: str) -> Optional[str]:
    """Type of a fact path, or None when the path is not in the catalogue."""
    if path in FACTS:
        return FACTS[path]
    parts = path.split(".")
    for pattern, typ in FACTS.items():
        pp = pattern.split(".")
        if len(pp) == len(parts) and all(a == "*" or a == b for a, b in zip(pp, parts)):
            if parts[0] == "library" and parts[1] not in LIBRARY_NAMES:
                return None
            return typ
    return None


def _check_leaf(cond: Mapping[str, Any], where: str, scope: Optional[str],
                out: List[str]) -> None:
    fact = cond.get("fact")
    if not isinstance(fact, str):
        out.append(f"{where}: a leaf needs 'fact' (a string)")
        return
    if scope is None:
        typ = fact_type(fact)
        if typ is None:
            out.append(f"{where}: unknown fact {fact!r}")
            return
    else:
        typ = ELEMENT_FACTS[scope].get(fact)
        if typ is None:
            out.append(f"{where}: unknown field {fact!r} of a {scope}")
            return
    tests = [k for k in cond if k != "fact"]
    unknown = [k for k in tests if k not in TESTS]
    if unknown:
        out.append(f"{where}: unknown test {unknown[0]!r} (tests: {', '.join(TESTS)})")
        return
    if len(tests) != 1:
        out.append(f"{where}: a leaf needs exactly one test, got {len(tests)}")
        return
    test = tests[0]
    value = cond[test]
    if test == "in" and not isinstance(value, list):
        out.append(f"{where}.in: expected an array")
    elif test in ("present", "known") and not isinstance(value, bool):
        out.append(f"{where}.{test}: expected true or false")
    elif test == "version":
        if not isinstance(value, str):
            out.append(f"{where}.version: expected a specifier string")
        else:
            try:
                SpecifierSet(value)
            except InvalidSpecifier:
                out.append(f"{where}.version: {value!r} is not a PEP 440 specifier")
        if "version" not in typ:
            out.append(f"{where}.version: fact {fact!r} is not a version")
    elif test == "matches":
        if not isinstance(value, str):
            out.append(f"{where}.matches: expected a regular expression string")
        else:
            try:
                re.compile(value)
            except re.error as exc:
                out.append(f"{where}.matches: bad regular expression: {exc}")
    elif test in ("lt", "le", "gt", "ge"):
        if isinstance(value, bool) or not isinstance(value, (int, float, str)):
            out.append(f"{where}.{test}: expected a number or a version string")


def validate_condition(cond: Any, where: str, scope: Optional[str] = None) -> List[str]:
    """All problems with a condition tree (empty when it is well formed)."""
    out: List[str] = []
    _validate(cond, where, scope, out)
    return out


def _validate(cond: Any, where: str, scope: Optional[str], out: List[str]) -> None:
    if not isinstance(cond, dict):
        out.append(f"{where}: expected a table")
        return
    keys = set(cond)
    if keys & {"all", "any"}:
        if len(keys) != 1:
            out.append(f"{where}: 'all'/'any' must stand alone, got keys {sorted(keys)}")
            return
        op = next(iter(keys))
        items = cond[op]
        if not isinstance(items, list) or not items:
            out.append(f"{where}.{op}: expected a non-empty array of conditions")
            return
        for i, item in enumerate(items):
            _validate(item, f"{where}.{op}[{i}]", scope, out)
    elif "not" in keys:
        if len(keys) != 1:
            out.append(f"{where}: 'not' must stand alone")
            return
        _validate(cond["not"], f"{where}.not", scope, out)
    elif "some" in keys:
        coll = cond.get("some")
        if keys != {"some", "where"}:
            out.append(f"{where}: 'some' needs exactly 'some' and 'where'")
            return
        if coll not in ELEMENT_FACTS:
            out.append(f"{where}.some: unknown collection {coll!r}")
            return
        if scope is not None:
            out.append(f"{where}: 'some' cannot be nested inside another 'some'")
            return
        _validate(cond["where"], f"{where}.where", coll, out)
    else:
        _check_leaf(cond, where, scope, out)


def fact_paths(cond: Any) -> Set[Tuple[Optional[str], str, Any]]:
    """Every (scope, fact, (test, value)) leaf in a condition, for cross-checks."""
    found: Set[Tuple[Optional[str], str, Any]] = set()

    def walk(c: Any, scope: Optional[str]) -> None:
        if not isinstance(c, dict):
            return
        for op in ("all", "any"):
            if op in c and isinstance(c[op], list):
                for item in c[op]:
                    walk(item, scope)
        if "not" in c:
            walk(c["not"], scope)
        if "some" in c:
            walk(c.get("where"), c.get("some"))
        if "fact" in c:
            for test, value in c.items():
                if test != "fact":
                    v = tuple(value) if isinstance(value, list) else value
                    found.add((scope, c["fact"], (test, v)))

    walk(cond, None)
    return found
