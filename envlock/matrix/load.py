"""Read, validate and assemble the compatibility matrix.

The data comes from the TOML files in ``compat-matrix/``, which ship inside the package
(``importlib.resources``). Validation checks types, version strings, references between
files (a GPU's arch, a variant's CUDA line, a source id), and that every arch list is one
that CUDA line can compile. All problems are collected and raised together as one
:class:`~envlock.errors.MatrixError`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple, Union

from packaging.requirements import InvalidRequirement, Requirement

from envlock import _toml
from envlock.errors import MatrixError
from envlock.families import library_of_package
from envlock.kernels import parse_target
from envlock.matrix import conditions
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import (
    CONFIDENCES,
    PLATFORMS,
    PYPI,
    Advisory,
    Arch,
    CudaLine,
    CudaMajor,
    CudaRelease,
    CudnnRelease,
    DriverBranch,
    Gpu,
    NcclRelease,
    PlatformBuild,
    Provenance,
    Source,
    TorchRelease,
    TorchVariant,
)
from envlock.matrix.files import DATA_FILES, data_files
from envlock.matrix.rows import Problems, Row
from envlock.versions import is_driver_version, is_version

__all__ = ["load_matrix", "data_files", "read_raw", "build_matrix", "DATA_FILES"]


_ID_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
_CC_RE = re.compile(r"^\d{1,2}\.\d$")
_SM_RE = re.compile(r"^sm_\d{2,3}[af]?$")
_PTX_RE = re.compile(r"^compute_\d{2,3}$")
_TAG_RE = re.compile(r"^(cu\d{3}|cpu)$")
_DATE_RE = re.compile(r"^\d{4}-\d{2}(-\d{2})?$")
_LINE_RE = re.compile(r"^\d{1,2}\.\d{1,2}$")
_PY_RE = re.compile(r"^3\.\d{1,2}t?$")
_HEX_RE = re.compile(r"^[0-9A-F]{4}$")

SEGMENTS = ("datacenter", "workstation", "consumer", "embedded")
FORM_FACTORS = ("sxm", "pcie", "nvl", "superchip", "mezzanine", "desktop", "module")
BRANCH_TYPES = ("ltsb", "production", "new-feature", "legacy", "evaluation", "unknown")
SEVERITIES = ("error", "warning", "info")
CATEGORIES = (
    "gpu-arch", "driver", "library", "nccl", "topology", "host", "packages", "config",
    "training",
)
STATUSES = ("verified", "partial", "unverified")
SIGNALS = ("SIGFPE", "SIGSEGV", "SIGBUS", "SIGABRT", "SIGKILL", "SIGILL", "timeout")
RESOLVE_ACTIONS = ("exclude", "override", "warn")
PINS_STATUS = ("known", "partial", "unknown")
LIBRARY_KEYS = ("cublas", "cublasLt", "cudnn", "nccl", "cudart", "nvjitlink", "cusparse", "nvrtc")

Source_ = Union[str, Path]

_REQS: Dict[str, Any] = {}


def _requirement(text: str) -> Requirement:
    """Parse a PEP 508 string once per load: the same pins repeat across releases and
    platforms, and parsing dominates validation time."""
    found = _REQS.get(text)
    if found is None:
        try:
            found = Requirement(text)
        except InvalidRequirement as exc:
            found = exc
        _REQS[text] = found
    if isinstance(found, InvalidRequirement):
        raise found
    return found


def read_raw(files: Mapping[str, bytes], problems: Problems) -> Dict[str, Dict[str, Any]]:
    """Parse every file; syntax errors become problems."""
    raw: Dict[str, Dict[str, Any]] = {}
    for name in DATA_FILES:
        if name not in files:
            problems.add(name, "", "file is missing")
            raw[name] = {}
            continue
        try:
            raw[name] = _toml.loads(files[name].decode("utf-8"))
        except (_toml.TOMLDecodeError, UnicodeDecodeError) as exc:
            problems.add(name, "", f"not valid TOML: {exc}")
            raw[name] = {}
    return raw


def load_matrix(directory: Optional[Source_] = None) -> Matrix:
    """Load and validate the matrix; raises MatrixError listing every problem."""
    files = data_files(directory)
    problems = Problems()
    raw = read_raw(files, problems)
    matrix = build_matrix(raw, problems)
    if problems:
        raise MatrixError(problems.items)
    return matrix


# ---------------------------------------------------------------------------------------
# assembly


class _Ctx:
    """Shared state while building: problems and the source registry."""

    def __init__(self, problems: Problems) -> None:
        self.problems = problems
        self.sources: Dict[str, Source] = {}

    def provenance(self, row: Row, key: str = "source") -> Provenance:
        refs = row.str_list(key, required=True, allow_scalar=True) or ()
        if not refs:
            row.problem(key, "every row needs a source")
        kinds: List[str] = []
        for i, ref in enumerate(refs):
            if ref.startswith(("http://", "https://")):
                kinds.append("secondary")
            elif ref in self.sources:
                kinds.append(self.sources[ref].kind)
            else:
                row.problem(f"{key}[{i}]" if len(refs) > 1 else key,
                            f"unknown source id {ref!r}")
        confidence = row.choice("confidence", CONFIDENCES, required=False)
        if confidence is None:
            confidence = kinds[0] if kinds else "unverified"
        note = row.opt_text("note")
        return Provenance(sources=tuple(refs), confidence=confidence, note=note)  # type: ignore[arg-type]


def _collect_sources(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx) -> None:
    for name in DATA_FILES:
        table = raw.get(name, {}).get("source")
        if table is None:
            continue
        if not isinstance(table, dict):
            ctx.problems.add(name, "source", "expected tables [source.<id>]")
            continue
        for sid, body in table.items():
            row = Row(name, f"source.{sid}", body, ctx.problems)
            if not _ID_RE.match(sid):
                row.problem("", "source ids are lower-case kebab-case")
            if sid in ctx.sources:
                row.problem("", f"source id {sid!r} is defined twice")
            title = row.text("title")
            url = row.text("url", check=lambda u: u.startswith(("http://", "https://")),
                           what="an http(s) URL")
            kind = row.choice("kind", CONFIDENCES, default="unverified")
            row.finish()
            ctx.sources[sid] = Source(id=sid, title=title, url=url, kind=kind)  # type: ignore[arg-type]


def _top_rows(raw: Mapping[str, Dict[str, Any]], file: str, key: str,
              problems: Problems, also: Tuple[str, ...] = ()) -> List[Row]:
    data = raw.get(file, {})
    allowed = {key, "source", *also}
    for k in data:
        if k not in allowed:
            problems.add(file, k, f"unknown top-level key (expected [[{key}]])")
    items = data.get(key, [])
    if not isinstance(items, list):
        problems.add(file, key, "expected an array of tables")
        return []
    return [Row(file, f"{key}[{i}]", item, problems) for i, item in enumerate(items)]


def build_matrix(raw: Mapping[str, Dict[str, Any]], problems: Problems) -> Matrix:
    ctx = _Ctx(problems)
    _collect_sources(raw, ctx)

    meta = Row("meta.toml", "", raw.get("meta.toml", {}), problems)
    schema = meta.integer("schema")
    if schema is not None and schema != 1:
        meta.problem("schema", f"unsupported matrix schema {schema} (this envlock reads 1)")
    version = meta.text("version", "unknown")
    meta.finish()

    archs = _archs(raw, ctx)
    drivers = _drivers(raw, ctx)
    gpus = _gpus(raw, ctx, archs, drivers)
    majors, lines, releases = _cuda(raw, ctx)
    nccl, cudnn = _libraries(raw, ctx)
    torch_releases = _torch_pypi(raw, ctx, lines)
    variants = _variants(raw, ctx, torch_releases, lines, releases)
    advisories = _advisories(raw, ctx, gpus)

    return Matrix(
        version=version,
        sources=ctx.sources,
        archs=archs,
        gpus=gpus,
        cuda_majors=majors,
        cuda_lines=lines,
        cuda_releases=releases,
        drivers=drivers,
        nccl=nccl,
        cudnn=cudnn,
        torch_releases=torch_releases,
        variants=variants,
        advisories=advisories,
    )


# -- gpus.toml ---------------------------------------------------------------------------


def _archs(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx) -> Dict[str, Arch]:
    out: Dict[str, Arch] = {}
    for row in _top_rows(raw, "gpus.toml", "arch", ctx.problems, also=("gpu",)):
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


def _gpus(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx, archs: Mapping[str, Arch],
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


# -- cuda.toml, drivers.toml, libraries.toml ---------------------------------------------------


def _cuda(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx) -> Tuple[
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
                                             check=_driverish, what="a driver version"),
            compat_min_driver_windows=row.opt_text("compat_min_driver_windows",
                                                   check=_driverish, what="a driver version"),
            compat_range_end=row.opt_text("compat_range_end", check=_driverish,
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
            driver_linux=row.opt_text("driver_linux", check=_driverish, what="a driver version"),
            driver_windows=row.opt_text("driver_windows", check=_driverish,
                                        what="a driver version"),
            components=row.str_map("components", check=is_version, what="a version"),
            provenance=ctx.provenance(row),
        )
        row.finish()
        if v in releases:
            row.problem("version", f"duplicate release {v}")
        releases[v] = rel
    return majors, lines, releases


def _driverish(text: str) -> bool:
    return is_driver_version(text) or bool(re.match(r"^\d{3}$", text))


def _drivers(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx) -> Dict[str, DriverBranch]:
    out: Dict[str, DriverBranch] = {}
    for row in _top_rows(raw, "drivers.toml", "branch", ctx.problems):
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


def _libraries(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx) -> Tuple[
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
            min_driver_linux=row.opt_text("min_driver_linux", check=_driverish,
                                          what="a driver version"),
            provenance=ctx.provenance(row),
        )
        row.finish()
        cudnn[v] = rel2
    return nccl, cudnn


# -- torch ------------------------------------------------------------------------------------


def _check_targets(row: Row, key: str, targets: Iterable[str],
                   line: Optional[CudaLine]) -> None:
    """Every SASS target must be one the variant's CUDA line can compile."""
    if line is None:
        return
    allowed = set(line.sass)
    for t in targets:
        base = parse_target(t)
        sm = f"sm_{base.capability[0]}{base.capability[1]}{base.suffix}"
        if sm not in allowed:
            row.problem(key, f"{t} cannot be compiled by CUDA {line.version}")


def _torch_pypi(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx,
                lines: Mapping[str, CudaLine]) -> Dict[str, TorchRelease]:
    out: Dict[str, TorchRelease] = {}
    for row in _top_rows(raw, "torch-pypi.toml", "release", ctx.problems, also=("harvest",)):
        v = row.text("version", check=is_version, what="a version")
        builds: Dict[str, PlatformBuild] = {}
        btable = row.raw("build") or {}
        if not isinstance(btable, dict):
            row.problem("build", "expected tables [release.build.<platform>]")
            btable = {}
        for plat, body in btable.items():
            b = row.child(f"build.{plat}", body)
            if plat not in PLATFORMS:
                b.problem("", f"unknown platform {plat!r}")
            tag = b.text("tag", "cpu", check=_TAG_RE.match, what="cuXYZ or cpu")  # type: ignore[arg-type]
            cuda = b.opt_text("cuda", check=_LINE_RE.match, what="a CUDA line")  # type: ignore[arg-type]
            if tag != "cpu" and cuda is None:
                b.problem("cuda", f"a {tag} build needs its CUDA version")
            if cuda is not None and tag != "cu" + cuda.replace(".", ""):
                b.problem("tag", f"tag {tag} does not match CUDA {cuda}")
            if cuda is not None and cuda not in lines:
                b.problem("cuda", f"unknown CUDA line {cuda}")
            sass_list = b.str_list("sass", check=_SM_RE.match, what="an sm_XY target")  # type: ignore[arg-type]
            reqs = b.str_list("requires") or ()
            for j, r in enumerate(reqs):
                try:
                    _requirement(r)
                except InvalidRequirement as exc:
                    b.problem(f"requires[{j}]", f"not a PEP 508 requirement: {exc}")
            if sass_list is not None:
                _check_targets(b, "sass", sass_list, lines.get(cuda or ""))
            builds[plat] = PlatformBuild(
                platform=plat,
                pythons=b.str_list("pythons", check=_PY_RE.match, what="like '3.11'") or (),  # type: ignore[arg-type]
                tag=tag,
                cuda=cuda,
                wheel_tags=b.str_list("wheel_tags") or (),
                sass=sass_list,
                requires=reqs,
                wheel=b.opt_text("wheel"),
            )
            b.finish()
        rel = TorchRelease(
            version=v,
            date=row.opt_text("date", check=_DATE_RE.match, what="a date"),  # type: ignore[arg-type]
            requires_python=row.opt_text("requires_python"),
            torchvision=row.str_list("torchvision") or (),
            torchaudio=row.str_list("torchaudio") or (),
            builds=builds,
            provenance=ctx.provenance(row) if "source" in row.data else Provenance(
                sources=("pypi-torch",), confidence="measured"),
        )
        row.flag("yanked")
        row.finish()
        if v in out:
            row.problem("version", f"duplicate release {v}")
        out[v] = rel
    return out


_GPU_PIN_PREFIXES = ("nvidia-", "triton", "pytorch-triton", "cuda-toolkit", "cuda-bindings")



def gpu_pins(requires: Iterable[str]) -> Tuple[str, ...]:
    """The Requires-Dist entries that belong to the GPU stack (nvidia-*, triton, ...)."""
    out = []
    for r in requires:
        name = re.split(r"[\s;\[<>=!~(]", r.strip(), maxsplit=1)[0].lower().replace("_", "-")
        if name.startswith(_GPU_PIN_PREFIXES):
            out.append(r)
    return tuple(out)


def libraries_from_pins(pins: Iterable[str],
                        releases: Mapping[str, CudaRelease]) -> Dict[str, str]:
    """Expected native library versions implied by exact ``==`` pins.

    ``cuda-toolkit[cublas,...]==13.0.2`` expands through the toolkit release's components.
    """
    libs: Dict[str, str] = {}
    for text in pins:
        try:
            req = _requirement(text)
        except InvalidRequirement:
            continue
        exact = [s.version for s in req.specifier if s.operator in ("==", "===")]
        if len(exact) != 1 or "*" in exact[0]:
            continue
        version = exact[0]
        name = req.name.lower()
        if name == "cuda-toolkit":
            rel = releases.get(version) or releases.get(version + ".0")
            if rel is not None:
                for extra in req.extras:
                    key = {"cudart": "cudart"}.get(extra, extra)
                    if key in rel.components and key in LIBRARY_KEYS:
                        libs.setdefault(key, rel.components[key])
            continue
        lib = library_of_package(name)
        if lib:
            libs[lib] = version
    return libs


def _variants(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx,
              torch_releases: Mapping[str, TorchRelease], lines: Mapping[str, CudaLine],
              cuda_releases: Mapping[str, CudaRelease]) -> List[TorchVariant]:
    curated: Dict[Tuple[str, str, str], Tuple[Row, Dict[str, Any]]] = {}
    rows = _top_rows(raw, "torch.toml", "variant", ctx.problems)
    out: List[TorchVariant] = []
    for row in rows:
        releases = row.str_list("releases", required=True) or ()
        tag = row.text("tag", "cpu", check=_TAG_RE.match, what="cuXYZ or cpu")  # type: ignore[arg-type]
        cuda = row.opt_text("cuda", check=_LINE_RE.match, what="a CUDA line")  # type: ignore[arg-type]
        if tag != "cpu":
            if cuda is None:
                row.problem("cuda", f"a {tag} variant needs its CUDA line")
            elif tag != "cu" + cuda.replace(".", ""):
                row.problem("tag", f"tag {tag} does not match CUDA {cuda}")
            elif cuda not in lines:
                row.problem("cuda", f"unknown CUDA line {cuda}")
        elif cuda is not None:
            row.problem("cuda", "a cpu variant has no CUDA line")
        cuda_release = row.opt_text("cuda_release", check=is_version, what="a version")
        if cuda_release and cuda_release not in cuda_releases:
            row.problem("cuda_release", f"unknown CUDA release {cuda_release}")
        platforms = row.str_list("platforms", required=True) or ()
        for j, p in enumerate(platforms):
            if p not in PLATFORMS:
                row.problem(f"platforms[{j}]", f"unknown platform {p!r}")
        sass = row.str_list("sass", check=_SM_RE.match, what="an sm_XY target")  # type: ignore[arg-type]
        ptx = row.str_list("ptx", check=_PTX_RE.match, what="a compute_XY target")  # type: ignore[arg-type]
        line = lines.get(cuda or "")
        if sass is not None:
            _check_targets(row, "sass", sass, line)
        if ptx is not None:
            _check_targets(row, "ptx", ptx, line)
        pins_status = row.choice("pins_status", PINS_STATUS, default="unknown") or "unknown"
        pins = row.str_list("pins") or ()
        for j, r in enumerate(pins):
            try:
                _requirement(r)
            except InvalidRequirement as exc:
                row.problem(f"pins[{j}]", f"not a PEP 508 requirement: {exc}")
        libraries = dict(row.str_map("libraries", check=is_version, what="a version"))
        for k in libraries:
            if k not in LIBRARY_KEYS:
                row.problem(f"libraries.{k}", f"unknown library (use {', '.join(LIBRARY_KEYS)})")
        index = row.opt_text("index") or f"https://download.pytorch.org/whl/{tag}"
        prov = ctx.provenance(row)
        row.finish()
        derived = libraries_from_pins(pins, cuda_releases)
        for k, v in derived.items():
            libraries.setdefault(k, v)
        for j, rel in enumerate(releases):
            if rel not in torch_releases:
                row.problem(f"releases[{j}]", f"torch {rel} is not a release on PyPI")
                continue
            for plat in platforms:
                key = (rel, tag, plat)
                if key in curated:
                    row.problem("releases", f"torch {rel} {tag} {plat} is also in "
                                            f"{curated[key][0].path}")
                    continue
                curated[key] = (row, {})
                pyb = torch_releases[rel].builds.get(plat)
                if (pyb is not None and pyb.tag == tag and pyb.sass is not None
                        and sass is not None and tuple(sorted(pyb.sass)) != tuple(sorted(sass))):
                    row.problem("sass", f"torch {rel} {tag} {plat}: differs from the "
                                        f"PyPI wheel ({' '.join(pyb.sass)})")
                out.append(TorchVariant(
                    release=rel, tag=tag, platform=plat, index=index, cuda=cuda,
                    cuda_release=cuda_release, sass=sass, ptx=ptx,
                    pins_status=pins_status, pins=pins, libraries=libraries,
                    pythons=pyb.pythons if pyb is not None else (),
                    provenance=prov,
                ))
    # The PyPI builds, enriched with PTX facts from the curated row of the same build.
    by_key = {(v.release, v.tag, v.platform): v for v in out}
    for trel in torch_releases.values():
        for plat, b in trel.builds.items():
            twin = by_key.get((trel.version, b.tag, plat))
            pins = gpu_pins(b.requires)
            libs = libraries_from_pins(pins, cuda_releases)
            if twin is not None:
                for k, known in twin.libraries.items():
                    libs.setdefault(k, known)
            out.append(TorchVariant(
                release=trel.version, tag=b.tag, platform=plat, index=PYPI, cuda=b.cuda,
                cuda_release=twin.cuda_release if twin else None,
                sass=b.sass if b.sass is not None else (twin.sass if twin else None),
                ptx=twin.ptx if twin else (() if b.tag == "cpu" else None),
                pins_status="known", pins=pins, libraries=libs, pythons=b.pythons,
                provenance=trel.provenance,
            ))
    return out


# -- advisories.toml ---------------------------------------------------------------------------


def _advisories(raw: Mapping[str, Dict[str, Any]], ctx: _Ctx,
                gpus: Mapping[str, Gpu]) -> Dict[str, Advisory]:
    out: Dict[str, Advisory] = {}
    for row in _top_rows(raw, "advisories.toml", "advisory", ctx.problems):
        aid = row.text("id", check=_ID_RE.match, what="a kebab-case id")  # type: ignore[arg-type]
        symptoms = row.str_list("symptoms") or ()
        for j, pat in enumerate(symptoms):
            try:
                re.compile(pat, re.IGNORECASE)
            except re.error as exc:
                row.problem(f"symptoms[{j}]", f"bad regular expression: {exc}")
        absent = row.str_list("absent") or ()
        context = row.str_list("context") or ()
        for key, pats in (("absent", absent), ("context", context)):
            for j, pat in enumerate(pats):
                try:
                    re.compile(pat, re.IGNORECASE)
                except re.error as exc:
                    row.problem(f"{key}[{j}]", f"bad regular expression: {exc}")
        signals = row.str_list("signals") or ()
        for j, s in enumerate(signals):
            if s not in SIGNALS:
                row.problem(f"signals[{j}]", f"{s!r} is not one of {', '.join(SIGNALS)}")
        log_only = row.flag("log_only")
        cond = row.raw("condition")
        if log_only and cond is not None:
            row.problem("condition", "a log_only advisory has no condition")
        if not log_only:
            if cond is None:
                row.problem("condition", "missing (or set log_only = true)")
            else:
                for msg in conditions.validate_condition(cond, "condition"):
                    row.problems.add(row.file, f"{row.path}.{msg.split(': ', 1)[0]}",
                                     msg.split(": ", 1)[1])
                for scope, fact, (test, value) in conditions.fact_paths(cond):
                    if (fact in ("gpu.model", "model")) and test in ("in", "equals"):
                        values = value if isinstance(value, tuple) else (value,)
                        for gid in values:
                            if gid not in gpus:
                                row.problem("condition", f"unknown gpu model id {gid!r}")
        resolve = row.raw("resolve")
        action: Optional[str] = None
        override: Tuple[str, ...] = ()
        if resolve is not None:
            r = row.child("resolve", resolve)
            action = r.choice("action", RESOLVE_ACTIONS)
            override = r.str_list("override") or ()
            for j, text in enumerate(override):
                try:
                    req = Requirement(text)
                    if not any(s.operator == "==" for s in req.specifier):
                        r.problem(f"override[{j}]", "an override must pin '=='")
                except InvalidRequirement as exc:
                    r.problem(f"override[{j}]", f"not a PEP 508 requirement: {exc}")
            if action == "override" and not override:
                r.problem("override", "action 'override' needs override requirements")
            r.finish()
        sources = row.str_list("sources", required=True) or ()
        adv = Advisory(
            id=aid,
            title=row.text("title"),
            severity=row.choice("severity", SEVERITIES, default="warning") or "warning",
            category=row.choice("category", CATEGORIES, default="config") or "config",
            status=row.choice("status", STATUSES, default="unverified") or "unverified",
            summary=row.text("summary"),
            symptoms=symptoms,
            signals=signals,
            condition=cond,
            log_only=log_only,
            fix=row.str_list("fix", required=True) or (),
            sources=sources,
            resolve_action=action,
            resolve_override=override,
            provenance=Provenance(
                sources=sources,
                confidence={"verified": "primary", "partial": "secondary"}.get(
                    str(row.data.get("status")), "unverified"),  # type: ignore[arg-type]
                note=row.opt_text("note"),
            ),
            absent=absent,
            context=context,
        )
        row.finish()
        if not sources:
            row.problem("sources", "an advisory needs at least one source")
        if aid in out:
            row.problem("id", f"duplicate advisory id {aid!r}")
        out[aid] = adv
    return out
