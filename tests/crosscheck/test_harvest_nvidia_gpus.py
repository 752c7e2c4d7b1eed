"""``scripts/harvest_nvidia_gpus.py`` on small real .deb packages built here with dpkg-deb:
NVIDIA's list in two branches plus pci.ids in, GPU rows and the cross-check table out."""

from __future__ import annotations

import gzip
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from envlock import _toml

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="needs dpkg-deb")


def _script():
    spec = importlib.util.spec_from_file_location("harvest_nvidia_gpus",
                                                  ROOT / "scripts" / "harvest_nvidia_gpus.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["harvest_nvidia_gpus"] = mod
    spec.loader.exec_module(mod)
    return mod


harvest = _script()

README_418 = """Appendix A. Supported NVIDIA GPU Products
Appendix B. X Config Options

Appendix A. Supported NVIDIA GPU Products

A1. NVIDIA GEFORCE GPUS

    NVIDIA GPU product                    Device PCI ID*     VDPAU features
    ----------------------------------    ---------------    ---------------
    Quadro P4000                          1BB1               H
    Quadro P4000 with Max-Q Design        1BB7 1462 11E9     H

Below are the legacy GPUs that are no longer supported in the unified driver.
    Quadro Q9999                          0001               A

Appendix B. X Config Options
"""

CHANGELOG = ("nvidia (1) unstable; urgency=medium\n\n  * test\n\n"
             " -- Someone <someone@example.org>  Tue, 21 Oct 2026 18:13:00 +0000\n")


def _deb(out: Path, package: str, version: str, files: dict) -> None:
    root = out / f"{package}-{version}"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        f"Package: {package}\nVersion: {version}\nArchitecture: all\n"
        "Maintainer: test <t@example.org>\nDescription: test\n")
    for rel, data in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(root),
                    str(out / f"{package}_{version}_all.deb")], check=True,
                   capture_output=True)
    shutil.rmtree(root)


@pytest.fixture
def debs(tmp_path: Path) -> Path:
    out = tmp_path / "debs"
    out.mkdir()
    chips = {"chips": [
        {"devid": "0x1BB1", "name": "Quadro P4000", "features": []},
        {"devid": "0x1BB7", "name": "Quadro P4000", "features": []},
        {"devid": "0x1DBA", "name": "Quadro GV100", "features": []},
        {"devid": "0x1023", "name": "Tesla K40m", "legacybranch": "470.xx", "features": []},
        {"devid": "0x1180", "name": "GeForce GTX 680", "legacybranch": "470.xx",
         "features": []},
        {"devid": "0x1C20", "name": "NVIDIA GeForce GTX 1060", "features": []},
    ]}
    doc = "usr/share/doc/nvidia-driver/"
    _deb(out, "nvidia-driver", "555.58.02-4", {
        doc + "supported-gpus.json.gz": gzip.compress(json.dumps(chips).encode()),
        doc + "changelog.Debian.gz": gzip.compress(CHANGELOG.encode())})
    _deb(out, "nvidia-tesla-418-driver", "418.226.00-22", {
        "usr/share/doc/nvidia-tesla-418-driver/README.txt.gz":
            gzip.compress(README_418.encode())})
    pci = ("# Version: 2026.10.24\n10de  NVIDIA Corporation\n"
           "\t1023  GK110BGL [Tesla K40m]\n\t1180  GK104 [GeForce GTX 680]\n"
           "\t1bb1  GP104GL [Quadro P4000]\n\t1bb7  GP104GLM [Quadro P4000 Mobile]\n"
           "\t1c20  GP106BM [GeForce GTX 1060 Mobile]\n"
           "\t1dba  GV100GL [Quadro GV100]\n\t\t10de 12eb  TITAN V CEO Edition\n"
           "10df  Someone Else\n\t1dba  XX999 [not NVIDIA]\n")
    _deb(out, "pci.ids", "0.0~2026.10.24-1", {"usr/share/misc/pci.ids": pci.encode()})
    return out


@pytest.fixture
def matrix(tmp_path: Path) -> Path:
    copy = tmp_path / "compat-matrix"
    shutil.copytree(ROOT / "compat-matrix", copy)
    text = (copy / "gpus.toml").read_text()
    (copy / "gpus.toml").write_text(harvest.curated_part(text))  # no generated rows yet
    return copy


def test_rows_and_table_come_from_the_packages(debs: Path, matrix: Path) -> None:
    assert harvest.main(["--debs", str(debs), "--matrix", str(matrix)]) == 0
    table = _toml.loads((matrix / "crosscheck" / "driver-package-gpus.toml").read_text())
    assert table["table"]["package"] == "nvidia-driver 555.58.02-4"
    assert table["table"]["date"] == "2026-10-21"
    facts = {f["name"]: f for f in table["fact"]}
    # Kepler 3.0 (GTX 680) is out of scope; Kepler 3.5 (K40m) is in, with its legacy branch
    assert "GeForce GTX 680" not in facts
    assert facts["Tesla K40m"]["legacy_branch"] == "470.xx"
    p4000 = facts["Quadro P4000"]
    assert p4000["pci_ids"] == ["1BB1", "1BB7"]
    assert (p4000["chip"], p4000["compute_capability"]) == ("GP104", "6.1")
    # 1BB1 is in R418's README: the oldest branch listing the GPU
    assert p4000["first_branch"] == "R418"
    assert p4000["first_package"] == "nvidia-tesla-418-driver 418.226.00-22"
    assert facts["Quadro GV100"]["first_branch"] == "R555"
    assert facts["NVIDIA GeForce GTX 1060"]["chip"] == "GP106B"

    gpus = _toml.loads((matrix / "gpus.toml").read_text())
    rows = {g["name"]: g for g in gpus["gpu"]}
    row = rows["Quadro P4000"]
    assert row["nvml_names"] == ["Quadro P4000"] and row["pci_ids"] == ["1BB1", "1BB7"]
    assert (row["compute_capability"], row["arch"], row["min_driver_branch"]) == \
        ("6.1", "pascal", "R418")
    assert "deb-nvidia-driver-555" in row["source"]
    assert rows["Quadro GV100"]["min_driver_branch"] == "R555"
    assert "laptop" in rows["NVIDIA GeForce GTX 1060"]["note"]
    # The curated K40 row already answers "Tesla K40m": no second row, but its id is added
    assert "Tesla K40m" not in rows
    assert "1023" in rows["Tesla K40"]["pci_ids"]

    from envlock.matrix.load import load_matrix

    m = load_matrix(matrix)
    assert m.gpu("Quadro P4000").id == m.gpu("10de:1bb7").id == "quadro-p4000"
    # a rerun on the same packages changes nothing
    assert harvest.main(["--debs", str(debs), "--matrix", str(matrix), "--check"]) == 0


def test_check_reports_a_stale_file(debs: Path, matrix: Path,
                                    capsys: pytest.CaptureFixture) -> None:
    assert harvest.main(["--debs", str(debs), "--matrix", str(matrix), "--check"]) == 1
    assert "would change: " in capsys.readouterr().out


def test_the_shipped_rows_match_the_saved_table() -> None:
    """The generated block of the shipped gpus.toml answers every name of the saved table."""
    table = _toml.loads((ROOT / "compat-matrix" / "crosscheck" /
                         "driver-package-gpus.toml").read_text())
    from envlock.matrix.load import load_matrix

    m = load_matrix()
    for f in table["fact"]:
        gpu = m.find_gpu(f["name"])
        assert gpu is not None, f["name"]
        assert gpu.compute_capability == f["compute_capability"], f["name"]
    assert len(table["fact"]) >= 350
