"""Output a user (or a script) can act on: JSON on error, colour only on a terminal, shell
completion from the parser, ``export --only``, progress only on a terminal."""

from __future__ import annotations

import io
import json
import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import run_cli, run_proc

DATA = Path(__file__).resolve().parents[1] / "data"
LOCK = str(DATA / "locks" / "h100-pypi.lock")
CORE = str(DATA / "locks" / "gpu-core.lock")
DRIFT = str(DATA / "snapshots" / "h100-package-drift.json")


# -- JSON everywhere -------------------------------------------------------------------------

@pytest.mark.parametrize("argv,code,message", [
    (["verify", "--lock", "nope.lock", "--json"], 2, "lock file nope.lock does not exist"),
    (["verify", "--bogus", "--json"], 2, "unrecognized arguments: --bogus"),
    (["doctor", "--snapshot", "missing.json", "--json"], 2, None),
    (["resolve", "--gpu", "NoSuchGPU", "--offline", "--json"], 2, "unknown GPU 'NoSuchGPU'"),
    (["matrix", "gpu", "nosuchgpu", "--json"], 2, None),
    (["export", "--format", "requirements", "--lock", CORE, "--json"], 2, None),
])
def test_errors_under_json_are_json(argv: list, code: int, message: str,
                                    tmp_path: Path) -> None:
    r = run_proc(*argv, cwd=str(tmp_path))
    assert r.code == code
    data = json.loads(r.out)
    assert data["exit_code"] == code and data["error"]["code"] == "usage"
    assert data["error"]["message"] and "\n" not in data["error"]["message"]
    if message:
        assert data["error"]["message"].startswith(message)
    assert r.err.startswith("envlock: ")  # the line for people is still on stderr


def test_json_error_carries_the_hint(tmp_path: Path) -> None:
    r = run_cli("verify", "--lock", str(tmp_path / "x.lock"), "--json")
    data = json.loads(r.out)
    assert data["error"]["hint"] == f"create one with 'envlock resolve --gpu <GPU> -o " \
                                    f"{tmp_path / 'x.lock'}'"


def _restamped(text: str, version: str) -> str:
    """A saved lock as if made from the matrix stamped ``version`` (its inputs-hash too)."""
    from envlock import _toml
    from envlock.resolve.target import hash_inputs

    old = _toml.loads(text)
    inputs = dict(old["inputs"], **{"matrix-version": version})
    return (text.replace(f'matrix-version = "{old["matrix-version"]}"',
                         f'matrix-version = "{version}"')
            .replace(old["inputs-hash"], hash_inputs(inputs)))


def test_resolve_check_json(tmp_path: Path) -> None:
    from envlock.matrix.load import load_matrix

    now = load_matrix().version
    lock = tmp_path / "envlock.lock"
    lock.write_text(_restamped(Path(CORE).read_text(), now))
    r = run_cli("resolve", "--check", "-o", str(lock), "--json")
    assert r.code == 0 and json.loads(r.out) == {"lock": str(lock), "up_to_date": True,
                                                 "stale": [], "regenerate": None}
    # a lock made from an older matrix: same date, other data (the digest differs)
    older = now.split("+")[0] + "+000000000000"
    lock.write_text(_restamped(Path(CORE).read_text(), older))
    r = run_cli("resolve", "--check", "-o", str(lock), "--json")
    data = json.loads(r.out)
    assert r.code == 1 and data["up_to_date"] is False
    assert data["stale"] == [f"the matrix changed ({older} -> {now})"]
    assert data["regenerate"].startswith("envlock resolve ")
    # the saved fixture predates the stamp's digest: it is stale the same way
    shutil.copy(CORE, lock)
    data = json.loads(run_cli("resolve", "--check", "-o", str(lock), "--json").out)
    assert data["stale"] == [f"the matrix changed (2026.11.21 -> {now})"]


def test_snapshot_show_json_is_the_snapshot() -> None:
    r = run_cli("snapshot", "--show", DRIFT, "--json")
    assert r.code == 0 and json.loads(r.out)["schema"] == "envlock.snapshot/1"


# -- colour -------------------------------------------------------------------------------------

def _on_a_tty(*argv: str, env: dict) -> str:
    """Run envlock with stdout on a pseudo-terminal; what it wrote there."""
    master, slave = pty.openpty()
    e = {**os.environ, **env}
    p = subprocess.Popen([sys.executable, "-m", "envlock", *argv], stdout=slave,
                         stderr=subprocess.DEVNULL, env=e)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=120)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


ARGS = ("verify", "--lock", LOCK, "--snapshot", DRIFT)


def test_colour_on_a_terminal_only() -> None:
    env = {"NO_COLOR": "", "FORCE_COLOR": "", "TERM": "xterm"}
    assert "\x1b[" in _on_a_tty(*ARGS, env=env)
    assert "\x1b[" not in run_proc(*ARGS, env=env).out  # a pipe


@pytest.mark.parametrize("how", ["NO_COLOR", "--no-color"])
def test_no_color_is_honoured(how: str) -> None:
    env = {"NO_COLOR": "1" if how == "NO_COLOR" else "", "FORCE_COLOR": "", "TERM": "xterm"}
    argv = (*ARGS, "--no-color") if how == "--no-color" else ARGS
    out = _on_a_tty(*argv, env=env)
    assert "\x1b[" not in out and "packages differ from the lock" in out


def test_snapshot_on_a_terminal_is_the_readable_view() -> None:
    out = _on_a_tty("snapshot", "--gpu", "H20:8", "--driver", "535.104.05",
                    env={"NO_COLOR": "1"})
    assert "8 x NVIDIA H20" in out.splitlines()[0] and "{" not in out


# -- shell completion -----------------------------------------------------------------------

def _bash_complete(script: Path, *words: str) -> list:
    line = " ".join(repr(w) if w else "''" for w in words)
    code = (f"source {script}; COMP_WORDS=(envlock {line}); COMP_CWORD={len(words)}; "
            f"_envlock; printf '%s\\n' \"${{COMPREPLY[@]}}\"")
    p = subprocess.run(["bash", "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout.split()


def test_bash_completion_comes_from_the_parser(tmp_path: Path) -> None:
    from envlock.cli import COMMANDS

    r = run_cli("completion", "bash")
    assert r.code == 0
    script = tmp_path / "envlock.bash"
    script.write_text(r.out)
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert set(_bash_complete(script, "")) >= set(COMMANDS)
    assert _bash_complete(script, "ver") == ["verify"]
    assert _bash_complete(script, "verify", "--stage", "") == ["build", "runtime"]
    assert "--only" in _bash_complete(script, "export", "--o")
    assert "gpu" in _bash_complete(script, "matrix", "")
    assert {"bash", "zsh", "fish"} <= set(_bash_complete(script, "completion", ""))


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_completion_name_every_command(shell: str, tmp_path: Path) -> None:
    from envlock.cli import COMMANDS

    r = run_cli("completion", shell)
    assert r.code == 0
    for cmd in COMMANDS:
        assert cmd in r.out
    assert "--stage" in r.out or "-l stage" in r.out
    exe = shutil.which(shell)
    if exe is None:
        pytest.skip(f"{shell} is not installed here: syntax not checked")
    script = tmp_path / f"envlock.{shell}"
    script.write_text(r.out)
    assert subprocess.run([exe, "-n", str(script)]).returncode == 0


# -- export --only ----------------------------------------------------------------------------

def test_export_only_writes_exactly_those_packages() -> None:
    r = run_cli("export", "--lock", LOCK, "--format", "requirements", "--only", "torch,FileLock")
    assert r.code == 0
    pins = [line.split(" ")[0] for line in r.out.splitlines() if "==" in line
            and not line.startswith("#")]
    assert pins == ["filelock==3.16.1", "torch==2.5.1"]
    assert r.out.count("--hash=sha256:") == 2
    r = run_cli("export", "--lock", LOCK, "--format", "requirements", "--only", "nope")
    assert r.code == 2 and "does not lock nope" in r.err
    r = run_cli("export", "--lock", LOCK, "--format", "pylock", "--only", "torch")
    assert r.code == 2


# -- progress ---------------------------------------------------------------------------------

class _TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_only_on_a_terminal_and_erased() -> None:
    import threading

    from envlock.cli import Output
    from envlock.cli.progress import Progress

    quiet = Output(io.StringIO(), io.StringIO())
    with Progress(quiet, "working", delay=0.0) as p:
        p.update("still working")
    assert quiet.stderr.getvalue() == ""
    tty = Output(io.StringIO(), _TTY())
    shown = threading.Event()
    with Progress(tty, "working", delay=0.0) as p:
        p.update("smoke: gemm")
        shown.set()
    err = tty.stderr.getvalue()
    assert "smoke: gemm" in err and err.endswith("\r")


def test_every_command_takes_json() -> None:
    """Every command that reports (not ``completion``, which prints a script) has --json;
    ``matrix`` has it on each of its subcommands."""
    from envlock.cli import COMMANDS, build_parser
    import argparse

    parser = build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name in COMMANDS:
        if name == "completion":
            continue
        p = subs.choices[name]
        inner = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        parsers = list(inner[0].choices.values()) if inner else [p]
        for q in parsers:
            assert any("--json" in a.option_strings for a in q._actions), (name, q.prog)


def test_no_candidate_under_json_is_json_with_its_exit_code() -> None:
    r = run_cli("resolve", "--gpu", "V100", "--cuda", "13.0", "--offline", "--dry-run",
                "--json")
    data = json.loads(r.out)
    assert r.code == 3 and data["exit_code"] == 3
    assert data["error"]["code"] == "no_candidate"
    assert "newest first: torch 2.14.1 cu126" in data["error"]["message"]
