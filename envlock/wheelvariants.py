"""Wheel variants (PEP 825, provisional since 2026-09): labels in wheel file names and the
index-level ``{name}-{version}-variants.json`` a lock must carry for them.

A variant wheel's file name has one more part than PEP 427's, the variant label, after
the platform tag: ``torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64-cu129.whl``. The label
(``^[0-9a-z_.]{1,16}$``) maps to properties (``nvidia :: sm_arch :: 90_real``) only through
the variants.json the index publishes next to the wheels; an installer that lacks it must
treat the wheel as incompatible. A ``pylock.toml`` that lists variant wheels therefore
inlines that file as ``[packages.variants-json]``, ``$schema`` kept, labels it does not
list may be dropped (PEP 825, "Integration with pylock.toml").

Shape (variant-schema 0.1.x in python/peps, peps/pep-0825/): an object with exactly
``$schema`` (string), ``default-priorities`` (``namespace``: a non-empty list of unique
namespaces) and ``variants`` (label -> namespace -> feature -> non-empty list of unique
values); namespaces and features ``^[a-z0-9_]+$``, values and labels ``^[a-z0-9_.]+$``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional

__all__ = ["variant_label", "check_variants_json", "prune_variants_json", "canonical"]

_LABEL = re.compile(r"^[0-9a-z_.]{1,16}\Z")
_NAME = re.compile(r"^[a-z0-9_]+\Z")
_VALUE = re.compile(r"^[a-z0-9_.]+\Z")


def variant_label(filename: str) -> Optional[str]:
    """The variant label of a wheel file name, or None for a non-variant wheel.

    >>> variant_label("torch-2.8.0-cp311-cp311-manylinux_2_28_x86_64-cu129.whl")
    'cu129'
    >>> variant_label("torch-2.8.0-1-cp311-cp311-linux_x86_64.whl") is None
    True
    """
    if not filename.endswith(".whl"):
        return None
    parts = filename[:-4].split("-")
    # name-ver-py-abi-plat-label (6) or name-ver-build-py-abi-plat-label (7); a 6-part
    # name whose third part starts with a digit is PEP 427's build tag instead
    if len(parts) == 7 or (len(parts) == 6 and not parts[2][:1].isdigit()):
        label = parts[-1]
        return label if _LABEL.match(label) else None
    return None


def check_variants_json(doc: Any) -> List[str]:
    """Where ``doc`` breaks PEP 825's variants.json shape (empty: it fits)."""
    errs: List[str] = []
    if not isinstance(doc, dict):
        return ["not an object"]
    extra = set(doc) - {"$schema", "default-priorities", "variants"}
    errs += [f"unexpected key {k!r}" for k in sorted(extra)]
    if not isinstance(doc.get("$schema"), str):
        errs.append("$schema: missing or not a string")
    dp = doc.get("default-priorities")
    if not isinstance(dp, dict):
        errs.append("default-priorities: missing or not an object")
    else:
        ns = dp.get("namespace")
        if (not isinstance(ns, list) or not ns or len(set(map(str, ns))) != len(ns)
                or not all(isinstance(n, str) and _NAME.match(n) for n in ns)):
            errs.append("default-priorities.namespace: not a non-empty list of unique "
                        "namespaces")
    variants = doc.get("variants")
    if not isinstance(variants, dict):
        return errs + ["variants: missing or not an object"]
    for label, spaces in variants.items():
        where = f"variants.{label}"
        if not isinstance(label, str) or not _VALUE.match(label):
            errs.append(f"{where}: not a variant label")
        if not isinstance(spaces, dict):
            errs.append(f"{where}: not an object")
            continue
        for ns, features in spaces.items():
            if not _NAME.match(str(ns)) or not isinstance(features, dict):
                errs.append(f"{where}.{ns}: not a namespace of features")
                continue
            for feat, values in features.items():
                ok = (_NAME.match(str(feat)) and isinstance(values, list) and values
                      and len(set(map(str, values))) == len(values)
                      and all(isinstance(v, str) and _VALUE.match(v) for v in values))
                if not ok:
                    errs.append(f"{where}.{ns}.{feat}: not a non-empty list of unique values")
    return errs


def prune_variants_json(doc: Mapping[str, Any], labels: Iterable[str]) -> Dict[str, Any]:
    """``doc`` with only the variants ``labels`` names (PEP 825 lets a lock drop the rest)."""
    keep = set(labels)
    out = dict(doc)
    out["variants"] = {k: v for k, v in sorted(dict(doc.get("variants") or {}).items())
                       if k in keep}
    return out


def canonical(doc: Mapping[str, Any]) -> str:
    """The JSON text a lock records (sorted keys, no spaces: byte-stable)."""
    return json.dumps(doc, sort_keys=True, separators=(",", ":"))
