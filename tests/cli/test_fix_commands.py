"""The fixes verify suggests do what they say: pasted into a shell, in a real virtual
environment, against the loopback index the lock came from, they bring the environment
back to the lock (hash-pinned, from the user's ``--lock`` path, into ``--python``'s
environment), and verify then finds nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from support.index_server import make_wheel
from support.torch_world import clean_env, torch_world

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp: Path) -> dict:
    bindir = tmp / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "envlock"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m envlock "$@"\n')
    shim.chmod(0o755)
    env = clean_env({"NO_COLOR": "1"})
    env["PATH"] = f"{bindir}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONPATH"] = str(ROOT)
    return env


def _packages(data: dict) -> list:
    """The package findings (this host's own CUDA libraries are not the test's business:
    the loopback nvidia-* wheels are empty, so a system libcudart may well load)."""
    return [f for f in data["findings"] if f["category"] == "packages"]


def _verify(lockdir: Path, python: Path, env: dict) -> dict:
    p = subprocess.run([sys.executable, "-m", "envlock", "verify", "--lock", "h100.lock",
                        "--python", str(python), "--stage", "build", "--hashes", "--json"],
                       cwd=lockdir, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    return json.loads(p.stdout)


def test_suggested_fixes_restore_the_lock(tmp_path: Path) -> None:
    with torch_world(tmp_path / "world") as world:
        lockdir = tmp_path / "proj"
        lockdir.mkdir()
        world.resolve(lockdir / "h100.lock", "--gpu", "H100 SXM")
        # another jinja2 on the index: the drift a stray `pip install -U` brings; and a
        # CUDA 11 cuDNN wheel, the other CUDA major
        world.server.indexes["pypi"].add(make_wheel(tmp_path / "extra", "jinja2", "3.1.3",
                                                    requires=["MarkupSafe>=2.0"]))
        world.server.indexes["pypi"].add(make_wheel(tmp_path / "extra", "nvidia-cudnn-cu11",
                                                    "8.7.0.84"))
        env = _env(tmp_path)
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env,
                       timeout=300)
        py = venv / "bin" / "python"
        req = lockdir / "req.txt"
        subprocess.run([sys.executable, "-m", "envlock", "export", "--lock", "h100.lock",
                        "--format", "requirements", "-o", str(req)], cwd=lockdir, env=env,
                       check=True, timeout=120)

        def pip(*args: str) -> None:
            p = subprocess.run([str(py), "-m", "pip", *args, "--no-cache-dir",
                                "--disable-pip-version-check"], env=env, capture_output=True,
                               text=True, timeout=300)
            assert p.returncode == 0, p.stdout + p.stderr

        pip("install", "--no-deps", "--require-hashes", "-r", str(req))
        assert _packages(_verify(lockdir, py, env)) == []
        # drift: two packages gone, one at another version, one file edited by hand
        pip("uninstall", "-y", "filelock", "fsspec")
        pip("install", "--no-deps", "jinja2==3.1.3", "nvidia-cudnn-cu11==8.7.0.84",
            "--index-url", world.pypi_url)
        site = next((venv / "lib").glob("python*/site-packages"))
        edited = next(p for p in site.glob("networkx/**/*.py"))
        edited.write_text(edited.read_text() + "\n# edited\n")
        before = _verify(lockdir, py, env)
        ids = sorted(f["id"] for f in _packages(before))
        assert ids == ["cuda-major-mix", "package-files", "package-missing",
                       "package-unexpected", "package-version"], before
        for f in _packages(before):
            fix = f["fix"][0]
            assert f"{py} -m pip" in fix
            if f["id"] != "package-unexpected":  # (that one only uninstalls)
                assert "h100.lock" in fix and "--require-hashes" in fix
            p = subprocess.run(["bash", "-c", fix], cwd=lockdir, env=env, capture_output=True,
                               text=True, timeout=300)
            assert p.returncode == 0, (fix, p.stdout[-2000:], p.stderr[-2000:])
        after = _verify(lockdir, py, env)
        assert _packages(after) == [], after
        assert "# edited" not in edited.read_text()
