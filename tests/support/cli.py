"""Running the CLI in-process (fast) or as a real process (exit codes, stderr, imports)."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Mapping, Optional

from envlock.cli import Output, main

__all__ = ["Result", "run_cli", "run_proc"]


@dataclass
class Result:
    code: int
    out: str
    err: str


def run_cli(*args: str) -> Result:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(args), Output(out, err))
    return Result(code, out.getvalue(), err.getvalue())


def run_proc(*args: str, env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None,
             input: Optional[str] = None, timeout: float = 120) -> Result:
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([sys.executable, "-m", "envlock", *args], capture_output=True,
                       text=True, env=e, cwd=cwd, input=input, timeout=timeout)
    return Result(p.returncode, p.stdout, p.stderr)
