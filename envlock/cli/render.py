"""Rendering findings: a table a person reads in five seconds, JSON, JUnit XML."""

from __future__ import annotations

import textwrap
from typing import Iterable, List, Optional, Sequence, Tuple

from envlock.checks.finding import Finding

__all__ = ["findings_text", "junit_xml"]

_LABEL = {"error": "ERROR", "warning": "WARN", "info": "info"}


def findings_text(findings: Sequence[Finding], *, header: str, verbose: bool = False,
                  width: int = 100, skipped: Sequence[Tuple[str, str]] = ()) -> str:
    errors = sum(1 for f in findings if f.severity == "error")
    warnings = sum(1 for f in findings if f.severity == "warning")
    if not findings:
        summary = "ok, nothing to report"
    else:
        summary = f"{errors} error{'s' if errors != 1 else ''}, {warnings} warning" \
                  f"{'s' if warnings != 1 else ''}"
        infos = len(findings) - errors - warnings
        if infos:
            summary += f", {infos} note{'s' if infos != 1 else ''}"
    lines = [f"{header}: {summary}"]
    for f in findings:
        lines.append(f"  {_LABEL.get(f.severity, f.severity):<5}  {f.category:<9} {f.title}")
        indent = " " * 18
        if f.detail and (verbose or f.severity != "info"):
            for chunk in textwrap.wrap(f.detail, width - len(indent)) or [""]:
                lines.append(indent + chunk)
        for i, fx in enumerate(f.fix[: (None if verbose else 2)]):
            prefix = "fix: " if i == 0 else "     "
            lines.append(indent + prefix + fx)
        if verbose and f.sources:
            lines.append(indent + "see: " + " ".join(f.sources[:3]))
        lines.append(indent + f"[{f.id}]")
    if skipped:
        names = ", ".join(c for c, _ in skipped)
        lines.append(f"  skipped: {names} ({skipped[0][1]})" if len({r for _, r in skipped}) == 1
                     else f"  skipped: {names}")
    return "\n".join(lines)


def junit_xml(suite: str, checked: Iterable[str], findings: Sequence[Finding],
              skipped: Sequence[Tuple[str, str]] = (),
              findings_check: Optional[dict] = None) -> str:
    """One testcase per check; a check with error findings fails, with warnings passes
    with system-out, skipped checks are <skipped/>."""
    from xml.sax.saxutils import escape, quoteattr  # imports urllib: only when asked for
    by_check: dict = {}
    for f in findings:
        chk = (findings_check or {}).get(f.id) or _check_of(f)
        by_check.setdefault(chk, []).append(f)
    cases: List[str] = []
    failures = 0
    names = list(checked)
    for chk in by_check:
        if chk not in names:
            names.append(chk)
    for name in names:
        fs = by_check.get(name, [])
        errs = [f for f in fs if f.severity == "error"]
        body = ""
        if errs:
            failures += 1
            msg = "; ".join(f.title for f in errs)
            text = "\n".join(f"{f.title}\n{f.detail}\nfix: {' / '.join(f.fix)}" for f in errs)
            body += f"<failure message={quoteattr(msg)} type=\"drift\">{escape(text)}</failure>"
        others = [f for f in fs if f.severity != "error"]
        if others:
            body += "<system-out>" + escape("\n".join(f"{f.severity}: {f.title}" for f in others)) \
                    + "</system-out>"
        cases.append(f'  <testcase classname="envlock.{suite}" name={quoteattr(name)}>{body}'
                     f"</testcase>")
    for name, why in skipped:
        cases.append(f'  <testcase classname="envlock.{suite}" name={quoteattr(name)}>'
                     f"<skipped message={quoteattr(why)}/></testcase>")
    total = len(names) + len(skipped)
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n'
            f'<testsuite name="envlock {suite}" tests="{total}" failures="{failures}" '
            f'errors="0" skipped="{len(skipped)}">\n' + "\n".join(cases) + "\n</testsuite>\n")


_CHECK_OF_ID = {
    "python-mismatch": "python",
    "package-missing": "packages", "package-version": "packages",
    "package-unexpected": "packages", "package-files": "package-files",
    "library-version": "libraries", "library-shadowed": "libraries",
    "library-duplicate": "libraries", "cuda-major-mix": "cuda-majors",
    "driver-too-old": "driver", "driver-unavailable": "driver",
    "gpu-no-kernels": "gpu-kernels", "gpu-mixed-capability": "gpu-mix",
    "gpu-mixed-model": "gpu-mix", "gpu-not-in-lock": "gpu-target", "env-mismatch": "env",
}


def _check_of(f: Finding) -> str:
    return _CHECK_OF_ID.get(f.id, "advisories")
