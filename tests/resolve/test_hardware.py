"""Hardware rules as data: (GPUs, driver, torch spec, CUDA, Python, platform) -> the build
envlock must choose, or the error it must explain. Expected values follow from the
matrix facts (arch lists measured in the wheels, NVIDIA driver tables)."""

from __future__ import annotations

from typing import Optional, Sequence

import pytest
from packaging.specifiers import SpecifierSet

from envlock.errors import NoCandidateError
from envlock.matrix import get_matrix
from envlock.resolve.hardware import choose_variant
from envlock.resolve.target import gpu_targets

M = get_matrix()


def choose(gpus: Sequence[str], driver: Optional[str] = None, spec: str = "",
           cuda: Optional[str] = None, python: str = "3.11", platform: str = "linux_x86_64",
           together: bool = False, cpu: bool = False):
    targets = gpu_targets(M, gpus, cpu=cpu, together=together, python=python,
                          platform=platform, glibc="2.28", driver=driver)
    return choose_variant(M, targets[0], SpecifierSet(spec), cuda)


CHOICES = [
    # gpus, driver, torch spec, cuda, python, platform -> release, tag, from PyPI
    (["H20"], None, "", None, "3.11", "linux_x86_64", "2.15.0", "cu132", True),
    # 535 runs CUDA 12.x through minor-version compatibility; cu124 is the newest 12.x of 2.4
    (["H20"], "535.104.05", ">=2.4,<2.5", None, "3.10", "linux_x86_64", "2.4.1", "cu124", False),
    (["H20"], None, "", "12.1", "3.11", "linux_x86_64", "2.5.1", "cu121", False),
    # Volta: cu128 dropped it in 2.11 and CUDA 13 cannot compile it; cu126 still has sm_70
    (["V100"], None, ">=2.11", None, "3.11", "linux_x86_64", "2.14.1", "cu126", False),
    # Pascal runs the sm_60 SASS of the cu126 builds
    (["GTX 1080 Ti"], None, "", None, "3.11", "linux_x86_64", "2.14.1", "cu126", False),
    # Kepler: the last sm_37 build is cu118, last released with torch 2.7
    (["K80"], None, "", None, "3.10", "linux_x86_64", "2.7.1", "cu118", False),
    # R570 runs CUDA 12.8 builds; 2.12+ have no cu128 and CUDA 13 needs R580
    (["B200"], "570.86.15", "", None, "3.11", "linux_x86_64", "2.11.0", "cu128", False),
    (["A100"], "470.82.01", "", None, "3.10", "linux_x86_64", "2.7.1", "cu118", False),
    (["GH200"], None, "", None, "3.11", "linux_aarch64", "2.15.0", "cu132", True),
    # Jetson Thor is sm_110: only the aarch64 CUDA-13 builds compile it
    (["Thor"], None, "", None, "3.12", "linux_aarch64", "2.15.0", "cu132", True),
    (["RTX 4090"], "525.60.13", "", None, "3.11", "linux_x86_64", "2.14.1", "cu126", False),
]


@pytest.mark.parametrize("gpus,driver,spec,cuda,python,platform,release,tag,pypi", CHOICES)
def test_choice(gpus, driver, spec, cuda, python, platform, release, tag, pypi) -> None:
    c = choose(gpus, driver, spec, cuda, python, platform)
    assert (c.variant.release, c.variant.tag, c.variant.on_pypi) == (release, tag, pypi)
    if driver:
        assert c.driver_how in ("full", "minor-version compatibility")


ERRORS = [
    (["RTX 5090"], "550.54.15", "", "3.11", "linux_x86_64",
     ["RTX 5090 is sm_120 (Blackwell)", "the newest build driver 550.54.15 can run is",
      "which has no sm_120 kernels", "upgrade the driver to >= 570", "torch>=2.7.0 cu128"]),
    (["RTX 5090"], None, "<2.7", "3.11", "linux_x86_64",
     ["has no sm_120 kernels", "use torch>=2.7.0 with cu128", "not allowed by torch<2.7"]),
    (["B200"], "535.104.05", "", "3.11", "linux_x86_64",
     ["B200 is sm_100", "upgrade the driver to >= 570.86.15"]),
    (["K80"], "535.104.05", "", "3.10", "linux_x86_64",
     ["driver 535.104.05 is too new for it", "up to the R470 driver branch",
      "torch 2.7.1 cu118"]),
    (["H100"], None, ">=2.9", "3.9", "linux_x86_64",
     ["no torch CUDA build matches torch>=2.9 for Python 3.9", "Python 3.10"]),
    (["H100"], None, "==1.13.1", "3.10", "linux_x86_64",
     ["sm_90 (Hopper)", "has no sm_90 kernels", "use torch>=2.0.0 with cu118"]),

]


def test_the_way_out_comes_newest_first() -> None:
    """issue 17: --gpu V100 --cuda 13.0 once suggested torch>=1.13.0 with cu116, though
    2.14.1 cu126 runs on a V100: suggestions follow the resolver's own preference."""
    with pytest.raises(NoCandidateError) as exc:
        choose(["V100"], None, "", "13.0")
    msg = exc.value.message
    assert "has no sm_70 kernels" in msg
    assert "newest first: torch 2.14.1 cu126, torch 2.14.0 cu126" in msg
    assert msg.endswith("use --cuda 12.6 (or drop --cuda)")
    assert "1.13" not in msg


@pytest.mark.parametrize("gpus,driver,spec,python,platform,parts", ERRORS)
def test_no_candidate_explains_the_binding_constraint(gpus, driver, spec, python, platform,
                                                      parts) -> None:
    with pytest.raises(NoCandidateError) as exc:
        choose(gpus, driver, spec, None, python, platform)
    msg = str(exc.value)
    for p in parts:
        assert p in msg, (p, msg)
    assert exc.value.exit_code == 3


def test_h20_with_cu121_torch_gets_the_cublas_override() -> None:
    c = choose(["H20"], spec="==2.3.1")
    assert (c.variant.release, c.variant.tag) == ("2.3.1", "cu121")
    (adv,) = [a for a in c.advisories if a.id == "h20-cublas121-sigfpe"]
    assert adv.action == "override"
    assert [str(r) for r in c.overrides] == ["nvidia-cublas-cu12==12.4.5.8"]


def test_near_miss_h100_with_cu121_gets_no_override() -> None:
    c = choose(["H100"], spec="==2.3.1")
    assert not c.overrides and not c.advisories


def test_preference_newest_torch_then_newest_cuda_then_fewest_overrides() -> None:
    # with ==2.3.1 both cu118 (clean) and cu121 (needs an override) qualify for H20:
    # the newer CUDA line wins, overrides only break ties
    c = choose(["H20"], spec="==2.3.1")
    assert c.variant.tag == "cu121" and c.overrides


def test_together_serves_every_gpu() -> None:
    c = choose(["A100", "RTX 4090", "V100"], together=True)
    assert (c.variant.release, c.variant.tag) == ("2.14.1", "cu126")
    assert len(c.decision) >= 5  # one line per GPU explains its kernels


def test_cpu_target_takes_the_cpu_build() -> None:
    targets = gpu_targets(M, [], cpu=True, together=False, python="3.11",
                          platform="linux_x86_64", glibc="2.28", driver=None)
    c = choose_variant(M, targets[0], SpecifierSet(""), None)
    assert c.variant.tag == "cpu" and c.variant.index.endswith("/whl/cpu")


def test_blackwell_needs_r570_even_for_cuda_12() -> None:
    c = choose(["RTX 5090"])
    assert c.need.minimum is not None
    assert int(c.need.minimum.split(".")[0]) >= 570


def test_decision_is_recorded() -> None:
    c = choose(["H20"], driver="535.104.05", spec=">=2.4,<2.5")
    text = "\n".join(c.decision)
    assert "torch 2.4.1 is the newest release allowed by <2.5,>=2.4" in text
    assert "that driver 535.104.05 runs (minor-version compatibility)" in text
    assert "NVIDIA H20 is sm_90 (Hopper); this build runs on it with SASS sm_90" in text
