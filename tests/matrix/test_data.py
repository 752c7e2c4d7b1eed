"""The shipped compatibility matrix: it validates, it is complete, and its facts are right.

Spot checks compare against facts read from primary sources (NVIDIA release notes,
PyPI wheel metadata); see ../shared/reference for the collected tables.
"""

from __future__ import annotations

import re

import pytest

from envlock.kernels import coverage
from envlock.matrix import get_matrix
from envlock.matrix.load import load_matrix
from envlock.matrix.rules import driver_need, driver_verdict, gpu_coverage
from envlock.versions import V

M = get_matrix()


def test_shipped_matrix_validates_without_problems() -> None:
    # load_matrix raises MatrixError listing every problem if anything is wrong
    m = load_matrix()
    assert m.version == M.version


def test_gpu_coverage_counts() -> None:
    assert len(M.gpus) >= 80
    segments = {g.segment for g in M.gpus.values()}
    assert segments == {"datacenter", "workstation", "consumer", "embedded"}
    for required in ("k80", "h20", "h20-3e", "a800-sxm4-80gb", "h800-sxm", "l20", "b300",
                     "gb300", "gb10", "rtx-5090", "gtx-1080-ti", "jetson-orin-agx",
                     "jetson-thor"):
        assert required in M.gpus, required


def test_every_row_has_a_source() -> None:
    rows = [g.provenance for g in M.gpus.values()] + \
        [a.provenance for a in M.archs.values()] + \
        [r.provenance for r in M.cuda_releases.values()] + \
        [b.provenance for b in M.drivers.values()] + \
        [v.provenance for v in M.variants] + \
        [a.provenance for a in M.advisories.values()]
    assert rows and all(p.sources for p in rows)
    assert {p.confidence for p in rows} <= {"primary", "measured", "secondary", "unverified"}


def test_cuda_toolkits_span_11_0_to_13() -> None:
    lines = list(M.cuda_lines)
    assert lines[0] == "11.0"
    assert "12.7" not in lines  # never released
    assert max(lines, key=V).startswith("13.")
    for line in ("11.8", "12.1", "12.4", "12.6", "12.8", "12.9", "13.0", "13.2"):
        assert line in lines
    assert set(M.cuda_majors) >= {11, 12, 13}


def test_driver_branches_r470_to_r615() -> None:
    ids = set(M.drivers)
    for b in ("R470", "R525", "R535", "R550", "R570", "R580", "R595", "R610", "R615"):
        assert b in ids
    assert M.drivers["R535"].type == "ltsb"
    assert M.drivers["R580"].type == "ltsb"


def test_every_torch_release_from_1_13_to_2_15() -> None:
    expected = ("1.13.0 1.13.1 2.0.0 2.0.1 2.1.0 2.1.1 2.1.2 2.2.0 2.2.1 2.2.2 2.3.0 2.3.1 "
                "2.4.0 2.4.1 2.5.0 2.5.1 2.6.0 2.7.0 2.7.1 2.8.0 2.9.0 2.9.1 2.10.0 2.11.0 "
                "2.12.0 2.12.1 2.13.0 2.14.0 2.14.1 2.15.0").split()
    assert list(M.torch_releases) == expected
    for rel in M.torch_releases.values():
        assert re.match(r"^\d{4}-\d{2}-\d{2}$", rel.date or ""), rel.version
        assert "linux_x86_64" in rel.builds


# -- spot checks against primary sources --------------------------------------------------


def test_h20_is_hopper_9_0() -> None:
    g = M.gpu("H20")
    assert (g.id, g.compute_capability, M.archs[g.arch].name) == ("h20", "9.0", "Hopper")
    assert "NVIDIA H20" in g.nvml_names


def test_torch_2_5_1_pypi_wheel_pins_cublas_12_4_5_8() -> None:
    (v,) = [v for v in M.variants_for("2.5.1", "linux_x86_64") if v.on_pypi]
    assert v.tag == "cu124" and v.cuda == "12.4"
    assert any(p.startswith("nvidia-cublas-cu12") and "==12.4.5.8" in p for p in v.pins)
    assert v.libraries["cublas"] == "12.4.5.8"


def test_torch_2_8_0_cu128_has_no_sm_61_kernels() -> None:
    pascal = M.gpu("GTX 1080 Ti")
    assert pascal.compute_capability == "6.1"
    for v in M.variants_for("2.8.0", "linux_x86_64"):
        if v.tag == "cu128":
            assert "sm_61" not in (v.sass or ())
            assert gpu_coverage(v, pascal).how == "none"
    cu126 = [v for v in M.variants_for("2.8.0", "linux_x86_64") if v.tag == "cu126"]
    assert cu126 and gpu_coverage(cu126[0], pascal).how == "sass"  # runs the sm_60 SASS


def test_cuda_12_8_needs_driver_570_26_on_linux() -> None:
    assert M.cuda_releases["12.8.0"].driver_linux == "570.26"
    assert M.toolkit_driver("12.8") == "570.26"


def test_minor_version_compatibility_floors() -> None:
    assert M.compat_floor("11.8") == "450.80.02"
    assert M.compat_floor("12.4") == "525.60.13"
    assert V(M.compat_floor("13.0")) == V("580")


def test_pypi_default_cuda_line_per_release() -> None:
    default = {r: [v for v in M.variants_for(r, "linux_x86_64") if v.on_pypi][0].tag
               for r in M.torch_releases}
    assert default["2.0.1"] == "cu117"
    assert default["2.4.1"] == "cu121"
    assert default["2.6.0"] == "cu124"
    assert default["2.7.1"] == "cu126"
    assert default["2.10.0"] == "cu128"
    assert default["2.14.1"] == "cu130"
    assert default["2.15.0"] == "cu132"


def test_cu13_builds_name_the_cuda_toolkit_metapackage() -> None:
    (v,) = [v for v in M.variants_for("2.11.0", "linux_x86_64") if v.on_pypi]
    assert any(p.startswith("cuda-toolkit[") and "==13.0.2" in p for p in v.pins)
    assert v.libraries.get("cublas") == "13.1.0.3"  # expanded through cuda-toolkit 13.0.2
    assert any(p.startswith("nvidia-cudnn-cu13") for p in v.pins)


def test_volta_dropped_from_cu13_and_blackwell_needs_cu128() -> None:
    v100 = M.gpu("V100")
    rtx5090 = M.gpu("RTX 5090")
    assert rtx5090.compute_capability == "12.0"
    for v in M.variants_for(platform="linux_x86_64"):
        if v.sass is None or v.tag == "cpu":
            continue
        if v.cuda and v.cuda.startswith("13."):
            assert gpu_coverage(v, v100).how == "none", (v.release, v.tag)
        if v.cuda and V(v.cuda) < V("12.8") and not v.ptx:
            assert gpu_coverage(v, rtx5090).how == "none", (v.release, v.tag)


def test_driver_need_uses_the_gpu_and_the_cuda_major() -> None:
    b200 = M.gpu("B200")
    (v,) = [v for v in M.variants_for("2.10.0", "linux_x86_64") if v.on_pypi]  # cu128
    need = driver_need(M, v, [b200])
    assert V(need.minimum) >= V("570")  # Blackwell needs R570 even on CUDA 12.x
    assert driver_verdict(M, v, [b200], "535.104.05").ok is False
    assert driver_verdict(M, v, [M.gpu("A100")], "535.104.05").how == \
        "minor-version compatibility"


def test_kepler_cannot_take_a_driver_newer_than_r470() -> None:
    k80 = M.gpu("K80")
    assert M.archs[k80.arch].last_driver_branch == "R470"
    (v,) = [v for v in M.variants_for("2.0.1", "linux_x86_64") if v.on_pypi]
    assert driver_verdict(M, v, [k80], "535.104.05").ok is False


@pytest.mark.parametrize("typed,expected", [
    ("H20", "h20"), ("h100", "h100-sxm"), ("NVIDIA H100 80GB HBM3", "h100-sxm"),
    ("rtx 4090", "rtx-4090"), ("A100-SXM4-40GB", "a100-sxm4-40gb"),
    ("NVIDIA A100-SXM4-40GB", "a100-sxm4-40gb"), ("Tesla V100-SXM2-32GB", "v100-sxm2-32gb"),
    ("GeForce GTX 1080 Ti", "gtx-1080-ti"), ("NVIDIA GeForce RTX 5090", "rtx-5090"),
    ("Tesla T4", "t4"), ("Orin (nvgpu)", "jetson-orin-agx"),
])
def test_names_users_type_and_nvml_prints(typed: str, expected: str) -> None:
    assert M.gpu(typed).id == expected


def test_memory_disambiguates_shared_nvml_names() -> None:
    twelve = M.find_gpu("NVIDIA GeForce RTX 3060", memory_mib=12288)
    eight = M.find_gpu("NVIDIA GeForce RTX 3060", memory_mib=8192)
    assert twelve is not None and eight is not None
    assert twelve.id != eight.id
    assert (twelve.memory_gb, eight.memory_gb) == (12, 8)


def test_arch_lists_only_use_targets_their_cuda_can_compile() -> None:
    for v in M.variants:
        if v.cuda is None or v.sass is None:
            continue
        line = M.cuda_lines[v.cuda]
        assert set(v.sass) <= set(line.sass), (v.release, v.tag, v.platform)


def test_pypi_arch_lists_agree_with_coverage_rule() -> None:
    # an L4 (Ada, 8.9) runs the sm_86 SASS of every Ampere-era build
    l4 = M.gpu("L4")
    (v,) = [v for v in M.variants_for("2.5.1", "linux_x86_64") if v.on_pypi]
    assert coverage(v.targets, l4.compute_capability).target == "sm_86"
