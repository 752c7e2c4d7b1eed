"""Regenerate the fixture locks in ``tests/data/locks/`` (run by hand, never by pytest).

    .venv/bin/python tests/export/make_fixture_locks.py

The locks are resolved for real against the loopback :mod:`support.torch_world`, then the
loopback URLs are rewritten to stable public-looking ones so golden outputs do not depend
on a port: the PyPI side becomes a *mirror* (``cu121-h100-h20.lock``) or PyPI itself
(``h100-pypi.lock``), the PyTorch side ``https://download.pytorch.org/whl``. The hashes
are those of the tiny test wheels. ``gpu-core.lock`` is a real ``--offline`` resolve with
an empty cache. After regenerating, review the diff and then the goldens
(``ENVLOCK_UPDATE_GOLDEN=1 pytest tests/export``).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # for the tests' support package

from support.torch_world import clean_env, torch_world  # noqa: E402

LOCKS = HERE.parent / "data" / "locks"


def _rewrite(text: str, base: str, mapping: Dict[str, str]) -> str:
    """Replace the loopback URLs, then the inputs-hash by that of the rewritten inputs (so
    the fixture does not depend on the port and ``resolve --check`` reads it as fresh)."""
    from envlock.lock.io import parse_lock
    from envlock.resolve.target import hash_inputs

    for old, new in mapping.items():
        text = text.replace(base + old, new)
    lock = parse_lock(text)
    return text.replace(lock.inputs_hash, hash_inputs(dict(lock.inputs)))


def main() -> None:
    LOCKS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, torch_world(Path(tmp)) as world:
        base = world.server.base
        multi = world.resolve(Path(tmp) / "cu121-h100-h20.lock", "--gpu", "H100 SXM", "--gpu",
                              "H20", "--cuda", "12.1", "--env", "NCCL_DEBUG=WARN",
                              "torchvision")
        mirror = {"/files/pypi/": "https://pypi-mirror.example.com/packages/",
                  "/pypi/simple": "https://pypi-mirror.example.com/simple",
                  "/files/cu121/": "https://download.pytorch.org/whl/cu121/",
                  "/whl": "https://download.pytorch.org/whl"}
        (LOCKS / multi.name).write_text(_rewrite(multi.read_text(), base, mirror))
        h100 = world.resolve(Path(tmp) / "h100-pypi.lock", "--gpu", "H100 SXM")
        pypi = {"/files/pypi/": "https://files.pythonhosted.org/packages/",
                "/pypi/simple": "https://pypi.org/simple",
                "/whl": "https://download.pytorch.org/whl"}
        (LOCKS / h100.name).write_text(_rewrite(h100.read_text(), base, pypi))
    with tempfile.TemporaryDirectory() as tmp:
        env = clean_env({"ENVLOCK_CACHE_DIR": str(Path(tmp) / "empty-cache")})
        subprocess.run([sys.executable, "-m", "envlock", "resolve", "--offline", "--gpu",
                        "H100 SXM", "--torch", "==2.5.1", "-o", "gpu-core.lock"],
                       cwd=str(LOCKS), env=env, check=True, capture_output=True)
    for p in sorted(LOCKS.glob("*.lock")):
        print(f"wrote {p.relative_to(HERE.parent.parent)}")


if __name__ == "__main__":
    main()
