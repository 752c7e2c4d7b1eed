#!/usr/bin/env python3
"""Regenerate compat-matrix/torch-pypi.toml from the package index.

For every torch release from 1.13.0 on, this reads from the simple API (JSON when the
index offers it) the files of the release, and from one wheel per platform:

* the core metadata (PEP 658 ``.metadata`` file, else HTTP range reads of the wheel),
* ``torch/version.py`` (local version label and CUDA version), by range read,
* for CUDA builds, the ``sm_XY`` list compiled into ``torch/lib/libtorch_python.so`` (what
  ``torch.cuda.get_arch_list()`` reports), by range read of that one member,

plus the torch requirement of every torchvision / torchaudio release. Results per wheel
are cached by its sha256, so a re-run downloads almost nothing. The output is sorted and
carries no timestamps: run twice on an unchanged index, it produces no diff.

It honours pip's configured index (``PIP_INDEX_URL``, pip.conf) or ``--index-url``. It is
a maintainer tool: it needs the network and is not part of the test suite.

    python scripts/harvest_pypi.py                 # rewrite compat-matrix/torch-pypi.toml
    python scripts/harvest_pypi.py --check         # exit 1 if the file would change
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from packaging.requirements import Requirement  # noqa: E402
from packaging.specifiers import SpecifierSet  # noqa: E402
from packaging.version import Version  # noqa: E402

from envlock.index import IndexClient, load_index_config  # noqa: E402
from envlock.index.pages import Dist  # noqa: E402
from envlock.matrix.cache import cache_dir  # noqa: E402
from envlock.platforms import platform_of_wheel_tag, python_of_interpreter_tag  # noqa: E402

OUT = ROOT / "compat-matrix" / "torch-pypi.toml"
FIRST = Version("1.13.0")
PLATFORM_ORDER = ["linux_x86_64", "linux_aarch64", "win_amd64", "macos_arm64", "macos_x86_64"]
# The arch string is NUL-terminated, but the linker may place it right after the tail of
# another string with no NUL in between (torch 2.8.0-2.9.1: "...ipc_hsm_70 sm_75 ..."), so
# only the end is anchored; the match starts at the first "sm_"/"compute_" token.
_ARCH_RE = re.compile(rb"((?:sm|compute)_\d{2,3}[af]?(?: (?:sm|compute)_\d{2,3}[af]?)+)\x00")
_VERSION_RE = re.compile(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", re.M)
_CUDA_RE = re.compile(r"^cuda(?:\s*:\s*[^=]+)?\s*=\s*(?:['\"]([^'\"]+)['\"]|None)", re.M)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


class Harvester:
    def __init__(self, client: IndexClient, index: str) -> None:
        self.client = client
        self.index = index
        base = client.cache_dir or Path(".")
        self.store = base / "harvest"
        self.store.mkdir(parents=True, exist_ok=True)

    # Per-wheel facts, cached by sha256 -----------------------------------------------------
    def wheel_facts(self, dist: Dist, want_arch: bool) -> Dict[str, Any]:
        key = dist.sha256 or re.sub(r"[^A-Za-z0-9.]+", "_", dist.filename)
        path = self.store / f"{key}.json"
        facts: Dict[str, Any] = {}
        if path.exists():
            facts = json.loads(path.read_text())
            if not want_arch or "arch" in facts:
                return facts
        if "requires_dist" not in facts:
            md = self.client.metadata(dist)
            facts["requires_dist"] = list(md.requires_dist)
        if "version_py" not in facts and dist.filename.startswith("torch-"):
            z = self.client.remote_zip(dist)
            entry = z.find(r"^torch/version\.py$")
            facts["version_py"] = z.read(entry).decode() if entry else ""
            facts["has_libtorch_cuda"] = z.find(r"^torch/lib/libtorch_cuda\.so$") is not None
            if want_arch:
                facts["arch"] = self._arch(z)
        elif want_arch and "arch" not in facts:
            facts["arch"] = self._arch(self.client.remote_zip(dist))
        path.write_text(json.dumps(facts, sort_keys=True))
        return facts

    @staticmethod
    def _arch(z: Any) -> Optional[List[str]]:
        entry = z.find(r"^torch/lib/libtorch_python\.so$")
        if entry is None:
            return None
        data = z.read(entry)
        found = [m.group(1).decode() for m in _ARCH_RE.finditer(data)]
        if not found:
            return None
        return max(found, key=len).split()

    # Releases ----------------------------------------------------------------------------
    def releases(self, project: str) -> Dict[Version, List[Dist]]:
        page = self.client.page(self.index, project)
        if page is None:
            raise SystemExit(f"{project} is not on {self.index}")
        out: Dict[Version, List[Dist]] = {}
        for d in page.dists:
            if d.parsed is None or not d.is_wheel:
                continue
            v = d.version
            if v.is_prerelease or v.is_devrelease or v.local:
                continue
            out.setdefault(v, []).append(d)
        return out

    def upload_dates(self, project: str) -> Dict[str, str]:
        """filename -> upload date, from the PEP 700 field or the index's JSON API.

        Simple-API HTML carries no upload times, so fall back to ``/pypi/<name>/json``
        (PyPI's JSON API; mirrors that lack it simply give no dates).
        """
        page = self.client.page(self.index, project)
        dates = {d.filename: d.upload_time[:10] for d in page.dists if d.upload_time} \
            if page else {}
        if dates:
            return dates
        root = self.index.rstrip("/")
        if root.endswith("/simple"):
            root = root[: -len("/simple")]
        try:
            resp = self.client.transport.get(f"{root}/pypi/{project}/json")
            data = json.loads(resp.body)
        except Exception as exc:  # noqa: BLE001 - dates are optional
            log(f"no upload dates for {project}: {exc}")
            return {}
        for files in (data.get("releases") or {}).values():
            for f in files:
                t = f.get("upload_time_iso_8601") or f.get("upload_time")
                if t:
                    dates[f["filename"]] = t[:10]
        return dates

    def torch_requirement(self, dists: Sequence[Dist]) -> Optional[str]:
        linux = [d for d in dists if any(platform_of_wheel_tag(t.platform) == "linux_x86_64"
                                         for t in d.parsed[3])]  # type: ignore[index]
        pick = sorted(linux or list(dists), key=lambda d: d.filename)[0]
        reqs = self.wheel_facts(pick, want_arch=False)["requires_dist"]
        for r in reqs:
            req = Requirement(r)
            if req.name == "torch" and (req.marker is None or "extra" not in str(req.marker)):
                return str(req.specifier)
        return None


def _yanked(dists: Sequence[Dist]) -> bool:
    return bool(dists) and all(d.yanked is not None for d in dists)


def _representative(dists: Sequence[Dist]) -> Dist:
    """cp311 when available (else the newest CPython), highest build tag first."""
    def key(d: Dist) -> Tuple[int, int, Tuple[Any, ...], str]:
        tags = d.parsed[3]  # type: ignore[index]
        pys = sorted({_python_of(t) for t in tags} - {""})
        py = pys[0] if pys else None
        is311 = 1 if py == "3.11" else 0
        minor = int(py.rstrip("t").split(".")[1]) if py and not py.endswith("t") else -1
        return (is311, minor, d.parsed[2], d.filename)  # type: ignore[index]
    return max(dists, key=key)


def _python_of(tag: Any) -> str:
    """``cp313-cp313t`` -> ``3.13t``; the free-threaded marker lives in the ABI tag."""
    py = python_of_interpreter_tag(tag.interpreter) or ""
    if py and tag.abi.endswith("t") and not py.endswith("t"):
        py += "t"
    return py


def _cuda_from_version_py(text: str) -> Tuple[Optional[str], Optional[str]]:
    m = _VERSION_RE.search(text)
    local = m.group(1) if m else None
    c = _CUDA_RE.search(text)
    cuda = c.group(1) if c and c.group(1) else None
    return local, cuda


def harvest(h: Harvester) -> str:
    torch = {v: d for v, d in h.releases("torch").items() if v >= FIRST}
    dates = h.upload_dates("torch")
    tv = h.releases("torchvision")
    ta = h.releases("torchaudio")
    log(f"torch: {len(torch)} releases; torchvision {len(tv)}; torchaudio {len(ta)}")

    def req_of(item: Tuple[Version, List[Dist]]) -> Tuple[Version, Optional[str]]:
        return item[0], h.torch_requirement(item[1])

    with ThreadPoolExecutor(8) as pool:
        tv_req = dict(pool.map(req_of, [(v, d) for v, d in tv.items()
                                        if v >= Version("0.14") and not _yanked(d)]))
        ta_req = dict(pool.map(req_of, [(v, d) for v, d in ta.items()
                                        if v >= Version("0.13") and not _yanked(d)]))

    jobs = []
    for version, dists in sorted(torch.items()):
        by_plat: Dict[str, List[Dist]] = {}
        for d in dists:
            plats = {platform_of_wheel_tag(t.platform) for t in d.parsed[3]}  # type: ignore[index]
            for p in plats:
                if p:
                    by_plat.setdefault(p, []).append(d)
        jobs.append((version, dists, by_plat))

    def facts_for(job: Tuple[Version, List[Dist], Dict[str, List[Dist]]]) -> Dict[str, Any]:
        version, dists, by_plat = job
        builds: Dict[str, Any] = {}
        for plat, pdists in by_plat.items():
            rep = _representative(pdists)
            f = h.wheel_facts(rep, want_arch=False)
            local, cuda = _cuda_from_version_py(f.get("version_py", ""))
            if cuda and plat.startswith("linux"):
                f = h.wheel_facts(rep, want_arch=True)
            pythons = sorted({_python_of(t) for d in pdists
                              for t in d.parsed[3]} - {""},  # type: ignore[index]
                             key=lambda p: (int(p.rstrip("t").split(".")[1]), p))
            wheel_tags = sorted({t.platform for d in pdists for t in d.parsed[3]  # type: ignore[index]
                                 if platform_of_wheel_tag(t.platform) == plat})
            tag = "cu" + cuda.replace(".", "") if cuda else "cpu"
            builds[plat] = {
                "pythons": pythons,
                "wheel_tags": wheel_tags,
                "tag": tag,
                "cuda": cuda,
                "sass": [a for a in (f.get("arch") or []) if a.startswith("sm_")] or None,
                "requires": f["requires_dist"],
                "wheel": rep.filename,
            }
        times = sorted(dates[d.filename] for d in dists if d.filename in dates)
        rps = sorted({d.requires_python for d in dists if d.requires_python})
        return {"version": str(version), "date": times[0][:10] if times else None,
                "requires_python": rps[0] if rps else None,
                "yanked": all(d.yanked is not None for d in dists), "builds": builds}

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(facts_for, jobs))
    for r in results:
        tv_list = [str(v) for v, spec in sorted(tv_req.items())
                   if spec and Version(r["version"]) in SpecifierSet(spec)]
        ta_list = [str(v) for v, spec in sorted(ta_req.items())
                   if spec and Version(r["version"]) in SpecifierSet(spec)]
        r["torchvision"] = tv_list
        r["torchaudio"] = ta_list
        log(f"  {r['version']}: " + ", ".join(f"{p} {b['tag']}" for p, b in
                                               sorted(r["builds"].items())))
    return render(results, h.index)


def _s(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def _list(values: Sequence[str]) -> str:
    return "[" + ", ".join(_s(v) for v in values) + "]"


def render(results: List[Dict[str, Any]], index: str) -> str:
    from envlock.index.config import redact

    lines = [
        "# GENERATED by scripts/harvest_pypi.py from the package index; do not edit by hand.",
        "# Regenerate with: python scripts/harvest_pypi.py",
        "# One [[release]] per torch release on the index (1.13.0 and later) with, per",
        "# platform, the Pythons that have wheels, the build (torch/version.py), the SASS",
        "# targets compiled into libtorch_python.so, and the wheel's full Requires-Dist.",
        "",
        "[harvest]",
        f"index = {_s(redact(index))}",
        "source = \"pypi-torch\"",
        "",
    ]
    for r in sorted(results, key=lambda r: Version(r["version"])):
        lines.append("[[release]]")
        lines.append(f"version = {_s(r['version'])}")
        if r["date"]:
            lines.append(f"date = {_s(r['date'])}")
        if r["requires_python"]:
            lines.append(f"requires_python = {_s(r['requires_python'])}")
        if r["yanked"]:
            lines.append("yanked = true")
        lines.append(f"torchvision = {_list(r['torchvision'])}")
        lines.append(f"torchaudio = {_list(r['torchaudio'])}")
        lines.append("")
        for plat in PLATFORM_ORDER:
            b = r["builds"].get(plat)
            if b is None:
                continue
            lines.append(f"[release.build.{plat}]")
            lines.append(f"wheel = {_s(b['wheel'])}")
            lines.append(f"pythons = {_list(b['pythons'])}")
            lines.append(f"wheel_tags = {_list(b['wheel_tags'])}")
            lines.append(f"tag = {_s(b['tag'])}")
            if b["cuda"]:
                lines.append(f"cuda = {_s(b['cuda'])}")
            if b["sass"]:
                lines.append(f"sass = {_list(b['sass'])}")
            lines.append("requires = [")
            for req in b["requires"]:
                lines.append(f"    {_s(req)},")
            lines.append("]")
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index-url", help="simple index to read (default: pip's configuration)")
    ap.add_argument("-o", "--output", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true",
                    help="do not write; exit 1 if the output would differ")
    args = ap.parse_args(argv)
    config = load_index_config(index_url=args.index_url)
    with IndexClient(config, cache_dir=cache_dir()) as client:
        text = harvest(Harvester(client, config.index_url))
    old = args.output.read_text() if args.output.exists() else ""
    if args.check:
        if old != text:
            log(f"{args.output} is out of date")
            return 1
        log(f"{args.output} is up to date")
        return 0
    if old == text:
        log(f"{args.output}: unchanged")
        return 0
    tmp = args.output.with_suffix(".tmp")
    tmp.write_text(text)
    tmp.replace(args.output)
    log(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
