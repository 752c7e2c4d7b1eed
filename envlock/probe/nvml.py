"""The NVML backend: the driver, the GPUs and how they are linked, as NVML reports them.

NVML (``libnvidia-ml.so.1``, through NVIDIA's ``nvidia-ml-py`` binding, ``pynvml``) is
the one source that knows the driver's CUDA version, each GPU's compute capability and
whether two GPUs talk over NVLink, an NVSwitch or PCIe. It is also fragile: the library
may be missing, out of step with the kernel module, or one GPU may have fallen off the bus.
:func:`probe_nvml` therefore never raises: a failed initialisation is ``Driver(error=...)``
(with the version read from ``/proc`` or ``/sys`` instead), a field NVML would not give is
``None`` plus a note, and a lost GPU is ``GpuInfo(lost=True)`` beside intact ones.

``pynvml`` is imported on the first probe, not with this module, and torch never is:
``envlock verify`` runs this on every job start.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Set, Tuple

from envlock.probe.driverfs import (
    PROC_VERSION,
    SYSFS_VERSION,
    driver_from_proc,
    driver_from_sysfs,
    normalize_bus_id,
)
from envlock.snapshot import Driver, GpuInfo, Link
from envlock.versions import cuda_from_int

__all__ = ["NvmlReport", "probe_nvml", "INIT_ERRORS", "TOPOLOGY_KINDS"]

# nvmlReturn_t values (nvml.h). They are part of NVML's ABI, so they are spelled here
# rather than looked up, and this module imports without pynvml.
_INVALID_ARGUMENT = 2
_NOT_SUPPORTED = 3
_NO_PERMISSION = 4
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_LIB_RM_VERSION_MISMATCH = 18
_ARGUMENT_VERSION_MISMATCH = 25

#: Why ``nvmlInit`` failed, as ``Driver.error``; any other code is ``"unknown"``.
INIT_ERRORS: Mapping[int, str] = {
    _LIBRARY_NOT_FOUND: "not-found",
    _DRIVER_NOT_LOADED: "driver-not-loaded",
    _LIB_RM_VERSION_MISMATCH: "library-mismatch",
    _NO_PERMISSION: "no-permission",
}

_INIT_NOTES: Mapping[str, str] = {
    "not-found": "nvml: libnvidia-ml.so.1 could not be loaded (no NVIDIA driver installed, "
                 "or its library is not on the loader path)",
    "driver-not-loaded": "nvml: the NVIDIA kernel module is not loaded",
    "library-mismatch": "nvml: libnvidia-ml.so.1 does not match the loaded kernel module "
                        "(driver upgraded without a reboot?)",
    "no-permission": "nvml: no permission to open the NVIDIA device files",
}

#: ``nvmlGpuTopologyLevel_t`` -> ``Link.kind``, in ``nvidia-smi topo -m`` words.
#: INTERNAL (0) is two GPUs on one board behind the board's own PCIe switch: PIX.
TOPOLOGY_KINDS: Mapping[int, str] = {
    0: "PIX",    # NVML_TOPOLOGY_INTERNAL
    10: "PIX",   # NVML_TOPOLOGY_SINGLE: one PCIe switch
    20: "PXB",   # NVML_TOPOLOGY_MULTIPLE: several PCIe switches, no host bridge
    30: "PHB",   # NVML_TOPOLOGY_HOSTBRIDGE
    40: "NODE",  # NVML_TOPOLOGY_NODE: host bridges within one NUMA node
    50: "SYS",   # NVML_TOPOLOGY_SYSTEM: across the CPU interconnect
}

# pynvml spells NVML_P2P_CAPS_INDEX_READ as the tuple ``(0,)`` (a stray comma), which
# ctypes cannot pass; the C value is 0.
_P2P_CAPS_INDEX_READ = 0
_P2P_STATUS_OK = 0
_MIG_ENABLE = 1
_FEATURE_ENABLED = 1
_NVLINK_DEVICE_GPU = 0
_NVLINK_DEVICE_IBMNPU = 1
_NVLINK_DEVICE_SWITCH = 2
_FABRIC_NOT_SUPPORTED = 0
_FABRIC_NOT_STARTED = 1
_FABRIC_IN_PROGRESS = 2
_FABRIC_COMPLETED = 3
_MIB = 1 << 20


class _FabricInfo(ctypes.Structure):
    """``nvmlGpuFabricInfo_t`` as nvml.h lays it out. Not pynvml's: up to 13.610 it
    declares ``clusterUuid`` with 80 bytes instead of 16, so the state it reads back from a
    real driver is always 0 (not supported), which said "not-applicable" for an NVSwitch
    machine whose fabric manager was down (found on a real H100 host's pynvml 13.610.43)."""

    _fields_ = [("clusterUuid", ctypes.c_ubyte * 16), ("status", ctypes.c_int),
                ("cliqueId", ctypes.c_uint), ("state", ctypes.c_ubyte)]


class _FabricInfoV2(ctypes.Structure):
    """``nvmlGpuFabricInfo_v2_t`` as nvml.h lays it out (versioned by size, 36 bytes)."""

    _fields_ = [("version", ctypes.c_uint), ("clusterUuid", ctypes.c_ubyte * 16),
                ("status", ctypes.c_int), ("cliqueId", ctypes.c_uint),
                ("state", ctypes.c_ubyte), ("healthMask", ctypes.c_uint)]


def _fabric_info_v2() -> _FabricInfoV2:
    return _FabricInfoV2(version=ctypes.sizeof(_FabricInfoV2) | (2 << 24))


@dataclass(frozen=True)
class NvmlReport:
    """What one NVML probe learned; ``driver`` is a ``Driver`` whenever probing happened."""

    driver: Optional[Driver]
    gpus: Tuple[GpuInfo, ...]
    links: Tuple[Link, ...]
    notes: Tuple[str, ...]


class _Lost(Exception):
    """NVML said NVML_ERROR_GPU_IS_LOST: nothing else it says about that GPU is true."""


def probe_nvml(*, proc_version: str = PROC_VERSION,
               sysfs_version: str = SYSFS_VERSION) -> NvmlReport:
    """Ask NVML about the driver, every GPU and every GPU pair; never raises.

    ``proc_version`` and ``sysfs_version`` are the files read for the driver version when
    NVML cannot be initialised (see :mod:`envlock.probe.driverfs`).
    """
    notes: List[str] = []
    try:
        import pynvml as nv
    except ImportError:
        notes.append("nvml: the nvidia-ml-py package (pynvml) is not installed")
        return _without_nvml("not-found", notes, proc_version, sysfs_version)
    try:
        nv.nvmlInit()
    except nv.NVMLError as exc:
        error = INIT_ERRORS.get(exc.value, "unknown")
        notes.append(_INIT_NOTES.get(error) or f"nvml: initialisation failed: {exc}")
        return _without_nvml(error, notes, proc_version, sysfs_version)
    except Exception as exc:  # noqa: BLE001 - a binding out of step with this code
        notes.append(f"nvml: initialisation failed: {type(exc).__name__}: {exc}")
        return _without_nvml("unknown", notes, proc_version, sysfs_version)
    try:
        driver, gpus, links = _collect(nv, notes)
    except Exception as exc:  # noqa: BLE001 - never take `envlock verify` down
        notes.append(f"nvml: probe failed: {type(exc).__name__}: {exc}")
        driver, gpus, links = Driver(error="unknown", source="nvml"), (), ()
    finally:
        try:
            nv.nvmlShutdown()
        except nv.NVMLError as exc:
            notes.append(f"nvml: shutdown failed: {exc}")
    return NvmlReport(driver=driver, gpus=gpus, links=links, notes=tuple(notes))


def _without_nvml(error: str, notes: List[str], proc_version: str,
                  sysfs_version: str) -> NvmlReport:
    """The driver version from the kernel's own files, with why NVML was not used."""
    version, source = driver_from_proc(proc_version), "proc"
    if version is None:
        version, source = driver_from_sysfs(sysfs_version), "sysfs"
    driver = Driver(version=version, error=error, source=source if version else None)
    return NvmlReport(driver=driver, gpus=(), links=(), notes=tuple(notes))


# -- calls -----------------------------------------------------------------------------

def _call(nv: Any, fn: Any, *args: Any) -> Tuple[Any, Any]:
    """``(value, None)`` or ``(None, NVMLError)``."""
    try:
        return fn(*args), None
    except nv.NVMLError as exc:
        return None, exc


def _dev(nv: Any, fn: Any, *args: Any) -> Tuple[Any, Any]:
    """:func:`_call` for a per-GPU query: a lost GPU raises :class:`_Lost`."""
    value, err = _call(nv, fn, *args)
    if err is not None and err.value == _GPU_IS_LOST:
        raise _Lost()
    return value, err


def _text(value: Any) -> Optional[str]:
    """pynvml returns ``str`` or ``bytes`` depending on its version."""
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


# -- collection ------------------------------------------------------------------------

def _collect(nv: Any, notes: List[str]) -> Tuple[Driver, Tuple[GpuInfo, ...], Tuple[Link, ...]]:
    version, err = _call(nv, nv.nvmlSystemGetDriverVersion)
    if err is not None:
        notes.append(f"nvml: driver version: {err}")
    cuda = _driver_cuda(nv, notes)

    count, err = _call(nv, nv.nvmlDeviceGetCount)
    if err is not None:
        notes.append(f"nvml: GPU count: {err}")
        count = 0
    gpus: List[GpuInfo] = []
    handles: Dict[int, Any] = {}
    for index in range(count):
        gpu, handle = _read_gpu(nv, index, notes)
        gpus.append(gpu)
        if handle is not None:
            handles[index] = handle

    links = _links(nv, notes, gpus, handles)
    fabric = _fabric(nv, notes, handles)
    driver = Driver(version=_text(version), cuda=cuda, fabric_manager=fabric, source="nvml")
    return driver, tuple(gpus), links


def _driver_cuda(nv: Any, notes: List[str]) -> Optional[str]:
    value, err = _call(nv, nv.nvmlSystemGetCudaDriverVersion_v2)
    if err is not None and err.value == _FUNCTION_NOT_FOUND:
        value, err = _call(nv, nv.nvmlSystemGetCudaDriverVersion)
    if err is not None:
        notes.append(f"nvml: CUDA driver version: {err}")
        return None
    return cuda_from_int(value) if value else None


def _read_gpu(nv: Any, index: int, notes: List[str]) -> Tuple[GpuInfo, Any]:
    """One GPU's facts and its handle (None when it has none to give)."""
    try:
        handle, err = _dev(nv, nv.nvmlDeviceGetHandleByIndex, index)
        if err is not None:
            notes.append(f"nvml: gpu {index}: no handle: {err}")
            return GpuInfo(index=index), None

        def field(what: str, fn: Any) -> Any:
            value, err = _dev(nv, fn, handle)
            if err is not None:
                notes.append(f"nvml: gpu {index}: {what}: {err}")
            return value

        name = field("name", nv.nvmlDeviceGetName)
        uuid = field("uuid", nv.nvmlDeviceGetUUID)
        cc = field("compute capability", nv.nvmlDeviceGetCudaComputeCapability)
        memory = field("memory", nv.nvmlDeviceGetMemoryInfo)
        pci = field("pci info", nv.nvmlDeviceGetPciInfo)
        bus_id = None
        if pci is not None:
            bus_id = normalize_bus_id(_text(pci.busId))
            if bus_id is None:
                notes.append(f"nvml: gpu {index}: unreadable PCI bus id {_text(pci.busId)!r}")
        mig: Optional[bool] = None
        modes, err = _dev(nv, nv.nvmlDeviceGetMigMode, handle)
        if err is None:
            mig = modes[0] == _MIG_ENABLE
        elif err.value == _NOT_SUPPORTED:
            mig = False  # a GPU without MIG runs one CUDA context on the whole device
        else:
            notes.append(f"nvml: gpu {index}: MIG mode: {err}")
    except _Lost:
        notes.append(f"nvml: gpu {index} is lost (NVML_ERROR_GPU_IS_LOST): "
                     f"it fell off the bus and needs a reset or a reboot")
        return GpuInfo(index=index, lost=True), None
    gpu = GpuInfo(
        index=index,
        name=_text(name),
        uuid=_text(uuid),
        compute_capability=None if cc is None else f"{cc[0]}.{cc[1]}",
        memory_mib=None if memory is None else int(memory.total) // _MIB,
        pci_bus_id=bus_id,
        mig=mig,
        lost=False,
    )
    return gpu, handle


def _nvlinks(nv: Any, notes: List[str], gpus: List[GpuInfo],
             handles: Mapping[int, Any]) -> Tuple[Dict[int, Set[int]], Set[int]]:
    """Direct NVLink peers of each GPU, and the GPUs with an active link to an NVSwitch.

    A link whose far end NVML types as a switch, or (where the type query is missing)
    whose far end's PCI address is not one of the GPUs, counts as an NVSwitch link.
    """
    by_bus = {g.pci_bus_id: g.index for g in gpus if g.pci_bus_id}
    remote_type = getattr(nv, "nvmlDeviceGetNvLinkRemoteDeviceType", None)
    peers: Dict[int, Set[int]] = {i: set() for i in handles}
    switched: Set[int] = set()
    for index, handle in handles.items():
        try:
            for link in range(nv.NVML_NVLINK_MAX_LINKS):
                active, err = _dev(nv, nv.nvmlDeviceGetNvLinkState, handle, link)
                if err is not None:
                    if err.value in (_NOT_SUPPORTED, _INVALID_ARGUMENT):
                        break  # no NVLink at all, or past this GPU's last link
                    notes.append(f"nvml: gpu {index}: NVLink {link} state: {err}")
                    continue
                if active != _FEATURE_ENABLED:
                    continue
                kind = None
                if remote_type is not None:
                    kind, err = _dev(nv, remote_type, handle, link)
                if kind == _NVLINK_DEVICE_SWITCH:
                    switched.add(index)
                    continue
                if kind == _NVLINK_DEVICE_IBMNPU:
                    continue  # a CPU link (POWER9), not between GPUs
                pci, err = _dev(nv, nv.nvmlDeviceGetNvLinkRemotePciInfo, handle, link)
                if err is not None:
                    notes.append(f"nvml: gpu {index}: NVLink {link} remote: {err}")
                    continue
                peer = by_bus.get(normalize_bus_id(_text(pci.busId)) or "")
                if peer is not None and peer != index:
                    peers[index].add(peer)
                elif kind == _NVLINK_DEVICE_GPU:
                    notes.append(f"nvml: gpu {index}: NVLink {link} leads to a GPU at "
                                 f"{_text(pci.busId)} that NVML does not list")
                else:
                    switched.add(index)
        except _Lost:
            notes.append(f"nvml: gpu {index} was lost while its NVLinks were read")
    return peers, switched


def _links(nv: Any, notes: List[str], gpus: List[GpuInfo],
           handles: Mapping[int, Any]) -> Tuple[Link, ...]:
    """One :class:`Link` per GPU pair ``a < b``; pairs with a lost GPU are all None."""
    if len(gpus) < 2:
        return ()
    peers, switched = _nvlinks(nv, notes, gpus, handles)
    links: List[Link] = []
    for a in range(len(gpus)):
        for b in range(a + 1, len(gpus)):
            ha, hb = handles.get(a), handles.get(b)
            if ha is None or hb is None:
                links.append(Link(a=a, b=b))
                continue
            try:
                links.append(Link(a=a, b=b, kind=_kind(nv, notes, a, b, ha, hb, peers, switched),
                                  p2p=_p2p(nv, notes, a, b, ha, hb)))
            except _Lost:
                notes.append(f"nvml: the link {a}-{b} is unknown: a GPU was lost")
                links.append(Link(a=a, b=b))
    return tuple(links)


def _kind(nv: Any, notes: List[str], a: int, b: int, ha: Any, hb: Any,
          peers: Mapping[int, Set[int]], switched: Set[int]) -> Optional[str]:
    if b in peers.get(a, ()) or a in peers.get(b, ()):
        return "NVLINK"
    if a in switched and b in switched:
        return "NVSWITCH"
    level, err = _dev(nv, nv.nvmlDeviceGetTopologyCommonAncestor, ha, hb)
    if err is not None:
        notes.append(f"nvml: link {a}-{b}: topology: {err}")
        return None
    kind = TOPOLOGY_KINDS.get(int(level))
    if kind is None:
        notes.append(f"nvml: link {a}-{b}: unknown topology level {level}")
    return kind


def _p2p(nv: Any, notes: List[str], a: int, b: int, ha: Any, hb: Any) -> Optional[bool]:
    status, err = _dev(nv, nv.nvmlDeviceGetP2PStatus, ha, hb, _P2P_CAPS_INDEX_READ)
    if err is None:
        return bool(status == _P2P_STATUS_OK)
    if err.value not in (_NOT_SUPPORTED, _FUNCTION_NOT_FOUND):
        notes.append(f"nvml: link {a}-{b}: P2P status: {err}")
    return None


# -- fabric manager ----------------------------------------------------------------------

def _fabric(nv: Any, notes: List[str], handles: Mapping[int, Any]) -> Optional[str]:
    """``running`` / ``not-running`` / ``not-applicable`` across the GPUs, or None.

    Any GPU whose fabric registration has not completed makes the whole machine
    ``not-running`` (NCCL over NVLink fails on it); ``not-applicable`` needs every GPU
    to say the fabric does not concern it (PCIe and pre-Hopper boards).
    """
    states = [_fabric_state(nv, notes, index, handle) for index, handle in handles.items()]
    if not states:
        return None
    if all(s == "not-supported" for s in states):
        return "not-applicable"
    if "not-running" in states:
        return "not-running"
    if all(s in ("running", "not-supported") for s in states):
        return "running"
    return None


def _fabric_state(nv: Any, notes: List[str], index: int, handle: Any) -> Optional[str]:
    err: Any = None
    try:
        # pynvml's wrappers pass the pointer through; the structures are our own
        info: Any = None
        fn_v = getattr(nv, "nvmlDeviceGetGpuFabricInfoV", None)
        if fn_v is not None:
            info = _fabric_info_v2()
            _, err = _dev(nv, fn_v, handle, ctypes.byref(info))
        if info is None or (err is not None and err.value in (_FUNCTION_NOT_FOUND,
                                                               _ARGUMENT_VERSION_MISMATCH)):
            fn = getattr(nv, "nvmlDeviceGetGpuFabricInfo", None)
            if fn is None:
                _once(notes, "nvml: this pynvml has no fabric query")
                return None
            info = _FabricInfo()
            _, err = _dev(nv, fn, handle, ctypes.byref(info))
    except _Lost:
        notes.append(f"nvml: gpu {index} was lost while its fabric state was read")
        return None
    if err is not None:
        if err.value == _NOT_SUPPORTED:
            return "not-supported"
        if err.value == _FUNCTION_NOT_FOUND:
            _once(notes, "nvml: this driver has no fabric query")
            return None
        notes.append(f"nvml: gpu {index}: fabric state: {err}")
        return None
    if info.state == _FABRIC_NOT_SUPPORTED:
        return "not-supported"
    if info.state == _FABRIC_NOT_STARTED:
        notes.append(f"nvml: gpu {index}: fabric registration has not started "
                     f"(is nvidia-fabricmanager running?)")
        return "not-running"
    if info.state == _FABRIC_IN_PROGRESS:
        notes.append(f"nvml: gpu {index}: fabric registration is in progress")
        return None
    if info.state == _FABRIC_COMPLETED:
        if info.status == 0:
            return "running"
        notes.append(f"nvml: gpu {index}: fabric registration failed: "
                     f"{nv.NVMLError(info.status)}")
        return "not-running"
    notes.append(f"nvml: gpu {index}: unknown fabric state {info.state}")
    return None


def _once(notes: List[str], note: str) -> None:
    """Add a machine-wide note once, however many GPUs run into it."""
    if note not in notes:
        notes.append(note)
