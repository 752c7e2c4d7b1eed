"""``--format uv``: a ``pyproject.toml`` fragment for uv projects.

uv, unlike pip, routes packages to indexes: ``[[tool.uv.index]]`` with ``explicit = true``
declares the PyTorch index so that *only* packages named in ``[tool.uv.sources]`` may come
from it, and ``[tool.uv.sources]`` names the torch family. Everything else keeps coming
from the default index, so a package on the PyTorch index can never shadow one from PyPI
and vice versa (uv's answer to the ``torchtriton`` attack, which envlock's lock already
encodes). The lock's pins become ``constraint-dependencies``; advisory overrides, which
contradict a pin of the torch build, become ``override-dependencies``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Tuple

from envlock.export.common import (
    ExportRequest,
    Exporter,
    gpu_core_warning,
    header_lines,
    overrides,
    pin,
)
from envlock.lock.model import LockTarget

__all__ = ["UvExporter", "EXPORTER", "index_name", "routing"]

PYPI = "https://pypi.org/simple"


def index_name(t: LockTarget) -> str:
    """``pytorch-cu121``: the uv index name for the target's torch build."""
    variant = t.torch.variant if t.torch is not None else "torch"
    return "pytorch-" + re.sub(r"[^A-Za-z0-9._-]+", "-", variant).strip("-")


def routing(t: LockTarget) -> Tuple[List[str], List[str]]:
    """(torch-family packages routed to the build's index, other indexes in use).

    Nothing is routed when the build comes from the default index (PyPI torch builds);
    NVIDIA wheels that the lock took from the PyTorch index are not routed: PyPI has the
    same files, and routing only the torch family is what keeps the PyTorch index from
    serving anything else.
    """
    from envlock.families import TORCH_FAMILY

    tindex = t.torch.index if t.torch is not None and not t.torch.on_pypi else None
    routed = sorted(p.name for p in t.packages
                    if p.name in TORCH_FAMILY and tindex and p.index == tindex)
    counts: Dict[str, int] = {}
    for p in t.packages:
        if p.index and p.name not in routed and p.index != tindex:
            counts[p.index] = counts.get(p.index, 0) + 1
    others = sorted(counts, key=lambda ix: (-counts[ix], ix))
    return routed, others


class UvExporter(Exporter):
    name = "uv"
    summary = "pyproject.toml fragment: uv index routing for the torch family + pins"

    def filename(self, target: str) -> str:
        return f"uv-{target}.toml"

    def warnings(self, request: ExportRequest) -> List[str]:
        return gpu_core_warning(request.target)

    def render(self, request: ExportRequest) -> str:
        import tomlkit

        t = request.target
        routed, others = routing(t)
        ov = overrides(t)
        name = index_name(t)
        body = [
            "Merge these tables into your pyproject.toml, then run: uv lock && uv sync",
            "constraint-dependencies pins every package of the lock without adding it to "
            "your dependencies; uv still resolves, so keep torch (and torchvision, ...) in "
            "[project] dependencies.",
        ]
        if routed:
            body.append(f"The PyTorch index is explicit: only {', '.join(routed)} (listed "
                        f"in [tool.uv.sources]) come from it, everything else from the "
                        f"default index, so neither index can shadow the other.")
        else:
            body.append("This torch build comes from the default index; no index routing "
                        "is needed.")
        if ov:
            body.append("override-dependencies holds the advisory overrides, which replace "
                        "the torch build's own pins: " + ", ".join(
                            f"{req} ({aid})" for _, (aid, req) in sorted(ov.items())) + ".")
        body.append("uv pins no hashes here: for hash-checked installs use --format pylock "
                    "or --format requirements.")
        doc = tomlkit.document()
        uv = tomlkit.table()
        pins = tomlkit.array()
        for p in sorted(t.packages, key=lambda p: p.name):
            pins.append(pin(p))
        pins.multiline(True)
        uv["constraint-dependencies"] = pins
        if ov:
            oa = tomlkit.array()
            for _, (_, req) in sorted(ov.items()):
                oa.append(req)
            oa.multiline(True)
            uv["override-dependencies"] = oa
        indexes = tomlkit.aot()
        if routed and t.torch is not None:
            ix = tomlkit.table()
            ix["name"] = name
            ix["url"] = t.torch.index
            ix["explicit"] = True
            indexes.append(ix)
        if others and others != [PYPI]:
            for i, url in enumerate(others):
                ix = tomlkit.table()
                ix["name"] = "default" if i == 0 else f"extra-{i}"
                ix["url"] = url
                if i == 0:
                    ix["default"] = True
                indexes.append(ix)
        if len(indexes):
            uv["index"] = indexes
        if routed:
            sources = tomlkit.table()
            for n in routed:
                src = tomlkit.inline_table()
                src["index"] = name
                sources[n] = src
            uv["sources"] = sources
        tool = tomlkit.table(is_super_table=True)
        tool["uv"] = uv
        doc["tool"] = tool
        header = header_lines(request, "pyproject.toml fragment for uv", body,
                              self.warnings(request))
        return "\n".join(header) + "\n\n" + tomlkit.dumps(doc)


EXPORTER = UvExporter()
