#!/usr/bin/env python3
"""Regenerate the generated symptom tables in compat-matrix/ from NVIDIA's PyPI wheels.

The error codes a CUDA program can print are a finite, documented set. This script reads
them from their primary source, the headers and libraries NVIDIA ships on PyPI:

* ``symptoms-cuda-runtime.toml``: every ``cudaError_t`` of ``driver_types.h``
  (``nvidia-cuda-runtime-cu12``), with the exact text ``cudaGetErrorString`` returns, read by
  calling ``libcudart.so`` from the same wheel (the call needs no GPU and no driver);
* ``symptoms-cuda-driver.toml``: every ``CUresult`` of ``cuda.h`` (same wheel); the
  driver's own strings live in ``libcuda.so``, which no wheel ships, so the runtime text of
  the code with the same name is given where there is one;
* ``symptoms-nccl.toml``: every ``ncclResult_t`` of ``nccl.h`` with ``ncclGetErrorString``'s
  text (``nvidia-nccl-cu12``);
* ``symptoms-cublas.toml``: every ``cublasStatus_t`` of ``cublas_api.h`` with
  ``cublasGetStatusString``'s text (``nvidia-cublas-cu12``);
* ``symptoms-cudnn.toml``: every ``cudnnStatus_t`` of ``cudnn_graph.h``, deprecated cuDNN 8
  names included (``nvidia-cudnn-cu12``).

The *meaning* and *next step* of each row are written here, in our own words, by code
(:data:`MEANING`) or, for the long tail, by the family the name belongs to
(:data:`FAMILIES`); nothing is copied from NVIDIA's comments. The hand-written tables
(``symptoms-xid.toml``, ``symptoms-host.toml``, ``symptoms-torch.toml``) are not touched.

    pip download --no-deps -d /tmp/wheels nvidia-cuda-runtime-cu12 nvidia-nccl-cu12 \\
        nvidia-cublas-cu12 nvidia-cudnn-cu12
    python scripts/harvest_symptoms.py --wheels /tmp/wheels           # rewrite the tables
    python scripts/harvest_symptoms.py --wheels /tmp/wheels --check   # exit 1 if they would change

Output is sorted by code and carries no timestamps: two runs on the same wheels give no diff.
A maintainer tool: it needs the wheels (about 1.7 GB) and Linux x86_64; not run by tests.
"""

from __future__ import annotations

import argparse
import ctypes
import re
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "compat-matrix"

# -- meanings, in our own words ----------------------------------------------------------------

#: concept key (a code name lower-cased without its prefix and separators) -> (meaning, next)
MEANING: Dict[str, Tuple[str, str]] = {
    "invalidvalue": ("A call got an argument outside what it accepts: usually a bug in the "
                     "calling code, or tensors/handles from another device or context.",
                     "rerun with CUDA_LAUNCH_BLOCKING=1 to find the call that failed"),
    "memoryallocation": ("GPU memory (or another resource the call needs) ran out.",
                         "lower the batch size or free memory; nvidia-smi shows who holds it"),
    "outofmemory": ("GPU memory (or another resource the call needs) ran out.",
                    "lower the batch size or free memory; nvidia-smi shows who holds it"),
    "initializationerror": ("CUDA could not start: the driver is missing, not loaded, or "
                            "cannot talk to the GPU from this process.",
                            "run nvidia-smi in the same environment (container, venv); "
                            "`envlock doctor` names the driver state"),
    "notinitialized": ("CUDA could not start: the driver is missing, not loaded, or "
                       "cannot talk to the GPU from this process.",
                       "run nvidia-smi in the same environment; `envlock doctor` names the "
                       "driver state"),
    "insufficientdriver": ("The installed NVIDIA driver is older than the CUDA runtime this "
                           "program was built with needs.",
                           "compare `nvidia-smi` (driver) with the CUDA of the build; "
                           "`envlock doctor` says which build fits the driver"),
    "nodevice": ("The process sees no CUDA GPU: none installed, hidden by "
                 "CUDA_VISIBLE_DEVICES, or not passed into the container.",
                 "print CUDA_VISIBLE_DEVICES and run nvidia-smi inside the same container"),
    "invaliddevice": ("A device index was asked for that this process cannot see (the "
                      "visible GPUs are numbered from 0 after CUDA_VISIBLE_DEVICES).",
                      "check the rank -> device mapping and CUDA_VISIBLE_DEVICES of each rank"),
    "noKernelImageForDevice".lower(): (
        "The program has no machine code (and no usable PTX) for this GPU's architecture: "
        "the build predates the GPU or left its compute capability out.",
        "compare torch.cuda.get_arch_list() with the GPU's capability; `envlock doctor` "
        "names a build that covers it"),
    "noBinaryForGpu".lower(): (
        "The program has no machine code (and no usable PTX) for this GPU's architecture.",
        "compare the build's arch list with the GPU's capability"),
    "illegaladdress": ("A kernel read or wrote memory it does not own. The error is sticky: "
                       "the process must restart. A bug in a kernel, or a hardware fault when "
                       "it comes with an Xid.",
                       "rerun with CUDA_LAUNCH_BLOCKING=1 (or compute-sanitizer); check "
                       "dmesg for Xid lines"),
    "launchfailure": ("A kernel died while running (an exception on the device); the "
                      "context is unusable afterwards.",
                      "rerun with CUDA_LAUNCH_BLOCKING=1; check dmesg for Xid lines"),
    "launchtimeout": ("A kernel ran longer than the display watchdog allows and was killed.",
                      "run on a GPU without a display, or shorten the kernel"),
    "launchoutofresources": ("A kernel launch asked for more registers, shared memory or "
                             "threads than the GPU has.",
                             "a build or kernel tuned for another GPU; check the arch list"),
    "assert": ("A device-side assert fired: usually an index out of range (a label >= the "
               "number of classes, an embedding index too large).",
               "rerun with CUDA_LAUNCH_BLOCKING=1 to see the failing op; check label ranges"),
    "ecculcorrectable": ("", ""),
    "eccuncorrectable": ("The GPU's memory reported an uncorrectable ECC error: a hardware "
                         "fault (or a row waiting for remapping).",
                         "nvidia-smi -q -d ECC,ROW_REMAPPER; drain the node and reset the GPU"),
    "hardwarestackerror": ("The GPU hit a hardware-level error while running a kernel.",
                           "check dmesg for Xid lines; run the node's GPU diagnostics"),
    "peeraccessunsupported": ("Peer-to-peer access between these two GPUs is not possible "
                              "on this system (topology, IOMMU, virtualization).",
                              "nvidia-smi topo -m; try NCCL_P2P_DISABLE=1"),
    "systemdrivermismatch": ("The user-space driver library and the kernel module are "
                             "different versions (a driver update without a reboot, or a "
                             "container with the wrong libcuda).",
                             "reboot, or reload the nvidia kernel module; compare nvidia-smi "
                             "with cat /proc/driver/nvidia/version"),
    "compatnotsupportedondevice": ("The forward-compatibility package is in use on a GPU "
                                   "that does not support it (only data-center GPUs do).",
                                   "drop cuda-compat from LD_LIBRARY_PATH, or upgrade the "
                                   "driver"),
    "systemnotready": ("The system is not ready for CUDA: on NVSwitch systems this is "
                       "usually the fabric manager not running.",
                       "systemctl status nvidia-fabricmanager"),
    "devicesunavailable": ("The GPUs exist but are busy or unavailable: exclusive compute "
                           "mode held by another process, or a GPU being reset.",
                           "nvidia-smi -q -d COMPUTE; look for other processes on the GPU"),
    "deviceunavailable": ("The GPU exists but is busy or unavailable to this process.",
                          "nvidia-smi -q -d COMPUTE; look for other processes on the GPU"),
    "deviceuninitialized": ("A call used a context that does not exist or was destroyed.",
                            "a bug in the caller, or a fork after CUDA was initialised"),
    "invaliddevicefunction": ("The kernel cannot run on this device (built for another "
                              "architecture).",
                              "compare the build's arch list with the GPU's capability"),
    "unsupportedptxversion": ("The program carries PTX newer than this driver can compile.",
                              "upgrade the driver, or use a build for an older CUDA"),
    "invalidptx": ("The driver could not compile the program's PTX.",
                   "the PTX may be newer than the driver; upgrade it"),
    "jitcompilernotfound": ("The PTX JIT compiler is missing from the driver installation.",
                            "reinstall the driver's user-space libraries"),
    "unknown": ("CUDA reported an unknown error: often the driver lost the GPU or the "
                "process is in a bad state after an earlier error.",
                "look for the first error in the log and for Xid lines in dmesg"),
    "cudaerror": ("A CUDA call inside the library failed.", "the CUDA error above it names "
                  "the cause; run with NCCL_DEBUG=INFO for NCCL"),
    "unhandledcudaerror": ("A CUDA call inside NCCL failed (often a GPU that faulted "
                           "earlier, peer access that is not possible, or out of memory).",
                           "NCCL_DEBUG=INFO names the failing CUDA call"),
    "systemerror": ("An operating-system call inside NCCL failed: a socket, a shared-memory "
                    "segment, memory mapping or an InfiniBand verb.",
                    "NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET names the failing call"),
    "internalerror": ("The library hit an internal error: often a symptom of an earlier "
                      "failure, of a version mismatch, or of a network problem.",
                      "rerun with the library's debug logging (NCCL_DEBUG=INFO, "
                      "CUBLAS_LOGINFO_DBG=1, CUDNN_LOGERR_DBG=1)"),
    "invalidargument": ("A collective was called with an argument NCCL rejects (a wrong "
                        "device, count or pointer).",
                        "NCCL_DEBUG=WARN prints which argument"),
    "invalidusage": ("NCCL was used in a way it does not allow: mismatched collectives "
                     "between ranks, two ranks on one GPU, or a communicator misused.",
                     "NCCL_DEBUG=WARN prints the reason; check the rank -> device mapping"),
    "remoteerror": ("A peer rank exited or the network between ranks failed.",
                    "find the first rank that died (its own log names why)"),
    "inprogress": ("A non-blocking NCCL operation is still running (not an error by itself).",
                   "check the communicator's async error"),
    "timeout": ("An operation did not complete in time.",
                "find the rank that did not reach the collective"),
    "allocfailed": ("The library could not allocate memory (usually GPU memory).",
                    "free GPU memory or lower the batch size"),
    "archmismatch": ("The library has no kernel for this GPU's architecture, or the operation "
                     "needs a newer GPU.",
                     "compare the library build with the GPU's capability"),
    "executionfailed": ("A GPU kernel launched by the library failed: often a bad input, "
                        "out-of-memory, or an earlier sticky CUDA error.",
                        "rerun with CUDA_LAUNCH_BLOCKING=1; check for an earlier CUDA error"),
    "notsupported": ("The requested operation, data type or configuration is not supported "
                     "by this library build on this GPU.",
                     "check the library version against the GPU and the data types used"),
    "mappingerror": ("The library could not bind GPU memory (a texture or mapping failed).",
                     "often out of memory; check for an earlier error"),
    "licenseerror": ("A licensed feature is not available.", "not a GPU fault"),
    "badparam": ("The library rejected a parameter: a shape, layout, data type or pointer it "
                 "cannot take.", "check the shapes and data types at the failing call"),
    "sublibraryloadingfailed": (
        "cuDNN could not load one of its own sub-libraries or a CUDA library it depends on "
        "(libcublasLt, libnvrtc, libcudnn_*).",
        "check that the nvidia-* wheels of one CUDA major are installed and on the loader "
        "path; `envlock doctor` lists library copies"),
    "sublibraryversionmismatch": ("cuDNN's sub-libraries come from different versions.",
                                  "remove the extra cuDNN copy; `envlock doctor` lists copies"),
    "versionmismatch": ("cuDNN's parts come from different versions.",
                        "remove the extra cuDNN copy; `envlock doctor` lists copies"),
    "runtimeprerequisitemissing": (
        "cuDNN needs a CUDA library (NVRTC, cuBLASLt) it could not find at run time.",
        "install the nvidia-*-cu1x wheels torch expects; check LD_LIBRARY_PATH"),
    "incompatiblecudadriver": ("cuDNN needs a newer NVIDIA driver than the one installed.",
                               "upgrade the driver or use a cuDNN for an older CUDA"),
    "incompatiblecudart": ("cuDNN was built for another CUDA runtime than the one loaded.",
                           "use the cuDNN wheel of the same CUDA major as torch"),
}

#: the long tail: a keyword of the name -> (meaning, next), first match wins
FAMILIES: Tuple[Tuple[str, str, str], ...] = (
    ("ecc", "A memory error on the GPU was reported (hardware).",
     "nvidia-smi -q -d ECC; check dmesg for Xid lines"),
    ("nvlink", "An NVLink error between GPUs was reported (hardware or fabric).",
     "nvidia-smi nvlink -e; check dmesg for Xid 74"),
    ("hardware", "The GPU reported a hardware-level error.",
     "check dmesg for Xid lines; run the node's GPU diagnostics"),
    ("peer", "Peer-to-peer access between two GPUs failed or was misused.",
     "nvidia-smi topo -m; try NCCL_P2P_DISABLE=1"),
    ("mps", "The CUDA Multi-Process Service (MPS) refused or failed the request.",
     "check the MPS control daemon and its limits"),
    ("capture", "A CUDA graph capture was misused (an operation not allowed while capturing).",
     "an application or library bug around CUDA graphs; try without graph capture"),
    ("graph", "A CUDA graph operation failed.",
     "an application or library bug around CUDA graphs; try without graph capture"),
    ("launch", "A kernel launch was refused or failed.",
     "rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel"),
    ("ptx", "The driver could not use the program's PTX.", "upgrade the driver"),
    ("jit", "Just-in-time compilation of device code failed.", "upgrade the driver"),
    ("image", "A device code image could not be loaded on this GPU.",
     "compare the build's arch list with the GPU's capability"),
    ("symbol", "A device symbol or function was not found in the loaded module.",
     "a build or version mismatch between libraries"),
    ("sharedobject", "A shared library the driver needed could not be loaded or initialised.",
     "check the loader path and the library versions"),
    ("file", "A file the driver needed could not be found or read.",
     "check the paths the program loads"),
    ("profiler", "A profiler call was made in the wrong state (legacy profiler API).",
     "usually harmless; remove the profiler call"),
    ("context", "A CUDA context was missing, destroyed, or already current elsewhere.",
     "a bug in the caller, or a fork after CUDA was initialised"),
    ("stream", "A CUDA stream was misused.", "an application or library bug"),
    ("notsupported", "The operation is not supported on this device, driver or platform.",
     "check the GPU, driver and platform against what the call needs"),
    ("notpermitted", "The operation is not allowed in the current state or platform.",
     "an application bug, or a platform restriction (containers, MIG)"),
    ("notready", "An asynchronous operation has not finished yet (not an error by itself).",
     "no action unless it never finishes"),
    ("timeout", "An operation did not complete in time.", "find what the GPU was waiting on"),
    ("invalid", "A call got a handle or argument that is not valid in this state.",
     "rerun with CUDA_LAUNCH_BLOCKING=1 to find the failing call"),
    ("alreadymapped", "Memory was mapped twice.", "an application or library bug"),
    ("notmapped", "Memory that is not mapped was used as mapped.",
     "an application or library bug"),
    ("unsupported", "The requested feature is not supported here.",
     "check the GPU, driver and CUDA versions"),
    ("device", "A device-level condition stopped the call.",
     "nvidia-smi; check dmesg for Xid lines"),
    ("cooperative", "A cooperative launch was larger than the GPU can run at once.",
     "reduce the grid"),
    ("external", "An external (interop) device failed.", "check the interop partner"),
    ("lossy", "The operation lost precision or was refused for precision reasons.",
     "check the data types"),
    ("cdp", "A CUDA dynamic-parallelism limit was hit.", "reduce nesting or pending launches"),
)

GENERIC = ("The call failed with this status; the status name says what went wrong.",
           "find the first error in the log; rerun with CUDA_LAUNCH_BLOCKING=1")


def concept(name: str) -> str:
    """cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_MEMORY / ncclSystemError -> a key."""
    for prefix in ("cudaError", "CUDA_ERROR_", "CUBLAS_STATUS_", "CUDNN_STATUS_", "nccl"):
        if name.startswith(prefix):
            name = name[len(prefix):]
            break
    return name.replace("_", "").lower()


def meaning_of(name: str) -> Tuple[str, str]:
    key = concept(name)
    hit = MEANING.get(key)
    if hit and hit[0]:
        return hit
    for word, meaning, nxt in FAMILIES:
        if word in key:
            return meaning, nxt
    # a cuDNN sub-code (BAD_PARAM_NULL_POINTER) takes its category's meaning
    for k in sorted(MEANING, key=len, reverse=True):
        if MEANING[k][0] and key.startswith(k):
            return MEANING[k]
    return GENERIC


# -- reading the wheels ------------------------------------------------------------------------

_ENUM = re.compile(r"^\s*((?:cudaError|CUDA_ERROR_|CUBLAS_STATUS_|CUDNN_STATUS_|nccl)\w*)\s*"
                   r"(?:CUDNN_DEPRECATED_ENUM\s*)?=\s*(\w+)", re.MULTILINE)


def enum_values(header: str, first: str, last: str) -> Dict[str, int]:
    """Names and values of the enum between the member ``first`` and the type name
    ``last`` (aliases resolved)."""
    start = header.index(first)
    end = header.index(last, start)
    body = header[start:end]
    out: Dict[str, int] = {}
    for name, value in _ENUM.findall(body):
        if value.lstrip("-").isdigit() or value.startswith("0x"):
            out[name] = int(value, 0)
        elif value in out:
            out[name] = out[value]
    return out


def _member(wheels: Path, pattern: str, dest: Path, what: str) -> Path:
    for whl in sorted(wheels.glob(pattern)):
        with zipfile.ZipFile(whl) as zf:
            for info in zf.infolist():
                if info.filename.endswith(what):
                    target = dest / info.filename
                    if not target.exists():
                        zf.extract(info, dest)
                    return target
    raise SystemExit(f"harvest_symptoms: no {what} in {wheels}/{pattern}")


def _wheel_version(wheels: Path, pattern: str) -> str:
    whl = sorted(wheels.glob(pattern))[-1]
    return whl.name.split("-")[1]


def _strings(lib: Path, func: str, codes: Sequence[int],
             deps: Sequence[Path] = ()) -> Dict[int, str]:
    for d in deps:
        ctypes.CDLL(str(d), mode=ctypes.RTLD_GLOBAL)
    so = ctypes.CDLL(str(lib))
    fn = getattr(so, func)
    fn.restype = ctypes.c_char_p
    fn.argtypes = [ctypes.c_int]
    return {c: (fn(c) or b"").decode() for c in codes}


# -- patterns ------------------------------------------------------------------------------------

def _lit(text: str) -> str:
    return re.escape(text).replace("\\ ", " ")


def patterns_for(name: str, message: str, table: str, code: int = 0) -> List[str]:
    """The regexes a row matches: its name, and its message where the message is specific."""
    pats = [r"\b" + name + r"\b"]
    msg = re.sub(r"\s*\(run with NCCL_DEBUG=\w+ for details\)$", "", message).strip()
    if not msg or msg.startswith(("CUDNN_STATUS", "unrecognized")):
        return pats
    if table == "cuda-runtime":
        # torch: "CUDA error: <msg>"; others: "CUDA failure 2: <msg>", "cudaMalloc failed: <msg>"
        pats.append(r"CUDA (?:error|failure|runtime error)[^:\n]{0,40}: " + _lit(msg))
        pats.append(r"\bError " + str(code) + ": " + _lit(msg))  # torch's cudaGetDeviceCount
        if len(msg) >= 28:
            pats.append(_lit(msg))
    elif table == "nccl":
        pats.append(_lit(msg) if len(msg) >= 14 else r"NCCL (?:error|failure)[^\n]{0,120}[:,] "
                    + _lit(msg))
    elif table == "cublas":
        if len(msg) >= 24:
            pats.append(r"cuBLAS[^\n]{0,60}" + _lit(msg))
    return pats


# -- output ----------------------------------------------------------------------------------------

def _q(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _lq(s: str) -> str:
    return "'" + s + "'" if "'" not in s else _q(s)


def render(table: str, title: str, source_id: str, source_title: str, source_url: str,
           rows: Sequence[Dict[str, object]]) -> str:
    out = [f"# Generated by scripts/harvest_symptoms.py from {source_title}.",
           "# Do not edit by hand: change the script's MEANING / FAMILIES and rerun it.",
           "# Row fields: compat-matrix/README.md, 'Symptom tables'.", "",
           "[table]", f"id = {_q(table)}", f"title = {_q(title)}", "generated = true", "",
           f"[source.{source_id}]", f"title = {_q(source_title)}", f"url = {_q(source_url)}",
           'kind = "primary"', ""]
    for r in rows:
        out.append("[[symptom]]")
        out.append(f"id = {_q(str(r['id']))}")
        out.append(f"name = {_q(str(r['name']))}")
        out.append(f"code = {r['code']}")
        if r.get("message"):
            out.append(f"message = {_q(str(r['message']))}")
        out.append("patterns = [" + ", ".join(_lq(p) for p in r["patterns"]) + "]")  # type: ignore[attr-defined]
        out.append(f"meaning = {_q(str(r['meaning']))}")
        out.append(f"next = {_q(str(r['next']))}")
        if r.get("causes"):
            out.append("causes = [" + ", ".join(_q(c) for c in r["causes"]) + "]")  # type: ignore[attr-defined]
        out.append(f"source = {_q(source_id)}")
        out.append("")
    return "\n".join(out)


#: advisories that explain a code (the differential lists them as its causes)
CAUSES: Dict[str, Tuple[str, ...]] = {
    "cudaErrorNoKernelImageForDevice": ("gpu-arch-dropped-from-torch-build",
                                        "blackwell-torch-without-sm100-sm120",
                                        "old-torch-without-ampere-hopper-kernels"),
    "CUDA_ERROR_NO_BINARY_FOR_GPU": ("gpu-arch-dropped-from-torch-build",
                                     "blackwell-torch-without-sm100-sm120"),
    "cudaErrorInsufficientDriver": ("driver-too-old-for-torch-cuda",),
    "cudaErrorNoDevice": ("no-visible-gpu", "nvml-container-lost-devices"),
    "CUDA_ERROR_NO_DEVICE": ("no-visible-gpu", "nvml-container-lost-devices"),
    "cudaErrorInvalidDevice": ("rank-device-mapping", "mig-multi-device"),
    "CUDA_ERROR_INVALID_DEVICE": ("rank-device-mapping", "mig-multi-device"),
    "cudaErrorECCUncorrectable": ("gpu-hardware-fault",),
    "CUDA_ERROR_ECC_UNCORRECTABLE": ("gpu-hardware-fault",),
    "cudaErrorSystemNotReady": ("nvswitch-fabric-manager-not-running",),
    "CUDA_ERROR_SYSTEM_NOT_READY": ("nvswitch-fabric-manager-not-running",),
    "cudaErrorSystemDriverMismatch": ("driver-library-version-mismatch",),
    "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH": ("driver-library-version-mismatch",),
    "cudaErrorCompatNotSupportedOnDevice": ("cuda-forward-compat-on-geforce",),
    "CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE": ("cuda-forward-compat-on-geforce",),
    "cudaErrorPeerAccessUnsupported": ("p2p-not-supported-custom-allreduce",),
    "cudaErrorUnsupportedPtxVersion": ("ptx-jit-driver-older-than-toolkit",),
    "CUDA_ERROR_UNSUPPORTED_PTX_VERSION": ("ptx-jit-driver-older-than-toolkit",),
    "ncclSystemError": ("nccl-unhandled-system-error", "dev-shm-too-small-container",
                        "nccl-multinode-network-interface", "nccl-topo-file-foreign",
                        "nccl-socket-connect-failure"),
    "ncclRemoteError": ("nccl-socket-connect-failure", "nccl-multinode-network-interface"),
    "ncclInvalidUsage": ("nccl-duplicate-gpu", "rank-device-mapping"),
    "ncclUnhandledCudaError": ("p2p-not-supported-custom-allreduce", "nccl-2251-rtx50-shared-memory"),
    "ncclInternalError": ("nccl-topo-file-foreign",),
    "CUBLAS_STATUS_INVALID_VALUE": ("torch-210-cu128-cublas-invalid-value",
                                    "system-cublas-shadows-wheel"),
    "CUBLAS_STATUS_EXECUTION_FAILED": ("h20-cublas121-sigfpe", "system-cublas-shadows-wheel"),
    "CUBLAS_STATUS_NOT_SUPPORTED": ("system-cublas-shadows-wheel",),
    "CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED": ("cudnn-missing-cuda-lib",
                                               "system-cudnn-shadows-wheel"),
    "CUDNN_STATUS_NOT_SUPPORTED_RUNTIME_PREREQUISITE_MISSING": ("cudnn-missing-cuda-lib",),
    "CUDNN_STATUS_RUNTIME_PREREQUISITE_MISSING": ("cudnn-missing-cuda-lib",),
    "CUDNN_STATUS_SUBLIBRARY_VERSION_MISMATCH": ("system-cudnn-shadows-wheel",),
    "CUDNN_STATUS_VERSION_MISMATCH": ("system-cudnn-shadows-wheel",),
}


def build(wheels: Path, work: Path) -> Dict[str, str]:
    files: Dict[str, str] = {}
    # CUDA runtime
    rtver = _wheel_version(wheels, "nvidia_cuda_runtime_cu*.whl")
    dt = _member(wheels, "nvidia_cuda_runtime_cu*.whl", work, "include/driver_types.h")
    cuh = _member(wheels, "nvidia_cuda_runtime_cu*.whl", work, "include/cuda.h")
    cudart = _member(wheels, "nvidia_cuda_runtime_cu*.whl", work, "lib/libcudart.so.12")
    rt = enum_values(dt.read_text(), "cudaSuccess", "cudaError_t")
    rt_msg = _strings(cudart, "cudaGetErrorString", sorted(set(rt.values())))
    rows = []
    by_concept: Dict[str, str] = {}
    for name, code in sorted(rt.items(), key=lambda kv: (kv[1], kv[0])):
        if code == 0 or name.endswith("ApiFailureBase"):
            continue
        msg = rt_msg.get(code, "")
        by_concept[concept(name)] = msg
        m, n = meaning_of(name)
        rows.append({"id": f"cudart.{name}", "name": name, "code": code, "message": msg,
                     "patterns": patterns_for(name, msg, "cuda-runtime", code), "meaning": m,
                     "next": n, "causes": CAUSES.get(name, ())})
    url = f"https://pypi.org/project/nvidia-cuda-runtime-cu12/{rtver}/"
    files["symptoms-cuda-runtime.toml"] = render(
        "cuda-runtime", "CUDA runtime API errors (cudaError_t)", "cuda-runtime-wheel",
        f"nvidia-cuda-runtime-cu12 {rtver}: driver_types.h and libcudart cudaGetErrorString",
        url, rows)
    # CUDA driver
    drv = enum_values(cuh.read_text(), "CUDA_SUCCESS", "} CUresult")
    rows = []
    for name, code in sorted(drv.items(), key=lambda kv: (kv[1], kv[0])):
        if code == 0:
            continue
        m, n = meaning_of(name)
        msg = by_concept.get(concept(name), "")
        rows.append({"id": f"cu.{name}", "name": name, "code": code, "message": msg,
                     "patterns": [r"\b" + name + r"\b"], "meaning": m, "next": n,
                     "causes": CAUSES.get(name, ())})
    files["symptoms-cuda-driver.toml"] = render(
        "cuda-driver", "CUDA driver API results (CUresult)", "cuda-driver-header",
        f"nvidia-cuda-runtime-cu12 {rtver}: cuda.h", url, rows)
    # NCCL
    ncver = _wheel_version(wheels, "nvidia_nccl_cu*.whl")
    ncclh = _member(wheels, "nvidia_nccl_cu*.whl", work, "include/nccl.h")
    libnccl = _member(wheels, "nvidia_nccl_cu*.whl", work, "lib/libnccl.so.2")
    nc = enum_values(ncclh.read_text(), "ncclSuccess", "ncclResult_t")
    nc.pop("ncclNumResults", None)
    nc_msg = _strings(libnccl, "ncclGetErrorString", sorted(nc.values()))
    rows = []
    for name, code in sorted(nc.items(), key=lambda kv: kv[1]):
        if code == 0:
            continue
        msg = nc_msg.get(code, "")
        m, n = meaning_of(name)
        rows.append({"id": f"nccl.{name}", "name": name, "code": code, "message": msg,
                     "patterns": patterns_for(name, msg, "nccl"), "meaning": m, "next": n,
                     "causes": CAUSES.get(name, ())})
    files["symptoms-nccl.toml"] = render(
        "nccl", "NCCL results (ncclResult_t)", "nccl-wheel",
        f"nvidia-nccl-cu12 {ncver}: nccl.h and libnccl ncclGetErrorString",
        f"https://pypi.org/project/nvidia-nccl-cu12/{ncver}/", rows)
    # cuBLAS
    cbver = _wheel_version(wheels, "nvidia_cublas_cu*.whl")
    cbh = _member(wheels, "nvidia_cublas_cu*.whl", work, "include/cublas_api.h")
    lt = _member(wheels, "nvidia_cublas_cu*.whl", work, "lib/libcublasLt.so.12")
    cb = _member(wheels, "nvidia_cublas_cu*.whl", work, "lib/libcublas.so.12")
    st = enum_values(cbh.read_text(), "CUBLAS_STATUS_SUCCESS", "cublasStatus_t")
    cb_msg = _strings(cb, "cublasGetStatusString", sorted(st.values()), deps=(lt,))
    rows = []
    for name, code in sorted(st.items(), key=lambda kv: kv[1]):
        if code == 0:
            continue
        msg = cb_msg.get(code, "")
        m, n = meaning_of(name)
        rows.append({"id": f"cublas.{name}", "name": name, "code": code, "message": msg,
                     "patterns": patterns_for(name, msg, "cublas"), "meaning": m, "next": n,
                     "causes": CAUSES.get(name, ())})
    files["symptoms-cublas.toml"] = render(
        "cublas", "cuBLAS status codes (cublasStatus_t)", "cublas-wheel",
        f"nvidia-cublas-cu12 {cbver}: cublas_api.h and libcublas cublasGetStatusString",
        f"https://pypi.org/project/nvidia-cublas-cu12/{cbver}/", rows)
    # cuDNN
    cdver = _wheel_version(wheels, "nvidia_cudnn_cu*.whl")
    cdh = _member(wheels, "nvidia_cudnn_cu*.whl", work, "include/cudnn_graph.h")
    sd = enum_values(cdh.read_text(), "CUDNN_STATUS_SUCCESS", "cudnnStatus_t")
    rows = []
    for name, code in sorted(sd.items(), key=lambda kv: (kv[1], kv[0])):
        if code == 0:
            continue
        m, n = meaning_of(name)
        rows.append({"id": f"cudnn.{name}", "name": name, "code": code,
                     "patterns": [r"\b" + name + r"\b"], "meaning": m, "next": n,
                     "causes": CAUSES.get(name, ())})
    files["symptoms-cudnn.toml"] = render(
        "cudnn", "cuDNN status codes (cudnnStatus_t, cuDNN 8 names kept as aliases)",
        "cudnn-wheel", f"nvidia-cudnn-cu12 {cdver}: cudnn_graph.h",
        f"https://pypi.org/project/nvidia-cudnn-cu12/{cdver}/", rows)
    return files


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wheels", required=True, type=Path,
                    help="a folder with the downloaded nvidia-* wheels")
    ap.add_argument("--check", action="store_true", help="exit 1 if a table would change")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        files = build(args.wheels, Path(tmp))
    changed = [n for n, text in files.items()
               if not (OUT / n).is_file() or (OUT / n).read_text(encoding="utf-8") != text]
    if args.check:
        for n in changed:
            print(f"would change: compat-matrix/{n}")
        return 1 if changed else 0
    for n, text in files.items():
        (OUT / n).write_text(text, encoding="utf-8")
        print(f"wrote compat-matrix/{n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
