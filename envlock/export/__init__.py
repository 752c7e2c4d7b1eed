"""Exporters: render one target of a lock in the formats people install with.

``FORMATS`` maps each ``envlock export --format`` choice to the module that implements it
(one module per format, each with an ``EXPORTER``); modules are imported only when used,
so ``envlock --help`` stays fast. A test proves every choice is mapped and loads.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Tuple

from typing import TYPE_CHECKING, Any

from envlock.errors import UsageError

if TYPE_CHECKING:  # the CLI imports this package just to build its parser: stay light
    from envlock.export.common import Exporter, ExportRequest
    from envlock.lock.model import Lock

__all__ = ["FORMATS", "get_exporter", "export", "Exported", "Exporter", "ExportRequest"]

#: ``--format`` name -> module with an ``EXPORTER`` (order = the order in ``--help``).
FORMATS: Mapping[str, str] = {
    "requirements": "envlock.export.requirements",
    "constraints": "envlock.export.constraints",
    "pylock": "envlock.export.pylock",
    "uv": "envlock.export.uv",
    "conda": "envlock.export.conda",
    "dockerfile": "envlock.export.dockerfile",
    "kubernetes": "envlock.export.kubernetes",
}


def __getattr__(name: str) -> Any:
    if name in ("Exporter", "ExportRequest"):
        from envlock.export import common

        return getattr(common, name)
    raise AttributeError(name)


def get_exporter(fmt: str) -> "Exporter":
    """The exporter for a ``--format`` name."""
    from envlock.export.common import Exporter

    module = FORMATS.get(fmt)
    if module is None:
        raise UsageError(f"unknown export format {fmt!r} (formats: {', '.join(FORMATS)})")
    exporter = importlib.import_module(module).EXPORTER
    if not isinstance(exporter, Exporter) or exporter.name != fmt:
        raise TypeError(f"{module}.EXPORTER is not the {fmt!r} exporter")
    return exporter


@dataclass(frozen=True)
class Exported:
    text: str
    target: str
    #: also written into the header; the CLI repeats them on stderr
    warnings: Tuple[str, ...] = ()


def export(lock: "Lock", fmt: str, *, lock_path: str, target: Optional[str] = None,
           command: str = "", output: Optional[str] = None,
           options: Optional[Dict[str, str]] = None) -> Exported:
    """Render ``target`` of ``lock`` (the only one when None) as ``fmt``.

    Raises :class:`~envlock.errors.UsageError` / :class:`~envlock.errors.InputError` (exit 2)
    for an unknown format or target, or a lock without the hashes the format needs.
    """
    from envlock.export.common import ExportRequest, select_target

    exporter = get_exporter(fmt)
    chosen = select_target(lock, target, lock_path)
    request = ExportRequest(lock=lock, target=chosen, lock_path=lock_path,
                            command=command or f"envlock export --format {fmt} --lock "
                                               f"{lock_path} --target {chosen.name}",
                            output=output, options=dict(options or {}))
    return Exported(text=exporter.render(request), target=chosen.name,
                    warnings=tuple(exporter.warnings(request)))
