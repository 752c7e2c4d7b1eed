"""JUnit XML for CI dashboards: one testcase per check; errors fail it, warnings pass with
system-out, checks that were not run are ``<skipped/>``."""

from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple

from envlock.checks.finding import Finding

__all__ = ["junit_xml"]


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
    "library-other-soname": "libraries",
    "library-duplicate": "libraries", "cuda-major-mix": "cuda-majors",
    "driver-too-old": "driver", "driver-unavailable": "driver",
    "gpu-no-kernels": "gpu-kernels", "gpu-mixed-capability": "gpu-mix",
    "gpu-mixed-model": "gpu-mix", "gpu-not-in-lock": "gpu-target", "env-mismatch": "env",
}


def _check_of(f: Finding) -> str:
    return _CHECK_OF_ID.get(f.id, "advisories")
