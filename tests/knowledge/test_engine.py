"""Issue 27: one knowledge engine: bounded facts, derivations, and how a verdict was reached.

Properties over the whole matrix (every torch build):

* the bound a build's CUDA line gives each library contains the version the build pins,
  wherever the pin is known (the bound comes from cuda.toml, never from the tag's text);
* every advisory verdict on a bounded fact agrees with the verdict on each exact value
  inside the bound (a bound decides only what all its values decide).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from envlock.knowledge import (
    UNKNOWN,
    Bound,
    Facts,
    OneOf,
    evaluate,
    facts_from_plan,
    find_build,
    judge,
    line_library_bounds,
)
from envlock.matrix import get_matrix
from envlock.matrix.model import TorchVariant
from envlock.matrix.rules import build_libraries

M = get_matrix()
CUDA_BUILDS: List[TorchVariant] = [v for v in M.variants_for() if v.cuda]
ADVISORIES = [a for a in M.advisories.values() if a.condition is not None]


def _lib(version: Any) -> Facts:
    return Facts({}, {}, {}, {"cublas": {"version": version}}, {})


# -- the evaluator on bounds ---------------------------------------------------------------


@pytest.mark.parametrize("spec,expected", [
    (">=12.1,<12.2", False), ("<13", True), (">=12.6", True), ("<12.6", False),
    (">=12.8", None), ("==12.6.*", None), ("==12.*", True), ("!=12.1.*", True),
    ("==12.9.1.4", None), ("==12.1.3.1", False), ("~=12.6", True), (">13", False),
])
def test_a_bound_decides_a_specifier_only_when_all_its_values_do(spec: str,
                                                                  expected: Optional[bool]) -> None:
    f = _lib(Bound("12.6.0.22", "13"))
    assert evaluate({"fact": "library.cublas.version", "version": spec}, f) is expected
    narrow = _lib(Bound("12.6.0.22", "12.7"))
    assert evaluate({"fact": "library.cublas.version", "version": "==12.6.*"}, narrow) is True


def test_order_equality_presence_and_knowledge_tests_on_a_bound() -> None:
    f = _lib(Bound("12.6.0.22", "13"))
    leaf = {"fact": "library.cublas.version"}
    assert evaluate({**leaf, "ge": "12.6"}, f) is True
    assert evaluate({**leaf, "lt": "12.2"}, f) is False
    assert evaluate({**leaf, "gt": "12.8"}, f) is None
    assert evaluate({**leaf, "equals": "12.1.3.1"}, f) is False
    assert evaluate({**leaf, "in": ["12.1.3.1", "11.8.0"]}, f) is False
    assert evaluate({**leaf, "present": True}, f) is True
    assert evaluate({**leaf, "present": False}, f) is False
    assert evaluate({**leaf, "known": False}, f) is False  # partially known is known
    assert evaluate({**leaf, "matches": "^12"}, f) is None


def test_one_of_decides_a_condition_that_names_the_fact_twice() -> None:
    f = Facts({"env.NCCL_P2P_DISABLE": OneOf((None, "0"))}, {}, {}, {}, {},
              origins={"env.NCCL_P2P_DISABLE": "derived from NCCL connecting via P2P"})
    cond = {"any": [{"fact": "env.NCCL_P2P_DISABLE", "present": False},
                    {"fact": "env.NCCL_P2P_DISABLE", "equals": "0"}]}
    out = judge(cond, f)
    assert out.value is True
    assert out.because == ("env.NCCL_P2P_DISABLE in {absent, 0} "
                           "(derived from NCCL connecting via P2P)",)
    assert evaluate({"fact": "env.NCCL_P2P_DISABLE", "equals": "1"}, f) is False


def test_a_verdict_names_how_a_derived_fact_was_reached() -> None:
    h20 = M.gpu("H20")
    build = find_build(M, "2.14.1+cu126", "linux_x86_64")
    assert build is not None
    libs = build_libraries(M, build)
    f = facts_from_plan(M, gpus=[h20], driver="535.43.25", torch_version=build.version_string,
                        torch_cuda=build.cuda, arch_list=list(build.targets), packages={},
                        libraries=dict(libs.versions))
    out = judge(M.advisories["h20-cublas121-sigfpe"].condition, f)
    assert out.value is False
    assert ("library.cublas.version in [12.6.0.22, 13) (derived from torch 2.14.1+cu126 via "
            "CUDA 12.6)") in out.because


# -- derivation rules ------------------------------------------------------------------------


def test_line_bounds_come_from_cuda_toml_not_the_tag_text() -> None:
    # a cu118 build carries cuBLAS 11.11, not "11.8"; CUDA 13.1 ships cuBLAS 13.2
    assert line_library_bounds(M, "11.8")["cublas"] == Bound("11.11.3.6", "12")
    assert line_library_bounds(M, "13.1")["cublas"].contains("13.2.0.9")
    assert not line_library_bounds(M, "13.1")["cublas"].contains("13.1.0.3")
    assert line_library_bounds(M, "12.6")["cublasLt"] == Bound("12.6.0.22", "13")


def test_find_build_reads_the_local_tag_and_plain_versions_are_the_pypi_build() -> None:
    b = find_build(M, "2.1.0+cu121", "linux_x86_64")
    assert b is not None and b.tag == "cu121" and not b.on_pypi
    p = find_build(M, "2.1.0", "linux_x86_64")
    assert p is not None and p.on_pypi
    assert find_build(M, "0.0.1+cu121") is None


@pytest.mark.parametrize("variant", CUDA_BUILDS, ids=lambda v: f"{v.version_string}-"
                         f"{v.platform}-{'pypi' if v.on_pypi else 'index'}")
def test_the_line_bound_contains_every_pinned_version(variant: TorchVariant) -> None:
    bounds = line_library_bounds(M, variant.cuda or "")
    libs = build_libraries(M, variant)
    for name, version in libs.versions.items():
        if name in bounds:
            assert bounds[name].contains(version), (variant.version_string, name, version,
                                                    str(bounds[name]))


# -- a bound agrees with every exact value inside it -------------------------------------------

GPUS = [M.gpu(n) for n in ("H20", "H100 SXM", "A100 SXM4 80GB", "RTX 4090")]


def _inside(bound: Bound, draw: Any) -> str:
    lo, hi = bound.low, bound.high
    assert lo is not None and hi is not None
    major = draw(st.integers(lo.major, hi.major - 1 if hi.major > lo.major else lo.major))
    minor = draw(st.integers(0, 12))
    patch = draw(st.integers(0, 9))
    build = draw(st.integers(0, 200))
    candidate = f"{major}.{minor}.{patch}.{build}"
    return candidate if bound.contains(candidate) else str(lo)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_verdict_on_a_bound_agrees_with_each_exact_value_inside(data: Any) -> None:
    variant = data.draw(st.sampled_from(CUDA_BUILDS))
    gpu = data.draw(st.sampled_from(GPUS))
    driver = data.draw(st.sampled_from([None, "535.43.25", "560.35.03", "580.65.06"]))
    libs = build_libraries(M, variant)
    given_libs: Dict[str, str] = dict(libs.versions)
    bounds = {k: b for k, b in line_library_bounds(M, variant.cuda or "").items()
              if k not in given_libs}
    kw = dict(gpus=[gpu], driver=driver, torch_version=variant.version_string,
              torch_cuda=variant.cuda, arch_list=list(variant.targets), packages={})
    bounded = facts_from_plan(M, libraries=given_libs, **kw)  # type: ignore[arg-type]
    for name, b in bounds.items():
        assert bounded.get(f"library.{name}.version") == b
    picked = {k: _inside(b, data.draw) for k, b in bounds.items()}
    if "cublas" in picked and "cublasLt" in picked:
        picked["cublasLt"] = picked["cublas"]  # one wheel, one version
    exact = facts_from_plan(M, libraries={**given_libs, **picked}, **kw)  # type: ignore[arg-type]
    for adv in ADVISORIES:
        verdict = evaluate(adv.condition, bounded)  # type: ignore[arg-type]
        if verdict is not None:
            assert evaluate(adv.condition, exact) is verdict, (  # type: ignore[arg-type]
                adv.id, variant.version_string, gpu.id, picked)


def test_unknown_stays_unknown_without_anything_to_derive_from() -> None:
    f = facts_from_plan(M, gpus=[M.gpu("H20")], driver=None, torch_version=None,
                        torch_cuda=None, arch_list=None, packages={}, libraries={})
    assert f.get("library.cublas.version") is UNKNOWN
    assert evaluate(M.advisories["h20-cublas121-sigfpe"].condition, f) is None


def test_the_layers_import_one_way() -> None:
    """resolve judges through knowledge, never through checks; matrix knows neither."""
    import subprocess
    import sys

    code = ("import sys, envlock.resolve, envlock.resolve.hardware, envlock.matrix.rules, "
            "envlock.matrix.conditions; "
            "print(sorted(m for m in sys.modules if m.startswith('envlock.checks')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
    code = ("import sys, envlock.matrix, envlock.matrix.rules, envlock.matrix.conditions; "
            "print(sorted(m for m in sys.modules if m.startswith('envlock.knowledge')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"
