"""A fake ``libnvidia-ml.so.1`` for tests, so the real ``pynvml`` binding runs without a GPU.

``fake_nvml.c`` (beside this file) is compiled with the system C compiler into a temporary
directory; a child Python started with ``LD_LIBRARY_PATH`` on that directory loads it where
it would load NVIDIA's library. The machine it pretends to be is a scenario file (format
at the top of ``fake_nvml.c``)::

    libdir = build_fake_nvml(tmp)                 # once per session; cached
    scen = scenario_file(tmp, '''
        driver 535.104.05
        cuda 12020
        gpu 0 name="NVIDIA H20" uuid=GPU-0 cc=9.0 mem=97871 bus=00000000:18:00.0 mig=0
    ''')
    subprocess.run([...], env=nvml_env(libdir, scen))     # any command: envlock snapshot, ...
    result = run_probe(libdir, scen)               # or: probe_nvml() in a child, as JSON

The scenarios of ``tests/probe/test_nvml.py`` are here as constants so end-to-end tests can
reuse them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Union

__all__ = [
    "SOURCE",
    "FakeNvmlUnavailable",
    "compiler",
    "build_fake_nvml",
    "scenario_file",
    "nvml_env",
    "run_probe",
    "H20_HGX",
    "MIXED_PCIE",
    "LOST_GPU",
]

SOURCE = Path(__file__).with_name("fake_nvml.c")
LIBRARY = "libnvidia-ml.so.1"

PathLike = Union[str, "os.PathLike[str]"]


class FakeNvmlUnavailable(RuntimeError):
    """No C compiler: the fake library cannot be built (tests skip)."""


def compiler() -> Optional[str]:
    """The C compiler to build with: ``$CC`` or gcc, if it is installed."""
    return shutil.which(os.environ.get("CC") or "gcc")


def build_fake_nvml(tmpdir: PathLike) -> Path:
    """Compile the fake into ``tmpdir`` and return the directory holding the library.

    The output directory is named after a hash of the source, so calling this again with
    the same ``tmpdir`` (a session-scoped temp dir) reuses the build. Compiler warnings are
    errors: the fake must match NVML's signatures exactly, not approximately.
    """
    cc = compiler()
    if cc is None:
        raise FakeNvmlUnavailable("no C compiler (gcc or $CC) to build the fake NVML")
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    libdir = Path(tmpdir) / f"fake-nvml-{digest}"
    lib = libdir / LIBRARY
    if lib.is_file():
        return libdir
    libdir.mkdir(parents=True, exist_ok=True)
    partial = libdir / (LIBRARY + ".part")
    cmd = [cc, "-shared", "-fPIC", "-fvisibility=hidden", "-O1", "-std=c99", "-Wall",
           "-Wextra", "-Werror", f"-Wl,-soname,{LIBRARY}", "-o", str(partial), str(SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"building the fake NVML failed:\n{' '.join(cmd)}\n{proc.stderr}")
    partial.replace(lib)
    return libdir


def scenario_file(tmpdir: PathLike, text: str, name: str = "scenario.nvml") -> Path:
    """Write a scenario (dedented) to ``tmpdir/name`` and return its path."""
    path = Path(tmpdir) / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).strip() + "\n", encoding="utf-8")
    return path


def nvml_env(libdir: PathLike, scenario: PathLike, *, log: Optional[PathLike] = None,
             base: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """An environment in which ``libnvidia-ml.so.1`` is the fake playing ``scenario``.

    ``LD_LIBRARY_PATH`` is replaced, not extended, so no other NVML directory leaks in.
    With ``log``, the fake appends ``init``/``shutdown`` lines to that file.
    """
    env = dict(os.environ if base is None else base)
    env["LD_LIBRARY_PATH"] = str(libdir)
    env["FAKE_NVML_SCENARIO"] = str(scenario)
    if log is not None:
        env["FAKE_NVML_LOG"] = str(log)
    else:
        env.pop("FAKE_NVML_LOG", None)
    return env


# The child: probe, then print the report (and what it cost) as JSON. With "hide_system",
# a libnvidia-ml.so.1 the loader finds anyway (ld.so.cache on a machine with a real
# driver) is refused to pynvml exactly as a missing one would be: CDLL raises OSError.
_CHILD = r"""
import ctypes, dataclasses, json, sys, time
args = json.loads(sys.argv[1])
system_nvml = False
if args.pop("hide_system", False):
    try:
        ctypes.CDLL("libnvidia-ml.so.1")
        system_nvml = True
    except OSError:
        pass
    if system_nvml:
        import pynvml
        _real = pynvml.CDLL
        def _refuse(name, *a, **k):
            if "nvidia-ml" in str(name):
                raise OSError(name + ": cannot open shared object file")
            return _real(name, *a, **k)
        pynvml.CDLL = _refuse
from envlock.probe.nvml import probe_nvml
start = time.perf_counter()
report = probe_nvml(**args)
seconds = time.perf_counter() - start
print(json.dumps({"report": dataclasses.asdict(report), "seconds": seconds,
                  "system_nvml": system_nvml, "torch_imported": "torch" in sys.modules}))
"""


def run_probe(libdir: PathLike, scenario: PathLike, *, log: Optional[PathLike] = None,
              hide_system: bool = False, timeout: float = 30,
              **probe_args: Any) -> Dict[str, Any]:
    """Run ``probe_nvml(**probe_args)`` in a child Python against the fake.

    Returns ``{"report": <NvmlReport as a dict>, "seconds": <probe time>,
    "system_nvml": <a real NVML was hidden>, "torch_imported": bool}``.
    """
    args = dict(probe_args, hide_system=hide_system)
    proc = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(args)],
                          env=nvml_env(libdir, scenario, log=log),
                          capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(f"probe child failed ({proc.returncode}):\n{proc.stderr}")
    result: Dict[str, Any] = json.loads(proc.stdout)
    result["stderr"] = proc.stderr
    return result


# -- scenarios -------------------------------------------------------------------------

#: An HGX H20: 8 GPUs, each with 18 NVLinks into the NVSwitches, fabric manager running.
H20_HGX = "\n".join(
    ["driver 535.104.05", "cuda 12020", "p2p_all 0", "topo_all SYS"]
    + [f'gpu {i} name="NVIDIA H20" uuid=GPU-{i:08x}-aaaa-bbbb-cccc-{i:012x} cc=9.0 '
       f"mem=97871 bus=00000000:{bus}:00.0 mig=0" for i, bus in
       enumerate(["18", "2A", "3A", "5D", "9A", "AB", "BA", "DB"])]
    + [f"nvswitch {i}" for i in range(8)]
    + [f"fabric {i} state=3 status=0" for i in range(8)]
) + "\n"

#: A workstation: A6000 and 3090 under one PCIe switch, a 2080 Ti on the other socket.
MIXED_PCIE = "\n".join(
    ["driver 550.54.15", "cuda 12040"]
    + [f'gpu {i} name="{name}" uuid=GPU-{tag}0000-0000-0000-0000-000000000000 cc={cc} '
       f"mem={mem} bus=00000000:{bus}:00.0 mig=-1" for i, (name, tag, cc, mem, bus) in
       enumerate([("NVIDIA RTX A6000", "a600", "8.6", 49140, "17"),
                  ("NVIDIA GeForce RTX 3090", "3090", "8.6", 24576, "1B"),
                  ("NVIDIA GeForce RTX 2080 Ti", "2080", "7.5", 11264, "B3")])]
    + ["topo 0 1 PIX", "topo 0 2 PHB", "topo 1 2 SYS",
       "p2p 0 1 0",        # NVML_P2P_STATUS_OK
       "p2p 0 2 2",        # NVML_P2P_STATUS_GPU_NOT_SUPPORTED
       "p2p_error 1 2 3"]  # the query fails: NVML_ERROR_NOT_SUPPORTED
) + "\n"

#: Four A100s, the last fallen off the bus (NVML_ERROR_GPU_IS_LOST on its handle).
LOST_GPU = "\n".join(
    ["driver 535.104.05", "cuda 12020", "topo_all NODE", "p2p_all 0"]
    + [f'gpu {i} name="NVIDIA A100-SXM4-80GB" uuid=GPU-{i:08x}-1111-2222-3333-{i:012x} '
       f"cc=8.0 mem=81920 bus=00000000:{bus}:00.0 mig=0 lost={1 if i == 3 else 0}"
       for i, bus in enumerate(["07", "0F", "47", "4E"])]
) + "\n"
