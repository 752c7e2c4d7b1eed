"""Read and check ``gpus.toml``: architectures and GPU models, and that every name a user
or NVML may give resolves to one row (or to memory variants of one capability)."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from envlock.matrix.load_common import (
    _CC_RE, _HEX_RE, _ID_RE, _LINE_RE, FORM_FACTORS, SEGMENTS, Ctx, top_rows,
)
from envlock.matrix.model import Arch, DriverBranch, Gpu
from envlock.matrix.rows import Row
from envlock.versions import is_driver_version

__all__ = ["archs", "gpus"]


def archs(raw: Mapping[str, Dict[str, Any]], ctx: Ctx) -> Dict[str, Arch]:
    out: Dict[str, Arch] = {}
    for row in top_rows(raw, "gpus.toml", "arch", ctx.problems, also=("gpu",)):
        aid = row.text("id", check=_ID_RE.match, what="a kebab-case id")  # type: ignore[arg-type]
        if aid in out:
            row.problem("id", f"duplicate arch id {aid!r}")
        arch = Arch(
            id=aid,
            name=row.text("name"),
            compute_capabilities=row.str_list(
                "compute_capabilities", required=True, check=_CC_RE.match,  # type: ignore[arg-type]
                what="a compute capability like '9.0'") or (),
            first_cuda=row.opt_text("first_cuda", check=_LINE_RE.match,  # type: ignore[arg-type]
                                    what="a CUDA line like '11.8'"),
            last_cuda_major=row.integer("last_cuda_major", required=False),
            last_driver_branch=row.opt_text("last_driver_branch"),
            provenance=ctx.provenance(row),
        )
        row.finish()
        out[aid] = arch
    return out


def gpus(raw: Mapping[str, Dict[str, Any]], ctx: Ctx, archs: Mapping[str, Arch],
          drivers: Mapping[str, DriverBranch]) -> Dict[str, Gpu]:
    from envlock.matrix.lookup import normalize_name

    data = raw.get("gpus.toml", {})
    items = data.get("gpu", [])
    if not isinstance(items, list):
        ctx.problems.add("gpus.toml", "gpu", "expected an array of tables")
        items = []
    out: Dict[str, Gpu] = {}
    names: Dict[str, List[Tuple[str, Gpu, str]]] = {}
    cc_owner: Dict[str, str] = {}
    for a in archs.values():
        for cc in a.compute_capabilities:
            if cc in cc_owner:
                ctx.problems.add("gpus.toml", f"arch {a.id}",
                                 f"compute capability {cc} also belongs to {cc_owner[cc]}")
            cc_owner[cc] = a.id
    for i, item in enumerate(items):
        row = Row("gpus.toml", f"gpu[{i}]", item, ctx.problems)
        gid = row.text("id", check=_ID_RE.match, what="a kebab-case id")  # type: ignore[arg-type]
        cc = row.text("compute_capability", check=_CC_RE.match, what="like '9.0'")  # type: ignore[arg-type]
        arch = row.text("arch")
        if arch and arch not in archs:
            row.problem("arch", f"unknown arch {arch!r}")
        elif arch and cc and cc not in archs[arch].compute_capabilities:
            row.problem("compute_capability", f"{cc} is not a capability of arch {arch!r}")
        branch = row.text("min_driver_branch")
        if branch and branch not in drivers:
            row.problem("min_driver_branch", f"unknown driver branch {branch!r}")
        mem = row.number("memory_gb", required=False)
        gpu = Gpu(
            id=gid,
            name=row.text("name"),
            aliases=row.str_list("aliases") or (),
            nvml_names=row.str_list("nvml_names", required=True) or (),
            cuda_names=row.str_list("cuda_names") or (),
            compute_capability=cc,
            arch=arch,
            chip=row.opt_text("chip"),
            memory_gb=mem,
            segment=row.choice("segment", SEGMENTS, default="consumer") or "consumer",
            form_factor=row.choice("form_factor", FORM_FACTORS, required=False),
            pci_ids=row.str_list("pci_ids", check=_HEX_RE.match,  # type: ignore[arg-type]
                                 what="an upper-case 4-digit hex id") or (),
            min_driver_branch=branch,
            min_driver=row.opt_text("min_driver", check=is_driver_version,
                                    what="a driver version"),
            provenance=ctx.provenance(row),
        )
        row.finish()
        if not gpu.nvml_names and not gpu.cuda_names:
            row.problem("nvml_names", "a GPU needs at least one NVML or CUDA name")
        if gid in out:
            row.problem("id", f"duplicate gpu id {gid!r}")
        out[gid] = gpu
        seen_here = set()
        for kind, values in (("name", (gpu.name,)), ("alias", gpu.aliases),
                             ("nvml name", gpu.nvml_names), ("cuda name", gpu.cuda_names),
                             ("id", (gpu.id,))):
            for v in values:
                key = normalize_name(v)
                if not key or key in seen_here:
                    continue
                seen_here.add(key)
                names.setdefault(key, []).append((kind, gpu, v))
    by_pci: Dict[str, Dict[str, str]] = {}
    for g in out.values():
        for pci in g.pci_ids:
            by_pci.setdefault(pci, {})[g.id] = g.compute_capability
    for pci, owners_cc in sorted(by_pci.items()):
        if len(set(owners_cc.values())) > 1:  # one device id is one chip: one capability
            desc = ", ".join(f"{gid} ({cc})" for gid, cc in sorted(owners_cc.items()))
            ctx.problems.add("gpus.toml", "gpu", f"PCI id {pci} has several compute "
                             f"capabilities: {desc}")
    for key, owners in names.items():
        gpus_here = {g.id: g for _, g, _ in owners}
        if len(gpus_here) < 2:
            continue
        shared_ok = all(kind in ("nvml name", "cuda name") for kind, _, _ in owners)
        ccs = {g.compute_capability for g in gpus_here.values()}
        mems = [g.memory_gb for g in gpus_here.values()]
        if shared_ok and len(ccs) == 1 and None not in mems and len(set(mems)) == len(mems):
            continue  # memory variants sharing one NVML name: allowed
        desc = ", ".join(f"{g.id} ({kind} {v!r})" for kind, g, v in owners)
        ctx.problems.add("gpus.toml", "gpu", f"name {key!r} is ambiguous: {desc}")
    return out
