"""The ``Snapshot`` value: what one machine has, as recorded by ``envlock snapshot``.

The JSON form (schema ``envlock.snapshot/1``) is a contract: fields may be added, never
renamed. Unknown values are ``null``. :func:`Snapshot.from_dict` accepts any document of
schema major 1 (fields it does not know are kept in ``extra`` and written back), refuses a
newer major with a clear message, and reports the first malformed field by its path.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from envlock.errors import InputError

__all__ = [
    "SCHEMA",
    "Host",
    "PythonInfo",
    "Driver",
    "GpuInfo",
    "Link",
    "Library",
    "TorchInfo",
    "Snapshot",
    "load_snapshot",
    "PROVENANCE",
    "FACT_GROUPS",
]

SCHEMA = "envlock.snapshot/1"
#: How a snapshot knows a fact: read on the machine, stated by the user (``--gpu``,
#: ``--driver`` on a build host), or not recorded at all (unknown, never "none").
PROVENANCE = ("observed", "stated", "not-recorded")
#: The facts provenance is kept for.
FACT_GROUPS = ("driver", "gpus", "links", "packages", "libraries", "torch", "env", "host")
#: variables a launcher sets in each process it starts (recorded by the probe; see
#: :attr:`Snapshot.taken_in_a_job`)
LAUNCHER_MARKS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "TORCHELASTIC_RUN_ID", "SLURM_PROCID",
                  "OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK")
#: the launcher variables a snapshot records: the marks, and the job id. They say which job
#: and rank took the snapshot, so ranks of one job differ on them by design (fleet never
#: compares them).
LAUNCHER_VARIABLES = LAUNCHER_MARKS + ("SLURM_JOB_ID",)
LINK_KINDS = ("NVLINK", "NVSWITCH", "PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass(frozen=True)
class Host:
    hostname: Optional[str] = None
    os: Optional[str] = None
    distro: Optional[str] = None
    kernel: Optional[str] = None
    machine: Optional[str] = None
    glibc: Optional[str] = None
    container: Optional[str] = None
    virtualization: Optional[str] = None
    iommu: Optional[bool] = None
    shm_bytes: Optional[int] = None
    cpu_count: Optional[int] = None


@dataclass(frozen=True)
class PythonInfo:
    version: Optional[str] = None
    implementation: Optional[str] = None
    executable: Optional[str] = None


@dataclass(frozen=True)
class Driver:
    version: Optional[str] = None
    cuda: Optional[str] = None
    fabric_manager: Optional[str] = None
    #: why NVML failed: driver-not-loaded, library-mismatch, no-permission, not-found, unknown
    error: Optional[str] = None
    source: Optional[str] = None  # nvml | proc | sysfs | stated


@dataclass(frozen=True)
class GpuInfo:
    index: int
    name: Optional[str] = None
    uuid: Optional[str] = None
    compute_capability: Optional[str] = None
    memory_mib: Optional[int] = None
    pci_bus_id: Optional[str] = None
    mig: Optional[bool] = None
    lost: Optional[bool] = None


@dataclass(frozen=True)
class Link:
    a: int
    b: int
    kind: Optional[str] = None
    p2p: Optional[bool] = None


@dataclass(frozen=True)
class Library:
    name: str
    version: Optional[str] = None
    path: Optional[str] = None
    owner: Optional[str] = None
    selected: bool = False
    loaded: Optional[bool] = None
    #: the soname the file carries (``libcudart.so.12``); copies with different sonames
    #: never stand in for each other, whatever their versions
    soname: Optional[str] = None
    #: for the selected copy, the loader step that found it: LD_PRELOAD, RPATH,
    #: LD_LIBRARY_PATH, RUNPATH, ld.so.cache, default (None: not recorded)
    via: Optional[str] = None
    #: what put it on that path: the ld.so.conf file naming its directory, or the object
    #: whose RPATH/RUNPATH does
    via_source: Optional[str] = None

    @property
    def soname_key(self) -> Optional[str]:
        """The soname, or for snapshots that did not record it the one the file name
        implies (``libcudart.so.12.1.105`` -> ``libcudart.so.12``).

        >>> Library("cudart", path="/usr/local/cuda-13.0/lib/libcudart.so.13.0.96").soname_key
        'libcudart.so.13'
        """
        if self.soname:
            return self.soname
        base = (self.path or "").rsplit("/", 1)[-1]
        m = re.match(r"^(lib[A-Za-z_]+?)(?:-[0-9a-f]{8})?\.so\.(\d+)", base)
        return f"{m.group(1)}.so.{m.group(2)}" if m else None


@dataclass(frozen=True)
class TorchInfo:
    version: Optional[str] = None
    cuda: Optional[str] = None
    cudnn: Optional[str] = None
    nccl: Optional[str] = None
    arch_list: Optional[Tuple[str, ...]] = None
    source: Optional[str] = None  # files | import


@dataclass(frozen=True)
class Snapshot:
    taken_at: Optional[str] = None
    host: Host = field(default_factory=Host)
    python: PythonInfo = field(default_factory=PythonInfo)
    driver: Optional[Driver] = None
    gpus: Tuple[GpuInfo, ...] = ()
    links: Tuple[Link, ...] = ()
    packages: Mapping[str, str] = field(default_factory=dict)
    libraries: Tuple[Library, ...] = ()
    torch: Optional[TorchInfo] = None
    env: Mapping[str, str] = field(default_factory=dict)
    #: how the hardware facts were obtained: probed | stated (--gpu/--driver) | none
    hardware_source: Optional[str] = None
    notes: Tuple[str, ...] = ()
    #: per fact group (:data:`FACT_GROUPS`), one of :data:`PROVENANCE`; a group missing
    #: here is derived by :meth:`provenance_of` (old snapshots carry none)
    provenance: Mapping[str, str] = field(default_factory=dict)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    # -- provenance --------------------------------------------------------------------
    def provenance_of(self, group: str) -> str:
        """``observed``, ``stated`` or ``not-recorded`` for one of :data:`FACT_GROUPS`.

        Snapshots written before provenance was recorded are read by what their
        ``hardware_source`` implies: a stated snapshot stated its GPUs and driver and
        probed no links; one with no hardware probe recorded none of the three.

        >>> Snapshot(hardware_source="stated").provenance_of("links")
        'not-recorded'
        """
        present = {"driver": self.driver is not None, "gpus": bool(self.gpus),
                   "links": bool(self.links)}.get(group)
        if group in self.provenance:
            value = self.provenance[group]
            # facts a person added to a file are there: stated, whatever the label says
            return "stated" if value == "not-recorded" and present else value
        if group in ("driver", "gpus", "links"):
            if self.hardware_source == "none":
                return "not-recorded"
            if self.hardware_source == "stated":
                return "stated" if present else "not-recorded"
        return "observed"

    def normalized(self) -> "Snapshot":
        """The same snapshot keeping only the provenance that differs from what the rest
        implies, so a JSON round trip gives an equal value."""
        base = replace(self, provenance={})
        explicit = {k: v for k, v in self.provenance.items() if v != base.provenance_of(k)}
        return replace(self, provenance=explicit)

    def recorded(self, group: str) -> bool:
        """Whether the snapshot holds this fact group at all (stated counts)."""
        return self.provenance_of(group) != "not-recorded"

    # -- JSON --------------------------------------------------------------------------
    def to_dict(self) -> Dict[str, Any]:
        d: Dict[str, Any] = {"schema": SCHEMA, "taken_at": self.taken_at}
        d["host"] = asdict(self.host)
        d["python"] = asdict(self.python)
        d["driver"] = None if self.driver is None else asdict(self.driver)
        d["gpus"] = [asdict(g) for g in self.gpus]
        d["links"] = [asdict(link) for link in self.links]
        d["packages"] = dict(sorted(self.packages.items()))
        d["libraries"] = [asdict(lib) for lib in self.libraries]
        if self.torch is None:
            d["torch"] = None
        else:
            t = asdict(self.torch)
            t["arch_list"] = None if self.torch.arch_list is None else list(self.torch.arch_list)
            d["torch"] = t
        d["env"] = dict(sorted(self.env.items()))
        d["hardware_source"] = self.hardware_source
        d["provenance"] = {g: self.provenance_of(g) for g in FACT_GROUPS}
        d["notes"] = list(self.notes)
        for k, v in self.extra.items():
            d.setdefault(k, v)
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2) + "\n"

    @classmethod
    def from_dict(cls, data: Any, origin: str = "snapshot") -> "Snapshot":
        if not isinstance(data, dict):
            raise InputError(f"{origin}: a snapshot is a JSON object")
        schema = data.get("schema")
        if not isinstance(schema, str) or not schema.startswith("envlock.snapshot/"):
            raise InputError(f"{origin}: not an envlock snapshot (schema is {schema!r})")
        try:
            major = int(schema.rsplit("/", 1)[1].split(".")[0])
        except ValueError:
            raise InputError(f"{origin}: unreadable schema version {schema!r}") from None
        if major > 1:
            raise InputError(f"{origin}: snapshot schema {schema} comes from a newer envlock; "
                             f"this envlock reads {SCHEMA} (upgrade envlock)")
        if major < 1:
            raise InputError(f"{origin}: unknown snapshot schema {schema!r}")
        r = _Reader(origin)
        host = r.record(Host, data.get("host") or {}, "host")
        python = r.record(PythonInfo, data.get("python") or {}, "python")
        driver = None if data.get("driver") is None else r.record(Driver, data["driver"], "driver")
        if driver is not None and driver.version is not None and \
                not re.fullmatch(r"[0-9]{2,3}(\.[0-9]{1,3}){1,2}", driver.version):
            r.fail("driver.version", f"{driver.version!r} is not an NVIDIA driver version")
        gpus = tuple(r.record(GpuInfo, g, f"gpus[{i}]")
                     for i, g in enumerate(r.array(data.get("gpus"), "gpus")))
        for i, g in enumerate(gpus):
            if g.compute_capability is not None and \
                    not re.fullmatch(r"[0-9]{1,2}\.[0-9]", g.compute_capability):
                r.fail(f"gpus[{i}].compute_capability",
                       f"{g.compute_capability!r} is not a compute capability like '9.0'")
        links = tuple(r.record(Link, x, f"links[{i}]")
                      for i, x in enumerate(r.array(data.get("links"), "links")))
        libraries = tuple(r.record(Library, x, f"libraries[{i}]")
                          for i, x in enumerate(r.array(data.get("libraries"), "libraries")))
        torch = None
        if data.get("torch") is not None:
            t = dict(r.obj(data["torch"], "torch"))
            if t.get("arch_list") is not None:
                t["arch_list"] = tuple(r.str_array(t["arch_list"], "torch.arch_list"))
                from envlock.kernels import parse_target

                for i, a in enumerate(t["arch_list"]):
                    try:
                        parse_target(a)
                    except ValueError:
                        r.fail(f"torch.arch_list[{i}]",
                               f"{a[:40]!r} is not a GPU target like 'sm_90' or 'compute_90'")
            torch = r.record(TorchInfo, t, "torch")
            # checks take the CUDA major from it: text such as "D,x" was an internal error
            if torch.cuda is not None and not re.fullmatch(r"[0-9]{1,2}(\.[0-9]{1,3}){0,2}",
                                                           torch.cuda):
                r.fail("torch.cuda", f"{torch.cuda[:40]!r} is not a CUDA version like '12.4'")
        packages = r.str_map(data.get("packages") or {}, "packages")
        env = r.str_map(data.get("env") or {}, "env")
        known = {"schema", "taken_at", "host", "python", "driver", "gpus", "links", "packages",
                 "libraries", "torch", "env", "hardware_source", "notes", "provenance"}
        extra = {k: v for k, v in data.items() if k not in known}
        notes = r.str_array(data.get("notes"), "notes")
        source = data.get("hardware_source")
        if source is not None and not isinstance(source, str):
            r.fail("hardware_source", "expected a string")
        prov = r.str_map(data.get("provenance") or {}, "provenance")
        for k, v in prov.items():
            if v not in PROVENANCE:
                r.fail(f"provenance.{k}", f"{v!r} is not one of {', '.join(PROVENANCE)}")
        prov = {k: v for k, v in prov.items() if k in FACT_GROUPS}
        taken = data.get("taken_at")
        if taken is not None and not isinstance(taken, str):
            r.fail("taken_at", "expected a string")
        snap = cls(
            taken_at=taken,
            host=host, python=python, driver=driver, gpus=gpus, links=links,
            packages=packages, libraries=libraries, torch=torch, env=env,
            hardware_source=source,
            notes=tuple(notes),
            extra=extra,
        )
        return replace(snap, provenance=prov).normalized()

    # -- views -------------------------------------------------------------------------
    def visible_gpus(self) -> List[GpuInfo]:
        """GPUs the job sees: ``CUDA_VISIBLE_DEVICES`` (indices or UUIDs) applied.

        An empty or ``-1`` value hides every GPU; an unknown entry stops the list there,
        as CUDA itself does.
        """
        cvd = self.env.get("CUDA_VISIBLE_DEVICES")
        if cvd is None:
            return list(self.gpus)
        out: List[GpuInfo] = []
        for item in (x.strip() for x in cvd.split(",")):
            if not item:
                break
            match = None
            if re.fullmatch(r"-?[0-9]+", item):  # ASCII digits only ("²".isdigit() is True)
                idx = int(item)
                if idx < 0:
                    break
                match = next((g for g in self.gpus if g.index == idx), None)
            else:
                match = next((g for g in self.gpus
                              if g.uuid and (g.uuid == item or g.uuid.startswith(item))), None)
            if match is None:
                break
            if match not in out:
                out.append(match)
        return out

    @property
    def taken_in_a_job(self) -> bool:
        """Whether the recording process was started by a launcher (torchrun, srun, MPI):
        its environment is then a job's. A snapshot taken from a login shell does not have
        what the job's launcher or batch script exported, nor what it unset."""
        return any(k in self.env for k in LAUNCHER_MARKS)

    def with_env(self, **env: str) -> "Snapshot":
        return replace(self, env={**self.env, **env})


class _Reader:
    """Type checks with paths, raising InputError on the first problem."""

    def __init__(self, origin: str) -> None:
        self.origin = origin

    def fail(self, path: str, msg: str) -> None:
        raise InputError(f"{self.origin}: {path}: {msg}")

    def obj(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, dict):
            self.fail(path, "expected an object")
        return value

    def array(self, value: Any, path: str) -> List[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            self.fail(path, "expected an array")
        return value

    def str_array(self, value: Any, path: str) -> List[str]:
        items = self.array(value, path)
        for i, v in enumerate(items):
            if not isinstance(v, str):
                self.fail(f"{path}[{i}]", "expected a string")
        return items

    def str_map(self, value: Any, path: str) -> Dict[str, str]:
        m = self.obj(value, path)
        out = {}
        for k, v in m.items():
            if not isinstance(v, str):
                self.fail(f"{path}.{k}", "expected a string")
            out[str(k)] = v
        return out

    def record(self, cls: Any, value: Any, path: str) -> Any:
        m = self.obj(value, path)
        kwargs: Dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in m:
                continue
            v = m[f.name]
            typ = str(f.type)
            if v is None:
                if "Optional" in typ:
                    kwargs[f.name] = None
                    continue
                self.fail(f"{path}.{f.name}", "must not be null")
            if "bool" in typ and "int" not in typ:
                ok = isinstance(v, bool)
            elif typ.startswith("int") or typ == "Optional[int]":
                ok = isinstance(v, int) and not isinstance(v, bool)
            elif "Tuple" in typ:
                ok = isinstance(v, (list, tuple))
                v = tuple(v) if ok else v
            else:
                ok = isinstance(v, str)
            if not ok:
                self.fail(f"{path}.{f.name}", f"unexpected value {v!r}")
            kwargs[f.name] = v
        for f in fields(cls):
            if f.name not in kwargs and f.default is dataclass_missing() and \
                    f.default_factory is dataclass_missing():
                self.fail(f"{path}.{f.name}", "missing")
        return cls(**kwargs)


def dataclass_missing() -> Any:
    from dataclasses import MISSING

    return MISSING


def load_snapshot(path: str) -> Snapshot:
    """Read a snapshot file; every failure is a one-line InputError."""
    from envlock._files import read_user_text

    text = read_user_text(path, "snapshot")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise InputError(f"{path} is not valid JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to be a snapshot") from None
    try:
        return Snapshot.from_dict(data, origin=path)
    except RecursionError:
        raise InputError(f"{path}: nested too deeply to be a snapshot") from None
