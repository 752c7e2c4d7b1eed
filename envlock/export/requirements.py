"""``--format requirements``: a hashed pip requirements file for one target.

Installed with ``pip install --no-deps --require-hashes -r FILE``. ``--no-deps`` because the
lock already is the whole closure, resolved for the target's hardware: pip's resolver has
nothing to add, and it would refuse an advisory override (a newer cuBLAS than torch's
exact pin on H20) that envlock chose on purpose. Hashes make the index options safe; see
:mod:`envlock.export.common`.
"""

from __future__ import annotations

import shlex
from typing import List

from envlock.export.common import (
    ExportRequest,
    Exporter,
    constraints,
    header_lines,
    index_plan,
    overrides,
    pin,
    require_hashes,
)

__all__ = ["RequirementsExporter", "EXPORTER", "index_option_lines", "hashed_lines"]


def index_option_lines(request: ExportRequest) -> List[str]:
    """``--index-url``/``--extra-index-url`` lines (the chosen build's index first)."""
    plan = index_plan(request.target)
    out = []
    if plan.primary:
        out.append(f"--index-url {pip_option_value(plan.primary)}")
    out += [f"--extra-index-url {pip_option_value(ix)}" for ix in plan.extras]
    return out


def pip_option_value(value: str) -> str:
    """``value`` written so that pip reads back exactly ``value``.

    pip expands ``${NAME}`` from the environment in every line of a requirements file, then
    splits option lines with :func:`shlex.split`: an index URL holding a quote made the
    whole file unreadable to pip, and one holding ``${AWS_SECRET_ACCESS_KEY}`` would send
    that secret to the index. ``$`` before ``{`` is percent-encoded (the same URL to a
    server) and the rest shell-quoted (unchanged when nothing needs quoting).

    >>> pip_option_value("https://pypi.org/simple")
    'https://pypi.org/simple'
    >>> print(pip_option_value("https://h/${HOME}?a&b"))
    'https://h/%24{HOME}?a&b'
    """
    return shlex.quote(value.replace("${", "%24{"))


def hashed_lines(request: ExportRequest) -> List[str]:
    """One ``name==version`` requirement per package with all its hashes."""
    ov = overrides(request.target)
    held = constraints(request.target)
    out: List[str] = []
    for p in sorted(request.target.packages, key=lambda p: p.name):
        if p.name in ov:
            aid, _ = ov[p.name]
            out.append(f"# advisory {aid}: this pin overrides the torch build's own pin")
        elif p.name in held:
            aid, req = held[p.name]
            out.append(f"# advisory {aid}: held to {req}")
        hashes = [f"--hash=sha256:{h}" for h in p.hashes]
        if hashes:
            out.append(f"{pin(p)} \\")
            out += [f"    {h} \\" for h in hashes[:-1]] + [f"    {hashes[-1]}"]
        else:
            out.append(pin(p))
    return out


class RequirementsExporter(Exporter):
    name = "requirements"
    summary = "pip requirements file, every package pinned with its hashes"
    needs_hashes = True

    def filename(self, target: str) -> str:
        return f"requirements-{target}.txt"

    def render(self, request: ExportRequest) -> str:
        require_hashes(request, "requirements")
        t = request.target
        plan = index_plan(t)
        fname = self.output_name(request)
        body = [
            "Install into a fresh virtual environment with:",
            f"  pip install --no-deps --require-hashes -r {fname}",
            "--no-deps: the lock is already the full dependency closure, resolved for this "
            "target, so pip has nothing to resolve; its resolver would also refuse an "
            "advisory override such as a newer cuBLAS than torch's exact pin, which "
            "envlock chose on purpose.",
        ]
        ov = overrides(t)
        if ov:
            body.append("Advisory overrides in this file: " + ", ".join(
                f"{req} ({aid})" for _, (aid, req) in sorted(ov.items())) + ".")
        if plan.split and plan.torch_index:
            from_torch = ", ".join(plan.packages[plan.torch_index])
            others = ", ".join(plan.extras)
            body += [
                "",
                f"Indexes: pip has no per-package index, so the PyTorch index "
                f"{plan.torch_index} is the --index-url (for {from_torch}) and {others} "
                f"the --extra-index-url. pip searches all of them for every package; this "
                f"is safe only together with --require-hashes: every file must match a "
                f"hash below, so a package planted on another index under a locked name "
                f"fails the hash check instead of installing, and a higher version "
                f"anywhere never matches the == pins. Never remove the hashes.",
            ]
        elif plan.split:
            body += ["", "Indexes: pip searches every index below for every package; the "
                         "== pins and hashes decide which file installs."]
        if plan.unrouted:
            body += ["", f"No index recorded for {', '.join(plan.unrouted)}: pip finds "
                         f"them through its own configuration (the hashes still apply)."]
        lines = header_lines(request, "pip requirements file", body)
        lines.append("")
        opts = index_option_lines(request)
        if opts:
            lines += opts + [""]
        lines += hashed_lines(request)
        return "\n".join(lines) + "\n"


EXPORTER = RequirementsExporter()
