"""Fixtures for the exporter tests: the CLI in-process, the loopback torch world with
locks resolved against it, and one fresh virtual environment per session."""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from exportkit import InstalledVenv, World, export_text, make_venv, pip  # noqa: E402
from support.torch_world import torch_world  # noqa: E402

LOCKS = HERE.parent / "data" / "locks"


@dataclass(frozen=True)
class CliResult:
    code: int
    stdout: str
    stderr: str


@pytest.fixture
def run_export(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """``run_export("--format", "requirements", ...)`` runs ``envlock export`` through the
    real ``envlock.cli.main`` (the subcommand is registered for the test if the CLI does
    not list it yet)."""
    import envlock.cli as cli

    monkeypatch.setitem(cli.COMMANDS, "export", "envlock.cli.export_cmd")

    def run(*argv: str) -> CliResult:
        out, err = io.StringIO(), io.StringIO()
        code = cli.main(["export", *argv], out=cli.Output(out, err))
        return CliResult(int(code), out.getvalue(), err.getvalue())

    return run


@pytest.fixture
def locks_dir(monkeypatch: pytest.MonkeyPatch) -> Path:
    """The fixture locks' directory, made the working directory (headers name relative
    lock paths)."""
    monkeypatch.chdir(LOCKS)
    return LOCKS


@pytest.fixture(scope="session")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    d = tmp_path_factory.mktemp("torch-world")
    with torch_world(d) as tw:
        h100 = tw.resolve(d / "h100.lock", "--gpu", "H100 SXM")
        multi = tw.resolve(d / "multi.lock", "--gpu", "H100 SXM", "--gpu", "H20", "--cuda",
                           "12.1", "torchvision")
        yield World(tw, d, h100, multi)


@pytest.fixture(scope="session")
def installed_venv(world: World, tmp_path_factory: pytest.TempPathFactory) -> InstalledVenv:
    """A fresh venv with the h20 target of the multi lock installed exactly as the exported
    requirements file's header says (``pip install --no-deps --require-hashes -r``)."""
    d = tmp_path_factory.mktemp("installed")
    req = d / "requirements-h20.txt"
    req.write_text(export_text(world.multi_lock, "requirements", "h20"))
    python = make_venv(d / "venv")
    proc = pip("--python", str(python), "install", "--no-deps", "--require-hashes",
               "-r", str(req))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    site = next((d / "venv" / "lib").glob("python*/site-packages"))
    return InstalledVenv(python, site, world.multi_lock, "h20", proc.stdout)
