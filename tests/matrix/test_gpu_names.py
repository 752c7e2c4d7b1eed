"""GPU names as users type them and as NVIDIA's driver lists them resolve to the right row."""

from __future__ import annotations

import pytest

from envlock.matrix.load import load_matrix


@pytest.fixture(scope="module")
def matrix():
    return load_matrix()


@pytest.mark.parametrize("name, cc, chip", [
    ("GTX 1060", "6.1", "GP106"),                 # the laptop part (NVIDIA's bare name)
    ("NVIDIA GeForce GTX 1060", "6.1", "GP106"),
    ("Quadro P4000", "6.1", "GP104"),             # NVIDIA's packaged list (R555 / R580 era)
    ("10de:1bb1", "6.1", "GP104"),                # and by PCI id, as lspci -n prints it
    ("0x1DBA", "7.0", "GV100"),                   # Quadro GV100
    ("NVIDIA GeForce GT 1030", "6.1", "GP108"),
    ("NVIDIA GeForce MX350", "6.1", "GP107"),
    ("Tesla M4", "5.2", "GM206"),
    ("Tesla P6", "6.1", "GP104"),
    ("NVIDIA GeForce GTX 1080 with Max-Q Design", "6.1", "GP104"),
    ("Tesla K40m", "3.5", "GK110B"),              # Kepler with sm_35: rows, no torch kernels
    ("NVIDIA P104-101 (GP104)", "6.1", "GP104"),  # the post-R580 list's name for it
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


def test_memory_picks_the_variant_of_a_shared_name(matrix) -> None:
    assert matrix.find_gpu("NVIDIA GeForce RTX 3060", memory_mib=8192).id == "rtx-3060-8gb"
    assert matrix.find_gpu("NVIDIA GeForce RTX 3060", memory_mib=12288).id == "rtx-3060-12gb"
    # a PCI id the variants share picks the same way
    assert matrix.find_gpu("2487", memory_mib=8192).id == "rtx-3060-8gb"


def test_the_bare_gtx_1060_is_the_laptop_part(matrix) -> None:
    laptop = matrix.find_gpu("NVIDIA GeForce GTX 1060")
    assert set(laptop.pci_ids) == {"1C20", "1C23", "1C60"}
    assert matrix.find_gpu("1C03").id == "gtx-1060-6gb"  # the desktop card, by PCI id
    assert matrix.find_gpu("NVIDIA GeForce GTX 1060 3GB").id == "gtx-1060-3gb"


def test_an_unknown_pci_id_is_no_gpu(matrix) -> None:
    assert matrix.find_gpu("10de:0001") is None
    assert matrix.find_gpu("1bb1x") is None


def test_a_bare_name_of_variants_with_different_capabilities_stays_unknown(matrix) -> None:
    # "RTX 3050" rows exist; a made-up stem must not match by prefix
    assert matrix.find_gpu("GTX 10") is None
