"""Colour as a value: a :class:`Style` wraps text in ANSI codes when enabled.

Whether a stream gets colour (a TTY, ``NO_COLOR``, ``--no-color``) is the command line's
decision (:mod:`envlock.cli.style`); renderers only take the resulting style.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Style", "PLAIN"]

_CODES = {"red": "31", "yellow": "33", "green": "32", "cyan": "36", "bold": "1", "dim": "2"}


@dataclass(frozen=True)
class Style:
    """Wraps text in ANSI codes when enabled; the identity when not."""

    enabled: bool = False

    def paint(self, text: str, *names: str) -> str:
        if not self.enabled or not names or not text:
            return text
        codes = ";".join(_CODES[n] for n in names)
        return f"\x1b[{codes}m{text}\x1b[0m"

    def severity(self, label: str, severity: str) -> str:
        return self.paint(label, *{"error": ("red", "bold"), "warning": ("yellow", "bold"),
                                   "info": ("cyan",)}.get(severity, ()))


PLAIN = Style(False)
