"""The situations a newcomer's audit ran into (issue 33), each reproduced for real.

* a CUDA 13 toolkit in ``/etc/ld.so.conf.d`` beside a CUDA 12 lock: ``libcudart.so.13``
  cannot stand in for the wheel's ``libcudart.so.12``, so the build gate passes; a copy
  with the same soname that does come through ``ld.so.conf`` is fixed by editing that
  file and running ``ldconfig``, not by unsetting ``LD_LIBRARY_PATH``;
* a stated snapshot (``--gpu 'H800 PCIe:8' --driver ...``) has not seen the links, so
  they are unknown, not "no PCIe links";
* a CPU torch on 8 H20s is one finding, fixed from the lock first;
* a mixed RTX 3090 + 4090 + A6000 box gets one severity from every command.

Libraries are compiled with gcc, the loader cache is written by the real ``ldconfig``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from envlock.lock.io import load_lock
from envlock.probe.libraries import probe_libraries
from envlock.snapshot import Library
from support.cli import run_cli, run_proc

DATA = Path(__file__).resolve().parents[1] / "data"
NATIVE = Path(__file__).resolve().parents[1] / "support" / "native"
CU121 = DATA / "locks" / "cu121-h100-h20.lock"
GCC = shutil.which("gcc")
LDCONFIG = shutil.which("ldconfig") or next(
    (p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig") if os.path.exists(p)), None)


def _so(out: Path, soname: str, defines: Sequence[str] = ()) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(GCC), "-shared", "-fPIC", "-o", str(out), str(NATIVE / "fakecuda.c"),
                    *[f"-D{d}" for d in defines], f"-Wl,-soname,{soname}"],
                   check=True, capture_output=True)
    return out


def _wheel(site: Path, name: str, version: str, files: Sequence[Path]) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    rows = [f"{f.relative_to(site).as_posix()},sha256=AAAA,{f.stat().st_size}" for f in files]
    (info / "RECORD").write_text("\n".join(rows + [f"{info.name}/RECORD,,"]) + "\n")


def _ld_conf(root: Path, dirs: Dict[str, Path]) -> Path:
    """An /etc/ld.so.conf that includes ld.so.conf.d/*.conf, one file per directory, and
    the cache ldconfig builds from it."""
    etc = root / "etc"
    (etc / "ld.so.conf.d").mkdir(parents=True)
    conf = etc / "ld.so.conf"
    conf.write_text(f"include {etc}/ld.so.conf.d/*.conf\n")
    for fname, d in dirs.items():
        (etc / "ld.so.conf.d" / fname).write_text(f"# {fname}\n{d}\n")
    subprocess.run([str(LDCONFIG), "-X", "-f", str(conf), "-C", str(etc / "ld.so.cache")],
                   check=True, capture_output=True)
    return conf


def _ours(libs: Sequence[Library], root: Path) -> Tuple[Library, ...]:
    """The test's own copies: ldconfig always adds its trusted directories (/lib, /usr/lib
    and the multiarch ones) to a cache it builds, and a GPU host keeps CUDA libraries
    there (the lent H100 host's cache held its own libcudart)."""
    return tuple(x for x in libs if Path(x.path).is_relative_to(root))


def _snapshot_for(target_name: str, libraries: Sequence[object], tmp: Path,
                  env: Optional[Dict[str, str]] = None) -> Path:
    """A build host that installed exactly the lock target's packages."""
    lock = load_lock(str(CU121))
    target = lock.target(target_name)
    assert target is not None
    snap = json.loads((DATA / "snapshots" / "build-container.json").read_text())
    snap["packages"] = {p.name: p.version for p in target.packages if p.version}
    snap["libraries"] = [asdict(lib) for lib in libraries]  # type: ignore[call-overload]
    snap["env"] = env or {}
    path = tmp / "snap.json"
    path.write_text(json.dumps(snap))
    return path


needs_tools = pytest.mark.skipif(GCC is None or LDCONFIG is None, reason="needs gcc and ldconfig")


@needs_tools
def test_cuda13_toolkit_in_ld_so_conf_is_no_shadow_of_the_cuda12_wheel(tmp_path: Path) -> None:
    site = tmp_path / "site"
    wheel = _so(site / "nvidia/cuda_runtime/lib/libcudart.so.12", "libcudart.so.12",
                ["CUDART_CODE=12010"])
    _wheel(site, "nvidia-cuda-runtime-cu12", "12.1.105", [wheel])
    toolkit = tmp_path / "usr/local/cuda-13.0/lib"
    _so(toolkit / "libcudart.so.13", "libcudart.so.13", ["CUDART_CODE=13000"])
    conf = _ld_conf(tmp_path, {"cuda-13-0.conf": toolkit})
    libs = _ours(probe_libraries(env={}, site_dirs=[str(site)],
                                 ld_cache=str(conf.parent / "ld.so.cache"), cuda_roots=[],
                                 default_dirs=(), ld_so_conf=str(conf)), tmp_path)
    (system,) = [lib for lib in libs if lib.owner is None]
    # the probe says how the loader reaches it, and which file put it there
    assert (system.soname, system.via, system.via_source) == (
        "libcudart.so.13", "ld.so.cache", str(conf.parent / "ld.so.conf.d" / "cuda-13-0.conf"))
    snap = _snapshot_for("h100-sxm", libs, tmp_path)
    r = run_cli("verify", "--lock", str(CU121), "--target", "h100-sxm", "--snapshot", str(snap),
                "--stage", "build", "--json")
    doc = json.loads(r.out)
    assert r.code == 0, r.out  # the build gate passes
    assert [(f["id"], f["severity"]) for f in doc["findings"]] == [
        ("library-other-soname", "info")]
    assert "libcudart.so.13 13.0" in doc["findings"][0]["title"]


@needs_tools
def test_a_same_soname_copy_from_ld_so_conf_is_fixed_in_that_file(tmp_path: Path) -> None:
    site = tmp_path / "site"
    wheel = _so(site / "nvidia/cuda_runtime/lib/libcudart.so.12", "libcudart.so.12",
                ["CUDART_CODE=12010"])
    _wheel(site, "nvidia-cuda-runtime-cu12", "12.1.105", [wheel])
    toolkit = tmp_path / "usr/local/cuda-12.4/lib64"
    _so(toolkit / "libcudart.so.12", "libcudart.so.12", ["CUDART_CODE=12040"])
    conf = _ld_conf(tmp_path, {"cuda-12-4.conf": toolkit})
    libs = _ours(probe_libraries(env={}, site_dirs=[str(site)],
                                 ld_cache=str(conf.parent / "ld.so.cache"), cuda_roots=[],
                                 default_dirs=(), ld_so_conf=str(conf)), tmp_path)
    snap = _snapshot_for("h100-sxm", libs, tmp_path)
    r = run_cli("verify", "--lock", str(CU121), "--target", "h100-sxm", "--snapshot", str(snap),
                "--stage", "build", "--json")
    assert r.code == 1
    (f,) = json.loads(r.out)["findings"]
    assert f["id"] == "library-shadowed" and f["items"][0]["via"] == "ld.so.cache"
    conf_file = conf.parent / "ld.so.conf.d" / "cuda-12-4.conf"
    assert f["fix"] == [f"remove {toolkit} from {conf_file}, then run: sudo ldconfig"]
    assert not any("LD_LIBRARY_PATH" in x for x in f["fix"])


@needs_tools
def test_the_same_copy_on_ld_library_path_and_in_ld_preload(tmp_path: Path) -> None:
    site = tmp_path / "site"
    wheel = _so(site / "nvidia/cuda_runtime/lib/libcudart.so.12", "libcudart.so.12",
                ["CUDART_CODE=12010"])
    _wheel(site, "nvidia-cuda-runtime-cu12", "12.1.105", [wheel])
    other = _so(tmp_path / "opt/cuda/lib64/libcudart.so.12", "libcudart.so.12",
                ["CUDART_CODE=12040"])
    for env, fix in (({"LD_LIBRARY_PATH": str(other.parent)},
                      f"unset LD_LIBRARY_PATH or drop {other.parent} from it"),
                     ({"LD_PRELOAD": str(other)}, f"drop {other} from LD_PRELOAD")):
        libs = probe_libraries(env=env, site_dirs=[str(site)], ld_cache=str(tmp_path / "none"),
                               cuda_roots=[], default_dirs=(), ld_so_conf=str(tmp_path / "none"))
        sel = [lib for lib in libs if lib.selected]
        assert [(lib.path, lib.via) for lib in sel] == [(str(other), next(iter(env)))]
        snap = _snapshot_for("h100-sxm", libs, tmp_path, env)
        r = run_cli("verify", "--lock", str(CU121), "--target", "h100-sxm", "--snapshot",
                    str(snap), "--stage", "build", "--json")
        (f,) = json.loads(r.out)["findings"]
        assert (f["id"], f["fix"]) == ("library-shadowed", [fix])


# -- a stated snapshot ----------------------------------------------------------------------

def test_stated_h800_pcie_snapshot_leaves_links_unknown(tmp_path: Path) -> None:
    snap = tmp_path / "h800.json"
    r = run_cli("snapshot", "--gpu", "H800 PCIe:8", "--driver", "535.104.05", "-o", str(snap))
    assert r.code == 0, r.err
    doc = json.loads(snap.read_text())
    assert doc["links"] == []
    assert {k: doc["provenance"][k] for k in ("gpus", "driver", "links", "packages")} == {
        "gpus": "stated", "driver": "stated", "links": "not-recorded", "packages": "observed"}

    r = run_cli("doctor", "--snapshot", str(snap), "--json")
    out = json.loads(r.out)
    assert "nccl-p2p-hang-pcie-virtualized" not in {f["id"] for f in out["findings"]}
    unchecked = {a: n["reason"] for n in out["not_checked"] for a in n["advisories"]}
    assert "did not record the GPU links (stated hardware)" in \
        unchecked["nccl-p2p-hang-pcie-virtualized"]  # unknown, not ruled out

    # with the box's 28 PCIe (PXB) pairs recorded, the P2P hang applies, its workaround first
    doc["links"] = [{"a": a, "b": b, "kind": "PXB", "p2p": True}
                    for a in range(8) for b in range(a + 1, 8)]
    assert len(doc["links"]) == 28
    snap.write_text(json.dumps(doc))
    out = json.loads(run_cli("doctor", "--snapshot", str(snap), "--json").out)
    (hang,) = [f for f in out["findings"] if f["id"] == "nccl-p2p-hang-pcie-virtualized"]
    assert hang["fix"][0].startswith("export NCCL_P2P_DISABLE=1")


def test_old_stated_snapshots_read_links_as_unknown_and_gpus_are_never_assumed(
        tmp_path: Path) -> None:
    """A snapshot written before provenance existed: its hardware_source says enough."""
    doc = json.loads((DATA / "snapshots" / "h100-match.json").read_text())
    doc["hardware_source"], doc["links"] = "stated", []
    doc.pop("provenance", None)
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc))
    out = json.loads(run_cli("doctor", "--snapshot", str(old), "--json").out)
    reasons = " ".join(n["reason"] for n in out.get("not_checked", []))
    assert "did not record the GPU links" in reasons
    # a build host that stated only its driver recorded no GPUs: no CPU lock for it
    drv = tmp_path / "drv.json"
    assert run_cli("snapshot", "--driver", "535.104.05", "-o", str(drv)).code == 0
    r = run_cli("resolve", "--from-snapshot", str(drv), "--offline", "--dry-run")
    assert r.code == 2 and "did not record GPUs" in r.err


# -- one cause, one finding -----------------------------------------------------------------

def _h20_cpu_torch(tmp_path: Path) -> Dict[str, Path]:
    """8 H20s, the lock's packages installed but torch 2.13.0+cpu instead of its 2.1.2."""
    lock = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--gpu", "H20", "--torch", "==2.1.2", "--python", "3.11",
                "--offline", "-o", str(lock))
    assert r.code == 0, r.err
    (target,) = load_lock(str(lock)).targets
    snap = json.loads((DATA / "snapshots" / "h20-cublas121.json").read_text())
    assert [g["name"] for g in snap["gpus"]] == ["NVIDIA H20"] * 8
    snap["packages"] = {p.name: p.version for p in target.packages if p.version}
    snap["packages"]["torch"] = "2.13.0+cpu"
    snap["torch"] = {"version": "2.13.0+cpu", "cuda": None, "cudnn": None, "nccl": None,
                     "arch_list": [], "source": "files"}
    snap["libraries"] = []
    path = tmp_path / "h20.json"
    path.write_text(json.dumps(snap))
    return {"lock": lock, "snapshot": path}


def test_cpu_torch_on_8_h20_is_one_finding_fixed_from_the_lock(tmp_path: Path) -> None:
    w = _h20_cpu_torch(tmp_path)
    r = run_cli("verify", "--lock", str(w["lock"]), "--snapshot", str(w["snapshot"]), "--json")
    assert r.code == 1
    (f,) = json.loads(r.out)["findings"]
    assert f["title"] == ("torch 2.13.0+cpu installed, the lock has 2.1.2+cu121; "
                          "8 GPUs without kernels")
    # the lock's own pin first (this offline lock has no hashes: version and index), never
    # an unpinned torch or a new resolve
    assert f["fix"][0] == (f"pip install --no-deps --force-reinstall torch==2.1.2 "
                           f"--index-url https://pypi.org/simple")
    assert f["fix"][1].startswith("or reinstall the whole lock: ")
    # 13 pins go through a file the lock writes, not onto a line of 800 characters
    assert len(f["fix"][1]) < 300, f["fix"][1]
    export = f["fix"][1].split(": ", 1)[1].split(" && ")[0].split()
    assert export[:2] == ["envlock", "export"]
    r = run_cli(*export[1:-1], str(tmp_path / "fix.txt"))
    assert r.code == 0, r.err
    pins = [ln for ln in (tmp_path / "fix.txt").read_text().splitlines()
            if "==" in ln and not ln.startswith("#")]
    assert "torch==2.1.2" in pins and len(pins) == 13
    assert not any("envlock resolve" in x or "torch==<version>" in x for x in f["fix"])
    text = run_cli("verify", "--lock", str(w["lock"]), "--snapshot", str(w["snapshot"])).out
    assert text.count("ERROR") == 1 and len(text.splitlines()) <= 8, text


# -- one severity for one mixed box ---------------------------------------------------------

_SIGSEGV_LOG = "".join(f"[rank{r}]: Signal 11 (SIGSEGV) received by PID {100 + r}\n"
                       for r in range(3)) + \
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:\n"
_MIXED_IDS = ("gpu-mixed-capability", "multi-gpu-sigsegv-mixed-gpus")


def _mixed_box(tmp_path: Path) -> Dict[str, Path]:
    """RTX 3090 + 4090 + A6000 with the lock's torch (cu126, kernels for all three)."""
    box = tmp_path / "collected" / "box.json"
    box.parent.mkdir()
    assert run_cli("snapshot", "--gpu", "RTX 3090", "--gpu", "RTX 4090", "--gpu", "RTX A6000",
                   "--driver", "550.54.15", "-o", str(box)).code == 0
    lock = tmp_path / "envlock.lock"
    r = run_cli("resolve", "--from-snapshot", str(box), "--python", "3.11", "--offline",
                "-o", str(lock))
    assert r.code == 0, r.err
    (target,) = load_lock(str(lock)).targets
    assert target.torch is not None
    doc = json.loads(box.read_text())
    doc["packages"] = {p.name: p.version for p in target.packages if p.version}
    doc["python"]["version"] = "3.11.9"
    doc["torch"] = {"version": target.torch.installed_version, "cuda": target.torch.cuda,
                    "cudnn": None, "nccl": None, "arch_list": list(target.torch.arch_list or ()),
                    "source": "files"}
    doc["libraries"] = []
    doc["env"] = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    box.write_text(json.dumps(doc))
    log = tmp_path / "train.log"
    log.write_text(_SIGSEGV_LOG)
    return {"box": box, "lock": lock, "log": log, "glob": tmp_path / "collected" / "*.json"}


def _mixed(findings: List[dict]) -> List[str]:
    return [f["severity"] for f in findings if f["id"] in _MIXED_IDS]


def test_a_mixed_box_gets_one_severity_from_every_command(tmp_path: Path) -> None:
    w = _mixed_box(tmp_path)
    r = run_cli("verify", "--lock", str(w["lock"]), "--snapshot", str(w["box"]), "--json")
    assert (r.code, _mixed(json.loads(r.out)["findings"])) == (0, ["warning"]), r.out
    r = run_cli("doctor", "--snapshot", str(w["box"]), "--json")
    assert (r.code, _mixed(json.loads(r.out)["findings"])) == (0, ["warning"]), r.out
    assert run_cli("doctor", "--snapshot", str(w["box"]), "--strict").code == 1
    r = run_cli("fleet", "--snapshots", str(w["glob"]), "--json")
    assert _mixed(json.loads(r.out)["findings"]) == ["warning"], r.out
    assert r.code == 0
    r = run_cli("fleet", "--snapshots", str(w["glob"]), "--lock", str(w["lock"]), "--json")
    assert _mixed(json.loads(r.out)["findings"]) == ["warning"], r.out
    assert r.code == 0

    # a log where every rank died of SIGSEGV: then it did block training
    r = run_cli("doctor", "--snapshot", str(w["box"]), "--log", str(w["log"]), "--json")
    assert _mixed(json.loads(r.out)["findings"]) == ["error"]
    text = run_cli("doctor", "--snapshot", str(w["box"]), "--log", str(w["log"])).out
    assert text.splitlines()[0].endswith("1 problem, 1 blocks training"), text

    # --together is for a fleet of one-model machines; its help sends mixed boxes elsewhere
    r = run_proc("resolve", "--help")
    together = " ".join(r.out.split()).split("--together ", 1)[1][:400]
    assert "one GPU model per machine" in together and "--from-snapshot" in together


# -- the smaller items ----------------------------------------------------------------------

def test_gpu_not_in_lock_names_every_model(tmp_path: Path) -> None:
    doc = json.loads((DATA / "snapshots" / "mixed-h100-a100.json").read_text())
    doc["gpus"][7].update(name="NVIDIA GeForce RTX 4090", compute_capability="8.9",
                          memory_mib=24564)
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    r = run_cli("verify", "--lock", str(DATA / "locks" / "h100-pypi.lock"), "--snapshot",
                str(path), "--json")
    (f,) = [f for f in json.loads(r.out)["findings"] if f["id"] == "gpu-not-in-lock"]
    assert f["title"] == ("NVIDIA A100-SXM4-80GB (GPUs 4-6), NVIDIA GeForce RTX 4090 (GPU 7) "
                          "are not GPUs the lock target h100-sxm was resolved for")
    assert f["fix"] == ["envlock resolve --gpu 'A100 SXM4 80GB' --gpu 'GeForce RTX 4090' "
                        "(or --together) to lock for them"]


def test_build_stage_does_not_judge_the_build_containers_shm(tmp_path: Path) -> None:
    doc = json.loads((DATA / "snapshots" / "build-container.json").read_text())
    doc["host"]["shm_bytes"] = 64 * 1024 * 1024  # docker build's default
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    lock = str(DATA / "locks" / "h100-pypi.lock")

    def ids(stage: str) -> List[str]:
        r = run_cli("verify", "--lock", lock, "--snapshot", str(path), "--stage", stage, "--json")
        return [f["id"] for f in json.loads(r.out)["findings"]]

    assert "dev-shm-too-small-container" not in ids("build")
    assert "dev-shm-too-small-container" in ids("runtime")  # where the job runs, it matters


def test_doctor_with_the_lock_fixes_from_it_first(tmp_path: Path) -> None:
    w = _h20_cpu_torch(tmp_path)
    plain = json.loads(run_cli("doctor", "--snapshot", str(w["snapshot"]), "--json").out)
    (f,) = [f for f in plain["findings"] if f["id"] == "cpu-only-torch-on-gpu-host"]
    assert "torch==<version>" in f["fix"][0]  # without a lock, only the generic fix
    r = run_cli("doctor", "--snapshot", str(w["snapshot"]), "--lock", str(w["lock"]), "--json")
    (f,) = [f for f in json.loads(r.out)["findings"] if f["id"] == "cpu-only-torch-on-gpu-host"]
    assert f["fix"][0] == ("pip install --no-deps --force-reinstall torch==2.1.2 "
                           "--index-url https://pypi.org/simple")
    assert r.code == 1
    r = run_cli("doctor", "--snapshot", str(w["snapshot"]), "--target", "h20")
    assert r.code == 2 and "--lock" in r.err


def test_fleet_reads_what_a_snapshot_did_not_record_as_unknown(tmp_path: Path) -> None:
    """A node stated with only its GPUs recorded no driver: unknown, not a driver drift."""
    d = tmp_path / "c"
    d.mkdir()
    for name, extra in (("a", ["--driver", "550.54.15"]), ("b", ["--driver", "550.54.15"]),
                        ("c", [])):
        assert run_cli("snapshot", "--gpu", "H100:8", *extra, "-o", str(d / f"{name}.json")
                       ).code == 0
    r = run_cli("fleet", "--snapshots", str(d / "*.json"), "--json")
    ids = {f["id"]: f for f in json.loads(r.out)["findings"]}
    assert "fleet-drift" not in ids, r.out
    assert "driver" in json.dumps(ids["fleet-unknown"])


def test_cublas_and_cublaslt_of_one_wheel_at_another_version_are_one_finding(
        tmp_path: Path) -> None:
    doc = json.loads((DATA / "snapshots" / "h100-match.json").read_text())
    for lib in doc["libraries"]:
        if lib["name"] in ("cublas", "cublasLt"):
            lib["version"] = "12.1.3.1"
    path = tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    r = run_cli("verify", "--lock", str(DATA / "locks" / "h100-pypi.lock"), "--snapshot",
                str(path), "--json")
    (f,) = [f for f in json.loads(r.out)["findings"] if f["id"] == "library-version"]
    assert f["title"] == ("libcublas, libcublasLt 12.1.3.1 would load, the lock expects "
                          "12.4.5.8")
    lock = DATA / "locks" / "h100-pypi.lock"
    assert f["fix"] == [f"envlock export --lock {lock} --format requirements --only "
                        f"nvidia-cublas-cu12 -o envlock-fix.txt && pip install --no-deps "
                        f"--force-reinstall --require-hashes -r envlock-fix.txt"]


@pytest.mark.parametrize(("via", "source", "fix"), [
    ("LD_LIBRARY_PATH", None, "unset LD_LIBRARY_PATH or drop /opt/cuda/lib64 from it"),
    ("ld.so.cache", "/etc/ld.so.conf.d/cuda-12-4.conf",
     "remove /opt/cuda/lib64 from /etc/ld.so.conf.d/cuda-12-4.conf, then run: sudo ldconfig"),
    ("LD_PRELOAD", None, "drop /opt/cuda/lib64/libcudart.so.12 from LD_PRELOAD"),
    ("RPATH", "/opt/app/libapp.so", "/opt/app/libapp.so has /opt/cuda/lib64 in its RPATH: "
     "rebuild it with RUNPATH or without that directory (patchelf --remove-rpath)"),
    (None, None, "drop /opt/cuda/lib64 from LD_LIBRARY_PATH, or remove it from the "
     "/etc/ld.so.conf.d file that lists it and run: sudo ldconfig"),
])
def test_a_shadow_is_fixed_where_it_comes_from(via: Optional[str], source: Optional[str],
                                               fix: str) -> None:
    from envlock.checks.fixes import loader_path_fix
    from envlock.snapshot import Library

    lib = Library("cudart", "12.4", "/opt/cuda/lib64/libcudart.so.12", selected=True,
                  via=via, via_source=source)
    assert loader_path_fix(lib, {}) == fix
