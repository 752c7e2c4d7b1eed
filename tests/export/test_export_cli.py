"""``envlock export`` on the command line: target choice, output, errors and exit codes,
and the properties every output shares (header, exact pins, index URLs as locked)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from envlock.errors import ExitCode
from envlock.export import FORMATS

MULTI = "cu121-h100-h20.lock"


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f != "dockerfile"])  # (a context
def test_every_output_opens_with_a_header_naming_lock_target_and_command(   # directory)
        run_export, locks_dir: Path, fmt: str) -> None:
    r = run_export("--format", fmt, "--lock", MULTI, "--target", "h20")
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("# ") and f"target h20 of {MULTI}" in lines[0]
    assert lines[2] == f"#   envlock export --format {fmt} --lock {MULTI} --target h20"
    assert lines[4].startswith("#   envlock resolve ")


def test_the_only_target_is_the_default(run_export, locks_dir: Path) -> None:
    r = run_export("--format", "constraints", "--lock", "h100-pypi.lock")
    assert r.code == 0, r.stderr
    assert "--target h100-sxm" in r.stdout.splitlines()[2]


def test_several_targets_need_target(run_export, locks_dir: Path) -> None:
    r = run_export("--format", "requirements", "--lock", MULTI)
    assert r.code == ExitCode.USAGE
    assert r.stdout == ""
    assert r.stderr == (f"envlock: error: {MULTI} has 2 targets (h100-sxm, h20); choose one "
                        f"with --target\n")


def test_unknown_target_suggests_close_names(run_export, locks_dir: Path) -> None:
    r = run_export("--format", "requirements", "--lock", MULTI, "--target", "h200")
    assert r.code == ExitCode.USAGE
    assert r.stderr == (f"envlock: error: target 'h200' is not in {MULTI} (its targets: "
                        f"h100-sxm, h20); did you mean 'h20' or 'h100-sxm'?\n")


def test_missing_lock_is_exit_2_with_a_hint(run_export, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    r = run_export("--format", "requirements")
    assert r.code == ExitCode.USAGE
    assert r.stderr.splitlines()[0] == "envlock: error: lock file envlock.lock does not exist"
    assert r.stderr.splitlines()[1].startswith("hint: create one with 'envlock resolve")


def test_unknown_format_is_exit_2(run_export, locks_dir: Path) -> None:
    r = run_export("--format", "poetry", "--lock", MULTI)
    assert r.code == ExitCode.USAGE
    assert "invalid choice: 'poetry'" in r.stderr


@pytest.mark.parametrize("flag", ["--base", "--base-image"])
def test_base_image_only_for_dockerfile(run_export, locks_dir: Path, flag: str) -> None:
    r = run_export("--format", "conda", "--lock", MULTI, "--target", "h20", flag, "python:3.11")
    assert r.code == ExitCode.USAGE
    assert r.stderr == "envlock: error: --base applies only to --format dockerfile\n"


@pytest.mark.parametrize("fmt", ["requirements", "pylock", "dockerfile"])
def test_gpu_core_lock_is_refused_where_hashes_are_needed(run_export, locks_dir: Path,
                                                          fmt: str, tmp_path: Path) -> None:
    out = ["-o", str(tmp_path / "ctx")] if fmt == "dockerfile" else []
    r = run_export("--format", fmt, "--lock", "gpu-core.lock", *out)
    assert r.code == ExitCode.USAGE
    assert r.stdout == ""
    assert not (tmp_path / "ctx").exists()  # nothing half-made
    err = r.stderr.splitlines()
    assert err[0] == (f"envlock: error: gpu-core.lock: target h100-sxm holds only the GPU "
                      f"core, without hashes (the lock was resolved with --offline and "
                      f"nothing was cached); the {fmt} format needs a sha256 hash for every "
                      f"package")
    assert err[1] == ("hint: resolve again online, without --offline: envlock resolve "
                      "--gpu H100 --torch ==2.5.1 -o gpu-core.lock")


@pytest.mark.parametrize("fmt", ["constraints", "conda", "uv"])
def test_gpu_core_lock_exports_with_a_warning_where_hashes_are_not_needed(
        run_export, locks_dir: Path, fmt: str) -> None:
    r = run_export("--format", fmt, "--lock", "gpu-core.lock")
    assert r.code == 0
    assert "# WARNING: target h100-sxm holds only the GPU core" in r.stdout
    assert r.stderr.startswith("envlock: warning: target h100-sxm holds only the GPU core")
    assert "torch==2.5.1" in r.stdout


def test_a_package_without_hashes_is_refused(run_export, tmp_path: Path,
                                             locks_dir: Path) -> None:
    text = (locks_dir / "h100-pypi.lock").read_text()
    start = text.index('name = "sympy"')
    files_at = text.index("files = [", start)
    end = text.index("]\n", files_at) + 2
    broken = tmp_path / "nohash.lock"
    broken.write_text(text[:files_at] + "files = []\n" + text[end:])
    r = run_export("--format", "requirements", "--lock", str(broken))
    assert r.code == ExitCode.USAGE
    assert r.stderr.splitlines()[0] == (
        f"envlock: error: {broken}: target h100-sxm has packages without sha256 hashes "
        f"(sympy); the requirements format needs a hash for every package")


def test_output_file_is_written_atomically(run_export, tmp_path: Path, locks_dir: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "requirements-h20.txt"
    out.write_text("old\n")
    r = run_export("--format", "requirements", "--lock", MULTI, "--target", "h20", "-o",
                   str(out))
    assert r.code == 0, r.stderr
    assert r.stdout == f"wrote {out} (requirements, target h20)\n"
    text = out.read_text()
    assert f"-o {out}" in text.splitlines()[2]
    assert f"pip install --no-deps --require-hashes -r {out}" in text
    assert [p.name for p in tmp_path.iterdir()] == ["requirements-h20.txt"]  # no temp left

    def boom(*a: object, **k: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    r = run_export("--format", "constraints", "--lock", MULTI, "--target", "h20", "-o",
                   str(out))
    assert r.code != 0 and "disk full" in r.stderr
    assert out.read_text() == text  # the old file is intact
    assert [p.name for p in tmp_path.iterdir()] == ["requirements-h20.txt"]


def test_dash_means_stdout(run_export, locks_dir: Path) -> None:
    a = run_export("--format", "uv", "--lock", MULTI, "--target", "h20", "-o", "-")
    b = run_export("--format", "uv", "--lock", MULTI, "--target", "h20")
    assert a.code == b.code == 0
    assert a.stdout == b.stdout and a.stdout.startswith("# ")


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f not in ("dockerfile", "kubernetes")])
def test_local_versions_and_mirror_urls_are_written_exactly(run_export, locks_dir: Path,
                                                            fmt: str) -> None:
    # (the dockerfile context installs the lock through the requirements export)
    r = run_export("--format", fmt, "--lock", MULTI, "--target", "h20")
    assert r.code == 0
    assert "torch==2.5.1+cu121" in r.stdout or 'version = "2.5.1+cu121"' in r.stdout
    assert "torchvision==0.20.1+cu121" in r.stdout or '"0.20.1+cu121"' in r.stdout
    if fmt != "constraints":
        assert "https://pypi-mirror.example.com/simple" in r.stdout
        assert "https://download.pytorch.org/whl/cu121" in r.stdout
    assert "pypi.org/simple" not in r.stdout.replace("pypi-mirror.example.com", "")


def test_requirements_route_the_pytorch_index_first(run_export, locks_dir: Path) -> None:
    r = run_export("--format", "requirements", "--lock", MULTI, "--target", "h20")
    body = [line for line in r.stdout.splitlines() if line.startswith("--")]
    assert body == ["--index-url https://download.pytorch.org/whl/cu121",
                    "--extra-index-url https://pypi-mirror.example.com/simple"]
    header = _prose(r.stdout)
    assert "this is safe only together with --require-hashes" in header
    assert "a package planted on another index under a locked name fails the hash check" \
        in header
    assert "--no-deps: the lock is already the full dependency closure" in header
    assert "refuse an advisory override such as a newer cuBLAS than torch's exact pin" \
        in header


def _prose(text: str) -> str:
    """The header's comment lines as one line of words (wrapping undone)."""
    words = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        words += line.lstrip("#").split()
    return " ".join(words)


def test_requirements_for_a_pypi_build_name_one_index(run_export, locks_dir: Path) -> None:
    r = run_export("--format", "requirements", "--lock", "h100-pypi.lock")
    body = [line for line in r.stdout.splitlines() if line.startswith("--")]
    assert body == ["--index-url https://pypi.org/simple"]
