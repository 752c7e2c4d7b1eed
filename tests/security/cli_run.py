"""Running the real CLI entry point in-process and checking the contract the issue asks
for: never an internal error (exit 70), never a traceback, and an input error in one line
(plus at most a ``hint:`` line)."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Sequence

from envlock.cli import Output, main


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str


def run_cli(argv: Sequence[str]) -> Result:
    out = Output(io.StringIO(), io.StringIO())
    try:
        code = main(list(argv), out)
    except SystemExit as exc:  # main() returns codes; a SystemExit would be a bug too
        code = int(exc.code or 0)
    return Result(int(code), out.stdout.getvalue(), out.stderr.getvalue())


def assert_contract(r: Result, argv: Sequence[str]) -> None:
    """No exit 70, no traceback; errors (2, 3, 4, 5) in one line plus an optional hint."""
    assert r.code != 70, (argv, r.stderr)
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, (argv, r.stderr)
    if r.code >= 2:
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        errors = [ln for ln in lines if not ln.startswith(("hint:", "usage:", "  ",
                                                            "envlock: note: "))]
        assert len(errors) == 1, (argv, r.stderr)
