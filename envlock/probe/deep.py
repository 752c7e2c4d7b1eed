"""``--deep``: import torch in a child process and record what it really loads.

The child reports ``torch.cuda.get_arch_list()`` (or the compiled flags when no GPU is
visible), the cuDNN and NCCL versions torch sees, the visible devices, and every
``.so`` mapped into the process (from ``/proc/self/maps``), so "installed" and "loaded"
can differ visibly. A crash, a hang or a missing torch is a value, not an exception.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from typing import Mapping, Optional, Tuple

__all__ = ["DeepReport", "probe_deep", "CHILD"]

CHILD = r"""
import json, sys
out = {"ok": False}
try:
    import torch
    out["version"] = torch.__version__
    out["cuda"] = torch.version.cuda
    arch = []
    try:
        arch = list(torch.cuda.get_arch_list())
    except Exception:
        pass
    if not arch and torch.version.cuda:
        try:
            arch = list(torch._C._cuda_getArchFlags().split())
        except Exception:
            arch = []
    out["arch_list"] = arch
    try:
        v = torch.backends.cudnn.version()
        if v is None:
            out["cudnn"] = None
        elif v >= 10000:  # cuDNN 9: 90100 -> 9.1.0
            out["cudnn"] = "%d.%d.%d" % (v // 10000, (v // 100) % 100, v % 100)
        else:  # cuDNN 8: 8902 -> 8.9.2
            out["cudnn"] = "%d.%d.%d" % (v // 1000, (v // 100) % 10, v % 100)
    except Exception as exc:
        out["cudnn_error"] = str(exc)[:200]
    try:
        n = torch.cuda.nccl.version()
        out["nccl"] = ".".join(str(x) for x in n) if isinstance(n, tuple) else str(n)
    except Exception as exc:
        out["nccl_error"] = str(exc)[:200]
    devices = []
    try:
        if torch.cuda.is_available():
            for i in range(torch.cuda.device_count()):
                p = torch.cuda.get_device_properties(i)
                devices.append({"index": i, "name": p.name, "cc": "%d.%d" % (p.major, p.minor),
                                "memory_mib": int(p.total_memory // (1024 * 1024))})
    except Exception as exc:
        out["cuda_error"] = str(exc)[:300]
    out["devices"] = devices
    maps = []
    try:
        with open("/proc/self/maps") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) >= 6 and ".so" in parts[-1]:
                    maps.append(parts[-1])
    except OSError:
        pass
    out["maps"] = sorted(set(maps))
    out["ok"] = True
except Exception as exc:
    out["error"] = "%s: %s" % (type(exc).__name__, str(exc)[:300])
sys.stdout.write(json.dumps(out))
"""


@dataclass(frozen=True)
class DeepReport:
    ok: bool
    version: Optional[str] = None
    cuda: Optional[str] = None
    cudnn: Optional[str] = None
    nccl: Optional[str] = None
    arch_list: Optional[Tuple[str, ...]] = None
    devices: Tuple[Mapping[str, object], ...] = ()
    maps: Tuple[str, ...] = ()
    error: Optional[str] = None


def probe_deep(python: str = sys.executable, env: Optional[Mapping[str, str]] = None,
               timeout: float = 120.0) -> DeepReport:
    try:
        proc = subprocess.run([python, "-c", CHILD], capture_output=True, text=True,
                              timeout=timeout, env=dict(env) if env is not None else None)
    except subprocess.TimeoutExpired:
        return DeepReport(ok=False, error=f"importing torch did not finish in {timeout:.0f} s")
    except OSError as exc:
        return DeepReport(ok=False, error=f"cannot start {python}: {exc.strerror}")
    if proc.returncode != 0:
        sig = -proc.returncode if proc.returncode < 0 else None
        what = f"signal {sig}" if sig else f"exit code {proc.returncode}"
        tail = (proc.stderr or "").strip().splitlines()[-1:] or [""]
        return DeepReport(ok=False, error=f"importing torch died ({what}) {tail[0][:200]}")
    try:
        data = json.loads(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError, RecursionError):
        return DeepReport(ok=False, error="the torch probe printed no report")
    if not isinstance(data, dict):
        return DeepReport(ok=False, error="the torch probe printed no report")
    if not data.get("ok"):
        return DeepReport(ok=False, error=data.get("error") or "torch is not importable")
    return DeepReport(
        ok=True,
        version=data.get("version"),
        cuda=data.get("cuda"),
        cudnn=data.get("cudnn"),
        nccl=data.get("nccl"),
        arch_list=tuple(data.get("arch_list") or ()),
        devices=tuple(data.get("devices") or ()),
        maps=tuple(os.path.realpath(p) for p in data.get("maps") or ()),
        error=data.get("cuda_error"),
    )
