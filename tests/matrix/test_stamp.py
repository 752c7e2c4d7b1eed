"""The matrix stamp (meta.toml's version + a digest of every data file) changes whenever
any matrix file changes, including a table added later, and locks record it."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from envlock.matrix.files import data_files
from envlock.matrix.load import load_matrix
from envlock.matrix.stamp import content_digest, stamp

ROOT = Path(__file__).resolve().parents[2]
MATRIX = ROOT / "compat-matrix"


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    out = tmp_path / "compat-matrix"
    shutil.copytree(MATRIX, out)
    return out


def test_the_loaded_version_is_the_meta_version_plus_the_digest(copy: Path) -> None:
    m = load_matrix(copy)
    assert m.version == stamp("2026.11.27", data_files(copy))
    assert m.version.startswith("2026.11.27+") and len(m.version.split("+")[1]) == 12
    assert load_matrix().version == m.version  # the shipped files are the same bytes


def test_every_matrix_file_moves_the_stamp(copy: Path) -> None:
    files = sorted(p.name for p in copy.glob("*.toml"))
    assert {"gpus.toml", "torch.toml", "companions.toml", "cuda.toml", "meta.toml"} <= set(files)
    seen = {stamp("v", data_files(copy))}
    for name in files:
        path = copy / name
        before = path.read_bytes()
        path.write_bytes(before + b"\n# one more comment line\n")
        seen.add(stamp("v", data_files(copy)))
        path.write_bytes(before)
    assert len(seen) == len(files) + 1  # each edit gave a stamp of its own
    assert stamp("v", data_files(copy)) in seen


def test_a_new_table_in_the_directory_moves_the_stamp(copy: Path) -> None:
    before = load_matrix(copy).version
    (copy / "symptoms.toml").write_text("# a table another part of envlock reads\n")
    assert load_matrix(copy).version != before


def test_the_digest_ignores_the_order_files_come_in() -> None:
    a = {"a.toml": b"1", "b.toml": b"2"}
    assert content_digest(a) == content_digest(dict(reversed(list(a.items()))))
    assert content_digest(a) != content_digest({"a.toml": b"2", "b.toml": b"1"})
