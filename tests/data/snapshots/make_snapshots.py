"""Regenerate the snapshot fixtures in this folder (run by hand; pytest only reads them).

    .venv/bin/python tests/data/snapshots/make_snapshots.py

Each fixture is a realistic ``envlock.snapshot/1`` document built from one healthy base
(8x H100 SXM matching ``tests/data/locks/h100-pypi.lock``: torch 2.5.1 cu124) plus the
drift it is about. Review the diff after regenerating.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
SITE = "/opt/venv/lib/python3.11/site-packages"

LOCKED = {
    "filelock": "3.16.1", "fsspec": "2024.10.0", "jinja2": "3.1.4", "markupsafe": "3.0.2",
    "mpmath": "1.3.0", "networkx": "3.4.2", "nvidia-cublas-cu12": "12.4.5.8",
    "nvidia-cuda-cupti-cu12": "12.4.127", "nvidia-cuda-nvrtc-cu12": "12.4.127",
    "nvidia-cuda-runtime-cu12": "12.4.127", "nvidia-cudnn-cu12": "9.1.0.70",
    "nvidia-cufft-cu12": "11.2.1.3", "nvidia-curand-cu12": "10.3.5.147",
    "nvidia-cusolver-cu12": "11.6.1.9", "nvidia-cusparse-cu12": "12.3.1.170",
    "nvidia-nccl-cu12": "2.21.5", "nvidia-nvjitlink-cu12": "12.4.127",
    "nvidia-nvtx-cu12": "12.4.127", "sympy": "1.13.1", "torch": "2.5.1",
    "triton": "3.1.0", "typing-extensions": "4.12.2",
}


def lib(name: str, version: str, sub: str, soname: str, owner: str | None = None,
        selected: bool = True, path: str | None = None) -> Dict[str, Any]:
    return {"name": name, "version": version,
            "path": path or f"{SITE}/nvidia/{sub}/lib/{soname}",
            "owner": owner, "selected": selected, "loaded": None}


def base() -> Dict[str, Any]:
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-0000000{i}-h100",
             "compute_capability": "9.0", "memory_mib": 81559,
             "pci_bus_id": f"0000:{0x18 + 0x10 * i:02x}:00.0", "mig": False, "lost": False}
            for i in range(8)]
    links = [{"a": a, "b": b, "kind": "NVSWITCH", "p2p": True}
             for a in range(8) for b in range(a + 1, 8)]
    return {
        "schema": "envlock.snapshot/1", "taken_at": "2026-11-21T08:00:00Z",
        "host": {"hostname": "node01", "os": "linux", "distro": "Ubuntu 22.04",
                 "kernel": "5.15.0-105-generic", "machine": "x86_64", "glibc": "2.35",
                 "container": "docker", "virtualization": None, "iommu": False,
                 "shm_bytes": 17179869184, "cpu_count": 128},
        "python": {"version": "3.11.9", "implementation": "CPython",
                   "executable": "/opt/venv/bin/python"},
        "driver": {"version": "550.54.15", "cuda": "12.4", "fabric_manager": "running",
                   "error": None, "source": "nvml"},
        "gpus": gpus, "links": links, "packages": dict(LOCKED),
        "libraries": [
            lib("cublas", "12.4.5.8", "cublas", "libcublas.so.12", "nvidia-cublas-cu12"),
            lib("cublasLt", "12.4.5.8", "cublas", "libcublasLt.so.12", "nvidia-cublas-cu12"),
            lib("cudart", "12.4.127", "cuda_runtime", "libcudart.so.12",
                "nvidia-cuda-runtime-cu12"),
            lib("cudnn", "9.1.0.70", "cudnn", "libcudnn.so.9", "nvidia-cudnn-cu12"),
            lib("nccl", "2.21.5", "nccl", "libnccl.so.2", "nvidia-nccl-cu12"),
            lib("nvjitlink", "12.4.127", "nvjitlink", "libnvJitLink.so.12",
                "nvidia-nvjitlink-cu12"),
        ],
        "torch": {"version": "2.5.1+cu124", "cuda": "12.4", "cudnn": None, "nccl": None,
                  "arch_list": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
                  "source": "files"},
        "env": {"CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
        "hardware_source": "probed", "notes": [],
    }


def variants() -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    out["h100-match"] = base()

    s = base()
    s["packages"].update({"torch": "2.4.1", "nvidia-nccl-cu12": "2.20.5",
                          "nvidia-cudnn-cu11": "8.7.0.84"})
    s["torch"]["version"] = "2.4.1+cu121"
    out["h100-package-drift"] = s

    s = base()
    libs: List[Dict[str, Any]] = s["libraries"]
    for x in libs:
        if x["name"] in ("cublas", "cublasLt"):
            x["selected"] = False
    libs += [lib("cublas", "12.1.3.1", "", "libcublas.so.12", None,
                 path="/usr/local/cuda-12.1/lib64/libcublas.so.12"),
             lib("cublasLt", "12.1.3.1", "", "libcublasLt.so.12", None,
                 path="/usr/local/cuda-12.1/lib64/libcublasLt.so.12")]
    s["env"]["LD_LIBRARY_PATH"] = "/usr/local/cuda-12.1/lib64"
    out["h100-system-cublas"] = s

    s = base()
    s["driver"] = {"version": "470.82.01", "cuda": "11.4", "fabric_manager": "running",
                   "error": None, "source": "nvml"}
    out["h100-old-driver"] = s

    s = base()
    for g in s["gpus"]:
        g["name"], g["memory_mib"] = "NVIDIA H20", 97871
    s["driver"]["version"] = "535.104.05"
    s["driver"]["cuda"] = "12.2"
    out["h20-on-h100-lock"] = s

    s = base()
    s["gpus"][4:] = [{"index": i, "name": "NVIDIA A100-SXM4-80GB", "uuid": f"GPU-a100-{i}",
                      "compute_capability": "8.0", "memory_mib": 81920,
                      "pci_bus_id": f"0000:{0x90 + i:02x}:00.0", "mig": False, "lost": False}
                     for i in range(4, 8)]
    out["mixed-h100-a100"] = s

    s = base()
    s["driver"] = None
    s["gpus"] = []
    s["links"] = []
    s["hardware_source"] = "none"
    out["build-container"] = s

    s = base()  # NVML probed and failed: the driver is known to be unusable
    s["driver"] = {"version": None, "cuda": None, "fabric_manager": None,
                   "error": "driver-not-loaded", "source": "nvml"}
    s["gpus"] = []
    s["links"] = []
    out["no-driver"] = s

    s = base()
    for g in s["gpus"]:
        g["name"], g["memory_mib"] = "NVIDIA H20", 97871
    s["driver"]["version"], s["driver"]["cuda"] = "535.161.08", "12.2"
    s["packages"] = {k: v for k, v in s["packages"].items() if not k.startswith("nvidia-")}
    s["packages"].update({"torch": "2.3.1", "triton": "2.3.1", "nvidia-cublas-cu12": "12.1.3.1",
                          "nvidia-cudnn-cu12": "8.9.2.26", "nvidia-nccl-cu12": "2.20.5",
                          "nvidia-cuda-runtime-cu12": "12.1.105"})
    s["torch"]["version"], s["torch"]["cuda"] = "2.3.1+cu121", "12.1"
    for x in s["libraries"]:
        if x["name"] in ("cublas", "cublasLt"):
            x["version"] = "12.1.3.1"
        if x["name"] == "cudart":
            x["version"] = "12.1.105"
        if x["name"] == "nccl":
            x["version"] = "2.20.5"
        if x["name"] == "cudnn":
            x["version"] = "8.9.2.26"
    out["h20-cublas121"] = s

    s = base()
    s["gpus"] = [{"index": 0, "name": "NVIDIA GeForce RTX 5090", "uuid": "GPU-5090",
                  "compute_capability": "12.0", "memory_mib": 32607,
                  "pci_bus_id": "0000:01:00.0", "mig": False, "lost": False}]
    s["links"] = []
    s["driver"] = {"version": "570.133.07", "cuda": "12.8", "fabric_manager": "not-applicable",
                   "error": None, "source": "nvml"}
    out["rtx5090-torch-without-sm120"] = s

    s = base()
    s["env"]["NCCL_P2P_DISABLE"] = "0"
    out["h100-env-drift"] = s
    return out


def main() -> None:
    for name, doc in variants().items():
        (HERE / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")
        print("wrote", name)


if __name__ == "__main__":
    main()
