"""``envlock snapshot``: schema, round trip, the live machine, a fake NVML end to end,
stated hardware for GPU-less hosts, and the host/package/torch backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from envlock.probe.host import (
    container_kind,
    distro_name,
    iommu_translating,
    relevant_env,
    virtualization,
)
from envlock.probe.packages import installed_packages
from envlock.probe.torchinfo import arch_list_of, torch_from_files
from envlock.snapshot import SCHEMA, Snapshot, load_snapshot
from support.cli import run_cli, run_proc
from support.fakenvml import FakeNvmlUnavailable, H20_HGX, build_fake_nvml, nvml_env, scenario_file

DATA = Path(__file__).resolve().parents[1] / "data"
SCHEMA_FILE = Path(__file__).resolve().parents[2] / "envlock" / "schemas" / "snapshot-1.json"


@pytest.fixture(scope="module")
def schema() -> dict:
    return json.loads(SCHEMA_FILE.read_text())


def fixtures() -> list:
    """Made-up machines, and real ones recorded on lent GPU hosts (tests/data/device)."""
    return (sorted((DATA / "snapshots").glob("*.json"))
            + sorted((DATA / "device").glob("*/snapshot-*.json")))


def test_schema_ships_with_the_package() -> None:
    from importlib import resources

    text = resources.files("envlock").joinpath("schemas/snapshot-1.json").read_text()
    assert json.loads(text)["title"] == SCHEMA


@pytest.mark.parametrize("path", fixtures(), ids=lambda p: p.stem)
def test_fixtures_validate_and_round_trip(path: Path, schema: dict) -> None:
    doc = json.loads(path.read_text())
    jsonschema.validate(doc, schema)
    snap = load_snapshot(str(path))
    again = snap.to_dict()
    jsonschema.validate(again, schema)
    assert Snapshot.from_dict(again) == snap


def test_live_snapshot_validates_and_never_imports_torch(schema: dict) -> None:
    r = run_proc("snapshot")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    jsonschema.validate(doc, schema)
    assert doc["schema"] == SCHEMA and doc["python"]["version"] == ".".join(
        map(str, sys.version_info[:3]))
    assert doc["packages"]["packaging"]
    # on this GPU-less machine NVML is missing: a value, not a crash
    if doc["driver"]["version"] is None:
        assert doc["driver"]["error"] == "not-found" and doc["gpus"] == []
    code = ("import sys, io\nfrom envlock.probe.machine import take_snapshot\n"
            "take_snapshot()\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "False"


def test_snapshot_of_an_h20_box_through_the_real_nvml_binding(tmp_path: Path, schema: dict) -> None:
    try:
        libdir = build_fake_nvml(tmp_path)
    except FakeNvmlUnavailable:
        pytest.skip("no C compiler")
    scen = scenario_file(tmp_path, H20_HGX)
    out = tmp_path / "node.json"
    env = nvml_env(libdir, scen)
    p = subprocess.run([sys.executable, "-m", "envlock", "snapshot", "-o", str(out)],
                       env=env, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    doc = json.loads(out.read_text())
    jsonschema.validate(doc, schema)
    assert doc["driver"]["version"] == "535.104.05" and doc["driver"]["cuda"] == "12.2"
    assert doc["driver"]["fabric_manager"] == "running"
    assert [g["name"] for g in doc["gpus"]] == ["NVIDIA H20"] * 8
    assert {g["compute_capability"] for g in doc["gpus"]} == {"9.0"}
    assert len(doc["links"]) == 28 and {x["kind"] for x in doc["links"]} == {"NVSWITCH"}
    # and the snapshot feeds doctor and resolve
    r = run_cli("doctor", "--snapshot", str(out), "--json")
    assert json.loads(r.out)["findings"] is not None
    r = run_cli("resolve", "--from-snapshot", str(out), "--offline", "--dry-run", "--json",
                "--torch", "==2.5.1")
    t = json.loads(r.out)["targets"][0]
    assert t["name"] == "h20" and t["gpus"] == ["NVIDIA H20"]


def test_stated_hardware_for_gpu_less_build_hosts(schema: dict) -> None:
    r = run_proc("snapshot", "--gpu", "H20:8", "--driver", "535.104.05")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    jsonschema.validate(doc, schema)
    assert doc["hardware_source"] == "stated"
    assert len(doc["gpus"]) == 8 and doc["gpus"][0]["name"] == "NVIDIA H20"
    assert doc["driver"] == {**doc["driver"], "version": "535.104.05", "source": "stated"}


def test_driver_hints_from_uv_and_conda_variables() -> None:
    r = run_proc("snapshot", "--gpu", "A100",
                 env={"UV_CUDA_DRIVER_VERSION": "550.54.15", "CONDA_OVERRIDE_CUDA": "12.4"})
    doc = json.loads(r.out)
    assert doc["driver"]["version"] == "550.54.15" and doc["driver"]["cuda"] == "12.4"
    assert any("UV_CUDA_DRIVER_VERSION" in n for n in doc["notes"])


def test_bad_stated_hardware_is_a_usage_error() -> None:
    r = run_proc("snapshot", "--gpu", "H2O")
    assert r.code == 2 and "did you mean 'NVIDIA H20'" in r.err
    r = run_proc("snapshot", "--gpu", "H20", "--driver", "latest")
    assert r.code == 2 and "is not like 535.104.05" in r.err


def test_write_to_a_file_atomically(tmp_path: Path) -> None:
    out = tmp_path / "snap.json"
    r = run_proc("snapshot", "--gpu", "T4", "-o", str(out))
    assert r.code == 0 and json.loads(out.read_text())["gpus"][0]["name"] == "Tesla T4"
    assert [p.name for p in tmp_path.iterdir()] == ["snap.json"]


def test_unknown_fields_are_kept(tmp_path: Path) -> None:
    doc = json.loads((DATA / "snapshots" / "h100-match.json").read_text())
    doc["future_field"] = {"x": 1}
    doc["schema"] = "envlock.snapshot/1.3"  # a newer minor of schema 1 is readable
    snap = Snapshot.from_dict(doc)
    assert snap.to_dict()["future_field"] == {"x": 1}


# -- backends -----------------------------------------------------------------------------


def test_host_facts_from_fixture_trees(tmp_path: Path) -> None:
    root = tmp_path
    (root / "etc").mkdir()
    (root / "etc" / "os-release").write_text('NAME="Ubuntu"\nVERSION_ID="22.04"\n'
                                             'PRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    assert distro_name(str(root / "etc" / "os-release")) == "Ubuntu 22.04"
    (root / ".dockerenv").write_text("")
    assert container_kind({}, str(root)) == "docker"
    assert container_kind({"KUBERNETES_SERVICE_HOST": "10.0.0.1"}, str(root)) == "kubernetes"
    (root / ".dockerenv").unlink()
    (root / "proc" / "1").mkdir(parents=True)
    (root / "proc" / "1" / "cgroup").write_text("0::/kubepods/besteffort/pod1/abc\n")
    assert container_kind({}, str(root)) == "kubernetes"
    dmi = root / "sys" / "class" / "dmi" / "id"
    dmi.mkdir(parents=True)
    (dmi / "sys_vendor").write_text("QEMU\n")
    (dmi / "product_name").write_text("Standard PC (Q35 + ICH9, 2009)\n")
    assert virtualization(str(root)) == "kvm"
    (dmi / "sys_vendor").write_text("Supermicro\n")
    (dmi / "product_name").write_text("SYS-821GE-TNHR\n")
    (root / "proc" / "cpuinfo").write_text("flags\t\t: fpu vme de pse\n")
    assert virtualization(str(root)) is None
    groups = root / "sys" / "kernel" / "iommu_groups"
    (groups / "0").mkdir(parents=True)
    (groups / "0" / "type").write_text("DMA-FQ\n")
    assert iommu_translating(str(root)) is True
    (groups / "0" / "type").write_text("identity\n")
    assert iommu_translating(str(root)) is False


def test_secrets_never_enter_the_snapshot() -> None:
    env = {"NCCL_DEBUG": "INFO", "CUDA_VISIBLE_DEVICES": "0,1", "HF_TOKEN": "hf_x",
           "NCCL_IB_PASSWORD": "x", "TORCH_HOME": "/data", "PIP_INDEX_URL": "https://a:b@c/",
           "NVIDIA_API_KEY": "k", "CUDA_MIRROR": "https://u:p@mirror/"}
    assert relevant_env(env) == {"CUDA_MIRROR": "https://<redacted>@mirror/",
                                 "CUDA_VISIBLE_DEVICES": "0,1", "NCCL_DEBUG": "INFO",
                                 "TORCH_HOME": "/data"}


def test_packages_come_from_metadata_directories(tmp_path: Path) -> None:
    (tmp_path / "Foo_Bar-1.2.3.dist-info").mkdir()
    weird = tmp_path / "weird.dist-info"
    weird.mkdir()
    (weird / "METADATA").write_text("Metadata-Version: 2.1\nName: Weird.Pkg\nVersion: 0.1\n")
    (tmp_path / "old_style-2.0-py3.11.egg-info").mkdir()
    got = installed_packages([str(tmp_path)])
    assert got == {"foo-bar": "1.2.3", "old-style": "2.0", "weird-pkg": "0.1"}


def test_torch_facts_from_files_without_importing(tmp_path: Path) -> None:
    t = tmp_path / "torch"
    (t / "lib").mkdir(parents=True)
    (t / "__init__.py").write_text("raise SystemExit('must not be imported')\n")
    (t / "version.py").write_text("__version__ = '2.5.1+cu124'\ndebug = False\n"
                                  "cuda: Optional[str] = '12.4'\n")
    blob = (b"\x00" * 64 + b"garbage sm_ text\x00"
            + b"\x00sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90\x00" + b"\x00" * 64)
    (t / "lib" / "libtorch_python.so").write_bytes(blob)
    info = torch_from_files([str(tmp_path)], cache_dir=tmp_path / "cache")
    assert info is not None and info.version == "2.5.1+cu124" and info.cuda == "12.4"
    assert info.arch_list == ("sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90")
    assert (tmp_path / "cache" / "torch-arch.json").exists()
    # cached by size and mtime: a changed file is rescanned
    (t / "lib" / "libtorch_python.so").write_bytes(blob.replace(b"sm_90", b"sm_89"))
    os.utime(t / "lib" / "libtorch_python.so", ns=(1, 1))
    assert arch_list_of(t / "lib" / "libtorch_python.so", tmp_path / "cache")[-1] == "sm_89"


_TORCH_SAYS = ("import json, torch; print(json.dumps([torch.__version__, torch.version.cuda, "
               "torch.cuda.get_arch_list() if torch.cuda.is_available() else None]))")


def test_installed_torch_is_read_from_files_as_torch_reports_itself() -> None:
    """Whatever torch is installed (the CPU build in CI, a CUDA build on a GPU host), its
    files give the version, CUDA line and arch list that importing it gives."""
    pytest.importorskip("torch")
    import site

    info = torch_from_files(site.getsitepackages())
    proc = subprocess.run([sys.executable, "-c", _TORCH_SAYS], capture_output=True, text=True,
                          timeout=300, check=True)
    version, cuda, arch_list = json.loads(proc.stdout.strip().splitlines()[-1])
    assert info is not None and (info.version, info.cuda) == (version, cuda)
    if cuda is None:
        assert version.endswith("+cpu") and not info.arch_list
    if arch_list is not None:
        assert list(info.arch_list or ()) == arch_list


@pytest.mark.torch
def test_deep_probe_imports_torch_in_a_child(schema: dict) -> None:
    pytest.importorskip("torch")
    r = run_proc("snapshot", "--deep", timeout=300)
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    jsonschema.validate(doc, schema)
    assert doc["torch"]["source"] == "import"
    assert doc["torch"]["version"].startswith("2.")
    for lib in doc["libraries"]:
        assert lib["loaded"] in (True, False)  # the deep probe knows what was mapped
