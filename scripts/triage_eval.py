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
* the same on the crash logs whose thread no advisory cites (so no pattern was copied from it).

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

    @property
    def healthy(self) -> bool:
        return self.expect == "none"

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


def measure(root: Path = CORPUS) -> Figures:
    outcomes: List[Outcome] = []
    for entry in load_corpus(root):
        path = root / entry["file"]
        text = path.read_text(encoding="utf-8", errors="replace")
        outcomes.append(Outcome(entry["file"], entry["expect"], _rank(text, entry["file"])))
    crash = [o for o in outcomes if not o.healthy]
    healthy = [o for o in outcomes if o.healthy]
    return Figures(
        crash=len(crash), healthy=len(healthy),
        top1=sum(1 for o in crash if o.first == o.expect),
        top3=sum(1 for o in crash if o.expect in o.ranked[:3]),
        misleading=sum(1 for o in crash if o.first is not None and o.first != o.expect),
        healthy_fp=sum(1 for o in healthy if o.ranked),
        outcomes=tuple(outcomes))


def independent(f: Figures, root: Path = CORPUS) -> Figures:
    """The same figures on the crash logs whose thread no advisory cites as a source (their
    wording cannot have been copied into a pattern), healthy logs unchanged."""
    from envlock.matrix import get_matrix

    cited = {s for a in get_matrix().advisories.values() for s in a.sources}
    source = {e["file"]: e["source"] for e in load_corpus(root)}
    keep = tuple(o for o in f.outcomes if o.healthy or source.get(o.file) not in cited)
    crash = [o for o in keep if not o.healthy]
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
    args = ap.parse_args(argv)
    figures = measure()
    if args.json:
        d = figures.to_dict()
        d["uncited_threads"] = independent(figures).to_dict()
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
            print(f"{mark:<5} {o.file:<44} expect {o.expect:<40} got {', '.join(o.ranked[:3])}")
        print()
    for line in _summary(figures):
        print(line)
    ind = independent(figures)
    print(f"logs from threads no advisory cites: top-1 {ind.top1}/{ind.crash} "
          f"({ind.rate(ind.top1):.1%}), top-3 {ind.top3}/{ind.crash} "
          f"({ind.rate(ind.top3):.1%}), misleading {ind.misleading}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
