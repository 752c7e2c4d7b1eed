"""Facts a log states, and the machine they describe.

A pasted log is evidence about the machine it came from: GPU names and counts from an
``nvidia-smi`` table, driver, CUDA and NCCL versions, the torch build, ``topo -m`` links.
:mod:`envlock.checks.logread` reads them out of the text; this module turns them into
:class:`Facts`. Under a machine's own facts (:class:`LayeredFacts`: the machine wins) when
the log is from that machine; alone when it is evidently from another one
(:func:`other_machine`: no GPU here while the log shows GPUs, or other GPU models), so a
log pasted on a laptop is judged on the machine it describes, with everything the log does
not say unknown.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from envlock.knowledge.derive import find_build, library_knowledge
from envlock.knowledge.facts import Facts
from envlock.matrix.conditions import LIBRARY_NAMES
from envlock.knowledge.values import UNKNOWN, OneOf

__all__ = ["LayeredFacts", "facts_from_logs", "other_machine"]


class LayeredFacts(Facts):
    """A machine's facts with the log's facts underneath: a value the machine (snapshot or
    live probe) knows wins; the log fills only what the machine left unknown."""

    def __init__(self, top: Optional[Facts], log_values: Mapping[str, Any],
                 log_collections: Mapping[str, Any],
                 log_origins: Optional[Mapping[str, str]] = None) -> None:
        super().__init__({}, {}, None, None, None)
        self._log_origins = dict(log_origins or {})
        self._top = top
        self._log_values = dict(log_values)
        self._log_collections = dict(log_collections)

    def get(self, path: str) -> Any:
        if self._top is not None:
            v = self._top.get(path)
            if v is not UNKNOWN and not (isinstance(v, list) and not v
                                         and path in self._log_values):
                return v
        return self._log_values.get(path, UNKNOWN)

    def origin(self, path: str) -> Optional[str]:
        if self._top is not None and self._top.get(path) is not UNKNOWN:
            return self._top.origin(path)
        if path in self._log_values:
            return self._log_origins.get(path, "read from the log")
        return None

    @property
    def contradictions(self) -> Any:  # type: ignore[override]
        return self._top.contradictions if self._top is not None else ()

    @contradictions.setter
    def contradictions(self, value: Any) -> None:
        pass

    def elements(self, collection: str) -> Any:
        if self._top is not None:
            e = self._top.elements(collection)
            if e is not UNKNOWN and (e or collection not in self._log_collections):
                return e
        return self._log_collections.get(collection, UNKNOWN)

    def as_dict(self) -> Dict[str, Any]:
        out = {k: v for k, v in self._log_values.items() if not k.startswith("_")}
        if self._top is not None:
            out.update(self._top.as_dict())
        return out

    def log_knows(self, path: str) -> bool:
        """Whether the log itself states this fact (or this collection)."""
        return path in self._log_values or path in self._log_collections


def facts_from_logs(logs: Sequence[Mapping[str, Any]], matrix: Any = None,
                    top: Optional[Facts] = None) -> LayeredFacts:
    """The facts several logs state (each log's ``path -> value`` reading), merged (first
    log wins), under ``top``."""
    values: Dict[str, Any] = {}
    for facts in logs:
        for k, v in facts.items():
            if k in ("gpu.name", "gpu.cc") and k in values:
                values[k] = list(dict.fromkeys(list(values[k]) + list(v)))
            else:
                values.setdefault(k, v)
    collections: Dict[str, Any] = {}
    names = values.get("gpu.name") or []
    caps = list(values.get("gpu.cc") or [])
    gpus: List[Dict[str, Any]] = []
    for i, name in enumerate(names):
        model = matrix.find_gpu(name) if matrix is not None else None
        cc = caps[i] if i < len(caps) else (model.compute_capability if model else UNKNOWN)
        gpus.append({"name": name, "model": model.id if model else UNKNOWN,
                     "arch": model.arch if model else UNKNOWN,
                     "segment": model.segment if model else UNKNOWN,
                     "form_factor": (model.form_factor or UNKNOWN) if model else UNKNOWN,
                     "cc": cc, "memory_mib": UNKNOWN, "mig": UNKNOWN, "lost": UNKNOWN})
    if not gpus and caps:
        gpus = [{"name": UNKNOWN, "model": UNKNOWN, "arch": UNKNOWN, "segment": UNKNOWN,
                 "form_factor": UNKNOWN, "cc": c, "memory_mib": UNKNOWN, "mig": UNKNOWN,
                 "lost": UNKNOWN} for c in caps]
    if gpus:
        collections["gpu"] = gpus
        for key in ("model", "arch", "segment"):
            vals = [g[key] for g in gpus if g[key] is not UNKNOWN]
            if vals:
                values[f"gpu.{key}"] = list(dict.fromkeys(vals))
        values["gpu.cc"] = [g["cc"] for g in gpus if g["cc"] is not UNKNOWN] or UNKNOWN
        if values["gpu.cc"] is UNKNOWN:
            del values["gpu.cc"]
        arch_list = values.get("torch.arch_list")
        if arch_list:
            from envlock.kernels import coverage

            uncovered = []
            for g in gpus:
                if g["cc"] is UNKNOWN:
                    continue
                try:
                    if not coverage(arch_list, g["cc"]).ok:
                        uncovered.append(g["name"] if g["name"] is not UNKNOWN else g["cc"])
                except ValueError:
                    continue
            values["gpu.uncovered"] = uncovered
    origins: Dict[str, str] = {}
    if "P2P" in (values.get("nccl.transports") or ()):
        # NCCL printed a "via P2P/..." channel: its P2P transport is on, so the variable
        # that turns it off is unset or 0 there, and the driver reports P2P on the links
        why = "derived from NCCL connecting via P2P in the log"
        values["env.NCCL_P2P_DISABLE"] = OneOf((None, "0"))
        origins["env.NCCL_P2P_DISABLE"] = why
        links = values.get("_links") or []
        if links and len({e["kind"] for e in links}) == 1:
            values["_links"] = [dict(e, p2p=True) for e in links]
            values["link.p2p"] = [True] * len(links)
            origins["link.p2p"] = why
    if "_links" in values:
        collections["link"] = values.pop("_links")
    tv = values.get("torch.version")
    if matrix is not None and isinstance(tv, str):
        # the torch build the log names says which libraries its machine loads (the build's
        # pins, else the bound of its CUDA line); what the log states itself wins
        line = values.get("torch.cuda") if isinstance(values.get("torch.cuda"), str) else None
        build = find_build(matrix, tv)
        for name, dv in library_knowledge(matrix, build, None, cuda_line=line).items():
            key = f"library.{name}.version"
            if name in LIBRARY_NAMES and key not in values:
                values[key] = dv.value
                origins[key] = f"{dv.origin}, named in the log"
    return LayeredFacts(top, values, collections, origins)


def other_machine(host: Facts, logs: Facts) -> Optional[str]:
    """A short description of the log's machine (``NVIDIA H800 PCIe x8``) when this host is
    evidently not it, else None. Evident: the log shows GPUs and this host has none (or no
    driver), or both name GPUs and none of the log's models is here."""
    names = logs.get("gpu.name")
    count = logs.get("gpu.count")
    if not isinstance(names, list) or not names:
        if not isinstance(count, int) or count < 1:
            return None
        names = []
    n = count if isinstance(count, int) and count > 0 else len(names)
    what = ", ".join(str(x) for x in names) or "GPUs"
    desc = f"{what} x{n}" if n > 1 else what
    here = host.get("gpu.count")
    if here == 0 or host.get("driver.present") is False:
        return desc
    mine = host.get("gpu.name")
    if isinstance(mine, list) and mine and names:
        known = {str(x).lower() for x in mine if x is not UNKNOWN}
        if known and not known & {str(x).lower() for x in names}:
            return desc
    return None
