"""Hardware rules as data: (GPUs, driver, torch spec, CUDA, Python, platform) -> the build
envlock must choose, or the error it must explain. Expected values follow from the
matrix facts (arch lists measured in the wheels, NVIDIA driver tables)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional, Sequence

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
    # 535 runs CUDA 12.x through minor-version compatibility. cu124 is the newest 12.x of 2.4,
    # but the matrix does not know its cuBLAS (pins partial): the H20 SIGFPE advisory is
    # unknown there, so the PyPI cu121 build, known to need and get the cuBLAS override,
    # ranks first (issue 10: unknown is not safe)
    # 535 runs CUDA 12.x through minor-version compatibility; 2.4's cu124 pins cuBLAS
    # 12.4.2.65 (known since the index-build pins landed), so the H20 cuBLAS 12.1 advisory is
    # known false for it and the newest CUDA line wins
    (["H20"], "535.104.05", ">=2.4,<2.5", None, "3.10", "linux_x86_64", "2.4.1", "cu124", False),
    (["H20"], None, "", "12.1", "3.11", "linux_x86_64", "2.5.1", "cu121", False),
    # Volta: cu128 dropped it in 2.11 and CUDA 13 cannot compile it; cu126 still has sm_70
    (["V100"], None, ">=2.11", None, "3.11", "linux_x86_64", "2.14.1", "cu126", False),
    # Pascal runs the sm_60 SASS of the cu126 builds
    (["GTX 1080 Ti"], None, "", None, "3.11", "linux_x86_64", "2.14.1", "cu126", False),
    # Kepler: the last sm_37 build is cu118, last released with torch 2.7
    (["K80"], None, "", None, "3.10", "linux_x86_64", "2.7.1", "cu118", False),
    # R570 runs CUDA 12.x builds: the newest is 2.13.0 cu129 (its sm_100 SASS known from
    # torch 2.13.0's own PYTORCH_RELEASES_CODE_CC, issue 34); CUDA 13 needs R580
    (["B200"], "570.86.15", "", None, "3.11", "linux_x86_64", "2.13.0", "cu129", False),
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
      "which has no sm_120 kernels", "upgrade the driver to >= 570", "torch>=2.8.0 cu129"]),
    (["RTX 5090"], None, "<2.7", "3.11", "linux_x86_64",
     ["has no sm_120 kernels", "use torch>=2.7.0 with cu128", "not allowed by torch<2.7"]),
    (["B200"], "535.104.05", "", "3.11", "linux_x86_64",
     ["B200 is sm_100", "upgrade the driver to >= 570.86.15"]),
    (["K80"], "535.104.05", "", "3.10", "linux_x86_64",
     ["driver 535.104.05 is too new for it", "up to the R470 driver branch",
      "torch 2.7.1 cu118"]),
    # pre-Volta GPUs: which builds still have kernels, and their last driver branch
    (["K80"], None, ">=2.8", "3.11", "linux_x86_64",
     ["NVIDIA Tesla K80 is sm_37 (Kepler, last driver branch R470)",
      "builds with kernels for NVIDIA Tesla K80 end at torch 2.7.1 (cu118)"]),
    (["Quadro P4000"], None, ">=2.15", "3.11", "linux_x86_64",
     ["Quadro P4000 is sm_61 (Pascal, last driver branch R580)",
      "builds with kernels for Quadro P4000 end at torch 2.14.1 (cu126)"]),
    (["Tesla K40m"], None, "", "3.11", "linux_x86_64",
     ["Tesla K40 is sm_35 (Kepler, last driver branch R470)",
      "no PyTorch build in the matrix has kernels for Tesla K40"]),
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
    # issue 10: each advisory step is recorded. cu121 (PyPI and index) needs the cuBLAS
    # override; cu124's pinned cuBLAS 12.4.2.65 rules the advisory out, so it wins as the
    # newest CUDA line this driver runs
    assert ("h20-cublas121-sigfpe applies to torch 2.4.1 (PyPI) (gpu.model=h20, "
            "library.cublasLt.version=12.1.3.1): override nvidia-cublas-cu12==12.4.5.8") in text
    assert ("cu124 (CUDA 12.4) from https://download.pytorch.org/whl/cu124 is the newest CUDA "
            "line that driver 535.104.05 runs (minor-version compatibility)") in text
    assert "NVIDIA H20 is sm_90 (Hopper); this build runs on it with SASS sm_90" in text


# -- issue 10: H20 across torch 2.1-2.4, offline with an empty cache and against loopback
# indexes. The hermetic 2.1.x PyTorch-index wheels bundle cuBLAS 12.1.3.1 (CUDA 12.1.1's
# component) where no override reaches; the PyPI build with the cuBLAS override wins, and
# a build whose cuBLAS the matrix does not know ranks below it. 2.4.1 is different: its
# cu124 build pins cuBLAS 12.4.2.65, where the advisory is known false, and it wins.
# The table is for Python 3.11: torch 2.1.x has no wheels for a newer Python.

H20_RELEASES = ["2.1.0", "2.1.1", "2.1.2", "2.2.2", "2.3.1"]


def _h20_lock_checks(lock: dict, release: str) -> None:
    t = lock["target"][0]
    assert t["torch"]["version"] == release and t["torch"]["on-pypi"] is True, t["torch"]
    pk = {p["name"]: p for p in t["package"]}
    assert pk["nvidia-cublas-cu12"]["version"] == "12.4.5.8"
    advs = {(a["id"], a["action"]) for a in t["advisory"]}
    assert ("h20-cublas121-sigfpe", "override") in advs
    assert t["libraries"]["cublas"] == "12.4.5.8"


@pytest.mark.parametrize("release", H20_RELEASES)
def test_h20_table_offline_with_an_empty_cache(release: str, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from envlock import _toml
    from support.cli import run_cli

    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "empty-cache"))
    out = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--gpu", "H20", "--torch", f"=={release}", "--python", "3.11",
                "--offline", "-o", str(out), "-v")
    assert r.code == 0, r.err
    lock = _toml.loads(out.read_text())
    _h20_lock_checks(lock, release)
    assert lock["target"][0]["closure"] == "gpu-core"
    decision = "\n".join(lock["target"][0]["decision"])
    if release.startswith("2.1."):
        assert ("but its override cannot replace a library bundled inside the torch wheel "
                "(cublas 12.1.3.1 bundled in the wheel from CUDA 12.1.1): build disqualified"
                ) in decision
        assert f"(excluded {release}+cu121)" in r.out


@pytest.fixture(scope="module")
def h20_world(tmp_path_factory: pytest.TempPathFactory):
    from support.index_server import IndexServer
    from support.torch_world import add_package, add_torch_release

    tmp = tmp_path_factory.mktemp("h20world")
    with IndexServer() as srv:
        pypi = srv.add_index("pypi")
        done: dict = {}
        for rel in ("2.1.2", "2.2.2", "2.3.1", "2.4.1"):
            add_torch_release(pypi, tmp, rel, done=done)
        add_package(pypi, tmp, "nvidia-cublas-cu12", "12.4.5.8")
        cu121 = srv.add_index("pytorch-cu121", prefix="pytorch/cu121")
        # the hermetic 2.1.2+cu121 wheel: no nvidia-* requirements, cuBLAS inside
        add_torch_release(cu121, tmp, "2.1.2", local="cu121",
                          requires=["filelock", "typing-extensions", "sympy", "networkx",
                                    "jinja2", "fsspec"], deps_index=pypi, done=dict(done))
        yield srv


def test_h20_with_torch_2_4_takes_the_cu124_build_offline(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """torch 2.4.1's cu124 build pins cuBLAS 12.4.2.65: no H20 advisory, no override."""
    from envlock import _toml
    from support.cli import run_cli

    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "empty-cache"))
    out = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--gpu", "H20", "--torch", "==2.4.1", "--offline", "-o", str(out))
    assert r.code == 0, r.err
    t = _toml.loads(out.read_text())["target"][0]
    assert (t["torch"]["version"], t["torch"]["variant"]) == ("2.4.1", "cu124"), t["torch"]
    assert t["libraries"]["cublas"] == "12.4.2.65"
    assert "h20-cublas121-sigfpe" not in {a["id"] for a in t.get("advisory", [])}


@pytest.mark.parametrize("release", ["2.1.2", "2.2.2", "2.3.1"])
def test_h20_table_against_loopback_indexes(h20_world: Any, release: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from envlock import _toml
    from support.cli import run_cli

    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--index-url", h20_world.url("pypi"),
                "--pytorch-index-url", f"{h20_world.base}/pytorch", "--gpu", "H20",
                "--torch", f"=={release}", "--python", "3.11", "-o", str(out))
    assert r.code == 0, r.err
    lock = _toml.loads(out.read_text())
    _h20_lock_checks(lock, release)
    t = lock["target"][0]
    assert t["closure"] == "full"
    pk = {p["name"]: p for p in t["package"]}
    assert pk["torch"]["version"] == release and pk["torch"]["index"] == h20_world.url("pypi")
    assert all(f["sha256"] for f in pk["nvidia-cublas-cu12"]["files"])


def test_unknown_advisories_are_recorded_as_may_apply_and_round_trip(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Offline with an extra requirement, the packages it brings are unknown: advisories
    about them may apply, and the lock names the unknown facts (and reads them back)."""
    from envlock import _toml
    from envlock.lock.io import load_lock
    from support.cli import run_cli

    monkeypatch.setenv("ENVLOCK_CACHE_DIR", str(tmp_path / "empty-cache"))
    out = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--gpu", "H20", "--torch", "==2.2.2", "--offline", "transformers",
                "-o", str(out))
    assert r.code == 0, r.err
    raw = {a["id"]: a for a in _toml.loads(out.read_text())["target"][0]["advisory"]}
    assert raw["numpy2-with-torch-before-2-3"]["action"] == "may-apply"
    assert raw["numpy2-with-torch-before-2-3"]["unknown"] == ["package.numpy"]
    assert "unknown" not in raw["h20-cublas121-sigfpe"]
    assert ("advisory numpy2-with-torch-before-2-3 [may-apply]: NumPy 2.x with torch < 2.3 "
            "(compiled against NumPy 1.x) (not confirmed: package.numpy unknown)") in r.out
    lock = load_lock(out)
    (numpy,) = [a for a in lock.targets[0].advisories if a.id == "numpy2-with-torch-before-2-3"]
    assert numpy.unknown == ("package.numpy",) and not numpy.confirmed
    # without extra requirements the package set is the build's own: nothing may apply
    r = run_cli("resolve", "--gpu", "H20", "--torch", "==2.2.2", "--offline", "-o", str(out))
    assert r.code == 0, r.err
    assert [a.action for a in load_lock(out).targets[0].advisories] == ["override"]


def _variant(release: str, tag: str, pypi: bool):
    return next(v for v in M.variants_for(release=release, platform="linux_x86_64")
                if v.tag == tag and v.on_pypi is pypi)


def test_derived_library_facts_of_builds() -> None:
    from dataclasses import replace

    from envlock.matrix.rules import build_libraries

    # hermetic wheel: cuBLAS from its CUDA release's components, bundled in the wheel
    hermetic = build_libraries(M, _variant("2.1.2", "cu121", False))
    assert hermetic.versions["cublas"] == M.cuda_releases["12.1.1"].components["cublas"]
    assert {"cublas", "cublasLt", "cudnn"} <= hermetic.bundled
    assert hermetic.source["cublas"] == "bundled in the wheel from CUDA 12.1.1"
    # the PyPI build of the same release: the pinned wheel, nothing bundled
    pypi = build_libraries(M, _variant("2.1.2", "cu121", True))
    assert pypi.versions["cublas"] == "12.1.3.1" and not pypi.bundled
    # an index build whose pins the matrix does not know, same tag as the PyPI build: the
    # same wheel, so it shares the PyPI facts
    same = replace(_variant("2.3.1", "cu121", False), pins_status="unknown", pins=(),
                   libraries={})
    shared = build_libraries(M, same)
    assert shared.pins_known and shared.versions["cublas"] == "12.1.3.1"
    assert shared.source["cublas"] == "the PyPI wheel of torch 2.3.1 (the same build)"
    # no pins and no twin: unknown, with the reason
    partial = build_libraries(M, _variant("2.7.1", "cu128", False))
    assert "cublas" not in partial.versions and not partial.pins_known
    assert partial.unknown["cublas"] == ("the matrix does not know the CUDA wheel requirements "
                                         "of torch 2.7.1+cu128 (partial)")
