"""The command line as a whole: help, exit codes, one-line errors, no heavy imports."""

from __future__ import annotations

import subprocess
import sys

from envlock.errors import ExitCode
from support.cli import run_cli, run_proc


def _modules_after(code: str) -> set:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys\n"
                          "print(' '.join(sorted(sys.modules)))"],
                         capture_output=True, text=True, check=True).stdout
    return set(out.split())


def test_import_envlock_and_help_never_import_torch() -> None:
    mods = _modules_after("import envlock, io\nfrom envlock.cli import main, Output\n"
                          "main(['--help'], Output(io.StringIO(), io.StringIO()))")
    assert "torch" not in mods
    assert "urllib3" not in mods  # help stays fast


def test_help_lists_only_implemented_commands() -> None:
    r = run_proc("--help")
    assert r.code == 0
    for cmd in ("resolve", "snapshot", "verify", "doctor", "matrix"):
        assert cmd in r.out
    assert "Exit codes" in r.out


def test_no_command_prints_usage_on_stderr_and_exits_2() -> None:
    r = run_cli()
    assert r.code == ExitCode.USAGE and r.out == ""
    assert r.err.startswith("usage: envlock") and "COMMAND" in r.err
    assert "envlock: error: a command is required" in r.err


def test_unknown_option_is_one_line_exit_2() -> None:
    r = run_proc("resolve", "--gpu", "H20", "--no-such-option")
    assert r.code == 2
    assert r.err.count("\n") == 1 and "unrecognized arguments" in r.err


def test_missing_lock_is_one_line_exit_2() -> None:
    r = run_proc("verify", "--lock", "/nonexistent/envlock.lock", "--stage", "build")
    assert r.code == 2
    assert r.err.startswith("envlock: error: lock file /nonexistent/envlock.lock does not exist")
    assert "Traceback" not in r.err


def test_debug_shows_traceback() -> None:
    r = run_proc("--debug", "verify", "--lock", "/nonexistent/envlock.lock")
    assert r.code == 2 and "Traceback" in r.err


def test_version() -> None:
    r = run_proc("--version")
    assert r.code == 0 and r.out.startswith("envlock ")
