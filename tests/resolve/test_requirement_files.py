"""Requirement files as people write them (issue 30), against loopback PyPI and PyTorch
indexes: local version labels (``torch==2.5.1+cu121``) choose that build and its index;
``--index-url``/``--extra-index-url`` lines count as pip's do; ``-c`` lines and the
``-c/--constraint`` option narrow versions; editable and VCS lines are refused in one line
with the way out; ``--check`` is not fooled by a case-only rename (PEP 503)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.cli import run_cli
from support.index_server import IndexServer
from support.torch_world import add_package, populate

from envlock import _toml


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("reqfiles")
    with IndexServer() as srv:
        populate(srv, tmp)
        pypi = srv.indexes["pypi"]
        add_package(pypi, tmp, "accelerate", "0.9.0")
        add_package(pypi, tmp, "accelerate", "1.2.0")
        yield srv


def _resolve(world: IndexServer, tmp: Path, *args: str, index: bool = False):
    out = tmp / "l.lock"
    extra = ["--index-url", world.url("pypi")] if index else []
    r = run_cli("resolve", "--gpu", "H100 SXM", "--pytorch-index-url", f"{world.base}/whl",
                *extra, "-o", str(out), *args)
    return r, (_toml.loads(out.read_text()) if r.code == 0 and out.exists() else None)


def _pk(lock: dict) -> dict:
    return {p["name"]: p for p in lock["target"][0]["package"]}


def test_local_labels_and_index_lines_choose_the_build_and_its_index(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    (tmp_path / "constraints.txt").write_text("accelerate<1.0\n")
    req = tmp_path / "requirements.txt"
    req.write_text(f"--index-url {world.url('pypi')}\n"
                   f"--extra-index-url {world.url('cu121')}\n"
                   "torch==2.5.1+cu121\n"
                   "torchvision==0.20.1+cu121\n"
                   "-c constraints.txt\n"
                   "accelerate\n")
    r, lock = _resolve(world, tmp_path, "-r", str(req))
    assert r.code == 0, r.err
    t = lock["target"][0]
    assert t["torch"]["variant"] == "cu121" and t["torch"]["index"] == world.url("cu121")
    pk = _pk(lock)
    assert pk["torch"]["version"] == "2.5.1+cu121"
    assert pk["torchvision"]["version"] == "0.20.1+cu121"
    assert pk["accelerate"]["version"] == "0.9.0"  # the -c line held it
    # the file's --index-url counted (the command line gave none)
    assert pk["accelerate"]["index"] == world.url("pypi")


def test_constraint_option_and_a_constraint_nothing_fits(
        world: IndexServer, tmp_path: Path, cache: Path) -> None:
    c = tmp_path / "c.txt"
    c.write_text("accelerate<1.0\n")
    r, lock = _resolve(world, tmp_path, "--torch", "==2.5.1", "accelerate", "-c", str(c),
                       index=True)
    assert r.code == 0, r.err
    assert _pk(lock)["accelerate"]["version"] == "0.9.0"
    c.write_text("accelerate>5\n")
    r, _ = _resolve(world, tmp_path, "--torch", "==2.5.1", "accelerate", "--constraint",
                    str(c), "--dry-run", index=True)
    assert r.code == 6, r.err
    assert "accelerate is held to accelerate>5 by your constraints (-c)" in r.err


def test_labels_that_disagree_or_name_no_cuda_build(world: IndexServer, tmp_path: Path,
                                                    cache: Path) -> None:
    r, _ = _resolve(world, tmp_path, "torch==2.5.1+cu121", "torchaudio==2.5.1+cu118",
                    "--dry-run", index=True)
    assert r.code == 2 and "different builds of the torch family" in r.err, r.err
    assert r.err.count("\n") <= 2
    r, _ = _resolve(world, tmp_path, "torch==2.5.1+cu121", "--cuda", "12.4", "--dry-run",
                    index=True)
    assert r.code == 2 and "--cuda 12.4" in r.err and "drop one of them" in r.err
    # +cpu on a GPU target: the way out the error names (--cpu) works
    r = run_cli("resolve", "--gpu", "H100 SXM", "--offline", "--python", "3.11",
                "torch==2.1.2+cpu", "--dry-run")
    assert r.code == 2 and "use --cpu for a CPU-only lock" in r.err, r.err
    r = run_cli("resolve", "--cpu", "--offline", "--python", "3.11", "torch==2.1.2+cpu",
                "--dry-run")
    assert r.code == 0 and "torch 2.1.2+cpu (cpu" in r.out, r.err


@pytest.mark.parametrize("line, says", [
    ("-e git+https://example.invalid/org/pkg.git#egg=pkg", "pip install --no-deps -e"),
    ("-e ./localpkg", "pip install --no-deps -e ./localpkg"),
    ("pkg @ git+https://example.invalid/org/pkg.git", "pip install --no-deps"),
    ("git+https://example.invalid/org/pkg.git", "pip install --no-deps"),
])
def test_editable_and_vcs_lines_are_refused_with_the_way_out(
        world: IndexServer, tmp_path: Path, cache: Path, line: str, says: str) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text(f"accelerate\n{line}\n")
    r, _ = _resolve(world, tmp_path, "--torch", "==2.5.1", "-r", str(req), "--dry-run",
                    index=True)
    assert r.code == 2, r.err
    assert f"{req}:2:" in r.err and says in r.err and "remove the line" in r.err
    assert "Traceback" not in r.err and "index" not in r.err.split("cannot be locked")[0]
    # the way out: without the line, the rest locks
    req.write_text("accelerate\n")
    r, _ = _resolve(world, tmp_path, "--torch", "==2.5.1", "-r", str(req), "--dry-run",
                    index=True)
    assert r.code == 0, r.err


def test_check_ignores_a_case_only_rename(world: IndexServer, tmp_path: Path,
                                          cache: Path) -> None:
    req = tmp_path / "requirements.txt"
    req.write_text("accelerate\n")
    r, _ = _resolve(world, tmp_path, "--torch", "==2.5.1", "-r", str(req), "typing_extensions",
                    index=True)
    assert r.code == 0, r.err
    lock = str(tmp_path / "l.lock")
    req.write_text("Accelerate\n")
    for extra in ([], ["--gpu", "H100 SXM", "--pytorch-index-url", f"{world.base}/whl",
                       "--index-url", world.url("pypi"), "--torch", "==2.5.1", "-r",
                       str(req), "Typing.Extensions"]):
        c = run_cli("resolve", "--check", "-o", lock, *extra)
        assert c.code == 0, (extra, c.out, c.err)
    req.write_text("Accelerate<1\n")
    assert run_cli("resolve", "--check", "-o", lock).code == 1


def test_option_lines_split_as_pip_does(tmp_path: Path) -> None:
    from envlock.resolve.target import FileOptions, read_requirement_file

    (tmp_path / "c.txt").write_text("Accelerate<1\n")
    f = tmp_path / "r.txt"
    f.write_text("-ihttps://a.example/simple?token=x=y\n"
                 "--extra-index-url=https://b.example/simple\n"
                 "--extra-index-url https://b.example/simple\n"
                 "--constraint=c.txt\nnumpy\n")
    opts = FileOptions()
    lines, digests = read_requirement_file(str(f), options=opts)
    assert [t for _, t in lines] == ["numpy"]
    assert opts.index_url == "https://a.example/simple?token=x=y"
    assert opts.extra_index_urls == ["https://b.example/simple"]
    assert [t for _, t in opts.constraints] == ["Accelerate<1"]
    assert set(digests) == {str(f), str(tmp_path / "c.txt")}
    f.write_text("--no-binary :all:\n")
    with pytest.raises(Exception) as e:
        read_requirement_file(str(f))
    assert "not supported in requirements files" in str(e.value)
