"""``--format kubernetes``: a ``nodeAffinity`` block (and an NFD-style ``NodeFeatureRule``)
that schedules a pod only on the nodes a lock target is valid on.

It selects by the labels NVIDIA GPU Feature Discovery writes (see
:mod:`envlock.resolve.nodes`): the target's compute capabilities
(``nvidia.com/gpu.compute.major``/``.minor``), the lock's driver floor
(``nvidia.com/cuda.driver-version.major``/``.minor``/``.revision``, and the deprecated
``nvidia.com/cuda.driver.*`` aliases older GFD releases write), and the GPU product
(``nvidia.com/gpu.product``) where the lock depends on it: where the matrix knows other
GPUs of the same compute capability that the target was not resolved for (an H100 lock
must not land on an H20 node, whose driver floor and advisories differ).

Kubernetes compares label values as strings (``In``) or as integers (``Gt``/``Lt``), and
``nodeSelectorTerms`` are ORed while a term's ``matchExpressions`` are ANDed, so
"driver >= 535.104.05" becomes three terms: major > 535; major = 535 and minor > 104;
major = 535, minor = 104 and revision > 4. Integer equality is written as ``Gt v-1`` and
``Lt v+1``, so ``05`` and ``5`` compare alike.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envlock.export.common import ExportRequest, Exporter, header_lines
from envlock.lock.model import LockTarget

__all__ = ["KubernetesExporter", "EXPORTER", "selector_terms"]

_NEW = ("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver-version.minor",
        "nvidia.com/cuda.driver-version.revision")
_OLD = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor",
        "nvidia.com/cuda.driver.rev")
_CC = ("nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor")
_PRODUCT = "nvidia.com/gpu.product"

Expr = Dict[str, Any]


def _eq(key: str, value: int) -> List[Expr]:
    return [{"key": key, "operator": "Gt", "values": [str(value - 1)]},
            {"key": key, "operator": "Lt", "values": [str(value + 1)]}]


def _driver_terms(floor: str, keys: Tuple[str, str, str]) -> List[List[Expr]]:
    """Terms (ORed) meaning "driver version >= floor" over one label family."""
    parts = [int(p) for p in floor.split(".")][:3]
    terms: List[List[Expr]] = []
    for i, value in enumerate(parts):
        prefix: List[Expr] = []
        for j in range(i):
            prefix += _eq(keys[j], parts[j])
        last = i == len(parts) - 1
        # the last part: >= value; the others: > value (equality continues in the next term)
        bound = value - 1 if last else value
        if last and value == 0:
            terms.append(prefix + ([{"key": keys[i], "operator": "Exists"}]
                                   if i < 3 else []))
        else:
            terms.append(prefix + [{"key": keys[i], "operator": "Gt", "values": [str(bound)]}])
    return terms


def _products(t: LockTarget) -> Optional[List[str]]:
    """The GFD product names to require, or None when the compute capability says it all
    (every matrix GPU of the target's compute capabilities is in the target)."""
    from envlock.matrix import get_matrix
    from envlock.resolve.nodes import gfd_products

    matrix = get_matrix()
    mine = set(t.gpu_models)
    ccs = set(t.compute_capabilities)
    others = [g for g in matrix.gpus.values()
              if g.compute_capability in ccs and g.id not in mine]
    if not others:
        return None
    out: List[str] = []
    for gid in t.gpu_models:
        g = matrix.gpus.get(gid)
        names = gfd_products(g) if g is not None else ()
        for n in names:
            if n not in out:
                out.append(n)
    for n in t.gpus:  # the lock's own NVML names, in case the matrix renamed a row
        v = n.replace(" ", "-")
        if v not in out:
            out.append(v)
    return out


def selector_terms(t: LockTarget) -> List[Dict[str, List[Expr]]]:
    """The ``nodeSelectorTerms`` for a target (empty for a CPU target)."""
    if not t.compute_capabilities:
        return []
    products = _products(t)
    cc_terms: List[List[Expr]] = []
    for cc in sorted(set(t.compute_capabilities), key=lambda c: tuple(map(int, c.split(".")))):
        major, minor = (int(x) for x in cc.split("."))
        cc_terms.append([{"key": _CC[0], "operator": "In", "values": [str(major)]},
                         {"key": _CC[1], "operator": "In", "values": [str(minor)]}])
    base: List[Expr] = []
    if products:
        base.append({"key": _PRODUCT, "operator": "In", "values": products})
    drivers: List[List[Expr]] = [[]]
    if t.driver_min:
        drivers = _driver_terms(t.driver_min, _NEW) + _driver_terms(t.driver_min, _OLD)
    return [{"matchExpressions": cc + base + d} for cc in cc_terms for d in drivers]


def _slug(name: str) -> str:
    """A target name as Kubernetes names allow it (lower case, ``[a-z0-9.-]``)."""
    return re.sub(r"[^a-z0-9.-]+", "-", name.lower()).strip("-.") or "target"


def _q(value: Any) -> str:
    return json.dumps(value)


def _yaml_expr(e: Expr, indent: str) -> List[str]:
    out = [f"{indent}- key: {_q(e['key'])}", f"{indent}  operator: {e['operator']}"]
    if "values" in e:
        out.append(f"{indent}  values: [{', '.join(_q(v) for v in e['values'])}]")
    return out


def _nfd_expr(e: Expr) -> str:
    if "values" in e:
        return (f"{_q(e['key'])}: {{op: {e['operator']}, value: "
                f"[{', '.join(_q(v) for v in e['values'])}]}}")
    return f"{_q(e['key'])}: {{op: {e['operator']}}}"


class KubernetesExporter(Exporter):
    name = "kubernetes"
    summary = "nodeAffinity (and an NFD rule) selecting the nodes a target is valid on"

    def filename(self, target: str) -> str:
        return f"affinity-{target}.yaml"

    def warnings(self, request: ExportRequest) -> List[str]:
        t = request.target
        out: List[str] = []
        if not t.compute_capabilities:
            out.append("WARNING: a CPU target runs on any node; there is nothing to select.")
        elif not t.driver_min:
            out.append("WARNING: the lock names no driver floor: the affinity selects by "
                       "GPU only, and verify --stage runtime must check the driver.")
        return out

    def render(self, request: ExportRequest) -> str:
        t = request.target
        terms = selector_terms(t)
        slug = _slug(t.name)
        label = f"feature.node.kubernetes.io/envlock-{slug}"[:27 + 63].rstrip("-.")
        body = [
            "Document 1 is a pod spec's affinity: put it under spec (or a workload's "
            "spec.template.spec). It selects nodes by the labels NVIDIA GPU Feature "
            "Discovery writes: compute capability "
            + ", ".join(t.compute_capabilities or ("none",))
            + (f", driver >= {t.driver_min}" if t.driver_min else "")
            + (", GPU product" if any(e["key"] == _PRODUCT for term in terms
                                      for e in term["matchExpressions"]) else "") + ".",
            "Document 2 is a Node Feature Discovery NodeFeatureRule (kubectl apply -f) that "
            f"labels the same nodes {label}=true, from the GFD labels NFD reads "
            "(feature local.label).",
            "Scheduling is not verification: run 'envlock verify --stage runtime' in the pod.",
        ]
        lines = header_lines(request, "Kubernetes node selection", body,
                             self.warnings(request))
        if not terms:  # a CPU target: nothing to require (an empty term list matches no node)
            return "\n".join(lines + ["affinity: {}"]) + "\n"
        lines += ["affinity:", "  nodeAffinity:",
                  "    requiredDuringSchedulingIgnoredDuringExecution:",
                  "      nodeSelectorTerms:"]
        for term in terms:
            lines.append("      - matchExpressions:")
            for e in term["matchExpressions"]:
                lines += _yaml_expr(e, "        ")
        lines += ["---", "apiVersion: nfd.k8s-sigs.io/v1alpha1", "kind: NodeFeatureRule",
                  "metadata:", f"  name: {_q(('envlock-' + slug)[:253].rstrip('-.'))}", "spec:",
                  "  rules:", f"  - name: {_q('envlock ' + t.name)}",
                  f"    labels: {{{_q(label)}: \"true\"}}"]
        lines.append("    matchAny:")
        for term in terms:
            lines += ["    - matchFeatures:", "      - feature: local.label",
                      "        matchExpressions:"]
            lines += [f"          {_nfd_expr(e)}" for e in _merge(term["matchExpressions"])]
        return "\n".join(lines) + "\n"


def _merge(exprs: Sequence[Expr]) -> List[Expr]:
    """NFD's matchExpressions is a map (one expression per key): ``Gt a`` and ``Lt b``
    on one key become ``GtLt [a, b]``."""
    by_key: Dict[str, List[Expr]] = {}
    for e in exprs:
        by_key.setdefault(e["key"], []).append(e)
    out: List[Expr] = []
    for key, es in by_key.items():
        if len(es) == 2 and {e["operator"] for e in es} == {"Gt", "Lt"}:
            gt = next(e for e in es if e["operator"] == "Gt")["values"][0]
            lt = next(e for e in es if e["operator"] == "Lt")["values"][0]
            out.append({"key": key, "operator": "GtLt", "values": [gt, lt]})
        else:
            out.extend(es)
    return out


EXPORTER = KubernetesExporter()
