"""Another Python interpreter's facts, read by running it once.

envlock lives in its own virtual environment (in the exported image, ``/opt/envlock``),
apart from the environment it checks. ``envlock verify --python PATH`` asks that
interpreter for its ``sys.path`` and version, so the packages, libraries and torch build
that are judged are the locked environment's, never envlock's own.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Mapping, Optional, Tuple

from envlock.errors import InputError

__all__ = ["Interpreter", "describe_interpreter"]

_CHILD = ("import json, platform, sys; print(json.dumps({'path': sys.path, "
          "'version': platform.python_version(), "
          "'implementation': platform.python_implementation(), "
          "'executable': sys.executable}))")


@dataclass(frozen=True)
class Interpreter:
    executable: str
    version: str
    implementation: str
    #: its ``sys.path`` without the working-directory entry ``-c`` adds
    path: Tuple[str, ...]


def describe_interpreter(python: str, timeout: float = 60.0,
                         env: Optional[Mapping[str, str]] = None) -> Interpreter:
    """Run ``python`` in the environment being recorded (``env``, default this process's:
    ``PYTHONPATH`` and the user site count, as they do for the user's own command) and read
    its facts; :class:`InputError` when it cannot run. The ``-c`` entry for the current
    directory is left out. A snapshot told of another environment must not see envlock's
    own ``PYTHONPATH`` (seen on a GPU host where envlock's dependencies sat on it)."""
    try:
        proc = subprocess.run([python, "-c", _CHILD], capture_output=True, text=True,
                              timeout=timeout, env=None if env is None else dict(env))
    except subprocess.TimeoutExpired:
        raise InputError(f"--python {python} did not answer in {timeout:.0f} s") from None
    except OSError as exc:
        raise InputError(f"cannot run --python {python}: {exc.strerror}") from None
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
        return Interpreter(executable=str(data["executable"]), version=str(data["version"]),
                           implementation=str(data["implementation"]),
                           path=tuple(p for p in data["path"][1:] if p))
    except (ValueError, IndexError, KeyError, TypeError, AttributeError, RecursionError):
        # (RecursionError: JSON nested thousands deep, from a hostile or broken --python)
        tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
        raise InputError(f"--python {python} is not a working Python interpreter "
                         f"(exit {proc.returncode}: {tail[0][:200]})") from None
