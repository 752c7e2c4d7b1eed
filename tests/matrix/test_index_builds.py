"""The PyTorch-index builds in torch.toml against PyTorch's own release matrix and build rules.

The expected CUDA tags per release are restated from the ``release`` channel of
pytorch/test-infra ``tools/scripts/generate_binary_build_matrix.py`` at the commit where
``CURRENT_STABLE_VERSION`` became that release (commits named below); 2.14 is the candidate
matrix of the last snapshot read (2026-08-21), which RELEASE.md's 2.14 row confirms. 2.15.0 is
outside every source read, so only its PyPI builds are required.
"""

from __future__ import annotations

import re
from typing import Dict, List, Set, Tuple

import pytest

from envlock.matrix import get_matrix
from envlock.matrix.model import PYPI, TorchVariant

M = get_matrix()

# minor -> (CUDA tags for Linux x86_64 and Windows, CUDA tags for Linux aarch64); test-infra
# commits: 1.13 4b9afeb55, 2.0 d3629fa2e, 2.1 bc6492694, 2.2 8e04a8e90, 2.3 585bbc377,
# 2.4 ac9a718ca, 2.5 5510fd052, 2.6 b1bdc3323, 2.7 bad60f65d, 2.8 21480431a, 2.9 f563b660a,
# 2.10 e8208cf27, 2.11 0cd5e78a1, 2.12 626d4e708, 2.13 6d36e31f4, 2.14 61a77570f (candidate).
RELEASE_MATRIX: Dict[str, Tuple[List[str], List[str]]] = {
    "1.13": (["cu116", "cu117"], []),
    "2.0": (["cu117", "cu118"], []),
    "2.1": (["cu118", "cu121"], []),
    "2.2": (["cu118", "cu121"], []),
    "2.3": (["cu118", "cu121"], []),
    "2.4": (["cu118", "cu121", "cu124"], []),
    "2.5": (["cu118", "cu121", "cu124"], []),
    "2.6": (["cu118", "cu124", "cu126"], []),
    "2.7": (["cu118", "cu126", "cu128"], ["cu128"]),
    "2.8": (["cu126", "cu128", "cu129"], ["cu129"]),
    "2.9": (["cu126", "cu128", "cu130"], ["cu126", "cu128", "cu130"]),
    "2.10": (["cu126", "cu128", "cu130"], ["cu126", "cu128", "cu130"]),
    "2.11": (["cu126", "cu128", "cu130"], ["cu126", "cu128", "cu130"]),
    "2.12": (["cu126", "cu130", "cu132"], ["cu126", "cu130", "cu132"]),
    "2.13": (["cu126", "cu130", "cu132"], ["cu126", "cu130", "cu132"]),
    "2.14": (["cu126", "cu130", "cu132"], ["cu126", "cu130", "cu132"]),
}


def _index_builds() -> Set[Tuple[str, str, str]]:
    return {(v.release, v.tag, v.platform) for v in M.variants if v.index != PYPI}


def _minor(release: str) -> str:
    return ".".join(release.split(".")[:2])


@pytest.mark.parametrize("release", [r for r in M.torch_releases if _minor(r) in RELEASE_MATRIX])
def test_every_release_matrix_build_is_in_torch_toml(release: str) -> None:
    tags, aarch64 = RELEASE_MATRIX[_minor(release)]
    expected = {(release, "cpu", "linux_x86_64")}
    expected |= {(release, t, p) for t in tags for p in ("linux_x86_64", "win_amd64")}
    expected |= {(release, t, "linux_aarch64") for t in aarch64}
    missing = expected - _index_builds()
    assert not missing, f"index builds missing from torch.toml: {sorted(missing)}"


def test_release_matrix_table_covers_every_release_but_the_newest() -> None:
    uncovered = [r for r in M.torch_releases if _minor(r) not in RELEASE_MATRIX]
    assert uncovered == ["2.15.0"]


def _pin(pins: Tuple[str, ...], prefix: str) -> Dict[str, str]:
    """name -> exact version of the pins whose package name starts with ``prefix``."""
    out = {}
    for text in pins:
        m = re.match(r"\s*([A-Za-z0-9_.\-]+)\s*\(?==\s*([0-9][^;,)\s]*)", text)
        if m and m.group(1).lower().startswith(prefix):
            out[m.group(1).lower()] = m.group(2)
    return out


def _index_known_linux() -> List[TorchVariant]:
    return [v for v in M.variants if v.index != PYPI and v.pins_status == "known" and v.pins
            and v.platform.startswith("linux")]


def test_index_nccl_pin_matches_the_pypi_build_of_the_same_release() -> None:
    # PyTorch's matrix script checks every CUDA variant's nvidia-nccl pin against the one NCCL
    # commit pin of its CUDA major, so a release's variants of one family share the PyPI value.
    checked = 0
    for v in _index_known_linux():
        pypi = M.torch_releases[v.release].builds.get("linux_x86_64")
        if pypi is None:
            continue
        theirs = _pin(pypi.requires, "nvidia-nccl")
        for name, version in _pin(v.pins, "nvidia-nccl").items():
            if name in theirs:
                checked += 1
                assert version == theirs[name], (v.release, v.tag, name, version, theirs[name])
    assert checked >= 15


def test_aarch64_rows_carry_no_x86_only_pins() -> None:
    # Pins gated on platform_machine == 'x86_64' never install on aarch64; listing them would
    # claim library versions the aarch64 wheel does not pull.
    for v in M.variants:
        if v.index != PYPI and v.platform == "linux_aarch64":
            for p in v.pins:
                assert "x86_64" not in p, (v.release, v.tag, p)


def test_build_script_copies_give_2_12_cu132_the_toolkit_13_2_1_pins() -> None:
    rows = [v for v in M.variants if v.index != PYPI and v.release == "2.12.1" and v.tag == "cu132"]
    assert {v.platform for v in rows} >= {"linux_x86_64", "linux_aarch64", "win_amd64"}
    for v in rows:
        if v.platform.startswith("linux"):
            assert v.pins_status == "known" and v.provenance.confidence == "secondary"
            assert v.libraries["cudnn"] == "9.20.0.48" and v.libraries["nccl"] == "2.29.7"
            assert any(p.startswith("cuda-toolkit[") and "==13.2.1" in p for p in v.pins)
        else:
            assert v.pins_status == "unknown"

