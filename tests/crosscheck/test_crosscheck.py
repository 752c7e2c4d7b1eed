"""``scripts/crosscheck.py`` on the saved public tables: offline, and it must fail on any
disagreement that the allowlist does not explain."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

from support.edit import edit_once

ROOT = Path(__file__).resolve().parents[2]
TABLES = ROOT / "compat-matrix" / "crosscheck"


def _script():
    spec = importlib.util.spec_from_file_location("crosscheck", ROOT / "scripts" / "crosscheck.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["crosscheck"] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


crosscheck = _script()


@pytest.fixture
def tables(tmp_path: Path) -> Path:
    copy = tmp_path / "tables"
    shutil.copytree(TABLES, copy)
    return copy


def test_saved_tables_have_no_unexplained_disagreement(capsys: pytest.CaptureFixture) -> None:
    code = crosscheck.main([])
    out = capsys.readouterr().out
    assert code == 0, out
    for table in ("uv-torch-drivers", "pytorch-release-md", "torchvision-readme",
                  "cuda-toolkit-drivers", "cuda-gpus-page", "driver-readme-gpus"):
        assert f"{table}: " in out and " compared, " in out
    assert "UNEXPLAINED" not in out and "0 problem(s)" in out


def test_every_gpu_of_the_driver_readme_resolves_but_the_explained_one() -> None:
    from envlock.matrix.load import load_matrix

    results, allow = crosscheck.run(load_matrix(), TABLES)
    res = next(r for r in results if r.id == "driver-readme-gpus")
    missing = [c.fact for c in res.checks if c.fact.endswith("/present") and not c.agree]
    assert missing == ["NVIDIA DRIVE P2021/present"]
    assert crosscheck.explained(allow, res.id, missing[0]) is not None
    assert sum(1 for c in res.checks if c.fact.endswith("/present")) >= 200


def test_a_planted_disagreement_fails(tables: Path, capsys: pytest.CaptureFixture) -> None:
    edit_once(tables / "uv-torch-drivers.toml", 'tag = "cu130"\ncuda = "13.0"\nlinux = "580"',
          'tag = "cu130"\ncuda = "13.0"\nlinux = "575"')
    assert crosscheck.main(["--tables", str(tables)]) == 1
    out = capsys.readouterr().out
    assert "UNEXPLAINED cu130.linux: table 575, matrix 580" in out


def test_a_stale_allowlist_entry_fails(tables: Path, capsys: pytest.CaptureFixture) -> None:
    with (tables / "allowlist.toml").open("a") as fh:
        fh.write('\n[[allow]]\ntable = "torchvision-readme"\nfact = "2.5/torchvision"\n'
                 'reason = "no longer true"\n')
    assert crosscheck.main(["--tables", str(tables)]) == 1
    assert "stale allowlist entry torchvision-readme 2.5/torchvision" in capsys.readouterr().out


def test_a_table_without_its_source_is_an_input_error(tables: Path,
                                                      capsys: pytest.CaptureFixture) -> None:
    edit_once(tables / "torchvision-readme.toml",
          'commit = "56f3a7a915eb4b0a56b68bf6d633091aabb239f2"\n', "")
    assert crosscheck.main(["--tables", str(tables)]) == 2
    assert "torchvision-readme.toml: [table] needs a commit or a date" in capsys.readouterr().err
