"""argparse that raises instead of exiting, so :func:`envlock.cli.main` owns the exit code.

A module of its own so that ``envlock.cli`` does not import argparse: a replayed resolve
(:mod:`envlock.replay`) is answered before any parser is built.
"""

from __future__ import annotations

import argparse
from typing import Any

from envlock.errors import ExitCode

__all__ = ["ArgError", "Parser", "needs_subcommand"]


class ArgError(Exception):
    """A usage error argparse found: one line, exit 2."""


class Parser(argparse.ArgumentParser):
    """argparse that raises :class:`ArgError` instead of printing and exiting."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ArgError(f"{self.prog}: {message}")


def needs_subcommand(parser: argparse.ArgumentParser, out: Any) -> int:
    """A command of subcommands (``matrix``, ``cache``) run without one: its help, exit 2."""
    parser.print_help(out.stdout)
    return ExitCode.USAGE
