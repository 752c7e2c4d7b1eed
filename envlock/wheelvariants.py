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
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Literal, Mapping, Optional, Tuple

__all__ = ["variant_label", "check_variants_json", "prune_variants_json", "canonical",
           "VariantHost", "Fit", "judge_variant", "MAX_VARIANTS_JSON_BYTES"]

#: the largest variants.json envlock reads from an index (real ones are a few KiB)
MAX_VARIANTS_JSON_BYTES = 1 << 20

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


@dataclass(frozen=True)
class VariantHost:
    """What a lock target offers a variant wheel: the CUDA version its driver supports
    (None: unknown) and the compute capability of every GPU (empty: a CPU target)."""

    driver_cuda: Optional[str]
    compute_capabilities: Tuple[str, ...]


@dataclass(frozen=True)
class Fit:
    """A variant's verdict for one target, and why (for the lock's decision line)."""

    verdict: Literal["fits", "no", "unknown"]
    why: str
    #: the variant's ``nvidia :: cuda_version_lower_bound`` as (major, minor), (0, 0) if none
    cuda_bound: Tuple[int, int] = (0, 0)


def _cuda_key(text: str) -> Optional[Tuple[int, int]]:
    m = re.fullmatch(r"([0-9]{1,3})\.([0-9]{1,3})(?:\.[0-9]+)?", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _arch_target(value: str) -> Optional[str]:
    """``90_real`` -> ``sm_90``; ``120_virtual`` -> ``compute_120``; None otherwise."""
    m = re.fullmatch(r"([0-9]{2,3}[af]?)_(real|virtual)", value)
    if not m:
        return None
    return ("sm_" if m.group(2) == "real" else "compute_") + m.group(1)


def judge_variant(properties: Mapping[str, Any], host: Optional[VariantHost]) -> Fit:
    """Whether a variant with ``properties`` (``{namespace: {feature: [values]}}``, one
    label's entry of a variants.json) suits ``host``, by the NVIDIA namespace's two
    features: ``cuda_version_lower_bound`` at most the driver's CUDA, and ``sm_arch``
    covering every GPU (SASS or PTX, :func:`envlock.kernels.coverage`). A property of
    another namespace, or a feature envlock does not know, is not judged: "unknown",
    which is never chosen (an installer would ask a provider envlock cannot stand for).

    >>> host = VariantHost("12.8", ("9.0",))
    >>> judge_variant({"nvidia": {"cuda_version_lower_bound": ["12.9"]}}, host).verdict
    'no'
    """
    from envlock.kernels import coverage

    if host is None:
        return Fit("unknown", "no GPU facts for this target")
    props = dict(properties or {})
    others = sorted(set(props) - {"nvidia"})
    if others:
        return Fit("unknown", f"properties in namespace {others[0]!r}, which envlock "
                              f"does not judge")
    nv = dict(props.get("nvidia") or {})
    unknown = sorted(set(nv) - {"cuda_version_lower_bound", "sm_arch"})
    if unknown:
        return Fit("unknown", f"nvidia :: {unknown[0]}, which envlock does not judge")
    if not host.compute_capabilities:
        return Fit("no", "a CPU target has no GPU for an NVIDIA variant")
    reasons: List[str] = []
    bound = (0, 0)
    bounds = [b for b in map(_cuda_key, nv.get("cuda_version_lower_bound") or ()) if b]
    if len(bounds) != len(nv.get("cuda_version_lower_bound") or ()):
        return Fit("unknown", "a cuda_version_lower_bound that is not a CUDA version")
    if bounds:
        bound = max(bounds)
        text = f"{bound[0]}.{bound[1]}"
        drv = _cuda_key(host.driver_cuda) if host.driver_cuda else None
        if drv is None:
            return Fit("unknown", f"needs CUDA {text} and the target's driver CUDA is "
                                  f"unknown", bound)
        if drv < bound:
            return Fit("no", f"needs CUDA {text}, the driver supports {host.driver_cuda}",
                       bound)
        reasons.append(f"CUDA {text} <= driver's {host.driver_cuda}")
    archs = nv.get("sm_arch")
    if archs:
        targets = [_arch_target(a) for a in archs]
        if None in targets:
            return Fit("unknown", "an sm_arch value that is not an architecture", bound)
        missing = [cc for cc in host.compute_capabilities
                   if not coverage([t for t in targets if t], cc).ok]
        if missing:
            return Fit("no", f"no kernels for compute capability {', '.join(missing)}", bound)
        reasons.append("sm_arch covers " + ", ".join(sorted(set(host.compute_capabilities))))
    return Fit("fits", "; ".join(reasons) or "no NVIDIA requirement", bound)
