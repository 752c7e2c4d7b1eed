"""Targets from Kubernetes node labels (``envlock resolve --from-node FILE``).

NVIDIA GPU Feature Discovery (GFD, part of NVIDIA/k8s-device-plugin) labels every GPU
node from NVML: ``nvidia.com/gpu.product`` (the NVML name with spaces as dashes,
``NVIDIA-H100-80GB-HBM3``), ``nvidia.com/gpu.compute.major``/``.minor``,
``nvidia.com/gpu.memory`` (MiB), ``nvidia.com/gpu.count``, ``nvidia.com/gpu.family``,
``nvidia.com/cuda.driver-version.full`` (and ``.major``/``.minor``/``.revision``) and
``nvidia.com/cuda.runtime-version.full`` (the CUDA version the driver supports). Older
GFD releases wrote the driver as ``nvidia.com/cuda.driver.major``/``.minor``/``.rev``;
newer ones still write those as deprecated aliases, so they are read only when the new
keys are missing.

``kubectl get node NAME -o json`` gives one Node; ``kubectl get nodes -o json`` a List.
Nodes with the same GPU facts form one target, named after their node pool (GKE, EKS,
AKS, Karpenter pool labels) or, without one, after the GPU model. A label that is
missing or names a GPU the matrix does not know stays unknown and is named in the
target's notes; a node without any GPU label is left out and named.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from envlock.errors import InputError
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import Gpu
from envlock.versions import is_driver_version

__all__ = ["NodeFacts", "read_nodes", "node_facts", "node_targets", "gfd_products",
           "POOL_LABELS", "L_PRODUCT", "L_CC_MAJOR", "L_CC_MINOR", "L_DRIVER_FULL",
           "L_DRIVER_MAJOR", "L_DRIVER_MINOR", "L_DRIVER_REV"]

L_PRODUCT = "nvidia.com/gpu.product"
L_CC_MAJOR = "nvidia.com/gpu.compute.major"
L_CC_MINOR = "nvidia.com/gpu.compute.minor"
L_MEMORY = "nvidia.com/gpu.memory"
L_COUNT = "nvidia.com/gpu.count"
L_DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
L_DRIVER_MAJOR = "nvidia.com/cuda.driver-version.major"
L_DRIVER_MINOR = "nvidia.com/cuda.driver-version.minor"
L_DRIVER_REV = "nvidia.com/cuda.driver-version.revision"
L_RUNTIME_FULL = "nvidia.com/cuda.runtime-version.full"
#: the deprecated aliases (read only when the new keys are missing)
_OLD_DRIVER = ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor",
               "nvidia.com/cuda.driver.rev")
L_ARCH = "kubernetes.io/arch"

#: node-pool labels of the managed Kubernetes services, first match names the target
POOL_LABELS = ("cloud.google.com/gke-nodepool", "eks.amazonaws.com/nodegroup",
               "kubernetes.azure.com/agentpool", "karpenter.sh/nodepool",
               "node.kubernetes.io/pool", "nodepool")

_MIG_SUFFIX = re.compile(r"-MIG-.*\Z")
_NAME_BAD = re.compile(r"[^A-Za-z0-9._-]+")
_INT = re.compile(r"^[0-9]{1,4}\Z")
#: the largest node list read (a List of 10,000 nodes is far more than any cluster JSON)
_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class NodeFacts:
    """What one node's labels say, each fact ``None`` when its label is missing."""

    node: str
    pool: Optional[str]
    product: Optional[str]  # the label value, as GFD wrote it
    compute_capability: Optional[str]
    memory_mib: Optional[int]
    count: Optional[int]
    driver: Optional[str]
    driver_label: Optional[str]  # which label the driver came from
    runtime_cuda: Optional[str]
    platform: str
    #: labels that were missing or unreadable, by name
    missing: Tuple[str, ...] = ()

    def key(self) -> Tuple[Any, ...]:
        """Nodes with the same key are one target."""
        return (self.pool, self.product, self.compute_capability, self.memory_mib,
                self.driver, self.platform)


def read_nodes(path: str) -> List[Mapping[str, Any]]:
    """The Node objects in ``kubectl get node(s) -o json`` output."""
    from envlock._files import read_user_text

    text = read_user_text(path, "node file")
    if len(text) > _MAX_BYTES:
        raise InputError(f"{path}: larger than {_MAX_BYTES // (1024 * 1024)} MiB; not "
                         f"kubectl node output")
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise InputError(f"{path}: not JSON ({str(exc).splitlines()[0][:80]}); give the "
                         f"output of 'kubectl get nodes -o json'") from None
    if not isinstance(doc, dict):
        raise InputError(f"{path}: expected a Node or a List of Nodes "
                         f"('kubectl get nodes -o json')")
    kind = doc.get("kind")
    if kind == "Node":
        items: List[Any] = [doc]
    elif kind in ("List", "NodeList") and isinstance(doc.get("items"), list):
        items = [i for i in doc["items"] if isinstance(i, dict) and i.get("kind", "Node")
                 == "Node"]
    else:
        raise InputError(f"{path}: kind {str(kind)[:40]!r} is neither Node nor List; give "
                         f"the output of 'kubectl get nodes -o json'")
    if not items:
        raise InputError(f"{path}: the list holds no nodes")
    return items


def _labels(node: Mapping[str, Any]) -> Dict[str, str]:
    meta = node.get("metadata")
    labels = meta.get("labels") if isinstance(meta, dict) else None
    if not isinstance(labels, dict):
        return {}
    return {str(k): str(v) for k, v in labels.items() if isinstance(v, (str, int))}


def _int(labels: Mapping[str, str], key: str) -> Optional[int]:
    v = labels.get(key, "").strip()
    return int(v) if _INT.match(v) else None


def _driver(labels: Mapping[str, str]) -> Tuple[Optional[str], Optional[str]]:
    full = labels.get(L_DRIVER_FULL, "").strip()
    if is_driver_version(full):
        return full, L_DRIVER_FULL
    for keys in ((L_DRIVER_MAJOR, L_DRIVER_MINOR, L_DRIVER_REV), _OLD_DRIVER):
        parts = [labels.get(k, "").strip() for k in keys]
        if parts[0] and parts[1]:
            # the revision label drops nothing: GFD writes "05" as the driver prints it
            text = ".".join(p for p in parts if p)
            if is_driver_version(text):
                return text, keys[0].rsplit(".", 1)[0] + ".*"
    return None, None


def node_facts(node: Mapping[str, Any]) -> Optional[NodeFacts]:
    """The GPU facts of one Node; ``None`` for a node GFD has not labelled at all."""
    labels = _labels(node)
    meta = node.get("metadata") if isinstance(node.get("metadata"), dict) else {}
    name = str(meta.get("name") or "?")
    if not any(k.startswith("nvidia.com/") for k in labels):
        return None
    missing: List[str] = []
    product = labels.get(L_PRODUCT, "").strip() or None
    if product is None:
        missing.append(L_PRODUCT)
    major, minor = _int(labels, L_CC_MAJOR), _int(labels, L_CC_MINOR)
    cc = f"{major}.{minor}" if major is not None and minor is not None else None
    if cc is None:
        missing.append(f"{L_CC_MAJOR}/.minor")
    driver, origin = _driver(labels)
    if driver is None:
        missing.append(L_DRIVER_FULL)
    runtime = labels.get(L_RUNTIME_FULL, "").strip() or None
    status = node.get("status") if isinstance(node.get("status"), dict) else {}
    info = status.get("nodeInfo") if isinstance(status.get("nodeInfo"), dict) else {}
    arch = labels.get(L_ARCH) or str(info.get("architecture") or "amd64")
    platform = "linux_aarch64" if arch in ("arm64", "aarch64") else "linux_x86_64"
    pool = next((labels[k] for k in POOL_LABELS if labels.get(k)), None)
    return NodeFacts(node=name, pool=pool, product=product, compute_capability=cc,
                     memory_mib=_int(labels, L_MEMORY), count=_int(labels, L_COUNT),
                     driver=driver, driver_label=origin, runtime_cuda=runtime,
                     platform=platform, missing=tuple(missing))


def _product_gpu(matrix: Matrix, product: str, memory_mib: Optional[int]) -> Optional[Gpu]:
    """The matrix GPU a GFD product label names (``NVIDIA-H100-80GB-HBM3``); MIG
    strategy ``single`` appends ``-MIG-1g.10gb``, which names the same board."""
    base = _MIG_SUFFIX.sub("", product)
    for name in (base.replace("-", " "), base):
        g = matrix.find_gpu(name, memory_mib)
        if g is not None:
            return g
    return None


def gfd_products(gpu: Gpu) -> Tuple[str, ...]:
    """The ``nvidia.com/gpu.product`` values GFD writes for a matrix GPU."""
    out: List[str] = []
    for n in gpu.nvml_names or (gpu.name,):
        v = n.strip().replace(" ", "-")
        if v not in out:
            out.append(v)
    return tuple(out)


def _safe_name(text: str) -> str:
    name = _NAME_BAD.sub("-", text).strip("-._").lower()
    return name[:63] or "node"


def node_targets(matrix: Matrix, nodes: Sequence[Mapping[str, Any]], origin: str,
                 python: str, glibc: str) -> List[Any]:
    """One :class:`~envlock.resolve.target.TargetSpec` per distinct set of GPU facts."""
    from envlock.resolve.target import TargetSpec

    groups: Dict[Tuple[Any, ...], List[NodeFacts]] = {}
    unlabelled: List[str] = []
    for node in nodes:
        f = node_facts(node)
        if f is None:
            meta = node.get("metadata") if isinstance(node.get("metadata"), dict) else {}
            unlabelled.append(str(meta.get("name") or "?"))
            continue
        groups.setdefault(f.key(), []).append(f)
    if not groups:
        raise InputError(f"{origin}: no node carries GPU Feature Discovery labels "
                         f"(nvidia.com/gpu.product, ...); is GFD deployed?")
    targets: List[TargetSpec] = []
    used: Dict[str, int] = {}
    for facts in groups.values():
        f = facts[0]
        names = ", ".join(x.node for x in facts[:5]) + (
            f" and {len(facts) - 5} more" if len(facts) > 5 else "")
        notes: List[str] = [f"from node labels ({origin}): {names}"
                            + (f", pool {f.pool}" if f.pool else "")]
        gpus: Tuple[Gpu, ...] = ()
        family: Optional[str] = None
        g = _product_gpu(matrix, f.product, f.memory_mib) if f.product else None
        if g is not None and f.compute_capability and g.compute_capability != \
                f.compute_capability:
            raise InputError(f"{origin}: node {f.node}: {L_PRODUCT}={f.product} is compute "
                             f"capability {g.compute_capability} in the matrix, but its "
                             f"labels say {f.compute_capability}")
        if g is not None:
            gpus = (g,)
        elif f.compute_capability:
            gpus = tuple(x for x in matrix.gpus.values()
                         if x.compute_capability == f.compute_capability)
            what = (f"{L_PRODUCT}={f.product} is not in the matrix" if f.product
                    else f"{L_PRODUCT} is missing")
            if not gpus:
                raise InputError(f"{origin}: node {f.node}: {what}, and no GPU the matrix "
                                 f"knows is compute capability {f.compute_capability}")
            family = f"cc{f.compute_capability}"
            notes.append(f"{what}: the GPU stays unknown; resolved for every GPU of compute "
                         f"capability {f.compute_capability} ({len(gpus)} models)")
        else:
            what = (f"{L_PRODUCT}={f.product} is not in the matrix" if f.product
                    else f"{L_PRODUCT} is missing")
            raise InputError(f"{origin}: node {f.node}: {what} and its compute capability "
                             f"labels ({L_CC_MAJOR}, {L_CC_MINOR}) are missing: the GPU is "
                             f"unknown; pass --gpu NAME instead")
        if f.driver:
            notes.append(f"driver {f.driver} from {f.driver_label}")
        else:
            notes.append(f"driver unknown: no {L_DRIVER_FULL} (nor the deprecated "
                         f"nvidia.com/cuda.driver.*) label; the lock names its floor")
        for label in f.missing:
            if label not in (L_PRODUCT, L_DRIVER_FULL):
                notes.append(f"label {label} is missing: unknown")
        if f.runtime_cuda:
            notes.append(f"the driver supports CUDA {f.runtime_cuda} ({L_RUNTIME_FULL})")
        base = _safe_name(f.pool or (gpus[0].id if len(gpus) == 1 else family or "gpu"))
        n = used.get(base, 0) + 1
        used[base] = n
        name = base if n == 1 else f"{base}-{n}"
        targets.append(TargetSpec(name=name, gpus=gpus, python=python,
                                  platform=f.platform, glibc=glibc, driver=f.driver,
                                  origin=f"--from-node {origin}", notes=tuple(notes),
                                  family=family, separate=len(gpus) > 1))
    if unlabelled:
        targets = [replace(t, notes=t.notes + (
            f"left out (no GPU Feature Discovery labels): {', '.join(unlabelled[:5])}",))
            if i == 0 else t for i, t in enumerate(targets)]
    return targets
