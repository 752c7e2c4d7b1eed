#!/usr/bin/env python3
"""Compare the compatibility matrix with independent public tables.

The tables' facts are kept, in envlock's own TOML format, under
``compat-matrix/crosscheck/`` (one file per table, each with its URL and commit or date);
nothing is fetched. Every disagreement must be fixed in the matrix or explained in
``compat-matrix/crosscheck/allowlist.toml``; the script prints, per table, how many facts
were compared, how many agree, and each disagreement, and exits 1 when one is unexplained
(or an allowlist entry no longer matches anything, so the list stays true).

    python scripts/crosscheck.py                 # the shipped matrix and saved tables
    python scripts/crosscheck.py --all           # also list the explained disagreements
    python scripts/crosscheck.py --matrix DIR --tables DIR

Refreshing a saved table is a maintainer step: see compat-matrix/README.md ("Cross-check").
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from envlock import _toml  # noqa: E402
from envlock.errors import MatrixError  # noqa: E402
from envlock.matrix.load import load_matrix  # noqa: E402
from envlock.matrix.matrix import Matrix  # noqa: E402

TABLES = ROOT / "compat-matrix" / "crosscheck"
ALLOWLIST = "allowlist.toml"

#: The oldest compute capability any torch build in the matrix (1.13.0 and later) targets;
#: GPUs below it are outside the matrix's scope and are not required to resolve.
MIN_CC = (3, 5)


@dataclass(frozen=True)
class Check:
    """One fact of a table compared with the matrix."""

    fact: str  # stable key within the table, matched by the allowlist
    agree: bool
    detail: str = ""


@dataclass
class TableResult:
    id: str
    title: str
    url: str
    checks: List[Check] = field(default_factory=list)
    skipped: int = 0  # facts outside the matrix's scope


# -- comparers (table facts x matrix -> checks) ---------------------------------------------


def _same_driver(a: Optional[str], b: Optional[str]) -> bool:
    if a is None or b is None:
        return a == b
    return [int(x) for x in a.split(".")] == [int(x) for x in b.split(".")]


def _cuda_major_floor(facts: Sequence[Dict[str, Any]], m: Matrix, r: TableResult) -> None:
    for f in facts:
        line = f["cuda"]
        if line not in m.cuda_lines:
            r.skipped += 1
            continue
        major = m.cuda_majors[int(line.split(".")[0])]
        for os_name, ours in (("linux", major.compat_min_driver_linux),
                              ("windows", major.compat_min_driver_windows)):
            theirs = f.get(os_name)
            if theirs is None:
                continue
            r.checks.append(Check(f"{f['tag']}.{os_name}", _same_driver(ours, theirs),
                                  f"table {theirs}, matrix {ours or 'none'} "
                                  f"(CUDA {major.major} floor)"))


def _releases_of(m: Matrix, minor: str) -> List[str]:
    return [v for v in m.torch_releases if v.startswith(minor + ".")]


def _release_md(facts: Sequence[Dict[str, Any]], m: Matrix, r: TableResult) -> None:
    for f in facts:
        minor = f["torch"]
        releases = _releases_of(m, minor)
        if not releases:
            r.skipped += 1
            continue
        rp = m.torch_releases[releases[0]].requires_python or ""
        found = re.search(r">=\s*(3\.\d+)", rp)
        ours = found.group(1) if found else None
        r.checks.append(Check(f"{minor}/python_min", ours == f["python_min"],
                              f"table >={f['python_min']}, matrix {rp or 'unknown'}"))
        for build in f.get("cuda", []):
            tag = "cu" + build["version"].replace(".", "")
            variants = [v for v in m.variants if v.release in releases and v.tag == tag]
            r.checks.append(Check(f"{minor}/{tag}/build", bool(variants),
                                  f"table lists CUDA {build['version']} ({build['status']}); "
                                  f"matrix has {len(variants)} {tag} builds of {minor}.x"))
            for lib in ("cudnn", "nccl"):
                theirs = build.get(lib)
                if theirs is None:
                    continue
                ours = sorted({v.libraries[lib] for v in variants
                               if v.platform == "linux_x86_64" and lib in v.libraries})
                if not ours:
                    continue  # the matrix does not know it: nothing to compare
                r.checks.append(Check(f"{minor}/{tag}/{lib}", ours == [theirs],
                                      f"table {theirs}, matrix {', '.join(ours)}"))


def _torchvision_pairs(facts: Sequence[Dict[str, Any]], m: Matrix, r: TableResult) -> None:
    for f in facts:
        releases = _releases_of(m, f["torch"])
        if not releases:
            r.skipped += 1
            continue
        ours = sorted({tv for rel in releases
                       for tv in (m.companions[rel].torchvision if rel in m.companions else ())})
        ok = bool(ours) and all(v.startswith(f["torchvision"] + ".") for v in ours)
        r.checks.append(Check(f"{f['torch']}/torchvision", ok,
                              f"table {f['torchvision']}.x, matrix {', '.join(ours) or 'none'}"))


def _cuda_release_drivers(facts: Sequence[Dict[str, Any]], m: Matrix, r: TableResult) -> None:
    for f in facts:
        rel = m.cuda_releases.get(f["release"])
        if rel is None:
            r.checks.append(Check(f"{f['release']}/present", False,
                                  f"CUDA {f['release']} is not in cuda.toml"))
            continue
        for os_name, ours in (("linux", rel.driver_linux), ("windows", rel.driver_windows)):
            theirs = f.get(os_name)
            if theirs is None:
                continue
            r.checks.append(Check(f"{f['release']}/{os_name}", _same_driver(ours, theirs),
                                  f"table {theirs}, matrix {ours or 'none'}"))


def _cc(text: str) -> Tuple[int, int]:
    major, minor = text.split(".")
    return int(major), int(minor)


def _gpu_capability(facts: Sequence[Dict[str, Any]], m: Matrix, r: TableResult) -> None:
    for f in facts:
        name, cc = f["name"], f["compute_capability"]
        gpu = m.find_gpu(name)
        if gpu is None:
            if _cc(cc) < MIN_CC:
                r.skipped += 1
                continue
            r.checks.append(Check(f"{name}/present", False, f"not in gpus.toml (CC {cc})"))
            continue
        r.checks.append(Check(f"{name}/cc", gpu.compute_capability == cc,
                              f"table {cc}, matrix {gpu.compute_capability} ({gpu.id})"))


def _driver_gpu_list(facts: Sequence[Dict[str, Any]], m: Matrix, r: TableResult) -> None:
    for f in facts:
        name = f["name"]
        gpu = m.find_gpu(name)
        r.checks.append(Check(f"{name}/present", gpu is not None,
                              f"resolves to {gpu.id}" if gpu else "not in gpus.toml"))
        # Memory variants share a name; a device id may sit on any of them.
        known = sorted({i for g in m.gpu_candidates(name) for i in g.pci_ids})
        if gpu is not None and known:
            missing = [i for i in f.get("pci_ids", []) if i not in known]
            r.checks.append(Check(f"{name}/pci_ids", not missing,
                                  f"table {' '.join(f['pci_ids'])}, matrix "
                                  f"{' '.join(known)} ({gpu.id})"))
        for pci in f.get("pci_ids", []) if gpu is not None else ():
            by_id = m.find_gpu(pci)  # the id alone finds a row of the same capability
            ok = by_id is not None and by_id.compute_capability == gpu.compute_capability
            r.checks.append(Check(f"{name}/pci/{pci}", ok,
                                  f"PCI {pci} resolves to {by_id.id if by_id else 'nothing'}"))


def _branch(text: Optional[str]) -> Optional[int]:
    """'R470' or '470.xx' -> 470."""
    if not text:
        return None
    found = re.search(r"\d+", text)
    return int(found.group(0)) if found else None


def _driver_package_gpus(facts: Sequence[Dict[str, Any]], m: Matrix, r: TableResult) -> None:
    """NVIDIA's packaged supported-GPU list: every name and PCI id resolves, with the chip's
    capability, a minimum branch no later than the first packaged branch that lists it, and
    the legacy branch (if any) as the last branch."""
    for f in facts:
        name, cc = f["name"], f.get("compute_capability")
        if cc is not None and _cc(cc) < MIN_CC:
            r.skipped += 1
            continue
        gpu = m.find_gpu(name)
        r.checks.append(Check(f"{name}/present", gpu is not None,
                              f"resolves to {gpu.id}" if gpu else "not in gpus.toml"))
        if gpu is None:
            continue
        if cc is not None:
            r.checks.append(Check(f"{name}/cc", gpu.compute_capability == cc,
                                  f"table {cc} ({f.get('chip', '?')}), matrix "
                                  f"{gpu.compute_capability} ({gpu.id})"))
        for pci in f.get("pci_ids", []):
            by_id = m.find_gpu(pci)
            ok = by_id is not None and (cc is None or by_id.compute_capability == cc)
            r.checks.append(Check(f"{name}/pci/{pci}", ok,
                                  f"PCI {pci} resolves to {by_id.id if by_id else 'nothing'}"))
        first = _branch(f.get("first_branch"))
        ours = _branch(gpu.min_driver_branch)
        if first is not None and ours is not None:
            r.checks.append(Check(f"{name}/min_branch", ours <= first,
                                  f"first listed in {f.get('first_package', f['first_branch'])}, "
                                  f"matrix minimum {gpu.min_driver_branch} ({gpu.id})"))
        last = m.arch(gpu).last_driver_branch
        legacy = _branch(f.get("legacy_branch"))
        if legacy is not None:
            r.checks.append(Check(f"{name}/last_branch", _branch(last) == legacy,
                                  f"table legacy {f['legacy_branch']}, matrix last "
                                  f"{last or 'none'} ({gpu.arch})"))
        else:  # still supported by the list's branch: the matrix must not end it earlier
            listed = _branch(f.get("package"))
            if listed is not None and last is not None:
                r.checks.append(Check(f"{name}/last_branch", _branch(last) >= listed,
                                      f"listed by {f['package']}, matrix last {last}"))


COMPARERS: Dict[str, Callable[[Sequence[Dict[str, Any]], Matrix, TableResult], None]] = {
    "cuda-major-floor": _cuda_major_floor,
    "release-md": _release_md,
    "torchvision-pairs": _torchvision_pairs,
    "cuda-release-drivers": _cuda_release_drivers,
    "gpu-capability": _gpu_capability,
    "driver-gpu-list": _driver_gpu_list,
    "driver-package-gpus": _driver_package_gpus,
}


# -- tables and allowlist -------------------------------------------------------------------


class TableError(Exception):
    """A saved table or the allowlist is malformed."""


@dataclass(frozen=True)
class Allow:
    table: str
    fact: str  # exact key or fnmatch pattern
    reason: str


def read_tables(directory: Path) -> Iterator[Tuple[Path, Dict[str, Any]]]:
    for path in sorted(directory.glob("*.toml")):
        if path.name == ALLOWLIST:
            continue
        try:
            data = _toml.loads(path.read_text(encoding="utf-8"))
        except (_toml.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise TableError(f"{path.name}: not valid TOML: {exc}") from None
        table = data.get("table")
        if not isinstance(table, dict):
            raise TableError(f"{path.name}: missing [table]")
        for key in ("id", "title", "url", "compare"):
            if not isinstance(table.get(key), str):
                raise TableError(f"{path.name}: [table].{key} is required")
        if "commit" not in table and "date" not in table:
            raise TableError(f"{path.name}: [table] needs a commit or a date")
        if table["compare"] not in COMPARERS:
            raise TableError(f"{path.name}: unknown compare {table['compare']!r}")
        yield path, data


def read_allowlist(directory: Path) -> List[Allow]:
    path = directory / ALLOWLIST
    if not path.exists():
        return []
    data = _toml.loads(path.read_text(encoding="utf-8"))
    out = []
    for i, item in enumerate(data.get("allow", [])):
        if not all(isinstance(item.get(k), str) and item.get(k) for k in
                   ("table", "fact", "reason")):
            raise TableError(f"{ALLOWLIST}: allow[{i}] needs table, fact and reason")
        out.append(Allow(item["table"], item["fact"], item["reason"]))
    return out


def run(matrix: Matrix, directory: Path) -> Tuple[List[TableResult], List[Allow]]:
    results = []
    for _path, data in read_tables(directory):
        t = data["table"]
        res = TableResult(t["id"], t["title"], t["url"])
        # table-wide fields (the package a list came from) apply to each of its facts
        shared = {k: t[k] for k in ("package",) if k in t}
        facts = [{**shared, **f} for f in data.get("fact", [])]
        COMPARERS[t["compare"]](facts, matrix, res)
        results.append(res)
    return results, read_allowlist(directory)


def explained(allow: Iterable[Allow], table: str, fact: str) -> Optional[Allow]:
    for a in allow:
        if a.table == table and (a.fact == fact or fnmatch.fnmatchcase(fact, a.fact)):
            return a
    return None


def report(results: Sequence[TableResult], allow: Sequence[Allow],
           show_all: bool = False) -> Tuple[List[str], int]:
    """Lines to print and the number of problems (unexplained or stale entries)."""
    lines: List[str] = []
    problems = 0
    used = set()
    total = agree_total = 0
    for res in results:
        agree = sum(1 for c in res.checks if c.agree)
        bad = [c for c in res.checks if not c.agree]
        expl = [(c, explained(allow, res.id, c.fact)) for c in bad]
        unexpl = [c for c, a in expl if a is None]
        total += len(res.checks)
        agree_total += agree
        lines.append(f"{res.id}: {len(res.checks)} compared, {agree} agree, {len(bad)} disagree "
                     f"({len(bad) - len(unexpl)} explained)"
                     + (f", {res.skipped} outside the matrix's scope" if res.skipped else ""))
        for c, a in expl:
            if a is None:
                lines.append(f"  UNEXPLAINED {c.fact}: {c.detail}")
            else:
                used.add((a.table, a.fact))
                if show_all:
                    lines.append(f"  explained   {c.fact}: {c.detail} -- {a.reason}")
        problems += len(unexpl)
    for a in allow:
        if (a.table, a.fact) not in used:
            lines.append(f"stale allowlist entry {a.table} {a.fact}: it matches no disagreement")
            problems += 1
    lines.append(f"total: {total} facts compared, {agree_total} agree, {problems} problem(s)")
    return lines, problems


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--matrix", type=Path, default=None,
                    help="matrix directory (default: the one shipped with envlock)")
    ap.add_argument("--tables", type=Path, default=TABLES, help="saved tables directory")
    ap.add_argument("--all", action="store_true", help="also list explained disagreements")
    args = ap.parse_args(argv)
    try:
        matrix = load_matrix(args.matrix)
        results, allow = run(matrix, args.tables)
    except (MatrixError, TableError, OSError) as exc:
        print(f"crosscheck: {exc}", file=sys.stderr)
        return 2
    lines, problems = report(results, allow, args.all)
    print("\n".join(lines))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
