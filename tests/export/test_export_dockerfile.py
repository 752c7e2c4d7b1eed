"""The Dockerfile export: its structure, its shell, and a simulated build.

No Docker daemon is needed: the build steps are run for real on this machine with the
image's paths (/opt/venv, /opt/envlock, /etc/envlock, /usr/local/bin) mapped into a
temporary directory, so the in-image ``envlock export``, the launcher script, the
hash-checked pip install, ``envlock verify --stage build`` and the entrypoint's gate all
run as they would in ``docker build`` and ``docker run``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from envlock.errors import UsageError
from envlock.export import export
from envlock.lock.io import load_lock
from exportkit import World, check_verify_build, envlock_site, export_text, locked_versions
from torch_world import clean_env

LOCKS = Path(__file__).resolve().parents[1] / "data" / "locks"


def instructions(text: str) -> List[Tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: List[Tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = pending + line
        pending = ""
        word, _, rest = full.strip().partition(" ")
        out.append((word, " ".join(rest.split())))
    return out


def test_dockerfile_structure() -> None:
    text = export_text(LOCKS / "cu121-h100-h20.lock", "dockerfile", "h20")
    ins = instructions(text)
    assert ins[0] == ("ARG", "BASE_IMAGE=python:3.11-slim")
    assert ins[1] == ("FROM", "${BASE_IMAGE}")
    assert ("ENV", 'NCCL_DEBUG="WARN"') in ins  # the lock's --env
    assert ("COPY", f"{LOCKS / 'cu121-h100-h20.lock'} /etc/envlock/envlock.lock") not in ins
    runs = [a for w, a in ins if w == "RUN"]
    assert any("pip --python /opt/venv/bin/python install --no-deps --require-hashes "
               "-r /etc/envlock/requirements.txt" in r for r in runs)
    assert runs[-1].endswith("envlock verify --lock /etc/envlock/envlock.lock --target h20 "
                             "--stage build")
    (entry,) = [json.loads(a) for w, a in ins if w == "ENTRYPOINT"]
    assert entry[:2] == ["/bin/sh", "-c"]
    assert entry[2] == ("envlock verify --lock /etc/envlock/envlock.lock --target h20 "
                        "--stage runtime && exec \"$@\"")
    assert ins[-1] == ("CMD", '["python"]')
    for r in runs:  # valid POSIX shell
        proc = subprocess.run(["sh", "-n", "-c", r], capture_output=True, text=True)
        assert proc.returncode == 0, (r, proc.stderr)
    header = " ".join(w for line in text.split("\n\n")[0].splitlines()
                      for w in line.lstrip("#").split())
    assert "docker run --gpus all --shm-size=16g envlock-h20 python train.py" in header
    assert "(or --ipc=host)" in header and "dev-shm-too-small-container" in header


def test_relative_lock_path_is_copied_from_the_build_context(run_export,
                                                             locks_dir: Path) -> None:
    r = run_export("--format", "dockerfile", "--lock", "cu121-h100-h20.lock", "--target",
                   "h100-sxm", "--base-image", "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04")
    assert r.code == 0, r.stderr
    ins = instructions(r.stdout)
    assert ("COPY", "cu121-h100-h20.lock /etc/envlock/envlock.lock") in ins
    assert ins[0] == ("ARG", "BASE_IMAGE=nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04")
    assert "--base-image nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04" in r.stdout.splitlines()[2]


def test_dockerfile_needs_a_linux_target() -> None:
    lock = load_lock(LOCKS / "h100-pypi.lock")
    win = dataclasses.replace(lock.targets[0], platform="win_amd64")
    lock = dataclasses.replace(lock, targets=(win,))
    with pytest.raises(UsageError) as exc:
        export(lock, "dockerfile", lock_path="x.lock")
    assert str(exc.value) == ("target h100-sxm is win_amd64: a Dockerfile needs a Linux "
                              "target (resolve with --platform linux_x86_64 or "
                              "linux_aarch64)")


class _Image:
    """The image's filesystem paths mapped under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.paths: Dict[str, str] = {
            "/usr/local/bin/envlock": str(root / "bin" / "envlock"),
            "/opt/venv": str(root / "opt" / "venv"),
            "/opt/envlock": str(root / "opt" / "envlock"),
            "/etc/envlock": str(root / "etc" / "envlock"),
        }
        (root / "bin").mkdir(parents=True)
        (root / "etc" / "envlock").mkdir(parents=True)
        self.env = clean_env({"PATH": f"{root / 'bin'}:{root / 'opt' / 'venv' / 'bin'}:"
                                      f"{os.environ.get('PATH', '')}"})

    def map(self, text: str) -> str:
        for old, new in self.paths.items():
            text = text.replace(old, new)
        return text

    def sh(self, step: str, *args: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
        return subprocess.run(["sh", "-c", self.map(step), *args], env=self.env,
                              capture_output=True, text=True, timeout=120)


def _register_export(launcher: Path) -> None:
    """Until envlock.cli.COMMANDS lists 'export', the launcher registers it itself."""
    lines = launcher.read_text().splitlines()
    at = lines.index("from envlock.cli import run")
    lines.insert(at, "import envlock.cli; envlock.cli.COMMANDS.setdefault('export', "
                     "'envlock.cli.export_cmd')")
    launcher.write_text("\n".join(lines) + "\n")


def test_simulated_docker_build_and_entrypoint(world: World, tmp_path: Path) -> None:
    import envlock.cli

    if "verify" not in envlock.cli.COMMANDS:
        pytest.skip("the 'verify' subcommand is not registered in envlock.cli.COMMANDS yet")
    context = tmp_path / "context"
    context.mkdir()
    shutil.copy(world.multi_lock, context / "envlock.lock")
    text = export(load_lock(context / "envlock.lock"), "dockerfile", lock_path="envlock.lock",
                  target="h20").text
    image = _Image(tmp_path / "image")
    envlock_site(image.root / "opt" / "envlock")  # what `pip install --target` would put
    for word, args in instructions(text):
        if word == "COPY":
            src, dst = args.split()
            shutil.copy(context / src, image.map(dst))
        elif word == "RUN":
            for step in args.split(" && "):
                if step.startswith("pip install --target"):
                    continue  # envlock comes from this checkout (envlock_site above)
                step = step.replace("pip --python", f"{sys.executable} -m pip --python", 1)
                step = step.replace("python -m venv", f"{sys.executable} -m venv", 1)
                if step.startswith("envlock verify"):
                    proc = image.sh(step + " --json")
                    check_verify_build(proc.stdout, proc.returncode,
                                       image.root / "opt" / "venv", "h20")
                    continue
                proc = image.sh(step)
                assert proc.returncode == 0, (step, proc.stdout, proc.stderr)
                if step.startswith("printf") and "export" not in envlock.cli.COMMANDS:
                    _register_export(image.root / "bin" / "envlock")
    from envlock.probe.packages import installed_packages

    site = next((image.root / "opt" / "venv" / "lib").glob("python*/site-packages"))
    assert installed_packages([str(site)]) == locked_versions(world.multi_lock, "h20")
    requirements = (image.root / "etc" / "envlock" / "requirements.txt").read_text()
    assert requirements.splitlines()[2] == image.map(
        "#   envlock export --format requirements --lock /etc/envlock/envlock.lock --target "
        "h20 -o /etc/envlock/requirements.txt")

    (entry,) = [json.loads(a) for w, a in instructions(text) if w == "ENTRYPOINT"]
    gate = image.sh(entry[2].split(" && ")[0])
    run = image.sh(entry[2], entry[3], "python", "-c", "print('the user command ran')")
    if gate.returncode == 0:
        assert run.returncode == 0 and "the user command ran" in run.stdout
    else:  # this machine is no H20 with a driver: the gate keeps the command from running
        assert run.returncode == gate.returncode
        assert "the user command ran" not in run.stdout
        assert "envlock verify" in run.stdout
