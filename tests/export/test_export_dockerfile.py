"""The Dockerfile export: its structure, its shell, the base image rules and the CLI.

The build itself is replayed step by step in test_dockerfile_context.py.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

import pytest

from envlock.errors import UsageError
from envlock.export import export
from envlock.lock.io import load_lock
from exportkit import export_text, instructions

LOCKS = Path(__file__).resolve().parents[1] / "data" / "locks"


DIGEST = "sha256:" + "ab" * 32


def test_dockerfile_structure() -> None:
    text = export_text(LOCKS / "cu121-h100-h20.lock", "dockerfile", "h20")
    ins = instructions(text)
    assert ins[0] == ("ARG", "BASE_IMAGE=python:3.11-slim")
    assert ins[1] == ("FROM", "${BASE_IMAGE}")
    assert ("ENV", 'NCCL_DEBUG="WARN"') in ins  # the lock's --env
    copies = [a for w, a in ins if w == "COPY"]
    assert copies == ["envlock-requirements.txt envlock-wheel.txt /etc/envlock/context/",
                      "requirements.txt envlock.lock /etc/envlock/"]
    runs = [a for w, a in ins if w == "RUN"]
    assert ("pip --python /opt/envlock/bin/python install --no-deps --require-hashes "
            "--no-index -r envlock-wheel.txt") in runs[0]
    assert "ln -s /opt/envlock/bin/envlock /usr/local/bin/envlock" in runs[0]
    assert ("pip --python /opt/venv/bin/python install --no-deps --require-hashes "
            "-r /etc/envlock/requirements.txt") in runs[1]
    assert runs[-1].endswith("envlock verify --python /opt/venv/bin/python --lock "
                             "/etc/envlock/envlock.lock --target h20 --stage build")
    (entry,) = [json.loads(a) for w, a in ins if w == "ENTRYPOINT"]
    assert entry[:2] == ["/bin/sh", "-c"]
    assert entry[2] == ("envlock verify --python /opt/venv/bin/python --lock "
                        "/etc/envlock/envlock.lock --target h20 --stage runtime && "
                        "exec \"$@\"")
    assert ins[-1] == ("CMD", '["python"]')
    for r in runs:  # valid POSIX shell
        proc = subprocess.run(["sh", "-n", "-c", r], capture_output=True, text=True)
        assert proc.returncode == 0, (r, proc.stderr)
    header = " ".join(w for line in text.split("\n\n")[0].splitlines()
                      for w in line.lstrip("#").split())
    assert "docker run --gpus all --shm-size=16g envlock-h20 python train.py" in header
    assert "(or --ipc=host)" in header and "dev-shm-too-small-container" in header
    assert "python:3.11-slim is named by tag only" in header
    assert "not reproducible until the base is pinned by digest" in header


def test_a_digest_pinned_base_has_no_warning() -> None:
    lock = load_lock(LOCKS / "cu121-h100-h20.lock")
    base = f"python:3.11-slim@{DIGEST}"
    out = export(lock, "dockerfile", lock_path="envlock.lock", target="h20",
                 options={"base_image": base,
                          "envlock_wheel": "envlock_gpu-0.1.0-py3-none-any.whl"})
    assert out.warnings == ()
    assert "tag only" not in out.text
    ins = instructions(out.text)
    assert ins[0] == ("ARG", f"BASE_IMAGE={base}")
    assert ("COPY", "envlock-requirements.txt envlock-wheel.txt "
                    "envlock_gpu-0.1.0-py3-none-any.whl /etc/envlock/context/") in ins


@pytest.mark.parametrize("base", ["python:3.11-slim@sha256:abc", "python@md5:" + "a" * 32,
                                  f"python@{DIGEST.upper()}", f"py thon@{DIGEST}"])
def test_a_malformed_digest_is_refused(run_export, locks_dir: Path, base: str) -> None:
    r = run_export("--format", "dockerfile", "--lock", "cu121-h100-h20.lock", "--target",
                   "h20", "--base", base, "-o", "/nonexistent/never-written")
    assert r.code == 2 and "a digest must be IMAGE@sha256:<64 hexadecimal digits>" in r.stderr
    assert not Path("/nonexistent/never-written").exists()


def test_dockerfile_needs_a_context_directory(run_export, locks_dir: Path) -> None:
    r = run_export("--format", "dockerfile", "--lock", "cu121-h100-h20.lock", "--target", "h20")
    assert r.code == 2 and "pass -o DIR" in r.stderr and r.stdout == ""
    r = run_export("--format", "requirements", "--lock", "cu121-h100-h20.lock", "--target",
                   "h20", "--envlock-from", "x.whl")
    assert r.code == 2 and "--envlock-from applies only to --format dockerfile" in r.stderr


def test_dockerfile_needs_a_linux_target() -> None:
    lock = load_lock(LOCKS / "h100-pypi.lock")
    win = dataclasses.replace(lock.targets[0], platform="win_amd64")
    lock = dataclasses.replace(lock, targets=(win,))
    with pytest.raises(UsageError) as exc:
        export(lock, "dockerfile", lock_path="x.lock")
    assert str(exc.value) == ("target h100-sxm is win_amd64: a Dockerfile needs a Linux "
                              "target (resolve with --platform linux_x86_64 or "
                              "linux_aarch64)")
