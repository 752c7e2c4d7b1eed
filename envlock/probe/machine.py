"""Compose the probe backends into one :class:`~envlock.snapshot.Snapshot`."""

from __future__ import annotations

import os
import platform as _platform
import sys
import time
from dataclasses import replace
from typing import List, Mapping, Optional, Sequence, Tuple

from envlock.snapshot import Driver, GpuInfo, Library, PythonInfo, Snapshot, TorchInfo

__all__ = ["take_snapshot", "stated_hardware", "parse_gpu_arg"]


def parse_gpu_arg(text: str) -> Tuple[str, int]:
    """``H20:8`` -> ("H20", 8); ``'RTX 4090'`` -> ("RTX 4090", 1)."""
    from envlock.errors import UsageError

    name, sep, count = text.rpartition(":")
    if sep and count.isdigit():
        if int(count) < 1:
            raise UsageError(f"--gpu {text!r}: the count must be at least 1")
        return name.strip(), int(count)
    return text.strip(), 1


def stated_hardware(gpus: Sequence[str], driver: Optional[str], env: Mapping[str, str]
                    ) -> Tuple[Optional[Driver], Tuple[GpuInfo, ...], List[str]]:
    """Hardware a GPU-less build host states instead of probing (``--gpu``, ``--driver``,
    ``UV_CUDA_DRIVER_VERSION``, ``CONDA_OVERRIDE_CUDA``)."""
    from envlock.errors import UsageError
    from envlock.matrix import get_matrix
    from envlock.versions import is_driver_version

    notes: List[str] = []
    drv: Optional[Driver] = None
    version = driver or env.get("UV_CUDA_DRIVER_VERSION")
    if version:
        if not is_driver_version(version):
            raise UsageError(f"driver version {version!r} is not like 535.104.05")
        drv = Driver(version=version, source="stated")
        if not driver:
            notes.append("driver version from UV_CUDA_DRIVER_VERSION")
    cuda_hint = env.get("CONDA_OVERRIDE_CUDA")
    if cuda_hint:
        drv = replace(drv or Driver(source="stated"), cuda=cuda_hint)
        notes.append("driver CUDA version from CONDA_OVERRIDE_CUDA")
    out: List[GpuInfo] = []
    if gpus:
        matrix = get_matrix()
        for item in gpus:
            name, count = parse_gpu_arg(item)
            g = matrix.gpu(name)
            for _ in range(count):
                out.append(GpuInfo(index=len(out),
                                   name=g.nvml_names[0] if g.nvml_names else g.name,
                                   compute_capability=g.compute_capability,
                                   memory_mib=int(g.memory_gb * 1024) if g.memory_gb else None,
                                   mig=False, lost=False))
    return drv, tuple(out), notes


def take_snapshot(*, deep: bool = False, gpus: Sequence[str] = (), driver: Optional[str] = None,
                  env: Optional[Mapping[str, str]] = None,
                  paths: Optional[Sequence[str]] = None, probe_gpus: bool = True,
                  python: Optional[str] = None) -> Snapshot:
    """Record this machine. ``gpus``/``driver`` state the hardware instead of probing it.

    ``python`` names the interpreter whose environment is recorded (packages, libraries,
    torch); by default the one running envlock. envlock installed in its own virtual
    environment passes the locked environment's interpreter here."""
    from envlock.matrix.cache import cache_dir
    from envlock.probe.host import probe_host, relevant_env
    from envlock.probe.packages import installed_packages, site_dirs
    from envlock.probe.torchinfo import torch_from_files

    env = dict(os.environ if env is None else env)
    notes: List[str] = []
    host = probe_host(env)
    if python is not None:
        from envlock.probe.interpreter import describe_interpreter

        other = describe_interpreter(python, env=env)
        py = PythonInfo(version=other.version, implementation=other.implementation,
                        executable=other.executable)
        paths = list(other.path) if paths is None else paths
    else:
        py = PythonInfo(version=_platform.python_version(),
                        implementation=_platform.python_implementation(),
                        executable=sys.executable)
    dirs = site_dirs(paths)
    packages = installed_packages(dirs)

    stated_driver, stated_gpus, stated_notes = stated_hardware(gpus, driver, env)
    notes.extend(stated_notes)
    links: Tuple = ()
    drv: Optional[Driver]
    # what was read here, what the user stated, what nobody recorded (unknown, not "none")
    provenance = {"driver": "not-recorded", "gpus": "not-recorded", "links": "not-recorded"}
    if gpus or driver:
        drv, gpu_list, hw_source = stated_driver, stated_gpus, "stated"
        if drv is not None:
            provenance["driver"] = "stated"
        if gpu_list:
            provenance["gpus"] = "stated"
    elif probe_gpus:
        from envlock.probe.nvml import probe_nvml

        report = probe_nvml()
        drv, gpu_list, links = report.driver, report.gpus, report.links
        notes.extend(report.notes)
        hw_source = "probed"
        provenance["driver"] = "observed"
        if drv is None or not drv.error:
            provenance["gpus"] = provenance["links"] = "observed"
        if not gpu_list and drv is not None and drv.error:
            # NVML failed: the PCI bus still says which NVIDIA GPUs are installed
            from envlock.probe.driverfs import gpus_from_sysfs

            gpu_list = gpus_from_sysfs()
            if gpu_list or os.path.isdir("/sys/bus/pci/devices"):  # the bus was read
                provenance["gpus"] = "observed"
            if gpu_list:
                notes.append(f"{len(gpu_list)} NVIDIA GPU(s) on the PCI bus; names and "
                             f"capabilities unknown because NVML failed ({drv.error})")
        if (drv is None or not drv.version) and stated_driver is not None:
            drv = stated_driver
            hw_source = "stated"
            provenance["driver"] = "stated"
    else:
        drv, gpu_list, hw_source = None, (), "none"

    cdir = cache_dir()
    libraries: Tuple[Library, ...] = ()
    try:
        from envlock.probe.libraries import probe_libraries

        libraries = probe_libraries(env=env, site_dirs=dirs,
                                    version_cache=cdir / "libversions.json" if cdir else None)
    except Exception as exc:  # noqa: BLE001 - a probe failure is a note, never a crash
        notes.append(f"native library probe failed: {type(exc).__name__}: {exc}")
    torch: Optional[TorchInfo] = torch_from_files(dirs, cdir)
    if deep:
        from envlock.probe.deep import probe_deep

        rep = probe_deep(python=py.executable or sys.executable, env=env)
        if rep.ok:
            torch = TorchInfo(version=rep.version, cuda=rep.cuda, cudnn=rep.cudnn,
                              nccl=rep.nccl, arch_list=rep.arch_list, source="import")
            mapped = set(rep.maps)
            libraries = tuple(replace(lib, loaded=(os.path.realpath(lib.path) in mapped)
                                      if lib.path else None) for lib in libraries)
            if rep.error:
                notes.append(f"torch.cuda: {rep.error}")
        else:
            notes.append(f"deep probe: {rep.error}")
    return Snapshot(
        taken_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        host=host, python=py, driver=drv, gpus=tuple(gpu_list), links=tuple(links),
        packages=packages, libraries=libraries, torch=torch, env=relevant_env(env),
        hardware_source=hw_source, notes=tuple(notes), provenance=provenance,
    ).normalized()
