#!/usr/bin/env python3
"""How well ``envlock doctor --log`` finds the cause in real logs: the corpus figures.

    python scripts/triage_eval.py            # summary
    python scripts/triage_eval.py -v         # one line per log
    python scripts/triage_eval.py --json     # machine-readable

The corpus is ``tests/data/logs/corpus.toml``: real logs from public issue threads, each
with the advisory the thread's established cause points to (``expect``), or ``"none"`` for
a healthy run. Each log is ranked on its own, as ``envlock doctor --log FILE`` would rank it
on a machine it knows nothing about (every machine fact unknown): only what the log itself
says counts.

Figures:

* top-1 / top-3: share of crash logs whose expected advisory is first / in the first three;
* misleading: crash logs where a *wrong* advisory is ranked first (reporting nothing is a
  miss, not a misleading answer);
* healthy false positives: healthy-run logs that produce any finding at all;
* the same on the crash logs whose thread no advisory cites (so no pattern was copied from it);
* per half (``half = "A"``: in view while patterns were written; ``"B"``: held out), the same
  figures, and **symptom coverage**: crash logs in which the symptom matcher
  (:mod:`envlock.checks.symptoms`) recognises at least one symptom, healthy logs in which it
  recognises none. ``expect = "unknown"`` logs (no established cause) count for coverage only;
* ``--speed``: CPU seconds per MB of ``doctor --log``'s two passes (symptom scan and advisory
  triage) on generated 8 MB ASCII, 8 MB non-ASCII and 30 MB binary logs.

Writes nothing. ``tests/checks/test_triage_corpus.py`` fails when the figures drop below
``tests/data/logs/thresholds.toml``; ``scripts/bench.py`` prints them too.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CORPUS = ROOT / "tests" / "data" / "logs"

__all__ = ["Outcome", "Figures", "load_corpus", "measure", "independent", "main"]


@dataclass(frozen=True)
class Outcome:
    file: str
    expect: str
    ranked: Tuple[str, ...]

    symptoms: Tuple[str, ...] = ()
    half: str = "A"

    @property
    def healthy(self) -> bool:
        return self.expect == "none"

    @property
    def judged(self) -> bool:
        """A crash log with an established cause (top-1 is measured on it)."""
        return not self.healthy and self.expect != "unknown"

    @property
    def first(self) -> Optional[str]:
        return self.ranked[0] if self.ranked else None


@dataclass(frozen=True)
class Figures:
    crash: int
    healthy: int
    top1: int
    top3: int
    misleading: int
    healthy_fp: int
    outcomes: Tuple[Outcome, ...] = field(default=(), compare=False)

    def rate(self, n: int) -> float:
        return n / self.crash if self.crash else 0.0

    def to_dict(self) -> Dict[str, Any]:
        return {"crash_logs": self.crash, "healthy_logs": self.healthy,
                "top1": self.top1, "top1_rate": round(self.rate(self.top1), 4),
                "top3": self.top3, "top3_rate": round(self.rate(self.top3), 4),
                "misleading": self.misleading, "healthy_false_positives": self.healthy_fp}


def load_corpus(root: Path = CORPUS) -> List[Dict[str, str]]:
    from envlock._toml import loads

    data = loads((root / "corpus.toml").read_text(encoding="utf-8"))
    return list(data.get("log", []))


def _rank(text: str, origin: str) -> Tuple[str, ...]:
    """The advisory ids doctor would print for this log alone, best first."""
    from envlock.checks.logs import log_findings
    from envlock.matrix import get_matrix

    findings = log_findings([(origin, text)], get_matrix(), None)
    return tuple(f.id for f in findings)


def _symptoms(data: bytes) -> Tuple[str, ...]:
    from envlock.checks.symptoms import scan
    from envlock.matrix import get_matrix

    return tuple(h.symptom for h in scan(data, get_matrix()).hits)


def measure(root: Path = CORPUS, half: Optional[str] = None) -> Figures:
    """The figures on the whole corpus, or on one half (``"A"`` / ``"B"``)."""
    outcomes: List[Outcome] = []
    for entry in load_corpus(root):
        if half is not None and entry.get("half", "A") != half:
            continue
        path = root / entry["file"]
        data = path.read_bytes()
        text = data.decode("utf-8", errors="replace")
        outcomes.append(Outcome(entry["file"], entry["expect"], _rank(text, entry["file"]),
                                _symptoms(data), entry.get("half", "A")))
    return _figures(outcomes)


def _figures(outcomes: Sequence[Outcome]) -> Figures:
    crash = [o for o in outcomes if o.judged]
    healthy = [o for o in outcomes if o.healthy]
    return Figures(
        crash=len(crash), healthy=len(healthy),
        top1=sum(1 for o in crash if o.first == o.expect),
        top3=sum(1 for o in crash if o.expect in o.ranked[:3]),
        misleading=sum(1 for o in crash if o.first is not None and o.first != o.expect),
        healthy_fp=sum(1 for o in healthy if o.ranked),
        outcomes=tuple(outcomes))


def coverage(f: Figures) -> Dict[str, int]:
    """Symptom coverage: crash logs (unknown cause included) with a recognised symptom,
    healthy logs with none."""
    crash = [o for o in f.outcomes if not o.healthy]
    healthy = [o for o in f.outcomes if o.healthy]
    return {"crash_logs": len(crash), "with_symptom": sum(1 for o in crash if o.symptoms),
            "healthy_logs": len(healthy),
            "healthy_silent": sum(1 for o in healthy if not o.symptoms)}


def speed() -> Dict[str, float]:
    """CPU seconds per MB for the symptom scan and the advisory triage on generated hostile
    logs (deterministic content; the figures depend on the machine)."""
    import random
    import time

    from envlock.checks.logs import triage_logs
    from envlock.checks.symptoms import scan
    from envlock.matrix import get_matrix

    m = get_matrix()
    rnd = random.Random(28)
    crash = (CORPUS / "timeout-tokenize-llamafactory-2424.log").read_bytes().split(b"\n")
    ascii_lines, n, i = [], 0, 0
    while n < 8 * 2**20:
        ln = crash[i % len(crash)] + b" step %d loss %.4f" % (i, rnd.random())
        ascii_lines.append(ln)
        n += len(ln) + 1
        i += 1
    uni_lines, n, i = [], 0, 0
    while n < 8 * 2**20:
        ln = ("\u8bad\u7ec3 %d: \u2588\u2588\u258c | \u635f\u5931 %.4f \u2713 \u00fcn\u00efc\u00f6d\u00e9"
              % (i, rnd.random())).encode()
        if i % 50 == 0:
            ln = crash[i % len(crash)]
        uni_lines.append(ln)
        n += len(ln) + 1
        i += 1
    logs = {"ascii": b"\n".join(ascii_lines), "non-ascii": b"\n".join(uni_lines),
            "binary": rnd.randbytes(30 * 2**20)}
    scan(b"warm-up", m)
    out: Dict[str, float] = {}
    for name, data in logs.items():
        mb = len(data) / 2**20
        t = time.process_time()
        scan(data, m, name)
        triage_logs([(name, data.decode("utf-8", "replace"))], m, None)
        out[name] = round((time.process_time() - t) / mb, 3)
        out[name + "_mb"] = round(mb, 1)
    return out


def independent(f: Figures, root: Path = CORPUS) -> Figures:
    """The same figures on the crash logs whose thread no advisory cites as a source (their
    wording cannot have been copied into a pattern), healthy logs unchanged."""
    from envlock.matrix import get_matrix

    cited = {s for a in get_matrix().advisories.values() for s in a.sources}
    source = {e["file"]: e["source"] for e in load_corpus(root)}
    keep = tuple(o for o in f.outcomes if o.healthy or source.get(o.file) not in cited)
    crash = [o for o in keep if o.judged]
    return Figures(crash=len(crash), healthy=f.healthy,
                   top1=sum(1 for o in crash if o.first == o.expect),
                   top3=sum(1 for o in crash if o.expect in o.ranked[:3]),
                   misleading=sum(1 for o in crash if o.first is not None
                                  and o.first != o.expect),
                   healthy_fp=f.healthy_fp, outcomes=keep)


def _summary(f: Figures) -> List[str]:
    return [
        f"crash logs {f.crash}, healthy logs {f.healthy}",
        f"top-1       {f.top1}/{f.crash} ({f.rate(f.top1):.1%})",
        f"top-3       {f.top3}/{f.crash} ({f.rate(f.top3):.1%})",
        f"misleading  {f.misleading} (a wrong advisory ranked first)",
        f"healthy FP  {f.healthy_fp}/{f.healthy} (healthy logs with any finding)",
    ]


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="one line per log")
    ap.add_argument("--speed", action="store_true",
                    help="also time hostile logs (8 MB ASCII, 8 MB non-ASCII, 30 MB binary)")
    args = ap.parse_args(argv)
    figures = measure()
    halves = {h: _figures([o for o in figures.outcomes if o.half == h]) for h in ("A", "B")}
    if args.json:
        d = figures.to_dict()
        d["uncited_threads"] = independent(figures).to_dict()
        d["symptom_coverage"] = coverage(figures)
        d["halves"] = {h: {**f.to_dict(), "symptom_coverage": coverage(f)}
                       for h, f in halves.items()}
        if args.speed:
            d["cpu_seconds_per_mb"] = speed()
        if args.verbose:
            d["logs"] = [{"file": o.file, "expect": o.expect, "ranked": list(o.ranked[:3])}
                         for o in figures.outcomes]
        print(json.dumps(d, indent=2))
        return 0
    if args.verbose:
        for o in figures.outcomes:
            mark = ("ok" if (o.first is None if o.healthy else o.first == o.expect)
                    else "top3" if o.expect in o.ranked[:3] else "MISS" if not o.ranked
                    else "WRONG")
            if not o.judged and not o.healthy:
                mark = "sym" if o.symptoms else "NOSYM"
            print(f"{mark:<5} {o.half} {o.file:<40} expect {o.expect:<36} got "
                  f"{', '.join(o.ranked[:2])} | {', '.join(o.symptoms[:2])}")
        print()
    for line in _summary(figures):
        print(line)
    ind = independent(figures)
    print(f"logs from threads no advisory cites: top-1 {ind.top1}/{ind.crash} "
          f"({ind.rate(ind.top1):.1%}), top-3 {ind.top3}/{ind.crash} "
          f"({ind.rate(ind.top3):.1%}), misleading {ind.misleading}")
    cov = coverage(figures)
    print(f"symptom coverage: {cov['with_symptom']}/{cov['crash_logs']} crash logs name a "
          f"symptom; {cov['healthy_silent']}/{cov['healthy_logs']} healthy logs name none")
    for h, f in halves.items():
        c = coverage(f)
        what = "in view while patterns were written" if h == "A" else "held out"
        print(f"half {h} ({what}): top-1 {f.top1}/{f.crash} ({f.rate(f.top1):.1%}), "
              f"misleading {f.misleading}, healthy FP {f.healthy_fp}/{f.healthy}, symptoms "
              f"{c['with_symptom']}/{c['crash_logs']}, healthy silent "
              f"{c['healthy_silent']}/{c['healthy_logs']}")
    if args.speed:
        sp = speed()
        print("cpu s/MB (symptom scan + advisory triage): " + ", ".join(
            f"{k} {sp[k]} ({sp[k + '_mb']} MB)" for k in ("ascii", "non-ascii", "binary")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
