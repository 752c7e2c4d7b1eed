"""Rendering findings: a screen a person acts on in five seconds, JSON, JUnit XML.

:func:`report_text` is the screen of ``verify``, ``doctor`` and ``fleet``: a first line that
answers the question ("h100-sxm lock (runtime): 2 problems, 1 blocks training"), then one
entry per cause, most important first, each with its copy-pasteable fix, then what was not
checked and why. Per-package details and sources appear under ``--verbose`` (and always
in ``--json``). :func:`findings_text` is the older compact table the training guard prints.
"""

from __future__ import annotations

import importlib.util
import textwrap
from typing import TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence, Tuple

from envlock.checks.finding import Finding
from envlock.cli.style import PLAIN, Style

if TYPE_CHECKING:
    from envlock.checks.doctor import DoctorResult

__all__ = ["findings_text", "junit_xml", "report_text", "summary", "not_checked_lines"]

_SCREEN = {"error": "ERROR", "warning": "WARN", "info": "note"}
_INDENT = " " * 9


def _plural(n: int, word: str, plural: Optional[str] = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def summary(findings: Sequence[Finding], *, ok_text: str = "ok") -> str:
    """The answer: "2 problems, 1 blocks training" / "1 problem, none blocks training",
    with advisories whose facts were unknown counted apart ("1 not confirmed")."""
    unconfirmed = [f for f in findings if getattr(f, "not_confirmed", ())]
    sure = [f for f in findings if not getattr(f, "not_confirmed", ())]
    errors = sum(1 for f in sure if f.severity == "error")
    problems = sum(1 for f in sure if f.severity in ("error", "warning"))
    notes = sum(1 for f in sure if f.severity not in ("error", "warning"))
    parts: List[str] = []
    if problems:
        parts.append(_plural(problems, "problem"))
        parts.append(f"{errors} block{'s' if errors == 1 else ''} training" if errors
                     else "none blocks training")
    if unconfirmed:
        parts.append(f"{len(unconfirmed)} not confirmed")
    if notes:
        parts.append(_plural(notes, "note"))
    return ", ".join(parts) if parts else ok_text


def not_checked_lines(skipped: Sequence[Tuple[str, str]], verbose: bool = False,
                      limit: int = 4) -> List[str]:
    """``not checked: a, b (why)``: one line per reason; long lists cut unless verbose."""
    by_reason: Dict[str, List[str]] = {}
    for check, why in skipped:
        by_reason.setdefault(why, []).extend(check.split(", "))
    lines = []
    for why, checks in by_reason.items():
        shown = ", ".join(checks if verbose or len(checks) <= limit else checks[:limit - 1])
        if not verbose and len(checks) > limit:
            shown += f" and {len(checks) - limit + 1} more"
        lines.append(f"not checked: {shown} ({why})")
    return lines


def report_text(findings: Sequence[Finding], *, subject: str, verbose: bool = False,
                skipped: Sequence[Tuple[str, str]] = (), ok_text: str = "ok",
                style: Style = PLAIN, width: int = 100) -> str:
    """The screen: summary line, one entry per finding, what was not checked.

    Findings quote what a snapshot or lock holds (package names, versions, paths, GPU
    names), so control characters are escaped first: a snapshot's ``\x9b`` or ``\x1b[2J``
    must not drive the terminal of whoever runs ``verify`` or ``doctor`` on it."""
    from envlock._text import escape_controls, map_strings

    findings = [map_strings(f, escape_controls) for f in findings]
    subject = escape_controls(subject)
    skipped = map_strings(tuple(skipped), escape_controls)
    first = f"{subject}: {summary(findings, ok_text=ok_text)}"
    worst = next((f.severity for f in findings if not getattr(f, "not_confirmed", ())), None)
    lines = [style.paint(first, *(("red", "bold") if worst == "error" else
                                  ("yellow", "bold") if worst == "warning" else
                                  ("green", "bold") if not findings else ("bold",)))]
    shown_fixes: set = set()
    for f in findings:
        label = _SCREEN.get(f.severity, f.severity)
        if getattr(f, "not_confirmed", ()):
            label = "MAYBE"
        lines.append(f"  {style.severity(f'{label:<5}', f.severity)}  {f.title}  "
                     + style.paint(f"[{f.id}]", "dim"))
        items = f.extra.get("items") if isinstance(f.extra, dict) else None
        unknown = getattr(f, "not_confirmed", ())
        if unknown:
            lines.append(_INDENT + "not confirmed: " + ", ".join(unknown) + " unknown")
        if verbose and items:
            for it in items:
                lines.append(_INDENT + "- " + "  ".join(f"{k} {v}" if k != "name" else str(v)
                                                        for k, v in it.items()
                                                        if not isinstance(v, list))
                             + ("" if not any(isinstance(v, list) for v in it.values()) else
                                ": " + ", ".join(str(x) for v in it.values()
                                                 if isinstance(v, list) for x in v)))
        elif f.detail and (verbose or (f.severity != "info" and not items)):
            chunks = textwrap.wrap(f.detail, width - len(_INDENT)) or [""]
            if not verbose and len(chunks) > 2:
                chunks = chunks[:2]
                chunks[-1] += " ..."
            lines += [_INDENT + c for c in chunks]
        fixes = [fx for fx in f.fix if verbose or fx not in shown_fixes]
        for i, fx in enumerate(fixes[: (None if verbose else 2)]):
            shown_fixes.add(fx)
            lines.append(_INDENT + ("fix: " if i == 0 else "     ") + style.paint(fx, "bold"))
        if verbose and f.sources:
            lines.append(_INDENT + "see: " + " ".join(f.sources[:3]))
    lines += [style.paint(line, "dim") for line in not_checked_lines(skipped, verbose)]
    if findings and not verbose:
        more = "details: --verbose or --json"
        if any(f.sources for f in findings) and \
                importlib.util.find_spec("envlock.cli.explain_cmd") is not None:
            more += "; one advisory in full: envlock explain ID"
        lines.append(style.paint(more, "dim"))
    return "\n".join(lines)

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
    "library-other-soname": "libraries",
    "library-duplicate": "libraries", "cuda-major-mix": "cuda-majors",
    "driver-too-old": "driver", "driver-unavailable": "driver",
    "gpu-no-kernels": "gpu-kernels", "gpu-mixed-capability": "gpu-mix",
    "gpu-mixed-model": "gpu-mix", "gpu-not-in-lock": "gpu-target", "env-mismatch": "env",
}


def _check_of(f: Finding) -> str:
    return _CHECK_OF_ID.get(f.id, "advisories")


def doctor_lines(result: "DoctorResult", *, verbose: bool) -> List[str]:
    """The lines ``doctor`` prints after its findings: advisories a log pointed at that
    this machine's facts rule out, and the smoke checks. Both quote text envlock did not
    write (a snapshot's facts, the output of a smoke check on this machine), so control
    characters are escaped, as in :func:`report_text`."""
    from envlock._text import escape_controls

    lines: List[str] = []
    if result.ruled_out and not verbose:
        k = len(result.ruled_out)
        lines.append(f"the log points at {k} advisor{'y' if k == 1 else 'ies'} that this "
                     f"machine's facts exclude (--verbose lists {'it' if k == 1 else 'them'})")
    if verbose:
        for r in result.ruled_out:
            facts = ", ".join(r.because) or "facts its condition excludes"
            lines.append(escape_controls(f"  ruled out: {r.advisory} (the log points at it; "
                                         f"this machine has {facts})"))
    for s in result.smoke:
        mark = "ok" if s.ok else s.outcome.upper()
        lines.append(escape_controls(f"  smoke {s.name:<15} {mark:<8} {s.detail}"))
    return lines
