"""Every ``envlock resolve`` example of the README, with the PyTorch index blocked (a closed
port on 127.0.0.1) and a loopback PyPI: each gives a lock, or an index error (exit 4) whose
hint names the exact ways out."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from support.cli import run_cli
from support.index_server import IndexServer, make_wheel
from support.net import free_port
from support.torch_world import add_package, add_torch_release, torch_requires

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"


def readme_resolve_examples() -> list:
    out = []
    for line in (ROOT / "README.md").read_text().splitlines():
        m = re.search(r"(?:^|&& )envlock resolve (.*)$", line)
        if m:
            out.append(shlex.split(m.group(1).split("  #")[0]))
    return out


@pytest.fixture(scope="module")
def pypi(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("readme-world")
    with IndexServer() as srv:
        idx = srv.add_index("pypi")
        done: dict = {}
        add_torch_release(idx, tmp, "2.15.0", done=done)
        add_torch_release(idx, tmp, "2.4.1", done=done)
        # the Python 3.10 example: torch and triton wheels for cp310 too
        for text in torch_requires("2.4.1"):
            req = Requirement(text)
            if req.name == "triton":
                version = next(s.version for s in req.specifier)
                idx.add(make_wheel(tmp / "cp310", "triton", version,
                                   tag="cp310-cp310-manylinux_2_17_x86_64"))
        idx.add(make_wheel(tmp / "cp310", "torch", "2.4.1", requires=torch_requires("2.4.1"),
                           tag="cp310-cp310-manylinux1_x86_64"))
        add_package(idx, tmp, "numpy", "2.1.0")
        add_package(idx, tmp, "nltk", "3.9b1")  # the --prerelease example
        add_package(idx, tmp, "nvidia-cublas-cu12", "12.4.5.8")  # the H20 override
        yield srv


def test_every_readme_resolve_example_with_the_pytorch_index_blocked(
        pypi: IndexServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocked = f"http://127.0.0.1:{free_port()}/whl"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PIP_RETRIES", "0")
    monkeypatch.setenv("PIP_INDEX_URL", pypi.url("pypi"))
    monkeypatch.setenv("ENVLOCK_PYTORCH_INDEX_URL", blocked)
    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "requirements.in").write_text("numpy\n")
    shutil.copy(DATA / "snapshots" / "h100-match.json", tmp_path / "node.json")
    shutil.copy(DATA / "nodes" / "three-pools.json", tmp_path / "nodes.json")  # --from-node
    # the README's stated build host, which its --from-snapshot line reads
    assert run_cli("snapshot", "--gpu", "H20:8", "--driver", "580.65.06", "-o",
                   "h20-node.json").code == 0
    examples = readme_resolve_examples()
    assert len(examples) >= 8
    outcomes = []
    for args in examples:
        if "--python" not in args and "--from-snapshot" not in args and "--check" not in args:
            args = args + ["--python", "3.11"]
        r = run_cli("resolve", *args)
        outcomes.append((args, r.code))
        assert "Traceback" not in r.err, args
        if "--check" in args:
            assert r.code in (0, 1), (args, r.err)
            continue
        if r.code == 0:
            continue
        assert r.code == 4, (args, r.code, r.err)
        lines = r.err.strip().splitlines()
        assert len(lines) == 2 and lines[1].startswith("hint: "), r.err
        hint = lines[1]
        assert "ENVLOCK_PYTORCH_INDEX_URL" in hint and "--offline" in hint, hint
        assert re.search(r"--cuda \d+\.\d+ selects torch", hint), hint
    # most examples lock from PyPI despite the blocked PyTorch index
    assert sum(1 for _, code in outcomes if code == 0) >= len(examples) - 2, outcomes
