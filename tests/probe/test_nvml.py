"""The NVML probe against a fake libnvidia-ml.so.1 (tests/support/fake_nvml.c).

Each scenario runs ``probe_nvml()`` in a child Python whose loader finds the fake where it
would find NVIDIA's library, so the real ``pynvml`` binding makes every call: symbol
names, argument passing and struct layouts are exercised, not mocked.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from envlock.probe.driverfs import (
    driver_from_proc,
    driver_from_sysfs,
    gpus_from_sysfs,
    normalize_bus_id,
)
from envlock.snapshot import GpuInfo
from support.fakenvml import (
    H20_HGX,
    LOST_GPU,
    MIXED_PCIE,
    build_fake_nvml,
    compiler,
    run_probe,
    scenario_file,
)

H20_BUSES = ["18", "2a", "3a", "5d", "9a", "ab", "ba", "db"]
NOT_FOUND_NOTE = ("nvml: libnvidia-ml.so.1 could not be loaded (no NVIDIA driver installed, "
                  "or its library is not on the loader path)")
LOST_NOTE = ("nvml: gpu 3 is lost (NVML_ERROR_GPU_IS_LOST): it fell off the bus and needs "
             "a reset or a reboot")


@pytest.fixture(scope="module")
def libdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if compiler() is None:
        pytest.skip("no C compiler (gcc or $CC) to build the fake libnvidia-ml.so.1")
    # the session's base temp dir: every module that builds the fake shares one build
    return build_fake_nvml(tmp_path_factory.getbasetemp())


def probe(libdir: Path, tmp_path: Path, text: str, **kwargs: Any) -> Dict[str, Any]:
    """The report for a scenario; the fake's log proves init and shutdown were paired.

    The fallback files default to paths that do not exist, so a real driver on the test
    machine cannot leak into a result.
    """
    kwargs.setdefault("proc_version", str(tmp_path / "no-proc-version"))
    kwargs.setdefault("sysfs_version", str(tmp_path / "no-sysfs-version"))
    log = tmp_path / "nvml.log"
    result = run_probe(libdir, scenario_file(tmp_path, text), log=log, **kwargs)
    assert result["stderr"] == ""
    assert result["torch_imported"] is False
    events = log.read_text().split() if log.exists() else []
    assert events in ([], ["init", "shutdown"]), events
    result["initialised"] = events == ["init", "shutdown"]
    report: Dict[str, Any] = result["report"]
    report["initialised"] = result["initialised"]
    return report


def gpu(index: int, name: Optional[str], uuid: Optional[str], cc: Optional[str],
        mem: Optional[int], bus: Optional[str], mig: Optional[bool] = False,
        lost: Optional[bool] = False) -> Dict[str, Any]:
    return {"index": index, "name": name, "uuid": uuid, "compute_capability": cc,
            "memory_mib": mem, "pci_bus_id": bus, "mig": mig, "lost": lost}


def link(a: int, b: int, kind: Optional[str], p2p: Optional[bool]) -> Dict[str, Any]:
    return {"a": a, "b": b, "kind": kind, "p2p": p2p}


def driver(version: Optional[str] = None, cuda: Optional[str] = None,
           fabric: Optional[str] = None, error: Optional[str] = None,
           source: Optional[str] = None) -> Dict[str, Any]:
    return {"version": version, "cuda": cuda, "fabric_manager": fabric, "error": error,
            "source": source}


def two_gpus(*extra: str) -> str:
    lines = ["driver 550.54.15", "cuda 12040", "topo_all SYS", "p2p_all 0",
             'gpu 0 name="NVIDIA H100 80GB HBM3" uuid=GPU-0 cc=9.0 mem=81559 '
             "bus=00000000:18:00.0 mig=0",
             'gpu 1 name="NVIDIA H100 80GB HBM3" uuid=GPU-1 cc=9.0 mem=81559 '
             "bus=00000000:2A:00.0 mig=0"]
    return "\n".join(lines + list(extra)) + "\n"


# -- scenario 1: HGX H20 ---------------------------------------------------------------

def test_hgx_h20_nvswitch_fabric_running(libdir: Path, tmp_path: Path) -> None:
    result = run_probe(libdir, scenario_file(tmp_path, H20_HGX), log=tmp_path / "log",
                       proc_version=str(tmp_path / "none"), sysfs_version=str(tmp_path / "none"))
    report = result["report"]
    assert report["driver"] == driver("535.104.05", "12.2", "running", source="nvml")
    assert report["gpus"] == [
        gpu(i, "NVIDIA H20", f"GPU-{i:08x}-aaaa-bbbb-cccc-{i:012x}", "9.0", 97871,
            f"0000:{bus}:00.0")
        for i, bus in enumerate(H20_BUSES)
    ]
    assert len(report["links"]) == 28
    assert report["links"] == [link(a, b, "NVSWITCH", True)
                               for a in range(8) for b in range(a + 1, 8)]
    assert report["notes"] == []
    # initialised once, shut down once; no torch; quick against the fake
    assert (tmp_path / "log").read_text() == "init\nshutdown\n"
    assert result["torch_imported"] is False
    assert result["seconds"] < 1.0


def test_nvswitch_found_by_bus_id_when_remote_type_is_missing(libdir: Path,
                                                              tmp_path: Path) -> None:
    # an NVML without nvmlDeviceGetNvLinkRemoteDeviceType: the far end of each link is
    # not one of the GPUs, so it is a switch
    text = H20_HGX + "".join(f"error {i} remotetype 13\n" for i in range(8))
    report = probe(libdir, tmp_path, text)
    assert report["links"] == [link(a, b, "NVSWITCH", True)
                               for a in range(8) for b in range(a + 1, 8)]
    assert report["notes"] == []


# -- scenario 2: PCIe workstation ---------------------------------------------------------

def test_mixed_pcie_workstation(libdir: Path, tmp_path: Path) -> None:
    report = probe(libdir, tmp_path, MIXED_PCIE)
    assert report["initialised"]
    assert report["driver"] == driver("550.54.15", "12.4", "not-applicable", source="nvml")
    assert report["gpus"] == [
        gpu(0, "NVIDIA RTX A6000", "GPU-a6000000-0000-0000-0000-000000000000", "8.6", 49140,
            "0000:17:00.0"),
        gpu(1, "NVIDIA GeForce RTX 3090", "GPU-30900000-0000-0000-0000-000000000000", "8.6",
            24576, "0000:1b:00.0"),
        gpu(2, "NVIDIA GeForce RTX 2080 Ti", "GPU-20800000-0000-0000-0000-000000000000",
            "7.5", 11264, "0000:b3:00.0"),
    ]
    assert report["links"] == [
        link(0, 1, "PIX", True),    # P2P status OK
        link(0, 2, "PHB", False),   # NVML_P2P_STATUS_GPU_NOT_SUPPORTED
        link(1, 2, "SYS", None),    # the query itself: NVML_ERROR_NOT_SUPPORTED
    ]
    assert report["notes"] == []


def test_every_topology_level_maps_to_its_nvidia_smi_word(libdir: Path,
                                                          tmp_path: Path) -> None:
    gpus = [f'gpu {i} name="Tesla T4" uuid=GPU-{i} cc=7.5 mem=15360 '
            f"bus=00000000:{0x10 + i:02X}:00.0 mig=-1" for i in range(4)]
    pairs = {(0, 1): "INTERNAL", (0, 2): "SINGLE", (0, 3): "MULTIPLE",
             (1, 2): "HOSTBRIDGE", (1, 3): "NODE", (2, 3): "SYSTEM"}
    text = "\n".join(["driver 535.104.05", "cuda 12020", "p2p_all 0"] + gpus
                     + [f"topo {a} {b} {level}" for (a, b), level in pairs.items()])
    report = probe(libdir, tmp_path, text)
    assert [(x["a"], x["b"], x["kind"]) for x in report["links"]] == [
        (0, 1, "PIX"), (0, 2, "PIX"), (0, 3, "PXB"), (1, 2, "PHB"), (1, 3, "NODE"),
        (2, 3, "SYS")]
    assert [g["mig"] for g in report["gpus"]] == [False] * 4  # MIG unsupported: off


@pytest.mark.parametrize("hide_type", [False, True])
def test_direct_nvlink_pairs(libdir: Path, tmp_path: Path, hide_type: bool) -> None:
    # 0=1 and 2=3 bridged, 4 and 5 on NVSwitches, the rest over PCIe
    gpus = [f'gpu {i} name="NVIDIA A100-SXM4-40GB" uuid=GPU-{i} cc=8.0 mem=40960 '
            f"bus=00000000:{0x20 + i:02X}:00.0 mig=0" for i in range(6)]
    lines = ["driver 535.104.05", "cuda 12020", "topo_all SYS", "p2p_all 0"] + gpus
    lines += ["nvlink 0 1 4", "nvlink 2 3 12", "nvswitch 4 6", "nvswitch 5 6"]
    if hide_type:
        lines += [f"error {i} remotetype 13" for i in range(6)]
    report = probe(libdir, tmp_path, "\n".join(lines))
    kinds = {(x["a"], x["b"]): x["kind"] for x in report["links"]}
    assert kinds[(0, 1)] == "NVLINK"
    assert kinds[(2, 3)] == "NVLINK"
    assert kinds[(4, 5)] == "NVSWITCH"
    assert {k for pair, k in kinds.items() if pair not in {(0, 1), (2, 3), (4, 5)}} == {"SYS"}
    assert len(kinds) == 15
    assert report["notes"] == []


# -- scenario 3 and 7: initialisation failures ---------------------------------------------

@pytest.mark.parametrize("code, error, note", [
    (9, "driver-not-loaded", "nvml: the NVIDIA kernel module is not loaded"),
    (18, "library-mismatch", "nvml: libnvidia-ml.so.1 does not match the loaded kernel "
                             "module (driver upgraded without a reboot?)"),
    (4, "no-permission", "nvml: no permission to open the NVIDIA device files"),
    (14, "unknown", "nvml: initialisation failed: Corrupted infoROM"),
    (999, "unknown", "nvml: initialisation failed: Unknown Error"),
])
def test_init_errors(libdir: Path, tmp_path: Path, code: int, error: str, note: str) -> None:
    report = probe(libdir, tmp_path, two_gpus(f"init_error {code}"))
    assert report["driver"] == driver(error=error)
    assert report["gpus"] == []
    assert report["links"] == []
    assert report["notes"] == [note]
    assert not report["initialised"]  # and so no nvmlShutdown


def test_library_mismatch_reads_the_kernel_module_version(libdir: Path,
                                                          tmp_path: Path) -> None:
    proc = tmp_path / "version"
    proc.write_text("NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 "
                    "22:23:56 UTC 2024\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
    report = probe(libdir, tmp_path, two_gpus("init_error 18"), proc_version=str(proc))
    assert report["driver"] == driver("550.54.15", error="library-mismatch", source="proc")


# -- scenario 4: a lost GPU ----------------------------------------------------------------

def test_lost_gpu_on_its_handle(libdir: Path, tmp_path: Path) -> None:
    report = probe(libdir, tmp_path, LOST_GPU)
    assert report["initialised"]
    assert report["driver"] == driver("535.104.05", "12.2", "not-applicable", source="nvml")
    a100 = [gpu(i, "NVIDIA A100-SXM4-80GB", f"GPU-{i:08x}-1111-2222-3333-{i:012x}", "8.0",
                81920, f"0000:{bus}:00.0") for i, bus in enumerate(["07", "0f", "47"])]
    assert report["gpus"] == a100 + [gpu(3, None, None, None, None, None, None, lost=True)]
    assert report["links"] == [
        link(0, 1, "NODE", True), link(0, 2, "NODE", True), link(0, 3, None, None),
        link(1, 2, "NODE", True), link(1, 3, None, None), link(2, 3, None, None)]
    assert report["notes"] == [LOST_NOTE]


def test_lost_gpu_on_its_queries(libdir: Path, tmp_path: Path) -> None:
    # the handle is given, then every query on it says GPU_IS_LOST
    report = probe(libdir, tmp_path, LOST_GPU.replace("lost=1", "lost=2"))
    assert report["gpus"][3] == gpu(3, None, None, None, None, None, None, lost=True)
    assert [g["lost"] for g in report["gpus"]] == [False, False, False, True]
    assert report["gpus"][0]["compute_capability"] == "8.0"
    assert [x["kind"] for x in report["links"]] == ["NODE", "NODE", None, "NODE", None, None]
    assert report["notes"] == [LOST_NOTE]


# -- scenario 5: no library at all ---------------------------------------------------------

def test_library_not_found(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run_probe(empty, tmp_path / "unused", hide_system=True,
                       proc_version=str(tmp_path / "none"), sysfs_version=str(tmp_path / "none"))
    assert result["report"] == {"driver": driver(error="not-found"), "gpus": [], "links": [],
                                "notes": [NOT_FOUND_NOTE]}


@pytest.mark.parametrize("which", ["proc", "sysfs"])
def test_library_not_found_falls_back_to_kernel_files(tmp_path: Path, which: str) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    proc, sysfs = tmp_path / "proc-version", tmp_path / "sysfs-version"
    if which == "proc":
        proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  "
                        "Release Build  (dvs-builder@U16-I3-B03-4-3)  Thu Jan 23 2025\n")
    sysfs.write_text("565.57.01\n")
    result = run_probe(empty, tmp_path / "unused", hide_system=True,
                       proc_version=str(proc), sysfs_version=str(sysfs))
    expected = "570.86.15" if which == "proc" else "565.57.01"
    assert result["report"]["driver"] == driver(expected, error="not-found", source=which)


# -- partial results -------------------------------------------------------------------------

def test_unreadable_fields_are_none_with_notes(libdir: Path, tmp_path: Path) -> None:
    text = two_gpus("error 0 mem 3", "error 0 uuid 999", "error 1 mig 999", "error 1 pci 2",
                    "cuda_error 3").replace("bus=00000000:2A:00.0 mig=0",
                                            "bus=00000000:2A:00.0 mig=1")
    report = probe(libdir, tmp_path, text)
    assert report["driver"] == driver("550.54.15", None, "not-applicable", source="nvml")
    assert report["gpus"] == [
        gpu(0, "NVIDIA H100 80GB HBM3", None, "9.0", None, "0000:18:00.0", mig=False),
        gpu(1, "NVIDIA H100 80GB HBM3", "GPU-1", "9.0", 81559, None, mig=None),
    ]
    assert report["notes"] == [
        "nvml: CUDA driver version: Not Supported",
        "nvml: gpu 0: uuid: Unknown Error",
        "nvml: gpu 0: memory: Not Supported",
        "nvml: gpu 1: pci info: Invalid Argument",
        "nvml: gpu 1: MIG mode: Unknown Error",
    ]


def test_mig_enabled(libdir: Path, tmp_path: Path) -> None:
    report = probe(libdir, tmp_path, two_gpus().replace("2A:00.0 mig=0", "2A:00.0 mig=1"))
    assert [g["mig"] for g in report["gpus"]] == [False, True]


def test_gpu_count_failure_keeps_the_driver(libdir: Path, tmp_path: Path) -> None:
    report = probe(libdir, tmp_path, two_gpus("count_error 999"))
    assert report["driver"] == driver("550.54.15", "12.4", source="nvml")
    assert report["gpus"] == [] and report["links"] == []
    assert report["notes"] == ["nvml: GPU count: Unknown Error"]
    assert report["initialised"]


def test_gpu_lost_while_links_are_read(libdir: Path, tmp_path: Path) -> None:
    report = probe(libdir, tmp_path, two_gpus("error 1 topo 15", "error 1 p2p 15"))
    assert [g["lost"] for g in report["gpus"]] == [False, False]
    assert report["links"] == [link(0, 1, None, None)]
    assert report["notes"] == ["nvml: the link 0-1 is unknown: a GPU was lost"]


# -- fabric manager ------------------------------------------------------------------------

@pytest.mark.parametrize("lines, state, notes", [
    (["fabric 0 state=3 status=0", "fabric 1 state=3 status=0"], "running", []),
    (["fabric_v 0", "fabric 0 state=3 status=0", "fabric 1 state=3 status=0"], "running", []),
    (["fabric 0 state=0 status=0", "fabric 1 state=3 status=0"], "running", []),
    ([], "not-applicable", []),
    (["fabric 0 state=0 status=0", "fabric 1 state=0 status=0"], "not-applicable", []),
    (["fabric 0 state=3 status=0", "fabric 1 state=1 status=0"], "not-running",
     ["nvml: gpu 1: fabric registration has not started (is nvidia-fabricmanager running?)"]),
    (["fabric 0 state=3 status=999", "fabric 1 state=3 status=0"], "not-running",
     ["nvml: gpu 0: fabric registration failed: Unknown Error"]),
    (["fabric 0 state=2 status=0", "fabric 1 state=3 status=0"], None,
     ["nvml: gpu 0: fabric registration is in progress"]),
    (["error 0 fabric 999", "fabric 1 state=3 status=0"], None,
     ["nvml: gpu 0: fabric state: Unknown Error"]),
    (["fabric_v 0", "error 0 fabric 13", "error 1 fabric 13"], None,
     ["nvml: this driver has no fabric query"]),
], ids=["running", "legacy-call", "running-and-n/a", "unsupported", "state-n/a",
        "not-started", "failed", "in-progress", "unknown", "old-driver"])
def test_fabric_manager_state(libdir: Path, tmp_path: Path, lines: List[str],
                              state: Optional[str], notes: List[str]) -> None:
    report = probe(libdir, tmp_path, two_gpus(*lines, "nvswitch 0", "nvswitch 1"))
    assert report["driver"]["fabric_manager"] == state
    assert report["notes"] == notes
    assert report["links"] == [link(0, 1, "NVSWITCH", True)]


#: The last nvidia-ml-py whose unversioned ``c_nvmlGpuFabricInfo_t`` has an 80-byte uuid
#: (13.615 has nvml.h's 16): found on a real H100 host, where the legacy call read back
#: "not supported" for every state.
OLD_PYNVML = "nvidia-ml-py==13.610.43"


@pytest.mark.online
@pytest.mark.parametrize("lines, state", [
    (["fabric_v 0", "fabric 0 state=3 status=0", "fabric 1 state=1 status=0"], "not-running"),
    (["fabric_v 0", "fabric 0 state=3 status=0", "fabric 1 state=3 status=0"], "running"),
    (["fabric 0 state=3 status=0", "fabric 1 state=1 status=0"], "not-running"),
], ids=["legacy-not-started", "legacy-running", "versioned-not-started"])
def test_fabric_state_does_not_depend_on_pynvml_struct_layouts(
        libdir: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, lines: List[str], state: str) -> None:
    """With a pynvml whose legacy structure is wrong, a fabric manager that is down is
    still ``not-running``: the probe passes nvml.h's layouts, never pynvml's."""
    where = tmp_path_factory.getbasetemp() / "old-pynvml"
    if not (where / "pynvml.py").exists():
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps",
                               "--disable-pip-version-check", "--target", str(where),
                               OLD_PYNVML], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            pytest.skip(f"PyPI is unreachable ({OLD_PYNVML}): {proc.stderr.strip()[-200:]}")
    monkeypatch.setenv("PYTHONPATH", str(where))  # the child probe imports that pynvml
    report = probe(libdir, tmp_path, two_gpus(*lines, "nvswitch 0", "nvswitch 1"))
    assert report["driver"]["fabric_manager"] == state


# -- the module itself -------------------------------------------------------------------------

def test_importing_the_probe_loads_neither_pynvml_nor_torch() -> None:
    code = ("import sys, envlock.probe.nvml, envlock.probe.driverfs; "
            "print(sorted(m for m in ('pynvml', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


# -- scenario 6: driverfs ------------------------------------------------------------------

@pytest.mark.parametrize("text, version", [
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC "
     "2023\nGCC version:  gcc version 11.4.0 (Ubuntu 11.4.0-1ubuntu1~22.04)\n", "535.104.05"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  "
     "(dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024\n", "550.54.15"),
    ("NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.86.10  Release Build  "
     "(dvs-builder@U16-I3-B03-4-3)\n", "570.86.10"),
    ("NVRM version: NVIDIA UNIX aarch64 Kernel Module  470.256.02  Thu May  2 14:37:44 UTC "
     "2024\n", "470.256.02"),
    ("GCC version:  gcc version 12.2.0\n", None),
    ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  banana  Sat Aug 19\n", None),
    ("", None),
])
def test_driver_from_proc(tmp_path: Path, text: str, version: Optional[str]) -> None:
    path = tmp_path / "version"
    path.write_text(text)
    assert driver_from_proc(str(path)) == version


def test_driverfs_missing_or_unreadable_files(tmp_path: Path) -> None:
    assert driver_from_proc(str(tmp_path / "missing")) is None
    assert driver_from_sysfs(str(tmp_path / "missing")) is None
    assert driver_from_proc(str(tmp_path)) is None  # a directory
    binary = tmp_path / "binary"
    binary.write_bytes(b"\xff\xfe\x00NVRM")
    assert driver_from_proc(str(binary)) is None
    assert gpus_from_sysfs(str(tmp_path / "missing")) == ()


@pytest.mark.parametrize("text, version", [
    ("535.104.05\n", "535.104.05"), ("570.86\n", "570.86"), ("", None), ("not a version\n", None),
])
def test_driver_from_sysfs(tmp_path: Path, text: str, version: Optional[str]) -> None:
    path = tmp_path / "version"
    path.write_text(text)
    assert driver_from_sysfs(str(path)) == version


def test_gpus_from_sysfs(tmp_path: Path) -> None:
    devices = {
        "0000:b3:00.0": ("0x10de", "0x030000"),  # GPU, VGA controller
        "0000:b3:00.1": ("0x10de", "0x040300"),  # its HDMI audio function
        "0000:18:00.0": ("0x10de", "0x030200"),  # GPU, 3D controller
        "0000:c1:00.0": ("0x10de", "0x068000"),  # NVSwitch (bridge class)
        "0000:00:02.0": ("0x8086", "0x030000"),  # Intel iGPU
        "0000:00:1f.0": ("0x8086", "0x060100"),
    }
    for name, (vendor, cls) in devices.items():
        d = tmp_path / name
        d.mkdir()
        (d / "vendor").write_text(vendor + "\n")
        (d / "class").write_text(cls + "\n")
    (tmp_path / "0000:00:03.0").mkdir()  # unreadable: no vendor file
    assert gpus_from_sysfs(str(tmp_path)) == (
        GpuInfo(index=0, pci_bus_id="0000:18:00.0"),
        GpuInfo(index=1, pci_bus_id="0000:b3:00.0"),
    )


@pytest.mark.parametrize("text, expected", [
    ("00000000:1B:00.0", "0000:1b:00.0"),
    ("0000:18:00.0", "0000:18:00.0"),
    ("0001:C1:1f.7", "0001:c1:1f.7"),
    ("18:00.0", None),
    ("00000000:1B:00.8", None),
    ("", None),
    (None, None),
])
def test_normalize_bus_id(text: Optional[str], expected: Optional[str]) -> None:
    assert normalize_bus_id(text) == expected
