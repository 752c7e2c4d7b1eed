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
                  "cuda-toolkit-drivers", "cuda-gpus-page", "driver-readme-gpus",
                  "driver-package-gpus", "driver-supported-gpus-post-580"):
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
    # and by PCI id: every device id of the README finds a row of the name's capability
    by_id = [c for c in res.checks if "/pci/" in c.fact]
    assert len(by_id) >= 300
    assert [c.fact for c in by_id if not c.agree] == ["NVIDIA H100/pci/2339"]


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


def test_every_gpu_of_the_packaged_list_resolves_by_name_and_pci_id() -> None:
    from envlock.matrix.load import load_matrix

    results, allow = crosscheck.run(load_matrix(), TABLES)
    res = next(r for r in results if r.id == "driver-package-gpus")
    bad = [c.fact for c in res.checks if not c.agree]
    assert bad == ["NVIDIA H100/pci/2339"]  # explained in the allowlist
    present = [c for c in res.checks if c.fact.endswith("/present")]
    assert len(present) >= 350 and all(c.agree for c in present)
    for kind in ("/cc", "/pci/", "/min_branch"):
        assert sum(1 for c in res.checks if kind in c.fact) >= 300, kind
    # a last branch where one is known: every Kepler, Maxwell, Pascal and Volta GPU
    assert sum(1 for c in res.checks if c.fact.endswith("/last_branch")) >= 170
    assert "Quadro P4000/last_branch" in {c.fact for c in res.checks}


def test_a_planted_gpu_disagreement_fails(tables: Path, capsys: pytest.CaptureFixture) -> None:
    edit_once(tables / "driver-package-gpus.toml",
              'name = "Quadro P4000"\npci_ids = ["1BB1", "1BB7"]\nchip = "GP104"\n'
              'compute_capability = "6.1"',
              'name = "Quadro P4000"\npci_ids = ["1BB1", "1BB7", "1BBF"]\nchip = "GP104"\n'
              'compute_capability = "6.0"')
    assert crosscheck.main(["--tables", str(tables)]) == 1
    out = capsys.readouterr().out
    assert "UNEXPLAINED Quadro P4000/cc: table 6.0 (GP104), matrix 6.1 (quadro-p4000)" in out
    assert "UNEXPLAINED Quadro P4000/pci/1BBF: PCI 1BBF resolves to nothing" in out
