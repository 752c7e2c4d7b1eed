"""The loader reports every problem at once, with file and dotted path."""

from __future__ import annotations

from pathlib import Path

import pytest

from envlock.errors import MatrixError
from envlock.matrix.load import load_matrix
from envlock.cli import main
from support.edit import edit_once


def test_all_problems_are_reported_together_with_file_and_path(copy: Path) -> None:
    edit_once(copy / "gpus.toml", 'compute_capability = "9.0"', 'compute_capability = "9.x"')
    edit_once(copy / "torch.toml", 'tag = "cu118"', 'tag = "cu999"')
    edit_once(copy / "cuda.toml", 'driver_linux = "570.26"', 'driver_linux = 570')
    with pytest.raises(MatrixError) as exc:
        load_matrix(copy)
    problems = exc.value.problems
    assert any(p.startswith("gpus.toml: gpu[") and "compute_capability" in p and "'9.x'" in p
               for p in problems)
    assert any(p.startswith("torch.toml: variant[") and ".tag" in p for p in problems)
    assert any(p.startswith("cuda.toml: release[") and "driver_linux: expected a string"
               in p for p in problems)


def test_references_between_files_are_checked(copy: Path) -> None:
    edit_once(copy / "gpus.toml", 'arch = "hopper"', 'arch = "hoper"')
    edit_once(copy / "advisories.toml", 'in = ["h20"', 'in = ["h2o"')
    with pytest.raises(MatrixError) as exc:
        load_matrix(copy)
    text = "\n".join(exc.value.problems)
    assert "unknown arch 'hoper'" in text
    assert "unknown gpu model id 'h2o'" in text


def test_arch_list_must_be_compilable_by_its_cuda(copy: Path) -> None:
    # sm_37 cannot be compiled by CUDA 12 (dropped in 12.0)
    text = (copy / "torch.toml").read_text()
    i = text.index('tag = "cu121"')
    j = text.index("sass = [", i)
    (copy / "torch.toml").write_text(text[:j] + 'sass = ["sm_37", ' + text[j + len("sass = ["):])
    with pytest.raises(MatrixError) as exc:
        load_matrix(copy)
    assert any("sm_37 cannot be compiled by CUDA 12.1" in p for p in exc.value.problems)


def test_typo_keys_get_a_suggestion(copy: Path) -> None:
    edit_once(copy / "drivers.toml", "[[branch]]\n", "[[branch]]\ncudda = \"1\"\n")
    with pytest.raises(MatrixError) as exc:
        load_matrix(copy)
    assert any("cudda: unknown key (did you mean 'cuda'?)" in p for p in exc.value.problems)


def test_validate_command_lists_problems_and_exits_1(copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edit_once(copy / "drivers.toml", 'id = "R535"', 'id = "535"')
    code = main(["matrix", "validate", "--dir", str(copy)])
    out = capsys.readouterr().out
    assert code == 1
    assert "drivers.toml: branch[" in out and "problem" in out


def test_validate_command_on_shipped_data(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "validate"]) == 0
    assert "is valid" in capsys.readouterr().out


def test_broken_toml_is_one_problem_not_a_traceback(copy: Path) -> None:
    (copy / "meta.toml").write_text("schema = [")
    with pytest.raises(MatrixError) as exc:
        load_matrix(copy)
    assert exc.value.problems[0].startswith("meta.toml: not valid TOML")
