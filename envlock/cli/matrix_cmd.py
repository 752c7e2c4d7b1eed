"""``envlock matrix``: validate the shipped data and query it."""

from __future__ import annotations

import argparse
import json
from typing import Any, Dict, List

from envlock.cli.parser import needs_subcommand
from envlock.errors import ExitCode, UsageError

__all__ = ["register"]


def register(sub: "argparse._SubParsersAction[Any]") -> None:
    p = sub.add_parser("matrix", help="query and validate the compatibility matrix",
                       description="Query the curated compatibility matrix shipped with envlock.")
    msub = p.add_subparsers(dest="matrix_command", metavar="SUBCOMMAND")

    v = msub.add_parser("validate", help="check every matrix file; list all problems")
    v.add_argument("--dir", help="validate this directory instead of the shipped data")
    v.add_argument("--json", action="store_true", help="machine-readable output")
    v.set_defaults(run=_validate)

    g = msub.add_parser("gpu", help="a GPU: capability, architecture, drivers, torch builds")
    g.add_argument("name", help="what you call it: H20, h100, 'rtx 4090', 'NVIDIA A100-SXM4-40GB'")
    g.add_argument("--platform", default="linux_x86_64",
                   choices=["linux_x86_64", "linux_aarch64", "win_amd64"])
    g.add_argument("--json", action="store_true", help="machine-readable output")
    g.set_defaults(run=_gpu)

    t = msub.add_parser("torch", help="a torch release: builds, CUDA, arch lists, pins")
    t.add_argument("version", help="e.g. 2.5.1")
    t.add_argument("--json", action="store_true", help="machine-readable output")
    t.set_defaults(run=_torch)

    d = msub.add_parser("driver", help="a driver version: newest CUDA and torch builds it runs")
    d.add_argument("version", help="e.g. 535.104.05")
    d.add_argument("--platform", default="linux_x86_64",
                   choices=["linux_x86_64", "linux_aarch64"])
    d.add_argument("--json", action="store_true", help="machine-readable output")
    d.set_defaults(run=_driver)

    p.set_defaults(run=lambda args, out: needs_subcommand(p, out))



def _dump(out: Any, obj: Any) -> None:
    out.print(json.dumps(obj, indent=2))


# -- validate ------------------------------------------------------------------------------


def _validate(args: argparse.Namespace, out: Any) -> int:
    from envlock.matrix.load import build_matrix, data_files, read_raw
    from envlock.matrix.rows import Problems
    from envlock.matrix.stamp import content_digest

    files = data_files(args.dir)
    problems = Problems()
    matrix = build_matrix(read_raw(files, problems), problems, content_digest(files))
    if args.json:
        _dump(out, {"ok": not problems, "version": matrix.version, "problems": problems.items,
                    "counts": _counts(matrix)})
    elif problems:
        for p in problems.items:
            out.print(p)
        out.print(f"{len(problems)} problem{'s' if len(problems) != 1 else ''} found")
    else:
        c = _counts(matrix)
        out.print(f"matrix {matrix.version} is valid: {c['gpus']} GPUs, {c['cuda_releases']} "
                  f"CUDA releases, {c['drivers']} driver branches, {c['torch_releases']} torch "
                  f"releases ({c['builds']} builds), {c['advisories']} advisories")
    return ExitCode.DRIFT if problems else ExitCode.OK


def _counts(m: Any) -> Dict[str, int]:
    return {"gpus": len(m.gpus), "archs": len(m.archs), "cuda_releases": len(m.cuda_releases),
            "drivers": len(m.drivers), "torch_releases": len(m.torch_releases),
            "builds": len(m.variants), "advisories": len(m.advisories)}


# -- gpu -----------------------------------------------------------------------------------


def gpu_report(matrix: Any, name: str, platform: str) -> Dict[str, Any]:
    from envlock.matrix.rules import driver_need, gpu_coverage

    gpu = matrix.gpu(name)
    arch = matrix.arch(gpu)
    releases: List[Dict[str, Any]] = []
    for rel in reversed(list(matrix.torch_releases.values())):
        builds = []
        for v in sorted(matrix.variants_for(rel.version, platform),
                        key=lambda v: (v.tag != "cpu", v.tag, v.on_pypi), reverse=True):
            if v.tag == "cpu":
                continue
            cov = gpu_coverage(v, gpu)
            builds.append({
                "tag": v.tag,
                "index": "pypi" if v.on_pypi else v.index,
                "coverage": None if cov is None else cov.how,
                "target": None if cov is None else cov.target,
                "min_driver": driver_need(matrix, v, [gpu]).minimum,
            })
        releases.append({"release": rel.version, "builds": builds})
    return {
        "id": gpu.id,
        "name": gpu.name,
        "aliases": list(gpu.aliases),
        "nvml_names": list(gpu.nvml_names),
        "cuda_names": list(gpu.cuda_names),
        "compute_capability": gpu.compute_capability,
        "sm": gpu.sm,
        "arch": arch.name,
        "chip": gpu.chip,
        "memory_gb": gpu.memory_gb,
        "segment": gpu.segment,
        "form_factor": gpu.form_factor,
        "min_driver_branch": gpu.min_driver_branch,
        "min_driver": gpu.min_driver,
        "last_driver_branch": arch.last_driver_branch,
        "last_cuda_major": arch.last_cuda_major,
        "sources": list(gpu.provenance.sources),
        "confidence": gpu.provenance.confidence,
        "note": gpu.provenance.note,
        "platform": platform,
        "torch": releases,
    }


def _gpu(args: argparse.Namespace, out: Any) -> int:
    from envlock.matrix import get_matrix

    matrix = get_matrix()
    rep = gpu_report(matrix, args.name, args.platform)
    if args.json:
        _dump(out, rep)
        return ExitCode.OK
    out.print(f"{rep['name']}  [{rep['id']}]")
    out.print(f"  compute capability   {rep['compute_capability']} ({rep['sm']}), "
              f"{rep['arch']}" + (f" ({rep['chip']})" if rep["chip"] else ""))
    mem = f"{rep['memory_gb']:g} GB, " if rep["memory_gb"] else ""
    out.print(f"  class                {mem}{rep['segment']}"
              + (f", {rep['form_factor']}" if rep["form_factor"] else ""))
    if rep["nvml_names"]:
        out.print(f"  NVML names           {'; '.join(rep['nvml_names'])}")
    if rep["cuda_names"]:
        out.print(f"  CUDA names           {'; '.join(rep['cuda_names'])}")
    branch = rep["min_driver_branch"]
    if rep["min_driver"] and branch and branch != rep["min_driver"]:
        drv = f"{rep['min_driver']} ({branch})"
    else:  # only the branch is known: say it once
        drv = rep["min_driver"] or branch or "unknown"
    out.print(f"  minimum driver       {drv}")
    if rep["last_driver_branch"]:
        out.print(f"  last driver branch   {rep['last_driver_branch']} "
                  f"(last CUDA major {rep['last_cuda_major']})")
    out.print(f"  source               {', '.join(rep['sources'])} ({rep['confidence']})")
    if rep["note"]:
        out.print(f"  note                 {rep['note']}")
    out.print("")
    out.print(f"PyTorch builds with kernels for it ({args.platform}; * = the PyPI build, "
              f"~ = only through PTX JIT):")
    none: List[str] = []
    for r in rep["torch"]:
        good = []
        for b in r["builds"]:
            if b["coverage"] in ("sass", "ptx"):
                mark = ("*" if b["index"] == "pypi" else "") + \
                    ("~" if b["coverage"] == "ptx" else "")
                good.append(f"{b['tag']}{mark}")
        unknown = [b["tag"] for b in r["builds"] if b["coverage"] is None]
        if good:
            line = f"  {r['release']:<8} " + " ".join(dict.fromkeys(good))
            if unknown:
                line += f"   (arch list unknown: {' '.join(dict.fromkeys(unknown))})"
            out.print(line)
        else:
            none.append(r["release"])
    if none:
        out.print(f"  no kernels in: {', '.join(none)}")
    return ExitCode.OK


# -- torch ---------------------------------------------------------------------------------


def torch_report(matrix: Any, version: str) -> Dict[str, Any]:
    from envlock.resolve.installer_env import variant_properties

    rel = matrix.release(version)
    variants = []
    for v in sorted(matrix.variants_for(rel.version),
                    key=lambda v: (v.platform, not v.on_pypi, v.tag)):
        props = variant_properties(v)
        variants.append({
            "tag": v.tag,
            "platform": v.platform,
            "index": "pypi" if v.on_pypi else v.index,
            "version": v.version_string,
            "cuda": v.cuda,
            "cuda_release": v.cuda_release,
            "sass": list(v.sass) if v.sass is not None else None,
            "ptx": list(v.ptx) if v.ptx is not None else None,
            # PEP 825 properties in NVIDIA's namespace; None where the arch list is unknown
            "variant_properties": list(props) if props is not None else None,
            "pins_status": v.pins_status,
            "pins": list(v.pins),
            "libraries": dict(v.libraries),
            "pythons": list(v.pythons),
            "sources": list(v.provenance.sources),
            "confidence": v.provenance.confidence,
            "note": v.provenance.note,
        })
    triton = sorted({p for v in variants for p in v["pins"]
                     if p.lower().startswith(("triton", "pytorch-triton"))})
    # the pairing the resolver uses (companions.toml); the wheels' own pins only without one
    # (torchaudio 2.11.0 names no torch, yet is 2.11.0-2.14.x's torchaudio)
    pair = matrix.companions.get(rel.version)
    return {
        "version": rel.version,
        "date": rel.date,
        "requires_python": rel.requires_python,
        "pythons": {p: list(b.pythons) for p, b in rel.builds.items()},
        "torchvision": list(pair.torchvision if pair else rel.torchvision),
        "torchaudio": list(pair.torchaudio if pair else rel.torchaudio),
        "triton": triton,
        "variants": variants,
    }


def _torch(args: argparse.Namespace, out: Any) -> int:
    from envlock.matrix import get_matrix

    matrix = get_matrix()
    rep = torch_report(matrix, args.version)
    if args.json:
        _dump(out, rep)
        return ExitCode.OK
    out.print(f"torch {rep['version']}  released {rep['date'] or 'unknown'}, "
              f"Requires-Python {rep['requires_python'] or '?'}")
    for plat, pys in rep["pythons"].items():
        out.print(f"  {plat:<14} Python {' '.join(pys)}")
    out.print(f"  torchvision {', '.join(rep['torchvision']) or '-'};  torchaudio "
              f"{', '.join(rep['torchaudio']) or '- (none known to pair with it)'}")
    if rep["triton"]:
        out.print(f"  triton pins: {'; '.join(rep['triton'])}")
    out.print("")
    for v in rep["variants"]:
        where = "PyPI" if v["index"] == "pypi" else v["index"]
        head = f"{v['platform']:<14} {v['tag']:<6} {where}"
        out.print(head + (f"  (CUDA {v['cuda_release'] or v['cuda']})" if v["cuda"] else ""))
        if v["tag"] == "cpu":
            continue
        sass = " ".join(v["sass"]) if v["sass"] is not None else "unknown"
        ptx = " ".join(v["ptx"]) if v["ptx"] else ("none" if v["ptx"] is not None else "unknown")
        out.print(f"    SASS  {sass}")
        out.print(f"    PTX   {ptx}")
        libs = ", ".join(f"{k} {val}" for k, val in sorted(v["libraries"].items()))
        out.print(f"    libs  {libs or 'unknown'}   [pins {v['pins_status']}]")
        if v["note"]:
            out.print(f"    note  {v['note']}")
    return ExitCode.OK


# -- driver --------------------------------------------------------------------------------


def driver_report(matrix: Any, version: str, platform: str) -> Dict[str, Any]:
    from envlock.matrix.rules import driver_verdict
    from envlock.versions import V, is_driver_version

    if not is_driver_version(version):
        raise UsageError(f"{version!r} is not an NVIDIA driver version (like 535.104.05)")
    branch = matrix.driver_branch(version)
    full = matrix.driver_full_cuda(version)
    majors = []
    for m in sorted(matrix.cuda_majors.values(), key=lambda m: m.major):
        majors.append({"major": m.major, "floor": m.compat_min_driver_linux,
                       "runs": V(version) >= V(m.compat_min_driver_linux)})
    newest: Dict[str, Dict[str, Any]] = {}
    for rel in reversed(list(matrix.torch_releases.values())):
        for v in matrix.variants_for(rel.version, platform):
            if v.tag == "cpu" or v.tag in newest:
                continue
            verdict = driver_verdict(matrix, v, [], version)
            if verdict.ok:
                newest[v.tag] = {"release": rel.version, "tag": v.tag,
                                 "index": "pypi" if v.on_pypi else v.index, "how": verdict.how}
    builds = sorted(newest.values(), key=lambda b: (V(b["release"]), b["tag"]), reverse=True)
    return {
        "driver": version,
        "branch": None if branch is None else {
            "id": branch.id, "type": branch.type, "cuda": branch.cuda, "eol": branch.eol,
            "note": branch.provenance.note},
        "full_cuda": full,
        "cuda_majors": majors,
        "newest_torch": builds,
        "platform": platform,
    }


def _driver(args: argparse.Namespace, out: Any) -> int:
    from envlock.matrix import get_matrix

    matrix = get_matrix()
    rep = driver_report(matrix, args.version, args.platform)
    if args.json:
        _dump(out, rep)
        return ExitCode.OK
    b = rep["branch"]
    if b:
        eol = f", end of life {b['eol']}" if b["eol"] else ""
        out.print(f"driver {rep['driver']}: branch {b['id']} ({b['type']}{eol})")
    else:
        out.print(f"driver {rep['driver']}: branch not in the matrix")
    out.print(f"  full CUDA support up to {rep['full_cuda'] or 'unknown'}")
    for m in rep["cuda_majors"]:
        verdict = "runs" if m["runs"] else "cannot run"
        out.print(f"  {verdict} CUDA {m['major']}.x wheels (minor-version compatibility "
                  f"needs >= {m['floor']})")
    out.print("")
    if not rep["newest_torch"]:
        out.print("no torch CUDA build in the matrix runs on this driver")
        return ExitCode.OK
    out.print(f"newest torch build per CUDA tag it runs ({rep['platform']}):")
    for item in rep["newest_torch"]:
        where = "PyPI" if item["index"] == "pypi" else item["index"]
        out.print(f"  {item['release']:<8} {item['tag']:<6} {where}  [{item['how']}]")
    return ExitCode.OK
