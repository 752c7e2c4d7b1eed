"""The differential on screen: each symptom the log shows, what it means, its causes ranked
confirmed / possible / ruled out, and the next step (``envlock doctor --log``).

The same structure as ``--json``'s ``diagnosis`` and as ``-v``; without ``-v`` the lists are
cut so that the whole doctor screen fits 40 lines (:data:`SCREEN_LINES`): at most
:data:`SYMPTOMS` symptoms and :data:`PER_VERDICT` causes per verdict, each cut marked with
how many more ``-v`` shows. Text from the log is quoted escaped (control characters).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, List

from envlock.cli.style import PLAIN, Style

if TYPE_CHECKING:
    from envlock.checks.differential import Diagnosis, Differential

__all__ = ["diagnosis_lines", "SCREEN_LINES"]

SCREEN_LINES = 40
SYMPTOMS = 3
PER_VERDICT = 3
_LABEL = {"confirmed": "confirmed", "possible": "possible", "ruled-out": "ruled out"}
_COLOUR = {"confirmed": ("red", "bold"), "possible": ("yellow",), "ruled-out": ("dim",)}


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def _wrap(label: str, text: str, width: int, lines: int = 2) -> List[str]:
    """``label`` then ``text`` wrapped under it, at most ``lines`` lines (the last cut)."""
    import textwrap

    chunks = textwrap.wrap(text, max(20, width - 13)) or [""]
    if len(chunks) > lines:
        chunks = chunks[:lines]
        chunks[-1] = _cut(chunks[-1] + " ...", width - 13)
    return [f"  {label:<10} {chunks[0]}"] + [" " * 13 + c for c in chunks[1:]]


def _fact(text: str) -> str:
    """``host.shm_bytes=34359738368`` -> ``host.shm_bytes=32 GiB``: a size a person reads."""
    key, sep, value = text.partition("=")
    if sep and key.endswith("_bytes") and value.isdigit():
        n = float(value)
        for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
            if n < 1024 or unit == "TiB":
                return f"{key}={n:.0f} {unit}" if unit == "B" or n == int(n) else \
                    f"{key}={n:.1f} {unit}"
            n /= 1024
    return text


def _symptom_lines(d: "Diagnosis", verbose: bool, style: Style, width: int) -> List[str]:
    from envlock._text import escape_controls

    if verbose:
        width = 10_000  # -v: nothing is cut

    where = f"{d.hit.origin}:{d.hit.lineno}" + (f", {d.hit.count} lines" if d.hit.count > 1
                                                 else "")
    out = [style.paint(f"symptom: {d.name}", "bold") + style.paint(f"  [{d.symptom}] {where}",
                                                                    "dim")]
    out.append("  " + _cut(escape_controls(d.hit.line), width - 2))
    out.extend(_wrap("means:", d.meaning, width, 99 if verbose else 2))
    for verdict in ("confirmed", "possible", "ruled-out"):
        causes = [c for c in d.causes if c.verdict == verdict]
        shown = causes if verbose else causes[:PER_VERDICT]
        for c in shown:
            label = style.paint(f"{_LABEL[verdict] + ':':<10}", *_COLOUR[verdict])
            if verdict == "ruled-out":
                facts = ", ".join(_fact(f) for f in c.facts) or "its condition is false here"
                out.append("  " + label + " " + f"{c.advisory} ({facts})")  # one line, whole
                continue
            out.append("  " + label + " " + _cut(f"{c.advisory}: {c.title}", width - 13))
            if verdict == "possible":
                if c.facts and c.facts != ("the log shows its error",):
                    out.append(" " * 13 + _cut("decided by " + ", ".join(c.facts), width - 13))
                    if c.known:  # what the machine already settled of it
                        out.append(" " * 13 + _cut(
                            "known: " + ", ".join(_fact(f) for f in c.known), width - 13))
                elif c.facts:
                    out.append(" " * 13 + "the log shows its own error line")
                if c.decide and (verbose or not c.facts or c is shown[0]):
                    out.append(" " * 13 + _cut(c.decide, width - 13))
            elif c.facts:
                out.append(" " * 13 + _cut("because " + ", ".join(_fact(f) for f in c.facts),
                                           width - 13))
            if verbose and c.evidence:
                out.append(" " * 13 + _cut("log: " + escape_controls(c.evidence), width - 13))
        if len(causes) > len(shown):
            out.append(" " * 13 + style.paint(f"... {len(causes) - len(shown)} more "
                                              f"{_LABEL[verdict]} (-v)", "dim"))
    if not d.causes:
        out.append("  causes:    none catalogued for this symptom")
    out.extend(_wrap("next:", d.next, width, 99 if verbose else 2))
    return out


def diagnosis_lines(diff: "Differential", *, verbose: bool = False, style: Style = PLAIN,
                    width: int = 100, budget: int = SCREEN_LINES - 8) -> List[str]:
    """The differential's lines; without ``verbose`` at most ``budget`` of them."""
    lines: List[str] = []
    for note in diff.cut:
        lines.append(style.paint("log cut: " + note, "yellow"))
    shown = 0
    for d in diff.diagnoses:
        block = _symptom_lines(d, verbose, style, width)
        if not verbose and (shown >= SYMPTOMS or (shown and len(lines) + len(block) > budget)):
            break
        lines.extend(block)
        shown += 1
    if len(diff.diagnoses) > shown:
        rest = diff.diagnoses[shown:]
        lines.append(style.paint(f"{len(rest)} more symptom{'s' if len(rest) > 1 else ''}: "
                                 + ", ".join(d.name for d in rest[:4])
                                 + (" ..." if len(rest) > 4 else "") + " (-v)", "dim"))
    for c in diff.also if verbose else diff.also[:2]:
        lines.append(f"also in the log: {c.advisory} ({_LABEL[c.verdict]})")
    return lines
