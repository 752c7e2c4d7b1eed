"""``envlock snapshot --show FILE``: a snapshot as a person reads it.

Like PyTorch's ``collect_env``, but complete: the driver and where its facts came from,
the GPUs and the links between them, the copy of each CUDA library the loader will pick
(and whose it is), torch's build, the packages that decide GPU behaviour and the
environment. Unknown facts are printed as "unknown", never left out, and the first line
says what machine this is.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from typing import Any, Dict, List, Optional, Sequence

from envlock.cli.style import PLAIN, Style
from envlock.families import TORCH_FAMILY, is_cuda_wheel
from envlock.snapshot import Snapshot

__all__ = ["snapshot_text"]

_U = "unknown"


def _gib(mib: Optional[int]) -> str:
    return f"{round(mib / 1024)} GiB" if mib else "memory unknown"


def _ranges(indices: Sequence[int]) -> str:
    """``0-3,6``: GPU indices as runs."""
    runs: List[List[int]] = []
    for i in sorted(indices):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _headline(snap: Snapshot) -> str:
    host = snap.host.hostname or "a machine"
    gpus = Counter(g.name or "unknown GPU" for g in snap.gpus)
    hw = ", ".join(f"{n} x {name}" for name, n in gpus.items()) or "no GPUs"
    drv = snap.driver.version if snap.driver and snap.driver.version else None
    torch = snap.torch.version if snap.torch and snap.torch.version else \
        snap.packages.get("torch")
    parts = [hw, f"driver {drv}" if drv else "no usable driver",
             f"torch {torch}" if torch else "no torch"]
    return f"{host}: " + ", ".join(parts)


def snapshot_text(snap: Snapshot, *, source: str = "", verbose: bool = False,
                  style: Style = PLAIN) -> str:
    lines = [style.paint(_headline(snap), "bold")]
    if snap.taken_at or source:
        lines.append(f"  taken {snap.taken_at or 'at an unknown time'}"
                     + (f" ({source})" if source else ""))
    h = snap.host
    lines.append(style.paint("host", "bold"))
    lines.append(f"  {h.distro or h.os or _U}, kernel {h.kernel or _U}, {h.machine or _U}, "
                 f"glibc {h.glibc or _U}, {h.cpu_count or '?'} CPUs, /dev/shm "
                 + (f"{h.shm_bytes // (1 << 20)} MiB" if h.shm_bytes else _U)
                 + (f", in {h.container}" if h.container else "")
                 + (f", IOMMU {'on' if h.iommu else 'off'}" if h.iommu is not None else ""))
    py = snap.python
    lines.append(f"  Python {py.version or _U} ({py.implementation or '?'}) "
                 f"{py.executable or ''}".rstrip())
    lines.append(style.paint("driver", "bold"))
    d = snap.driver
    if d is None or not d.version:
        why = (d.error if d is not None and d.error else "no NVIDIA driver found")
        lines.append(f"  none usable ({why}): GPU facts below are what could be read without it")
    else:
        lines.append(f"  {d.version} (CUDA {d.cuda or _U}), from {d.source or _U}; "
                     f"Fabric Manager {d.fabric_manager or _U}")
    lines.append(style.paint(f"GPUs ({len(snap.gpus)})", "bold"))
    groups: Dict[tuple, List[int]] = {}
    for g in snap.gpus:
        key = (g.name or "unknown GPU", g.compute_capability or "?", g.memory_mib,
               bool(g.mig), bool(g.lost))
        groups.setdefault(key, []).append(g.index)
    if not snap.gpus:
        lines.append("  none found" + ("" if d is not None and d.version else
                                      " (without a driver, GPUs cannot be listed)"))
    for (name, cc, mem, mig, lost), idx in groups.items():
        lines.append(f"  {_ranges(idx)}: {name}, compute capability {cc}, {_gib(mem)}"
                     + (", MIG on" if mig else "")
                     + (", LOST (fallen off the bus)" if lost else ""))
    if verbose:
        for g in snap.gpus:
            lines.append(f"    {g.index}: {g.uuid or '?'} at {g.pci_bus_id or '?'}")
    if snap.links:
        kinds = Counter(link.kind or _U for link in snap.links)
        p2p = Counter({True: "on", False: "off", None: _U}[link.p2p] for link in snap.links)
        lines.append("  links: " + ", ".join(f"{n} pairs {k}" for k, n in kinds.items())
                     + "; P2P " + ", ".join(f"{v} for {n}" for v, n in p2p.items()))
        if verbose:
            for link in snap.links:
                lines.append(f"    {link.a}-{link.b}: {link.kind or _U}, P2P "
                             f"{ {True: 'on', False: 'off', None: _U}[link.p2p]}")
    elif len(snap.gpus) > 1:
        lines.append("  links: unknown (not recorded)")
    if cvd := snap.env.get("CUDA_VISIBLE_DEVICES"):
        lines.append(f"  visible to jobs (CUDA_VISIBLE_DEVICES={cvd}): "
                     f"{', '.join(str(g.index) for g in snap.visible_gpus()) or 'none'}")
    lines.append(style.paint("libraries the loader will pick", "bold"))
    by: Dict[str, List[Any]] = {}
    for lib in snap.libraries:
        by.setdefault(lib.name, []).append(lib)
    if not by:
        lines.append("  none found on the search path")
    for name, copies in by.items():
        sel = next((c for c in copies if c.selected), None)
        others = len(copies) - (1 if sel else 0)
        if sel is None:
            lines.append(f"  lib{name}: none would load ({len(copies)} copies found)")
            continue
        owner = sel.owner or "system copy"
        lines.append(f"  lib{name} {sel.version or _U} ({owner})"
                     + (f", +{others} other cop{'y' if others == 1 else 'ies'}" if others else "")
                     + (f"  {sel.path}" if verbose else ""))
        if verbose:
            for c in copies:
                if c is not sel:
                    lines.append(f"    also {c.path} {c.version or _U} ({c.owner or 'system'})")
    t = snap.torch
    lines.append(style.paint("torch", "bold"))
    if t is None or not t.version:
        v = snap.packages.get("torch")
        lines.append(f"  torch {v} installed; build facts not read" if v else "  not installed")
    else:
        arch = " ".join(t.arch_list) if t.arch_list is not None else _U
        lines.append(f"  {t.version}: CUDA {t.cuda or 'none (CPU build)'}, cuDNN {t.cudnn or _U}, "
                     f"NCCL {t.nccl or _U} (from {t.source or _U})")
        lines.append(f"  compiled for: {arch or 'no GPU (CPU build)'}")
    gpu_pkgs = sorted((n, v) for n, v in snap.packages.items()
                      if n in TORCH_FAMILY or is_cuda_wheel(n))
    lines.append(style.paint(f"packages ({len(snap.packages)} installed)", "bold"))
    shown = gpu_pkgs if verbose else gpu_pkgs[:12]
    if shown:
        row = ", ".join(f"{n} {v}" for n, v in shown)
        row += (f", ... (+{len(gpu_pkgs) - 12}, --verbose)" if len(gpu_pkgs) > len(shown) else "")
        lines += textwrap.wrap(row, 100, initial_indent="  ", subsequent_indent="  ",
                               break_on_hyphens=False)
    else:
        lines.append("  no torch-family or CUDA wheels")
    lines.append(style.paint("environment", "bold"))
    if snap.env:
        items = sorted(snap.env.items())
        row = ", ".join(f"{k}={v}" for k, v in items[: None if verbose else 10]) \
            + (f", ... (+{len(items) - 10})" if not verbose and len(items) > 10 else "")
        lines += textwrap.wrap(row, 100, initial_indent="  ", subsequent_indent="  ",
                               break_on_hyphens=False)
    else:
        lines.append("  none of the variables envlock records is set")
    for note in snap.notes[: None if verbose else 3]:
        lines.append(f"note: {note}")
    return "\n".join(lines)
