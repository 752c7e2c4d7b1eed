"""Read, validate and assemble the compatibility matrix.

The data comes from the TOML files in ``compat-matrix/``, which ship inside the package
(``importlib.resources``). Validation checks types, version strings, references between
files (a GPU's arch, a variant's CUDA line, a source id), and that every arch list is one
that CUDA line can compile. All problems are collected and raised together as one
:class:`~envlock.errors.MatrixError`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

from envlock import _toml
from envlock.errors import MatrixError
from envlock.matrix import load_advisories, load_cuda, load_gpus, load_torch
from envlock.matrix.files import DATA_FILES, data_files
from envlock.matrix.load_common import _ID_RE, Ctx
from envlock.matrix.load_companions import load_companions
from envlock.matrix.load_symptoms import symptoms as load_symptom_tables
from envlock.matrix.load_torch import gpu_pins, libraries_from_pins  # noqa: F401 - re-exported
from envlock.matrix.matrix import Matrix
from envlock.matrix.model import CONFIDENCES, Source
from envlock.matrix.rows import Problems, Row
from envlock.matrix.stamp import content_digest

Source_ = Union[str, Path]

__all__ = ["load_matrix", "data_files", "read_raw", "build_matrix", "DATA_FILES", "gpu_pins",
           "libraries_from_pins"]

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
    matrix = build_matrix(raw, problems, content_digest(files))
    if problems:
        raise MatrixError(problems.items)
    return matrix


# ---------------------------------------------------------------------------------------
# assembly


def _collect_sources(raw: Mapping[str, Dict[str, Any]], ctx: Ctx) -> None:
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


def build_matrix(raw: Mapping[str, Dict[str, Any]], problems: Problems,
                 digest: Optional[str] = None) -> Matrix:
    """The matrix of parsed files; ``digest`` (of the files' bytes, see
    :mod:`envlock.matrix.stamp`) is appended to meta.toml's version as the stamp."""
    ctx = Ctx(problems)
    _collect_sources(raw, ctx)

    meta = Row("meta.toml", "", raw.get("meta.toml", {}), problems)
    schema = meta.integer("schema")
    if schema is not None and schema != 1:
        meta.problem("schema", f"unsupported matrix schema {schema} (this envlock reads 1)")
    version = meta.text("version", "unknown")
    meta.finish()
    if digest:
        version = f"{version}+{digest}"

    archs = load_gpus.archs(raw, ctx)
    drivers = load_cuda.drivers(raw, ctx)
    gpus = load_gpus.gpus(raw, ctx, archs, drivers)
    majors, lines, releases = load_cuda.cuda(raw, ctx)
    nccl, cudnn = load_cuda.libraries(raw, ctx)
    torch_releases = load_torch.torch_pypi(raw, ctx, lines)
    variants = load_torch.variants(raw, ctx, torch_releases, lines, releases)
    advisories = load_advisories.advisories(raw, ctx, gpus)
    companions = load_companions(raw, ctx, torch_releases)
    symptoms = load_symptom_tables(raw, ctx, advisories)

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
        companions=companions,
        symptoms=symptoms,
    )
