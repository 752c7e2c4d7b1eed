"""The conda export parses as YAML, its pip section is the lock, and pip accepts that
section as the requirements file conda hands it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from envlock.lock.io import load_lock
from exportkit import World, export_text, locked_versions, parse_pins, pip, split_hashes
from support.torch_world import RUNNING_PYTHON

LOCKS = Path(__file__).resolve().parents[1] / "data" / "locks"


def _pip_items(text: str, python: str = "3.11") -> list:
    doc = yaml.safe_load(text)
    deps = doc["dependencies"]
    assert deps[:2] == [f"python={python}", "pip"]
    (section,) = [d for d in deps if isinstance(d, dict)]
    assert list(section) == ["pip"]
    return list(section["pip"])


@pytest.mark.parametrize("lock,target", [("cu121-h100-h20.lock", "h20"),
                                         ("h100-pypi.lock", "h100-sxm"),
                                         ("gpu-core.lock", "h100-sxm")])
def test_conda_pip_section_matches_the_lock(lock: str, target: str) -> None:
    text = export_text(LOCKS / lock, "conda", target)
    doc = yaml.safe_load(text)
    assert doc["name"] == f"envlock-{target}"
    assert doc["channels"] == ["conda-forge", "nodefaults"]
    items = _pip_items(text)
    options = [i for i in items if i.startswith("--")]
    t = load_lock(LOCKS / lock).target(target)
    assert t is not None
    assert options[0] == f"--index-url {t.torch.index}"  # type: ignore[union-attr]
    pins = {}
    for item in items[len(options):]:
        req, hashes = split_hashes(item)
        pins.update(parse_pins([req]))
        name = req.split("==")[0]
        assert hashes == list(next(p for p in t.packages if p.name == name).hashes)
    assert pins == locked_versions(LOCKS / lock, target)
    header = " ".join(w for line in text.split("\n\n")[0].splitlines()
                      for w in line.lstrip("#").split())
    assert "Mapping packages to conda-forge builds is a later step of envlock." in header
    if t.closure != "full":
        assert "WARNING: target h100-sxm holds only the GPU core" in header


def test_pip_accepts_the_conda_pip_section_as_conda_runs_it(world: World,
                                                            tmp_path: Path) -> None:
    """conda writes the items to a requirements file and runs pip (with dependencies)."""
    # the world's lock is for the running interpreter, resolve's default target
    items = _pip_items(export_text(world.h100_lock, "conda", "h100-sxm"), RUNNING_PYTHON)
    req = tmp_path / "condaenv.requirements.txt"
    req.write_text("\n".join(items) + "\n")
    proc = pip("install", "--dry-run", "--target", str(tmp_path / "t"), "-r", str(req))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Would install" in proc.stdout
    from packaging.utils import canonicalize_name

    line = next(x for x in proc.stdout.splitlines() if x.startswith("Would install "))
    would = {canonicalize_name(n): v for n, v in
             (w.rsplit("-", 1) for w in line[len("Would install "):].split())}
    assert would == locked_versions(world.h100_lock, "h100-sxm")
