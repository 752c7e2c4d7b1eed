"""Read and check ``torch-pypi.toml`` and ``torch.toml``: every torch release on PyPI and
every build on the PyTorch index, with their arch lists checked against what each CUDA line
can compile, and the expected native library versions derived from the pins."""

from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from packaging.requirements import InvalidRequirement

from envlock.families import library_of_package
from envlock.kernels import parse_target
from envlock.matrix.load_common import (
    _LINE_RE, _PTX_RE, _PY_RE, _SM_RE, _TAG_RE, _DATE_RE, LIBRARY_KEYS, PINS_STATUS, Ctx,
    requirement, top_rows,
)
from envlock.matrix.model import (
    PLATFORMS, PYPI, CudaLine, CudaRelease, PlatformBuild, Provenance, TorchRelease, TorchVariant,
)
from envlock.matrix.rows import Row
from envlock.versions import is_version

__all__ = ["torch_pypi", "variants", "gpu_pins", "libraries_from_pins"]


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


def torch_pypi(raw: Mapping[str, Dict[str, Any]], ctx: Ctx,
                lines: Mapping[str, CudaLine]) -> Dict[str, TorchRelease]:
    out: Dict[str, TorchRelease] = {}
    for row in top_rows(raw, "torch-pypi.toml", "release", ctx.problems, also=("harvest",)):
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
                    requirement(r)
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
            req = requirement(text)
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


def variants(raw: Mapping[str, Dict[str, Any]], ctx: Ctx,
              torch_releases: Mapping[str, TorchRelease], lines: Mapping[str, CudaLine],
              cuda_releases: Mapping[str, CudaRelease]) -> List[TorchVariant]:
    curated: Dict[Tuple[str, str, str], Tuple[Row, Dict[str, Any]]] = {}
    rows = top_rows(raw, "torch.toml", "variant", ctx.problems)
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
                requirement(r)
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
