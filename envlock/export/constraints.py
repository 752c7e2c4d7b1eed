"""``--format constraints``: a pip constraints file for teams that keep their own
requirements, as NVIDIA's NGC containers do with ``/etc/pip/constraint.txt`` (and
``PIP_CONSTRAINT``).

A constraints file only limits versions: it installs nothing, and carries neither index
options (pip would apply them to the whole install) nor hashes (constraints cannot turn on
hash checking). It can therefore be exported from a GPU-core lock, with a warning.
"""

from __future__ import annotations

from typing import List

from envlock.export.common import (
    ExportRequest,
    Exporter,
    gpu_core_warning,
    header_lines,
    index_plan,
    override_warning,
    pin,
)

__all__ = ["ConstraintsExporter", "EXPORTER"]


class ConstraintsExporter(Exporter):
    name = "constraints"
    summary = "pip constraints file (pins only) for your own requirements"

    def filename(self, target: str) -> str:
        return f"constraints-{target}.txt"

    def warnings(self, request: ExportRequest) -> List[str]:
        t = request.target
        return gpu_core_warning(t) + override_warning(
            t, "a constraints file cannot override a dependency's pin, so pip will report a "
               "conflict; install with --format requirements (pip --no-deps) or the uv "
               "fragment (override-dependencies) instead.")

    def render(self, request: ExportRequest) -> str:
        t = request.target
        plan = index_plan(t)
        fname = self.output_name(request)
        opts = ""
        if plan.primary:
            opts = f" --index-url {plan.primary}" + "".join(
                f" --extra-index-url {ix}" for ix in plan.extras)
        body = [
            "Use it with your own requirements:",
            f"  pip install -c {fname}{opts} -r requirements.txt",
            "or for every pip run in a container, as NGC images do: "
            "ENV PIP_CONSTRAINT=/etc/pip/constraint.txt (a copy of this file).",
            "It pins versions only: pip still resolves your requirements, checks no hashes "
            "and uses the indexes you give it (above: the ones this lock came from).",
        ]
        lines = header_lines(request, "pip constraints file", body, self.warnings(request))
        lines.append("")
        lines += [pin(p) for p in sorted(t.packages, key=lambda p: p.name)]
        return "\n".join(lines) + "\n"


EXPORTER = ConstraintsExporter()
