"""The installers' vocabulary (issue 34): PEP 825 variant properties per build, the NVIDIA
variant provider's forced values and conda's overrides recorded in the lock."""

from __future__ import annotations

import json
from pathlib import Path

from envlock.lock.io import load_lock
from tests.support.cli import run_cli


def test_matrix_torch_json_gives_variant_properties() -> None:
    r = run_cli("matrix", "torch", "2.8.0", "--json")
    assert r.code == 0, r.err
    variants = json.loads(r.out)["variants"]
    cu129 = next(v for v in variants
                 if v["tag"] == "cu129" and v["platform"] == "linux_x86_64")
    props = cu129["variant_properties"]
    assert "nvidia :: sm_arch :: 90_real" in props
    assert "nvidia :: cuda_version_lower_bound :: 12.9" in props
    # one property per SASS arch, a _virtual one per PTX arch
    assert len([p for p in props if p.endswith("_real")]) == len(cu129["sass"])
    assert "nvidia :: sm_arch :: 120_virtual" in props
    cpu = next(v for v in variants if v["tag"] == "cpu")
    assert cpu["variant_properties"] == []
    # an arch list the matrix does not know gives no properties, not a CUDA bound alone
    unknown = [v for v in variants if v["tag"] != "cpu" and v["sass"] is None]
    assert unknown and all(v["variant_properties"] is None for v in unknown)


def test_h20_on_r535_lock_records_the_forced_provider_values(tmp_path: Path,
                                                              cache: Path) -> None:
    lock_path = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--gpu", "H20", "--driver", "R535", "--offline", "--python",
                "3.11", "-o", str(lock_path))
    assert r.code == 0, r.out + r.err
    t = load_lock(str(lock_path)).targets[0]
    env = dict(t.installer_env)
    assert env["NV_VARIANT_PROVIDER_FORCE_SM_ARCH"] == "9.0"
    # the provider is told the locked build's CUDA line: R535 reports 12.x below it and
    # runs it through minor-version compatibility, which the provider does not model
    assert env["NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION"] == t.torch.cuda
    assert env["CONDA_OVERRIDE_CUDA_ARCH"] == "9.0"
    assert env["CONDA_OVERRIDE_CUDA"].startswith("12.")
    text = lock_path.read_text()
    assert "[target.installer-env]" in text
    assert (f"NV_VARIANT_PROVIDER_FORCE_SM_ARCH=9.0" in r.out
            and f"NV_VARIANT_PROVIDER_FORCE_CUDA_DRIVER_VERSION={t.torch.cuda}" in r.out)
    j = run_cli("resolve", "--gpu", "H20", "--driver", "R535", "--offline", "--python",
                "3.11", "--dry-run", "--json")
    assert json.loads(j.out)["targets"][0]["installer_env"] == env


def test_mixed_target_forces_the_lowest_arch_and_says_why(cache: Path) -> None:
    r = run_cli("resolve", "--gpu", "V100", "--gpu", "H100", "--together", "--offline",
                "--python", "3.11", "--dry-run", "-v")
    assert r.code == 0, r.out + r.err
    assert "NV_VARIANT_PROVIDER_FORCE_SM_ARCH=7.0" in r.out
    assert "spans compute capabilities 7.0, 9.0" in r.out
    assert '[system-requirements]' in r.out and 'cuda = "' in r.out


def test_cpu_target_has_no_installer_env(tmp_path: Path, cache: Path) -> None:
    lock_path = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--cpu", "--offline", "--python", "3.11", "-o", str(lock_path))
    assert r.code == 0, r.out + r.err
    assert "installer-env" not in lock_path.read_text()
    assert "without this GPU" not in r.out


def test_conda_cuda_arch_is_a_hint_on_a_host_without_gpus(cache: Path) -> None:
    """Like the driver hints: a GPU-less build host states CEP 46's __cuda_arch. (This test
    host has no NVIDIA GPU, so the local probe finds none.)"""
    import pytest

    from envlock.probe.nvml import probe_nvml
    from tests.support.cli import run_proc

    if any(g.name for g in probe_nvml().gpus):
        pytest.skip("this host has NVIDIA GPUs: resolve reads them, not the hint")
    env = {"CONDA_OVERRIDE_CUDA_ARCH": "8.6", "ENVLOCK_CACHE_DIR": str(cache)}
    r = run_proc("resolve", "--offline", "--python", "3.11", "--dry-run", "--json", env=env)
    assert r.code == 0, r.err
    t = json.loads(r.out)["targets"][0]
    assert t["name"] == "cc8.6" and set(t["compute_capabilities"]) == {"8.6"}
    assert t["installer_env"]["CONDA_OVERRIDE_CUDA_ARCH"] == "8.6"
    bad = run_proc("resolve", "--offline", "--python", "3.11", "--dry-run",
                   env={"CONDA_OVERRIDE_CUDA_ARCH": "sm_86", "ENVLOCK_CACHE_DIR": str(cache)})
    assert bad.code == 2 and "is not a compute capability like 8.6" in bad.err
