"""Helpers for the exporter tests: real tools with a scrubbed environment, exports
without the CLI, and parsers for what the exporters write."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from support.torch_world import TorchWorld, clean_env

__all__ = ["export_text", "run_tool", "pip", "uv_bin", "make_venv", "locked_versions",
           "parse_pins", "split_hashes", "envlock_site", "ENVLOCK_IMPORTS",
           "check_verify_build", "World", "InstalledVenv", "instructions",
           "repack_installed"]


@dataclass(frozen=True)
class World:
    torch: TorchWorld
    directory: Path
    #: ``--gpu H100``: torch 2.5.1 (cu124) from the PyPI side, one target
    h100_lock: Path
    #: ``--gpu H100 --gpu H20 --cuda 12.1 torchvision``: two targets, torch 2.5.1+cu121 from
    #: the PyTorch index; h20 carries the cuBLAS advisory override
    multi_lock: Path


@dataclass(frozen=True)
class InstalledVenv:
    python: Path
    site_packages: Path
    lock: Path
    target: str
    pip_output: str

#: what ``import envlock`` and its commands need (the Dockerfile's ``/opt/envlock``)
ENVLOCK_IMPORTS = ("envlock", "packaging", "resolvelib", "urllib3", "certifi", "tomlkit",
                   "pynvml")


def export_text(lock: Path, fmt: str, target: str, output: str = "-") -> str:
    """Export without the CLI's argument parsing (for fixtures that are session-scoped)."""
    from envlock.export import export
    from envlock.lock.io import load_lock

    return export(load_lock(lock), fmt, lock_path=str(lock), target=target,
                  output=None if output == "-" else output).text


def run_tool(cmd: List[str], *, cwd: Optional[Path] = None, timeout: float = 120,
             **env: str) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """Run a real tool with pip/uv configuration scrubbed from the environment."""
    return subprocess.run([str(c) for c in cmd], cwd=str(cwd) if cwd else None,
                          env=clean_env(env), capture_output=True, text=True,
                          timeout=timeout)


def pip(*args: str, cwd: Optional[Path] = None, cache_dir: Optional[Path] = None,
        timeout: float = 120) -> subprocess.CompletedProcess:  # type: ignore[type-arg]
    """The test venv's pip (the fresh environments have none of their own); no cache
    unless ``cache_dir`` is given."""
    cache = ["--cache-dir", str(cache_dir)] if cache_dir else ["--no-cache-dir"]
    return run_tool([sys.executable, "-m", "pip", *args, *cache], cwd=cwd, timeout=timeout)


def uv_bin() -> Path:
    path = Path(sys.executable).with_name("uv")
    if not path.exists():
        pytest.skip("uv is not installed in the test environment (pip install uv)")
    return path


def make_venv(path: Path) -> Path:
    """A fresh virtual environment without pip (pip runs from outside with --python)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True,
                   env=clean_env())
    return path / "bin" / "python"


def locked_versions(lock: Path, target: str) -> Dict[str, str]:
    from envlock.lock.io import load_lock

    t = load_lock(lock).target(target)
    assert t is not None
    return {p.name: p.version for p in t.packages}


def parse_pins(lines: List[str]) -> Dict[str, str]:
    """name -> version from ``name==version`` requirement strings."""
    from packaging.requirements import Requirement

    out = {}
    for line in lines:
        req = Requirement(line)
        (spec,) = list(req.specifier)
        assert spec.operator == "=="
        out[req.name] = spec.version
    return out


def split_hashes(item: str) -> Tuple[str, List[str]]:
    """``'a==1 --hash=sha256:x --hash=sha256:y'`` -> (``'a==1'``, [x, y])."""
    parts = item.split()
    hashes = [p.split(":", 1)[1] for p in parts if p.startswith("--hash=sha256:")]
    rest = " ".join(p for p in parts if not p.startswith("--hash="))
    return rest, hashes


def envlock_site(directory: Path) -> Path:
    """A directory holding envlock and its dependencies and nothing else (symlinks into
    this environment), like the Dockerfile's ``pip install --target /opt/envlock``: appended
    to another interpreter's ``sys.path`` it runs envlock without adding any distribution
    that ``envlock verify`` would count."""
    import importlib.util

    directory.mkdir(parents=True, exist_ok=True)
    for name in ENVLOCK_IMPORTS:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        origin = Path(spec.origin)
        src = origin.parent if origin.name == "__init__.py" else origin
        link = directory / src.name
        if not link.exists():
            link.symlink_to(src)
    return directory


def check_verify_build(stdout: str, returncode: int, venv: Path, target: str) -> None:
    """Judge ``envlock verify --stage build --json`` on a venv of test wheels.

    What an export is responsible for must be clean: no finding about packages (missing,
    other version, unexpected, mixed CUDA majors). The test wheels carry no shared
    libraries, so on a host whose ld.so.cache holds a CUDA toolkit verify rightly predicts
    that the *system* libcudart would load (with real wheels torch's RUNPATH picks the
    wheel's copy); such library findings are accepted, and nothing else.
    """
    import json

    assert returncode in (0, 1), stdout
    result = json.loads(stdout)
    assert result["stage"] == "build" and result["target"] == target
    assert "packages" in result["checked"]
    findings = result["findings"]
    assert [f for f in findings if f["category"] == "packages"] == []
    others = [f for f in findings if f["severity"] == "error"]
    for f in others:
        assert f["category"] == "library" and "system copy" in f["detail"], f
        assert str(venv) not in f["detail"], f
    assert result["ok"] is (not others)
    assert returncode == (0 if not others else 1)


def instructions(text: str) -> List[Tuple[str, str]]:
    """Dockerfile (INSTRUCTION, arguments) with continuation lines joined and comments
    dropped."""
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


def repack_installed(name: str, directory: Path) -> Path:
    """A wheel of the distribution ``name`` installed here, rebuilt from its RECORD (the
    files envlock's own dependencies are made of), for a loopback index to serve."""
    import base64
    import hashlib
    import importlib.metadata as md
    import zipfile

    dist = md.distribution(name)
    info = next(str(f).split("/")[0] for f in dist.files or [] if ".dist-info/" in str(f))
    tag = dist.read_text("WHEEL").split("Tag:", 1)[1].split()[0]  # type: ignore[union-attr]
    entries = []
    for f in sorted(dist.files or [], key=str):
        rel = str(f)
        if rel.startswith("..") or "__pycache__" in rel or rel.endswith(("/RECORD", ".pyc")):
            continue
        entries.append((rel, Path(str(f.locate())).read_bytes()))

    def rec(data: bytes) -> str:
        d = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        return f"sha256={d}"

    record = "".join(f"{n},{rec(d)},{len(d)}\n" for n, d in entries) + f"{info}/RECORD,,\n"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{name.replace('-', '_')}-{dist.version}-{tag}.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n, d in entries:
            zf.writestr(n, d)
        zf.writestr(f"{info}/RECORD", record)
    return path
