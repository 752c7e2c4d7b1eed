"""Reading a pasted log: normalised lines, process deaths, hang evidence and machine facts.

Logs reach ``envlock doctor --log`` in every shape a terminal or an issue tracker produces:
lines prefixed per rank (``[rank3]:``, ``[1,3]<stdout>:``), by glog/torch (``E1123
12:00:01.123 ...``, ``[E ProcessGroupNCCL.cpp:475]``), by NCCL (``host:pid:tid [3]``), by
syslog or dmesg; hard-wrapped at the terminal width ("Bus\\nerror"); and repeated once per
rank. Matching advisory patterns against the raw text misses the wrapped forms and lets one
line repeated 64 times dominate. This module turns a log into a :class:`ReadLog`:

* ``lines``: prefixes stripped, repeats folded (``repeats`` says how many times each line
  appeared), capped at :data:`MAX_LINE` characters;
* :func:`find`: a pattern searched per line and across one line break, so wrapped messages
  still match;
* ``signals``: process deaths (SIGFPE, SIGSEGV, ...) and ``timeout`` for collective timeouts
  *and* hang evidence: backtraces or stack dumps stuck in CUDA/NCCL waits, or a stated hang
  (not a warning that something "can potentially cause a hang");
* ``facts``: what the log itself says about the machine, under the fact paths of
  :mod:`envlock.matrix.conditions` (NCCL version, CUDA driver API, GPU names and their
  compute capability, the torch build's arch list, ``nvidia-smi`` and ``topo -m`` pastes).
  :class:`LayeredFacts` puts them under a machine's own facts: a snapshot or live probe wins
  wherever it knows the value.

>>> log = read_log("[rank0]: RuntimeError: DataLoader worker (pid 47) is killed by signal: Bus\\n"
...                "[rank1]: error. It is possible that dataloader's workers are out of shared\\n"
...                "[rank1]: memory.")
>>> find(log, "killed by signal: Bus error") is not None, sorted(log.signals), log.ranks
(True, ['SIGBUS'], 2)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

from envlock.knowledge.facts import Facts
from envlock.knowledge.logfacts import LayeredFacts, facts_from_logs
from envlock.knowledge.values import UNKNOWN

__all__ = ["MAX_LINE", "ReadLog", "read_log", "find", "LayeredFacts", "log_facts_view",
           "SIGNAL_PATTERNS"]

MAX_LINE = 2000
_MAX_LINES = 200_000

# -- normalisation ---------------------------------------------------------------------------

#: Prefixes stripped from the start of a line, repeatedly (a line can carry several).
_PREFIXES: Tuple["re.Pattern[str]", ...] = tuple(re.compile(p) for p in (
    r"^>\s?",                                                   # quoted in an issue comment
    r"^\s*\[\d+,\d+\]<std(?:out|err)>:",                        # mpirun --tag-output
    r"^\s*\[(?:rank|Rank|RANK)\s*\d+\]:",                       # torchrun [rank3]:
    r"^\s*\(\w+ pid=\d+\)\s*",                                  # ray / vLLM worker
    r"^\s*\[\d{3,}\]\s+",                                       # line numbers of a log viewer
    r"^\s*\[?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+(?:\d+\s+)?\S+:\d+\]\s*",  # glog / c10
    r"^\s*\[[IWEF] \S+:\d+\]\s*",                               # old c10d [E file.cpp:475]
    r"^\s*\[?\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?\s*"
    r"(?:\|\s*)?(?:-\s*\S+\s*-\s*(?:INFO|WARNING|ERROR|DEBUG)\s*-\s*)?",  # ISO timestamps
    r"^\s*\|\s*",                                               # table-pasted log viewers
    r"^[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [\w\-.]+(?:\[\d+\])?:\s*",  # syslog/journal
    r"^\s*\[\s*\d+\.\d+\]\s*",                                  # dmesg [ 1843.308145]
    r"^\s*\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d [\d:]+ \d{4}\]\s*",  # dmesg -T
    r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? "
    r"(?:\[[^\]]+\] )?\S+:\d+\]\s*",                            # vLLM
    r"^\s*[\w\-.]+:\d+:\d+ \[\d+\]\s*",                         # NCCL host:pid:tid [dev]
))
_CONT_NVRM = re.compile(r"^\s+NVRM:\s*")
_RANK_RES = (
    re.compile(r"\[(?:rank|Rank|RANK)\s*(\d+)\]"),
    re.compile(r"^\s*\[\d+,(\d+)\]<std"),
    re.compile(r"\bTP(\d+)\]"),
    re.compile(r"\bRank\s+(\d+)\s+(?:Group|Pid)\b"),
)
_FOLD_DIGITS = re.compile(r"\d+")


_PREFIX = re.compile("|".join(f"(?:{rx.pattern})" for rx in _PREFIXES))


def _strip(line: str) -> str:
    """Strip prefixes one at a time (one alternation per step: a log has many lines)."""
    for _ in range(8):
        m = _PREFIX.match(line)
        if m is None or m.end() == 0:
            break
        line = line[m.end():]
    return line


# -- process deaths and hangs ---------------------------------------------------------------

#: Process deaths a log can show, by the advisory ``signals`` vocabulary.
SIGNAL_PATTERNS: Dict[str, Tuple[str, ...]] = {
    "SIGFPE": (r"\bsignal 8\b", r"\bSIGFPE\b", r"exit ?code\s*:?\s*-8\b",
               r"Floating point exception"),
    "SIGSEGV": (r"\bsignal 11\b", r"\bSIGSEGV\b", r"exit ?code\s*:?\s*-11\b",
                r"Segmentation fault"),
    "SIGBUS": (r"\bsignal 7\b", r"\bSIGBUS\b", r"exit ?code\s*:?\s*-7\b", r"\bBus error\b",
               r"killed by signal: Bus\s+error"),
    "SIGABRT": (r"\bsignal 6\b", r"\bSIGABRT\b", r"exit ?code\s*:?\s*-6\b",
                r"\bAborted \(core dumped\)"),
    "SIGKILL": (r"\bsignal 9\b", r"\bSIGKILL\b", r"exit ?code\s*:?\s*-9\b"),
    "SIGILL": (r"\bsignal 4\b", r"\bSIGILL\b", r"Illegal instruction"),
    "timeout": (r"Watchdog caught collective operation timeout",
                r"ran for \d+ milliseconds before timing out",
                r"Timed out waiting \d+\s*ms", r"\bNCCL timeout\b",
                r"\bDeadline ?Exceeded\b", r"\btimed out\b"),
}

#: A frame of a native backtrace (gdb, glog, UCX) or a Python stack dump (py-spy, faulthandler).
_FRAME = re.compile(r"^\s*(?:#\d+\s+(?:0x[0-9a-f]+ in )?|\d+\s+0x[0-9a-f]+\s+|@\s+0x[0-9a-f]+\s+"
                    r"|Thread \d+|File \"|\w+ \([\w/.\-]+\.py:\d+\))", re.IGNORECASE)
#: Calls a rank sits in while it waits for a GPU or the other ranks.
_WAIT_CALLS = re.compile(
    r"\b(?:cudaStreamQuery|cudaStreamSynchronize|cudaDeviceSynchronize|cudaEventSynchronize|"
    r"cuStreamSynchronize|cuEventSynchronize|ncclKernel_\w+|ncclDevKernel_\w+|"
    r"nccl(?:AllReduce|AllGather|ReduceScatter|Broadcast|Reduce|Send|Recv|GroupEnd|"
    r"CommInitRank\w*)|(?:all_reduce|all_gather\w*|reduce_scatter\w*|broadcast|barrier|"
    r"all_to_all\w*) \(torch/distributed/distributed_c10d\.py:\d+\))")
#: A person (or a tool) saying the job hangs, not a warning that it might.
_HANG_WORDS = re.compile(r"\b(?:hangs?|hanging|hung|stuck|freezes|frozen|deadlock(?:ed|s)?|"
                         r"wedged)\b", re.IGNORECASE)
_HYPOTHETICAL = re.compile(r"\b(?:can|could|may|might)\s+(?:potentially\s+)?"
                           r"(?:cause|lead to|result in)\b.{0,40}\bhang|\bto avoid\b.{0,40}"
                           r"\bhang|\bpossible\s+hang", re.IGNORECASE)


def _hang_evidence(lines: Sequence[str]) -> Tuple[str, ...]:
    found: List[str] = []
    for ln in lines:
        if _WAIT_CALLS.search(ln) and _FRAME.search(ln):
            found.append(ln.strip())
        elif _HANG_WORDS.search(ln) and not _HYPOTHETICAL.search(ln):
            found.append(ln.strip())
    return tuple(dict.fromkeys(found))[:5]


# -- facts the log states ---------------------------------------------------------------------

_GPU_NAME = r"((?:NVIDIA |Tesla |Quadro )?(?:GeForce |RTX |Tesla )?[A-Z][\w\-]*(?: [\w\-]+){0,4}?)"
_GPU_NAME_RES = (
    # nvidia-smi table:  |   0  NVIDIA H100 80GB HBM3   On  |
    re.compile(r"^(?:\|\s+)?\d+\s+" + _GPU_NAME + r"\s+(?:On|Off)\s+\|"),
    # collect_env / nvidia-smi -L:  GPU 0: NVIDIA A100-SXM4-80GB
    re.compile(r"\bGPU \d+: " + _GPU_NAME + r"\s*(?:\(|$)"),
    # nccl-tests: device  0 [0x81] NVIDIA A100-SXM4-40GB
    re.compile(r"\bdevice\s+\d+ \[[0-9a-fx:]+\]\s+" + _GPU_NAME + r"\s*$"),
    # torch warnings: NVIDIA GeForce RTX 5090 with CUDA capability sm_120
    re.compile(r"\b" + _GPU_NAME + r" with CUDA capability sm_\d+"),
    # vLLM: Your Tesla T4 GPU has compute capability 7.5
    re.compile(r"\bYour " + _GPU_NAME + r" GPU has compute capability"),
    # prose in reports: Hardware is NVidia H20 / GPU: Tesla V100S
    re.compile(r"\b(?:Hardware is|GPU\s*[:：])\s*(?:NVidia |Nvidia |NVIDIA )?" + _GPU_NAME +
               r"(?=\s*[.,;]|\s*$)"),
)
_MAYBE_GPU = re.compile(r"NVIDIA|NVidia|Nvidia|Tesla|Quadro|GeForce|RTX|GPU")
_CAP_RES = (
    re.compile(r"with CUDA capability sm_(\d+)(\d)\b"),
    re.compile(r"GPU has compute capability (\d+)\.(\d+)"),
)
_ARCH_LIST = re.compile(r"supports CUDA capabilities ((?:sm_\d+[a-z]?\s*)+)")
_NCCL_VERSION = re.compile(r"\bNCCL version:? (\d+\.\d+\.\d+)")
_CUDA_DRIVER_API = re.compile(r"\bcudaDriverVersion (\d{4,5})\b")
_DRIVER = re.compile(r"\bDriver Version:\s*(\d{3}\.\d+(?:\.\d+)?)")
_DRIVER_ENV = re.compile(r"\bNvidia driver version:\s*(\d{3}\.\d+(?:\.\d+)?)")
_SMI_CUDA = re.compile(r"\bCUDA Version:\s*(\d+\.\d+)")
_TORCH = re.compile(r"(?:\bPyTorch version:|\bTorch version is|\btorch==|\(you have)\s*'?"
                    r"(\d+\.\d+\.\d+(?:\+\w+)?)")
_BUS_ID = re.compile(r"\bbusId ([0-9a-f]+)\b")
_TRANSPORT = re.compile(r"\bvia (P2P|SHM|NET|CollNet|NVLS)\b")
_TOPO_ROW = re.compile(r"^\s*GPU(\d+)\s+((?:(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)\s+)+)")
_TOPO_KIND = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "NODE", "SYS": "SYS",
              "SOC": "SYS"}


def _cuda_api(n: str) -> str:
    v = int(n)
    return f"{v // 1000}.{(v % 1000) // 10}"


def _facts(lines: Sequence[str]) -> Dict[str, Any]:
    """Fact path -> value for what the log states; absent paths stay unknown."""
    out: Dict[str, Any] = {}
    names: List[str] = []
    caps: List[str] = []
    bus: set = set()
    transports: set = set()
    topo: Dict[int, List[str]] = {}
    for ln in lines:
        # cheap substring tests first: a log is mostly lines that state no fact
        if _MAYBE_GPU.search(ln):
            for rx in _GPU_NAME_RES:
                m = rx.search(ln)
                if m:
                    names.append(m.group(1).strip())
                    break
        if "capabilit" in ln:
            for rx in _CAP_RES:
                m = rx.search(ln)
                if m:
                    caps.append(f"{int(m.group(1))}.{m.group(2)}")
            m = _ARCH_LIST.search(ln)
            if m:
                out["torch.arch_list"] = m.group(1).split()
        if "NCCL version" in ln:
            m = _NCCL_VERSION.search(ln)
            if m:
                out.setdefault("library.nccl.version", m.group(1))
        if "cudaDriverVersion" in ln:
            m = _CUDA_DRIVER_API.search(ln)
            if m:
                out.setdefault("driver.cuda", _cuda_api(m.group(1)))
        if "river" in ln:
            m = _DRIVER.search(ln) or _DRIVER_ENV.search(ln)
            if m:
                out.setdefault("driver.version", m.group(1))
            m = _SMI_CUDA.search(ln)
            if m and "Driver Version" in ln:
                out.setdefault("driver.cuda", m.group(1))
        if "orch" in ln or "you have" in ln:
            m = _TORCH.search(ln)
            if m:
                out.setdefault("torch.version", m.group(1))
        if "busId" in ln:
            bus.update(_BUS_ID.findall(ln))
        if "via " in ln:
            transports.update(_TRANSPORT.findall(ln))
        if "GPU" in ln:
            m = _TOPO_ROW.match(ln)
            if m:
                topo[int(m.group(1))] = m.group(2).split()
    if names:
        out["gpu.name"] = list(dict.fromkeys(names))
    if caps:
        out["gpu.cc"] = list(dict.fromkeys(caps))
    if transports:
        out["nccl.transports"] = sorted(transports)
    links: List[Dict[str, Any]] = []
    for a, cells in sorted(topo.items()):
        gpu_cells = cells[: len(topo)]
        for b, cell in enumerate(gpu_cells):
            if b <= a or cell == "X":
                continue
            kind = "NVLINK" if cell.startswith("NV") else _TOPO_KIND.get(cell, cell)
            links.append({"kind": kind, "p2p": UNKNOWN, "a_model": UNKNOWN,
                          "b_model": UNKNOWN})
    if topo:
        out["gpu.count"] = len(topo)
        out["link.count"] = len(links)
        out["link.kind"] = sorted({e["kind"] for e in links})
        out["_links"] = links
    elif len(bus) >= 2:
        out["gpu.count"] = len(bus)  # a lower bound: a log shows the ranks that printed
    tv = out.get("torch.version")
    if isinstance(tv, str):
        out["torch.cpu_only"] = tv.endswith("+cpu")
        m = re.search(r"\+cu(\d+)(\d)$", tv)
        if m:
            out["torch.cuda"] = f"{m.group(1)}.{m.group(2)}"
    return out


# -- the read log -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ReadLog:
    """A log after normalisation. ``lines`` are unique (first occurrence order)."""

    origin: str
    lines: Tuple[str, ...]
    repeats: Tuple[int, ...]
    ranks: int
    signals: FrozenSet[str]
    hang: Tuple[str, ...]
    facts: Mapping[str, Any] = field(default_factory=dict)
    #: the lines joined by a space and by nothing: one C-level search rejects a pattern
    flat: Tuple[str, str] = ("", "")

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def read_log(text: str, origin: str = "log") -> ReadLog:
    """Normalise a pasted log (see the module docstring)."""
    raw = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")[-_MAX_LINES:]
    ranks = set()
    norm: List[str] = []
    for ln in raw:
        if "ank" in ln or "<std" in ln or "TP" in ln:
            for rx in _RANK_RES:
                ranks.update(rx.findall(ln))
        ln = _CONT_NVRM.sub(" ", ln)
        ln = _strip(ln).rstrip()
        if len(ln) > MAX_LINE:
            ln = ln[:MAX_LINE]
        if ln.strip():
            norm.append(ln)
    order: Dict[str, int] = {}
    counts: List[int] = []
    lines: List[str] = []
    for ln in norm:
        key = _FOLD_DIGITS.sub("#", ln.strip()) if len(ln) > 40 else ln.strip()
        i = order.get(key)
        if i is None:
            order[key] = len(lines)
            lines.append(ln)
            counts.append(1)
        else:
            counts[i] += 1
    flat = (" ".join(ln.strip() for ln in lines), "".join(ln.strip() for ln in lines))
    signals = {sig for sig, pats in SIGNAL_PATTERNS.items()
               if any(_find_in(lines, p, flat) is not None for p in pats)}
    hang = _hang_evidence(lines)
    if hang:
        signals.add("timeout")
    return ReadLog(origin=origin, lines=tuple(lines), repeats=tuple(counts), ranks=len(ranks),
                   signals=frozenset(signals), hang=hang, facts=_facts(norm), flat=flat)


def find(log: ReadLog, pattern: str) -> Optional[str]:
    """The line where ``pattern`` matches, within one line or across one line break
    (a hard-wrapped message); None when it does not match."""
    return _find_in(log.lines, pattern, log.flat)


def _find_in(lines: Sequence[str], pattern: str,
             flat: Tuple[str, str] = ("", "")) -> Optional[str]:
    rx = _compile(pattern)
    if flat[0] and not rx.search(flat[0]) and not rx.search(flat[1]):
        return None  # not in the log at all, however it is wrapped
    for i, ln in enumerate(lines):
        if rx.search(ln):
            return ln.strip()
        if i + 1 < len(lines):
            joined = ln.rstrip() + " " + lines[i + 1].lstrip()
            m = rx.search(joined)
            if m and m.end() > len(ln.rstrip()) + 1 and m.start() < len(ln.rstrip()):
                return joined.strip()
            # a word cut in two by the wrap ("cond" + "a-bld")
            joined = ln.rstrip() + lines[i + 1].lstrip()
            m = rx.search(joined)
            if m and m.end() > len(ln.rstrip()) and m.start() < len(ln.rstrip()):
                return joined.strip()
    return None


_RX_CACHE: Dict[str, "re.Pattern[str]"] = {}


def _compile(pattern: str) -> "re.Pattern[str]":
    rx = _RX_CACHE.get(pattern)
    if rx is None:
        rx = _RX_CACHE[pattern] = re.compile(pattern, re.IGNORECASE)
    return rx


# -- facts: the log's under the machine's (built by envlock.knowledge.logfacts) ------------


def log_facts_view(logs: Sequence[ReadLog], matrix: Any = None,
                   top: Optional[Facts] = None) -> LayeredFacts:
    """The facts several logs state, merged (first log wins), under ``top``."""
    return facts_from_logs([lg.facts for lg in logs], matrix, top)
