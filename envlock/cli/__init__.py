"""The ``envlock`` command line: argument parsing, rendering, exit codes.

This package is the only place that prints or exits. Each subcommand lives in its own
module with ``register(subparsers)`` and a ``run(args, out)`` returning an exit code; the
core library returns values and raises :class:`~envlock.errors.EnvlockError`.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, List, Optional, Sequence, TextIO

from envlock import __version__
from envlock.errors import EnvlockError, ExitCode

if TYPE_CHECKING:
    import argparse

__all__ = ["main", "build_parser", "Output", "COMMANDS"]

#: subcommand name -> module under envlock.cli (imported lazily: `envlock --help` stays fast
#: and never imports torch, urllib3 or the matrix).
COMMANDS = {
    "resolve": "envlock.cli.resolve_cmd",
    "snapshot": "envlock.cli.snapshot_cmd",
    "verify": "envlock.cli.verify_cmd",
    "doctor": "envlock.cli.doctor_cmd",
    "export": "envlock.cli.export_cmd",
    "fleet": "envlock.cli.fleet_cmd",
    "matrix": "envlock.cli.matrix_cmd",
    "explain": "envlock.cli.explain_cmd",
    "cache": "envlock.cli.cache_cmd",
    "completion": "envlock.cli.completion",
}


class Output:
    """Where commands write. Tests pass StringIO; the real CLI passes stdout/stderr."""

    def __init__(self, stdout: Optional[TextIO] = None, stderr: Optional[TextIO] = None) -> None:
        # resolved at call time, so redirected sys.stdout/sys.stderr are honoured
        self.stdout = stdout if stdout is not None else sys.stdout
        self.stderr = stderr if stderr is not None else sys.stderr

    def print(self, text: str = "") -> None:
        from envlock._text import terminal_safe  # no control sequence from data

        self.stdout.write(terminal_safe(text) + "\n")

    def error(self, text: str) -> None:
        from envlock._text import terminal_safe

        self.stderr.write(terminal_safe(text) + "\n")

    def junit(self, path: str, xml: str) -> None:
        """Write a JUnit report to ``path``; ``-`` is standard output, as ``-o -`` is, and
        then what the command prints afterwards goes to standard error, so that a CI step
        reading standard output gets the XML alone (a file named ``-`` was written
        before)."""
        if path != "-":
            from envlock.lock.io import atomic_write_text

            atomic_write_text(path, xml)
            return
        self.stdout.write(xml if xml.endswith("\n") else xml + "\n")
        self.stdout.flush()
        self.stdout = self.stderr

    #: colour on stdout (set by main: a TTY, no NO_COLOR, no --no-color)
    color: bool = False

    @property
    def stdout_is_tty(self) -> bool:
        try:
            return self.stdout.isatty()
        except (AttributeError, ValueError):
            return False

    @property
    def stderr_is_tty(self) -> bool:
        try:
            return self.stderr.isatty()
        except (AttributeError, ValueError):
            return False


def build_parser(only: Optional[str] = None) -> "argparse.ArgumentParser":
    """The argument parser; ``only`` registers just that subcommand (every command start
    would otherwise import and build all eight)."""
    import importlib

    from envlock.cli.parser import Parser as _Parser

    parser = _Parser(
        prog="envlock",
        description="Reproducible GPU deep-learning environments: lock PyTorch and the "
                    "CUDA stack for your hardware, and verify machines against the lock.",
        epilog="Exit codes: 0 ok, 1 drift/problems found, 2 usage or input error, "
               "3 no PyTorch build fits, 4 package index error, 5 invalid matrix, "
               "6 requirements conflict, 7 sdist build failed or forbidden (--no-build), "
               "70 internal error, 130 interrupted.",
    )
    parser.add_argument("--version", action="version", version=f"envlock {__version__}")
    parser.add_argument("--debug", action="store_true",
                        help="show a traceback on errors")
    parser.add_argument("--no-color", action="store_true",
                        help="no colour (also $NO_COLOR); accepted anywhere on the line")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module in COMMANDS.items():
        if only is None or name == only:
            importlib.import_module(module).register(sub)
    return parser


def _command_of(args: Sequence[str]) -> Optional[str]:
    """The subcommand named on the command line, when the rest needs no other parser."""
    for a in args:
        if a in ("-h", "--help", "--version"):
            return None
        if a.startswith("-"):
            continue
        return a if a in COMMANDS else None
    return None


def main(argv: Optional[Sequence[str]] = None, out: Optional[Output] = None) -> int:
    """Entry point of the console script. Returns (and, as a script, exits with) a code.

    ``--no-color`` is taken from anywhere on the line. Under ``--json`` a failure (exit
    code 2 and above) also prints ``{"error": {"message", "hint", "code"}, "exit_code"}``
    on stdout, so a script that parses stdout always gets JSON.
    """
    out = out or Output()
    if argv is None:  # a program of its own (not a test calling in): see _second_ctrl_c_exits
        _second_ctrl_c_exits()
        _sigterm_cleans_up()
    try:
        args_list: List[str] = list(sys.argv[1:] if argv is None else argv)
        no_color = "--no-color" in args_list
        args_list = [a for a in args_list if a != "--no-color"]
        from envlock.cli.style import color_wanted

        out.color = color_wanted(out.stdout, no_color_flag=no_color)
        if args_list[:1] == ["resolve"] and _replayed(args_list, out):
            return ExitCode.OK
        if "--json" not in args_list:
            return _main(args_list, out)
        from envlock.cli.jsonerr import run_json

        return run_json(_main, args_list, out)
    finally:
        if argv is None:
            _no_collection_at_exit()


def _main(argv: Optional[Sequence[str]] = None, out: Optional[Output] = None) -> int:
    out = out or Output()
    args_list: List[str] = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args_list or bool(os.environ.get("ENVLOCK_DEBUG"))
    from envlock.cli.parser import ArgError as _ArgError

    try:
        parser = build_parser(_command_of(args_list))
        try:
            args = parser.parse_args(args_list)
        except _ArgError as exc:
            out.error(_one_line(str(exc)))
            return ExitCode.USAGE
        except SystemExit as exc:  # --help / --version: argparse printed and wants to exit
            return int(exc.code or 0)
        if not getattr(args, "command", None):  # usage and the reason on stderr, exit 2
            parser.print_usage(out.stderr)
            out.error(f"envlock: error: a command is required ({', '.join(COMMANDS)}); "
                      f"see 'envlock --help'")
            return ExitCode.USAGE
        args.argv = args_list
        return int(args.run(args, out))
    except EnvlockError as exc:
        if debug:
            import traceback

            traceback.print_exc(file=out.stderr)
        # one line each, whatever the message quotes (a file's text, a URL, a name)
        out.error(f"envlock: error: {_one_line(exc.message)}")
        if exc.hint:
            out.error(f"hint: {_one_line(exc.hint)}")
        return int(exc.exit_code)
    except KeyboardInterrupt as exc:
        if isinstance(exc, _Terminated):
            out.error("envlock: terminated")
            return ExitCode.TERMINATED
        out.error("envlock: interrupted")
        return ExitCode.INTERRUPTED
    except BrokenPipeError:
        return ExitCode.OK
    except Exception as exc:  # noqa: BLE001 - the last line of defence: one line, no traceback
        if debug:  # the traceback, and still the internal-error exit code (never 1)
            import traceback

            traceback.print_exc(file=out.stderr)
        out.error(f"envlock: internal error: {type(exc).__name__}: {_one_line(str(exc))} "
                  f"(run with --debug for a traceback, and please report it)")
        return ExitCode.INTERNAL


def _replayed(args_list: List[str], out: Output) -> bool:
    """A resolve whose every input is unchanged since a recorded run: that run's result,
    before anything is parsed or imported (:mod:`envlock.replay`). Any trouble in looking
    it up means "resolve as usual"."""
    from envlock import replay

    try:
        return replay.replayed(args_list, out)
    except (OSError, ValueError, EnvlockError):
        return False  # the resolve itself meets it again, and says what it is


def _no_collection_at_exit() -> None:
    """Move every object still alive into the garbage collector's permanent generation,
    which the interpreter's last collection at exit does not walk.

    The command is over, its output written and flushed by now; what is left is the heap
    a resolve built (hundreds of thousands of page rows, versions and specifiers, nearly
    none in cycles). Walking it once more before the process ends took about 0.2 s of a
    1.1 s warm resolve (measured). Objects are still freed and atexit handlers still run:
    only that last walk is skipped. A test calling :func:`main` in-process never gets
    here (its process goes on collecting as usual).
    """
    import gc

    gc.freeze()


def _second_ctrl_c_exits() -> None:
    """The first Ctrl-C raises KeyboardInterrupt as usual, so the command cleans up and
    prints "interrupted"; a second one ends the process at once with the same exit code.

    Without this, a second Ctrl-C pressed while the interpreter was still on its way out
    (joining the index client's worker threads) raised KeyboardInterrupt inside
    threading's shutdown and printed a traceback. A SIGINT that the process was started
    with ignored (a background job, nohup) stays ignored.
    """
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    pressed: List[int] = []

    def on_sigint(signum: int, frame: object) -> None:
        if not pressed:
            pressed.append(signum)
            raise KeyboardInterrupt
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a closed pipe must not stop the exit
                pass
        os._exit(ExitCode.INTERRUPTED)

    try:
        signal.signal(signal.SIGINT, on_sigint)
    except ValueError:  # not the main thread: keep Python's default
        pass


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread so that the command unwinds as for Ctrl-C."""


def _sigterm_cleans_up() -> None:
    """SIGTERM unwinds the command like Ctrl-C (the index client is closed, which kills a
    running sdist build's process group) and exits 143, instead of ending the process at
    once and leaving the build's processes running."""
    import signal

    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return
    fired: List[int] = []

    def on_sigterm(signum: int, frame: object) -> None:
        if fired:  # a second SIGTERM: end now (the reaper still cleans up)
            os._exit(ExitCode.TERMINATED)
        fired.append(signum)
        raise _Terminated

    try:
        signal.signal(signal.SIGTERM, on_sigterm)
    except ValueError:  # not the main thread
        pass


def _one_line(text: str) -> str:
    """Control characters (newlines included) escaped, and credentials in URLs removed."""
    from envlock._redact import strip_userinfo
    from envlock._text import escape_controls

    return escape_controls(strip_userinfo(text))


def run() -> None:  # pragma: no cover - console script shim
    sys.exit(main())
