"""Read and check ``cuda.toml``, ``drivers.toml`` and ``libraries.toml``: CUDA majors, lines
and releases, NVIDIA driver branches, and NCCL / cuDNN releases."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Tuple

from envlock.matrix.load_common import (
    _CC_RE, _DATE_RE, _LINE_RE, _SM_RE, BRANCH_TYPES, Ctx, driverish, top_rows,
)
from envlock.matrix.model import (
    CudaLine, CudaMajor, CudaRelease, CudnnRelease, DriverBranch, NcclRelease,
)
from envlock.matrix.rows import Row
from envlock.versions import is_version

__all__ = ["cuda", "drivers", "libraries"]


def cuda(raw: Mapping[str, Dict[str, Any]], ctx: Ctx) -> Tuple[
        Dict[int, CudaMajor], Dict[str, CudaLine], Dict[str, CudaRelease]]:
    data = raw.get("cuda.toml", {})
    for k in data:
        if k not in ("major", "line", "release", "source"):
            ctx.problems.add("cuda.toml", k, "unknown top-level key")

    def rows(key: str) -> List[Row]:
        items = data.get(key, [])
        if not isinstance(items, list):
            ctx.problems.add("cuda.toml", key, "expected an array of tables")
            return []
        return [Row("cuda.toml", f"{key}[{i}]", it, ctx.problems) for i, it in enumerate(items)]

    majors: Dict[int, CudaMajor] = {}
    for row in rows("major"):
        m = row.integer("major")
        cm = CudaMajor(
            major=m or 0,
            compat_min_driver_linux=row.text("compat_min_driver_linux", "0",
                                             check=driverish, what="a driver version"),
            compat_min_driver_windows=row.opt_text("compat_min_driver_windows",
                                                   check=driverish, what="a driver version"),
            compat_range_end=row.opt_text("compat_range_end", check=driverish,
                                          what="a driver version"),
            provenance=ctx.provenance(row),
        )
        row.finish()
        if m in majors:
            row.problem("major", f"duplicate major {m}")
        if m is not None:
            majors[m] = cm
    lines: Dict[str, CudaLine] = {}
    for row in rows("line"):
        v = row.text("version", check=_LINE_RE.match, what="a CUDA line like '12.4'")  # type: ignore[arg-type]
        sass = row.str_list("sass", required=True, check=_SM_RE.match,  # type: ignore[arg-type]
                            what="an sm_XY target") or ()
        cline = CudaLine(version=v, sass=sass, provenance=ctx.provenance(row))
        row.finish()
        if v in lines:
            row.problem("version", f"duplicate line {v}")
        if v and int(v.split(".")[0]) not in majors:
            row.problem("version", f"no [[major]] row for CUDA {v.split('.')[0]}")
        lines[v] = cline
    releases: Dict[str, CudaRelease] = {}
    for row in rows("release"):
        v = row.text("version", check=is_version, what="a version")
        line = row.text("line")
        if line and line not in lines:
            row.problem("line", f"unknown CUDA line {line!r}")
        elif v and line and not v.startswith(line + "."):
            row.problem("version", f"{v} does not belong to line {line}")
        rel = CudaRelease(
            version=v,
            line=line,
            label=row.opt_text("label"),
            driver_linux=row.opt_text("driver_linux", check=driverish, what="a driver version"),
            driver_windows=row.opt_text("driver_windows", check=driverish,
                                        what="a driver version"),
            components=row.str_map("components", check=is_version, what="a version"),
            provenance=ctx.provenance(row),
        )
        row.finish()
        if v in releases:
            row.problem("version", f"duplicate release {v}")
        releases[v] = rel
    return majors, lines, releases


def drivers(raw: Mapping[str, Dict[str, Any]], ctx: Ctx) -> Dict[str, DriverBranch]:
    out: Dict[str, DriverBranch] = {}
    for row in top_rows(raw, "drivers.toml", "branch", ctx.problems):
        bid = row.text("id", check=lambda s: bool(re.match(r"^R\d{3}$", s)), what="like 'R535'")
        major = row.integer("major")
        if bid and major is not None and bid != f"R{major}":
            row.problem("major", f"{major} does not match id {bid}")
        b = DriverBranch(
            id=bid,
            major=major or 0,
            type=row.choice("type", BRANCH_TYPES, default="unknown") or "unknown",
            cuda=row.opt_text("cuda", check=_LINE_RE.match, what="a CUDA line"),  # type: ignore[arg-type]
            eol=row.opt_text("eol", check=_DATE_RE.match, what="a date YYYY-MM[-DD]"),  # type: ignore[arg-type]
            provenance=ctx.provenance(row),
        )
        row.finish()
        if bid in out:
            row.problem("id", f"duplicate branch {bid}")
        out[bid] = b
    return out


def libraries(raw: Mapping[str, Dict[str, Any]], ctx: Ctx) -> Tuple[
        Dict[str, NcclRelease], Dict[str, CudnnRelease]]:
    data = raw.get("libraries.toml", {})
    for k in data:
        if k not in ("nccl", "cudnn", "source"):
            ctx.problems.add("libraries.toml", k, "unknown top-level key")
    nccl: Dict[str, NcclRelease] = {}
    for i, item in enumerate(data.get("nccl", []) or []):
        row = Row("libraries.toml", f"nccl[{i}]", item, ctx.problems)
        v = row.text("version", check=is_version, what="a version")
        rel = NcclRelease(
            version=v,
            date=row.opt_text("date", check=_DATE_RE.match, what="a date"),  # type: ignore[arg-type]
            cuda_majors=row.int_list("cuda_majors"),
            provenance=ctx.provenance(row),
        )
        row.finish()
        nccl[v] = rel
    cudnn: Dict[str, CudnnRelease] = {}
    for i, item in enumerate(data.get("cudnn", []) or []):
        row = Row("libraries.toml", f"cudnn[{i}]", item, ctx.problems)
        v = row.text("version", check=is_version, what="a version")
        rel2 = CudnnRelease(
            version=v,
            cuda_majors=row.int_list("cuda_majors"),
            compute_capabilities=row.str_list("compute_capabilities", check=_CC_RE.match,  # type: ignore[arg-type]
                                              what="a compute capability") or (),
            min_driver_linux=row.opt_text("min_driver_linux", check=driverish,
                                          what="a driver version"),
            provenance=ctx.provenance(row),
        )
        row.finish()
        cudnn[v] = rel2
    return nccl, cudnn
