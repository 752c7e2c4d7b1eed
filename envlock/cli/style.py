"""Colour for the terminal, and only for the terminal.

Colour is on when the stream is a TTY, ``NO_COLOR`` is unset or empty (https://no-color.org)
and ``--no-color`` was not given; ``FORCE_COLOR`` (non-empty) turns it on for a pipe.
Everything written to a file, a pipe or a test's StringIO stays plain text, so goldens and
scripts never see escape codes.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Mapping, Optional, TextIO

__all__ = ["Style", "PLAIN", "style_for", "color_wanted"]

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


def color_wanted(stream: Optional[TextIO], *, no_color_flag: bool = False,
                 environ: Optional[Mapping[str, str]] = None) -> bool:
    env = os.environ if environ is None else environ
    if no_color_flag or env.get("NO_COLOR"):
        return False
    if env.get("FORCE_COLOR"):
        return True
    if env.get("TERM") == "dumb":
        return False
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, ValueError):
        return False


def style_for(out: object) -> Style:
    """The style of an ``Output`` (its ``color`` attribute, set by ``main``)."""
    return Style(bool(getattr(out, "color", False)))
