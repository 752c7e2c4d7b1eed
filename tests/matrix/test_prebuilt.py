"""The prebuilt matrix (issue 30): generated into the wheel when it is built, so the first
command after an install parses no TOML; validated here against the TOML it came from."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from envlock.matrix.cache import (PREBUILT, digest, encode_matrix,
                                  encode_prebuilt, load_prebuilt)
from envlock.matrix.files import data_files
from envlock.matrix.load import build_matrix, read_raw
from envlock.matrix.rows import Problems

ROOT = Path(__file__).resolve().parents[2]


def test_prebuilt_matrix_is_the_toml_matrix() -> None:
    files = data_files(ROOT / "compat-matrix")
    from envlock.matrix.stamp import content_digest

    problems = Problems()
    from_toml = build_matrix(read_raw(files, problems), problems, content_digest(files))
    assert not problems
    blob = encode_prebuilt(files)
    loaded = load_prebuilt(digest(files), blob)
    assert loaded is not None
    assert encode_matrix(loaded) == encode_matrix(from_toml)
    assert loaded.version == from_toml.version and loaded.advisories == from_toml.advisories
    # the stamp locks record: the same as a checkout's (the wheel once dropped the digest)
    from envlock.matrix import get_matrix

    assert "+" in loaded.version and loaded.version == get_matrix().version


def test_a_prebuilt_matrix_of_other_data_is_never_used() -> None:
    files = data_files(ROOT / "compat-matrix")
    blob = encode_prebuilt(files)
    edited = dict(files, **{"gpus.toml": files["gpus.toml"] + b"\n# edited\n"})
    assert load_prebuilt(digest(edited), blob) is None
    assert load_prebuilt(digest(files), blob[:-10]) is None  # damaged
    assert load_prebuilt(digest(files), b"garbage") is None


def test_the_wheel_ships_it_and_an_install_parses_no_toml(tmp_path: Path) -> None:
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not installed")
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                        "--no-build-isolation", "-q", "-w", str(tmp_path / "w"), str(ROOT)],
                       capture_output=True, text=True)
    if p.returncode != 0:
        pytest.skip(f"cannot build a wheel here: {p.stderr.strip()[-200:]}")
    (whl,) = (tmp_path / "w").glob("envlock_gpu-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(whl) as zf:
        assert f"envlock/matrix/{PREBUILT}" in zf.namelist()
        zf.extractall(site)
    code = ("import sys; from envlock.matrix import get_matrix; m = get_matrix(); "
            "print(len(m.gpus), any(n in sys.modules for n in "
            "('tomllib', 'tomli', 'envlock._toml', 'envlock.matrix.load')), m.version)")
    env = dict(os.environ, PYTHONPATH=str(site), ENVLOCK_NO_CACHE="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=env, cwd=str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    count, parsed, version = r.stdout.split()
    assert int(count) > 50 and parsed == "False"
    from envlock.matrix import get_matrix

    assert version == get_matrix().version and "+" in version  # the stamp locks record
