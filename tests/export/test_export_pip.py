"""The requirements export through real pip against the loopback torch world: it installs
into a fresh venv, the result passes ``envlock verify --stage build``, and pip refuses a
tampered hash, a planted package, and (without ``--no-deps``) the advisory override."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from exportkit import (
    InstalledVenv, World, check_verify_build, envlock_site, export_text, locked_versions,
    pip,
)
from support.index_server import make_wheel
from support.torch_world import CU121_REQUIRES, clean_env


def test_requirements_install_exactly_the_lock_into_a_fresh_venv(
        installed_venv: InstalledVenv) -> None:
    from envlock.probe.packages import installed_packages

    installed = installed_packages([str(installed_venv.site_packages)])
    assert installed == locked_versions(installed_venv.lock, installed_venv.target)
    assert installed["torch"] == "2.5.1+cu121"
    assert installed["nvidia-cublas-cu12"] == "12.4.5.8"  # the advisory override
    version_py = installed_venv.site_packages / "torch" / "version.py"
    assert "2.5.1+cu121" in version_py.read_text()  # the PyTorch index's file


def _without_pythonpath() -> dict:
    """The venv's own view: packages on the test runner's PYTHONPATH (tools carried to a
    host as wheels, say) are importable there too, so verify rightly judges them; the venv
    run appends envlock's directory itself."""
    return {k: v for k, v in clean_env().items() if k != "PYTHONPATH"}


def test_the_installed_venv_passes_envlock_verify_build(installed_venv: InstalledVenv,
                                                       tmp_path: Path) -> None:
    import envlock.cli

    if "verify" not in envlock.cli.COMMANDS:
        pytest.skip("the 'verify' subcommand is not registered in envlock.cli.COMMANDS yet")
    # envlock runs with the venv's interpreter and its own directory appended to sys.path:
    # the venv's packages come first, so verify sees it (the exported Dockerfile keeps
    # envlock in its own venv instead and passes --python; see test_dockerfile_context.py)
    extra = envlock_site(tmp_path / "envlock-site")
    code = ("import sys\n"
            f"sys.path.append({str(extra)!r})\n"
            "from envlock.cli import main\n"
            "sys.exit(main(sys.argv[1:]))\n")
    proc = subprocess.run(
        [str(installed_venv.python), "-c", code, "verify", "--lock", str(installed_venv.lock),
         "--target", installed_venv.target, "--stage", "build", "--json"],
        env=_without_pythonpath(), capture_output=True, text=True, timeout=60)
    assert proc.stderr == "", proc.stderr
    check_verify_build(proc.stdout, proc.returncode, installed_venv.python.parent.parent,
                       installed_venv.target)


def _requirements(world: World, d: Path, target: str = "h20", only: str = "") -> Path:
    """The exported file; with ``only``, just its index options and that one package (the
    rest would only make pip slower: every test here is about one package)."""
    text = export_text(world.multi_lock, "requirements", target)
    if only:
        lines, keep = [], False
        for line in text.splitlines():
            if line.startswith("--"):
                lines.append(line)
            elif line and not line.startswith((" ", "#")):
                keep = line.startswith(f"{only}==")
                if keep:
                    lines.append(line)
            elif keep and line.startswith(" "):
                lines.append(line)
        text = "\n".join(lines) + "\n"
    req = d / f"requirements-{target}.txt"
    req.write_text(text)
    return req


def test_pip_refuses_a_tampered_hash(world: World, tmp_path: Path) -> None:
    req = _requirements(world, tmp_path, only="torch")
    text = req.read_text()
    start = text.index("torch==2.5.1+cu121")
    at = text.index("--hash=sha256:", start) + len("--hash=sha256:")
    digit = "0" if text[at] != "0" else "1"
    req.write_text(text[:at] + digit + text[at + 1:])
    proc = pip("install", "--no-deps", "--require-hashes", "--target", str(tmp_path / "t"),
               "-r", str(req))
    assert proc.returncode != 0
    assert "THESE PACKAGES DO NOT MATCH THE HASHES" in proc.stderr
    assert not (tmp_path / "t" / "torch").exists()


def test_a_package_planted_on_the_other_index_cannot_install(world: World,
                                                              tmp_path: Path) -> None:
    """The torchtriton attack: the same name (and a higher version) on the index that pip
    also searches. The hashes keep the genuine file."""
    pypi = world.torch.server.indexes["pypi"]
    evil = {"torch/evil.py": b"raise SystemExit('planted')\n"}
    planted = [make_wheel(tmp_path / "evil", "torch", "2.5.1+cu121",
                          tag="cp311-cp311-linux_x86_64", requires=CU121_REQUIRES, files=evil),
               make_wheel(tmp_path / "evil", "torch", "2.6.0",
                          tag="cp311-cp311-manylinux1_x86_64", files=evil)]
    for wheel in planted:
        pypi.add(wheel)
    try:
        req = _requirements(world, tmp_path, only="torch")
        before = len(world.torch.server.requests("/pypi/simple/torch/"))
        proc = pip("install", "--no-deps", "--require-hashes", "--target",
                   str(tmp_path / "t"), "-r", str(req))
        asked = len(world.torch.server.requests("/pypi/simple/torch/")) - before
    finally:
        pypi.files["torch"] = [p for p in pypi.files["torch"] if p not in planted]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert asked >= 1  # pip did look at the index with the planted files
    assert not (tmp_path / "t" / "torch" / "evil.py").exists()
    assert "2.5.1+cu121" in (tmp_path / "t" / "torch" / "version.py").read_text()


def test_without_no_deps_pip_refuses_the_advisory_override(world: World,
                                                           tmp_path: Path) -> None:
    """Why the header says --no-deps: torch pins cuBLAS 12.1.3.1, the H20 advisory needs
    12.4.5.8, and pip's resolver cannot have both."""
    req = _requirements(world, tmp_path)
    proc = pip("install", "--dry-run", "--require-hashes", "--target", str(tmp_path / "t"),
               "-r", str(req))
    assert proc.returncode != 0
    assert "nvidia-cublas-cu12" in proc.stdout + proc.stderr
    assert "conflict" in (proc.stdout + proc.stderr).lower()
    # with --no-deps the same file installs: see installed_venv
