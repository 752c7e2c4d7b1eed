#!/usr/bin/env python3
"""envlock's benchmarks, each next to the peer the issues name, measured in one run.

    python scripts/bench.py            # everything (the closure figures need PyPI)
    python scripts/bench.py --quick    # fewer repetitions
    python scripts/bench.py --only matrix,offline,verify

Figures (median of N whole runs unless noted):

* matrix: load + validate + index of compat-matrix/ in-process, cold (parse TOML) and warm
  (the validated cache) -- target under 50 ms;
* offline: ``envlock resolve --gpu 'H100 SXM' --offline`` as a whole process, GPU core from the
  matrix (empty HTTP cache) -- target under 200 ms;
* verify/snapshot: whole process, next to ``python -m torch.utils.collect_env`` -- target
  at most 1/10 of it;
* closure: full closure of ``torch==2.5.1``, of torch + transformers + accelerate +
  datasets and of ``vllm==0.8.5`` for linux x86_64 / Python 3.11 against PyPI, cold and
  warm cache, next to ``uv pip compile`` of the same input in the same run (wall and CPU,
  ratios envlock/uv, peak RSS of each from ``wait4``, the load average around each
  workload) -- goal at most 1.2x uv cold, peak RSS at most 1.2x uv's, and warm at most 2x
  ``uv --offline`` (every answer from uv's cache: what uv's warm run costs where the index
  sends caching headers and no proxy drops them; the warm anchor). A warm envlock run of
  an unchanged input is a replay (envlock.replay); "warm computed" rows resolve again from
  the warm cache (``ENVLOCK_NO_REPLAY=1``), as a run with another input does. Peak RSS is
  the highest of all runs, cold ones included; for a run with envlock's network helper
  (envlock.index.netproc) it is the two processes' peaks added. Run it from a venv with
  envlock installed as users install it (``pip install .``, not editable: the wheel
  carries the prebuilt matrix, and an editable install adds its import hook to every
  start). A cold uv run
  starts without an output file: ``uv pip compile -o`` reads an existing one as
  preferences (its pins tried first), a previous answer a cold envlock run does not have;
  an extra row times uv re-locking that way (empty cache, its last output present). The
  warm rows leave uv its output file, as a warm envlock run has its replay;
* fleet: time to verdict and bytes per rank for 2..16 local ranks (scripts/bench_fleet.py);
* training: ``envlock.training.check`` on 4 torchrun ranks (CPU/gloo) over a 10-million-sample
  dataset, slowest rank, next to one ``DistributedSampler`` epoch start -- target under 1 s;
* triage: top-1/top-3 accuracy, misleading first answers and healthy-log false positives of
  ``doctor --log`` on the corpus of real logs (scripts/triage_eval.py) -- target top-1 >= 90%,
  top-3 >= 95%, none misleading, no finding on a healthy log.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

ROWS: List[Dict[str, str]] = []


def row(figure: str, ours: str, peer: str = "", ratio: str = "", target: str = "",
        verdict: str = "") -> None:
    ROWS.append({"figure": figure, "envlock": ours, "peer": peer, "ratio": ratio,
                 "target": target, "verdict": verdict})
    print(f"  {figure:<46} {ours:>10} {peer:>22} {ratio:>8} {target:>14} {verdict}", flush=True)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 10 else f"{seconds:.1f} s"


def timed(cmd: Sequence[str], env: Optional[Dict[str, str]] = None, n: int = 5,
          setup: Optional[Callable[[], None]] = None, cwd: Optional[str] = None) -> float:
    times = []
    for _ in range(n):
        if setup:
            setup()
        t = time.perf_counter()
        subprocess.run(list(cmd), env=env, cwd=cwd, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def envlock_cmd() -> List[str]:
    script = Path(sys.executable).with_name("envlock")
    return [str(script)] if script.exists() else [sys.executable, "-m", "envlock"]


def env_with(**kw: str) -> Dict[str, str]:
    e = dict(os.environ)
    e.update(kw)
    return e


# -- figures ---------------------------------------------------------------------------------


def bench_matrix(n: int) -> None:
    from envlock.matrix.cache import load_cached
    from envlock.matrix.load import load_matrix

    cold = []
    for _ in range(n):
        t = time.perf_counter()
        load_matrix()
        cold.append(time.perf_counter() - t)
    with tempfile.TemporaryDirectory() as d:
        os.environ["ENVLOCK_CACHE_DIR"] = d
        load_cached()  # fill
        warm = []
        for _ in range(n):
            t = time.perf_counter()
            load_cached()
            warm.append(time.perf_counter() - t)
        del os.environ["ENVLOCK_CACHE_DIR"]
    c, w = statistics.median(cold), statistics.median(warm)
    row("matrix load+index, cold (parse+validate)", ms(c), target="< 50 ms",
        verdict="ok" if c < 0.05 else "over")
    row("matrix load+index, warm (validated cache)", ms(w), target="< 50 ms",
        verdict="ok" if w < 0.05 else "over")


def bench_offline(n: int) -> None:
    with tempfile.TemporaryDirectory() as d:
        env = env_with(ENVLOCK_CACHE_DIR=d)
        subprocess.run([*envlock_cmd(), "matrix", "gpu", "H100"], env=env,
                       stdout=subprocess.DEVNULL)  # warm the matrix cache only
        out = Path(d) / "envlock.lock"
        t = timed([*envlock_cmd(), "resolve", "--gpu", "H100 SXM", "--offline", "-o", str(out)],
                  env=env, n=n)
    row("resolve --gpu 'H100 SXM' --offline (process)", ms(t), target="< 200 ms",
        verdict="ok" if t < 0.2 else "over")


def bench_verify(n: int) -> None:
    lock = ROOT / "tests" / "data" / "locks" / "h100-pypi.lock"
    with tempfile.TemporaryDirectory() as d:
        env = env_with(ENVLOCK_CACHE_DIR=d)
        subprocess.run([*envlock_cmd(), "snapshot"], env=env, stdout=subprocess.DEVNULL)
        v = timed([*envlock_cmd(), "verify", "--lock", str(lock)], env=env, n=n)
        s = timed([*envlock_cmd(), "snapshot", "-o", str(Path(d) / "s.json")], env=env, n=n)
    try:
        import importlib.util

        has_torch = importlib.util.find_spec("torch") is not None
    except ImportError:
        has_torch = False
    if not has_torch:
        row("verify (process)", ms(v), "collect_env: no torch", target="< 150 ms")
        row("snapshot (process)", ms(s), "collect_env: no torch", target="< 150 ms")
        return
    c = timed([sys.executable, "-m", "torch.utils.collect_env"], n=max(2, n // 2))
    row("verify (process) vs torch collect_env", ms(v), f"collect_env {ms(c)}", f"{v / c:.3f}",
        "<= 0.10", "ok" if v / c <= 0.1 else "over")
    row("snapshot (process) vs torch collect_env", ms(s), f"collect_env {ms(c)}", f"{s / c:.3f}",
        "<= 0.10", "ok" if s / c <= 0.1 else "over")


def _pypi_reachable() -> bool:
    import urllib.request

    try:
        urllib.request.urlopen("https://pypi.org/simple/pip/", timeout=5).read(100)
        return True
    except Exception:  # noqa: BLE001
        return False


#: The closure workloads of issues 14 and 30: (label, torch release, more requirements).
WORKLOADS = [
    ("torch==2.5.1", "2.5.1", []),
    ("torch+transformers+accelerate+datasets", "2.5.1",
     ["transformers", "accelerate", "datasets"]),
    ("vllm==0.8.5", "2.6.0", ["vllm==0.8.5"]),
]

#: labels (substrings) of the closure workloads to run (``--workloads``); empty: all
WANTED: List[str] = []

#: the most recent peak RSS (KiB) of each timed command, by its program name
PEAK_RSS: Dict[str, List[int]] = {}


def timed_cpu(cmd: Sequence[str], env: Optional[Dict[str, str]] = None, n: int = 5,
              setup: Optional[Callable[[], None]] = None) -> "tuple[float, float]":
    """(median wall seconds, median CPU seconds of the child: user + system). The child's
    own resource usage comes from ``wait4`` (its peak RSS too, kept in :data:`PEAK_RSS`),
    not the running total of every child."""
    walls, cpus = [], []
    for _ in range(n):
        if setup:
            setup()
        t = time.perf_counter()
        p = subprocess.Popen(list(cmd), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
        err = p.stderr.read() if p.stderr else b""
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        walls.append(time.perf_counter() - t)
        if p.returncode != 0:  # timing a failure would report a meaningless ratio
            last = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
            raise RuntimeError(f"{Path(cmd[0]).name} exit {p.returncode}: {last[0][:80]}")
        cpus.append(usage.ru_utime + usage.ru_stime)
        PEAK_RSS.setdefault(Path(cmd[0]).name, []).append(_rss(usage.ru_maxrss, err))
    return statistics.median(walls), statistics.median(cpus)


def _rss(maxrss: int, stderr: bytes) -> int:
    """A run's peak RSS (KiB): with envlock's network helper (``ENVLOCK_DEBUG`` makes
    envlock say both), the peak of each process added up, the most the two could have
    held at once; ``wait4`` alone gives the larger of the two."""
    m = re.search(rb"peak RSS (\d+) KiB here, (\d+) KiB in the network helper", stderr)
    return int(m.group(1)) + int(m.group(2)) if m else maxrss


def _paired(a: Sequence[str], b: Sequence[str], env: Dict[str, str], n: int,
            setup_a: Optional[Callable[[], None]],
            setup_b: Optional[Callable[[], None]]) -> "tuple[tuple[float, float], ...]":
    ra: List["tuple[float, float]"] = []
    rb: List["tuple[float, float]"] = []
    for _ in range(n):
        ra.append(timed_cpu(a, env, 1, setup_a))
        rb.append(timed_cpu(b, env, 1, setup_b))
    return ((statistics.median(x[0] for x in ra), statistics.median(x[1] for x in ra)),
            (statistics.median(x[0] for x in rb), statistics.median(x[1] for x in rb)))


def _peak(cmd: Sequence[str]) -> int:
    """The highest peak RSS (KiB) of ``cmd``'s program since the last :func:`_reset_peaks`."""
    return max(PEAK_RSS.get(Path(cmd[0]).name, [0]))


def _reset_peaks() -> None:
    PEAK_RSS.clear()


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def bench_closure(n: int) -> None:
    """Each workload: envlock and ``uv pip compile`` in the same run, alternating cold
    (empty caches) then warm, medians of ``n``; ratio = envlock / uv."""
    if not _pypi_reachable():
        row("closure (PyPI)", "skipped", "PyPI unreachable")
        return
    uv = _uv_binary()
    if uv is None:
        row("closure (PyPI)", "skipped", "uv not installed (pip install uv)")
        return
    print(f"  (uv: {uv})", flush=True)
    for label, torch, more in WORKLOADS:
        if WANTED and not any(w in label for w in WANTED):
            continue
        with tempfile.TemporaryDirectory() as d:
            req = Path(d) / "req.in"
            req.write_text("\n".join([f"torch=={torch}", *more]) + "\n")
            ecache, ucache = Path(d) / "envlock-cache", Path(d) / "uv-cache"
            # ENVLOCK_DEBUG: envlock then says its network helper's peak RSS (see _rss)
            env = env_with(ENVLOCK_CACHE_DIR=str(ecache), PIP_CONFIG_FILE=os.devnull,
                           ENVLOCK_DEBUG="1")
            ours = [*envlock_cmd(), "resolve", "--gpu", "H100 SXM", "--torch", f"=={torch}",
                    "--python", "3.11", "--platform", "linux_x86_64",
                    "--index-url", "https://pypi.org/simple", "-o", str(Path(d) / "o.lock"),
                    *more]
            theirs = [uv, "pip", "compile", str(req), "--python-version", "3.11",
                      "--python-platform", "x86_64-manylinux_2_28", "--generate-hashes",
                      "--index-url", "https://pypi.org/simple", "--no-config", "-q",
                      "--cache-dir", str(ucache), "-o", str(Path(d) / "uv.txt")]
            subprocess.run([*envlock_cmd(), "matrix", "gpu", "H100"], env=env,
                           stdout=subprocess.DEVNULL)  # the matrix cache is not the index's

            def clear_ours() -> None:
                for sub in ("http", "pages", "metadata", "built-metadata"):
                    shutil.rmtree(ecache / sub, ignore_errors=True)

            def clear_theirs() -> None:
                shutil.rmtree(ucache, ignore_errors=True)
                # an existing output file is a previous answer: uv pip compile tries its
                # pins first, which skips the backtracking a first lock does (vllm 0.8.5:
                # the metadata of 79 fastapi wheels without it, of one with it). A cold
                # envlock run has no previous answer either, so a cold uv run starts
                # without one
                (Path(d) / "uv.txt").unlink(missing_ok=True)

            def clear_theirs_cache() -> None:
                shutil.rmtree(ucache, ignore_errors=True)

            # interleaved, one run of each per round: on a shared, loaded machine both
            # tools then meet the same load
            load_before = _load()
            _reset_peaks()
            try:
                (oc, occpu), (tc, tccpu) = _paired(ours, theirs, env, n, clear_ours,
                                                   clear_theirs)
                # uv re-locking: an empty cache, its last output as preferences
                tp, tpcpu = timed_cpu(theirs, env, n, clear_theirs_cache)
                subprocess.run(ours, env=env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
                subprocess.run(theirs, env=env, stdout=subprocess.DEVNULL)
                (ow, owcpu), (tw, twcpu) = _paired(ours, theirs, env, n, None, None)
                # uv with every answer from its cache, as it runs against an index that
                # sends caching headers (PyPI's max-age=600): a proxy that drops them makes
                # uv ask the network again on every warm run, which flatters envlock
                (ow2, ow2cpu), (to, tocpu) = _paired(ours, [*theirs, "--offline"], env, n,
                                                      None, None)
                # like for like: both from their caches alone, no revalidation. Offline
                # envlock cannot see which index is down, so --prefer pypi names the build
                # the online run fell back to (uv's); its own -o, so the pins compared
                # below stay the online run's
                offline_ours = [*ours[:ours.index("-o")], "-o", str(Path(d) / "off.lock"),
                                *ours[ours.index("-o") + 2:], "--offline", "--prefer", "pypi"]
                (ow3, ow3cpu), _ = _paired(offline_ours, [*theirs, "--offline"], env, n,
                                           None, None)
                # the rows above are replays (envlock.replay: nothing they read changed);
                # this one computes the resolution again from the warm cache, as a run
                # with another input would
                computed = {**env, "ENVLOCK_NO_REPLAY": "1"}
                (ow4, ow4cpu), _ = _paired(ours, [*theirs, "--offline"], computed, n,
                                           None, None)
                steps = _steps(ours, computed, n)
            except RuntimeError as exc:
                row(f"{label}", "failed", str(exc)[:60])
                continue
            pins_ok = _same_pins(Path(d) / "o.lock", Path(d) / "uv.txt")
            ours_rss, theirs_rss = _peak(ours), _peak(theirs)
        print(f"  ({label}: load average {load_before} before, {_load()} after)", flush=True)
        row(f"{label}, cold", ms(oc), f"uv {ms(tc)}", f"{oc / tc:.2f}x", "<= 1.2x uv",
            "ok" if oc / tc <= 1.2 else "over")
        row(f"{label}, cold CPU", ms(occpu), f"uv {ms(tccpu)}", f"{occpu / tccpu:.2f}x",
            "(info)")
        row(f"{label}, cold vs uv re-locking over its last output", ms(oc),
            f"uv {ms(tp)}", f"{oc / tp:.2f}x", "(info)")
        row(f"{label}, warm", ms(ow), f"uv {ms(tw)}", f"{ow / tw:.2f}x", "<= 1.0x uv",
            "ok" if ow <= tw else "over")
        row(f"{label}, warm CPU", ms(owcpu), f"uv {ms(twcpu)}", f"{owcpu / twcpu:.2f}x",
            "(info)")
        # the warm anchor: uv answering from its own cache
        row(f"{label}, warm vs uv --offline", ms(ow2), f"uv --offline {ms(to)}",
            f"{ow2 / to:.2f}x", "<= 2x uv", "ok" if ow2 <= 2 * to else "over")
        row(f"{label}, warm CPU vs uv --offline", ms(ow2cpu), f"uv --offline {ms(tocpu)}",
            f"{ow2cpu / max(tocpu, 1e-9):.2f}x", "(info)")
        row(f"{label}, --offline warm vs uv --offline", ms(ow3), f"uv --offline {ms(to)}",
            f"{ow3 / to:.2f}x", "(info)")
        row(f"{label}, --offline warm CPU vs uv --offline", ms(ow3cpu),
            f"uv --offline {ms(tocpu)}", f"{ow3cpu / max(tocpu, 1e-9):.2f}x", "(info)")
        row(f"{label}, warm computed (no replay) vs uv --offline", ms(ow4),
            f"uv --offline {ms(to)}", f"{ow4 / to:.2f}x", "(info)")
        row(f"{label}, warm computed CPU vs uv --offline", ms(ow4cpu),
            f"uv --offline {ms(tocpu)}", f"{ow4cpu / max(tocpu, 1e-9):.2f}x", "(info)")
        if steps:
            row(f"{label}, warm computed: resolution step", ms(steps["closure"]),
                f"of {ms(steps['whole'])} in-process", "", "(info)")
            row(f"{label}, warm computed: torch walk", ms(steps["walk"]), "", "", "(info)")
        row(f"{label}, peak RSS", f"{ours_rss // 1024} MB", f"uv {theirs_rss // 1024} MB",
            f"{ours_rss / max(theirs_rss, 1):.2f}x", "<= 1.2x uv",
            "ok" if ours_rss <= 1.2 * theirs_rss else "over")
        row(f"{label}: pins identical to uv's", "yes" if pins_ok else "NO")


#: run in a child: one warm resolve in-process, with the resolution step (resolvelib over
#: the closure, pages and metadata already read) and the torch walk timed on their own
_STEPS = r"""
import json, sys, time
import envlock.resolve.closure as C
import envlock.resolve.torch_needs as W
spent = {"closure": 0.0, "walk": 0.0}
def timed(mod, name, key):
    inner = getattr(mod, name)
    def run(*a, **k):
        t = time.perf_counter()
        try:
            return inner(*a, **k)
        finally:
            spent[key] += time.perf_counter() - t
    setattr(mod, name, run)
timed(C, "resolve_closure", "closure")
timed(W, "torch_needs", "walk")
from envlock.cli import main
t = time.perf_counter()
code = main(sys.argv[1:])
spent["whole"] = time.perf_counter() - t
print(json.dumps(spent))
sys.exit(code)
"""


def _steps(cmd: Sequence[str], env: Dict[str, str], n: int) -> Dict[str, float]:
    """Medians of the in-process step times of a warm resolve (``ENVLOCK_NO_REPLAY``)."""
    runs: List[Dict[str, float]] = []
    for _ in range(n):
        p = subprocess.run([sys.executable, "-c", _STEPS, *cmd[1:]], env=env,
                           capture_output=True, text=True)
        if p.returncode == 0 and p.stdout.strip():
            runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    if not runs:
        return {}
    return {k: statistics.median(r[k] for r in runs) for k in runs[0]}


def _uv_binary() -> Optional[str]:
    """uv's own executable, as envlock runs as its own console script (:func:`envlock_cmd`).

    The one installed next to this Python comes first. A ``uv`` found on PATH may be a
    version manager's shim (pyenv's is a shell script that starts about 40 processes
    before uv itself: 0.1 s measured), which would be timed as uv's and flatter every
    ratio; a shim is followed to the real binary when it can be, else refused."""
    sibling = Path(sys.executable).with_name("uv")
    if sibling.is_file():
        return str(sibling)
    found = shutil.which("uv")
    if found is None:
        return None
    with open(found, "rb") as fh:
        if fh.read(2) != b"#!":
            return found  # a binary
    try:
        real = subprocess.run(["pyenv", "which", "uv"], capture_output=True, text=True,
                              timeout=30).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        real = ""
    return real if real and Path(real).is_file() else None


def _same_pins(lock: Path, uvtxt: Path) -> bool:
    from envlock import _toml

    ours = {f"{p['name']}=={p['version']}" for p in
            _toml.loads(lock.read_text())["target"][0]["package"]}
    theirs = set(re.findall(r"^([a-z0-9-]+==\S+)", uvtxt.read_text(), re.M))
    return ours == theirs


def bench_fleet_rows(quick: bool) -> None:
    try:
        from bench_fleet import bench_fleet  # type: ignore[import-not-found]
    except ImportError as exc:
        row("fleet", "skipped", f"({exc})")
        return
    try:
        results = bench_fleet((2, 4) if quick else (2, 4, 8, 16))
    except Exception as exc:  # noqa: BLE001 - a bench, not a test: report and go on
        row("fleet", "failed", str(exc)[:40])
        return
    for r in results:
        if r.get("kind") == "estimate":
            n = r["ranks"]
            row(f"fleet {n} nodes (paper): fingerprint/node", f"{r['fingerprint_bytes_per_node']} B",
                target="< 1 KB", verdict="ok" if r["fingerprint_under_1kb"] else "over")
            row(f"fleet {n} nodes: bytes into rank 0 (1% drift)",
                f"{r['rank0_in_bytes_1pct_drift'] / 1024:.0f} KB",
                f"simulated {r['simulated_rank0_received_bytes'] / 1024:.0f} KB")
            row(f"fleet {n} nodes (simulated): rank 0 gather+judge",
                ms(r["simulated_rank0_gather_s"] + r["simulated_rank0_judge_s"]))
            row("fleet protocol time, 16 -> 1024 nodes (sim)",
                f"{r['protocol_growth']}x", f"nodes {r['node_growth']:.0f}x",
                f"{ms(r['protocol_s_16'])}->{ms(r['protocol_s_big'])}", "<= linear",
                "ok" if r["at_most_linear"] else "over")
            row("fleet wall time growth, 2 -> 16 local ranks", f"{r['verdict_growth']}x",
                f"ranks {r['rank_growth']:.0f}x", "", "(2 cores: N torch imports)")
            continue
        row(f"fleet verdict, {r['ranks']} local ranks (1 drifted)", ms(r["verdict_s"]),
            f"{r['sent_bytes_per_rank_min']} B/agreeing rank",
            f"fp {r['fingerprint_bytes_max']} B", "< 1 KB/node",
            "ok" if r["fingerprint_bytes_max"] < 1024 else "over")


_TRAINING_RANK = """
import json, sys, time
import torch
import torch.distributed as dist
from torch.utils.data import BatchSampler, DataLoader, DistributedSampler, SequentialSampler
import envlock.training as guard

class Big:  # 10 million samples, none loaded by the guard
    def __len__(self):
        return 10_000_000
    def __getitem__(self, i):
        return i

class Shard:  # accelerate-style: batch i to process i % world (drawn, not summarised)
    def __init__(self, bs, world, rank):
        self.bs, self.world, self.rank = bs, world, rank
    def __len__(self):
        return len(self.bs) // self.world
    def __iter__(self):
        for i, b in enumerate(self.bs):
            if i % self.world == self.rank:
                yield b

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
ds = Big()
cases = {
    "DistributedSampler": DataLoader(ds, batch_size=32, sampler=DistributedSampler(ds)),
    "accelerate-style": DataLoader(ds, batch_sampler=Shard(
        BatchSampler(SequentialSampler(ds), 32, False), world, rank)),
    "no sampler (bug)": DataLoader(ds, batch_size=32, shuffle=True),
}
out = {}
for name, loader in cases.items():
    times = []
    for _ in range(int(sys.argv[2])):
        dist.barrier()
        t = time.perf_counter()
        found = guard.check(loader, quiet=True)
        times.append(time.perf_counter() - t)
    out[name] = [sorted(times)[len(times) // 2], [f.id for f in found]]
dist.barrier()
t = time.perf_counter()
next(iter(cases["DistributedSampler"]))
out["epoch start"] = [time.perf_counter() - t, []]
# one file per rank, no all_gather_object: it needs numpy, which torch does not require
open(f"{sys.argv[1]}.{rank}", "w").write(json.dumps(out))
dist.barrier()
dist.destroy_process_group()
"""


def bench_training(n: int) -> None:
    """check() on 4 ranks over 10 million samples: the slowest rank's median."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        row("training guard", "skipped", "(no torch)")
        return
    with tempfile.TemporaryDirectory() as tmp:
        script, result = Path(tmp) / "rank.py", Path(tmp) / "result.json"
        script.write_text(_TRAINING_RANK)
        env = env_with(PYTHONPATH=str(ROOT), CUDA_VISIBLE_DEVICES="")
        for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            env.pop(var, None)
        p = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                            "--nproc-per-node", "4", str(script), str(result), str(n)],
                           env=env, capture_output=True, text=True, timeout=600, check=False)
        parts = [Path(f"{result}.{r}") for r in range(4)]
        if p.returncode != 0 or not all(part.exists() for part in parts):
            row("training guard", "failed", p.stderr.strip()[-40:])
            return
        ranks = [json.loads(part.read_text()) for part in parts]
    start = max(r["epoch start"][0] for r in ranks)
    for name in ranks[0]:
        if name == "epoch start":
            continue
        slowest = max(r[name][0] for r in ranks)
        said = "found" if ranks[0][name][1] else "silent"
        row(f"guard 4 ranks, 10M samples: {name}", ms(slowest),
            f"epoch start {ms(start)}", said, "< 1 s", "ok" if slowest < 1 else "over")


def bench_triage() -> None:
    """Log triage accuracy on the corpus of real logs (scripts/triage_eval.py)."""
    try:
        from triage_eval import measure  # type: ignore[import-not-found]

        t = time.perf_counter()
        f = measure()
        took = time.perf_counter() - t
    except Exception as exc:  # noqa: BLE001 - a bench, not a test: report and go on
        row("triage", "failed", str(exc)[:40])
        return
    row(f"triage top-1 ({f.crash} real crash logs)", f"{f.rate(f.top1):.1%}", "", "",
        ">= 90%", "ok" if f.rate(f.top1) >= 0.9 else "under")
    row("triage top-3", f"{f.rate(f.top3):.1%}", "", "", ">= 95%",
        "ok" if f.rate(f.top3) >= 0.95 else "under")
    row("triage misleading (wrong advisory first)", str(f.misleading), "", "", "0",
        "ok" if f.misleading == 0 else "over")
    row(f"triage healthy logs with a finding (of {f.healthy})", str(f.healthy_fp), "", "",
        "0", "ok" if f.healthy_fp == 0 else "over")
    row("triage time, whole corpus", ms(took))


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="envlock benchmarks")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--only", default="matrix,offline,verify,closure,fleet,training,triage")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument("--workloads", default="", metavar="LABEL[,LABEL...]",
                    help="closure: only the workloads whose label contains one of these")
    args = ap.parse_args(argv)
    WANTED[:] = [w for w in args.workloads.split(",") if w]
    n = 3 if args.quick else 7
    only = set(args.only.split(","))
    # pip compiles bytecode at install time; a checkout (or PYTHONDONTWRITEBYTECODE=1)
    # would otherwise time the compiler on every run
    import compileall

    compileall.compile_dir(str(ROOT / "envlock"), quiet=1)
    print(f"envlock benchmarks ({'quick' if args.quick else 'full'}; median of {n}; "
          f"{os.cpu_count()} CPUs; Python {sys.version.split()[0]})")
    print(f"  {'figure':<46} {'envlock':>10} {'peer':>22} {'ratio':>8} {'target':>14}")
    if "matrix" in only:
        bench_matrix(n)
    if "offline" in only:
        bench_offline(n)
    if "verify" in only:
        bench_verify(n)
    if "closure" in only:
        bench_closure(max(3, n // 2))
    if "fleet" in only:
        bench_fleet_rows(args.quick)
    if "training" in only:
        bench_training(n)
    if "triage" in only:
        bench_triage()
    if args.json:
        Path(args.json).write_text(json.dumps(ROWS, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
