"""GPU names as users type them and as NVIDIA's driver lists them resolve to the right row."""

from __future__ import annotations

import pytest

from envlock.matrix.load import load_matrix


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


@pytest.mark.parametrize("name, cc, chip", [
    ("GTX 1060", "6.1", "GP106"),                 # memory variants 3GB/6GB share one capability
    ("NVIDIA GeForce GTX 1060", "6.1", "GP106"),
    ("A100-SXM-64GB", "8.0", "GA100"),
    ("NVIDIA A100-PG509-200", "8.0", "GA100"),
    ("NVIDIA RTX 2000 Ada Generation", "8.9", "AD107"),
    ("NVIDIA RTX A400", "8.6", "GA107"),
    ("NVIDIA RTX A1000", "8.6", "GA107"),
    ("NVIDIA T400 4GB", "7.5", "TU117"),
    ("NVIDIA GeForce RTX 3050 A Laptop GPU", "8.9", None),   # an Ada chip despite its name
    ("NVIDIA GeForce RTX 5090 Laptop GPU", "12.0", "GB203"),
    ("NVIDIA RTX PRO 4500 Blackwell Server Edition", "12.0", "GB203"),  # 580.142 README only
    ("RTX PRO 4500 Server", "12.0", "GB203"),
])
def test_names_resolve_with_the_chip_capability(matrix, name: str, cc: str, chip) -> None:
    gpu = matrix.find_gpu(name)
    assert gpu is not None, name
    assert gpu.compute_capability == cc
    if chip is not None:
        assert chip in (gpu.chip or "")
    assert gpu.provenance.sources


def test_memory_picks_the_variant_of_a_bare_name(matrix) -> None:
    assert matrix.find_gpu("GTX 1060", memory_mib=6144).id == "gtx-1060-6gb"
    assert matrix.find_gpu("GTX 1060", memory_mib=3072).id == "gtx-1060-3gb"


def test_a_bare_name_of_variants_with_different_capabilities_stays_unknown(matrix) -> None:
    # "RTX 3050" rows exist; a made-up stem must not match by prefix
    assert matrix.find_gpu("GTX 10") is None
