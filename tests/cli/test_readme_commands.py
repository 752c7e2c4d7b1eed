"""Every command line in README.md runs as written.

The command lines are extracted from the README's code blocks (lines starting with a
command; ``&&`` chains are split into their commands) and run one after another with
bash, in README order, in a scratch directory, against a package index on 127.0.0.1 that
has the torch builds the commands ask for (``PIP_INDEX_URL`` and
``ENVLOCK_PYTORCH_INDEX_URL`` point at it, as a user's configuration would). A command
passes when bash can run it and it exits with a code the README documents for it (0, or
1 where the command reports drift). Commands that need a GPU, Docker, a launcher, root or
the network are skipped by the explicit list below, each with its reason; the list must
name only commands the README still has.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Tuple


from support.index_server import IndexServer
from support.torch_world import add_package, add_torch_release

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
_COMMANDS = ("envlock ", "pip ", "python ", "torchrun ", "docker ", "echo ", "mkdir ")

#: command -> why it is not run here.
SKIP: Dict[str, str] = {
    "pip install .": "installs into the interpreter running the tests; "
                     "tests/test_packaging.py builds and inspects the wheel instead",
    'pip install -e ".[test]" "torch==2.13.0"': "installs into the interpreter running the "
                                                "tests; it is the CI's setup step",
    "python -m pytest -q": "this is the test suite itself",
    "envlock doctor --smoke": "spawns GEMM/all-reduce child processes with 120 s timeouts; "
                              "tests/checks/test_smoke.py runs them for real",
    "torchrun --nnodes 4 --nproc-per-node 8 ... -m envlock fleet --lock envlock.lock":
        "needs 4 nodes under a launcher ('...' stands for the rendezvous options); "
        "tests/fleet/test_fleet_live.py runs fleet under real torchrun",
    "python -m venv /opt/envlock": "writes /opt and /usr/local/bin (root); "
                                   "the next README line checks a venv the same way",
    "/opt/envlock/bin/pip install .": "part of the /opt/envlock install (root)",
    "ln -s /opt/envlock/bin/envlock /usr/local/bin/envlock": "part of the /opt/envlock "
                                                             "install (root)",
    "docker build -t envlock-h20 image/": "needs a Docker daemon; "
                                          "tests/export/test_dockerfile_context.py replays "
                                          "the Dockerfile's steps with real pip",
    "docker run --gpus all --shm-size=16g envlock-h20 python train.py": "needs Docker and "
                                                                        "GPUs",
    "python scripts/bench.py": "benchmarks: minutes, and compares with peers online",
    "python scripts/harvest_pypi.py --check": "reads every torch release from PyPI",
    "python scripts/harvest_nvidia_gpus.py --check": "downloads driver packages from "
                                                    "Debian's mirror with apt; "
                                                    "tests/crosscheck/test_harvest_nvidia_gpus.py "
                                                    "runs it on .deb files built there",
}

#: commands whose documented outcome includes exit code 1 (drift or problems found, a stale
#: lock): in a scratch environment that is not the lock's, that is the right answer.
MAY_REPORT = ("envlock verify", "envlock doctor", "envlock fleet", "envlock resolve --check")


def readme_commands(text: str) -> List[str]:
    """Command lines of the README's code blocks, comments stripped, ``&&`` split."""
    out: List[str] = []
    for block in re.findall(r"```\n(.*?)```", text, re.S):
        for line in block.splitlines():
            line = line.strip()
            if not line.startswith(_COMMANDS):
                continue
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            out += [part.strip() for part in line.split(" && ")]
    return out


def test_readme_commands_are_found() -> None:
    cmds = readme_commands((ROOT / "README.md").read_text("utf-8"))
    assert "envlock resolve --gpu H20" in cmds
    assert not [c for c in cmds if " | " in c], "a pasted pipe runs the words after it"
    stale = [c for c in SKIP if c not in cmds]
    assert stale == [], "SKIP names commands the README no longer has"


def _world(tmp: Path) -> Iterator[IndexServer]:
    """PyPI with the newest torch (2.15.0) and envlock's own dependencies; the PyTorch
    index's cu124 build of 2.4.1 for Python 3.10 (what `--torch '>=2.4,<2.5' --driver
    535.104.05 --python 3.10` picks)."""
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        done: dict = {}
        add_torch_release(pypi, tmp, "2.15.0", done=done)
        cu124 = srv.add_index("cu124", prefix="whl/cu124")
        # the PyTorch index build, and PyPI's (cu121) one, each with its triton, for 3.10
        add_torch_release(cu124, tmp, "2.4.1", local="cu124", deps_index=pypi,
                          done=dict(done), python="3.10")
        add_torch_release(pypi, tmp, "2.4.1", done=done, python="3.10")
        # envlock's own dependencies, at the versions installed here (what the Dockerfile
        # export pins), and the cuBLAS that H20's advisory asks for
        from importlib.metadata import version as installed

        for name in ("packaging", "resolvelib", "urllib3", "certifi", "tomlkit",
                     "nvidia-ml-py", "tomli"):
            try:
                add_package(pypi, tmp, name, installed(name))
            except Exception:  # noqa: BLE001 - not installed here: not pinned either
                continue
        # envlock's own tomli, for a Python 3.10 image (the README's lock is for 3.10)
        try:
            installed("tomli")
        except Exception:  # noqa: BLE001 - not installed on 3.11+: publish PyPI's release
            add_package(pypi, tmp, "tomli", "2.2.1")
        add_package(pypi, tmp, "nvidia-cublas-cu12", "12.4.5.8")
        # the README's pre-release example: a stable release and the pinned pre-release
        add_package(pypi, tmp, "nltk", "3.8.1")
        add_package(pypi, tmp, "nltk", "3.9b1")
        yield srv


def _scratch(tmp: Path) -> Dict[str, str]:
    """A fresh directory holding only what the README says is the user's own: the job's
    logs that ``doctor`` reads and the project's ``.venv``; every other file a command
    reads is made by an earlier README line. And an ``envlock`` on PATH."""
    work = tmp / "work"
    work.mkdir()
    shutil.copy(DATA / "nodes" / "three-pools.json", work / "nodes.json")  # kubectl output
    (work / "train.log").write_text(
        "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling "
        "`cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, "
        "CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, "
        "CUBLAS_GEMM_DEFAULT_TENSOR_OP)`\n")
    (work / "rank0.err").write_text("[rank0]: Signal 11 (SIGSEGV) received by PID 100\n")
    (work / "rank1.err").write_text("[rank1]: Signal 11 (SIGSEGV) received by PID 101\n")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(work / ".venv")],
                   check=True, timeout=120)
    bindir = tmp / "bin"
    bindir.mkdir()
    shim = bindir / "envlock"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m envlock "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "UV_"))}
    env.update(PATH=f"{bindir}{os.pathsep}{env.get('PATH', '')}",
               PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in
                                                         env.get("PYTHONPATH", "").split(
                                                             os.pathsep) if p]),
               PIP_CONFIG_FILE=os.devnull, NO_COLOR="1")
    # a home of its own (completion scripts are written there); fish makes its
    # completions folder when it is installed
    home = tmp / "home"
    (home / ".config" / "fish" / "completions").mkdir(parents=True)
    env.update(HOME=str(home), XDG_CACHE_HOME=str(home / ".cache"))
    env["CWD"] = str(work)
    return env


def test_every_readme_command_runs_as_written(tmp_path: Path) -> None:
    cmds = readme_commands((ROOT / "README.md").read_text("utf-8"))
    env = _scratch(tmp_path)
    work = env.pop("CWD")
    failures: List[Tuple[str, int, str]] = []
    ran = 0
    for srv in _world(tmp_path / "wheels"):
        env.update(PIP_INDEX_URL=srv.url("pypi"), ENVLOCK_PYTORCH_INDEX_URL=f"{srv.base}/whl")
        for cmd in cmds:
            if cmd in SKIP:
                continue
            # the checkout's own scripts run where the README's Development section runs
            # them, in the checkout; everything else in the scratch directory
            where = str(ROOT) if cmd.startswith("python scripts/") else work
            p = subprocess.run(["bash", "-c", cmd], cwd=where, env=env, capture_output=True,
                               text=True, timeout=300)
            ran += 1
            allowed = {0, 1} if cmd.startswith(MAY_REPORT) else {0}
            if p.returncode not in allowed:
                failures.append((cmd, p.returncode, (p.stderr or p.stdout).strip()[-300:]))
    assert failures == [], "\n".join(map(str, failures))
    assert ran >= 20
    assert (Path(work) / "image" / "Dockerfile").is_file()
    assert (Path(work) / "requirements.txt").is_file()
    assert "complete -o default -F _envlock envlock" in \
        (Path(env["HOME"]) / ".envlock.bash").read_text()
