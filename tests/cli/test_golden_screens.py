"""Golden outputs of the main screens: what a user sees, byte for byte.

Each screen's first line answers the question the command was asked ("h100-sxm lock
(runtime): 3 problems, 2 block training"), and a screen without ``--verbose`` fits in 40
lines. The goldens live in ``tests/cli/golden/``; they change only when asked:

    ENVLOCK_UPDATE_GOLDEN=1 python -m pytest -q tests/cli/test_golden_screens.py

and the diff is then reviewed like code.
"""

from __future__ import annotations

import json
import os
import shlex
from pathlib import Path
from typing import Dict, List, Tuple

import pytest

from support.cli import run_cli

HERE = Path(__file__).resolve().parent
GOLDEN = HERE / "golden"
DATA = HERE.parent / "data"
UPDATE = os.environ.get("ENVLOCK_UPDATE_GOLDEN") == "1"
MAX_LINES = 40

HANG_LOG = (
    "[rank3]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 3] Watchdog caught collective operation "
    "timeout: WorkNCCL(SeqNum=4512, OpType=ALLREDUCE, NumelIn=262144, NumelOut=262144, "
    "Timeout(ms)=600000) ran for 600017 milliseconds before timing out.\n"
    "[rank3]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 3] Some NCCL operations have failed or "
    "timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
    "might run on corrupted/incomplete data.\n"
)


def _scenarios(tmp: Path) -> Dict[str, Tuple[str, ...]]:
    """name -> argv (paths relative to tests/data, the working directory)."""
    # derived fixtures, written next to nothing shared: a fresh venv (nothing installed
    # but pip), an H20 machine whose GPU name the matrix does not know
    match = json.loads((DATA / "snapshots" / "h100-match.json").read_text())
    fresh = dict(match, packages={"pip": "24.0"}, libraries=[], torch=None)
    (tmp / "fresh-venv.json").write_text(json.dumps(fresh))
    h20 = (DATA / "snapshots" / "h20-cublas121.json").read_text()
    (tmp / "unknown-gpu-cublas121.json").write_text(
        h20.replace('"NVIDIA H20"', '"NVIDIA H2O Engineering Sample"'))
    (tmp / "hang.log").write_text(HANG_LOG)
    fleet = tmp / "fleet"
    fleet.mkdir()
    for i in range(3):  # every node's Fabric Manager down: the nodes agree, and are broken
        doc = dict(match, host=dict(match["host"], hostname=f"node{i}"),
                   driver=dict(match["driver"], fabric_manager="not-running"))
        (fleet / f"node{i}.json").write_text(json.dumps(doc))
    lock = "locks/h100-pypi.lock"
    snap = "snapshots/{}.json".format
    t = str(tmp)
    return {
        "verify-healthy": ("verify", "--lock", lock, "--snapshot", snap("h100-match")),
        "verify-package-drift": ("verify", "--lock", lock, "--snapshot",
                                 snap("h100-package-drift")),
        "verify-package-drift-verbose": ("verify", "--lock", lock, "--snapshot",
                                         snap("h100-package-drift"), "--verbose"),
        "verify-fresh-venv-build": ("verify", "--lock", lock, "--snapshot",
                                    f"{t}/fresh-venv.json", "--stage", "build"),
        "verify-system-cublas": ("verify", "--lock", lock, "--snapshot",
                                 snap("h100-system-cublas")),
        "verify-old-driver": ("verify", "--lock", lock, "--snapshot", snap("h100-old-driver")),
        "verify-no-driver": ("verify", "--lock", lock, "--snapshot", snap("no-driver")),
        "verify-gpu-core-lock": ("verify", "--lock", "locks/gpu-core.lock", "--snapshot",
                                 snap("h100-package-drift")),
        "verify-mixed-gpus": ("verify", "--lock", lock, "--snapshot", snap("mixed-h100-a100")),
        "doctor-healthy": ("doctor", "--snapshot", snap("h100-match")),
        "doctor-no-driver": ("doctor", "--snapshot", snap("build-container")),
        "doctor-h20-cublas121": ("doctor", "--snapshot", snap("h20-cublas121")),
        "doctor-unknown-gpu-cublas121": ("doctor", "--snapshot",
                                         f"{t}/unknown-gpu-cublas121.json"),
        "doctor-rtx5090": ("doctor", "--snapshot", snap("rtx5090-torch-without-sm120")),
        "doctor-mixed-gpus": ("doctor", "--snapshot", snap("mixed-h100-a100")),
        "doctor-hang-log-healthy": ("doctor", "--snapshot", snap("h100-match"),
                                    "--log", f"{t}/hang.log"),
        "fleet-fabric-manager-down": ("fleet", "--snapshots", f"{t}/fleet/*.json"),
        # the target Python named: the default is the running interpreter's
        "resolve-offline": ("resolve", "--gpu", "H100 SXM", "--python", "3.11", "--offline",
                            "--dry-run"),
        "resolve-no-kernels": ("resolve", "--gpu", "V100", "--cuda", "13.0", "--offline",
                               "--dry-run"),
        "snapshot-show-h100": ("snapshot", "--show", snap("h100-match")),
        "snapshot-show-no-driver": ("snapshot", "--show", snap("build-container")),
        "snapshot-show-mixed": ("snapshot", "--show", snap("mixed-h100-a100")),
        "snapshot-show-h20": ("snapshot", "--show", snap("h20-cublas121")),
    }




def _names() -> List[str]:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        return sorted(_scenarios(Path(d)))


@pytest.fixture
def in_data(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.chdir(DATA)
    monkeypatch.setenv("ENVLOCK_NO_CACHE", "1")  # resolve --offline: the matrix core only
    monkeypatch.delenv("NO_COLOR", raising=False)
    return tmp_path


@pytest.mark.parametrize("name", _names())
def test_golden_screen(name: str, in_data: Path) -> None:
    argv = _scenarios(in_data)[name]
    r = run_cli(*argv)
    shown = " ".join(shlex.quote(a) for a in argv).replace(str(in_data), "$TMP")
    body = (r.out + r.err).replace(str(in_data), "$TMP")
    text = f"$ envlock {shown}\n{body.rstrip()}\n[exit {r.code}]\n"
    lines = body.rstrip().splitlines()
    assert lines and lines[0] and not lines[0].startswith(" "), "the first line answers"
    assert "\x1b[" not in body  # no colour off a terminal
    if "--verbose" not in argv:
        assert len(lines) <= MAX_LINES, f"{name}: {len(lines)} lines"
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"no golden for {name}: run with ENVLOCK_UPDATE_GOLDEN=1 and review"
    assert text == path.read_text(encoding="utf-8")


def test_every_golden_has_a_scenario() -> None:
    files = {p.stem for p in GOLDEN.glob("*.txt")}
    assert files == set(_names())
