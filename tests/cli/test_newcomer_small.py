"""The smaller things a newcomer's audit tripped over (issue 33), each as it is now."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from envlock.cli.resolve_cmd import url_label
from support.cli import run_cli, run_proc

ROOT = Path(__file__).resolve().parents[2]


def test_progress_names_packages_not_url_hash_folders() -> None:
    base = "https://files.pythonhosted.org/packages/3f/9a/0c1d2e3f4a5b6c7d8e9f"
    assert url_label(f"{base}/torch-2.5.1-cp311-cp311-manylinux1_x86_64.whl.metadata") == \
        "torch 2.5.1 (metadata)"
    assert url_label(f"{base}/filelock-3.13.1.tar.gz#sha256=00") == "filelock 3.13.1"
    assert url_label("https://pypi.org/simple/nvidia-cublas-cu12/") == "nvidia-cublas-cu12"


def test_resolve_check_takes_lock_as_verify_and_export_do(tmp_path: Path) -> None:
    lock = tmp_path / "h100.lock"
    assert run_cli("resolve", "--gpu", "H100", "--offline", "-o", str(lock)).code == 0
    r = run_cli("resolve", "--check", "--lock", str(lock))
    assert r.code == 0, r.err
    r = run_cli("resolve", "--gpu", "H100", "--offline", "--lock", str(lock))
    assert r.code == 2 and "-o FILE" in r.err
    r = run_cli("resolve", "--check", "--lock", str(lock), "-o", str(tmp_path / "other.lock"))
    assert r.code == 2 and "two locks" in r.err


def test_help_lists_every_exit_code() -> None:
    out = " ".join(run_proc("--help").out.split())
    for code in ("0 ok", "1 drift", "2 usage", "3 no PyTorch", "4 package index",
                 "5 invalid matrix", "6 requirements conflict", "7 sdist build", "70 internal",
                 "130 interrupted"):
        assert code in out, code


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash")
def test_bash_completes_gpu_names_advisory_ids_and_formats(tmp_path: Path) -> None:
    script = tmp_path / "envlock.bash"
    script.write_text(run_cli("completion", "bash").out)

    def complete(*words: str) -> list:
        arr = " ".join(f"'{w}'" for w in ("envlock",) + words)
        p = subprocess.run(["bash", "-c", f"source {script}; COMP_WORDS=({arr}); "
                            f"COMP_CWORD={len(words)}; _envlock; echo \"${{COMPREPLY[@]}}\""],
                           capture_output=True, text=True, check=True)
        return p.stdout.split()

    assert complete("resolve", "--gpu", "h10") == ["h100-nvl", "h100-pcie", "h100-sxm"]
    assert "h20" in complete("snapshot", "--gpu", "h2")
    assert complete("explain", "h20-cub") == ["h20-cublas121-sigfpe"]
    assert complete("export", "--format", "py") == ["pylock"]


def test_a_driver_branch_is_named_as_a_branch_not_a_release() -> None:
    r = run_cli("resolve", "--gpu", "RTX 4090", "--driver", "520", "--offline", "--dry-run")
    assert r.code == 0
    assert "520.0" not in r.out + r.err and "driver >= R520" in r.out
    r = run_cli("resolve", "--gpu", "H100", "--driver", "460", "--offline", "--dry-run")
    assert r.code == 3 and "460.0" not in r.err and "driver R460" in r.err


def test_the_minimum_driver_is_said_once() -> None:
    out = run_cli("matrix", "gpu", "rtx 4090").out
    assert "  minimum driver       R520\n" in out
    assert "  minimum driver       525.47.07 (R525)\n" in run_cli("matrix", "gpu", "H100").out


def test_one_package_is_not_plural(tmp_path: Path) -> None:
    box = tmp_path / "box.json"
    assert run_cli("snapshot", "--gpu", "RTX 3090", "--gpu", "RTX 4090", "--driver",
                   "550.54.15", "-o", str(box)).code == 0
    r = run_cli("resolve", "--from-snapshot", str(box), "--python", "3.11", "--offline",
                "--dry-run")
    assert "; 1 package (GPU core only" in r.out, r.out


def test_another_vendors_gpu_gets_no_nvidia_look_alike() -> None:
    for name in ("MI300X", "AMD Instinct MI300X", "Radeon RX 7900 XTX", "Gaudi 2"):
        r = run_cli("matrix", "gpu", name)
        assert r.code == 2
        assert "not an NVIDIA GPU" in r.err and "did you mean" not in r.err, r.err
    assert "did you mean 'NVIDIA H20'" in run_cli("matrix", "gpu", "H2O").err


def test_the_repositorys_gitignore_keeps_a_readme_run_out_of_git() -> None:
    lines = (ROOT / ".gitignore").read_text().splitlines()
    assert "/envlock.lock" in lines
