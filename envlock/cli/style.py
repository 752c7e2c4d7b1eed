"""Colour for the terminal, and only for the terminal.

Colour is on when the stream is a TTY, ``NO_COLOR`` is unset or empty (https://no-color.org)
and ``--no-color`` was not given; ``FORCE_COLOR`` (non-empty) turns it on for a pipe.
Everything written to a file, a pipe or a test's StringIO stays plain text, so goldens and
scripts never see escape codes.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Mapping, Optional, TextIO

if TYPE_CHECKING:
    from envlock.render.style import Style

__all__ = ["Style", "PLAIN", "style_for", "color_wanted"]


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


def style_for(out: object) -> "Style":
    """The style of an ``Output`` (its ``color`` attribute, set by ``main``)."""
    from envlock.render.style import Style

    return Style(bool(getattr(out, "color", False)))


def __getattr__(name: str) -> Any:
    """``Style`` and ``PLAIN`` on first use: every command asks :func:`color_wanted` at
    start, and a replayed resolve (:mod:`envlock.replay`) needs nothing else from here."""
    if name in ("Style", "PLAIN"):
        from envlock.render import style

        return getattr(style, name)
    raise AttributeError(f"module 'envlock.cli.style' has no attribute {name!r}")
