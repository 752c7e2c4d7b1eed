"""Shared pieces of the matrix loader: patterns and allowed values for fields, the build
context (problems and the source registry) and helpers every table reader uses."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple, Union

from packaging.requirements import InvalidRequirement, Requirement

from envlock.matrix.model import CONFIDENCES, Provenance, Source
from envlock.matrix.rows import Problems, Row
from envlock.versions import is_driver_version

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


def requirement(text: str) -> Requirement:
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


class Ctx:
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


def top_rows(raw: Mapping[str, Dict[str, Any]], file: str, key: str,
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


def driverish(text: str) -> bool:
    return is_driver_version(text) or bool(re.match(r"^\d{3}$", text))
