"""``--json`` on failure: the error as JSON on stdout, as well as the line on stderr.

Why a wrapper rather than a branch in every command: errors are raised anywhere (argument
parsing, reading the lock, the index) and ``main`` turns them into the one-line message;
this wrapper watches what ``main`` wrote to stderr and, when the exit code says the
command failed (2 and above) and nothing was printed on stdout, prints::

    {"error": {"message": "...", "hint": "..." | null, "code": "usage"}, "exit_code": 2}
"""

from __future__ import annotations

import io
import json
from typing import Any, Callable, List, Optional

from envlock.errors import ExitCode

__all__ = ["run_json", "error_json"]


class _Tee(io.StringIO):
    """Keeps a copy of what is written and passes it on."""

    def __init__(self, inner: Any) -> None:
        super().__init__()
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(text)
        return super().write(text)

    def flush(self) -> None:
        self.inner.flush()

    def isatty(self) -> bool:
        try:
            return bool(self.inner.isatty())
        except (AttributeError, ValueError):
            return False


def _code_name(code: int) -> str:
    try:
        return ExitCode(code).name.lower()
    except ValueError:
        return str(code)


def error_json(message: str, hint: Optional[str], code: int) -> str:
    return json.dumps({"error": {"message": message, "hint": hint, "code": _code_name(code)},
                       "exit_code": int(code)}, indent=2)


def _parse(stderr_text: str) -> tuple:
    message, hint = "", None
    for line in stderr_text.splitlines():
        if line.startswith("hint: ") and hint is None:
            hint = line[len("hint: "):]
        elif not message and line.strip() and not line.startswith("usage:"):
            for prefix in ("envlock: error: ", "envlock: internal error: ", "envlock: "):
                if line.startswith(prefix):
                    line = line[len(prefix):]
                    break
            message = line
    return message or "failed", hint


def run_json(main: Callable[..., int], argv: List[str], out: Any) -> int:
    from envlock.cli import Output

    err = _Tee(out.stderr)
    std = _Tee(out.stdout)
    inner = Output(std, err)
    inner.color = False
    code = int(main(argv, inner))
    if code >= ExitCode.USAGE and not std.getvalue().strip():
        message, hint = _parse(err.getvalue())
        out.stdout.write(error_json(message, hint, code) + "\n")
    return code
