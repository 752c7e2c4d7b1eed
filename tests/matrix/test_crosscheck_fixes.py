"""The matrix errors that the cross-check against independent tables found (issue 15) stay
fixed."""

from __future__ import annotations

import pytest
from packaging.specifiers import SpecifierSet

from envlock.matrix.load import load_matrix
from envlock.resolve.hardware import choose_variant
from envlock.resolve.target import TargetSpec


@pytest.fixture(scope="module")
def m():
    return load_matrix()


def _variant(m, release: str, tag: str, platform: str = "linux_x86_64", pypi: bool = False):
    found = [v for v in m.variants if v.release == release and v.tag == tag
             and v.platform == platform and v.on_pypi == pypi]
    assert found, (release, tag, platform, pypi)
    return found[0]


@pytest.mark.parametrize("release", ["2.11.0", "2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1"])
@pytest.mark.parametrize("platform", ["linux_x86_64", "linux_aarch64"])
def test_cuda13_pypi_wheels_claim_no_ptx(m, release: str, platform: str) -> None:
    for pypi in (True, False):
        v = _variant(m, release, "cu130", platform, pypi)
        assert v.ptx == (), (release, platform, pypi)


def test_cu130_rows_marked_measured_carry_no_release_md_ptx(m) -> None:
    for v in m.variants:
        if v.tag == "cu130" and not v.on_pypi and v.provenance.confidence == "measured":
            assert not v.ptx, v


def test_27_cu128_ships_compute_120(m) -> None:
    for release in ("2.7.0", "2.7.1"):
        assert _variant(m, release, "cu128").ptx == ("compute_120",)


def test_r575_user_is_offered_2121_cu129(m) -> None:
    target = TargetSpec(name="t", gpus=(m.gpu("RTX 5090"),), python="3.11",
                        platform="linux_x86_64", driver="575.57.08")
    choice = choose_variant(m, target, SpecifierSet("<2.13"))
    assert choice.variant.version_string == "2.12.1+cu129"


def test_gb200_floor_is_its_first_listing(m) -> None:
    gb200 = m.gpu("GB200")
    assert gb200.min_driver == "570.123.01"
    assert m.find_gpu("HGX GB200") is gb200


def test_cuda13_has_a_windows_floor(m) -> None:
    assert m.cuda_majors[13].compat_min_driver_windows == "580"


@pytest.mark.parametrize("release", ["2.8.0", "2.9.0", "2.9.1"])
def test_pypi_arch_lists_are_harvested(m, release: str) -> None:
    build = m.torch_releases[release].builds["linux_x86_64"]
    assert build.sass == ("sm_70", "sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120")


def test_third_party_cublas_is_not_primary(m) -> None:
    assert _variant(m, "2.8.0", "cu129").provenance.confidence == "secondary"


@pytest.mark.parametrize("release", ["2.12.0", "2.12.1", "2.13.0", "2.14.0", "2.14.1"])
@pytest.mark.parametrize("platform", ["linux_x86_64", "linux_aarch64"])
def test_cu132_ptx_is_not_claimed_from_the_release_notes(m, release: str,
                                                         platform: str) -> None:
    # RELEASE.md's "+PTX" was wrong for cu130 (measured without PTX) and the one measured
    # cu132 wheel (PyPI 2.15.0) has none: unknown, not compute_120
    builds = [v for v in m.variants_for(release, platform) if v.tag == "cu132"]
    assert builds and all(v.ptx is None for v in builds)
    measured = m.torch_releases["2.15.0"].builds["linux_x86_64"]
    assert measured.tag == "cu132" and not getattr(measured, "ptx", None)
